//! The sample model of 004 §III: a transfer reports its instantaneous throughput
//! every interval `i`; its label is `t_avg`, the mean of *all* reports of a transfer
//! that ran at least 60 intervals; a prediction's quality is the per-transfer
//! percentage error, summarised as MAPE over transfers.

use crate::error::{check_finite, Error, Result};
use serde::{Deserialize, Serialize};

/// 004 §III: every transfer of the dataset ran ≥ 60 s at i = 1 s ("n > 60").
pub const MIN_LABEL_SAMPLES: usize = 60;

/// One transfer's throughput log: samples in bit/s, one per `interval_ns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferLog {
    /// Sampling interval (004 §III: i = 1 s).
    pub interval_ns: u64,
    /// Instantaneous throughput per interval, bit/s, in time order.
    pub samples_bps: Vec<f64>,
}

impl TransferLog {
    /// Validate and build: `interval_ns > 0`, at least `min_samples` samples, every
    /// sample finite and ≥ 0.
    pub fn new(interval_ns: u64, samples_bps: Vec<f64>, min_samples: usize) -> Result<Self> {
        let log = TransferLog {
            interval_ns,
            samples_bps,
        };
        log.validate(min_samples)?;
        Ok(log)
    }

    /// Check the invariants of [`TransferLog::new`].
    pub fn validate(&self, min_samples: usize) -> Result<()> {
        if self.interval_ns == 0 {
            return Err(Error::invalid(
                "transfer log interval_ns is 0; give the sampling interval in nanoseconds (004 §III: 1 s)",
            ));
        }
        if self.samples_bps.len() < min_samples.max(1) {
            return Err(Error::invalid(format!(
                "transfer log has {} samples; the t_avg label needs at least {} (004 §III: transfers of >= 60 s)",
                self.samples_bps.len(),
                min_samples.max(1)
            )));
        }
        check_samples(&self.samples_bps)
    }

    /// The label `t_avg` (004 §III).
    pub fn t_avg_bps(&self) -> Result<f64> {
        t_avg(&self.samples_bps)
    }
}

/// Reject NaN, infinite and negative throughput samples.
pub fn check_samples(samples_bps: &[f64]) -> Result<()> {
    check_finite("throughput samples", samples_bps)?;
    match samples_bps.iter().position(|v| *v < 0.0) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(format!(
            "throughput sample {i} is negative ({} bit/s); throughput samples must be >= 0",
            samples_bps[i]
        ))),
    }
}

/// 004 §III: `t_avg = (t_1 + … + t_n) / n`, the converged throughput a probe predicts.
/// Errors on an empty slice, NaN/inf or negative samples.
pub fn t_avg(samples_bps: &[f64]) -> Result<f64> {
    if samples_bps.is_empty() {
        return Err(Error::invalid(
            "t_avg of an empty transfer log; a transfer needs at least one sample",
        ));
    }
    check_samples(samples_bps)?;
    Ok(samples_bps.iter().sum::<f64>() / samples_bps.len() as f64)
}

/// 004 §III: per-transfer percentage error `|t_pred − t_avg| / t_avg · 100`.
/// `t_avg` must be finite and > 0 (a transfer that moved nothing has no relative error).
pub fn pct_error(pred_bps: f64, t_avg_bps: f64) -> Result<f64> {
    if !(t_avg_bps.is_finite() && t_avg_bps > 0.0) {
        return Err(Error::invalid(format!(
            "t_avg {t_avg_bps} bit/s: the percentage error needs a finite t_avg > 0"
        )));
    }
    if !pred_bps.is_finite() {
        return Err(Error::invalid(format!(
            "prediction {pred_bps} bit/s is not finite"
        )));
    }
    Ok((pred_bps - t_avg_bps).abs() / t_avg_bps * 100.0)
}

/// MAPE over transfers (004 §III): the mean of per-transfer percentage errors.
pub fn mape_pct(pairs: &[(f64, f64)]) -> Result<f64> {
    if pairs.is_empty() {
        return Err(Error::invalid(
            "MAPE of zero transfers; pass at least one (prediction, t_avg) pair",
        ));
    }
    let mut s = 0.0;
    for &(p, a) in pairs {
        s += pct_error(p, a)?;
    }
    Ok(s / pairs.len() as f64)
}

/// 004 §IV training-row construction: the n-input model sees the first `n` samples
/// of a log and learns its `t_avg`. Returns `(prefix, t_avg)`; errors when the log is
/// shorter than `n` or `n == 0`.
pub fn training_row(log: &TransferLog, n: usize) -> Result<(&[f64], f64)> {
    if n == 0 || n > log.samples_bps.len() {
        return Err(Error::invalid(format!(
            "prefix length {n} must be in 1..={} (the log's length)",
            log.samples_bps.len()
        )));
    }
    Ok((&log.samples_bps[..n], log.t_avg_bps()?))
}

/// Outcome of one probe on one transfer (any method: FastProb or a baseline).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Samples consumed before stopping (probe time = `samples · interval`).
    pub samples: usize,
    /// Predicted converged throughput, bit/s.
    pub prediction_bps: f64,
    /// True when the method hit its cap (or the log's end) instead of deciding to stop.
    pub forced: bool,
}

/// The metrics 004 §9 asks to report for a method over a set of transfers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of transfers.
    pub transfers: usize,
    /// MAPE, percent.
    pub mape_pct: f64,
    /// Median percentage error.
    pub median_error_pct: f64,
    /// Mean probe time in seconds.
    pub mean_probe_s: f64,
    /// Share of transfers with error > 50 %, percent (004 §VI: 8.4 % for the 3-s RF).
    pub over_50_pct: f64,
    /// Share of probes that were forced (hit the cap), percent.
    pub forced_pct: f64,
}

/// Summarise `(estimate, t_avg)` pairs of transfers sampled at `interval_ns`.
pub fn summarise(results: &[(Estimate, f64)], interval_ns: u64) -> Result<Summary> {
    if results.is_empty() {
        return Err(Error::invalid("summary of zero transfers"));
    }
    let mut errs = Vec::with_capacity(results.len());
    let (mut probe, mut forced) = (0.0, 0usize);
    for (e, a) in results {
        errs.push(pct_error(e.prediction_bps, *a)?);
        probe += e.samples as f64 * interval_ns as f64 * 1e-9;
        forced += e.forced as usize;
    }
    let n = results.len() as f64;
    let mape = errs.iter().sum::<f64>() / n;
    let over = errs.iter().filter(|e| **e > 50.0).count() as f64 / n * 100.0;
    errs.sort_by(f64::total_cmp);
    let m = errs.len();
    let median = if m % 2 == 1 {
        errs[m / 2]
    } else {
        0.5 * (errs[m / 2 - 1] + errs[m / 2])
    };
    Ok(Summary {
        transfers: results.len(),
        mape_pct: mape,
        median_error_pct: median,
        mean_probe_s: probe / n,
        over_50_pct: over,
        forced_pct: forced as f64 / n * 100.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_row_example_of_004_iv() {
        // 004 §IV: ⟨100, 800, 900, 1100, …⟩ with t_avg = 1320 gives ⟨100, 800⟩ → 1320
        // for the 2-input model. Fill the tail so the 60-sample mean is exactly 1320.
        let head = [100.0, 800.0, 900.0, 1100.0];
        let tail_sum = 1320.0 * 60.0 - head.iter().sum::<f64>();
        let mut s = head.to_vec();
        s.extend(std::iter::repeat_n(tail_sum / 56.0, 56));
        let log = TransferLog::new(1_000_000_000, s, MIN_LABEL_SAMPLES).unwrap();
        let (x, y) = training_row(&log, 2).unwrap();
        assert_eq!(x, &[100.0, 800.0]);
        assert!((y - 1320.0).abs() < 1e-9);
        let (x, _) = training_row(&log, 3).unwrap();
        assert_eq!(x, &[100.0, 800.0, 900.0]);
        assert!(training_row(&log, 0).is_err());
        assert!(training_row(&log, 61).is_err());
    }

    #[test]
    fn errors_and_mape() {
        assert_eq!(pct_error(90.0, 100.0).unwrap(), 10.0);
        assert_eq!(pct_error(150.0, 100.0).unwrap(), 50.0);
        assert!(pct_error(1.0, 0.0).is_err());
        assert!(pct_error(f64::NAN, 1.0).is_err());
        assert_eq!(mape_pct(&[(90.0, 100.0), (130.0, 100.0)]).unwrap(), 20.0);
        assert!(mape_pct(&[]).is_err());
    }

    #[test]
    fn logs_are_validated() {
        assert!(TransferLog::new(0, vec![1.0; 60], 60).is_err());
        assert!(TransferLog::new(1, vec![1.0; 59], 60).is_err());
        let mut s = vec![1.0; 60];
        s[7] = f64::NAN;
        let e = TransferLog::new(1, s, 60).unwrap_err().to_string();
        assert!(e.contains("index 7"), "{e}");
        let mut s = vec![1.0; 60];
        s[3] = -2.0;
        assert!(TransferLog::new(1, s, 60).is_err());
        assert!(t_avg(&[]).is_err());
        assert_eq!(t_avg(&[1.0, 2.0, 6.0]).unwrap(), 3.0);
    }

    #[test]
    fn summary_counts() {
        let e = |s, p, f| Estimate {
            samples: s,
            prediction_bps: p,
            forced: f,
        };
        let r = [(e(2, 40.0, false), 100.0), (e(4, 100.0, true), 100.0)];
        let s = summarise(&r, 1_000_000_000).unwrap();
        assert_eq!(s.transfers, 2);
        assert_eq!(s.mape_pct, 30.0);
        assert_eq!(s.median_error_pct, 30.0);
        assert_eq!(s.mean_probe_s, 3.0);
        assert_eq!(s.over_50_pct, 50.0);
        assert_eq!(s.forced_pct, 50.0);
    }
}
