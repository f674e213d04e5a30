#!/bin/sh
# The fresh held-out slice, transfers 4601-5200, read once for the pick of
# inferred_family.py (docs/results/fastprob.md, "A family the probe infers itself"):
# the pooled error gate with the regressor's tree spread (log:pool16d8:sd) whose budget
# follows the family an 8-tree, depth-4 classifier infers from the probe's own prefix
# (soft: lan 8 %, wan 6 %, shared 3 %, weighted by the predicted probabilities).
# The pick and the deployable one-budget pick (the same gate at E 4 %, deployable.py)
# are trained on transfers 1-4600 through the trainer (train_fastprob.py: the exported
# version-4 files are what the Rust core runs) and scored once on 4601-5200 by the Rust
# core (opsel lab fastprob-eval) beside the shipped file and the fixed-n RF curve
# fitted on 1-4600; the harness (inferred_family.py heldout) refits both on the same
# transfers.
#
#   sh research/fastprob/heldout_inferred.sh PYTHON CORPUS_FOLDER OPSEL_BINARY WORK [TRAIN_END END]
#
# CORPUS_FOLDER is the recorded plan's folder (data/tput-logs/fastprob-100ms); only
# complete lines with seq < END (default 5200) are read, and slice_corpus.py stops the
# script unless every one of them is there: run it once transfers 4601-5200 are all
# recorded. OPSEL_BINARY must read model format version 4 with a family_classifier.
# WORK is a scratch folder. TRAIN_END END = 4000 4600 checks the plumbing on transfers
# every earlier choice has read (fold D of the search): not a held-out score.
set -eu
PY=$1
FOLDER=$2
OPSEL=$3
W=$4
TR=${5:-4600}
END=${6:-5200}
D=$(dirname "$0")
TRAINER="$D/../../bindings/python/python/opsel/train_fastprob.py"
# The pick (inferred_family.py pick, results/inferred-pick-val.txt).
GATE_FLAGS="--gate-layout pooled --gate-inputs sd --gate-trees 16 --gate-depth 8 --gate-min-samples-leaf 3"
PICK_FLAGS="--stop-error-pct 4 --family-budgets {\"lan\":8,\"wan\":6,\"shared\":3} --family-classifier 8,4 --family-mode soft"
# The deployable one-budget pick (deployable.py): the same gate, E 4 % for every network.
ONE_FLAGS="--stop-error-pct 4"
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
# Both through the trainer on 1..TRAIN_END; each report scores the fresh transfers with
# scikit-learn (the trainer's own loop on the same fitted model).
for m in pick one; do
    if [ "$m" = pick ]; then FLAGS=$PICK_FLAGS; else FLAGS=$ONE_FLAGS; fi
    # shellcheck disable=SC2086
    $PY "$TRAINER" train --logs "$W/corpus$END.jsonl" --train-count "$TR" \
        --features ratio+stats --cap 50 --last-gate-n 49 --gate-every 5 --trees 12 --depth 8 \
        --min-samples-leaf 3 --label-error-pct 5 --gate-labels oof --target log --gate error \
        $GATE_FLAGS $FLAGS --fixed-n "" --skip-cv -o "$W/$m.json" --report "$W/$m-report.json"
    echo "== $m file: $(wc -c < "$W/$m.json") bytes (the rule's limit: 2000000)"
done
# The Rust core: the pick's file, the one-budget file and the shipped file, all and per family.
for m in pick one shipped; do
    if [ "$m" = shipped ]; then MODEL="$D/../../models/fastprob-netlab/model.json"; else MODEL="$W/$m.json"; fi
    for s in "" -lan -wan -shared; do
        echo "== $m file on fresh$s (Rust core)"
        "$OPSEL" lab fastprob-eval --model "$MODEL" --logs "$W/fresh$s.jsonl" --from-fraction 0 --fixed-n 50 \
            --json "$W/core-$m$s.json"
    done
    $PY "$D/deployable.py" core --label "$m" --curve "$W/curve-fresh.jsonl" --all "$W/core-$m.json" \
        --fams "$W/core-$m-lan.json,$W/core-$m-wan.json,$W/core-$m-shared.json" --json "$W/core-$m-summary.json"
done
# The harness (research folds' code): both refitted on 1..TRAIN_END.
$PY "$D/spread.py" cache --corpus "$W/corpus$END.jsonl" --split "$TR,$END" --targets log --out "$W/fresh.npz"
$PY "$D/inferred_family.py" heldout --cache "$W/fresh.npz" --corpus "$W/corpus$END.jsonl" \
    --curve "$W/curve-fresh.jsonl" --json "$W/harness.json"
