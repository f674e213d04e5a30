# Several cycles per decision in OPS (ops::Config::cycles, min-sum; issues #6/#7).
# The Rust tests (core/tests/ops_cycles*.rs, alloc_ops_cycles.rs, ffi/tests/ops_cycles.rs),
# the Python test (bindings/python/tests/test_ops_cycles.py) and the Node test
# (bindings/node/test/ops.test.js) run in `make test`; nothing extra is needed.
#
# ops-cycles         run the OPS controller (cycles = n, fed one RTT sample per second)
#                    over the recorded traces on the folds of `opsel.train cycles`,
#                    next to that command's min-sum, for n = 1..5 (docs/results/ops-cycles.md;
#                    ~10 min per configuration at load 15)
# ops-cycles-golden  regenerate the cross-check fixtures core/tests/fixtures/ops_cycles_*.json
CARGO ?= cargo
CYCLES_PY ?= $(abspath .venv)/bin/python
CYCLES_TRACES ?= models/active-s5c5s5b5/traces
CYCLES_ARGS ?= --ns 1,2,3,4,5

.PHONY: ops-cycles ops-cycles-golden

ops-cycles: python
	$(CYCLES_PY) -m opsel.train ops-cycles $(CYCLES_TRACES) -c default -m . \
		$(CYCLES_ARGS) --norm none --radius 10
	$(CYCLES_PY) -m opsel.train ops-cycles $(CYCLES_TRACES) -c default -m . \
		$(CYCLES_ARGS) --norm none --radius 0

ops-cycles-golden: python
	$(CYCLES_PY) -m opsel.train ops-cycles $(CYCLES_TRACES) -c default -m . \
		--norm none --radius 10 --golden core/tests/fixtures/ops_cycles_none_r10.json
	$(CYCLES_PY) -m opsel.train ops-cycles $(CYCLES_TRACES) -c default -m . \
		--norm z-score --radius 0 --golden core/tests/fixtures/ops_cycles_zscore_r0.json
