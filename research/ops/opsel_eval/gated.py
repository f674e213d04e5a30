"""Margin-gated probing: extend a probe only when its decision is unsure.

A one-window decision (000 §3.5, w = 20) is wrong for about one window in ten on
the hardest passive class (B1-C1 read as C1-C1, ``models/passive/MODEL_CARD.md``),
and every such miss leaves the transfer on the wrong CCA for a whole steady phase
(Jain ≈ 0.6 at 0.5 × BDP). Several windows per decision (min-sum, ``cycles.py``)
fix most misses but make every probe n times longer.

The OPS controller already has the pieces for a middle way: ``Config::cycles = N``
with progressive probing checks the running min-sum margin
``1 − Σ_leader / Σ_runner-up`` after each window and decides as soon as it reaches
``min_confidence`` (``opsel send --fg ... --cycles N --early-exit
--early-confidence τ``). Confident windows (most of them) decide after one window,
unsure ones collect another. This module measures that trade-off on recorded
traces: for each threshold τ, the decision accuracy (six classes and the stump's
"BBR present") against the mean number of windows a probe takes.

Blocks, folds and distances are those of :func:`opsel_eval.cycles.cv_cycles`
(passive traces use windows of ``w`` samples as their "cycles"), so τ = 0 gives
the one-window 1-NN accuracy and τ > 1 the N-window min-sum accuracy. A sample of
the decisions is replayed through the Rust controller (``opsel.Controller`` with
``cycles`` and ``progressive``) and must agree exactly.
"""

from __future__ import annotations

import numpy as np

import opsel

from .cycles import assign_folds, cycle_blocks, pairwise_dtw
from opsel.train.data import SIX_CLASSES, Trace
from opsel.train.knn import derived_views

NS_PER_S = 1_000_000_000
TAUS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.01)


def sum_margin(best: float, second: float) -> float:
    """``core::ops::controller::sum_margin``: the running min-sum margin."""
    if not np.isfinite(best):
        return 0.0
    if not np.isfinite(second):
        return 1.0
    if second > 0.0:
        return float(min(max(1.0 - best / second, 0.0), 1.0))
    return 0.0


def gated_decision(per_class: np.ndarray, tau: float) -> tuple[int, int, float]:
    """Decide on per-class nearest distances ``per_class`` (C, N): after window i the
    running sums' leader wins if its margin is >= ``tau`` or i is the last window.
    Returns (class position, windows used, margin at the decision). Ties go to the
    first class, like the controller's ``min_two``."""
    sums = np.zeros(per_class.shape[0])
    n = per_class.shape[1]
    for i in range(n):
        sums += per_class[:, i]
        order = np.argsort(sums, kind="stable")
        best, second = sums[order[0]], sums[order[1]] if len(order) > 1 else np.inf
        m = sum_margin(best, second)
        if m >= tau or i + 1 == n:
            return int(order[0]), i + 1, m
    raise AssertionError("unreachable")


def controller_gated(model, samples: np.ndarray, n: int, tau: float, w: int, *, pattern: str | None) -> dict:
    """Replay ``samples`` through ``opsel.Controller(cycles=n, progressive=...)`` and
    return its decision (class index into the model's classes) and samples used."""
    kw = {"mode": "active", "pattern": pattern} if pattern else {"mode": "passive"}
    # tau > 1: never stop early, i.e. plain min-sum over n windows.
    prog = {"min_samples": w, "step": w, "min_confidence": tau, "agree": 1} if tau <= 1 else None
    ctl = opsel.Controller(model, steady_s=1000.0, cycles=n, progressive=prog, **kw)
    ctl.start(0)
    for t, v in enumerate(np.asarray(samples, dtype=np.float64).ravel(), 1):
        ctl.handle_timeout(t * NS_PER_S)
        ctl.handle_sample(t * NS_PER_S, float(v))
        cl = [o for o in ctl.drain() if o["kind"] == "classified"]
        if cl:
            return {"class_index": int(cl[0]["class_index"]), "samples": t}
    raise RuntimeError(f"no decision from {len(samples)} samples")


def evaluate(traces: list[Trace], *, max_windows=3, taus=TAUS, w=20, normalization="none", radius=10, folds=5,
             seed=0, folding="runs", classes=SIX_CLASSES, check=0, log=None) -> list[dict]:
    """One row per τ: accuracy, "BBR present" accuracy, mean windows per probe, and the
    share of probes extended, on ``folding`` folds of blocks of ``max_windows`` windows.
    ``check`` test blocks per fold are replayed through the Rust controller at every τ;
    ``controller_differ`` counts disagreements (expected 0)."""
    traces = [t for t in traces if t.label in classes]
    period = None if traces and traces[0].pattern_len else w
    _, _, _, cyc = cycle_blocks(traces, 1, classes, period=period)
    if log:
        log(f"{len(cyc)} windows of {cyc.shape[1]} samples; DTW distance matrix ({normalization}, r={radius})")
    D = pairwise_dtw(cyc, radius=radius, normalization=normalization)
    blocks, labels, groups, _ = cycle_blocks(traces, max_windows, classes, period=period)
    present_idx = sorted(set(labels.tolist()))
    present = [classes[i] for i in present_idx]
    nf = folds
    if folding == "runs":
        nf = min(folds, min(len(set(groups[labels == c])) for c in present_idx))
    f = assign_folds(labels, groups, folds=nf, seed=seed, folding=folding)
    pos = {c: i for i, c in enumerate(present_idx)}
    confs = {tau: np.zeros((len(present), len(present)), dtype=np.int64) for tau in taus}
    used = {tau: [] for tau in taus}
    used_label = []  # class of each test block, in the order of used[tau]
    differ = {tau: 0 for tau in taus}
    checked = 0
    pattern = (traces[0].meta.get("conditions") or {}).get("pattern") if traces and not period else None
    for k in range(nf):
        test = np.where(f == k)[0]
        train = np.where((f >= 0) & (f != k))[0]
        ref_cyc = blocks[train].ravel()
        ref_lab = np.repeat(labels[train], max_windows)
        model = None
        if check:
            model = opsel.Model.fit(np.ascontiguousarray(cyc[ref_cyc]), ref_lab.tolist(), list(classes), k=1,
                                    radius=radius, normalization=normalization,
                                    probing="active" if pattern else "passive", pattern=pattern)
        for j, t in enumerate(test):
            used_label.append(int(labels[t]))
            dq = D[np.ix_(blocks[t], ref_cyc)]  # (N, refs)
            per_class = np.array([dq[:, ref_lab == c].min(axis=1) for c in present_idx])  # (C, N)
            for tau in taus:
                p, n_used, _ = gated_decision(per_class, tau)
                confs[tau][pos[labels[t]], p] += 1
                used[tau].append(n_used)
                if model is not None and j < check:
                    rs = controller_gated(model, cyc[blocks[t]], max_windows, tau, cyc.shape[1], pattern=pattern)
                    differ[tau] += int(rs["class_index"] != present_idx[p]
                                       or rs["samples"] != n_used * cyc.shape[1])
            if model is not None and j < check:
                checked += 1
    rows = []
    for tau in taus:
        c = confs[tau]
        u = np.asarray(used[tau])
        views = derived_views(c, present)
        rows.append({"tau": tau, "max_windows": max_windows, "w": int(cyc.shape[1]), "folding": folding,
                     "normalization": normalization, "radius": radius, "n": int(c.sum()),
                     "accuracy": float(np.trace(c) / c.sum()), "bbr_present": views["bbr_present"]["accuracy"],
                     "mean_windows": float(u.mean()), "extended": float(np.mean(u > 1)),
                     "extended_by_class": {classes[c]: float(np.mean(u[np.asarray(used_label) == c] > 1))
                                           for c in present_idx},
                     "confusion": c.tolist(), "classes": present,
                     "controller_checked": checked, "controller_differ": differ[tau]})
        if log:
            r = rows[-1]
            log(f"tau={tau:.2f}: acc {r['accuracy']:.3f}, BBR present {r['bbr_present']:.3f}, "
                f"mean windows {r['mean_windows']:.2f}, extended {r['extended']:.1%}")
    return rows


def markdown(rows: list[dict]) -> list[str]:
    out = ["| normalisation | folds | τ | 6-class | BBR present | mean windows | probes extended | blocks | controller differs |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tau = "never stop early" if r["tau"] > 1 else f"{r['tau']:.2f}"
        out.append(f"| {r['normalization']} | {r['folding']} | {tau} | {100 * r['accuracy']:.1f} % | "
                   f"{100 * r['bbr_present']:.1f} % | {r['mean_windows']:.2f} | {100 * r['extended']:.1f} % | "
                   f"{r['n']} | {r['controller_differ']} of {r['controller_checked']} |")
    return out


def _flows(label: str) -> dict[str, int]:
    """Flows per CCA of a 000 Table 6.1 label (B1-B1 = two BBR flows)."""
    if label == "B1-B1":
        return {"bbr": 2, "cubic": 0}
    if label == "C1-C1":
        return {"bbr": 0, "cubic": 2}
    b, c = label.split("-")
    return {"bbr": int(b[1:]), "cubic": int(c[1:])}


def stump_on_background(label: str, own_cca: str) -> str:
    """The controller's passive decision (``Controller::background_of`` + the
    stump): the class minus one flow of the transfer's own CCA, then "BBR
    present → bbr, else cubic" (000 §4.1)."""
    f = _flows(label)
    if f.get(own_cca, 0) > 0:
        f[own_cca] -= 1
    return "bbr" if f["bbr"] > 0 else "cubic"


def live_probes(lines: list[dict], classes: list[str]) -> list[dict]:
    """The probes of ``opsel demo --json`` lines (OPS foreground, static
    background, ``--cycles N``): per probe the background, the CCA the
    transfer sent with while it ran, and the running (leader, margin) after
    each logged window. ``complete``: all N windows were logged (a probe
    recorded with ``--extend-below 1`` always takes N unless the run ended);
    ``decided``: complete, or stopped by the run's own gate (not cut by the
    end of the run)."""
    out = []
    for ln in lines:
        if ln.get("fg") != "OPS" or ln.get("bg") not in ("cubic", "bbr") or not ln.get("windows"):
            continue
        n = int(ln["cycles"])
        decisions = ln.get("decisions", [])
        probes: list[list[dict]] = []
        for w in ln["windows"]:
            if w["window"] == 0:
                probes.append([])
            if probes:
                probes[-1].append(w)
        own = ln.get("initial_cca") or "cubic"
        tau0 = ln.get("extend_below")
        for k, p in enumerate(probes):
            # Decided: all N windows, or the run's own gate stopped it; a probe
            # cut by the end of the run is neither.
            decided = len(p) == n or (tau0 is not None and p[-1]["margin"] >= tau0)
            out.append({"bg": ln["bg"], "run": ln.get("run"), "own_cca": own, "complete": len(p) == n,
                        "decided": decided,
                        "extend_below": ln.get("extend_below"),
                        "windows": [(classes[w["leader"]], float(w["margin"])) for w in p]})
            # The transfer's CCA during the next probe: this probe's decision.
            if k < len(decisions):
                own = decisions[k]["cca"]
    return out


def replay_live(probes: list[dict], taus=TAUS) -> list[dict]:
    """Replay the gate at each τ on live probes: decide after the first window
    whose running margin reaches τ (else the last). Probes cut by the end of
    their run are left out; a gated probe joins τ's row only if its log
    reaches the window τ decides at (a probe run with a gate τ0 stops at the
    first margin >= τ0, so it replays exactly for τ <= τ0)."""
    rows = []
    for tau in taus:
        right = n = extended = windows = 0
        by_bg: dict[str, list[int]] = {}  # background → [right, probes]
        for p in probes:
            if not p.get("decided", True):
                continue
            ws = p["windows"]
            i = next((j for j, (_, m) in enumerate(ws) if m >= tau), None)
            if i is None:
                if not p["complete"]:
                    continue
                i = len(ws) - 1
            n += 1
            windows += i + 1
            extended += i > 0
            ok = stump_on_background(ws[i][0], p["own_cca"]) == p["bg"]
            right += ok
            b = by_bg.setdefault(p["bg"], [0, 0])
            b[0] += ok
            b[1] += 1
        rows.append({"tau": tau, "probes": n, "right": right, "accuracy": right / n if n else float("nan"),
                     "mean_windows": windows / n if n else float("nan"), "extended": extended / n if n else float("nan"),
                     "by_bg": by_bg})
    return rows


def live_markdown(rows: list[dict]) -> list[str]:
    out = ["| τ | probes | decision right | vs CUBIC BG | vs BBR BG | mean windows | probes extended |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        tau = "never stop early" if r["tau"] > 1 else f"{r['tau']:.2f}"
        bg = {k: f"{v[0]} of {v[1]}" for k, v in r["by_bg"].items()}
        out.append(f"| {tau} | {r['probes']} | {r['right']} ({100 * r['accuracy']:.1f} %) | {bg.get('cubic', '–')} | "
                   f"{bg.get('bbr', '–')} | {r['mean_windows']:.2f} | {100 * r['extended']:.1f} % |")
    return out
