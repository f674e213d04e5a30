//! Action sequences of the OPS controller (000 §1.2, Fig 6.1, §5.3) with the
//! scripted test-double classifier.

use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{
    Action, AdaptiveSteady, CcaName, Classified, Config, Controller, Event, FnPolicy, Output,
    Phase, Policy, ProbeMode, Progressive, StabilityKey, Stump, TablePolicy,
};
use opsel::probe::Pattern;
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const SIX: [&str; 6] = opsel::mix::SIX_CLASSES;

type Ctl = Controller<ScriptedClassifier, Box<dyn Policy + Send>>;

fn ctl(cfg: Config, script: &[(&str, f64)]) -> Ctl {
    let c = ScriptedClassifier::new(20, &SIX, script).unwrap();
    Controller::new(cfg, c, Box::new(Stump::default()) as Box<dyn Policy + Send>).unwrap()
}

/// Drive whole seconds `from..=to`: timeout then (for t >= 1 s) one sample.
fn run(c: &mut Ctl, from: u64, to: u64, log: &mut Vec<(u64, Output)>) {
    for t in from..=to {
        c.handle_timeout(t * S).unwrap();
        if t > 0 {
            c.handle_sample(t * S, 100.0).unwrap();
        }
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
}

fn actions(log: &[(u64, Output)]) -> Vec<(u64, Action)> {
    log.iter()
        .filter_map(|(t, o)| {
            if let Output::Action(a) = o {
                Some((*t, *a))
            } else {
                None
            }
        })
        .collect()
}

fn phases(log: &[(u64, Output)]) -> Vec<(Phase, u64)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::Phase { phase, at_ns, .. }) => Some((*phase, at_ns / S)),
            _ => None,
        })
        .collect()
}

fn selected(log: &[(u64, Output)]) -> Vec<(CcaName, Option<u64>)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::Selected { cca, steady_ns, .. }) => {
                Some((*cca, steady_ns.map(|y| y / S)))
            }
            _ => None,
        })
        .collect()
}

fn classified(log: &[(u64, Output)]) -> Vec<(String, usize, bool)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::Classified {
                classified,
                samples,
                early,
                ..
            }) => Some((classified.mix.to_string(), *samples, *early)),
            _ => None,
        })
        .collect()
}

#[test]
fn active_cycle_s5_c5_s5_b5() {
    let cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    let mut c = ctl(cfg, &[("B1-C0", 1.0), ("C1-C1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 150, &mut log);
    use Action::*;
    let (cubic, bbr) = (CcaName::CUBIC, CcaName::BBR);
    assert_eq!(
        actions(&log),
        [
            // Cycle 0: the pattern (socket starts on cubic: no SetCca for C5).
            (0, Silence { until_ns: 5 * S }),
            (
                5,
                SendFullSpeed {
                    cca: cubic,
                    until_ns: 10 * S
                }
            ),
            (10, Silence { until_ns: 15 * S }),
            (15, SetCca(bbr)),
            (
                15,
                SendFullSpeed {
                    cca: bbr,
                    until_ns: 20 * S
                }
            ),
            // B1-C0 → BBR present → bbr (000 §4.1); already on bbr.
            (
                20,
                Steady {
                    cca: bbr,
                    until_ns: Some(120 * S)
                }
            ),
            // Cycle 1.
            (120, Silence { until_ns: 125 * S }),
            (125, SetCca(cubic)),
            (
                125,
                SendFullSpeed {
                    cca: cubic,
                    until_ns: 130 * S
                }
            ),
            (130, Silence { until_ns: 135 * S }),
            (135, SetCca(bbr)),
            (
                135,
                SendFullSpeed {
                    cca: bbr,
                    until_ns: 140 * S
                }
            ),
            // C1-C1 → cubic.
            (140, SetCca(cubic)),
            (
                140,
                Steady {
                    cca: cubic,
                    until_ns: Some(240 * S)
                }
            ),
        ]
    );
    let p = |ph: Phase, t: u64| (ph, t);
    assert_eq!(
        phases(&log),
        [
            p(Phase::Probe, 0),
            p(Phase::Classify, 20),
            p(Phase::Select, 20),
            p(Phase::Steady, 20),
            p(Phase::Probe, 120),
            p(Phase::Classify, 140),
            p(Phase::Select, 140),
            p(Phase::Steady, 140)
        ]
    );
    assert_eq!(
        classified(&log),
        [("bbr:1".into(), 20, false), ("cubic:2".into(), 20, false)]
    );
    // Every classification saw a full window of w = 20 samples.
    assert_eq!(c.classifier().calls, [20, 20]);
    let st = c.stats_at(150 * S);
    assert_eq!((st.probe_ns, st.steady_ns), (40 * S, 110 * S));
    assert_eq!((st.decisions, st.cca_switches), (2, 4));
    assert_eq!(c.poll_timeout(), Some(240 * S));
}

#[test]
fn exact_output_order_at_decision() {
    let mut c = ctl(
        Config::active(Pattern::parse("C20").unwrap()),
        &[("B1-C1", 0.7)],
    );
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 20, &mut log);
    let at20: Vec<&Output> = log
        .iter()
        .filter(|(t, _)| *t == 20)
        .map(|(_, o)| o)
        .collect();
    let kinds: Vec<String> = at20
        .iter()
        .map(|o| match o {
            Output::Action(a) => format!("{a:?}")
                .split([' ', '('])
                .next()
                .unwrap()
                .to_string(),
            Output::Event(e) => match e {
                Event::Phase { phase, .. } => format!("{phase:?}"),
                e => format!("{e:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_string(),
            },
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "Classify",
            "Classified",
            "Select",
            "Selected",
            "Steady",
            "SetCca",
            "Steady"
        ]
    );
}

#[test]
fn passive_probe_keeps_sending_with_current_cca() {
    let mut c = ctl(Config::passive(), &[("B1-B1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 20, &mut log);
    assert_eq!(
        actions(&log),
        [
            (
                0,
                Action::SendFullSpeed {
                    cca: CcaName::CUBIC,
                    until_ns: 20 * S
                }
            ),
            (20, Action::SetCca(CcaName::BBR)),
            (
                20,
                Action::Steady {
                    cca: CcaName::BBR,
                    until_ns: Some(80 * S)
                }
            ),
        ]
    );
}

#[test]
fn y_zero_probes_once() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.steady_ns = 0;
    let mut c = ctl(cfg, &[("B0-C1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 1000, &mut log);
    assert_eq!(selected(&log), [(CcaName::CUBIC, None)]);
    assert_eq!(
        actions(&log).last().unwrap(),
        &(
            20,
            Action::Steady {
                cca: CcaName::CUBIC,
                until_ns: None
            }
        )
    );
    assert_eq!(c.poll_timeout(), None);
    assert_eq!(c.phase(), Phase::Steady);
    assert_eq!(c.classifier().calls.len(), 1);
}

#[test]
fn pattern_shorter_than_window_repeats_and_holds() {
    // w = 20 with a 6 s pattern: C3-S3 repeated, the segment running at
    // 20 s (C, 18..21) is cut at the window span and held.
    let mut c = ctl(
        Config::active(Pattern::parse("C3-S3").unwrap()),
        &[("B0-C0", 1.0)],
    );
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 20, &mut log);
    let a: Vec<(u64, Action)> = actions(&log).into_iter().filter(|(t, _)| *t < 20).collect();
    let starts: Vec<u64> = a.iter().map(|(t, _)| *t).collect();
    assert_eq!(starts, [0, 3, 6, 9, 12, 15, 18]);
    assert_eq!(
        a.last().unwrap().1,
        Action::SendFullSpeed {
            cca: CcaName::CUBIC,
            until_ns: 20 * S
        }
    );
}

#[test]
fn late_driver_keeps_the_schedule() {
    let mut c = ctl(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        &[("B0-C0", 1.0)],
    );
    c.start(0).unwrap();
    // The driver wakes up only at 17 s: three segment changes are due.
    c.handle_timeout(17 * S).unwrap();
    let got: Vec<Action> = std::iter::from_fn(|| c.poll())
        .filter_map(|o| {
            if let Output::Action(a) = o {
                Some(a)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        got,
        [
            Action::Silence { until_ns: 5 * S },
            Action::SendFullSpeed {
                cca: CcaName::CUBIC,
                until_ns: 10 * S
            },
            Action::Silence { until_ns: 15 * S },
            Action::SetCca(CcaName::BBR),
            Action::SendFullSpeed {
                cca: CcaName::BBR,
                until_ns: 20 * S
            },
        ]
    );
}

#[test]
fn adaptive_y_grows_while_stable_and_shrinks_on_change() {
    let mut cfg = Config::passive();
    cfg.steady_ns = 60 * S;
    // [30, 480] s, ×2 / ×0.5, keyed on the class.
    cfg.adaptive = Some(AdaptiveSteady {
        key: StabilityKey::Class,
        ..AdaptiveSteady::around(60 * S)
    });
    let script = [
        ("C1-C1", 1.0),
        ("C1-C1", 1.0),
        ("C1-C1", 1.0),
        ("C1-C1", 1.0),
        ("C1-C1", 1.0),
        ("B1-C0", 1.0),
        ("C1-C1", 1.0),
        ("B0-C1", 1.0),
    ];
    let mut c = ctl(cfg.clone(), &script);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 2400, &mut log);
    let ys: Vec<u64> = selected(&log)
        .iter()
        .take(8)
        .map(|(_, y)| y.unwrap())
        .collect();
    assert_eq!(ys, [60, 120, 240, 480, 480, 240, 120, 60]);

    // Keyed on the decision, a C1-C1 → B0-C1 flip (same CCA) does not shrink.
    cfg.adaptive = Some(AdaptiveSteady {
        key: StabilityKey::Decision,
        ..AdaptiveSteady::around(60 * S)
    });
    let mut c = ctl(cfg, &[("C1-C1", 1.0), ("B0-C1", 1.0), ("B1-C1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 500, &mut log);
    let ys: Vec<u64> = selected(&log)
        .iter()
        .take(3)
        .map(|(_, y)| y.unwrap())
        .collect();
    assert_eq!(ys, [60, 120, 60]);
}

#[test]
fn progressive_probing_ends_early_when_confident() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.progressive = Some(Progressive::default()); // checks at 5, 10, 15; conf >= 0.8
    let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)])
        .unwrap()
        .with_prefix_confidence(0.9);
    let mut c = Controller::new(cfg.clone(), classifier, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    for t in 1..=10u64 {
        c.handle_timeout(t * S).unwrap();
        c.handle_sample(t * S, 100.0).unwrap();
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
    assert_eq!(classified(&log), [("bbr:1".into(), 5, true)]);
    assert_eq!(selected(&log), [(CcaName::BBR, Some(100))]);
    // The probe ended at 5 s, in the C5 segment; steady runs from there.
    assert!(actions(&log).contains(&(
        5,
        Action::Steady {
            cca: CcaName::BBR,
            until_ns: Some(105 * S)
        }
    )));
    assert_eq!(c.stats_at(10 * S).probe_ns, 5 * S);
    assert_eq!(c.stats().early_exits, 1);

    // Unsure prefixes: the full window decides.
    let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)])
        .unwrap()
        .with_prefix_confidence(0.5);
    let mut c = Controller::new(cfg.clone(), classifier, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    for t in 1..=20u64 {
        c.handle_sample(t * S, 100.0).unwrap();
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
    assert_eq!(classified(&log), [("bbr:1".into(), 20, false)]);
    assert_eq!(c.classifier().calls, [5, 10, 15, 20]);

    // agree = 2: two consecutive confident prefixes → exit at 10.
    cfg.progressive = Some(Progressive {
        agree: 2,
        ..Progressive::default()
    });
    let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)])
        .unwrap()
        .with_prefix_confidence(0.9);
    let mut c = Controller::new(cfg, classifier, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    for t in 1..=20u64 {
        c.handle_sample(t * S, 100.0).unwrap();
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
    assert_eq!(classified(&log), [("bbr:1".into(), 10, true)]);
}

#[test]
fn classifier_without_prefix_support_ignores_progressive() {
    let mut cfg = Config::passive();
    cfg.progressive = Some(Progressive::default());
    let mut c = ctl(cfg, &[("B1-C0", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 20, &mut log);
    assert_eq!(classified(&log), [("bbr:1".into(), 20, false)]);
}

#[test]
fn failures_keep_the_current_cca() {
    // A policy that fails: the decision is skipped, the socket CCA kept.
    let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)]).unwrap();
    let policy = FnPolicy(|c: &Classified| -> opsel::Result<CcaName> {
        Err(opsel::Error::invalid(format!("no rule for {}", c.mix)))
    });
    let mut c = Controller::new(Config::passive(), classifier, policy).unwrap();
    c.start(0).unwrap();
    for t in 1..=20u64 {
        c.handle_sample(t * S, 50.0).unwrap();
    }
    let outs: Vec<Output> = std::iter::from_fn(|| c.poll()).collect();
    assert!(outs.iter().any(|o| matches!(o, Output::Event(Event::DecisionFailed { message, .. }) if message.contains("no rule for bbr:1"))));
    assert!(outs.contains(&Output::Action(Action::Steady {
        cca: CcaName::CUBIC,
        until_ns: Some(80 * S)
    })));
    assert_eq!(c.stats().failed_decisions, 1);
}

#[test]
fn missing_samples_abandon_the_probe() {
    let mut c = ctl(Config::passive(), &[("B1-C0", 1.0)]);
    c.start(0).unwrap();
    // Deadline = 20 s window + 5 grace periods.
    assert_eq!(c.poll_timeout(), Some(25 * S));
    c.handle_timeout(30 * S).unwrap();
    let outs: Vec<Output> = std::iter::from_fn(|| c.poll()).collect();
    assert!(outs.contains(&Output::Event(Event::ProbeIncomplete {
        samples: 0,
        needed: 20,
        at_ns: 25 * S
    })));
    assert!(outs.contains(&Output::Action(Action::Steady {
        cca: CcaName::CUBIC,
        until_ns: Some(85 * S)
    })));
    // Y = 0 probes again instead.
    let mut cfg = Config::passive();
    cfg.steady_ns = 0;
    let mut c = ctl(cfg, &[("B1-C0", 1.0)]);
    c.start(0).unwrap();
    c.handle_timeout(26 * S).unwrap();
    assert_eq!((c.phase(), c.cycle()), (Phase::Probe, 1));
}

#[test]
fn bad_input_is_rejected_without_state_change() {
    let mut c = ctl(Config::passive(), &[("B1-C0", 1.0)]);
    assert!(c
        .handle_sample(S, 1.0)
        .unwrap_err()
        .to_string()
        .contains("start"));
    c.start(10 * S).unwrap();
    assert!(c.start(11 * S).is_err());
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let e = c.handle_sample(11 * S, bad).unwrap_err().to_string();
        assert!(e.contains("RTT sample"), "{e}");
    }
    c.handle_sample(12 * S, 1.0).unwrap();
    assert!(c
        .handle_sample(11 * S, 1.0)
        .unwrap_err()
        .to_string()
        .contains("backwards"));
    assert!(c.handle_timeout(5 * S).is_err());
    // Nothing was lost: 19 more samples complete the window.
    for t in 13..=31u64 {
        c.handle_sample(t * S, 1.0).unwrap();
    }
    assert_eq!(c.phase(), Phase::Steady);
}

#[test]
fn configuration_errors() {
    let classifier = || ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)]).unwrap();
    let mut cfg = Config::passive();
    cfg.sample_period_ns = 0;
    assert!(Controller::new(cfg, classifier(), Stump::default()).is_err());
    let mut cfg = Config::passive();
    cfg.adaptive = Some(AdaptiveSteady {
        grow: 0.5,
        ..AdaptiveSteady::around(60 * S)
    });
    assert!(Controller::new(cfg, classifier(), Stump::default())
        .err()
        .unwrap()
        .to_string()
        .contains("grow"));
    let mut cfg = Config::passive();
    cfg.steady_ns = 0;
    cfg.adaptive = Some(AdaptiveSteady::around(60 * S));
    assert!(Controller::new(cfg, classifier(), Stump::default()).is_err());
    let mut cfg = Config::passive();
    cfg.progressive = Some(Progressive {
        step: 0,
        ..Progressive::default()
    });
    assert!(Controller::new(cfg, classifier(), Stump::default()).is_err());
    let mut cfg = Config::passive();
    cfg.grace_periods = 0;
    assert!(Controller::new(cfg, classifier(), Stump::default()).is_err());
    // A table that misses a class of the model is refused up front.
    let table =
        TablePolicy::parse("B1-C0=bbr, B1-C1=bbr, B1-B1=bbr, B0-C1=cubic, C1-C1=cubic").unwrap();
    let e = Controller::new(Config::passive(), classifier(), table)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("none"), "{e}");
    assert!(matches!(ProbeMode::Passive, ProbeMode::Passive));
}

proptest! {
    /// Any input sequence: no panic; rejected inputs change nothing; time in
    /// probe + steady equals elapsed time; SetCca only on a real change.
    #[test]
    fn never_panics_and_accounts_time(
        steps in prop::collection::vec((0u64..3 * S, prop_oneof![Just(f64::NAN), 0.0f64..500.0], 0u8..3), 1..300),
        y in 0u64..200,
        pattern in prop_oneof![Just("S5-C5-S5-B5"), Just("C1-S0.5-B2.25"), Just("passive")],
        progressive in any::<bool>(),
        adaptive in any::<bool>(),
    ) {
        let mut cfg = if pattern == "passive" { Config::passive() } else { Config::active(Pattern::parse(pattern).unwrap()) };
        cfg.steady_ns = y * S;
        if adaptive && y > 0 { cfg.adaptive = Some(AdaptiveSteady::around(y * S)); }
        if progressive { cfg.progressive = Some(Progressive::default()); }
        let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 0.9), ("C1-C1", 0.5), ("B0-C0", 0.95)])
            .unwrap()
            .with_prefix_confidence(0.85);
        let mut c = Controller::new(cfg, classifier, Stump::default()).unwrap();
        c.start(0).unwrap();
        let mut now = 0u64;
        let mut sock = CcaName::CUBIC;
        for (dt, rtt, kind) in steps {
            now += dt;
            let r = match kind {
                0 => c.handle_sample(now, rtt),
                1 => c.handle_timeout(now),
                _ => c.handle_bytes(now, 1000),
            };
            prop_assert_eq!(r.is_err(), kind == 0 && rtt.is_nan());
            while let Some(o) = c.poll() {
                if let Output::Action(Action::SetCca(x)) = o {
                    prop_assert_ne!(x, sock);
                    sock = x;
                }
            }
            prop_assert_eq!(sock, c.socket_cca());
            let st = c.stats_at(now);
            prop_assert_eq!(st.probe_ns + st.steady_ns, now);
        }
    }
}

#[test]
fn prefix_ensemble_dispatches_by_length() {
    use opsel::ops::{Classifier, PrefixEnsemble};
    let m = |w: usize, label: &str| ScriptedClassifier::new(w, &SIX, &[(label, 0.9)]).unwrap();
    let mut e = PrefixEnsemble::new(m(20, "B1-C1"), vec![m(10, "B1-C0"), m(5, "B0-C1")]).unwrap();
    assert_eq!(e.prefix_lens().collect::<Vec<_>>(), [5, 10]);
    assert_eq!(e.window_len(), 20);
    assert_eq!(
        e.classify_prefix(&[1.0; 5])
            .unwrap()
            .unwrap()
            .mix
            .to_string(),
        "cubic:1"
    );
    assert_eq!(
        e.classify_prefix(&[1.0; 10])
            .unwrap()
            .unwrap()
            .mix
            .to_string(),
        "bbr:1"
    );
    assert!(e.classify_prefix(&[1.0; 7]).is_none());
    assert_eq!(
        e.classify(&[1.0; 20]).unwrap().mix.to_string(),
        "bbr:1-cubic:1"
    );
    // Progressive probing through the ensemble ends at the 5-sample prefix.
    let mut cfg = Config::passive();
    cfg.progressive = Some(Progressive::default());
    let mut c = Controller::new(cfg, e, Stump::default()).unwrap();
    c.start(0).unwrap();
    for t in 1..=5u64 {
        c.handle_sample(t * S, 80.0).unwrap();
    }
    assert_eq!(c.phase(), Phase::Steady);
    // Bad ensembles.
    assert!(PrefixEnsemble::new(m(20, "B1-C1"), vec![m(20, "B1-C1")]).is_err());
    assert!(PrefixEnsemble::new(m(20, "B1-C1"), vec![m(5, "B1-C1"), m(5, "B1-C1")]).is_err());
    let other = ScriptedClassifier::new(5, &["B1-C0", "B0-C1"], &[("B1-C0", 1.0)]).unwrap();
    assert!(PrefixEnsemble::new(m(20, "B1-C1"), vec![other])
        .err()
        .unwrap()
        .to_string()
        .contains("classes"));
}

#[test]
fn steady_jitter_is_bounded_and_seeded() {
    let run = |seed: u64| {
        let mut cfg = Config::passive();
        cfg.steady_ns = 100 * S;
        cfg.steady_jitter = 0.1;
        cfg.seed = seed;
        let mut c = ctl(cfg, &[("B1-C0", 1.0)]);
        let mut log = Vec::new();
        c.start(0).unwrap();
        run(&mut c, 0, 3000, &mut log);
        selected(&log)
            .iter()
            .map(|(_, y)| y.unwrap())
            .collect::<Vec<u64>>()
    };
    let a = run(1);
    assert!(a.len() >= 20);
    assert!(a.iter().all(|y| (90..=110).contains(y)), "{a:?}");
    assert!(a.iter().any(|&y| y != a[0]), "{a:?}");
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
    let mut cfg = Config::passive();
    cfg.steady_jitter = 0.7;
    let c = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)]).unwrap();
    assert!(Controller::new(cfg, c, Stump::default())
        .err()
        .unwrap()
        .to_string()
        .contains("jitter"));
}

#[test]
fn failed_decision_after_active_probe_falls_back_to_last_decided_cca() {
    // The B5 burst leaves the socket on bbr; a failing policy must not keep
    // bbr by accident but return to the last decided CCA (initially cubic).
    let classifier = ScriptedClassifier::new(20, &SIX, &[("B1-C0", 1.0)]).unwrap();
    let policy =
        FnPolicy(|_: &Classified| -> opsel::Result<CcaName> { Err(opsel::Error::invalid("down")) });
    let mut c = Controller::new(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        classifier,
        policy,
    )
    .unwrap();
    let mut log = Vec::new();
    c.start(0).unwrap();
    for t in 1..=20u64 {
        c.handle_timeout(t * S).unwrap();
        c.handle_sample(t * S, 90.0).unwrap();
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
    let a = actions(&log);
    assert_eq!(
        a[a.len() - 2..],
        [
            (20, Action::SetCca(CcaName::CUBIC)),
            (
                20,
                Action::Steady {
                    cca: CcaName::CUBIC,
                    until_ns: Some(120 * S)
                }
            )
        ]
    );
}

proptest! {
    /// Driven at its own `poll_timeout`s, the active probe emits exactly the
    /// pattern's schedule (repeated, cut at the window span w·P), including
    /// fractional segments, then one steady phase.
    #[test]
    fn active_probe_follows_the_pattern_schedule(
        segs in prop::collection::vec((0u8..3, 1u64..28), 1..6),
        w in 3usize..30,
    ) {
        use opsel::probe::{Segment, SegmentKind};
        let segments: Vec<Segment> = segs
            .iter()
            .map(|&(k, q)| Segment {
                kind: match k { 0 => SegmentKind::Silence, 1 => SegmentKind::Burst(CcaName::CUBIC), _ => SegmentKind::Burst(CcaName::BBR) },
                duration_ns: q * S / 4, // quarter seconds
            })
            .collect();
        let pattern = Pattern::from_segments(segments.clone()).unwrap();
        let classifier = ScriptedClassifier::new(w, &SIX, &[("B0-C0", 1.0)]).unwrap();
        let mut c = Controller::new(Config::active(pattern), classifier, Stump::default()).unwrap();
        c.start(0).unwrap();
        let span = w as u64 * S;
        let mut probe_actions = Vec::new();
        let mut next_sample = S;
        let mut steady = false;
        for _ in 0..10_000 {
            while let Some(o) = c.poll() {
                match o {
                    Output::Action(Action::Steady { .. }) => steady = true,
                    Output::Action(a @ (Action::Silence { .. } | Action::SendFullSpeed { .. })) => probe_actions.push(a),
                    _ => {}
                }
            }
            if steady { break; }
            let t = c.poll_timeout().unwrap().min(next_sample);
            if t == next_sample {
                c.handle_sample(t, 70.0).unwrap();
                next_sample += S;
            } else {
                c.handle_timeout(t).unwrap();
            }
        }
        prop_assert!(steady);
        // Expected: segments back to back from 0, each cut at the span.
        let mut want = Vec::new();
        let mut start = 0u64;
        let mut i = 0usize;
        while start < span {
            let seg = segments[i % segments.len()];
            let until_ns = (start + seg.duration_ns).min(span);
            want.push(match seg.kind {
                SegmentKind::Silence => Action::Silence { until_ns },
                SegmentKind::Burst(cca) => Action::SendFullSpeed { cca, until_ns },
            });
            start += seg.duration_ns;
            i += 1;
        }
        prop_assert_eq!(probe_actions, want);
    }
}

/// Passive windows are measured while the transfer sends, and a trained
/// model's classes count every flow at the bottleneck (its references were
/// recorded by a prober that only pings). The stump must be asked about the
/// background: the class minus the transfer's own flow. Script: a CUBIC
/// background, first misread as B1-C1 while sending CUBIC (→ bbr); then, on
/// BBR, two flows of different CCAs read B1-C1 again; then C1-C1 on CUBIC.
#[test]
fn passive_decisions_subtract_the_transfers_own_flow() {
    let script = [
        ("B1-C1", 0.9),
        ("B1-C1", 0.9),
        ("C1-C1", 0.9),
        ("B1-B1", 0.9),
    ];
    let mut cfg = Config::passive();
    cfg.steady_ns = 10 * S;
    let mut c = ctl(cfg.clone(), &script);
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 125, &mut log);
    let ccas: Vec<CcaName> = selected(&log).iter().map(|s| s.0).collect();
    // B1-C1 on cubic: background B1 → bbr; B1-C1 on bbr: background C1 →
    // cubic (the misread is undone); C1-C1 on cubic → cubic; B1-B1 on cubic:
    // no cubic flow to remove, BBR present → bbr.
    assert_eq!(
        ccas[..4],
        [CcaName::BBR, CcaName::CUBIC, CcaName::CUBIC, CcaName::BBR]
    );
    // The event still reports the classifier's class.
    assert_eq!(classified(&log)[1].0, "bbr:1-cubic:1");

    // Classes that already are the background: B1-C1 → bbr every time, the
    // misread sticks.
    let sc = ScriptedClassifier::new(20, &SIX, &script)
        .unwrap()
        .background_classes();
    let mut c = Controller::new(
        cfg,
        sc,
        Box::new(Stump::default()) as Box<dyn Policy + Send>,
    )
    .unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 65, &mut log);
    let ccas: Vec<CcaName> = selected(&log).iter().map(|s| s.0).collect();
    assert_eq!(ccas[..2], [CcaName::BBR, CcaName::BBR]);

    // Active probing shapes its own windows: the class is asked as it is.
    let mut c = ctl(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        &[("B1-C1", 0.9)],
    );
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 25, &mut log);
    assert_eq!(selected(&log)[0].0, CcaName::BBR);
}

/// A table policy is checked against every background it may be asked about
/// in passive mode: B0-C1 on CUBIC is the empty background.
#[test]
fn passive_table_policy_must_cover_backgrounds() {
    let classes = ["B0-C1", "B1-C1"];
    let sc = ScriptedClassifier::new(20, &classes, &[("B0-C1", 0.9)]).unwrap();
    let t = TablePolicy::parse("B0-C1=cubic, B1-C1=bbr, B1-C0=bbr").unwrap();
    let e = Controller::new(Config::passive(), sc, t)
        .err()
        .expect("B0-C0 uncovered");
    assert!(
        e.to_string().contains("B0-C0") || e.to_string().contains("none"),
        "{e}"
    );
    let sc = ScriptedClassifier::new(20, &classes, &[("B0-C1", 0.9)]).unwrap();
    let t = TablePolicy::parse("B0-C1=cubic, B1-C1=bbr, B1-C0=bbr, B0-C0=cubic").unwrap();
    assert!(Controller::new(Config::passive(), sc, t).is_ok());
}

/// Records every window it classifies; answers class 0 (B1-C0 → bbr).
struct Recorder {
    classes: Vec<opsel::mix::Mix>,
    w: usize,
    windows: Vec<Vec<f64>>,
}

impl Recorder {
    fn new(w: usize) -> Self {
        let classes = SIX
            .iter()
            .map(|l| opsel::mix::Mix::parse(l).unwrap())
            .collect();
        Self {
            classes,
            w,
            windows: Vec::new(),
        }
    }
}

impl opsel::ops::Classifier for Recorder {
    fn window_len(&self) -> usize {
        self.w
    }
    fn classes(&self) -> &[opsel::mix::Mix] {
        &self.classes
    }
    fn classify(&mut self, window: &[f64]) -> opsel::Result<Classified> {
        self.windows.push(window.to_vec());
        Ok(Classified {
            mix: self.classes[0].clone(),
            class_index: 0,
            confidence: 1.0,
            distance: 0.0,
        })
    }
}

const MS: u64 = 1_000_000;

#[test]
fn echo_sample_read_at_the_probe_start_is_sample_zero() {
    let cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    let mut c = Controller::new(cfg, Recorder::new(20), Stump::default()).unwrap();
    c.start(0).unwrap();
    assert_eq!(c.sample_grid_origin_ns(), 0);
    // A lost sample before any answered one has nothing to repeat.
    c.handle_echo_sample(2 * MS, 0, None).unwrap();
    assert_eq!(c.poll_timeout(), Some(5 * S));
    // The burst fired at the probe's start, read 12 ms later: held until
    // half a period in (the controller's convention), then sample 0.
    c.handle_echo_sample(12 * MS, 0, Some(50.0)).unwrap();
    assert_eq!(c.poll_timeout(), Some(S / 2));
    c.handle_timeout(S / 2).unwrap();
    assert_eq!(c.poll_timeout(), Some(5 * S));
    for k in 1..20u64 {
        c.handle_timeout(k * S).unwrap();
        // Sample 7's echoes are all lost: sample 6 is repeated.
        let rtt = (k != 7).then_some(50.0 + k as f64);
        c.handle_echo_sample(k * S + 12 * MS, k * S, rtt).unwrap();
    }
    let mut want: Vec<f64> = (0..20).map(|k| 50.0 + k as f64).collect();
    want[7] = 56.0;
    assert_eq!(c.classifier().windows, [want]);
    assert_eq!(c.phase(), Phase::Steady);
    // The next probe moves the grid to its start.
    let next = c.poll_timeout().unwrap();
    c.handle_timeout(next).unwrap();
    assert_eq!((c.phase(), c.sample_grid_origin_ns()), (Phase::Probe, next));
}

#[test]
fn echo_sample_begun_before_the_probe_is_not_sample_zero() {
    let cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    let mut c = Controller::new(cfg.clone(), Recorder::new(20), Stump::default()).unwrap();
    c.start(S).unwrap();
    // Begun 200 ms before the probe (more than the slack): a sample of the
    // period before it, dropped like any sample less than half inside.
    c.handle_echo_sample(S + 12 * MS, S - 200 * MS, Some(40.0))
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(6 * S));
    // Begun within the slack: sample 0.
    let mut c = Controller::new(cfg, Recorder::new(20), Stump::default()).unwrap();
    c.start(S).unwrap();
    let late = S - opsel::ops::FIRST_SAMPLE_SLACK_NS;
    c.handle_echo_sample(S + 12 * MS, late, Some(40.0)).unwrap();
    assert_eq!(c.poll_timeout(), Some(S + S / 2));
    // Not finite: rejected like handle_sample, nothing held.
    let e = c
        .handle_echo_sample(S + 20 * MS, S, Some(f64::NAN))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a finite"), "{e}");
}

// ---- Echo samples whose replies take most of a period (5 Hz with the
// recorder's echo timeout): window sample k is the burst fired at probe
// period k, however late its replies come in (000 §3.2). ----

type EchoCtl = Controller<Recorder, Stump>;

/// The live driver's reply wait at `period_ns`: the netlab recorder's, until
/// 2 ms before the next burst, after the 9 ms of 10 echoes 1 ms apart.
fn recorder_timeout(period_ns: u64) -> u64 {
    period_ns - 11 * MS
}

/// One burst of [`run_prober`]: the grid tick it was fired for, when its first
/// echo left, when its sample was handed in, whether any echo was answered.
#[derive(Debug, Clone, Copy)]
struct Burst {
    tick: u64,
    start: u64,
    done: u64,
    answered: bool,
}

impl Burst {
    /// The RTT it reports: its start in ms, so a window names its bursts.
    fn tag(&self) -> f64 {
        self.start as f64 / 1e6
    }
}

/// Probe starts from the controller's phase events.
fn drain_starts(c: &mut EchoCtl, starts: &mut Vec<u64>) {
    while let Some(o) = c.poll() {
        if let Output::Event(Event::Phase {
            phase: Phase::Probe,
            at_ns,
            ..
        }) = o
        {
            starts.push(at_ns);
        }
    }
}

/// Controller time passes to `t`: every timeout at its own time.
fn pass(c: &mut EchoCtl, t: u64, starts: &mut Vec<u64>) {
    while let Some(due) = c.poll_timeout().filter(|&d| d <= t) {
        c.handle_timeout(due).unwrap();
        drain_starts(c, starts);
    }
}

/// The live driver around the controller, as `ops_driver/prober.rs` and
/// `run_loop.rs` do it: one burst at a time at `origin + k·period` (the
/// controller's grid origin, re-read after every sleep step of at most
/// 10 ms; a tick noticed up to `FIRST_SAMPLE_SLACK_NS` late still fires),
/// each burst's sample handed in when its last reply is in, `reply(i)` after
/// its last echo (`None`: every echo lost, the burst ends at `timeout`).
/// Runs from `from` (the controller started there) until `until`; returns
/// the bursts and the probe starts.
fn run_prober(
    c: &mut EchoCtl,
    from: u64,
    until: u64,
    timeout: u64,
    mut reply: impl FnMut(usize) -> Option<u64>,
) -> (Vec<Burst>, Vec<u64>) {
    let p = c.config().sample_period_ns;
    let late = opsel::ops::FIRST_SAMPLE_SLACK_NS;
    let (mut bursts, mut starts) = (Vec::new(), Vec::new());
    drain_starts(c, &mut starts);
    let mut fired: Option<u64> = None;
    let mut now = from;
    while now < until {
        pass(c, now, &mut starts);
        let o = c.sample_grid_origin_ns();
        let tick = if now < o {
            o
        } else {
            let last = o + (now - o) / p * p;
            if now - last <= late && fired != Some(last) {
                last
            } else {
                last + p
            }
        };
        if tick > now {
            // A step that reaches the tick fires it without another look
            // at the origin, as the prober does.
            let step = tick.min(now + 10 * MS);
            now = step;
            if step < tick {
                continue;
            }
            pass(c, now, &mut starts);
        }
        fired = Some(tick);
        let d = reply(bursts.len()).filter(|&d| d < timeout);
        let b = Burst {
            tick,
            start: now,
            done: now + 9 * MS + d.unwrap_or(timeout),
            answered: d.is_some(),
        };
        pass(c, b.done, &mut starts);
        c.handle_echo_sample(b.done, b.start, b.answered.then(|| b.tag()))
            .unwrap();
        drain_starts(c, &mut starts);
        bursts.push(b);
        now = b.done;
    }
    (bursts, starts)
}

/// The window the probe that started at `s` must classify (000 §3.2): sample
/// k ≥ 1 is the burst fired for tick `s + k·p`; sample 0 the one fired for
/// `s`, or, if the prober did not fire at `s`, the last one begun from
/// `FIRST_SAMPLE_SLACK_NS` before `s` on. A burst with every echo lost
/// repeats the last answered burst before it, and so does a sample the
/// prober fired no burst for (at 1 Hz a burst begun more than the slack
/// before `s` may still await replies when the prober would fire at `s`):
/// the last answered burst begun before the next period. Before any
/// answered burst, the first answered one after stands in.
fn expected_window(bursts: &[Burst], s: u64, p: u64, w: usize) -> Vec<f64> {
    let slack = opsel::ops::FIRST_SAMPLE_SLACK_NS;
    (0..w as u64)
        .map(|k| {
            let fired = if k == 0 {
                bursts.iter().rposition(|b| b.tick == s).or_else(|| {
                    bursts
                        .iter()
                        .rposition(|b| b.start + slack >= s && b.start < s + p)
                })
            } else {
                bursts
                    .iter()
                    .position(|b| b.start + slack >= s && b.tick == s + k * p)
            };
            // The bursts this sample may stand for: up to the one fired for
            // it, or every one begun before the next period.
            let cut = fired.map_or_else(
                || {
                    bursts
                        .iter()
                        .position(|b| b.start >= s + (k + 1) * p)
                        .expect("a burst after the missed one")
                },
                |i| i + 1,
            );
            let pick = bursts[..cut]
                .iter()
                .rev()
                .find(|b| b.answered)
                .or_else(|| bursts[cut..].iter().find(|b| b.answered));
            pick.expect("an answered burst").tag()
        })
        .collect()
}

/// Passive controller at `period` with windows of `w` and steady time `y`.
fn echo_ctl(period: u64, w: usize, y: u64) -> EchoCtl {
    let mut cfg = Config::passive();
    cfg.sample_period_ns = period;
    cfg.steady_ns = y;
    Controller::new(cfg, Recorder::new(w), Stump::default()).unwrap()
}

/// Runs `probes` probes with `reply` and checks every window against
/// [`expected_window`]; returns how many probes started while a burst begun
/// within the slack before them had its sample in by half a period (held and
/// joined as sample 0) and the burst fired at the start came in after that
/// (the case sample 0 is replaced in).
fn check_windows(
    period: u64,
    w: usize,
    y: u64,
    probes: usize,
    reply: impl FnMut(usize) -> Option<u64>,
) -> usize {
    let mut c = echo_ctl(period, w, y);
    c.start(S).unwrap();
    let until = S + probes as u64 * (w as u64 * period + y + 2 * period);
    let (bursts, starts) = run_prober(&mut c, S, until, recorder_timeout(period), reply);
    let windows = &c.classifier().windows;
    assert_eq!(c.stats().incomplete_probes, 0);
    assert!(windows.len() >= probes, "{} windows", windows.len());
    let mut replaced = 0;
    for (win, &s) in windows.iter().zip(&starts) {
        assert_eq!(
            *win,
            expected_window(&bursts, s, period, w),
            "probe at {s} ns"
        );
        let slack = opsel::ops::FIRST_SAMPLE_SLACK_NS;
        let due = s + period / 2;
        let held = bursts
            .iter()
            .any(|b| b.start < s && b.start + slack >= s && b.done <= due);
        let at_start = bursts.iter().any(|b| b.tick == s && b.done > due);
        replaced += (held && at_start) as usize;
    }
    replaced
}

#[test]
fn replies_late_by_most_of_a_period_keep_their_burst_places() {
    // Every reply 0.3, 0.6 or 0.85 periods after the last echo, at 5 Hz
    // (w = 50) and 1 Hz (w = 10), both with the recorder's wait; steady
    // times in 10-ms steps put the probe starts at every offset from the
    // grid of the phase before.
    for (period, w) in [(200 * MS, 50), (S, 10)] {
        for frac in [0.3, 0.6, 0.85] {
            let d = (period as f64 * frac) as u64;
            let mut replaced = 0;
            for j in 0..20u64 {
                let y = 2 * S + j * period / 20;
                replaced += check_windows(period, w, y, 3, |_| Some(d));
            }
            // At 5 Hz, when a burst takes more than half a period (0.6,
            // 0.85), the probe-start burst came in after a held candidate
            // had joined in some runs. (At 1 Hz a candidate that slow is in
            // too late for the prober to fire at the start at all.)
            if period < S && frac > 0.5 {
                assert!(replaced > 0, "period {period} ns, delay {frac}");
            }
        }
    }
}

#[test]
fn a_probe_start_burst_replied_late_replaces_a_held_sample_zero() {
    // 200 ms, w = 5: the probe starts at 1 s, between two ticks of the
    // grid before it; a burst begun 60 ms earlier is in at 1.09 s, held
    // and taken as sample 0 at 1.1 s. The prober fires the probe's first
    // burst when that one is done (90 ms late); its replies take 160 ms.
    let p = 200 * MS;
    let mut c = echo_ctl(p, 5, 60 * S);
    c.start(S).unwrap();
    c.handle_echo_sample(S + 90 * MS, S - 60 * MS, Some(1.0))
        .unwrap();
    assert_eq!(c.poll_timeout(), Some(S + 100 * MS));
    c.handle_timeout(S + 100 * MS).unwrap();
    c.handle_echo_sample(S + 259 * MS, S + 90 * MS, Some(2.0))
        .unwrap();
    // Ticks 1..4, each fired when the one before is done, replies in 160 ms.
    let mut t = S + 259 * MS;
    for k in 1..5u64 {
        let start = t.max(S + k * p);
        t = start + 169 * MS;
        c.handle_timeout(start).unwrap();
        c.handle_echo_sample(t, start, Some(2.0 + k as f64))
            .unwrap();
    }
    // Appended, the start burst would have been sample 1 and the window
    // [1, 2, 3, 4, 5] one period early.
    assert_eq!(c.classifier().windows, [vec![2.0, 3.0, 4.0, 5.0, 6.0]]);
    assert_eq!(c.phase(), Phase::Steady);
}

#[test]
fn lost_bursts_and_a_missed_tick_repeat_the_previous_sample() {
    let p = 200 * MS;
    let mut c = echo_ctl(p, 6, 60 * S);
    c.start(S).unwrap();
    // Sample 0 held, then its replacement lost: the previous answered
    // sample (the held one) stands for it.
    c.handle_echo_sample(S + 95 * MS, S - 80 * MS, Some(1.0))
        .unwrap();
    c.handle_timeout(S + 100 * MS).unwrap();
    c.handle_echo_sample(S + 293 * MS, S + 95 * MS, None)
        .unwrap();
    // Sample 1 lost, sample 2 answered, no burst fired in period 3 (the
    // prober missed its tick), sample 4 answered: 3 repeats sample 2.
    c.handle_echo_sample(S + p + 198 * MS, S + p + 93 * MS, None)
        .unwrap();
    c.handle_echo_sample(S + 2 * p + 150 * MS, S + 2 * p, Some(3.0))
        .unwrap();
    assert!(c.classifier().windows.is_empty());
    c.handle_echo_sample(S + 4 * p + 150 * MS, S + 4 * p, Some(5.0))
        .unwrap();
    assert!(c.classifier().windows.is_empty());
    c.handle_echo_sample(S + 5 * p + 150 * MS, S + 5 * p, Some(6.0))
        .unwrap();
    assert_eq!(c.classifier().windows, [vec![1.0, 1.0, 3.0, 3.0, 5.0, 6.0]]);
}

#[test]
fn late_replies_from_before_the_probe_or_sample_zero_are_dropped() {
    let p = 200 * MS;
    let mut c = echo_ctl(p, 4, 60 * S);
    c.start(S).unwrap();
    // Begun 150 ms before the probe (a burst of the phase before, outside
    // the slack), its replies in after half a period: not sample 0.
    c.handle_echo_sample(S + 110 * MS, S - 150 * MS, Some(9.0))
        .unwrap();
    // The probe's first burst, in at 1.13 s: sample 0.
    c.handle_echo_sample(S + 130 * MS, S + 2 * MS, Some(1.0))
        .unwrap();
    // A candidate begun before it, in later (out of order): not sample 0.
    c.handle_echo_sample(S + 140 * MS, S - 20 * MS, Some(8.0))
        .unwrap();
    c.handle_echo_sample(S + p + 100 * MS, S + p, Some(2.0))
        .unwrap();
    // A burst of period 0 after sample 1 joined: too late, dropped; so is
    // a second burst for period 1.
    c.handle_echo_sample(S + p + 110 * MS, S + 50 * MS, Some(7.0))
        .unwrap();
    c.handle_echo_sample(S + p + 120 * MS, S + p + 5 * MS, Some(6.0))
        .unwrap();
    c.handle_echo_sample(S + 2 * p + 100 * MS, S + 2 * p, Some(3.0))
        .unwrap();
    c.handle_echo_sample(S + 3 * p + 100 * MS, S + 3 * p, Some(4.0))
        .unwrap();
    assert_eq!(c.classifier().windows, [vec![1.0, 2.0, 3.0, 4.0]]);
    // A burst cannot begin after its replies came in.
    let e = c
        .handle_echo_sample(S + 4 * p, S + 4 * p + 1, Some(1.0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("began at") && e.contains("after its sample"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any reply delay below the recorder's timeout, lost bursts and any
    /// steady time: every window holds the bursts fired at the probe's
    /// start + k·period, in order.
    #[test]
    fn windows_hold_the_bursts_fired_at_their_periods(
        fast in any::<bool>(),
        y_ms in 500u64..4000,
        delays in proptest::collection::vec(proptest::option::weighted(0.9, 0.0f64..1.0), 64),
    ) {
        let (period, w) = if fast { (200 * MS, 50) } else { (S, 10) };
        let timeout = recorder_timeout(period);
        check_windows(period, w, y_ms * MS, 3, |i| {
            delays[i % delays.len()].map(|f| (f * timeout as f64) as u64)
        });
    }
}

#[test]
fn lead_in_runs_the_last_segment_before_every_probe() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.lead_in = true;
    let mut c = ctl(cfg.clone(), &[("B0-C1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    // The first probe waits for the lead-in.
    assert_eq!((c.phase(), c.poll_timeout()), (Phase::Idle, Some(5 * S)));
    run(&mut c, 0, 130, &mut log);
    use Action::*;
    let (cubic, bbr) = (CcaName::CUBIC, CcaName::BBR);
    let full = |cca, t: u64| SendFullSpeed {
        cca,
        until_ns: t * S,
    };
    assert_eq!(
        actions(&log),
        [
            // Lead-in: the B5 segment before the first probe.
            (0, SetCca(bbr)),
            (0, full(bbr, 5)),
            (5, Silence { until_ns: 10 * S }),
            (10, SetCca(cubic)),
            (10, full(cubic, 15)),
            (15, Silence { until_ns: 20 * S }),
            (20, SetCca(bbr)),
            (20, full(bbr, 25)),
            // B0-C1 → cubic.
            (25, SetCca(cubic)),
            (
                25,
                Steady {
                    cca: cubic,
                    until_ns: Some(125 * S)
                }
            ),
            // The steady phase's last 5 s are the lead-in of the next probe.
            (120, SetCca(bbr)),
            (120, full(bbr, 125)),
            (125, Silence { until_ns: 130 * S }),
            (130, SetCca(cubic)),
            (130, full(cubic, 135)),
        ]
    );
    assert_eq!(
        phases(&log),
        [
            (Phase::Probe, 5),
            (Phase::Classify, 25),
            (Phase::Select, 25),
            (Phase::Steady, 25),
            (Phase::Probe, 125),
        ]
    );
    // The lead-in before the first probe is neither probe nor steady time.
    let st = c.stats_at(130 * S);
    assert_eq!((st.probe_ns, st.steady_ns), (25 * S, 100 * S));

    // A steady phase shorter than the segment is all lead-in.
    cfg.steady_ns = 3 * S;
    let mut c = ctl(cfg.clone(), &[("B0-C1", 1.0)]);
    let mut log = Vec::new();
    c.start(0).unwrap();
    run(&mut c, 0, 28, &mut log);
    let a = actions(&log);
    let i = a
        .iter()
        .position(|(_, x)| matches!(x, Steady { .. }))
        .unwrap();
    assert_eq!(a[i + 1..i + 3], [(25, SetCca(bbr)), (25, full(bbr, 28))]);
    assert_eq!(a[i + 3], (28, Silence { until_ns: 33 * S }));

    // Passive probing has no segment to lead in with.
    let mut p = Config::passive();
    p.lead_in = true;
    let mut c = ctl(p, &[("B0-C1", 1.0)]);
    c.start(0).unwrap();
    assert_eq!(c.phase(), Phase::Probe);

    // Set before start only.
    let mut c = ctl(cfg, &[("B0-C1", 1.0)]);
    c.set_lead_in(false).unwrap();
    c.start(0).unwrap();
    assert_eq!(c.phase(), Phase::Probe);
    assert!(c.set_lead_in(true).is_err());
}
