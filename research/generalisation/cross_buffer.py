"""Do references recorded at 5 samples a second carry to another buffer, rate or RTT?

For every pair of calibration corpora (``opsel calibrate --sample-ms 200`` folders of
``<class>.csv`` traces), the path's own model of the first (10-s windows, the shipped
model's k, cost, normalisation and band share: ``opsel.train.calibrate.own_model``)
classifies every 10-s window of the second. Prints 6-class and "BBR present" accuracy.

    .venv/bin/python research/generalisation/cross_buffer.py \\
        data/calibrate/cal-r34-d42-b0.25/passive-200ms data/calibrate/cal-r34-d42-b1/passive-200ms \\
        data/calibrate/cal-r24-d67-b0.26/passive-200ms
"""

import os
import sys

import numpy as np

from opsel.train.calibrate import extend_from_traces
from opsel.train.data import dataset, find_traces_dir

BASE = "models/passive/model.json"


def name(d):
    return os.path.basename(os.path.dirname(os.path.normpath(d)))


def main(dirs, window_s=10):
    print("| references | tested on | windows | 6-class % | BBR present % |")
    print("|---|---|---|---|---|")
    for a in dirs:
        m, _, _ = extend_from_traces(BASE, a, own_window_s=window_s)
        for b in dirs:
            if a == b:
                continue
            X, y = dataset(find_traces_dir(b), m.window)
            p = [q.label for q in m.classify_batch(X)]
            six = np.mean([u == v for u, v in zip(p, y)])
            bbr = np.mean([("B1" in u) == ("B1" in v) for u, v in zip(p, y)])
            print(f"| `{name(a)}` | `{name(b)}` | {len(y)} | {100 * six:.0f} | {100 * bbr:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
