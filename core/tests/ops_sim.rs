//! Trace-driven simulation of the OPS controller (opsel::ops::sim): synthetic
//! RTT per background class, a nearest-prototype classifier, the stump.
//! Shows the cycle probe → classify → select → steady, adaptive Y and early
//! exit on recorded-like series. The throughput model is coarse (000 Table 6.3
//! ratios); assertions are on the controller's behaviour and on orderings.

use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::doubles::CentroidClassifier;
use opsel::ops::sim::{
    simulate, simulate_fixed, train_centroids, Background, SimConfig, SimReport,
};
use opsel::ops::{
    Action, AdaptiveSteady, CcaName, Config, Controller, Event, Output, Phase, Progressive, Stump,
};
use opsel::probe::Pattern;

const S: u64 = 1_000_000_000;

fn base() -> Config {
    Config::active(Pattern::parse("S5-C5-S5-B5").unwrap())
}

fn model() -> CentroidClassifier {
    train_centroids(&base().mode, 20, &SIX_CLASSES, 40, 1234).unwrap()
}

fn run(cfg: Config, bg: &Background, seed: u64) -> SimReport {
    let mut c = Controller::new(cfg, model(), Stump::default()).unwrap();
    simulate(
        &mut c,
        bg,
        SimConfig {
            duration_s: 1800,
            capacity_mbps: 500.0,
            seed,
        },
    )
    .unwrap()
}

fn static_bg(label: &str) -> Background {
    Background::Static(Mix::parse(label).unwrap())
}

/// Split the trace into cycles at each Probe phase event.
fn cycles(r: &SimReport) -> Vec<Vec<&Output>> {
    let mut out: Vec<Vec<&Output>> = Vec::new();
    for e in &r.trace {
        if matches!(
            e.output,
            Output::Event(Event::Phase {
                phase: Phase::Probe,
                ..
            })
        ) {
            out.push(Vec::new());
        }
        if let Some(c) = out.last_mut() {
            c.push(&e.output);
        }
    }
    out
}

#[test]
fn every_class_cycles_probe_classify_select_steady() {
    for label in SIX_CLASSES {
        let r = run(base(), &static_bg(label), 5);
        let cyc = cycles(&r);
        // 1800 s / (20 s probe + 100 s steady) = 15 cycles; the 16th probe
        // starts at the last tick.
        assert_eq!(cyc.len(), 16, "{label}");
        for (i, c) in cyc[..15].iter().enumerate() {
            let phases: Vec<Phase> = c
                .iter()
                .filter_map(|o| {
                    if let Output::Event(Event::Phase { phase, .. }) = o {
                        Some(*phase)
                    } else {
                        None
                    }
                })
                .collect();
            assert_eq!(
                phases,
                [Phase::Probe, Phase::Classify, Phase::Select, Phase::Steady],
                "{label} cycle {i}"
            );
            // The probe follows S5-C5-S5-B5 (constructive bursts), then steady.
            let acts: Vec<Action> = c
                .iter()
                .filter_map(|o| {
                    if let Output::Action(a) = o {
                        Some(*a)
                    } else {
                        None
                    }
                })
                .collect();
            let kinds: Vec<String> = acts
                .iter()
                .filter(|a| !matches!(a, Action::SetCca(_)))
                .map(|a| match a {
                    Action::Silence { .. } => "S".to_string(),
                    Action::SendFullSpeed { cca, .. } => format!("send {cca}"),
                    Action::Steady { cca, .. } => format!("steady {cca}"),
                    Action::SetCca(_) => unreachable!(),
                })
                .collect();
            let want_cca = if Mix::parse(label).unwrap().bbr_present() {
                "bbr"
            } else {
                "cubic"
            };
            assert_eq!(
                kinds[..4],
                ["S", "send cubic", "S", "send bbr"],
                "{label} cycle {i}"
            );
            assert_eq!(kinds[4], format!("steady {want_cca}"), "{label} cycle {i}");
        }
        assert_eq!(
            r.correct_decisions, r.decisions,
            "{label}: every decision matches the stump of the true mix"
        );
    }
}

#[test]
fn static_backgrounds_fairness_like_table_6_3() {
    // 000 A6/A7/A9: OPS Jain >= 0.95 where the wrong fixed choice gives ≈ 0.6.
    for (label, wrong) in [("B0-C1", CcaName::BBR), ("B1-C0", CcaName::CUBIC)] {
        let bg = static_bg(label);
        let ops = run(base(), &bg, 3);
        let bad = simulate_fixed(wrong, &bg, SimConfig::default()).unwrap();
        assert!(ops.jain >= 0.95, "{label}: OPS Jain {}", ops.jain);
        assert!(bad.jain < 0.65, "{label}: fixed {wrong} Jain {}", bad.jain);
    }
}

#[test]
fn adaptive_y_grows_on_a_static_background() {
    let bg = static_bg("B1-C0");
    let plain = run(base(), &bg, 2);
    let adaptive = run(
        Config {
            adaptive: Some(AdaptiveSteady::around(100 * S)),
            ..base()
        },
        &bg,
        2,
    );
    assert_eq!(plain.steady_s, vec![100; 15]);
    // ×2 per stable decision up to 8·Y = 800 s.
    assert_eq!(adaptive.steady_s, [100, 200, 400, 800, 800]);
    assert!(
        adaptive.probe_fraction < plain.probe_fraction / 2.0,
        "{} vs {}",
        adaptive.probe_fraction,
        plain.probe_fraction
    );
    assert!(adaptive.jain >= plain.jain);
}

#[test]
fn adaptive_y_shrinks_when_the_background_changes() {
    // ALT-60: decisions flip, so Y is halved again and again and never
    // reaches the 800 s it reaches on a static background.
    let r = run(
        Config {
            adaptive: Some(AdaptiveSteady::around(100 * S)),
            ..base()
        },
        &Background::alt(60).shifted(37),
        1,
    );
    let shrinks = r.steady_s.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(shrinks >= 2, "{:?}", r.steady_s);
    assert!(
        r.steady_s.iter().all(|&y| (50..800).contains(&y)),
        "{:?}",
        r.steady_s
    );
}

#[test]
fn early_exit_cuts_probing_and_keeps_decisions() {
    let bg = static_bg("B1-C0");
    let plain = run(base(), &bg, 4);
    let early = run(
        Config {
            progressive: Some(Progressive::default()),
            ..base()
        },
        &bg,
        4,
    );
    assert!(early.early_exits > 0);
    assert!(early.probe_fraction < plain.probe_fraction);
    assert_eq!(early.correct_decisions, early.decisions);
    let samples: Vec<usize> = early
        .trace
        .iter()
        .filter_map(|e| match &e.output {
            Output::Event(Event::Classified {
                samples,
                early: true,
                ..
            }) => Some(*samples),
            _ => None,
        })
        .collect();
    assert!(
        !samples.is_empty() && samples.iter().all(|s| [5, 10, 15].contains(s)),
        "{samples:?}"
    );
}

#[test]
fn alt_60_ops_near_fair_share_fixed_choices_not() {
    // 000 A10 (qualitative): OPS within ±20% of the fair share; fixed CUBIC
    // far below, fixed BBR above. Mean over 10 background phases.
    let (mut ops, mut cubic, mut bbr) = (0.0, 0.0, 0.0);
    for seed in 1..=10u64 {
        let bg = Background::alt(60).shifted(seed * 37 % 600);
        let sim = SimConfig {
            duration_s: 1800,
            capacity_mbps: 500.0,
            seed,
        };
        ops += run(base(), &bg, seed).share_of_fair / 10.0;
        cubic += simulate_fixed(CcaName::CUBIC, &bg, sim)
            .unwrap()
            .share_of_fair
            / 10.0;
        bbr += simulate_fixed(CcaName::BBR, &bg, sim)
            .unwrap()
            .share_of_fair
            / 10.0;
    }
    assert!((0.8..=1.2).contains(&ops), "OPS {ops}");
    assert!(cubic < 0.7 && bbr > 1.3, "cubic {cubic} bbr {bbr}");
}

#[test]
fn deterministic() {
    let cfg = Config {
        adaptive: Some(AdaptiveSteady::around(100 * S)),
        progressive: Some(Progressive::default()),
        ..base()
    };
    let a = run(cfg.clone(), &Background::alt(30), 9);
    let b = run(cfg, &Background::alt(30), 9);
    assert_eq!(a, b);
}

#[test]
fn lead_in_precedes_every_probe_in_the_simulator() {
    let cfg = Config {
        lead_in: true,
        ..base()
    };
    let r = run(cfg, &static_bg("B0-C1"), 5);
    let mut last_action: Option<(u64, Action)> = None;
    let mut probes = 0;
    for e in &r.trace {
        match &e.output {
            Output::Event(Event::Phase {
                phase: Phase::Probe,
                at_ns,
                ..
            }) => {
                // The B5 burst ran for the 5 s before the probe.
                assert_eq!(
                    last_action,
                    Some((
                        e.t_s - 5,
                        Action::SendFullSpeed {
                            cca: CcaName::BBR,
                            until_ns: *at_ns
                        }
                    )),
                    "probe at {} s",
                    e.t_s
                );
                probes += 1;
            }
            Output::Action(a) => last_action = Some((e.t_s, *a)),
            _ => {}
        }
    }
    // 5 s lead-in, then cycles of 20 s probe + 100 s steady (lead-in inside).
    assert_eq!(probes, 15);
    assert_eq!(r.correct_decisions, r.decisions);
    assert_eq!(r.decisions, 15);
    let plain = run(base(), &static_bg("B0-C1"), 5);
    // Each lead-in switches the socket to bbr for its burst and back after.
    assert!(r.cca_switches > plain.cca_switches);
}
