"""Goodput across live CCA switches (002 §5.5 compares connection-replacement
methods; opsel switches TCP_CONGESTION on the live socket).

    opsel lab run netlab/scenarios/switch-alt5.toml --out target/switch/alt
    opsel lab run netlab/scenarios/switch-fixed.toml --out target/switch/fixed
    python3 research/dps/live_switch.py target/switch/alt target/switch/fixed

Prints the mean goodput of both runs over the measurement window, and for each
switch the mean over the 2 s after it and the smallest 100 ms bin in the 1 s
after it, with the same statistics of the fixed run at the same instants.
"""

import csv
import json
import statistics as st
import sys


def bins(run):
    with open(f"{run}/flows.csv") as f:
        return {round(float(r["t_s"]), 1): float(r["mbps"]) for r in csv.DictReader(f)}


def window(b, a, z):
    return [v for t, v in b.items() if a <= t < z]


def main(alt_dir, fixed_dir):
    alt, fixed = bins(alt_dir), bins(fixed_dir)
    summary = json.load(open(f"{alt_dir}/summary.json"))
    a, z = summary["measure_window_s"]
    with open(f"{alt_dir}/events.jsonl") as f:
        switches = [json.loads(l)["t_s"] for l in f if '"switch' in l]
    switches = [t for t in switches if a <= t <= z - 2]
    print(f"mean goodput [{a}, {z}) s: live switching {st.mean(window(alt, a, z)):.2f} Mbit/s, "
          f"fixed {st.mean(window(fixed, a, z)):.2f} Mbit/s ({len(switches)} switches)")
    after = [(st.mean(window(alt, t, t + 2)), min(window(alt, t, t + 1))) for t in switches]
    same = [(st.mean(window(fixed, t, t + 2)), min(window(fixed, t, t + 1))) for t in switches]
    for t, (m, lo) in zip(switches, after):
        print(f"  switch at {t:5.1f} s: 2 s after {m:5.1f} Mbit/s, smallest 100 ms bin in 1 s {lo:5.1f}")
    for name, rows in (("live switching", after), ("fixed at the same instants", same)):
        print(f"{name}: 2 s means {min(r[0] for r in rows):.1f}-{max(r[0] for r in rows):.1f} Mbit/s; "
              f"smallest 100 ms bin in 1 s: median {st.median(r[1] for r in rows):.1f}, "
              f"min {min(r[1] for r in rows):.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
