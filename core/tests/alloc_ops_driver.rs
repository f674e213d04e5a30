//! `OpsDriver::feed_sample` allocates nothing on the steady path and while a
//! probe window fills (DESIGN.md: hot paths allocate nothing), including the
//! `setsockopt(TCP_CONGESTION)` calls of pattern segments on a real loopback
//! TCP socket. Own test binary because it replaces the global allocator.
#![cfg(target_os = "linux")]

use std::net::{TcpListener, TcpStream};

use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{Config, Controller, Phase, Stump};
use opsel::probe::Pattern;
use opsel::sys::linux::ops_driver::{DriverConfig, DriverEvent, OpsDriver, RttSource};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;

#[test]
fn sample_path_does_not_allocate() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _peer = l.accept().unwrap();
    let mut cfg = Config::active(Pattern::parse("S5-C5-S5-B5").unwrap());
    cfg.steady_ns = 1000 * S;
    let classifier =
        ScriptedClassifier::new(20, &opsel::mix::SIX_CLASSES, &[("B0-C1", 1.0)]).unwrap();
    let ctl = Controller::new(cfg, classifier, Stump::default()).unwrap();
    let mut d = OpsDriver::new(
        ctl,
        RttSource::UdpEcho("127.0.0.1:9".parse().unwrap()),
        DriverConfig::default(),
    )
    .unwrap();
    let mut sets = 0usize;
    let mut on = |e: &DriverEvent| sets += matches!(e, DriverEvent::CcaSet { .. }) as usize;
    d.start(&sock, 0, &mut on).unwrap();

    // Probe: 19 samples; the C5 and B5 bursts switch the live socket.
    let ((), n) = count(|| {
        for t in 1..20u64 {
            d.feed_sample(&sock, t * S, 80.0 + t as f64, &mut on)
                .unwrap();
        }
    });
    assert_eq!(n, 0, "probe path allocated");
    // The 20th sample decides cubic (allowed to allocate: not a hot path).
    d.feed_sample(&sock, 20 * S, 90.0, &mut on).unwrap();
    assert_eq!(d.controller().phase(), Phase::Steady);

    let ((), n) = count(|| {
        for t in 21..900u64 {
            d.feed_sample(&sock, t * S, 85.0, &mut on).unwrap();
        }
    });
    assert_eq!(n, 0, "steady path allocated");
    // initial cubic, bbr at the B5 burst, cubic on the decision
    assert_eq!(sets, 3);
    assert_eq!(opsel::sys::linux::get_cca(&sock).unwrap(), "cubic");
}
