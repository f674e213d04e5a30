"""``python -m opsel_eval`` (run with ``research/ops`` on ``PYTHONPATH``, as the make
targets do): the evaluation studies of the background-mix classifier and of OPS on
traces recorded by ``opsel lab collect``. They read models and traces; they ship in no
package. Fitting and exporting models stays in ``python -m opsel.train`` (``fit``,
``models``, ``grid``, ``extend``).

Commands::

    diagnose ROOT -c default -m active-s5c5s5b5   why active errs: alignment, per-segment RTT, background goodput
    cycles ROOT -c default -m active-s5c5s5b5     classify from several pattern cycles
    ops-cycles ROOT -c default -m active-s5c5s5b5 the OPS controller's cycles=n decision vs ``cycles``
    gated ROOT -c default -m active-s5c5s5b5      margin-gated probing
    gated-live LOG.jsonl --model M                the margin gate on live probes
    learning ROOT -c default -m active-s5c5s5b5   CV accuracy vs windows per class (learning curve)
    report MODELS --out docs/results/classifier-tables.md   every table behind docs/results/classifier.md

ROOT holds ``<condition>/<mode>/<class>.csv`` (+ ``.json`` side-cars).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import numpy as np

from opsel.train import classifier, knn
from opsel.train.__main__ import SHIPPED, _ints, _log, _radii, _strs, _traces
from opsel.train.data import dataset, find_traces, find_traces_dir, summary, trace_windows

from . import cycles, diagnose, gated, learning, ops_cycles, plots


def cmd_diagnose(a):
    act = _traces(a.root, a.condition, a.mode)
    pas = find_traces(a.root, a.condition, a.passive_mode)
    rep = diagnose.report(act, pas)
    print("\n".join(diagnose.markdown(rep)))
    if a.plot:
        plots.segment_profile(rep["profile"], a.plot, title=f"{a.condition}/{a.mode}: median RTT excess per phase")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1, default=float)


def cmd_cycles(a):
    tr = _traces(a.root, a.condition, a.mode)
    rows = []
    for folding in _strs(a.folding):
        rows += cycles.cv_cycles(tr, _ints(a.ns), normalization=a.norm, radius=a.radius, folding=folding,
                                 folds=a.folds, seed=a.seed, log=_log)
    print("| folds | n cycles | w (s) | blocks/class | decision | accuracy | BBR present | heterogeneous |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['folding']} | {r['n_cycles']} | {r['w']} | {r['per_class']} | {r['decision']} | "
              f"{100 * r['accuracy']:.1f} % | {100 * r['views']['bbr_present']['accuracy']:.1f} % | "
              f"{100 * r['views']['heterogeneous']['accuracy']:.1f} % |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_ops_cycles(a):
    tr = _traces(a.root, a.condition, a.mode)
    if a.export_folds:
        ops_cycles.export_folds(tr, a.export_folds, _ints(a.ns), folds=a.folds, seed=a.seed)
        _log(f"wrote {a.export_folds}")
        return
    if a.golden:
        fx = ops_cycles.write_golden(tr, a.golden, n=a.golden_cycles, normalization=a.norm, radius=a.radius)
        _log(f"wrote {a.golden}: {len(fx['queries'])} queries of {fx['cycles']} cycles, "
             f"{len(fx['reference_labels'])} references")
        return
    rows = []
    for folding in _strs(a.folding):
        rows += ops_cycles.evaluate(tr, _ints(a.ns), normalization=a.norm, radius=a.radius, folding=folding,
                                    folds=a.folds, seed=a.seed, log=_log)
    print("\n".join(ops_cycles.markdown(rows)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_gated(a):
    tr = _traces(a.root, a.condition, a.mode)
    rows = []
    for norm in _strs(a.norms):
        for folding in _strs(a.folding):
            rows += gated.evaluate(tr, max_windows=a.max_windows, taus=[float(x) for x in _strs(a.taus)], w=a.w,
                                   normalization=norm, radius=a.radius, folds=a.folds, seed=a.seed,
                                   folding=folding, check=a.check, log=_log)
    print(f"{a.condition}/{a.mode}: decide after window i of up to {a.max_windows} (w = {rows[0]['w'] if rows else a.w}) "
          "once the min-sum margin reaches τ; 1-NN DTW")
    _emit(gated.markdown(rows), rows, a.json)


def cmd_gated_live(a):
    classes = json.loads(pathlib.Path(a.model).read_text())["classes"]
    lines = []
    for path in a.jsonl:
        lines += [json.loads(x) for x in pathlib.Path(path).read_text().splitlines() if x.strip()]
    probes = gated.live_probes(lines, classes)
    if not probes:
        sys.exit("no probes with per-window margins in these files: record them with "
                 "`opsel demo --fg ops --bg cubic,bbr --cycles N --extend-below 1 --json F`")
    rows = gated.replay_live(probes, taus=[float(x) for x in _strs(a.taus)])
    full = sum(p["complete"] for p in probes)
    decided = sum(p["decided"] for p in probes)
    print(f"{len(probes)} live probes ({decided} decided, {full} with all windows logged) from {len(lines)} runs; "
          "decision = stump on the background (class minus the transfer's own flow)")
    _emit(gated.live_markdown(rows), {"rows": rows, "probes": probes}, a.json)


def _emit(table: list[str], rows, json_path: str | None) -> None:
    """Print a blank line and a markdown table; write the rows as JSON if asked."""
    print("")
    print("\n".join(table))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_learning(a):
    tr = _traces(a.root, a.condition, a.mode)
    rows = learning.learning_curve(tr, ws=_ints(a.ws), sizes=_ints(a.sizes) if a.sizes else None, ks=_ints(a.ks),
                                   radii=_radii(a.radii), normalization=a.norm, seeds=_ints(a.seeds),
                                   folds=a.folds, log=_log)
    print(f"{a.condition}/{a.mode}: stratified {a.folds}-fold CV, mean ± sd over fold seeds {a.seeds}; "
          "the first n windows of each class in recording order")
    _emit(learning.markdown(rows), rows, a.json)
    if a.plot:
        plots.learning_curve(rows, a.plot, title=f"{a.condition}/{a.mode}: CV accuracy vs windows per class")


def _pct(x):
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{100 * x:.1f}"


def cmd_report(a):
    """Every table behind docs/results/classifier.md, as markdown (plus JSON)."""
    from opsel import plot

    out = []
    allrows = {}
    ws = _ints(a.ws)
    norms = list(knn.NORMALIZATIONS)
    P = lambda *x: out.append(" ".join(str(v) for v in x))  # noqa: E731
    P(f"<!-- generated by: PYTHONPATH=research/ops python -m opsel_eval report {a.models} --out {a.out} -->")
    P("")
    sets = {}
    only = set(_strs(a.only)) if a.only else None
    for m in SHIPPED:
        if m.traces_of or (only and m.name not in only):
            continue
        name, title = m.name, m.title
        tr = find_traces_dir(os.path.join(a.models, name, "traces", a.condition))
        if len(tr) == 6:
            sets[name] = (tr, title)
    for name, (tr, title) in sets.items():
        P(f"## {title} ({a.condition})")
        P("")
        P("Data: " + ", ".join(f"{s['label']} {s['windows']}" for s in summary(tr, 20)) + " windows of w = 20.")
        P("")
        # k = 1 for every normalisation, k = 3/5/10 without normalisation: every cell the tables show, no more.
        rows = knn.sweep(tr, ws=ws, ks=(1,), radii=(10,), normalizations=norms, log=_log)
        rows += knn.sweep(tr, ws=ws, ks=(3, 5, 10), radii=(10,), normalizations=("none",), log=_log)
        base = classifier.sweep_baselines(tr, ws=_ints(a.baseline_ws), normalization="none", log=_log) if a.baselines else []
        allrows[name] = {"knn": rows, "baselines": base}
        get = lambda model, w, norm="none", k=1: next((r for r in rows + base if r["w"] == w and r["normalization"] == norm  # noqa: E731
                                                        and (r["model"] == model or (model == "knn" and r.get("k") == k))), None)
        P("### 6-class accuracy vs w (stratified 5-fold CV, radius 10, no normalisation)")
        P("")
        P("| w | windows/class | 1-NN | 3-NN | 5-NN | 10-NN | MLP | RBF SVM | GNB | 1-NN BBR present | 1-NN heterogeneous |")
        P("|---|---|---|---|---|---|---|---|---|---|---|")
        for w in ws:
            r1 = get("knn", w)
            if r1 is None:
                continue
            cells = [_pct(get("knn", w, k=k)["accuracy"]) if get("knn", w, k=k) else "–" for k in (1, 3, 5, 10)]
            cells += [_pct(get(m, w)["accuracy"]) if get(m, w) else "–" for m in ("mlp", "svm", "gnb")]
            P(f"| {w} | {r1['per_class']} | " + " | ".join(cells) +
              f" | {_pct(r1['views']['bbr_present']['accuracy'])} | {_pct(r1['views']['heterogeneous']['accuracy'])} |")
        P("")
        P("### 1-NN accuracy vs w per normalisation (radius 10)")
        P("")
        P("| w | " + " | ".join(norms) + " |")
        P("|---" * (len(norms) + 1) + "|")
        for w in ws:
            if get("knn", w) is None:
                continue
            P(f"| {w} | " + " | ".join(_pct(get("knn", w, n)["accuracy"]) for n in norms) + " |")
        P("")
        rad = knn.sweep(tr, ws=(20, 60), ks=(1,), radii=(0, 2, 5, 10, 20, None), normalizations=("none",))
        allrows[name]["radius"] = rad
        P("### Band radius (1-NN, no normalisation; radius 0 = no warping, the L1 distance)")
        P("")
        radii = list(dict.fromkeys(r["radius"] for r in rad))
        P("| w | " + " | ".join("none (full DTW)" if r is None else str(r) for r in radii) + " |")
        P("|---" * (len(radii) + 1) + "|")
        for w in (20, 60):
            rr = [r for r in rad if r["w"] == w]
            if rr:
                P(f"| {w} | " + " | ".join(_pct(r["accuracy"]) for r in rr) + " |")
        P("")
        for wq in (20, 60):
            rq = get("knn", wq)
            if not rq:
                continue
            P(f"### Per-class precision / recall / F1 at w = {wq} (1-NN, radius 10, none; {rq['per_class']} windows/class)")
            P("")
            P("| class | precision | recall | F1 | support |")
            P("|---|---|---|---|---|")
            for m in rq["metrics"]:
                P(f"| {m['class']} | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['support']} |")
            for view in ("bbr_present", "heterogeneous"):
                v = rq["views"][view]
                P(f"| {view}: yes | {v['metrics'][1]['precision']:.3f} | {v['metrics'][1]['recall']:.3f} | "
                  f"{v['metrics'][1]['f1']:.3f} | {v['metrics'][1]['support']} |")
            P("")
            P("Confusion (rows true, columns predicted, " + ", ".join(rq["classes"]) + "): `" + json.dumps(rq["confusion"]) + "`")
            P("")
        r20 = get("knn", 20)
        if r20 and a.figures:
            os.makedirs(a.figures, exist_ok=True)
            plot.confusion(r20["confusion"], r20["classes"], os.path.join(a.figures, f"classifier-{name}-confusion.png"),
                           title=f"{title}: w=20, 1-NN: {_pct(r20['accuracy'])} %")
            plot.accuracy_vs_w([r for r in rows if r.get("k") == 1 and r["normalization"] == "none"] + base,
                               os.path.join(a.figures, f"classifier-{name}-accuracy.png"),
                               key=("model",), title=f"{title}: 5-fold CV accuracy vs w")
        if tr[0].pattern_len and a.cycles:
            _report_cycles(P, a, name, title, tr, allrows)
            ptr = find_traces_dir(os.path.join(a.models, "passive", "traces", a.condition))
            rep = diagnose.report(tr, ptr)
            allrows[name]["diagnose"] = rep
            P(f"### Diagnosis: alignment, per-segment RTT, background goodput ({title})")
            P("")
            for line in diagnose.markdown(rep):
                P(line.replace("### ", "#### "))
            if a.figures:
                plots.segment_profile(rep["profile"], os.path.join(a.figures, f"classifier-{name}-segments.png"),
                                     title=f"{title} ({a.condition}): median RTT excess per phase")
    for gname, gtitle, gws in (("passive", "passive", (20,)), ("active-s5c5s5b5", "active S5-C5-S5-B5", (20, 60))):
        pt = find_traces_dir(os.path.join(a.models, gname, "traces", a.condition))
        pc = find_traces_dir(os.path.join(a.models, gname, "traces", a.other))
        if len(pt) != 6 or len(pc) != 6 or (only and gname not in only):
            continue
        for gw in gws:
            nb = min(len(trace_windows(t, gw)) for t in pc)
            if nb < 1:
                continue
            P(f"## Generalisation ({gtitle}, train on one condition, test on the other; w = {gw}, 1-NN, radius 10)")
            P("")
            P("Data: " + a.other + ": " + ", ".join(f"{s['label']} {s['windows']}" for s in summary(pc, gw))
              + f" windows of w = {gw}; both sides balanced to their smallest class.")
            P("")
            P("| normalisation | " + f"{a.condition} → {a.other} | BBR present | {a.other} → {a.condition} | BBR present | mean | "
              + f"CV within {a.other} |")
            P("|---|---|---|---|---|---|---|")
            gen = []
            for n in norms:
                ab = knn.generalise(pt, pc, w=gw, normalizations=(n,))[0]
                ba = knn.generalise(pc, pt, w=gw, normalizations=(n,))[0]
                X, y = dataset(pc, gw, balance=True)
                cv = knn.cv_knn(X, y, normalization=n) if nb >= 5 else None
                gen.append({"normalization": n, "w": gw, "ab": ab, "ba": ba, "cv_other": cv})
                P(f"| {n} | {_pct(ab['accuracy'])} (n={ab['n']}) | {_pct(ab['views']['bbr_present']['accuracy'])} | "
                  f"{_pct(ba['accuracy'])} (n={ba['n']}) | {_pct(ba['views']['bbr_present']['accuracy'])} | "
                  f"{_pct((ab['accuracy'] + ba['accuracy']) / 2)} | {_pct(cv['accuracy']) if cv else '–'} |")
            allrows["generalisation" if gname == "passive" and gw == 20 else f"generalisation-{gname}-w{gw}"] = gen
            P("")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(allrows, f, indent=1, default=float)
    print(f"wrote {a.out}")



def _report_cycles(P, a, name, title, tr, allrows):
    """Multi-cycle table: 1-NN on the n·P window vs per-cycle min-sum vs vote, both foldings."""
    ns = _ints(a.cycle_ns)
    res = []
    for norm, radius in (("none", 10), ("none", 0), ("divide-min", 10)):
        _, _, _, cyc = cycles.cycle_blocks(tr, 1)
        Dc = cycles.pairwise_dtw(cyc, radius=radius, normalization=norm)
        for folding in cycles.FOLDINGS:
            res += cycles.cv_cycles(tr, ns, normalization=norm, radius=radius, folding=folding, log=_log,
                                    cycle_distances=Dc)
    allrows[name]["cycles"] = res
    Pn = tr[0].pattern_len
    P(f"### Several cycles per decision ({title}; 1-NN DTW; blocks of n cycles, balanced per class)")
    P("")
    P("`window`: 1-NN on the n·P-sample window (a shipped model with w = n·P). `min-sum`: each cycle of the query "
      "is matched against every reference cycle, the class with the smallest sum of per-cycle nearest distances wins. "
      "`vote`: majority of per-cycle 1-NN. Folds: `stratified` = random 20 % of each class's blocks; `runs` = whole "
      "recording runs held out (a session never seen in training).")
    P("")
    P("| normalisation | radius | folds | n cycles (s) | blocks/class | window | min-sum | vote | min-sum BBR present |")
    P("|---|---|---|---|---|---|---|---|---|")
    for norm, radius in (("none", 10), ("none", 0), ("divide-min", 10)):
        for folding in cycles.FOLDINGS:
            for n in ns:
                got = {r["decision"]: r for r in res if r["normalization"] == norm and r["radius"] == radius
                       and r["folding"] == folding and r["n_cycles"] == n}
                if not got:
                    continue
                any_r = next(iter(got.values()))
                cell = lambda d: _pct(got[d]["accuracy"]) if d in got else "–"  # noqa: E731
                P(f"| {norm} | {radius} | {folding} | {n} ({n * Pn}) | {any_r['per_class']} | {cell('window')} | "
                  f"{cell('min-sum')} | {cell('vote')} | "
                  f"{_pct(got['min-sum']['views']['bbr_present']['accuracy']) if 'min-sum' in got else '–'} |")
    P("")
    best = max((r for r in res if r["decision"] == "min-sum" and r["folding"] == "stratified"),
               key=lambda r: (r["accuracy"], -r["n_cycles"]), default=None)
    if best:
        P(f"Best stratified min-sum: {_pct(best['accuracy'])} % at n = {best['n_cycles']} ({best['normalization']}, "
          f"radius {best['radius']}); confusion ({', '.join(best['classes'])}): `{json.dumps(best['confusion'])}`")
        P("")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m opsel_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("diagnose", help="active traces: window alignment, per-segment RTT, background goodput")
    s.add_argument("root")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("-m", "--mode", default="active-s5c5s5b5")
    s.add_argument("--passive-mode", default="passive", help="mode folder of the passive traces to compare with")
    s.add_argument("--plot", help="segment-profile PNG")
    s.add_argument("--json")
    s.set_defaults(fn=cmd_diagnose)

    s = sub.add_parser("cycles", help="active: classify from n pattern cycles (window vs min-sum vs vote)")
    s.add_argument("root")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("-m", "--mode", default="active-s5c5s5b5")
    s.add_argument("--ns", default="1,2,3,4,5")
    s.add_argument("--norm", default="none")
    s.add_argument("--radius", type=int, default=10)
    s.add_argument("--folding", default="stratified,runs")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json")
    s.set_defaults(fn=cmd_cycles)

    s = sub.add_parser("gated", help="margin-gated probing: extend a probe by a window only when unsure")
    s.add_argument("root")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("-m", "--mode", default="passive")
    s.add_argument("--w", type=int, default=20, help="window of passive traces (active: the pattern period)")
    s.add_argument("--max-windows", type=int, default=3)
    s.add_argument("--taus", default=",".join(str(t) for t in gated.TAUS), help="margins; > 1 = never stop early")
    s.add_argument("--norms", default="none")
    s.add_argument("--radius", type=int, default=10)
    s.add_argument("--folding", default="runs,stratified")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--check", type=int, default=2, help="test blocks per fold replayed through the Rust controller")
    s.add_argument("--json")
    s.set_defaults(fn=cmd_gated)

    s = sub.add_parser("gated-live", help="replay the margin gate on live probes logged by `opsel demo --json`")
    s.add_argument("jsonl", nargs="+", help="opsel demo --json files (OPS, static BG, --cycles N)")
    s.add_argument("--model", default="models/passive-netlab/model.json", help="the model the runs used (class names)")
    s.add_argument("--taus", default=",".join(str(t) for t in gated.TAUS), help="margins; > 1 = never stop early")
    s.add_argument("--json")
    s.set_defaults(fn=cmd_gated_live)

    s = sub.add_parser("ops-cycles", help="run the OPS controller with cycles=n over the cycles folds; compare")
    s.add_argument("root")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("-m", "--mode", default="active-s5c5s5b5")
    s.add_argument("--ns", default="1,2,3,4,5")
    s.add_argument("--norm", default="none")
    s.add_argument("--radius", type=int, default=10)
    s.add_argument("--folding", default="stratified,runs")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json")
    s.add_argument("--golden", help="write the Rust cross-check fixture here instead of evaluating")
    s.add_argument("--golden-cycles", type=int, default=3)
    s.add_argument("--export-folds", help="write the blocks and folds (numpy only) for core/tests/ops_cycles_traces.rs")
    s.set_defaults(fn=cmd_ops_cycles)

    s = sub.add_parser("learning", help="CV accuracy vs windows per class (the first n of each class)")
    s.add_argument("root")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("-m", "--mode", default="active-s5c5s5b5")
    s.add_argument("--ws", default="20,60")
    s.add_argument("--sizes", help="windows per class to try (default: 6 steps up to the smallest class)")
    s.add_argument("--ks", default="1")
    s.add_argument("--radii", default="10")
    s.add_argument("--norm", default="none")
    s.add_argument("--seeds", default="0,1,2", help="fold-assignment seeds; the table shows mean ± sd")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--json")
    s.add_argument("--plot", help="learning-curve PNG")
    s.set_defaults(fn=cmd_learning)

    s = sub.add_parser("report", help="all evaluation tables as markdown (docs/results)")
    s.add_argument("models", nargs="?", default="models")
    s.add_argument("-c", "--condition", default="default")
    s.add_argument("--other", default="c50")
    s.add_argument("--ws", default=",".join(map(str, knn.W_SWEEP)))
    s.add_argument("--no-baselines", dest="baselines", action="store_false")
    s.add_argument("--baseline-ws", default=",".join(map(str, knn.W_SWEEP)), help="w values for the MLP/SVM/GNB baselines")
    s.add_argument("--only", help="comma list of shipped model folders to report on (e.g. to run passive and active in parallel)")
    s.add_argument("--cycle-ns", default="1,2,3,4,5", help="cycles per decision for the multi-cycle table (active)")
    s.add_argument("--no-cycles", dest="cycles", action="store_false", help="skip the multi-cycle table and diagnosis")
    s.add_argument("--out", default="docs/results/classifier-tables.md")
    s.add_argument("--json")
    s.add_argument("--figures", help="folder for confusion / accuracy PNGs")
    s.set_defaults(fn=cmd_report)

    a = p.parse_args(argv)
    a.fn(a)


if __name__ == "__main__":
    main()
