"""The probe gate where the references match the path (004 §8 B.1; docs/results/ops-gate.md, "Matched").

study.py measures the gate on conditions the references have never seen (leave one condition
out). After ``opsel calibrate`` the references *do* come from the user's condition, from earlier
lab sessions. This script measures that situation, never letting a test window's own recording
run (lab session) be a reference or a gate-training row:

(a) ``default`` (846 windows of w = 40, 25–26 runs per class): the runs of each class in time
    order; the last ``--test-share`` of them are the test side. References for the test: the
    earlier runs plus every other condition. Gate training rows: the training runs of
    ``default`` in ``--blocks`` time blocks, each block classified against the other blocks
    plus the other conditions (so a row's own run is never its reference). The gate
    threshold (and every other choice) is made on the training side only: block-wise
    cross-fitting (the gate refitted without a block, scored on it).
(b) every grid condition o: test = the last run of each class at o; references = o's earlier
    runs plus every other condition. Gate training rows: every other condition c's last run
    classified against c's earlier runs plus the rest (o's test run never among them); the
    threshold by an inner leave-one-condition-out over those c.

The rules (full window, fixed prefix, margin τ, the shipped gate, refitted gate variants ``VARIANTS``)
and the choice of θ / τ (``choose``: the "full", "10s" and "cap10" rules) and of the variant
(``pick_variant``) use the training side only; the test side is scored once per rule.

Usage (repository root)::

    .venv/bin/python research/ops-gate/matched.py data/collect --cache <dir> \\
        --json research/ops-gate/results/matched.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "generalisation"))
import study  # noqa: E402
from study import BBR, CLASSES, divide_min, dtw_all_pairs  # noqa: E402


def load(root, w, min_windows=3):
    """Every passive window of w samples with its condition, class, run and start sample."""
    from opsel.train.data import SIX_CLASSES, find_traces_dir, trace_windows_meta

    rows = []
    for cond in sorted(os.listdir(root)):
        d = os.path.join(root, cond, "passive")
        if not os.path.isdir(d):
            continue
        traces = find_traces_dir(d)
        if len(traces) != len(SIX_CLASSES):
            continue
        got = [(tr, *trace_windows_meta(tr, w)) for tr in traces]
        if any(len(X) < min_windows for _, X, _, _ in got):
            continue
        c = traces[0].meta["conditions"]
        for tr, X, runs, starts in got:
            for x, r, s in zip(X, runs, starts):
                rows.append((cond, tr.label, int(r), int(s), x, float(c["rate_mbps"]), float(c["rtt_ms"]),
                             float(c["buffer_bytes"])))
    names = sorted({r[0] for r in rows}, key=lambda n: next((r[5], r[6], r[7]) for r in rows if r[0] == n))
    X = np.array([r[4] for r in rows])
    return dict(
        names=names, X=X,
        cond=np.array([names.index(r[0]) for r in rows]),
        y=np.array([CLASSES.index(r[1]) for r in rows]),
        run=np.array([r[2] for r in rows]),
        start=np.array([r[3] for r in rows]),
    )


def dtw_rows(a, b, radius):
    """Banded DTW (|a − b| cost, summed over the path) of a[k] against b[k] for every k: the DP of
    study.dtw_all_pairs on given pairs."""
    m, n = a.shape
    prev = np.full((n + 1, m), np.inf)
    for i in range(n):
        cur = np.full((n + 1, m), np.inf)
        for j in range(max(0, i - radius), min(n - 1, i + radius) + 1):
            c = np.abs(a[:, i] - b[:, j])
            if i == 0 and j == 0:
                cur[1] = c
                continue
            cur[j + 1] = c + np.minimum(np.minimum(prev[j + 1], cur[j]), prev[j])
        prev = cur
    return prev[n]


def segment_matrix(X, n, radius, cache_dir, block=200_000):
    """DTW of every window's first n samples against every n-sample segment (offsets 0, n, 2n, …)
    of every window: the references of a decision on a shorter window w = n cut from all of each
    recording, not only its prefixes. Returns (windows × windows × offsets)."""
    offs = list(range(0, X.shape[1] - n + 1, n))
    h = hashlib.sha1(X.tobytes()).hexdigest()[:12]
    path = os.path.join(cache_dir, f"seg-{h}-n{n}-r{radius}.npy") if cache_dir else None
    if path and os.path.exists(path):
        return np.load(path)
    A = divide_min(X[:, :n])
    S = np.stack([divide_min(X[:, o:o + n]) for o in offs], axis=1).reshape(-1, n)  # window-major
    I, J = np.meshgrid(np.arange(len(A)), np.arange(len(S)), indexing="ij")
    I, J = I.ravel(), J.ravel()
    out = np.empty(len(I))
    for s0 in range(0, len(I), block):
        out[s0:s0 + block] = dtw_rows(A[I[s0:s0 + block]], S[J[s0:s0 + block]], radius)
    out = out.reshape(len(A), len(X), len(offs))
    if path:
        np.save(path, out)
    return out


def matrices(X, prefixes, radius, cache_dir):
    """All-pairs DTW per prefix length (divide-min of the prefix), cached per length."""
    out = {}
    h = hashlib.sha1(X.tobytes()).hexdigest()[:12]
    for n in prefixes:
        path = os.path.join(cache_dir, f"dtw-{h}-n{n}-r{radius}.npy") if cache_dir else None
        if path and os.path.exists(path):
            out[n] = np.load(path)
            continue
        t = time.time()
        out[n] = dtw_all_pairs(divide_min(X[:, :n]), radius)
        print(f"  DTW all pairs, prefix {n}: {time.time() - t:.0f} s", file=sys.stderr, flush=True)
        if path:
            os.makedirs(cache_dir, exist_ok=True)
            np.save(path, out[n])
    return out


BBR_CLS = np.array([c in BBR for c in CLASSES])
FEATS = ("n_over_w", "margin", "same_decision", "streak_share", "vote_agree", "margin_trend", "dist_norm")
BASE = ("n_over_w", "margin", "same_decision", "streak_share")  # the shipped gate's (ops::ProbeGate)
SCHEDULES = {"5s": [5, 10, 15, 20, 25, 30, 35], "2.5s": [3, 5, 8, 10, 13, 15, 18, 20, 23, 25, 28, 30, 33, 35, 38]}
K_VOTE = 5
SHIPPED_GATE = os.path.join(HERE, "..", "..", "models", "passive", "gate.json")


def prefix_raw(D, ns, y, rows, refmask):
    """Per prefix length n: the BBR decision, the 1-NN margin, the k-NN vote agreement and the
    normalised nearest distance of ``rows`` against the references in ``refmask``.

    ``vote_agree``: share of the K_VOTE nearest references on the 1-NN decision's side (BBR or not);
    ``dist_norm``: nearest distance over that reference's own nearest-reference distance."""
    refs = np.flatnonzero(refmask)
    yr = y[refs]
    R = len(rows)
    out = {}
    for n in ns:
        M = D[n][np.ix_(rows, refs)]
        per = np.full((R, len(CLASSES)), np.inf)
        for c in range(len(CLASSES)):
            sel = yr == c
            if sel.any():
                per[:, c] = M[:, sel].min(axis=1)
        p = per.argmin(axis=1)
        d1 = per[np.arange(R), p]
        other = per.copy()
        other[np.arange(R), p] = np.inf
        d2 = other.min(axis=1)
        m = np.where(d2 > 0, np.clip(1 - d1 / np.where(d2 > 0, d2, 1), 0, 1), 0)
        d = BBR_CLS[p]
        kn = np.argpartition(M, K_VOTE, axis=1)[:, :K_VOTE]
        vote = (BBR_CLS[yr[kn]] == d[:, None]).mean(axis=1)
        j = refs[M.argmin(axis=1)]
        Mj = D[n][np.ix_(j, refs)].copy()
        Mj[Mj <= 0] = np.inf  # the reference itself (and exact duplicates)
        dn = d1 / np.maximum(Mj.min(axis=1), 1e-12)
        out[n] = (d, m, vote, np.minimum(dn, 10.0))
    return out


def sched_features(raw, checks, w):
    """Gate features per (row, check + full window) for one check schedule, as computed online."""
    ns = list(checks) + [w]
    R, P = len(raw[w][0]), len(ns)
    dec = np.zeros((R, P), bool)
    F = np.zeros((R, P, len(FEATS)))
    prev_dec, prev_m, streak = np.zeros(R, bool), np.zeros(R), np.zeros(R)
    for pi, n in enumerate(ns):
        d, m, vote, dn = raw[n]
        same = (d == prev_dec) if pi else np.zeros(R, bool)
        streak = np.where(same, streak + 1, 1)
        F[:, pi] = np.column_stack([np.full(R, n / w), m, same, streak / P, vote,
                                    (m - prev_m) if pi else np.zeros(R), dn])
        dec[:, pi] = d
        prev_dec, prev_m = d, m
    return dec, F


def cols(names):
    return [FEATS.index(f) for f in names]


def evaluate(stop, dec, truth, ns):
    right = dec[np.arange(len(dec)), stop] == truth
    secs = np.array(ns)[stop]
    return float(right.mean()), float(secs.mean()), float((secs <= 10).mean())


def stop_at(score, thr, n_checks, cap=None):
    """First check with score ≥ thr; else the full window (or the check at ``cap`` s when given)."""
    ok = score[:, :n_checks] >= thr
    default = n_checks if cap is None else cap
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), default)
    return np.minimum(first, default)


THR = np.round(np.arange(0.50, 0.996, 0.01), 3)
TAU = np.round(np.arange(0.0, 1.001, 0.02), 3)


def choose(folds, grid, rule, n_checks, ns, tol=0.01):
    """Threshold from inner folds only. folds: [(score, dec, truth)]; the mean over folds decides.

    rule "full": the shortest mean probe whose right rate is within tol of the full window's
    (study.py's rule); rule "10s": the highest right rate whose mean probe is ≤ 10 s (ties: shorter)."""
    full = np.mean([evaluate(np.full(len(d), n_checks), d, t, ns)[0] for _, d, t in folds])
    best = None
    for thr in grid:
        ev = [evaluate(stop_at(s, thr, n_checks), d, t, ns) for s, d, t in folds]
        r, sec = np.mean([e[0] for e in ev]), np.mean([e[1] for e in ev])
        if rule == "full":
            cand = (sec, -thr) if r >= full - tol else None
        else:
            cand = (-r, sec) if sec <= 10.0 else None
        if cand is not None and (best is None or cand < best[0]):
            best = (cand, thr)
    return best[1] if best else grid[-1]


def fit(F, right, weights):
    return study.Gate().fit(F, right, weights)


def rows_right(dec, truth, n_checks):
    return (dec == truth[:, None])[:, :n_checks]


def stack(parts, use, n_checks):
    """Gate training arrays from [(dec, F, truth)], every part weighted equally."""
    Fs, Rs, Ws = [], [], []
    for dec, F, truth in parts:
        r = rows_right(dec, truth, n_checks)
        Fs.append(F[:, :n_checks][:, :, use].reshape(-1, len(use)))
        Rs.append(r.reshape(-1))
        Ws.append(np.full(r.size, 1.0 / r.size))
    return np.concatenate(Fs), np.concatenate(Rs), np.concatenate(Ws)


def proba(g, F, use):
    return g.proba(F[:, :, use])


EXTRA = ("vote_agree", "margin_trend", "dist_norm")
VARIANTS = [(sched, BASE + extra) for sched in SCHEDULES
            for extra in ((), ("vote_agree",), ("margin_trend",), ("dist_norm",), EXTRA)]
W = 40


def assess(parts, test, variant):
    """One gate variant: inner folds over ``parts`` (training side only) choose θ for each rule;
    the gate refitted on every part is then scored once on ``test``.

    parts/test: {schedule: (dec, F, truth)} per group. Returns {rule: (θ, inner (right, s), test (right, s, ≤10))}."""
    sched, feats = variant
    use = cols(feats)
    checks = SCHEDULES[sched]
    ns, nc = checks + [W], len(checks)
    cap = ns.index(10)
    ps = [p[sched] for p in parts]
    folds = []
    for i in range(len(ps)):
        g = fit(*stack([p for j, p in enumerate(ps) if j != i], use, nc))
        folds.append((proba(g, ps[i][1], use), ps[i][0], ps[i][2]))
    g = fit(*stack(ps, use, nc))
    dec, F, truth = test[sched]
    score = proba(g, F, use)
    out = {}
    for rule in ("full", "10s", "cap10"):
        if rule == "cap10":
            # Hard 10-s budget: checks up to 10 s, the 10-s prefix decides when the gate never fires;
            # θ: the highest inner right rate.
            best = max(THR, key=lambda t: (np.mean([evaluate(stop_at(s, t, nc, cap), d, tr, ns)[0]
                                                    for s, d, tr in folds]), -t))
            thr = best
            inner = [evaluate(stop_at(s, thr, nc, cap), d, tr, ns) for s, d, tr in folds]
            te = evaluate(stop_at(score, thr, nc, cap), dec, truth, ns)
        else:
            thr = choose(folds, THR, rule, nc, ns)
            inner = [evaluate(stop_at(s, thr, nc), d, tr, ns) for s, d, tr in folds]
            te = evaluate(stop_at(score, thr, nc), dec, truth, ns)
        out[rule] = (float(thr), (float(np.mean([e[0] for e in inner])), float(np.mean([e[1] for e in inner]))), te)
    return out


def baselines(parts, test):
    """Rules without a learned gate, on the 5-s schedule (today's checks): τ from the inner folds."""
    checks = SCHEDULES["5s"]
    ns, nc = checks + [W], len(checks)
    dec, F, truth = test["5s"]
    folds = [(p["5s"][1][:, :, 1], p["5s"][0], p["5s"][2]) for p in parts]
    out = {
        "full": evaluate(np.full(len(dec), nc), dec, truth, ns),
        "prefix-5": evaluate(np.full(len(dec), ns.index(5)), dec, truth, ns),
        "prefix-10": evaluate(np.full(len(dec), ns.index(10)), dec, truth, ns),
        "margin-0.3": evaluate(stop_at(F[:, :, 1], 0.3, nc), dec, truth, ns),
    }
    for rule in ("full", "10s"):
        tau = choose(folds, TAU, rule, nc, ns)
        out[f"margin-{rule}"] = evaluate(stop_at(F[:, :, 1], tau, nc), dec, truth, ns) + (float(tau),)
    g = json.load(open(SHIPPED_GATE))

    def shipped(F):
        return 1 / (1 + np.exp(-(g["intercept"] + F[:, :, cols(BASE)] @ np.array(g["weights"]))))

    out["shipped-gate"] = evaluate(stop_at(shipped(F), g["threshold"], nc), dec, truth, ns)
    # The shipped gate at another threshold (`--gate-threshold`): θ by the 10-s rule on the training side.
    thr10 = choose([(shipped(p["5s"][1]), p["5s"][0], p["5s"][2]) for p in parts], THR, "10s", nc, ns)
    out["shipped-gate-10s"] = evaluate(stop_at(shipped(F), thr10, nc), dec, truth, ns) + (float(thr10),)
    # the inner (training side) full-window and prefix-10 rates, for the record
    out["inner-full"] = float(np.mean([(d[:, -1] == t).mean() for _, d, t in folds]))
    return out


def segment_rules(seg, y, rows, refmask, truth):
    """Decision on the first n samples against every n-sample segment of the references
    (a shorter window w = n with 4–8× the references): 1-NN and 5-NN majority, BBR present or not."""
    refs = np.flatnonzero(refmask)
    M = seg[np.ix_(rows, refs)].reshape(len(rows), -1)
    lab = np.repeat(BBR_CLS[y[refs]], seg.shape[2])
    nn1 = lab[M.argmin(axis=1)]
    kn = np.argpartition(M, K_VOTE, axis=1)[:, :K_VOTE]
    nn5 = lab[kn].mean(axis=1) > 0.5
    return float((nn1 == truth).mean()), float((nn5 == truth).mean())


def groups(raw_fn, rows_refs):
    """{schedule: (dec, F, truth)} for every (rows, refmask, truth)."""
    out = []
    for rows, refmask, truth in rows_refs:
        raw = raw_fn(rows, refmask)
        out.append({s: (*sched_features(raw, c, W), truth) for s, c in SCHEDULES.items()})
    return out


def pick_variant(results):
    """The variant with the highest inner right rate under the 10-s rule (ties: the shorter inner probe,
    then the simpler), chosen on the training side only."""
    return max(results, key=lambda v: (round(results[v]["10s"][1][0], 4), -results[v]["10s"][1][1], -len(v[1])))


def vname(v):
    extra = [f for f in v[1] if f not in BASE]
    return f"{v[0]} checks, base" + ("".join(" + " + f for f in extra))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("--cache", default=os.environ.get("OPS_GATE_CACHE"))
    ap.add_argument("--test-share", type=float, default=1 / 3)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", choices=("a", "b"), default=None)
    a = ap.parse_args(argv)
    t0 = time.time()
    data = load(a.root, W)
    names, X, cond, y, run = data["names"], data["X"], data["cond"], data["y"], data["run"]
    truth_all = BBR_CLS[y]
    ns_all = sorted({n for c in SCHEDULES.values() for n in c} | {W})
    D = matrices(X, ns_all, 20, a.cache)
    print(f"{len(names)} conditions, {len(X)} passive windows of w = {W}")

    def raw_fn(rows, refmask):
        return prefix_raw(D, ns_all, y, rows, refmask)

    segs = {n: segment_matrix(X, n, 20, a.cache) for n in (5, 10)}

    def seg_line(spec_inner, spec_test):
        out = {}
        for n, sg in segs.items():
            inner = [segment_rules(sg, y, r, m, t) for r, m, t in spec_inner]
            test = segment_rules(sg, y, *spec_test)
            out[n] = dict(inner=np.mean(inner, axis=0).tolist(), test=list(test))
        return out

    report = {}
    # ---- (a) default, split by recording run (time) ----
    if a.only in (None, "a"):
        d = names.index("default")
        is_test = np.zeros(len(X), bool)
        block = np.full(len(X), -1)
        for c in range(len(CLASSES)):
            sel = (cond == d) & (y == c)
            runs = np.unique(run[sel])
            k = int(round(len(runs) * a.test_share))
            is_test |= sel & np.isin(run, runs[len(runs) - k:])
            for b, chunk in enumerate(np.array_split(runs[: len(runs) - k], a.blocks)):
                block[sel & np.isin(run, chunk)] = b
        test_rows = np.flatnonzero(is_test)
        train_spec = [(np.flatnonzero(block == b), ~is_test & (block != b), truth_all[block == b])
                      for b in range(a.blocks)]
        parts = groups(raw_fn, train_spec)
        test = groups(raw_fn, [(test_rows, ~is_test, truth_all[test_rows])])[0]
        print(f"\n(a) default: {len(test_rows)} test windows (the last {a.test_share:.2f} of each class's runs), "
              f"{int((block >= 0).sum())} training windows in {a.blocks} time blocks")
        res = {v: assess(parts, test, v) for v in VARIANTS}
        base = baselines(parts, test)
        chosen = pick_variant(res)
        report["a"] = {"baselines": base, "variants": {vname(v): r for v, r in res.items()}, "chosen": vname(chosen),
                       "test_windows": int(len(test_rows))}
        print_a(base, res, chosen)
        # How many matched runs the references need: the same test windows against the other conditions
        # plus only the last r training runs of each class at default (no choice is made on these).
        print("\nReferences from the last r training runs per class at default (+ every other condition), test windows:")
        print("| r (windows at default) | full window | always prefix 10 s | shipped gate.json as is |")
        print("|---|---|---|---|")
        sweep = {}
        train_runs = {c: np.unique(run[(block >= 0) & (y == c) & (cond == d)]) for c in range(len(CLASSES))}
        for r in (0, 1, 2, 4, 8, 100):
            keep = ~is_test & (cond != d)
            for c, runs in train_runs.items():
                keep |= (block >= 0) & (y == c) & (cond == d) & np.isin(run, runs[len(runs) - min(r, len(runs)):])
            tst = groups(raw_fn, [(test_rows, keep, truth_all[test_rows])])[0]
            bl = baselines([tst], tst)
            nd = int((keep & (cond == d)).sum())
            sweep[r] = {k: bl[k] for k in ("full", "prefix-10", "shipped-gate")} | {"windows": nd}
            print(f"| {r if r < 100 else 'all'} ({nd}) | {fmt(bl['full'])} | {fmt(bl['prefix-10'])} | "
                  f"{fmt(bl['shipped-gate'])} |")
        report["a"]["reference_runs"] = sweep
        print("\nRight decisions (%) per true class on the test windows, fixed prefix (all training runs as references):")
        print("| prefix s | " + " | ".join(CLASSES) + " |")
        print("|---|" + "---|" * len(CLASSES))
        dec5 = test["5s"][0]
        ns5 = SCHEDULES["5s"] + [W]
        yt = y[test_rows]
        for n in (5, 10, 20, 40):
            cells = [f"{100 * (dec5[yt == c, ns5.index(n)] == BBR_CLS[c]).mean():.0f}" for c in range(len(CLASSES))]
            print(f"| {n} | " + " | ".join(cells) + " |")
        sl = seg_line(train_spec, (test_rows, ~is_test, truth_all[test_rows]))
        report["a"]["segments"] = sl
        print("\nShorter window w = n against every n-sample segment of the references (right %, inner / test):")
        for n, v in sl.items():
            print(f"- n = {n}: 1-NN {100 * v['inner'][0]:.1f} / {100 * v['test'][0]:.1f}; "
                  f"5-NN {100 * v['inner'][1]:.1f} / {100 * v['test'][1]:.1f}")
    # ---- (b) every condition: test = each class's last run; references = the rest ----
    if a.only in (None, "b"):
        last = np.zeros(len(X), bool)
        for o in range(len(names)):
            for c in range(len(CLASSES)):
                sel = (cond == o) & (y == c)
                last |= sel & (run == run[sel].max())
        per = {}
        for o in range(len(names)):
            t_o = last & (cond == o)
            spec = [(np.flatnonzero(last & (cond == c)), ~(last & ((cond == c) | (cond == o))),
                     truth_all[last & (cond == c)]) for c in range(len(names)) if c != o]
            parts = groups(raw_fn, spec)
            test = groups(raw_fn, [(np.flatnonzero(t_o), ~t_o, truth_all[t_o])])[0]
            res = {v: assess(parts, test, v) for v in VARIANTS}
            per[names[o]] = dict(baselines=baselines(parts, test), variants=res, chosen=pick_variant(res),
                                 windows=int(t_o.sum()),
                                 segments=seg_line(spec, (np.flatnonzero(t_o), ~t_o, truth_all[t_o])))
            print(f"  (b) {names[o]} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        report["b"] = {o: {"baselines": r["baselines"], "chosen": vname(r["chosen"]), "windows": r["windows"],
                           "variants": {vname(v): x for v, x in r["variants"].items()}, "segments": r["segments"]}
                    for o, r in per.items()}
        print_b(names, per)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    print(f"\n({time.time() - t0:.0f} s)")


def fmt(e):
    return f"{100 * e[0]:.1f} / {e[1]:.1f}"


def print_a(base, res, chosen):
    print("\nRight decisions (%) / mean probing s on the test runs (θ, τ from the training runs only):")
    print("| rule | test | decided ≤ 10 s |")
    print("|---|---|---|")
    for k, label in (("full", "full window (40 s)"), ("shipped-gate", "shipped gate.json as is (θ 0.86)"),
                     ("shipped-gate-10s", "shipped gate.json, θ by the 10-s rule"),
                     ("prefix-5", "always prefix 5 s"),
                     ("prefix-10", "always prefix 10 s"), ("margin-0.3", "margin τ = 0.3"),
                     ("margin-full", "margin τ by the full-window rule"), ("margin-10s", "margin τ by the 10-s rule")):
        sym = "θ" if k.startswith("shipped") else "τ"
        extra = f" ({sym} = {base[k][3]:.2f})" if len(base[k]) > 3 else ""
        print(f"| {label}{extra} | {fmt(base[k])} | {100 * base[k][2]:.0f} % |")
    print("\nGate variants: θ per rule from block-wise cross-fitting on the training runs; inner = those folds:")
    print("| variant | rule | θ | inner right % / s | test right % / s | test ≤ 10 s |")
    print("|---|---|---|---|---|---|")
    for v, r in res.items():
        for rule in ("full", "10s", "cap10"):
            thr, inner, te = r[rule]
            mark = " **(chosen)**" if v == chosen and rule != "full" else ""
            print(f"| {vname(v)}{mark} | {rule} | {thr:.2f} | {100 * inner[0]:.1f} / {inner[1]:.1f} | {fmt(te)} | "
                  f"{100 * te[2]:.0f} % |")


def print_b(names, per):
    print("\n(b) per condition, test = each class's last run, references = the condition's earlier runs + the rest:")
    rows = [("full", "full window (40 s)"), ("prefix-10", "always prefix 10 s"), ("margin-0.3", "margin τ = 0.3"),
            ("margin-full", "margin τ, full-window rule")]
    print("| rule | " + " | ".join(names) + " | median | mean | ≥ 95 % at ≤ 10 s |")
    print("|---|" + "---|" * (len(names) + 3))

    def line(label, get):
        e = [get(o) for o in names]
        ok = sum(1 for x in e if x[0] >= 0.95 and x[1] <= 10)
        print(f"| {label} | " + " | ".join(f"{100 * x[0]:.0f} / {x[1]:.1f}" for x in e)
              + f" | **{100 * np.median([x[0] for x in e]):.1f} / {np.median([x[1] for x in e]):.1f}**"
              + f" | {100 * np.mean([x[0] for x in e]):.1f} / {np.mean([x[1] for x in e]):.1f} | {ok} of {len(e)} |")

    for k, label in rows + [("shipped-gate", "shipped gate.json as is (θ 0.86)"),
                            ("shipped-gate-10s", "shipped gate.json, θ by the 10-s rule")]:
        line(label, lambda o, k=k: per[o]["baselines"][k])
    base5 = ("5s", BASE)
    for rule in ("full", "10s", "cap10"):
        line(f"gate, shipped features, 5-s checks, θ by the {rule} rule",
             lambda o, rule=rule: per[o]["variants"][base5][rule][2])
    for rule in ("10s", "cap10"):
        line(f"gate, variant chosen per fold (inner 10-s rule), θ by the {rule} rule",
             lambda o, rule=rule: per[o]["variants"][per[o]["chosen"]][rule][2])
    print("\nTraining side (inner leave-one-condition-out over the other conditions), median over the 14 folds"
          " of the inner mean right % / s:")
    print("| variant | full rule | 10-s rule | cap-10 rule |")
    print("|---|---|---|---|")
    for v in VARIANTS:
        cells = []
        for rule in ("full", "10s", "cap10"):
            e = [per[o]["variants"][v][rule][1] for o in names]
            cells.append(f"{100 * np.median([x[0] for x in e]):.1f} / {np.median([x[1] for x in e]):.1f}")
        print(f"| {vname(v)} | " + " | ".join(cells) + " |")
    print("\nShorter window w = n against every n-sample segment of the references (right %, median over"
          " conditions; inner = the training parts, test = the held-out last runs):")
    for n in (5, 10):
        v = [per[o]["segments"][n] for o in names]
        print(f"- n = {n}: 1-NN {100 * np.median([x['inner'][0] for x in v]):.1f} / "
              f"{100 * np.median([x['test'][0] for x in v]):.1f}; 5-NN "
              f"{100 * np.median([x['inner'][1] for x in v]):.1f} / {100 * np.median([x['test'][1] for x in v]):.1f}")
    print("\nVariant chosen per held-out condition (inner folds only):")
    for o in names:
        print(f"- {o}: {vname(per[o]['chosen'])}")
    print("\nEvery variant, median over conditions of the test right % / s (each θ by its inner rule):")
    print("| variant | full rule | 10-s rule | cap-10 rule |")
    print("|---|---|---|---|")
    for v in VARIANTS:
        cells = []
        for rule in ("full", "10s", "cap10"):
            e = [per[o]["variants"][v][rule][2] for o in names]
            cells.append(f"{100 * np.median([x[0] for x in e]):.1f} / {np.median([x[1] for x in e]):.1f}")
        print(f"| {vname(v)} | " + " | ".join(cells) + " |")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--precompute":
    root, cache = sys.argv[2], sys.argv[3]
    ns = [int(v) for v in sys.argv[4].split(",")]
    data = load(root, 40)
    print(len(data["X"]), "windows", data["names"], file=sys.stderr)
    matrices(data["X"], ns, 20, cache)
    for n in (5, 10):
        t = time.time()
        segment_matrix(data["X"], n, 20, cache)
        print(f"  segments n = {n}: {time.time() - t:.0f} s", file=sys.stderr, flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
