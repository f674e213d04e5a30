"""LOCO with training-set augmentation, k > 1, multi-representation ensembles and a
hierarchical decision, all on precomputed DTW distance matrices.

``loco.py`` refits the core's 1-NN DTW for every fold; here every DTW distance
between a window and a reference (original or augmented) is computed once per
representation (dtaidistance, ``inner_dist='euclidean'`` = the core's |a − b|
cost, ``window = radius + 1`` = the core's Sakoe–Chiba band |i − j| ≤ radius;
checked against ``opsel.dtw_distance``), and each fold only masks out the
held-out condition's references. A 1-NN fold on the matrix gives the same
prediction as ``opsel.KnnDtw`` (``--check`` verifies one fold).

Augmentation (training references only; a held-out condition's augmented
copies are masked with its originals) simulates conditions the grid does not hold:

* ``amp:A``   queueing part scaled by A relative to the run's base RTT b:
              x' = b + A (x − b)   (a deeper / shallower standing queue)
* ``warp:S``  the run's series resampled as if its dynamics ran S times slower
              (S > 1: longer queue cycles, e.g. a longer RTT or a larger BDP;
              S < 1: faster), then cut into windows of w again
* ``jit:J``   Gaussian noise of sd J·b added to every sample
* ``rwarp:α`` per held-out condition h, every training condition c warped by
              (b_h / b_c)^α, b the median measured base RTT (deployable: a live
              controller knows its base RTT; references would be chosen by it)
* ``ramp:α``  per held-out condition, every training condition's queue scaled by
              (buffer_h / buffer_c)^α in BDPs (ORACLE: the buffer is not known live)

Representations: those of ``loco.py`` plus ``d-dm`` (first difference of
divide-min) and ``spread`` / ``spread-rel`` (each sample's echo-burst spread,
max − min of its 10 echoes, in ms or divided by the window's minimum; originals
only). Joined by ``|`` they are an ensemble: the sum of each
representation's distances divided by its median distance (``rep*0.5`` weighs
one of them). ``g1.2:<rule>`` first keeps only references whose own max / min − 1
is within a factor 1.2 of the window's. Decision rules
(after ``@``): ``1nn`` (default); ``knnK`` (K nearest, weights 1/d); ``hierK``
(BBR present by the K nearest voting per side with weights 1/d, then the mix by
the 1-NN on that side only; ``hier1`` is plain 1-NN); ``cv`` / ``cvw`` / ``cvbK``
(each training condition's own 1-NN votes: equally, weighted d_best / d, or only
the K nearest conditions).

Configuration choice by nested LOCO: for each held-out condition the
configuration with the best median 6-class accuracy (then BBR present) over
LOCO on the remaining conditions is scored once on the held-out one.

Usage::

    python research/generalisation/loco_aug.py data/collect --w 40 --radius 20 \\
        --configs "divide-min;divide-min+amp:0.5/2;divide-min|minmax@knn3" --nested --bootstrap

The distance matrices are cached under ``--cache`` (target/loco-cache), keyed by
the windows, so a rerun on an unchanged corpus takes seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
from dtaidistance import dtw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loco  # noqa: E402
from opsel.train.data import SIX_CLASSES, at_1hz, find_traces_dir, trace_windows_meta  # noqa: E402

# Trace folders read as 1 Hz series (``passive-200ms`` through ``at_1hz``).
PASSIVE_MODES = ("passive", "passive-200ms")

BBR = np.array([c in loco.BBR_CLASSES for c in SIX_CLASSES])
CLS = {c: i for i, c in enumerate(SIX_CLASSES)}


def load(root, w, min_windows):
    """Windows of every complete passive condition plus, per window, its run's full series.

    A condition's 1 Hz series come from its ``passive`` traces and from its ``passive-200ms``
    traces read at 1 Hz (every fifth sample: what the 1 Hz prober would have seen)."""
    out = {}
    for cond in sorted(os.listdir(root)):
        per_class = {c: [] for c in SIX_CLASSES}
        for mode in PASSIVE_MODES:
            d = os.path.join(root, cond, mode)
            if os.path.isdir(d):
                for tr in find_traces_dir(d):
                    per_class[tr.label].append(at_1hz(tr))
        if not all(per_class.values()):
            continue
        Xs, ys, bs, series, Ss = [], [], [], [], []
        ok = True
        for label in SIX_CLASSES:
            n = 0
            for tr in per_class[label]:
                X, runs, starts = trace_windows_meta(tr, w)
                if len(X) == 0:
                    continue
                n += len(X)
                Xs.append(X)
                Ss.append(burst_spread(tr, runs, starts, w))
                ys += [CLS[tr.label]] * len(X)
                bs += list(loco.running_min_bases(tr, runs, starts, w))
                for r in np.unique(tr.run):
                    sel = tr.run == r
                    s = np.full(int(tr.k[sel].max()) + 1, np.nan)
                    s[tr.k[sel]] = tr.rtt_ms[sel]
                    series.append((CLS[tr.label], s))
            if n < min_windows:
                ok = False
                break
        if not ok:
            continue
        traces = [t for v in per_class.values() for t in v]
        rate, rtt, buf = loco.condition_params(traces[0].meta)
        out[cond] = dict(X=np.concatenate(Xs), S=np.concatenate(Ss), y=np.array(ys), base=np.array(bs), series=series,
                         rate=rate, rtt=rtt, buffer_bytes=buf)
    return out


def burst_spread(tr, runs, starts, w):
    """Per window sample: the spread of the sample's own echo burst, (max − min) of its 10 echoes
    1 ms apart, in ms (the trace's ``min_ms`` / ``max_ms`` columns; what the prober measures
    anyway). NaN where the column is missing."""
    import csv

    mn, mx = {}, {}
    with open(tr.path) as f:
        for row in csv.DictReader(f):
            try:
                key = (int(row["run"]), int(row["k"]))
                mn[key], mx[key] = float(row["min_ms"]), float(row["max_ms"])
            except (KeyError, ValueError):
                continue
    out = np.full((len(runs), w), np.nan)
    for i, (r, st) in enumerate(zip(runs, starts)):
        for j in range(w):
            k = (int(r), (int(st) + j) * tr.stride)
            if k in mn:
                out[i, j] = mx[k] - mn[k]
    return out


def cut(s, w):
    """Non-overlapping complete windows of a series (as trace_windows_meta), with the running min base."""
    X, B = [], []
    runmin = np.minimum.accumulate(np.where(np.isfinite(s), s, np.inf))
    for st in range(0, len(s) - w + 1, w):
        win = s[st:st + w]
        if np.all(np.isfinite(win)) and np.all(win > 0):
            X.append(win)
            B.append(runmin[st + w - 1])
    return X, B


def augment(d, w, how, seed=0):
    """Augmented (X, y, base) of one condition for one augmentation ``kind:value``."""
    kind, val = how.split(":")
    v = float(val)
    rng = np.random.default_rng(seed)
    X, y, B = [], [], []
    for label, s in d["series"]:
        fin = np.isfinite(s)
        if not fin.any():
            continue
        b = float(np.nanmin(s))
        if kind == "amp":
            s2 = np.where(fin, b + v * (s - b), np.nan)
        elif kind == "warp":
            n = int(math.floor((len(s) - 1) * v)) + 1
            t = np.arange(n) / v
            idx = np.clip(np.floor(t).astype(int), 0, len(s) - 1)
            nxt = np.clip(idx + 1, 0, len(s) - 1)
            f = t - idx
            s2 = (1 - f) * s[idx] + f * s[nxt]  # NaN propagates: a missing sample spoils its neighbours
        elif kind == "jit":
            s2 = np.where(fin, s + rng.normal(0.0, v * b, len(s)), np.nan)
            s2 = np.maximum(s2, 0.5 * b)
        else:
            raise ValueError(f"unknown augmentation {how!r}")
        xs, bs = cut(s2, w)
        X += xs
        B += bs
        y += [label] * len(xs)
    return np.array(X).reshape(-1, w), np.array(y, dtype=int), np.array(B)


def represent(X, base, how):
    if how == "d-dm":
        # First difference of divide-min (the derivative channel of a 2-channel ensemble).
        dm = X / X.min(axis=1, keepdims=True)
        return np.diff(dm, axis=1, prepend=dm[:, :1])
    return loco.represent(X, base, 0.0, how)


def dist(Q, R, radius, sym=False):
    """|a − b| DTW, band |i − j| ≤ radius, between rows of Q and rows of R (n, m)."""
    if sym:
        return dtw.distance_matrix_fast(Q, window=radius + 1, inner_dist="euclidean", compact=False)
    S = np.vstack([Q, R])
    D = dtw.distance_matrix_fast(S, window=radius + 1, inner_dist="euclidean",
                                 block=((0, len(Q)), (len(Q), len(S))), compact=False)
    return D[:len(Q), len(Q):]


class Bank:
    """Test windows (every original window) × references (originals + augmented), per representation."""

    def __init__(self, conds, names, w, radius, cache):
        self.conds, self.names, self.w, self.radius, self.cache = conds, names, w, radius, cache
        self.X = np.concatenate([conds[c]["X"] for c in names])
        self.B = np.concatenate([conds[c]["base"] for c in names])
        self.S = np.concatenate([conds[c]["S"] for c in names])
        self.y = np.concatenate([conds[c]["y"] for c in names])
        self.cond = np.concatenate([[i] * len(conds[c]["y"]) for i, c in enumerate(names)])
        self.aug = {}
        self.D = {}

    def key(self, *parts):
        h = hashlib.sha1(self.X.tobytes() + repr(parts).encode()).hexdigest()[:16]
        return os.path.join(self.cache, f"{h}.npy")

    def refs(self, aug):
        """(X, base, y, cond) of the references of one augmentation ('' = the originals)."""
        if aug == "":
            return self.X, self.B, self.y, self.cond
        if aug not in self.aug:
            parts = [augment(self.conds[c], self.w, aug, seed=i) + (i,) for i, c in enumerate(self.names)]
            self.aug[aug] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[2] for p in parts]),
                             np.concatenate([p[1] for p in parts]),
                             np.concatenate([[p[3]] * len(p[1]) for p in parts]))
        return self.aug[aug]

    def dist(self, rep, aug):
        k = (rep, aug)
        if k not in self.D:
            path = self.key(rep, aug, self.radius)
            if os.path.exists(path):
                self.D[k] = np.load(path)
            elif rep.startswith("spread"):
                # Echo-burst spread channel (originals only): in ms (``spread``) or in window
                # minima (``spread-rel``, like divide-min).
                t0 = time.time()
                if aug != "":
                    raise ValueError("the spread channel has no augmented references")
                S = np.nan_to_num(self.S, nan=0.0)
                Q = S / self.X.min(axis=1, keepdims=True) * 100 if rep == "spread-rel" else S
                self.D[k] = dist(Q, Q, self.radius, sym=True)
                np.save(path, self.D[k])
                print(f"  distances {rep}: {self.D[k].shape} in {time.time() - t0:.0f} s", file=sys.stderr)
            else:
                t0 = time.time()
                Q = represent(self.X, self.B, rep)
                RX, RB, _, _ = self.refs(aug)
                R = represent(RX, RB, rep)
                self.D[k] = dist(Q, R, self.radius, sym=(aug == ""))
                np.save(path, self.D[k])
                print(f"  distances {rep} {aug or 'orig'}: {self.D[k].shape} in {time.time() - t0:.0f} s",
                      file=sys.stderr)
        return self.D[k]


def bdp_factor(d):
    """Drop-tail buffer in BDPs = the full queue in base RTTs (ORACLE: not known to a live transfer)."""
    return d["buffer_bytes"] / (d["rate"] * 1e6 / 8 * d["rtt"] / 1e3)


def rwarp_matrix(bank, rep, alpha, kind="rwarp"):
    """References time-warped toward each test condition's base RTT: for test windows of condition h,
    every other condition c's series is resampled by s = (b_h / b_c)^alpha (b: the median running-min
    base RTT of the condition's windows, which a live controller measures), s clipped to [0.4, 2.5].
    Columns are blocks per target h; a row sees only its own condition's block (others +inf)."""
    path = bank.key(rep, kind, alpha, bank.radius)
    names = bank.names
    med = [float(np.median(bank.conds[c]["base"])) for c in names]
    blocks = []
    for h in range(len(names)):
        parts = []
        for i, c in enumerate(names):
            if kind == "rwarp":
                s = float(np.clip((med[h] / med[i]) ** alpha, 0.4, 2.5))
                aug = f"warp:{s}"
            else:  # ramp: the queue scaled to the test condition's buffer (oracle upper bound)
                s = float((bdp_factor(bank.conds[names[h]]) / bdp_factor(bank.conds[c])) ** alpha)
                aug = f"amp:{s}"
            X, y, B = augment(bank.conds[c], bank.w, aug) if abs(s - 1) > 1e-9 else (
                bank.conds[c]["X"], bank.conds[c]["y"], bank.conds[c]["base"])
            parts.append((X, y, B, np.full(len(y), i)))
        blocks.append(tuple(np.concatenate([p[j] for p in parts]) for j in range(4)))
    if os.path.exists(path):
        D = np.load(path)
    else:
        t0 = time.time()
        D = np.full((len(bank.y), sum(len(b[1]) for b in blocks)), np.inf)
        off = 0
        for h, (X, y, B, c) in enumerate(blocks):
            rows = np.flatnonzero(bank.cond == h)
            D[rows, off:off + len(y)] = dist(represent(bank.X[rows], bank.B[rows], rep),
                                             represent(X, B, rep), bank.radius)
            off += len(y)
        np.save(path, D)
        print(f"  distances {rep} {kind}:{alpha}: {D.shape} in {time.time() - t0:.0f} s", file=sys.stderr)
    ry = np.concatenate([b[1] for b in blocks])
    rc = np.concatenate([b[3] for b in blocks])
    return D, ry, rc, int(np.mean([len(b[1]) for b in blocks])), np.concatenate([amp(b[0]) for b in blocks])


def config_matrix(bank, cfg):
    """Distance matrix (tests × refs), ref labels and ref conditions of a configuration string
    ``rep[|rep2...]+aug1,aug2...`` (aug values may list several: amp:0.5/2)."""
    reps_part, _, aug_part = cfg.partition("+")
    reps = reps_part.split("|")
    if aug_part.startswith(("rwarp:", "ramp:")):
        kind, val = aug_part.split(":")
        return rwarp_matrix(bank, reps_part, float(val), kind)
    augs = [""]
    for a in filter(None, aug_part.split(",")):
        kind, vals = a.split(":")
        augs += [f"{kind}:{v}" for v in vals.split("/")]
    Ds, ys, cs = [], None, None
    for rep in reps:
        rep, _, wgt = rep.partition("*")  # rep*0.5: that representation's share of the ensemble
        blocks = [bank.dist(rep, a) for a in augs]
        D = np.hstack(blocks)
        if len(reps) > 1:
            D = D * (float(wgt or 1) / np.median(bank.dist(rep, "")))
        Ds.append(D)
    ys = np.concatenate([bank.refs(a)[2] for a in augs])
    cs = np.concatenate([bank.refs(a)[3] for a in augs])
    return (sum(Ds), ys, cs, sum(len(bank.refs(a)[2]) for a in augs),
            np.concatenate([amp(bank.refs(a)[0]) for a in augs]))


def amp(X):
    """The window's own queue depth in window minima, max / min − 1 (floored at 0.02: an idle path)."""
    return np.maximum(X.max(axis=1) / X.min(axis=1) - 1.0, 0.02)


def decide(D, ry, rule):
    """Class index per row of D (refs already masked with +inf)."""
    if rule == "1nn":
        return ry[np.argmin(D, axis=1)]
    if rule.startswith("knn"):
        k = int(rule[3:])
        nn = np.argpartition(D, k, axis=1)[:, :k]
        d = np.take_along_axis(D, nn, axis=1)
        wgt = 1.0 / np.maximum(d, 1e-9)
        votes = np.zeros((len(D), len(SIX_CLASSES)))
        for j in range(k):
            np.add.at(votes, (np.arange(len(D)), ry[nn[:, j]]), wgt[:, j])
        return np.argmax(votes, axis=1)
    if rule.startswith("hier"):
        # BBR present by the k nearest (weights 1/d) voting per side, then the mix on that side by 1-NN.
        k = int(rule[4:] or 1)
        nn = np.argpartition(D, k, axis=1)[:, :k] if k > 1 else np.argmin(D, axis=1)[:, None]
        d = np.take_along_axis(D, nn, axis=1)
        wgt = 1.0 / np.maximum(d, 1e-9)
        side = (wgt * BBR[ry[nn]]).sum(axis=1) > 0.5 * wgt.sum(axis=1)
        Dm = np.where(BBR[ry][None, :] == side[:, None], D, np.inf)
        return ry[np.argmin(Dm, axis=1)]
    raise ValueError(rule)


def fold(Dfull, ry, rc, test_idx, train_conds, rule, amps=None):
    allowed = np.isin(rc, train_conds)
    D = np.where(allowed[None, :], Dfull[test_idx], np.inf)
    if rule.startswith("g"):
        # Amplitude gate: only references whose own max/min − 1 is within a factor F of the test
        # window's (what a live controller measures on its window); if none pass, all are kept.
        gate, _, rule = rule[1:].partition(":")
        ta, ra = amps[0][test_idx], amps[1]
        ok = np.abs(np.log(ra[None, :] / ta[:, None])) <= math.log(float(gate))
        Dg = np.where(ok, D, np.inf)
        none = ~np.isfinite(Dg).any(axis=1)
        Dg[none] = D[none]
        D = Dg
    if rule.startswith("cv"):
        return condvote(D, ry, rc, train_conds, rule)
    return decide(D, ry, rule)


def condvote(D, ry, rc, train_conds, rule):
    """Every training condition's own 1-NN casts a vote: ``cv`` one vote each, ``cvw`` weighted by
    d_best / d_condition (so conditions far from the window count less), ``cvbK`` the K nearest
    conditions only. Pooling lets the condition with the most windows (``default``) win most ties;
    this does not."""
    n = len(D)
    best_d = np.empty((n, len(train_conds)))
    best_y = np.empty((n, len(train_conds)), dtype=int)
    for j, c in enumerate(train_conds):
        cols = np.flatnonzero(rc == c)
        a = np.argmin(D[:, cols], axis=1)
        best_d[:, j] = D[np.arange(n), cols[a]]
        best_y[:, j] = ry[cols[a]]
    if rule == "cv":
        wgt = np.ones_like(best_d)
    elif rule == "cvw":
        wgt = best_d.min(axis=1, keepdims=True) / np.maximum(best_d, 1e-9)
    elif rule.startswith("cvb"):
        k = int(rule[3:])
        wgt = np.zeros_like(best_d)
        order = np.argsort(best_d, axis=1)[:, :k]
        np.put_along_axis(wgt, order, 1.0, axis=1)
    else:
        raise ValueError(rule)
    votes = np.zeros((n, len(SIX_CLASSES)))
    for j in range(len(train_conds)):
        np.add.at(votes, (np.arange(n), best_y[:, j]), wgt[:, j])
    # Ties go to the class of the nearest reference.
    votes[np.arange(n), best_y[np.arange(n), np.argmin(best_d, axis=1)]] += 1e-6
    return np.argmax(votes, axis=1)


# Indices of the --train-only conditions: references in every fold, never held out.
TRAIN_ONLY: list[int] = []


def score(y, p):
    return float(np.mean(p == y)), float(np.mean(BBR[p] == BBR[y]))


def loco_scores(bank, mat, conds_idx, rule, preds=None):
    """{condition index: (6-class, BBR)} LOCO over the conditions ``conds_idx``
    (``preds``, if given, receives the prediction of every test window)."""
    D, ry, rc, _, ra = mat
    amps = (amp(bank.X), ra)
    out = {}
    for c in conds_idx:
        ti = np.flatnonzero(bank.cond == c)
        p = fold(D, ry, rc, ti, [x for x in conds_idx if x != c] + TRAIN_ONLY, rule, amps)
        if preds is not None:
            preds[ti] = p
        out[c] = score(bank.y[ti], p)
    return out


def bootstrap_median_gain(bank, p_base, p_new, n=2000, seed=0):
    """95 % interval of (median over conditions of the new configuration's accuracy) − (the
    baseline's), resampling each condition's test windows with replacement (paired): how much
    of a difference in medians the 30–60 windows per condition can produce by chance."""
    rng = np.random.default_rng(seed)
    conds = np.unique(bank.cond)
    idx = [np.flatnonzero(bank.cond == c) for c in conds]
    out = {"six": [], "bbr": []}
    ok_b6, ok_n6 = p_base == bank.y, p_new == bank.y
    ok_bb, ok_nb = BBR[p_base] == BBR[bank.y], BBR[p_new] == BBR[bank.y]
    for _ in range(n):
        samp = [rng.choice(i, len(i)) for i in idx]
        for key, ob, on in (("six", ok_b6, ok_n6), ("bbr", ok_bb, ok_nb)):
            out[key].append(np.median([on[s].mean() for s in samp]) - np.median([ob[s].mean() for s in samp]))
    return {k: (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) for k, v in out.items()}


def forest_rows(bank, names):
    """Random forest (the comparison learner of ``loco.py --learner forest``) on the divide-min window
    summaries, without and with summaries of the echo-burst spread: whether the spread channel
    carries class information that transfers across conditions."""
    from sklearn.ensemble import RandomForestClassifier

    F0 = loco.window_features(bank.X / bank.X.min(axis=1, keepdims=True))
    S = np.nan_to_num(bank.S, nan=0.0)
    Fs = np.column_stack([np.median(S, 1), S.mean(1), np.percentile(S, 90, 1),
                          np.median(S / bank.X.min(axis=1, keepdims=True), 1)])
    for label, F in (("divide-min summaries", F0), ("+ echo-burst spread", np.column_stack([F0, Fs]))):
        r = []
        for c in range(len(names)):
            tr = bank.cond != c
            clf = RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=0, n_jobs=1)
            r.append(score(bank.y[~tr], clf.fit(F[tr], bank.y[tr]).predict(F[~tr])))
        print(f"| forest, {label} | | " + " | ".join(f"{100 * x[0]:.0f} / {100 * x[1]:.0f}" for x in r)
              + f" | **{100 * np.median([x[0] for x in r]):.1f} / {100 * np.median([x[1] for x in r]):.1f}** |")


def near_oracle_rows(bank, names):
    """divide-min 1-NN with the references restricted to the conditions nearest the held-out one in
    the lab's own parameters (ORACLE: a live transfer knows its base RTT, not the rate or buffer):
    does a reference set near the held-out condition on this grid help?"""
    conds = bank.conds
    D = bank.dist("divide-min", "")
    bf = np.array([round(bdp_factor(conds[c]), 2) for c in names])
    lr = np.log([conds[c]["rate"] for c in names])
    lt = np.log([conds[c]["rtt"] for c in names])
    lb = np.log([conds[c]["buffer_bytes"] for c in names])
    spaces = {"rate, RTT, buffer bytes": np.column_stack([lr, lt, lb]),
              "BDP, buffer bytes": np.column_stack([lr + lt, lb]),
              "RTT, buffer × BDP": np.column_stack([lt, np.log(bf)])}
    variants = [("same buffer × BDP", None, None)] + [(f"nearest {k} by {sp}", sp, k)
                                                      for sp in spaces for k in (3, 5, 8)]
    for label, sp, k in variants:
        r = []
        for c in range(len(names)):
            if sp is None:
                near = [i for i in range(len(names)) if i != c and bf[i] == bf[c]]
            else:
                d = np.linalg.norm(spaces[sp] - spaces[sp][c], axis=1)
                d[c] = np.inf
                near = list(np.argsort(d)[:k])
            ti = np.flatnonzero(bank.cond == c)
            r.append(score(bank.y[ti], fold(D, bank.y, bank.cond, ti, near, "1nn")))
        print(f"| divide-min, {label} (oracle) | | " + " | ".join(f"{100 * x[0]:.0f} / {100 * x[1]:.0f}" for x in r)
              + f" | **{100 * np.median([x[0] for x in r]):.1f} / {100 * np.median([x[1] for x in r]):.1f}** |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--w", type=int, default=40)
    ap.add_argument("--radius", type=int, default=20)
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--configs", default="divide-min",
                    help="';'-separated rep[|rep2]+aug:v1/v2,aug:v@rule (rule: 1nn, knnK, hier; default 1nn)")
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--cache", default="target/loco-cache")
    ap.add_argument("--check", action="store_true", help="compare one 1-NN fold with opsel.KnnDtw")
    ap.add_argument("--bootstrap", action="store_true",
                    help="95 %% interval of each configuration's median gain over the first one")
    ap.add_argument("--forest", action="store_true",
                    help="also a random forest on window summaries, with and without the echo-burst spread")
    ap.add_argument("--near-oracle", action="store_true",
                    help="also divide-min 1-NN restricted to the conditions nearest the held-out one (oracle)")
    ap.add_argument("--exclude", default="", help="comma-separated conditions to leave out entirely")
    ap.add_argument("--train-only", default="",
                    help="comma-separated conditions used as references in every fold but never held out "
                         "(does adding them lift LOCO on the others?)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    os.makedirs(a.cache, exist_ok=True)
    conds = load(a.root, a.w, a.min_windows)
    for c in filter(None, a.exclude.split(",")):
        conds.pop(c, None)
    extra = [c for c in filter(None, a.train_only.split(",")) if c in conds]
    missing = set(filter(None, a.train_only.split(","))) - set(extra)
    if missing:
        raise SystemExit(f"--train-only: not in the corpus with all six classes: {', '.join(sorted(missing))}")
    names = sorted((c for c in conds if c not in extra),
                   key=lambda c: (conds[c]["rate"], conds[c]["rtt"], conds[c]["buffer_bytes"]))
    TRAIN_ONLY[:] = list(range(len(names), len(names) + len(extra)))
    names += extra
    bank = Bank(conds, names, a.w, a.radius, a.cache)
    t0 = time.time()
    print(f"{len(names)} conditions, {len(bank.y)} windows of w = {a.w}, radius {a.radius}")
    if a.check:
        import opsel

        c = names.index("r25-d40-b0.25") if "r25-d40-b0.25" in names else 0
        tr = bank.cond != c
        Q = represent(bank.X, bank.B, "divide-min")
        clf = opsel.KnnDtw(n_neighbors=1, radius=a.radius).fit(Q[tr], bank.y[tr])
        p1 = clf.predict(Q[~tr])
        p2 = fold(bank.dist("divide-min", ""), bank.y, bank.cond, np.flatnonzero(~tr),
                  [i for i in range(len(names)) if i != c], "1nn")
        print(f"check {names[c]}: opsel and matrix agree on {np.mean(p1 == p2) * 100:.1f} % of {len(p1)}")
    cfgs = [c.strip() for c in a.configs.split(";") if c.strip()]
    idx = [i for i in range(len(names)) if i not in TRAIN_ONLY]
    if extra:
        print(f"references only, never held out: {', '.join(extra)}")
    table = {}
    nrefs = {}
    preds = {}
    for cfg in cfgs:
        body, _, rule = cfg.partition("@")
        mat = config_matrix(bank, body)
        nrefs[cfg] = mat[3]
        preds[cfg] = np.empty(len(bank.y), dtype=int)
        table[cfg] = loco_scores(bank, mat, idx, rule or "1nn", preds[cfg])
    print("\nLOCO 6-class / BBR present (%), per held-out condition:")
    print("| configuration | references | " + " | ".join(names[i] for i in idx) + " | median |")
    print("|---|---|" + "---|" * (len(idx) + 1))
    for cfg in cfgs:
        r = table[cfg]
        cells = [f"{100 * r[i][0]:.0f} / {100 * r[i][1]:.0f}" for i in idx]
        m6 = np.median([r[i][0] for i in idx])
        mb = np.median([r[i][1] for i in idx])
        print(f"| `{cfg}` | {nrefs[cfg]} | " + " | ".join(cells) + f" | **{100 * m6:.1f} / {100 * mb:.1f}** |")
    ci = {}
    if a.bootstrap and len(cfgs) > 1:
        print(f"\nMedian gain over `{cfgs[0]}`, 95 % paired bootstrap interval (test windows resampled "
              "within each condition), percentage points:")
        print("| configuration | 6-class | BBR present |")
        print("|---|---|---|")
        for cfg in cfgs[1:]:
            ci[cfg] = bootstrap_median_gain(bank, preds[cfgs[0]], preds[cfg])
            r = ci[cfg]
            print(f"| `{cfg}` | {100 * r['six'][0]:+.1f} … {100 * r['six'][1]:+.1f} | "
                  f"{100 * r['bbr'][0]:+.1f} … {100 * r['bbr'][1]:+.1f} |")
    if a.forest:
        forest_rows(bank, names)
    if a.near_oracle:
        near_oracle_rows(bank, names)
    nested = None
    if a.nested and len(cfgs) > 1:
        nested = {}
        mats = {cfg: config_matrix(bank, cfg.partition("@")[0]) for cfg in cfgs}
        for c in idx:
            rest = [i for i in idx if i != c]
            inner = {}
            for cfg in cfgs:
                s = loco_scores(bank, mats[cfg], rest, cfg.partition("@")[2] or "1nn")
                inner[cfg] = (float(np.median([s[i][0] for i in rest])), float(np.median([s[i][1] for i in rest])))
            best = max(cfgs, key=lambda k: (inner[k], -cfgs.index(k)))
            D, ry, rc, _, ra = mats[best]
            ti = np.flatnonzero(bank.cond == c)
            p = fold(D, ry, rc, ti, rest + TRAIN_ONLY, best.partition("@")[2] or "1nn", (amp(bank.X), ra))
            nested[names[c]] = dict(zip(("six", "bbr"), score(bank.y[ti], p)), chosen=best,
                                    inner={k: list(v) for k, v in inner.items()})
        print("\nNested LOCO (configuration chosen on the other conditions only):")
        print("| held out | chosen | 6-class | BBR present |")
        print("|---|---|---|---|")
        for n in (names[i] for i in idx):
            r = nested[n]
            print(f"| {n} | `{r['chosen']}` | {100 * r['six']:.1f} | {100 * r['bbr']:.1f} |")
        print(f"| **median** | | **{100 * np.median([r['six'] for r in nested.values()]):.1f}** | "
              f"**{100 * np.median([r['bbr'] for r in nested.values()]):.1f}** |")
    print(f"\n({time.time() - t0:.0f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"w": a.w, "radius": a.radius,
                       "conditions": {n: int((bank.cond == i).sum()) for i, n in enumerate(names)},
                       "loco": {cfg: {names[i]: {"six": v[0], "bbr": v[1]} for i, v in table[cfg].items()}
                                for cfg in cfgs},
                       "references": nrefs, "median_gain_ci": ci, "nested": nested}, f, indent=1)


if __name__ == "__main__":
    main()
