//! Fairness metrics: Jain's index, fair share and the foreground's share of it
//! (000 Eq. 2.1, §4.2, §7.6.2); the DPS fairness manager (002 §4.6: round-robin
//! lock/unlock, State keys, Alg 4 violation detection) and its messages.
//!
//! The thesis computes Jain over the foreground and background streams sharing
//! the bottleneck and calls the equal split of the bottleneck the fair share
//! ("250 Mb/s represents a fair share" of 500 Mb/s with 2 streams, 000 §4.2).
//!
//! Jain's index, then one round of the manager (002 Fig 4.4: unlock → learnt →
//! lock → locked(cca) → the next flow's unlock) and a violation (Alg 4):
//!
//! ```
//! use opsel::fair::{self, Command, FairnessSpec, FlowReport, FlowState, Manager};
//!
//! assert_eq!(fair::jain(&[250.0, 250.0])?, 1.0); // equal split
//! assert_eq!(fair::jain(&[500.0, 0.0])?, 0.5); // one stream takes all: 1/n
//! assert_eq!(fair::fair_share(500.0, 2)?, 250.0);
//!
//! let mut m = Manager::new(FairnessSpec::default())?;
//! m.register(1)?;
//! m.register(2)?; // waits for its turn
//! assert_eq!(m.poll(), Some((1, Command::Unlock { state: vec![] })));
//! m.handle_report(1, &FlowReport::Learnt)?;
//! assert_eq!(m.poll(), Some((1, Command::Lock)));
//! m.handle_report(1, &FlowReport::Locked { cca: "bbr".into() })?;
//! assert_eq!(m.flow(1), Some((FlowState::Locked, Some("bbr"))));
//! assert_eq!(m.poll(), Some((2, Command::Unlock { state: vec!["bbr".into()] })));
//! // Flow 2 starves flow 1: J = 0.61 < F_thresh 0.80, sample after sample.
//! m.report_rate(1, 10.0)?;
//! m.report_rate(2, 90.0)?;
//! for _ in 0..4 {
//!     assert!(m.evaluate().unwrap() < 0.8);
//! }
//! assert!(matches!(m.poll(), Some((2, Command::Violation { .. }))));
//! # Ok::<(), opsel::Error>(())
//! ```

mod manager;
mod messages;
#[cfg(target_os = "linux")]
mod service;

pub use manager::{FairnessSpec, FlowState, Manager, ManagerStats, ViolationDetector};
pub use messages::{state_key, Command, Envelope, FlowId, FlowReport};
#[cfg(target_os = "linux")]
pub use service::{ClientMessage, ManagerClient, ManagerService};

use crate::error::{check_finite, Error, Result};

/// Jain's fairness index J(x) = (Σxᵢ)² / (n·Σxᵢ²) (000 Eq. 2.1).
///
/// J lies in [1/n, 1]: 1 when all rates are equal, 1/n when one stream takes
/// everything. Rates must be finite and non-negative (any unit; J is scale
/// invariant). All-zero rates are an equal split and give 1.
pub fn jain(rates: &[f64]) -> Result<f64> {
    if rates.is_empty() {
        return Err(Error::invalid("Jain's index needs at least one rate; pass the throughput of every stream sharing the bottleneck"));
    }
    check_finite("rates", rates)?;
    if let Some(i) = rates.iter().position(|&x| x < 0.0) {
        return Err(Error::invalid(format!(
            "rate {} at index {i} is negative; throughputs must be >= 0",
            rates[i]
        )));
    }
    // Scale by the maximum first so that squares of huge rates (bit/s near
    // f64::MAX) cannot overflow and tiny ones cannot underflow.
    let max = rates.iter().fold(0.0f64, |m, &x| m.max(x));
    if max == 0.0 {
        return Ok(1.0);
    }
    let (mut sum, mut sum_sq) = (0.0f64, 0.0f64);
    for &x in rates {
        let y = x / max;
        sum += y;
        sum_sq += y * y;
    }
    let n = rates.len() as f64;
    // Clamp away last-ulp rounding so the documented range holds exactly.
    Ok((sum * sum / (n * sum_sq)).clamp(1.0 / n, 1.0))
}

/// Equal share of a bottleneck of `capacity` among `n_streams` (000 §4.2).
pub fn fair_share(capacity: f64, n_streams: usize) -> Result<f64> {
    if !capacity.is_finite() || capacity <= 0.0 {
        return Err(Error::invalid(format!(
            "bottleneck capacity {capacity} must be finite and > 0 (e.g. 500e6 bit/s)"
        )));
    }
    if n_streams == 0 {
        return Err(Error::invalid("fair share needs at least one stream; count the foreground and every background stream"));
    }
    Ok(capacity / n_streams as f64)
}

/// The foreground throughput as a fraction of its fair share: 1.0 is exactly
/// fair, < 1 starved, > 1 taking more than its share (000 §7.6.2: OPS 210–305
/// against a fair share of 250 is 0.84–1.22).
pub fn share_of_fair(foreground: f64, capacity: f64, n_streams: usize) -> Result<f64> {
    if !foreground.is_finite() || foreground < 0.0 {
        return Err(Error::invalid(format!(
            "foreground throughput {foreground} must be finite and >= 0"
        )));
    }
    Ok(foreground / fair_share(capacity, n_streams)?)
}

/// Fairness of one foreground stream against its background, as the thesis
/// reports it (000 Table 6.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FairnessReport {
    /// Jain over the foreground and every background stream.
    pub jain: f64,
    /// Equal share of the capacity (given, or the sum of observed rates).
    pub fair_share: f64,
    /// Foreground throughput / fair share.
    pub foreground_share_of_fair: f64,
}

impl FairnessReport {
    /// Build from the foreground rate and the background rates. `capacity` is
    /// the bottleneck rate if known; `None` uses the sum of the observed rates
    /// (what a link-saturating mix achieves).
    pub fn new(foreground: f64, background: &[f64], capacity: Option<f64>) -> Result<Self> {
        let n = background.len() + 1;
        // Jain over [fg, bg...] without allocating: same formula as `jain`.
        check_finite("background rates", background)?;
        let mut all_max = foreground.max(0.0);
        for &b in background {
            all_max = all_max.max(b);
        }
        let j = {
            let mut rates = [0.0f64; 8];
            if n <= rates.len() {
                rates[0] = foreground;
                rates[1..n].copy_from_slice(background);
                jain(&rates[..n])?
            } else {
                let mut v = Vec::with_capacity(n);
                v.push(foreground);
                v.extend_from_slice(background);
                jain(&v)?
            }
        };
        let cap = match capacity {
            Some(c) => c,
            None => foreground + background.iter().sum::<f64>(),
        };
        let fs = fair_share(cap, n).map_err(|e| {
            if capacity.is_none() && all_max == 0.0 {
                Error::invalid(
                    "all rates are 0, so no capacity can be inferred; pass the bottleneck capacity",
                )
            } else {
                e
            }
        })?;
        Ok(Self {
            jain: j,
            fair_share: fs,
            foreground_share_of_fair: foreground / fs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 000 §8 anchor A15 (Jain recomputed from Tables 4.2 and 6.3 means),
    /// checked to the digits the note states.
    #[test]
    fn golden_a15() {
        let cases: [(f64, f64, f64, f64); 6] = [
            (238.0, 253.0, 0.9991, 5e-5),
            (415.0, 75.6, 0.676, 5e-4),
            (398.0, 85.3, 0.705, 5e-4),
            (62.0, 474.0, 0.629, 5e-4),
            (465.0, 49.0, 0.604, 5e-4),
            (328.0, 221.0, 0.963, 5e-4),
        ];
        for (a, b, want, tol) in cases {
            let j = jain(&[a, b]).unwrap();
            assert!((j - want).abs() < tol, "J({a}, {b}) = {j}, want {want}");
        }
    }

    /// 000 Table 4.3 recomputed ([derived] in the note): 0.993, 0.645, 0.754.
    #[test]
    fn golden_table_4_3() {
        for (a, b, want) in [
            (412.0, 485.0, 0.993),
            (738.0, 109.0, 0.645),
            (591.0, 161.0, 0.754),
        ] {
            let j = jain(&[a, b]).unwrap();
            assert!((j - want).abs() < 5e-4, "J({a}, {b}) = {j}, want {want}");
        }
    }

    #[test]
    fn fair_share_ch7() {
        // 000 §7.6: 500 Mb/s, 2 streams → 250; OPS 210–305 is 0.84–1.22 of it.
        assert_eq!(fair_share(500.0, 2).unwrap(), 250.0);
        assert!((share_of_fair(210.0, 500.0, 2).unwrap() - 0.84).abs() < 1e-12);
        assert!((share_of_fair(305.0, 500.0, 2).unwrap() - 1.22).abs() < 1e-12);
        let r = FairnessReport::new(221.0, &[328.0], Some(500.0)).unwrap();
        assert!((r.jain - 0.963).abs() < 5e-4);
        assert!((r.foreground_share_of_fair - 0.884).abs() < 1e-12);
        let r = FairnessReport::new(100.0, &[100.0, 100.0], None).unwrap();
        assert_eq!(
            (r.jain, r.fair_share, r.foreground_share_of_fair),
            (1.0, 100.0, 1.0)
        );
    }

    #[test]
    fn bad_input() {
        assert!(jain(&[]).unwrap_err().to_string().contains("at least one"));
        assert!(jain(&[1.0, f64::NAN])
            .unwrap_err()
            .to_string()
            .contains("index 1"));
        assert!(jain(&[1.0, -2.0]).unwrap_err().to_string().contains("-2"));
        assert!(fair_share(0.0, 2).is_err());
        assert!(fair_share(500.0, 0).is_err());
        assert!(share_of_fair(f64::INFINITY, 500.0, 2).is_err());
        assert!(FairnessReport::new(0.0, &[0.0], None)
            .unwrap_err()
            .to_string()
            .contains("capacity"));
        assert_eq!(jain(&[0.0, 0.0]).unwrap(), 1.0);
        assert_eq!(jain(&[f64::MAX, f64::MAX]).unwrap(), 1.0);
    }

    #[test]
    fn many_streams_report() {
        let bg = [10.0; 12];
        let r = FairnessReport::new(10.0, &bg, None).unwrap();
        assert_eq!(r.jain, 1.0);
    }
}
