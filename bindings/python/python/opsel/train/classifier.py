"""Offline baselines for background-mix recognition (000 §3.5, notes 000 §7
"Optional baselines"): MLP (w → 64 → 64 → 6, ReLU, softmax), RBF SVM and
Gaussian naive Bayes, with scikit-learn, under the same stratified 5-fold
split protocol and per-window normalisation as the DTW K-NN.

They are for comparison only; the shipped models are DTW K-NN (core).
"""

from __future__ import annotations

import numpy as np

from .data import SIX_CLASSES, Trace, dataset
from .knn import derived_views, per_class_metrics

BASELINES = ("mlp", "svm", "gnb")


def normalize_windows(X: np.ndarray, method: str) -> np.ndarray:
    """Per-window normalisation, vectorised; identical to ``opsel.normalize`` (core series::Normalization)."""
    X = np.asarray(X, dtype=np.float64)
    if method == "none":
        return X.copy()
    if method == "subtract-min":
        return X - X.min(axis=1, keepdims=True)
    if method == "divide-min":
        m = X.min(axis=1, keepdims=True)
        if np.any(m <= 0):
            raise ValueError("divide-min normalisation needs positive RTTs")
        return X / m
    if method == "z-score":
        mean = X.mean(axis=1, keepdims=True)
        sd = X.std(axis=1, keepdims=True)
        safe = np.where(sd > 0, sd, 1.0)
        return np.where(sd > 0, (X - mean) / safe, 0.0)
    raise ValueError(f"unknown normalisation {method!r}; use none, subtract-min, divide-min or z-score")


def make_baseline(name: str, seed: int = 0):
    """A scikit-learn pipeline (feature standardisation + classifier)."""
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if name == "mlp":
        # lbfgs: scikit-learn's recommendation for small data sets (hundreds of windows); converges in seconds.
        clf = MLPClassifier(hidden_layer_sizes=(64, 64), activation="relu", solver="lbfgs", max_iter=500,
                            random_state=seed)
    elif name == "svm":
        clf = SVC(kernel="rbf", gamma="scale", C=1.0, random_state=seed)
    elif name == "gnb":
        clf = GaussianNB()
    else:
        raise ValueError(f"unknown baseline {name!r}; use one of {BASELINES}")
    return make_pipeline(StandardScaler(), clf)


def cv_baseline(X, y, name: str, *, normalization="none", folds=5, seed=0, classes=SIX_CLASSES) -> dict:
    """Stratified k-fold CV of one baseline; same report shape as ``knn.cv_knn``."""
    from sklearn.model_selection import StratifiedKFold

    Xn = normalize_windows(X, normalization)
    y = np.asarray(y).astype(str)
    present = [c for c in classes if c in set(y)]
    pos = {c: i for i, c in enumerate(present)}
    conf = np.zeros((len(present), len(present)), dtype=np.int64)
    accs = []
    try:  # one BLAS thread: on a shared, loaded machine BLAS thread pools thrash
        from threadpoolctl import threadpool_limits

        limit = threadpool_limits(1)
    except ImportError:  # pragma: no cover
        limit = None
    for tr, te in StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(Xn, y):
        m = make_baseline(name, seed).fit(Xn[tr], y[tr])
        p = m.predict(Xn[te])
        accs.append(float(np.mean(p == y[te])))
        for t, q in zip(y[te], p):
            conf[pos[t], pos[q]] += 1
    if limit is not None:
        limit.restore_original_limits()
    return {
        "accuracy": float(np.mean(accs)),
        "fold_accuracy": accs,
        "confusion": conf.tolist(),
        "classes": present,
        "metrics": per_class_metrics(conf, present),
        "views": derived_views(conf, present),
        "n": int(len(y)),
    }


def sweep_baselines(traces: list[Trace], *, ws, names=BASELINES, normalization="none", folds=5, seed=0,
                    balance=True, log=None) -> list[dict]:
    """CV accuracy of each baseline for each w."""
    rows = []
    for w in ws:
        X, y = dataset(traces, w, balance=balance)
        counts = {c: int(np.sum(y == c)) for c in sorted(set(y))}
        if len(counts) < 2 or min(counts.values()) < folds:
            continue
        for name in names:
            r = cv_baseline(X, y, name, normalization=normalization, folds=folds, seed=seed)
            rows.append({"model": name, "w": w, "normalization": normalization, "per_class": min(counts.values()), **r})
            if log:
                log(f"w={w} {name} norm={normalization}: acc {r['accuracy']:.3f} (n={r['n']})")
    return rows
