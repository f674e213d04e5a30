//! Per-protocol knowledge: one monitoring period's raw histogram H, mean M and
//! count N, and the stored {D, M, N} they are merged into by Alg 2 (002 §4.4,
//! Knowledge Update).

use super::utility::{Qos, HIST_SLOTS};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// What one monitoring period observed for one metric: raw counts H per
/// histogram slot, the mean M of every value and the count N (002 §4.4: "the
/// buffer is flushed and reduced to H, M, N"). Fixed size, so adding a sample
/// never allocates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeriodStats {
    counts: [u64; HIST_SLOTS],
    sum: f64,
    n: u64,
}

impl Default for PeriodStats {
    fn default() -> Self {
        Self {
            counts: [0; HIST_SLOTS],
            sum: 0.0,
            n: 0,
        }
    }
}

impl PeriodStats {
    /// An empty period.
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one finite value (callers reject NaN before; a non-finite value
    /// here is ignored so the mean stays finite).
    pub fn push(&mut self, qos: &Qos, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.counts[qos.slot(x)] += 1;
        self.sum += x;
        self.n += 1;
    }

    /// Number of values N.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Mean M of every value (not only the ramp ones), 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    /// Raw counts H per slot (see [`Qos::slot`]).
    pub fn counts(&self) -> &[u64; HIST_SLOTS] {
        &self.counts
    }

    /// Forget everything (start of the next monitoring period).
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The serde form a receiver sends back at the end of a period (002
    /// §4.4: the receiver's monitor "computes H, M and N for throughput and
    /// sends them back").
    pub fn to_report(&self, qos: &Qos) -> PeriodReport {
        PeriodReport {
            counts: self.counts[..qos.slots()].to_vec(),
            mean: self.mean(),
            n: self.n,
        }
    }

    /// Rebuild from a report, checking it against the layout of `qos`.
    pub fn from_report(qos: &Qos, r: &PeriodReport) -> Result<Self> {
        if r.counts.len() != qos.slots() {
            return Err(Error::invalid(format!(
                "period report has {} histogram slots but this QoS range uses {}; both ends must use the same spec",
                r.counts.len(),
                qos.slots()
            )));
        }
        let total: u64 = r.counts.iter().sum();
        if total != r.n {
            return Err(Error::invalid(format!(
                "period report counts sum to {total} but n = {}; a report must count every value once",
                r.n
            )));
        }
        if !r.mean.is_finite() {
            return Err(Error::invalid(format!(
                "period report mean {} is not finite",
                r.mean
            )));
        }
        let mut s = Self::default();
        s.counts[..r.counts.len()].copy_from_slice(&r.counts);
        s.n = r.n;
        s.sum = r.mean * r.n as f64;
        Ok(s)
    }
}

/// {H, M, N} of one period as a serde message (receiver → sender).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeriodReport {
    /// Raw counts per histogram slot: good, bad, then the ramp bins.
    pub counts: Vec<u64>,
    /// Mean of every value in the period.
    pub mean: f64,
    /// Number of values.
    pub n: u64,
}

/// How much history the stored statistics keep. The thesis's Alg 2 keeps all
/// of it (N only grows), which it flags as a flaw: N can overflow and old
/// periods never fade (002 §4.4, "Known drawback"). `decay` < 1 or a
/// `max_weight` make the knowledge track a changing path.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct History {
    /// Factor on the stored weight N before each merge, in (0, 1]; 1 is the
    /// thesis. 0.5 halves the weight of the past at every period.
    pub decay: f64,
    /// Cap on the stored weight before each merge (a saturating N);
    /// `None` is the thesis (unbounded).
    pub max_weight: Option<f64>,
}

impl Default for History {
    fn default() -> Self {
        Self {
            decay: 1.0,
            max_weight: None,
        }
    }
}

impl History {
    /// Check `0 < decay <= 1` and `max_weight > 0`.
    pub fn validate(&self) -> Result<()> {
        if !(self.decay > 0.0 && self.decay <= 1.0) {
            return Err(Error::invalid(format!(
                "history decay {} must be in (0, 1]; 1 keeps all history as in 002 Alg 2",
                self.decay
            )));
        }
        if let Some(w) = self.max_weight {
            if !(w > 0.0 && w.is_finite()) {
                return Err(Error::invalid(format!(
                    "history max_weight {w} must be a finite number > 0 (samples), or null for no cap"
                )));
            }
        }
        Ok(())
    }
}

/// The stored knowledge for one metric of one protocol: the normalised
/// distribution D over histogram slots, the mean M and the weight N
/// (002 §4.4: "histograms are always stored as distributions, ready for
/// Alg 1"). N is a float so that decay can shrink it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricStats {
    dist: [f64; HIST_SLOTS],
    mean: f64,
    n: f64,
}

impl Default for MetricStats {
    fn default() -> Self {
        Self {
            dist: [0.0; HIST_SLOTS],
            mean: 0.0,
            n: 0.0,
        }
    }
}

impl MetricStats {
    /// Weight N (number of samples, possibly decayed); 0 = no statistics.
    pub fn n(&self) -> f64 {
        self.n
    }

    /// Mean M.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Distribution D over slots (sums to 1 once N > 0).
    pub fn dist(&self) -> &[f64; HIST_SLOTS] {
        &self.dist
    }

    /// U_stat = Σᵢ uᵢ·dᵢ, the expected utility of this metric (002 §4.5
    /// Alg 1, validity test; Eq 4.1 inner sum). 0 without statistics.
    pub fn expected_utility(&self, qos: &Qos) -> f64 {
        let mut u = 0.0;
        for (i, d) in self.dist[..qos.slots()].iter().enumerate() {
            u += qos.slot_utility(i) * d;
        }
        u
    }

    /// 002 Alg 2, Knowledge Update, with the optional [`History`]:
    /// ```text
    /// if stats exist: N_new = N_old + N; M_new = (M_old·N_old + M·N) / N_new;
    ///                 D_new = (D_old·N_old + H) / N_new
    /// else:           D = H / N; store [D, M, N]
    /// ```
    /// With decay λ and cap W, N_old is first replaced by min(λ·N_old, W).
    /// The first branch with N_old = 0 is the second branch, so one formula
    /// serves both. An empty period changes nothing.
    pub fn merge(&mut self, period: &PeriodStats, history: &History) {
        if period.n == 0 {
            return;
        }
        let mut old = self.n * history.decay;
        if let Some(w) = history.max_weight {
            old = old.min(w);
        }
        let add = period.n as f64;
        let n_new = old + add;
        self.mean = (self.mean * old + period.sum) / n_new;
        for (d, &h) in self.dist.iter_mut().zip(period.counts.iter()) {
            *d = (*d * old + h as f64) / n_new;
        }
        self.n = n_new;
    }

    /// Merge another stored statistic as if its periods had been merged
    /// here (Alg 2 with D·N standing in for H); with the thesis history
    /// (no decay) this is associative and commutative.
    pub fn merge_stats(&mut self, other: &MetricStats) {
        if other.n == 0.0 {
            return;
        }
        let n_new = self.n + other.n;
        self.mean = (self.mean * self.n + other.mean * other.n) / n_new;
        for (d, &o) in self.dist.iter_mut().zip(other.dist.iter()) {
            *d = (*d * self.n + o * other.n) / n_new;
        }
        self.n = n_new;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt() -> Qos {
        Qos::new("rtt_ms", 0.0, 300.0, 0.0, 400.0, 10).unwrap()
    }

    /// Alg 2 by hand: period 1 = {100, 305, 500} then period 2 = {100}.
    /// D after 1: good 1/3, bin0 1/3, bad 1/3; M = 301.67; N = 3.
    /// After 2: good 2/4, bin0 1/4, bad 1/4; M = 251.25; N = 4.
    #[test]
    fn golden_alg2_merge() {
        let q = rtt();
        let h = History::default();
        let mut p = PeriodStats::new();
        for x in [100.0, 305.0, 500.0] {
            p.push(&q, x);
        }
        let mut s = MetricStats::default();
        s.merge(&p, &h);
        assert_eq!(s.n(), 3.0);
        assert!((s.mean() - 905.0 / 3.0).abs() < 1e-12);
        assert!((s.dist()[0] - 1.0 / 3.0).abs() < 1e-15);
        assert!((s.dist()[1] - 1.0 / 3.0).abs() < 1e-15);
        assert!((s.dist()[2] - 1.0 / 3.0).abs() < 1e-15);
        // U_stat = 1·1/3 + 0.95·1/3 + 0·1/3 = 0.65.
        assert!((s.expected_utility(&q) - 0.65).abs() < 1e-12);
        let mut p2 = PeriodStats::new();
        p2.push(&q, 100.0);
        s.merge(&p2, &h);
        assert_eq!(s.n(), 4.0);
        assert!((s.mean() - 251.25).abs() < 1e-12);
        assert!((s.dist()[0] - 0.5).abs() < 1e-15);
        assert!((s.dist()[2] - 0.25).abs() < 1e-15);
    }

    #[test]
    fn decay_and_cap_weight_the_past() {
        let q = rtt();
        let mut bad = PeriodStats::new();
        let mut good = PeriodStats::new();
        for _ in 0..10 {
            bad.push(&q, 1000.0);
            good.push(&q, 10.0);
        }
        let half = History {
            decay: 0.5,
            max_weight: None,
        };
        let mut s = MetricStats::default();
        s.merge(&bad, &half);
        s.merge(&good, &half);
        // Old weight 10·0.5 = 5 against 10 new: D_good = 10/15.
        assert!((s.dist()[0] - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.n(), 15.0);
        let capped = History {
            decay: 1.0,
            max_weight: Some(2.0),
        };
        let mut s = MetricStats::default();
        s.merge(&bad, &capped);
        s.merge(&good, &capped);
        assert!((s.dist()[0] - 10.0 / 12.0).abs() < 1e-12);
        assert_eq!(s.n(), 12.0);
        for (h, needle) in [
            (
                History {
                    decay: 0.0,
                    max_weight: None,
                },
                "decay 0",
            ),
            (
                History {
                    decay: f64::NAN,
                    max_weight: None,
                },
                "decay NaN",
            ),
            (
                History {
                    decay: 1.0,
                    max_weight: Some(-1.0),
                },
                "max_weight -1",
            ),
        ] {
            let e = h.validate().unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn report_round_trip_and_checks() {
        let q = rtt();
        let mut p = PeriodStats::new();
        for x in [1.0, 350.0, 399.0, 1e9] {
            p.push(&q, x);
        }
        p.push(&q, f64::NAN);
        assert_eq!(p.n(), 4);
        let r = p.to_report(&q);
        assert_eq!(r.counts.len(), 12);
        let json = serde_json::to_string(&r).unwrap();
        let back: PeriodReport = serde_json::from_str(&json).unwrap();
        assert_eq!(PeriodStats::from_report(&q, &back).unwrap(), p);
        let mut wrong = r.clone();
        wrong.n = 5;
        assert!(PeriodStats::from_report(&q, &wrong)
            .unwrap_err()
            .to_string()
            .contains("sum to 4 but n = 5"));
        wrong = r.clone();
        wrong.counts.pop();
        assert!(PeriodStats::from_report(&q, &wrong)
            .unwrap_err()
            .to_string()
            .contains("11 histogram slots"));
        p.clear();
        assert_eq!(p, PeriodStats::new());
    }
}
