"""Error of fixed-length estimators against probe length on one slice of the corpus:
the last-4 mean, the prefix mean, and the fixed-n random-forest regressor (trained
on the train slice with the given inputs). Used to state "the best fixed-length
method" at a given error. Run::

    python research/fastprob/fixed_curve.py --corpus corpus2040.jsonl --slice val
    python research/fastprob/fixed_curve.py --corpus corpus3000.jsonl --split 1800,2400 --slice val --trees 20
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python", "python", "opsel"))
import train_fastprob as tf  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--slice", choices=("val", "test"), default="val")
    ap.add_argument("--features", default="ratio+stats")
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=3)
    ap.add_argument("--lengths", default="10,15,20,25,30,35,40,45,50,60")
    ap.add_argument("--split", help="TRAIN_END,VAL_END transfer counts (default: 60 %% and 80 %% of the corpus); "
                                    "val fits on 1..TRAIN_END and scores TRAIN_END+1..VAL_END, test fits on "
                                    "1..VAL_END and scores the rest")
    a = ap.parse_args()
    from sklearn.ensemble import RandomForestRegressor

    logs = tf.load_logs(a.corpus)
    n_tr, n_va = int(round(0.6 * len(logs))), int(round(0.8 * len(logs)))
    if a.split:
        n_tr, n_va = (int(v) for v in a.split.split(","))
    if a.slice == "val":
        logs = logs[:n_va]  # the held-out transfers are not even loaded into the fit
    # Validation: fit on the train slice. Held out: fit on train + validation (as the shipped model).
    train, ev = (logs[:n_tr], logs[n_tr:n_va]) if a.slice == "val" else (logs[:n_va], logs[n_va:])
    out = []
    for n in [int(x) for x in a.lengths.split(",")]:
        X, y = tf.xy(train, n)
        F, s = tf.prefix_features(X, a.features)
        reg = RandomForestRegressor(n_estimators=a.trees, max_depth=a.depth, min_samples_leaf=a.leaf,
                                    random_state=n, n_jobs=1).fit(F, y / s)
        Xe, ye = tf.xy(ev, n)
        Fe, se = tf.prefix_features(Xe, a.features)
        row = {"n": n,
               "rf": float(tf.pct_err(reg.predict(Fe) * se, ye).mean()),
               "last4": float(tf.pct_err(Xe[:, -4:].mean(1), ye).mean()),
               "prefix_mean": float(tf.pct_err(Xe.mean(1), ye).mean())}
        fams = {}
        for fam in ("lan", "wan", "shared"):
            idx = [i for i, d in enumerate(ev) if d["family"] == fam]
            fams[fam] = float(tf.pct_err(reg.predict(Fe[idx]) * se[idx], ye[idx]).mean())
        row["rf_by_family"] = fams
        out.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
