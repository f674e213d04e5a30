"""Markdown tables of docs/results/fastprob.md, "On the complete corpus", from the
`opsel lab fastprob-eval --json` outputs and the held-out fixed-n RF curve written by
research/fastprob/heldout_complete.sh. Run::

    python research/fastprob/tables_complete.py target/fastprob3000
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from complete import envelope, l_eq  # noqa: E402
from tables import find, load, print_tables  # noqa: E402

ROWS = [
    ("FastProb, picked on validation", "pick", "FastProb"),
    ("FastProb, shipped configuration retrained on 1–2400 (more data)", "more", "FastProb"),
    ("FastProb, model shipped before (trained on 1–1632)", "prev", "FastProb"),
    ("fixed-n RF n = 3", "more", "fixed-n RF n=3"),
    ("fixed-n RF n = 10", "more", "fixed-n RF n=10"),
    ("fixed-n RF n = 30", "more", "fixed-n RF n=30"),
    ("fixed-n RF n = 45", "more", "fixed-n RF n=45"),
    ("closeness θ = 5 %", "more", "closeness θ=5%"),
    ("AR(3), 5 %, cap 45", "more", "AR(3) 5% cap 45"),
    ("last-4 mean at 45 samples", "more", "last-4 mean at 45"),
    ("fixed duration 8 samples", "more", "fixed duration 8 intervals"),
    ("fixed size", "more", "fixed size"),
]


def main(d):
    print_tables(d, ROWS, "held-out 600")
    print()
    curve = [json.loads(l) for l in open(f"{d}/curve-test.jsonl") if l.strip()]
    print("fixed-n RF held-out curve (n: all / lan / wan / shared MAPE %):")
    for r in curve:
        f = r["rf_by_family"]
        print(f"  n = {r['n']}: {r['rf']:.2f} / {f['lan']:.2f} / {f['wan']:.2f} / {f['shared']:.2f}")
    env = envelope(curve)
    for run in ("pick", "more", "prev"):
        s = find(load(d, run, "all"), "FastProb")
        if s:
            le = l_eq(env, s["mape_pct"])
            sav = "n/a" if le is None else f"{(1 - s['mean_probe_s'] / le) * 100:.1f} %"
            print(f"{run}: {s['mape_pct']:.2f} % at {s['mean_probe_s']:.2f} s; fixed-n RF equal-error length "
                  f"{'n/a' if le is None else f'{le:.2f} s'}; saving {sav}")


if __name__ == "__main__":
    main(sys.argv[1])
