"""FastProb training (document 004 §IV-§V): per-length random-forest classifier and
regressor pairs, exported to the ``"kind": "fastprob"`` model file that
``opsel::fastprob::FastProbModel`` loads.

Pipeline (each step cites the document):

- logs: JSON lines, one transfer per line with ``samples_bps`` (one per
  ``interval_ns``), ``seq`` (recording order) and ``t_avg_bps`` (004 §III); written by
  ``opsel lab tput-logs`` or by :func:`synthetic_logs` (a seeded generator for
  development when no recording exists);
- time-ordered 80/20 split (004 §IV), expanding-window CV: 6 time-ordered groups,
  5 rounds (train g1..gk → test g(k+1));
- a small grid over RF trees and depth scored by the CV MAPE of the whole FastProb
  loop (the paper uses GP Bayesian optimisation; a grid keeps this dependency-free);
- pair training (004 §IV Fig. 6a): Subset1 (70 %) → regressor R_n; its per-transfer
  error on Subset2 (30 %) labels "predictable" (err < P = 5 %) → classifier C_n;
- stage inputs (``--features``): ``raw`` samples as 004, or our scale-free extension
  ``ratio`` / ``ratio+stats`` (see :func:`prefix_features`); ``--gate-every k`` puts a
  gate only at every k-th length (model format version 2);
- our extensions of version 3 (docs/results/fastprob.md, "Shorter probes"):
  ``--target log`` (the regressor predicts log(t_avg / s), exp at inference) and
  ``--gate error`` (with out-of-fold labels: the gate is a regressor of
  log(err % + 0.5) on the out-of-fold error, and the probe stops at the first gate
  whose predicted error is below ``--stop-error-pct`` E, i.e. predicted log error
  < log(E + 0.5));
- our extensions of version 4 (docs/results/fastprob.md, "A deployable gate: one budget,
  format version 4"): ``--gate-layout pooled`` (one error-regression forest for every
  gate length, fitted on the rows of all of them, with n among its inputs; see
  :func:`pooled_base`), ``--gate-inputs abs,sd`` (extra gate inputs: the log of the
  prefix mean in bit/s, and the spread of the stage regressor's trees, out-of-fold on
  the gate's training rows), the gate forest's own ``--gate-depth``,
  ``--gate-min-samples-leaf``, ``--gate-max-features``, and optional per-family budgets
  (``--family-budgets``) beside the one default budget ``--stop-error-pct``;
- a family the probe infers itself (docs/results/fastprob.md, "A family the probe infers
  itself"; format version 4): ``--family-classifier T,D`` fits a random-forest classifier
  (T trees, depth D, min 3 per leaf, seed + 2000) of the transfer's recorded family on the
  pooled gate's base inputs and ``abs`` (:func:`family_x`) at every gated length; the
  probe's budget at each gate then follows the predicted family (``--family-mode soft``:
  sum of P(family) x its ``--family-budgets`` budget; ``hard``: the most probable
  family's) unless the caller sets a budget or a family (the expanding-window CV report and
  the incremental replay run without the classifier);
- incremental retraining (004 §V): batches of 30, retrain on all history when a
  batch's MAPE exceeds 20 %.

Run as a script (needs numpy and scikit-learn only)::

    python bindings/python/python/opsel/train_fastprob.py train --logs data/tput-logs -o model.json
    python bindings/python/python/opsel/train_fastprob.py synth --n 600 --seed 1 -o logs.jsonl

or ``python -m opsel.train_fastprob …`` where the ``opsel`` package is installed.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import sys
import time

import numpy as np

FORMAT = "opsel-model"
# Version 2 adds the spec fields ``features`` and ``gate_every``; version 3 adds
# ``target``, ``gate`` and ``stop_error_pct``. A model that uses none of the
# version-3 fields is written as version 2 (without them), so files of the older
# configurations are unchanged; the Rust core loads versions 1-3.
VERSION = 2
VERSION_3 = 3
VERSION_4 = 4
V3_DEFAULTS = {"target": "linear", "gate": "classifier", "stop_error_pct": 5.0}
# Version 4: where the gates live, extra gate inputs, the floor of the ``abs`` input.
V4_DEFAULTS = {"gate_layout": "per_length", "gate_inputs": [], "abs_floor_bps": 1e3}
GATE_INPUTS = ("abs", "sd")
# The pooled gate's base inputs: n, 4 prefix statistics, the last 10 ratios, cv of the last 10.
POOL_LAST = 10
POOLED_BASE_INPUTS = 1 + 4 + POOL_LAST + 1
# The tree ensembles inside a stage keep the tree format's own version.
TREES_VERSION = 1
KIND = "fastprob"
FEATURES = ("raw", "ratio", "ratio+stats")

DEFAULT_SPEC = {
    "interval_ns": 1_000_000_000,
    "cap": 15,
    "first_gate_n": 1,
    "last_gate_n": 14,
    "stop_threshold": 0.5,
    "label_error_pct": 5.0,
    "features": "raw",
    "gate_every": 1,
    "ratio_floor_bps": 1e6,
    **V3_DEFAULTS,
    **V4_DEFAULTS,
}
# A log target is fitted on log(max(t_avg / s, LOG_FLOOR)): a transfer that moved
# nothing would otherwise give log(0).
LOG_FLOOR = 1e-6
# The error gate's target is log(err % + ERR_OFFSET): finite at zero error.
ERR_OFFSET = 0.5


def prefix_features(raw, kind, floor_bps=1e6):
    """The inputs a stage's forests see for prefixes ``raw`` (rows of n samples, bit/s)
    and the multiplier ``s`` that turns the regressor's output back into bit/s.

    - ``"raw"`` (004 §IV): the n samples, standard-scaled per column by the stage's
      scaler; ``s = 1``, the regressor predicts t_avg in bit/s.
    - ``"ratio"`` (our extension): every sample divided by ``s``, the prefix maximum
      but at least ``floor_bps`` (a prefix that has hardly started, e.g. during a
      connection-setup delay, would otherwise give huge ratios); the regressor
      predicts ``t_avg / s``. Trees
      cannot extrapolate beyond the rates they were trained on; the ratio makes the
      target scale-free, so a 10 Mbit/s and a 500 Mbit/s path share leaves.
    - ``"ratio+stats"`` (our extension): the ratio samples followed by four prefix
      statistics, each divided by ``s`` where it is a rate: the mean, the mean of the
      last min(4, n) samples, the change over the last min(4, n - 1) intervals
      (0 at n = 1), and the number of samples since the first non-zero one.

    Sums run left to right (``cumsum`` and explicit adds), the order the Rust core
    uses, so both compute bit-identical features."""
    raw = np.asarray(raw, dtype=np.float64)
    if raw.ndim == 1:
        raw = raw[None, :]
    m, n = raw.shape
    if kind == "raw":
        return raw, np.ones(m)
    if kind not in FEATURES:
        raise ValueError(f"features {kind!r}: expected one of {FEATURES}")
    s = np.maximum(raw.max(axis=1), floor_bps)
    ratio = raw / s[:, None]
    if kind == "ratio":
        return ratio, s
    mean = np.cumsum(raw, axis=1)[:, -1] / n / s
    k = min(4, n)
    acc = raw[:, n - k].copy()
    for j in range(n - k + 1, n):
        acc = acc + raw[:, j]
    last = acc / k / s
    k2 = min(4, n - 1)
    slope = (raw[:, n - 1] - raw[:, n - 1 - k2]) / s if k2 > 0 else np.zeros(m)
    nz = raw > 0.0
    first = np.where(nz.any(axis=1), nz.argmax(axis=1), n)
    since = (n - first).astype(np.float64)
    return np.column_stack([ratio, mean, last, slope, since]), s


def n_features(n, kind):
    return n + 4 if kind == "ratio+stats" else n


def _seq_sum(a):
    """Row sums of ``a`` left to right (the Rust core's order), not numpy's pairwise sum."""
    acc = np.zeros(a.shape[0])
    for j in range(a.shape[1]):
        acc = acc + a[:, j]
    return acc


def cv_last(raw):
    """Coefficient of variation (population sd / mean) of the last min(10, n) samples, 0
    where their mean is not positive; summed left to right as the Rust core."""
    raw = np.asarray(raw, dtype=np.float64)
    k = min(POOL_LAST, raw.shape[1])
    w = raw[:, raw.shape[1] - k:]
    m = _seq_sum(w) / k
    d = w - m[:, None]
    var = _seq_sum(d * d) / k
    return np.where(m > 0, np.sqrt(var) / np.where(m > 0, m, 1.0), 0.0)


def abs_input(raw, floor_bps=1e3):
    """The ``abs`` gate input: log of the prefix mean in bit/s, floored (a prefix still in
    its setup delay has a mean of 0)."""
    raw = np.asarray(raw, dtype=np.float64)
    return np.log(np.maximum(_seq_sum(raw) / raw.shape[1], floor_bps))


def pooled_base(raw, floor_bps=1e6):
    """The pooled gate's base inputs for prefixes ``raw`` of length n (the research
    harness's ``scale.pooled_inputs``): n, the four prefix statistics of ``ratio+stats``,
    the last 10 ratios (zero-padded in front) and the coefficient of variation of the
    last 10 samples."""
    raw = np.asarray(raw, dtype=np.float64)
    m, n = raw.shape
    F, s = prefix_features(raw, "ratio+stats", floor_bps)
    last = np.zeros((m, POOL_LAST))
    k = min(POOL_LAST, n)
    last[:, POOL_LAST - k:] = raw[:, n - k:] / s[:, None]
    return np.column_stack([np.full((m, 1), float(n)), F[:, -4:], last, cv_last(raw)[:, None]])


FAMILY_MODES = ("soft", "hard")


def family_x(spec, raw):
    """The family classifier's inputs: the pooled base, then ``abs``."""
    return np.column_stack([pooled_base(raw, spec["ratio_floor_bps"]),
                            abs_input(raw, spec.get("abs_floor_bps", 1e3))[:, None]])


def fit_family_classifier(logs, spec, trees, depth, seed=0, mode="soft"):
    """A random forest of the recorded family (``logs[i]["family"]``) on :func:`family_x`
    at every gated length, rows in increasing n (``inferred_family.py``'s classifier)."""
    from sklearn.ensemble import RandomForestClassifier

    if mode not in FAMILY_MODES:
        raise ValueError(f"family mode {mode!r}: expected one of {FAMILY_MODES}")
    spec = dict(DEFAULT_SPEC, **spec)
    gated = [n for n in range(1, spec["cap"] + 1) if _gated(spec, n)]
    fam = np.array([str(d.get("family", "")) for d in logs])
    if (fam == "").any():
        raise ValueError("a family classifier needs a \"family\" on every training transfer")
    G = np.vstack([family_x(spec, xy(logs, n)[0]) for n in gated])
    y = np.concatenate([fam] * len(gated))
    clf = RandomForestClassifier(random_state=seed + 2000, n_jobs=1, n_estimators=trees, max_depth=depth,
                                 min_samples_leaf=3).fit(G, y)
    return {"forest": clf, "mode": mode, "classes": [str(c) for c in clf.classes_]}


def budget_below(model, raw):
    """Per prefix in ``raw``, log(E + 0.5) for the budget E the family classifier gives it
    (soft: P(family) x budget summed left to right in class order, as the Rust core), or
    None without a classifier."""
    fc = model.get("family_classifier")
    if fc is None:
        return None
    P = fc["forest"].predict_proba(family_x(model["spec"], raw))
    B = [float(model["family_budgets"][c]) for c in fc["classes"]]
    if fc["mode"] == "soft":
        e = np.zeros(len(P))
        for j, b in enumerate(B):
            e = e + P[:, j] * b
    else:
        e = np.array(B)[np.argmax(P, axis=1)]
    return np.log(e + ERR_OFFSET)


def tree_spread(reg, F):
    """A random forest's output and the population sd of its trees' outputs on rows
    ``F``, both summed in tree order (as ``RandomForestRegressor.predict`` and the Rust
    core's ``Ensemble::predict_mean_sd``)."""
    outs = [t.predict(F) for t in reg.estimators_]
    acc = np.zeros(len(F))
    for o in outs:
        acc = acc + o
    mean = acc / len(outs)
    acc2 = np.zeros(len(F))
    for o in outs:
        d = o - mean
        acc2 = acc2 + d * d
    return mean, np.sqrt(acc2 / len(outs))


def gate_x(spec, raw, F, sd):
    """A gate's inputs: the stage inputs ``F`` (per-length layout) or the pooled base,
    then the ``gate_inputs`` (``abs``, then ``sd``, the stage regressor's tree spread)."""
    cols = [pooled_base(raw, spec["ratio_floor_bps"]) if spec.get("gate_layout") == "pooled" else F]
    extra = spec.get("gate_inputs") or []
    if "abs" in extra:
        cols.append(abs_input(raw, spec.get("abs_floor_bps", 1e3))[:, None])
    if "sd" in extra:
        cols.append(np.asarray(sd)[:, None])
    return np.column_stack(cols)


# ---------------------------------------------------------------- logs


def synthetic_logs(n: int, seed: int, interval_ns: int = 1_000_000_000, min_len: int = 60):
    """Seeded synthetic transfers in three condition families (004 §III causes of slow
    convergence): ``lan`` (fast ramp, little noise), ``wan`` (slow high-BDP ramp and
    connection-setup delay), ``shared`` (background on/off, noise and 1-2-sample
    application stalls). Development data only: not a measurement."""
    rng = np.random.default_rng(seed)
    logs = []
    for i in range(n):
        fam = ("lan", "wan", "shared")[i % 3]
        m = int(rng.integers(min_len, min_len + 30))
        cap = float(rng.uniform(0.2e9, 10e9))
        k = np.arange(1, m + 1, dtype=np.float64)
        if fam == "lan":
            tau, noise, setup = rng.uniform(0.3, 1.5), 0.02, 0
        elif fam == "wan":
            tau, noise, setup = rng.uniform(2.0, 12.0), 0.05, int(rng.integers(0, 4))
        else:
            tau, noise, setup = rng.uniform(1.0, 5.0), 0.10, int(rng.integers(0, 2))
        ramp = 1.0 - np.exp(-np.maximum(k - setup, 0.0) / tau)
        x = cap * ramp * (1.0 + noise * rng.standard_normal(m))
        if fam == "shared":
            period = int(rng.integers(10, 30))
            on = ((k.astype(int) // period) % 2 == 1)
            x = np.where(on, x * rng.uniform(0.5, 0.8), x)
            k_stall = 0
            while k_stall < m:
                k_stall += int(rng.geometric(0.06))
                width = int(rng.integers(1, 3))
                x[k_stall:k_stall + width] *= 0.05
                k_stall += width
        x = np.maximum(x, 0.0)
        logs.append({
            "id": f"synth-{seed}-{i}", "seq": i, "family": fam, "source": "synthetic",
            "interval_ns": interval_ns, "samples_bps": [float(v) for v in x],
            "t_avg_bps": float(x.mean()),
        })
    return logs


def _plan_lines(folder: str):
    """The lines of a recorded plan's folder (``opsel lab tput-logs``): its gzip
    segments of 1000 transfers in order, then the plain tail."""
    for seg in sorted(glob.glob(os.path.join(folder, "transfers-*.jsonl.gz"))):
        with gzip.open(seg, "rt") as fh:
            yield from fh
    tail = os.path.join(folder, "transfers.jsonl")
    if os.path.exists(tail):
        with open(tail) as fh:
            yield from fh


def log_lines(path: str):
    """Every line of a JSON-lines file (plain or ``.gz``), a recorded plan's
    folder (one with a ``manifest.json``), or a folder holding either."""
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "manifest.json")):
            yield from _plan_lines(path)
            return
        for root, dirs, files in os.walk(path):
            dirs.sort()
            if "manifest.json" in files:
                dirs[:] = []
                yield from _plan_lines(root)
                continue
            for f in sorted(files):
                if f.endswith(".jsonl") or f.endswith(".jsonl.gz"):
                    yield from log_lines(os.path.join(root, f))
    elif path.endswith(".gz"):
        with gzip.open(path, "rt") as fh:
            yield from fh
    else:
        with open(path) as fh:
            yield from fh


def load_logs(path: str, min_len: int = 60):
    """Transfers from a JSON-lines file (plain or ``.gz``), a recorded plan's
    folder, or a folder holding either, in recording order (``seq``, then file
    order). Transfers shorter than ``min_len`` samples are skipped (004 §III:
    the label needs >= 60 s)."""
    logs = []
    for line in log_lines(path):
        if not line.strip():
            continue
        d = json.loads(line)
        s = d.get("samples_bps")
        if not isinstance(s, list) or len(s) < min_len:
            continue
        d["t_avg_bps"] = float(np.mean(s))
        logs.append(d)
    logs.sort(key=lambda d: d.get("seq", 0))
    return logs


def xy(logs, n):
    X = np.array([d["samples_bps"][:n] for d in logs], dtype=np.float64)
    y = np.array([d["t_avg_bps"] for d in logs], dtype=np.float64)
    return X, y


def pct_err(pred, y):
    return np.abs(pred - y) / y * 100.0


# ---------------------------------------------------------------- training


class Stage:
    """The fitted models of one probe length n (scikit-learn objects). ``mean`` and
    ``scale`` are the standard scaler of the ``"raw"`` features (``None`` otherwise)."""

    def __init__(self, n, mean, scale, gate, regressor, features="raw", floor_bps=1e6, target="linear"):
        self.n, self.mean, self.scale, self.gate, self.regressor = n, mean, scale, gate, regressor
        self.features, self.floor_bps, self.target = features, floor_bps, target

    def xs(self, raw):
        """(features, multiplier) for prefixes ``raw``."""
        f, s = prefix_features(raw, self.features, self.floor_bps)
        if self.mean is not None:
            f = (f - self.mean) / self.scale
        return f, s

    def x(self, raw):
        return self.xs(raw)[0]

    def predict(self, raw):
        """Predicted t_avg (bit/s) for prefixes ``raw``."""
        f, s = self.xs(raw)
        return self.back(self.regressor.predict(f), s)

    def back(self, r, s):
        """The regressor's output r as bit/s: r * s, or exp(r) * s for a log target."""
        return (np.exp(r) if self.target == "log" else r) * s

    def gate_out(self, model, raw):
        """The gate's output on prefixes ``raw`` (None where the stage has no gate and
        the model no pooled gate): built from the stage inputs, the pooled base and the
        ``gate_inputs`` as the model's spec says."""
        spec = model["spec"]
        pooled = model.get("pooled_gate")
        if pooled is None and self.gate is None:
            return None
        F = self.x(raw)
        sd = tree_spread(self.regressor, F)[1] if "sd" in (spec.get("gate_inputs") or []) else None
        G = gate_x(spec, raw, F, sd)
        if pooled is not None:
            return pooled.predict(G)
        return self.p(G)

    def p(self, xs):
        """The gate's output: P(predictable) for a classifier gate, the predicted
        log(err % + 0.5) for an error gate."""
        if self.gate is None:
            return None
        if isinstance(self.gate, str):
            return np.full(len(xs), 1.0 if self.gate == "always" else 0.0)
        if hasattr(self.gate, "predict_proba"):
            return self.gate.predict_proba(xs)[:, -1]
        return self.gate.predict(xs)


def fires(spec, p, thr=None, below=None):
    """Which gate outputs ``p`` stop the probe: P(predictable) > the stop threshold,
    or, for an error gate, predicted log(err % + 0.5) < log(E + 0.5) (``below`` per
    row when a family classifier sets E)."""
    if spec.get("gate", "classifier") == "error":
        return p < (math.log(spec["stop_error_pct"] + ERR_OFFSET) if below is None else below)
    return p > (spec["stop_threshold"] if thr is None else thr)


def train_pairs(logs, spec=None, params=None, seed=0, split="time", refit_regressor=False, extra_n=(),
                labels="holdout", folds=5, gate_trees=None, gate_params=None):
    """Fit the per-length pairs (004 §IV Fig. 6a). ``split``: ``"time"`` (first 70 %
    of the time-ordered logs → Subset1) or ``"random"``; 004 does not say which.
    ``refit_regressor`` refits R_n on all logs after labelling (also unspecified).

    ``labels="oof"`` (our extension; the model file is the same): instead of the
    70/30 split, cut the time-ordered logs into ``folds`` contiguous blocks, label
    each block with a regressor fitted on the other blocks (out-of-fold), then fit
    R_n and the gate C_n on all logs. The gate sees every transfer instead of 30 %
    and R_n is trained on all of them; the labels stay honest (never the regressor's
    own training rows)."""
    full = dict(DEFAULT_SPEC, **(spec or {}))
    if full["target"] not in ("linear", "log"):
        raise ValueError(f"target {full['target']!r}: expected 'linear' or 'log'")
    if full["gate"] not in ("classifier", "error"):
        raise ValueError(f"gate {full['gate']!r}: expected 'classifier' or 'error'")
    if full["gate_layout"] not in ("per_length", "pooled"):
        raise ValueError(f"gate_layout {full['gate_layout']!r}: expected 'per_length' or 'pooled'")
    gi = list(full["gate_inputs"] or [])
    if any(g not in GATE_INPUTS for g in gi) or gi != [g for g in GATE_INPUTS if g in gi]:
        raise ValueError(f"gate_inputs {gi}: expected a subset of {list(GATE_INPUTS)} in that order")
    if full["gate_layout"] == "pooled" and full["gate"] != "error":
        raise ValueError("gate_layout 'pooled' needs gate 'error'")
    if "sd" in gi and full["target"] != "log":
        raise ValueError("gate input 'sd' needs target 'log'")
    if labels == "oof":
        return _train_pairs_oof(logs, spec, params, seed, extra_n, folds, gate_trees, gate_params)
    if labels != "holdout":
        raise ValueError(f"labels {labels!r}: expected 'holdout' or 'oof'")
    if full["target"] != "linear" or full["gate"] != "classifier" or gate_trees or gate_params:
        raise ValueError("target 'log', gate 'error', gate_trees and gate_params are implemented for "
                         "labels='oof' only")
    if any(full[k] != d for k, d in V4_DEFAULTS.items()):
        raise ValueError("gate_layout, gate_inputs and abs_floor_bps (format version 4) are implemented for "
                         "labels='oof' only")
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.preprocessing import StandardScaler

    spec = dict(DEFAULT_SPEC, **(spec or {}))
    params = dict({"n_estimators": 30, "max_depth": 8}, **(params or {}))
    if len(logs) < 10:
        raise ValueError(f"{len(logs)} logs: FastProb training needs at least 10")
    idx = np.arange(len(logs))
    if split == "random":
        idx = np.random.default_rng(seed).permutation(idx)
    elif split != "time":
        raise ValueError(f"split {split!r}: expected 'time' or 'random'")
    cut = int(round(0.7 * len(logs)))
    s1 = [logs[i] for i in idx[:cut]]
    s2 = [logs[i] for i in idx[cut:]]
    kind = spec["features"]
    gated = range(spec["first_gate_n"], spec["last_gate_n"] + 1, spec["gate_every"])
    lengths = sorted(set(gated) | {spec["cap"]} | set(extra_n))
    stages = {}
    for n in lengths:
        X1, y1 = xy(s1, n)
        if kind == "raw":
            sc = StandardScaler().fit(X1)
            # A constant column (e.g. all-zero setup samples) scales by 1, as scikit-learn does.
            mean, scale = sc.mean_.astype(np.float64), sc.scale_.astype(np.float64)
        else:
            # Trees need no scaling; the ratio features are already scale-free.
            mean = scale = None
        st = Stage(n, mean, scale, None, None, kind, spec["ratio_floor_bps"])
        F1, m1 = st.xs(X1)
        reg = RandomForestRegressor(random_state=seed + n, n_jobs=1, **params)
        reg.fit(F1, y1 / m1)
        st.regressor = reg
        if n in gated:
            X2, y2 = xy(s2, n)
            lab = (pct_err(st.predict(X2), y2) < spec["label_error_pct"]).astype(int)
            if lab.min() == lab.max():
                st.gate = "always" if lab[0] == 1 else "never"
            else:
                st.gate = RandomForestClassifier(random_state=seed + 1000 + n, n_jobs=1, **params)
                st.gate.fit(st.x(X2), lab)
        if refit_regressor:
            Xa, ya = xy(s1 + s2, n)
            Fa, ma = st.xs(Xa)
            st.regressor = RandomForestRegressor(random_state=seed + n, n_jobs=1, **params).fit(Fa, ya / ma)
        stages[n] = st
    return {"spec": spec, "stages": stages, "params": params}


def _train_pairs_oof(logs, spec, params, seed, extra_n, folds, gate_trees=None, gate_params=None):
    """``train_pairs(labels="oof")``: out-of-fold labels, then R_n and C_n on all logs.
    With ``spec["target"] == "log"`` the regressors fit log(t_avg / s); with
    ``spec["gate"] == "error"`` the gate is a regressor of log(err % + 0.5) on the
    out-of-fold error (``gate_trees`` trees, default the regressors' count;
    ``gate_params`` overrides the gate forest's depth, min samples per leaf or
    max_features). Version 4: ``spec["gate_inputs"]`` appends ``abs`` and ``sd`` (the
    out-of-fold regressor's tree spread on the row) to the gate's inputs, and
    ``spec["gate_layout"] == "pooled"`` fits one gate forest (random_state seed + 1000)
    on the rows of every gated length, in increasing n."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    spec = dict(DEFAULT_SPEC, **(spec or {}))
    params = dict({"n_estimators": 30, "max_depth": 8}, **(params or {}))
    gparams = dict(params, n_estimators=gate_trees) if gate_trees else dict(params)
    gparams.update(gate_params or {})
    kind = spec["features"]
    log_t = spec["target"] == "log"
    pooled = spec["gate_layout"] == "pooled"
    want_sd = "sd" in (spec["gate_inputs"] or [])
    if kind == "raw":
        raise ValueError("labels='oof' is implemented for the scale-free features only")
    if len(logs) < 2 * folds:
        raise ValueError(f"{len(logs)} logs: out-of-fold labels need at least {2 * folds}")
    blocks = np.array_split(np.arange(len(logs)), folds)
    gated = range(spec["first_gate_n"], spec["last_gate_n"] + 1, spec["gate_every"])
    lengths = sorted(set(gated) | {spec["cap"]} | set(extra_n))
    stages = {}
    pool_x, pool_t = [], []
    for n in lengths:
        X, y = xy(logs, n)
        st = Stage(n, None, None, None, None, kind, spec["ratio_floor_bps"], spec["target"])
        F, m = st.xs(X)
        t = np.log(np.maximum(y / m, LOG_FLOOR)) if log_t else y / m
        if n in gated:
            pred = np.empty(len(logs))
            sd = np.empty(len(logs))
            for b in blocks:
                rest = np.setdiff1d(np.arange(len(logs)), b)
                r = RandomForestRegressor(random_state=seed + n, n_jobs=1, **params).fit(F[rest], t[rest])
                pred[b] = st.back(r.predict(F[b]), m[b])
                if want_sd:
                    sd[b] = tree_spread(r, F[b])[1]
            err = pct_err(pred, y)
            G = gate_x(spec, X, F, sd if want_sd else None)
            if pooled:
                pool_x.append(G)
                pool_t.append(np.log(err + ERR_OFFSET))
            elif spec["gate"] == "error":
                st.gate = RandomForestRegressor(random_state=seed + 1000 + n, n_jobs=1, **gparams).fit(
                    G, np.log(err + ERR_OFFSET))
            else:
                lab = (err < spec["label_error_pct"]).astype(int)
                if lab.min() == lab.max():
                    st.gate = "always" if lab[0] == 1 else "never"
                else:
                    st.gate = RandomForestClassifier(random_state=seed + 1000 + n, n_jobs=1, **gparams).fit(G, lab)
        st.regressor = RandomForestRegressor(random_state=seed + n, n_jobs=1, **params).fit(F, t)
        stages[n] = st
    model = {"spec": spec, "stages": stages, "params": params}
    if gate_trees or gate_params:
        model["gate_params"] = gparams
    if pooled:
        model["pooled_gate"] = RandomForestRegressor(random_state=seed + 1000, n_jobs=1, **gparams).fit(
            np.vstack(pool_x), np.concatenate(pool_t))
    return model


def run_loop(model, logs, threshold=None):
    """The online loop of 004 §IV Fig. 6b with the scikit-learn objects (reference
    for the Rust prober), vectorised over logs: at each n every still-running probe
    asks the gate at once. Returns per log (samples, prediction, forced, p)."""
    spec = model["spec"]
    thr = spec["stop_threshold"] if threshold is None else threshold
    out = [None] * len(logs)
    active = list(range(len(logs)))
    for n in range(1, spec["cap"] + 1):
        st = model["stages"].get(n)
        if st is None or not active:
            continue
        raw = np.array([logs[i]["samples_bps"][:n] for i in active], dtype=np.float64)
        p = st.gate_out(model, raw) if _gated(spec, n) else None
        below = budget_below(model, raw) if p is not None else None
        fire = np.zeros(len(active), dtype=bool) if p is None else fires(spec, p, thr, below)
        done = fire | (n == spec["cap"])
        if done.any():
            pred = st.predict(raw[done])
            for j, i in enumerate(np.flatnonzero(done)):
                out[active[i]] = (n, float(pred[j]), not bool(fire[i]), None if p is None else float(p[i]))
        active = [a for a, d in zip(active, done) if not d]
    return out


def _gated(spec, n):
    return spec["first_gate_n"] <= n <= spec["last_gate_n"] and (n - spec["first_gate_n"]) % spec["gate_every"] == 0


def score(model, logs, interval_ns=None):
    r = run_loop(model, logs)
    pred = np.array([x[1] for x in r])
    y = np.array([d["t_avg_bps"] for d in logs])
    e = pct_err(pred, y)
    iv = (interval_ns or model["spec"]["interval_ns"]) * 1e-9
    return {
        "transfers": len(logs),
        "mape_pct": float(e.mean()),
        "median_error_pct": float(np.median(e)),
        "mean_probe_s": float(np.mean([x[0] for x in r]) * iv),
        "over_50_pct": float((e > 50).mean() * 100),
        "forced_pct": float(np.mean([x[2] for x in r]) * 100),
    }


def fixed_n_mape(model, logs, n):
    st = model["stages"][n]
    X, y = xy(logs, n)
    return float(pct_err(st.predict(X), y).mean())


def expanding_cv(logs, spec=None, params=None, groups=6, seed=0, labels="holdout", gate_trees=None,
                 gate_params=None):
    """004 §IV: 6 time-ordered groups, 5 rounds: train g1..gk, test g(k+1)."""
    parts = np.array_split(np.arange(len(logs)), groups)
    rounds = []
    for k in range(1, groups):
        tr = [logs[i] for p in parts[:k] for i in p]
        te = [logs[i] for i in parts[k]]
        m = train_pairs(tr, spec, params, seed, labels=labels, gate_trees=gate_trees, gate_params=gate_params)
        rounds.append(score(m, te))
    return {
        "rounds": rounds,
        "mape_pct": float(np.mean([r["mape_pct"] for r in rounds])),
        "mean_probe_s": float(np.mean([r["mean_probe_s"] for r in rounds])),
    }


def search(logs, spec=None, grid=None, seed=0):
    """Small grid over RF trees and depth, scored by the expanding-window CV MAPE."""
    grid = grid or [{"n_estimators": t, "max_depth": d} for t in (20, 50) for d in (6, 12)]
    rows = []
    for p in grid:
        cv = expanding_cv(logs, spec, p, seed=seed)
        rows.append({"params": p, "cv_mape_pct": cv["mape_pct"], "cv_probe_s": cv["mean_probe_s"]})
    best = min(rows, key=lambda r: r["cv_mape_pct"])
    return best["params"], rows


def incremental(logs, initial=500, batch=30, threshold_pct=20.0, spec=None, params=None, seed=0,
                labels="holdout", gate_trees=None, gate_params=None):
    """004 §V: train on the first ``initial`` logs, then evaluate batches of ``batch``
    and retrain on all history when a batch's MAPE exceeds ``threshold_pct``. Every
    (re)training uses the same gate labels and gate forest as the model trained."""
    if len(logs) < initial + batch:
        raise ValueError(f"{len(logs)} logs: incremental training needs initial ({initial}) + one batch ({batch})")

    def fit(history):
        return train_pairs(history, spec, params, seed, labels=labels, gate_trees=gate_trees,
                           gate_params=gate_params)

    model = fit(logs[:initial])
    errs, probes, retrains, batches = [], [], 0, 0
    for b0 in range(initial, len(logs) - batch + 1, batch):
        chunk = logs[b0:b0 + batch]
        r = run_loop(model, chunk)
        e = pct_err(np.array([x[1] for x in r]), np.array([d["t_avg_bps"] for d in chunk]))
        errs += list(e)
        probes += [x[0] for x in r]
        batches += 1
        if e.mean() > threshold_pct:
            retrains += 1
            model = fit(logs[:b0 + batch])
    iv = model["spec"]["interval_ns"] * 1e-9
    return {"batches": batches, "retrains": retrains, "mape_pct": float(np.mean(errs)),
            "mean_probe_s": float(np.mean(probes) * iv)}


# ---------------------------------------------------------------- export


def tree_dict(t, n_outputs, normalise):
    """One scikit-learn tree as an opsel tree (same rule as ``opsel.train.bwe``)."""
    tr = t.tree_
    value = tr.value[:, 0, :] if tr.value.ndim == 3 else tr.value
    value = np.array(value, dtype=np.float64)
    if normalise:
        s = value.sum(axis=1, keepdims=True)
        s[s == 0] = 1.0
        value = value / s
    value = value[:, :n_outputs]
    return {
        "feature": [int(f) if f >= 0 else -1 for f in tr.feature],
        "threshold": [float(v) for v in tr.threshold],
        "left": [int(c) for c in tr.children_left],
        "right": [int(c) for c in tr.children_right],
        "value": [float(v) for v in value.reshape(-1)],
    }


def ensemble_dict(est, n):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    d = {"format": FORMAT, "version": TREES_VERSION, "n_features": int(n)}
    if isinstance(est, RandomForestRegressor):
        d.update(kind="rf-regressor", n_outputs=1, trees=[tree_dict(t, 1, False) for t in est.estimators_])
    elif isinstance(est, RandomForestClassifier) and all(isinstance(c, str) for c in est.classes_):
        # The family classifier: one output per class, in est.classes_ order.
        k = len(est.classes_)
        d.update(kind="rf-classifier", n_outputs=k, trees=[tree_dict(t, k, True) for t in est.estimators_])
    elif isinstance(est, RandomForestClassifier):
        if list(est.classes_) != [0, 1]:
            raise ValueError(f"gate classes {list(est.classes_)}: expected [0, 1]")
        d.update(kind="rf-classifier", n_outputs=2, trees=[tree_dict(t, 2, True) for t in est.estimators_])
    else:
        raise TypeError(f"cannot export {type(est).__name__}")
    return d


def export(model, training=None):
    """The ``"kind": "fastprob"`` model-file dict."""
    stages = []
    for n in sorted(model["stages"]):
        st = model["stages"][n]
        nf = n_features(n, st.features)
        s = {"n": n, "regressor": ensemble_dict(st.regressor, nf)}
        if st.mean is not None:
            s["scaler"] = {"mean": [float(v) for v in st.mean], "scale": [float(v) for v in st.scale]}
        if st.gate is not None:
            ng = nf + len(model["spec"].get("gate_inputs") or [])
            s["gate"] = st.gate if isinstance(st.gate, str) else ensemble_dict(st.gate, ng)
        stages.append(s)
    spec = dict(model["spec"])
    spec["gate_inputs"] = list(spec.get("gate_inputs") or [])
    extra = len(spec["gate_inputs"])
    fam = model.get("family_budgets")
    fc = model.get("family_classifier")
    v4 = any(spec.get(k, d) != d for k, d in V4_DEFAULTS.items()) or bool(fam) or fc is not None
    v3 = v4 or any(spec.get(k, d) != d for k, d in V3_DEFAULTS.items())
    if not v4:
        # Nothing of version 4 in use: write version 3 or 2, as older builds wrote them.
        for k in V4_DEFAULTS:
            spec.pop(k, None)
    if not v3:
        # Nothing of version 3 in use: write version 2, byte-compatible with older builds.
        for k in V3_DEFAULTS:
            spec.pop(k, None)
    out = {"format": FORMAT, "version": VERSION_4 if v4 else VERSION_3 if v3 else VERSION, "kind": KIND,
           "spec": spec, "sample_unit": "bit/s", "stages": stages}
    if model.get("pooled_gate") is not None:
        out["pooled_gate"] = ensemble_dict(model["pooled_gate"], POOLED_BASE_INPUTS + extra)
    if fam:
        out["family_budgets"] = {k: float(v) for k, v in sorted(fam.items())}
    if fc is not None:
        out["family_classifier"] = {"mode": fc["mode"], "classes": fc["classes"],
                                    "forest": ensemble_dict(fc["forest"], POOLED_BASE_INPUTS + 1)}
    training = dict({"params": model["params"]}, **(training or {}))
    if model.get("gate_params"):
        training["gate_params"] = model["gate_params"]
    out["training"] = training
    return out


def sklearn_fixture(model, logs):
    """What the Rust prober must reproduce: per log the stop length, forced flag and
    prediction, and every stage's regressor output / gate probability on its prefix."""
    rows = []
    for d, (n, pred, forced, p) in zip(logs, run_loop(model, logs)):
        per = []
        for k in sorted(model["stages"]):
            if k > len(d["samples_bps"]):
                continue
            st = model["stages"][k]
            raw = np.array([d["samples_bps"][:k]], dtype=np.float64)
            pk = st.gate_out(model, raw) if _gated(model["spec"], k) else None
            per.append({"n": k, "regressor": float(st.predict(raw)[0]),
                        "gate_p": None if pk is None else float(pk[0])})
        # "p" is P(predictable), which an error gate does not have (the Rust prober
        # reports None); its predicted log(err % + 0.5) at the stop is "gate_output".
        err_gate = model["spec"].get("gate", "classifier") == "error"
        rows.append({"samples_bps": d["samples_bps"], "stop_n": n, "forced": forced,
                     "prediction_bps": pred, "p": None if err_gate else p,
                     "gate_output": p, "stages": per})
    return rows


# ---------------------------------------------------------------- CLI


def _write(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
    os.replace(tmp, path)


def _timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="opsel.train_fastprob", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("synth", help="write seeded synthetic logs (development data, not a measurement)")
    g.add_argument("--n", type=int, default=600)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--interval-ns", type=int, default=1_000_000_000)
    g.add_argument("-o", "--out", required=True)
    t = sub.add_parser("train", help="split, search, train pairs, evaluate, export")
    t.add_argument("--logs", help="JSON-lines file or directory of *.jsonl")
    t.add_argument("--synthetic", type=int, help="use N seeded synthetic logs instead of --logs")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--cap", type=int, default=15)
    t.add_argument("--first-gate-n", type=int, default=1)
    t.add_argument("--last-gate-n", type=int, default=14)
    t.add_argument("--label-error-pct", type=float, default=5.0)
    t.add_argument("--features", choices=FEATURES, default="raw",
                   help="stage inputs: raw samples (004 §IV) or prefix-normalised ratios (our extension)")
    t.add_argument("--ratio-floor-bps", type=float, default=1e6,
                   help="ratio features divide by max(prefix max, this)")
    t.add_argument("--gate-every", type=int, default=1, help="a gate only every k-th length from --first-gate-n")
    t.add_argument("--stop-threshold", type=float, default=0.5, help="stop when P(predictable) > this")
    t.add_argument("--min-samples-leaf", type=int, default=1)
    t.add_argument("--gate-labels", choices=("holdout", "oof"), default="holdout",
                   help="label the gates on a 70/30 time split (004 Fig. 6a) or out-of-fold over 5 "
                        "time-ordered blocks, then fit both forests on all training logs (our extension)")
    t.add_argument("--target", choices=("linear", "log"), default="linear",
                   help="the regressors predict t_avg / s or log(t_avg / s) (our extension; format version 3)")
    t.add_argument("--gate", choices=("classifier", "error"), default="classifier",
                   help="004's classifier gate, or a regressor of log(err %% + 0.5) that stops below "
                        "--stop-error-pct (our extension; format version 3; needs --gate-labels oof)")
    t.add_argument("--stop-error-pct", type=float, default=5.0, help="an error gate stops below this")
    t.add_argument("--gate-trees", type=int, help="trees of the gates (default: --trees)")
    t.add_argument("--gate-depth", type=int, help="max depth of the gate forests (default: --depth)")
    t.add_argument("--gate-min-samples-leaf", type=int, help="min samples per leaf of the gate forests")
    t.add_argument("--gate-max-features", type=float, help="max_features (fraction) of the gate forests")
    t.add_argument("--gate-layout", choices=("per_length", "pooled"), default="per_length",
                   help="a gate forest per gated length, or one pooled error gate for all of them with n as "
                        "an input (our extension; format version 4; needs --gate error)")
    t.add_argument("--gate-inputs", default="",
                   help="extra gate inputs, comma-separated subset of abs,sd in that order (format version 4)")
    t.add_argument("--abs-floor-bps", type=float, default=1e3, help="the abs gate input floors the prefix mean here")
    t.add_argument("--family-budgets",
                   help='optional per-family error budgets stored beside the default one, JSON {"lan": 12, ...} '
                        "(format version 4; a caller that knows its network selects one)")
    t.add_argument("--family-classifier",
                   help="T,D: infer the family from the probe's prefix with a T-tree, depth-D random forest "
                        "(needs --family-budgets for every family of the training logs; format version 4)")
    t.add_argument("--family-mode", choices=FAMILY_MODES, default="soft",
                   help="soft: the budget is the probability-weighted mean of the families' budgets; "
                        "hard: the most probable family's budget")
    t.add_argument("--train-count", type=int,
                   help="train on the first N transfers in recording order and test on the rest "
                        "(default: the time-ordered 80 %%)")
    t.add_argument("--fixed-n", default="3,10",
                   help="also store regressor-only stages at these lengths (the fixed-n RF baseline)")
    t.add_argument("--skip-cv", action="store_true", help="skip the expanding-window CV report")
    t.add_argument("--search", action="store_true", help="grid over trees x depth by expanding-window CV")
    t.add_argument("--grid-trees", default="20,50", help="trees tried by --search")
    t.add_argument("--grid-depth", default="6,12", help="max depths tried by --search")
    t.add_argument("--trees", type=int, default=30)
    t.add_argument("--depth", type=int, default=8)
    t.add_argument("--incremental", action="store_true", help="also run the 004 §V retraining replay")
    t.add_argument("--initial", type=int, default=500)
    t.add_argument("--fixture", help="also write the scikit-learn reference decisions for N test logs here")
    t.add_argument("--fixture-logs", type=int, default=40)
    t.add_argument("-o", "--out", required=True)
    t.add_argument("--report", help="write the evaluation report (JSON) here")
    b = sub.add_parser("bench", help="time scikit-learn's online loop on the fixture's logs (peer of the Rust bench)")
    b.add_argument("--synthetic", type=int, default=300)
    b.add_argument("--seed", type=int, default=3)
    b.add_argument("--trees", type=int, default=5)
    b.add_argument("--depth", type=int, default=4)
    b.add_argument("--fixture-logs", type=int, default=30)
    b.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)

    if a.cmd == "bench":
        # Same data, split and model as the fixture written by `train --synthetic 300
        # --seed 3 --trees 5 --depth 4 --fixture ...` (cargo bench -p opsel --bench fastprob).
        logs = synthetic_logs(a.synthetic, a.seed + 1)
        cut = int(round(0.8 * len(logs)))
        model = train_pairs(logs[:cut], None, {"n_estimators": a.trees, "max_depth": a.depth}, a.seed,
                            extra_n=(3, 10))
        test = logs[cut:][: a.fixture_logs]
        # One probe at a time, as an online prober runs (not the vectorised batch).
        best = min(_timed(lambda: [run_loop(model, [d]) for d in test]) for _ in range(a.repeats))
        pushes = sum(r[0] for r in run_loop(model, test))
        print(f"scikit-learn online loop: {best * 1e3:.2f} ms for {len(test)} probes ({pushes} pushes), "
              f"{best / pushes * 1e6:.1f} us per push (best of {a.repeats})")
        return 0

    if a.cmd == "synth":
        logs = synthetic_logs(a.n, a.seed, a.interval_ns)
        with open(a.out, "w") as f:
            for d in logs:
                f.write(json.dumps(d) + "\n")
        print(f"wrote {len(logs)} synthetic logs to {a.out}")
        return 0

    if (a.logs is None) == (a.synthetic is None):
        ap.error("give exactly one of --logs or --synthetic")
    logs = synthetic_logs(a.synthetic, a.seed + 1) if a.synthetic else load_logs(a.logs)
    if not logs:
        ap.error("no transfer of >= 60 samples found")
    iv = {d["interval_ns"] for d in logs}
    if len(iv) != 1:
        ap.error(f"logs mix sampling intervals {sorted(iv)}; train one model per interval")
    spec = {"interval_ns": iv.pop(), "cap": a.cap, "first_gate_n": a.first_gate_n,
            "last_gate_n": a.last_gate_n, "label_error_pct": a.label_error_pct,
            "features": a.features, "gate_every": a.gate_every, "ratio_floor_bps": a.ratio_floor_bps,
            "stop_threshold": a.stop_threshold, "target": a.target, "gate": a.gate,
            "stop_error_pct": a.stop_error_pct, "gate_layout": a.gate_layout,
            "gate_inputs": [g for g in a.gate_inputs.split(",") if g], "abs_floor_bps": a.abs_floor_bps}
    gate_params = {k: v for k, v in (("max_depth", a.gate_depth), ("min_samples_leaf", a.gate_min_samples_leaf),
                                     ("max_features", a.gate_max_features)) if v is not None} or None
    cut = int(round(0.8 * len(logs)))  # 004 §IV: time-ordered 80/20
    if a.train_count is not None:
        if not 10 <= a.train_count <= len(logs):
            ap.error(f"--train-count {a.train_count}: expected 10..={len(logs)} (the transfers found)")
        cut = a.train_count
    train, test = logs[:cut], logs[cut:]
    report = {"source": "synthetic" if a.synthetic else "recorded", "transfers": len(logs),
              "train": len(train), "test": len(test)}
    params = {"n_estimators": a.trees, "max_depth": a.depth}
    if a.min_samples_leaf != 1:
        params["min_samples_leaf"] = a.min_samples_leaf
    if a.search:
        grid = [{"n_estimators": int(t), "max_depth": int(d)}
                for t in a.grid_trees.split(",") for d in a.grid_depth.split(",")]
        params, rows = search(train, spec, grid, seed=a.seed)
        report["search"] = rows
    t0 = time.perf_counter()
    extra_n = tuple(int(v) for v in a.fixed_n.split(",") if v)
    model = train_pairs(train, spec, params, a.seed, extra_n=extra_n, labels=a.gate_labels,
                        gate_trees=a.gate_trees, gate_params=gate_params)
    if a.family_budgets:
        fam = {k: float(v) for k, v in json.loads(a.family_budgets).items()}
        if a.gate != "error" or any(not 0 < v < 100 for v in fam.values()):
            ap.error("--family-budgets are error budgets in (0, 100) %% and need --gate error")
        model["family_budgets"] = fam
    if a.family_classifier:
        if not a.family_budgets:
            ap.error("--family-classifier needs --family-budgets (the budget of each family it predicts)")
        try:
            ft, fd = (int(v) for v in a.family_classifier.split(","))
        except ValueError:
            ap.error(f"--family-classifier {a.family_classifier!r}: expected TREES,DEPTH (e.g. 8,4)")
        t1 = time.perf_counter()
        fc = fit_family_classifier(train, spec, ft, fd, a.seed, a.family_mode)
        missing = [c for c in fc["classes"] if c not in model["family_budgets"]]
        if missing:
            ap.error(f"--family-budgets has no budget for the training families {missing}")
        model["family_classifier"] = fc
        report["family_classifier_s"] = time.perf_counter() - t1
    if a.gate_trees:
        report["gate_trees"] = a.gate_trees
    report["train_s"] = time.perf_counter() - t0
    report["params"] = params
    report["test"] = score(model, test) if test else None
    report["fixed_rf"] = {f"{n}": fixed_n_mape(model, test, n) for n in extra_n if n in model["stages"] and test}
    if not a.skip_cv:
        report["cv"] = expanding_cv(train, spec, params, seed=a.seed, labels=a.gate_labels,
                                    gate_trees=a.gate_trees, gate_params=gate_params)
    if a.incremental:
        report["incremental"] = incremental(logs, a.initial, spec=spec, params=params, seed=a.seed,
                                            labels=a.gate_labels, gate_trees=a.gate_trees,
                                            gate_params=gate_params)
    _write(a.out, export(model, {"source": report["source"], "transfers_train": len(train),
                                 "split": "time-ordered 80/20; " + (
                                     "pairs 70/30 time-ordered" if a.gate_labels == "holdout"
                                     else "gate labels out-of-fold over 5 time-ordered blocks"),
                                 "train_seconds": round(report["train_s"], 1),
                                 **({"gate_trees": a.gate_trees} if a.gate_trees else {})}))
    if a.fixture:
        _write(a.fixture, {"logs": sklearn_fixture(model, test[: a.fixture_logs])})
    if a.report:
        with open(a.report, "w") as f:
            json.dump(report, f, indent=1)
    r = report["test"]
    if r is None:
        print(f"trained on {len(train)} transfers; no test transfers left (--train-count)")
        return 0
    print(f"test: {r['transfers']} transfers, MAPE {r['mape_pct']:.2f} %, mean probe {r['mean_probe_s']:.2f} s, "
          f"> 50 % error {r['over_50_pct']:.1f} %, forced {r['forced_pct']:.1f} %; "
          f"fixed RF {report['fixed_rf']}" + (f"; CV MAPE {report['cv']['mape_pct']:.2f} %" if "cv" in report else ""))
    if "incremental" in report:
        print(f"incremental: {report['incremental']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
