//! The CCA A/B evaluator (004 §VI analogue, notes 004 §8 B.2) on a hand-built
//! FastProb model whose decisions are known: the gate fires when the latest
//! sample exceeds 500, and the n-sample regressor returns 1000 · n, so each
//! candidate's estimate names the length at which its probe stopped.
use std::sync::Arc;

use opsel::fastprob::{
    AbAction, AbEvaluator, AbMethod, AbSpec, Background, FastProbModel, FastProbSpec,
};
use serde_json::{json, Value};

fn gate(n: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-classifier",
           "n_features": n, "n_outputs": 2,
           "trees": [{"feature": [n as i64 - 1, -1, -1], "threshold": [500.0, 0.0, 0.0],
                      "left": [1, -1, -1], "right": [2, -1, -1],
                      "value": [0.5, 0.5, 1.0, 0.0, 0.0, 1.0]}]})
}

fn reg(n: usize) -> Value {
    json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
           "n_features": n, "trees": [{"feature": [-1], "threshold": [0.0],
           "left": [-1], "right": [-1], "value": [1000.0 * n as f64]}]})
}

/// Interval 100 ms, gates at 1..=4, cap 5.
fn model() -> Arc<FastProbModel> {
    let spec = FastProbSpec {
        interval_ns: 100_000_000,
        cap: 5,
        last_gate_n: 4,
        ..FastProbSpec::default()
    };
    let stages: Vec<Value> = (1..=5)
        .map(|n| {
            let mut s = json!({"n": n, "regressor": reg(n)});
            if n <= 4 {
                s["gate"] = gate(n);
            }
            s
        })
        .collect();
    let v = json!({"format": "opsel-model", "version": 2, "kind": "fastprob",
                   "spec": spec, "stages": stages});
    Arc::new(FastProbModel::from_json(&v.to_string()).unwrap())
}

fn spec(cands: &[&str], background: Background, settle: usize, method: AbMethod) -> AbSpec {
    AbSpec {
        candidates: cands.iter().map(|s| s.to_string()).collect(),
        background,
        settle_samples: settle,
        method,
        budget: Default::default(),
    }
}

/// Drive the evaluator with a scripted sample list per CCA; returns the
/// switches seen and the outcome.
fn drive(
    ev: &mut AbEvaluator,
    script: &[(&str, &[f64])],
) -> (Vec<String>, opsel::fastprob::AbOutcome) {
    let mut switches = Vec::new();
    let mut act = ev.start().unwrap();
    let mut cur: Option<(String, usize)> = None;
    loop {
        match act {
            AbAction::Done(o) => return (switches, o),
            AbAction::Switch(c) => {
                switches.push(c.clone());
                cur = Some((c, 0));
            }
            AbAction::Continue => {}
        }
        let (c, i) = cur.as_mut().unwrap();
        let samples = script.iter().find(|(n, _)| n == c).unwrap().1;
        let s = samples[*i];
        *i += 1;
        act = ev.push(s).unwrap();
    }
}

#[test]
fn fastprob_probes_each_candidate_and_chooses_the_argmax() {
    let mut ev = AbEvaluator::new(
        model(),
        spec(
            &["cubic", "bbr"],
            Background::Unknown,
            1,
            AbMethod::Fastprob,
        ),
    )
    .unwrap();
    assert_eq!(ev.interval_ns(), 100_000_000);
    // cubic: settle sample, then the gate fires at the 2nd probe sample → 2000.
    // bbr: settle, then never above 500 → forced at the cap (5) → 5000.
    let (sw, o) = drive(
        &mut ev,
        &[
            ("cubic", &[9e9, 100.0, 600.0]),
            ("bbr", &[0.0, 100.0, 100.0, 100.0, 100.0, 100.0]),
        ],
    );
    assert_eq!(sw, ["cubic", "bbr"]);
    let (c, b) = (&o.candidates[0], &o.candidates[1]);
    assert!(c.probed && b.probed);
    assert_eq!((c.samples, c.estimate_bps, c.forced), (2, 2000.0, false));
    assert_eq!((b.samples, b.estimate_bps, b.forced), (5, 5000.0, true));
    // Probe time counts the settle sample: (1 + 2) and (1 + 5) intervals.
    assert_eq!(c.probe_ns, 300_000_000);
    assert_eq!(b.probe_ns, 600_000_000);
    assert_eq!(o.total_probe_ns, 900_000_000);
    assert_eq!(o.chosen, "bbr");
    // Done means done.
    assert!(ev.push(1.0).is_err());
}

#[test]
fn cubic_only_background_never_probes_or_chooses_bbr() {
    let mut ev = AbEvaluator::new(
        model(),
        spec(
            &["bbr", "cubic", "reno"],
            Background::CubicOnly,
            0,
            AbMethod::Fastprob,
        ),
    )
    .unwrap();
    let (sw, o) = drive(
        &mut ev,
        &[
            ("bbr", &[]),
            ("cubic", &[600.0]),
            ("reno", &[100.0, 100.0, 900.0]),
        ],
    );
    assert_eq!(sw, ["cubic", "reno"]);
    assert!(!o.candidates[0].probed);
    assert_eq!(o.candidates[0].probe_ns, 0);
    assert_eq!(o.candidates[1].estimate_bps, 1000.0);
    assert_eq!(o.candidates[2].estimate_bps, 3000.0);
    assert_eq!(o.chosen, "reno");
    assert_eq!(o.background, Background::CubicOnly);
    // The same samples with BBR present: bbr is probed first and may win.
    let mut ev = AbEvaluator::new(
        model(),
        spec(
            &["bbr", "cubic"],
            Background::BbrPresent,
            0,
            AbMethod::Fastprob,
        ),
    )
    .unwrap();
    let (sw, o) = drive(
        &mut ev,
        &[("bbr", &[100.0, 100.0, 100.0, 700.0]), ("cubic", &[600.0])],
    );
    assert_eq!(sw, ["bbr", "cubic"]);
    assert_eq!(o.chosen, "bbr");
}

#[test]
fn fixed_length_evaluation_averages_a_fixed_window() {
    let mut ev = AbEvaluator::new(
        model(),
        spec(
            &["cubic", "bbr"],
            Background::Unknown,
            2,
            AbMethod::Fixed { samples: 3 },
        ),
    )
    .unwrap();
    let (_, o) = drive(
        &mut ev,
        &[
            ("cubic", &[1e9, 1e9, 30.0, 60.0, 90.0]),
            ("bbr", &[0.0, 0.0, 10.0, 20.0, 30.0]),
        ],
    );
    assert_eq!(o.candidates[0].estimate_bps, 60.0);
    assert_eq!(o.candidates[1].estimate_bps, 20.0);
    assert_eq!(o.candidates[0].samples, 3);
    assert_eq!(o.candidates[0].probe_ns, 500_000_000);
    assert_eq!(o.chosen, "cubic");
    // A tie keeps the earlier candidate.
    let mut ev = AbEvaluator::new(
        model(),
        spec(
            &["cubic", "bbr"],
            Background::Unknown,
            0,
            AbMethod::Fixed { samples: 1 },
        ),
    )
    .unwrap();
    let (_, o) = drive(&mut ev, &[("cubic", &[5.0]), ("bbr", &[5.0])]);
    assert_eq!(o.chosen, "cubic");
}

#[test]
fn bad_specs_and_samples_are_clear_errors() {
    let bad = |s: AbSpec| AbEvaluator::new(model(), s).unwrap_err().to_string();
    let f = AbMethod::Fastprob;
    assert!(bad(spec(&[], Background::Unknown, 0, f)).contains("at least one candidate"));
    assert!(bad(spec(&["cubic", "cubic"], Background::Unknown, 0, f)).contains("listed twice"));
    assert!(bad(spec(&["bbr"], Background::CubicOnly, 0, f)).contains("never chooses BBR"));
    assert!(bad(spec(&["cu bic"], Background::Unknown, 0, f)).contains("not a congestion-control"));
    assert!(bad(spec(
        &["cubic"],
        Background::Unknown,
        0,
        AbMethod::Fixed { samples: 0 }
    ))
    .contains("fixed-length"));
    assert!("bbr-ish".parse::<Background>().is_err());
    assert_eq!(
        "cubic".parse::<Background>().unwrap(),
        Background::CubicOnly
    );
    let mut ev = AbEvaluator::new(model(), spec(&["cubic"], Background::Unknown, 0, f)).unwrap();
    assert!(ev.push(1.0).unwrap_err().to_string().contains("start()"));
    assert_eq!(ev.start().unwrap(), AbAction::Switch("cubic".into()));
    assert!(ev.start().is_err());
    for x in [f64::NAN, -1.0, f64::INFINITY] {
        assert!(ev.push(x).is_err(), "{x}");
    }
    // A rejected sample is not counted: one good sample above 500 still stops at n = 1.
    match ev.push(600.0).unwrap() {
        AbAction::Done(o) => assert_eq!(o.candidates[0].samples, 1),
        a => panic!("{a:?}"),
    }
}
