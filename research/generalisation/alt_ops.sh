#!/usr/bin/env bash
# OPS against a switching background at the grid-external conditions (external_conditions.py,
# seed 16; never in any model's training): an ALT-X background (one flow, CUBIC from t = 0,
# switched to BBR and back every X s), the OPS foreground with MODEL beside fixed CUBIC and fixed
# BBR, Y = STEADY s. Resumable: a condition whose result exists is skipped.
#
#   research/generalisation/alt_ops.sh [OUT_DIR]          (root; about 3 × SECONDS per condition)
#   python3 research/generalisation/alt_summary.py "TAG=OUT_DIR/alt-TAG-ext-...jsonl" ...
#
# OPSEL, MODEL, TAG, ALT (seconds per phase), NAMES, SECONDS, STEADY and FGS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
MODEL=${MODEL:-models/passive-200ms/model.json}
TAG=${TAG:-pooled200}
ALT=${ALT:-60}
SECONDS_RUN=${SECONDS_RUN:-300}
STEADY=${STEADY:-5}
FGS=${FGS:-ops,cubic,bbr}
mkdir -p "$OUT"
python3 research/generalisation/external_conditions.py --fields | while read -r name rate rtt buf; do
  if [[ -n "${NAMES:-}" && " $NAMES " != *" $name "* ]]; then continue; fi
  out="$OUT/alt$ALT-$TAG-$name.jsonl"
  if [[ -s "$out" ]]; then echo "$name: done ($out)"; continue; fi
  "$OPSEL" demo --pattern passive --model "$MODEL" --rate-mbps "$rate" --rtt-ms "$rtt" --buffer-bdp "$buf" \
    --bg "alt$ALT" --fg "$FGS" --steady "$STEADY" --seconds "$SECONDS_RUN" --json "$out.tmp"
  mv "$out.tmp" "$out"
done
