"""The OPS controller and policies through Python: the shared
golden fixture tests/fixtures/ops_golden.json (outputs of the Rust
controller over a synthetic RTT trace), callback policies and their
exceptions, configuration errors, fairness."""

import json
import math
import pathlib

import pytest

import opsel

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures"
GOLDEN = json.loads((FIXTURES / "ops_golden.json").read_text())
MODEL_PATH = FIXTURES / GOLDEN["model_file"]
S = GOLDEN["sample_period_ns"]
TRACE = GOLDEN["trace_rtt_ms"]


def render(o):
    """The fixture's canonical line (ffi/examples/make_ops_golden.rs)."""
    def u(v):
        return "none" if v is None else str(v)

    k = o["kind"]
    if k == "set_cca":
        return f"set_cca {o['cca']}"
    if k == "send_full_speed":
        return f"send_full_speed {o['cca']} until={o['until_ns']}"
    if k == "silence":
        return f"silence until={o['until_ns']}"
    if k == "steady":
        return f"steady {o['cca']} until={u(o['until_ns'])}"
    if k == "phase":
        return f"phase {o['phase']} cycle={o['cycle']} at={o['at_ns']}"
    if k == "classified":
        return f"classified {o['label']} samples={o['samples']} early={str(o['early']).lower()} at={o['at_ns']}"
    if k == "selected":
        return f"selected {o['cca']} steady={u(o['steady_ns'])} at={o['at_ns']}"
    if k == "decision_failed":
        return f"decision_failed at={o['at_ns']}"
    if k == "probe_incomplete":
        return f"probe_incomplete samples={o['samples']} needed={o['needed']} at={o['at_ns']}"
    raise AssertionError(o)


def controller(cfg, model=None, **kw):
    # A scenario's config is a ControllerSpec: passed through as it is.
    return opsel.Controller(
        model if model is not None else opsel.load_model(str(MODEL_PATH)), cfg, **kw
    )


def run(ctl, trace=TRACE):
    out = []
    ctl.start(0)
    out += ctl.drain()
    for k, rtt in enumerate(trace):
        t = (k + 1) * S
        ctl.handle_timeout(t)
        ctl.handle_sample(t, rtt)
        out += ctl.drain()
    return out


@pytest.mark.parametrize("scenario", GOLDEN["scenarios"], ids=lambda s: s["name"])
def test_golden_outputs_equal_the_rust_controller(scenario):
    ctl = controller(scenario["config"])
    got = [render(o) for o in run(ctl)]
    assert got == scenario["expected"]
    st = ctl.stats()
    for k, v in scenario["stats"].items():
        assert st[k] == v, k


def test_model_path_and_object_agree():
    cfg = GOLDEN["scenarios"][0]["config"]
    a = [render(o) for o in run(controller(cfg, model=str(MODEL_PATH)))]
    b = [render(o) for o in run(controller(cfg))]
    assert a == b == GOLDEN["scenarios"][0]["expected"]


def test_callback_policy_is_called_with_the_classification():
    seen = []

    def policy(c):
        seen.append(c)
        return "reno" if c["bbr_present"] else "cubic"

    ctl = opsel.Controller(str(MODEL_PATH), steady_s=10, policy=policy)
    outs = run(ctl)
    selected = [o["cca"] for o in outs if o["kind"] == "selected"]
    assert seen and len(selected) == len(seen)
    assert selected == ["reno" if c["bbr_present"] else "cubic" for c in seen]
    assert {"label", "class_index", "confidence", "distance", "bbr_flows", "total_flows"} <= set(seen[0])
    assert any(o["kind"] == "set_cca" and o["cca"] == "reno" for o in outs)


def test_callback_exception_becomes_a_clear_error_and_the_controller_goes_on():
    calls = []

    def policy(c):
        calls.append(c["label"])
        raise ZeroDivisionError("my policy broke")

    ctl = opsel.Controller(str(MODEL_PATH), steady_s=10, policy=policy)
    ctl.start(0)
    raised = None
    for k, rtt in enumerate(TRACE[:40]):
        t = (k + 1) * S
        ctl.handle_timeout(t)
        try:
            ctl.handle_sample(t, rtt)
        except opsel.OpselError as e:
            raised = e
            break
    assert raised is not None and calls
    assert "policy callback raised ZeroDivisionError" in str(raised)
    assert isinstance(raised.__cause__, ZeroDivisionError)
    outs = ctl.drain()
    failed = [o for o in outs if o["kind"] == "decision_failed"]
    assert failed and "my policy broke" in failed[0]["message"]
    # The failed decision kept the initial CCA and the cycle continues.
    steady = [o for o in outs if o["kind"] == "steady"]
    assert steady and steady[0]["cca"] == "cubic"


def test_callback_returning_a_bad_name_fails_the_decision():
    ctl = opsel.Controller(str(MODEL_PATH), steady_s=10, policy=lambda c: "not a cca!")
    outs = run(ctl, TRACE[:21])
    failed = [o for o in outs if o["kind"] == "decision_failed"]
    assert failed and "not a cca!" in failed[0]["message"]


def test_policy_calling_back_into_its_controller_is_an_error_not_a_deadlock():
    holder = {}
    ctl = opsel.Controller(str(MODEL_PATH), steady_s=10, policy=lambda c: holder["ctl"].phase)
    holder["ctl"] = ctl
    ctl.start(0)
    with pytest.raises(opsel.OpselError) as e:
        for k, rtt in enumerate(TRACE[:25]):
            ctl.handle_timeout((k + 1) * S)
            ctl.handle_sample((k + 1) * S, rtt)
    assert "busy" in str(e.value.__cause__)


def test_configuration_errors_name_the_value():
    with pytest.raises(opsel.InvalidInputError, match="X5"):
        opsel.Controller(str(MODEL_PATH), mode="active", pattern="S5-X5")
    with pytest.raises(opsel.InvalidInputError, match="no entry for mix"):
        opsel.Controller(str(MODEL_PATH), policy="B1-C0=bbr")
    with pytest.raises(opsel.InvalidInputError, match="mode"):
        opsel.Controller(str(MODEL_PATH), mode="sideways")
    with pytest.raises(opsel.InvalidInputError, match="steady_jitter"):
        opsel.Controller(str(MODEL_PATH), steady_jitter=0.9)
    with pytest.raises(opsel.InvalidInputError, match="steady"):
        opsel.Controller(str(MODEL_PATH), steady=10)  # unknown key: the spec names it
    with pytest.raises(opsel.InvalidInputError, match="passive probing"):
        opsel.Controller(str(MODEL_PATH), mode="active")  # the model/pattern check
    with pytest.raises(opsel.InvalidInputError, match="opsel.Model"):
        opsel.Controller(42)


def test_the_sample_period_must_be_the_models(tmp_path):
    # A model trained on samples every 200 ms takes windows sampled every 200 ms.
    m = json.loads(MODEL_PATH.read_text())
    m["probing"]["sample_interval_ms"] = 200.0
    p = tmp_path / "model-200ms.json"
    p.write_text(json.dumps(m))
    with pytest.raises(opsel.InvalidInputError, match="every 200 ms.*sample_period_s = 0.2"):
        opsel.Controller(str(p))
    assert opsel.Controller(str(p), sample_period_s=0.2).window_len == opsel.load_model(str(p)).window
    opsel.Controller(str(p), check_model=False)
    with pytest.raises(opsel.OpselIOError):
        opsel.Controller("/nonexistent/model.json")
    ctl = opsel.Controller(str(MODEL_PATH))
    ctl.start(0)
    with pytest.raises(opsel.InvalidInputError, match="non-finite|NaN|nan"):
        ctl.handle_sample(S, math.nan)
    with pytest.raises(opsel.InvalidInputError):
        ctl.start(0)


def test_properties_and_stats():
    ctl = opsel.Controller(
        str(MODEL_PATH), mode="active", steady_s=20, adaptive={"min_s": 10, "max_s": 80}, check_model=False
    )
    assert ctl.phase == "idle" and ctl.window_len == 20 and ctl.socket_cca == "cubic"
    assert ctl.classes == opsel.load_model(str(MODEL_PATH)).classes
    run(ctl)
    st = ctl.stats(now_ns=len(TRACE) * S)
    assert st["decisions"] >= 3 and st["probe_ns"] + st["steady_ns"] == len(TRACE) * S
    assert 10 * 10**9 <= ctl.steady_ns <= 80 * 10**9


def test_fairness():
    assert opsel.jain([250.0, 250.0]) == 1.0
    assert opsel.jain([500.0, 0.0]) == pytest.approx(0.5)
    assert opsel.fair_share(500e6, 2) == 250e6
    with pytest.raises(opsel.InvalidInputError):
        opsel.jain([1.0, math.nan])
    with pytest.raises(ValueError):
        opsel.fair_share(500e6, 0)


NETLAB_PASSIVE = pathlib.Path(__file__).resolve().parents[3] / "models" / "passive-netlab" / "model.json"


@pytest.mark.parametrize("initial, bbr_flows, chosen", [("cubic", 1, "bbr"), ("bbr", 0, "cubic")])
def test_passive_policy_decides_on_the_background(initial, bbr_flows, chosen):
    """A passive window is measured while the transfer sends, and the shipped
    models count every flow (their prober only pinged): a B1-C1 window seen
    while sending CUBIC has a BBR background (→ bbr), while sending BBR a
    CUBIC one (→ cubic). The dict's label stays the recognised class."""
    m = json.loads(NETLAB_PASSIVE.read_text())
    refs = m["references"]
    # A training window of B1-C1: its own nearest reference (distance 0).
    window = refs["windows"][refs["labels"].index(m["classes"].index("B1-C1"))]
    for policy in ("stump", None):
        seen = []

        def record(c):
            seen.append(c)
            return "bbr" if c["bbr_present"] else "cubic"

        ctl = opsel.Controller(str(NETLAB_PASSIVE), steady_s=10, initial_cca=initial,
                               policy=policy if policy else record)
        ctl.start(0)
        outs = []
        for t, v in enumerate(window, 1):
            ctl.handle_timeout(t * S)
            ctl.handle_sample(t * S, float(v))
            outs += ctl.drain()
        cl = [o for o in outs if o["kind"] == "classified"]
        assert [o["label"] for o in cl] == ["B1-C1"]
        assert [o["cca"] for o in outs if o["kind"] == "selected"] == [chosen]
        if not policy:
            assert (seen[0]["label"], seen[0]["bbr_flows"], seen[0]["total_flows"]) == ("B1-C1", bbr_flows, 1)
