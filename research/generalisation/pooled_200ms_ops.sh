#!/usr/bin/env bash
# OPS with a pooled 5-sample-a-second model (MODEL, default models/passive-200ms/model.json: 10-s
# windows, trained on every condition recorded every 200 ms) at the grid-external conditions
# (external_conditions.py, seed 16; never recorded into its training), against a static CUBIC and a
# static BBR background, Y = STEADY s. A decision is right when its CCA is the background's.
# Resumable: a condition whose result exists is skipped.
#
#   research/generalisation/pooled_200ms_ops.sh [OUT_DIR]      (root; ~8 min per condition)
#   python3 research/ops-gate/live_summary.py "pooled 200 ms=OUT_DIR/pooled200-ext-...-ops.jsonl" ...
#
# OPSEL, MODEL, NAMES (space-separated condition names), OPS_SECONDS and STEADY override the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
MODEL=${MODEL:-models/passive-200ms/model.json}
OPS_SECONDS=${OPS_SECONDS:-200}     # 10-s probes and Y = 5 s: about 12 decisions per background
STEADY=${STEADY:-5}
mkdir -p "$OUT"
python3 research/generalisation/external_conditions.py --fields | while read -r name rate rtt buf; do
  if [[ -n "${NAMES:-}" && " $NAMES " != *" $name "* ]]; then continue; fi
  out="$OUT/pooled200-$name-ops.jsonl"
  if [[ -s "$out" ]]; then echo "$name: done ($out)"; continue; fi
  "$OPSEL" demo --pattern passive --model "$MODEL" --rate-mbps "$rate" --rtt-ms "$rtt" --buffer-bdp "$buf" \
    --bg cubic,bbr --fg ops --steady "$STEADY" --seconds "$OPS_SECONDS" --json "$out.tmp"
  mv "$out.tmp" "$out"
done
