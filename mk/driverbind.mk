# OpsDriver bindings (issue 7: "Python, Node and C expose the controller and
# the driver"). The C test and example run in test-c (examples/c/Makefile and
# CMakeLists.txt: test_ops_driver, ops_driver), the pytest file
# bindings/python/tests/test_ops_driver.py in test-python and the node:test
# file bindings/node/test/ops_driver.test.js in test-node; this adds the
# Python and Node examples (loopback, a UDP echo responder with a 20 ms
# delay, a 5 s run each; bbr needs root, reno is used otherwise).
#
#   test-driverbind   run examples/python/ops_driver.py and examples/node/ops_driver.js (~12 s)
DRIVERBIND_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)

.PHONY: test-driverbind

test-driverbind: python node-build
	cd $(DRIVERBIND_ROOT) && $(abspath $(VENV))/bin/python examples/python/ops_driver.py tests/fixtures/ops_driver_tiny.model.json
	cd $(DRIVERBIND_ROOT) && node examples/node/ops_driver.js tests/fixtures/ops_driver_tiny.model.json
