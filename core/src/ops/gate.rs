//! A learned gate that ends an OPS probe as soon as the decision is safe
//! (004 §8 B.1: FastProb's per-prefix classifiers plus a classifier trained
//! on "prefix-n decision == the right decision", carried over to OPS).
//!
//! At each check length n (e.g. 5, 10, …, 35 s of a w = 40 window) the
//! controller classifies the prefix with the per-prefix 1-NN model (the
//! references cut to n samples, [`PrefixEnsemble`](super::PrefixEnsemble))
//! and hands the gate four cheap features:
//!
//! * `n_over_w`: n / w;
//! * `margin`: the prefix's 1-NN margin `1 − d_nearest / d_other_class`;
//! * `same_decision`: 1 when the prefix's decision (BBR present in the
//!   background or not: the stump's question, 000 §4.1) equals the previous
//!   check's, else 0 (0 at the first check);
//! * `streak_share`: how many checks in a row, this one included, gave this
//!   decision, divided by the number of classifications a probe can make
//!   (the checks plus the full window).
//!
//! The gate is a logistic regression, `p = σ(b + Σ wᵢ xᵢ)`; the probe ends at
//! the first check with `p >= threshold`, otherwise it runs the full window.
//! Weights, threshold and check lengths come from a small JSON file
//! (`models/passive/gate.json`, trained by `research/ops-gate/study.py` under
//! leave-one-condition-out; docs/results/ops-gate.md). Scoring is a dot
//! product of four numbers: no allocation.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The features a gate file must list, in this order.
pub const GATE_FEATURES: [&str; 4] = ["n_over_w", "margin", "same_decision", "streak_share"];

/// The file format tag and version this build reads.
const FORMAT: &str = "opsel-probe-gate";
const VERSION: u32 = 1;

/// A gate file as stored (`"format": "opsel-probe-gate"`, `"version": 1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct GateFile {
    format: String,
    version: u32,
    kind: String,
    window: usize,
    checks: Vec<usize>,
    threshold: f64,
    features: Vec<String>,
    weights: Vec<f64>,
    intercept: f64,
    #[serde(default)]
    training: serde_json::Value,
}

/// A trained probe gate ([module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeGate {
    window: usize,
    checks: Vec<usize>,
    threshold: f64,
    weights: [f64; 4],
    intercept: f64,
}

impl ProbeGate {
    /// A gate from its parts; checks ascending, distinct, in `1..window`.
    pub fn new(
        window: usize,
        checks: Vec<usize>,
        weights: [f64; 4],
        intercept: f64,
        threshold: f64,
    ) -> Result<Self> {
        if window < 2 {
            return Err(Error::invalid(format!(
                "probe gate window {window} must be at least 2 samples (a check needs a shorter prefix)"
            )));
        }
        if checks.is_empty() {
            return Err(Error::invalid(
                "probe gate has no check lengths; list the prefix lengths at which the probe may end, e.g. [5, 10, 15]",
            ));
        }
        for (i, &n) in checks.iter().enumerate() {
            if n == 0 || n >= window {
                return Err(Error::invalid(format!(
                    "probe gate check at {n} samples must be between 1 and {} (the window {window} minus 1)",
                    window - 1
                )));
            }
            if i > 0 && checks[i - 1] >= n {
                return Err(Error::invalid(format!(
                    "probe gate checks {checks:?} must be strictly ascending"
                )));
            }
        }
        if !weights.iter().all(|w| w.is_finite()) || !intercept.is_finite() {
            return Err(Error::invalid(format!(
                "probe gate weights {weights:?} and intercept {intercept} must be finite numbers"
            )));
        }
        if !(0.0..=1.0).contains(&threshold) {
            return Err(Error::invalid(format!(
                "probe gate threshold {threshold} must be a probability in [0, 1]"
            )));
        }
        Ok(Self {
            window,
            checks,
            threshold,
            weights,
            intercept,
        })
    }

    /// Parse a gate file (JSON); every field is checked.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("probe gate file is not JSON: {e}")))?;
        // Format and version first, so a foreign file gets that reason.
        if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(Error::invalid(format!(
                "probe gate file has format {}; expected {FORMAT:?} (a model file is not a gate file)",
                v.get("format").unwrap_or(&serde_json::Value::Null)
            )));
        }
        if v.get("version").and_then(|f| f.as_u64()) != Some(u64::from(VERSION)) {
            return Err(Error::invalid(format!(
                "probe gate file version {} is not supported by this build (reads version {VERSION}); retrain with research/ops-gate/study.py",
                v.get("version").unwrap_or(&serde_json::Value::Null)
            )));
        }
        let f: GateFile = serde_json::from_value(v)
            .map_err(|e| Error::invalid(format!("probe gate file is not valid: {e}")))?;
        if f.kind != "logistic" {
            return Err(Error::invalid(format!(
                "probe gate kind {:?} is not supported; expected \"logistic\"",
                f.kind
            )));
        }
        if f.features.len() != GATE_FEATURES.len()
            || f.features.iter().zip(GATE_FEATURES).any(|(a, b)| a != b)
        {
            return Err(Error::invalid(format!(
                "probe gate features {:?} are not the ones this build computes ({GATE_FEATURES:?}, in that order)",
                f.features
            )));
        }
        let weights: [f64; 4] = f.weights.as_slice().try_into().map_err(|_| {
            Error::invalid(format!(
                "probe gate has {} weights; expected {} (one per feature)",
                f.weights.len(),
                GATE_FEATURES.len()
            ))
        })?;
        Self::new(f.window, f.checks, weights, f.intercept, f.threshold)
    }

    /// Load a gate file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!(
                "cannot read probe gate file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_json(&text).map_err(|e| Error::invalid(format!("{e} ({})", path.display())))
    }

    /// The window length w the gate was trained for.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The prefix lengths at which the probe may end, ascending.
    pub fn checks(&self) -> &[usize] {
        &self.checks
    }

    /// The probability at or above which the probe ends.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The same gate with another threshold (a stricter or looser trade-off
    /// of probe length against right decisions, docs/results/ops-gate.md).
    pub fn with_threshold(mut self, threshold: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&threshold) {
            return Err(Error::invalid(format!(
                "probe gate threshold {threshold} must be a probability in [0, 1]"
            )));
        }
        self.threshold = threshold;
        Ok(self)
    }

    /// Whether `n` samples is one of the check lengths.
    pub fn is_check(&self, n: usize) -> bool {
        self.checks.binary_search(&n).is_ok()
    }

    /// The gate's probability that the decision of an `n`-sample prefix is
    /// right, from its 1-NN `margin`, whether its decision equals the
    /// previous check's, and how many checks in a row (this one included)
    /// gave it.
    pub fn probability(&self, n: usize, margin: f64, same_decision: bool, streak: usize) -> f64 {
        let x = [
            n as f64 / self.window as f64,
            if margin.is_finite() {
                margin.clamp(0.0, 1.0)
            } else {
                0.0
            },
            f64::from(u8::from(same_decision)),
            streak as f64 / (self.checks.len() + 1) as f64,
        ];
        let z = self.intercept + self.weights.iter().zip(x).map(|(w, v)| w * v).sum::<f64>();
        1.0 / (1.0 + (-z).exp())
    }

    /// Whether the probe should end: [`probability`](Self::probability) >= the threshold.
    pub fn fires(&self, n: usize, margin: f64, same_decision: bool, streak: usize) -> bool {
        self.probability(n, margin, same_decision, streak) >= self.threshold
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = include_str!("../../../models/passive/gate.json");

    #[test]
    fn the_shipped_gate_loads_and_scores_like_the_study() {
        let g = ProbeGate::from_json(SHIPPED).unwrap();
        assert_eq!(g.window(), 40);
        assert_eq!(g.checks(), [5, 10, 15, 20, 25, 30, 35]);
        // p = σ(b + w·x) computed by hand from the file's numbers.
        let v: serde_json::Value = serde_json::from_str(SHIPPED).unwrap();
        let w: Vec<f64> = serde_json::from_value(v["weights"].clone()).unwrap();
        let b = v["intercept"].as_f64().unwrap();
        let z = b + w[0] * 20.0 / 40.0 + w[1] * 0.4 + w[2] * 1.0 + w[3] * 3.0 / 8.0;
        let want = 1.0 / (1.0 + (-z).exp());
        assert!((g.probability(20, 0.4, true, 3) - want).abs() < 1e-12);
        // A confident, repeated decision fires; a first, unsure one does not.
        assert!(g.fires(20, 0.9, true, 4));
        assert!(!g.fires(5, 0.0, false, 1));
        assert!(g.is_check(35) && !g.is_check(40) && !g.is_check(7));
    }

    #[test]
    fn bad_files_are_rejected_with_the_reason() {
        let e = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(SHIPPED).unwrap();
            f(&mut v);
            ProbeGate::from_json(&v.to_string())
                .unwrap_err()
                .to_string()
        };
        assert!(e(&|v| v["format"] = "opsel-model".into()).contains("opsel-model"));
        assert!(e(&|v| v["version"] = 2.into()).contains("version 2"));
        assert!(e(&|v| v["features"][1] = "margin2".into()).contains("margin2"));
        assert!(e(&|v| v["weights"] = serde_json::json!([1.0, 2.0])).contains("2 weights"));
        assert!(e(&|v| v["threshold"] = 1.5.into()).contains("1.5"));
        assert!(e(&|v| v["checks"] = serde_json::json!([10, 5])).contains("ascending"));
        assert!(e(&|v| v["checks"] = serde_json::json!([40])).contains("40"));
        assert!(ProbeGate::from_json("{").is_err());
        assert!(ProbeGate::load("/nonexistent/gate.json")
            .unwrap_err()
            .to_string()
            .contains("nonexistent"));
    }
}
