# OPS core (probe patterns, controller, policies, fairness): simulation and benches.
# The unit, property, simulation and allocation tests run in `cargo test --workspace`.
CARGO ?= cargo

.PHONY: ops-sim bench-ops

# Trace-driven simulation table (docs/results/ops-sim.md).
ops-sim:
	$(CARGO) bench -p opsel --bench ops_sim

# Decision-latency and steady-path benches (criterion).
bench-ops:
	$(CARGO) bench -p opsel --bench ops_decision

# --- OPS end to end (issue 7): OpsDriver, opsel send/recv, demo -------------
# ops-demo         build, bring up netlab (100 Mbit/s, 65 ms, 0.5 x BDP), run fixed
#                  CUBIC, fixed BBR and OPS (S5-C5-S5-B5, $(OPS_MODEL)) against a
#                  static CUBIC and a static BBR background (6 x 75 s), print the
#                  000 Table 6.3-like table, tear down (~8 min after the build)
# ops-demo-quick   OPS only against both backgrounds (2 x 50 s, ~2 min after the build)
# test-ops         root netns tests: OpsDriver on a live socket, and an OPS
#                  transfer over a 0.1%-loss pipe delivering a byte-identical file (< 1 min)
# bench-ops-driver decision latency: last RTT sample -> setsockopt on the shipped models,
#                  median/p90/p99 + breakdown + the run loop + criterion
#                  (docs/results/ops-latency.md; OPSEL_BENCH_ROUNDS, OPSEL_BENCH_RUN_S)
OPS_MODEL ?= models/active-s5c5s5b5/model.json

.PHONY: ops-demo ops-demo-quick test-ops bench-ops-driver

ops-demo: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --model $(OPS_MODEL)

ops-demo-quick: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --quick --model $(OPS_MODEL)

test-ops: sys-deps
	$(CARGO) test --release -p opsel --test sys_ops_driver -- --ignored --test-threads=1
	$(CARGO) test --release -p opsel-cli --test transfer -- --ignored --test-threads=1

bench-ops-driver:
	$(CARGO) bench -p opsel --bench ops_driver
