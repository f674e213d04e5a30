"""Classifying active probes from several pattern cycles (beyond 000 §3.5).

000 §3.5 classifies one window of ``w`` samples with 1-NN DTW; a longer window
(w = 40, 60 with a 20 s pattern) spans several cycles and needs references of
that length, so every extra cycle divides the number of references per class.
This module compares, on the same folds and the same time spans:

* ``window``: 1-NN DTW on the whole ``n × P`` sample window (the thesis's method
  at w = n·P; what a shipped model of that window length does);
* ``min-sum``: each cycle of the query is matched against every reference
  *cycle* (windows of one pattern period, the w = P model's references), and
  the class whose nearest cycles are closest in sum wins:
  ``argmin_c Σ_i min_{r ∈ R_c} DTW(q_i, r)``. With n = 1 it is 1-NN DTW;
* ``vote``: per-cycle 1-NN, majority vote, ties broken by ``min-sum``.

Folds: ``stratified`` holds out random blocks of n cycles (20 % of each class,
like :func:`opsel.cross_validate`); ``runs`` holds out whole recording runs of
every class (each fold a fifth of each class's runs), which measures how a
model does on a session it has never seen (neighbouring cycles of one run are
correlated, so ``stratified`` is optimistic).

Distances come from the Rust core (``opsel.dtw_distance``, |a−b| cost, the
same as the models) on windows normalised like ``core::series::Normalization``.
"""

from __future__ import annotations

import numpy as np

import opsel

from opsel.train.classifier import normalize_windows
from opsel.train.data import SIX_CLASSES, Trace, trace_windows_meta
from opsel.train.knn import derived_views, per_class_metrics

DECISIONS = ("window", "min-sum", "vote")
FOLDINGS = ("stratified", "runs")


def pairwise_dtw(A: np.ndarray, B: np.ndarray | None = None, *, radius=10, normalization="none") -> np.ndarray:
    """DTW distance matrix (Rust core) between the rows of ``A`` and ``B`` (``B`` = ``A``: symmetric)."""
    An = np.ascontiguousarray(normalize_windows(A, normalization))
    sym = B is None
    Bn = An if sym else np.ascontiguousarray(normalize_windows(B, normalization))
    D = np.zeros((len(An), len(Bn)))
    for i in range(len(An)):
        for j in range(i + 1 if sym else 0, len(Bn)):
            D[i, j] = opsel.dtw_distance(An[i], Bn[j], radius)
            if sym:
                D[j, i] = D[i, j]
    return D


def cycle_blocks(traces: list[Trace], n_cycles: int, classes=SIX_CLASSES, period: int | None = None):
    """Blocks of ``n_cycles`` consecutive pattern cycles, aligned like the collector's
    windows of ``n_cycles · P`` samples.

    Returns ``(blocks, labels, groups, cycles)``: ``blocks`` (m, n_cycles) indices into
    ``cycles`` (all complete one-cycle windows, shape (c, P)), the class index and a
    run id per block. ``period`` is the "cycle" of traces without a pattern
    (passive: the window length w, so a block is n back-to-back windows).
    """
    if n_cycles < 1:
        raise ValueError(f"n_cycles = {n_cycles} must be at least 1")
    cyc, blocks, labels, groups = [], [], [], []
    for t in traces:
        P = t.pattern_len or period
        if not P:
            raise ValueError(f"{t.path}: multi-cycle classification needs an active trace with a pattern "
                             "(or a period for passive traces)")
        X, runs, starts = trace_windows_meta(t, P)
        base = len(cyc)
        cyc.extend(X)
        pos = {(int(r), int(s)): base + i for i, (r, s) in enumerate(zip(runs, starts))}
        _, bruns, bstarts = trace_windows_meta(t, n_cycles * P)
        for r, s in zip(bruns, bstarts):
            blocks.append([pos[(int(r), int(s) + i * P)] for i in range(n_cycles)])
            labels.append(classes.index(t.label))
            groups.append(f"{t.label}/{int(r)}")
    P = (traces[0].pattern_len or period) if traces else 1
    return (np.array(blocks, dtype=np.int64).reshape(-1, n_cycles), np.array(labels, dtype=np.int64),
            np.array(groups), np.array(cyc, dtype=np.float64).reshape(-1, P))


def assign_folds(labels, groups, *, folds=5, seed=0, folding="stratified", balance=True):
    """Fold of every block (-1 = left out by class balancing). Seeded and deterministic."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    f = np.full(len(labels), -1, dtype=np.int64)
    present = np.unique(labels)
    m = min(int(np.sum(labels == c)) for c in present) if len(present) else 0
    for c in present:
        idx = np.where(labels == c)[0]
        if balance:
            idx = idx[:m]  # each class's first blocks, like data.dataset(balance=True)
        if folding == "stratified":
            for j, i in enumerate(rng.permutation(idx)):
                f[i] = j % folds
        elif folding == "runs":
            runs = list(dict.fromkeys(groups[idx]))  # in recording order
            order = {r: j % folds for j, r in enumerate(rng.permutation(runs))}
            for i in idx:
                f[i] = order[groups[i]]
        else:
            raise ValueError(f"unknown folding {folding!r}; use one of {FOLDINGS}")
    return f


def _report(conf, present, accs):
    conf = np.asarray(conf)
    return {
        "accuracy": float(np.trace(conf) / conf.sum()) if conf.sum() else float("nan"),
        "fold_accuracy": accs,
        "confusion": conf.tolist(),
        "classes": present,
        "metrics": per_class_metrics(conf, present),
        "views": derived_views(conf, present),
        "n": int(conf.sum()),
    }


def min_sum(dq: np.ndarray, ref_lab: np.ndarray, classes_idx) -> tuple[int, np.ndarray]:
    """The min-sum decision for one query of n cycles.

    ``dq`` (n, refs): DTW distance of each query cycle to each reference cycle;
    ``ref_lab`` the class of each reference; ``classes_idx`` the classes to
    consider, ascending. Returns the winning class (ties: the first, like
    ``numpy.argmin``) and the per-class nearest distances, shape (C, n). The
    OPS controller (``core/src/ops``, ``Config::cycles``) decides the same way;
    ``opsel_eval ops-cycles`` checks that they agree.
    """
    per_class = np.array([dq[:, ref_lab == c].min(axis=1) for c in classes_idx])  # (C, n)
    return classes_idx[int(np.argmin(per_class.sum(axis=1)))], per_class


def cv_cycles(traces: list[Trace], ns=(1, 2, 3), *, decisions=DECISIONS, normalization="none", radius=10,
              folds=5, seed=0, folding="stratified", classes=SIX_CLASSES, log=None, cycle_distances=None) -> list[dict]:
    """Cross-validated accuracy of each decision for each number of cycles ``n``.

    One row per (n, decision) with accuracy, confusion, P/R/F1 and the derived views.
    The per-cycle distance matrix is computed once (or passed in as ``cycle_distances``).
    """
    traces = [t for t in traces if t.label in classes]
    _, _, _, cyc = cycle_blocks(traces, 1, classes)
    Dc = cycle_distances if cycle_distances is not None else pairwise_dtw(cyc, radius=radius, normalization=normalization)
    rows = []
    for n in ns:
        blocks, labels, groups, _ = cycle_blocks(traces, n, classes)
        present_idx = sorted(set(labels.tolist()))
        present = [classes[i] for i in present_idx]
        per = min(int(np.sum(labels == c)) for c in present_idx) if present_idx else 0
        nf = folds
        if folding == "runs":
            nf = min(folds, min(len(set(groups[labels == c])) for c in present_idx))
        if per < nf or nf < 2:
            if log:
                log(f"n={n}: {per} blocks/class, too few for {nf} folds; skipped")
            continue
        f = assign_folds(labels, groups, folds=nf, seed=seed, folding=folding)
        Dw = None
        if "window" in decisions:
            X = cyc[blocks].reshape(len(blocks), -1)  # the n cycles back to back = the n·P window
            Dw = pairwise_dtw(X, radius=radius, normalization=normalization) if n > 1 else Dc[np.ix_(blocks[:, 0], blocks[:, 0])]
        pos = {c: i for i, c in enumerate(present_idx)}
        confs = {d: np.zeros((len(present), len(present)), dtype=np.int64) for d in decisions}
        accs = {d: [] for d in decisions}
        for k in range(nf):
            test = np.where(f == k)[0]
            train = np.where((f >= 0) & (f != k))[0]
            ref_cyc = blocks[train].ravel()
            ref_lab = np.repeat(labels[train], n)
            hits = {d: 0 for d in decisions}
            for t in test:
                q = blocks[t]
                dq = Dc[np.ix_(q, ref_cyc)]  # (n, refs)
                minsum, per_class = min_sum(dq, ref_lab, present_idx)
                pred = {}
                if "min-sum" in decisions:
                    pred["min-sum"] = minsum
                if "vote" in decisions:
                    nn = ref_lab[np.argmin(dq, axis=1)]
                    votes = np.bincount(nn, minlength=len(classes))
                    best = np.flatnonzero(votes == votes.max())
                    sums = per_class.sum(axis=1)
                    pred["vote"] = int(min(best, key=lambda b: sums[pos[int(b)]]))
                if "window" in decisions:
                    pred["window"] = int(labels[train[int(np.argmin(Dw[t, train]))]])
                for d, p in pred.items():
                    confs[d][pos[labels[t]], pos[p]] += 1
                    hits[d] += int(p == labels[t])
            for d in decisions:
                accs[d].append(hits[d] / len(test) if len(test) else float("nan"))
        P = cyc.shape[1]
        for d in decisions:
            r = {"model": f"1-NN DTW {d}", "decision": d, "n_cycles": n, "w": n * P, "folding": folding,
                 "normalization": normalization, "radius": radius, "per_class": per, **_report(confs[d], present, accs[d])}
            rows.append(r)
            if log:
                log(f"n={n} ({n * P} s) {d} {folding} norm={normalization} r={radius}: acc {r['accuracy']:.3f} "
                    f"({per}/class)")
    return rows
