"""A learned gate that ends an OPS probe once the decision is safe (004 §8 B.1).

OPS probes for w RTT samples, classifies the background with 1-NN DTW and picks
a CCA (000 §1.2; the stump: BBR present in the background → bbr, else cubic).
FastProb's pattern (004 §5) carried over: per-prefix classifiers (the same
references cut to their first n samples, 1-NN DTW, divide-min, the shipped
radius), checked at n = 5, 10, …, w − 5, and a small learned gate that says
whether the prefix-n decision is safe to act on. The probe stops at the first
check the gate accepts, else it runs the full window.

Evaluation: leave one condition out (LOCO) over the condition grid
(``docs/results/generalisation.md``). For a held-out condition o:

* references: every window of the other conditions (as the shipped model);
* gate training rows: the windows of every other condition c, with their
  prefix decisions computed against references from neither o nor c (so the
  gate learns how often a prefix is right on a network the references have
  not seen, which is what o is);
* gate threshold: chosen by an inner LOCO over the training conditions only
  (the gate refitted without each inner condition and scored on it); the
  smallest threshold whose mean per-condition right-decision rate is within
  ``--tolerance`` of the full window's on the same inner folds;
* today's rule (``ops::PriorProbe`` / ``ops::Progressive``): stop at the first
  check whose 1-NN margin ``1 − d_nearest / d_other_class`` reaches τ; fixed τ
  and τ chosen by the same inner criterion.

"Right decision" = the CCA OPS would pick for the predicted class equals the
one for the true class: BBR present or not (the stump, ``ops::Stump``;
removing the transfer's own CUBIC flow does not change BBR presence).

Usage (repository root; prints the tables)::

    .venv/bin/python research/ops-gate/study.py data/collect \\
        --export models/passive/gate.json
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
sys.path.insert(0, os.path.join(HERE, "..", "generalisation"))
import loco  # noqa: E402  (the condition-grid loader)

BBR = {"B1-C0", "B1-C1", "B1-B1"}
CLASSES = ("B0-C0", "B0-C1", "B1-B1", "B1-C0", "B1-C1", "C1-C1")  # model.json order (sorted)


def dtw_all_pairs(Z: np.ndarray, radius: int, block: int = 120_000) -> np.ndarray:
    """Symmetric matrix of banded DTW distances (|i − j| ≤ radius, local cost |a − b|,
    the sum over the path: the shipped model's `"cost": "abs"`), vectorised over pairs."""
    n_win, n = Z.shape
    I, J = np.triu_indices(n_win, 1)
    out = np.zeros((n_win, n_win))
    for s in range(0, len(I), block):
        a, b = Z[I[s:s + block]], Z[J[s:s + block]]
        m = len(a)
        # Row-by-row DP, D[i][j] for j in the band; prev/cur hold column j at
        # slot j + 1 (slot 0 and cells outside the band are the ∞ border).
        prev = np.full((n + 1, m), np.inf)
        for i in range(n):
            cur = np.full((n + 1, m), np.inf)
            lo, hi = max(0, i - radius), min(n - 1, i + radius)
            for j in range(lo, hi + 1):
                c = np.abs(a[:, i] - b[:, j])
                if i == 0 and j == 0:
                    cur[1] = c
                    continue
                best = np.minimum(np.minimum(prev[j + 1], cur[j]), prev[j])
                cur[j + 1] = c + best
            prev = cur
        out[I[s:s + block], J[s:s + block]] = prev[n]
    out += out.T
    return out


def divide_min(X: np.ndarray) -> np.ndarray:
    return X / X.min(axis=1, keepdims=True)


def prefix_matrices(X, prefixes, radius, cache_dir):
    key = hashlib.sha1(X.tobytes() + repr((prefixes, radius)).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"dtw-{key}.npz") if cache_dir else None
    if path and os.path.exists(path):
        z = np.load(path)
        return {n: z[f"n{n}"] for n in prefixes}
    out = {}
    for n in prefixes:
        t = time.time()
        out[n] = dtw_all_pairs(divide_min(X[:, :n]), radius)
        print(f"  DTW all pairs, prefix {n}: {time.time() - t:.0f} s", file=sys.stderr)
    if path:
        os.makedirs(cache_dir, exist_ok=True)
        np.savez(path, **{f"n{n}": m for n, m in out.items()})
    return out


def check_against_core(X, D, prefixes, radius, rng):
    """A few entries of every matrix against the core's DTW (opsel.dtw_distance)."""
    import opsel

    for n in prefixes:
        Z = divide_min(X[:, :n])
        for _ in range(5):
            i, j = rng.choice(len(X), 2, replace=False)
            want = opsel.dtw_distance(Z[i], Z[j], radius=radius, cost="abs")
            assert abs(D[n][i, j] - want) <= 1e-9 * max(1.0, want), (n, i, j, D[n][i, j], want)


def prefix_decisions(D, prefixes, y_idx, rows, ref_mask):
    """1-NN per prefix for `rows` against the references in `ref_mask`.

    Returns arrays (rows × prefixes): predicted class, margin 1 − d1/d_other,
    nearest distance, and the decision margin 1 − d(best of the chosen side) /
    d(best of the other side) (BBR present vs not)."""
    P = len(prefixes)
    pred = np.zeros((len(rows), P), dtype=int)
    margin = np.zeros((len(rows), P))
    dist = np.zeros((len(rows), P))
    dmargin = np.zeros((len(rows), P))
    bbr_cls = np.array([c in BBR for c in CLASSES])
    for pi, n in enumerate(prefixes):
        M = D[n][np.ix_(rows, np.flatnonzero(ref_mask))]
        yr = y_idx[ref_mask]
        per = np.full((len(rows), len(CLASSES)), np.inf)
        for c in range(len(CLASSES)):
            sel = yr == c
            if sel.any():
                per[:, c] = M[:, sel].min(axis=1)
        p = per.argmin(axis=1)
        d1 = per[np.arange(len(rows)), p]
        other = per.copy()
        other[np.arange(len(rows)), p] = np.inf
        d2 = other.min(axis=1)
        pred[:, pi] = p
        dist[:, pi] = d1
        margin[:, pi] = np.where(d2 > 0, np.clip(1 - d1 / np.where(d2 > 0, d2, 1), 0, 1), 0)
        side = bbr_cls[p]
        d_other_side = np.where(side, per[:, ~bbr_cls].min(axis=1), per[:, bbr_cls].min(axis=1))
        dmargin[:, pi] = np.where(d_other_side > 0, np.clip(1 - d1 / d_other_side, 0, 1), 0)
    return pred, margin, dist, dmargin


FEATURES_SHORT = ("n_over_w", "margin", "decision_margin", "distance_per_sample", "same_class",
                  "same_decision", "streak_share")
# The shipped gate's features (`ops::ProbeGate`): the ablation in
# docs/results/ops-gate.md found the nearest distance, the class agreement and
# the decision margin add nothing on held-out conditions.
GATE_FEATURES = ("n_over_w", "margin", "same_decision", "streak_share")
FEATURES = ("n / w", "margin", "decision margin", "nearest distance / n", "same class as previous check",
            "same decision as previous check", "checks in a row with this decision / checks")


def features(prefixes, w, pred, margin, dist, dmargin):
    """Gate features per (window, check): cheap, allocation-free to compute online."""
    bbr_cls = np.array([c in BBR for c in CLASSES])
    rows, P = pred.shape
    dec = bbr_cls[pred]
    F = np.zeros((rows, P, len(FEATURES)))
    streak = np.zeros(rows)
    for pi, n in enumerate(prefixes):
        same_c = pred[:, pi] == pred[:, pi - 1] if pi else np.zeros(rows, bool)
        same_d = dec[:, pi] == dec[:, pi - 1] if pi else np.zeros(rows, bool)
        streak = np.where(same_d, streak + 1, 1)
        F[:, pi] = np.column_stack([
            np.full(rows, n / w), margin[:, pi], dmargin[:, pi], dist[:, pi] / n,
            same_c, same_d, streak / len(prefixes),
        ])
    return F, dec


class Gate:
    """Logistic regression on standardised features (scikit-learn), conditions weighted equally."""

    def __init__(self, C=1.0):
        self.C = C

    def fit(self, F, right, weights):
        from sklearn.linear_model import LogisticRegression

        self.mu = F.mean(axis=0)
        self.sd = np.where(F.std(axis=0) > 0, F.std(axis=0), 1.0)
        self.lr = LogisticRegression(C=self.C, max_iter=2000)
        self.lr.fit((F - self.mu) / self.sd, right, sample_weight=weights)
        return self

    def proba(self, F):
        sh = F.shape
        p = self.lr.predict_proba(((F.reshape(-1, sh[-1]) - self.mu) / self.sd))[:, 1]
        return p.reshape(sh[:-1])

    def raw_coefficients(self):
        """Coefficients on the unstandardised features: p = σ(b + Σ wᵢ xᵢ)."""
        w = self.lr.coef_[0] / self.sd
        b = float(self.lr.intercept_[0] - (self.lr.coef_[0] * self.mu / self.sd).sum())
        return w, b


SWEEP = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)


def stop_index(score, thr, n_checks):
    """First check (among the first n_checks, the prefixes shorter than w) with score ≥ thr; else the full window."""
    ok = score[:, :n_checks] >= thr
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), n_checks)
    return first


def evaluate(stop, dec, truth_bbr, prefixes):
    chosen = dec[np.arange(len(dec)), stop]
    right = chosen == truth_bbr
    secs = np.array(prefixes)[stop]
    return right.mean(), secs.mean(), (secs <= 10).mean(), right


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="the condition grid (opsel lab collect --out), e.g. data/collect")
    ap.add_argument("--w", type=int, default=40)
    ap.add_argument("--radius", type=int, default=20)
    ap.add_argument("--step", type=int, default=5, help="checks at step, 2·step, …, w − step")
    ap.add_argument("--min-windows", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=0.01,
                    help="inner-CV threshold choice: right-decision rate within this of the full window's")
    ap.add_argument("--cache", default=os.environ.get("OPS_GATE_CACHE"),
                    help="folder for the all-pairs DTW matrices (recomputed when the data change)")
    ap.add_argument("--export", default=None, help="write the gate trained on every condition (JSON)")
    ap.add_argument("--json", default=None, help="write the per-condition results")
    ap.add_argument("--features", default=",".join(GATE_FEATURES),
                    help="gate features to use (ablation), of " + ",".join(FEATURES_SHORT))
    a = ap.parse_args(argv)
    use = [FEATURES_SHORT.index(f) for f in a.features.split(",") if f]
    t0 = time.time()
    conds = loco.load(a.root, "passive", a.w, a.min_windows)
    names = sorted(conds, key=lambda c: (conds[c]["rate"], conds[c]["rtt"], conds[c]["buffer_bytes"]))
    X = np.concatenate([conds[c]["X"] for c in names])
    y = np.concatenate([conds[c]["y"] for c in names]).astype(str)
    cond = np.concatenate([np.full(len(conds[c]["y"]), i) for i, c in enumerate(names)])
    y_idx = np.array([CLASSES.index(v) for v in y])
    truth_bbr = np.isin(y, list(BBR))
    prefixes = list(range(a.step, a.w, a.step)) + [a.w]
    n_checks = len(prefixes) - 1
    print(f"{len(names)} conditions, {len(X)} passive windows of w = {a.w}; 1-NN DTW radius {a.radius}, "
          f"divide-min; checks at n = {prefixes[:-1]} s, else the full {a.w} s")
    D = prefix_matrices(X, prefixes, a.radius, a.cache)
    check_against_core(X, D, prefixes, a.radius, np.random.default_rng(0))

    # Prefix decisions of condition c's windows with references from neither o nor c (o may equal c).
    nc = len(names)
    cache = {}

    def pd(o, c):
        k = (min(o, c), max(o, c)) if o != c else (c, c)
        if (o, c) not in cache:
            rows = np.flatnonzero(cond == c)
            mask = (cond != o) & (cond != c)
            pr, mg, ds, dm = prefix_decisions(D, prefixes, y_idx, rows, mask)
            F, dec = features(prefixes, a.w, pr, mg, ds, dm)
            F = F[:, :, use]
            cache[(o, c)] = (rows, F, dec, mg)
        del k
        return cache[(o, c)]

    def train_rows(o, exclude=()):
        Fs, Rs, Ws = [], [], []
        for c in range(nc):
            if c == o or c in exclude:
                continue
            rows, F, dec, _ = pd(o, c)
            right = (dec == truth_bbr[rows][:, None])[:, :n_checks]
            Fs.append(F[:, :n_checks].reshape(-1, F.shape[-1]))
            Rs.append(right.reshape(-1))
            Ws.append(np.full(right.size, 1.0 / right.size))
        return np.concatenate(Fs), np.concatenate(Rs), np.concatenate(Ws)

    thr_grid = np.round(np.arange(0.50, 0.996, 0.01), 3)
    tau_grid = np.round(np.arange(0.0, 1.001, 0.02), 3)

    def choose(scores_by_inner, full_rate):
        """Smallest threshold whose mean inner right rate ≥ full − tolerance (else the strictest)."""
        best = None
        for thr in (thr_grid if scores_by_inner[0][0] == "gate" else tau_grid):
            rates, secs = [], []
            for _, score, dec, truth in scores_by_inner:
                r, s, _, _ = evaluate(stop_index(score, thr, n_checks), dec, truth, prefixes)
                rates.append(r)
                secs.append(s)
            if np.mean(rates) >= full_rate - a.tolerance:
                cand = (np.mean(secs), thr)
                if best is None or cand < best:
                    best = cand
        return best[1] if best else (thr_grid[-1] if scores_by_inner[0][0] == "gate" else 1.01)

    results = {}
    gates = {}
    for o in range(nc):
        rows, F, dec, mg = pd(o, o)
        truth = truth_bbr[rows]
        Ftr, Rtr, Wtr = train_rows(o)
        gate = Gate().fit(Ftr, Rtr, Wtr)
        # Inner LOCO over the training conditions: gate threshold and τ.
        inner_g, inner_m, inner_full = [], [], []
        for c in range(nc):
            if c == o:
                continue
            rows_c, F_c, dec_c, mg_c = pd(o, c)
            tc = truth_bbr[rows_c]
            g_in = Gate().fit(*train_rows(o, exclude=(c,)))
            inner_g.append(("gate", g_in.proba(F_c), dec_c, tc))
            inner_m.append(("margin", mg_c, dec_c, tc))
            inner_full.append((dec_c[:, -1] == tc).mean())
        full_inner = float(np.mean(inner_full))
        thr = choose(inner_g, full_inner)
        tau = choose(inner_m, full_inner)
        p = gate.proba(F)
        res = {"windows": int(len(rows)), "gate_threshold": float(thr), "tau": float(tau)}
        res["full"] = evaluate(np.full(len(rows), n_checks), dec, truth, prefixes)[:3]
        res["gate"] = evaluate(stop_index(p, thr, n_checks), dec, truth, prefixes)[:3]
        res["margin-cv"] = evaluate(stop_index(mg, tau, n_checks), dec, truth, prefixes)[:3]
        for t in (0.3, 0.5, 0.8):
            res[f"margin-{t}"] = evaluate(stop_index(mg, t, n_checks), dec, truth, prefixes)[:3]
        res["prefix-10"] = evaluate(np.full(len(rows), prefixes.index(10)), dec, truth, prefixes)[:3]
        results[names[o]] = res
        gates[o] = gate
        print(f"  {names[o]}: gate θ = {thr:.2f}, τ = {tau:.2f} ({time.time() - t0:.0f} s)", file=sys.stderr)

    # Sweep of fixed gate thresholds (each fold's gate, every threshold reported: nothing chosen here).
    sweep = {}
    for o in range(nc):
        rows, F, dec, mg = pd(o, o)
        p = gates[o].proba(F)
        for thr in SWEEP:
            sweep.setdefault(thr, []).append(evaluate(stop_index(p, thr, n_checks), dec, truth_bbr[rows], prefixes)[:3])

    rules = [("full", f"full window ({a.w} s)"), ("prefix-10", "always prefix 10 s"),
             ("margin-0.3", "margin τ = 0.3 (PriorProbe default)"), ("margin-0.5", "margin τ = 0.5"),
             ("margin-0.8", "margin τ = 0.8 (Progressive default)"), ("margin-cv", "margin τ by inner LOCO"),
             ("gate", "gate θ by inner LOCO")]
    print()
    print("Right decisions (%) / mean probing seconds per held-out condition (LOCO):")
    print("| rule | " + " | ".join(names) + " | median | mean over conditions | decided ≤ 10 s (mean) |")
    print("|---|" + "---|" * (len(names) + 3))
    for key, label in rules:
        cells = [f"{100 * results[c][key][0]:.0f} / {results[c][key][1]:.1f}" for c in names]
        r = [results[c][key][0] for c in names]
        s = [results[c][key][1] for c in names]
        q = [results[c][key][2] for c in names]
        print(f"| {label} | " + " | ".join(cells)
              + f" | **{100 * np.median(r):.1f} / {np.median(s):.1f}** | {100 * np.mean(r):.1f} / {np.mean(s):.1f}"
              + f" | {100 * np.mean(q):.0f} % |")
    print()
    print("| held out | gate θ | τ |")
    print("|---|---|---|")
    for c in names:
        print(f"| {c} | {results[c]['gate_threshold']:.2f} | {results[c]['tau']:.2f} |")

    print()
    print("Gate threshold sweep (each held-out condition's own LOCO gate; medians over conditions):")
    print("| θ | right decisions, median / mean over conditions | mean probing s, median | decided ≤ 10 s (mean) |")
    print("|---|---|---|---|")
    for thr in SWEEP:
        r = [v[0] for v in sweep[thr]]
        sec = [v[1] for v in sweep[thr]]
        q = [v[2] for v in sweep[thr]]
        print(f"| {thr:.2f} | {100 * np.median(r):.1f} / {100 * np.mean(r):.1f} % | {np.median(sec):.1f} | {100 * np.mean(q):.0f} % |")

    if a.export:
        # The shipped gate: trained on every condition (each condition's windows
        # against references from the others), threshold by LOCO over all of them.
        Fs, Rs, Ws = [], [], []
        inner = []
        full_in = []
        for c in range(nc):
            rows, F, dec, _ = pd(c, c)
            right = (dec == truth_bbr[rows][:, None])[:, :n_checks]
            Fs.append(F[:, :n_checks].reshape(-1, F.shape[-1]))
            Rs.append(right.reshape(-1))
            Ws.append(np.full(right.size, 1.0 / right.size))
        for c in range(nc):
            keep = [i for i in range(nc) if i != c]
            g = Gate().fit(np.concatenate([Fs[i] for i in keep]), np.concatenate([Rs[i] for i in keep]),
                           np.concatenate([Ws[i] for i in keep]))
            rows, F, dec, _ = pd(c, c)
            inner.append(("gate", g.proba(F), dec, truth_bbr[rows]))
            full_in.append((dec[:, -1] == truth_bbr[rows]).mean())
        thr = choose(inner, float(np.mean(full_in)))
        g = Gate().fit(np.concatenate(Fs), np.concatenate(Rs), np.concatenate(Ws))
        wts, b = g.raw_coefficients()
        doc = {
            "format": "opsel-probe-gate", "version": 1, "kind": "logistic",
            "window": a.w, "checks": prefixes[:-1], "threshold": float(thr),
            "features": [FEATURES_SHORT[i] for i in use],
            "weights": [float(v) for v in wts], "intercept": b,
            "training": {"conditions": names, "windows": int(len(X)), "radius": a.radius,
                         "normalization": "divide-min",
                         "label": "prefix decision (BBR present or not) equals the true class's",
                         "threshold_rule": f"smallest threshold whose mean LOCO right-decision rate is within "
                                           f"{a.tolerance} of the full window's"},
        }
        with open(a.export, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"\nexported {a.export}: threshold {thr:.2f}, weights {np.round(wts, 3).tolist()}, intercept {b:.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
