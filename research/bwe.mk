# Bandwidth-estimation research (document 001): simulator datasets, training and
# cross-validation sweeps, the evaluations and studies behind docs/results/bwe.md.
# None of it is part of `make test` (minutes to hours of CPU; the sim tests cover the code).
# Variables (BWE_DIR, BWE_TRAIN, ...) come from mk/bwe.mk.
#
#   make bwe-dataset / bwe-train   simulator traces -> the thesis-regime models in $(BWE_DIR)
#   make bwe-cv                    5-fold CV of the multi-rate model on the training rows
#   make bwe-eval                  every estimator on 001's simulated conditions -> docs/results/bwe_eval.txt
#   make bwe-bench                 criterion benches + scikit-learn peer ratio
#   make bwe-fixtures              regenerate core/tests/fixtures/trees_*.json
#   make bwe-ml-mag80k             FFT-magnitude model, 80 000 rows, held-out cut (docs/results/bwe.md §2)
#   make bwe-ml-reim-cv / bwe-ml-reim  FFT re/im features: CV grid, then the shipped models/bwe-mr model
#   make bwe-bass-traffic-study    multi-pass BASS fidelity (001 Fig 5.8, Table 3.1)

CARGO ?= cargo
BWE_BASS_STREAMS ?= 3000

.PHONY: bwe-bass-traffic-study
bwe-bass-traffic-study:
	$(CARGO) run --release -p opsel --example bwe_bass_traffic_study -- $(BWE_BASS_STREAMS) \
	  | tee research/results/bwe/bass-traffic-study.txt

.PHONY: bwe-dataset bwe-train bwe-fixtures bwe-eval bwe-bench bwe-cv

$(BWE_DIR)/mr_train.csv:
	$(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_DIR) $(BWE_STREAMS)

$(BWE_DIR)/mr_gbt.json: $(BWE_DIR)/mr_train.csv | bwe-venv
	$(BWE_TRAIN) train $(BWE_DIR)

bwe-dataset:
	$(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_DIR) $(BWE_STREAMS)

bwe-train: bwe-venv bwe-dataset
	$(BWE_TRAIN) train $(BWE_DIR)

# 5-fold CV of the multi-rate histogram GBT on the training rows only.
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

# The Fig 6.5 condition (BCT, NIC1 rx-usecs 120 µs only) with 100 000 training
# streams per feature kind, one held-out validation split of the training rows (the last
# 20 000), and the model fitted on the other 80 000 cut at its best held-out stage; then
# the Rust evaluation on the 3000 test streams. Slow on a loaded machine (docs/results/bwe.md §2).
BWE_MAG ?= target/bwe-mag80k
BWE_MAG_STREAMS ?= 100000
.PHONY: bwe-ml-mag80k
bwe-ml-mag80k: bwe-venv
	BWE_SETS=120 BWE_MR_ONLY=1 $(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_MAG)/mag $(BWE_MAG_STREAMS)
	OMP_NUM_THREADS=1 $(BWE_TRAIN) holdout $(BWE_MAG)/mag --sets 120 --val 20000 --max-iter 800 --every 100 \
	  --out $(BWE_MAG)/mag/h_mag80k.json | tee $(BWE_MAG)/h_mag80k.txt
	$(CARGO) run --release -p opsel --example bwe_eval_csv -- $(BWE_MAG)/mag/h_mag80k.json \
	  $(BWE_MAG)/mag/mr_test.csv | tee research/results/bwe/eval-magnitude-rx120-80k.txt

# The Fig 6.5 condition with `fft-reim` features (FFT real and imaginary parts
# of (g_s || g_r), 129 features) on 100 000 training streams. `bwe-ml-reim-cv` is the
# 5-fold CV grid on the training rows (the only place hyper-parameters are chosen;
# ≈ 6 min per configuration on an idle core); `bwe-ml-reim` fits the chosen configuration
# on all 100 000 rows, ships it to models/bwe-mr, writes its equality fixture and scores
# it once on the 3000 test streams with the Rust inference (docs/results/bwe.md §2).
BWE_REIM ?= target/bwe-reim
BWE_REIM_STREAMS ?= 100000
BWE_REIM_GRID ?= A:--lr=0.1:--leaves=15:--depth=4:--max-iter=2000:--every=100 \
  B:--lr=0.1:--leaves=31:--depth=6:--max-iter=1500:--every=100 \
  C:--lr=0.05:--leaves=15:--depth=4:--max-iter=3000:--every=200 \
  D:--lr=0.1:--leaves=31:--depth=0:--min-leaf=50:--max-iter=1500:--every=100 \
  E:--lr=0.1:--leaves=15:--depth=4:--l2=1.0:--max-iter=2000:--every=100 \
  F:--lr=0.1:--leaves=63:--depth=0:--max-iter=1000:--every=100
BWE_REIM_PARAMS ?= --lr 0.1 --leaves 15 --depth 4 --max-iter 2000
.PHONY: bwe-ml-reim-data bwe-ml-reim-cv bwe-ml-reim
bwe-ml-reim-data:
	test -f $(BWE_REIM)/reim/mr_train.csv || BWE_FEATURES=fft-reim BWE_SETS=120 BWE_MR_ONLY=1 \
	  $(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_REIM)/reim $(BWE_REIM_STREAMS)
bwe-ml-reim-cv: bwe-venv bwe-ml-reim-data
	for g in $(BWE_REIM_GRID); do OMP_NUM_THREADS=1 $(BWE_TRAIN) cv $(BWE_REIM)/reim --sets 120 \
	  $$(echo $${g#*:} | tr ':=' '  ') | tee research/results/bwe/cv-reim-$${g%%:*}.txt; done
bwe-ml-reim: bwe-venv bwe-ml-reim-data
	OMP_NUM_THREADS=1 $(BWE_TRAIN) train-mr $(BWE_REIM)/reim --sets 120 $(BWE_REIM_PARAMS) \
	  --out $(BWE_REIM)/reim/mr_gbt.json
	mkdir -p models/bwe-mr && cp $(BWE_REIM)/reim/mr_gbt.json models/bwe-mr/mr_gbt_rx120.json
	$(BWE_TRAIN) fixture-mr $(BWE_REIM)/reim/mr_gbt.json $(BWE_REIM)/reim core/tests/fixtures/bwe_mr_rx120.json \
	  --pred-out $(BWE_REIM)/reim/mr_test_sklearn.txt
	$(CARGO) run --release -p opsel --example bwe_eval_csv -- models/bwe-mr/mr_gbt_rx120.json \
	  $(BWE_REIM)/reim/mr_test.csv $(BWE_REIM)/reim/mr_test_sklearn.txt | tee docs/results/bwe-eval-shipped-model-rx120.txt
