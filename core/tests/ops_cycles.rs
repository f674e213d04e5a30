//! Several cycles per decision (`ops::Config::cycles`, issues #6/#7): the
//! controller collects n windows back to back and decides by min-sum
//! (`argmin_c Σ_i d(window_i, class c)`, `opsel.train cycles`), with
//! progressive probing at window boundaries and adaptive Y on top.

use opsel::knn::{KnnConfig, Model};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{
    Action, AdaptiveSteady, CcaName, Classified, Classifier, Config, Controller, Event,
    KnnClassifier, Output, Phase, Progressive, Stump, MAX_CYCLES,
};
use opsel::probe::Pattern;
use opsel::series::synth;
use opsel::{Error, Result};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

/// Returns scripted per-class distances, one row per window (cycling), and
/// records the windows it was given.
struct TableDistances {
    w: usize,
    classes: Vec<Mix>,
    rows: Vec<Vec<f64>>,
    next: usize,
    windows: Vec<Vec<f64>>,
    fail_at: Option<usize>,
    classify_calls: usize,
    /// The partial windows `prepare` was given.
    prepared: Vec<Vec<f64>>,
}

impl TableDistances {
    fn new(w: usize, rows: &[&[f64]]) -> Self {
        Self {
            w,
            classes: SIX_CLASSES.iter().map(|c| Mix::parse(c).unwrap()).collect(),
            rows: rows.iter().map(|r| r.to_vec()).collect(),
            next: 0,
            windows: Vec::new(),
            fail_at: None,
            classify_calls: 0,
            prepared: Vec::new(),
        }
    }
}

impl Classifier for TableDistances {
    fn window_len(&self) -> usize {
        self.w
    }
    /// Scripted rows name the background directly.
    fn counts_own_flow(&self) -> bool {
        false
    }
    fn classes(&self) -> &[Mix] {
        &self.classes
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        // The one-window decision: the nearest class of this row.
        self.classify_calls += 1;
        let mut d = vec![0.0; 6];
        self.class_distances(window, &mut d).unwrap()?;
        let (i, v) =
            d.iter().enumerate().fold(
                (0, f64::INFINITY),
                |b, (i, &v)| if v < b.1 { (i, v) } else { b },
            );
        Ok(Classified {
            mix: self.classes[i].clone(),
            class_index: i,
            confidence: 1.0,
            distance: v,
        })
    }
    fn class_distances(&mut self, window: &[f64], out: &mut [f64]) -> Option<Result<()>> {
        assert_eq!(window.len(), self.w);
        if self.fail_at == Some(self.windows.len()) {
            self.windows.push(window.to_vec());
            return Some(Err(Error::invalid("scripted failure")));
        }
        self.windows.push(window.to_vec());
        let row = &self.rows[self.next % self.rows.len()];
        self.next += 1;
        out.copy_from_slice(row);
        Some(Ok(()))
    }
    fn supports_class_distances(&self) -> bool {
        true
    }
    fn prepare(&mut self, partial: &[f64]) {
        self.prepared.push(partial.to_vec());
    }
}

type Log = Vec<(u64, Output)>;

/// Drive whole seconds `from..=to`: timeout, then one sample (value = t).
fn run<C: Classifier>(c: &mut Controller<C, Stump>, from: u64, to: u64, log: &mut Log) {
    for t in from..=to {
        c.handle_timeout(t * S).unwrap();
        if t > 0 {
            c.handle_sample(t * S, t as f64).unwrap();
        }
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
}

fn cycle_events(log: &Log) -> Vec<(usize, usize, usize, f64, usize, f64, u64)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::CycleClassified {
                index,
                cycles,
                class_index,
                distance,
                leader,
                margin,
                at_ns,
            }) => Some((
                *index,
                *cycles,
                *class_index,
                *distance,
                *leader,
                *margin,
                at_ns / S,
            )),
            _ => None,
        })
        .collect()
}

fn classified(log: &Log) -> Vec<(Classified, usize, bool, u64)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::Classified {
                classified,
                samples,
                early,
                at_ns,
            }) => Some((classified.clone(), *samples, *early, at_ns / S)),
            _ => None,
        })
        .collect()
}

fn selected(log: &Log) -> Vec<(CcaName, Option<u64>, u64)> {
    log.iter()
        .filter_map(|(_, o)| match o {
            Output::Event(Event::Selected {
                cca,
                steady_ns,
                at_ns,
            }) => Some((*cca, steady_ns.map(|y| y / S), at_ns / S)),
            _ => None,
        })
        .collect()
}

// Class order: B0-C0, B0-C1, B1-C0, B1-C1, B1-B1, C1-C1.
const ROW_B0C0: &[f64] = &[1.0, 5.0, 9.0, 9.0, 9.0, 9.0];
const ROW_B0C1: &[f64] = &[6.0, 2.0, 9.0, 9.0, 9.0, 9.0];
const ROW_B1C0: &[f64] = &[9.0, 9.0, 1.0, 8.0, 9.0, 9.0];

#[test]
fn active_three_cycles_min_sum() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.cycles = 3;
    let table = TableDistances::new(20, &[ROW_B0C0, ROW_B0C1, ROW_B0C1]);
    let mut c = Controller::new(cfg, table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 70, &mut log);
    // The pattern runs three times back to back, then the steady phase.
    let acts: Vec<(u64, Action)> = log
        .iter()
        .filter_map(|(t, o)| match o {
            Output::Action(a) => Some((*t, *a)),
            _ => None,
        })
        .collect();
    let mut want = Vec::new();
    for k in 0..3u64 {
        let b = 20 * k;
        want.push((
            b,
            Action::Silence {
                until_ns: (b + 5) * S,
            },
        ));
        if k > 0 {
            want.push((b + 5, Action::SetCca(CcaName::CUBIC)));
        }
        want.push((
            b + 5,
            Action::SendFullSpeed {
                cca: CcaName::CUBIC,
                until_ns: (b + 10) * S,
            },
        ));
        want.push((
            b + 10,
            Action::Silence {
                until_ns: (b + 15) * S,
            },
        ));
        want.push((b + 15, Action::SetCca(CcaName::BBR)));
        want.push((
            b + 15,
            Action::SendFullSpeed {
                cca: CcaName::BBR,
                until_ns: (b + 20) * S,
            },
        ));
    }
    want.push((60, Action::SetCca(CcaName::CUBIC)));
    want.push((
        60,
        Action::Steady {
            cca: CcaName::CUBIC,
            until_ns: Some(160 * S),
        },
    ));
    assert_eq!(acts, want);
    // Each window is the 20 samples of one pattern run, in order.
    let windows = &c.classifier().windows;
    assert_eq!(windows.len(), 3);
    for (i, w) in windows.iter().enumerate() {
        let first = 20.0 * i as f64 + 1.0;
        assert_eq!(w, &(0..20).map(|j| first + j as f64).collect::<Vec<_>>());
    }
    assert_eq!(c.classifier().classify_calls, 0);
    // Per-window verdicts and the running min-sum.
    let ev = cycle_events(&log);
    let m1 = 1.0 - 7.0 / 7.0; // sums after 2 windows: B0-C0 7, B0-C1 7 (tie → first)
    assert_eq!(
        ev,
        [
            (0, 3, 0, 1.0, 0, 1.0 - 1.0 / 5.0, 20),
            (1, 3, 1, 2.0, 0, m1, 40),
            (2, 3, 1, 2.0, 1, 1.0 - 9.0 / 13.0, 60),
        ]
    );
    let cl = classified(&log);
    assert_eq!(cl.len(), 1);
    let (v, samples, early, at) = &cl[0];
    assert_eq!(
        (v.class_index, v.distance, *samples, *early, *at),
        (1, 9.0, 60, false, 60)
    );
    assert_eq!(v.mix, Mix::parse("B0-C1").unwrap());
    assert_eq!(v.confidence, 1.0 - 9.0 / 13.0);
    assert_eq!(selected(&log), [(CcaName::CUBIC, Some(100), 60)]);
    let st = c.stats();
    assert_eq!((st.decisions, st.early_exits), (1, 0));
    assert_eq!(c.phase(), Phase::Steady);
}

#[test]
fn passive_windows_back_to_back() {
    let mut cfg = Config::passive();
    cfg.cycles = 2;
    cfg.steady_ns = 10 * S;
    let table = TableDistances::new(5, &[ROW_B1C0, ROW_B0C1]);
    let mut c = Controller::new(cfg, table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 10, &mut log);
    // Passive: one full-speed action over the whole 2 × 5 s span.
    assert!(log.iter().any(|(t, o)| *t == 0
        && *o
            == Output::Action(Action::SendFullSpeed {
                cca: CcaName::CUBIC,
                until_ns: 10 * S
            })));
    let cl = classified(&log);
    // Sums: B0-C0 15, B0-C1 11, B1-C0 10, B1-C1 17, B1-B1 18, C1-C1 18:
    // B1-C0, although the last window alone says B0-C1.
    assert_eq!(
        (cl[0].0.class_index, cl[0].0.distance, cl[0].1),
        (2, 10.0, 10)
    );
    assert_eq!(cycle_events(&log)[1].2, 1);
    assert_eq!(cycle_events(&log).len(), 2);
    assert_eq!(c.classifier().windows[1], vec![6.0, 7.0, 8.0, 9.0, 10.0]);
    // Each window was prepared on its second-to-last sample with its own
    // first w − 1 samples (the fast path of the last sample).
    assert_eq!(
        c.classifier().prepared,
        vec![vec![1.0, 2.0, 3.0, 4.0], vec![6.0, 7.0, 8.0, 9.0]]
    );
}

#[test]
fn one_cycle_keeps_the_single_window_decision() {
    // cycles = 1: the thesis's path (classify), never the per-class distances.
    let cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    assert_eq!(cfg.cycles, 1);
    assert_eq!(Config::passive().cycles, 1);
    let table = TableDistances::new(20, &[ROW_B1C0]);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 25, &mut log);
    assert_eq!(c.classifier().classify_calls, 1);
    assert!(cycle_events(&log).is_empty());
    // Exactly the outputs of the same run with the scripted double.
    let script = ScriptedClassifier::new(20, &SIX_CLASSES, &[("B1-C0", 1.0)]).unwrap();
    let mut d = Controller::new(cfg, script, Stump::default()).unwrap();
    d.start(0).unwrap();
    let mut log2 = Vec::new();
    run(&mut d, 0, 25, &mut log2);
    let strip = |l: &Log| -> Vec<(u64, Output)> {
        l.iter()
            .filter(|(_, o)| !matches!(o, Output::Event(Event::Classified { .. })))
            .cloned()
            .collect()
    };
    assert_eq!(strip(&log), strip(&log2));
}

#[test]
fn progressive_ends_after_a_confident_window() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.cycles = 3;
    cfg.progressive = Some(Progressive {
        min_samples: 1,
        step: 5,
        min_confidence: 0.5,
        agree: 1,
    });
    // Window 0: margin 1 − 1/5 = 0.8 ≥ 0.5 → decide B0-C0 at 20 s.
    let table = TableDistances::new(20, &[ROW_B0C0]);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 21, &mut log);
    let cl = classified(&log);
    assert_eq!(cl.len(), 1);
    assert_eq!(
        (cl[0].0.class_index, cl[0].1, cl[0].2, cl[0].3),
        (0, 20, true, 20)
    );
    assert_eq!(cl[0].0.confidence, 0.8);
    assert_eq!(c.stats().early_exits, 1);
    assert_eq!(c.classifier().windows.len(), 1);

    // Not confident enough (0.8 < 0.9): all three windows.
    cfg.progressive.as_mut().unwrap().min_confidence = 0.9;
    let table = TableDistances::new(20, &[ROW_B0C0]);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 61, &mut log);
    let cl = classified(&log);
    assert_eq!((cl[0].1, cl[0].2), (60, false));
    assert_eq!(cl[0].0.confidence, 1.0 - 3.0 / 15.0);
    assert_eq!(c.stats().early_exits, 0);

    // agree = 2: two confident boundaries with the same leader → 40 s.
    let p = cfg.progressive.as_mut().unwrap();
    (p.min_confidence, p.agree) = (0.5, 2);
    let table = TableDistances::new(20, &[ROW_B0C0]);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 41, &mut log);
    let cl = classified(&log);
    assert_eq!((cl[0].1, cl[0].2, cl[0].0.distance), (40, true, 2.0));

    // min_samples beyond the first boundary: no check at 20 s.
    let p = cfg.progressive.as_mut().unwrap();
    (p.min_samples, p.agree) = (25, 1);
    let table = TableDistances::new(20, &[ROW_B0C0]);
    let mut c = Controller::new(cfg, table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 41, &mut log);
    let cl = classified(&log);
    assert_eq!((cl[0].1, cl[0].2), (40, true));
}

#[test]
fn adaptive_y_follows_min_sum_decisions() {
    let mut cfg = Config::passive();
    cfg.cycles = 2;
    cfg.steady_ns = 10 * S;
    cfg.adaptive = Some(AdaptiveSteady::around(10 * S));
    // Decisions: B1-C0 (bbr), B1-C0 (bbr, Y ×2), B0-C0 (cubic, Y ×0.5).
    let table = TableDistances::new(
        5,
        &[ROW_B1C0, ROW_B1C0, ROW_B1C0, ROW_B1C0, ROW_B0C0, ROW_B0C0],
    );
    let mut c = Controller::new(cfg, table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 70, &mut log);
    let sel = selected(&log);
    assert_eq!(
        &sel[..3],
        [
            (CcaName::BBR, Some(10), 10),
            (CcaName::BBR, Some(20), 30),   // probe 20..30 s
            (CcaName::CUBIC, Some(10), 60)  // probe 50..60 s
        ]
    );
}

#[test]
fn failures_and_missing_samples() {
    // A failing window: DecisionFailed, steady with the last decided CCA.
    let mut cfg = Config::passive();
    cfg.cycles = 3;
    cfg.steady_ns = 10 * S;
    let mut table = TableDistances::new(5, &[ROW_B1C0]);
    table.fail_at = Some(1);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 11, &mut log);
    let msg = log
        .iter()
        .find_map(|(_, o)| match o {
            Output::Event(Event::DecisionFailed { message, at_ns }) => {
                Some((message.clone(), at_ns / S))
            }
            _ => None,
        })
        .unwrap();
    assert!(
        msg.0.contains("window 1") && msg.0.contains("scripted failure"),
        "{msg:?}"
    );
    assert_eq!(msg.1, 10);
    assert_eq!(c.stats().failed_decisions, 1);
    assert!(classified(&log).is_empty());

    // NaN distances are refused the same way.
    let table = TableDistances::new(5, &[&[f64::NAN, 1.0, 1.0, 1.0, 1.0, 1.0]]);
    let mut c = Controller::new(cfg.clone(), table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    run(&mut c, 0, 6, &mut log);
    assert_eq!(c.stats().failed_decisions, 1);

    // Samples stop after 7 of 15: the probe is abandoned, needed = 3 × 5.
    let table = TableDistances::new(5, &[ROW_B1C0]);
    let mut c = Controller::new(cfg, table, Stump::default()).unwrap();
    c.start(0).unwrap();
    let mut log = Vec::new();
    for t in 0..=30u64 {
        c.handle_timeout(t * S).unwrap();
        if (1..=7).contains(&t) {
            c.handle_sample(t * S, 50.0).unwrap();
        }
        while let Some(o) = c.poll() {
            log.push((t, o));
        }
    }
    let inc = log
        .iter()
        .find_map(|(_, o)| match o {
            Output::Event(Event::ProbeIncomplete {
                samples,
                needed,
                at_ns,
            }) => Some((*samples, *needed, at_ns / S)),
            _ => None,
        })
        .unwrap();
    assert_eq!(inc, (7, 15, 20)); // deadline = 15 s span + 5 grace periods
}

#[test]
fn configuration_is_validated() {
    let table = || TableDistances::new(20, &[ROW_B0C0]);
    for bad in [0, MAX_CYCLES + 1] {
        let mut cfg = Config::passive();
        cfg.cycles = bad;
        let e = Controller::new(cfg, table(), Stump::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains(&format!("cycles = {bad}")), "{e}");
    }
    let mut cfg = Config::passive();
    cfg.cycles = MAX_CYCLES;
    assert!(Controller::new(cfg, table(), Stump::default()).is_ok());
    // A classifier without per-class distances.
    let mut cfg = Config::passive();
    cfg.cycles = 2;
    let script = ScriptedClassifier::new(20, &SIX_CLASSES, &[("B1-C0", 1.0)]).unwrap();
    let e = Controller::new(cfg, script, Stump::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("distance to every class"), "{e}");
    // Windows that are not whole pattern runs (w = 20, pattern 15 s).
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5").unwrap());
    cfg.cycles = 2;
    let e = Controller::new(cfg.clone(), table(), Stump::default())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("whole number of pattern runs"),
        "{e}"
    );
    cfg.cycles = 1;
    assert!(Controller::new(cfg, table(), Stump::default()).is_ok());
    // w = 40 with a 20 s pattern: two runs per window, fine.
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.cycles = 2;
    assert!(Controller::new(cfg, TableDistances::new(40, &[ROW_B0C0]), Stump::default()).is_ok());
}

fn synth_model(k: usize) -> Model {
    let (x, y) = synth::dataset(&SIX_CLASSES, 12, 20, 3).unwrap();
    Model::fit(
        &x,
        20,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        KnnConfig {
            k,
            ..KnnConfig::default()
        },
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// With the DTW K-NN model the controller's decision is the min-sum of
    /// the model's exhaustive per-class distances over the probe's windows,
    /// and each window's verdict is its 1-NN class.
    #[test]
    fn knn_decision_is_the_min_sum(seed in any::<u64>(), n in 1usize..5, k in prop::sample::select(vec![1usize, 3]), class in 0usize..6) {
        let model = synth_model(k);
        let mut cfg = Config::passive();
        cfg.cycles = n;
        cfg.steady_ns = 5 * S;
        let mut c = Controller::new(cfg, KnnClassifier::new(model.clone()).unwrap(), Stump::default()).unwrap();
        c.start(0).unwrap();
        let series = synth::rtt_series(&Mix::parse(SIX_CLASSES[class]).unwrap(), 20 * n, seed);
        let mut log = Vec::new();
        for (t, v) in series.iter().enumerate() {
            let now = (t as u64 + 1) * S;
            c.handle_timeout(now).unwrap();
            c.handle_sample(now, *v).unwrap();
            while let Some(o) = c.poll() {
                log.push((t as u64 + 1, o));
            }
        }
        let mut ws = model.class_workspace();
        let mut sums = [0.0; 6];
        let mut d = [0.0; 6];
        let mut per = Vec::new();
        for win in series.chunks_exact(20) {
            model.nearest_per_class_exhaustive(win, &mut ws, &mut d).unwrap();
            let best = (0..6).fold(0, |b, i| if d[i] < d[b] { i } else { b });
            per.push(best);
            for i in 0..6 { sums[i] += d[i]; }
        }
        let leader = (0..6).fold(0, |b, i| if sums[i] < sums[b] { i } else { b });
        let cl = classified(&log);
        prop_assert_eq!(cl.len(), 1);
        if n == 1 {
            // One window: the model's own k-NN decision (unchanged path).
            let mut kws = model.workspace();
            let p = model.classify(&series, &mut kws).unwrap();
            prop_assert_eq!(cl[0].0.class_index, p.class);
            prop_assert!(cycle_events(&log).is_empty());
        } else {
            prop_assert_eq!(cl[0].0.class_index, leader);
            prop_assert_eq!(cl[0].0.distance, sums[leader]);
            prop_assert!((0.0..=1.0).contains(&cl[0].0.confidence));
            let ev = cycle_events(&log);
            prop_assert_eq!(ev.iter().map(|e| e.2).collect::<Vec<_>>(), per);
            prop_assert_eq!(ev.last().unwrap().4, leader);
        }
    }
}
