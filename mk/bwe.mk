# Bandwidth estimation (document 001): dataset export, training, evaluation, peer bench.
# Not part of `make test` (CI runs `cargo test --workspace --release`, which covers the
# bwe_* / trees_* / alloc_* tests with their committed fixtures).
#
#   make bwe-eval    dataset (if missing) -> train (if missing) -> docs/results/bwe_eval.txt
#   make bwe-bench   criterion benches + scikit-learn peer ratio
#   make bwe-fixtures  regenerate core/tests/fixtures/trees_*.json

CARGO ?= cargo
BWE_DIR ?= target/bwe
BWE_STREAMS ?= 20000
BWE_EVAL_STREAMS ?= 3000
BWE_VENV ?= .venv
BWE_PY := $(BWE_VENV)/bin/python
BWE_TRAIN := $(BWE_PY) bindings/python/python/opsel/train/bwe.py

.PHONY: bwe-venv bwe-dataset bwe-train bwe-fixtures bwe-eval bwe-bench bwe-cv

bwe-venv:
	@test -x $(BWE_PY) || python3 -m venv $(BWE_VENV)
	@$(BWE_PY) -c "import numpy, sklearn" 2>/dev/null || $(BWE_PY) -m pip install -q numpy scikit-learn

$(BWE_DIR)/mr_train.csv:
	$(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_DIR) $(BWE_STREAMS)

$(BWE_DIR)/mr_gbt.json: $(BWE_DIR)/mr_train.csv | bwe-venv
	$(BWE_TRAIN) train $(BWE_DIR)

bwe-dataset:
	$(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_DIR) $(BWE_STREAMS)

bwe-train: bwe-venv bwe-dataset
	$(BWE_TRAIN) train $(BWE_DIR)

# 5-fold CV of the multi-rate histogram GBT on the training rows only (session 4).
bwe-cv: bwe-venv $(BWE_DIR)/mr_train.csv
	$(BWE_TRAIN) cv $(BWE_DIR) --max-iter 600
	$(BWE_TRAIN) cv $(BWE_DIR) --sets 120 --max-iter 600

bwe-fixtures: bwe-venv $(BWE_DIR)/mr_train.csv
	$(BWE_TRAIN) train $(BWE_DIR) --fixtures core/tests/fixtures
	$(BWE_TRAIN) fixture-hgbt $(BWE_DIR) core/tests/fixtures

bwe-eval: $(BWE_DIR)/mr_gbt.json
	BWE_EVAL_STREAMS=$(BWE_EVAL_STREAMS) $(CARGO) run --release -p opsel --example bwe_eval -- $(BWE_DIR) | tee docs/results/bwe_eval.txt

bwe-bench: $(BWE_DIR)/mr_gbt.json
	$(CARGO) bench -p opsel --bench bwe
	$(CARGO) bench -p opsel --bench trees
	$(CARGO) run --release -p opsel --example bwe_cputime -- $(BWE_DIR)/mr_gbt.json | tee $(BWE_DIR)/cputime.txt
	$(BWE_TRAIN) bench $(BWE_DIR) --criterion target/criterion \
	  --rust-cpu-ns $$(awk '/GBT predict/ {for (i = 1; i < NF; i++) if ($$(i+1) == "ns") {print $$i; exit}}' $(BWE_DIR)/cputime.txt)

# Live estimation on netlab (root, < 60 s): opsel bwe lab on bwe-cbr60 for 10 s; BASS,
# ML and the rate adapter checked against the measured available bandwidth.
.PHONY: test-bwe bwe-live bwe-live-model
test-bwe:
	$(CARGO) test --release -p opsel-cli --test bwe_live -- --ignored --nocapture

# The live results of docs/results/bwe.md ("Live"): two CBR cross-traffic levels and
# ON/OFF (bursty) cross traffic of the same mean as cbr60, 20 s each, one lab at a time;
# summaries in docs/results/bwe_live_<scenario>.txt, every p-stream in .json
# (docs/results/bwe_live.txt is the session-2 run of cbr60 + cbr120).
BWE_LIVE_SCENARIOS ?= cbr60 cbr120 onoff60
bwe-live:
	$(CARGO) build --release -p opsel-cli
	for l in $(BWE_LIVE_SCENARIOS); do ./target/release/opsel bwe lab netlab/scenarios/bwe-$$l.toml --fifo \
	  --packet-bytes 9000 --start-mbps 50 --model models/bwe-live/live_gbt.json \
	  --json docs/results/bwe_live_$$l.json | grep -v '^ *[0-9.]* s  #' | tee docs/results/bwe_live_$$l.txt; done

# Retrain the shipped live model (simulator traces matched to the netlab regime).
bwe-live-model: bwe-venv
	$(CARGO) run --release -p opsel --example bwe_live_dataset -- $(BWE_DIR) 3000
	$(BWE_TRAIN) train-live $(BWE_DIR) --out models/bwe-live/live_gbt.json

# Regenerate tests/fixtures/bwe_golden*.json (Rust, C, Python, Node bwe tests).
.PHONY: golden-bwe
golden-bwe:
	$(CARGO) run -p opsel-ffi --example make_bwe_golden

# Session 5: the Fig 6.5 condition (BCT, NIC1 rx-usecs 120 µs only) with 100 000 training
# streams per feature kind, one held-out validation split of the training rows (the last
# 20 000), and the model fitted on the other 80 000 cut at its best held-out stage; then
# the Rust evaluation on the 3000 test streams. Slow on a loaded machine (docs/results/bwe.md §2).
BWE_S5 ?= target/bwe-s5
BWE_S5_STREAMS ?= 100000
.PHONY: bwe-ml-s5
bwe-ml-s5: bwe-venv
	BWE_SETS=120 BWE_MR_ONLY=1 $(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_S5)/mag $(BWE_S5_STREAMS)
	OMP_NUM_THREADS=1 $(BWE_TRAIN) holdout $(BWE_S5)/mag --sets 120 --val 20000 --max-iter 800 --every 100 \
	  --out $(BWE_S5)/mag/h_mag80k.json | tee $(BWE_S5)/h_mag80k.txt
	$(CARGO) run --release -p opsel --example bwe_eval_csv -- $(BWE_S5)/mag/h_mag80k.json \
	  $(BWE_S5)/mag/mr_test.csv | tee docs/results/bwe_eval_s5_rx120_80k.txt

# Session 6: the Fig 6.5 condition with `fft-reim` features (FFT real and imaginary parts
# of (g_s || g_r), 129 features) on 100 000 training streams. `bwe-ml-s6-cv` is the
# 5-fold CV grid on the training rows (the only place hyper-parameters are chosen;
# ≈ 6 min per configuration on an idle core); `bwe-ml-s6` fits the chosen configuration
# on all 100 000 rows, ships it to models/bwe-mr, writes its equality fixture and scores
# it once on the 3000 test streams with the Rust inference (docs/results/bwe.md §2).
BWE_S6 ?= target/bwe-s6
BWE_S6_STREAMS ?= 100000
BWE_S6_GRID ?= A:--lr=0.1:--leaves=15:--depth=4:--max-iter=2000:--every=100 \
  B:--lr=0.1:--leaves=31:--depth=6:--max-iter=1500:--every=100 \
  C:--lr=0.05:--leaves=15:--depth=4:--max-iter=3000:--every=200 \
  D:--lr=0.1:--leaves=31:--depth=0:--min-leaf=50:--max-iter=1500:--every=100 \
  E:--lr=0.1:--leaves=15:--depth=4:--l2=1.0:--max-iter=2000:--every=100 \
  F:--lr=0.1:--leaves=63:--depth=0:--max-iter=1000:--every=100
BWE_S6_PARAMS ?= --lr 0.1 --leaves 15 --depth 4 --max-iter 2000
.PHONY: bwe-ml-s6-data bwe-ml-s6-cv bwe-ml-s6
bwe-ml-s6-data:
	test -f $(BWE_S6)/reim/mr_train.csv || BWE_FEATURES=fft-reim BWE_SETS=120 BWE_MR_ONLY=1 \
	  $(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_S6)/reim $(BWE_S6_STREAMS)
bwe-ml-s6-cv: bwe-venv bwe-ml-s6-data
	for g in $(BWE_S6_GRID); do OMP_NUM_THREADS=1 $(BWE_TRAIN) cv $(BWE_S6)/reim --sets 120 \
	  $$(echo $${g#*:} | tr ':=' '  ') | tee docs/results/bwe_cv_s6_$${g%%:*}.txt; done
bwe-ml-s6: bwe-venv bwe-ml-s6-data
	OMP_NUM_THREADS=1 $(BWE_TRAIN) train-mr $(BWE_S6)/reim --sets 120 $(BWE_S6_PARAMS) \
	  --out $(BWE_S6)/reim/mr_gbt.json
	mkdir -p models/bwe-mr && cp $(BWE_S6)/reim/mr_gbt.json models/bwe-mr/mr_gbt_rx120.json
	$(BWE_TRAIN) fixture-mr $(BWE_S6)/reim/mr_gbt.json $(BWE_S6)/reim core/tests/fixtures/bwe_mr_rx120.json \
	  --pred-out $(BWE_S6)/reim/mr_test_sklearn.txt
	$(CARGO) run --release -p opsel --example bwe_eval_csv -- models/bwe-mr/mr_gbt_rx120.json \
	  $(BWE_S6)/reim/mr_test.csv $(BWE_S6)/reim/mr_test_sklearn.txt | tee docs/results/bwe_eval_s6_rx120_reim.txt
