"""The evaluation studies moved out of the package (``research/ops/opsel_eval``)
are tested here with the package, on the same fixtures: put them on the path."""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "research", "ops")))
