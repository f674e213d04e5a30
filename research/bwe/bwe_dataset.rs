//! Export simulator traces and their FFT features for `opsel.train.bwe` (001 Ch 6).
//! `cargo run --release --example bwe_dataset -- DIR [STREAMS_PER_SET]`
//!
//! Writes CSV files (header row; f64 printed in shortest round-trip form, so Python
//! reads back the exact bits Rust computed):
//! - `mr_train.csv` / `mr_test.csv`: multi-rate N = 64, N_r = 4, range 50 %; target
//!   `y = B_g / R_avg` (the estimator returns `y · R_avg`).
//! - `sr32_train.csv` / `sr32_test.csv`: single-rate N = 32 at 5–9 Gbps; target
//!   `y = 1` if the rate exceeds B_g; one extra feature: the rate in Gbps.
//!
//! Training sets are "3sets" (001 §6.3.2): BCT with NIC1 rx-usecs ∈ {2, 120 (default),
//! 300} µs. Test sets are BCT at the default 120 µs and carry the raw gaps after the
//! features so the fixtures can re-check the Rust feature function.
//!
//! Environment:
//! - `BWE_FEATURES=fft-magnitude|fft-reim` picks the multi-rate feature kind (default
//!   magnitude; 001 §6.1 says only `x = FFT(g_s ‖ g_r)`, so both readings are allowed);
//! - `BWE_DATASET_GAPS=1` also writes the raw gaps into the training rows (for feature
//!   studies in Python; the shipped features are always the Rust ones).
//!
//! - `BWE_SETS=120` (comma-separated rx-usecs) restricts the multi-rate *training* rows to
//!   those coalescing settings (default `2,120,300`, the 3sets). A setting keeps the R_avg
//!   sweep it has in the 3sets, so its first rows are the 3sets rows of that setting;
//! - `BWE_MR_ONLY=1` skips the single-rate files (large multi-rate studies).

mod bwe_common;
use bwe_common::*;
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::sim::simulate;
use opsel::bwe::PStreamSpec;
use std::io::Write;

const TRAIN_SEED: u64 = 0x7A11;
const TEST_SEED: u64 = 0xE7A1;

fn header(nf: usize, n_gaps: usize) -> String {
    let mut h = String::from("y,r_avg_bps,avail_bw_bps,rx_usecs");
    for i in 0..nf {
        h += &format!(",f{i}");
    }
    for i in 0..n_gaps {
        h += &format!(",gs{i}");
    }
    for i in 0..n_gaps {
        h += &format!(",gr{i}");
    }
    h
}

fn row(
    out: &mut impl Write,
    y: f64,
    r: f64,
    bg: f64,
    rx: f64,
    x: &[f64],
    gaps: Option<(&[f64], &[f64])>,
) {
    let mut s = format!("{y},{r},{bg},{rx}");
    for v in x {
        s += &format!(",{v}");
    }
    if let Some((a, b)) = gaps {
        for v in a.iter().chain(b) {
            s += &format!(",{v}");
        }
    }
    writeln!(out, "{s}").unwrap();
}

#[allow(clippy::too_many_arguments)] // a study script: one call site, every knob named there
fn multi_rate(
    dir: &str,
    name: &str,
    seed: u64,
    salt: u64,
    sets: &[f64],
    count: u64,
    with_gaps: bool,
    three_sets_salt: bool,
) {
    let n = 64;
    let kind = mr_feature_kind();
    let nf = feature_len(kind, n);
    let mut f = std::io::BufWriter::new(std::fs::File::create(format!("{dir}/{name}")).unwrap());
    writeln!(f, "{}", header(nf, if with_gaps { n } else { 0 })).unwrap();
    let mut fw = FeatureWorkspace::new(n);
    let mut x = vec![0.0; nf];
    for (i, &rx) in sets.iter().enumerate() {
        let cfg = bct(seed ^ 0x77, rx);
        // Training: the R_avg sweep of a setting depends on its place in the 3sets (2, 120,
        // 300), not in `sets`, so a one-setting file repeats the 3sets rows of that
        // setting. Test: its place in `sets` (the test streams of the 3sets evaluation).
        let si = if three_sets_salt {
            [2.0, 120.0, 300.0]
                .iter()
                .position(|&v| v == rx)
                .unwrap_or(i)
        } else {
            i
        };
        for k in 0..count {
            let spec = mr_spec(r_avg(k, salt + si as u64));
            let t = simulate(&spec, &cfg, k).unwrap();
            if !t.complete() {
                continue;
            }
            features(&t.send_gap_ns, &t.recv_gap_ns, kind, &mut fw, &mut x).unwrap();
            let g = with_gaps.then_some((&t.send_gap_ns[..], &t.recv_gap_ns[..]));
            row(
                &mut f,
                t.avail_bw_bps / spec.r_avg_bps,
                spec.r_avg_bps,
                t.avail_bw_bps,
                rx,
                &x,
                g,
            );
        }
    }
}

/// Feature kind of the multi-rate sets (`BWE_FEATURES`, default magnitude).
fn mr_feature_kind() -> FeatureKind {
    match std::env::var("BWE_FEATURES") {
        Err(_) => FeatureKind::Magnitude,
        Ok(s) => FeatureKind::parse(&s).unwrap_or_else(|e| {
            eprintln!("BWE_FEATURES: {e}");
            std::process::exit(2)
        }),
    }
}

fn single_rate(dir: &str, name: &str, seed: u64, sets: &[f64], per_rate: u64, with_gaps: bool) {
    let n = 32;
    let nf = feature_len(FeatureKind::Magnitude, n) + 1;
    let mut f = std::io::BufWriter::new(std::fs::File::create(format!("{dir}/{name}")).unwrap());
    writeln!(f, "{}", header(nf, if with_gaps { n } else { 0 })).unwrap();
    let mut fw = FeatureWorkspace::new(n);
    let mut x = vec![0.0; nf];
    for &rx in sets {
        let cfg = bct(seed ^ 0x99 ^ n as u64, rx);
        for (ri, &rate) in single_rates().iter().enumerate() {
            let spec = PStreamSpec::single_rate(rate, n, 9038);
            for k in 0..per_rate {
                let t = simulate(&spec, &cfg, (ri as u64) << 32 | k).unwrap();
                if !t.complete() {
                    continue;
                }
                features(
                    &t.send_gap_ns,
                    &t.recv_gap_ns,
                    FeatureKind::Magnitude,
                    &mut fw,
                    &mut x[..nf - 1],
                )
                .unwrap();
                x[nf - 1] = rate / 1e9;
                let y = if rate > t.avail_bw_bps { 1.0 } else { 0.0 };
                let g = with_gaps.then_some((&t.send_gap_ns[..], &t.recv_gap_ns[..]));
                row(&mut f, y, rate, t.avail_bw_bps, rx, &x, g);
            }
        }
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/bwe".into());
    let count: u64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    std::fs::create_dir_all(&dir).unwrap();
    let three_sets = [2.0, 120.0, 300.0];
    let train_gaps = std::env::var("BWE_DATASET_GAPS").is_ok_and(|v| v == "1");
    let train_sets: Vec<f64> = match std::env::var("BWE_SETS") {
        Err(_) => three_sets.to_vec(),
        Ok(s) => s
            .split(',')
            .map(|v| {
                v.trim().parse::<f64>().unwrap_or_else(|_| {
                    eprintln!("BWE_SETS: {v:?} is not a number of µs (e.g. BWE_SETS=2,120,300)");
                    std::process::exit(2)
                })
            })
            .collect(),
    };
    multi_rate(
        &dir,
        "mr_train.csv",
        TRAIN_SEED,
        3,
        &train_sets,
        count,
        train_gaps,
        true,
    );
    multi_rate(
        &dir,
        "mr_test.csv",
        TEST_SEED,
        7,
        &[120.0],
        count.min(3000),
        true,
        false,
    );
    if std::env::var("BWE_MR_ONLY").is_ok_and(|v| v == "1") {
        eprintln!("wrote {dir}/mr_train.csv, mr_test.csv (BWE_MR_ONLY=1)");
        return;
    }
    single_rate(
        &dir,
        "sr32_train.csv",
        TRAIN_SEED,
        &three_sets,
        count / 9,
        false,
    );
    single_rate(&dir, "sr32_test.csv", TEST_SEED, &[120.0], 300, true);
    eprintln!("wrote {dir}/mr_train.csv, mr_test.csv, sr32_train.csv, sr32_test.csv");
}
