//! 004 §V incremental training: evaluate the deployed model on batches of 30
//! transfers and retrain on all history when a batch's MAPE exceeds 20 %. Random
//! forests cannot learn incrementally, so "retrain" means a full refit (in Python);
//! this monitor only decides when.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// When to retrain (004 §V defaults: batches of 30, threshold 20 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrainPolicy {
    /// Transfers per evaluation batch.
    #[serde(default = "thirty")]
    pub batch: usize,
    /// Retrain when a batch's MAPE is above this (percent).
    #[serde(default = "twenty")]
    pub threshold_pct: f64,
}

fn thirty() -> usize {
    30
}
fn twenty() -> f64 {
    20.0
}

impl Default for RetrainPolicy {
    fn default() -> Self {
        RetrainPolicy {
            batch: thirty(),
            threshold_pct: twenty(),
        }
    }
}

impl RetrainPolicy {
    /// Check the fields.
    pub fn validate(&self) -> Result<()> {
        if self.batch == 0 {
            return Err(Error::invalid(
                "retrain batch of 0 transfers; 004 §V uses 30",
            ));
        }
        if !(self.threshold_pct.is_finite() && self.threshold_pct > 0.0) {
            return Err(Error::invalid(format!(
                "retrain threshold {} % must be finite and > 0 (004 §V: 20)",
                self.threshold_pct
            )));
        }
        Ok(())
    }
}

/// The verdict on one completed batch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchVerdict {
    /// 0-based batch index.
    pub batch: usize,
    /// The batch's MAPE, percent.
    pub mape_pct: f64,
    /// True when the batch error exceeded the threshold: refit on all history.
    pub retrain: bool,
}

/// Accumulates per-transfer errors and returns a verdict at the end of each batch.
#[derive(Debug, Clone)]
pub struct RetrainMonitor {
    policy: RetrainPolicy,
    sum: f64,
    count: usize,
    batches: usize,
    retrains: usize,
}

impl RetrainMonitor {
    /// A monitor with a validated policy.
    pub fn new(policy: RetrainPolicy) -> Result<Self> {
        policy.validate()?;
        Ok(RetrainMonitor {
            policy,
            sum: 0.0,
            count: 0,
            batches: 0,
            retrains: 0,
        })
    }

    /// Record one transfer's percentage error; `Some` when it completes a batch.
    pub fn observe(&mut self, error_pct: f64) -> Result<Option<BatchVerdict>> {
        if !(error_pct.is_finite() && error_pct >= 0.0) {
            return Err(Error::invalid(format!(
                "transfer error {error_pct} % must be finite and >= 0"
            )));
        }
        self.sum += error_pct;
        self.count += 1;
        if self.count < self.policy.batch {
            return Ok(None);
        }
        let mape = self.sum / self.count as f64;
        let v = BatchVerdict {
            batch: self.batches,
            mape_pct: mape,
            retrain: mape > self.policy.threshold_pct,
        };
        self.batches += 1;
        self.retrains += v.retrain as usize;
        self.sum = 0.0;
        self.count = 0;
        Ok(Some(v))
    }

    /// Completed batches so far.
    pub fn batches(&self) -> usize {
        self.batches
    }

    /// Retrain verdicts so far (004 §V: 9 in about 300 batches).
    pub fn retrains(&self) -> usize {
        self.retrains
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_of_thirty_and_the_twenty_percent_rule() {
        let mut m = RetrainMonitor::new(RetrainPolicy::default()).unwrap();
        for _ in 0..29 {
            assert_eq!(m.observe(10.0).unwrap(), None);
        }
        let v = m.observe(10.0).unwrap().unwrap();
        assert_eq!((v.batch, v.mape_pct, v.retrain), (0, 10.0, false));
        // Second batch: 15 transfers at 10 %, 15 at 31 % → 20.5 % > 20 %.
        let mut last = None;
        for i in 0..30 {
            last = m.observe(if i < 15 { 10.0 } else { 31.0 }).unwrap();
        }
        let v = last.unwrap();
        assert_eq!(v.batch, 1);
        assert!((v.mape_pct - 20.5).abs() < 1e-12);
        assert!(v.retrain);
        assert_eq!((m.batches(), m.retrains()), (2, 1));
        // Exactly 20 % does not retrain ("exceeds").
        for _ in 0..30 {
            last = m.observe(20.0).unwrap();
        }
        assert!(!last.unwrap().retrain);
    }

    #[test]
    fn bad_input() {
        assert!(RetrainMonitor::new(RetrainPolicy {
            batch: 0,
            threshold_pct: 20.0
        })
        .is_err());
        assert!(RetrainMonitor::new(RetrainPolicy {
            batch: 3,
            threshold_pct: f64::NAN
        })
        .is_err());
        let mut m = RetrainMonitor::new(RetrainPolicy::default()).unwrap();
        assert!(m.observe(f64::NAN).is_err());
        assert!(m.observe(-1.0).is_err());
    }
}
