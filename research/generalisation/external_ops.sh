#!/usr/bin/env bash
# OPS end to end at the three grid-external conditions (external_conditions.py, seed 16):
# fixed CUBIC and fixed BBR, then OPS with the default passive model, against a static CUBIC
# and a static BBR background. Throughput and Jain are averaged over [MEASURE_FROM, end], after
# OPS's first decision. Resumable: a condition whose result files exist is skipped.
#
#   research/generalisation/external_ops.sh [OUT_DIR]     (root; ~25 min per condition)
#
# OPSEL (the binary), MODEL, OPS_SECONDS, FIXED_SECONDS, MEASURE_FROM and STEADY override the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
MODEL=${MODEL:-models/passive/model.json}
OPS_SECONDS=${OPS_SECONDS:-460}     # w = 40 + 5 cycles of (Y = 60 s + a 40 s probe): 5 decisions per background
FIXED_SECONDS=${FIXED_SECONDS:-160}
MEASURE_FROM=${MEASURE_FROM:-60}
STEADY=${STEADY:-60}
mkdir -p "$OUT"
python3 research/generalisation/external_conditions.py --fields | while read -r name rate rtt buf; do
  common=(--pattern passive --model "$MODEL" --rate-mbps "$rate" --rtt-ms "$rtt" --buffer-bdp "$buf"
          --bg cubic,bbr --measure-from "$MEASURE_FROM" --steady "$STEADY")
  for part in fixed ops; do
    md="$OUT/$name-$part.md"
    if [[ -s "$md" ]]; then echo "$name $part: done ($md)"; continue; fi
    if [[ $part == fixed ]]; then args=(--fg cubic,bbr --seconds "$FIXED_SECONDS"); else args=(--fg ops --seconds "$OPS_SECONDS"); fi
    echo "$name $part: $rate Mbit/s, $rtt ms, $buf x BDP"
    rm -f "$OUT/$name-$part.jsonl"
    "$OPSEL" demo "${common[@]}" "${args[@]}" --json "$OUT/$name-$part.jsonl" --markdown "$md.tmp"
    mv "$md.tmp" "$md"
  done
done
