"""opsel.FastProbModel / opsel.FastProbe: document 004's early-stopping probe
through thin conversions, checked against the scikit-learn reference decisions
of the shared fixtures (tests/fixtures/fastprob/sklearn_small.json: model format
version 1, raw samples; sklearn_v2_small.json: version 2, ratio inputs with prefix
statistics and a gate every 3 lengths), which the Rust core also matches
(core/tests/fastprob_sklearn.rs); the version-3 trainer path (log target, error
gates) is replayed through the binding at the end."""

import json
import pathlib

import pytest

import opsel

FIX = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "fastprob"


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


@pytest.mark.parametrize("model_file,fixture", [("model_small.json", "sklearn_small.json"),
                                                ("model_v2_small.json", "sklearn_v2_small.json")])
def test_probe_equals_sklearn_on_the_shared_fixture(model_file, fixture):
    model = opsel.FastProbModel.load(FIX / model_file)
    assert model.spec["cap"] == 15
    logs = json.loads((FIX / fixture).read_text())["logs"]
    assert len(logs) >= 20
    for i, log in enumerate(logs):
        s = log["samples_bps"]
        for st in log["stages"]:
            assert close(model.predict_fixed(s[: st["n"]]), st["regressor"]), (i, st["n"])
        probe = model.probe()
        out = None
        for x in s:
            d = probe.push(x)
            if d["decision"] != "continue":
                out = d
                break
        assert out is not None, f"log {i}: no stop by the cap"
        assert out["samples"] == log["stop_n"] == len(probe), i
        assert out["forced"] == log["forced"] and (out["decision"] == "forced_stop") == log["forced"]
        assert close(out["throughput_bps"], log["prediction_bps"]), i
        assert out["probe_ns"] == out["samples"] * model.spec["interval_ns"]


def replays(model, log, n, pred, forced):
    """The core's probe on one log stops where the trainer's loop did, the same way, with the
    same prediction; returns its stop."""
    probe = model.probe()
    for x in log["samples_bps"]:
        out = probe.push(x)
        if out["decision"] != "continue":
            break
    assert out["samples"] == n
    assert (out["decision"] == "forced_stop") == forced
    assert close(out["throughput_bps"], pred)
    return out


def test_stops_resets_and_bad_input():
    model = opsel.FastProbModel.from_json((FIX / "model_small.json").read_text())
    probe = opsel.FastProbe(model)
    with pytest.raises(opsel.InvalidInputError, match="finite"):
        probe.push(float("nan"))
    assert len(probe) == 0, "a rejected sample is not recorded"
    with pytest.raises(opsel.InvalidInputError):
        probe.push(-1.0)
    d = {"decision": "continue"}
    while d["decision"] == "continue":
        d = probe.push(9.0e8)
    with pytest.raises(opsel.InvalidInputError, match="reset"):
        probe.push(9.0e8)
    probe.reset()
    assert len(probe) == 0
    assert probe.push(9.0e8)["decision"] in ("continue", "stop")
    with pytest.raises(opsel.InvalidInputError, match="threshold"):
        model.probe(threshold=1.5)
    with pytest.raises(opsel.InvalidModelError):
        opsel.FastProbModel.from_json('{"format": "opsel-model", "version": 1, "kind": "knn-dtw"}')
    with pytest.raises(opsel.OpselIOError):
        opsel.FastProbModel.load(FIX / "does-not-exist.json")


def test_train_fastprob_is_a_subcommand_of_opsel_train(tmp_path):
    # `python -m opsel.train fastprob ...` hands the rest of the line to the FastProb trainer:
    # the logs it writes are the trainer's (seeded, one JSON object per transfer).
    import json

    from opsel.train.__main__ import main

    out = tmp_path / "synth.jsonl"
    main(["fastprob", "synth", "--n", "4", "--seed", "2", "-o", str(out)])
    logs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(logs) == 4
    assert all(log["samples_bps"] and log["interval_ns"] == 1_000_000_000 for log in logs)


def test_out_of_fold_gate_labels_fit_both_forests_on_every_log_and_replay_in_rust():
    # train_fastprob --gate-labels oof (docs/results/fastprob.md, "On the complete corpus"):
    # the gate and the regressor of each length see every training log, where the 70/30
    # split of 004 Fig. 6a gives the gate 30 % of them; the file format is unchanged, so
    # the core replays it exactly like a 70/30 model.
    pytest.importorskip("sklearn")
    from opsel import train_fastprob as tf

    logs = tf.synthetic_logs(90, seed=5, interval_ns=100_000_000)
    spec = {"interval_ns": 100_000_000, "cap": 12, "first_gate_n": 1, "last_gate_n": 11,
            "features": "ratio+stats", "gate_every": 5}
    params = {"n_estimators": 4, "max_depth": 4}
    oof = tf.train_pairs(logs, spec, params, labels="oof")
    hold = tf.train_pairs(logs, spec, params)

    def rows(forest):  # training rows one bootstrap tree was drawn from
        return forest.estimators_[0].tree_.weighted_n_node_samples[0]

    gated = [n for n, st in oof["stages"].items() if st.gate is not None and not isinstance(st.gate, str)]
    assert gated, "no fitted gate in the out-of-fold model"
    for n in gated:
        assert rows(oof["stages"][n].gate) == len(logs)
        assert rows(oof["stages"][n].regressor) == len(logs)
        if not isinstance(hold["stages"][n].gate, str):
            assert rows(hold["stages"][n].gate) == len(logs) - round(0.7 * len(logs))
    with pytest.raises(ValueError, match="labels"):
        tf.train_pairs(logs, spec, params, labels="kfold")

    model = opsel.FastProbModel.from_json(json.dumps(tf.export(oof)))
    for d, (n, pred, forced, _) in zip(logs[:20], tf.run_loop(oof, logs[:20])):
        replays(model, d, n, pred, forced)


def test_incremental_replay_retrains_with_the_gate_labels_it_is_given(monkeypatch):
    # 004 §V replay: every (re)training must fit the gates as the model being replayed was fitted.
    pytest.importorskip("sklearn")
    from opsel import train_fastprob as tf

    logs = tf.synthetic_logs(70, seed=3, interval_ns=100_000_000)
    spec = {"interval_ns": 100_000_000, "cap": 12, "first_gate_n": 1, "last_gate_n": 11,
            "features": "ratio+stats", "gate_every": 5}
    seen = []
    real = tf.train_pairs

    def spy(*a, **k):
        seen.append((k.get("labels"), k.get("gate_trees")))
        return real(*a, **k)

    monkeypatch.setattr(tf, "train_pairs", spy)
    r = tf.incremental(logs, initial=40, batch=10, threshold_pct=0.0, spec=spec,
                       params={"n_estimators": 3, "max_depth": 3}, labels="oof", gate_trees=2)
    # A 0 % threshold retrains after every batch: the initial fit and three retrains.
    assert r["batches"] == 3 and r["retrains"] == 3
    assert seen == [("oof", 2)] * 4


def test_log_target_and_error_gates_write_version_3_and_replay_in_rust():
    # train_fastprob --target log --gate error (format version 3, our extensions;
    # docs/results/fastprob.md, "Shorter probes"): the gates are regressors of
    # log(err % + 0.5) on out-of-fold errors and stop below log(E + 0.5); a model that
    # uses neither is still written as version 2, without the new keys.
    pytest.importorskip("sklearn")
    import math

    from opsel import train_fastprob as tf

    logs = tf.synthetic_logs(90, seed=5, interval_ns=100_000_000)
    spec = {"interval_ns": 100_000_000, "cap": 12, "first_gate_n": 1, "last_gate_n": 11,
            "features": "ratio+stats", "gate_every": 5}
    params = {"n_estimators": 4, "max_depth": 4}
    old = tf.export(tf.train_pairs(logs, spec, params, labels="oof"))
    assert old["version"] == 2 and "target" not in old["spec"] and "gate" not in old["spec"]

    v3spec = dict(spec, target="log", gate="error", stop_error_pct=8.0)
    m = tf.train_pairs(logs, v3spec, params, labels="oof", gate_trees=3)
    f = tf.export(m)
    assert f["version"] == 3 and f["spec"]["gate"] == "error" and f["spec"]["target"] == "log"
    gates = [s["gate"] for s in f["stages"] if "gate" in s]
    assert gates and all(g["kind"] == "rf-regressor" and len(g["trees"]) == 3 for g in gates)
    with pytest.raises(ValueError, match="labels='oof' only"):
        tf.train_pairs(logs, v3spec, params)

    model = opsel.FastProbModel.from_json(json.dumps(f))
    res = tf.run_loop(m, logs[:30])
    assert {r[2] for r in res} == {True, False}, "the replay exercises both exits"
    for d, (n, pred, forced, out_gate) in zip(logs[:30], res):
        if not forced:
            assert out_gate < math.log(8.0 + 0.5)
        out = replays(model, d, n, pred, forced)
        assert out["p_predictable"] is None or forced


@pytest.mark.parametrize("layout", ["per_length", "pooled"])
def test_version_4_gates_with_spread_and_scale_inputs_replay_in_rust(layout):
    # train_fastprob --gate-layout pooled --gate-inputs abs,sd (format version 4, our
    # extensions; docs/results/fastprob.md, "A deployable gate: one budget, format version
    # 4"): the gate sees the log of the prefix mean and the regressor's tree spread, per
    # length or as one pooled forest for every length; the Rust core stops where
    # scikit-learn does. A model without those fields is still written as version 3.
    pytest.importorskip("sklearn")
    from opsel import train_fastprob as tf

    logs = tf.synthetic_logs(120, seed=7, interval_ns=100_000_000)
    spec = {"interval_ns": 100_000_000, "cap": 12, "first_gate_n": 1, "last_gate_n": 11,
            "features": "ratio+stats", "gate_every": 5, "target": "log", "gate": "error", "stop_error_pct": 6.0}
    params = {"n_estimators": 4, "max_depth": 4}
    assert tf.export(tf.train_pairs(logs, spec, params, labels="oof"))["version"] == 3
    v4 = dict(spec, gate_layout=layout, gate_inputs=["abs", "sd"])
    m = tf.train_pairs(logs[:90], v4, params, labels="oof", gate_trees=3, gate_params={"max_depth": 5})
    if layout == "pooled":
        m["family_budgets"] = {"lan": 9.0, "wan": 4.0}
    f = tf.export(m)
    assert f["version"] == 4 and f["spec"]["gate_inputs"] == ["abs", "sd"]
    if layout == "pooled":
        g = f["pooled_gate"]
        assert g["n_features"] == tf.POOLED_BASE_INPUTS + 2 and len(g["trees"]) == 3
        assert not any("gate" in s for s in f["stages"]) and f["family_budgets"] == {"lan": 9.0, "wan": 4.0}
    else:
        gates = [s["gate"] for s in f["stages"] if "gate" in s]
        assert gates and all(g["n_features"] == tf.n_features(s["n"], "ratio+stats") + 2
                             for g, s in zip(gates, [s for s in f["stages"] if "gate" in s]))
    model = opsel.FastProbModel.from_json(json.dumps(f))
    res = tf.run_loop(m, logs[90:])
    assert {r[2] for r in res} == {True, False}, "the replay exercises both exits"
    for d, (n, pred, forced, _) in zip(logs[90:], res):
        replays(model, d, n, pred, forced)
    with pytest.raises(ValueError, match="in that order"):
        tf.train_pairs(logs, dict(v4, gate_inputs=["sd", "abs"]), params, labels="oof")
    with pytest.raises(ValueError, match="needs gate 'error'"):
        tf.train_pairs(logs, dict(v4, gate="classifier", gate_layout="pooled"), params, labels="oof")


CORE_FIX = pathlib.Path(__file__).resolve().parents[3] / "core" / "tests" / "fastprob_fixtures"


def stop_len(probe, samples):
    for x in samples:
        out = probe.push(x)
        if out["decision"] != "continue":
            return out["samples"]
    raise AssertionError("no stop")


def test_family_and_stop_error_pct_set_the_budget():
    # The version-4 pooled fixture stores lan 8 %, shared 6 %, wan 4 % beside its 5 %
    # default: a family's budget decides as the same E given directly, a larger budget
    # never stops later and stops earlier on some logs (so an ignored setting fails).
    model = opsel.FastProbModel.load(CORE_FIX / "model_v4_pooled_small.json")
    assert model.family_budgets == {"lan": 8.0, "shared": 6.0, "wan": 4.0}
    logs = json.loads((CORE_FIX / "sklearn_v4_pooled_small.json").read_text())["logs"]
    earlier = 0
    for log in logs:
        s = log["samples_bps"]
        lan = stop_len(model.probe(family="lan"), s)
        wan = stop_len(opsel.FastProbe(model, family="wan"), s)
        assert lan == stop_len(model.probe(stop_error_pct=8.0), s)
        assert wan == stop_len(opsel.FastProbe(model, stop_error_pct=4.0), s)
        assert stop_len(model.probe(), s) == log["stop_n"]
        assert lan <= log["stop_n"] <= wan
        earlier += lan < wan
    assert earlier > 0
    with pytest.raises(ValueError, match=r'unknown family "dsl".*"lan" \(8 %\)'):
        model.probe(family="dsl")
    with pytest.raises(ValueError, match="both"):
        model.probe(family="lan", stop_error_pct=5.0)
    with pytest.raises(ValueError, match=r"\(0, 100\)"):
        model.probe(stop_error_pct=0.0)
    plain = opsel.FastProbModel.load(FIX / "model_v2_small.json")
    assert plain.family_budgets == {}
    with pytest.raises(ValueError, match="no family_budgets"):
        plain.probe(family="lan")


def test_an_inferred_family_sets_the_budget_and_replays_in_rust():
    # train_fastprob --family-classifier (format version 4; docs/results/fastprob.md, "A
    # family the probe infers itself"): without a family or a budget, each gate's budget
    # follows the family a small forest infers from the prefix; the Rust core stops where
    # scikit-learn does, and the inference moves stops against the file's one budget.
    pytest.importorskip("sklearn")
    from opsel import train_fastprob as tf

    logs = tf.synthetic_logs(150, seed=9, interval_ns=100_000_000)
    spec = {"interval_ns": 100_000_000, "cap": 12, "first_gate_n": 1, "last_gate_n": 11,
            "features": "ratio+stats", "gate_every": 2, "target": "log", "gate": "error", "stop_error_pct": 5.0,
            "gate_layout": "pooled", "gate_inputs": ["sd"]}
    m = tf.train_pairs(logs[:100], spec, {"n_estimators": 4, "max_depth": 4}, labels="oof", gate_trees=4,
                       gate_params={"max_depth": 6})
    m["family_budgets"] = {"lan": 15.0, "wan": 2.0, "shared": 6.0}
    for mode in tf.FAMILY_MODES:
        m["family_classifier"] = tf.fit_family_classifier(logs[:100], spec, 4, 3, mode=mode)
        f = tf.export(m)
        assert f["version"] == 4 and f["family_classifier"]["classes"] == ["lan", "shared", "wan"]
        assert f["family_classifier"]["forest"]["n_features"] == tf.POOLED_BASE_INPUTS + 1
        model = opsel.FastProbModel.from_json(json.dumps(f))
        res = tf.run_loop(m, logs[100:])
        assert {r[2] for r in res} == {True, False}, "the replay exercises both exits"
        moved = 0
        for d, (n, pred, forced, _) in zip(logs[100:], res):
            replays(model, d, n, pred, forced)
            moved += n != stop_len(model.probe(stop_error_pct=5.0), d["samples_bps"])
        assert moved > 0, mode
