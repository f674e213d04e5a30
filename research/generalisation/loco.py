"""Leave-one-condition-out (LOCO) evaluation of background-mix recognition.

For every recorded network condition c: train on the windows of every other
condition, test on c's. A representation that only works on the network it was
trained on scores near chance here; one that generalises keeps its accuracy.

Representations (per window ``x`` of w RTT samples in ms, ``b`` the path's base
RTT: by default the fastest 1 Hz sample of the run up to the window's end, what
a live controller knows on a path whose background was already running;
``--base prebg`` uses the lab's bursts taken before the background started):

* ``none``         x                                   (the thesis: absolute RTT)
* ``divide-min``   x / min(x)                          (shipped passive model)
* ``z-score``      (x - mean) / sd                     (shipped active model)
* ``queue-ms``     x - b                               (queueing delay, ms)
* ``queue-rel``    (x - b) / b                         (queueing in base RTTs)
* ``queue-log``    log1p((x - b) / b * 10)             (compresses deep buffers)
* ``queue-buf``    (x - b) / (buffer / rate)           (ORACLE: the buffer is not
                                                        known to a live transfer;
                                                        an upper bound only)
* ``minmax``       (x - min) / (max - min)             (shape only, no amplitude)
* ``log-dm``       log(x / min(x))
* ``div-median``   x / median(x)
* ``sqrt-dm``      sqrt(x / min(x) - 1)                (compresses deep queues)
* ``rank``         ranks of x / (w - 1)                 (order only)
* ``queue-buf-err`` the same with the capacity off by a log-normal factor (sd 0.3)
                   per condition: what an estimate from the transfer's own
                   max − min RTT would have to be good to

Configuration choice never sees the condition it is scored on: ``--nested``
picks, for each held-out condition, the representation with the best median
LOCO accuracy over the *remaining* conditions, then trains on all of them and
tests once on the held-out one (nested LOCO).

Usage (from the repository root, after ``make python``)::

    .venv/bin/python research/generalisation/loco.py data/collect --mode passive \\
        --json docs/results/generalisation-loco-passive.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

import opsel
from opsel.train.data import SIX_CLASSES, find_traces_dir, trace_windows

BBR_CLASSES = {c for c in SIX_CLASSES if opsel.parse_mix(c)["bbr_present"]}
REPRESENTATIONS = ("none", "divide-min", "z-score", "queue-ms", "queue-rel", "queue-log", "queue-buf", "queue-buf-err")
# Further amplitude transforms of the window alone; not in the default sweep (--reps names them).
SHAPE_REPRESENTATIONS = ("minmax", "log-dm", "div-median", "sqrt-dm", "rank", "sorted-dm")
DEPLOYABLE = tuple(r for r in REPRESENTATIONS + SHAPE_REPRESENTATIONS if not r.startswith("queue-buf"))


def condition_params(meta: dict) -> tuple[float, float, float]:
    """(rate Mbit/s, RTT ms, buffer bytes) of a trace side-car."""
    c = meta.get("conditions", {})
    return float(c["rate_mbps"]), float(c["rtt_ms"]), float(c["buffer_bytes"])


def run_bases(tr) -> dict[int, float]:
    """Base RTT per run: the fastest base burst recorded before the background started."""
    out = {}
    for r in tr.meta.get("runs", []):
        vals = [v for v in r.get("base_rtt_ms", []) if v and v > 0]
        if vals:
            out[int(r["run"])] = float(min(vals))
    return out


def running_min_bases(tr, runs, starts, w) -> np.ndarray:
    """Per window: the fastest sample of its run up to the window's last sample.

    What a live controller knows: the samples it has taken so far on a path
    where the background was already running (the lab's pre-background base
    samples are not used)."""
    out = np.empty(len(runs))
    cache = {}
    for i, (r, st) in enumerate(zip(runs, starts)):
        if r not in cache:
            sel = tr.run == r
            series = np.full(int(tr.k[sel].max()) + 1, np.inf)
            vals = tr.rtt_ms[sel]
            series[tr.k[sel]] = np.where(np.isfinite(vals), vals, np.inf)
            cache[r] = np.minimum.accumulate(series)
        out[i] = cache[r][st + w - 1]
    return out


BASE = "runmin"


def load(root: str, mode: str, w: int, min_windows: int):
    """Every condition folder of ``root`` with ``mode`` recorded for all six classes.

    Returns {condition: dict(X, y, base, qbuf, rate, rtt)} with per-window base RTT."""
    conds = {}
    for cond in sorted(os.listdir(root)):
        d = os.path.join(root, cond, mode)
        if not os.path.isdir(d):
            continue
        traces = find_traces_dir(d)
        if len(traces) != len(SIX_CLASSES):
            continue
        Xs, ys, bs, loads = [], [], [], []
        ok = True
        for tr in traces:
            from opsel.train.data import trace_windows_meta

            X, runs, starts = trace_windows_meta(tr, w)
            if len(X) < min_windows:
                ok = False
                break
            Xs.append(X)
            ys += [tr.label] * len(X)
            # The machine's 1-minute load when the window's run started (recorded by the lab).
            run_load = {int(r["run"]): float(str(r.get("loadavg_at_start", "nan")).split()[0])
                        for r in tr.meta.get("runs", [])}
            loads += [run_load.get(int(r), math.nan) for r in runs]
            if BASE == "prebg":
                bases = run_bases(tr)
                fallback = float(np.nanmin(tr.rtt_ms)) if len(tr.rtt_ms) else math.nan
                bs += [bases.get(int(r), fallback) for r in runs]
            else:
                bs += list(running_min_bases(tr, runs, starts, w))
        if not ok:
            continue
        rate, rtt, buf = condition_params(traces[0].meta)
        conds[cond] = dict(
            X=np.concatenate(Xs), y=np.array(ys), base=np.array(bs), load=np.array(loads),
            qdelay_ms=buf * 8 / (rate * 1e6) * 1e3, rate=rate, rtt=rtt, buffer_bytes=buf,
        )
    return conds


def represent(X: np.ndarray, base: np.ndarray, qdelay_ms: float, how: str) -> np.ndarray:
    b = base[:, None]
    if how == "none":
        return X.copy()
    if how == "divide-min":
        return X / X.min(axis=1, keepdims=True)
    if how == "z-score":
        sd = X.std(axis=1, keepdims=True)
        return np.where(sd > 0, (X - X.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1), 0.0)
    if how == "queue-ms":
        return X - b
    if how == "queue-rel":
        return (X - b) / b
    if how == "queue-log":
        return np.log1p(np.clip((X - b) / b, -0.09, None) * 10.0)
    if how == "queue-buf":
        return (X - b) / qdelay_ms
    if how == "minmax":
        lo, hi = X.min(axis=1, keepdims=True), X.max(axis=1, keepdims=True)
        return (X - lo) / np.where(hi - lo > 0, hi - lo, 1)
    if how == "log-dm":
        return np.log(X / X.min(axis=1, keepdims=True))
    if how == "div-median":
        return X / np.median(X, axis=1, keepdims=True)
    if how == "sqrt-dm":
        return np.sqrt(X / X.min(axis=1, keepdims=True) - 1.0)
    if how == "sorted-dm":
        # The window's quantile function: divide-min with the samples in increasing order. Time
        # order is dropped, the distribution of queueing delay stays (a sawtooth spreads evenly,
        # BBR sits near the minimum with spikes); DTW on it warps the quantile axis.
        return np.sort(X / X.min(axis=1, keepdims=True), axis=1)
    if how == "rank":
        return np.argsort(np.argsort(X, axis=1), axis=1) / (X.shape[1] - 1)
    if how == "queue-buf-err":
        # The queue capacity as a live transfer would estimate it (max − min RTT
        # of its own CUBIC phases), off by a factor drawn per condition and
        # window batch: log-normal, sd 0.3 (±35 % at one sd). Seeded by the
        # capacity so train and test draws differ but repeat run to run.
        rng = np.random.default_rng(int(qdelay_ms * 1000) % (2**32))
        return (X - b) / (qdelay_ms * float(np.exp(rng.normal(0.0, 0.3))))
    raise ValueError(f"unknown representation {how!r}; use one of {REPRESENTATIONS}")


def balanced(y: np.ndarray, n: int | None, rng: np.random.Generator) -> np.ndarray:
    """Indices keeping at most n windows per class (all if n is None)."""
    idx = []
    for c in SIX_CLASSES:
        ci = np.flatnonzero(y == c)
        if n is not None and len(ci) > n:
            ci = np.sort(rng.choice(ci, n, replace=False))
        idx.append(ci)
    return np.concatenate(idx)


def by_load(conds, names, how, k, radius, per_class, edges=(0, 4, 8, 12, 1e9)) -> list[dict]:
    """LOCO 6-class accuracy of the held-out windows grouped by the load their run was recorded at:
    whether recording beside other work (a loaded 2-core machine) spoils the windows."""
    ok, load = [], []
    for c in names:
        y, p = fit_predict(conds, [n for n in names if n != c], c, how, k, radius, per_class)
        ok.append(p == y)
        load.append(conds[c]["load"])
    ok, load = np.concatenate(ok), np.concatenate(load)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (load >= lo) & (load < hi)
        out.append({"load_from": lo, "load_to": hi, "windows": int(sel.sum()),
                    "six": float(ok[sel].mean()) if sel.any() else math.nan})
    return out


def fit_predict(conds, train_names, test_name, how, k, radius, per_class):
    rng = np.random.default_rng(0)
    Xtr, ytr = [], []
    for c in train_names:
        d = conds[c]
        i = balanced(d["y"], per_class, rng)
        Xtr.append(represent(d["X"][i], d["base"][i], d["qdelay_ms"], how))
        ytr.append(d["y"][i])
    Xtr, ytr = np.concatenate(Xtr), np.concatenate(ytr)
    t = conds[test_name]
    Xte = represent(t["X"], t["base"], t["qdelay_ms"], how)
    if LEARNER == "knn-dtw":
        clf = opsel.KnnDtw(n_neighbors=k, radius=radius).fit(Xtr, ytr)
        pred = np.asarray(clf.predict(Xte)).astype(str)
    else:
        from sklearn.ensemble import RandomForestClassifier

        clf = RandomForestClassifier(n_estimators=300, min_samples_leaf=2, random_state=0, n_jobs=-1)
        clf.fit(window_features(Xtr), ytr)
        pred = np.asarray(clf.predict(window_features(Xte))).astype(str)
    return t["y"], pred


def window_features(X: np.ndarray) -> np.ndarray:
    """Order-free summary of a represented window, for the random-forest comparison:
    level (mean, quantiles), spread, step sizes, lag-1 autocorrelation, the share
    of near-minimum samples (BBR's ProbeRTT drains; an idle path), and the trend."""
    d = np.diff(X, axis=1)
    mu = X.mean(axis=1, keepdims=True)
    c = X - mu
    var = (c ** 2).mean(axis=1)
    ac1 = np.where(var > 0, (c[:, 1:] * c[:, :-1]).mean(axis=1) / np.where(var > 0, var, 1), 0.0)
    lo, hi = X.min(axis=1, keepdims=True), X.max(axis=1, keepdims=True)
    span = np.where(hi - lo > 0, hi - lo, 1)
    near_min = ((X - lo) / span < 0.1).mean(axis=1)
    t = np.arange(X.shape[1]) - (X.shape[1] - 1) / 2
    slope = (c * t).sum(axis=1) / (t ** 2).sum()
    q = np.percentile(X, [0, 10, 25, 50, 75, 90, 100], axis=1).T
    return np.column_stack([mu[:, 0], np.sqrt(var), q, np.abs(d).mean(axis=1), d.std(axis=1),
                            d.max(axis=1), d.min(axis=1), ac1, near_min, slope])


LEARNER = "knn-dtw"


def scores(y, pred) -> dict:
    acc = float(np.mean(pred == y))
    yb = np.isin(y, list(BBR_CLASSES))
    pb = np.isin(pred, list(BBR_CLASSES))
    per = {c: float(np.mean(pred[y == c] == c)) for c in SIX_CLASSES if np.any(y == c)}
    return {"six": acc, "bbr": float(np.mean(yb == pb)), "n": int(len(y)), "per_class": per}


RTT_NEAR = None


def training_conditions(conds, names, held_out):
    """Every other condition, or with ``--rtt-near F`` only those whose RTT is within a factor F of
    the held-out one's (at least the 3 nearest): condition-aware references, as a live controller
    could choose them from its measured base RTT."""
    rest = [n for n in names if n != held_out]
    if RTT_NEAR is None:
        return rest
    r = conds[held_out]["rtt"]
    ratio = {n: max(conds[n]["rtt"], r) / min(conds[n]["rtt"], r) for n in rest}
    near = [n for n in rest if ratio[n] <= RTT_NEAR]
    return near if len(near) >= 3 else sorted(rest, key=ratio.get)[:3]


def loco(conds, names, how, k, radius, per_class):
    out = {}
    for c in names:
        y, p = fit_predict(conds, training_conditions(conds, names, c), c, how, k, radius, per_class)
        out[c] = scores(y, p)
    return out


def median(v):
    return float(np.median(v)) if len(v) else math.nan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="folder of <condition>/<mode>/<class>.csv traces (opsel lab collect --out)")
    ap.add_argument("--mode", default="passive")
    ap.add_argument("--w", type=int, default=20)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--radius", type=int, default=10)
    ap.add_argument("--min-windows", type=int, default=5, help="skip conditions with fewer windows in any class")
    ap.add_argument("--per-class", type=int, default=None, help="cap training windows per class and condition")
    ap.add_argument("--exclude", default="", help="comma-separated conditions to leave out entirely (held-out OPS conditions)")
    ap.add_argument("--reps", default=",".join(REPRESENTATIONS))
    ap.add_argument("--nested", action="store_true", help="choose the representation by inner LOCO (deployable ones only)")
    ap.add_argument("--nested-ws", default="",
                    help="with --nested, also choose the window among these lengths (e.g. 20,40; radius w/2), "
                         "on the other conditions only")
    ap.add_argument("--base", choices=("runmin", "prebg"), default="runmin",
                    help="base RTT b: the fastest sample so far in the run (deployable; default) or the "
                         "fastest burst before the background started (lab only)")
    ap.add_argument("--learner", choices=("knn-dtw", "forest"), default="knn-dtw",
                    help="DTW K-NN (the classifier of record) or a random forest on window summaries (comparison)")
    ap.add_argument("--rtt-near", type=float, default=None,
                    help="train only on conditions whose RTT is within this factor of the held-out one's")
    ap.add_argument("--by-load", action="store_true",
                    help="also print LOCO accuracy (first of --reps) by the load each test window was recorded at")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    global LEARNER, BASE, RTT_NEAR
    LEARNER, BASE, RTT_NEAR = a.learner, a.base, a.rtt_near

    conds = load(a.root, a.mode, a.w, a.min_windows)
    for x in filter(None, a.exclude.split(",")):
        conds.pop(x, None)
    names = sorted(conds, key=lambda c: (conds[c]["rate"], conds[c]["rtt"], conds[c]["buffer_bytes"]))
    if len(names) < 3:
        sys.exit(f"only {len(names)} complete conditions under {a.root}/*/{a.mode}: need at least 3 for LOCO")
    t0 = time.time()
    what = f"{a.k}-NN DTW, radius {a.radius}" if a.learner == "knn-dtw" else "random forest on window summaries"
    print(f"{len(names)} conditions, mode {a.mode}, w = {a.w}, {what}")
    print("| condition | rate Mbit/s | RTT ms | buffer × BDP | windows |")
    print("|---|---|---|---|---|")
    for c in names:
        d = conds[c]
        bdp = d["rate"] * 1e6 / 8 * d["rtt"] / 1e3
        print(f"| {c} | {d['rate']:g} | {d['rtt']:g} | {d['buffer_bytes'] / bdp:.2g} | {len(d['y'])} |")
    reps = [r for r in a.reps.split(",") if r]
    table = {}
    for how in reps:
        table[how] = loco(conds, names, how, a.k, a.radius, a.per_class)
    print()
    print("LOCO accuracy, 6-class / BBR present (%), per held-out condition:")
    print("| representation | " + " | ".join(names) + " | median |")
    print("|---|" + "---|" * (len(names) + 1))
    for how in reps:
        r = table[how]
        cells = [f"{100 * r[c]['six']:.0f} / {100 * r[c]['bbr']:.0f}" for c in names]
        m6 = median([r[c]["six"] for c in names])
        mb = median([r[c]["bbr"] for c in names])
        print(f"| {how} | " + " | ".join(cells) + f" | **{100 * m6:.1f} / {100 * mb:.1f}** |")
    load_rows = None
    if a.by_load:
        load_rows = by_load(conds, names, reps[0], a.k, a.radius, a.per_class)
        print()
        print(f"LOCO 6-class accuracy ({reps[0]}) by the 1-minute load when the window's run started:")
        print("| load | windows | 6-class |")
        print("|---|---|---|")
        for r in load_rows:
            hi = "" if r["load_to"] > 1e8 else f"{r['load_to']:g}"
            print(f"| {r['load_from']:g}–{hi} | {r['windows']} | {100 * r['six']:.1f} % |")
    nested = None
    if a.nested:
        ws = [int(x) for x in a.nested_ws.split(",") if x.strip()] or [a.w]
        # Per window length: its own windows (and radius w/2 unless only --w is searched).
        by_w = {w: (conds if w == a.w else load(a.root, a.mode, w, a.min_windows)) for w in ws}
        radius_of = {w: (a.radius if len(ws) == 1 else max(1, w // 2)) for w in ws}
        common = [n for n in names if all(n in by_w[w] for w in ws)]
        nested = {}
        for c in common:
            rest = [n for n in common if n != c]
            inner = {}
            for w in ws:
                for how in [r for r in reps if r in DEPLOYABLE]:
                    res = loco(by_w[w], rest, how, a.k, radius_of[w], a.per_class)
                    inner[f"{how}@w{w}"] = median([res[n]["six"] for n in rest])
            order = [f"{h}@w{w}" for w in ws for h in reps]
            best = max(inner, key=lambda key: (inner[key], -order.index(key)))
            how, w = best.split("@w")[0], int(best.split("@w")[1])
            y, p = fit_predict(by_w[w], rest, c, how, a.k, radius_of[w], a.per_class)
            nested[c] = dict(scores(y, p), chosen=best, inner=inner)
        print()
        print("Nested LOCO (representation" + (" and w" if len(ws) > 1 else "") + " chosen on the other conditions only):")
        print("| held out | chosen | 6-class | BBR present |")
        print("|---|---|---|---|")
        for c in common:
            r = nested[c]
            print(f"| {c} | {r['chosen']} | {100 * r['six']:.1f} | {100 * r['bbr']:.1f} |")
        print(f"| **median** | | **{100 * median([nested[c]['six'] for c in common]):.1f}** | "
              f"**{100 * median([nested[c]['bbr'] for c in common]):.1f}** |")
    print(f"\n({time.time() - t0:.0f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mode": a.mode, "learner": a.learner, "base": a.base, "w": a.w, "k": a.k, "radius": a.radius, "per_class": a.per_class,
                       "conditions": {c: {k: conds[c][k] for k in ("rate", "rtt", "buffer_bytes")} | {"windows": int(len(conds[c]["y"]))}
                                      for c in names},
                       "loco": table, "nested": nested, "by_load": load_rows}, f, indent=1)


if __name__ == "__main__":
    main()
