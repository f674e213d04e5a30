"""Transfer time per method and per position in the evaluation order, from
``opsel lab fastprob-send --rotate --json F`` files: whether ``--fastprob``
costs time, or the run order did.

    python3 research/fastprob/send_order.py rot-cubic30.json [more.json ...]
"""

import json
import statistics
import sys


def main(paths):
    for p in paths:
        d = json.load(open(p))
        c = d["conditions"]
        rows = d["transfers"]
        print(f"\n{p}: {c['rate_mbps']:g} Mbit/s, {c['rtt_ms']:g} ms, {c['buffer_bdp']:g} BDP, "
              f"background {c['background']}, {c['size_mb']:g} MB, rotate {c.get('rotate', False)}")
        methods = sorted({r["method"] for r in rows}, key=[r["method"] for r in rows].index)
        positions = sorted({r.get("position", 0) for r in rows})
        print("| method | transfers | median s | mean s | " + " | ".join(f"mean s at position {q + 1}" for q in positions) + " |")
        print("|---|---|---|---|" + "---|" * len(positions))
        for m in methods:
            ts = [r["wall_s"] for r in rows if r["method"] == m]
            by = [[r["wall_s"] for r in rows if r["method"] == m and r.get("position", 0) == q] for q in positions]
            cells = [f"{statistics.mean(b):.2f} ({len(b)})" if b else "–" for b in by]
            print(f"| {m} | {len(ts)} | {statistics.median(ts):.2f} | {statistics.mean(ts):.2f} | " + " | ".join(cells) + " |")
        # Paired by evaluation: the FastProb transfer against the fixed transfer of the same CCA.
        fp = next((m for m in methods if m.startswith("fastprob")), None)
        fx = f"fixed {c.get('cca', 'cubic')}"
        if fp and fx in methods:
            ratios = []
            for e in sorted({r.get("eval", 0) for r in rows}):
                a = [r["wall_s"] for r in rows if r.get("eval", 0) == e and r["method"] == fp]
                b = [r["wall_s"] for r in rows if r.get("eval", 0) == e and r["method"] == fx]
                if a and b:
                    ratios.append(a[0] / b[0])
            print(f"{fp} / {fx}, per evaluation: median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n = {len(ratios)})")


if __name__ == "__main__":
    main(sys.argv[1:])
