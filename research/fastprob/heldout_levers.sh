#!/bin/sh
# The held-out evaluation of the configuration research/fastprob/levers.py picked on
# transfers 1-1800 / 1801-2400 (docs/results/fastprob.md, "Shorter probes: the oracle
# ceiling and the gate levers"): a log-ratio target and error-regression gates of 10
# trees (model format version 3), trained on transfers 1-2400 and evaluated once on
# transfers 2401-3000 by the Rust core, all and per family, beside the fixed-n RF
# curve on the same transfers. Run from the repository root; needs the release
# `opsel` binary (cargo build --release -p opsel-cli) and numpy + scikit-learn.
#   sh research/fastprob/heldout_levers.sh [python]
# Writes into target/fastprob-levers/.
set -eu
PY=${1:-python3}
OPSEL=target/release/opsel
W=target/fastprob-levers
SRC=${SRC:-data/tput-logs/fastprob-100ms}
mkdir -p $W
{ zcat $SRC/transfers-*.jsonl.gz 2>/dev/null || true; cat $SRC/transfers.jsonl 2>/dev/null; } | head -n 3000 > $W/corpus3000.jsonl
$PY - "$W" <<'PYEOF'
import json, sys
w = sys.argv[1]
lines = open(f"{w}/corpus3000.jsonl").read().splitlines()
assert len(lines) == 3000, len(lines)
for fam in ("lan", "wan", "shared"):
    open(f"{w}/test-{fam}.jsonl", "w").write("\n".join(l for l in lines[2400:] if json.loads(l)["family"] == fam) + "\n")
PYEOF
[ -f $W/pick-v3.json ] || $PY bindings/python/python/opsel/train_fastprob.py train --logs $W/corpus3000.jsonl \
    --features ratio+stats --cap 50 --last-gate-n 49 --gate-every 5 --trees 12 --depth 8 --min-samples-leaf 3 \
    --label-error-pct 5 --gate-labels oof --target log --gate error --stop-error-pct 5 --gate-trees 10 \
    --fixed-n "" --skip-cv -o $W/pick-v3.json --report $W/report-pick-v3.json
ls -l $W/pick-v3.json
$OPSEL lab fastprob-eval --model $W/pick-v3.json --logs $W/corpus3000.jsonl --fixed-n 50 --json $W/eval-v3-all.json
for f in lan wan shared; do
  $OPSEL lab fastprob-eval --model $W/pick-v3.json --logs $W/test-$f.jsonl --from-fraction 0 --fixed-n 50 --json $W/eval-v3-$f.json
done
[ -f $W/curve-test.jsonl ] || $PY research/fastprob/fixed_curve.py --corpus $W/corpus3000.jsonl --split 1800,2400 \
    --slice test --trees 20 --lengths 10,15,20,25,30,35,40,45,50,55,60 > $W/curve-test.jsonl
# Saving against the fixed-n RF of equal held-out error (complete.py's envelope).
$PY - "$W" <<'PYEOF'
import json, os, sys
sys.path.insert(0, "research/fastprob")
from complete import envelope, l_eq
w = sys.argv[1]
env = envelope([json.loads(l) for l in open(f"{w}/curve-test.jsonl") if l.strip()])
for part in ("all", "lan", "wan", "shared"):
    s = json.load(open(f"{w}/eval-v3-{part}.json"))[0]["summary"]
    line = f"{part}: MAPE {s['mape_pct']:.2f} % at {s['mean_probe_s']:.2f} s, median {s['median_error_pct']:.2f} %, " \
           f"> 50 % {s['over_50_pct']:.1f} %, forced {s['forced_pct']:.1f} %"
    if part == "all":
        le = l_eq(env, s["mape_pct"])
        line += f"; fixed-n RF equal-error {le:.2f} s, saving {(1 - s['mean_probe_s'] / le) * 100:.1f} %"
    print(line)
print(f"model file {os.path.getsize(f'{w}/pick-v3.json')} bytes")
PYEOF
