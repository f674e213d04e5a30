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
