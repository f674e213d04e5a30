"""Markdown tables of docs/results/fastprob.md from `opsel lab fastprob-eval --json`
outputs written by research/fastprob/heldout.sh (eval-{final,raw,xfam}-{all,lan,wan,shared}.json
in the folder given). Run::

    python research/fastprob/tables.py target/fastprob
"""

import json
import sys

ROWS = [
    ("FastProb, shipped (ratio+stats, gates every 5)", "final", "FastProb"),
    ("FastProb, 004-faithful (raw samples, gate at every length)", "raw", "FastProb"),
    ("fixed-n RF n = 3", "final", "fixed-n RF n=3"),
    ("fixed-n RF n = 10", "final", "fixed-n RF n=10"),
    ("fixed-n RF n = 30", "final", "fixed-n RF n=30"),
    ("fixed-n RF n = 45", "final", "fixed-n RF n=45"),
    ("closeness θ = 5 %", "final", "closeness θ=5%"),
    ("AR(3), 5 %, cap 45", "final", "AR(3) 5% cap 45"),
    ("last-4 mean at 45 samples", "final", "last-4 mean at 45"),
    ("fixed duration 8 samples", "final", "fixed duration 8 intervals"),
    ("fixed size", "final", "fixed size"),
]


def load(d, run, part):
    try:
        return {r["method"]: r["summary"] for r in json.load(open(f"{d}/eval-{run}-{part}.json"))}
    except FileNotFoundError:
        return {}


def find(rows, name):
    for k, v in rows.items():
        if k == name or (name == "fixed size" and k.startswith("fixed size")):
            return v
    return None


def print_tables(d, rows, held_out, per_family=""):
    """The overall table (`held_out` names the slice) and the per-family table
    (`per_family`: the transfers per family, appended to each family's header)."""
    print(f"| method ({held_out}) | MAPE % | median error % | mean probe s | error > 50 % | forced % |")
    print("|---|---|---|---|---|---|")
    for label, run, name in rows:
        s = find(load(d, run, "all"), name)
        if s:
            print(f"| {label} | {s['mape_pct']:.2f} | {s['median_error_pct']:.2f} | {s['mean_probe_s']:.2f} | "
                  f"{s['over_50_pct']:.1f} % | {s['forced_pct']:.1f} |")
    print()
    print(f"| method | `lan`{per_family} | `wan`{per_family} | `shared`{per_family} |")
    print("|---|---|---|---|")
    for label, run, name in rows:
        cells = []
        for fam in ("lan", "wan", "shared"):
            s = find(load(d, run, fam), name)
            cells.append("" if not s else f"{s['mape_pct']:.1f} at {s['mean_probe_s']:.2f} s; {s['over_50_pct']:.1f} %")
        print(f"| {label} | " + " | ".join(cells) + " |")


def main(d):
    print_tables(d, ROWS, "held-out 408", " (136)")
    print()
    print("| held-out family | FastProb trained without it | same family's model (shipped) | fixed-n RF n = 45 trained without it |")
    print("|---|---|---|---|")
    for fam in ("lan", "wan", "shared"):
        x = find(load(d, "xfam", fam), "FastProb")
        f = find(load(d, "final", fam), "FastProb")
        r = find(load(d, "xfam", fam), "fixed-n RF n=45")
        if x and f and r:
            print(f"| `{fam}` | {x['mape_pct']:.1f} at {x['mean_probe_s']:.2f} s; {x['over_50_pct']:.1f} % | "
                  f"{f['mape_pct']:.1f} at {f['mean_probe_s']:.2f} s | {r['mape_pct']:.1f} at 4.50 s |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/fastprob")
