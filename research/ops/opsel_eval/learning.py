"""Learning curves: CV accuracy against the number of windows per class.

The question the curve answers is whether more data closes a gap (active 6-class
accuracy below 95 % at one cycle): if accuracy still climbs at the largest size,
collecting more helps; if it is flat, only a change of method or probe does.

Sizes are taken **chronologically**: the first ``n`` windows of each class in
recording order (runs in the order the collector appended them), which is what
the model would have been trained on when the collection had reached ``n``
windows per class. Each size is cross-validated with several fold seeds so the
fold-assignment noise (about 2 points at ~100 windows/class) is visible as a
spread instead of being mistaken for a trend.
"""

from __future__ import annotations

import numpy as np

from opsel.train.data import Trace, trace_windows
from opsel.train.knn import cv_knn


def default_sizes(n_max: int, steps: int = 6, folds: int = 5) -> list[int]:
    """``steps`` sizes evenly spaced up to ``n_max`` (the last is ``n_max``), each at least ``folds``."""
    if n_max < folds:
        return []
    sizes = sorted({max(folds, int(round(n_max * (i + 1) / steps))) for i in range(steps)})
    return sizes


def learning_curve(traces: list[Trace], *, ws=(20, 60), sizes=None, ks=(1,), radii=(10,), normalization="none",
                   seeds=(0, 1, 2), folds=5, log=None) -> list[dict]:
    """Rows ``{w, per_class, k, radius, normalization, accuracy (mean over seeds), sd, accuracies, bbr_present}``.

    ``sizes``: windows per class to try (None = :func:`default_sizes` of the smallest class at each w);
    sizes above what a class has are skipped.
    """
    rows = []
    for w in ws:
        per = [trace_windows(t, w) for t in traces]
        if not per:
            continue
        n_max = min(len(p) for p in per)
        todo = default_sizes(n_max, folds=folds) if sizes is None else [n for n in sizes if folds <= n <= n_max]
        for n in todo:
            X = np.concatenate([p[:n] for p in per], axis=0)
            y = np.concatenate([[t.label] * n for t in traces]).astype(str)
            for radius in radii:
                for k in ks:
                    if k >= n * (folds - 1) // folds * len(traces):
                        continue
                    accs, bbr = [], []
                    for seed in seeds:
                        r = cv_knn(X, y, k=k, radius=radius, normalization=normalization, folds=folds, seed=seed)
                        accs.append(r["accuracy"])
                        bbr.append(r["views"]["bbr_present"]["accuracy"])
                    row = {"w": w, "per_class": n, "k": k, "radius": radius, "normalization": normalization,
                           "accuracy": float(np.mean(accs)), "sd": float(np.std(accs)), "accuracies": accs,
                           "bbr_present": float(np.mean(bbr)), "seeds": list(seeds)}
                    rows.append(row)
                    if log:
                        log(f"w={w} n={n}/class k={k} r={radius} {normalization}: {100 * row['accuracy']:.1f} % "
                            f"± {100 * row['sd']:.1f}")
    return rows


def markdown(rows: list[dict]) -> list[str]:
    """One table per w: rows = windows per class, columns = (k, radius)."""
    out = []
    for w in sorted({r["w"] for r in rows}):
        rr = [r for r in rows if r["w"] == w]
        cols = list(dict.fromkeys((r["k"], r["radius"]) for r in rr))
        norm = rr[0]["normalization"]
        out.append(f"| w = {w} ({norm}): windows/class | "
                   + " | ".join(f"{k}-NN r={'full' if rad is None else rad}" for k, rad in cols) + " |")
        out.append("|---" * (len(cols) + 1) + "|")
        for n in sorted({r["per_class"] for r in rr}):
            cells = []
            for k, rad in cols:
                r = next((r for r in rr if r["per_class"] == n and r["k"] == k and r["radius"] == rad), None)
                cells.append("–" if r is None else f"{100 * r['accuracy']:.1f} ± {100 * r['sd']:.1f}")
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        out.append("")
    return out
