"""What OPS decides from each model's 6-class label, per held-out condition: the background
decision under leave-one-condition-out (LOCO).

With passive probing the transfer keeps sending while the window fills, so the window holds its
own flow (``Classifier::counts_own_flow``): the controller asks the stump (000 §4.1: BBR in the
background → BBR, otherwise CUBIC) about the recognised mix minus one flow of the CCA the socket
sent with (``Mix::without_one``; the mix as it is when it has no such flow). The decision thus
depends on the 6-class label, not on "BBR present" alone: a transfer on BBR next to a BBR
background makes a B1-B1 window, and a B1-C1 label there (one flow fewer: C1) turns it to CUBIC.

The six steady states of passive OPS, each a recorded class with the foreground's CCA and the
right decision (the recorder's classes count the background flows; the foreground is one of
them):

| window | foreground | background | right |
|---|---|---|---|
| B0-C1 | cubic | none | cubic |
| C1-C1 | cubic | CUBIC | cubic |
| B1-C1 | cubic | BBR | bbr |
| B1-C0 | bbr | none | cubic |
| B1-C1 | bbr | CUBIC | cubic |
| B1-B1 | bbr | BBR | bbr |

B0-C0 (an idle path) has no foreground and is left out. A condition's score is the mean over the
six states of the share of windows decided right; ``BG CUBIC`` and ``BG BBR`` are the two states a
run against a static background settles in once OPS has chosen right (C1-C1 on CUBIC, B1-B1 on
BBR).

Rules compared, every one already fixed elsewhere (nothing is chosen here):

- ``one stage``: the 1-NN divide-min DTW class (``models/passive-200ms``);
- ``two stage``: the shipped two-stage rule (``models/passive-200ms-two-stage``: stage 1 above,
  stage 2 the z-sorted 7-NN with a quarter of D1; ``stage2_search.py``);
- ``steps, one stage``: the 1-NN class under D1 / s1 + 0.25 · F / sF, F the step-distribution
  distance (``percond.py``'s picked stage 1);
- ``steps, two stage``: that stage 1 with the shipped stage 2 (``percond.py``'s pick).

``--fresh ROOT`` scores the same rules, trained on every search-corpus condition but the held-out
one, on the windows recorded after the corpus (as ``percond.py --fresh``).

Usage::

    git archive 5ad2bb6 data/collect | tar -x -C SNAP
    .venv/bin/python research/generalisation/ops_decision.py SNAP/data/collect --fresh data/collect
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import percond  # noqa: E402
from percond import FEATURES, SORTED, Scales, corpus, matrices, pairwise  # noqa: E402
from resolution import BBR, SIX_CLASSES  # noqa: E402
from stage2_search import fresh_windows, vote  # noqa: E402
from two_stage import REPS  # noqa: E402

K, A, B = 7, 0.25, 0.25  # the shipped stage 2 (k, weight of D1) and the step term's weight
IDX = {c: i for i, c in enumerate(SIX_CLASSES)}
# (window class, foreground CCA, right decision is bbr)
STATES = [("B0-C1", "cubic", False), ("C1-C1", "cubic", False), ("B1-C1", "cubic", True),
          ("B1-C0", "bbr", False), ("B1-C1", "bbr", False), ("B1-B1", "bbr", True)]
RULES = ["one stage", "two stage", "steps, one stage", "steps, two stage"]


def counts(label):
    """(bbr, cubic) flows of a class label such as ``B1-C1``; ``B1-B1`` is two BBR flows and
    ``C1-C1`` two CUBIC flows (000 Table 6.1)."""
    if label == "B1-B1":
        return 2, 0
    if label == "C1-C1":
        return 0, 2
    b, c = label.split("-")
    return int(b[1:]), int(c[1:])


def decides_bbr(pred: str, fg: str) -> bool:
    """The stump on the predicted mix minus one flow of ``fg`` (the mix as it is without one)."""
    b, c = counts(pred)
    if fg == "bbr" and b > 0:
        b -= 1
    elif fg == "cubic" and c > 0:
        c -= 1
    return b > 0


DECIDES = {fg: np.array([decides_bbr(p, fg) for p in SIX_CLASSES]) for fg in ("cubic", "bbr")}


def predict(rows, ref, y, sc, excl):
    """The four rules' 6-class labels for query rows ``rows`` (distance rows against the corpus)."""
    d1 = rows["D1"] / sc.get("D1", excl)
    c1 = d1 + B * rows["diff"] / sc.get("diff", excl)
    side = BBR[y]
    out = {}
    s2 = rows["z-sorted"] / sc.get("z-sorted", excl) + A * d1
    two = [vote(np.where((ref & (side == sd))[None, :], s2, np.inf), y, K) for sd in (False, True)]
    for name, s1 in (("", d1), ("steps, ", c1)):
        nn = y[np.argmin(np.where(ref[None, :], s1, np.inf), axis=1)]
        out[name + "one stage"] = nn
        out[name + "two stage"] = np.where(BBR[nn], two[1], two[0])
    return out


def state_scores(yt, p):
    """Share decided right in each of the six states (NaN where the class has no windows)."""
    r = []
    for cls, fg, right in STATES:
        m = yt == IDX[cls]
        r.append(float(np.mean(DECIDES[fg][p[m]] == right)) if m.any() else np.nan)
    return r


def table(title, names, per):
    print(f"\n{title}\n\n| held out | " + " | ".join(RULES) + " |\n|---|" + "---|" * len(RULES))
    for i, n in enumerate(names):
        print(f"| `{n}` | " + " | ".join(f"{100 * np.nanmean(per[r][i]):.1f}" for r in RULES) + " |")
    print("| **median** | " + " | ".join(
        f"**{100 * np.median([np.nanmean(v) for v in per[r]]):.1f}**" for r in RULES) + " |")
    print("| conditions ≥ 95 % | " + " | ".join(
        f"{sum(np.nanmean(v) >= 0.95 for v in per[r])} of {len(names)}" for r in RULES) + " |")
    print("| lowest | " + " | ".join(f"{100 * min(np.nanmean(v) for v in per[r]):.1f}" for r in RULES) + " |")
    for k, (cls, fg, right) in enumerate(STATES):
        print(f"| state {cls}, foreground {fg} (median) | " + " | ".join(
            f"{100 * np.nanmedian([v[k] for v in per[r]]):.1f}" for r in RULES) + " |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("--fresh", help="score the windows of ROOT recorded after the corpus")
    ap.add_argument("--cache", default="target/loco-cache")
    a = ap.parse_args(argv)
    conds, names, X, y, cond = corpus(a.root)
    M = matrices(X, a.cache)
    sc = Scales(M, cond)
    per = {r: [] for r in RULES}
    for j in range(len(names)):
        te = np.flatnonzero(cond == j)
        P = predict({k: v[te] for k, v in M.items()}, cond != j, y, sc, (j,))
        for r in RULES:
            per[r].append(state_scores(y[te], P[r]))
    table(f"Plain LOCO over {len(names)} conditions, {len(y)} windows: the background decision right, "
          "mean over the six states (%)", names, per)
    if a.fresh:
        fresh(a, conds, names, X, y, cond, M, sc)


def fresh(a, conds, names, X, y, cond, M, sc):
    from dtaidistance import dtw

    Xn, yn, cn = fresh_windows(a.fresh, conds, names, 10, 3)
    m = len(Xn)
    Q = np.ascontiguousarray(REPS["divide-min"](np.concatenate([Xn, X])))
    rows = {"D1": dtw.distance_matrix_fast(Q, block=((0, m), (m, len(Q))), window=26,
                                           inner_dist="euclidean", compact=False)[:m, m:]}
    rows["z-sorted"] = pairwise(SORTED["z-sorted"](Xn), SORTED["z-sorted"](X))
    rows["diff"] = pairwise(FEATURES["diff"](Xn), FEATURES["diff"](X))
    held = sorted(set(cn.tolist()))
    per = {r: [] for r in RULES}
    for i in held:
        te = np.flatnonzero(cn == i)
        P = predict({k: v[te] for k, v in rows.items()}, cond != i, y, sc, (i,))
        for r in RULES:
            per[r].append(state_scores(yn[te], P[r]))
    table(f"Fresh windows ({m} at {len(held)} conditions, recorded after the corpus): the background "
          "decision right, mean over the six states (%)", [names[i] for i in held], per)


if __name__ == "__main__":
    percond.np.seterr(invalid="ignore")
    main()
