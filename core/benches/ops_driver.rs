//! Decision latency of `sys::linux::OpsDriver` (issue #7 target < 100 µs; the
//! thesis's Python classifier took about 1 s, 000 §5.5 / A16): from the last
//! RTT sample of a probe window to the return of `setsockopt(TCP_CONGESTION)`
//! on a real TCP socket, through the driver's own sample path
//! (`OpsDriver::feed_sample`: controller → DTW K-NN 1-NN → stump → setsockopt
//! with read-back).
//!
//! The model is a DTW K-NN of the thesis's size (180 windows per class × 6
//! classes, w = 20, band 10) on active S5-C5-S5-B5 signatures from the
//! simulator; `OPSEL_BENCH_MODEL=path` benches a model file instead (the
//! query is then one of its non-BBR references plus 1% noise).
//!
//! Run: `cargo bench -p opsel --bench ops_driver`

use std::net::{TcpListener, TcpStream};

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use opsel::knn::{KnnConfig, Model};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::ops::sim::{FgActivity, RttSynth};
use opsel::ops::{Config, Controller, KnnClassifier, Stump};
use opsel::probe::{CcaName, Pattern, SegmentKind};
use opsel::sys::linux::ops_driver::{DriverConfig, DriverEvent, OpsDriver, RttSource};

const S: u64 = 1_000_000_000;

fn active_window(p: &Pattern, mix: &Mix, synth: &mut RttSynth) -> Vec<f64> {
    (0..20)
        .map(|k| {
            let i = p.segment_of_sample(k, S).unwrap();
            let fg = match p.segments()[i].kind {
                SegmentKind::Silence => FgActivity::Silent,
                SegmentKind::Burst(c) => FgActivity::Sending(c),
            };
            synth.sample(mix, fg)
        })
        .collect()
}

/// (model, a query window the model classifies as a BBR-free mix).
fn model_and_query() -> (Model, Vec<f64>) {
    if let Ok(path) = std::env::var("OPSEL_BENCH_MODEL") {
        let m = opsel::model::load(&path).unwrap().model;
        let w = m.window();
        let refs = m.raw_references();
        let i = (0..m.len())
            .find(|&i| !m.class_mix(m.labels()[i] as usize).unwrap().bbr_present())
            .expect("model has a non-BBR reference");
        let q: Vec<f64> = refs[i * w..(i + 1) * w]
            .iter()
            .enumerate()
            .map(|(k, v)| v * (1.0 + 0.01 * ((k % 3) as f64 - 1.0)))
            .collect();
        return (m, q);
    }
    let p = Pattern::parse("S5-C5-S5-B5").unwrap();
    let mut synth = RttSynth::new(42);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (c, label) in SIX_CLASSES.iter().enumerate() {
        let mix = Mix::parse(label).unwrap();
        for _ in 0..180 {
            x.extend(active_window(&p, &mix, &mut synth));
            y.push(c as u32);
        }
    }
    let m = Model::fit(
        &x,
        20,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        KnnConfig::default(),
    )
    .unwrap();
    let q = active_window(&p, &Mix::parse("B0-C1").unwrap(), &mut RttSynth::new(7));
    (m, q)
}

type Driver = OpsDriver<KnnClassifier, Stump>;

/// A driver whose window holds 19 samples; the socket is on bbr (the last
/// burst of S5-C5-S5-B5), so the 20th sample must switch it to cubic.
fn armed(model: &Model, q: &[f64], sock: &TcpStream) -> Driver {
    let ctl = Controller::new(
        Config::active(Pattern::parse("S5-C5-S5-B5").unwrap()),
        KnnClassifier::new(model.clone()).unwrap(),
        Stump::default(),
    )
    .unwrap();
    let mut d = OpsDriver::new(
        ctl,
        RttSource::UdpEcho("127.0.0.1:9".parse().unwrap()),
        DriverConfig::default(),
    )
    .unwrap();
    d.start(sock, 0, &mut |_| {}).unwrap();
    for (k, &rtt) in q[..19].iter().enumerate() {
        d.feed_sample(sock, (k as u64 + 1) * S, rtt, &mut |_| {})
            .unwrap();
    }
    d
}

fn bench(c: &mut Criterion) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _peer = l.accept().unwrap();
    let (model, q) = model_and_query();

    // Check once that the measured step really ends in setsockopt(cubic).
    let mut d = armed(&model, &q, &sock);
    let mut switched = None;
    d.feed_sample(&sock, 20 * S, q[19], &mut |e| {
        if let DriverEvent::CcaSet { cca, .. } = e {
            switched = Some(*cca)
        }
    })
    .unwrap();
    assert_eq!(
        switched,
        Some(CcaName::CUBIC),
        "the query must decide cubic"
    );

    let mut g = c.benchmark_group("ops_driver");
    g.bench_function(
        format!("last_sample_to_setsockopt_knn_{}refs_w20", model.len()),
        |b| {
            b.iter_batched(
                || armed(&model, &q, &sock),
                |mut d| {
                    d.feed_sample(&sock, 20 * S, black_box(q[19]), &mut |e| {
                        black_box(e);
                    })
                    .unwrap();
                    d
                },
                BatchSize::SmallInput,
            )
        },
    );
    // The kernel part alone: setsockopt(TCP_CONGESTION) + read-back.
    let mut flip = false;
    g.bench_function("set_cca_with_readback", |b| {
        b.iter(|| {
            flip = !flip;
            opsel::sys::linux::set_cca(&sock, if flip { "cubic" } else { "bbr" }).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
