#!/usr/bin/env python3
"""Tables of docs/results/ops.md §2.3 from the `opsel demo --json` lines of the
phase-sampled ALT-X runs (`make ops-alt-phases`).

Usage: python3 alt_phases_table.py alt-phases.jsonl

Per run: FG start, decisions, probing, FG / fair share, Jain, load; per cell:
median and range of FG / fair share. For each decision it also gives the
share of its probe window (the n samples at 1 Hz ending at the decision) during
which the background ran BBR, and the share of the following steady
phase during which the FG's CCA matched the background's (ALT-X starts with
CUBIC at t = 0 and toggles every X s, 000 §7.6). The steady phase after a
decision at t_i is taken as [t_i, t_(i+1) - 24 s] (24 s = the 5 s lead-in plus
the ~19 s probe before the next decision) or to the FG's end; this is an
estimate from the logged decision times, not a logged quantity.
"""
import json
import statistics
import sys

FAIR_MBPS = 50.0


def bg_cca(t, x):
    return "cubic" if int(t // x) % 2 == 0 else "bbr"


def matched_fraction(t_from, t_to, cca, x, step=0.1):
    n = max(1, int((t_to - t_from) / step))
    ok = sum(bg_cca(t_from + (k + 0.5) * step, x) == cca for k in range(n))
    return ok / n


def main(path):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    cells = {}
    for r in runs:
        cells.setdefault((r["bg"], r["fg"], r.get("early_confidence")), []).append(r)
    for (bg, fg, ec), rs in cells.items():
        x = float(bg.split("-")[1])
        label = fg + (f" (margin ≥ {ec})" if ec is not None and "early" in fg else "")
        print(f"\n#### {bg}, {label}\n")
        print("| run | seed | FG start (s) | window (s) | BG (Mbit/s) | FG (Mbit/s) | Jain | FG / fair | probing (s) | early exits | decisions (t s: mix → CCA [BG share of the probe window on BBR]) | steady matched BG | load (1 min) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        shares = []
        for r in rs:
            share = r["fg_mbps"] / FAIR_MBPS
            shares.append(share)
            fg_end = r["seconds"]
            ds = r["decisions"]
            dtxt, mtxt = [], []
            for i, d in enumerate(ds):
                t = d["t_s"]
                nxt = ds[i + 1]["t_s"] - 24.0 if i + 1 < len(ds) else fg_end
                n = d["samples"]
                # Probe window: the n samples at 1 Hz that end at the decision.
                w_bbr = 1.0 - matched_fraction(t - n + 1, t, "cubic", x)
                dtxt.append(f"{t:.0f}: {d['mix']} → {d['cca']} [window {100 * w_bbr:.0f}% bbr]" + (f" ({n} samples)" if n < 20 else ""))
                if nxt > t:
                    mtxt.append(f"{100 * matched_fraction(t, nxt, d['cca'], x):.0f}%")
            probe = r.get("probe_s")
            print(
                f"| {r['run']} | {r.get('seed', '')} | {r.get('fg_start_s', 10):.0f} | [{r['measure_from_s']:.0f}, {r['seconds']:.0f}] "
                f"| {r['bg_mbps']:.1f} | {r['fg_mbps']:.1f} | {r['jain']:.3f} | {share:.2f} "
                f"| {'' if probe is None else f'{probe:.0f}'} | {'' if r.get('early_exits') is None else r['early_exits']} "
                f"| {'; '.join(dtxt)} | {', '.join(mtxt)} | {r['loadavg'].split()[0]} |"
            )
        inband = sum(0.8 <= s <= 1.2 for s in shares)
        print(
            f"\nFG / fair share: median **{statistics.median(shares):.3f}**, range {min(shares):.2f}–{max(shares):.2f}, "
            f"mean {statistics.mean(shares):.2f}" + (f" ± {statistics.stdev(shares):.2f} (sd)" if len(shares) > 1 else "")
            + f"; {inband} of {len(shares)} runs in 0.8–1.2."
        )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "alt-phases.jsonl")
