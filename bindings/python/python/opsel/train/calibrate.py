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
"""

from __future__ import annotations

import os

import numpy as np

import opsel

from .data import SIX_CLASSES, dataset, find_traces_dir


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
                           training=training)


def extend_from_traces(base_path: str, traces_dir: str) -> tuple["opsel.Model", float, int]:
    """Extend the model file ``base_path`` with every complete window of ``traces_dir/<class>.csv``.
    Returns (model, the base model's accuracy on the new windows, windows added)."""
    base = opsel.load_model(base_path)
    traces = find_traces_dir(traces_dir)
    if not traces:
        raise SystemExit(f"no <class>.csv traces under {traces_dir} (classes {', '.join(SIX_CLASSES)})")
    X, y = dataset(traces, base.window)
    if len(y) == 0:
        raise SystemExit(f"no complete windows of w = {base.window} under {traces_dir}")
    before = float(np.mean([p.label == t for p, t in zip(base.classify_batch(X), y)]))
    model = extend(base, X, y, note={"traces": os.path.normpath(traces_dir),
                                     "conditions": traces[0].meta.get("conditions")})
    return model, before, len(y)


def add_parser(sub) -> None:
    s = sub.add_parser("extend", help="add references recorded on your own network to a model (opsel calibrate)")
    s.add_argument("base", help="model file to extend, e.g. models/passive/model.json")
    s.add_argument("traces", help="folder of <class>.csv traces at your condition (opsel calibrate --corpus, "
                                  "opsel lab collect --out)")
    s.add_argument("--out", required=True)

    def run(a):
        model, before, n = extend_from_traces(a.base, a.traces)
        tmp = a.out + ".tmp"
        model.save(tmp)
        os.replace(tmp, a.out)
        print(f"wrote {a.out}: {len(model) - n} + {n} references; "
              f"the base model classified {100 * before:.1f} % of the new windows right")

    s.set_defaults(fn=run)
