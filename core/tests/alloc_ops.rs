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

/// Replies late by most of a 200-ms period (the recorder's echo timeout):
/// sample 0 held, then replaced by the probe-start burst whose replies came
/// in after it joined; a burst begun before the probe dropped; a lost burst
/// repeated; a tick the prober missed filled. None of it allocates.
#[test]
fn late_echo_samples_do_not_allocate() {
    const MS: u64 = 1_000_000;
    let p = 200 * MS;
    let classes = opsel::mix::SIX_CLASSES;
    let mut cfg = Config::passive();
    cfg.sample_period_ns = p;
    cfg.steady_ns = 3 * S + 37 * MS;
    let classifier = ScriptedClassifier::new(20, &classes, &[("B1-C0", 1.0)]).unwrap();
    let mut c = Controller::new(cfg, classifier, Stump::default()).unwrap();
    c.start(S).unwrap();
    // Samples 0..=18 of the probe that started at `s` (the window needs 20).
    let fill = |c: &mut Controller<ScriptedClassifier, Stump>, s: u64| {
        c.handle_echo_sample(s + 90 * MS, s - 60 * MS, Some(50.0))
            .unwrap();
        c.handle_timeout(s + 100 * MS).unwrap();
        c.handle_echo_sample(s + 105 * MS, s - 150 * MS, Some(40.0))
            .unwrap();
        c.handle_echo_sample(s + 259 * MS, s + 90 * MS, Some(60.0))
            .unwrap();
        let mut t = s + 259 * MS;
        for k in 1..19u64 {
            if k == 7 {
                continue; // the prober missed this tick
            }
            let start = t.max(s + k * p + 10 * MS);
            c.handle_timeout(start).unwrap();
            t = start + 180 * MS;
            c.handle_echo_sample(t, start, (k != 9).then_some(60.0 + k as f64))
                .unwrap();
            while c.poll().is_some() {}
        }
        t
    };
    let mut s = S;
    for probe in 0..4 {
        let (t, n) = count(|| fill(&mut c, s));
        if probe > 0 {
            assert_eq!(n, 0, "probe {probe} allocated");
        }
        assert_eq!(c.phase(), Phase::Probe);
        // Sample 19 decides (allowed to allocate).
        let start = t.max(s + 19 * p + 10 * MS);
        c.handle_echo_sample(start + 180 * MS, start, Some(99.0))
            .unwrap();
        while c.poll().is_some() {}
        assert_eq!(c.phase(), Phase::Steady, "probe {probe}");
        s = c.poll_timeout().unwrap();
        c.handle_timeout(s).unwrap();
        while c.poll().is_some() {}
    }
    assert_eq!(c.stats().decisions, 4);
}
