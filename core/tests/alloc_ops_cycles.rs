//! Several cycles per decision allocate nothing per window: the per-class
//! nearest distances (`Model::nearest_per_class`) and the controller's
//! window boundaries before the last one (min-sum bookkeeping, the
//! per-window event) run on preallocated memory. Own test binary because it
//! replaces the global allocator.

use opsel::knn::{KnnConfig, Model};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::{Config, Controller, KnnClassifier, Phase, Stump};
use opsel::probe::Pattern;
use opsel::series::{synth, Normalization};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;

fn model(normalization: Normalization) -> Model {
    let (x, y) = synth::dataset(&SIX_CLASSES, 20, 20, 11).unwrap();
    let config = KnnConfig {
        k: 3,
        normalization,
        ..KnnConfig::default()
    };
    Model::fit(
        &x,
        20,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        config,
    )
    .unwrap()
}

#[test]
fn nearest_per_class_does_not_allocate() {
    for norm in [Normalization::None, Normalization::ZScore] {
        let m = model(norm);
        let mut ws = m.class_workspace();
        let mut out = [0.0; 6];
        let queries: Vec<Vec<f64>> = SIX_CLASSES
            .iter()
            .enumerate()
            .map(|(i, c)| synth::rtt_series(&Mix::parse(c).unwrap(), 20, 500 + i as u64))
            .collect();
        let ((), n) = count(|| {
            for q in &queries {
                m.nearest_per_class(q, &mut ws, &mut out).unwrap();
            }
        });
        assert_eq!(n, 0, "nearest_per_class allocated ({norm:?})");
        assert!(out.iter().all(|d| d.is_finite()));
    }
}

#[test]
fn window_boundaries_before_the_decision_do_not_allocate() {
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.cycles = 3;
    let c = KnnClassifier::new(model(Normalization::ZScore)).unwrap();
    let mut ctl = Controller::new(cfg, c, Stump::default()).unwrap();
    ctl.start(0).unwrap();
    let series = synth::rtt_series(&Mix::parse("B1-C1").unwrap(), 60, 3);
    // Samples 1..59: two window boundaries (20 s, 40 s), no decision yet.
    let ((), n) = count(|| {
        for t in 1..60u64 {
            ctl.handle_timeout(t * S).unwrap();
            ctl.handle_sample(t * S, series[t as usize - 1]).unwrap();
            while ctl.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "probe with window boundaries allocated");
    assert_eq!(ctl.phase(), Phase::Probe);
    ctl.handle_sample(60 * S, series[59]).unwrap();
    while ctl.poll().is_some() {}
    assert_eq!(ctl.phase(), Phase::Steady);
}
