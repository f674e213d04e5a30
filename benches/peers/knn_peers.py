"""Per-query 1-NN DTW latency: opsel (Rust core, and through Python) against
dtaidistance, aeon and tslearn on the same data, single thread.

Configurations (foundation issue): A: w=20, 1080 references (6 x 180), 200 queries;
B: w=50, 432 references (6 x 72), 200 queries. Band radius 10, squared local cost
for the peers (their native cost; opsel's search cost is identical in structure).
Data: opsel.synthetic_dataset (synthetic 6-class RTT signatures), seeds 1 and 2.
Prints one table and writes it as Markdown with the ratios measured in this run.

Usage: python benches/peers/knn_peers.py --core-bin target/release/examples/knn_bench_core --out docs/results/knn-bench.md
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import opsel  # noqa: E402

RADIUS = 10
CONFIGS = {"A": (20, 180, 200), "B": (50, 72, 200)}


def per_query(fn, queries, rounds):
    """Median over rounds of (time for all queries / number of queries), in us."""
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(queries)
        out.append((time.perf_counter() - t) / len(queries) * 1e6)
    return statistics.median(out)


def run_config(name, w, per_class, nq, core_bin, rounds):
    classes = list(opsel.SIX_CLASSES)
    X, y = opsel.synthetic_dataset(classes, per_class, w, seed=1)
    Xq, _ = opsel.synthetic_dataset(classes, -(-nq // 6), w, seed=2)
    Xq = Xq[:nq]
    y = np.array(y)
    rows = []

    core = json.loads(subprocess.check_output([core_bin, str(w), str(per_class), str(nq), str(max(rounds, 15))], text=True))
    core_labels = np.array(classes)[core["labels"]]
    rows.append(("opsel (Rust core)", core["median_us_per_query"], core_labels))

    est = opsel.KnnDtw(radius=RADIUS, cost="squared", n_jobs=1).fit(X, y)
    model = est.model_
    rows.append(("opsel (Python, Model.classify)", per_query(lambda qs: [model.classify(q) for q in qs], Xq, rounds),
                 np.array([model.classify(q).label for q in Xq])))

    try:
        from dtaidistance import dtw as ddtw

        both = np.vstack([Xq, X])

        def dtai(qs):
            labels = []
            for i in range(len(qs)):
                d = ddtw.distance_matrix_fast(both, window=RADIUS + 1, block=((i, i + 1), (nq, nq + len(X))),
                                              compact=True, parallel=False)
                labels.append(y[int(np.argmin(d))])
            return labels

        rows.append(("dtaidistance distance_matrix_fast (block)", per_query(dtai, Xq, rounds), np.array(dtai(Xq))))
    except ImportError:
        print("dtaidistance not installed: skipped")

    try:
        from aeon.classification.distance_based import KNeighborsTimeSeriesClassifier as AeonKNN

        clf = AeonKNN(n_neighbors=1, distance="dtw", distance_params={"window": RADIUS / w}, n_jobs=1).fit(X[:, None, :], y)
        clf.predict(Xq[:2, None, :])  # numba JIT warm-up
        rows.append(("aeon KNeighborsTimeSeriesClassifier", per_query(lambda qs: clf.predict(qs[:, None, :]), Xq, max(1, rounds // 3)),
                     clf.predict(Xq[:, None, :])))
    except ImportError:
        print("aeon not installed: skipped")

    try:
        from tslearn.neighbors import KNeighborsTimeSeriesClassifier as TsKNN

        clf = TsKNN(n_neighbors=1, metric="dtw", metric_params={"global_constraint": "sakoe_chiba", "sakoe_chiba_radius": RADIUS},
                    n_jobs=1).fit(X, y)
        clf.predict(Xq[:2])
        rows.append(("tslearn KNeighborsTimeSeriesClassifier", per_query(lambda qs: clf.predict(qs), Xq, max(1, rounds // 3)),
                     clf.predict(Xq)))
    except ImportError:
        print("tslearn not installed: skipped")

    return rows, core["median_us_per_query"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--core-bin", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    md = ["# DTW 1-NN latency: opsel vs peers", "",
          f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"opsel {opsel.__version__}. Single thread, median of rounds, microseconds per query. "
          "Data: `opsel.synthetic_dataset` (synthetic 6-class RTT signatures; not measured traces).",
          "Reproduce: `make bench-peers`.", ""]
    for name, (w, per_class, nq) in CONFIGS.items():
        rows, core_us = run_config(name, w, per_class, nq, args.core_bin, args.rounds)
        peers = [r for r in rows if not r[0].startswith("opsel")]
        fastest = min(peers, key=lambda r: r[1]) if peers else None
        ref_labels = rows[0][2]
        md += [f"## Config {name}: w={w}, {6 * per_class} references, {nq} queries, radius {RADIUS}", "",
               "| implementation | us/query | vs opsel core | 1-NN labels equal to opsel core |", "|---|---:|---:|---:|"]
        for label, us, labels in rows:
            agree = float(np.mean(np.asarray(labels) == ref_labels))
            md.append(f"| {label} | {us:.1f} | {us / core_us:.1f}x | {agree:.3f} |")
        if fastest:
            md += ["", f"opsel core is **{fastest[1] / core_us:.1f}x** faster than the fastest peer ({fastest[0]})."]
        md.append("")
    text = "\n".join(md)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
