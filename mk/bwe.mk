# Bandwidth estimation (document 001): dataset export, training, evaluation, peer bench.
# Not part of `make test` (CI runs `cargo test --workspace --release`, which covers the
# bwe_* / trees_* / alloc_* tests with their committed fixtures).
#
#   make bwe-eval    dataset (if missing) -> train (if missing) -> docs/results/bwe_eval.txt
#   make bwe-bench   criterion benches + scikit-learn peer ratio
#   make bwe-fixtures  regenerate core/tests/fixtures/trees_*.json

CARGO ?= cargo
BWE_DIR ?= target/bwe
BWE_STREAMS ?= 5000
BWE_EVAL_STREAMS ?= 3000
BWE_VENV ?= .venv
BWE_PY := $(BWE_VENV)/bin/python
BWE_TRAIN := $(BWE_PY) bindings/python/python/opsel/train/bwe.py

.PHONY: bwe-venv bwe-dataset bwe-train bwe-fixtures bwe-eval bwe-bench

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

bwe-fixtures: bwe-venv $(BWE_DIR)/mr_train.csv
	$(BWE_TRAIN) train $(BWE_DIR) --fixtures core/tests/fixtures

bwe-eval: $(BWE_DIR)/mr_gbt.json
	BWE_EVAL_STREAMS=$(BWE_EVAL_STREAMS) $(CARGO) run --release -p opsel --example bwe_eval -- $(BWE_DIR) | tee docs/results/bwe_eval.txt

bwe-bench: $(BWE_DIR)/mr_gbt.json
	$(CARGO) bench -p opsel --bench bwe
	$(CARGO) bench -p opsel --bench trees
	$(CARGO) run --release -p opsel --example bwe_cputime -- $(BWE_DIR)/mr_gbt.json | tee $(BWE_DIR)/cputime.txt
	$(BWE_TRAIN) bench $(BWE_DIR) --criterion target/criterion \
	  --rust-cpu-ns $$(awk '/GBT predict/ {for (i = 1; i < NF; i++) if ($$(i+1) == "ns") {print $$i; exit}}' $(BWE_DIR)/cputime.txt)
