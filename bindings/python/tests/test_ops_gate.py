"""The OPS probe gate through Python (ops::ProbeGate, 004 §8 B.1): a
controller built with the shipped gate (models/passive/gate.json) ends a
probe at one of the gate's check lengths and counts it in stats()
["gate_exits"]; threshold 1 never fires; bad gate options are errors."""

import json
import pathlib

import numpy as np
import pytest

import opsel

REPO = pathlib.Path(__file__).resolve().parents[3]
MODEL = REPO / "models" / "passive" / "model.json"
GATE = REPO / "models" / "passive" / "gate.json"
S = 1_000_000_000


def trace(model, i):
    """Reference window i with a small deterministic ripple (as
    core/tests/alloc_ops_gate.rs): near, but not at, distance 0."""
    ref = model.references[i]
    k = np.arange(len(ref))
    return ref * (1.0 + 0.003 * ((k % 5) - 2.0))


def first_decision(ctl, q):
    """Feed q at 1 Hz until the probe ends; the `classified` event and stats."""
    ctl.start(0)
    for t, v in enumerate(q):
        now = (t + 1) * S
        ctl.handle_timeout(now)
        ctl.handle_sample(now, float(v))
        if ctl.phase != "probe":
            break
    cl = [e for e in ctl.drain() if e["kind"] == "classified"]
    assert len(cl) == 1
    return cl[0], ctl.stats()


def test_shipped_gate_ends_the_probe_at_a_check_with_the_full_window_decision():
    m = opsel.load_model(str(MODEL))
    checks = json.loads(GATE.read_text())["checks"]
    q = trace(m, 9)
    full, s_full = first_decision(opsel.Controller(str(MODEL)), q)
    assert full["samples"] == m.window and s_full["gate_exits"] == 0

    gated, s = first_decision(opsel.Controller(str(MODEL), gate=str(GATE)), q)
    assert gated["samples"] in checks and gated["samples"] < m.window
    assert gated["label"] == full["label"]
    assert s["gate_exits"] == 1 and s["decisions"] == 1
    assert s["probe_ns"] == gated["samples"] * S


def test_gate_threshold_one_never_fires():
    m = opsel.load_model(str(MODEL))
    ctl = opsel.Controller(str(MODEL), {"gate": str(GATE), "gate_threshold": 1.0})
    ev, s = first_decision(ctl, trace(m, 9))
    assert ev["samples"] == m.window
    assert s["gate_exits"] == 0


def test_bad_gate_options_are_errors():
    with pytest.raises(opsel.InvalidInputError, match="gate_threshold"):
        opsel.Controller(str(MODEL), gate_threshold=0.9)  # no gate file
    with pytest.raises(opsel.InvalidInputError, match="probability"):
        opsel.Controller(str(MODEL), gate=str(GATE), gate_threshold=2.0)
    with pytest.raises(opsel.OpselError):
        opsel.Controller(str(MODEL), gate=str(REPO / "no-such-gate.json"))
