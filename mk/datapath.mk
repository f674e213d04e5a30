# Transfer data path against iperf3 (docs/results/datapath.md).
#   bench-transfer  opsel send -> opsel recv vs iperf3 -F on loopback: a file in
#                   the page cache (tmpfs) to a tmpfs destination, one stream,
#                   CUBIC, the tools alternating; prints each run, the medians,
#                   the ratio and the 1-minute load. BENCH_SIZE_MB (1024),
#                   BENCH_RUNS (3), BENCH_DIR (/dev/shm). Installs iperf3 (root).
CARGO ?= cargo
BENCH_SIZE_MB ?= 1024
BENCH_RUNS ?= 3
BENCH_DIR ?= /dev/shm

.PHONY: bench-transfer iperf3-dep
iperf3-dep:
	@command -v iperf3 >/dev/null || { apt-get update -qq && apt-get install -y -qq iperf3 bc; }

bench-transfer: iperf3-dep
	$(CARGO) build --release -p opsel-cli
	OPSEL=target/release/opsel SIZE_MB=$(BENCH_SIZE_MB) RUNS=$(BENCH_RUNS) DIR=$(BENCH_DIR) research/datapath/bench_transfer.sh
