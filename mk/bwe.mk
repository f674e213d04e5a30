# Bandwidth estimation (document 001): dataset export, training, evaluation, peer bench.
# Not part of `make test` (CI runs `cargo test --workspace --release`, which covers the
# bwe_* / trees_* / alloc_* tests with their committed fixtures).

CARGO ?= cargo
BWE_DIR ?= target/bwe
BWE_STREAMS ?= 5000
BWE_VENV ?= .venv
BWE_PY := $(BWE_VENV)/bin/python

.PHONY: bwe-venv bwe-dataset bwe-train bwe-fixtures bwe-eval bwe-bench

bwe-venv:
	@test -x $(BWE_PY) || python3 -m venv $(BWE_VENV)
	@$(BWE_PY) -c "import numpy, sklearn" 2>/dev/null || $(BWE_PY) -m pip install -q numpy scikit-learn

bwe-dataset:
	$(CARGO) run --release -p opsel --example bwe_dataset -- $(BWE_DIR) $(BWE_STREAMS)

bwe-train: bwe-venv bwe-dataset
	$(BWE_PY) bindings/python/python/opsel/train/bwe.py train $(BWE_DIR)

# Regenerate the committed test fixtures (model + features + scikit-learn predictions).
bwe-fixtures: bwe-venv bwe-dataset
	$(BWE_PY) bindings/python/python/opsel/train/bwe.py train $(BWE_DIR) --fixtures core/tests/fixtures

# Evidence for docs/results/bwe.md (raw output in docs/results/bwe_eval.txt).
bwe-eval: bwe-train
	BWE_EVAL_STREAMS=3000 $(CARGO) run --release -p opsel --example bwe_eval -- $(BWE_DIR) | tee docs/results/bwe_eval.txt

# Criterion benches + scikit-learn peer ratio.
bwe-bench: bwe-train
	$(CARGO) bench -p opsel --bench bwe
	$(CARGO) bench -p opsel --bench trees
	$(BWE_PY) bindings/python/python/opsel/train/bwe.py bench $(BWE_DIR) --criterion target/criterion
