"""Does a finer time resolution make recognition hold across networks?

The 1 Hz RTT series of 000 §3.2 aliases two things the grid's misses point at
(docs/results/generalisation.md, "Where the misses are"): at a shallow buffer a
lone CUBIC flow's sawtooth has a period of about three samples, and BBR's
200 ms ProbeRTT dip is caught by a 10 ms echo burst about once in five.

``opsel lab collect --mode passive-200ms`` records the same 10-echo bursts every
200 ms. Every fifth sample of such a trace is exactly what the 1 Hz prober would
have recorded on the same traffic, so the resolutions are compared *paired*:

* ``1hz``       samples k = 0, 5, 10, … (the 1 Hz series), w = 40 s → 40 samples
* ``1hz-mean``  the mean of each second's five bursts (1 Hz, less noise)
* ``2.5hz``     every second sample, 100 samples
* ``5hz``       every sample, 200 samples

each as divide-min (the shipped representation), 1-NN DTW with the core's
|a − b| cost, the Sakoe–Chiba radius given in seconds (20 s, the shipped
model's 20 samples at 1 Hz) or ``--radius-s``. Scores: leave-one-condition-out
(LOCO) over the conditions recorded at 200 ms, and within each condition (each trace's later
windows against its earlier ones: references recorded at the path's own condition).

Usage::

    .venv/bin/python research/generalisation/resolution.py data/collect --json research/generalisation/results/resolution.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from dtaidistance import dtw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loco  # noqa: E402
from opsel.train.data import SIX_CLASSES, find_traces_dir, trace_windows_meta  # noqa: E402

BBR = np.array([c in loco.BBR_CLASSES for c in SIX_CLASSES])
CLS = {c: i for i, c in enumerate(SIX_CLASSES)}
MODE = "passive-200ms"
PER_S = 5  # samples a second at 200 ms


def load(root: str, w_s: int, min_windows: int, split: str = "half"):
    """{condition: (X (n, w_s * 5), y, late)} for every condition with all six classes at 200 ms;
    ``late`` marks the later half of each trace's windows."""
    out = {}
    for cond in sorted(os.listdir(root)):
        d = os.path.join(root, cond, MODE)
        if not os.path.isdir(d):
            continue
        traces = find_traces_dir(d)
        if len(traces) != len(SIX_CLASSES):
            continue
        Xs, ys, late = [], [], []
        for tr in traces:
            X, runs, _ = trace_windows_meta(tr, w_s * PER_S)
            if len(X) < min_windows or (split == "run" and len(set(runs)) < 2):
                break
            Xs.append(X)
            ys += [CLS[tr.label]] * len(X)
            if split == "run":
                # The trace's last recording run against its earlier ones (another lab
                # set-up, another moment): what references recorded beforehand must carry over.
                late += [int(r) == int(max(runs)) for r in runs]
            else:
                # Windows come in recording order: the later half of each trace is the
                # within-condition test side, the earlier half its references.
                late += [i >= (len(X) + 1) // 2 for i in range(len(X))]
        else:
            out[cond] = (np.concatenate(Xs), np.array(ys), np.array(late))
    return out


def resample(X: np.ndarray, how: str) -> np.ndarray:
    n, m = X.shape
    if how == "1hz":
        return X[:, ::PER_S]
    if how == "1hz-mean":
        return X.reshape(n, m // PER_S, PER_S).mean(axis=2)
    if how == "2.5hz":
        return X[:, ::2]
    if how == "5hz":
        return X
    raise ValueError(how)


def hz(how: str) -> float:
    return {"1hz": 1.0, "1hz-mean": 1.0, "2.5hz": 2.5, "5hz": 5.0}[how]


def distances(X: np.ndarray, radius: int) -> np.ndarray:
    Q = X / X.min(axis=1, keepdims=True)
    return dtw.distance_matrix_fast(Q, window=radius + 1, inner_dist="euclidean", compact=False)


def score(y, p):
    return float(np.mean(p == y)), float(np.mean(BBR[p] == BBR[y]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--w-s", type=int, default=40, help="window length in seconds")
    ap.add_argument("--radius-s", type=float, default=20.0, help="DTW band half-width in seconds")
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--rates", default="1hz,1hz-mean,2.5hz,5hz")
    ap.add_argument("--within", choices=("half", "run"), default="half",
                    help="within-condition test side: each trace's later half of windows, or its last "
                         "recording run against the earlier ones (only conditions with two runs "
                         "of every class)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    conds = load(a.root, a.w_s, a.min_windows, a.within)
    names = list(conds)
    if len(names) < 2:
        raise SystemExit(f"need at least two conditions with all six classes recorded at 200 ms; have {names}")
    X = np.concatenate([conds[c][0] for c in names])
    y = np.concatenate([conds[c][1] for c in names])
    late = np.concatenate([conds[c][2] for c in names])
    cond = np.concatenate([[i] * len(conds[c][1]) for i, c in enumerate(names)])
    print(f"{len(names)} conditions at 200 ms, {len(y)} windows of {a.w_s} s "
          f"({', '.join(f'{c} {len(conds[c][1])}' for c in names)})")
    rates = [r for r in a.rates.split(",") if r]
    res = {}
    for how in rates:
        D = distances(resample(X, how), max(1, round(a.radius_s * hz(how))))
        np.fill_diagonal(D, np.inf)
        loco_s, within = {}, {}
        for i, c in enumerate(names):
            te = np.flatnonzero(cond == i)
            Dm = np.where((cond != i)[None, :], D[te], np.inf)
            loco_s[c] = score(y[te], y[np.argmin(Dm, axis=1)])
            # Within the condition: the later half of each trace against the earlier half
            # (references recorded at the path's own condition beforehand, as calibration does).
            tl = np.flatnonzero((cond == i) & late)
            Dw = np.where(((cond == i) & ~late)[None, :], D[tl], np.inf)
            within[c] = score(y[tl], y[np.argmin(Dw, axis=1)])
        res[how] = {"loco": loco_s, "within": within}
    within = ("within each condition, the last recording run of each trace against the earlier ones"
              if a.within == "run" else "within each condition, later half of each trace against the earlier half")
    for kind, title in (("loco", "leave one condition out"), ("within", within)):
        print(f"\n{title}: 6-class / BBR present (%)")
        print("| series | " + " | ".join(names) + " | median |")
        print("|---|" + "---|" * (len(names) + 1))
        for how in rates:
            r = res[how][kind]
            cells = [f"{100 * r[c][0]:.0f} / {100 * r[c][1]:.0f}" for c in names]
            m6 = np.nanmedian([r[c][0] for c in names])
            mb = np.nanmedian([r[c][1] for c in names])
            print(f"| `{how}` | " + " | ".join(cells) + f" | **{100 * m6:.1f} / {100 * mb:.1f}** |")
    if a.json:
        os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
        with open(a.json, "w") as f:
            json.dump({"w_s": a.w_s, "radius_s": a.radius_s,
                       "windows": {c: int(len(conds[c][1])) for c in names}, "results": res}, f, indent=1)


if __name__ == "__main__":
    main()
