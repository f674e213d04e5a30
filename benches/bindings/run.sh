#!/usr/bin/env bash
# Binding-overhead bench: one classify call from C, Node and (when
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
REPS=${2:-9}
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
  delete v
  for (f = 2; f <= NF; f++) { split($f, kv, "="); v[kv[1]] = kv[2] }
  l = v["lang"]; c = v["config"]
  if (l == "core" && c == "A") rep++
  ns[l, c, rep] = v["median_ns"]
  if (c == "A") cs[l] = v["checksum"]
  if (!(l in seen)) { seen[l] = 1; order[++nl] = l }
}
/^SKIP/ { sub(/^SKIP lang=python reason=/, ""); skip = $0 }
END {
  for (i = 1; i <= nl; i++) {
    l = order[i]; na = 0; nt = 0; nr = 0; no = 0
    for (r = 1; r <= rep; r++) {
      if ((l, "A", r) in ns) { a[++na] = ns[l, "A", r]; if ((("core", "A", r) in ns)) rat[++nr] = ns[l, "A", r] / ns["core", "A", r] }
      if ((l, "tiny", r) in ns) { t[++nt] = ns[l, "tiny", r]; if ((("core", "tiny", r) in ns)) ov[++no] = ns[l, "tiny", r] - ns["core", "tiny", r] }
    }
    medA[l] = median(a, na); ratio[l] = median(rat, nr); medT[l] = median(t, nt); over[l] = median(ov, no)
  }
  print "# Binding overhead: one classify call, C / Node / Python vs the Rust core"
  print ""
  print "Issue 3 target: each binding under 2x the core latency at config A"
  print "(w = 20, 1080 references = 6 classes x 180 windows of `synth::dataset`, seed 11;"
  print "200 query windows, seed 12; 1-NN, Sakoe-Chiba radius 10, cost abs)."
  print ""
  print "| caller | config A: median ns / call | ratio to core (median of per-run ratios) | fixed cost: ns / call on a 1-reference model | overhead over core, ns / call | predictions |"
  print "|---|---:|---:|---:|---:|---|"
  for (i = 1; i <= nl; i++) {
    l = order[i]
    ok = (cs[l] == cs["core"]) ? "identical to core" : "DIFFERENT (checksum " cs[l] ")"
    printf "| %s | %.0f | %.2fx | %.0f | %+.0f | %s |\n", l, medA[l], ratio[l], medT[l], over[l], ok
  }
  if (skip != "") print "| python | - | - | - | - | skipped: " skip " |"
  print ""
  worst = 0; wl = ""
  for (i = 1; i <= nl; i++) if (order[i] != "core" && ratio[order[i]] > worst) { worst = ratio[order[i]]; wl = order[i] }
  printf "Target (< 2x core at config A): %s (largest ratio %.2fx, %s).\n", (worst < 2 ? "met" : "NOT met"), worst, wl
  print ""
  printf "Measured %s on %s (%s cores, shared with other engineers compiling: load average %s at the end).\n", date, cpu, nproc, load
  printf "Each program times %s rounds (plus one warm-up round) of 200 classify calls (x50 for the 1-reference\n", rounds
  print "model); per-call time = round time / calls; each program reports its median round. The programs run"
  printf "interleaved %s times (core, C, Node, Python, repeat); the ratio column is the median over those runs\n", reps
  print "of (binding / core of the same run), the other columns medians over runs. The 1-reference model makes"
  print "the search nearly free, so its time per call is the fixed cost of crossing into the library"
  print "(argument checks, copies, building the result), i.e. the binding overhead in absolute terms."
  print "Absolute times are noisy on this loaded machine; ratios and overheads are the result."
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
