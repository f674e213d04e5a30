//! The probe gate (`ops::ProbeGate`, 004 §8 B.1) in the controller: the probe
//! ends at the first check length whose prefix decision the gate accepts, and
//! runs the full window when the gate never fires. Scripted prefixes with a
//! hand-made gate (exact check-by-check behaviour), then the shipped passive
//! model with the shipped gate through `ControllerSpec`.

use std::path::PathBuf;

use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::{
    Classified, Classifier, Config, Controller, ControllerSpec, Event, NoCallback, Output,
    ProbeGate, Stump,
};
use opsel::Result;

const S: u64 = 1_000_000_000;
const W: usize = 40;

/// Answers each prefix length from a script (class label, margin); the full
/// window answers `full`. Records the length of every call.
struct PerPrefix {
    classes: Vec<Mix>,
    script: Vec<(usize, &'static str, f64)>,
    full: (&'static str, f64),
    calls: Vec<usize>,
}

impl PerPrefix {
    fn new(script: &[(usize, &'static str, f64)], full: (&'static str, f64)) -> Self {
        Self {
            classes: SIX_CLASSES.iter().map(|l| Mix::parse(l).unwrap()).collect(),
            script: script.to_vec(),
            full,
            calls: Vec::new(),
        }
    }
    fn answer(&self, label: &str, confidence: f64) -> Classified {
        let m = Mix::parse(label).unwrap();
        let i = self.classes.iter().position(|c| *c == m).unwrap();
        Classified {
            mix: m,
            class_index: i,
            confidence,
            distance: 1.0,
        }
    }
}

impl Classifier for PerPrefix {
    fn window_len(&self) -> usize {
        W
    }
    fn classes(&self) -> &[Mix] {
        &self.classes
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        self.calls.push(window.len());
        Ok(self.answer(self.full.0, self.full.1))
    }
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        self.calls.push(prefix.len());
        let &(_, label, conf) = self.script.iter().find(|s| s.0 == prefix.len())?;
        Some(Ok(self.answer(label, conf)))
    }
}

fn gate(weights: [f64; 4], intercept: f64, threshold: f64) -> ProbeGate {
    ProbeGate::new(
        W,
        (5..W).step_by(5).collect(),
        weights,
        intercept,
        threshold,
    )
    .unwrap()
}

fn passive(gate: Option<ProbeGate>) -> Config {
    Config {
        gate,
        ..Config::passive()
    }
}

struct Run {
    samples: usize,
    early: bool,
    cca: String,
    gate_exits: u64,
    early_exits: u64,
}

/// Feed `window` to a fresh controller until its first decision.
fn run<C: Classifier, P: opsel::ops::Policy>(c: &mut Controller<C, P>, window: &[f64]) -> Run {
    c.start(0).unwrap();
    let mut out = None;
    let mut cca = String::new();
    for (t, &v) in window.iter().enumerate() {
        let now = (t as u64 + 1) * S;
        c.handle_timeout(now).unwrap();
        c.handle_sample(now, v).unwrap();
        while let Some(o) = c.poll() {
            match o {
                Output::Event(Event::Classified { samples, early, .. }) => {
                    out = Some((samples, early))
                }
                Output::Event(Event::Selected { cca: x, .. }) => cca = x.to_string(),
                _ => {}
            }
        }
        if out.is_some() {
            break;
        }
    }
    let (samples, early) = out.expect("no decision");
    Run {
        samples,
        early,
        cca,
        gate_exits: c.stats().gate_exits,
        early_exits: c.stats().early_exits,
    }
}

fn flat() -> Vec<f64> {
    (0..W).map(|i| 50.0 + (i % 7) as f64).collect()
}

#[test]
fn the_gate_ends_the_probe_at_the_first_check_it_accepts() {
    // Fires when 4·margin + 2·same_decision − 3 >= 0 (threshold 0.5 ⇔ logit >= 0).
    let g = gate([0.0, 4.0, 2.0, 0.0], -3.0, 0.5);
    let script = [
        (5, "B1-C0", 0.6),  // −0.6: no
        (10, "B0-C1", 0.7), // decision flips (BBR → none): −0.2, no
        (15, "C1-C1", 0.3), // another class, the same decision: +0.2, fires
        (20, "B1-B1", 1.0),
    ];
    let mut c = Controller::new(
        passive(Some(g)),
        PerPrefix::new(&script, ("B1-C0", 1.0)),
        Stump::default(),
    )
    .unwrap();
    let r = run(&mut c, &flat());
    assert_eq!((r.samples, r.early, r.cca.as_str()), (15, true, "cubic"));
    assert_eq!((r.gate_exits, r.early_exits), (1, 1));
    // Prefixes at 5, 10, 15 only; the full window never classified.
    assert_eq!(c.classifier().calls, [5, 10, 15]);
}

#[test]
fn the_streak_counts_checks_in_a_row_with_one_decision() {
    // Fires when streak / 8 >= 3/8 (7 checks + the full window): the third
    // check in a row with the same decision.
    let g = gate([0.0, 0.0, 0.0, 8.0], -3.0, 0.5);
    let script = [
        (5, "B1-C0", 0.0),
        (10, "B0-C0", 0.0), // breaks the streak
        (15, "B1-C1", 0.0),
        (20, "B1-B1", 0.0),
        (25, "B1-C0", 0.0), // third BBR decision in a row
    ];
    let mut c = Controller::new(
        passive(Some(g)),
        PerPrefix::new(&script, ("B0-C0", 1.0)),
        Stump::default(),
    )
    .unwrap();
    let r = run(&mut c, &flat());
    assert_eq!((r.samples, r.early, r.cca.as_str()), (25, true, "bbr"));
}

#[test]
fn a_gate_that_never_fires_runs_the_full_window() {
    // Probability < 1 always: threshold 1 never fires.
    let g = gate([0.0, 4.0, 2.0, 8.0], 3.0, 1.0);
    let script: Vec<_> = (5..W).step_by(5).map(|n| (n, "B1-C0", 1.0)).collect();
    let mut c = Controller::new(
        passive(Some(g)),
        PerPrefix::new(&script, ("C1-C1", 0.2)),
        Stump::default(),
    )
    .unwrap();
    let r = run(&mut c, &flat());
    assert_eq!((r.samples, r.early, r.cca.as_str()), (W, false, "cubic"));
    assert_eq!((r.gate_exits, r.early_exits), (0, 0));
    assert_eq!(c.classifier().calls, [5, 10, 15, 20, 25, 30, 35, 40]);
    // Without a gate: no prefix is asked for.
    let mut c = Controller::new(
        passive(None),
        PerPrefix::new(&script, ("C1-C1", 0.2)),
        Stump::default(),
    )
    .unwrap();
    let r = run(&mut c, &flat());
    assert_eq!((r.samples, r.early), (W, false));
    assert_eq!(c.classifier().calls, [40]);
}

#[test]
fn gate_config_errors() {
    let g = gate([0.0; 4], 0.0, 0.5);
    let e = |cfg: Config, w: usize| {
        struct Wn(PerPrefix, usize);
        impl Classifier for Wn {
            fn window_len(&self) -> usize {
                self.1
            }
            fn classes(&self) -> &[Mix] {
                self.0.classes()
            }
            fn classify(&mut self, x: &[f64]) -> Result<Classified> {
                self.0.classify(x)
            }
        }
        Controller::new(
            cfg,
            Wn(PerPrefix::new(&[], ("B0-C0", 1.0)), w),
            Stump::default(),
        )
        .err()
        .expect("accepted")
        .to_string()
    };
    assert!(e(passive(Some(g.clone())), 20).contains("trained for windows of 40"));
    let mut cfg = passive(Some(g.clone()));
    cfg.progressive = Some(Default::default());
    assert!(e(cfg, W).contains("use one"));
    let mut cfg = passive(Some(g));
    cfg.cycles = 3;
    assert!(e(cfg, W).contains("cycles is 3"));
}

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// The shipped passive model and gate through the spec, as `opsel send --ops`
/// builds its controller: a window near a B0-C1 reference decides early, and
/// the same window with a gate that cannot fire decides on the full window,
/// to the same CCA.
#[test]
fn the_shipped_gate_with_the_passive_model() {
    let file = opsel::model::load(repo("models/passive/model.json")).unwrap();
    let m = &file.model;
    let b0c1 = m.classes().iter().position(|c| c == "B0-C1").unwrap();
    let i = (0..m.len())
        .find(|&i| m.labels()[i] as usize == b0c1)
        .unwrap();
    let q: Vec<f64> = m
        .raw_reference(i)
        .iter()
        .enumerate()
        .map(|(k, v)| v * (1.0 + 0.002 * ((k % 3) as f64 - 1.0)))
        .collect();

    let spec = |threshold: Option<f64>| ControllerSpec {
        gate: Some(repo("models/passive/gate.json")),
        gate_threshold: threshold,
        ..ControllerSpec::default()
    };
    let mut gated = spec(None).build::<NoCallback>(&file, None).unwrap();
    let r = run(&mut gated, &q);
    assert!(r.early && r.samples < W, "{} samples", r.samples);
    assert_eq!((r.cca.as_str(), r.gate_exits), ("cubic", 1));

    let mut full = spec(Some(1.0)).build::<NoCallback>(&file, None).unwrap();
    let f = run(&mut full, &q);
    assert_eq!((f.samples, f.early, f.gate_exits), (W, false, 0));
    assert_eq!(f.cca, r.cca);

    // The spec's own checks.
    let bad = ControllerSpec {
        gate_threshold: Some(0.9),
        ..ControllerSpec::default()
    };
    assert!(bad
        .config()
        .unwrap_err()
        .to_string()
        .contains("needs a gate file"));
    let both = ControllerSpec::from_json(&format!(
        r#"{{"gate": {:?}, "progressive": true}}"#,
        repo("models/passive/gate.json")
    ))
    .unwrap();
    assert!(both.config().unwrap_err().to_string().contains("use one"));
    let wrong = ControllerSpec {
        gate: Some(repo("models/passive/model.json")),
        ..ControllerSpec::default()
    };
    assert!(wrong.config().unwrap_err().to_string().contains("format"));
}
