"""The three grid-external conditions OPS is evaluated on end to end.

Drawn once with a fixed seed, log-uniformly from the grid's ranges (bottleneck
10–300 Mbit/s, RTT 10–200 ms, buffer 0.25–2 × BDP), rounded to two significant
digits, and redrawn if one coincides with a grid condition. They are never
recorded into the training corpus (``data/collect``) and never used to choose
a configuration.

    python3 research/generalisation/external_conditions.py
"""

import math
import random

SEED = 16
GRID = {(10, 100, 1), (10, 20, 2), (20, 200, 0.5), (25, 40, 0.25), (50, 150, 2), (50, 10, 0.5),
        (100, 30, 1), (100, 120, 0.25), (200, 50, 0.5), (200, 200, 1), (300, 80, 0.25), (300, 20, 2),
        (100, 65, 0.5), (50, 40, 1)}


def sig2(v: float) -> float:
    return round(v, 1 - int(math.floor(math.log10(v))))


def draw(n: int = 3, seed: int = SEED):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        c = tuple(sig2(math.exp(rng.uniform(math.log(lo), math.log(hi))))
                  for lo, hi in ((10, 300), (10, 200), (0.25, 2)))
        if c not in GRID and c not in out:
            out.append(c)
    return out


if __name__ == "__main__":
    import sys

    # --fields: "name rate_mbps rtt_ms buffer_bdp" per line, for the shell runners.
    fields = "--fields" in sys.argv[1:]
    for r, d, b in draw():
        name = f"ext-r{r:g}-d{d:g}-b{b:g}"
        print(f"{name} {r:g} {d:g} {b:g}" if fields else
              f"{name}  rate {r:g} Mbit/s, RTT {d:g} ms, buffer {b:g} x BDP")
