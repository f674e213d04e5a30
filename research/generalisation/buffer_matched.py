"""Leave one condition out at 5 samples a second, with references restricted to conditions whose
buffer (in BDP) is near the held-out one's.

At 5 samples a second, references recorded at another buffer misread a path while references at
the same buffer carry across rate and RTT (``cross_buffer.py``). The buffer of a path can be
measured from one end (``opsel calibrate --sink``: the largest RTT of a bulk CUBIC burst). This
scores 1-NN DTW on 10-s windows (50 samples, radius 25, divide-min) for every condition recorded
every 200 ms, held out in turn, with the references of every other condition whose buffer is within
a factor ``tol`` of its own (``inf``: every other condition). A condition with no reference of
every class within the factor is reported as not covered.

    .venv/bin/python research/generalisation/buffer_matched.py data/collect data/calibrate
"""

import math
import os
import sys

import numpy as np

import opsel
from opsel.train.data import SIX_CLASSES, dataset, find_traces_dir

W, RADIUS = 50, 25


def load(roots):
    out = {}
    for root in roots:
        for c in sorted(os.listdir(root)):
            d = os.path.join(root, c, "passive-200ms")
            if not os.path.isdir(d):
                continue
            tr = find_traces_dir(d)
            if {t.label for t in tr} != set(SIX_CLASSES):
                continue
            X, y = dataset(tr, W)
            if min(int(np.sum(y == k)) for k in SIX_CLASSES) < 2:
                continue
            m = tr[0].meta["conditions"]
            out[c] = dict(X=X, y=y, buffer=float(m["buffer_bdp"]), rate=float(m["rate_mbps"]),
                          rtt=float(m["rtt_ms"]))
    return out


def score(conds, held, tol):
    b = conds[held]["buffer"]
    refs = [c for c in conds if c != held and abs(math.log(conds[c]["buffer"] / b)) <= math.log(tol)]
    if not refs:
        return None
    X = np.concatenate([conds[c]["X"] for c in refs])
    y = np.concatenate([conds[c]["y"] for c in refs])
    if set(y) != set(SIX_CLASSES):
        return None
    classes = list(SIX_CLASSES)
    m = opsel.Model.fit(X, [classes.index(v) for v in y], classes, radius=RADIUS, normalization="divide-min",
                        sample_interval_ms=200.0)
    p = [q.label for q in m.classify_batch(conds[held]["X"])]
    t = conds[held]["y"]
    six = float(np.mean([u == v for u, v in zip(p, t)]))
    bbr = float(np.mean([("B1" in u) == ("B1" in v) for u, v in zip(p, t)]))
    return six, bbr, len(refs)


def main(roots):
    conds = load(roots)
    names = sorted(conds, key=lambda c: (conds[c]["buffer"], conds[c]["rate"]))
    tols = [1.25, 1.5, 2.0, math.inf]
    print(f"{len(conds)} conditions recorded every 200 ms, 10-s windows, 1-NN DTW radius 25, divide-min")
    print("6-class / BBR present % (conditions used as references); '-' = no reference of every class within the factor")
    print("")
    print("| held out | buffer × BDP | windows | " + " | ".join(f"within {t:g}×" if t != math.inf else "every buffer"
                                                         for t in tols) + " |")
    print("|---|---|---|" + "---|" * len(tols))
    per_tol = {t: [] for t in tols}
    for c in names:
        cells = []
        for t in tols:
            r = score(conds, c, t)
            if r is None:
                cells.append("-")
            else:
                per_tol[t].append(r)
                cells.append(f"{100 * r[0]:.0f} / {100 * r[1]:.0f} ({r[2]})")
        print(f"| `{c}` | {conds[c]['buffer']:g} | {len(conds[c]['y'])} | " + " | ".join(cells) + " |")
    print("| **median over the covered** | | | " + " | ".join(
        f"**{100 * np.median([r[0] for r in per_tol[t]]):.1f} / {100 * np.median([r[1] for r in per_tol[t]]):.1f}** "
        f"({len(per_tol[t])})" if per_tol[t] else "-" for t in tols) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
