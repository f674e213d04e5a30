#!/bin/sh
# The held-out tables of docs/results/fastprob.md, "On the complete corpus":
# transfers 2401-3000 of data/tput-logs/fastprob-100ms in recording order.
# Trained models already in target/fastprob3000 (more.json, pick.json) are reused.
# Run from the repository root after the search (research/fastprob/complete.py);
# writes into target/fastprob3000/. Needs the release `opsel` binary
# (cargo build --release -p opsel-cli) and numpy + scikit-learn.
#   PICK="--features ratio+stats --cap 50 --last-gate-n 49 --gate-every 5 --trees 12 --depth 8 \
#         --min-samples-leaf 3 --label-error-pct 5 --gate-labels oof" \
#   sh research/fastprob/heldout_complete.sh [python]
# (SRC=<folder> reads the recorded plan from elsewhere; default data/tput-logs/fastprob-100ms.)
set -eu
PY=${1:-python3}
OPSEL=target/release/opsel
TRAIN="$PY bindings/python/python/opsel/train_fastprob.py train"
W=target/fastprob3000
SRC=${SRC:-data/tput-logs/fastprob-100ms}
mkdir -p $W
# The corpus: the 3 000 recorded transfers in recording order (gzip segments, then the plain tail).
{ zcat $SRC/transfers-*.jsonl.gz 2>/dev/null || true; cat $SRC/transfers.jsonl 2>/dev/null; } | head -n 3000 > $W/corpus3000.jsonl
# Held out: transfers 2401-3000 (the trainer's last 20 %), per family.
$PY - "$W" <<'PYEOF'
import json, sys
w = sys.argv[1]
lines = open(f"{w}/corpus3000.jsonl").read().splitlines()
assert len(lines) == 3000, len(lines)
for fam in ("lan", "wan", "shared"):
    open(f"{w}/test-{fam}.jsonl", "w").write("\n".join(l for l in lines[2400:] if json.loads(l)["family"] == fam) + "\n")
PYEOF
SHIPPED="--features ratio+stats --cap 45 --last-gate-n 44 --gate-every 5 --trees 20 --depth 8 --min-samples-leaf 3 --label-error-pct 5"
# "More data": the configuration shipped before, unchanged, trained on transfers 1-2400
# (the trainer's time-ordered 80 %).
[ -f $W/more.json ] || $TRAIN --logs $W/corpus3000.jsonl $SHIPPED --fixed-n 3,10,30 --skip-cv -o $W/more.json --report $W/report-more.json
# The configuration complete.py picked on the validation slice (see the doc), trained on 1-2400.
PICK=${PICK:?set PICK to the trainer flags of the picked configuration}
[ -f $W/pick.json ] || $TRAIN --logs $W/corpus3000.jsonl $PICK --fixed-n 3,10,30 --skip-cv -o $W/pick.json --report $W/report-pick.json
# prev: the model shipped before (commit c9d3d91, trained on transfers 1-1632); it never saw 2401-3000 either.
PREV=${PREV:-$W/prev.json}
[ -f "$PREV" ] || git show c9d3d91:models/fastprob-netlab/model.json > "$PREV"
for run in prev more pick; do
  m=$W/$run.json; [ $run = prev ] && m=$PREV
  # The fixed-n RF rows of the tables come from the cap-45 models (stages 3, 10, 30, 45).
  fx=3,10,30,45; [ $run = pick ] && fx=3,10,30
  $OPSEL lab fastprob-eval --model $m --logs $W/corpus3000.jsonl --fixed-n $fx --json $W/eval-$run-all.json
  for f in lan wan shared; do
    $OPSEL lab fastprob-eval --model $m --logs $W/test-$f.jsonl --from-fraction 0 --fixed-n $fx --json $W/eval-$run-$f.json
  done
done
# The fixed-n RF error curve on the held-out transfers (trained on 1-2400, 20 trees of depth 8).
$PY research/fastprob/fixed_curve.py --corpus $W/corpus3000.jsonl --split 1800,2400 --slice test --trees 20 \
    --lengths 10,15,20,25,30,35,40,45,50,55,60 > $W/curve-test.jsonl
$PY research/fastprob/tables_complete.py $W
