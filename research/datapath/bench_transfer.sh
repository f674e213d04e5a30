#!/usr/bin/env bash
# opsel send -> opsel recv against iperf3 -F on loopback: a file in the page
# cache (tmpfs) to a tmpfs destination, one stream, CUBIC. The two tools run
# alternately (opsel, iperf3, opsel, ...) so drift of a shared machine hits
# both; each figure is file bytes over the sender command's wall time (opsel:
# until the receiver confirmed every byte verified and renamed; iperf3: until
# the client exits). Prints each run, the medians, the ratio of medians and the
# 1-minute load, and the CPU time (user + system) of each side per Gbit moved.
#   OPSEL   the opsel binary (default target/release/opsel)
#   MODES   opsel variants, each run in every round (default "fixed ops"):
#           fixed = --cca cubic; ops = --ops --pattern passive --initial-cca
#           cubic (the OPS driver attached: RTT prober; a 1 GiB loopback
#           transfer ends before the first 1 Hz window fills); fixedN / opsN:
#           the same over N streams (--streams N, 1..8)
#   MEM     1 (default): iperf3 memory to memory too in every round (the
#           ceiling of one TCP stream here, not a file transfer); 0: not
#   HASH    opsel's whole-transfer check(s), each run in every round with
#           every mode (default "xxh3"; e.g. "xxh3 blake3" to compare them
#           in the same rounds): passed as `opsel send --hash`
#   SIZE_MB file size in MiB (default 1024)
#   RUNS    runs of each tool (default 3)
#   DIR     a tmpfs directory for source and destination (default /dev/shm)
set -euo pipefail
OPSEL=${OPSEL:-target/release/opsel}
SIZE_MB=${SIZE_MB:-1024}
RUNS=${RUNS:-3}
MODES=${MODES:-fixed ops}
HASH=${HASH:-xxh3}
MEM=${MEM:-1}
DIR=${DIR:-/dev/shm}
command -v /usr/bin/time >/dev/null || { echo "/usr/bin/time not found: apt-get install -y time" >&2; exit 1; }
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

# CPU seconds (user + system) recorded by /usr/bin/time in $1.
cpu() { awk '{print $1 + $2}' "$1"; }

# Prints "Gbit/s sender-CPU-s/Gbit receiver-CPU-s/Gbit".
rate_cpu() { # bytes t0 t1 sender-time-file receiver-time-file
  local gbit; gbit=$(echo "scale=6; $1 * 8 / 1000000000" | bc)
  echo "$(echo "scale=3; $1 * 8 / ($3 - $2)" | bc) $(echo "scale=3; $(cpu "$4") / $gbit" | bc) $(echo "scale=3; $(cpu "$5") / $gbit" | bc)"
}

send_args() {
  case $1 in
  fixed) echo "--cca cubic" ;;
  ops) echo "--ops --pattern passive --initial-cca cubic" ;;
  fixed[1-8]) echo "--cca cubic --streams ${1#fixed}" ;;
  ops[1-8]) echo "--ops --pattern passive --initial-cca cubic --streams ${1#ops}" ;;
  *) echo "unknown mode $1 (fixed, ops, fixedN, opsN with N streams 1..8)" >&2; exit 1 ;;
  esac
}

opsel_run() { # mode hash
  rm -f "$work/dst.bin"
  /usr/bin/time -f "%U %S" -o "$work/recv.time" "$OPSEL" recv --listen 127.0.0.1:$port --out "$work/dst.bin" --timeout 60 >"$work/recv.log" 2>&1 &
  local rp=$!; pids+=("$rp")
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.02; done
  local t0; t0=$(now)
  # shellcheck disable=SC2046
  /usr/bin/time -f "%U %S" -o "$work/send.time" "$OPSEL" send --to 127.0.0.1:$port --file "$src" --hash "$2" $(send_args "$1") >"$work/send.log" 2>&1
  local t1; t1=$(now)
  wait "$rp"
  cmp -s "$src" "$work/dst.bin" || { echo "opsel: destination differs from the source" >&2; exit 1; }
  rate_cpu "$bytes" "$t0" "$t1" "$work/send.time" "$work/recv.time"
}

# iperf3 memory to memory (no file on either side): the ceiling of one TCP
# stream on this host.
iperf_mem_run() {
  /usr/bin/time -f "%U %S" -o "$work/ips.time" iperf3 -s -1 -p $port >"$work/ips.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.02; done
  local t0; t0=$(now)
  /usr/bin/time -f "%U %S" -o "$work/ipc.time" iperf3 -c 127.0.0.1 -p $port -n "$bytes" -C cubic >"$work/ipc.log" 2>&1
  local t1; t1=$(now)
  wait "$sp" || true
  rate_cpu "$bytes" "$t0" "$t1" "$work/ipc.time" "$work/ips.time"
}

iperf_run() {
  rm -f "$work/ip.bin"
  /usr/bin/time -f "%U %S" -o "$work/ips.time" iperf3 -s -1 -p $port -F "$work/ip.bin" >"$work/ips.log" 2>&1 &
  local sp=$!; pids+=("$sp")
  for _ in $(seq 100); do ss -ltn "sport = :$port" | grep -q LISTEN && break; sleep 0.02; done
  local t0; t0=$(now)
  /usr/bin/time -f "%U %S" -o "$work/ipc.time" iperf3 -c 127.0.0.1 -p $port -F "$src" -n "$bytes" -C cubic >"$work/ipc.log" 2>&1
  local t1; t1=$(now)
  wait "$sp" || true
  rate_cpu "$bytes" "$t0" "$t1" "$work/ipc.time" "$work/ips.time"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A res
i=()
im_runs=()
loads=()
for r in $(seq "$RUNS"); do
  line="run $r:"
  for m in $MODES; do
    for h in $HASH; do
      res[$m/$h]+="$(opsel_run "$m" "$h")"$'\n'; port=$((port + 1))
      line+=" opsel $m $h $(echo "${res[$m/$h]}" | sed '/^$/d' | tail -1 | cut -d' ' -f1) Gbit/s,"
    done
  done
  i+=("$(iperf_run)"); port=$((port + 1))
  if [ "$MEM" = 1 ]; then im_runs+=("$(iperf_mem_run)"); port=$((port + 1)); fi
  loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  echo "$line iperf3 -F $(echo "${i[-1]}" | cut -d' ' -f1) Gbit/s$([ "$MEM" = 1 ] && echo ", iperf3 memory $(echo "${im_runs[-1]}" | cut -d' ' -f1) Gbit/s") (load ${loads[-1]})"
done
col() { printf '%s\n' "$1" | sed '/^$/d' | cut -d' ' -f"$2" | median; }
ic=$(printf '%s\n' "${i[@]}")
im=$(col "$ic" 1)
echo "file $bytes bytes, $RUNS runs each, medians (CPU = user + system seconds per Gbit moved):"
echo "  iperf3 -F   $im Gbit/s, CPU sender $(col "$ic" 2) receiver $(col "$ic" 3)"
if [ "$MEM" = 1 ]; then
  mc=$(printf '%s\n' "${im_runs[@]}")
  echo "  iperf3 memory to memory   $(col "$mc" 1) Gbit/s, CPU sender $(col "$mc" 2) receiver $(col "$mc" 3)"
fi
ic_cpu=$(echo "$(col "$ic" 2) + $(col "$ic" 3)" | bc)
for m in $MODES; do
  for h in $HASH; do
    r=${res[$m/$h]}
    om=$(col "$r" 1)
    oc=$(echo "$(col "$r" 2) + $(col "$r" 3)" | bc)
    echo "  opsel $m --hash $h  $om Gbit/s, CPU sender $(col "$r" 2) receiver $(col "$r" 3), ratio to iperf3 -F $(echo "scale=3; $om / $im" | bc), CPU both sides $(echo "scale=2; $oc / $ic_cpu" | bc)x iperf3's"
  done
done
echo "load (1 min) during the runs: median $(printf '%s\n' "${loads[@]}" | median), range $(printf '%s\n' "${loads[@]}" | sort -g | head -1)-$(printf '%s\n' "${loads[@]}" | sort -g | tail -1); cores $(nproc)"
