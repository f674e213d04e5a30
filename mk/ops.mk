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
#                  CUBIC, fixed BBR and OPS against a static CUBIC and a static BBR
#                  background (6 x 75 s), print the 000 Table 6.3-like table, tear
#                  down (~8 min after the build). OPS is configured as in 000
#                  Table 6.2: passive probing (w = 20, 1 s), 1-NN DTW, stump, OPS-60,
#                  with the shipped passive model ($(OPS_PATTERN), $(OPS_MODEL)).
# ops-demo-quick   OPS only against both backgrounds (2 x 50 s, ~2 min after the build)
# ops-alt          OPS (plain, adaptive Y, early exit; S5-C5-S5-B5, shipped active
#                  model) and fixed CUBIC/BBR against ALT-30 and ALT-60 (10 x 180 s, ~31 min)
# ops-static-options  plain / adaptive-Y / early-exit OPS (passive, Y = 30) against
#                  static CUBIC and BBR (6 x 180 s, ~19 min)
# test-ops         root netns tests: OpsDriver on a live socket, and an OPS
#                  transfer over a 0.1%-loss pipe delivering a byte-identical file (< 1 min)
# bench-ops-driver decision latency: last RTT sample -> setsockopt on the shipped models,
#                  median/p90/p99 + breakdown + the run loop + criterion
#                  (docs/results/ops-latency.md; OPSEL_BENCH_ROUNDS, OPSEL_BENCH_RUN_S)
OPS_PATTERN ?= passive
OPS_MODEL ?= models/passive/model.json
OPS_ACTIVE_MODEL ?= models/active-s5c5s5b5/model.json
# Extra `opsel demo` arguments, e.g. OPS_DEMO_ARGS="--json runs.jsonl --runs 2".
OPS_DEMO_ARGS ?=

.PHONY: ops-demo ops-demo-quick ops-alt ops-static-options test-ops bench-ops-driver

ops-demo: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --pattern $(OPS_PATTERN) --model $(OPS_MODEL) $(OPS_DEMO_ARGS)

ops-demo-quick: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --quick --pattern $(OPS_PATTERN) --model $(OPS_MODEL) $(OPS_DEMO_ARGS)

ops-alt: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --model $(OPS_ACTIVE_MODEL) --bg alt30,alt60 \
	  --fg ops,ops-adaptive,ops-early,cubic,bbr --seconds 180 --steady 60 --jitter 0.2 $(OPS_DEMO_ARGS)

ops-static-options: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --pattern passive --model $(OPS_MODEL) --bg cubic,bbr \
	  --fg ops,ops-adaptive,ops-early --seconds 180 --steady 30 $(OPS_DEMO_ARGS)

test-ops: sys-deps
	$(CARGO) test --release -p opsel --test sys_ops_driver -- --ignored --test-threads=1
	$(CARGO) test --release -p opsel-cli --test transfer -- --ignored --test-threads=1

bench-ops-driver:
	$(CARGO) bench -p opsel --bench ops_driver
