//! The probe gate's checks allocate nothing (DESIGN.md: hot paths allocate
//! nothing): the shipped passive model's per-prefix 1-NN (references cut at
//! load, `KnnClassifier::progressive`), the gate's features and score, at
//! 5, 10, …, 35 samples of a w = 40 probe, plus the preparation on the 39th
//! sample. Own test binary because it replaces the global allocator.

use std::path::PathBuf;

use opsel::ops::{ControllerSpec, Event, NoCallback, Output, Phase};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;

fn repo(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

#[test]
fn gate_checks_do_not_allocate() {
    let file = opsel::model::load(repo("models/passive/model.json")).unwrap();
    let m = &file.model;
    let w = m.window();
    // A window near a reference the shipped gate ends early (at 35 s, with
    // the full window's class), so the prefixes have real neighbours.
    let q: Vec<f64> = m
        .raw_reference(9)
        .iter()
        .enumerate()
        .map(|(k, v)| v * (1.0 + 0.003 * ((k % 5) as f64 - 2.0)))
        .collect();
    // Threshold 1: the gate scores every check and never fires, so all 39
    // samples are the probe path.
    let spec = ControllerSpec {
        gate: Some(repo("models/passive/gate.json")),
        gate_threshold: Some(1.0),
        ..ControllerSpec::default()
    };
    let mut c = spec.build::<NoCallback>(&file, None).unwrap();
    c.start(0).unwrap();
    let ((), n) = count(|| {
        for (t, &v) in q[..w - 1].iter().enumerate() {
            let now = (t as u64 + 1) * S;
            c.handle_timeout(now).unwrap();
            c.handle_sample(now, v).unwrap();
            while c.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "gate checks allocated");
    assert_eq!(c.phase(), Phase::Probe);
    // The last sample decides on the full window (allowed to allocate).
    c.handle_sample(w as u64 * S, q[w - 1]).unwrap();
    let mut samples = None;
    while let Some(o) = c.poll() {
        if let Output::Event(Event::Classified { samples: s, .. }) = o {
            samples = Some(s);
        }
    }
    assert_eq!(samples, Some(w));
    assert_eq!(c.stats().gate_exits, 0);

    // The shipped threshold: the checks before the one that fires allocate
    // nothing either (the firing check builds the decision's events).
    let spec = ControllerSpec {
        gate: Some(repo("models/passive/gate.json")),
        ..ControllerSpec::default()
    };
    let mut c = spec.build::<NoCallback>(&file, None).unwrap();
    c.start(0).unwrap();
    let mut fired_at = None;
    for (t, &v) in q.iter().enumerate() {
        let now = (t as u64 + 1) * S;
        let ((), n) = count(|| {
            c.handle_timeout(now).unwrap();
            c.handle_sample(now, v).unwrap();
        });
        let decided = c.phase() != Phase::Probe;
        while c.poll().is_some() {}
        if decided {
            fired_at = Some(t + 1);
            break;
        }
        assert_eq!(n, 0, "sample {} allocated before the gate fired", t + 1);
    }
    assert!(fired_at.is_some_and(|n| n < w), "{fired_at:?}");
    assert_eq!(c.stats().gate_exits, 1);
}

/// The prior's checks (`ops::PriorProbe`) read the same mix-free verdict:
/// checks that neither end the probe nor overrule the prior allocate nothing.
#[test]
fn prior_checks_do_not_allocate() {
    let file = opsel::model::load(repo("models/passive/model.json")).unwrap();
    let m = &file.model;
    let w = m.window();
    let q: Vec<f64> = m
        .raw_reference(11)
        .iter()
        .enumerate()
        .map(|(k, v)| v * (1.0 + 0.003 * ((k % 5) as f64 - 2.0)))
        .collect();
    // Margin 1 only for a window at distance 0: never here, so every check waits.
    let spec = ControllerSpec::from_json(
        r#"{"prior": {"min_samples": 5, "step": 5, "min_confidence": 1.0}}"#,
    )
    .unwrap();
    let mut c = spec.build::<NoCallback>(&file, None).unwrap();
    c.set_prior_class(0).unwrap();
    c.start(0).unwrap();
    let ((), n) = count(|| {
        for (t, &v) in q[..w - 1].iter().enumerate() {
            let now = (t as u64 + 1) * S;
            c.handle_timeout(now).unwrap();
            c.handle_sample(now, v).unwrap();
            while c.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "prior checks allocated");
    assert_eq!(c.phase(), Phase::Probe);
    assert_eq!(c.prior_class(), Some(0), "the prior was overruled or used");
    let s = c.stats();
    assert_eq!((s.prior_exits, s.prior_overruled), (0, 0));
}
