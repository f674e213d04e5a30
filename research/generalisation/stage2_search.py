"""Which second stage separates the mixes on each side of "BBR present"? A search by nested
leave-one-condition-out (LOCO), and a check on windows recorded after the search.

The shipped two-stage model (``two_stage.py``; ``models/passive-200ms-two-stage``) decides BBR
present with 1-NN DTW on the divide-min window (000 §3.5) and picks the mix among the references on
that side with a second 1-NN DTW on the z-scored window. Its 6-class errors count flows: one BBR
plus one CUBIC flow read as one BBR flow or two, one CUBIC flow read as two. The *distribution* of a
window's RTT samples carries the count better than their order: the sawtooth of one CUBIC flow
spreads the queue over the whole buffer, two flows' halvings move it less, a BBR flow holds it near
one level with short ProbeRTT dips. DTW warps time and so keeps the order's shape, not that.

Stage-2 candidates searched here (our extension; 000 Ch 5 uses one representation and 1-NN):

- representation: ``z-score`` (DTW, band ``--radius``, as shipped) or ``z-sorted`` (the z-scored
  window sorted ascending, compared by L1: 50 × the 1-Wasserstein distance between the two
  windows' z-scored value distributions; DTW with band 0);
- ``k`` nearest references on stage 1's side, majority vote, ties to the nearest;
- a combined distance c = d2 / s2 + a · d1 / s1, with d1 stage 1's divide-min DTW distance and
  s2, s1 the medians of the pairwise distances among the training references (an evenly spaced
  subsample of at most 600; what the core computes at fit and stores in the model file).

For every held-out condition, the candidate with the best median 6-class LOCO over the other
conditions alone (each scored against all but itself and the held-out one) is trained on those
and scored once on the held-out condition: the nested LOCO. ``--fresh ROOT`` then scores the
candidate with the best plain LOCO median on the whole corpus, trained on every condition but the
held-out one, on the windows of ``ROOT`` recorded after the corpus (per condition and class, the
windows beyond the corpus's count, in recording order): windows no choice has seen.

Usage (``--fresh`` reads the grown corpus; the search corpus is a snapshot of ``data/collect``)::

    git archive 5ad2bb6 data/collect | tar -x -C SNAP
    .venv/bin/python research/generalisation/stage2_search.py SNAP/data/collect --nested \
        --fresh data/collect
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
from two_stage import REPS  # noqa: E402
from window_sweep import cached_matrix  # noqa: E402

SCALE_REFS = 600


def zscore(X):
    return (X - X.mean(axis=1, keepdims=True)) / np.maximum(X.std(axis=1, keepdims=True), 1e-9)


def zsorted(X):
    return np.sort(zscore(X), axis=1)


def l1(A, B=None):
    """Every pairwise L1 distance (rows of A against rows of B; A against itself with the
    diagonal set to inf)."""
    same = B is None
    B = A if same else B
    out = np.empty((len(A), len(B)), np.float64)
    for s in range(0, len(A), 256):
        out[s:s + 256] = np.abs(A[s:s + 256, None, :] - B[None, :, :]).sum(-1)
    if same:
        np.fill_diagonal(out, np.inf)
    return out


def scale(D, ref):
    """Median pairwise distance among an evenly spaced subsample of the references ``ref``."""
    idx = np.flatnonzero(ref)
    s = idx[np.linspace(0, len(idx) - 1, min(SCALE_REFS, len(idx))).astype(int)]
    v = D[np.ix_(s, s)]
    return float(np.median(v[np.isfinite(v)]))


def vote(Drow, lab, k):
    """k-NN majority over each row's k nearest (ties in distance to the lower index), vote ties
    to the class of the nearest."""
    if k == 1:
        return lab[np.argmin(Drow, axis=1)]
    n = Drow.shape[1]
    idx = np.argpartition(Drow, k - 1, axis=1)[:, :k]
    d = np.take_along_axis(Drow, idx, 1)
    order = np.lexsort((idx, d), axis=1)
    L = lab[np.take_along_axis(idx, order, 1)]
    votes = np.stack([(L == c).sum(1) for c in range(len(SIX_CLASSES))], 1)
    first = np.stack([np.where((L == c).any(1), (L == c).argmax(1), k) for c in range(len(SIX_CLASSES))], 1)
    return np.argmax(votes * (k + 1) - first, axis=1)


class Search:
    def __init__(self, D1, D2s, y, cond):
        self.D1, self.D2s, self.y, self.cond = D1, D2s, y, cond
        self.side = BBR[y]

    def predict(self, cand, te, ref, D1te=None, D2te=None):
        """Two-stage predictions for windows ``te`` (rows of the matrices, or the given rows)
        from references ``ref``."""
        rep, k, a = cand
        D1 = self.D1[te] if D1te is None else D1te
        D2 = self.D2s[rep][te] if D2te is None else D2te[rep]
        D1r = np.where(ref[None, :], D1, np.inf)
        first = BBR[self.y[np.argmin(D1r, axis=1)]]
        same = ref[None, :] & (self.side[None, :] == first[:, None])
        C = D2 / scale(self.D2s[rep], ref) if a else D2
        if a:
            C = C + a * D1 / scale(self.D1, ref)
        return vote(np.where(same, C, np.inf), self.y, k)

    def loco(self, cand, i, skip=-1):
        te = np.flatnonzero(self.cond == i)
        ref = (self.cond != i) & (self.cond != skip)
        return score(self.y[te], self.predict(cand, te, ref))


def name(c):
    rep, k, a = c
    return f"{rep} k={k} a={a:g}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--w-s", type=int, default=10)
    ap.add_argument("--radius", type=int, default=25)
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--cache", default="target/loco-cache")
    ap.add_argument("--reps", default="z-score,z-sorted")
    ap.add_argument("--ks", default="1,3,5,7")
    ap.add_argument("--weights", default="0,0.25,0.5,1")
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--fresh", help="a grown copy of the corpus: score its windows recorded after ROOT")
    a = ap.parse_args(argv)
    conds = resolution.load(a.root, a.w_s, a.min_windows)
    names = list(conds)
    X = np.concatenate([conds[c][0] for c in names])
    y = np.concatenate([conds[c][1] for c in names])
    cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
    print(f"{len(names)} conditions, {len(y)} windows of {a.w_s} s at 5 Hz", flush=True)
    reps = a.reps.split(",")
    D1 = cached_matrix(REPS["divide-min"](X), a.radius, "two-stage-divide-min", a.cache)
    D2s = {}
    for rep in reps:
        D2s[rep] = l1(zsorted(X)) if rep == "z-sorted" else cached_matrix(
            REPS[rep](X), a.radius, f"two-stage-{rep}", a.cache)
    s = Search(D1, D2s, y, cond)
    cands = [(r, int(k), float(w)) for r in reps for k in a.ks.split(",") for w in a.weights.split(",")]
    n = len(names)
    rows = {}
    print("\n| stage 2 | 6-class median | BBR present median | conditions ≥ 85 % |\n|---|---|---|---|")
    for c in [("one-stage", 1, 0.0)] + cands:
        if c[0] == "one-stage":
            te_all = {i: np.flatnonzero(cond == i) for i in range(n)}
            r = {i: score(y[te_all[i]], y[np.argmin(np.where((cond != i)[None, :], D1[te_all[i]], np.inf), 1)])
                 for i in range(n)}
        else:
            r = {i: s.loco(c, i) for i in range(n)}
        rows[c] = r
        six = [v[0] for v in r.values()]
        print(f"| {'one stage (divide-min 1-NN)' if c[0] == 'one-stage' else name(c)} | "
              f"{100 * np.median(six):.1f} | {100 * np.median([v[1] for v in r.values()]):.1f} | "
              f"{sum(v >= 0.85 for v in six)} of {n} |", flush=True)
    if a.nested:
        picks, nested = {}, {}
        for i in range(n):
            inner = {c: np.median([s.loco(c, j, skip=i)[0] for j in range(n) if j != i]) for c in cands}
            best = max(cands, key=lambda c: (inner[c], -cands.index(c)))
            picks[names[i]] = best
            nested[names[i]] = rows[best][i]
            print(f"  held out {names[i]}: inner best {name(best)} {100 * inner[best]:.1f} → "
                  f"{100 * rows[best][i][0]:.1f} / {100 * rows[best][i][1]:.1f}", flush=True)
        six = [v[0] for v in nested.values()]
        print(f"nested LOCO: median {100 * np.median(six):.1f} 6-class / "
              f"{100 * np.median([v[1] for v in nested.values()]):.1f} BBR present; "
              f"{sum(v >= 0.85 for v in six)} of {n} conditions ≥ 85 %; picks "
              + ", ".join(f"{name(c)} {m}" for c, m in Counter(picks.values()).most_common()), flush=True)
        print("\n| held out | nested pick | 6-class | BBR present |\n|---|---|---|---|")
        for c in names:
            print(f"| `{c}` | {name(picks[c])} | {100 * nested[c][0]:.1f} | {100 * nested[c][1]:.1f} |")
    if a.fresh:
        best = max(cands, key=lambda c: (np.median([v[0] for v in rows[c].values()]), -cands.index(c)))
        fresh(a, conds, names, X, y, cond, s, best)


def fresh_windows(root, conds, names, w_s, min_windows):
    """The windows of the grown corpus ``root`` beyond the search corpus ``conds``: per condition
    and class, those after the corpus's count, in recording order (later runs of the same lab
    conditions). Returns (X, y, condition index into ``names``); stops if ``root`` does not start
    with the search corpus."""
    grown = resolution.load(root, w_s, min_windows)
    Xn, yn, cn = [], [], []
    for i, c in enumerate(names):
        Xc, yc = grown[c][0], grown[c][1]
        for k in range(len(SIX_CLASSES)):
            have = np.flatnonzero(yc == k)
            o = int((conds[c][1] == k).sum())
            if not np.array_equal(Xc[have[:o]], conds[c][0][conds[c][1] == k]):
                raise SystemExit(f"{c} {SIX_CLASSES[k]}: the grown corpus does not start with the searched one")
            Xn.append(Xc[have[o:]])
            yn += [k] * (len(have) - o)
            cn += [i] * (len(have) - o)
    return np.concatenate(Xn), np.array(yn), np.array(cn)


def fresh(a, conds, names, X, y, cond, s, best):
    from dtaidistance import dtw

    Xn, yn, cn = fresh_windows(a.fresh, conds, names, a.w_s, a.min_windows)
    print(f"\nfresh windows (recorded after the search corpus): {len(yn)} at "
          f"{len(set(cn.tolist()))} conditions; scored with {name(best)} (best LOCO median above)", flush=True)
    A = np.ascontiguousarray(REPS["divide-min"](np.concatenate([Xn, X])))
    m = len(Xn)
    D1n = dtw.distance_matrix_fast(A, block=((0, m), (m, len(A))), window=a.radius + 1,
                                   inner_dist="euclidean", compact=False)[:m, m:]
    D2n = {"z-sorted": l1(zsorted(Xn), zsorted(X))}
    if "z-score" in s.D2s:
        Z = np.ascontiguousarray(REPS["z-score"](np.concatenate([Xn, X])))
        D2n["z-score"] = dtw.distance_matrix_fast(Z, block=((0, m), (m, len(A))), window=a.radius + 1,
                                                  inner_dist="euclidean", compact=False)[:m, m:]
    print("\n| held out | fresh windows | one stage | z-score 1-NN (shipped two-stage) | "
          f"{name(best)} |\n|---|---|---|---|---|")
    tot = {"one": [], "z": [], "best": []}
    for i in sorted(set(cn.tolist())):
        te = np.flatnonzero(cn == i)
        ref = cond != i
        one = y[np.argmin(np.where(ref[None, :], D1n[te], np.inf), 1)]
        z = s.predict(("z-score", 1, 0.0), te, ref, D1te=D1n[te], D2te={r: D2n[r][te] for r in D2n}) \
            if "z-score" in D2n else one
        b = s.predict(best, te, ref, D1te=D1n[te], D2te={r: D2n[r][te] for r in D2n})
        r = [score(yn[te], p) for p in (one, z, b)]
        for key, v in zip(("one", "z", "best"), r):
            tot[key].append(v)
        print(f"| `{names[i]}` | {len(te)} | " + " | ".join(f"{100 * v[0]:.1f} / {100 * v[1]:.1f}" for v in r) + " |")
    print("| **median** | | " + " | ".join(
        f"**{100 * np.median([v[0] for v in tot[k]]):.1f} / {100 * np.median([v[1] for v in tot[k]]):.1f}**"
        for k in ("one", "z", "best")) + " |")


if __name__ == "__main__":
    main()
