#!/usr/bin/env bash
# OPS with the transfer's own TCP_INFO RTT against OPS with UDP echoes, same condition, same
# model, same backgrounds: does the probe that needs nothing at the peer decide as well?
# Passive probing (the foreground keeps sending, so its srtt stays fresh). Resumable.
#
#   research/generalisation/rtt_source_ops.sh [OUT_DIR]   (root; ~16 min per source)
#
# RATE, RTT, BUFFER (× BDP), NAME, SOURCES, OPSEL, MODEL, RUN_SECONDS, MEASURE_FROM override the defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-research/results/generalisation}
OPSEL=${OPSEL:-./target/release/opsel}
MODEL=${MODEL:-models/passive/model.json}
RATE=${RATE:-100}; RTT=${RTT:-65}; BUFFER=${BUFFER:-0.5}; NAME=${NAME:-default}
RUN_SECONDS=${RUN_SECONDS:-460}
MEASURE_FROM=${MEASURE_FROM:-60}
mkdir -p "$OUT"
for src in ${SOURCES:-udp tcp-info}; do
  md="$OUT/rtt-source-$NAME-$src.md"
  if [[ -s "$md" ]]; then echo "$NAME $src: done ($md)"; continue; fi
  echo "$NAME $src: $RATE Mbit/s, $RTT ms, $BUFFER x BDP"
  rm -f "$OUT/rtt-source-$NAME-$src.jsonl"
  "$OPSEL" demo --pattern passive --model "$MODEL" --rate-mbps "$RATE" --rtt-ms "$RTT" --buffer-bdp "$BUFFER" \
    --bg cubic,bbr --fg ops --rtt "$src" --seconds "$RUN_SECONDS" --measure-from "$MEASURE_FROM" \
    --json "$OUT/rtt-source-$NAME-$src.jsonl" --markdown "$md.tmp"
  mv "$md.tmp" "$md"
done
