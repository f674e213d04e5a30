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

# --- OPS end to end: OpsDriver, opsel send/recv, demo ------------------------
# ops-demo         build, bring up netlab (100 Mbit/s, 65 ms, 0.5 x BDP), run fixed
#                  CUBIC, fixed BBR and OPS against a static CUBIC and a static BBR
#                  background (6 x 95 s), print the 000 Table 6.3-like table, tear
#                  down (~10 min after the build). OPS is configured as in 000
#                  Table 6.2 (passive probing at 1 s, 1-NN DTW, stump, OPS-60) with the
#                  default passive model ($(OPS_MODEL): pooled over the condition grid,
#                  w = 40, so the first decision comes 40 s after the FG starts).
# ops-demo-quick   OPS only against both backgrounds (2 x 70 s, ~3 min after the build)
# ops-alt          OPS (plain, adaptive Y, early exit; S5-C5-S5-B5, shipped active
#                  model) and fixed CUBIC/BBR against ALT-30 and ALT-60 (10 x 180 s, ~31 min)
# ops-alt-phases   phase-sampled repeats (docs/results/ops.md §2.3): run r of N shifts
#                  the FG timeline by r x SPREAD / N s of the ALT clock and uses seed 1 + r.
#                  OPS at ALT-30 (6 phases over the 60 s cycle: FG from 10, 20, ..., 60 s),
#                  OPS at ALT-60 (4 phases over 120 s: 10, 40, 70, 100 s), fixed CUBIC
#                  and BBR at ALT-30 (2 phases: 10, 40 s), early exit at 0.3 at the 6
#                  ALT-30 phases; each run 180 s of BG before its shift, FG measured
#                  from 10 s to 170 s after its start (20 runs, about 70 min)
# ops-alt-long     the thesis's transfer length (000 §7.6: 14 GB at 250 Mbit/s ≈ 450 s):
#                  480 s runs, phase-sampled as above. OPS at ALT-30 (6 phases, seeds
#                  13-18) and ALT-60 (4 phases, seeds 21-24), then fixed CUBIC/BBR at
#                  2 ALT-60 phases (180 s, seeds 31-32) (docs/results/ops.md §2.4; ~95 min)
# ops-static-options  plain / adaptive-Y / early-exit OPS (passive, Y = 30) against
#                  static CUBIC and BBR (6 x 180 s, ~19 min)
# ops-gated-live   live calibration of the margin gate (docs/results/ops.md §1e): OPS
#                  with every probe forced to 3 windows (--extend-below 1), Y = 5 s,
#                  3 x 360 s per static background, per-window margins logged to
#                  $(GATED_LIVE_JSON); then `opsel_eval gated-live` replays the gate at
#                  every τ on those probes (~38 min)
# test-ops         root netns tests: OpsDriver on a live socket, send --fastprob / --ab on a pipe, an OPS transfer over
#                  a 0.1%-loss pipe delivering a byte-identical file, and kill -9 of the
#                  sender and of the receiver mid-transfer then send --resume (< 1 min)
# bench-ops-driver decision latency: last RTT sample -> setsockopt on the shipped models,
#                  median/p90/p99 + breakdown + the run loop + criterion
#                  (docs/results/ops-latency.md; OPSEL_BENCH_ROUNDS, OPSEL_BENCH_RUN_S)
OPS_PATTERN ?= passive
# The default passive model (models/passive/MODEL_CARD.md): pooled over the condition grid,
# w = 40, the one `opsel send --ops` uses on any network. OPS_MODEL=models/passive-netlab/model.json
# runs the model tuned for this one netlab condition (w = 20, raw RTT; it does not generalise).
OPS_MODEL ?= models/passive/model.json
# Margin-gated probing (`opsel_eval gated`, docs/results/ops.md §1c) was calibrated on
# models/passive-netlab: OPS_GATE="--cycles 3 --extend-below 0.1" with that model. The default
# model decides on one 40 s window (000's one window per probe).
OPS_GATE ?=
# The netlab-tuned active model (models/active-s5c5s5b5-netlab/MODEL_CARD.md): these targets
# run on the netlab condition it was trained on; the default active model generalises better.
OPS_ACTIVE_MODEL ?= models/active-s5c5s5b5-netlab/model.json
# Extra `opsel demo` arguments, e.g. OPS_DEMO_ARGS="--json runs.jsonl --runs 2".
OPS_DEMO_ARGS ?=

GATED_LIVE_JSON ?= gate-live.jsonl

.PHONY: ops-demo ops-demo-quick ops-alt ops-alt-phases ops-alt-long ops-static-options ops-gated-live test-ops bench-ops-driver

ops-demo: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --pattern $(OPS_PATTERN) --model $(OPS_MODEL) $(OPS_GATE) $(OPS_DEMO_ARGS)

ops-demo-quick: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --quick --pattern $(OPS_PATTERN) --model $(OPS_MODEL) $(OPS_GATE) $(OPS_DEMO_ARGS)

ops-alt: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --model $(OPS_ACTIVE_MODEL) --bg alt30,alt60 \
	  --fg ops,ops-adaptive,ops-early,cubic,bbr --seconds 180 --steady 60 --jitter 0.2 $(OPS_DEMO_ARGS)

OPS_ALT_COMMON = --model $(OPS_ACTIVE_MODEL) --seconds 180 --steady 60 --jitter 0.2

ops-alt-phases: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo $(OPS_ALT_COMMON) --bg alt30 --fg ops --runs 6 --phase-spread 60 $(OPS_DEMO_ARGS)
	./target/release/opsel demo $(OPS_ALT_COMMON) --bg alt60 --fg ops --runs 4 --phase-spread 120 $(OPS_DEMO_ARGS)
	./target/release/opsel demo $(OPS_ALT_COMMON) --bg alt30 --fg cubic,bbr --runs 2 --phase-spread 60 $(OPS_DEMO_ARGS)
	./target/release/opsel demo $(OPS_ALT_COMMON) --bg alt30 --fg ops-early --early-confidence 0.3 \
	  --runs 6 --phase-spread 60 $(OPS_DEMO_ARGS)

OPS_ALT_LONG = --model $(OPS_ACTIVE_MODEL) --steady 60 --jitter 0.2

ops-alt-long: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo $(OPS_ALT_LONG) --seconds 480 --bg alt30 --fg ops --runs 6 \
	  --phase-spread 60 --seed 13 $(OPS_DEMO_ARGS)
	./target/release/opsel demo $(OPS_ALT_LONG) --seconds 480 --bg alt60 --fg ops --runs 4 \
	  --phase-spread 120 --seed 21 $(OPS_DEMO_ARGS)
	./target/release/opsel demo $(OPS_ALT_LONG) --seconds 180 --bg alt60 --fg cubic,bbr --runs 2 \
	  --phase-spread 120 --seed 31 $(OPS_DEMO_ARGS)

ops-static-options: sys-deps
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --pattern passive --model $(OPS_MODEL) --bg cubic,bbr \
	  --fg ops,ops-adaptive,ops-early --seconds 180 --steady 30 $(OPS_DEMO_ARGS)

ops-gated-live: sys-deps python
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel demo --pattern passive --model $(OPS_MODEL) --cycles 3 --extend-below 1 \
	  --steady 5 --bg cubic,bbr --fg ops --runs 3 --seconds 360 --json $(GATED_LIVE_JSON) $(OPS_DEMO_ARGS)
	PYTHONPATH=research/ops $(abspath .venv)/bin/python -m opsel_eval gated-live $(GATED_LIVE_JSON) --model $(OPS_MODEL)

test-ops: sys-deps
	$(CARGO) test --release -p opsel --test sys_ops_driver -- --ignored --test-threads=1
	$(CARGO) test --release -p opsel-cli --test transfer -- --ignored --test-threads=1
	$(CARGO) test --release -p opsel-cli --test transfer_fastprob -- --ignored --test-threads=1
	$(CARGO) test --release -p opsel-cli --test fair_live -- --include-ignored --test-threads=1

# dps-live: 002 Fig 5.4 and 5.8 live on netlab, time-scaled by 10 (root, ~70 min, resumable;
# docs/results/dps.md §5-§6).
.PHONY: dps-live
dps-live: bpf-vegas
	$(CARGO) build --release -p opsel-cli
	python3 research/dps/live_dps.py learning --repeats 5
	python3 research/dps/live_dps.py learning --sets cr,cbr --repeats 10
	python3 research/dps/live_dps.py fairness --sets cv,cb --repeats 5

bench-ops-driver:
	$(CARGO) bench -p opsel --bench ops_driver
