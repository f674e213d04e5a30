#!/bin/sh
# The fresh held-out slice, transfers 3001-3600, read once for the pick of scale.py
# (docs/results/fastprob.md, "Absolute scale, Bayesian optimisation and a pooled gate").
# Models, gates and the fixed-n RF are fitted on transfers 1-3000 (scale.py's shipping rule).
#
#   sh research/fastprob/heldout_fresh.sh PYTHON CORPUS_FOLDER OPSEL_BINARY WORK
#
# CORPUS_FOLDER is the recorded plan's folder (data/tput-logs/fastprob-100ms); only
# complete lines with seq < 3600 are read. WORK is a scratch folder.
set -eu
PY=$1
FOLDER=$2
OPSEL=$3
W=$4
D=$(dirname "$0")
mkdir -p "$W"
$PY "$D/slice_corpus.py" "$FOLDER" --upto 3600 -o "$W/corpus3600.jsonl"
$PY "$D/fixed_curve.py" --corpus "$W/corpus3600.jsonl" --split 2400,3000 --slice test --trees 20 \
    --lengths 10,15,20,25,30,35,40,45,50,55,60 > "$W/curve-fresh.jsonl"
$PY "$D/scale.py" cache --corpus "$W/corpus3600.jsonl" --split 3000,3600 --out "$W/scale-fresh.npz"
# The pick (decides) and, for reference, the runner-up on validation with the same budgets.
$PY "$D/scale.py" heldout --cache "$W/scale-fresh.npz" --corpus "$W/corpus3600.jsonl" \
    --curve "$W/curve-fresh.jsonl" --variant log:g11-9-24-0.63:hist,log:pool16d8:abs \
    --budgets '{"lan": 10, "wan": 5, "shared": 8}' --family-caps 10 \
    --thr 'per-family, cap 10;E 5 %' --json "$W/fresh-pick.json"
# References: the history section's pick and the same gates without history (their budgets),
# and the shipped configuration refitted on 1-3000 (the rule's comparator).
$PY "$D/scale.py" heldout --cache "$W/scale-fresh.npz" --corpus "$W/corpus3600.jsonl" \
    --curve "$W/curve-fresh.jsonl" --variant log:err8:hist,log:err8:none \
    --budgets '{"lan": 10, "wan": 5, "shared": 6}' --family-caps 10 \
    --thr 'per-family, cap 10' --json "$W/fresh-hist.json"
$PY "$D/scale.py" heldout --cache "$W/scale-fresh.npz" --corpus "$W/corpus3600.jsonl" \
    --curve "$W/curve-fresh.jsonl" --variant ratio:clf:none --thr '0.5' --json "$W/fresh-shipped-refit.json"
# The shipped file itself (trained on 1-2400), by the Rust core, all and per family.
tail -n 600 "$W/corpus3600.jsonl" > "$W/fresh.jsonl"
for f in lan wan shared; do
    grep "\"family\":\"$f\"\|\"family\": \"$f\"" "$W/fresh.jsonl" > "$W/fresh-$f.jsonl"
done
for s in "" -lan -wan -shared; do
    echo "== shipped file on fresh$s"
    "$OPSEL" lab fastprob-eval --model "$(dirname "$0")/../../models/fastprob-netlab/model.json" \
        --logs "$W/fresh$s.jsonl" --from-fraction 0 --fixed-n 50
done
