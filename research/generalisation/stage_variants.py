"""Two side questions of ``stage2_search.py``, in plain leave-one-condition-out (LOCO).

``stage1``: does anything lift "BBR present" (stage 1) at the worst conditions? Stage 1 as
shipped is 1-NN DTW on the divide-min window. Variants: a combined distance
d_dm / s_dm + b · d_x / s_x with x one of z-sorted (L1), minmax or z-score (DTW) and
b ∈ {0.25, 0.5, 1}, and a k-NN majority vote over the two sides, k ∈ {1, 3, 5, 7, 9}. Scales
as in stage2_search.py. Run on the 5-Hz search corpus (the snapshot of ``5ad2bb6``).

``hz1``: the z-sorted stage 2 on the 1 Hz passive corpus (``models/passive``: windows of
w = 40 at 1 Hz, DTW band 20), k ∈ {1, 3, 5, 7}, a ∈ {0, 0.25, 0.5, 1}.

    .venv/bin/python research/generalisation/stage_variants.py stage1 SNAP/data/collect
    .venv/bin/python research/generalisation/stage_variants.py hz1 data/collect
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resolution  # noqa: E402
from resolution import BBR, SIX_CLASSES, score  # noqa: E402
from stage2_search import Search, l1, scale, zsorted  # noqa: E402
from two_stage import REPS  # noqa: E402
from window_sweep import cached_matrix  # noqa: E402

CACHE = "target/loco-cache"


def stage1(root):
    conds = resolution.load(root, 10, 3)
    names = list(conds)
    X = np.concatenate([conds[c][0] for c in names])
    y = np.concatenate([conds[c][1] for c in names])
    cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
    D = {r: cached_matrix(REPS[r](X), 25, f"two-stage-{r}", CACHE) for r in ("divide-min", "minmax", "z-score")}
    D["z-sorted"] = l1(zsorted(X))
    side = BBR[y].astype(int)
    print(f"{len(names)} conditions, {len(y)} windows\n\n| stage 1 | k | BBR present median | lowest | "
          "conditions < 97 % |\n|---|---|---|---|---|")
    for extra in (None, "z-sorted", "minmax", "z-score"):
        for b in ((0.0,) if extra is None else (0.25, 0.5, 1.0)):
            for k in (1, 3, 5, 7, 9):
                bp = []
                for i in range(len(names)):
                    te, ref = np.flatnonzero(cond == i), cond != i
                    C = D["divide-min"][te] / scale(D["divide-min"], ref)
                    if extra:
                        C = C + b * D[extra][te] / scale(D[extra], ref)
                    C = np.where(ref[None, :], C, np.inf)
                    idx = np.argpartition(C, k - 1, axis=1)[:, :k]
                    bp.append(np.mean((side[idx].sum(1) * 2 > k) == BBR[y[te]]))
                bp = np.array(bp)
                label = "divide-min DTW" if extra is None else f"divide-min + {b:g} · {extra}"
                print(f"| {label} | {k} | {100 * np.median(bp):.1f} | {100 * bp.min():.1f} | {(bp < 0.97).sum()} |",
                      flush=True)


def hz1(root):
    import loco

    conds = loco.load(root, "passive", 40, 3)
    names = list(conds)
    X = np.concatenate([conds[c]["X"] for c in names])
    y = np.concatenate([[SIX_CLASSES.index(lab) for lab in conds[c]["y"]] for c in names])
    cond = np.concatenate([[i] * len(conds[c]["y"]) for i, c in enumerate(names)])
    D1 = cached_matrix(X / X.min(axis=1, keepdims=True), 20, "hz1-divide-min", CACHE)
    s = Search(D1, {"z-sorted": l1(zsorted(X))}, y, cond)
    n = len(names)
    one = [score(y[cond == i], y[np.argmin(np.where((cond != i)[None, :], D1[cond == i], np.inf), 1)])
           for i in range(n)]
    print(f"{n} conditions, {len(y)} windows of w = 40 at 1 Hz\n\n| stage 2 | 6-class median | "
          f"conditions ≥ 85 % |\n|---|---|---|\n| one stage | {100 * np.median([v[0] for v in one]):.1f} | "
          f"{sum(v[0] >= 0.85 for v in one)} |")
    for k in (1, 3, 5, 7):
        for a in (0.0, 0.25, 0.5, 1.0):
            six = [s.loco(("z-sorted", k, a), i)[0] for i in range(n)]
            print(f"| z-sorted k={k} a={a:g} | {100 * np.median(six):.1f} | {sum(v >= 0.85 for v in six)} |",
                  flush=True)


if __name__ == "__main__":
    {"stage1": stage1, "hz1": hz1}[sys.argv[1]](sys.argv[2])
