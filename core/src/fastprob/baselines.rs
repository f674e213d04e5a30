//! The probing baselines FastProb is compared with (004 §III, §V): closeness θ,
//! autoregression with the 5 % stop rule, last-k mean, fixed size, fixed duration.
//! (The fixed-n RF baseline is [`super::FastProbModel::predict_fixed`].)
//!
//! Each baseline replays its online rule over a recorded log: it may only look at
//! the samples up to the moment it stops, and reports how many it consumed.

use super::metrics::{check_samples, Estimate};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Denominator of "t_k and t_{k−1} are within θ" (004 §III leaves it open; both
/// reproduce the paper's example).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Denominator {
    /// `|t_k − t_{k−1}| ≤ θ · max(t_k, t_{k−1})` (the looser reading).
    #[default]
    Max,
    /// `|t_k − t_{k−1}| ≤ θ · min(t_k, t_{k−1})`.
    Min,
}

/// What the "third-degree linear regression" of the AR baseline means (004 §III
/// leaves it open): an AR(3) on the previous three values, or a cubic trend in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArVariant {
    /// `t_k = a0 + a1 t_{k−1} + a2 t_{k−2} + a3 t_{k−3}`, least squares.
    #[default]
    Ar3,
    /// `t_k = b0 + b1 k + b2 k² + b3 k³`, least squares.
    CubicTrend,
}

/// A baseline probing method and its parameters (serde: `{"method": "closeness", …}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Baseline {
    /// 004 §III: converged at the first k whose sample is within θ of the previous
    /// one; `t_pred = mean(t_{k−1}, t_k)`. Swept θ = 5–30 % in the paper (Fig. 3).
    Closeness {
        /// θ as a fraction (0.2 = 20 %).
        theta: f64,
        #[serde(default)]
        denominator: Denominator,
        /// Stop at this many samples at the latest (forced); `None`: the log's length.
        #[serde(default)]
        cap: Option<usize>,
    },
    /// 004 §III [Sapkota 2019]: after each interval, stop when the previous fit's
    /// one-step prediction is within `tolerance` (5 %) of the observation; the
    /// estimate is the refitted model's next-interval prediction. Cap 15 samples.
    Ar {
        #[serde(default)]
        variant: ArVariant,
        #[serde(default = "five_pct")]
        tolerance: f64,
        #[serde(default = "fifteen")]
        cap: usize,
    },
    /// 004 §III (the DNN-classifier baseline's estimator): the mean of the last `k`
    /// (4) samples, taken after `stop` samples.
    LastK {
        #[serde(default = "four")]
        k: usize,
        stop: usize,
    },
    /// 004 §III [Yildirim 2013]: transfer `bytes`, then report bytes / time.
    FixedSize { bytes: u64 },
    /// 004 §III [Yun 2019]: probe for `duration_ns` (5 s HPCLab/ESnet, 8 s XSEDE).
    FixedDuration { duration_ns: u64 },
}

fn five_pct() -> f64 {
    0.05
}
fn fifteen() -> usize {
    15
}
fn four() -> usize {
    4
}

fn mean(s: &[f64]) -> f64 {
    s.iter().sum::<f64>() / s.len() as f64
}

impl Baseline {
    /// Check the parameters; errors name the bad value.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Baseline::Closeness { theta, cap, .. } => {
                if !(theta.is_finite() && theta > 0.0 && theta < 1.0) {
                    return Err(Error::invalid(format!(
                        "closeness theta {theta} must be a fraction in (0, 1) (004 §III sweeps 0.05-0.30)"
                    )));
                }
                if cap == Some(0) {
                    return Err(Error::invalid(
                        "closeness cap 0: give at least 1 sample or none",
                    ));
                }
            }
            Baseline::Ar { tolerance, cap, .. } => {
                if !(tolerance.is_finite() && tolerance > 0.0 && tolerance < 1.0) {
                    return Err(Error::invalid(format!(
                        "AR tolerance {tolerance} must be a fraction in (0, 1) (004 §III default 0.05)"
                    )));
                }
                if cap == 0 {
                    return Err(Error::invalid(
                        "AR cap 0: give at least 1 sample (004 §III: 15)",
                    ));
                }
            }
            Baseline::LastK { k, stop } => {
                if k == 0 || stop == 0 {
                    return Err(Error::invalid(format!(
                        "last-k mean needs k >= 1 and stop >= 1, got k = {k}, stop = {stop}"
                    )));
                }
            }
            Baseline::FixedSize { bytes } => {
                if bytes == 0 {
                    return Err(Error::invalid(
                        "fixed-size probe of 0 bytes; give the probe size",
                    ));
                }
            }
            Baseline::FixedDuration { duration_ns } => {
                if duration_ns == 0 {
                    return Err(Error::invalid(
                        "fixed-duration probe of 0 ns; give the probe duration",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Replay the method over a log sampled every `interval_ns`. Errors on invalid
    /// parameters, an empty log, NaN or negative samples, or `interval_ns == 0`.
    pub fn run(&self, samples_bps: &[f64], interval_ns: u64) -> Result<Estimate> {
        self.validate()?;
        if samples_bps.is_empty() {
            return Err(Error::invalid("baseline run on an empty log"));
        }
        if interval_ns == 0 {
            return Err(Error::invalid(
                "interval_ns is 0; give the sampling interval",
            ));
        }
        check_samples(samples_bps)?;
        Ok(match *self {
            Baseline::Closeness {
                theta,
                denominator,
                cap,
            } => closeness(samples_bps, theta, denominator, cap),
            Baseline::Ar {
                variant,
                tolerance,
                cap,
            } => ar(samples_bps, variant, tolerance, cap),
            Baseline::LastK { k, stop } => {
                let n = stop.min(samples_bps.len());
                Estimate {
                    samples: n,
                    prediction_bps: last_k_mean(&samples_bps[..n], k),
                    forced: n < stop,
                }
            }
            Baseline::FixedSize { bytes } => {
                // Bytes moved per interval = rate · i / 8.
                let per = interval_ns as f64 * 1e-9 / 8.0;
                let mut moved = 0.0;
                let mut n = samples_bps.len();
                let mut forced = true;
                for (k, s) in samples_bps.iter().enumerate() {
                    moved += s * per;
                    if moved >= bytes as f64 {
                        n = k + 1;
                        forced = false;
                        break;
                    }
                }
                Estimate {
                    samples: n,
                    prediction_bps: mean(&samples_bps[..n]),
                    forced,
                }
            }
            Baseline::FixedDuration { duration_ns } => {
                let want = duration_ns.div_ceil(interval_ns);
                let n = usize::try_from(want)
                    .unwrap_or(usize::MAX)
                    .min(samples_bps.len());
                Estimate {
                    samples: n,
                    prediction_bps: mean(&samples_bps[..n]),
                    forced: (n as u64) < want,
                }
            }
        })
    }
}

/// Mean of the last `k` samples of `prefix` (all of them when shorter); 0 for an
/// empty prefix.
pub fn last_k_mean(prefix: &[f64], k: usize) -> f64 {
    if prefix.is_empty() || k == 0 {
        return 0.0;
    }
    mean(&prefix[prefix.len().saturating_sub(k)..])
}

fn closeness(s: &[f64], theta: f64, d: Denominator, cap: Option<usize>) -> Estimate {
    let end = cap.unwrap_or(s.len()).min(s.len());
    for k in 1..end {
        let (a, b) = (s[k - 1], s[k]);
        let den = match d {
            Denominator::Max => a.max(b),
            Denominator::Min => a.min(b),
        };
        // Two zero samples are a stall, not convergence (our choice; 004 §III is silent).
        if den > 0.0 && (b - a).abs() <= theta * den {
            return Estimate {
                samples: k + 1,
                prediction_bps: 0.5 * (a + b),
                forced: false,
            };
        }
    }
    Estimate {
        samples: end,
        prediction_bps: last_k_mean(&s[..end], 2),
        forced: true,
    }
}

/// Design row for predicting the value at 0-based position `j` of `s`.
fn design(v: ArVariant, s: &[f64], j: usize, scale_t: f64) -> [f64; 4] {
    match v {
        ArVariant::Ar3 => [1.0, s[j - 1], s[j - 2], s[j - 3]],
        ArVariant::CubicTrend => {
            let t = j as f64 / scale_t;
            [1.0, t, t * t, t * t * t]
        }
    }
}

fn first_target(v: ArVariant) -> usize {
    match v {
        ArVariant::Ar3 => 3,
        ArVariant::CubicTrend => 0,
    }
}

/// Least-squares fit on `s` (already normalised) and prediction of `s[len]`. `None`
/// when there are fewer equations than the 4 coefficients.
fn fit_predict_next(v: ArVariant, s: &[f64]) -> Option<f64> {
    let m = s.len();
    let j0 = first_target(v);
    if m < j0 + 4 {
        return None;
    }
    // Time scaled to [0, 1] keeps the cubic's normal equations well conditioned.
    let scale_t = m as f64;
    let mut a = [[0.0f64; 4]; 4];
    let mut b = [0.0f64; 4];
    for j in j0..m {
        let x = design(v, s, j, scale_t);
        for r in 0..4 {
            b[r] += x[r] * s[j];
            for c in 0..4 {
                a[r][c] += x[r] * x[c];
            }
        }
    }
    // A tiny ridge makes collinear designs (a constant series) solvable; it moves
    // well-posed fits by ~1e-9 relative.
    let tr = (0..4).map(|i| a[i][i]).sum::<f64>();
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += 1e-9 * tr.max(1e-300);
    }
    let coef = solve4(a, b)?;
    let x = match v {
        ArVariant::Ar3 => [1.0, s[m - 1], s[m - 2], s[m - 3]],
        ArVariant::CubicTrend => design(v, s, m, scale_t),
    };
    let p: f64 = (0..4).map(|i| coef[i] * x[i]).sum();
    p.is_finite().then_some(p)
}

/// Gaussian elimination with partial pivoting on a 4×4 system.
fn solve4(mut a: [[f64; 4]; 4], mut b: [f64; 4]) -> Option<[f64; 4]> {
    for c in 0..4 {
        let p = (c..4).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[p][c] == 0.0 || !a[p][c].is_finite() {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        let pivot = a[c];
        for r in c + 1..4 {
            let f = a[r][c] / pivot[c];
            for (x, p) in a[r][c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = [0.0; 4];
    for r in (0..4).rev() {
        let s: f64 = (r + 1..4).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

/// One-step prediction of the sample after `prefix`, in the prefix's units, or
/// `None` when the prefix is too short to fit. Normalised by the prefix mean so the
/// fit is independent of the rate's magnitude.
pub fn ar_predict_next(v: ArVariant, prefix: &[f64], work: &mut [f64; 64]) -> Option<f64> {
    let m = prefix.len().min(64);
    let p = &prefix[prefix.len() - m..];
    let mu = mean(p);
    if mu <= 0.0 {
        return (m >= first_target(v) + 4).then_some(0.0);
    }
    for (w, x) in work.iter_mut().zip(p) {
        *w = x / mu;
    }
    fit_predict_next(v, &work[..m]).map(|y| (y * mu).max(0.0))
}

fn ar(s: &[f64], v: ArVariant, tol: f64, cap: usize) -> Estimate {
    let end = cap.min(s.len());
    let mut work = [0.0; 64];
    // Observing sample k (0-based): the fit on s[..k] predicted it.
    for k in 1..end {
        if let Some(pred) = ar_predict_next(v, &s[..k], &mut work) {
            if s[k] > 0.0 && (pred - s[k]).abs() <= tol * s[k] {
                let next = ar_predict_next(v, &s[..=k], &mut work).unwrap_or(pred);
                return Estimate {
                    samples: k + 1,
                    prediction_bps: next,
                    forced: false,
                };
            }
        }
    }
    let pred = ar_predict_next(v, &s[..end], &mut work).unwrap_or_else(|| mean(&s[..end]));
    Estimate {
        samples: end,
        prediction_bps: pred,
        forced: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn closeness_example_of_004_iii() {
        // 004 §III: {100, 800, 1200, 1600, 1250, 1400}, θ = 20 % → converged at the
        // 6th second, t_pred = 1325; both denominators agree.
        let s = [100.0, 800.0, 1200.0, 1600.0, 1250.0, 1400.0];
        for d in [Denominator::Max, Denominator::Min] {
            let b = Baseline::Closeness {
                theta: 0.2,
                denominator: d,
                cap: None,
            };
            let e = b.run(&s, SEC).unwrap();
            assert_eq!(e.samples, 6, "{d:?}");
            assert_eq!(e.prediction_bps, 1325.0);
            assert!(!e.forced);
        }
        // θ = 30 % with max: 1200 → 1600 (400 ≤ 480) converges at the 4th second.
        let e = Baseline::Closeness {
            theta: 0.3,
            denominator: Denominator::Max,
            cap: None,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!((e.samples, e.prediction_bps), (4, 1400.0));
        // Cap 4: forced with the mean of the last two observed.
        let e = Baseline::Closeness {
            theta: 0.2,
            denominator: Denominator::Max,
            cap: Some(4),
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!((e.samples, e.prediction_bps, e.forced), (4, 1400.0, true));
    }

    #[test]
    fn closeness_stops_early_on_a_stall_plateau() {
        // 004 §III: 1–2-s stalls defeat the rule; zeros are not convergence here but
        // a low plateau right after a stall is.
        let s = [500.0, 0.0, 0.0, 90.0, 95.0, 1000.0, 1000.0];
        let e = Baseline::Closeness {
            theta: 0.1,
            denominator: Denominator::Max,
            cap: None,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!((e.samples, e.prediction_bps), (5, 92.5));
    }

    #[test]
    fn ar_stops_on_a_predictable_series() {
        // A linear ramp is fitted exactly by the cubic trend: the first check (5th
        // sample) matches, and the estimate is the ramp's next value.
        let s: Vec<f64> = (0..20).map(|j| 100.0 + 10.0 * j as f64).collect();
        let e = Baseline::Ar {
            variant: ArVariant::CubicTrend,
            tolerance: 0.05,
            cap: 15,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!(e.samples, 5);
        assert!((e.prediction_bps - 150.0).abs() < 1e-4, "{e:?}");
        // AR(3) on a constant series needs 7 samples to fit, stops at the 8th.
        let e = Baseline::Ar {
            variant: ArVariant::Ar3,
            tolerance: 0.05,
            cap: 15,
        }
        .run(&[800.0; 30], SEC)
        .unwrap();
        assert_eq!(e.samples, 8);
        assert!((e.prediction_bps - 800.0).abs() < 1e-3, "{e:?}");
        assert!(!e.forced);
    }

    #[test]
    fn ar_is_forced_at_the_cap_on_noise() {
        // Alternating samples are never within 5 % of a cubic fit.
        let s: Vec<f64> = (0..40)
            .map(|j| if j % 2 == 0 { 100.0 } else { 1000.0 })
            .collect();
        let e = Baseline::Ar {
            variant: ArVariant::CubicTrend,
            tolerance: 0.05,
            cap: 15,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!(e.samples, 15);
        assert!(e.forced);
        assert!(e.prediction_bps.is_finite() && e.prediction_bps >= 0.0);
    }

    #[test]
    fn last_k_fixed_size_and_duration() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let e = Baseline::LastK { k: 4, stop: 6 }.run(&s, SEC).unwrap();
        assert_eq!((e.samples, e.prediction_bps), (6, 4.5));
        assert_eq!(last_k_mean(&s[..2], 4), 1.5);
        // 8 bit/s for 1 s = 1 byte per sample: 3 bytes after 2 samples of 1 and 2.
        let e = Baseline::FixedSize { bytes: 3 }
            .run(&[8.0, 16.0, 8.0], SEC)
            .unwrap();
        assert_eq!((e.samples, e.prediction_bps, e.forced), (2, 12.0, false));
        let e = Baseline::FixedSize { bytes: 100 }
            .run(&[8.0, 16.0], SEC)
            .unwrap();
        assert!(e.forced);
        // 5 s at 1 s; 2.5 s at 1 s rounds up to 3 samples.
        let e = Baseline::FixedDuration {
            duration_ns: 5 * SEC,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!((e.samples, e.prediction_bps), (5, 3.0));
        let e = Baseline::FixedDuration {
            duration_ns: 5 * SEC / 2,
        }
        .run(&s, SEC)
        .unwrap();
        assert_eq!(e.samples, 3);
    }

    #[test]
    fn bad_parameters_and_input_are_errors() {
        let c = |theta| Baseline::Closeness {
            theta,
            denominator: Denominator::Max,
            cap: None,
        };
        assert!(c(0.0).run(&[1.0, 2.0], SEC).is_err());
        assert!(c(f64::NAN).run(&[1.0, 2.0], SEC).is_err());
        assert!(c(0.2).run(&[], SEC).is_err());
        assert!(c(0.2).run(&[1.0, f64::NAN], SEC).is_err());
        assert!(c(0.2).run(&[1.0, 2.0], 0).is_err());
        assert!(Baseline::LastK { k: 0, stop: 3 }.validate().is_err());
        assert!(Baseline::FixedSize { bytes: 0 }.validate().is_err());
        assert!(Baseline::FixedDuration { duration_ns: 0 }
            .validate()
            .is_err());
        assert!(Baseline::Ar {
            variant: ArVariant::Ar3,
            tolerance: 2.0,
            cap: 15
        }
        .validate()
        .is_err());
    }

    #[test]
    fn serde_defaults() {
        let b: Baseline = serde_json::from_str(r#"{"method": "ar"}"#).unwrap();
        assert_eq!(
            b,
            Baseline::Ar {
                variant: ArVariant::Ar3,
                tolerance: 0.05,
                cap: 15
            }
        );
        let b: Baseline =
            serde_json::from_str(r#"{"method": "closeness", "theta": 0.2, "denominator": "min"}"#)
                .unwrap();
        assert!(matches!(
            b,
            Baseline::Closeness {
                denominator: Denominator::Min,
                ..
            }
        ));
        assert!(serde_json::from_str::<Baseline>(
            r#"{"method": "closeness", "theta": 0.2, "x": 1}"#
        )
        .is_err());
    }
}
