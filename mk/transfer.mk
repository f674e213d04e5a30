# send/recv/serve reliability (docs/results/reliability.md).
# The hostile-peer tests (cli/tests/transfer_edge.rs, a few seconds) run in
# `cargo test`; the kill -9 + resume test runs in test-ops (root, netlab).
#   transfer-soak   root, a few minutes: opsel serve on a netlab pipe with 1% random
#                   loss receives OPSEL_SOAK_N (100) transfers of random sizes: fixed
#                   CCAs, OPS switching CCAs live, senders killed and resumed
#   fuzz-long       every fuzz target for FUZZ_SECS (600) each, one at a time
CARGO ?= cargo
FUZZ_SECS ?= 600
FUZZ_SEED ?= 7

.PHONY: transfer-soak fuzz-long
transfer-soak: sys-deps
	$(CARGO) test --release -p opsel-cli --test transfer_soak -- --ignored --nocapture

fuzz-long:
	OPSEL_FUZZ_SECS=$(FUZZ_SECS) OPSEL_FUZZ_SEED=$(FUZZ_SEED) $(CARGO) test --release -p opsel-cli --test control_fuzz -- --nocapture
	for t in knn_model_files tree_model_files fastprob_model_files probing_patterns bwe_datagrams; do \
		OPSEL_FUZZ_SECS=$(FUZZ_SECS) OPSEL_FUZZ_SEED=$(FUZZ_SEED) $(CARGO) test --release -p opsel --test parsers_fuzz $$t -- --exact --nocapture; done
	OPSEL_FUZZ_SECS=$(FUZZ_SECS) OPSEL_FUZZ_SEED=$(FUZZ_SEED) $(CARGO) test --release -p opsel-netlab --test scenario_fuzz -- --nocapture
	OPSEL_FUZZ_SECS=$(FUZZ_SECS) OPSEL_FUZZ_SEED=$(FUZZ_SEED) $(CARGO) test --release -p opsel --test flows_fuzz -- --nocapture
