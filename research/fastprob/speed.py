"""The Rust/scikit-learn speed ratio of FastProb's online loop on the shipped model
(docs/results/fastprob.md, "Speed: the Rust core against scikit-learn").

1. Retrains the shipped configuration with the trainer on the first 2 400 transfers of
   ``--corpus`` (the command of ``models/fastprob-netlab/MODEL_CARD.md``; each stage's
   forests are seeded by n, so this is the shipped model) and checks that its exported
   stages equal the shipped file's: the scikit-learn objects timed are the model the Rust
   core loads.
2. Writes the evaluated transfers (``--eval`` FROM,TO in recording order, 1-based) to a
   JSON-lines file and runs ``cargo bench -p opsel --bench fastprob`` on them with the
   shipped file (``OPSEL_FASTPROB_MODEL``, ``OPSEL_FASTPROB_LOGS``); criterion's median
   time per iteration (every transfer probed once, push until Stop/ForcedStop) and
   throughput (pushes/s).
3. Times scikit-learn's loop on the same transfers and model one probe at a time, as an
   online prober runs (``train_fastprob.run_loop`` on one transfer: at each gate length
   the stage's inputs, the gate's ``predict_proba``, and at the stop the regressor's
   ``predict``; lengths without a stage cost nothing there, while the Rust prober still
   takes each sample), best of ``--repeats``; checks both stop at the same sample.
4. Prints both, per probe and per push, and the ratio.

Run::

    python research/fastprob/speed.py --corpus corpus3000.jsonl --model models/fastprob-netlab/model.json \\
        --eval 2401,3000 --work target/fp4 --bench-secs 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bindings", "python", "python", "opsel"))
import train_fastprob as tf  # noqa: E402

SHIPPED = {"cap": 50, "first_gate_n": 1, "last_gate_n": 49, "label_error_pct": 5.0, "features": "ratio+stats",
           "gate_every": 5, "ratio_floor_bps": 1e6, "stop_threshold": 0.5, "target": "linear",
           "gate": "classifier", "stop_error_pct": 5.0}
PARAMS = {"n_estimators": 12, "max_depth": 8, "min_samples_leaf": 3}
UNIT = {"ps": 1e-12, "ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def criterion_time(out):
    """Median of criterion's ``time: [lo mid hi]`` line, in seconds."""
    m = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", out)
    if not m:
        raise SystemExit("no criterion time line in:\n" + out)
    return float(m.group(1)) * UNIT[m.group(2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True, help="JSON-lines transfers, at least up to --eval's end")
    ap.add_argument("--model", required=True, help="the shipped model file")
    ap.add_argument("--eval", default="2401,3000")
    ap.add_argument("--work", required=True, help="scratch folder (the logs file for the bench)")
    ap.add_argument("--bench-secs", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    lo, hi = (int(v) for v in a.eval.split(","))
    logs = tf.load_logs(a.corpus)
    assert len(logs) >= max(hi, 2400), len(logs)
    train, ev = logs[:2400], logs[lo - 1:hi]
    spec = dict(tf.DEFAULT_SPEC, interval_ns=train[0]["interval_ns"], **SHIPPED)
    t0 = time.perf_counter()
    model = tf.train_pairs(train, spec, PARAMS, 0, labels="oof")
    print(f"retrained the shipped configuration on transfers 1-2400 in {time.perf_counter() - t0:.1f} s")
    shipped = json.load(open(a.model))
    mine = json.loads(json.dumps(tf.export(model)))
    same = mine["stages"] == shipped["stages"] and mine["spec"] == shipped["spec"]
    print(f"exported stages and spec equal the shipped file's: {same}")
    if not same:
        raise SystemExit("the retrained model differs from the shipped file; not timing a different model")

    os.makedirs(a.work, exist_ok=True)
    path = os.path.abspath(os.path.join(a.work, f"speed-logs-{lo}-{hi}.jsonl"))
    with open(path, "w") as f:
        for d in ev:
            f.write(json.dumps({"seq": d["seq"], "samples_bps": d["samples_bps"]}) + "\n")

    # scikit-learn, one probe at a time.
    runs = [tf.run_loop(model, [d])[0] for d in ev]
    pushes = sum(r[0] for r in runs)
    gate_evals = sum(sum(1 for n in model["stages"] if n <= r[0] and model["stages"][n].gate is not None)
                     for r in runs)
    sk = min(tf._timed(lambda: [tf.run_loop(model, [d]) for d in ev]) for _ in range(a.repeats))

    env = dict(os.environ, OPSEL_FASTPROB_MODEL=os.path.abspath(a.model), OPSEL_FASTPROB_LOGS=path,
               OPSEL_BENCH_SECS=str(a.bench_secs))
    cmd = ["cargo", "bench", "-p", "opsel", "--bench", "fastprob", "--", "--noplot"]
    print("running:", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stdout + r.stderr)
    print("\n".join(line for line in (r.stdout + r.stderr).splitlines()
                    if "pushes per iteration" in line or "time:" in line or "thrpt:" in line))
    m = re.search(r"(\d+) pushes per iteration", r.stderr + r.stdout)
    rust_pushes = int(m.group(1))
    rs = criterion_time(r.stdout + r.stderr)
    if rust_pushes != pushes:
        raise SystemExit(f"Rust pushed {rust_pushes} samples, scikit-learn's loop stopped after {pushes}")
    n = len(ev)
    print(f"{n} transfers ({lo}-{hi}), {pushes} pushes, {gate_evals} gate evaluations, "
          f"mean probe {pushes / n * 0.1:.2f} s")
    print(f"Rust core:    {rs * 1e3:9.3f} ms for all probes; {rs / n * 1e6:9.2f} us per probe; "
          f"{rs / pushes * 1e9:9.1f} ns per push; {pushes / rs / 1e6:8.2f} M pushes/s")
    print(f"scikit-learn: {sk * 1e3:9.3f} ms for all probes; {sk / n * 1e6:9.2f} us per probe; "
          f"{sk / pushes * 1e9:9.1f} ns per push; {sk / gate_evals * 1e6:9.1f} us per gate evaluation "
          f"(best of {a.repeats})")
    print(f"ratio scikit-learn / Rust: {sk / rs:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
