//! Why multi-pass BASS misses the Fig 5.8 target (docs/results/bwe.md §1, "Why"):
//! the same estimator on the same p-stream shape under conditions that switch the
//! noise sources off one at a time, and with each AVG_WINDOW alignment.
//! `cargo run --release -p opsel --example bwe_bass_study -- [STREAMS]`
//!
//! For every scored stream (probing range covers B_g, no loss) it reports the thesis
//! summary plus where the excursion estimate fell relative to the *correct rate*
//! (the highest probing rate ≤ B_g: the best any excursion estimator can answer;
//! with N_r = 5 and range 30 % it is always within 6.8 % of B_g, so a perfect
//! detector would score 100 % within 10 %).

mod bwe_common;
use bwe_common::*;
use opsel::bwe::sim::{simulate, Coalescing, CrossKind, CrossTraffic, SendNoise, SimConfig};
use opsel::bwe::{
    estimate_multi_rate, AbestConfig, BassConfig, EstimatorWorkspace, PStreamSpec, WindowAlign,
};

fn run(label: &str, cfg: SimConfig, spec_of: &dyn Fn(f64) -> PStreamSpec, w: usize, count: u64) {
    for align in [WindowAlign::Trailing, WindowAlign::Centred] {
        let bass = BassConfig {
            avg_window: w,
            window_align: align,
            ..BassConfig::thesis()
        };
        let (mut err, mut steps, mut drift) = (vec![], vec![], vec![]);
        for k in 0..count {
            let spec = spec_of(r_avg(k, 1));
            let t = simulate(&spec, &cfg, k).unwrap();
            let lo = spec.rate_bps(0).unwrap();
            let hi = spec.rate_bps(spec.n_rates - 1).unwrap();
            if !t.complete() || t.avail_bw_bps < lo || t.avail_bw_bps > hi {
                continue;
            }
            let mut ws = EstimatorWorkspace::new(spec.len());
            let a = estimate_multi_rate(
                &t.send_gap_ns,
                &t.recv_gap_ns,
                &spec,
                &bass,
                &AbestConfig::default(),
                &mut ws,
            )
            .unwrap();
            err.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
            let (h1, h2) = t.avail_bw_halves_bps;
            drift.push((h2 - h1).abs() / t.avail_bw_bps);
            let idx = |r: f64| ((r / lo).ln() / spec.spread.ln()).round() as i64;
            let correct = (0..spec.n_rates)
                .rev()
                .find(|&k| spec.rate_bps(k).unwrap() <= t.avail_bw_bps)
                .unwrap_or(0) as i64;
            steps.push(idx(a.abest_bps) - correct);
        }
        let n = steps.len().max(1) as f64;
        let share =
            |f: &dyn Fn(i64) -> bool| 100.0 * steps.iter().filter(|&&s| f(s)).count() as f64 / n;
        let moved = 100.0 * drift.iter().filter(|&&d| d > 0.10).count() as f64 / n;
        println!(
            "{label:<44} {:<9} {}  | correct rate {:.1}%, 1 step low {:.1}%, ≥2 low {:.1}%, high {:.1}% | B_g halves differ >10%: {moved:.1}%",
            format!("{align:?}"),
            summary(&err),
            share(&|s| s == 0),
            share(&|s| s == -1),
            share(&|s| s <= -2),
            share(&|s| s > 0)
        );
    }
}

fn main() {
    let count: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let seed = 0xE7A1 ^ 0x51;
    let fig58 = |r: f64| PStreamSpec::with_range(r, 5, 64, 0.3, 9038).unwrap();
    let base = bct(seed, 120.0);
    let cbr = CrossTraffic::table_3_1(CrossKind::Cbr);
    println!(
        "ground truth: {:?} (BWE_GROUND_TRUTH=arrivals|departures)\n",
        ground_truth()
    );
    println!("## Fig 5.8 shape (N_r=5, N_p=64, range 30%, AVG_WINDOW=64), {count} streams per row");
    run(
        "A BCT, NIC1 120 µs, Dummy sender (default)",
        base,
        &fig58,
        64,
        count,
    );
    run(
        "B BCT, no coalescing",
        SimConfig {
            coalescing: Coalescing::None,
            ..base
        },
        &fig58,
        64,
        count,
    );
    run(
        "C BCT, no coalescing, perfect sender",
        SimConfig {
            coalescing: Coalescing::None,
            sender: SendNoise::None,
            ..base
        },
        &fig58,
        64,
        count,
    );
    run(
        "D CBR (Table 3.1), NIC1 120 µs",
        SimConfig { cross: cbr, ..base },
        &fig58,
        64,
        count,
    );
    run(
        "E CBR, no coalescing, perfect sender",
        SimConfig {
            cross: cbr,
            coalescing: Coalescing::None,
            sender: SendNoise::None,
            ..base
        },
        &fig58,
        64,
        count,
    );
    println!();
    println!("## Adopted stream (N_r=4, N_p=16, range 50%, AVG_WINDOW=16)");
    run(
        "A BCT, NIC1 120 µs, Dummy sender (default)",
        base,
        &mr_spec,
        16,
        count,
    );
    run(
        "E CBR, no coalescing, perfect sender",
        SimConfig {
            cross: cbr,
            coalescing: Coalescing::None,
            sender: SendNoise::None,
            ..base
        },
        &mr_spec,
        16,
        count,
    );
}
