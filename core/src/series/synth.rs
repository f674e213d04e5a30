//! Synthetic RTT series per background mix, for tests, benchmarks and the
//! demo until measured traces exist. NOT measured data: a qualitative model of
//! 000 Fig 5.3 on the 000 testbed (base RTT 65 ms, drop-tail buffer 1.5×BDP,
//! so a full queue adds ≈ 97.5 ms):
//! - no background: base RTT plus jitter;
//! - CUBIC flows fill the buffer and drain it on loss: a sawtooth between
//!   roughly 60% and 100% of the queue, faster with more flows;
//! - BBR keeps the queue short, with a ProbeRTT dip every 10 s; two BBR flows
//!   hold a standing queue of about one BDP;
//! - BBR with CUBIC: the queue stays high (CUBIC fills it) with BBR's
//!   ProbeRTT dips cutting the sawtooth.
//!
//! Deterministic for a seed.

use crate::error::Result;
use crate::mix::Mix;

const BASE_MS: f64 = 65.0;
const FULL_QUEUE_MS: f64 = 97.5;

/// A 1 Hz RTT series (ms) of `seconds` samples for background `mix`.
pub fn rtt_series(mix: &Mix, seconds: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B);
    let cubic = mix.count("cubic") as f64;
    let bbr = mix.count("bbr") as f64;
    let period = if cubic > 0.0 {
        24.0 / cubic.sqrt() * (0.8 + 0.4 * rng.unit())
    } else {
        1.0
    };
    let mut phase = rng.unit() * period;
    let probe_rtt_offset = rng.unit() * 10.0;
    (0..seconds)
        .map(|t| {
            let t = t as f64;
            phase += 1.0;
            let saw = (phase % period) / period; // 0..1 ramp
            let mut queue = 0.0;
            if cubic > 0.0 {
                queue += FULL_QUEUE_MS * (0.6 + 0.4 * saw.powf(0.7));
            }
            if bbr > 0.0 {
                let standing = if bbr >= 2.0 {
                    0.65 * BASE_MS
                } else {
                    0.12 * BASE_MS
                };
                queue = queue.max(standing)
                    + if cubic > 0.0 {
                        0.0
                    } else {
                        4.0 * (t * 0.9).sin()
                    };
                // ProbeRTT: BBR drains its inflight for ~200 ms every 10 s.
                if ((t + probe_rtt_offset) % 10.0) < 1.0 {
                    queue *= if cubic > 0.0 { 0.8 } else { 0.35 };
                }
            }
            let jitter = 0.6 + 0.03 * queue;
            BASE_MS + queue + jitter * rng.normal()
        })
        .map(|v| v.max(1.0))
        .collect()
}

/// `per_class` windows of `w` samples for each class label, cut from one
/// long series per class (non-overlapping, 000 §3.4). Returns flat windows and
/// labels (indices into `classes`).
pub fn dataset(
    classes: &[&str],
    per_class: usize,
    w: usize,
    seed: u64,
) -> Result<(Vec<f64>, Vec<u32>)> {
    let mut x = Vec::with_capacity(classes.len() * per_class * w);
    let mut y = Vec::with_capacity(classes.len() * per_class);
    for (c, label) in classes.iter().enumerate() {
        let mix = Mix::parse(label)?;
        let s = rtt_series(&mix, per_class * w, seed.wrapping_add(c as u64 * 7919));
        x.extend_from_slice(&s);
        y.extend(std::iter::repeat_n(c as u32, per_class));
    }
    Ok((x, y))
}

/// xorshift64* with Box–Muller normals; enough for synthetic jitter.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        if self.0 == 0 {
            self.0 = 0x9E37_79B9_7F4A_7C15;
        }
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::SIX_CLASSES;

    #[test]
    fn deterministic_and_class_dependent() {
        let m = Mix::parse("B0-C1").unwrap();
        assert_eq!(rtt_series(&m, 50, 1), rtt_series(&m, 50, 1));
        assert_ne!(rtt_series(&m, 50, 1), rtt_series(&m, 50, 2));
        let mean = |l: &str| {
            let s = rtt_series(&Mix::parse(l).unwrap(), 200, 3);
            s.iter().sum::<f64>() / s.len() as f64
        };
        // Empty path sits at base RTT; CUBIC fills the queue; one BBR keeps it short.
        assert!((mean("B0-C0") - BASE_MS).abs() < 1.0);
        assert!(mean("B0-C1") > BASE_MS + 50.0);
        assert!(mean("B1-C0") < BASE_MS + 15.0);
        let (x, y) = dataset(&SIX_CLASSES, 4, 20, 9).unwrap();
        assert_eq!((x.len(), y.len()), (6 * 4 * 20, 24));
    }
}
