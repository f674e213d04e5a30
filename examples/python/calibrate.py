"""Calibrate the default model to your own network, from Python.

`opsel calibrate` (root) measures a path and records the six background mixes in
netlab at its condition; this is the second half of that flow in Python: add
the recorded windows to the default model's references, save the model, and
check it on windows recorded separately at the same condition.

The repository ships one such pair, recorded at 20 Mbit/s, 150 ms, 1 × BDP (a
condition off the training grid): `data/calibrate` (what `opsel calibrate`
recorded) and `data/holdout` (separate lab sessions, never used for training).

Run (from the repository root, after `make python`):

    python examples/python/calibrate.py
    python examples/python/calibrate.py --base models/passive/model.json \\
        --corpus data/calibrate/cal-r20-d150-b1/passive --holdout data/holdout/holdout-r20-d150-b1/passive \\
        --out cal-model.json

Your own path: `sudo opsel calibrate --probe HOST:PORT --sink HOST:PORT --corpus data/calibrate`,
then point --corpus at the folder it reports.
"""

import argparse
import os
import tempfile

import numpy as np

import opsel
from opsel.train.calibrate import extend_from_traces
from opsel.train.data import Trace, dataset, find_traces_dir


def accuracy(model: opsel.Model, traces: list[Trace]) -> tuple[float, float, int]:
    X, y = dataset(traces, model.window)
    pred = [p.label for p in model.classify_batch(X)]
    six = float(np.mean([p == t for p, t in zip(pred, y)]))
    bbr = float(np.mean([opsel.parse_mix(p)["bbr_present"] == opsel.parse_mix(t)["bbr_present"]
                         for p, t in zip(pred, y)]))
    return six, bbr, len(y)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=opsel.models.path("passive"), help="model to extend (default: the shipped passive model)")
    ap.add_argument("--corpus", default="data/calibrate/cal-r20-d150-b1/passive")
    ap.add_argument("--holdout", default="data/holdout/holdout-r20-d150-b1/passive")
    ap.add_argument("--out", default=None, help="model file to write (default: a temporary one)")
    a = ap.parse_args()

    model, before, n = extend_from_traces(a.base, a.corpus)
    out = a.out or os.path.join(tempfile.mkdtemp(prefix="opsel-cal-"), "cal-model.json")
    model.save(out)
    print(f"{a.base}: {len(model) - n} references; added {n} windows from {a.corpus} "
          f"(the base model classified {100 * before:.1f} % of them right) -> {out}")

    holdout = find_traces_dir(a.holdout)
    for name, m in (("base", opsel.load_model(a.base)), ("calibrated", opsel.load_model(out))):
        six, bbr, k = accuracy(m, holdout)
        print(f"{name:>10} on {k} held-out windows: 6-class {100 * six:.1f} %, BBR present {100 * bbr:.1f} %")


if __name__ == "__main__":
    main()
