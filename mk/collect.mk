# Training data and shipped background-mix models.
#
#   collect         record traces in netlab (root, hours; resumable: rerun to continue)
#   collect-status  windows per trace of $(COLLECT_DIR)
#   models          retrain models/passive (pooled over every condition of $(GRID_DIR), scored
#                   leave-one-condition-out), then models/passive-netlab, models/active-s5c5s5b5
#                   and -w60 (cards, figures, docs/results/classifier.json) from $(COLLECT_DIR) if
#                   given, else from the traces already copied into models/*/traces/
#   classifier-eval the sweeps behind docs/results/classifier.md
#   classifier-report every table + figure of docs/results/classifier-tables.md (w/k/norm/radius
#                   sweeps, MLP/SVM/GNB over w, multi-cycle decisions, active diagnosis; ~10 min)
#   classifier-learning learning curves (accuracy vs windows/class) of the shipped models' traces
#   test-collect    root-only smoke tests of `collect` and of `calibrate`'s rate and buffer
#                   burst (~40 s, clean up their namespaces)
CARGO ?= cargo
COLLECT_DIR ?=
COLLECT_OUT ?= data/collect
COLLECT_PLAN ?= default/passive@1,default/S5-C5-S5-B5@1,c50/passive@0.5,default/C5-B5-C5-S5@0.25
COLLECT_JOBS ?= 3
COLLECT_WINDOWS ?= 300
COLLECT_PY ?= $(abspath .venv)/bin/python
# e.g. MODELS_ARGS="--norm none --no-select": the thesis's 1-NN, radius 10, no normalisation (one network only)
MODELS_ARGS ?=

.PHONY: collect collect-status models classifier-eval classifier-report test-collect

collect:
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel lab collect --plan "$(COLLECT_PLAN)" --windows $(COLLECT_WINDOWS) \
	  --jobs $(COLLECT_JOBS) --out $(or $(COLLECT_DIR),$(COLLECT_OUT))

collect-status:
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel lab collect --status --plan "$(COLLECT_PLAN)" --out $(or $(COLLECT_DIR),$(COLLECT_OUT))

# The default passive model: every grid condition pooled, w = 40, divide-min (chosen by nested
# leave-one-condition-out, docs/results/generalisation.md).
GRID_DIR ?= data/collect
GRID_ARGS ?= --w 40 --radius 20 --norm divide-min

models: python
	$(COLLECT_PY) -m opsel.train grid $(GRID_DIR) --mode passive $(GRID_ARGS) --out models/passive \
	  --json docs/results/generalisation-model-passive.json
	$(COLLECT_PY) -m opsel.train models $(COLLECT_DIR) --models models --report docs/results/classifier.json $(MODELS_ARGS)

classifier-eval: python
	$(COLLECT_PY) -m opsel.train sweep models/passive-netlab/traces --condition default --mode . \
	  --ks 1,3,5,10 --norms none,subtract-min,divide-min,z-score --baselines --json docs/results/classifier-passive.json
	$(COLLECT_PY) -m opsel.train sweep models/active-s5c5s5b5/traces --condition default --mode . \
	  --ks 1,3,5,10 --norms none,subtract-min,divide-min,z-score --baselines --json docs/results/classifier-active.json

classifier-report: python
	PYTHONPATH=research/ops $(COLLECT_PY) -m opsel_eval report models --out docs/results/classifier-tables.md \
	  --figures docs/results/figures --json docs/results/classifier-tables.json

test-collect:
	$(CARGO) test --release -p opsel-netlab --test collect_smoke -- --ignored --nocapture
	$(CARGO) test --release -p opsel-cli --bin opsel calibrate -- --include-ignored --nocapture

# Learning curves (CV accuracy vs windows per class, the first n recorded; docs/results/classifier.md
# "Learning curve"): active and passive at w = 20 and 60, 1-/5-NN, radius 0 and 10, 3 fold seeds, on the
# traces the shipped models were trained on (models/*/traces; ~5 min).
.PHONY: classifier-learning
classifier-learning: python
	PYTHONPATH=research/ops $(COLLECT_PY) -m opsel_eval learning models/active-s5c5s5b5/traces -c default -m . --ws 20,60 --ks 1,5 \
	  --radii 0,10 --json docs/results/classifier-learning-active.json \
	  --plot docs/results/figures/classifier-learning-active.png > docs/results/classifier-learning-active.md
	PYTHONPATH=research/ops $(COLLECT_PY) -m opsel_eval learning models/passive-netlab/traces -c default -m . --ws 20,60 --ks 1,5 \
	  --radii 0,10 --json docs/results/classifier-learning-passive.json \
	  --plot docs/results/figures/classifier-learning-passive.png > docs/results/classifier-learning-passive.md
