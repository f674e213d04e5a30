#!/usr/bin/env bash
# `--model auto` (the default of passive OPS) live on netlab: a short path where the 5-Hz model
# should be kept, the external condition with the longest RTT (84 ms), a 150-ms path and a deep
# 2 × BDP path (120 ms), which gave way to the 1 Hz model under the 90-ms limit the results in
# research/results/generalisation/auto-*.jsonl were recorded with (the limit is now 170 ms, so they
# fall back only if a burst goes above it); static CUBIC and BBR backgrounds, Y = 5 s.
# Resumable: a path whose result exists is skipped.
#
#   research/generalisation/auto_ops.sh [OUT_DIR]            (root; about 12 min)
#   python3 research/ops-gate/live_summary.py "auto NAME=OUT_DIR/auto-NAME.jsonl" ...
#   jq -r '.bg + ": " + (.auto_model.model // "-") + " (" + (.auto_model.reason // "") + ")"' OUT_DIR/auto-NAME.jsonl
#
# OPSEL overrides the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
mkdir -p "$OUT"
while read -r name rate rtt buf secs; do
  out="$OUT/auto-$name.jsonl"
  if [[ -s "$out" ]]; then echo "$name: done ($out)"; continue; fi
  "$OPSEL" demo --pattern passive --rate-mbps "$rate" --rtt-ms "$rtt" --buffer-bdp "$buf" \
    --bg cubic,bbr --fg ops --steady 5 --seconds "$secs" --json "$out.tmp"
  mv "$out.tmp" "$out"
done <<'PATHS'
ext-r46-d34-b0.98 46 34 0.98 60
ext-r24-d67-b0.26 24 67 0.26 60
r20-d150-b0.5 20 150 0.5 110
r50-d40-b2 50 40 2 80
PATHS
