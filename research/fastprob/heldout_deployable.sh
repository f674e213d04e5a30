#!/bin/sh
# The fresh held-out slice, transfers 4001-4600, read once for the pick of deployable.py
# (docs/results/fastprob.md, "A deployable gate: one budget, format version 4").
# The pick is trained on transfers 1-4000 through the trainer (train_fastprob.py: the exported
# version-4 file is what the Rust core runs) and scored once on 4001-4600 by the Rust core
# (opsel lab fastprob-eval) and by the harness (deployable.py heldout), beside the shipped
# file (Rust core), the shipped configuration refitted on 1-4000 (harness) and the fixed-n RF
# curve fitted on 1-4000 (deployable.py's shipping rule).
#
#   sh research/fastprob/heldout_deployable.sh PYTHON CORPUS_FOLDER OPSEL_BINARY WORK [TRAIN_END END]
#
# CORPUS_FOLDER is the recorded plan's folder (data/tput-logs/fastprob-100ms); only complete
# lines with seq < END (default 4600) are read, and slice_corpus.py stops the script unless
# every one of them is there: run it once transfers 4001-4600 are all recorded. OPSEL_BINARY
# must read model format version 4. WORK is a scratch folder. TRAIN_END END = 3600 4000
# checks the plumbing on transfers every earlier choice has read: not a held-out score.
set -eu
PY=$1
FOLDER=$2
OPSEL=$3
W=$4
TR=${5:-4000}
END=${6:-4600}
D=$(dirname "$0")
TRAINER="$D/../../bindings/python/python/opsel/train_fastprob.py"
# The pick (deployable.py pick, results/deployable-pick-val.txt): variant and uniform budget.
PICK_VARIANT="log:pool16d8:sd"
PICK_E=4
PICK_FLAGS="--gate-layout pooled --gate-inputs sd --gate-trees 16 --gate-depth 8 --gate-min-samples-leaf 3"
mkdir -p "$W"
$PY "$D/slice_corpus.py" "$FOLDER" --upto "$END" -o "$W/corpus$END.jsonl"
N=$((END - TR))
tail -n "$N" "$W/corpus$END.jsonl" > "$W/fresh.jsonl"
for f in lan wan shared; do
    grep "\"family\":\"$f\"\|\"family\": \"$f\"" "$W/fresh.jsonl" > "$W/fresh-$f.jsonl"
done
# The fixed-n RF fitted on 1..TRAIN_END, scored on the fresh transfers (the saving's reference).
$PY "$D/fixed_curve.py" --corpus "$W/corpus$END.jsonl" --split $((TR - 600)),"$TR" --slice test --trees 20 \
    --lengths 10,15,20,25,30,35,40,45,50,55,60 > "$W/curve-fresh.jsonl"
# The pick through the trainer, on 1..TRAIN_END; its report scores the fresh transfers with
# scikit-learn (the trainer's own loop on the same fitted model).
# shellcheck disable=SC2086
$PY "$TRAINER" train --logs "$W/corpus$END.jsonl" --train-count "$TR" \
    --features ratio+stats --cap 50 --last-gate-n 49 --gate-every 5 --trees 12 --depth 8 \
    --min-samples-leaf 3 --label-error-pct 5 --gate-labels oof --target log --gate error \
    --stop-error-pct "$PICK_E" $PICK_FLAGS --fixed-n "" --skip-cv \
    -o "$W/pick.json" --report "$W/pick-report.json"
BYTES=$(wc -c < "$W/pick.json")
echo "== pick file: $BYTES bytes (the rule's limit: 2000000)"
# The Rust core: the pick's exported file and the shipped file, all and per family.
for m in pick shipped; do
    if [ "$m" = pick ]; then MODEL="$W/pick.json"; else MODEL="$D/../../models/fastprob-netlab/model.json"; fi
    for s in "" -lan -wan -shared; do
        echo "== $m file on fresh$s (Rust core)"
        "$OPSEL" lab fastprob-eval --model "$MODEL" --logs "$W/fresh$s.jsonl" --from-fraction 0 --fixed-n 50 \
            --json "$W/core-$m$s.json"
    done
    $PY "$D/deployable.py" core --label "$m" --curve "$W/curve-fresh.jsonl" --all "$W/core-$m.json" \
        --fams "$W/core-$m-lan.json,$W/core-$m-wan.json,$W/core-$m-shared.json" --json "$W/core-$m-summary.json"
done
# The harness (research folds' code): the pick's variant at its budget, refitted on 1..TRAIN_END,
# and the shipped configuration refitted the same way.
$PY "$D/spread.py" cache --corpus "$W/corpus$END.jsonl" --split "$TR,$END" --out "$W/fresh.npz"
$PY "$D/deployable.py" heldout --cache "$W/fresh.npz" --corpus "$W/corpus$END.jsonl" --curve "$W/curve-fresh.jsonl" \
    --run "$PICK_VARIANT=E $PICK_E %" --run "ratio:clf:none=0.5" --json "$W/harness.json"
