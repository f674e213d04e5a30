//! Training set for the *live* ML estimator (`opsel bwe probe --model`): simulator
//! traces in the regime of the netlab live evaluation (docs/results/bwe.md, "Live"),
//! not the thesis' 10 Gbps testbed.
//! `cargo run --release -p opsel --example bwe_live_dataset -- DIR [STREAMS_PER_SET]`
//!
//! Regime [Ours; matched to netlab, chosen before looking at live estimates]: 200 Mbit/s
//! FIFO bottleneck, 500 kB buffer, 9000-byte probes, N_r = 4, N_p = 16, range 50 %;
//! near-constant UDP cross traffic in 1500-byte packets at 10–170 Mbit/s (per-ms
//! spread 5 % of the mean); user-space sender noise (hrtimer-class jitter 20 µs plus
//! 5 % deferrals of 60–120 µs, like the achieved gaps the live pacer reports under
//! load); receiver release jitter modelled as timer coalescing with rx-usecs ∈
//! {0, 30, 100} µs ("3sets" idea of 001 §6.3.2). R_avg is drawn in [0.55, 1.35] × the
//! mean available bandwidth (the rate adapter keeps it near the estimate). As in the
//! live prober, features use the *achieved* send gaps.
//!
//! Writes `live_train.csv` and `live_test.csv` (same layout as `bwe_dataset`'s
//! `mr_*.csv`: y, r_avg_bps, avail_bw_bps, rx_usecs, features).

use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::sim::{
    simulate, Coalescing, CrossTraffic, GroundTruth, Rng, SendNoise, SimConfig, TimestampNoise,
};
use opsel::bwe::PStreamSpec;
use std::io::Write;

const LINK_BPS: f64 = 200e6;

fn config(seed: u64, cross_bps: f64, rx_usecs: f64) -> SimConfig {
    SimConfig {
        link_bps: LINK_BPS,
        buffer_bytes: 500e3,
        cross: CrossTraffic {
            mean_bps: cross_bps,
            burstiness_bps: 0.05 * cross_bps,
            ar1: 0.5,
            packet_bytes: 1500,
            train_mean_packets: 1.0,
            source_bps: 1e9,
            constant_spacing: true,
        },
        sender: SendNoise::Hrtimer {
            jitter_ns: 20_000.0,
            defer_prob: 0.05,
            defer_ns: 60_000.0,
        },
        coalescing: if rx_usecs > 0.0 {
            Coalescing::Timer {
                rx_usecs_ns: rx_usecs * 1e3,
                per_packet_ns: 1_000.0,
            }
        } else {
            Coalescing::None
        },
        timestamps: TimestampNoise::None,
        delayed_ack: false,
        seed,
        // The shipped live model (models/bwe-live) was trained with the earlier
        // ground truth; keep it so `make bwe-live-model` reproduces that file.
        ground_truth: GroundTruth::SenderArrivals,
    }
}

fn write(dir: &str, name: &str, seed: u64, count: u64) {
    let n = 64;
    let nf = feature_len(FeatureKind::Magnitude, n);
    let mut f = std::io::BufWriter::new(std::fs::File::create(format!("{dir}/{name}")).unwrap());
    let mut h = String::from("y,r_avg_bps,avail_bw_bps,rx_usecs");
    for i in 0..nf {
        h += &format!(",f{i}");
    }
    writeln!(f, "{h}").unwrap();
    let mut fw = FeatureWorkspace::new(n);
    let mut x = vec![0.0; nf];
    let mut rng = Rng::new(seed);
    let mut rows = 0;
    for (si, rx) in [0.0, 30.0, 100.0].into_iter().enumerate() {
        for k in 0..count {
            let cross = rng.range(10e6, 170e6);
            let r_avg = (LINK_BPS - cross) * rng.range(0.55, 1.35);
            let spec = PStreamSpec::with_range(r_avg, 4, 16, 0.5, 9000).unwrap();
            let cfg = config(seed ^ (si as u64 * 0x9E37), cross, rx);
            let t = simulate(&spec, &cfg, k).unwrap();
            if !t.complete() {
                continue;
            }
            features(
                &t.actual_send_gap_ns,
                &t.recv_gap_ns,
                FeatureKind::Magnitude,
                &mut fw,
                &mut x,
            )
            .unwrap();
            let mut s = format!(
                "{},{},{},{}",
                t.avail_bw_bps / r_avg,
                r_avg,
                t.avail_bw_bps,
                rx
            );
            for v in &x {
                s += &format!(",{v}");
            }
            writeln!(f, "{s}").unwrap();
            rows += 1;
        }
    }
    eprintln!("{name}: {rows} rows");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).map(String::as_str).unwrap_or("target/bwe");
    let count: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3000);
    std::fs::create_dir_all(dir).unwrap();
    write(dir, "live_train.csv", 0x11FE, count);
    write(dir, "live_test.csv", 0x7E57, count / 3);
}
