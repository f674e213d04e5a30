# Golden fixtures shared by the Rust, C, Python and Node tests (tests/fixtures/README.md).
# The generators are in research/fixtures/ and build as examples of opsel-ffi.
#
#   make golden-knn   tests/fixtures/knn_golden*.json
#   make golden-bwe   tests/fixtures/bwe_golden*.json
#   make golden-ops   tests/fixtures/ops_golden.json

CARGO ?= cargo

.PHONY: golden-knn golden-bwe golden-ops

golden-knn:
	$(CARGO) run -p opsel-ffi --example make_golden

golden-bwe:
	$(CARGO) run -p opsel-ffi --example make_bwe_golden

golden-ops:
	$(CARGO) run --release -p opsel-ffi --example make_ops_golden
