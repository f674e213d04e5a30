#!/usr/bin/env bash
# OPS with a path's own 5-sample-a-second model at the grid-external conditions
# (external_conditions.py, seed 16): `opsel calibrate --sample-ms 200 --window-s 10` records the
# six mixes at the condition (12 windows of 10 s per class, the condition's own buffer unless
# BUFFERS is set) and writes the model; then `opsel demo` runs OPS with it (10-s probes,
# Y = STEADY s) against a static CUBIC and a static BBR background, in new labs. A decision is
# right when its CCA is the background's. Resumable: a calibrated corpus is reused (the command
# records nothing twice) and a condition whose demo result exists is skipped.
#
#   research/generalisation/calibrated_ops.sh [OUT_DIR]      (root; ~8 min to calibrate, ~8 min of OPS per condition)
#   python3 research/ops-gate/live_summary.py "calibrated 200 ms=OUT_DIR/cal-ext-...-ops.jsonl" ...
#
# OPSEL, NAMES (space-separated condition names), BUFFERS, WINDOWS, OPS_SECONDS and STEADY override the
# defaults; TAG is appended to the result names (e.g. TAG=-b0.25,1 for a run with BUFFERS=0.25,1).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
WINDOWS=${WINDOWS:-12}
OPS_SECONDS=${OPS_SECONDS:-200}     # 10-s probes and Y = 5 s: about 12 decisions per background
STEADY=${STEADY:-5}
mkdir -p "$OUT"
python3 research/generalisation/external_conditions.py --fields | while read -r name rate rtt buf; do
  if [[ -n "${NAMES:-}" && " $NAMES " != *" $name "* ]]; then continue; fi
  out="$OUT/cal-$name${TAG:-}-ops.jsonl"
  if [[ -s "$out" ]]; then echo "$name: done ($out)"; continue; fi
  model="$OUT/cal-$name${TAG:-}-200ms.json"
  echo "$name: calibrating at $rate Mbit/s, $rtt ms, buffers ${BUFFERS:-$buf} x BDP"
  /usr/bin/time -f "calibrate: %e s" "$OPSEL" calibrate --rtt-ms "$rtt" --rate-mbps "$rate" --buffers "${BUFFERS:-$buf}" \
    --sample-ms 200 --window-s 10 --windows "$WINDOWS" --jobs 2 --corpus data/calibrate --out "$model"
  "$OPSEL" demo --pattern passive --model "$model" --rate-mbps "$rate" --rtt-ms "$rtt" --buffer-bdp "$buf" \
    --bg cubic,bbr --fg ops --steady "$STEADY" --seconds "$OPS_SECONDS" --json "$out.tmp"
  mv "$out.tmp" "$out"
done
