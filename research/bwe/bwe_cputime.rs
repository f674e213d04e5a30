//! Per-call *thread CPU time* of the hot paths (CLOCK_THREAD_CPUTIME_ID), a
//! load-robust complement to the criterion wall-clock benches on a shared machine.
//! `cargo run --release --example bwe_cputime -- [MODEL_JSON]`
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::sim::{simulate, SimConfig};
use opsel::bwe::{
    decide_single_rate, estimate_multi_rate, AbestConfig, BassConfig, EstimatorWorkspace,
    PStreamSpec,
};
use opsel::trees::Ensemble;
use std::hint::black_box;

fn cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn measure(name: &str, iters: u32, mut f: impl FnMut()) {
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t0 = cpu_ns();
        for _ in 0..iters {
            f();
        }
        best = best.min((cpu_ns() - t0) as f64 / iters as f64);
    }
    println!("{name:<40} {best:>9.0} ns CPU per call (best of 7 x {iters})");
}

fn main() {
    let spec = PStreamSpec::thesis_default(7e9);
    let mut traces = Vec::new();
    for k in 0..64 {
        traces.push(simulate(&spec, &SimConfig::thesis_bct(1), k).unwrap());
    }
    let mut ws = EstimatorWorkspace::new(64);
    let (bc, ac) = (BassConfig::thesis(), AbestConfig::default());
    let mut i = 0;
    measure("BASS multi-pass + ABest, N=64", 20_000, || {
        i = (i + 1) % traces.len();
        let t = &traces[i];
        black_box(
            estimate_multi_rate(&t.send_gap_ns, &t.recv_gap_ns, &spec, &bc, &ac, &mut ws).unwrap(),
        );
    });
    measure("BASS single-pass decision, N=64", 20_000, || {
        i = (i + 1) % traces.len();
        let t = &traces[i];
        black_box(decide_single_rate(&t.send_gap_ns, &t.recv_gap_ns, &bc, 0.0, &mut ws).unwrap());
    });
    let mut fw = FeatureWorkspace::new(64);
    let mut x = vec![0.0; feature_len(FeatureKind::Magnitude, 64)];
    measure("FFT-magnitude features, N=64", 20_000, || {
        i = (i + 1) % traces.len();
        let t = &traces[i];
        features(
            &t.send_gap_ns,
            &t.recv_gap_ns,
            FeatureKind::Magnitude,
            &mut fw,
            &mut x,
        )
        .unwrap();
        black_box(&x);
    });
    if let Some(p) = std::env::args().nth(1) {
        let m = Ensemble::load(std::path::Path::new(&p)).unwrap();
        // The shipped model may use `fft-reim` features (129 of them).
        let kind = if m.n_features() == feature_len(FeatureKind::ReIm, 64) {
            FeatureKind::ReIm
        } else {
            FeatureKind::Magnitude
        };
        let xs: Vec<Vec<f64>> = traces
            .iter()
            .map(|t| {
                let mut x = vec![0.0; feature_len(kind, 64)];
                features(&t.send_gap_ns, &t.recv_gap_ns, kind, &mut fw, &mut x).unwrap();
                x
            })
            .collect();
        measure(
            &format!("GBT predict ({} trees)", m.n_trees()),
            5_000,
            || {
                i = (i + 1) % xs.len();
                black_box(m.predict(&xs[i]).unwrap());
            },
        );
    }
}
