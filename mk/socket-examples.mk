# Runnable socket-adapter + OPS-controller examples in Python and Node
# (examples/python/sys_ops.py, examples/node/sys_ops.js). Their pytest,
# node:test and C suites run in test-python / test-node / test-c
# (bindings/python/tests, bindings/node/test, examples/c/test_sys_ops.c).
#
#   test-socket-examples   run both examples (~10 s; part of `make test`)
SOCKEX_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)

.PHONY: test-socket-examples

test-socket-examples: python node-build
	cd $(SOCKEX_ROOT) && $(abspath $(VENV))/bin/python examples/python/sys_ops.py tests/fixtures/knn_golden.model.json
	cd $(SOCKEX_ROOT) && node examples/node/sys_ops.js tests/fixtures/knn_golden.model.json
