#!/bin/sh
# The fresh held-out slice, transfers 3601-4000, read once for the pick of spread.py
# (docs/results/fastprob.md, "Forest spread, quantile gates and a margin").
# Models, gates and the fixed-n RF are fitted on transfers 1-3600 (spread.py's shipping rule).
#
#   sh research/fastprob/heldout_spread.sh PYTHON CORPUS_FOLDER OPSEL_BINARY WORK
#
# CORPUS_FOLDER is the recorded plan's folder (data/tput-logs/fastprob-100ms); only
# complete lines with seq < 4000 are read. WORK is a scratch folder.
set -eu
PY=$1
FOLDER=$2
OPSEL=$3
W=$4
D=$(dirname "$0")
mkdir -p "$W"
$PY "$D/slice_corpus.py" "$FOLDER" --upto 4000 -o "$W/corpus4000.jsonl"
$PY "$D/fixed_curve.py" --corpus "$W/corpus4000.jsonl" --split 3000,3600 --slice test --trees 20 \
    --lengths 10,15,20,25,30,35,40,45,50,55,60 > "$W/curve-fresh.jsonl"
$PY "$D/spread.py" cache --corpus "$W/corpus4000.jsonl" --split 3600,4000 --out "$W/spread-fresh.npz"
# The pick (decides, with its joint budgets), then for reference: the pick's gates at a
# uniform E 5 %, the previous round's pick with its budgets, and the shipped configuration
# refitted on 1-3600 (the rule's comparator).
$PY "$D/spread.py" heldout --cache "$W/spread-fresh.npz" --corpus "$W/corpus4000.jsonl" \
    --curve "$W/curve-fresh.jsonl" \
    --run 'log:pool16d8:sd+abs={"lan": 12, "wan": 4, "shared": 6}' \
    --run "log:pool16d8:sd+abs=E 5 %" \
    --run 'log:g11-9-24-0.63:hist={"lan": 10, "wan": 5, "shared": 8}' \
    --run "ratio:clf:none=0.5" \
    --json "$W/spread-fresh.json"
# The shipped file itself (trained on 1-2400), by the Rust core, all and per family.
tail -n 400 "$W/corpus4000.jsonl" > "$W/fresh.jsonl"
for f in lan wan shared; do
    grep "\"family\":\"$f\"\|\"family\": \"$f\"" "$W/fresh.jsonl" > "$W/fresh-$f.jsonl"
done
for s in "" -lan -wan -shared; do
    echo "== shipped file on fresh$s"
    "$OPSEL" lab fastprob-eval --model "$D/../../models/fastprob-netlab/model.json" \
        --logs "$W/fresh$s.jsonl" --from-fraction 0 --fixed-n 50
done
