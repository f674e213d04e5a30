//! Where does 001's AVG_WINDOW sliding average sit, and what does each
//! reading do to multi-pass BASS on the Fig 5.8 condition (docs/results/bwe.md §1)?
//! `cargo run --release -p opsel --example bwe_window_study -- [STREAMS]`
//!
//! 001 §5.3.3: "Finally, a sliding window that averages across the smoothed
//! observations is applied, with a window of size AVG_WINDOW, to further smooth the
//! denoised gaps." It names the width only. 001 §8.5 (variant V4) describes the same
//! window as applied "to the raw g_r" when BASS is switched off. The readings compared
//! on the same traces (every other stage identical: multi-pass BASS with the thesis
//! thresholds, then Alg. 1 corrected, ε = 100 ns, L = 4):
//! - `both/trailing` (default): `x'[i] = mean(x[i−w+1..=i])` on g_s and g_r;
//! - `both/centred`: the window centred on i;
//! - `g_r/trailing`: only g_r averaged (the V4 wording), g_s as left by BASS;
//! - `none`: AVG_WINDOW = 1.

mod bwe_common;
use bwe_common::*;
use opsel::bwe::bass::{self, BassWorkspace};
use opsel::bwe::sim::{simulate, Coalescing, CrossKind, CrossTraffic, SendNoise, SimConfig};
use opsel::bwe::{abest, AbestConfig, BassConfig, PStreamSpec};

#[derive(Clone, Copy, Debug)]
enum Reading {
    BothTrailing,
    BothCentred,
    RecvTrailing,
    None,
}

fn estimate(
    gs0: &[f64],
    gr0: &[f64],
    spec: &PStreamSpec,
    w: usize,
    reading: Reading,
    ws: &mut BassWorkspace,
) -> f64 {
    let (mut gs, mut gr) = (gs0.to_vec(), gr0.to_vec());
    let cfg = BassConfig {
        avg_window: 1,
        ..BassConfig::thesis()
    };
    bass::multi_pass(&mut gs, &mut gr, &cfg, ws).unwrap();
    match reading {
        Reading::BothTrailing => bass::sliding_average(&mut gs, &mut gr, w, ws).unwrap(),
        Reading::BothCentred => bass::centred_average(&mut gs, &mut gr, w, ws).unwrap(),
        Reading::RecvTrailing => {
            let keep = gs.clone();
            bass::sliding_average(&mut gs, &mut gr, w, ws).unwrap();
            gs.copy_from_slice(&keep);
        }
        Reading::None => {}
    }
    abest(&gs, &gr, spec, &AbestConfig::default())
        .unwrap()
        .abest_bps
}

fn run(label: &str, cfg: SimConfig, spec_of: &dyn Fn(f64) -> PStreamSpec, w: usize, count: u64) {
    let readings = [
        Reading::BothTrailing,
        Reading::BothCentred,
        Reading::RecvTrailing,
        Reading::None,
    ];
    let mut err = vec![vec![]; readings.len()];
    let mut steps = vec![vec![]; readings.len()];
    let mut steady = vec![];
    for k in 0..count {
        let spec = spec_of(r_avg(k, 1));
        let t = simulate(&spec, &cfg, k).unwrap();
        let lo = spec.rate_bps(0).unwrap();
        let hi = spec.rate_bps(spec.n_rates - 1).unwrap();
        if !t.complete() || t.avail_bw_bps < lo || t.avail_bw_bps > hi {
            continue;
        }
        let mut ws = BassWorkspace::new(spec.len());
        let correct = (0..spec.n_rates)
            .rev()
            .find(|&k| spec.rate_bps(k).unwrap() <= t.avail_bw_bps)
            .unwrap_or(0) as i64;
        let (h1, h2) = t.avail_bw_halves_bps;
        steady.push((h2 - h1).abs() / t.avail_bw_bps <= 0.10);
        for (j, &r) in readings.iter().enumerate() {
            let b = estimate(&t.send_gap_ns, &t.recv_gap_ns, &spec, w, r, &mut ws);
            err[j].push((b - t.avail_bw_bps) / t.avail_bw_bps);
            steps[j].push(((b / lo).ln() / spec.spread.ln()).round() as i64 - correct);
        }
    }
    for (j, r) in readings.iter().enumerate() {
        let n = steps[j].len().max(1) as f64;
        let share =
            |f: &dyn Fn(i64) -> bool| 100.0 * steps[j].iter().filter(|&&s| f(s)).count() as f64 / n;
        let e = &err[j];
        let below = 100.0 * e.iter().filter(|&&x| x < -0.10).count() as f64 / n;
        let above = 100.0 * e.iter().filter(|&&x| x > 0.10).count() as f64 / n;
        let st: Vec<f64> = e
            .iter()
            .zip(&steady)
            .filter(|(_, &s)| s)
            .map(|(x, _)| *x)
            .collect();
        let st_w =
            100.0 * st.iter().filter(|x| x.abs() <= 0.10).count() as f64 / st.len().max(1) as f64;
        println!(
            "{label:<40} {:<13} {}  | < −10 % {below:.1}%, > +10 % {above:.1}% | steady B_g (halves ≤ 10 %, n={}) within10% {st_w:.1}% | correct {:.1}%, 1 low {:.1}%, ≥2 low {:.1}%, high {:.1}%",
            format!("{r:?}"),
            summary(e),
            st.len(),
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
    let clean_cbr = SimConfig {
        cross: cbr,
        coalescing: Coalescing::None,
        sender: SendNoise::None,
        ..base
    };
    println!("ground truth: {:?}\n", ground_truth());
    println!("## Fig 5.8 shape (N_r=5, N_p=64, range 30%, AVG_WINDOW=64), {count} streams");
    run(
        "A BCT, NIC1 120 µs, Dummy (Fig 5.8)",
        base,
        &fig58,
        64,
        count,
    );
    run(
        "D CBR, NIC1 120 µs, Dummy",
        SimConfig { cross: cbr, ..base },
        &fig58,
        64,
        count,
    );
    run("E CBR, clean", clean_cbr, &fig58, 64, count);
    println!("\n## Adopted stream (N_r=4, N_p=16, range 50%, AVG_WINDOW=16)");
    run("A BCT, NIC1 120 µs, Dummy", base, &mr_spec, 16, count);
    run("E CBR, clean", clean_cbr, &mr_spec, 16, count);
}
