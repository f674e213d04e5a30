"""Extend a background-mix model with references recorded on your own network.

The Python half of ``opsel calibrate``: the CLI measures the path and records
the six mixes in netlab at that condition (root, minutes); this adds those
windows to a base model's references with the base model's DTW and
normalisation configuration, and reports how the base model did on them
before. A model trained on one network is near chance on another
(docs/results/generalisation.md); references from the user's own condition are
what 000 §8 asks for ("sweep BDP and buffer size").

    python -m opsel.train extend models/passive/model.json data/calibrate/cal-r20-d150-b1/passive \\
        --out cal-model.json

Traces recorded more often than the base model samples (``opsel calibrate --sample-ms 200``) extend
it read at its period (every 5th sample for a 1 Hz model). With ``--own-window-s S`` the model holds
the traces' references alone, at their own period, in windows of S seconds: what ``opsel calibrate
--sample-ms 200 --window-s S`` writes (5 samples a second separate the six mixes at the path's own
condition within 10 s; docs/results/generalisation.md, "A finer time resolution").
"""

from __future__ import annotations

import os

import numpy as np

import opsel

from .data import SIX_CLASSES, at_interval, dataset, find_traces_dir


def extend(base: "opsel.Model", X: np.ndarray, y, *, note: dict | None = None) -> "opsel.Model":
    """A model holding ``base``'s references plus windows ``X`` (n, w) labelled ``y``
    (class names of ``base``), with ``base``'s k, radius, cost, normalisation and probing."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != base.window:
        raise ValueError(f"windows have shape {X.shape}; the base model needs (n, {base.window})")
    classes = list(base.classes)
    unknown = sorted({str(c) for c in y} - set(classes))
    if unknown:
        raise ValueError(f"classes {unknown} are not among the base model's {classes}")
    idx = [classes.index(str(c)) for c in y]
    refs = np.concatenate([np.asarray(base.references), X])
    labels = [int(i) for i in base.labels] + idx
    training = {"base_model": base.training, "calibration": dict(note or {}, windows_added=len(idx))}
    return opsel.Model.fit(refs, labels, classes, k=base.k, radius=base.radius, cost=base.cost,
                           normalization=base.normalization, probing=base.probing, pattern=base.pattern,
                           training=training, sample_interval_ms=base.sample_interval_ms)


def own_model(base: "opsel.Model", X: np.ndarray, y, sample_interval_ms: float, *,
              note: dict | None = None) -> "opsel.Model":
    """A passive model of windows ``X`` (n, w) alone, sampled every ``sample_interval_ms``, with
    ``base``'s k, cost and normalisation and its DTW band as the same share of the window (radius
    20 of 40 samples becomes 25 of 50), as ``opsel calibrate`` writes for a period or window other
    than the base model's."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"windows have shape {X.shape}; need (n, w) with n > 0")
    if base.probing != "passive":
        raise ValueError("a model of the path's own references at another period needs a passive base model")
    classes = list(base.classes)
    unknown = sorted({str(c) for c in y} - set(classes))
    if unknown:
        raise ValueError(f"classes {unknown} are not among the base model's {classes}")
    w = X.shape[1]
    radius = None if base.radius is None else int(round(base.radius * w / base.window))
    training = {"base_model": base.training,
                "calibration": dict(note or {}, windows_added=len(y), sample_interval_ms=sample_interval_ms,
                                    window_s=w * sample_interval_ms / 1e3,
                                    references="the recorded path's alone")}
    return opsel.Model.fit(X, [classes.index(str(c)) for c in y], classes, k=base.k, radius=radius,
                           cost=base.cost, normalization=base.normalization, training=training,
                           sample_interval_ms=sample_interval_ms)


def extend_from_traces(base_path: str, traces_dir: str, own_window_s: float | None = None
                       ) -> tuple["opsel.Model", float, int]:
    """Extend the model file ``base_path`` with every complete window of ``traces_dir/<class>.csv``
    read at the base model's sample period; or, with ``own_window_s``, a model of the traces' windows
    of that many seconds alone at their own period (:func:`own_model`).
    Returns (model, the base model's accuracy on the same traffic at its own period, windows added)."""
    base = opsel.load_model(base_path)
    traces = find_traces_dir(traces_dir)
    if not traces:
        raise SystemExit(f"no <class>.csv traces under {traces_dir} (classes {', '.join(SIX_CLASSES)})")
    try:
        at_base = [at_interval(t, base.sample_interval_ms) for t in traces]
    except ValueError as e:
        raise SystemExit(f"{e} (the base model samples every {base.sample_interval_ms:g} ms)") from None
    Xb, yb = dataset(at_base, base.window)
    before = float(np.mean([p.label == t for p, t in zip(base.classify_batch(Xb), yb)])) if len(yb) else float("nan")
    note = {"traces": os.path.normpath(traces_dir), "conditions": traces[0].meta.get("conditions")}
    if own_window_s is None:
        if len(yb) == 0:
            raise SystemExit(f"no complete windows of w = {base.window} under {traces_dir}")
        return extend(base, Xb, yb, note=note), before, len(yb)
    ms = {t.sample_interval_ms for t in traces}
    if len(ms) != 1:
        raise SystemExit(f"the traces under {traces_dir} are sampled at different periods: {sorted(ms)} ms")
    ms = ms.pop()
    w = own_window_s * 1e3 / ms
    if w < 1 or w != int(w):
        raise SystemExit(f"a window of {own_window_s:g} s is not a whole number of {ms:g}-ms samples")
    X, y = dataset(traces, int(w))
    if len(y) == 0:
        raise SystemExit(f"no complete windows of {own_window_s:g} s under {traces_dir}")
    return own_model(base, X, y, ms, note=note), before, len(y)


def add_parser(sub) -> None:
    s = sub.add_parser("extend", help="add references recorded on your own network to a model (opsel calibrate)")
    s.add_argument("base", help="model file to extend, e.g. models/passive/model.json")
    s.add_argument("traces", help="folder of <class>.csv traces at your condition (opsel calibrate --corpus, "
                                  "opsel lab collect --out)")
    s.add_argument("--out", required=True)
    s.add_argument("--own-window-s", type=float, metavar="S",
                   help="write a model of these traces alone, at their own sample period, windows of S "
                        "seconds (as opsel calibrate --sample-ms 200 --window-s S)")

    def run(a):
        model, before, n = extend_from_traces(a.base, a.traces, a.own_window_s)
        model.save(a.out)
        refs = f"{n} references of these traces alone" if a.own_window_s else f"{len(model) - n} + {n} references"
        print(f"wrote {a.out}: {refs}; the base model classified {100 * before:.1f} % of the same "
              f"traffic right")

    s.set_defaults(fn=run)
