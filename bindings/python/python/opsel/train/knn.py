"""Evaluate and fit DTW K-NN background-mix classifiers on collected traces (000 §3.5–3.6).

Everything heavy runs in the Rust core: ``opsel.cross_validate`` (stratified
k-fold, 20 % of each class held out per fold) and ``opsel.KnnDtw`` (the model
file format of ``core/src/model``). This module adds the sweeps of the issue
(w = 5..60, k, band radius, normalisation), the derived binary views, and the
cross-condition generalisation test.
"""

from __future__ import annotations

import numpy as np

import opsel

from .data import SIX_CLASSES, Trace, dataset

NORMALIZATIONS = ("none", "subtract-min", "divide-min", "z-score")
# Stage 2 of a two-stage model may also compare value distributions (z-sorted:
# z-score, then sorted; the combined k-NN stage 2 is built on it).
STAGE2_NORMALIZATIONS = NORMALIZATIONS + ("z-sorted",)
W_SWEEP = tuple(range(5, 61, 5))
K_SWEEP = (1, 3, 5, 10)


def label_indices(y, classes=SIX_CLASSES):
    """Labels → indices into ``classes`` (the six classes in the thesis's order)."""
    pos = {c: i for i, c in enumerate(classes)}
    missing = sorted(set(y) - set(pos))
    if missing:
        raise ValueError(f"labels {missing} are not among the classes {list(classes)}")
    return np.array([pos[c] for c in y], dtype=np.int64)


def bbr_present(label: str) -> bool:
    """000 §4.1: is at least one BBR flow in the background?"""
    return bool(opsel.parse_mix(label)["bbr_present"])


def heterogeneous(label: str) -> bool:
    """000 §4.1: CUBIC and BBR share the path (B1-C1 only among the six; B0-C0 is not)."""
    return bool(opsel.parse_mix(label)["heterogeneous"])


def per_class_metrics(conf: np.ndarray, classes=SIX_CLASSES) -> list[dict]:
    """Precision, recall, F1 and support per class from a confusion matrix (rows = truth)."""
    conf = np.asarray(conf, dtype=np.float64)
    out = []
    for i, c in enumerate(classes):
        tp = conf[i, i]
        support = conf[i].sum()
        predicted = conf[:, i].sum()
        p = tp / predicted if predicted else 0.0
        r = tp / support if support else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        out.append({"class": c, "precision": p, "recall": r, "f1": f1, "support": int(support)})
    return out


def grouped(conf: np.ndarray, group_of, n_groups: int = 2) -> np.ndarray:
    """Collapse a class confusion matrix into groups (e.g. BBR present yes/no)."""
    conf = np.asarray(conf)
    g = np.zeros((n_groups, n_groups), dtype=conf.dtype)
    for i in range(conf.shape[0]):
        for j in range(conf.shape[1]):
            g[group_of[i], group_of[j]] += conf[i, j]
    return g


def derived_views(conf: np.ndarray, classes=SIX_CLASSES) -> dict:
    """Accuracy of the binary views 000 §4.1 uses: BBR present, heterogeneous."""
    out = {}
    for name, fn in (("bbr_present", bbr_present), ("heterogeneous", heterogeneous)):
        groups = [1 if fn(c) else 0 for c in classes]
        g = grouped(conf, groups)
        total = g.sum()
        out[name] = {
            "accuracy": float(np.trace(g) / total) if total else float("nan"),
            "confusion": g.tolist(),
            "metrics": per_class_metrics(g, ("no", "yes")),
        }
    return out


def cv_knn(X, y, *, k=1, radius=10, normalization="none", folds=5, seed=0, classes=SIX_CLASSES) -> dict:
    """Stratified ``folds``-fold CV of DTW K-NN (Rust core). Returns accuracy, confusion, views."""
    present = [c for c in classes if c in set(y)]
    idx = label_indices(y, present)
    r = opsel.cross_validate(
        np.ascontiguousarray(X, dtype=np.float64),
        idx.tolist(),
        list(present),
        k=int(k),
        radius=None if radius is None else int(radius),
        normalization=normalization,
        folds=folds,
        seed=seed,
    )
    conf = np.asarray(r["confusion"])
    return {
        "accuracy": float(r["mean_accuracy"]),
        "fold_accuracy": [float(a) for a in r["fold_accuracy"]],
        "confusion": conf.tolist(),
        "classes": list(present),
        "metrics": per_class_metrics(conf, present),
        "views": derived_views(conf, present),
        "n": int(len(y)),
    }


def sweep(traces: list[Trace], *, ws=W_SWEEP, ks=(1,), radii=(10,), normalizations=("none",), folds=5, seed=0,
          balance=True, log=None) -> list[dict]:
    """CV accuracy for every (w, k, radius, normalisation); windows are re-cut per w."""
    rows = []
    for w in ws:
        X, y = dataset(traces, w, balance=balance)
        counts = {c: int(np.sum(y == c)) for c in sorted(set(y))}
        if len(counts) < 2 or min(counts.values()) < folds:
            if log:
                log(f"w={w}: too few windows per class {counts}; skipped")
            continue
        for norm in normalizations:
            for radius in radii:
                for k in ks:
                    r = cv_knn(X, y, k=k, radius=radius, normalization=norm, folds=folds, seed=seed)
                    row = {"model": f"{k}-NN DTW", "w": w, "k": k, "radius": radius, "normalization": norm,
                           "per_class": min(counts.values()), **r}
                    rows.append(row)
                    if log:
                        log(f"w={w} k={k} r={radius} norm={norm}: acc {r['accuracy']:.3f} "
                            f"BBR-present {r['views']['bbr_present']['accuracy']:.3f} (n={r['n']})")
    return rows


def fit(X, y, *, k=1, radius=10, normalization="none", probing="passive", pattern=None, training=None,
        sample_interval_ms=1000.0, stage2=None, stage2_k=1, stage2_weight=0.0, stage1_steps=0.0):
    """Fit a DTW K-NN model (``opsel.KnnDtw``) ready to ``save`` as an opsel model file. ``stage2``
    (a normalisation name) makes it two-stage: ``normalization`` decides BBR present, ``stage2``
    picks the mix among that side's references (``core/src/knn/two_stage.rs``); ``stage2_k`` and
    ``stage2_weight`` make that a k-NN vote under the combined distance (``core/src/knn/combined.rs``);
    ``stage1_steps`` > 0 ranks the 1-NN of record by D1/s1 + b·F/sF (``core/src/knn/steps.rs``)."""
    clf = opsel.KnnDtw(n_neighbors=k, radius=radius, normalization=normalization, stage2=stage2,
                       stage2_k=stage2_k, stage2_weight=stage2_weight, stage1_steps=stage1_steps)
    return clf.fit(np.ascontiguousarray(X, dtype=np.float64), np.asarray(y), probing=probing, pattern=pattern,
                   training=training, sample_interval_ms=sample_interval_ms)


def evaluate(clf, X, y, classes=SIX_CLASSES) -> dict:
    """Accuracy, confusion and derived views of a fitted classifier on held-out windows."""
    pred = np.asarray(clf.predict(np.ascontiguousarray(X, dtype=np.float64))).astype(str)
    present = [c for c in classes if c in set(y) | set(pred)]
    pos = {c: i for i, c in enumerate(present)}
    conf = np.zeros((len(present), len(present)), dtype=np.int64)
    for t, p in zip(y, pred):
        conf[pos[t], pos[p]] += 1
    return {
        "accuracy": float(np.mean(pred == np.asarray(y))) if len(y) else float("nan"),
        "confusion": conf.tolist(),
        "classes": present,
        "metrics": per_class_metrics(conf, present),
        "views": derived_views(conf, present),
        "n": int(len(y)),
    }


def generalise(train: list[Trace], test: list[Trace], *, w=20, k=1, radius=10, normalizations=NORMALIZATIONS,
               balance=True) -> list[dict]:
    """Train on one condition's traces, test on another's, per normalisation (beyond 000: §6 limitation 3)."""
    Xa, ya = dataset(train, w, balance=balance)
    Xb, yb = dataset(test, w, balance=balance)
    rows = []
    for norm in normalizations:
        clf = fit(Xa, ya, k=k, radius=radius, normalization=norm)
        r = evaluate(clf, Xb, yb)
        rows.append({"normalization": norm, "w": w, "k": k, "radius": radius, "n_train": int(len(ya)), **r})
    return rows
