"""Several cycles per decision through Python (issues #6/#7): the
``cycles`` keyword of ``opsel.Controller`` round-trips and is validated,
the per-window ``cycle_classified`` events and the min-sum decision come
out, and ``opsel_eval.ops_cycles`` agrees with ``opsel_eval.cycles.min_sum``."""

import pathlib

import numpy as np
import pytest

import opsel
from opsel_eval import cycles as tc
from opsel_eval import ops_cycles

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures"
MODEL_PATH = str(FIXTURES / "knn_golden.model.json")
S = 1_000_000_000


def test_cycles_round_trip_and_default():
    assert opsel.Controller(MODEL_PATH).cycles == 1
    assert opsel.Controller(MODEL_PATH, cycles=4).cycles == 4


@pytest.mark.parametrize("bad", [0, 101])
def test_cycles_out_of_range_is_a_clear_error(bad):
    with pytest.raises(ValueError, match=f"cycles = {bad}"):
        opsel.Controller(MODEL_PATH, cycles=bad)


def test_cycles_negative_is_refused():
    # The spec names the field and the value.
    with pytest.raises(ValueError, match=r"cycles.*-1"):
        opsel.Controller(MODEL_PATH, cycles=-1)


def test_min_sum_over_windows_matches_python():
    rng = np.random.default_rng(4)
    classes = list(tc.SIX_CLASSES)
    w, n = 20, 3
    # Six classes at different RTT levels and shapes, 6 references each.
    base = np.array([60, 64, 68, 72, 76, 80], dtype=float)
    X = np.concatenate([base[c] + 3 * np.sin(np.arange(w) / (c + 1)) + rng.normal(0, 1.5, (6, w)) for c in range(6)])
    y = np.repeat(np.arange(6), 6)
    model = opsel.Model.fit(X, y.tolist(), classes, k=1, radius=10)
    for c in range(6):
        q = base[c] + 3 * np.sin(np.arange(w) / (c + 1)) + rng.normal(0, 3.0, (n, w))
        got = ops_cycles.controller_decision(model, q, n, pattern=None)
        D = tc.pairwise_dtw(q, X, radius=10)
        want, per_class = tc.min_sum(D, y, list(range(6)))
        assert got["class_index"] == want
        assert got["samples"] == n * w
        assert got["per_window"] == [int(i) for i in np.argmin(per_class, axis=0)]
        assert got["distance"] == pytest.approx(per_class.sum(axis=1)[want], rel=1e-12)
        assert 0.0 <= got["confidence"] <= 1.0


def test_cycle_events_in_drain():
    ctl = opsel.Controller(MODEL_PATH, cycles=2, steady_s=10)
    ctl.start(0)
    out = []
    for t in range(1, 2 * ctl.window_len + 1):
        ctl.handle_sample(t * S, 60.0 + t % 5)
        out += ctl.drain()
    ev = [o for o in out if o["kind"] == "cycle_classified"]
    assert [e["index"] for e in ev] == [0, 1]
    assert all(e["cycles"] == 2 and e["label"] in ctl.classes and e["leader"] in ctl.classes for e in ev)
    cl = [o for o in out if o["kind"] == "classified"]
    assert cl[0]["label"] == ev[-1]["leader"] and cl[0]["samples"] == 2 * ctl.window_len
