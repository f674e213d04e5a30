"""Incremental-retraining replay (004 §V) of the shipped FastProb configuration on the
complete corpus (docs/results/fastprob.md, "On the complete corpus", "Incremental
retraining replay").

The loop is ``train_fastprob.incremental``'s: a model trained on the first
``--initial`` transfers, then batches of ``--batch`` scored before they are learned,
and a retrain on all history when a batch's MAPE exceeds ``--threshold`` %. It is
rewritten here only because ``incremental`` fits its pairs with 70/30 gate labels
whatever ``--gate-labels`` says, and the shipped configuration uses out-of-fold labels;
``--labels holdout`` gives what ``train_fastprob.py train --incremental`` replays.
Every batch is kept (its MAPE, probe and the families in it), so the monitor's
reaction can be read batch by batch.

``--order recording``: the corpus in recording order (families in turn). ``--order
blocks``: all ``lan`` transfers, then all ``wan``, then all ``shared``, each in
recording order; this ordering is constructed (the recording never changes network
that way) to show the monitor reacting to a network change. ``--threshold inf``
never retrains (the same replay without the monitor). Run::

    python research/fastprob/replay.py --corpus corpus3000.jsonl --order recording --out replay-rec.json
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python", "python", "opsel"))
import train_fastprob as tf  # noqa: E402

# The shipped configuration (models/fastprob-netlab/MODEL_CARD.md).
SPEC = {"interval_ns": 100_000_000, "cap": 50, "first_gate_n": 1, "last_gate_n": 49, "gate_every": 5,
        "label_error_pct": 5.0, "features": "ratio+stats", "ratio_floor_bps": 1e6, "stop_threshold": 0.5}
PARAMS = {"n_estimators": 12, "max_depth": 8, "min_samples_leaf": 3}
FAMILIES = ("lan", "wan", "shared")


def replay(logs, initial, batch, threshold, labels, seed=0):
    t0 = time.perf_counter()
    model = tf.train_pairs(logs[:initial], SPEC, PARAMS, seed, labels=labels)
    rows = []
    for b0 in range(initial, len(logs) - batch + 1, batch):
        chunk = logs[b0:b0 + batch]
        r = tf.run_loop(model, chunk)
        e = tf.pct_err(np.array([x[1] for x in r]), np.array([d["t_avg_bps"] for d in chunk]))
        retrain = bool(e.mean() > threshold)
        rows.append({"first": b0 + 1, "last": b0 + batch, "mape_pct": float(e.mean()),
                     "mean_probe_s": float(np.mean([x[0] for x in r]) * SPEC["interval_ns"] * 1e-9),
                     "families": sorted({d["family"] for d in chunk}),
                     "errors_pct": [float(v) for v in e], "probes": [int(x[0]) for x in r],
                     "family": [d["family"] for d in chunk], "retrain": retrain})
        if retrain:
            model = tf.train_pairs(logs[:b0 + batch], SPEC, PARAMS, seed, labels=labels)
    return rows, time.perf_counter() - t0


def summary(rows):
    e = np.array([v for r in rows for v in r["errors_pct"]])
    p = np.array([v for r in rows for v in r["probes"]]) * SPEC["interval_ns"] * 1e-9
    f = np.array([v for r in rows for v in r["family"]])
    out = {"batches": len(rows), "retrains": sum(r["retrain"] for r in rows), "transfers": len(e),
           "mape_pct": float(e.mean()), "mean_probe_s": float(p.mean()),
           "over_50_pct": float((e > 50).mean() * 100),
           "max_batch_mape_pct": max(r["mape_pct"] for r in rows),
           "by_family": {fam: {"mape_pct": float(e[f == fam].mean()), "mean_probe_s": float(p[f == fam].mean())}
                         for fam in FAMILIES if (f == fam).any()}}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="corpus3000.jsonl (the recording, in order)")
    ap.add_argument("--n", type=int, default=3000, help="replay the first N transfers")
    ap.add_argument("--order", choices=("recording", "blocks"), default="recording")
    ap.add_argument("--labels", choices=("oof", "holdout"), default="oof")
    ap.add_argument("--initial", type=int, default=500)
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--threshold", type=float, default=20.0, help="retrain when a batch's MAPE exceeds this (inf: never)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    logs = tf.load_logs(a.corpus)[: a.n]
    if len(logs) != a.n:
        ap.error(f"{a.corpus}: {len(logs)} transfers, expected {a.n}")
    if a.order == "blocks":
        logs = [d for fam in FAMILIES for d in logs if d["family"] == fam]
    rows, secs = replay(logs, a.initial, a.batch, a.threshold, a.labels)
    s = summary(rows)
    s.update({"order": a.order, "labels": a.labels, "threshold_pct": a.threshold, "initial": a.initial,
              "batch": a.batch, "seconds": round(secs, 1)})
    with open(a.out, "w") as f:
        json.dump({"summary": s, "batches": rows}, f, indent=1)
    print(json.dumps(s))
    # Batch by batch: the retraining batches and those whose families differ from the batch before
    # (in block order, the network changes).
    prev = None
    for r in rows:
        if r["retrain"] or (prev is not None and r["families"] != prev):
            print(f"  {r['first']:>4}-{r['last']:<4} {'/'.join(r['families']):<15} MAPE {r['mape_pct']:7.2f} % "
                  f"probe {r['mean_probe_s']:.2f} s{'  retrain' if r['retrain'] else ''}")
        prev = r["families"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
