#!/usr/bin/env bash
# opsel send -> opsel recv against iperf3 -F on loopback: a file in the page
# cache (tmpfs) to a tmpfs destination, one stream, CUBIC. The two tools run
# alternately (opsel, iperf3, opsel, ...) so drift of a shared machine hits
# both; each figure is file bytes over the sender command's wall time (opsel:
# until the receiver confirmed every byte verified and renamed; iperf3: until
# the client exits). Prints each run, the medians, the ratio of medians and the
# 1-minute load.
#   OPSEL   the opsel binary (default target/release/opsel)
#   SIZE_MB file size in MiB (default 1024)
#   RUNS    runs of each tool (default 3)
#   DIR     a tmpfs directory for source and destination (default /dev/shm)
set -euo pipefail
OPSEL=${OPSEL:-target/release/opsel}
SIZE_MB=${SIZE_MB:-1024}
RUNS=${RUNS:-3}
DIR=${DIR:-/dev/shm}
command -v iperf3 >/dev/null || { echo "iperf3 not found: apt-get install -y iperf3" >&2; exit 1; }
[ -x "$OPSEL" ] || { echo "$OPSEL not found: cargo build --release -p opsel-cli" >&2; exit 1; }
work=$(mktemp -d "$DIR/opsel-bench.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
src=$work/src.bin
head -c $((SIZE_MB << 20)) /dev/urandom >"$src"
bytes=$(stat -c %s "$src")
cat "$src" >/dev/null # in the page cache
port=$((20000 + RANDOM % 20000))

now() { date +%s%N; }

opsel_run() {
  rm -f "$work/dst.bin"
  "$OPSEL" recv --listen 127.0.0.1:$port --out "$work/dst.bin" --timeout 60 >"$work/recv.log" 2>&1 &
  local rp=$!; pids+=("$rp")
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.02; done
  local t0; t0=$(now)
  "$OPSEL" send --to 127.0.0.1:$port --file "$src" --cca cubic >"$work/send.log" 2>&1
  local t1; t1=$(now)
  wait "$rp"
  cmp -s "$src" "$work/dst.bin" || { echo "opsel: destination differs from the source" >&2; exit 1; }
  echo "scale=3; $bytes * 8 / ($t1 - $t0)" | bc # Gbit/s (bits per ns)
}

iperf_run() {
  rm -f "$work/ip.bin"
  iperf3 -s -1 -p $port -F "$work/ip.bin" >"$work/ips.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.02; done
  local t0; t0=$(now)
  iperf3 -c 127.0.0.1 -p $port -F "$src" -n "$bytes" -C cubic >"$work/ipc.log" 2>&1
  local t1; t1=$(now)
  wait "$sp" || true
  echo "scale=3; $bytes * 8 / ($t1 - $t0)" | bc
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

o=(); i=()
for r in $(seq "$RUNS"); do
  o+=("$(opsel_run)"); port=$((port + 1))
  i+=("$(iperf_run)"); port=$((port + 1))
  echo "run $r: opsel ${o[-1]} Gbit/s, iperf3 -F ${i[-1]} Gbit/s"
done
om=$(printf '%s\n' "${o[@]}" | median)
im=$(printf '%s\n' "${i[@]}" | median)
echo "file $bytes bytes, $RUNS runs each, median opsel $om Gbit/s, iperf3 -F $im Gbit/s"
echo "ratio opsel/iperf3 = $(echo "scale=3; $om / $im" | bc)"
echo "load (1 min) $(cut -d' ' -f1 /proc/loadavg), cores $(nproc)"
