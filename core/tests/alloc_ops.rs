//! The OPS controller allocates nothing per `handle_sample` on the steady path
//! (and while a probe window fills), proven with a counting global allocator.
//! Own test binary because it replaces the global allocator.

use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{Config, Controller, Phase, Stump};
use opsel::probe::Pattern;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;

#[test]
fn steady_and_probe_paths_do_not_allocate() {
    let classes = opsel::mix::SIX_CLASSES;
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.steady_ns = 1000 * S;
    let classifier = ScriptedClassifier::new(20, &classes, &[("B1-C0", 1.0)]).unwrap();
    let mut c = Controller::new(cfg, classifier, Stump::default()).unwrap();
    c.start(0).unwrap();

    // Probe: segment changes and 19 samples that do not complete the window.
    let ((), n) = count(|| {
        for t in 1..20u64 {
            c.handle_timeout(t * S).unwrap();
            c.handle_sample(t * S, 80.0 + t as f64).unwrap();
            while c.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "probe path allocated");
    assert_eq!(c.phase(), Phase::Probe);

    // The 20th sample classifies (allowed to allocate: not the steady path).
    c.handle_sample(20 * S, 99.0).unwrap();
    while c.poll().is_some() {}
    assert_eq!(c.phase(), Phase::Steady);

    // Steady: 900 samples, timeouts and byte reports, zero allocations.
    let ((), n) = count(|| {
        for t in 21..921u64 {
            c.handle_timeout(t * S).unwrap();
            c.handle_sample(t * S, 120.0).unwrap();
            c.handle_bytes(t * S, 62_500_000).unwrap();
            while c.poll().is_some() {}
            let _ = c.poll_timeout();
            let _ = c.stats();
        }
    });
    assert_eq!(n, 0, "steady path allocated");
    assert_eq!(c.phase(), Phase::Steady);
}

/// The path `OpsDriver::run` takes: samples with their burst start
/// (`handle_echo_sample`, including the held sample 0 and lost samples) and
/// a lead-in before each probe allocate nothing either.
#[test]
fn echo_samples_and_lead_in_do_not_allocate() {
    let classes = opsel::mix::SIX_CLASSES;
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.steady_ns = 30 * S;
    cfg.lead_in = true;
    let classifier = ScriptedClassifier::new(20, &classes, &[("B1-C0", 1.0)]).unwrap();
    let mut c = Controller::new(cfg, classifier, Stump::default()).unwrap();
    c.start(0).unwrap();
    // Lead-in (5 s) and a probe that fills 19 of its 20 samples.
    let ((), n) = count(|| {
        for t in 0..24u64 {
            let now = t * S + 12_000_000;
            c.handle_timeout(t * S).unwrap();
            let rtt = (t % 7 != 3).then_some(80.0 + t as f64);
            c.handle_echo_sample(now, t * S, rtt).unwrap();
            while c.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "lead-in and probe path allocated");
    assert_eq!(c.phase(), Phase::Probe);
    c.handle_timeout(24 * S + S / 2).unwrap();
    c.handle_echo_sample(25 * S, 24 * S, Some(90.0)).unwrap();
    while c.poll().is_some() {}
    assert_eq!(c.phase(), Phase::Steady);
    // Steady with its lead-in, then the next probe's first samples.
    let ((), n) = count(|| {
        for t in 26..70u64 {
            c.handle_timeout(t * S).unwrap();
            c.handle_echo_sample(t * S + 12_000_000, t * S, Some(85.0))
                .unwrap();
            while c.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "steady path with lead-in allocated");
    assert_eq!(c.stats().decisions, 1);
}
