//! The Rust prober equals scikit-learn on models exported by
//! `opsel.train_fastprob`: every stage's regressor output and gate probability to
//! 1e-9 relative, and the same stop length, forced flag and prediction for every
//! logged transfer. Two fixtures:
//!
//! - `model_small.json` / `sklearn_small.json`: model format version 1 (raw
//!   samples, a gate at every length), written before version 2 existed by
//!   `train_fastprob.py train --synthetic 300 --seed 3 --trees 5 --depth 4
//!   -o model_small.json --fixture sklearn_small.json`; it checks that version-1
//!   files still load and run as they did;
//! - `model_v2_small.json` / `sklearn_v2_small.json`: version 2, ratio inputs with
//!   prefix statistics and a gate every 3 lengths (`... --features ratio+stats
//!   --gate-every 3 --fixed-n 3,10 -o model_v2_small.json --fixture
//!   sklearn_v2_small.json --fixture-logs 30`);
//! - `core/tests/fastprob_fixtures/model_v3_small.json` / `sklearn_v3_small.json`:
//!   version 3, a log-ratio target and error-regression gates (our extensions;
//!   docs/results/fastprob.md, "Shorter probes"): `... --features ratio+stats
//!   --gate-every 3 --gate-labels oof --target log --gate error --stop-error-pct 5
//!   --gate-trees 4 --fixed-n 3,10 --skip-cv -o model_v3_small.json --fixture
//!   sklearn_v3_small.json --fixture-logs 30`. The golden test of the version-3
//!   path: same stop sample, forced flag and prediction as scikit-learn;
//! - `core/tests/fastprob_fixtures/model_v4_small.json` / `sklearn_v4_small.json`:
//!   version 4, per-length error gates whose inputs add the absolute scale and the
//!   regressor's tree spread (`... --target log --gate error --stop-error-pct 5
//!   --gate-inputs abs,sd --gate-trees 4 --gate-min-samples-leaf 3
//!   --gate-max-features 0.7 --fixed-n 3,10 --skip-cv -o model_v4_small.json
//!   --fixture sklearn_v4_small.json --fixture-logs 30`);
//! - `core/tests/fastprob_fixtures/model_v4_pooled_small.json` /
//!   `sklearn_v4_pooled_small.json`: version 4, one pooled error gate for every
//!   gate length with the same extra inputs and per-family budgets stored
//!   (`... --gate-layout pooled --gate-inputs abs,sd --gate-trees 6 --gate-depth 5
//!   --family-budgets '{"lan": 8, "wan": 4, "shared": 6}' ...`; docs/results/fastprob.md,
//!   "A deployable gate: one budget, format version 4").
//! - `core/tests/fastprob_fixtures/model_v4_family_small.json` /
//!   `sklearn_v4_family_small.json` (and `..._family_hard_small...`): the pooled
//!   fixture's configuration with a family classifier whose predicted family sets
//!   each gate's budget (`... --family-budgets '{"lan": 12, "wan": 3, "shared": 6}'
//!   --family-classifier 4,3 --family-mode soft` (or `hard`) `-o
//!   model_v4_family_small.json --fixture sklearn_v4_family_small.json
//!   --fixture-logs 30`; docs/results/fastprob.md, "A family the probe infers itself").
use opsel::fastprob::{Decision, FamilyMode, FastProbModel, Prober};
use serde_json::Value;

fn fixture(name: &str) -> String {
    // Version-3 fixtures live beside the core's tests; the older ones are shared
    // with the bindings' tests.
    let dir = if name.contains("_v3_") || name.contains("_v4_") {
        "tests/fastprob_fixtures".to_string()
    } else {
        "../tests/fixtures/fastprob".to_string()
    };
    std::fs::read_to_string(format!("{}/{dir}/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn prober_equals_sklearn_on_the_exported_model() {
    replay("model_small.json", "sklearn_small.json");
}

#[test]
fn prober_equals_sklearn_on_a_version_2_ratio_model() {
    let model = FastProbModel::from_json(&fixture("model_v2_small.json")).unwrap();
    assert_eq!(model.spec().features, opsel::fastprob::Features::RatioStats);
    assert_eq!(model.spec().gate_every, 3);
    replay("model_v2_small.json", "sklearn_v2_small.json");
}

#[test]
fn prober_equals_sklearn_on_a_version_3_log_target_error_gate_model() {
    let model = FastProbModel::from_json(&fixture("model_v3_small.json")).unwrap();
    assert_eq!(model.spec().target, opsel::fastprob::Target::Log);
    assert_eq!(model.spec().gate, opsel::fastprob::GateKind::Error);
    assert_eq!(model.spec().stop_error_pct, 5.0);
    replay("model_v3_small.json", "sklearn_v3_small.json");
}

#[test]
fn prober_equals_sklearn_on_a_version_4_model_with_spread_and_scale_gate_inputs() {
    let model = FastProbModel::from_json(&fixture("model_v4_small.json")).unwrap();
    let gi = model.spec().gate_inputs;
    assert!(gi.abs && gi.sd);
    assert_eq!(
        model.spec().gate_layout,
        opsel::fastprob::GateLayout::PerLength
    );
    replay("model_v4_small.json", "sklearn_v4_small.json");
}

#[test]
fn prober_equals_sklearn_on_a_version_4_pooled_gate_model() {
    let model = FastProbModel::from_json(&fixture("model_v4_pooled_small.json")).unwrap();
    assert_eq!(
        model.spec().gate_layout,
        opsel::fastprob::GateLayout::Pooled
    );
    assert!(model.has_pooled_gate());
    assert_eq!(model.family_budgets().len(), 3);
    replay("model_v4_pooled_small.json", "sklearn_v4_pooled_small.json");
}

#[test]
fn prober_equals_sklearn_with_an_inferred_family_soft_and_hard() {
    for (m, f, mode) in [
        (
            "model_v4_family_small.json",
            "sklearn_v4_family_small.json",
            FamilyMode::Soft,
        ),
        (
            "model_v4_family_hard_small.json",
            "sklearn_v4_family_hard_small.json",
            FamilyMode::Hard,
        ),
    ] {
        let model = FastProbModel::from_json(&fixture(m)).unwrap();
        let (classes, got_mode) = model.family_classifier().unwrap();
        assert_eq!(classes, ["lan", "shared", "wan"]);
        assert_eq!(got_mode, mode);
        assert!(Prober::new(&model).infers_family());
        replay(m, f);
    }
}

/// The inferred budget is what decides: the same file with its default budget
/// set (no inference) stops elsewhere on some logs, and a caller's family or
/// budget switches the inference off.
#[test]
fn an_inferred_family_moves_stops_and_a_caller_budget_overrides_it() {
    let model = FastProbModel::from_json(&fixture("model_v4_family_small.json")).unwrap();
    let fx: Value = serde_json::from_str(&fixture("sklearn_v4_family_small.json")).unwrap();
    let e0 = model.spec().stop_error_pct;
    let (mut moved, mut n) = (0, 0);
    for log in fx["logs"].as_array().unwrap() {
        let s = f64s(&log["samples_bps"]);
        let inferred = run(Prober::new(&model), &s);
        let fixed = Prober::new(&model).stop_error_pct(e0).unwrap();
        assert!(!fixed.infers_family());
        let fixed = run(fixed, &s);
        moved += (inferred.samples != fixed.samples) as usize;
        // A family's budget is that budget set directly, inference off.
        for (fam, e) in model.family_budgets() {
            let p = Prober::new(&model).family(fam).unwrap();
            assert!(!p.infers_family());
            assert_eq!(
                run(p, &s),
                run(Prober::new(&model).stop_error_pct(*e).unwrap(), &s)
            );
        }
        n += 1;
    }
    assert!(moved > 0, "the inferred budget moved no stop of {n}");
}

/// A family's stored budget decides as the same budget set directly, and as the
/// file rewritten with that budget as its default: the family path is only a
/// budget lookup. The default path (no family) is the fixture's, checked above.
#[test]
fn a_family_budget_is_the_default_budget_of_a_file_that_stores_it() {
    let text = fixture("model_v4_pooled_small.json");
    let model = FastProbModel::from_json(&text).unwrap();
    let fx: Value = serde_json::from_str(&fixture("sklearn_v4_pooled_small.json")).unwrap();
    let mut changed = 0;
    for (fam, e) in model.family_budgets() {
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v["spec"]["stop_error_pct"] = (*e).into();
        let as_default = FastProbModel::from_json(&v.to_string()).unwrap();
        for log in fx["logs"].as_array().unwrap() {
            let s = f64s(&log["samples_bps"]);
            let a = run(Prober::new(&model).family(fam).unwrap(), &s);
            let b = run(Prober::new(&model).stop_error_pct(*e).unwrap(), &s);
            let c = as_default.replay(&s).unwrap();
            assert_eq!(a, b, "family {fam}");
            assert_eq!((a.samples, a.forced), (c.samples, c.forced), "family {fam}");
            assert_eq!(a.throughput_bps, c.prediction_bps);
            changed += (a.samples as u64 != log["stop_n"].as_u64().unwrap()) as usize;
        }
    }
    // The budgets differ from the default 5 %: some probes must stop elsewhere.
    assert!(changed > 0, "no family budget moved any stop");
    let err = Prober::new(&model)
        .family("satellite")
        .unwrap_err()
        .to_string();
    assert!(err.contains("satellite") && err.contains("lan"), "{err}");
    assert!(Prober::new(&model).stop_error_pct(0.0).is_err());
    assert!(Prober::new(&model).stop_error_pct(f64::NAN).is_err());
}

fn run(mut p: Prober<'_>, s: &[f64]) -> opsel::fastprob::Prediction {
    for x in s {
        match p.push(*x).unwrap() {
            Decision::Continue => {}
            Decision::Stop(pr) | Decision::ForcedStop(pr) => return pr,
        }
    }
    panic!("the probe did not stop")
}

/// A version-2 file rewritten as version 3 with the new fields at their defaults
/// decides exactly as the version-2 file: the version-3 code path adds nothing
/// when its fields are unused.
#[test]
fn version_3_defaults_decide_as_version_2() {
    let text = fixture("model_v2_small.json");
    let v2 = FastProbModel::from_json(&text).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["version"] = 3.into();
    v["spec"]["target"] = "linear".into();
    v["spec"]["gate"] = "classifier".into();
    v["spec"]["stop_error_pct"] = 5.0.into();
    let v3 = FastProbModel::from_json(&v.to_string()).unwrap();
    let fx: Value = serde_json::from_str(&fixture("sklearn_v2_small.json")).unwrap();
    for log in fx["logs"].as_array().unwrap() {
        let s = f64s(&log["samples_bps"]);
        let (a, b) = (v2.replay(&s).unwrap(), v3.replay(&s).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.samples as u64, log["stop_n"].as_u64().unwrap());
    }
}

fn replay(model_file: &str, fixture_file: &str) {
    let model = FastProbModel::from_json(&fixture(model_file)).unwrap();
    assert_eq!(model.spec().cap, 15);
    let fx: Value = serde_json::from_str(&fixture(fixture_file)).unwrap();
    let logs = fx["logs"].as_array().unwrap();
    assert!(logs.len() >= 20);
    let (mut stops, mut forced, mut checked) = (0, 0, 0);
    for (i, log) in logs.iter().enumerate() {
        let s = f64s(&log["samples_bps"]);
        // Per-stage outputs: the fixed-n regressor and the gate probability.
        for st in log["stages"].as_array().unwrap() {
            let n = st["n"].as_u64().unwrap() as usize;
            let want = st["regressor"].as_f64().unwrap();
            let got = model.predict_fixed(&s[..n]).unwrap();
            assert!(close(got, want), "log {i} n={n}: rust {got} sklearn {want}");
            checked += 1;
        }
        // The online loop.
        let mut p = Prober::new(&model);
        let mut out = None;
        for (k, x) in s.iter().enumerate() {
            match p.push(*x).unwrap() {
                Decision::Continue => assert!(k + 1 < model.spec().cap),
                Decision::Stop(pr) | Decision::ForcedStop(pr) => {
                    out = Some(pr);
                    break;
                }
            }
        }
        let pr = out.expect("the probe stops by the cap");
        assert_eq!(
            pr.samples as u64,
            log["stop_n"].as_u64().unwrap(),
            "log {i}"
        );
        assert_eq!(pr.forced, log["forced"].as_bool().unwrap(), "log {i}");
        let want = log["prediction_bps"].as_f64().unwrap();
        assert!(
            close(pr.throughput_bps, want),
            "log {i}: {} vs {want}",
            pr.throughput_bps
        );
        match (pr.p_predictable, log["p"].as_f64()) {
            (Some(a), Some(b)) => assert!(close(a, b), "log {i}: p {a} vs {b}"),
            (None, None) => {}
            (a, b) => panic!("log {i}: p {a:?} vs {b:?}"),
        }
        if pr.forced {
            forced += 1
        } else {
            stops += 1
        }
    }
    eprintln!(
        "{} logs: {stops} gated stops, {forced} forced; {checked} stage outputs equal",
        logs.len()
    );
    // The fixture exercises both exits of the loop.
    assert!(stops > 0 && forced > 0, "stops {stops}, forced {forced}");
}
