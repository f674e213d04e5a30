"""Which sample rate and window length generalise best at the conditions recorded every 200 ms?

``resolution.py`` compared the rates on 7–8 conditions. With the dense grid there are now
20+ conditions recorded at 200 ms, so the same question gets a proper leave-one-condition-out
(LOCO) answer, and a *nested* one: for every held-out condition the configuration is chosen
by LOCO over the other conditions only, then scored once on the held-out one (the issue's
rule: never choose on a condition reported as unseen).

A configuration is ``<series>:<window s>``: the series of ``resolution.py`` (``5hz`` every
200-ms sample, ``2.5hz`` every second one, ``1hz`` every fifth: what the 1 Hz prober would
have read on the same traffic) and the window in seconds. Each is divide-min, 1-NN DTW with
the core's |a − b| cost and a Sakoe–Chiba radius of half the window (the shipped models'
rule). Decision delay is the window: a 20-s window decides after 20 s of probing.

Usage::

    .venv/bin/python research/generalisation/window_sweep.py data/collect \\
        --configs 5hz:10,2.5hz:10,5hz:20,2.5hz:20,1hz:20 --nested

Distance matrices are cached under ``target/loco-cache`` (keyed by the windows' bytes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np
from dtaidistance import dtw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resolution  # noqa: E402
from resolution import hz, resample, score  # noqa: E402
from opsel.train.data import SIX_CLASSES  # noqa: E402


def parse(cfg: str) -> tuple[str, int]:
    how, w_s = cfg.split(":")
    hz(how)  # validates the series name
    return how, int(w_s)


def cached_matrix(Q: np.ndarray, radius: int, tag: str, cache: str) -> np.ndarray:
    """Every pairwise DTW distance of the (already normalised) windows ``Q``, |a − b| cost,
    Sakoe–Chiba ``radius``, the diagonal set to inf; cached under ``cache`` by the windows' bytes."""
    Q = np.ascontiguousarray(Q)
    key = hashlib.sha1(Q.tobytes() + f"{tag}:{radius}".encode()).hexdigest()[:16]
    path = os.path.join(cache, f"{tag}-{key}.npy")
    if os.path.exists(path):
        return np.load(path)
    D = dtw.distance_matrix_fast(Q, window=radius + 1, inner_dist="euclidean", compact=False)
    np.fill_diagonal(D, np.inf)
    os.makedirs(cache, exist_ok=True)
    np.save(path, D)
    return D


def matrix(X: np.ndarray, how: str, w_s: int, cache: str) -> np.ndarray:
    S = resample(X, how)
    radius = max(1, round(w_s / 2 * hz(how)))
    return cached_matrix(S / S.min(axis=1, keepdims=True), radius, f"sweep-{how}-{w_s}", cache)


def loco_predict(D, y, cond, i, skip=None):
    """1-NN predictions for condition ``i``'s windows from every other condition but ``skip``."""
    te = np.flatnonzero(cond == i)
    ref = (cond != i) & (cond != (-1 if skip is None else skip))
    return te, y[np.argmin(np.where(ref[None, :], D[te], np.inf), axis=1)]


def loco_scores(D, y, cond, n_cond, skip=None):
    """{condition index: (6-class, BBR present)}: each condition against all others but ``skip``."""
    out = {}
    for i in range(n_cond):
        if i != skip:
            te, p = loco_predict(D, y, cond, i, skip)
            out[i] = score(y[te], p)
    return out


def confusion(D, y, cond, n_cond) -> np.ndarray:
    """Rows: true class, columns: LOCO prediction, summed over the held-out conditions."""
    C = np.zeros((len(SIX_CLASSES), len(SIX_CLASSES)), dtype=int)
    for i in range(n_cond):
        te, p = loco_predict(D, y, cond, i)
        np.add.at(C, (y[te], p), 1)
    return C


def medians(s: dict) -> tuple[float, float]:
    return float(np.median([v[0] for v in s.values()])), float(np.median([v[1] for v in s.values()]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--configs", default="5hz:10,2.5hz:10,5hz:20,2.5hz:20,1hz:20")
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--cache", default="target/loco-cache")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    cfgs = [parse(c) for c in a.configs.split(",") if c]
    by_w = {w: resolution.load(a.root, w, a.min_windows) for w in sorted({w for _, w in cfgs})}
    # Only conditions complete at every window length, so every configuration sees the same set.
    names = sorted(set.intersection(*(set(v) for v in by_w.values())))
    print(f"{len(names)} conditions recorded at 200 ms: {', '.join(names)}")
    res = {}
    for how, w_s in cfgs:
        conds = by_w[w_s]
        X = np.concatenate([conds[c][0] for c in names])
        y = np.concatenate([conds[c][1] for c in names])
        cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
        D = matrix(X, how, w_s, a.cache)
        res[f"{how}:{w_s}"] = dict(D=D, y=y, cond=cond, loco=loco_scores(D, y, cond, len(names)))
        m = medians(res[f"{how}:{w_s}"]["loco"])
        print(f"{how}:{w_s}  {len(y)} windows  LOCO median {100 * m[0]:.1f} / {100 * m[1]:.1f}", flush=True)

    print("\nLOCO, 6-class / BBR present (%)")
    print("| configuration | " + " | ".join(names) + " | median |")
    print("|---|" + "---|" * (len(names) + 1))
    for k, r in res.items():
        cells = [f"{100 * r['loco'][i][0]:.0f} / {100 * r['loco'][i][1]:.0f}" for i in range(len(names))]
        m = medians(r["loco"])
        print(f"| `{k}` | " + " | ".join(cells) + f" | **{100 * m[0]:.1f} / {100 * m[1]:.1f}** |")
    for k, r in res.items():
        C = confusion(r["D"], r["y"], r["cond"], len(names))
        print(f"\nLOCO confusion of `{k}` (rows true, columns predicted; summed over held-out conditions)")
        print("| | " + " | ".join(SIX_CLASSES) + " |\n|---|" + "---|" * len(SIX_CLASSES))
        for j, c in enumerate(SIX_CLASSES):
            print(f"| {c} | " + " | ".join(str(v) for v in C[j]) + " |")

    nested = {}
    if a.nested:
        # For each held-out condition: every configuration's LOCO median over the others
        # (the held-out condition neither tested nor referenced), the best by 6-class then
        # BBR present is scored once on the held-out condition with all others as references.
        for i, c in enumerate(names):
            inner = {k: medians(loco_scores(r["D"], r["y"], r["cond"], len(names), skip=i)) for k, r in res.items()}
            pick = max(inner, key=lambda k: inner[k])
            nested[c] = dict(pick=pick, score=res[pick]["loco"][i])
        picks = {}
        for v in nested.values():
            picks[v["pick"]] = picks.get(v["pick"], 0) + 1
        m6 = np.median([v["score"][0] for v in nested.values()])
        mb = np.median([v["score"][1] for v in nested.values()])
        print(f"\nnested LOCO: median {100 * m6:.1f} / {100 * mb:.1f}; picks {picks}")
        print("| held out | pick | 6-class / BBR present % |\n|---|---|---|")
        for c, v in nested.items():
            print(f"| `{c}` | `{v['pick']}` | {100 * v['score'][0]:.0f} / {100 * v['score'][1]:.0f} |")
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"conditions": names,
                       "loco": {k: {names[i]: s for i, s in r["loco"].items()} for k, r in res.items()},
                       "nested": nested}, f, indent=1)


if __name__ == "__main__":
    main()
