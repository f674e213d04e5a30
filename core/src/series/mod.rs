//! RTT series: aggregation of echoes into 1 Hz samples, fixed-length windows
//! and optional normalisation (000 §3.2, §3.4).
//!
//! From echo RTTs to a normalised window: 10 echoes make one 1 Hz sample
//! (§3.2), samples are cut into non-overlapping windows (§3.4):
//!
//! ```
//! use opsel::series::{self, Normalization};
//!
//! // 40 echoes: four samples of 10 echoes each, around 20, 22, 30 and 24 ms.
//! let echoes: Vec<f64> = [20.0, 22.0, 30.0, 24.0]
//!     .iter()
//!     .flat_map(|&ms| [ms - 0.5, ms + 0.5].repeat(5))
//!     .collect();
//! let samples = series::aggregate(&echoes, series::DEFAULT_ECHOES_PER_SAMPLE)?;
//! assert_eq!(samples, [20.0, 22.0, 30.0, 24.0]);
//! let mut windows: Vec<Vec<f64>> = series::windows(&samples, 2)?.map(<[f64]>::to_vec).collect();
//! assert_eq!(windows.len(), 2);
//! // Queueing delay above the window's base RTT.
//! Normalization::parse("subtract-min")?.apply(&mut windows[1])?;
//! assert_eq!(windows[1], [6.0, 0.0]);
//! # Ok::<(), opsel::Error>(())
//! ```

pub mod synth;

use crate::error::{check_finite, Error, Result};

/// 000 §3.2: each 1 Hz sample is the mean of 10 ICMP echoes sent 1 ms apart.
pub const DEFAULT_ECHOES_PER_SAMPLE: usize = 10;

/// Turns a stream of echo RTTs into samples: the mean of every `echoes_per_sample`
/// echoes. Lost echoes are reported with [`Aggregator::push_lost`]; a sample
/// whose echoes were all lost is `None` (never a made-up value).
#[derive(Debug, Clone)]
pub struct Aggregator {
    per_sample: usize,
    seen: usize,
    received: usize,
    sum_ms: f64,
}

impl Aggregator {
    /// `echoes_per_sample` ≥ 1 (000 default: 10).
    pub fn new(echoes_per_sample: usize) -> Result<Self> {
        if echoes_per_sample == 0 {
            return Err(Error::invalid(
                "echoes_per_sample is 0; use at least 1 (000 §3.2 uses 10)",
            ));
        }
        Ok(Self {
            per_sample: echoes_per_sample,
            seen: 0,
            received: 0,
            sum_ms: 0.0,
        })
    }

    /// Echoes that make one sample.
    pub fn echoes_per_sample(&self) -> usize {
        self.per_sample
    }

    /// Add one echo RTT in milliseconds. Returns `Some(Some(mean))` when a sample
    /// completes, `Some(None)` when it completes with every echo lost, `None` otherwise.
    pub fn push(&mut self, rtt_ms: f64) -> Result<Option<Option<f64>>> {
        if !rtt_ms.is_finite() || rtt_ms < 0.0 {
            return Err(Error::invalid(format!(
                "echo RTT {rtt_ms} ms is not a finite non-negative number; report a lost echo with push_lost()"
            )));
        }
        self.sum_ms += rtt_ms;
        self.received += 1;
        Ok(self.advance())
    }

    /// Record an echo that got no reply.
    pub fn push_lost(&mut self) -> Option<Option<f64>> {
        self.advance()
    }

    fn advance(&mut self) -> Option<Option<f64>> {
        self.seen += 1;
        if self.seen < self.per_sample {
            return None;
        }
        let out = (self.received > 0).then(|| self.sum_ms / self.received as f64);
        self.seen = 0;
        self.received = 0;
        self.sum_ms = 0.0;
        Some(out)
    }
}

/// Aggregate a whole echo series (no losses) into samples; a trailing partial
/// group is dropped.
pub fn aggregate(echo_rtt_ms: &[f64], echoes_per_sample: usize) -> Result<Vec<f64>> {
    let mut agg = Aggregator::new(echoes_per_sample)?;
    let mut out = Vec::with_capacity(echo_rtt_ms.len() / echoes_per_sample);
    for &e in echo_rtt_ms {
        if let Some(Some(s)) = agg.push(e)? {
            out.push(s);
        }
    }
    Ok(out)
}

/// Non-overlapping windows of `w` samples (000 §3.4: overlapping windows did
/// worse); a trailing partial window is dropped.
pub fn windows(samples: &[f64], w: usize) -> Result<std::slice::ChunksExact<'_, f64>> {
    if w == 0 {
        return Err(Error::invalid(
            "window length w is 0; use w >= 1 (000 sweeps 5..60)",
        ));
    }
    Ok(samples.chunks_exact(w))
}

/// Per-window normalisation. None is the default: absolute RTT carries the load
/// intensity (000 §3.4, Fig 5.3 has class-specific RTT levels).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Normalization {
    /// Raw RTT in ms.
    #[default]
    None,
    /// Subtract the window's minimum: queueing delay above the window's base RTT.
    SubtractMin,
    /// Divide by the window's minimum: RTT inflation relative to base RTT.
    DivideMin,
    /// Zero mean, unit standard deviation (a constant window becomes all zeros).
    ZScore,
    /// [`Normalization::ZScore`], then the samples sorted ascending: the
    /// window's z-scored value distribution, its order in time dropped. The
    /// L1 distance between two such windows of w samples is w times the
    /// 1-Wasserstein distance between their z-scored value distributions.
    /// Our extension (not in 000): the representation of the two-stage
    /// model's second stage (`knn::TwoStage`), compared sample by sample.
    ZSorted,
}

impl Normalization {
    /// Name as used in model files and CLIs.
    pub fn name(self) -> &'static str {
        match self {
            Normalization::None => "none",
            Normalization::SubtractMin => "subtract-min",
            Normalization::DivideMin => "divide-min",
            Normalization::ZScore => "z-score",
            Normalization::ZSorted => "z-sorted",
        }
    }

    /// Parse a name (`none`, `subtract-min`, `divide-min`, `z-score`, `z-sorted`).
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "none" => Normalization::None,
            "subtract-min" | "min" => Normalization::SubtractMin,
            "divide-min" | "base" | "divide-base" => Normalization::DivideMin,
            "z-score" | "zscore" | "z" => Normalization::ZScore,
            "z-sorted" | "zsorted" => Normalization::ZSorted,
            other => {
                return Err(Error::invalid(format!(
                    "unknown normalisation {other:?}; use none, subtract-min, divide-min, z-score or z-sorted"
                )))
            }
        })
    }

    /// Normalise `window` in place. Fails on non-finite values, or with
    /// `DivideMin` when the minimum is not positive. Never allocates
    /// (`ZSorted` sorts in place).
    pub fn apply(self, window: &mut [f64]) -> Result<()> {
        check_finite("window", window)?;
        if window.is_empty() {
            return Ok(());
        }
        match self {
            Normalization::None => {}
            Normalization::SubtractMin => {
                let m = window.iter().copied().fold(f64::INFINITY, f64::min);
                window.iter_mut().for_each(|v| *v -= m);
            }
            Normalization::DivideMin => {
                let m = window.iter().copied().fold(f64::INFINITY, f64::min);
                if m <= 0.0 {
                    return Err(Error::invalid(format!(
                        "divide-min normalisation needs a positive minimum RTT, the window's minimum is {m}"
                    )));
                }
                window.iter_mut().for_each(|v| *v /= m);
            }
            Normalization::ZScore | Normalization::ZSorted => {
                let n = window.len() as f64;
                let mean = window.iter().sum::<f64>() / n;
                let var = window.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                let sd = var.sqrt();
                if sd > 0.0 {
                    window.iter_mut().for_each(|v| *v = (*v - mean) / sd);
                } else {
                    window.iter_mut().for_each(|v| *v = 0.0);
                }
                if self == Normalization::ZSorted {
                    // Finite values: `total_cmp` orders them as `<` does
                    // (−0 before +0, which compare equal anyway).
                    window.sort_unstable_by(f64::total_cmp);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregator_means_ten_echoes() {
        let echoes: Vec<f64> = (0..25).map(|i| 65.0 + i as f64).collect();
        let s = aggregate(&echoes, 10).unwrap();
        assert_eq!(s, vec![69.5, 79.5]);
    }

    #[test]
    fn aggregator_handles_losses() {
        let mut a = Aggregator::new(3).unwrap();
        assert_eq!(a.push(10.0).unwrap(), None);
        assert_eq!(a.push_lost(), None);
        assert_eq!(a.push(20.0).unwrap(), Some(Some(15.0)));
        assert_eq!(a.push_lost(), None);
        assert_eq!(a.push_lost(), None);
        assert_eq!(a.push_lost(), Some(None));
        assert!(a.push(f64::NAN).is_err());
        assert!(Aggregator::new(0).is_err());
    }

    #[test]
    fn windows_are_non_overlapping() {
        let s: Vec<f64> = (0..45).map(f64::from).collect();
        let w: Vec<&[f64]> = windows(&s, 20).unwrap().collect();
        assert_eq!(w.len(), 2);
        assert_eq!(w[1][0], 20.0);
        assert!(windows(&s, 0).is_err());
    }

    #[test]
    fn normalisations() {
        let mut w = [66.0, 70.0, 68.0];
        Normalization::SubtractMin.apply(&mut w).unwrap();
        assert_eq!(w, [0.0, 4.0, 2.0]);
        let mut w = [65.0, 130.0];
        Normalization::DivideMin.apply(&mut w).unwrap();
        assert_eq!(w, [1.0, 2.0]);
        let mut w = [1.0, 3.0];
        Normalization::ZScore.apply(&mut w).unwrap();
        assert_eq!(w, [-1.0, 1.0]);
        let mut w = [3.0, 1.0];
        Normalization::ZSorted.apply(&mut w).unwrap();
        assert_eq!(w, [-1.0, 1.0]);
        let mut w = [5.0, 1.0, 3.0, 3.0];
        Normalization::ZSorted.apply(&mut w).unwrap();
        let sd = 2f64.sqrt();
        assert_eq!(w, [-2.0 / sd, 0.0, 0.0, 2.0 / sd]);
        let mut w = [0.0, 1.0];
        assert!(Normalization::DivideMin.apply(&mut w).is_err());
        let mut w = [1.0, f64::INFINITY];
        assert!(Normalization::None
            .apply(&mut w)
            .unwrap_err()
            .to_string()
            .contains("index 1"));
        for n in [
            Normalization::None,
            Normalization::SubtractMin,
            Normalization::DivideMin,
            Normalization::ZScore,
            Normalization::ZSorted,
        ] {
            assert_eq!(Normalization::parse(n.name()).unwrap(), n);
        }
    }
}
