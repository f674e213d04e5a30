"""FastProb: a deployable early-stopping gate, one the Rust core runs (model format
version 4) with ONE error budget for every network (no family), chosen on transfers
1-4000 only (docs/results/fastprob.md, "A deployable gate: one budget, format version 4").
All levers are our extensions to 004.

Why: the previous round's pick (``spread.py``: ``log:pool16d8:sd+abs`` with budgets
``lan`` 12 % / ``wan`` 4 % / ``shared`` 6 %) needs the caller to know its network family,
which a user does not, and the core could not run it. This round restricts the candidates
to what a deployed prober can run without a family: a uniform budget E (or, for 004's
classifier gate, one threshold), gates the version-4 core runs (per-length or one pooled
forest, inputs optionally extended by the regressor's tree spread ``sd`` and the
absolute-scale input ``abs``).

Same harness and caches as ``spread.py`` (regressors: 12 trees of depth 8, min 3 per leaf,
ratio+stats inputs, 1 Mbit/s floor, log target for the error gates, cap 50, gates every 5
from n = 1; gate labels: out-of-fold regressor errors over 5 time-ordered blocks; the same
seeds): ``spread.py cache --targets log`` (the ``ratio`` target too for the classifier
reference) builds a fold's cache.

**Folds: three expanding windows inside transfers 1-4000.** A: fit 1-2400, score
2401-3000; B: fit 1-3000, score 3001-3600; C: fit 1-3600, score 3601-4000. Each fold's
saving is against its own fixed-n RF curve (``fixed_curve.py --trees 20 --slice test``
with ``--split 1800,2400`` / ``2400,3000`` / ``3000,3600``: fitted on the fold's training
transfers, scored on its evaluated ones; ``results/curve-fold2-2401-3000.jsonl``,
``curve-fresh-3001-3600.jsonl``, ``curve-fresh-3601-4000.jsonl``). No transfer with seq
>= 4000 (transfers 4001-) is read by anything here.

Candidates (``VARIANTS``; ``TARGET:GATE:INPUTS`` as ``spread.py``): the shipped
classifier gate (``ratio:clf:none``, thresholds 0.2-0.9), per-length error gates
(``err8``, ``g11-9-24-0.63``) and pooled error gates (``poolTdD``: one forest of T trees of
depth D for every gate length, n among its inputs) with inputs ``none``, ``abs``, ``sd``,
``sd+abs``. Budgets: E in ``UNI_E`` (3-15 %).

**The rule for picking** (written and committed before the search is run):

1. a candidate is a (variant, C) pair, C in ``CAPS`` (8-10 %), with an estimated file
   <= 2 MB (``spread.est_bytes`` on fold C's cache: the log-target regressors' nodes x
   1.15 plus the gates' nodes x 1.36 at ``levers.py``'s bytes per node; a screen, the
   exported file is measured below);
2. its budget is **cross-fold**: for each fold, E is the budget with the largest mean
   saving over the two OTHER folds among those whose MAPE overall and on every family is
   <= C on both of them; that E is scored on the fold itself (leave one fold out);
3. it is eligible when C <= 9 % (a one-point margin: the margin of ``spread.py``, which
   carried to the next slice) and, on each of the three folds, the cross-fold score has
   MAPE <= 10 % overall and on every family and a defined saving;
4. rank the eligible pairs by whether the cross-fold saving is >= 40 % on all three folds,
   then by the mean of the three cross-fold savings; the top pair is the pick, its budget
   E_joint the one with the largest mean saving whose MAPE overall and on every family is
   <= C on all three folds;
5. the pick is trained on transfers 1-4000 through the trainer (``python -m
   opsel.train fastprob train ... --train-count 4000``), and its exported file must be
   <= 2 000 000 bytes and load in the Rust core; otherwise the next pair in the ranking.

**The rule for shipping** (``heldout_deployable.sh``, once transfers 4001-4600 are all
recorded): the exported pick is scored once on 4001-4600 by the Rust core (``opsel lab
fastprob-eval``), beside the shipped file (Rust core), the shipped configuration refitted
on 1-4000 (``ratio:clf:none`` at 0.5, harness) and the fixed-n RF curve fitted on 1-4000.
It replaces ``models/fastprob-netlab`` only if it meets more of the three goals there
(MAPE <= 10 % overall, <= 10 % on every family, probes >= 40 % shorter than the fixed-n RF
of equal error) than the shipped file does on the same transfers; a tie keeps the shipped
model.

**The pick** (``pick`` on the search output, ``results/deployable-pick-val.txt``):
``log:pool16d8:sd`` (the pooled 16-tree, depth-8 error gate with the regressor's tree spread)
at C = 9 % with one budget E = 4 %: cross-fold savings 27.7 / 29.1 / 34.9 % (mean 30.6 %),
every family <= 9.1 % on every fold; 10 of 65 rows eligible, all pooled gates (the
per-length gates' estimates are 2.15-2.70 MB). Trained on 1-4000 by the trainer its file is
1 641 233 bytes and loads in the core. No row reached 40 %. The shipping rule's score on
4001-4600 is ``heldout_deployable.sh``'s, run once those transfers are recorded.

Run (``W`` a scratch folder)::

    python research/fastprob/slice_corpus.py data/tput-logs/fastprob-100ms --upto 4000 -o $W/corpus4000.jsonl
    for s in 2400,3000 3000,3600 3600,4000; do
        python research/fastprob/spread.py cache --corpus $W/corpus4000.jsonl --split $s \\
            --targets log --out $W/c-${s%,*}.npz
    done
    python research/fastprob/deployable.py search --caches $W/c-2400.npz,$W/c-3000.npz,$W/c-3600.npz \\
        --corpus $W/corpus4000.jsonl --out $W/deployable-search.json
    python research/fastprob/deployable.py pick --out $W/deployable-search.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import levers as lv  # noqa: E402
import spread as sp  # noqa: E402

FAMS = lv.FAMILIES
UNI_E = (3.0, 4.0, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5, 8.0, 9.0, 10.0, 12.0, 15.0)
CAPS = (8.0, 8.5, 9.0, 9.5, 10.0)
MARGIN_CAP = 9.0
SPLITS = [(2400, 3000), (3000, 3600), (3600, 4000)]
HERE = os.path.dirname(__file__)
CURVES = [os.path.join(HERE, "results", f) for f in
          ("curve-fold2-2401-3000.jsonl", "curve-fresh-3001-3600.jsonl", "curve-fresh-3601-4000.jsonl")]

VARIANTS = (
    # per-length error gates (format version 3 runs the first; version 4 the inputs)
    "log:g11-9-24-0.63:none", "log:g11-9-24-0.63:abs", "log:g11-9-24-0.63:sd", "log:g11-9-24-0.63:sd+abs",
    "log:err8:none", "log:err8:sd+abs",
    # one pooled error gate for every gate length (format version 4)
    "log:pool16d8:none", "log:pool16d8:abs", "log:pool16d8:sd", "log:pool16d8:sd+abs",
    "log:pool24d8:sd+abs", "log:pool16d10:sd+abs", "log:pool24d10:sd+abs",
)
# The shipped classifier gate needs the ratio-target cache (``--targets ratio,log``);
# ``search --variants`` adds it when the caches hold it.
REFERENCE = ("ratio:clf:none",)


def worst(r):
    return max(r["mape"], *(r[f] for f in FAMS))


def budgets(gate):
    if gate == "clf":
        return [(f"{t:g}", t) for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    return [(f"E {e:g} %", -np.log(e + 0.5)) for e in UNI_E]


def choose(per_budget, folds, cap_pct):
    """The budget label with the largest mean saving over ``folds`` among those with MAPE
    overall and on every family <= cap_pct on each of them; None if none is."""
    best = None
    for label, rows in per_budget.items():
        rs = [rows[i] for i in folds]
        if any(r["saving"] is None or worst(r) > cap_pct for r in rs):
            continue
        m = float(np.mean([r["saving"] for r in rs]))
        if best is None or m > best[0]:
            best = (m, label)
    return None if best is None else best[1]


def score_variant(folds, variant):
    t0 = time.perf_counter()
    res = [sp.fold_scores(F, variant) for F in folds]
    _, gate, _, _ = sp.parse(variant)
    mb = sp.est_bytes(folds[-1].S, res[-1][0], gate) / 1e6
    per_budget = {}
    for label, thr in budgets(gate):
        per_budget[label] = [lv.summarise(*lv.run(scores, err, thr, sp.GATES), F.S.fam, F.env)
                             for F, (_, scores, err) in zip(folds, res)]
    rows = []
    k = len(folds)
    for cap_pct in CAPS:
        chosen = [choose(per_budget, [j for j in range(k) if j != i], cap_pct) for i in range(k)]
        cross = None if None in chosen else [per_budget[chosen[i]][i] for i in range(k)]
        joint = choose(per_budget, list(range(k)), cap_pct)
        rows.append({"variant": variant, "cap": cap_pct, "est_mb": mb, "budgets_cross": chosen,
                     "folds": cross, "budget_joint": joint,
                     "joint_folds": None if joint is None else per_budget[joint]})
    print(f"{variant}: {time.perf_counter() - t0:.0f} s, est. {mb:.2f} MB", flush=True)
    for r in rows:
        if r["folds"] is None:
            print(f"  C {r['cap']:g}: no budget meets C on two folds", flush=True)
            continue
        print(f"  C {r['cap']:g}: cross {r['budgets_cross']}: " + " | ".join(sp.fmt(x) for x in r["folds"])
              + f"; joint {r['budget_joint']}", flush=True)
    return rows, per_budget


def search(a):
    caches = a.caches.split(",")
    curves = a.curves.split(",") if a.curves else CURVES
    folds = [sp.Fold(c, a.corpus, cv, "log") for c, cv in zip(caches, curves)]
    assert [F.split for F in folds] == SPLITS, [F.split for F in folds]
    out, table = [], {}
    for v in a.variants.split(","):
        if v.startswith("ratio:") and "oof_ratio" not in folds[0].S.c:
            print(f"{v}: skipped (the caches hold the log target only)", flush=True)
            continue
        rows, per_budget = score_variant(folds, v)
        out += rows
        table[v] = per_budget
        json.dump({"rows": out, "per_budget": table}, open(a.out, "w"), indent=1, default=str)
    return 0


def eligible(r):
    """Steps 1-3 of the rule (module docstring)."""
    if r["folds"] is None or r["est_mb"] > 2.0 or r["cap"] > MARGIN_CAP or r["budget_joint"] is None:
        return False
    return all(x["saving"] is not None and worst(x) <= 10.0 for x in r["folds"])


def rank_key(r):
    s = [x["saving"] for x in r["folds"]]
    return (-(min(s) >= 0.40), -float(np.mean(s)))


def pick(a):
    """Step 4 of the rule: the ranking; the top row is the pick."""
    rows = [r for f in a.out.split(",") for r in json.load(open(f))["rows"]]
    ok = sorted((r for r in rows if eligible(r)), key=rank_key)
    print(f"{len(ok)} of {len(rows)} (variant, C) rows eligible")
    for r in ok[: a.top]:
        s = [x["saving"] for x in r["folds"]]
        print(f"mean cross-fold saving {np.mean(s) * 100:.1f} % ({' / '.join(f'{v * 100:.1f}' for v in s)}): "
              f"{r['variant']} C {r['cap']:g}, est. {r['est_mb']:.2f} MB, budget {r['budget_joint']} "
              f"(cross {r['budgets_cross']}); "
              + "; ".join(f"fold {'ABC'[i]} {sp.fmt(x)}" for i, x in enumerate(r["folds"])))
    return 0


def table(a):
    """Markdown rows: per variant, E 5 % on the three folds and the cross-fold rows at C = 9
    and 10 (each fold as MAPE at probe (lan / wan / shared; saving))."""
    d = json.load(open(a.out))

    def one(x):
        sav = "n/a" if x["saving"] is None else f"{x['saving'] * 100:.0f} %"
        return f"{x['mape']:.2f} at {x['probe_s']:.2f} ({x['lan']:.1f} / {x['wan']:.1f} / {x['shared']:.1f}; {sav})"

    by = {}
    for r in d["rows"]:
        by.setdefault(r["variant"], {})[r["cap"]] = r
    for v, caps in by.items():
        pb = d["per_budget"][v]
        first = pb.get("E 5 %") or pb.get("0.5")
        cells = []
        for c in (9.0, 10.0):
            r = caps.get(c)
            if r is None or r["folds"] is None:
                cells.append("no budget meets C")
            else:
                cells.append(" / ".join(one(x) for x in r["folds"]) + f" ({', '.join(str(b) for b in r['budgets_cross'])})")
        j = caps.get(9.0, {}).get("budget_joint") or ""
        mb = next(iter(caps.values()))["est_mb"]
        print(f"| `{v}` | {mb:.2f} | {' / '.join(one(x) for x in first)} | {cells[0]} | {j} | {cells[1]} |")
    return 0


# ---------------------------------------------------------------- the fresh slice


def heldout(a):
    """The harness's score of (variant, budget) rows refitted on the cache's training
    transfers and scored on its evaluated ones (``heldout_deployable.sh``)."""
    F = sp.Fold(a.cache, a.corpus, a.curve, "log")
    out = []
    for spec in a.run:
        variant, label = spec.split("=", 1)
        _, gate, _, _ = sp.parse(variant)
        gates, scores, err = sp.fold_scores(F, variant)
        r = lv.summarise(*lv.run(scores, err, dict(budgets(gate))[label], sp.GATES), F.S.fam, F.env)
        r.update(variant=variant, rule=label, est_mb=sp.est_bytes(F.S, gates, gate) / 1e6)
        out.append(r)
        print(f"harness {variant} [{label}]: {sp.fmt(r)}; lan {r['lan_s']:.2f} s, wan {r['wan_s']:.2f} s, "
              f"shared {r['shared_s']:.2f} s; fixed-n RF equal-error {r['l_eq'] or float('nan'):.2f} s", flush=True)
    json.dump(out, open(a.json, "w"), indent=1, default=str)
    return 0


def core(a):
    """A model file's score by the Rust core (``opsel lab fastprob-eval --json`` on all the
    evaluated transfers and on each family's) against the fixed-n RF curve: MAPE, mean
    probe, per family, the saving and the three goals."""
    from complete import envelope

    env = envelope([json.loads(line) for line in open(a.curve) if line.strip()])

    def fastprob(path):
        return next(r["summary"] for r in json.load(open(path)) if r["method"] == "FastProb")

    r = {"mape": fastprob(a.all)["mape_pct"], "probe_s": fastprob(a.all)["mean_probe_s"]}
    for f, path in zip(FAMS, a.fams.split(",")):
        x = fastprob(path)
        r[f], r[f + "_s"] = x["mape_pct"], x["mean_probe_s"]
    r["l_eq"] = lv.l_eq(env, r["mape"])
    r["saving"] = None if r["l_eq"] is None else 1 - r["probe_s"] / r["l_eq"]
    goals = [r["mape"] <= 10.0, worst(r) <= 10.0, r["saving"] is not None and r["saving"] >= 0.40]
    r["goals"] = sum(goals)
    print(f"core {a.label}: {sp.fmt(r)}; lan {r['lan_s']:.2f} s, wan {r['wan_s']:.2f} s, shared {r['shared_s']:.2f} s; "
          f"fixed-n RF equal-error {r['l_eq'] or float('nan'):.2f} s; goals met {r['goals']} "
          f"(<= 10 %: {goals[0]}, every family <= 10 %: {goals[1]}, saving >= 40 %: {goals[2]})", flush=True)
    if a.json:
        json.dump(dict(r, label=a.label), open(a.json, "w"), indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("search")
    q.add_argument("--caches", required=True, help="folds A, B, C caches (spread.py cache), comma-separated")
    q.add_argument("--curves", help="folds A, B, C fixed-n RF curves (default: the committed results files)")
    q.add_argument("--corpus", required=True, help="transfers 1-4000 (slice_corpus.py --upto 4000)")
    q.add_argument("--out", required=True)
    q.add_argument("--variants", default=",".join(REFERENCE + VARIANTS))
    k = sub.add_parser("pick")
    k.add_argument("--out", required=True)
    k.add_argument("--top", type=int, default=15)
    t = sub.add_parser("table")
    t.add_argument("--out", required=True)
    h = sub.add_parser("heldout")
    h.add_argument("--cache", required=True)
    h.add_argument("--corpus", required=True)
    h.add_argument("--curve", required=True)
    h.add_argument("--run", action="append", required=True, help='VARIANT=LABEL, LABEL "E 5.5 %%" or "0.5"')
    h.add_argument("--json", required=True)
    c = sub.add_parser("core")
    c.add_argument("--label", required=True)
    c.add_argument("--curve", required=True)
    c.add_argument("--all", required=True, help="fastprob-eval --json on all evaluated transfers")
    c.add_argument("--fams", required=True, help="the same on lan, wan, shared, comma-separated")
    c.add_argument("--json")
    a = ap.parse_args()
    return {"search": search, "pick": pick, "table": table, "heldout": heldout, "core": core}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
