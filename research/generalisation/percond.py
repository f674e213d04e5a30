"""Where does the two-stage 5-Hz model still fail, per held-out condition, and does a cheap
window feature fix it? A diagnosis and a nested leave-one-condition-out (LOCO) search.

The shipped ``models/passive-200ms-two-stage`` (``stage2_search.py``) decides BBR present with
1-NN DTW on the divide-min window (000 §3.5) and picks the mix among that side's references with
a 7-NN vote on c = L / sL + 0.25 · D1 / s1 (L the L1 distance of z-sorted windows, D1 stage 1's
DTW distance). Its nested LOCO median meets the 6-class target (90.3 %), but 9 of 28 held-out
conditions are below 85 % 6-class and 10 below 97 % BBR present.

``diagnose`` prints, for the shipped configuration in plain LOCO, every condition's scores with
its physical parameters (rate, base RTT, buffer in ms = buffer × BDP × base RTT, the idle echo
noise) and, at every condition below a target, the confusion matrix of each stage, per-class
window statistics (window minimum / base RTT, range / minimum, the median sample-to-sample step,
the share of samples within 10 % of the range from the minimum) and three shape features
(autocorrelation at lags 1-3, interquartile range / standard deviation, skewness), and the median
|step| / window standard deviation (the roughness the ``diff`` feature below reads).

``search`` runs the nested LOCO over a candidate set fixed here, before any scoring:

- stage 1 (BBR present): 1-NN on C1 = D1 / s1 + b · F / sF, F one feature distance below,
  b ∈ {0 (the shipped stage 1), 0.25, 0.5} for F ∈ {acf, diff};
- stage 2 (the mix on stage 1's side): the shipped 7-NN vote, with the sorted window either
  z-scored (``z-sorted``, shipped) or centred on its median and scaled by its interquartile range
  (``r-sorted``: one ProbeRTT dip sample no longer sets the scale of every other sample), plus
  e · F / sF, e ∈ {0.25, 0.5}, F ∈ {acf, diff, amp} (or no feature term).

Feature distances (each from the 50 samples alone; a few hundred flops a window, computed once per
query; the reference side is stored):

- ``acf``: L1 between the autocorrelations of the z-scored window at lags 1-5 (the spectrum a
  CUBIC sawtooth aliased into 2-3 samples leaves, which DTW's warping does not keep);
- ``diff``: L1 between the sorted sample-to-sample differences divided by the window's standard
  deviation (49 values: the distribution of steps, a sawtooth's slow rises and sharp drops);
- ``amp``: |Δ log(range / minimum + 0.001)| (the queue's amplitude in base RTTs, which z-sorted
  removes; only in stage 2).

Scales s are the medians of pairwise distances among an evenly spaced 600 training references,
as in ``stage2_search.py``. 5 stage-1 × 14 stage-2 = 70 candidates; the shipped one is first.

**Selection rule** (fixed before scoring): for each held-out condition, every candidate is scored
by LOCO over the other 27 conditions alone (each inner condition against the remaining 26); the
pick maximises (the number of inner conditions with 6-class ≥ 85 % and BBR present ≥ 97 %, then
the median inner 6-class accuracy, then the earlier candidate). The pick is trained on the 27 and
scored once on the held-out condition. ``--fresh ROOT`` scores, on the windows of ROOT recorded
after the corpus (as ``stage2_search.py --fresh``), the candidate the same rule picks by plain LOCO
over all 28 conditions, against the shipped configuration; nothing is chosen on those windows.

Usage::

    git archive 5ad2bb6 data/collect | tar -x -C SNAP
    .venv/bin/python research/generalisation/percond.py diagnose SNAP/data/collect
    .venv/bin/python research/generalisation/percond.py search SNAP/data/collect --fresh data/collect
    .venv/bin/python research/generalisation/percond.py diagnose SNAP/data/collect --stage1 diff:0.25
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resolution  # noqa: E402
from resolution import BBR, SIX_CLASSES, score  # noqa: E402
from stage2_search import fresh_windows, l1, vote, zscore, zsorted  # noqa: E402
from two_stage import REPS  # noqa: E402
from window_sweep import cached_matrix  # noqa: E402

SCALE_REFS = 600
SIX_TARGET, BBR_TARGET = 0.85, 0.97
K, A = 7, 0.25  # the shipped stage 2's vote and stage-1 weight


def rsorted(X):
    """The sorted window centred on its median and scaled by its interquartile range (floored at
    0.01 ms, the echo's resolution, for windows of an idle path)."""
    s = np.sort(X, axis=1)
    n = X.shape[1]
    med = 0.5 * (s[:, (n - 1) // 2] + s[:, n // 2])
    iqr = s[:, (3 * n) // 4] - s[:, n // 4]
    return (s - med[:, None]) / np.maximum(iqr, 0.01)[:, None]


def f_acf(X):
    Z = zscore(X)
    return np.stack([(Z[:, :-lag] * Z[:, lag:]).mean(1) for lag in range(1, 6)], 1)


def f_diff(X):
    return np.sort(np.diff(X, axis=1) / np.maximum(X.std(axis=1, keepdims=True), 1e-9), axis=1)


def f_amp(X):
    return np.log(np.ptp(X, axis=1) / X.min(axis=1) + 1e-3)[:, None]


FEATURES = {"acf": f_acf, "diff": f_diff, "amp": f_amp}
SORTED = {"z-sorted": zsorted, "r-sorted": rsorted}


def pairwise(A, B=None):
    return l1(A, B)


def candidates():
    s1 = [(None, 0.0)] + [(f, b) for f in ("acf", "diff") for b in (0.25, 0.5)]
    s2 = [(rep, f, e) for rep in ("z-sorted", "r-sorted")
          for (f, e) in [(None, 0.0)] + [(f, e) for f in ("acf", "diff", "amp") for e in (0.25, 0.5)]]
    return [(a, b) for a in s1 for b in s2]


def name(c):
    (f1, b), (rep, f2, e) = c
    one = "DTW" if f1 is None else f"DTW + {b:g}·{f1}"
    two = rep if f2 is None else f"{rep} + {e:g}·{f2}"
    return f"stage 1 {one}; stage 2 {two}"


def corpus(root):
    conds = resolution.load(root, 10, 3)
    names = list(conds)
    X = np.concatenate([conds[c][0] for c in names])
    y = np.concatenate([conds[c][1] for c in names])
    cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
    return conds, names, X, y, cond


def matrices(X, cache):
    M = {"D1": cached_matrix(REPS["divide-min"](X), 25, "two-stage-divide-min", cache)}
    for rep, fn in SORTED.items():
        M[rep] = pairwise(fn(X))
    for f, fn in FEATURES.items():
        M[f] = pairwise(fn(X))
    return M


class Scales:
    """Median pairwise distance among an evenly spaced subsample of the references, per matrix
    and reference set (the reference set is every condition but one or two)."""

    def __init__(self, M, cond):
        self.M, self.cond, self.memo = M, cond, {}

    def get(self, key, excl):
        k = (key, frozenset(excl))
        if k not in self.memo:
            ref = ~np.isin(self.cond, list(excl))
            idx = np.flatnonzero(ref)
            s = idx[np.linspace(0, len(idx) - 1, min(SCALE_REFS, len(idx))).astype(int)]
            v = self.M[key][np.ix_(s, s)]
            self.memo[k] = float(np.median(v[np.isfinite(v)]))
        return self.memo[k]


def predict_all(cands, te, ref, y, M, sc, excl, rows=None):
    """Predictions of every candidate for windows ``te`` from references ``ref``. ``rows`` gives
    the distance rows of the query windows (default: rows ``te`` of the corpus matrices)."""
    R = {k: (M[k][te] if rows is None else rows[k]) for k in M}
    side = BBR[y]
    s1 = {}
    for f1, b in {c[0] for c in cands}:
        C = R["D1"] / sc.get("D1", excl)
        if f1 is not None:
            C = C + b * R[f1] / sc.get(f1, excl)
        s1[(f1, b)] = BBR[y[np.argmin(np.where(ref[None, :], C, np.inf), axis=1)]]
    s2 = {}
    for rep, f2, e in {c[1] for c in cands}:
        C = R[rep] / sc.get(rep, excl) + A * R["D1"] / sc.get("D1", excl)
        if f2 is not None:
            C = C + e * R[f2] / sc.get(f2, excl)
        # Stage 2 on each side for every window; stage 1 then says which side's answer counts.
        s2[(rep, f2, e)] = [vote(np.where((ref & (side == sd))[None, :], C, np.inf), y, K) for sd in (False, True)]
    return {c: np.where(s1[c[0]], s2[c[1]][1], s2[c[1]][0]) for c in cands}


def ok(r):
    return r[0] >= SIX_TARGET and r[1] >= BBR_TARGET


def rule(res, cands):
    """The selection rule: most conditions meeting both targets, then the median 6-class, then
    the earlier candidate. ``res`` is {candidate: [(6-class, BBR present) per condition]}."""
    return max(cands, key=lambda c: (sum(ok(r) for r in res[c]), np.median([r[0] for r in res[c]]),
                                     -cands.index(c)))


def search(a):
    conds, names, X, y, cond = corpus(a.root)
    n = len(names)
    M = matrices(X, a.cache)
    sc = Scales(M, cond)
    cands = candidates()
    print(f"{n} conditions, {len(y)} windows; {len(cands)} candidates (the shipped one first)", flush=True)
    # R[(j, excl)][cand] = (6-class, BBR present) of condition j scored against every condition
    # not in excl (excl = {j} plain LOCO, {i, j} inside the fold that holds out i).
    R = {}
    for i in range(-1, n):
        for j in range(n):
            if j == i:
                continue
            excl = (j,) if i < 0 else tuple(sorted((i, j)))
            if (j, excl) in R:
                continue
            te = np.flatnonzero(cond == j)
            ref = ~np.isin(cond, excl)
            P = predict_all(cands, te, ref, y, M, sc, excl)
            R[(j, excl)] = {c: score(y[te], P[c]) for c in cands}
        if i >= 0:
            print(f"  inner LOCO without {names[i]} done", flush=True)
    plain = {c: [R[(j, (j,))][c] for j in range(n)] for c in cands}
    print("\nplain LOCO of every candidate (information; the nested rule below chooses):\n\n"
          "| candidate | conditions meeting both | 6-class median | BBR present median | lowest 6-class | "
          "lowest BBR present |\n|---|---|---|---|---|---|")
    for c in cands:
        r = plain[c]
        print(f"| {name(c)} | {sum(ok(v) for v in r)} | {100 * np.median([v[0] for v in r]):.1f} | "
              f"{100 * np.median([v[1] for v in r]):.1f} | {100 * min(v[0] for v in r):.1f} | "
              f"{100 * min(v[1] for v in r):.1f} |")
    picks, nested = {}, {}
    for i in range(n):
        inner = {c: [R[(j, tuple(sorted((i, j))))][c] for j in range(n) if j != i] for c in cands}
        best = rule(inner, cands)
        picks[i], nested[i] = best, R[(i, (i,))][best]
        ib = inner[best]
        print(f"  held out {names[i]}: pick {name(best)} (inner {sum(ok(v) for v in ib)} of {n - 1} meeting "
              f"both, median {100 * np.median([v[0] for v in ib]):.1f}; shipped inner "
              f"{sum(ok(v) for v in inner[cands[0]])}) → {100 * nested[i][0]:.1f} / {100 * nested[i][1]:.1f}",
              flush=True)
    ship = plain[cands[0]]
    print("\n| held out | nested pick | nested 6-class / BBR present | shipped (LOCO) |\n|---|---|---|---|")
    for i in range(n):
        print(f"| `{names[i]}` | {name(picks[i])} | {100 * nested[i][0]:.1f} / {100 * nested[i][1]:.1f} | "
              f"{100 * ship[i][0]:.1f} / {100 * ship[i][1]:.1f} |")
    for label, r in (("nested LOCO", [nested[i] for i in range(n)]), ("shipped, plain LOCO", ship)):
        print(f"{label}: {sum(ok(v) for v in r)} of {n} conditions meet both targets "
              f"({sum(v[0] >= SIX_TARGET for v in r)} ≥ 85 % 6-class, {sum(v[1] >= BBR_TARGET for v in r)} "
              f"≥ 97 % BBR present); median {100 * np.median([v[0] for v in r]):.1f} / "
              f"{100 * np.median([v[1] for v in r]):.1f}")
    print("picks: " + ", ".join(f"{name(c)} ×{m}" for c, m in Counter(picks.values()).most_common()), flush=True)
    if a.fresh:
        fresh(a, conds, names, X, y, cond, M, sc, cands, rule(plain, cands))


def fresh(a, conds, names, X, y, cond, M, sc, cands, best):
    from dtaidistance import dtw

    Xn, yn, cn = fresh_windows(a.fresh, conds, names, 10, 3)
    print(f"\nfresh windows (recorded after the search corpus): {len(yn)} at {len(set(cn.tolist()))} "
          f"conditions; the rule's pick on plain LOCO over the corpus: {name(best)}", flush=True)
    m = len(Xn)
    Q = np.ascontiguousarray(REPS["divide-min"](np.concatenate([Xn, X])))
    rows = {"D1": dtw.distance_matrix_fast(Q, block=((0, m), (m, len(Q))), window=26,
                                           inner_dist="euclidean", compact=False)[:m, m:]}
    for rep, fn in SORTED.items():
        rows[rep] = pairwise(fn(Xn), fn(X))
    for f, fn in FEATURES.items():
        rows[f] = pairwise(fn(Xn), fn(X))
    use = [cands[0], best] if best != cands[0] else [cands[0]]
    print(f"\n| held out | fresh windows | shipped | {name(best)} |\n|---|---|---|---|")
    tot = {c: [] for c in use}
    for i in sorted(set(cn.tolist())):
        te = np.flatnonzero(cn == i)
        ref = cond != i
        P = predict_all(use, te, ref, y, M, sc, (i,), rows={k: v[te] for k, v in rows.items()})
        r = {c: score(yn[te], P[c]) for c in use}
        for c in use:
            tot[c].append(r[c])
        print(f"| `{names[i]}` | {len(te)} | " + " | ".join(
            f"{100 * r[c][0]:.1f} / {100 * r[c][1]:.1f}" for c in (cands[0], best)) + " |")
    print("| **median** | | " + " | ".join(
        f"**{100 * np.median([v[0] for v in tot[c]]):.1f} / {100 * np.median([v[1] for v in tot[c]]):.1f}**"
        for c in (cands[0], best)) + " |")
    print("| meeting both targets | | " + " | ".join(
        f"{sum(ok(v) for v in tot[c])} of {len(tot[c])}" for c in (cands[0], best)) + " |")


def par(name):
    """(rate Mbit/s, base RTT ms, buffer × BDP) from a condition's name (``c50`` is 50 / 40 / 1)."""
    if name == "c50":
        return 50.0, 40.0, 1.0
    r, d, b = name[1:].split("-")
    return float(r), float(d[1:]), float(b[1:])


def diagnose(a):
    conds, names, X, y, cond = corpus(a.root)
    M = matrices(X, a.cache)
    sc = Scales(M, cond)
    ship = candidates()[0]
    if a.stage1:
        f1, b = a.stage1.split(":")
        ship = ((f1, float(b)), ship[1])
    P = np.empty_like(y)
    P1 = np.empty_like(y)
    for i in range(len(names)):
        te = np.flatnonzero(cond == i)
        ref = cond != i
        P[te] = predict_all([ship], te, ref, y, M, sc, (i,))[ship]
        C1 = M["D1"][te]
        if ship[0][0] is not None:
            C1 = C1 / sc.get("D1", (i,)) + ship[0][1] * M[ship[0][0]][te] / sc.get(ship[0][0], (i,))
        P1[te] = y[np.argmin(np.where(ref[None, :], C1, np.inf), axis=1)]
    print(f"{len(names)} conditions, {len(y)} windows; {name(ship)} in plain LOCO\n")
    print("| condition | 6-class | BBR present | rate Mbit/s | base RTT ms | buffer × BDP | buffer ms | "
          "idle step ms (median abs) |\n|---|---|---|---|---|---|---|---|")
    rows = []
    for i, c in enumerate(names):
        te = cond == i
        r, d, b = par(c)
        idle = X[te & (y == 0)]
        rows.append((c, *score(y[te], P[te]), r, d, b, b * d, float(np.median(np.abs(np.diff(idle, axis=1))))))
    rows.sort(key=lambda t: t[1])
    for t in rows:
        print(f"| `{t[0]}` | {100 * t[1]:.1f} | {100 * t[2]:.1f} | {t[3]:g} | {t[4]:g} | {t[5]:g} | {t[6]:.1f} | "
              f"{t[7]:.2f} |")
    Z = zscore(X)
    acf = f_acf(X)
    srt = np.sort(X, axis=1)
    iqr_sd = (srt[:, 37] - srt[:, 12]) / np.maximum(X.std(axis=1), 1e-9)
    skew = (Z ** 3).mean(axis=1)
    for t in rows:
        if t[1] >= SIX_TARGET and t[2] >= BBR_TARGET:
            continue
        c = t[0]
        i = names.index(c)
        te = cond == i
        d = par(c)[1]
        print(f"\n### `{c}`: 6-class {100 * t[1]:.1f} %, BBR present {100 * t[2]:.1f} %\n")
        for title, pred in ((f"stage 1 ({name(ship).split(';')[0]}, 1-NN; its side is BBR present)", P1),
                            ("two-stage", P)):
            Mx = np.zeros((6, 6), int)
            for u, v in zip(y[te], pred[te]):
                Mx[u, v] += 1
            print(f"{title}, rows true, columns predicted:\n\n| | " + " | ".join(SIX_CLASSES) + " |\n|---"
                  + "|---" * 6 + "|")
            for u in range(6):
                print(f"| {SIX_CLASSES[u]} | " + " | ".join(str(v) for v in Mx[u]) + " |")
            print()
        print("per class, medians over its windows: min / base RTT, range / min, |step| ms, |step| / window sd, "
              "share near min, acf lag 1 / 2 / 3, IQR / sd, skewness\n\n| class | min/base | range/min | step | "
              "step/sd | near min | acf 1 | acf 2 | acf 3 | IQR/sd | skew |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
        for k in range(6):
            m = te & (y == k)
            W = X[m]
            mn = W.min(axis=1)
            rg = np.ptp(W, axis=1)
            near = ((W - mn[:, None]) < 0.1 * np.maximum(rg[:, None], 1e-9)).mean(axis=1)
            print(f"| {SIX_CLASSES[k]} | {np.median(mn) / d:.2f} | {np.median(rg / mn):.3f} | "
                  f"{np.median(np.abs(np.diff(W, axis=1))):.2f} | "
                  f"{np.median(np.median(np.abs(np.diff(W, axis=1)), axis=1) / np.maximum(W.std(axis=1), 1e-9)):.2f} | "
                  f"{np.median(near):.2f} | "
                  f"{np.median(acf[m, 0]):+.2f} | {np.median(acf[m, 1]):+.2f} | {np.median(acf[m, 2]):+.2f} | "
                  f"{np.median(iqr_sd[m]):.2f} | {np.median(skew[m]):+.2f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("diagnose", "search"))
    ap.add_argument("root")
    ap.add_argument("--cache", default="target/loco-cache")
    ap.add_argument("--fresh", help="a grown copy of the corpus: score its windows recorded after ROOT")
    ap.add_argument("--stage1", help="diagnose: a stage-1 feature term FEATURE:WEIGHT (e.g. diff:0.25) "
                    "instead of the shipped stage 1")
    a = ap.parse_args(argv)
    {"diagnose": diagnose, "search": search}[a.what](a)


if __name__ == "__main__":
    main()
