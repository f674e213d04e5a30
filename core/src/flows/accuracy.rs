//! Size-accuracy of sampled byte estimates (003 §3.4.3, Table 3.2): the ratio
//! of the NetFlow estimate N × Σ sampled bytes to the true transfer size, and
//! its mean and sd over repeated runs.

use serde::{Deserialize, Serialize};

use super::record::FlowRecord;
use crate::error::{Error, Result};

/// N × Σ bytes of `records` over true size `actual_bytes`; N is each record's
/// own sampling interval unless `override_n` is given.
pub fn size_accuracy_ratio(
    records: &[FlowRecord],
    actual_bytes: u64,
    override_n: Option<u32>,
) -> Result<f64> {
    if actual_bytes == 0 {
        return Err(Error::invalid(
            "actual transfer size 0 bytes: the size-accuracy ratio needs a positive size",
        ));
    }
    let est: u128 = records
        .iter()
        .map(|r| u128::from(r.est_bytes(override_n.unwrap_or(r.sampling_interval))))
        .sum();
    Ok(est as f64 / actual_bytes as f64)
}

/// Mean and sample sd of ratios (Table 3.2 columns).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioStats {
    pub runs: usize,
    pub mean: f64,
    pub sd: f64,
}

/// Mean and sample standard deviation (n − 1); errors on fewer than 2 values or
/// non-finite ones.
pub fn ratio_stats(ratios: &[f64]) -> Result<RatioStats> {
    crate::error::check_finite("ratios", ratios)?;
    if ratios.len() < 2 {
        return Err(Error::invalid(format!(
            "{} ratio(s): a standard deviation needs at least 2 runs (Table 3.2 uses 50)",
            ratios.len()
        )));
    }
    let n = ratios.len() as f64;
    let mean = ratios.iter().sum::<f64>() / n;
    let var = ratios.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / (n - 1.0);
    Ok(RatioStats {
        runs: ratios.len(),
        mean,
        sd: var.sqrt(),
    })
}

/// Sd of the ratio under pure Bernoulli 1-in-N sampling of equal packets:
/// sqrt((N − 1) / packets) (notes §4.3: 0.120 / 0.038 / 0.012 at N = 1000
/// for 100 MB / 1 GB / 10 GB of 1448-B packets).
pub fn bernoulli_ratio_sd(packets: u64, n: u32) -> f64 {
    if packets == 0 {
        return f64::INFINITY;
    }
    ((f64::from(n.max(1)) - 1.0) / packets as f64).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_and_stats() {
        let r = FlowRecord {
            src_addr: "10.0.0.1".parse().unwrap(),
            dst_addr: "10.0.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            proto: 6,
            bytes: 99_000,
            packets: 70,
            first_ns: 0,
            last_ns: 1,
            sampling_interval: 1000,
        };
        let x = size_accuracy_ratio(&[r, r], 200_000_000, None).unwrap();
        assert!((x - 0.99).abs() < 1e-12);
        assert!(size_accuracy_ratio(&[r], 0, None).is_err());
        let s = ratio_stats(&[0.9, 1.1]).unwrap();
        assert!((s.mean - 1.0).abs() < 1e-12 && (s.sd - 0.141_421_356).abs() < 1e-6);
        assert!(ratio_stats(&[1.0]).is_err());
        assert!(ratio_stats(&[1.0, f64::NAN]).is_err());
    }

    #[test]
    fn bernoulli_anchor_values() {
        // notes §4.3 derived anchors at N = 1000, 1448-B packets.
        let sd = |bytes: f64| bernoulli_ratio_sd((bytes / 1448.0).round() as u64, 1000);
        assert!((sd(100e6) - 0.120).abs() < 0.001);
        assert!((sd(1e9) - 0.038).abs() < 0.001);
        assert!((sd(10e9) - 0.012).abs() < 0.001);
    }
}
