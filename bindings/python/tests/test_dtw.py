"""DTW distances: known values, errors, and equivalence with dtaidistance and tslearn."""

import numpy as np
import pytest

import opsel


def test_known_values():
    a = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    b = np.array([0.0, 1.0, 1.0, 1.0, 1.0])
    assert opsel.dtw_distance(a, b, radius=1) == 0.0
    assert opsel.dtw_distance(a, b, radius=0) == 1.0
    assert opsel.dtw_distance(np.zeros(2), np.array([3.0, 4.0]), radius=0, cost="squared") == 5.0


def test_bad_input_raises_value_errors():
    with pytest.raises(opsel.InvalidInputError, match="index 1"):
        opsel.dtw_distance(np.array([1.0, np.nan]), np.array([1.0]))
    with pytest.raises(ValueError, match="non-empty"):
        opsel.dtw_distance(np.array([]), np.array([1.0]))
    with pytest.raises(opsel.OpselError, match="cosine"):
        opsel.dtw_distance(np.ones(3), np.ones(3), cost="cosine")


RNG = np.random.default_rng(2026)
CASES = [(n, m, r) for n, m in [(5, 5), (20, 20), (50, 50), (33, 28), (60, 61)] for r in [0, 1, 3, 10, None]]


@pytest.mark.parametrize("n,m,r", CASES)
def test_matches_dtaidistance(n, m, r):
    dtaidistance = pytest.importorskip("dtaidistance")
    for _ in range(10):
        a = RNG.normal(65, 20, n)
        b = RNG.normal(65, 20, m)
        # dtaidistance: window w allows |i - j| < w, i.e. radius r = w - 1; squared cost, sqrt reported.
        kw = {} if r is None else {"window": r + 1}
        want = dtaidistance.dtw.distance(a, b, use_c=True, **kw)
        got = opsel.dtw_distance(a, b, radius=r, cost="squared")
        assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("n,r", [(5, 0), (20, 10), (20, 3), (50, 10), (60, 59)])
def test_matches_tslearn(n, r):
    tslearn_metrics = pytest.importorskip("tslearn.metrics")
    for _ in range(10):
        a = RNG.normal(65, 20, n)
        b = RNG.normal(65, 20, n)
        want = tslearn_metrics.dtw(a, b, global_constraint="sakoe_chiba", sakoe_chiba_radius=r)
        got = opsel.dtw_distance(a, b, radius=r, cost="squared")
        assert got == pytest.approx(want, rel=1e-9)
