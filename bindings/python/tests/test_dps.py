"""opsel.DpsAgent and opsel.FairManager: the core's DPS learner (002) through
thin conversions. The scenario is the core's own doc example
(core/src/dps/mod.rs), so Python must reach the same decisions."""

import sys

import pytest

import opsel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux bindings")

S = 1_000_000_000
SPEC = {
    "ccas": ["cubic", "bbr"],
    "metrics": [
        {"metric": "rtt_ms", "range": [0, 300, 0, 350], "priority": 0.4},
        {"metric": "throughput_mbps", "range": [9.5, None, 8, None], "priority": 0.6},
    ],
    "selection_period_ms": 6000,
    "random_period_ms": 3000,
    "seed": 1,
}


def run(agent, seconds=120):
    cca, outputs = None, []
    agent.start(0)
    for t in range(1, seconds + 1):
        while (o := agent.poll()) is not None:
            outputs.append(o)
            if o["kind"] == "set_cca":
                cca = o["cca"]
        agent.feedback(t * S, 60.0, 9.8 if cca == "bbr" else 8.5)
    return outputs


def test_learns_the_cca_that_meets_the_qos_as_the_core_does():
    agent = opsel.DpsAgent(SPEC)
    outputs = run(agent)
    assert agent.current == "bbr"  # the one meeting 9.5 Mbit/s
    assert agent.stats()["learning_cycles"] == 2
    assert not agent.learning
    kinds = {o["kind"] for o in outputs}
    assert {"set_cca", "decided", "period_closed", "learnt"} <= kinds
    decided = next(o for o in outputs if o["kind"] == "decided")
    assert set(decided["decision"]) >= {"index", "cca", "mode", "reason", "period_ns"}
    closed = [o for o in outputs if o["kind"] == "period_closed"]
    assert all(isinstance(o["u_net"], float) and 0.0 <= o["u_net"] <= 1.0 for o in closed)
    # The spec as JSON text gives the same run.
    import json

    again = opsel.DpsAgent(json.dumps(SPEC))
    assert run(again) == outputs


def test_phase_and_timeouts():
    agent = opsel.DpsAgent(SPEC)
    assert agent.phase == {"phase": "idle"}
    agent.start(0)
    assert agent.phase["phase"] in ("guard", "monitor")
    assert agent.poll_timeout() is not None


@pytest.mark.parametrize(
    "change, message",
    [
        ({"metrics": [{"metric": "rtt_ms", "range": [400, 300, 0, 450]}]}, "400"),
        ({"metrics": [{"metric": "jitter_ms", "range": [0, 1, 0, 2]}]}, "jitter_ms"),
        ({"exploration": {"p_learning": 1.5, "p_learnt": 0.2}}, "1.5"),
        ({"ccas": []}, "ccas"),
    ],
)
def test_bad_specs_get_clear_errors(change, message):
    spec = {**SPEC, **change}
    with pytest.raises(opsel.InvalidInputError, match=message):
        opsel.DpsAgent(spec)


def test_nan_and_wrong_types_are_refused():
    with pytest.raises(opsel.InvalidInputError):
        opsel.DpsAgent({**SPEC, "metrics": [{"metric": "rtt_ms", "range": [float("nan"), 300, 0, 350]}]})
    with pytest.raises(opsel.InvalidInputError, match="dict or JSON"):
        opsel.DpsAgent(42)
    agent = opsel.DpsAgent(SPEC)
    agent.start(0)
    with pytest.raises(opsel.InvalidInputError):
        agent.feedback(S, float("nan"), 1.0)
    with pytest.raises(opsel.InvalidInputError, match="command"):
        agent.handle_command(S, {"cmd": "explode"})


def test_manager_unlocks_one_managed_agent_at_a_time():
    manager = opsel.FairManager({"f_thresh": 0.8})
    agents = {1: opsel.DpsAgent(SPEC, managed=True), 2: opsel.DpsAgent(SPEC, managed=True)}
    for fid, a in agents.items():
        manager.register(fid)
        a.start(0)
        assert a.phase == {"phase": "waiting"}
    unlocked_seen = set()
    for t in range(1, 200):
        while (cmd := manager.poll()) is not None:
            fid, c = cmd
            agents[fid].handle_command(t * S, c)
        assert sum(a.phase["phase"] in ("guard", "monitor") for a in agents.values()) <= 1
        if manager.unlocked is not None:
            unlocked_seen.add(manager.unlocked)
        for fid, a in agents.items():
            cca = a.current
            while (o := a.poll()) is not None:
                if o["kind"] == "report":
                    manager.handle_report(fid, o)
                if o["kind"] == "set_cca":
                    cca = o["cca"]
            a.feedback(t * S, 60.0, 9.8 if cca == "bbr" else 8.5)
            if cca is not None:
                manager.report_rate(fid, 5.0)
        manager.evaluate()
    assert unlocked_seen == {1, 2}, "round robin reaches both flows"
    assert manager.stats()["unlocks"] >= 2
    assert manager.last_jain == pytest.approx(1.0)
    with pytest.raises(opsel.InvalidInputError, match="f_thresh"):
        opsel.FairManager({"f_thresh": 0})
    with pytest.raises(opsel.InvalidInputError):
        opsel.FairManager({"bogus": 1})


def test_the_example_runs():
    import pathlib
    import runpy

    example = pathlib.Path(__file__).resolve().parents[3] / "examples" / "python" / "dps.py"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(example), run_name="__main__")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("flow 0: ") and lines[1].startswith("flow 1: ")
    assert "last Jain" in lines[2]
