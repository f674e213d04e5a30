"""Choose FastProb's configuration on the recorded throughput corpus using only the
training and validation slices.

The corpus is the first 2 040 transfers of the recorded plan
(the first 2040 lines of ``data/tput-logs/fastprob-100ms``: its gzip segments, then ``transfers.jsonl``), in recording
order:

- transfers 1-1224 (60 %) train;
- transfers 1225-1632 (20 %) validate, and every choice below is made on them;
- transfers 1633-2040 (20 %) are held out. This script never reads them.

Each variant is trained on the train slice (pairs split 70/30 in time order, as
``train_fastprob.train_pairs``) and scored on the validation slice with the
scikit-learn reference loop. Run::

    python research/fastprob/choose.py --corpus corpus2040.jsonl --out choose.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

# The trainer is a standalone script (numpy + scikit-learn); load it without the
# compiled opsel package.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python", "python", "opsel"))
import train_fastprob as tf  # noqa: E402


def family_scores(model, logs):
    out = {"all": tf.score(model, logs)}
    for fam in ("lan", "wan", "shared"):
        sub = [d for d in logs if d.get("family") == fam]
        if sub:
            out[fam] = tf.score(model, sub)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", default="all", help="comma list of steps to run: features,p,grid2,grid3")
    ap.add_argument("--pick", help="fixed-length curve (JSON lines of fixed_curve.py --slice val): "
                                   "print the configuration the rule picks and exit")
    a = ap.parse_args()
    if a.pick:
        return pick(json.load(open(a.out)), [json.loads(l) for l in open(a.pick) if l.strip()])
    logs = tf.load_logs(a.corpus)
    assert len(logs) == 2040, len(logs)
    n_tr, n_va = int(round(0.6 * len(logs))), int(round(0.8 * len(logs)))
    train, val = logs[:n_tr], logs[n_tr:n_va]
    iv = logs[0]["interval_ns"]
    rows = json.load(open(a.out)) if os.path.exists(a.out) else []
    done = {json.dumps(r["config"], sort_keys=True) for r in rows}

    def run(config):
        key = json.dumps(config, sort_keys=True)
        if key in done:
            return next(r for r in rows if json.dumps(r["config"], sort_keys=True) == key)
        spec = {"interval_ns": iv, "cap": config["cap"], "first_gate_n": 1,
                "last_gate_n": config["cap"] - 1, "label_error_pct": config["p"],
                "features": config["features"], "gate_every": config["every"],
                "ratio_floor_bps": config.get("floor", 1e6)}
        params = {"n_estimators": config["trees"], "max_depth": config["depth"],
                  "min_samples_leaf": config["leaf"]}
        t0 = time.perf_counter()
        m = tf.train_pairs(train, spec, params, 0)
        secs = time.perf_counter() - t0
        r = {"config": config, "train_s": secs, "val": family_scores(m, val)}
        size = len(json.dumps(tf.export(m), separators=(",", ":")))
        r["model_bytes"] = size
        for thr in (0.6, 0.7, 0.8, 0.9):
            m["spec"] = dict(m["spec"], stop_threshold=thr)
            r[f"val_thr{thr}"] = tf.score(m, val)
        rows.append(r)
        done.add(key)
        json.dump(rows, open(a.out, "w"), indent=1)
        v = r["val"]
        print(f"{config}: MAPE {v['all']['mape_pct']:.2f} probe {v['all']['mean_probe_s']:.2f} s "
              f">50 {v['all']['over_50_pct']:.1f} | lan {v['lan']['mape_pct']:.1f} wan {v['wan']['mape_pct']:.1f} "
              f"shared {v['shared']['mape_pct']:.1f} | thr0.7 {r['val_thr0.7']['mape_pct']:.2f}/"
              f"{r['val_thr0.7']['mean_probe_s']:.2f} s | {size/1e6:.2f} MB {secs:.0f} s", flush=True)
        return r

    base = {"features": "raw", "cap": 45, "p": 5.0, "every": 1, "trees": 20, "depth": 12, "leaf": 1}
    steps = a.stage.split(",") if a.stage != "all" else ["features", "p", "cap", "size"]
    if "features" in steps:
        for f in ("raw", "ratio", "ratio+stats"):
            run(dict(base, features=f))
    if "p" in steps:
        best_f = min((r for r in rows if r["config"]["p"] == 5.0 and r["config"]["cap"] == 45
                      and r["config"]["every"] == 1 and r["config"]["depth"] == 12),
                     key=lambda r: r["val"]["all"]["mape_pct"])["config"]["features"]
        for p in (2.0, 10.0, 20.0):
            run(dict(base, features=best_f, p=p))
    if "grid2" in steps:
        # With the 1 Mbit/s ratio floor: inputs x gate spacing x forest size.
        for f in ("ratio", "ratio+stats"):
            for every in (1, 3, 5):
                for trees, depth, leaf in ((20, 12, 1), (10, 8, 3)):
                    run(dict(base, features=f, every=every, trees=trees, depth=depth, leaf=leaf, floor=1e6))
        for p in (2.0, 10.0):
            run(dict(base, features="ratio", every=5, trees=10, depth=8, leaf=3, floor=1e6, p=p))
        for cap in (30, 60):
            run(dict(base, features="ratio", every=5, trees=10, depth=8, leaf=3, floor=1e6, cap=cap))
    if "grid3" in steps:
        # Around the best of grid2 (ratio+stats, gates every 5, 10 trees of depth 8).
        b = dict(base, features="ratio+stats", every=5, trees=10, depth=8, leaf=3, floor=1e6)
        for p in (2.0, 3.0, 10.0):
            run(dict(b, p=p))
        for cap in (30, 60):
            run(dict(b, cap=cap))
        run(dict(b, every=10))
        run(dict(b, trees=20))
        run(dict(b, depth=6))
        run(dict(b, leaf=5))
    if "grid" in steps:
        # P, gate spacing and forest size for both scale-free inputs; the stop
        # threshold is swept on each trained model (val_thr*).
        for f in ("ratio", "ratio+stats"):
            for p in (5.0, 10.0):
                for every in (1, 5):
                    for trees, depth, leaf in ((20, 12, 1), (10, 8, 3)):
                        run(dict(base, features=f, p=p, every=every, trees=trees, depth=depth, leaf=leaf))
    print("done")


def pick(rows, curve, max_mape=10.0, max_bytes=2_000_000):
    """The rule: among (configuration, stop threshold) pairs with validation MAPE
    <= 10 % and a model file <= 2 MB, the one whose mean probe is the largest
    saving against the fixed-n RF regressor of equal validation error. L_eq is
    the probe length at which the lower envelope of the fixed-n RF error curve
    reaches FastProb's error (linear between the lengths measured)."""
    pts = sorted((r["n"] * 0.1, r["rf"]) for r in curve)
    env, best = [], float("inf")
    for t, e in pts:
        best = min(best, e)
        env.append((t, best))

    def l_eq(err):
        for (t0, e0), (t1, e1) in zip(env, env[1:]):
            if e0 >= err >= e1 and e0 > e1:
                return t0 + (e0 - err) / (e0 - e1) * (t1 - t0)
        return None

    cands = []
    for r in rows:
        if r["model_bytes"] > max_bytes:
            continue
        for k in ("val", "val_thr0.6", "val_thr0.7", "val_thr0.8", "val_thr0.9"):
            v = r[k]["all"] if k == "val" else r[k]
            le = l_eq(v["mape_pct"])
            if v["mape_pct"] <= max_mape and le:
                cands.append((1 - v["mean_probe_s"] / le, v["mape_pct"], v["mean_probe_s"], le, k, r["config"]))
    cands.sort(key=lambda c: -c[0])
    for c in cands[:8]:
        print(f"saving {c[0] * 100:.1f} %: MAPE {c[1]:.2f} at {c[2]:.2f} s (fixed RF equal-error length {c[3]:.2f} s) {c[4]} {c[5]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
