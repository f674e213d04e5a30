"""The cross-family table of docs/results/fastprob.md ("On the complete corpus",
"Cross-family transfer") from the `opsel lab fastprob-eval --json` outputs written by
research/fastprob/xfam_complete.sh. Run::

    python research/fastprob/xfam_tables.py target/xfam
"""

import json
import sys


def load(d, run, fam):
    return {r["method"]: r["summary"] for r in json.load(open(f"{d}/eval-{run}-{fam}.json"))}


def cell(s, probe=True):
    p = f" at {s['mean_probe_s']:.2f} s" if probe else ""
    return f"{s['mape_pct']:.1f}{p} (median {s['median_error_pct']:.1f}); {s['over_50_pct']:.1f} % > 50 %"


def main(d):
    print("| held-out family (200) | FastProb trained without it | FastProb, shipped (trained with it) "
          "| fixed-n RF n = 45 / 50 trained without it | fixed-n RF n = 45 / 50 trained with it |")
    print("|---|---|---|---|---|")
    for fam in ("lan", "wan", "shared"):
        no, sh, w = load(d, "no", fam), load(d, "shipped", fam), load(d, "with", fam)
        # The with-F model differs from the shipped file only by its extra n = 45 stage.
        assert abs(w["FastProb"]["mape_pct"] - sh["FastProb"]["mape_pct"]) < 1e-9, fam
        assert abs(w["FastProb"]["mean_probe_s"] - sh["FastProb"]["mean_probe_s"]) < 1e-9, fam
        rf = lambda r: f"{r['fixed-n RF n=45']['mape_pct']:.1f} / {r['fixed-n RF n=50']['mape_pct']:.1f}"
        print(f"| `{fam}` | {cell(no['FastProb'])} | {cell(sh['FastProb'])} | {rf(no)} | {rf(w)} |")
    print()
    print("forced % (without / with):", ", ".join(
        f"{fam} {load(d, 'no', fam)['FastProb']['forced_pct']:.1f} / {load(d, 'shipped', fam)['FastProb']['forced_pct']:.1f}"
        for fam in ("lan", "wan", "shared")))
    for fam in ("lan", "wan", "shared"):
        r = json.load(open(f"{d}/report-no-{fam}.json"))
        t = r["test"]
        print(f"trainer without {fam}: {r['train']} train, its own test (the other two families' "
              f"held-out transfers, {t['transfers']}): {t['mape_pct']:.2f} % at {t['mean_probe_s']:.2f} s, "
              f"train {r['train_s']:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "target/xfam")
