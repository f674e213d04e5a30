"""Right decisions and probing seconds from `opsel demo --json` lines (docs/results/ops-gate.md, "Live").

A decision is right when its CCA is the background's (the stump: BBR in the background → bbr, else
cubic). Probing seconds per decision = the 1-Hz samples it was made on (the full window = 40).

Usage: python research/ops-gate/live_summary.py ARM=FILE.jsonl [ARM=FILE.jsonl ...]
"""

import json
import sys


def main(args):
    print("| arm | background | decisions | right | probing s per decision, in order | mean probing s | gate exits | 1-min load at the end |")
    print("|---|---|---|---|---|---|---|---|")
    for arg in args:
        arm, path = arg.split("=", 1)
        tot_n = tot_r = tot_s = 0
        for line in open(path):
            d = json.loads(line)
            dec = d["decisions"]
            right = sum(1 for x in dec if x["cca"] == d["bg"])
            secs = [x.get("probe_s", x["samples"]) for x in dec]
            tot_n += len(dec)
            tot_r += right
            tot_s += sum(secs)
            thr = d.get("gate_threshold")
            label = arm + (f" (threshold {thr})" if thr is not None else "")
            print(f"| {label} | {d['bg'].upper() if d['bg'] == 'bbr' else 'CUBIC'} | {len(dec)} | {right} | "
                  f"{', '.join('%g' % s for s in secs)} | {sum(secs) / len(dec):.1f} | {d['gate_exits']} | "
                  f"{d['loadavg'].split()[0]} |")
        print(f"| {arm}, both | | {tot_n} | {tot_r} ({100 * tot_r / tot_n:.0f} %) | | {tot_s / tot_n:.1f} | | |")


if __name__ == "__main__":
    main(sys.argv[1:])
