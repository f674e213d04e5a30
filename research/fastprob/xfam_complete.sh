#!/bin/sh
# Cross-family transfer of the shipped configuration on the complete corpus
# (docs/results/fastprob.md, "On the complete corpus", "Cross-family transfer").
# For each family F: the shipped configuration trained on the other two families'
# transfers among 1-2400 (recording order kept), evaluated on F's transfers among
# 2401-3000 (the held-out transfers the shipped model was scored on), beside the
# shipped model (trained with F) and the same configuration trained with F plus a
# regressor-only stage at n = 45 (for the fixed-n RF rows).
# Run from the repository root; writes into target/xfam/. Needs the release `opsel`
# binary (cargo build --release -p opsel-cli) and numpy + scikit-learn.
#   sh research/fastprob/xfam_complete.sh [python]
# (SRC=<folder> reads the recorded plan from elsewhere; default data/tput-logs/fastprob-100ms.)
set -eu
PY=${1:-python3}
OPSEL=target/release/opsel
TRAIN="nice -n 10 $PY bindings/python/python/opsel/train_fastprob.py train"
W=target/xfam
SRC=${SRC:-data/tput-logs/fastprob-100ms}
mkdir -p $W
{ zcat $SRC/transfers-*.jsonl.gz 2>/dev/null || true; cat $SRC/transfers.jsonl 2>/dev/null; } | head -n 3000 > $W/corpus3000.jsonl
# test-F: F's transfers among 2401-3000. train-no-F: the other two families'
# transfers 1-3000 in recording order; the trainer fits on its first 80 %, which are
# exactly their transfers among 1-2400 (800 per family there, 200 after: asserted).
$PY - "$W" <<'PYEOF'
import json, sys
w = sys.argv[1]
lines = open(f"{w}/corpus3000.jsonl").read().splitlines()
assert len(lines) == 3000, len(lines)
fam = [json.loads(l)["family"] for l in lines]
for f in ("lan", "wan", "shared"):
    assert fam[:2400].count(f) == 800 and fam[2400:].count(f) == 200, f
    open(f"{w}/test-{f}.jsonl", "w").write("\n".join(l for l, g in zip(lines[2400:], fam[2400:]) if g == f) + "\n")
    rest = [i for i in range(3000) if fam[i] != f]
    assert rest[int(round(0.8 * len(rest))) - 1] < 2400 <= rest[int(round(0.8 * len(rest)))]
    open(f"{w}/train-no-{f}.jsonl", "w").write("\n".join(lines[i] for i in rest) + "\n")
PYEOF
SHIPPED="--features ratio+stats --cap 50 --last-gate-n 49 --gate-every 5 --trees 12 --depth 8 \
  --min-samples-leaf 3 --label-error-pct 5 --gate-labels oof --skip-cv"
# With F: the shipped configuration on 1-2400 plus a regressor-only stage at n = 45
# (stages are seeded by n alone, so its FastProb decisions are the shipped model's).
[ -f $W/with.json ] || $TRAIN --logs $W/corpus3000.jsonl $SHIPPED --fixed-n 45 -o $W/with.json --report $W/report-with.json
for f in lan wan shared; do
  [ -f $W/no-$f.json ] || $TRAIN --logs $W/train-no-$f.jsonl $SHIPPED --fixed-n 45 -o $W/no-$f.json --report $W/report-no-$f.json
  $OPSEL lab fastprob-eval --model $W/no-$f.json --logs $W/test-$f.jsonl --from-fraction 0 --fixed-n 45,50 --json $W/eval-no-$f.json
  $OPSEL lab fastprob-eval --model $W/with.json --logs $W/test-$f.jsonl --from-fraction 0 --fixed-n 45,50 --json $W/eval-with-$f.json
  $OPSEL lab fastprob-eval --model models/fastprob-netlab/model.json --logs $W/test-$f.jsonl --from-fraction 0 --fixed-n 50 --json $W/eval-shipped-$f.json
done
$PY research/fastprob/xfam_tables.py $W
