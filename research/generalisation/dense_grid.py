"""The dense condition grid: space-filling conditions between the 12 grid points.

Leave-one-condition-out accuracy rises at a held-out condition when a recorded
condition lies near it (docs/results/generalisation.md, "A denser grid"): the
queue dynamics of one network are matched by references from a similar one,
not by transforms of distant ones. These conditions fill the grid's ranges
(bottleneck 10–300 Mbit/s, RTT 10–200 ms, buffer 0.25–2 × BDP) evenly in log
space: the Halton sequence in bases 2, 3, 5 (no randomness), rounded to two
significant digits; a point equal to a grid or external condition is skipped.
The three external OPS conditions (external_conditions.py) stay out of the
corpus: they are evaluated, never recorded for training.

    python3 research/generalisation/dense_grid.py [N]
"""

import math
import sys

from external_conditions import GRID, draw, sig2

RANGES = ((10, 300), (10, 200), (0.25, 2))


def halton(i: int, base: int) -> float:
    f, r = 1.0, 0.0
    while i > 0:
        f /= base
        r += f * (i % base)
        i //= base
    return r


def dense(n: int = 24):
    external = set(draw())
    out, i = [], 1
    while len(out) < n:
        c = tuple(sig2(math.exp(math.log(lo) + halton(i, b) * (math.log(hi) - math.log(lo))))
                  for (lo, hi), b in zip(RANGES, (2, 3, 5)))
        i += 1
        if c in GRID or c in external or c in out:
            continue
        out.append(c)
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    for r, d, b in dense(n):
        print(f"r{r:g}-d{d:g}-b{b:g}")
