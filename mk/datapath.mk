# Transfer data path against iperf3 (docs/results/datapath.md).
#   bench-transfer  opsel send -> opsel recv vs iperf3 -F on loopback: a file in
#                   the page cache (tmpfs) to a tmpfs destination, one stream,
#                   CUBIC, the tools alternating; prints each run, the medians,
#                   the ratio and the 1-minute load. BENCH_SIZE_MB (1024),
#                   BENCH_RUNS (3), BENCH_DIR (/dev/shm). Installs iperf3 (root).
#                   Prints opsel with a fixed CCA and with the OPS driver
#                   attached, and CPU seconds per Gbit on each side.
#                   BENCH_HASH: opsel's check, xxh3 (default) or blake3, or
#                   "xxh3 blake3" to run both in every round. BENCH_MODES:
#                   opsel variants ("fixed ops"; fixedN / opsN over N streams,
#                   e.g. "fixed fixed2 fixed4 fixed8 ops ops4"). Each round
#                   also runs iperf3 memory to memory.
#   bench-transfer-netlab  the same comparison through a netlab pipe (root):
#                   100 and 800 Mbit/s, 20 ms RTT, one-BDP buffer, CUBIC;
#                   BENCH_RUNS rounds; BENCH_NETLAB_RATES (Mbit/s, "100,800");
#                   BENCH_HASH as above (one hash).
CARGO ?= cargo
BENCH_SIZE_MB ?= 1024
BENCH_RUNS ?= 3
BENCH_DIR ?= /dev/shm
BENCH_HASH ?= xxh3
BENCH_MODES ?= fixed ops

BENCH_NETLAB_RATES ?= 100,800

.PHONY: bench-transfer bench-transfer-netlab iperf3-dep
iperf3-dep:
	@command -v iperf3 >/dev/null && command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq iperf3 bc time; }

bench-transfer: iperf3-dep
	$(CARGO) build --release -p opsel-cli
	OPSEL=target/release/opsel SIZE_MB=$(BENCH_SIZE_MB) RUNS=$(BENCH_RUNS) DIR=$(BENCH_DIR) HASH="$(BENCH_HASH)" MODES="$(BENCH_MODES)" research/datapath/bench_transfer.sh

bench-transfer-netlab: iperf3-dep
	BENCH_NETLAB_RUNS=$(BENCH_RUNS) BENCH_NETLAB_RATES=$(BENCH_NETLAB_RATES) BENCH_HASH="$(BENCH_HASH)" \
	  $(CARGO) test --release -p opsel-cli --test transfer_bench -- --ignored --nocapture
