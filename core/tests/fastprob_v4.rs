//! Model format version 4 on a hand-built model whose decisions are known: one
//! pooled error gate that stops only on a fast path (the absolute-scale input above
//! 1 Mbit/s), from n = 6 on (the length input), and only once the regressor's trees
//! agree (the tree-spread input below 0.05). The regressors have two constant trees:
//! 0.0 and 0.2 before n = 8 (spread 0.1), 0.1 and 0.1 from n = 8 (spread 0), so a
//! fast path stops at n = 8 with exp(0.1) · s, and a slow path runs to the cap.
//! Also the rejections of version-4 fields where they do not belong.
use opsel::fastprob::{Decision, FastProbModel, GateLayout, Prober, POOLED_BASE_INPUTS};
use serde_json::{json, Value};

/// rf-regressor over ratio+stats inputs (n + 4): two one-leaf trees.
fn reg(n: usize) -> Value {
    let (a, b) = if n < 8 { (0.0, 0.2) } else { (0.1, 0.1) };
    let leaf = |v: f64| json!({"feature": [-1], "threshold": [0.0], "left": [-1], "right": [-1], "value": [v]});
    json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
           "n_features": n + 4, "trees": [leaf(a), leaf(b)]})
}

/// The pooled gate: inputs 0 = n, 16 = abs, 17 = sd (after the 16 base inputs).
fn pooled_gate(n_features: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
           "n_features": n_features,
           "trees": [{"feature": [16, -1, 0, -1, 17, -1, -1],
                      "threshold": [1e6f64.ln(), 0.0, 5.5, 0.0, 0.05, 0.0, 0.0],
                      "left": [1, -1, 3, -1, 5, -1, -1],
                      "right": [2, -1, 4, -1, 6, -1, -1],
                      "value": [0.0, 3.0, 0.0, 3.0, 0.0, 0.0, 3.0]}]})
}

fn model_json() -> Value {
    let stages: Vec<Value> = (1..=10)
        .map(|n| json!({"n": n, "regressor": reg(n)}))
        .collect();
    json!({"format": "opsel-model", "version": 4, "kind": "fastprob",
           "spec": {"interval_ns": 100_000_000u64, "cap": 10, "first_gate_n": 1, "last_gate_n": 9,
                    "features": "ratio+stats", "target": "log", "gate": "error",
                    "stop_error_pct": 5.0, "gate_layout": "pooled", "gate_inputs": ["abs", "sd"]},
           "stages": stages,
           "pooled_gate": pooled_gate(POOLED_BASE_INPUTS + 2),
           "family_budgets": {"lan": 12.0, "wan": 4.0},
           "training": {"source": "hand-built"}})
}

fn probe(model: &FastProbModel, rate_bps: f64) -> opsel::fastprob::Prediction {
    let mut p = Prober::new(model);
    for _ in 0..model.spec().cap {
        match p.push(rate_bps).unwrap() {
            Decision::Continue => {}
            Decision::Stop(pr) | Decision::ForcedStop(pr) => return pr,
        }
    }
    panic!("no stop by the cap")
}

#[test]
fn the_pooled_gate_sees_the_length_the_scale_and_the_tree_spread() {
    let model = FastProbModel::from_json(&model_json().to_string()).unwrap();
    assert_eq!(model.spec().gate_layout, GateLayout::Pooled);
    // Fast path: n >= 6 and abs > ln(1e6), but the trees disagree until n = 8.
    let fast = probe(&model, 5e8);
    assert_eq!((fast.samples, fast.forced), (8, false));
    assert!((fast.throughput_bps - 0.1f64.exp() * 5e8).abs() < 1e-3);
    assert_eq!(fast.p_predictable, None);
    // Slow path (500 kbit/s; the ratio floor makes s = 1 Mbit/s): never below the budget.
    let slow = probe(&model, 5e5);
    assert_eq!((slow.samples, slow.forced), (10, true));
    assert!((slow.throughput_bps - 0.1f64.exp() * 1e6).abs() < 1e-6);
}

#[test]
fn budgets_default_family_and_explicit() {
    let model = FastProbModel::from_json(&model_json().to_string()).unwrap();
    assert_eq!(
        model.family_budgets(),
        &[("lan".to_string(), 12.0), ("wan".to_string(), 4.0)]
    );
    // The gate's leaves are log(err % + 0.5) = 0 (0.5 %: stop) and 3 (19.6 %: not
    // yet): every budget E in (0.5, 19.6) % stops at n = 8, by a family's budget or
    // one set directly, as the default 5 % does.
    for p in [
        Prober::new(&model).family("lan").unwrap(),
        Prober::new(&model).family("wan").unwrap(),
        Prober::new(&model).stop_error_pct(1.0).unwrap(),
    ] {
        let mut p = p;
        let mut out = None;
        for _ in 0..10 {
            if let Decision::Stop(pr) | Decision::ForcedStop(pr) = p.push(5e8).unwrap() {
                out = Some(pr);
                break;
            }
        }
        assert_eq!(out.unwrap().samples, 8);
    }
    // A budget of 30 % lets the gate's "not yet" leaf (log(err + 0.5) = 3, i.e. 19.6 %)
    // through: the probe stops at the first gate.
    let mut p = Prober::new(&model).stop_error_pct(30.0).unwrap();
    assert!(matches!(p.push(5e8).unwrap(), Decision::Stop(pr) if pr.samples == 1));
    assert!(Prober::new(&model).family("shared").is_err());
    assert!(Prober::new(&model).stop_error_pct(100.0).is_err());
}

fn rejected(v: Value, needle: &str) {
    let e = FastProbModel::from_json(&v.to_string())
        .unwrap_err()
        .to_string();
    assert!(e.contains(needle), "{needle:?} not in {e:?}");
}

#[test]
fn version_4_fields_are_checked() {
    let mut v = model_json();
    v["version"] = 3.into();
    rejected(v, "version 4");
    let mut v = model_json();
    v["spec"]["gate_layout"] = "per_length".into();
    rejected(v, "pooled_gate");
    let mut v = model_json();
    v.as_object_mut().unwrap().remove("pooled_gate");
    rejected(v, "no pooled_gate");
    let mut v = model_json();
    v["pooled_gate"] = pooled_gate(POOLED_BASE_INPUTS + 3);
    rejected(v, "pooled_gate takes 19 features, expected 18");
    let mut v = model_json();
    v["stages"][0]["gate"] = pooled_gate(5);
    rejected(v, "the pooled_gate serves every length");
    let mut v = model_json();
    v["spec"]["gate"] = "classifier".into();
    rejected(v, "needs gate");
    let mut v = model_json();
    v["spec"]["gate_inputs"] = json!(["sd", "abs"]);
    rejected(v, "in that order");
    let mut v = model_json();
    v["spec"]["gate_inputs"] = json!(["spread"]);
    rejected(v, "\"spread\" unknown");
    let mut v = model_json();
    v["spec"]["target"] = "linear".into();
    rejected(v, "needs target");
    let mut v = model_json();
    v["family_budgets"] = json!({"lan": 0.0});
    rejected(v, "family_budgets");
    let mut v = model_json();
    v["spec"]["abs_floor_bps"] = 0.0.into();
    rejected(v, "abs_floor_bps");
}

/// Without the version-4 fields, a version-4 file reads like version 3: the same
/// per-length path, the spec defaults (`per_length`, no extra inputs, 1 kbit/s).
#[test]
fn version_4_defaults_are_the_version_3_path() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fastprob_fixtures/model_v3_small.json"
    ))
    .unwrap();
    let v3 = FastProbModel::from_json(&text).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["version"] = 4.into();
    let v4 = FastProbModel::from_json(&v.to_string()).unwrap();
    assert_eq!(v3.spec(), v4.spec());
    assert_eq!(v4.spec().gate_layout, GateLayout::PerLength);
    assert_eq!(v4.spec().abs_floor_bps, 1e3);
    for k in 0..40u32 {
        let s: Vec<f64> = (0..15u32)
            .map(|i| 2e8 + ((k * 37 + i * 11) % 53) as f64 * 1e7)
            .collect();
        assert_eq!(v3.replay(&s).unwrap(), v4.replay(&s).unwrap());
    }
}

/// The tree spread of the flat forest: trees 0.0 and 0.2 → mean 0.1, population sd
/// 0.1 (numpy's `std`, ddof 0); equal trees → sd 0; the mean is `predict`'s.
#[test]
fn tree_spread_is_the_population_sd_of_the_trees() {
    use opsel::trees::Ensemble;
    let e = Ensemble::from_json(&reg(5).to_string()).unwrap();
    let x = [0.5; 9];
    let (m, sd) = e.predict_mean_sd(&x).unwrap();
    assert_eq!(m, e.predict(&x).unwrap());
    assert!(
        (m - 0.1).abs() < 1e-15 && (sd - 0.1).abs() < 1e-15,
        "{m} {sd}"
    );
    let e = Ensemble::from_json(&reg(9).to_string()).unwrap();
    assert_eq!(e.predict_mean_sd(&[0.5; 13]).unwrap(), (0.1, 0.0));
    assert!(e.predict_mean_sd(&[0.5; 3]).is_err(), "wrong width");
    let clf = Ensemble::from_json(
        &json!({"format": "opsel-model", "version": 1, "kind": "rf-classifier", "n_features": 1,
                "n_outputs": 2, "trees": [{"feature": [-1], "threshold": [0.0], "left": [-1],
                "right": [-1], "value": [0.5, 0.5]}]})
        .to_string(),
    )
    .unwrap();
    assert!(clf
        .predict_mean_sd(&[0.0])
        .unwrap_err()
        .to_string()
        .contains("rf-regressor"));
}

/// The hand-built model with `lan` at 30 % (passes the gate's "not yet" leaf of
/// 19.6 %: stop at the first gate) and `wan` at 4 % (stop at n = 8).
fn model_with_budgets() -> FastProbModel {
    let mut v = model_json();
    v["family_budgets"] = json!({"lan": 30.0, "wan": 4.0});
    FastProbModel::from_json(&v.to_string()).unwrap()
}

fn stop_len(p: Prober<'_>) -> usize {
    let mut p = p;
    for _ in 0..10 {
        if let Decision::Stop(pr) | Decision::ForcedStop(pr) = p.push(5e8).unwrap() {
            return pr.samples;
        }
    }
    panic!("no stop by the cap")
}

#[test]
fn probe_budget_selects_the_family_or_an_explicit_budget() {
    use opsel::fastprob::ProbeBudget;
    let model = model_with_budgets();
    let fam = |f: &str| ProbeBudget {
        family: Some(f.into()),
        stop_error_pct: None,
    };
    let pct = |e: f64| ProbeBudget {
        family: None,
        stop_error_pct: Some(e),
    };
    let with = |b: &ProbeBudget| Prober::new(&model).budget(b);
    assert_eq!(stop_len(with(&ProbeBudget::default()).unwrap()), 8);
    assert_eq!(stop_len(with(&fam("lan")).unwrap()), 1);
    assert_eq!(stop_len(with(&fam("wan")).unwrap()), 8);
    assert_eq!(stop_len(with(&pct(30.0)).unwrap()), 1);
    assert_eq!(stop_len(with(&pct(4.0)).unwrap()), 8);
    // Errors say what is wrong and what the file has.
    let both = ProbeBudget {
        family: Some("lan".into()),
        stop_error_pct: Some(5.0),
    };
    let e = with(&both).unwrap_err().to_string();
    assert!(e.contains("both"), "{e}");
    let e = with(&fam("shared")).unwrap_err().to_string();
    assert!(
        e.contains("unknown family \"shared\"")
            && e.contains("\"lan\" (30 %)")
            && e.contains("\"wan\" (4 %)"),
        "{e}"
    );
    let mut plain = model_json();
    plain.as_object_mut().unwrap().remove("family_budgets");
    let plain = FastProbModel::from_json(&plain.to_string()).unwrap();
    let e = Prober::new(&plain)
        .budget(&fam("lan"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no family_budgets"), "{e}");
    assert!(e.contains("5 %"), "{e}");
    // The serde form is the one the CLI and bindings convert into.
    let b: ProbeBudget = serde_json::from_str(r#"{"family": "wan"}"#).unwrap();
    assert_eq!(b, fam("wan"));
    assert!(serde_json::from_str::<ProbeBudget>(r#"{"familly": "wan"}"#).is_err());
    assert_eq!(
        serde_json::to_string(&ProbeBudget::default()).unwrap(),
        "{}"
    );
}

#[test]
fn start_probe_and_ab_take_the_budget() {
    use opsel::fastprob::{
        AbAction, AbEvaluator, AbMethod, AbSpec, Background, ProbeBudget, StartAction, StartProbe,
    };
    use std::sync::Arc;
    let model = Arc::new(model_with_budgets());
    let lan = ProbeBudget {
        family: Some("lan".into()),
        stop_error_pct: None,
    };
    // The start-of-transfer probe: one sample with lan's budget, eight by default.
    let samples = |mut sp: StartProbe| {
        for k in 1..=10 {
            if let StartAction::Done { .. } = sp.push(5e8, 1000).unwrap() {
                return k;
            }
        }
        panic!("no stop")
    };
    assert_eq!(samples(StartProbe::estimate(model.clone())), 8);
    assert_eq!(
        samples(StartProbe::estimate_with(model.clone(), &lan).unwrap()),
        1
    );
    let bad = ProbeBudget {
        family: Some("dsl".into()),
        stop_error_pct: None,
    };
    assert!(StartProbe::estimate_with(model.clone(), &bad).is_err());
    // The A/B: every candidate is probed under the spec's budget.
    let ab = |budget: ProbeBudget| {
        let spec = AbSpec {
            candidates: vec!["cubic".into(), "bbr".into()],
            background: Background::Unknown,
            settle_samples: 0,
            method: AbMethod::Fastprob,
            budget,
        };
        let mut ev = AbEvaluator::new(model.clone(), spec)?;
        let mut act = ev.start()?;
        loop {
            if let AbAction::Done(o) = act {
                return Ok::<_, opsel::Error>(
                    o.candidates.iter().map(|c| c.samples).collect::<Vec<_>>(),
                );
            }
            act = ev.push(5e8)?;
        }
    };
    assert_eq!(ab(ProbeBudget::default()).unwrap(), vec![8, 8]);
    assert_eq!(ab(lan).unwrap(), vec![1, 1]);
    assert!(ab(bad).is_err());
}

#[test]
fn family_classifier_fields_are_checked() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fastprob_fixtures/model_v4_family_small.json"
    ))
    .unwrap();
    let base: Value = serde_json::from_str(&text).unwrap();
    assert!(FastProbModel::from_json(&text).is_ok());
    // A version-3 file (log target, error gates) with the classifier added.
    let v3 = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fastprob_fixtures/model_v3_small.json"
    ))
    .unwrap();
    let mut v: Value = serde_json::from_str(&v3).unwrap();
    v["family_classifier"] = base["family_classifier"].clone();
    rejected(v, "family_classifier");
    let mut v = base.clone();
    v["family_budgets"].as_object_mut().unwrap().remove("wan");
    rejected(v, "class \"wan\" has no budget");
    let mut v = base.clone();
    v["family_classifier"]["classes"] = json!(["lan", "lan", "wan"]);
    rejected(v, "listed twice");
    let mut v = base.clone();
    v["family_classifier"]["classes"] = json!(["lan", "wan"]);
    rejected(v, "one per output");
    let mut v = base.clone();
    v["family_classifier"]["forest"]["n_features"] = json!(18);
    rejected(v, "expected 17");
    let mut v = base.clone();
    v["family_classifier"]["mode"] = json!("mean");
    rejected(v, "mean");
    let mut v = base.clone();
    v["family_classifier"]["forest"] = v["pooled_gate"].clone();
    rejected(v, "rf-classifier over the families");
    let mut v = base;
    v["family_classifier"]["extra"] = json!(1);
    rejected(v, "extra");
}

/// The hand-built model with a family classifier whose one-leaf tree gives the
/// probabilities `p` for `lan` and `wan`, budgets `lan` 1 % and `wan` 50 %. The
/// gate's "not yet" leaf is 19.6 %: a budget above it stops at n = 1; 1 % waits
/// for the fast path's n = 8.
fn inferring(mode: &str, p: [f64; 2]) -> FastProbModel {
    let mut v = model_json();
    v["family_budgets"] = json!({"lan": 1.0, "wan": 50.0});
    v["family_classifier"] = json!({
        "mode": mode, "classes": ["lan", "wan"],
        "forest": {"format": "opsel-model", "version": 1, "kind": "rf-classifier",
                   "n_features": opsel::fastprob::FAMILY_INPUTS, "n_outputs": 2,
                   "trees": [{"feature": [-1], "threshold": [0.0], "left": [-1], "right": [-1],
                              "value": [p[0], p[1]]}]}});
    FastProbModel::from_json(&v.to_string()).unwrap()
}

#[test]
fn soft_weights_the_budgets_and_hard_takes_the_most_probable_family() {
    // soft: 0.6 · 1 + 0.4 · 50 = 20.6 % > 19.6 %: the first gate; hard: lan's 1 %.
    let m = inferring("soft", [0.6, 0.4]);
    assert!(Prober::new(&m).infers_family());
    assert_eq!(stop_len(Prober::new(&m)), 1);
    assert_eq!(stop_len(inferring("hard", [0.6, 0.4]).into_prober()), 8);
    assert_eq!(stop_len(inferring("hard", [0.4, 0.6]).into_prober()), 1);
    // A tie goes to the first class (lan, 1 %); soft is 25.5 % there.
    assert_eq!(stop_len(inferring("hard", [0.5, 0.5]).into_prober()), 8);
    assert_eq!(stop_len(inferring("soft", [0.5, 0.5]).into_prober()), 1);
    // A caller's family or budget replaces the inferred one.
    let p = Prober::new(&m).family("lan").unwrap();
    assert!(!p.infers_family());
    assert_eq!(stop_len(p), 8);
    assert_eq!(stop_len(Prober::new(&m).stop_error_pct(30.0).unwrap()), 1);
    assert_eq!(
        m.family_classifier().map(|(c, mode)| (c.to_vec(), mode)),
        Some((
            vec!["lan".to_string(), "wan".to_string()],
            opsel::fastprob::FamilyMode::Soft
        ))
    );
}

trait IntoProber {
    fn into_prober(self) -> Prober<'static>;
}
impl IntoProber for FastProbModel {
    fn into_prober(self) -> Prober<'static> {
        Prober::shared(std::sync::Arc::new(self))
    }
}
