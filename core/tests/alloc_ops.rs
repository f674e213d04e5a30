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
