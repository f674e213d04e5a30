#!/usr/bin/env python3
"""Live DPS on netlab's dumbbell (002 §5.3, §5.4), time-scaled: fairness of
two DPS flows with and without the fairness manager (Fig 5.8), and learning
time against p (Fig 5.4).

Each run is one `opsel fair lab` (root): a netlab dumbbell at 10 Mbit/s,
40 ms base RTT, 1 x BDP drop-tail, one `opsel send --dps` per pair. Runs are
resumable: a run directory that already holds summary.json is not run again,
only re-read. Results (per run and aggregated: medians and spreads) go to
one JSON file.

    python3 research/dps/live_dps.py fairness --repeats 5 --out target/dps-live
    python3 research/dps/live_dps.py learning --repeats 5 --out target/dps-live
    python3 research/dps/live_dps.py report --out target/dps-live

The aggregate JSON is written to research/dps/results/ (see --json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OPSEL = ROOT / "target" / "release" / "opsel"

# 002 Table 5.3 (fairness) and Table 5.2 (learning), before time scaling.
RTT_5_3 = [0, 350, 0, 450]
RTT_5_2 = [0, 300, 0, 350]
TPUT = [9.5, None, 8, None]


def spec(ccas, rtt_range, p_learning, p_learnt):
    return {
        "ccas": ccas,
        "metrics": [
            {"metric": "rtt_ms", "range": rtt_range, "priority": 0.4},
            {"metric": "throughput_mbps", "range": TPUT, "priority": 0.6},
        ],
        "exploration": {"p_learning": p_learning, "p_learnt": p_learnt},
        "selection_period_ms": 60000,
        "random_period_ms": 30000,
        "guard": {"ms": 10000, "rtts": 0},
        "seed": 0,
    }


def lab(run_dir, spec_obj, extra, managed, duration, seed, scale, until_learnt=False):
    if (run_dir / "summary.json").exists():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_file = run_dir / "spec.in.json"
    spec_file.write_text(json.dumps(spec_obj))
    cmd = [str(OPSEL), "fair", "lab", "--spec", str(spec_file), "--extra-rtt-ms",
           ",".join(str(x) for x in extra), "--duration", str(duration), "--seed", str(seed),
           "--time-scale", str(scale), "--out", str(run_dir)]
    if managed:
        cmd.append("--managed")
    if until_learnt:
        cmd.append("--until-learnt")
    print(" ".join(cmd[1:]), file=sys.stderr, flush=True)
    subprocess.run(["nice", "-n", "10"] + cmd, check=False,
                   timeout=duration * len(extra) + 900)


def lines(p, kind):
    out = []
    if not p.exists():
        return out
    for l in p.read_text().splitlines():
        try:
            v = json.loads(l)
        except ValueError:
            continue
        if v.get("kind") == kind:
            out.append(v)
    return out


def jain(xs):
    s = sum(xs)
    q = sum(x * x for x in xs)
    return 1.0 if q == 0 else s * s / (len(xs) * q)


def fairness_of(run_dir, bin_s):
    """Jain's index of the flows' acknowledged rates, per bin of `bin_s`
    seconds in which every flow sent for the whole bin, averaged (002 §5.4:
    observations start once both flows coexist); also Jain of the flows'
    mean rates over their overlap."""
    flows = sorted(run_dir.glob("send*.dps.jsonl"))
    samples = [[(s["at_ns"], s["delivery_rate_mbps"] or 0.0) for s in lines(f, "dps_sample")]
               for f in flows]
    if len(samples) < 2 or any(len(s) < 10 for s in samples):
        return None
    start = max(s[0][0] for s in samples)
    end = min(s[-1][0] for s in samples)
    if end - start < 5 * bin_s * 1e9:
        return None
    nb = int((end - start) // (bin_s * 1e9))
    per = []
    for s in samples:
        sums = [0.0] * nb
        cnt = [0] * nb
        for t, r in s:
            b = int((t - start) // (bin_s * 1e9))
            if 0 <= b < nb:
                sums[b] += r
                cnt[b] += 1
        per.append([x / c if c else None for x, c in zip(sums, cnt)])
    js = [jain([p[b] for p in per]) for b in range(nb) if all(p[b] is not None for p in per)]
    # Which CCA each flow ran in each bin (from its samples): Jain in bins
    # where the flows ran the same CCA and where they ran different ones.
    ccas = []
    for f in flows:
        c = [None] * nb
        for x in lines(f, "dps_sample"):
            b = int((x["at_ns"] - start) // (bin_s * 1e9))
            if 0 <= b < nb:
                c[b] = x["cca"]
        ccas.append(c)
    same, mixed = [], []
    for b in range(nb):
        if any(p[b] is None for p in per) or any(c[b] is None for c in ccas):
            continue
        (same if len({c[b] for c in ccas}) == 1 else mixed).append(jain([p[b] for p in per]))
    means = [statistics.fmean([x for x in p if x is not None]) for p in per]
    cmds = [lines(f.with_name(f.name), "fair_command") for f in flows]
    violations = sum(1 for c in cmds for x in c if x["command"]["cmd"] == "violation")
    final = []
    for f in flows:
        sets = lines(f, "dps_set_cca")
        final.append(sets[-1]["cca"] if sets else None)
    return {
        "jain_binned": statistics.fmean(js),
        "jain_of_means": jain(means),
        "mean_rates_mbps": means,
        "overlap_s": (end - start) / 1e9,
        "bins": len(js),
        "violations": violations,
        "final_ccas": final,
        "mixed_fraction": len(mixed) / max(1, len(same) + len(mixed)),
        "jain_same_cca": statistics.fmean(same) if same else None,
        "jain_mixed_cca": statistics.fmean(mixed) if mixed else None,
    }


def learning_of(run_dir):
    f = run_dir / "send0.dps.jsonl"
    ends = lines(f, "dps_end")
    if not ends:
        return None
    st = ends[-1]["stats"]
    # Net utility (002 §5.3): binary utilities of the periods closed by the
    # end of learning.
    evs = [e["event"] for e in lines(f, "dps_event")]
    util = 0
    for e in evs:
        if e["kind"] == "learnt":
            break
        if e["kind"] == "period_closed":
            util += 1 if e["satisfied"] else 0
    return {
        "learnt": st.get("learnt_at_ns") is not None,
        "learning_time_s": st["learnt_at_ns"] / 1e9 if st.get("learnt_at_ns") is not None else None,
        "learning_cycles": st.get("learning_cycles"),
        "net_utility": util,
    }


def agg(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return {"median": statistics.median(xs), "q1": q[0], "q3": q[2], "min": xs[0],
            "max": xs[-1], "mean": statistics.fmean(xs), "n": len(xs)}


FAIR_SETS = {"cv": ["cubic", "opsel_vegas"], "cb": ["cubic", "bbr"]}
LEARN_SETS = {"cr": ["cubic", "reno"], "cbr": ["cubic", "bbr", "reno"],
              "cv": ["cubic", "opsel_vegas"]}
P_VALUES = [1.0, 0.5, 0.25]
# Sending time per run (time-scaled s), long enough for the expected cycles
# (1 + (|P| - 1)/p at most about 7 s each); a run that has not learnt by then
# is reported as censored.
LEARN_DURATION = {1.0: 40, 0.5: 70, 0.25: 120}


def run_fairness(a):
    out = Path(a.out)
    for rep in range(a.repeats):
        for name in a.sets.split(","):
            for drtt in (0, 100):
                for managed in (False, True):
                    d = out / "fair" / f"{name}-d{drtt}-{'ff' if managed else 'noff'}-r{rep}"
                    lab(d, spec(FAIR_SETS[name], RTT_5_3, 1.0, 0.25), [0, drtt], managed,
                        a.duration, 100 + rep, a.scale)


def run_learning(a):
    out = Path(a.out)
    for rep in range(a.repeats):
        for name in a.sets.split(","):
            for p in P_VALUES:
                d = out / "learn" / f"{name}-p{p}-r{rep}"
                lab(d, spec(LEARN_SETS[name], RTT_5_2, p, p), [0], False,
                    LEARN_DURATION[p] * (1.5 if len(LEARN_SETS[name]) > 2 else 1), 200 + rep,
                    a.scale, until_learnt=True)


def report(a):
    out = Path(a.out)
    res = {"conditions": {
        "link": "netlab dumbbell, 10 Mbit/s, 40 ms base RTT, drop-tail 1 x BDP (50 000 B)",
        "time_scale": a.scale,
        "sampling_interval_s": 0.1, "fair_evaluate_ms": 500, "jain_bin_s": a.bin_s},
        "fairness": {}, "learning": {}}
    runs = {}
    for d in sorted((out / "fair").glob("*")) if (out / "fair").exists() else []:
        if not (d / "summary.json").exists():
            continue
        r = fairness_of(d, a.bin_s)
        key = d.name.rsplit("-r", 1)[0]
        runs.setdefault(key, []).append({"run": d.name, **(r or {"failed": True})})
    for key, rs in runs.items():
        ok = [r for r in rs if "failed" not in r]
        res["fairness"][key] = {
            "runs": rs,
            "jain_binned": agg([r["jain_binned"] for r in ok]),
            "jain_of_means": agg([r["jain_of_means"] for r in ok]),
            "violations": agg([r["violations"] for r in ok]),
            "mixed_fraction": agg([r["mixed_fraction"] for r in ok]),
            "jain_same_cca": agg([r["jain_same_cca"] for r in ok]),
            "jain_mixed_cca": agg([r["jain_mixed_cca"] for r in ok]),
        }
    lruns = {}
    for d in sorted((out / "learn").glob("*")) if (out / "learn").exists() else []:
        if not (d / "summary.json").exists():
            continue
        r = learning_of(d)
        key = d.name.rsplit("-r", 1)[0]
        lruns.setdefault(key, []).append({"run": d.name, **(r or {"failed": True})})
    for key, rs in lruns.items():
        ok = [r for r in rs if r.get("learnt")]
        res["learning"][key] = {
            "runs": rs,
            "learnt_runs": len(ok),
            "learning_time_s": agg([r["learning_time_s"] for r in ok]),
            "learning_time_unscaled_s": agg([r["learning_time_s"] * a.scale for r in ok]),
            "learning_cycles": agg([r["learning_cycles"] for r in ok]),
            "net_utility": agg([r["net_utility"] for r in ok]),
        }
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    for key, v in sorted(res["fairness"].items()):
        jb, jm = v["jain_binned"], v["jain_of_means"]
        if jb:
            print(f"fair {key}: jain_binned median {jb['median']:.3f} [{jb['min']:.3f}, {jb['max']:.3f}] "
                  f"jain_of_means median {jm['median']:.3f} n={jb['n']} violations median {v['violations']['median']}")
    for key, v in sorted(res["learning"].items()):
        t, c = v["learning_time_s"], v["learning_cycles"]
        if t:
            print(f"learn {key}: time median {t['median']:.1f} s [{t['min']:.1f}, {t['max']:.1f}] "
                  f"cycles median {c['median']} mean {c['mean']:.2f} learnt {v['learnt_runs']}/{len(v['runs'])}")


THESIS_LEARN = {  # 002 Fig 5.4: (time s, cycles, net utility); C,V only
    ("cv", 1.0): (101.69, 2, 1.40), ("cv", 0.5): (131.43, 2.45, 1.70),
    ("cv", 0.25): (177.97, 3.15, 2.50)}
THESIS_FAIR = {0: (0.77, 0.89), 100: (0.75, 0.85)}  # 002 Fig 5.8, C,V: no FF, FF same sender


def markdown(res):
    def f(a, k="median", d=3):
        return "–" if not a else f"{a[k]:.{d}f}"

    print("| set | p | learnt runs | learning time, median [min, max] (s, scaled) | at thesis scale (s) | cycles, median (mean) | net utility, median | thesis (C,V): time / cycles / utility |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ["cr", "cv", "cbr"]:
        for p in P_VALUES:
            v = res["learning"].get(f"{name}-p{p}")
            if not v:
                continue
            t, c, u = v["learning_time_s"], v["learning_cycles"], v["net_utility"]
            th = THESIS_LEARN.get((name, p))
            ths = f"{th[0]} / {th[1]} / {th[2]}" if th else "–"
            print(f"| {', '.join(LEARN_SETS[name])} | {p} | {v['learnt_runs']}/{len(v['runs'])} | "
                  f"{f(t, d=1)} [{f(t, 'min', 1)}, {f(t, 'max', 1)}] | {f(t, d=0) if not t else round(t['median'] * res['conditions']['time_scale'])} | "
                  f"{f(c, d=1)} ({f(c, 'mean', 2)}) | {f(u, d=1)} | {ths} |")
    print()
    print("| set | ΔRTT | manager | runs | Jain per 1 s bin: median [min, max] | Jain of mean rates: median [min, max] | violations, median | time on different CCAs, median | Jain same CCA / different CCAs, medians | thesis net Jain (C,V) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ["cv", "cb"]:
        for drtt in (0, 100):
            for ff in ("noff", "ff"):
                v = res["fairness"].get(f"{name}-d{drtt}-{ff}")
                if not v or not v["jain_binned"]:
                    continue
                jb, jm = v["jain_binned"], v["jain_of_means"]
                th = THESIS_FAIR[drtt][1 if ff == "ff" else 0] if name == "cv" else "–"
                print(f"| {', '.join(FAIR_SETS[name])} | {drtt} ms | {'yes' if ff == 'ff' else 'no'} | {jb['n']} | "
                      f"{f(jb)} [{f(jb, 'min')}, {f(jb, 'max')}] | {f(jm)} [{f(jm, 'min')}, {f(jm, 'max')}] | "
                      f"{f(v['violations'], d=0)} | {f(v['mixed_fraction'], d=2)} | "
                      f"{f(v['jain_same_cca'])} / {f(v['jain_mixed_cca'])} | {th} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["fairness", "learning", "report", "markdown"])
    ap.add_argument("--out", default="target/dps-live")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sets", default=None)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--scale", type=float, default=10.0)
    ap.add_argument("--bin-s", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.what == "fairness":
        a.sets = a.sets or "cv"
        run_fairness(a)
    elif a.what == "learning":
        a.sets = a.sets or "cr,cbr,cv"
        run_learning(a)
    a.json = a.json or str(HERE / "results" / "live_dps.json")
    if a.what == "markdown":
        markdown(json.loads(Path(a.json).read_text()))
        return
    report(a)


if __name__ == "__main__":
    main()
