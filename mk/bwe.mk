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
