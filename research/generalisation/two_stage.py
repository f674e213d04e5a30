"""Does a second representation separate the mixes inside "BBR present"?

Leave-one-condition-out over the conditions recorded every 200 ms (5 Hz, 10-s windows: the
shipped ``models/passive-200ms`` configuration) shows where the 6-class decision fails
(``window_sweep.py``'s confusion): one BBR plus one CUBIC flow (B1-C1) is read as one BBR flow
(B1-C0) or two (B1-B1) in most windows, and one CUBIC flow as two. All of these errors stay on
one side of "BBR present", the decision OPS acts on.

This tests a two-stage 1-NN DTW: stage 1 decides BBR present with divide-min (the shipped
representation); stage 2 picks the mix among the references on that side only, with another
representation of the same window: ``z-score`` (the level and spread removed, the shape kept),
``minmax`` (scaled to [0, 1]), or ``divide-min`` again (the plain 1-NN, as a control).
1-NN DTW, |a − b| cost, radius 25 samples. Our extension; 000 Ch 5 uses one representation.

Usage::

    .venv/bin/python research/generalisation/two_stage.py data/collect
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resolution  # noqa: E402
from resolution import BBR, score  # noqa: E402
from window_sweep import cached_matrix  # noqa: E402

REPS = {
    "none": lambda X: X,
    "subtract-min": lambda X: X - X.min(axis=1, keepdims=True),
    "divide-min": lambda X: X / X.min(axis=1, keepdims=True),
    "z-score": lambda X: (X - X.mean(axis=1, keepdims=True)) / np.maximum(X.std(axis=1, keepdims=True), 1e-9),
    "minmax": lambda X: (X - X.min(axis=1, keepdims=True))
    / np.maximum(np.ptp(X, axis=1, keepdims=True), 1e-9),
}


def matrix(X, rep, radius, cache):
    return cached_matrix(REPS[rep](X), radius, f"two-stage-{rep}", cache)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--w-s", type=int, default=10)
    ap.add_argument("--radius", type=int, default=25)
    ap.add_argument("--second", default="divide-min,z-score,minmax")
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--cache", default="target/loco-cache")
    ap.add_argument("--near", default="",
                    help="comma-separated factors F: stage 2 also keeps only references whose window "
                         "minimum is within a factor F of the query's (the path's base RTT)")
    ap.add_argument("--nested", action="store_true",
                    help="also choose stage 2 by an inner LOCO without the held-out condition")
    a = ap.parse_args(argv)
    conds = resolution.load(a.root, a.w_s, a.min_windows)
    names = list(conds)
    X = np.concatenate([conds[c][0] for c in names])
    y = np.concatenate([conds[c][1] for c in names])
    cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
    print(f"{len(names)} conditions, {len(y)} windows of {a.w_s} s at 5 Hz", flush=True)
    D1 = matrix(X, "divide-min", a.radius, a.cache)
    side = BBR[y]
    reps = a.second.split(",")
    D2s = {rep: matrix(X, rep, a.radius, a.cache) for rep in reps}

    base = np.log(X.min(axis=1))

    def predict(D2, i, skip=-1, near=None):
        """Two-stage predictions for condition ``i``'s windows from every condition but ``i``
        and ``skip``."""
        te = np.flatnonzero(cond == i)
        ref = (cond != i) & (cond != skip)
        first = y[np.argmin(np.where(ref[None, :], D1[te], np.inf), axis=1)]
        # Stage 2: the nearest reference under `rep` among those on stage 1's side.
        same = ref[None, :] & (side[None, :] == BBR[first][:, None])
        if near is not None:
            # ... whose window minimum is within a factor `near` of the query's, when any is.
            close = np.abs(base[te][:, None] - base[None, :]) <= np.log(near)
            some = (same & close).any(axis=1, keepdims=True)
            same = same & (close | ~some)
        return te, y[np.argmin(np.where(same, D2[te], np.inf), axis=1)]

    rows = {}
    for rep in reps:
        s = {}
        for i in range(len(names)):
            te, p = predict(D2s[rep], i)
            s[names[i]] = score(y[te], p)
        rows[rep] = s
        m6 = np.median([v[0] for v in s.values()])
        mb = np.median([v[1] for v in s.values()])
        print(f"divide-min → {rep}: LOCO median {100 * m6:.1f} / {100 * mb:.1f}", flush=True)
    for f in [float(v) for v in a.near.split(",") if v]:
        for rep in reps:
            s = {}
            for i in range(len(names)):
                te, p = predict(D2s[rep], i, near=f)
                s[names[i]] = score(y[te], p)
            rows[f"{rep} near ×{f:g}"] = s
            m6 = np.median([v[0] for v in s.values()])
            mb = np.median([v[1] for v in s.values()])
            print(f"divide-min → {rep}, base RTT within ×{f:g}: LOCO median {100 * m6:.1f} / {100 * mb:.1f}",
                  flush=True)
    if a.nested:
        # Nested LOCO: for each held-out condition, the stage 2 with the best median 6-class
        # LOCO over the other conditions alone (each scored against all but itself and the
        # held-out one), then that stage 2 on the held-out condition. BBR present is stage 1's
        # and the same for every stage 2.
        nested, picks = {}, {}
        for i in range(len(names)):
            inner = {}
            for rep in reps:
                six = []
                for j in range(len(names)):
                    if j != i:
                        te, p = predict(D2s[rep], j, skip=i)
                        six.append(score(y[te], p)[0])
                inner[rep] = np.median(six)
            best = max(reps, key=lambda r: (inner[r], -reps.index(r)))
            picks[names[i]] = best
            nested[names[i]] = rows[best][names[i]]
            print(f"  held out {names[i]}: inner medians "
                  + ", ".join(f"{r} {100 * v:.1f}" for r, v in inner.items()) + f" → {best}", flush=True)
        rows["nested"] = nested
        m6 = np.median([v[0] for v in nested.values()])
        mb = np.median([v[1] for v in nested.values()])
        from collections import Counter
        print(f"nested choice of stage 2: LOCO median {100 * m6:.1f} / {100 * mb:.1f}; picks "
              + ", ".join(f"{r} {n}" for r, n in Counter(picks.values()).most_common()), flush=True)
    print("\n| stage 2 | " + " | ".join(names) + " | median |\n|---|" + "---|" * (len(names) + 1))
    for rep, s in rows.items():
        m6 = np.median([v[0] for v in s.values()])
        mb = np.median([v[1] for v in s.values()])
        print(f"| `{rep}` | " + " | ".join(f"{100 * s[c][0]:.0f} / {100 * s[c][1]:.0f}" for c in names)
              + f" | **{100 * m6:.1f} / {100 * mb:.1f}** |")


if __name__ == "__main__":
    main()
