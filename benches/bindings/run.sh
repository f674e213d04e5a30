#!/usr/bin/env bash
# Binding-overhead bench (issue 3): one classify call from C, Node and (when
# the package is built) Python against the core call, at config A (w = 20,
# 1080 references, 200 queries). Each program times the same loop (per round
# 200 calls back to back; median per-call time over ROUNDS rounds); the
# programs run interleaved REPS times and the median of their medians is
# reported, with ratios to the core, in docs/results/bindings-bench.md.
#
#   make bench-bindings          (builds everything first)
#   benches/bindings/run.sh [ROUNDS] [REPS]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/target/bench-bindings"
ROUNDS=${1:-30}
REPS=${2:-5}
CORE="$ROOT/target/release/examples/bench_core"
CBENCH="$ROOT/examples/c/build/make/bench_classify"
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$ROOT/docs/results"
RAW="$OUT/raw.txt"
: > "$RAW"
"$CORE" "$OUT" 1 > /dev/null   # writes model.json and queries.f64
for rep in $(seq "$REPS"); do
  "$CORE" "$OUT" "$ROUNDS" | tee -a "$RAW"
  "$CBENCH" "$OUT" "$ROUNDS" | tee -a "$RAW"
  node "$ROOT/bindings/node/bench/classify.js" "$OUT" "$ROUNDS" | tee -a "$RAW"
  "$PY" "$ROOT/benches/bindings/bench_python.py" "$OUT" "$ROUNDS" | tee -a "$RAW" || true
done

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
NPROC=$(nproc)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
REPORT="$ROOT/docs/results/bindings-bench.md"
awk -v load="$LOAD" -v nproc="$NPROC" -v cpu="$CPU" -v date="$DATE" -v rounds="$ROUNDS" -v reps="$REPS" '
function median(arr, n,   i, j, t) {
  for (i = 2; i <= n; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
  return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
}
/^RESULT/ {
  for (f = 2; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
  l = v["lang"]; n[l]++; ns[l, n[l]] = v["median_ns"]; cs[l] = v["checksum"]
  if (!(l in seen)) { seen[l] = 1; order[++nl] = l }
}
/^SKIP/ { sub(/^SKIP lang=python reason=/, ""); skip = $0 }
END {
  for (i = 1; i <= nl; i++) { l = order[i]; for (k = 1; k <= n[l]; k++) tmp[k] = ns[l, k]; med[l] = median(tmp, n[l]) }
  print "# Binding overhead: one classify call, C / Node / Python vs the Rust core"
  print ""
  print "Issue 3 target: each binding under 2x the core latency at config A"
  print "(w = 20, 1080 references = 6 classes x 180 windows of `synth::dataset`, seed 11;"
  print "200 query windows, seed 12; 1-NN, Sakoe-Chiba radius 10, cost abs)."
  print ""
  print "| caller | median ns / call | ratio to core | predictions checksum |"
  print "|---|---:|---:|---|"
  for (i = 1; i <= nl; i++) {
    l = order[i]
    ok = (cs[l] == cs["core"]) ? "same as core" : "DIFFERENT (" cs[l] ")"
    printf "| %s | %.0f | %.2fx | %s |\n", l, med[l], med[l] / med["core"], ok
  }
  if (skip != "") print "| python | - | - | skipped: " skip " |"
  print ""
  printf "Measured %s on %s (%s cores, shared with other builds: load average %s at the end).\n", date, cpu, nproc, load
  printf "Each program ran %s rounds of 200 calls (plus one warm-up round); the per-call time of a\n", rounds
  printf "round is its time / 200; each program reports its median round; the programs ran interleaved\n"
  printf "%s times and the table shows the median of those medians. Load from other engineers makes\n", reps
  print "absolute times noisy; the ratios are the result, the absolute numbers are only indicative."
  print ""
  print "What each caller does per call:"
  print "- core: `knn::Model::classify(&window, &mut Workspace)` (ffi/examples/bench_core.rs)."
  print "- c: `opsel_model_classify(model, ws, window, 20, &out)` through libopsel_ffi.so (examples/c/bench_classify.c)."
  print "- node: `model.classify(Float64Array)` returning a Prediction object (bindings/node/bench/classify.js)."
  print "- python: `opsel.load_model(path).classify(ndarray)` (benches/bindings/bench_python.py), when bindings/python is built."
  print ""
  print "Reproduce: `make bench-bindings` (or, after building, `benches/bindings/run.sh " rounds " " reps "`)."
  print "Raw lines of this run:"
  print ""
  print "```"
}' "$RAW" > "$REPORT"
cat "$RAW" >> "$REPORT"
echo '```' >> "$REPORT"
echo "wrote $REPORT"
cat "$REPORT"
