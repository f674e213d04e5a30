//! The decision cache's class as a prior that shortens the first OPS probe
//! (003 §7 item 5, hypothesis H2; `ops::PriorProbe`). The rule: on the first
//! probe only, a prefix that agrees with the prior class at margin >= 0.3 ends
//! the probe (at 000 §6's cut points 5, 10, 15 s); a confident prefix of
//! another class drops the prior and the probe runs to its full window.
//! Checked on the scripted classifier (exact sample counts) and in the
//! trace-driven simulator (synthetic RTT, nearest-prototype classifier).

use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::doubles::{CentroidClassifier, ScriptedClassifier};
use opsel::ops::sim::{simulate, train_centroids, Background, SimConfig, SimReport};
use opsel::ops::{Config, Controller, Event, Output, PriorProbe, Progressive, Stump};
use opsel::probe::Pattern;

const S: u64 = 1_000_000_000;

fn active() -> Config {
    Config {
        prior: Some(PriorProbe::default()),
        steady_ns: 60 * S,
        ..Config::active(Pattern::parse("S5-C5-S5-B5").unwrap())
    }
}

fn class(label: &str) -> usize {
    let m = Mix::parse(label).unwrap();
    SIX_CLASSES
        .iter()
        .position(|l| Mix::parse(l).unwrap() == m)
        .unwrap()
}

/// (samples, early) of every `Classified` event, in order.
fn probes(outputs: &[Output]) -> Vec<(usize, bool)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Event(Event::Classified { samples, early, .. }) => Some((*samples, *early)),
            _ => None,
        })
        .collect()
}

/// Drive a scripted controller for `secs` seconds (one sample per second).
fn drive_scripted(c: &mut Controller<ScriptedClassifier, Stump>, secs: u64) -> Vec<Output> {
    c.start(0).unwrap();
    let mut out = Vec::new();
    for t in 1..=secs {
        c.handle_timeout(t * S).unwrap();
        c.handle_sample(t * S, 100.0).unwrap();
        while let Some(o) = c.poll() {
            out.push(o);
        }
    }
    out
}

fn scripted(label: &str, prefix_confidence: f64) -> ScriptedClassifier {
    ScriptedClassifier::new(20, &SIX_CLASSES, &[(label, 1.0)])
        .unwrap()
        .with_prefix_confidence(prefix_confidence)
        .background_classes()
}

#[test]
fn an_agreeing_prefix_ends_the_first_probe_at_the_first_check() {
    let mut c = Controller::new(active(), scripted("B1-C0", 0.5), Stump::default()).unwrap();
    c.set_prior_class(class("B1-C0")).unwrap();
    let out = drive_scripted(&mut c, 200);
    let p = probes(&out);
    // First probe: 5 samples (the first check point); the later probes of
    // the same transfer ignore the prior and fill the window (no progressive).
    assert_eq!(p[0], (5, true));
    assert!(p.len() >= 3, "{p:?}");
    assert!(p[1..].iter().all(|&x| x == (20, false)), "{p:?}");
    let st = c.stats();
    assert_eq!(
        (st.prior_exits, st.early_exits, st.prior_overruled),
        (1, 1, 0)
    );
    assert_eq!(c.prior_class(), None);
}

#[test]
fn an_unsure_prefix_does_not_end_the_probe() {
    // Margin 0.2 < 0.3 at every check: the prior alone never decides.
    let mut c = Controller::new(active(), scripted("B1-C0", 0.2), Stump::default()).unwrap();
    c.set_prior_class(class("B1-C0")).unwrap();
    let p = probes(&drive_scripted(&mut c, 30));
    assert_eq!(p[0], (20, false));
    assert_eq!(c.stats().prior_exits, 0);
}

#[test]
fn a_disagreeing_prefix_drops_the_prior_and_the_probe_runs_in_full() {
    // The path now carries B1-C0; the cache says C1-C1.
    let mut c = Controller::new(active(), scripted("B1-C0", 0.9), Stump::default()).unwrap();
    c.set_prior_class(class("C1-C1")).unwrap();
    let out = drive_scripted(&mut c, 30);
    assert_eq!(probes(&out)[0], (20, false));
    let st = c.stats();
    assert_eq!(
        (st.prior_exits, st.prior_overruled, st.early_exits),
        (0, 1, 0)
    );
    // And the decision is the probe's, not the prior's.
    let sel = out.iter().find_map(|o| match o {
        Output::Event(Event::Selected { cca, .. }) => Some(cca.to_string()),
        _ => None,
    });
    assert_eq!(sel.as_deref(), Some("bbr"));
}

#[test]
fn with_progressive_probing_a_disagreeing_prior_falls_back_to_its_rule() {
    // Progressive alone needs 0.8; the prefix says 0.9 for another class,
    // so the prior is dropped and progressive ends the probe at 5 samples.
    let cfg = Config {
        progressive: Some(Progressive::default()),
        ..active()
    };
    let mut c = Controller::new(cfg, scripted("B1-C0", 0.9), Stump::default()).unwrap();
    c.set_prior_class(class("C1-C1")).unwrap();
    let p = probes(&drive_scripted(&mut c, 30));
    assert_eq!(p[0], (5, true));
    let st = c.stats();
    assert_eq!(
        (st.prior_exits, st.prior_overruled, st.early_exits),
        (0, 1, 1)
    );
}

#[test]
fn the_prior_is_checked_before_start_and_against_the_classes() {
    let plain = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    let mut c = Controller::new(plain, scripted("B1-C0", 0.5), Stump::default()).unwrap();
    let e = c.set_prior_class(0).unwrap_err().to_string();
    assert!(e.contains("Config::prior"), "{e}");
    let mut c = Controller::new(active(), scripted("B1-C0", 0.5), Stump::default()).unwrap();
    let e = c.set_prior_class(6).unwrap_err().to_string();
    assert!(e.contains("6 classes") || e.contains("out of range"), "{e}");
    c.start(0).unwrap();
    assert!(c.set_prior_class(0).is_err());
    // A prior with several windows per decision is refused by the config.
    let cfg = Config {
        cycles: 3,
        ..active()
    };
    let e = Controller::new(cfg, scripted("B1-C0", 0.5), Stump::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cycles"), "{e}");
}

// ---- trace-driven simulator -------------------------------------------------

fn model() -> CentroidClassifier {
    let base = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    train_centroids(&base.mode, 20, &SIX_CLASSES, 40, 1234).unwrap()
}

fn sim(bg: &str, prior: Option<&str>, seed: u64) -> SimReport {
    let mut c = Controller::new(active(), model(), Stump::default()).unwrap();
    if let Some(p) = prior {
        c.set_prior_class(class(p)).unwrap();
    }
    simulate(
        &mut c,
        &Background::Static(Mix::parse(bg).unwrap()),
        SimConfig {
            duration_s: 200,
            capacity_mbps: 500.0,
            seed,
        },
    )
    .unwrap()
}

fn sim_probes(r: &SimReport) -> Vec<(usize, bool)> {
    let outs: Vec<Output> = r.trace.iter().map(|e| e.output.clone()).collect();
    probes(&outs)
}

#[test]
fn in_the_simulator_a_right_prior_shortens_the_first_probe_and_keeps_the_decision() {
    // Classes whose prefixes are told apart in the synthetic RTT (margins
    // 0.6–0.9 at 5–15 samples).
    for bg in ["B1-C0", "B1-C1", "B1-B1", "B0-C0"] {
        for seed in 1..=5 {
            let without = sim(bg, None, seed);
            let with = sim(bg, Some(bg), seed);
            let (w0, w1) = (sim_probes(&without)[0], sim_probes(&with)[0]);
            assert_eq!(w0, (20, false), "{bg} seed {seed}");
            assert!(w1.0 < 20 && w1.1, "{bg} seed {seed}: first probe {w1:?}");
            // Every decision still matches the stump's choice for the truth.
            assert_eq!(with.correct_decisions, with.decisions, "{bg} seed {seed}");
            assert!(with.probe_fraction < without.probe_fraction);
        }
    }
}

#[test]
fn in_the_simulator_a_stale_prior_costs_no_decision() {
    // The cache remembers a CUBIC background; the path now has BBR (and the
    // reverse). The first probe must not follow the prior into a wrong CCA.
    for (bg, stale) in [("B1-C0", "C1-C1"), ("C1-C1", "B1-C0"), ("B1-B1", "B0-C1")] {
        for seed in 1..=5 {
            let r = sim(bg, Some(stale), seed);
            assert_eq!(
                r.correct_decisions, r.decisions,
                "{bg} prior {stale} seed {seed}"
            );
            let first = sim_probes(&r)[0];
            assert_eq!(first, (20, false), "{bg} prior {stale} seed {seed}");
        }
    }
}

#[test]
fn in_the_simulator_confusable_classes_keep_the_full_probe() {
    // One vs two CUBIC flows look alike in the synthetic RTT: prefix margins
    // stay below 0.1, so an agreeing prior never reaches 0.3 and the probe
    // is not shortened (the rule trades savings for safety there).
    for bg in ["C1-C1", "B0-C1"] {
        for seed in 1..=5 {
            let r = sim(bg, Some(bg), seed);
            assert_eq!(sim_probes(&r)[0], (20, false), "{bg} seed {seed}");
            assert_eq!(r.correct_decisions, r.decisions, "{bg} seed {seed}");
        }
    }
}
