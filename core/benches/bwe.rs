//! Per-p-stream cost of the bandwidth estimators (target: BASS + ABest at N = 64 < 2 µs).
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::pathload::{imr_avg, imr_wavelet, ImrWorkspace};
use opsel::bwe::sim::{simulate, SimConfig};
use opsel::bwe::{
    decide_single_rate, estimate_multi_rate, AbestConfig, BassConfig, EstimatorWorkspace,
    PStreamSpec,
};

fn bench(c: &mut Criterion) {
    // A realistic trace: 001's BCT + NIC1 default coalescing condition.
    let spec = PStreamSpec::thesis_default(7e9);
    let t = simulate(&spec, &SimConfig::thesis_bct(1), 0).unwrap();
    let mut ws = EstimatorWorkspace::new(64);
    let (bc, ac) = (BassConfig::thesis(), AbestConfig::default());
    let mut g = c.benchmark_group("bwe");
    g.bench_function("bass_multipass_abest_n64", |b| {
        b.iter(|| {
            estimate_multi_rate(
                black_box(&t.send_gap_ns),
                black_box(&t.recv_gap_ns),
                &spec,
                &bc,
                &ac,
                &mut ws,
            )
            .unwrap()
        })
    });
    g.bench_function("bass_single_rate_decision_n64", |b| {
        b.iter(|| {
            decide_single_rate(
                black_box(&t.send_gap_ns),
                black_box(&t.recv_gap_ns),
                &bc,
                0.0,
                &mut ws,
            )
            .unwrap()
        })
    });
    let mut fw = FeatureWorkspace::new(64);
    let mut x = vec![0.0; feature_len(FeatureKind::Magnitude, 64)];
    g.bench_function("fft_features_n64", |b| {
        b.iter(|| {
            features(
                black_box(&t.send_gap_ns),
                black_box(&t.recv_gap_ns),
                FeatureKind::Magnitude,
                &mut fw,
                &mut x,
            )
            .unwrap()
        })
    });
    let s320 = PStreamSpec::single_rate(7e9, 320, 9038);
    let t3 = simulate(&s320, &SimConfig::thesis_bct(1), 0).unwrap();
    let mut iw = ImrWorkspace::new(320);
    g.bench_function("imr_avg_n320", |b| {
        b.iter(|| imr_avg(black_box(&t3.send_gap_ns), &t3.recv_gap_ns, &mut iw).unwrap())
    });
    g.bench_function("imr_wavelet_n320", |b| {
        b.iter(|| imr_wavelet(black_box(&t3.send_gap_ns), &t3.recv_gap_ns, 3, &mut iw).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
