//! Relative heavy-hitter thresholds the dissertation contrasts with its
//! absolute H (003 §3.3, Table 3.3 context): mean + 3σ (Sarvotham), the top
//! 1 % of flows, and the smallest set of flows carrying 50 % of all bytes.
//! Each gives a byte threshold: flows at or above it are heavy hitters.

use serde::{Deserialize, Serialize};

/// Streaming mean and standard deviation (Welford), for mean + 3σ over a day
/// of flow sizes without keeping them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeanSigma {
    n: u64,
    mean: f64,
    m2: f64,
}

impl MeanSigma {
    /// Add one flow size.
    pub fn push(&mut self, x: u64) {
        self.n += 1;
        let x = x as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Number of sizes seen.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The mean; 0 when empty.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Population standard deviation; 0 when empty.
    pub fn sigma(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            (self.m2 / self.n as f64).max(0.0).sqrt()
        }
    }

    /// The mean + 3σ threshold, bytes (rounded up).
    pub fn threshold(&self) -> u64 {
        let t = self.mean + 3.0 * self.sigma();
        if t.is_finite() && t > 0.0 {
            t.ceil().min(u64::MAX as f64) as u64
        } else {
            0
        }
    }
}

/// The three relative thresholds over one set of flow sizes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RelativeThresholds {
    pub flows: u64,
    /// mean + 3σ, bytes; and how many flows reach it.
    pub mean_3sigma_bytes: u64,
    pub mean_3sigma_flows: u64,
    /// Size of the smallest flow among the largest ⌈1 %⌉; and how many flows reach it.
    pub top1pct_bytes: u64,
    pub top1pct_flows: u64,
    /// Size of the smallest flow in the smallest largest-first set carrying ≥ 50 % of bytes.
    pub half_bytes_bytes: u64,
    pub half_bytes_flows: u64,
}

/// Compute all three; sorts `sizes` in place (descending). Empty input gives zeros.
pub fn relative_thresholds(sizes: &mut [u64]) -> RelativeThresholds {
    let mut ms = MeanSigma::default();
    for &s in sizes.iter() {
        ms.push(s);
    }
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let n = sizes.len();
    let at_least = |t: u64| sizes.iter().take_while(|&&s| s >= t).count() as u64;
    let mean3 = ms.threshold();
    let (top, half) = if n == 0 {
        (0, 0)
    } else {
        let k = n.div_ceil(100);
        let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
        let mut acc = 0u128;
        let mut half = sizes[n - 1];
        for &s in sizes.iter() {
            acc += u128::from(s);
            if acc * 2 >= total {
                half = s;
                break;
            }
        }
        (sizes[k - 1], half)
    };
    RelativeThresholds {
        flows: n as u64,
        mean_3sigma_bytes: mean3,
        mean_3sigma_flows: if n == 0 { 0 } else { at_least(mean3) },
        top1pct_bytes: top,
        top1pct_flows: if n == 0 { 0 } else { at_least(top) },
        half_bytes_bytes: half,
        half_bytes_flows: if n == 0 { 0 } else { at_least(half) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_on_a_known_set() {
        // 99 flows of 1 MB and one of 1 GB.
        let mut v = vec![1_000_000u64; 99];
        v.push(1_000_000_000);
        let t = relative_thresholds(&mut v);
        assert_eq!((t.top1pct_bytes, t.top1pct_flows), (1_000_000_000, 1));
        // The single elephant carries 91 % of the bytes.
        assert_eq!((t.half_bytes_bytes, t.half_bytes_flows), (1_000_000_000, 1));
        // mean = 10.99 MB, σ ≈ 99.4 MB: mean + 3σ ≈ 309 MB, one flow above.
        assert_eq!(t.mean_3sigma_flows, 1);
        assert!((300_000_000..320_000_000).contains(&t.mean_3sigma_bytes));
        let e = relative_thresholds(&mut []);
        assert_eq!((e.flows, e.top1pct_bytes, e.mean_3sigma_bytes), (0, 0, 0));
    }

    #[test]
    fn equal_sizes() {
        let mut v = vec![5u64; 10];
        let t = relative_thresholds(&mut v);
        assert_eq!(t.mean_3sigma_bytes, 5);
        assert_eq!(t.half_bytes_flows, 10);
        assert_eq!(t.top1pct_bytes, 5);
    }
}
