//! FastProb model files and the early-stopping loop on hand-built models whose
//! decisions are known: a gate that fires when the latest sample exceeds 500 and
//! regressors that return `1000 · n`, so each outcome names the stage that made it.
use opsel::fastprob::{Decision, FastProbModel, FastProbSpec, GateKind, Prober, Target};
use opsel::ErrorKind;
use serde_json::{json, Value};

/// rf-classifier, one tree: x[n-1] <= 500 → class 0 (not predictable), else class 1.
fn gate(n: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-classifier",
           "n_features": n, "n_outputs": 2,
           "trees": [{"feature": [n as i64 - 1, -1, -1], "threshold": [500.0, 0.0, 0.0],
                      "left": [1, -1, -1], "right": [2, -1, -1],
                      "value": [0.5, 0.5, 1.0, 0.0, 0.0, 1.0]}]})
}

/// rf-regressor, one leaf: 1000 · n.
fn reg(n: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
           "n_features": n, "trees": [{"feature": [-1], "threshold": [0.0],
           "left": [-1], "right": [-1], "value": [1000.0 * n as f64]}]})
}

fn model_json(spec: &FastProbSpec, extra_n: usize) -> Value {
    let last = spec.cap.max(extra_n);
    let stages: Vec<Value> = (1..=last)
        .filter(|n| *n >= spec.first_gate_n || *n == spec.cap)
        .map(|n| {
            let mut s = json!({"n": n, "regressor": reg(n)});
            if (spec.first_gate_n..=spec.last_gate_n).contains(&n) {
                s["gate"] = gate(n);
            }
            s
        })
        .collect();
    json!({"format": "opsel-model", "version": 1, "kind": "fastprob",
           "spec": spec, "stages": stages, "training": {"source": "hand-built"}})
}

fn load(v: &Value) -> opsel::Result<FastProbModel> {
    FastProbModel::from_json(&v.to_string())
}

#[test]
fn stops_at_the_first_predictable_length() {
    let m = load(&model_json(&FastProbSpec::default(), 0)).unwrap();
    let mut p = Prober::new(&m);
    assert_eq!(p.push(100.0).unwrap(), Decision::Continue);
    assert_eq!(p.push(200.0).unwrap(), Decision::Continue);
    match p.push(600.0).unwrap() {
        Decision::Stop(pr) => {
            assert_eq!(pr.samples, 3);
            assert_eq!(pr.throughput_bps, 3000.0);
            assert_eq!(pr.probe_ns, 3_000_000_000);
            assert_eq!(pr.p_predictable, Some(1.0));
            assert!(!pr.forced);
        }
        d => panic!("expected Stop, got {d:?}"),
    }
    // A stopped probe refuses more samples until reset.
    assert_eq!(p.push(1.0).unwrap_err().kind(), ErrorKind::InvalidInput);
    p.reset();
    assert!(p.is_empty());
    assert!(matches!(p.push(900.0).unwrap(), Decision::Stop(pr) if pr.samples == 1));
}

#[test]
fn forced_stop_at_the_cap_uses_the_cap_regressor() {
    // Default indexing: gates at 1..=14, forced 15-input prediction (004 §IV, 14 pairs).
    let m = load(&model_json(&FastProbSpec::default(), 0)).unwrap();
    let mut p = Prober::new(&m);
    for _ in 0..14 {
        assert_eq!(p.push(100.0).unwrap(), Decision::Continue);
    }
    match p.push(100.0).unwrap() {
        Decision::ForcedStop(pr) => {
            assert_eq!((pr.samples, pr.throughput_bps), (15, 15000.0));
            assert_eq!(pr.p_predictable, None);
            assert!(pr.forced);
        }
        d => panic!("expected ForcedStop, got {d:?}"),
    }
    // Gates at 2..=15 and a cap of 15: a firing gate at 15 is a Stop, not forced.
    let spec = FastProbSpec {
        first_gate_n: 2,
        last_gate_n: 15,
        ..FastProbSpec::default()
    };
    let m = load(&model_json(&spec, 0)).unwrap();
    let mut p = Prober::new(&m);
    // n = 1 has no stage: a high first sample cannot stop the probe.
    assert_eq!(p.push(900.0).unwrap(), Decision::Continue);
    for _ in 0..13 {
        assert_eq!(p.push(100.0).unwrap(), Decision::Continue);
    }
    assert!(matches!(p.push(900.0).unwrap(), Decision::Stop(pr) if pr.samples == 15));
}

#[test]
fn threshold_interval_and_replay() {
    let spec = FastProbSpec {
        interval_ns: 100_000_000,
        cap: 5,
        last_gate_n: 4,
        ..FastProbSpec::default()
    };
    let m = load(&model_json(&spec, 8)).unwrap();
    assert_eq!(
        m.regressor_lengths().collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let e = m.replay(&[100.0, 700.0, 100.0]).unwrap();
    assert_eq!((e.samples, e.prediction_bps, e.forced), (2, 2000.0, false));
    let e = m.replay(&[100.0; 10]).unwrap();
    assert_eq!((e.samples, e.prediction_bps, e.forced), (5, 5000.0, true));
    assert!(
        m.replay(&[100.0; 3]).is_err(),
        "a log shorter than the probe"
    );
    // Fixed-n RF baseline at a regressor-only length beyond the cap.
    assert_eq!(m.predict_fixed(&[1.0; 8]).unwrap(), 8000.0);
    assert_eq!(
        m.predict_fixed(&[1.0; 9]).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert!(m.predict_fixed(&[]).is_err());
    // Interval 100 ms: probe time follows the spec.
    let mut p = Prober::new(&m);
    p.push(1.0).unwrap();
    assert!(matches!(p.push(600.0).unwrap(), Decision::Stop(pr) if pr.probe_ns == 200_000_000));
    // A threshold of 0.99 still fires on P = 1; 1.0 itself is rejected.
    assert!(Prober::with_threshold(&m, 1.0).is_err());
    assert!(Prober::with_threshold(&m, f64::NAN).is_err());
    let mut p = Prober::with_threshold(&m, 0.99).unwrap();
    assert!(matches!(p.push(600.0).unwrap(), Decision::Stop(_)));
}

#[test]
fn bad_samples_are_rejected_and_not_recorded() {
    let m = load(&model_json(&FastProbSpec::default(), 0)).unwrap();
    let mut p = Prober::new(&m);
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        assert_eq!(p.push(bad).unwrap_err().kind(), ErrorKind::InvalidInput);
    }
    assert!(p.is_empty());
    p.push(1.0).unwrap();
    assert_eq!(p.len(), 1);
}

#[test]
fn constant_gates_and_scalers() {
    let mut v = model_json(&FastProbSpec::default(), 0);
    v["stages"][0]["gate"] = json!("never");
    v["stages"][1]["gate"] = json!("always");
    // Scaler at n = 3: the gate sees (x - 1000) / 2, so 600 → -200 (≤ 500: no stop).
    v["stages"][2]["scaler"] = json!({"mean": [0.0, 0.0, 1000.0], "scale": [1.0, 1.0, 2.0]});
    let m = load(&v).unwrap();
    let mut p = Prober::new(&m);
    assert_eq!(p.push(900.0).unwrap(), Decision::Continue);
    assert!(
        matches!(p.push(0.0).unwrap(), Decision::Stop(pr) if pr.samples == 2 && pr.p_predictable == Some(1.0))
    );
    let mut v = model_json(&FastProbSpec::default(), 0);
    v["stages"][0]["gate"] = json!("never");
    v["stages"][1]["gate"] = json!("never");
    v["stages"][2]["scaler"] = json!({"mean": [0.0, 0.0, 1000.0], "scale": [1.0, 1.0, 2.0]});
    let m = load(&v).unwrap();
    let mut p = Prober::new(&m);
    p.push(900.0).unwrap();
    p.push(900.0).unwrap();
    assert_eq!(p.push(600.0).unwrap(), Decision::Continue);
    // 2002 → (2002 - 1000) / 2 = 501 > 500: stops.
    let mut p = Prober::new(&m);
    p.push(0.0).unwrap();
    p.push(0.0).unwrap();
    assert!(matches!(p.push(2002.0).unwrap(), Decision::Stop(_)));
}

fn err(v: &Value) -> (ErrorKind, String) {
    let e = load(v).unwrap_err();
    (e.kind(), e.to_string())
}

/// An edit of a good model file and the text its error must contain.
type Edit = Box<dyn Fn(&mut Value)>;

#[test]
fn bad_model_files_are_rejected_with_clear_errors() {
    let good = model_json(&FastProbSpec::default(), 0);
    assert!(load(&good).is_ok());
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["format"] = json!("other")),
            "not an opsel model",
        ),
        (
            Box::new(|v| v["kind"] = json!("rf-regressor")),
            "expected \"fastprob\"",
        ),
        (Box::new(|v| v["spec"]["cap"] = json!(0)), "cap 0"),
        (Box::new(|v| v["spec"]["cap"] = json!(65)), "cap 65"),
        (
            Box::new(|v| v["spec"]["last_gate_n"] = json!(16)),
            "first_gate_n <= last_gate_n <= cap",
        ),
        (
            Box::new(|v| v["spec"]["stop_threshold"] = json!(1.5)),
            "stop_threshold",
        ),
        (
            Box::new(|v| v["spec"]["interval_ns"] = json!(0)),
            "interval_ns is 0",
        ),
        (Box::new(|v| v["spec"]["bogus"] = json!(1)), "unknown field"),
        (
            Box::new(|v| v["sample_unit"] = json!("MB/s")),
            "sample_unit",
        ),
        (
            Box::new(|v| {
                v["stages"].as_array_mut().unwrap().remove(14);
            }),
            "no stage for the cap n=15",
        ),
        (
            Box::new(|v| {
                v["stages"].as_array_mut().unwrap().remove(4);
            }),
            "no stage for n=5",
        ),
        (
            Box::new(|v| {
                let s = v["stages"][3].clone();
                v["stages"].as_array_mut().unwrap().insert(3, s);
            }),
            "strictly increasing",
        ),
        (
            Box::new(|v| {
                v["stages"][4].as_object_mut().unwrap().remove("gate");
            }),
            "has no gate",
        ),
        (
            Box::new(|v| v["stages"][14]["gate"] = gate(15)),
            "is not a gated length",
        ),
        (
            Box::new(|v| v["stages"][4]["gate"] = gate(4)),
            "gate takes 4 features, expected 5",
        ),
        (
            Box::new(|v| v["stages"][4]["regressor"] = reg(6)),
            "regressor takes 6 features, expected 5",
        ),
        (
            Box::new(|v| v["stages"][4]["gate"] = reg(5)),
            "expected a binary classifier",
        ),
        (
            Box::new(|v| v["stages"][4]["regressor"] = gate(5)),
            "expected rf-regressor or gbt-regressor",
        ),
        (
            Box::new(|v| v["stages"][4]["gate"] = json!("sometimes")),
            "\"sometimes\"",
        ),
        (
            Box::new(|v| v["stages"][4]["regressor"]["trees"][0]["value"] = json!([f64::NAN])),
            "stage n=5 regressor",
        ),
        (
            Box::new(|v| v["stages"][4]["scaler"] = json!({"mean": [0.0], "scale": [1.0]})),
            "scaler mean/scale have lengths 1/1, expected 5",
        ),
        (
            Box::new(|v| {
                v["stages"][1]["scaler"] = json!({"mean": [0.0, 0.0], "scale": [1.0, 0.0]})
            }),
            "scales > 0",
        ),
        (Box::new(|v| v["stages"][1]["n"] = json!(0)), "stage n=0"),
    ];
    for (i, (edit, want)) in cases.iter().enumerate() {
        let mut v = good.clone();
        edit(&mut v);
        let (kind, msg) = err(&v);
        assert_eq!(kind, ErrorKind::InvalidModel, "case {i}: {msg}");
        assert!(msg.contains(want), "case {i}: {msg:?} lacks {want:?}");
    }
    // Versions 2-4 read; 5 is unknown; version 1 cannot carry the version-2 fields.
    let mut v = good.clone();
    v["version"] = json!(2);
    assert!(FastProbModel::from_json(&v.to_string()).is_ok());
    v["version"] = json!(3);
    assert!(FastProbModel::from_json(&v.to_string()).is_ok());
    v["version"] = json!(4);
    assert!(FastProbModel::from_json(&v.to_string()).is_ok());
    v["version"] = json!(5);
    assert_eq!(err(&v).0, ErrorKind::UnsupportedVersion);
    let mut v = good.clone();
    v["version"] = json!(1);
    v["spec"]["gate_every"] = json!(2);
    assert!(
        err(&v).1.contains("version-1 file cannot set"),
        "{}",
        err(&v).1
    );
    // Ratio features take no scaler and n + 4 inputs with stats.
    let mut v = good.clone();
    v["version"] = json!(2);
    v["spec"]["features"] = json!("ratio");
    v["stages"][0]["scaler"] = json!({"mean": [0.0], "scale": [1.0]});
    assert!(err(&v).1.contains("are not scaled"), "{}", err(&v).1);
    let mut v = good.clone();
    v["version"] = json!(2);
    v["spec"]["features"] = json!("ratio+stats");
    for st in v["stages"].as_array_mut().unwrap() {
        st.as_object_mut().unwrap().remove("scaler");
    }
    assert!(
        err(&v).1.contains("expected 5 (RatioStats inputs)"),
        "{}",
        err(&v).1
    );
    let mut v = good.clone();
    v["version"] = json!(2);
    v["spec"]["features"] = json!("log");
    assert_eq!(err(&v).0, ErrorKind::InvalidModel);
    assert_eq!(
        FastProbModel::from_json("{").unwrap_err().kind(),
        ErrorKind::InvalidModel
    );
    assert_eq!(
        FastProbModel::load(std::path::Path::new("/nonexistent/fastprob.json"))
            .unwrap_err()
            .kind(),
        ErrorKind::Io
    );
}

#[test]
fn spec_defaults_and_serde() {
    let s: FastProbSpec = serde_json::from_str("{}").unwrap();
    assert_eq!(s, FastProbSpec::default());
    assert_eq!((s.cap, s.first_gate_n, s.last_gate_n), (15, 1, 14));
    assert_eq!(
        (s.interval_ns, s.stop_threshold, s.label_error_pct),
        (1_000_000_000, 0.5, 5.0)
    );
    s.validate().unwrap();
}

/// rf-regressor gate of log(err % + 0.5), one tree: x[n-1] <= 500 → 3.0 (an error of
/// about 19.6 %), else 0.0 (0.5 %).
fn error_gate(n: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
           "n_features": n, "trees": [{"feature": [n as i64 - 1, -1, -1],
           "threshold": [500.0, 0.0, 0.0], "left": [1, -1, -1], "right": [2, -1, -1],
           "value": [0.0, 3.0, 0.0]}]})
}

/// Version 3 (our extension): a log target turns the regressor's output r into
/// exp(r) · s, and an error gate stops when its predicted log(err % + 0.5) is
/// below log(stop_error_pct + 0.5); the classifier threshold does not apply.
#[test]
fn version_3_log_target_and_error_gates() {
    let spec = FastProbSpec {
        cap: 5,
        last_gate_n: 4,
        target: Target::Log,
        gate: GateKind::Error,
        stop_error_pct: 5.0,
        ..FastProbSpec::default()
    };
    let mut v = model_json(&spec, 0);
    v["version"] = json!(3);
    for st in v["stages"].as_array_mut().unwrap() {
        let n = st["n"].as_u64().unwrap() as usize;
        // log-domain leaves: exp(0.5 n) bit/s (raw inputs: s = 1).
        st["regressor"]["trees"][0]["value"] = json!([0.5 * n as f64]);
        if st.get("gate").is_some() {
            st["gate"] = error_gate(n);
        }
    }
    let m = load(&v).unwrap();
    // Gate at n = 2 predicts log(0.5) < log(5.5): stop, prediction exp(1.0).
    let e = m.replay(&[100.0, 700.0, 100.0]).unwrap();
    assert_eq!((e.samples, e.forced), (2, false));
    assert_eq!(e.prediction_bps, 1.0f64.exp());
    // Never below the budget: forced at the cap with exp(2.5); P(predictable) is none.
    let mut p = Prober::new(&m);
    for _ in 0..4 {
        assert_eq!(p.push(100.0).unwrap(), Decision::Continue);
    }
    match p.push(100.0).unwrap() {
        Decision::ForcedStop(pr) => {
            assert_eq!(pr.throughput_bps, 2.5f64.exp());
            assert_eq!(pr.p_predictable, None);
        }
        d => panic!("expected ForcedStop, got {d:?}"),
    }
    assert_eq!(m.predict_fixed(&[1.0, 2.0, 3.0]).unwrap(), 1.5f64.exp());
    // A budget of 20 % (log 20.5 > 3.0): the low sample passes the gate too.
    let mut v2 = v.clone();
    v2["spec"]["stop_error_pct"] = json!(20.0);
    let e = load(&v2).unwrap().replay(&[100.0, 100.0]).unwrap();
    assert_eq!((e.samples, e.forced), (1, false));

    // Rejected: version-3 fields in a version-2 file, a classifier as an error
    // gate, a budget out of range.
    let mut bad = v.clone();
    bad["version"] = json!(2);
    assert!(
        err(&bad).1.contains("cannot set spec.target, gate"),
        "{}",
        err(&bad).1
    );
    let mut bad = v.clone();
    bad["stages"][0]["gate"] = gate(1);
    assert!(
        err(&bad)
            .1
            .contains("an error gate (spec.gate \"error\") is a regressor"),
        "{}",
        err(&bad).1
    );
    let mut bad = v.clone();
    bad["spec"]["stop_error_pct"] = json!(0.0);
    assert!(err(&bad).1.contains("stop_error_pct 0"), "{}", err(&bad).1);
    let mut bad = v.clone();
    bad["spec"]["target"] = json!("sqrt");
    assert_eq!(err(&bad).0, ErrorKind::InvalidModel);
}

/// Version-1 and -2 files read the version-3 fields as their defaults.
#[test]
fn older_versions_read_linear_targets_and_classifier_gates() {
    let v = model_json(&FastProbSpec::default(), 0);
    let text = v.to_string();
    // The file as older trainers wrote it: no version-3 keys at all.
    let mut old: Value = serde_json::from_str(&text).unwrap();
    for k in ["target", "gate", "stop_error_pct"] {
        old["spec"].as_object_mut().unwrap().remove(k);
    }
    for version in [1, 2] {
        old["version"] = json!(version);
        let m = load(&old).unwrap();
        assert_eq!(m.spec().target, Target::Linear);
        assert_eq!(m.spec().gate, GateKind::Classifier);
        assert_eq!(m.replay(&[100.0, 700.0]).unwrap().prediction_bps, 2000.0);
    }
}
