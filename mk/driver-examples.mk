# Runnable OpsDriver examples in Python and Node (examples/python/ops_driver.py,
# examples/node/ops_driver.js): loopback, a UDP echo responder with a 20 ms
# delay, a 5 s run each; bbr needs root, reno is used otherwise. And the OPS
# send_file examples (examples/python/send_file_ops.py,
# examples/node/send_file_ops.js; examples/c/send_ops.c runs in test-c): a
# file over loopback with a silent probe of 3 samples, one decision. The C test and
# example run in test-c (examples/c: test_ops_driver, ops_driver), the pytest
# file bindings/python/tests/test_ops_driver.py in test-python and the
# node:test file bindings/node/test/ops_driver.test.js in test-node.
#
#   test-driver-examples   run the examples (~20 s; part of `make test`)
DRIVEREX_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)

.PHONY: test-driver-examples

test-driver-examples: python node-build
	cd $(DRIVEREX_ROOT) && $(abspath $(VENV))/bin/python examples/python/ops_driver.py tests/fixtures/ops_driver_tiny.model.json
	cd $(DRIVEREX_ROOT) && node examples/node/ops_driver.js tests/fixtures/ops_driver_tiny.model.json
	cd $(DRIVEREX_ROOT) && $(abspath $(VENV))/bin/python examples/python/send_file_ops.py tests/fixtures/ops_send_silent.model.json S3
	cd $(DRIVEREX_ROOT) && node examples/node/send_file_ops.js tests/fixtures/ops_send_silent.model.json S3
