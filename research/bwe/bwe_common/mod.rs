//! Conditions shared by the `bwe_dataset` and `bwe_eval` examples (001 Ch 5, Ch 6).
#![allow(dead_code)]

use opsel::bwe::sim::{Coalescing, GroundTruth, SimConfig};
use opsel::bwe::PStreamSpec;

/// Average rates are drawn in [R_LO, R_HI] (the thesis sweeps 1–9 Gbps; streams whose
/// range cannot cover the ≈ 6–9 Gbps avail-bw of BCT would be filtered out anyway).
pub const R_LO: f64 = 5.0e9;
pub const R_HI: f64 = 9.5e9;

/// Deterministic R_avg of stream `k` of a condition: a low-discrepancy sweep
/// (golden-ratio sequence) over [R_LO, R_HI].
pub fn r_avg(k: u64, salt: u64) -> f64 {
    let phi = 0.618_033_988_749_894_9;
    let u = ((k as f64 + (salt % 1000) as f64 * 0.1234) * phi).fract();
    R_LO + (R_HI - R_LO) * u
}

/// Multi-rate spec of the ML experiments (N = 64, N_r = 4, range 50 %).
pub fn mr_spec(r: f64) -> PStreamSpec {
    PStreamSpec::with_range(r, 4, 16, 0.5, 9038).unwrap()
}

/// NIC1 timer coalescing with `rx_usecs` µs.
pub fn nic1(rx_usecs: f64) -> Coalescing {
    Coalescing::Timer {
        rx_usecs_ns: rx_usecs * 1e3,
        per_packet_ns: 500.0,
    }
}

/// Ground-truth definition of every condition: the thesis' (001 §5.3.3, after the
/// bottleneck) unless `BWE_GROUND_TRUTH=arrivals` asks for the send-window one (cross
/// traffic arriving while the p-stream is sent), to reproduce the "before" numbers.
pub fn ground_truth() -> GroundTruth {
    match std::env::var("BWE_GROUND_TRUTH").as_deref() {
        Ok("arrivals") => GroundTruth::SenderArrivals,
        Ok("departures") | Err(_) => GroundTruth::BottleneckDepartures,
        Ok(other) => {
            eprintln!("BWE_GROUND_TRUTH={other:?} is not 'departures' or 'arrivals'");
            std::process::exit(2)
        }
    }
}

/// BCT over 10 Gbps with NIC1 coalescing of `rx_usecs`.
pub fn bct(seed: u64, rx_usecs: f64) -> SimConfig {
    SimConfig {
        coalescing: nic1(rx_usecs),
        ground_truth: ground_truth(),
        ..SimConfig::thesis_bct(seed)
    }
}

/// Single-rate probing rates of 001 §5.2: 5–9 Gbps in 0.5 Gbps steps (9 rates).
pub fn single_rates() -> Vec<f64> {
    (0..9).map(|i| 5e9 + 0.5e9 * i as f64).collect()
}

/// Median, 10/90 % and 5/95 % of `v` (sorted copy), as the thesis reports.
pub fn summary(v: &[f64]) -> String {
    if v.is_empty() {
        return "n=0".into();
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    let within = |x: f64| v.iter().filter(|e| e.abs() <= x).count() as f64 / v.len() as f64 * 100.0;
    format!(
        "n={} median={:+.1}% 10–90%=[{:+.1}%, {:+.1}%] 5–95%=[{:+.1}%, {:+.1}%] within10%={:.1}% within15%={:.1}%",
        v.len(),
        q(0.5) * 100.0,
        q(0.1) * 100.0,
        q(0.9) * 100.0,
        q(0.05) * 100.0,
        q(0.95) * 100.0,
        within(0.10),
        within(0.15)
    )
}
