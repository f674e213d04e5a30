"""Models pooled over the condition grid, scored leave-one-condition-out (LOCO).

One model for every network: the windows of every recorded condition
(``opsel lab collect --plan grid/<mode>``; ``default`` and ``c50`` join them)
go into one DTW K-NN reference set. Its accuracy on a network it has never
seen is estimated the only honest way the grid allows: for every condition,
train on all the others and test on it (LOCO), then report each held-out
condition and the median. 000 trained and tested on one testbed (§8 lists
"sweep BDP and buffer size" as future work); this is that sweep.

The configuration (normalisation, w, radius) is an input here: it was chosen
by nested LOCO on the grid in ``research/generalisation/loco.py``, never on a
condition reported as held out (``docs/results/generalisation.md``).

    python -m opsel.train grid data/collect --mode passive --w 40 --radius 20 \\
        --norm divide-min --out models/passive

``--stage2 z-score`` writes a two-stage model (``core/src/knn/two_stage.rs``) and scores it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os

import numpy as np

from . import knn
from .data import SIX_CLASSES, at_1hz, dataset, find_traces_dir

# The configuration nested LOCO chose for passive windows over the grid
# (research/generalisation/loco.py --nested; docs/results/generalisation.md).
GRID_NORMALIZATION = "divide-min"
GRID_W = 40
GRID_RADIUS = 20


def load_grid(root: str, mode: str, w: int, min_windows: int = 3, exclude=()) -> dict:
    """Every ``root/<condition>/<mode>`` with all six classes and at least
    ``min_windows`` windows of ``w`` in each: {condition: dict(X, y, traces, conditions)}.
    For ``passive``, a condition's ``passive-200ms`` traces are read at 1 Hz and pooled with it."""
    out = {}
    if not os.path.isdir(root):
        raise SystemExit(f"{root} is not a folder of <condition>/<mode>/<class>.csv traces (opsel lab collect --out)")
    for cond in sorted(os.listdir(root)):
        d = os.path.join(root, cond, mode)
        if cond in exclude:
            continue
        traces = find_traces_dir(d) if os.path.isdir(d) else []
        if mode == "passive":
            # Traces recorded every 200 ms join as the 1 Hz series on the same traffic.
            traces += [at_1hz(t) for m in finer_passive(root, cond) for t in find_traces_dir(os.path.join(root, cond, m))]
        if {t.label for t in traces} != set(SIX_CLASSES):
            continue
        X, y = dataset(traces, w)
        counts = [int(np.sum(y == c)) for c in SIX_CLASSES]
        if min(counts) < min_windows:
            continue
        out[cond] = {"X": X, "y": y, "traces": traces, "conditions": traces[0].meta.get("conditions") or {}}
    return out


def finer_passive(root: str, cond: str) -> list[str]:
    """The condition's ``passive-<ms>ms`` folders (``opsel lab collect --mode passive-200ms``)."""
    d = os.path.join(root, cond)
    return sorted(m for m in os.listdir(d) if m.startswith("passive-") and m.endswith("ms")
                  and os.path.isdir(os.path.join(d, m))) if os.path.isdir(d) else []


def ordered(grid: dict) -> list[str]:
    """Condition names by rate, RTT, buffer (the order of every table)."""
    def key(c):
        m = grid[c]["conditions"]
        return (float(m.get("rate_mbps", 0)), float(m.get("rtt_ms", 0)), float(m.get("buffer_bytes", 0)))
    return sorted(grid, key=key)


def capped(X: np.ndarray, y: np.ndarray, cap: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``cap`` windows of each class (recording order), or all of them (``cap`` None)."""
    if cap is None:
        return X, y
    keep = np.zeros(len(y), dtype=bool)
    for c in SIX_CLASSES:
        keep[np.flatnonzero(y == c)[:cap]] = True
    return X[keep], y[keep]


def pooled(grid: dict, names, cap: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The references of conditions ``names``; ``cap`` keeps at most that many windows per class
    and condition, so a condition recorded at length (``default``) weighs like the others and the
    decision cost stays bounded as conditions are added."""
    parts = [capped(grid[c]["X"], grid[c]["y"], cap) for c in names]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def loco(grid: dict, *, w: int, k: int, radius: int | None, norm: str, cap: int | None = None, log=None,
         stage2: str | None = None, stage2_k: int = 1, stage2_weight: float = 0.0, stage1_steps: float = 0.0) -> dict:
    """{held-out condition: evaluate() of the model trained on every other condition (at most
    ``cap`` references per class from each), tested on every window of the held-out one}.
    With ``stage2`` the model is the two-stage one the file will hold (the core's rule: ``norm``
    decides BBR present, ``stage2`` picks the mix on that side)."""
    names = ordered(grid)
    out = {}
    for c in names:
        X, y = pooled(grid, [n for n in names if n != c], cap)
        clf = knn.fit(X, y, k=k, radius=radius, normalization=norm, stage2=stage2, stage2_k=stage2_k,
                      stage2_weight=stage2_weight, stage1_steps=stage1_steps)
        out[c] = knn.evaluate(clf, grid[c]["X"], grid[c]["y"])
        if log:
            log(f"LOCO {c}: 6-class {out[c]['accuracy']:.3f}, "
                f"BBR present {out[c]['views']['bbr_present']['accuracy']:.3f} (n = {out[c]['n']})")
    return out


def _bdp_ratio(m: dict) -> float:
    bdp = float(m["rate_mbps"]) * 1e6 / 8 * float(m["rtt_ms"]) / 1e3
    return float(m["buffer_bytes"]) / bdp


def _grid_rows(grid: dict, names, cap: int | None = None) -> list[dict]:
    rows = []
    for c in names:
        m, y = grid[c]["conditions"], capped(grid[c]["X"], grid[c]["y"], cap)[1]
        rows.append({"condition": c, "rate_mbps": float(m["rate_mbps"]), "rtt_ms": float(m["rtt_ms"]),
                     "buffer_bdp": round(_bdp_ratio(m), 3),
                     "windows_per_class": {cl: int(np.sum(y == cl)) for cl in SIX_CLASSES}})
    return rows


def fit_grid(grid: dict, *, w: int, k: int, radius: int | None, norm: str, probing: str, pattern, loco_rows,
             cap: int | None = None, stage2: str | None = None, stage2_k: int = 1, stage2_weight: float = 0.0,
             stage1_steps: float = 0.0):
    names = ordered(grid)
    X, y = pooled(grid, names, cap)
    training = {
        "source": "opsel lab collect (netlab), pooled over the condition grid",
        "condition": "grid",
        "conditions": _grid_rows(grid, names, cap),
        "max_refs_per_class_and_condition": cap,
        "windows_per_class": {c: int(np.sum(y == c)) for c in SIX_CLASSES},
        "normalization_choice": norm,
        **({"stage2_normalization": stage2} if stage2 else {}),
        **({"stage2_k": stage2_k, "stage2_weight": stage2_weight} if _combined(stage2_k, stage2_weight) else {}),
        **({"stage1_steps": stage1_steps} if stage1_steps else {}),
        "loco": {c: {"six_class": r["accuracy"], "bbr_present": r["views"]["bbr_present"]["accuracy"],
                     "n": r["n"]} for c, r in loco_rows.items()},
        "trained_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return knn.fit(X, y, k=k, radius=radius, normalization=norm, probing=probing, pattern=pattern,
                   training=training, sample_interval_ms=sample_interval_ms(grid), stage2=stage2, stage2_k=stage2_k,
                   stage2_weight=stage2_weight, stage1_steps=stage1_steps), X, y


def _combined(stage2_k: int, stage2_weight: float) -> bool:
    """Whether stage 2 is the combined k-NN (``core/src/knn/combined.rs``) rather than a 1-NN."""
    return stage2_k != 1 or stage2_weight != 0.0


def sample_interval_ms(grid: dict) -> float:
    """The one sample period of every condition's traces (1000 at 000's 1 Hz; 200 for
    ``--mode passive-200ms``); traces at different periods cannot share a model."""
    ms = {t.sample_interval_ms for g in grid.values() for t in g["traces"]}
    if len(ms) != 1:
        raise SystemExit(f"the traces are sampled at different periods {sorted(ms)} ms; train one mode at a time")
    return ms.pop()


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def card(title: str, mode: str, grid: dict, loco_rows: dict, *, w, k, radius, norm, root, out, command,
         cap: int | None = None, stage2: str | None = None, stage2_k: int = 1, stage2_weight: float = 0.0,
         stage1_steps: float = 0.0) -> str:
    names = ordered(grid)
    six = [loco_rows[c]["accuracy"] for c in names]
    bbr = [loco_rows[c]["views"]["bbr_present"]["accuracy"] for c in names]
    X, y = pooled(grid, names, cap)
    lines = [
        f"# Model card: `{os.path.basename(os.path.normpath(out))}` ({title})",
        "",
        f"A {k}-NN DTW background-mix classifier (Sakoe–Chiba radius {radius}, |a−b| cost, per-window "
        f"normalisation **{norm}**) for the six classes of 000 Table 6.1, trained on **every condition of the "
        f"netlab grid at once**, so that it holds on networks it was not recorded on. Feed windows of "
        f"w = {w} RTT samples in ms taken every {sample_interval_ms(grid):g} ms, each the mean of 10 echoes 1 ms "
        f"apart (000 §3.2 samples once a second). Load it with "
        f"`opsel::model::load`, `opsel.load_model`, `opsel_model_load` (C) or `loadModel` (Node).",
        "",
        *([f"**Two stages** (our extension; 000 §3.5 uses one): the 1-NN above decides whether BBR is "
           f"present; a second 1-NN among the references on that side only, each window normalised with "
           f"**{stage2}**, picks the mix (`core/src/knn/two_stage.rs`; the file's `stage2` field, version 2). "
           f"The accuracy below is this two-stage rule's; BBR present is stage 1's.", ""]
          if stage2 and not _combined(stage2_k, stage2_weight) else []),
        *([f"**Two stages** (our extension; 000 §3.5 uses one): the 1-NN above decides whether BBR is "
           f"present; among the references on that side only, a **{stage2_k}-NN** vote picks the mix under "
           f"the combined distance L/s2 + {stage2_weight:g}·D1/s1, L the L1 distance of the windows normalised "
           f"with **{stage2}**, D1 the DTW distance above, s2 and s1 the medians of those distances between "
           f"training references (`core/src/knn/combined.rs`; the file's `stage2` field, version 3). "
           f"The accuracy below is this two-stage rule's; BBR present is stage 1's.", ""]
          if stage2 and _combined(stage2_k, stage2_weight) else []),
        *([f"**Stage 1 reads the steps** (our extension; 000 §3.5 ranks by DTW alone): the 1-NN above"
           + (" (stage 1)" if stage2 else "")
           + f" ranks references by C1 = D1/s1 + {stage1_steps:g}·F/sF, D1 the DTW distance above, F the L1 "
           f"distance between the windows' sorted sample-to-sample steps divided by each raw window's standard "
           f"deviation (the distribution of steps: a sawtooth's slow rises and sharp drops, which DTW's warping "
           f"does not keep), s1 and sF the medians of those distances between training references "
           f"(`core/src/knn/steps.rs`; the file's `stage1_term` field, version 4). Nested LOCO in "
           f"`research/generalisation/percond.py` picked the weight (docs/results/generalisation.md). "
           + ("The BBR-present column below is this stage 1's." if stage2 else "The accuracy below is this rule's."),
           ""] if stage1_steps else []),
        "## Training data",
        "",
        f"`{root}/<condition>/{mode}/` (recorded by `opsel lab collect`; `MANIFEST.md` there gives the runs "
        "and the machine load of each). "
        + ("Every window of every condition below is a reference: " if cap is None else
           f"The first {cap} windows per class of every condition below (recording order) are references: ")
        + f"{len(y)} windows of w = {w} ({', '.join(f'{c} {int(np.sum(y == c))}' for c in SIX_CLASSES)}).",
        "",
        "| condition | rate Mbit/s | RTT ms | buffer × BDP | windows per class |",
        "|---|---|---|---|---|",
    ]
    for r in _grid_rows(grid, names, cap):
        wpc = r["windows_per_class"]
        lines.append(f"| `{r['condition']}` | {r['rate_mbps']:g} | {r['rtt_ms']:g} | {r['buffer_bdp']:.2g} | "
                     f"{min(wpc.values())}–{max(wpc.values())} |")
    lines += [
        "",
        "## Accuracy on a network the model has not seen (leave-one-condition-out)",
        "",
        "For every condition: train on all the others"
        + ("" if cap is None else f" (at most {cap} windows per class from each)")
        + ", test on every window of it.",
        "",
        "| held out | windows | 6-class % | BBR present % |",
        "|---|---|---|---|",
    ]
    for c in names:
        r = loco_rows[c]
        lines.append(f"| `{c}` | {r['n']} | {_pct(r['accuracy'])} | {_pct(r['views']['bbr_present']['accuracy'])} |")
    lines += [
        f"| **median** | | **{_pct(float(np.median(six)))}** | **{_pct(float(np.median(bbr)))}** |",
        "",
        "The targets are 85 % (6-class) and 97 % (BBR present) per held-out condition. Where it falls short "
        "(shallow buffers and short RTTs: at 0.25 × BDP a lone CUBIC and a lone BBR flow hold similar "
        "queues) and what to do about it — `opsel calibrate` records references at your own condition — is "
        "in `docs/results/generalisation.md`.",
        "",
        "## How the configuration was chosen",
        "",
        (f"Normalisation, w and radius were chosen by nested LOCO on the grid (for each held-out condition, "
         f"the representation with the best median LOCO over the remaining conditions; "
         f"`research/generalisation/loco.py --nested`); {norm} won in most folds. w = {w} was chosen over "
         "w = 20 because passive probing keeps the transfer sending (000 Table 6.2), so a longer window costs "
         "decision delay, not throughput, and it gains about 10 points of LOCO accuracy "
         "(`docs/results/generalisation.md`)." if mode == "passive" else
         f"The configuration (normalisation {norm}, w = {w}, radius {radius}, k = {k}) was given on the "
         "command line below, not chosen on these conditions' LOCO scores."),
        *(["", f"The stage-2 settings ({stage2}"
           + (f", k = {stage2_k}, weight {stage2_weight:g}" if _combined(stage2_k, stage2_weight) else "")
           + ") were given on the command line below; the table above scores them, they were not chosen on "
           "it."] if stage2 else []),
        *(["", f"The stage-1 weight ({stage1_steps:g}) was given on the command line below (picked by nested "
           "LOCO in `research/generalisation/percond.py`); the table above scores it, it was not chosen on it."]
          if stage1_steps else []),
        "",
        "## Reproduce",
        "",
        "```sh",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def cmd_grid(a, log) -> None:
    grid = load_grid(a.root, a.mode, a.w, a.min_windows, exclude=set(filter(None, a.exclude.split(","))))
    if len(grid) < 3:
        raise SystemExit(f"{len(grid)} complete conditions under {a.root}/*/{a.mode} with >= {a.min_windows} "
                         f"windows of w = {a.w} per class: need at least 3 for leave-one-condition-out")
    log(f"{len(grid)} conditions: {', '.join(ordered(grid))}")
    if a.stage2 is None and _combined(a.stage2_k, a.stage2_weight):
        raise SystemExit("--stage2-k and --stage2-weight set stage 2 of a two-stage model; give --stage2 z-sorted")
    s2 = {"stage2": a.stage2, "stage2_k": a.stage2_k, "stage2_weight": a.stage2_weight,
          "stage1_steps": a.stage1_steps}
    loco_rows = loco(grid, w=a.w, k=a.k, radius=a.radius, norm=a.norm, cap=a.max_refs, log=log, **s2)
    pattern = (next(iter(grid.values()))["conditions"]).get("pattern")
    clf, X, y = fit_grid(grid, w=a.w, k=a.k, radius=a.radius, norm=a.norm,
                         probing="active" if pattern else "passive", pattern=pattern, loco_rows=loco_rows,
                         cap=a.max_refs, **s2)
    os.makedirs(a.out, exist_ok=True)
    tmp = os.path.join(a.out, "model.json.tmp")
    clf.save(tmp)
    os.replace(tmp, os.path.join(a.out, "model.json"))
    command = (f"python -m opsel.train grid {a.root} --mode {a.mode} --w {a.w} --k {a.k} --radius {a.radius} "
               f"--norm {a.norm} --min-windows {a.min_windows} --out {a.out}"
               + (f" --max-refs {a.max_refs}" if a.max_refs is not None else "")
               + (f" --exclude {a.exclude}" if a.exclude else "")
               + (f" --stage2 {a.stage2}" if a.stage2 else "")
               + (f" --stage2-k {a.stage2_k}" if a.stage2_k != 1 else "")
               + (f" --stage2-weight {a.stage2_weight:g}" if a.stage2_weight != 0.0 else "")
               + (f" --stage1-steps {a.stage1_steps:g}" if a.stage1_steps != 0.0 else ""))
    with open(os.path.join(a.out, "MODEL_CARD.md"), "w") as f:
        f.write(card(a.title or f"{a.mode} probing, condition grid", a.mode, grid, loco_rows, w=a.w, k=a.k,
                     radius=a.radius, norm=a.norm, root=a.root, out=a.out, command=command, cap=a.max_refs,
                     **s2))
    if a.json:
        names = ordered(grid)
        with open(a.json, "w") as f:
            json.dump({"mode": a.mode, "w": a.w, "k": a.k, "radius": a.radius, "normalization": a.norm,
                       "stage2": a.stage2, "stage2_k": a.stage2_k, "stage2_weight": a.stage2_weight,
                       "stage1_steps": a.stage1_steps,
                       "max_refs": a.max_refs, "conditions": _grid_rows(grid, names, a.max_refs),
                       "loco": {c: {"six_class": loco_rows[c]["accuracy"],
                                    "bbr_present": loco_rows[c]["views"]["bbr_present"]["accuracy"],
                                    "n": loco_rows[c]["n"], "confusion": loco_rows[c]["confusion"],
                                    "classes": loco_rows[c]["classes"]} for c in names}}, f, indent=1)
    six = np.median([loco_rows[c]["accuracy"] for c in loco_rows])
    bbr = np.median([loco_rows[c]["views"]["bbr_present"]["accuracy"] for c in loco_rows])
    print(f"wrote {a.out}/model.json ({len(y)} windows of w = {a.w} from {len(grid)} conditions) and MODEL_CARD.md; "
          f"LOCO median 6-class {100 * six:.1f} %, BBR present {100 * bbr:.1f} %")


def add_parser(sub, log) -> None:
    s = sub.add_parser("grid", help="one model pooled over every recorded condition, scored leave-one-condition-out")
    s.add_argument("root", help="folder of <condition>/<mode>/<class>.csv traces (opsel lab collect --out)")
    s.add_argument("--mode", default="passive")
    s.add_argument("--w", type=int, default=GRID_W)
    s.add_argument("--k", type=int, default=1)
    s.add_argument("--radius", type=int, default=GRID_RADIUS)
    s.add_argument("--norm", default=GRID_NORMALIZATION, choices=knn.NORMALIZATIONS)
    s.add_argument("--min-windows", type=int, default=3, help="skip conditions with fewer windows of w in a class")
    s.add_argument("--max-refs", type=int, default=None, metavar="N",
                   help="at most the first N windows per class of each condition as references (LOCO tests "
                        "every window of the held-out condition)")
    s.add_argument("--exclude", default="", help="comma-separated conditions to leave out")
    s.add_argument("--stage2", default=None, choices=knn.STAGE2_NORMALIZATIONS, metavar="NORM",
                   help="a two-stage model: --norm decides BBR present, a 1-NN among that side's references "
                        "with this normalisation picks the mix (file version 2); LOCO scores the two-stage rule. "
                        "Default: one stage")
    s.add_argument("--stage2-k", type=int, default=1, metavar="K",
                   help="stage 2 votes among its K nearest references (needs --stage2 z-sorted; file version 3)")
    s.add_argument("--stage2-weight", type=float, default=0.0, metavar="A",
                   help="stage 2 ranks by L/s2 + A·D1/s1, D1 stage 1's DTW distance, the scales fitted by the core "
                        "(needs --stage2 z-sorted; file version 3). Default 0: stage 2's distance alone")
    s.add_argument("--stage1-steps", type=float, default=0.0, metavar="B",
                   help="the 1-NN of record (stage 1) ranks by D1/s1 + B·F/sF, F the L1 distance of the windows' "
                        "sorted steps over their standard deviation, the scales fitted by the core (file version 4; "
                        "needs --k 1). Default 0: DTW alone")
    s.add_argument("--title", default=None)
    s.add_argument("--json", default=None, help="also write the LOCO table (with confusions) here")
    s.add_argument("--out", required=True, help="model folder (model.json, MODEL_CARD.md)")
    s.set_defaults(fn=lambda a: cmd_grid(a, log))
