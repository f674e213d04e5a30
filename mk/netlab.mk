# netlab: emulated WAN (namespaces + user-space TUN pipe). Needs root.
CARGO ?= cargo
NETLAB_OUT ?= target/netlab

.PHONY: test-netlab bench-netlab netlab-table netlab-table-halfbdp netlab-down netlab-demo

# Validation scenario (<= 60 s): base RTT, bottleneck rate, CUBIC vs BBR queue, CUBIC fairness.
test-netlab:
	$(CARGO) test --release -p opsel-netlab --test netlab_validation -- --ignored --test-threads=1 --nocapture

# Highest rate the pipe sustains at 65 ms RTT with one CUBIC and one BBR flow.
bench-netlab:
	$(CARGO) build --release -p opsel-cli
	mkdir -p docs/results
	./target/release/opsel lab bench --rates 200,400,800,1600 --mtus 1500,9000 --seconds 20 --markdown docs/results/netlab-bench.md

# 000 Table 6.3 fixed strategies at the default scenario (4 cells x 3 runs x 90 s).
netlab-table:
	$(CARGO) build --release -p opsel-cli
	mkdir -p docs/results
	./target/release/opsel lab table --seconds 90 --runs 3 --markdown docs/results/netlab-table63.md

# The default scenario (100 Mbit/s, 65 ms, 1.5 BDP; CUBIC bg + BBR fg) into $(NETLAB_OUT).
netlab-demo:
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel lab run netlab/scenarios/default.toml --out $(NETLAB_OUT)/default

# Remove namespaces left by crashed runs.
netlab-down:
	$(CARGO) build --release -p opsel-cli
	./target/release/opsel lab down

# The same at a 0.5 x BDP buffer, where the thesis's unfair pairs appear (see docs/results/netlab.md).
netlab-table-halfbdp:
	$(CARGO) build --release -p opsel-cli
	mkdir -p docs/results
	./target/release/opsel lab table --seconds 90 --runs 3 --buffer-bdp 0.5 --markdown docs/results/netlab-table63-halfbdp.md
