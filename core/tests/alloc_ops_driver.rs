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
        // No lead-in: the window starts at `start`.
        DriverConfig {
            lead_in: false,
            ..DriverConfig::default()
        },
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

/// With the DTW K-NN classifier the 19th sample of a window prepares the
/// decision (`Classifier::prepare`: 19 DTW rows per reference); that path,
/// like the rest of the probe, allocates nothing, and the prepared decision
/// switches the socket.
#[test]
fn knn_probe_path_with_preparation_does_not_allocate() {
    use opsel::knn::{KnnConfig, Model};
    use opsel::mix::SIX_CLASSES;
    use opsel::ops::KnnClassifier;
    use opsel::series::{synth, Normalization};

    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _peer = l.accept().unwrap();
    let (x, y) = synth::dataset(&SIX_CLASSES, 20, 20, 11).unwrap();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let model = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    // A reference of a BBR-free class, so the decision is cubic.
    let i = (0..model.len())
        .find(|&i| !model.class_mix(y[i] as usize).unwrap().bbr_present())
        .unwrap();
    let q: Vec<f64> = x[i * 20..(i + 1) * 20].iter().map(|v| v * 1.001).collect();
    let ctl = Controller::new(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        KnnClassifier::new(model).unwrap(),
        Stump::default(),
    )
    .unwrap();
    let mut d = OpsDriver::new(
        ctl,
        RttSource::UdpEcho("127.0.0.1:9".parse().unwrap()),
        // No lead-in: the window starts at `start`.
        DriverConfig {
            lead_in: false,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    let mut last = None;
    let mut on = |e: &DriverEvent| {
        if let DriverEvent::CcaSet { cca, .. } = e {
            last = Some(*cca)
        }
    };
    d.start(&sock, 0, &mut on).unwrap();
    let ((), n) = count(|| {
        for (t, &rtt) in q[..19].iter().enumerate() {
            d.feed_sample(&sock, (t as u64 + 1) * S, rtt, &mut on)
                .unwrap();
        }
    });
    assert_eq!(n, 0, "probe path with preparation allocated");
    d.feed_sample(&sock, 20 * S, q[19], &mut on).unwrap();
    assert_eq!(d.controller().phase(), Phase::Steady);
    assert_eq!(last, Some(opsel::probe::CcaName::CUBIC));
    assert_eq!(opsel::sys::linux::get_cca(&sock).unwrap(), "cubic");
}
