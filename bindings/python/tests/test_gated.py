"""Margin-gated probing: ``opsel_eval.gated`` decides like the Rust
controller run with ``cycles=N`` and progressive probing at window boundaries,
both in the class and in the number of windows it takes."""

import numpy as np
import pytest

import opsel
from opsel_eval import cycles as tc
from opsel_eval import gated

CLASSES = list(tc.SIX_CLASSES)
W = 20


def test_gate_stops_at_the_first_confident_window():
    # Class 0 leads by a small margin after window 1 (1 - 10/10.5 = 0.048) and by
    # a large one after window 2 (1 - 12/20.5 = 0.41).
    per_class = np.array([[10.0, 2.0, 2.0], [10.5, 10.0, 10.0], [30.0, 30.0, 30.0]])
    assert gated.gated_decision(per_class, 0.0)[:2] == (0, 1)
    assert gated.gated_decision(per_class, 0.04)[:2] == (0, 1)
    assert gated.gated_decision(per_class, 0.05)[:2] == (0, 2)
    c, n, m = gated.gated_decision(per_class, 0.5)
    assert (c, n) == (0, 3) and m == pytest.approx(1 - 14 / 30.5)
    # Never stopping early is min-sum over every window.
    assert gated.gated_decision(per_class, 1.01)[:2] == (0, 3)


def test_gate_can_change_its_mind():
    # Window 1 favours class 1 weakly; windows 2-3 favour class 0 strongly.
    per_class = np.array([[10.2, 1.0, 1.0], [10.0, 9.0, 9.0]])
    assert gated.gated_decision(per_class, 0.0)[:2] == (1, 1)
    assert gated.gated_decision(per_class, 0.1)[:2] == (0, 2)


def test_sum_margin_matches_the_controller_edge_cases():
    assert gated.sum_margin(1.0, 2.0) == 0.5
    assert gated.sum_margin(0.0, 0.0) == 0.0
    assert gated.sum_margin(1.0, np.inf) == 1.0
    assert gated.sum_margin(np.inf, np.inf) == 0.0


@pytest.mark.parametrize("tau", [0.0, 0.03, 0.1, 0.3])
def test_controller_gates_exactly_like_python(tau):
    rng = np.random.default_rng(11)
    base = np.array([60, 62, 64, 66, 68, 70], dtype=float)
    shape = lambda c: 2 * np.sin(np.arange(W) / (c + 1))  # noqa: E731
    X = np.concatenate([base[c] + shape(c) + rng.normal(0, 1.0, (5, W)) for c in range(6)])
    y = np.repeat(np.arange(6), 5)
    model = opsel.Model.fit(X, y.tolist(), CLASSES, k=1, radius=10)
    windows_used = set()
    for c in range(6):
        for _ in range(3):
            # Noisy enough that some first windows are unsure.
            q = base[c] + shape(c) + rng.normal(0, 2.5, (3, W))
            D = tc.pairwise_dtw(q, X, radius=10)
            per_class = np.array([D[:, y == k].min(axis=1) for k in range(6)])
            want, n_used, _ = gated.gated_decision(per_class, tau)
            got = gated.controller_gated(model, q, 3, tau, W, pattern=None)
            assert got["class_index"] == want
            assert got["samples"] == n_used * W
            windows_used.add(n_used)
    if tau == 0.0:
        assert windows_used == {1}
    if tau == 0.3:
        assert max(windows_used) > 1  # the gate did extend some probes


def test_controller_refuses_a_gate_above_one():
    with pytest.raises(ValueError, match="min_confidence"):
        opsel.Controller(opsel.Model.fit(np.ones((6, W)) + np.arange(6)[:, None], list(range(6)), CLASSES),
                         cycles=3, progressive={"min_confidence": 1.5})


def test_stump_on_background_subtracts_the_transfers_own_flow():
    from opsel_eval.gated import stump_on_background as s
    assert s("B1-C1", "cubic") == "bbr" and s("B1-C1", "bbr") == "cubic"
    assert s("C1-C1", "cubic") == "cubic" and s("B1-B1", "bbr") == "bbr"
    assert s("B1-C0", "bbr") == "cubic" and s("B1-B1", "cubic") == "bbr"


def test_replay_live_follows_the_logged_margins():
    from opsel_eval.gated import live_probes, replay_live
    classes = ["B0-C0", "B0-C1", "B1-B1", "B1-C0", "B1-C1", "C1-C1"]
    w = lambda i, leader, m: {"window": i, "leader": classes.index(leader), "margin": m,
                              "class_index": 0, "distance": 1.0, "t_s": 0.0}
    line = {"fg": "OPS", "bg": "bbr", "cycles": 3, "extend_below": 1.0, "initial_cca": "cubic", "run": 1,
            # probe 1 on cubic: window 1 reads C1-C1 (wrong) on a thin margin, then B1-C1;
            # probe 2 on bbr (its decision): B1-B1, confident.
            "decisions": [{"cca": "bbr"}, {"cca": "bbr"}],
            "windows": [w(0, "C1-C1", 0.05), w(1, "B1-C1", 0.12), w(2, "B1-C1", 0.3),
                        w(0, "B1-B1", 0.4), w(1, "B1-B1", 0.5), w(2, "B1-B1", 0.6)]}
    probes = live_probes([line, {**line, "fg": "fixed cubic"}], classes)
    assert [p["own_cca"] for p in probes] == ["cubic", "bbr"] and all(p["complete"] for p in probes)
    rows = {r["tau"]: r for r in replay_live(probes, taus=[0.0, 0.1, 0.2, 1.01])}
    assert (rows[0.0]["right"], rows[0.0]["mean_windows"]) == (1, 1.0)  # C1-C1 on cubic → cubic: wrong
    assert (rows[0.1]["right"], rows[0.1]["mean_windows"], rows[0.1]["extended"]) == (2, 1.5, 0.5)
    assert (rows[0.2]["right"], rows[0.2]["mean_windows"]) == (2, 2.0)
    assert (rows[1.01]["right"], rows[1.01]["mean_windows"]) == (2, 3.0)
