"""The OPS controller's several-cycles decision against ``opsel_eval cycles``.

``core/src/ops`` ships min-sum as ``Config::cycles`` (``opsel.Controller(...,
cycles=n)``, ``opsel send --cycles n``): a probe runs the pattern n times back
to back and the class with the smallest sum over the n windows of its nearest
per-window DTW distance wins. This module runs *that controller* (the Rust
state machine fed one RTT sample per second, as in a transfer) over recorded
traces, on exactly the blocks and folds of :func:`opsel_eval.cycles.cv_cycles`,
and compares every decision with :func:`opsel_eval.cycles.min_sum`:

* :func:`evaluate`: accuracy of both per (n, folding), and how many decisions differ;
* :func:`write_golden`: a small fixture (references, query blocks, Python's
  decisions and sums) for the Rust test ``core/tests/ops_cycles_golden.rs``.
"""

from __future__ import annotations

import json

import numpy as np

import opsel

from .cycles import FOLDINGS, assign_folds, cycle_blocks, min_sum, pairwise_dtw
from opsel.train.data import SIX_CLASSES, Trace

NS_PER_S = 1_000_000_000


def controller_decision(model, samples: np.ndarray, n: int, *, pattern: str | None) -> dict:
    """Feed ``samples`` (n · w RTT values, 1 Hz) to a fresh ``opsel.Controller``
    with ``cycles=n`` and return its decision: ``class_index`` (into the model's
    classes), ``distance``, ``confidence`` and the per-window verdicts."""
    kw = {"mode": "active", "pattern": pattern} if pattern else {"mode": "passive"}
    ctl = opsel.Controller(model, steady_s=1000.0, cycles=n, **kw)
    ctl.start(0)
    out = []
    for t, v in enumerate(np.asarray(samples, dtype=np.float64).ravel(), 1):
        ctl.handle_timeout(t * NS_PER_S)
        ctl.handle_sample(t * NS_PER_S, float(v))
        out += ctl.drain()
    cl = [o for o in out if o["kind"] == "classified"]
    if len(cl) != 1:
        raise RuntimeError(f"expected one decision from {len(samples)} samples, got {out}")
    cyc = [o for o in out if o["kind"] == "cycle_classified"]
    return {
        "class_index": int(cl[0]["class_index"]),
        "distance": float(cl[0]["distance"]),
        "confidence": float(cl[0]["confidence"]),
        "samples": int(cl[0]["samples"]),
        "per_window": [int(c["class_index"]) for c in cyc],
    }


def evaluate(traces: list[Trace], ns=(1, 2, 3, 4, 5), *, normalization="none", radius=10, folds=5, seed=0,
             folding="stratified", classes=SIX_CLASSES, log=None, cycle_distances=None) -> list[dict]:
    """Per n: accuracy of Python's min-sum and of the Rust controller on the
    same folds as ``cv_cycles`` (same blocks, same seed), and the number of
    blocks where they decide differently (expected: 0)."""
    traces = [t for t in traces if t.label in classes]
    _, _, _, cyc = cycle_blocks(traces, 1, classes)
    pattern = (traces[0].meta.get("conditions") or {}).get("pattern") if traces else None
    Dc = cycle_distances if cycle_distances is not None else pairwise_dtw(cyc, radius=radius, normalization=normalization)
    rows = []
    for n in ns:
        blocks, labels, groups, _ = cycle_blocks(traces, n, classes)
        present_idx = sorted(set(labels.tolist()))
        per = min(int(np.sum(labels == c)) for c in present_idx) if present_idx else 0
        nf = folds
        if folding == "runs":
            nf = min(folds, min(len(set(groups[labels == c])) for c in present_idx))
        if per < nf or nf < 2:
            if log:
                log(f"n={n}: {per} blocks/class, too few for {nf} folds; skipped")
            continue
        f = assign_folds(labels, groups, folds=nf, seed=seed, folding=folding)
        hits_py = hits_rs = differ = total = 0
        for k in range(nf):
            test = np.where(f == k)[0]
            train = np.where((f >= 0) & (f != k))[0]
            ref_cyc = blocks[train].ravel()
            ref_lab = np.repeat(labels[train], n)
            model = opsel.Model.fit(np.ascontiguousarray(cyc[ref_cyc]), ref_lab.tolist(), list(classes), k=1,
                                    radius=radius, normalization=normalization,
                                    probing="active" if pattern else "passive", pattern=pattern)
            for t in test:
                py, _ = min_sum(Dc[np.ix_(blocks[t], ref_cyc)], ref_lab, present_idx)
                rs = controller_decision(model, cyc[blocks[t]], n, pattern=pattern)["class_index"]
                hits_py += int(py == labels[t])
                hits_rs += int(rs == labels[t])
                differ += int(py != rs)
                total += 1
        row = {"n_cycles": n, "w": n * cyc.shape[1], "folding": folding, "per_class": per, "n": total,
               "normalization": normalization, "radius": radius, "accuracy_min_sum": hits_py / total,
               "accuracy_controller": hits_rs / total, "differ": differ}
        rows.append(row)
        if log:
            log(f"n={n} {folding} norm={normalization} r={radius}: min-sum {row['accuracy_min_sum']:.3f}, "
                f"controller {row['accuracy_controller']:.3f}, {differ} of {total} differ")
    return rows


def write_golden(traces: list[Trace], path: str, *, n=3, refs_per_class=8, queries_per_class=2,
                 normalization="none", radius=10, classes=SIX_CLASSES) -> dict:
    """A small cross-check fixture from recorded traces: the first
    ``refs_per_class`` one-cycle windows of each class are the references, the
    last ``queries_per_class`` blocks of ``n`` cycles of each class (from its
    last run, so never a reference) are the queries; Python's min-sum decision,
    per-window nearest class and per-class sums are recorded for each."""
    traces = [t for t in traces if t.label in classes]
    _, labels1, groups1, cyc = cycle_blocks(traces, 1, classes)
    blocks, labels, groups, _ = cycle_blocks(traces, n, classes)
    ref_idx, query_blocks = [], []
    for c in sorted(set(labels.tolist())):
        ref_idx += list(np.where(labels1 == c)[0][:refs_per_class])
        last_run = groups[labels == c][-1]
        mine = np.where((labels == c) & (groups == last_run))[0]
        query_blocks += list(mine[-queries_per_class:])
    ref_idx = np.array(ref_idx)
    if set(ref_idx) & set(blocks[query_blocks].ravel()):
        raise ValueError("a query cycle is also a reference; record more runs")
    ref_lab = labels1[ref_idx]
    present_idx = sorted(set(ref_lab.tolist()))
    pattern = (traces[0].meta.get("conditions") or {}).get("pattern")
    queries = []
    for b in query_blocks:
        q = blocks[b]
        D = pairwise_dtw(cyc[q], cyc[ref_idx], radius=radius, normalization=normalization)
        pred, per_class = min_sum(D, ref_lab, present_idx)
        queries.append({
            "label": int(labels[b]),
            "samples": cyc[q].ravel().tolist(),
            "expected": int(pred),
            "per_window": [int(present_idx[i]) for i in np.argmin(per_class, axis=0)],
            "sums": per_class.sum(axis=1).tolist(),
        })
    fx = {
        "about": "opsel_eval.ops_cycles.write_golden: min-sum decisions computed by opsel_eval.cycles.min_sum "
                 "on recorded traces; core/tests/ops_cycles_golden.rs checks the OPS controller against them",
        "source": sorted({f"{t.condition}/{t.label}" for t in traces}),
        "pattern": pattern, "window": int(cyc.shape[1]), "cycles": n, "radius": radius,
        "normalization": normalization, "classes": list(classes),
        "references": cyc[ref_idx].ravel().tolist(), "reference_labels": ref_lab.tolist(),
        "queries": queries,
    }
    with open(path, "w") as f:
        json.dump(fx, f, separators=(",", ":"))
        f.write("\n")
    return fx


def export_folds(traces: list[Trace], path: str, ns=(1, 2, 3, 4, 5), *, folds=5, seed=0,
                 classes=SIX_CLASSES) -> dict:
    """Write the one-cycle windows and, per (folding, n), the blocks, labels and
    folds of :func:`opsel_eval.cycles.cv_cycles` (numpy only, no distances) for
    the Rust evaluation ``core/tests/ops_cycles_traces.rs``."""
    traces = [t for t in traces if t.label in classes]
    _, _, _, cyc = cycle_blocks(traces, 1, classes)
    out = {"window": int(cyc.shape[1]), "pattern": (traces[0].meta.get("conditions") or {}).get("pattern"),
           "cycles": cyc.ravel().tolist(), "runs": []}
    for folding in FOLDINGS:
        for n in ns:
            blocks, labels, groups, _ = cycle_blocks(traces, n, classes)
            present = sorted(set(labels.tolist()))
            nf = folds
            if folding == "runs":
                nf = min(folds, min(len(set(groups[labels == c])) for c in present))
            f = assign_folds(labels, groups, folds=nf, seed=seed, folding=folding)
            out["runs"].append({"folding": folding, "n": n, "folds": nf,
                                "per_class": min(int(np.sum(labels == c)) for c in present),
                                "blocks": blocks.tolist(), "labels": labels.tolist(), "fold": f.tolist()})
    with open(path, "w") as fh:
        json.dump(out, fh)
    return out


def markdown(rows: list[dict]) -> list[str]:
    out = ["| folds | n cycles | w (s) | blocks/class | decisions | min-sum (`opsel_eval cycles`) | OPS controller | differ |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['folding']} | {r['n_cycles']} | {r['w']} | {r['per_class']} | {r['n']} | "
                   f"{100 * r['accuracy_min_sum']:.1f} % | {100 * r['accuracy_controller']:.1f} % | {r['differ']} |")
    return out


__all__ = ["controller_decision", "evaluate", "write_golden", "export_folds", "markdown", "FOLDINGS"]
