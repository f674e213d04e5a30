"""FastProb gates that see the path's history (docs/results/fastprob.md, "Gates that see
the path's history"; 004 §V retrains per network, this is our extension of it: the gate,
not the model, adapts to the path).

A **path** is what a sender knows about the destination before its probe: the network
condition. In the corpus the path key is (family, rate_mbps, rtt_ms, buffer_bdp) from a
record's ``conditions`` (57 paths in the 3 000 transfers, 21-112 transfers each; the CCA,
background, streams, stalls and setup delay vary within a path and are not in the key).
The variant key ``pathcca`` adds the sender's own CCA (the sender knows it too).

**History features** of transfer i, computed only from transfers j < i in recording order
(``seq``) on the same path, each known when j finished (its t_avg and the errors the
regressors made on its prefixes):

- ``hc``  log(1 + count of earlier transfers on the path);
- ``hm``  log(mean t_avg of the earlier transfers / prefix mean of i at n);
- ``hcv`` coefficient of variation of the earlier transfers' t_avg;
- ``hl``  log(t_avg of the last earlier transfer / prefix mean of i at n);
- ``he``  log(median R_n error % of the earlier transfers + 0.5) at the gate length n;
- ``hf``  fraction of the earlier transfers whose R_n error at n is < P = 5 %.

The errors of earlier transfers are what a deployed sender would have seen: for the
training transfers the out-of-fold R_n predictions (5 time-ordered blocks, the model never
saw the transfer), for the evaluated transfers the predictions of the R_n fitted on the
training transfers. Without history (the first transfer of a path) ``hc`` = 0 and the
others are 0 (``he`` = log(P + 0.5), ``hf`` = 0.5). Relative features use the prefix mean
with the shipped 1 Mbit/s floor.

Variants (``search``; names ``TARGET:GATE:HIST[:KEY]``), all on the shipped regressors
(ratio+stats, 12 trees of depth 8, min 3 per leaf, gates every 5 from n = 1, cap 50):

- ``TARGET`` ``ratio`` | ``log`` (``levers.py``);
- ``GATE`` ``clf`` (classifier of err < 5 %, thresholds 0.2-0.9), ``err`` / ``err10`` /
  ``err8`` (regressor of log(err % + 0.5), 12 / 10 / 8 trees, budgets E 3-10 %), each with
  ``+stab`` optional (``levers.py``'s stability inputs);
- ``HIST`` ``none`` (the ``levers.py`` gate, for reference), ``hist`` (the six features
  above appended to the gate's inputs, training rows with their own earlier-only history);
- ``KEY`` ``path`` (default) or ``pathcca``.
- per-family budgets (error gates, ``--family-caps``; added after the first search had been
  read, where ``wan`` bound every row): one budget E per family (the family is part of the path
  key), chosen from 4-10 % to maximise the saving with MAPE <= cap overall and on every
  family, 2-fold cross-fitted inside validation (chosen on one half in time order, scored on
  the other, as ``levers.py``'s per-length thresholds); the row's ``budgets`` are the ones
  chosen on all of validation, which the held-out run uses (``heldout --budgets``);
- ``cal:TARGET:GATE:HIST:W[:KEY]`` (added with the per-family budgets): a per-path budget
  from the path's history of the learned gate itself: each evaluated transfer uses the
  loosest stop threshold (E 3-15 % or classifier 0.9-0.2) under which the last W earlier
  transfers on its path would have had MAPE <= T (T 5-9 %); the gate scores of earlier
  transfers are out-of-fold on the training slice (gates fitted on the other 4 of 5
  time-ordered blocks) and the full-fit gate's on the evaluated slice;
- ``mem:TARGET:m:W[:KEY]``: the per-path error memory, no learning: stop at the first gate
  length n whose last W (``all`` or a number) earlier transfers on the path had median R_n
  error <= P (P 3-10 %), else the cap; with fewer than m earlier transfers, fall back to the
  learned gate of the same target (``clf`` at 0.5 for ``ratio``, ``err10`` at E 5 % for
  ``log``). Every validation and held-out transfer has >= 10 earlier transfers on its path
  (``paths``), so with m = 5 the fallback never fires there; with ``pathcca`` (153 keys) it
  does for 3 % of the validation transfers.

Split (fixed, as ``levers.py``): models and gates fitted on transfers 1-1800, scored on
1801-2400; the history of a validation transfer is every earlier transfer on its path
(1-1800 and earlier validation ones), as a deployed sender sees it. ``cache`` drops
everything after ``--split``'s second number right after loading.

**The rule for picking** (written before any held-out transfer is scored; the shape of
``levers.py``'s rule): among (variant, threshold) pairs with validation MAPE <= 10 % overall
and on every family and an estimated model file <= 2 MB, rank by whether the saving is
>= 40 % against the fixed-n RF of equal validation error (envelope of ``fixed_curve.py
--split 1800,2400 --slice val --trees 20``, as ``complete.py``), then by the saving. The file
estimate is ``levers.est_bytes`` except that error-regression gates grow by the 1.36 measured
when ``levers.py``'s pick went from 1 800 to 2 400 training transfers (estimated 1.90 MB, file
2.07 MB) instead of 1.15; the history inputs add six numbers per gate and a per-path store
outside the file. The per-path memory has no trees beyond the fallback gate's.

**The rule for shipping**: the top pair is refitted on 1-2400 and scored once on 2401-3000 by
this harness (history from every earlier transfer, validation included). It would replace the
shipped model only if it meets more of the goals on the held-out slice (MAPE <= 10 % overall,
<= 10 % on every family, saving >= 40 % against the fixed-n RF of equal held-out error,
``fixed_curve.py --split 1800,2400 --slice test --trees 20``) than the shipped model (which
meets two), and its file is <= 2 MB. A tie keeps the shipped model. Meeting the rule also
needs the core to run it (a model format with history inputs and a per-path store passed by
the caller); without that it is reported as "meets the rule, not shipped".

Run (``W`` a scratch folder)::

    python research/fastprob/history.py paths --corpus $W/corpus3000.jsonl
    python research/fastprob/history.py cache --corpus $W/corpus3000.jsonl --split 1800,2400 --out $W/hist-val.npz
    python research/fastprob/history.py search --cache $W/hist-val.npz --corpus $W/corpus3000.jsonl \\
        --curve $W/curve-val.jsonl --out $W/hist-search.json
    python research/fastprob/history.py search --cache $W/hist-val.npz --corpus $W/corpus3000.jsonl \\
        --curve $W/curve-val.jsonl --out $W/hist-search-fam.json --family-caps 9,10 \\
        --variants log:err8:none,log:err8:hist,log:err8+stab:hist,log:err8:hist:pathcca,ratio:err8:hist,log:err10:hist
    python research/fastprob/history.py search --cache $W/hist-val.npz --corpus $W/corpus3000.jsonl \\
        --curve $W/curve-val.jsonl --out $W/hist-search-cal.json --variants cal:log:err8:hist:all,\\
    cal:log:err8:hist:20,cal:log:err8:none:all,cal:log:err8+stab:hist:all,cal:log:err8:hist:all:pathcca,\\
    cal:ratio:clf:hist:all,cal:ratio:clf:none:all
    python research/fastprob/levers.py pick \\
        --out $W/hist-search.json,$W/hist-search-fam.json,$W/hist-search-cal.json   # the rule above
    python research/fastprob/history.py cache --corpus $W/corpus3000.jsonl --split 2400,3000 --out $W/hist-test.npz
    python research/fastprob/history.py heldout --cache $W/hist-test.npz --corpus $W/corpus3000.jsonl \\
        --curve $W/curve-test.jsonl --variant log:err8:hist,log:err8:none,ratio:clf:none \\
        --family-caps 10 --budgets '{"lan": 10, "wan": 5, "shared": 6}' \\
        --thr 'per-family, cap 10;0.5;E 5 %' --json $W/hist-heldout.json

The rule picked ``log:err8:hist`` with per-family budgets (``lan`` 10 %, ``wan`` 5 %,
``shared`` 6 %; cap 10; the ``cal`` rows did not change the pick); the held-out call scores
it, the same gates without history inputs (same budgets), the shipped configuration
(``ratio:clf:none`` at 0.5, a check of the harness against the Rust core's 7.06 % at
3.13 s) and the uniform E 5 % rows for reference; only the pick's row decides.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import levers as lv  # noqa: E402
from complete import envelope  # noqa: E402

tf = lv.tf
CAP, P, EVERY = lv.CAP, lv.P, lv.EVERY
GATES = lv.GATES
STAGES = GATES + [CAP]
B_REG, B_CLF, REG_NODES = lv.B_REG, lv.B_CLF, lv.REG_NODES
GROWTH_CLF, GROWTH_ERR = lv.GROWTH, 1.36
FLOOR = 1e6


def path_key(d, key="path"):
    c = d["conditions"]
    k = (c["family"], float(c["rate_mbps"]), float(c["rtt_ms"]), float(c["buffer_bdp"]))
    return k + (c["cca"],) if key == "pathcca" else k


def load(corpus, end):
    logs = tf.load_logs(corpus)
    assert len(logs) >= end, len(logs)
    return logs[:end]  # everything after the evaluated slice is dropped here


def paths(a):
    logs = tf.load_logs(a.corpus)[:3000]
    for key in ("path", "pathcca"):
        cnt = collections.Counter()
        earlier = []
        for d in logs:
            k = path_key(d, key)
            earlier.append(cnt[k])
            cnt[k] += 1
        h = np.array(earlier)
        print(f"key {key}: {len(cnt)} paths, transfers per path {min(cnt.values())}-{max(cnt.values())}")
        for lo, hi, name in ((0, 1800, "train 1-1800"), (1800, 2400, "validation 1801-2400"),
                             (2400, 3000, "held-out 2401-3000")):
            x = h[lo:hi]
            print(f"  {name}: earlier transfers on the path min {x.min()}, median {np.median(x):.0f}, "
                  f"max {x.max()}; share with 0: {(x == 0).mean() * 100:.1f} %, < 5: {(x < 5).mean() * 100:.1f} %")
    return 0


def cache(a):
    """OOF predictions (5 time-ordered blocks) on 1..TRAIN and full-fit predictions on
    TRAIN+1..END at the gate lengths and the cap, per target; same forests and seeds as
    ``levers.py cache`` (which does every length 1..50 and only the validation split)."""
    from sklearn.ensemble import RandomForestRegressor

    n_tr, end = (int(v) for v in a.split.split(","))
    logs = load(a.corpus, end)
    tr, ev = logs[:n_tr], logs[n_tr:]
    blocks = np.array_split(np.arange(n_tr), 5)
    out = {}
    t0 = time.perf_counter()
    for target in a.targets.split(","):
        oof = np.full((n_tr, CAP), np.nan)
        val = np.full((len(ev), CAP), np.nan)
        for n in STAGES:
            X, y = tf.xy(tr, n)
            F, s = tf.prefix_features(X, "ratio+stats")
            Xv, _ = tf.xy(ev, n)
            Fv, sv = tf.prefix_features(Xv, "ratio+stats")
            t = y / s if target == "ratio" else np.log(np.maximum(y / s, 1e-6))
            back = (lambda r, m: r * m) if target == "ratio" else (lambda r, m: np.exp(r) * m)
            for b in blocks:
                rest = np.setdiff1d(np.arange(n_tr), b)
                r = RandomForestRegressor(random_state=n, n_jobs=1, **lv.PARAMS).fit(F[rest], t[rest])
                oof[b, n - 1] = back(r.predict(F[b]), s[b])
            r = RandomForestRegressor(random_state=n, n_jobs=1, **lv.PARAMS).fit(F, t)
            val[:, n - 1] = back(r.predict(Fv), sv)
            print(f"{target} n={n} {time.perf_counter() - t0:.0f} s", flush=True)
        out[f"oof_{target}"], out[f"val_{target}"] = oof, val
    out["y_tr"] = np.array([d["t_avg_bps"] for d in tr])
    out["y_va"] = np.array([d["t_avg_bps"] for d in ev])
    out["fam_va"] = np.array([d["family"] for d in ev])
    out["split"] = np.array([n_tr, end])
    np.savez_compressed(a.out, **out)
    return 0


def history(logs, y, err, key="path", window=None):
    """Per transfer, from the earlier transfers on its path only: a dict of arrays
    ``count``, ``mean``, ``cv``, ``last`` (t_avg, bit/s; nan without history) and
    ``med_err``, ``frac_ok`` of shape (transfers, CAP) at the stage lengths (nan without
    history). ``err`` is each transfer's error row (known once it finished); ``window``
    keeps the last W earlier transfers for the error statistics (None: all)."""
    m = len(logs)
    h = {"count": np.zeros(m), "mean": np.full(m, np.nan), "cv": np.full(m, np.nan), "last": np.full(m, np.nan),
         "med_err": np.full((m, CAP), np.nan), "frac_ok": np.full((m, CAP), np.nan)}
    seen = collections.defaultdict(list)
    cols = np.array(STAGES) - 1
    for i, d in enumerate(logs):
        js = seen[path_key(d, key)]
        if js:
            ty = y[js]
            h["count"][i] = len(js)
            h["mean"][i] = ty.mean()
            h["cv"][i] = ty.std() / ty.mean() if ty.mean() > 0 else 0.0
            h["last"][i] = ty[-1]
            w = js if window is None else js[-window:]
            e = err[w][:, cols]
            h["med_err"][i, cols] = np.median(e, axis=0)
            h["frac_ok"][i, cols] = (e < P).mean(axis=0)
        js.append(i)
    return h


def hist_inputs(h, idx, X, n):
    """The six history gate inputs of the module docstring at length n for rows ``idx``."""
    pm = np.maximum(X.mean(axis=1), FLOOR)
    has = h["count"][idx] > 0
    rel = lambda v: np.where(has, np.log(np.maximum(np.nan_to_num(v, nan=1.0), FLOOR) / pm), 0.0)  # noqa: E731
    return np.column_stack([
        np.log1p(h["count"][idx]),
        rel(h["mean"][idx]),
        np.where(has, np.nan_to_num(h["cv"][idx]), 0.0),
        rel(h["last"][idx]),
        np.where(has, np.log(np.nan_to_num(h["med_err"][idx, n - 1], nan=P) + 0.5), np.log(P + 0.5)),
        np.where(has, np.nan_to_num(h["frac_ok"][idx, n - 1], nan=0.5), 0.5),
    ])


def gate_inputs(logs, n, pred, stab, h, idx):
    G = lv.gate_inputs(logs, n, pred, stab, EVERY)
    if h is None:
        return G
    X, _ = tf.xy(logs, n)
    return np.column_stack([G, hist_inputs(h, idx, X, n)])


def fit_gates(tr, oof, y_tr, kind, stab, h, idx):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    trees = {"err": 12, "err10": 10, "err8": 8}
    gates = {}
    for n in GATES:
        e = tf.pct_err(oof[:, n - 1], y_tr)
        G = gate_inputs(tr, n, oof, stab, h, idx)
        if kind.startswith("err"):
            pr = dict(lv.PARAMS, n_estimators=trees[kind])
            gates[n] = RandomForestRegressor(random_state=1000 + n, n_jobs=1, **pr).fit(G, np.log(e + 0.5))
            continue
        lab = (e < P).astype(int)
        if lab.min() == lab.max():
            gates[n] = float(lab[0])
            continue
        gates[n] = RandomForestClassifier(random_state=1000 + n, n_jobs=1, **lv.PARAMS).fit(G, lab)
    return gates


def gate_scores(gates, ev, pred, kind, stab, h, idx):
    out = np.full((len(ev), CAP), -np.inf)
    for n, g in gates.items():
        if isinstance(g, float):
            out[:, n - 1] = g
            continue
        G = gate_inputs(ev, n, pred, stab, h, idx)
        out[:, n - 1] = g.predict_proba(G)[:, -1] if kind == "clf" else -g.predict(G)
    return out


def est_bytes(gates, kind):
    gn = sum(sum(t.tree_.node_count for t in g.estimators_) for g in gates.values() if not isinstance(g, float))
    n_reg = len(set(GATES) | {CAP})
    if kind == "clf":
        return n_reg * REG_NODES * B_REG + GROWTH_CLF * gn * B_CLF
    return n_reg * REG_NODES * B_REG + GROWTH_ERR * gn * B_REG


class Setup:
    """Training and evaluated slices with the whole-corpus error rows the history needs."""

    def __init__(self, c, corpus):
        n_tr, end = (int(v) for v in c["split"])
        logs = load(corpus, end)
        self.tr, self.ev = logs[:n_tr], logs[n_tr:]
        self.all = logs
        self.n_tr = n_tr
        self.c = c
        self.y_tr, self.y_va, self.fam = c["y_tr"], c["y_va"], c["fam_va"]
        self.y_all = np.concatenate([self.y_tr, self.y_va])
        self._h = {}

    def pred_all(self, target):
        return np.vstack([self.c[f"oof_{target}"], self.c[f"val_{target}"]])

    def hist(self, target, key="path", window=None):
        k = (target, key, window)
        if k not in self._h:
            err = tf.pct_err(self.pred_all(target), self.y_all[:, None])
            self._h[k] = history(self.all, self.y_all, err, key, window)
        return self._h[k]


def learned(S, target, kind, stab, hist, key):
    oof, val = S.c[f"oof_{target}"], S.c[f"val_{target}"]
    h = S.hist(target, key) if hist else None
    tr_idx = np.arange(S.n_tr)
    ev_idx = np.arange(S.n_tr, S.n_tr + len(S.ev))
    gates = fit_gates(S.tr, oof, S.y_tr, kind, stab, h, tr_idx)
    scores = gate_scores(gates, S.ev, val, kind, stab, h, ev_idx)
    return gates, scores


def learned_oof(S, target, kind, stab, hist, key):
    """Gate scores on every transfer as a deployed sender would have seen them: out-of-fold
    on the training transfers (gates fitted on the other 4 of 5 time-ordered blocks), the
    full-fit gates on the evaluated ones."""
    oof = S.c[f"oof_{target}"]
    h = S.hist(target, key) if hist else None
    gates, scores_ev = learned(S, target, kind, stab, hist, key)
    scores_tr = np.full((S.n_tr, CAP), -np.inf)
    for b in np.array_split(np.arange(S.n_tr), 5):
        rest = np.setdiff1d(np.arange(S.n_tr), b)
        tr_rest = [S.tr[i] for i in rest]
        g = fit_gates(tr_rest, oof[rest], S.y_tr[rest], kind, stab, h, rest)
        scores_tr[b] = gate_scores(g, [S.tr[i] for i in b], oof[b], kind, stab, h, b)
    return gates, np.vstack([scores_tr, scores_ev])


CAL_E = (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 15.0)
CAL_CLF = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)


def calibrated_stop(S, kind, scores_all, target, key, window, m, t_pct):
    """Per-path budget from the path's history of the learned gate: for each evaluated
    transfer, the loosest stop threshold (E from ``CAL_E`` or a classifier threshold from
    ``CAL_CLF``, strict to loose) under which the last W earlier transfers on its path would
    have had MAPE <= T; the strictest when none does; E 5 % / 0.5 with fewer than m earlier
    transfers."""
    y_all = S.y_all
    err_all = tf.pct_err(S.pred_all(target), y_all[:, None])
    grid = [-np.log(e + 0.5) for e in CAL_E] if kind != "clf" else list(CAL_CLF)
    default = grid[CAL_E.index(5.0)] if kind != "clf" else 0.5
    runs = [lv.run(scores_all, err_all, t, GATES) for t in grid]
    seen = collections.defaultdict(list)
    for i, d in enumerate(S.all[: S.n_tr]):
        seen[path_key(d, key)].append(i)
    n_stop = np.empty(len(S.ev), dtype=int)
    e = np.empty(len(S.ev))
    chosen = []
    for j, d in enumerate(S.ev):
        i = S.n_tr + j
        js = seen[path_key(d, key)]
        w = js if window is None else js[-window:]
        k = grid.index(default)
        if len(js) >= m:
            k = 0
            for kk, (_, ek) in enumerate(runs):
                if ek[w].mean() <= t_pct:
                    k = kk
        n_stop[j], e[j] = runs[k][0][i], runs[k][1][i]
        chosen.append(k)
        js.append(i)
    return n_stop, e, np.bincount(chosen, minlength=len(grid))


def thresholds(kind):
    if kind == "clf":
        return [(f"{t:g}", t) for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    return [(f"E {e:g} %", -np.log(e + 0.5)) for e in lv.ERR_BUDGETS]


def memory_stop(S, target, m, window, key, p, fb_scores, fb_thr):
    """The per-path error memory of the module docstring."""
    val = S.c[f"val_{target}"]
    err = tf.pct_err(val, S.y_va[:, None])
    h = S.hist(target, key, window)
    ev_idx = np.arange(S.n_tr, S.n_tr + len(S.ev))
    n_stop = np.full(len(S.ev), CAP)
    e = err[:, CAP - 1].copy()
    n_fb, e_fb = lv.run(fb_scores, err, fb_thr, GATES)
    for j, i in enumerate(ev_idx):
        if h["count"][i] < m:
            n_stop[j], e[j] = n_fb[j], e_fb[j]
            continue
        for n in GATES:
            if h["med_err"][i, n - 1] <= p:
                n_stop[j], e[j] = n, err[j, n - 1]
                break
    return n_stop, e


FAM_E = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)


def run_fam(scores, err, fam, budgets):
    """Error gates with one budget E per family (the family is part of the path key)."""
    thr = np.array([-np.log(budgets[f] + 0.5) for f in fam])
    n_stop = np.full(len(err), CAP)
    e = err[:, CAP - 1].copy()
    done = np.zeros(len(err), dtype=bool)
    for n in GATES:
        fire = (~done) & (scores[:, n - 1] > thr)
        n_stop[fire], e[fire] = n, err[fire, n - 1]
        done |= fire
    return n_stop, e


def fit_fam_budgets(scores, err, fam, env, cap_pct):
    """The (E_lan, E_wan, E_shared) with the largest saving whose MAPE overall and on every
    family is <= cap_pct; the shipped-like (5, 5, 5) when none is."""
    import itertools

    best = (-np.inf, dict(zip(lv.FAMILIES, (5.0, 5.0, 5.0))))
    for combo in itertools.product(FAM_E, repeat=3):
        b = dict(zip(lv.FAMILIES, combo))
        n_s, e = run_fam(scores, err, fam, b)
        r = lv.summarise(n_s, e, fam, env)
        if r["saving"] is None or max(r["mape"], *(r[f] for f in lv.FAMILIES)) > cap_pct:
            continue
        if r["saving"] > best[0]:
            best = (r["saving"], b)
    return best[1]


def family_budget_rows(S, scores, err, env, caps, variant, mb):
    """Per-family budgets, 2-fold cross-fitted inside validation as ``levers.py``'s
    per-length thresholds: chosen on one half (time order), scored on the other. On the
    held-out slice (``S.fixed_budgets``) the budgets chosen on all of validation are used."""
    rows = []
    half = np.arange(len(err)) < len(err) // 2
    for cap_pct in caps:
        if getattr(S, "fixed_budgets", None) is not None:
            b = S.fixed_budgets
            n_s, e = run_fam(scores, err, S.fam, b)
            rows.append(dict(lv.summarise(n_s, e, S.fam, env), thr=f"per-family, cap {cap_pct:g}",
                             budgets=b, variant=variant, est_mb=mb))
            continue
        n_s = np.empty(len(err), dtype=int)
        e = np.empty(len(err))
        for fit_m in (half, ~half):
            b = fit_fam_budgets(scores[fit_m], err[fit_m], S.fam[fit_m], env, cap_pct)
            n2, e2 = run_fam(scores[~fit_m], err[~fit_m], S.fam[~fit_m], b)
            n_s[~fit_m], e[~fit_m] = n2, e2
        rows.append(dict(lv.summarise(n_s, e, S.fam, env), thr=f"per-family, cap {cap_pct:g}",
                         budgets=fit_fam_budgets(scores, err, S.fam, env, cap_pct), variant=variant, est_mb=mb))
    return rows


FALLBACK = {"ratio": ("clf", 0.5, 0.5), "log": ("err10", -np.log(5.5), 5.0)}

VARIANTS = ("ratio:clf:none", "ratio:clf:hist", "log:clf:hist", "ratio:clf+stab:hist",
            "ratio:err10:hist", "log:err10:hist", "log:err8:none", "log:err8:hist", "ratio:err8:hist",
            "log:err10+stab:hist", "log:err8+stab:hist", "log:err:hist",
            "ratio:clf:hist:pathcca", "log:err10:hist:pathcca", "log:err8:hist:pathcca",
            "mem:ratio:5:all", "mem:log:5:all", "mem:log:5:20", "mem:log:5:10", "mem:log:5:all:pathcca",
            "mem:log:5:20:pathcca")


def score_variant(S, variant, env, fam_budgets=None):
    rows = []
    parts = variant.split(":")
    t0 = time.perf_counter()
    if parts[0] == "cal":
        target, gate, hist, w = parts[1:5]
        key = parts[5] if len(parts) > 5 else "path"
        kind, stab = gate.split("+")[0], gate.endswith("+stab")
        w = None if w == "all" else int(w)
        gates, scores_all = learned_oof(S, target, kind, stab, hist == "hist", key)
        mb = est_bytes(gates, kind) / 1e6
        for t_pct in (5.0, 6.0, 7.0, 8.0, 9.0):
            n_s, e, counts = calibrated_stop(S, kind, scores_all, target, key, w, 5, t_pct)
            rows.append(dict(lv.summarise(n_s, e, S.fam, env), thr=f"T {t_pct:g} %", variant=variant, est_mb=mb,
                             chosen=counts.tolist()))
    elif parts[0] == "mem":
        target, m, w = parts[1], int(parts[2]), None if parts[3] == "all" else int(parts[3])
        key = parts[4] if len(parts) > 4 else "path"
        fb_kind, fb_thr, _ = FALLBACK[target]
        gates, fb = learned(S, target, fb_kind, False, False, "path")
        mb = est_bytes(gates, fb_kind) / 1e6
        for p in (3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0):
            n_s, e = memory_stop(S, target, m, w, key, p, fb, fb_thr)
            rows.append(dict(lv.summarise(n_s, e, S.fam, env), thr=f"P {p:g} %", variant=variant, est_mb=mb))
    else:
        target, gate, hist = parts[:3]
        key = parts[3] if len(parts) > 3 else "path"
        kind, stab = gate.split("+")[0], gate.endswith("+stab")
        gates, scores = learned(S, target, kind, stab, hist == "hist", key)
        err = tf.pct_err(S.c[f"val_{target}"], S.y_va[:, None])
        mb = est_bytes(gates, kind) / 1e6
        for name, thr in thresholds(kind):
            n_s, e = lv.run(scores, err, thr, GATES)
            rows.append(dict(lv.summarise(n_s, e, S.fam, env), thr=name, variant=variant, est_mb=mb))
        if kind.startswith("err") and fam_budgets is not None:
            rows += family_budget_rows(S, scores, err, env, fam_budgets, variant, mb)
    print(f"{variant}: {time.perf_counter() - t0:.0f} s, est. {mb:.2f} MB", flush=True)
    for r in rows:
        sav = "n/a" if r["saving"] is None else f"{r['saving'] * 100:.1f} %"
        print(f"  {r['thr']}: MAPE {r['mape']:5.2f} at {r['probe_s']:.2f} s "
              f"(lan {r['lan']:.1f}, wan {r['wan']:.1f}, shared {r['shared']:.1f}); saving {sav}", flush=True)
    return rows


def diag(a):
    """How much of a prefix's error the path explains (validation): per gate length, the
    share of the variance of log(err % + 0.5) of the validation transfers explained by (1)
    the error-regression gate without history, (2) with history, (3) the earlier-only path
    median error alone (``he``), and (4) the path's own mean over the validation slice
    (in-sample: an upper bound for any per-path constant)."""
    c = np.load(a.cache)
    S = Setup(c, a.corpus)
    target = a.target
    err = tf.pct_err(S.c[f"val_{target}"], S.y_va[:, None])
    h = S.hist(target)
    _, s0 = learned(S, target, "err8", False, False, "path")
    _, s1 = learned(S, target, "err8", False, True, "path")
    keys = [path_key(d) for d in S.ev]
    ev_idx = np.arange(S.n_tr, S.n_tr + len(S.ev))
    r2 = lambda t, p: 1 - ((t - p) ** 2).mean() / t.var()  # noqa: E731
    print("n  R2 gate  R2 gate+hist  R2 he alone (affine)  R2 path mean (in-sample)")
    for n in GATES:
        t = np.log(err[:, n - 1] + 0.5)
        he = np.log(h["med_err"][ev_idx, n - 1] + 0.5)
        A = np.column_stack([he, np.ones_like(he)])
        coef = np.linalg.lstsq(A, t, rcond=None)[0]
        pm = np.array([t[[j for j, k2 in enumerate(keys) if k2 == k]].mean() for k in keys])
        print(f"{n:2d} {r2(t, -s0[:, n - 1]):8.3f} {r2(t, -s1[:, n - 1]):13.3f} {r2(t, A @ coef):21.3f} "
              f"{r2(t, pm):26.3f}")
    return 0


def search(a):
    c = np.load(a.cache)
    assert tuple(c["split"]) == (1800, 2400), c["split"]
    S = Setup(c, a.corpus)
    env = envelope([json.loads(l) for l in open(a.curve) if l.strip()])
    rows = []
    caps = [float(x) for x in a.family_caps.split(",")] if a.family_caps else None
    for v in a.variants.split(","):
        rows += score_variant(S, v, env, caps)
        json.dump(rows, open(a.out, "w"), indent=1, default=str)
    return 0


def heldout(a):
    """The picked (variant, threshold) refitted on 1-2400 and scored once on 2401-3000."""
    c = np.load(a.cache)
    assert tuple(c["split"]) == (2400, 3000), c["split"]
    S = Setup(c, a.corpus)
    S.fixed_budgets = json.loads(a.budgets) if a.budgets else None
    caps = [float(x) for x in a.family_caps.split(",")] if a.family_caps else None
    env = envelope([json.loads(l) for l in open(a.curve) if l.strip()])
    out = []
    for v in a.variant.split(","):
        rows = score_variant(S, v, env, caps)
        out += [r for r in rows if r["thr"] in a.thr.split(";")]
    for r in out:
        print(json.dumps(r))
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1, default=str)
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("paths")
    p.add_argument("--corpus", required=True)
    s = sub.add_parser("cache")
    s.add_argument("--corpus", required=True)
    s.add_argument("--split", required=True, help="TRAIN_END,END: fit on 1..TRAIN_END, predict TRAIN_END+1..END")
    s.add_argument("--targets", default="ratio,log")
    s.add_argument("--out", required=True)
    q = sub.add_parser("search")
    q.add_argument("--cache", required=True)
    q.add_argument("--corpus", required=True)
    q.add_argument("--curve", required=True)
    q.add_argument("--out", required=True)
    q.add_argument("--variants", default=",".join(VARIANTS))
    q.add_argument("--family-caps", default="", help="comma-separated MAPE caps %% for per-family budgets "
                                                    "(error gates; e.g. 8,9)")
    d = sub.add_parser("diag")
    d.add_argument("--cache", required=True)
    d.add_argument("--corpus", required=True)
    d.add_argument("--target", default="log")
    h = sub.add_parser("heldout")
    h.add_argument("--cache", required=True)
    h.add_argument("--corpus", required=True)
    h.add_argument("--curve", required=True)
    h.add_argument("--variant", required=True, help="comma-separated: the pick and the references")
    h.add_argument("--thr", required=True, help="threshold labels separated by ;, e.g. 'E 5 %%;0.5'")
    h.add_argument("--budgets", help='per-family budgets chosen on validation, JSON: {"lan": 10, ...}')
    h.add_argument("--family-caps", default="", help="the cap label of the per-family row (e.g. 10)")
    h.add_argument("--json")
    a = ap.parse_args()
    return {"paths": paths, "cache": cache, "search": search, "diag": diag, "heldout": heldout}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
