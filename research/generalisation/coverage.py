"""Does recording more conditions lift leave-one-condition-out accuracy on the grid?

Scores the 14 grid conditions (the 12 of ``opsel_netlab::collect::GRID`` plus
``default`` and ``c50``) by LOCO twice with the shipped configuration
(divide-min, w = 40, radius 20, 1-NN): once with every other grid condition as
references (the baseline), once with every recorded non-grid condition (the
corner and dense-grid conditions, ``dense_grid.py``) added as references only,
never held out. Both runs score the same test windows, so the difference is
what the added conditions bring. Then LOCO over every condition.

    .venv/bin/python research/generalisation/coverage.py data/collect
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loco_aug  # noqa: E402
from external_conditions import GRID  # noqa: E402

NAMED = {"default": (100, 65, 0.5), "c50": (50, 40, 1)}


def grid_names():
    names = {f"r{r:g}-d{d:g}-b{b:g}" for r, d, b in GRID}
    return names | set(NAMED)


def main(argv):
    root = argv[0]
    extra = argv[1:]
    grid = grid_names()
    recorded = sorted(c for c in os.listdir(root) if os.path.isdir(os.path.join(root, c)))
    new = [c for c in recorded if c not in grid]
    conds = loco_aug.load(root, 40, 3)
    complete = [c for c in new if c in conds]
    print(f"non-grid conditions with all six classes (>= 3 windows of w = 40 each): {', '.join(complete) or 'none'}")
    base = ["--w", "40", "--radius", "20", "--configs", "divide-min"] + extra
    print("\n## grid conditions, references from the grid only")
    loco_aug.main([root] + base + (["--exclude", ",".join(complete)] if complete else []))
    if complete:
        print("\n## grid conditions, the non-grid conditions added as references only")
        loco_aug.main([root] + base + ["--train-only", ",".join(complete)])
        print("\n## every condition held out in turn")
        loco_aug.main([root] + base)


if __name__ == "__main__":
    main(sys.argv[1:])
