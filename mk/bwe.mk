# Bandwidth estimation (document 001): the live netlab checks and the shipped live model.
# The simulator evaluations, training sweeps and studies behind docs/results/bwe.md are
# in research/bwe.mk.
#
#   make test-bwe        root, < 60 s: live estimation on netlab (part of `make test`)
#   make bwe-live        the live results of docs/results/bwe.md ("Live")
#   make bwe-live-model  retrain models/bwe-live/live_gbt.json

CARGO ?= cargo
BWE_DIR ?= target/bwe
BWE_STREAMS ?= 20000
BWE_EVAL_STREAMS ?= 3000
BWE_VENV ?= .venv
BWE_PY := $(BWE_VENV)/bin/python
BWE_TRAIN := $(BWE_PY) bindings/python/python/opsel/train/bwe.py

.PHONY: bwe-venv

bwe-venv:
	@test -x $(BWE_PY) || python3 -m venv $(BWE_VENV)
	@$(BWE_PY) -c "import numpy, sklearn" 2>/dev/null || $(BWE_PY) -m pip install -q numpy scikit-learn

# Live estimation on netlab (root, < 60 s): opsel bwe lab on bwe-cbr60 for 10 s; BASS,
# ML and the rate adapter checked against the measured available bandwidth.
.PHONY: test-bwe bwe-live bwe-live-model
test-bwe:
	$(CARGO) test --release -p opsel-cli --test bwe_live -- --ignored --nocapture

# The live results of docs/results/bwe.md ("Live"): two CBR cross-traffic levels and
# ON/OFF (bursty) cross traffic of the same mean as cbr60, 20 s each, one lab at a time;
# summaries in docs/results/bwe_live_<scenario>.txt, every p-stream in .json.
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

