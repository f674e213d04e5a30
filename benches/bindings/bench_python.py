"""Binding-overhead bench, Python side: the same loop as
ffi/examples/bench_core.rs through the Python package (bindings/python).

    python3 benches/bindings/bench_python.py DIR [ROUNDS]

Prints "RESULT lang=python median_ns=... checksum=..." or, when the package
or its expected API (load_model(path).classify(ndarray)) is not available,
"SKIP lang=python reason=...". Driven by benches/bindings/run.sh.
"""
import os
import sys
import time


def main():
    if len(sys.argv) < 2:
        print("usage: bench_python.py DIR [ROUNDS]", file=sys.stderr)
        return 2
    d = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    try:
        import opsel  # bindings/python, when built
        import numpy as np

        model = opsel.load_model(os.path.join(d, "model.json"))
        w = int(getattr(model, "window"))
        allq = np.fromfile(os.path.join(d, "queries.f64"), dtype="<f8")
        queries = [np.ascontiguousarray(allq[i * w:(i + 1) * w]) for i in range(200)]
        checksum = 0
        for i, q in enumerate(queries):
            p = model.classify(q)
            cls = getattr(p, "class_index", None)
            if cls is None:
                cls = p["class_index"]
            nb = getattr(p, "neighbor", None)
            if nb is None:
                nb = p["neighbor"]
            checksum += (i + 1) * (int(cls) * 100000 + int(nb))
    except Exception as e:  # the package is optional for this bench
        print(f"SKIP lang=python reason={type(e).__name__}: {e}".replace("\n", " "))
        return 0
    tiny = opsel.load_model(os.path.join(d, "tiny.json"))
    for config, m, reps, s in (("A", model, 1, checksum), ("tiny", tiny, 50, 0)):
        per_call = []
        for _ in range(rounds + 1):
            t = time.perf_counter_ns()
            for _ in range(reps):
                for q in queries:
                    m.classify(q)
            per_call.append((time.perf_counter_ns() - t) / (reps * len(queries)))
        per_call = sorted(per_call[1:])
        print(f"RESULT lang=python config={config} median_ns={per_call[rounds // 2]:.1f} rounds={rounds} checksum={s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
