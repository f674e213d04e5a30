"""Right decisions of OPS against a switching background, from `opsel demo --bg altX --json` lines.

An ALT-X background is one TCP flow that starts with CUBIC at the run's t = 0 and switches to BBR
and back every X s (`netlab::traffic::Traffic::Alt`). A decision at t_s was made on the probe
window [t_s - probe_s, t_s]. It is scored when that window lies inside one background phase and
starts at least SETTLE s after the switch that began the phase (the queue the new CCA builds takes
a few seconds to form); it is right when its CCA is that phase's CCA. Decisions whose window
straddles a switch, or starts within SETTLE s of one, are counted separately: either answer is
defensible for them.

Usage: python research/generalisation/alt_summary.py [--settle S] ARM=FILE.jsonl [ARM=FILE.jsonl ...]
"""

import argparse
import json
import math


def phase(t: float, x: float) -> int:
    return int(math.floor(t / x))


def score(line: dict, settle: float):
    bg = line["bg"]
    if not bg.upper().startswith("ALT-"):
        raise SystemExit(f"background {bg!r} is not ALT-X; use live_summary.py for static backgrounds")
    x = float(bg.split("-", 1)[1])
    clean = right = mixed = 0
    for d in line["decisions"]:
        t1 = float(d["t_s"])
        t0 = t1 - float(d.get("probe_s", d["samples"]))
        p0, p1 = phase(t0, x), phase(t1 - 1e-9, x)
        if p0 != p1 or t0 - p0 * x < settle:
            mixed += 1
            continue
        clean += 1
        want = "cubic" if p0 % 2 == 0 else "bbr"
        right += d["cca"] == want
    return x, clean, right, mixed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after a switch before a probe window counts")
    ap.add_argument("arms", nargs="+", help="ARM=FILE.jsonl")
    a = ap.parse_args()
    print("| arm | background | runs | decisions inside one phase | right | straddling a switch | Jain (median) | 1-min load at the end |")
    print("|---|---|---|---|---|---|---|---|")
    for arg in a.arms:
        arm, path = arg.split("=", 1)
        rows = {}
        for raw in open(path):
            line = json.loads(raw)
            fg = str(line.get("fg", ""))
            x, clean, right, mixed = score(line, a.settle) if fg.startswith("OPS") else (0, 0, 0, 0)
            r = rows.setdefault((fg, line["bg"]), dict(runs=0, clean=0, right=0, mixed=0, jain=[], load=""))
            r["runs"] += 1
            r["clean"] += clean
            r["right"] += right
            r["mixed"] += mixed
            r["jain"].append(float(line["jain"]))
            r["load"] = (line.get("loadavg") or "").split(" ")[0]
        for (fg, bg), r in rows.items():
            j = sorted(r["jain"])
            med = j[len(j) // 2] if len(j) % 2 else (j[len(j) // 2 - 1] + j[len(j) // 2]) / 2
            pct = f" ({100 * r['right'] / r['clean']:.0f} %)" if r["clean"] else ""
            if not fg.startswith("OPS"):
                print(f"| {arm}, {fg} | {bg} | {r['runs']} | – | – | – | {med:.3f} | {r['load']} |")
                continue
            print(f"| {arm}, {fg} | {bg} | {r['runs']} | {r['clean']} | {r['right']}{pct} | {r['mixed']} | {med:.3f} | {r['load']} |")


if __name__ == "__main__":
    main()
