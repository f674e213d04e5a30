//! Evidence for docs/results/bwe.md: runs 001's simulated conditions and prints the
//! thesis-style summaries. `cargo run --release --example bwe_eval -- [DIR]` where DIR
//! holds the trained models (`mr_gbt.json`, `sr32_gbt.json`) from `make bwe-train`.
//! Without models the ML rows are skipped.
//!
//! Environment: `BWE_EVAL_ONLY=ml` runs only the ML multi-rate section;
//! `BWE_ML_MODEL=FILE` (in DIR, default `mr_gbt.json`) picks the regressor and
//! `BWE_FEATURES=fft-magnitude|fft-reim` its feature kind (as for `bwe_dataset`).

mod bwe_common;
use bwe_common::*;
use opsel::bwe::bass::{self, BassWorkspace};
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::pathload::{imr_avg, imr_wavelet, pathload, ImrWorkspace, Trend};
use opsel::bwe::sim::{cross_traffic_per_ms, simulate, CrossKind, CrossTraffic};
use opsel::bwe::{
    abest, decide_single_rate, estimate_multi_rate, AbestConfig, BassConfig, EstimatorWorkspace,
    PStreamSpec,
};
use opsel::trees::Ensemble;

const TEST_SEED: u64 = 0xE7A1;

fn covered(spec: &PStreamSpec, bg: f64) -> bool {
    bg >= spec.rate_bps(0).unwrap() && bg <= spec.rate_bps(spec.n_rates - 1).unwrap()
}

fn multi_rate_bass(
    label: &str,
    spec_of: impl Fn(f64) -> PStreamSpec,
    count: u64,
    rx_usecs: f64,
    bass_cfg: BassConfig,
) {
    let cfg = bct(TEST_SEED ^ 0x51, rx_usecs);
    multi_rate_bass_cfg(label, spec_of, count, cfg, rx_usecs, bass_cfg)
}

fn multi_rate_bass_cfg(
    label: &str,
    spec_of: impl Fn(f64) -> PStreamSpec,
    count: u64,
    cfg: opsel::bwe::sim::SimConfig,
    rx_usecs: f64,
    bass_cfg: BassConfig,
) {
    let (mut e_multi, mut e_single, mut e_raw, mut e_tail) = (vec![], vec![], vec![], vec![]);
    let keep_tail = BassConfig {
        tail: opsel::bwe::TailSegment::Keep,
        ..bass_cfg
    };
    let mut skipped = 0;
    for k in 0..count {
        let spec = spec_of(r_avg(k, 1));
        let t = simulate(&spec, &cfg, k).unwrap();
        if !t.complete() || !covered(&spec, t.avail_bw_bps) {
            skipped += 1;
            continue;
        }
        let n = spec.len();
        let mut ws = EstimatorWorkspace::new(n);
        let a = estimate_multi_rate(
            &t.send_gap_ns,
            &t.recv_gap_ns,
            &spec,
            &bass_cfg,
            &AbestConfig::default(),
            &mut ws,
        )
        .unwrap();
        e_multi.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
        let a = estimate_multi_rate(
            &t.send_gap_ns,
            &t.recv_gap_ns,
            &spec,
            &keep_tail,
            &AbestConfig::default(),
            &mut ws,
        )
        .unwrap();
        e_tail.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
        let (mut gs, mut gr) = (t.send_gap_ns.clone(), t.recv_gap_ns.clone());
        let mut bw = BassWorkspace::new(n);
        bass::single_pass(&mut gs, &mut gr, &bass_cfg, &mut bw).unwrap();
        let a = abest(&gs, &gr, &spec, &AbestConfig::default()).unwrap();
        e_single.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
        let a = abest(
            &t.send_gap_ns,
            &t.recv_gap_ns,
            &spec,
            &AbestConfig::default(),
        )
        .unwrap();
        e_raw.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
    }
    println!("## {label} (rx-usecs {rx_usecs} µs; {skipped} of {count} streams not covering B_g or lossy)");
    println!("multi-pass BASS + AVG_WINDOW : {}", summary(&e_multi));
    println!("multi-pass BASS, tail kept raw: {}", summary(&e_tail));
    println!("single-pass BASS             : {}", summary(&e_single));
    println!("no denoising                 : {}", summary(&e_raw));
    println!();
}

fn load(dir: &str, name: &str) -> Option<Ensemble> {
    let p = format!("{dir}/{name}");
    let s = std::fs::read_to_string(&p).ok()?;
    match Ensemble::from_json(&s) {
        Ok(m) => Some(m),
        Err(e) => {
            eprintln!("cannot load {p}: {e}");
            None
        }
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/bwe".into());
    let scale: u64 = std::env::var("BWE_EVAL_STREAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);

    println!(
        "ground truth: {:?} (BWE_GROUND_TRUTH=arrivals|departures)\n",
        ground_truth()
    );
    let only_ml = std::env::var("BWE_EVAL_ONLY").is_ok_and(|v| v == "ml");
    let ml_model = std::env::var("BWE_ML_MODEL").unwrap_or_else(|_| "mr_gbt.json".into());
    let kind = match std::env::var("BWE_FEATURES") {
        Err(_) => FeatureKind::Magnitude,
        Ok(s) => FeatureKind::parse(&s).unwrap_or_else(|e| {
            eprintln!("BWE_FEATURES: {e}");
            std::process::exit(2)
        }),
    };
    if !only_ml {
        calibration_and_bass(scale);
    }
    ml_multi_rate(&dir, &ml_model, kind, scale);
    if !only_ml {
        single_rate_and_imr(&dir, scale);
    }
}

fn calibration_and_bass(scale: u64) {
    // Simulator calibration against Table 3.1 (per-ms cross-traffic throughput).
    println!("## Cross-traffic calibration (20 s per type, per-ms throughput)");
    println!(
        "| type | mean Gbps (Table 3.1) | 5–95 % Gbps (Table 3.1) | burstiness Gbps (Table 3.1) |"
    );
    println!("|---|---|---|---|");
    for (kind, m, lo, hi) in [
        (CrossKind::Bct, 2.51, 1.15, 3.94),
        (CrossKind::Sct, 2.49, 1.78, 3.31),
        (CrossKind::Cbr, 2.47, 2.21, 2.72),
        (CrossKind::Unc1, 3.10, 2.23, 4.05),
        (CrossKind::Unc2, 2.75, 1.84, 3.77),
        (CrossKind::Unc3, 3.28, 2.31, 4.29),
    ] {
        let mut v = cross_traffic_per_ms(&CrossTraffic::table_3_1(kind), 20_000, 11);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        println!(
            "| {kind:?} | {:.2} ({m}) | {:.2}–{:.2} ({lo}–{hi}) | {:.2} ({:.2}) |",
            mean / 1e9,
            q(0.05) / 1e9,
            q(0.95) / 1e9,
            (q(0.95) - q(0.05)) / 1e9,
            hi - lo
        );
    }
    println!();

    // 001 Fig 5.8: N_r = 5, N_p = 64, range 30 %, BCT.
    multi_rate_bass(
        "Fig 5.8 condition: N_r=5, N_p=64, range 30%, BCT, AVG_WINDOW=64",
        |r| PStreamSpec::with_range(r, 5, 64, 0.3, 9038).unwrap(),
        scale,
        120.0,
        BassConfig {
            avg_window: 64,
            ..BassConfig::thesis()
        },
    );
    multi_rate_bass(
        "Adopted Rapid stream: N_r=4, N_p=16, range 50%, BCT, AVG_WINDOW=16",
        mr_spec,
        scale,
        120.0,
        BassConfig::thesis(),
    );

    // Fig 5.14: delayed ACKs (one per two packets) normalised with Alg. 6 (corrected).
    multi_rate_bass_cfg(
        "Adopted stream with delayed ACKs, Alg. 6 corrected normalisation (same streams as above)",
        mr_spec,
        scale,
        opsel::bwe::sim::SimConfig {
            delayed_ack: true,
            ..bct(TEST_SEED ^ 0x51, 120.0)
        },
        120.0,
        BassConfig::thesis(),
    );
}

fn ml_multi_rate(dir: &str, name: &str, kind: FeatureKind, scale: u64) {
    // ML multi-rate (Fig 6.5): N = 64, N_r = 4, range 50 %.
    if let Some(model) = load(dir, name) {
        println!("ML model: {dir}/{name}, features {}\n", kind.name());
        for rx in [120.0, 2.0, 300.0] {
            let cfg = bct(TEST_SEED ^ 0x77, rx);
            let mut fw = FeatureWorkspace::new(64);
            let mut x = vec![0.0; feature_len(kind, 64)];
            let (mut e_ml, mut e_ml_cov, mut e_bass) = (vec![], vec![], vec![]);
            let mut ws = EstimatorWorkspace::new(64);
            for k in 0..scale {
                let spec = mr_spec(r_avg(k, 7));
                let t = simulate(&spec, &cfg, k).unwrap();
                if !t.complete() {
                    continue;
                }
                features(&t.send_gap_ns, &t.recv_gap_ns, kind, &mut fw, &mut x).unwrap();
                let y = model.predict(&x).unwrap() * spec.r_avg_bps;
                let e = (y - t.avail_bw_bps) / t.avail_bw_bps;
                e_ml.push(e);
                if covered(&spec, t.avail_bw_bps) {
                    e_ml_cov.push(e);
                    let a = estimate_multi_rate(
                        &t.send_gap_ns,
                        &t.recv_gap_ns,
                        &spec,
                        &BassConfig::thesis(),
                        &AbestConfig::default(),
                        &mut ws,
                    )
                    .unwrap();
                    e_bass.push((a.abest_bps - t.avail_bw_bps) / t.avail_bw_bps);
                }
            }
            println!(
                "## ML multi-rate (GBT, {}), N=64 N_r=4 range 50%, BCT, rx-usecs {rx} µs",
                kind.name()
            );
            println!("GBT, all test streams        : {}", summary(&e_ml));
            println!("GBT, streams covering B_g    : {}", summary(&e_ml_cov));
            println!("multi-pass BASS, same streams: {}", summary(&e_bass));
            println!();
        }
    } else {
        println!("(no {dir}/{name}: ML multi-rate rows skipped; run `make bwe-train`)\n");
    }
}

fn single_rate_and_imr(dir: &str, scale: u64) {
    // Single-rate decision error (001 §5.3.2 BASS, Fig 6.4 ML at N = 32).
    let sr_model = load(dir, "sr32_gbt.json");
    for n in [32usize, 64] {
        println!("## Single-rate decision error, N={n}, BCT, NIC1 default (per probing rate)");
        println!("| rate Gbps | streams | BASS error % (thesis rule) | BASS error % (2 % tolerance) | GBT error % |");
        println!("|---|---|---|---|---|");
        let cfg = bct(TEST_SEED ^ 0x99 ^ n as u64, 120.0);
        let mut ws = EstimatorWorkspace::new(n);
        let mut fw = FeatureWorkspace::new(n);
        let mut x = vec![0.0; feature_len(FeatureKind::Magnitude, n)];
        let per_rate = scale / 6;
        for (ri, &rate) in single_rates().iter().enumerate() {
            let spec = PStreamSpec::single_rate(rate, n, 9038);
            let (mut wrong_b, mut wrong_t, mut wrong_m, mut tot) = (0, 0, 0, 0);
            for k in 0..per_rate {
                let t = simulate(&spec, &cfg, (ri as u64) << 32 | k).unwrap();
                if !t.complete() {
                    continue;
                }
                let truth = rate > t.avail_bw_bps;
                tot += 1;
                if decide_single_rate(
                    &t.send_gap_ns,
                    &t.recv_gap_ns,
                    &BassConfig::thesis(),
                    0.0,
                    &mut ws,
                )
                .unwrap()
                    != truth
                {
                    wrong_b += 1;
                }
                if decide_single_rate(
                    &t.send_gap_ns,
                    &t.recv_gap_ns,
                    &BassConfig::thesis(),
                    0.02,
                    &mut ws,
                )
                .unwrap()
                    != truth
                {
                    wrong_t += 1;
                }
                if let (Some(m), 32) = (&sr_model, n) {
                    features(
                        &t.send_gap_ns,
                        &t.recv_gap_ns,
                        FeatureKind::Magnitude,
                        &mut fw,
                        &mut x,
                    )
                    .unwrap();
                    let mut xr = x.clone();
                    xr.push(rate / 1e9);
                    if (m.predict(&xr).unwrap() > 0.5) != truth {
                        wrong_m += 1;
                    }
                }
            }
            let ml = if sr_model.is_some() && n == 32 {
                format!("{:.1}", 100.0 * wrong_m as f64 / tot as f64)
            } else {
                "–".into()
            };
            println!(
                "| {:.1} | {tot} | {:.1} | {:.1} | {ml} |",
                rate / 1e9,
                100.0 * wrong_b as f64 / tot as f64,
                100.0 * wrong_t as f64 / tot as f64
            );
        }
        println!();
    }

    // IMR baselines at N = 320 (001 §5.2, Fig 5.3).
    println!("## Pathload / IMR-avg / IMR-wavelet at N=320, BCT, NIC1 default (per probing rate)");
    println!("| rate Gbps | streams | Pathload ambiguous % | Pathload error when decided % | IMR-avg ambiguous % | IMR-avg error when decided % | IMR-wavelet ambiguous % | IMR-wavelet error when decided % |");
    println!("|---|---|---|---|---|---|---|---|");
    let cfg = bct(TEST_SEED ^ 0x320, 120.0);
    let mut iw = ImrWorkspace::new(320);
    let per_rate = scale / 10;
    for (ri, &rate) in single_rates().iter().enumerate() {
        let spec = PStreamSpec::single_rate(rate, 320, 9038);
        let mut c = [[0usize; 3]; 3]; // [method][ambiguous, decided, wrong]
        let mut tot = 0;
        for k in 0..per_rate {
            let t = simulate(&spec, &cfg, (ri as u64) << 32 | k).unwrap();
            if !t.complete() {
                continue;
            }
            tot += 1;
            let truth = rate > t.avail_bw_bps;
            let res = [
                pathload(&t.send_gap_ns, &t.recv_gap_ns, &mut iw).unwrap(),
                imr_avg(&t.send_gap_ns, &t.recv_gap_ns, &mut iw).unwrap(),
                imr_wavelet(&t.send_gap_ns, &t.recv_gap_ns, 3, &mut iw).unwrap(),
            ];
            for (m, r) in res.iter().enumerate() {
                match r {
                    Trend::Ambiguous => c[m][0] += 1,
                    d => {
                        c[m][1] += 1;
                        if (*d == Trend::Increasing) != truth {
                            c[m][2] += 1;
                        }
                    }
                }
            }
        }
        let p = |a: usize, b: usize| {
            if b == 0 {
                "–".to_string()
            } else {
                format!("{:.1}", 100.0 * a as f64 / b as f64)
            }
        };
        println!(
            "| {:.1} | {tot} | {} | {} | {} | {} | {} | {} |",
            rate / 1e9,
            p(c[0][0], tot),
            p(c[0][2], c[0][1]),
            p(c[1][0], tot),
            p(c[1][2], c[1][1]),
            p(c[2][0], tot),
            p(c[2][2], c[2][1])
        );
    }
}
