# Socket adapter + OPS controller bindings (issue 4 "expose everything in
# Python, C and Node"; issue 7 controller/policies). The pytest, node:test and
# C suites run in test-python / test-node / test-c already (new files in
# bindings/python/tests, bindings/node/test, examples/c/test_sys_ops.c);
# this adds the two runnable examples and the fixture generator.
#
#   test-sysbind   run examples/python/sys_ops.py and examples/node/sys_ops.js (~10 s)
#   golden-ops     regenerate tests/fixtures/ops_golden.json from the core controller
CARGO ?= cargo
SYSBIND_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)

.PHONY: test-sysbind golden-ops

test-sysbind: python node-build
	cd $(SYSBIND_ROOT) && $(abspath $(VENV))/bin/python examples/python/sys_ops.py tests/fixtures/knn_golden.model.json
	cd $(SYSBIND_ROOT) && node examples/node/sys_ops.js tests/fixtures/knn_golden.model.json

golden-ops:
	cd $(SYSBIND_ROOT) && $(CARGO) run --release -p opsel-ffi --example make_ops_golden
