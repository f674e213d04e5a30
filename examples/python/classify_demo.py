"""opsel demo: recognise the background traffic mix from RTT windows and pick a CCA.

Until the OPS transfer on the emulated WAN lands (`make demo` will then run it),
this trains the DTW K-NN classifier of document 000 on synthetic 6-class RTT
signatures, cross-validates it, saves it as a model file, reloads it, and
classifies fresh windows with the 000 decision stump (BBR present -> bbr, else cubic).

Run: python examples/python/classify_demo.py [--per-class N] [--w W] [--out DIR]
"""

import argparse
import os
import tempfile
import time

import numpy as np

import opsel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-class", type=int, default=120, help="training windows per class")
    ap.add_argument("--w", type=int, default=20, help="window length in 1 Hz samples (000: 20)")
    ap.add_argument("--out", default=None, help="directory for the model file (default: a temporary one)")
    args = ap.parse_args()

    classes = list(opsel.SIX_CLASSES)
    X, y = opsel.synthetic_dataset(classes, args.per_class, args.w, seed=1)
    yi = [classes.index(label) for label in y]
    print(f"opsel {opsel.__version__}: {len(X)} synthetic windows of w={args.w} "
          f"({args.per_class} per class: {', '.join(classes)})")

    t = time.perf_counter()
    cv = opsel.cross_validate(X, yi, classes, k=1, radius=10, folds=5, seed=7)
    print(f"5-fold CV, 1-NN DTW (radius 10): mean accuracy {cv['mean_accuracy']:.3f} "
          f"(folds {', '.join(f'{a:.3f}' for a in cv['fold_accuracy'])}) in {time.perf_counter() - t:.2f} s")
    conf = cv["confusion"]
    print("confusion matrix (rows = truth):")
    print("        " + " ".join(f"{c:>6}" for c in classes))
    for c, row in zip(classes, conf):
        print(f"  {c:>5} " + " ".join(f"{v:>6d}" for v in row))
    bbr = np.array([opsel.parse_mix(c)["bbr_present"] for c in classes])
    grouped = np.array([[conf[np.ix_(bbr == t, bbr == p)].sum() for p in (False, True)] for t in (False, True)])
    print(f"'BBR present' view: accuracy {np.trace(grouped) / grouped.sum():.3f}")

    model = opsel.Model.fit(X, yi, classes, training={"source": "synthetic (opsel.synthetic_dataset)", "seed": 1})
    out = args.out or tempfile.mkdtemp(prefix="opsel-demo-")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.json")
    model.save(path)
    model = opsel.load_model(path)
    print(f"saved and reloaded {model!r} from {path}")

    Xq, yq = opsel.synthetic_dataset(classes, 3, args.w, seed=99)
    t = time.perf_counter()
    preds = model.classify_batch(Xq)
    dt = (time.perf_counter() - t) / len(Xq)
    print(f"classifying {len(Xq)} fresh windows ({dt * 1e6:.0f} us per window, batch on all cores):")
    for p, truth in zip(preds, yq):
        cca = "bbr" if p.bbr_present else "cubic"
        mark = "ok " if p.label == truth else "MISS"
        print(f"  {mark} truth {truth:>5}  predicted {p.label:>5}  distance {p.distance:8.1f}  -> use {cca}")
    correct = sum(p.label == t for p, t in zip(preds, yq))
    print(f"{correct}/{len(Xq)} correct")


if __name__ == "__main__":
    main()
