//! The application's QoS as a piecewise-linear utility per metric (002 §4.4,
//! Fig 4.3) and the fixed-size histogram layout over its ramps (002 §4.5).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The metrics DPS scores (002 §4.5 uses exactly these two: "RTT and
/// throughput"; cwnd and loss are not used, 002 §4.4 monitoring).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Round-trip time measured at the sender (`tcpi_rtt`), milliseconds.
    RttMs,
    /// Throughput, megabits per second: the receiver's goodput in the thesis
    /// (002 §4.4), or the sender's delivery rate (`tcpi_delivery_rate`).
    ThroughputMbps,
}

impl Metric {
    /// Every metric, in the order used for per-metric arrays.
    pub const ALL: [Metric; 2] = [Metric::RttMs, Metric::ThroughputMbps];

    /// The spec name (`"rtt_ms"`, `"throughput_mbps"`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::RttMs => "rtt_ms",
            Metric::ThroughputMbps => "throughput_mbps",
        }
    }

    /// Whether a larger mean is better, the direction of Eq 4.2 (002 §4.5:
    /// "Mean/ΣMean if higher is better, 1 − Mean/ΣMean if lower is better").
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::ThroughputMbps)
    }

    /// Index into per-metric arrays (`Metric::ALL[m.index()] == m`).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Ramp bins allowed per ramp (the spec's `bins`); fixes the histogram size
/// at compile time so nothing is allocated per sample (002 §4.5: "memory is
/// constant and small").
pub const MAX_RAMP_BINS: usize = 32;

/// Slots of a histogram: the saturated good and bad bins plus up to
/// [`MAX_RAMP_BINS`] on each of the two ramps.
pub const HIST_SLOTS: usize = 2 + 2 * MAX_RAMP_BINS;

/// Slot of the saturated-good bin (A ≤ x ≤ B, utility 1).
pub const GOOD: usize = 0;
/// Slot of the saturated-bad bin (x ≤ C or x ≥ D, utility 0).
pub const BAD: usize = 1;

/// A validated QoS requirement `[A, B, C, D]` (002 Fig 4.3) with its
/// histogram layout. Unbounded ends are ±∞: `A = C = −∞` means no lower
/// requirement, `B = D = +∞` no upper one. The thesis encodes "unbounded" with
/// sentinels (throughput `[9.5, 50, 8, 0]`, where D = 0 < B must mean "no
/// upper bound", 002 note §1.4 gap); the spec uses `null` instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Qos {
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    bins: usize,
}

impl Qos {
    /// Check `C ≤ A ≤ B ≤ D`, no NaN, finite or the matching infinity, and
    /// `1 ≤ bins ≤ MAX_RAMP_BINS`. `what` names the metric in messages.
    pub fn new(what: &str, a: f64, b: f64, c: f64, d: f64, bins: usize) -> Result<Self> {
        for (name, v) in [("A", a), ("B", b), ("C", c), ("D", d)] {
            if v.is_nan() {
                return Err(Error::invalid(format!(
                    "QoS range of {what} has {name} = NaN; give a number, or null for an unbounded end"
                )));
            }
        }
        let lower_ok =
            (a.is_finite() && c.is_finite()) || (a == f64::NEG_INFINITY && c == f64::NEG_INFINITY);
        if !lower_ok {
            return Err(Error::invalid(format!(
                "QoS range of {what} has A = {a}, C = {c}: give both as numbers (C = A for a hard lower cut-off) or both null for no lower requirement"
            )));
        }
        let upper_ok =
            (b.is_finite() && d.is_finite()) || (b == f64::INFINITY && d == f64::INFINITY);
        if !upper_ok {
            return Err(Error::invalid(format!(
                "QoS range of {what} has B = {b}, D = {d}: give both as numbers (D = B for a hard upper cut-off) or both null for no upper requirement"
            )));
        }
        if c > a {
            return Err(Error::invalid(format!(
                "QoS range of {what} has C = {c} > A = {a}; the low threshold C must not exceed A (write [A, B, C, D] with C <= A <= B <= D)"
            )));
        }
        if a > b {
            return Err(Error::invalid(format!(
                "QoS range of {what} has A = {a} > B = {b}; the satisfied range [A, B] must not be empty (write [A, B, C, D] with C <= A <= B <= D)"
            )));
        }
        if b > d {
            return Err(Error::invalid(format!(
                "QoS range of {what} has B = {b} > D = {d}; the high threshold D must not be below B (write [A, B, C, D] with C <= A <= B <= D; null for unbounded)"
            )));
        }
        if bins == 0 || bins > MAX_RAMP_BINS {
            return Err(Error::invalid(format!(
                "histogram bins per ramp = {bins} must be between 1 and {MAX_RAMP_BINS}"
            )));
        }
        Ok(Self { a, b, c, d, bins })
    }

    /// `[A, B, C, D]` with ±∞ for unbounded ends.
    pub fn range(&self) -> [f64; 4] {
        [self.a, self.b, self.c, self.d]
    }

    /// Ramp bins per ramp.
    pub fn bins(&self) -> usize {
        self.bins
    }

    fn has_lower_ramp(&self) -> bool {
        self.c < self.a
    }

    fn has_upper_ramp(&self) -> bool {
        self.b < self.d
    }

    /// The piecewise-linear utility of 002 Fig 4.3 (formalised in the note
    /// §1.4): 1 on [A, B], linear to 0 at C below and at D above, 0 beyond.
    /// NaN maps to 0 (an unusable sample).
    pub fn utility(&self, x: f64) -> f64 {
        if x >= self.a && x <= self.b {
            1.0
        } else if x < self.a && x > self.c {
            (x - self.c) / (self.a - self.c)
        } else if x > self.b && x < self.d {
            (self.d - x) / (self.d - self.b)
        } else {
            0.0
        }
    }

    /// Histogram slots in use: good, bad and `bins` per existing ramp.
    pub fn slots(&self) -> usize {
        2 + self.bins * (self.has_lower_ramp() as usize + self.has_upper_ramp() as usize)
    }

    fn lower_base(&self) -> usize {
        2
    }

    fn upper_base(&self) -> usize {
        2 + if self.has_lower_ramp() { self.bins } else { 0 }
    }

    /// The slot a sample falls in: fixed-width bins over the ramp(s) only,
    /// every value in [A, B] in the good bin and every value at or beyond C
    /// or D in the bad bin (002 §4.5: below 300 ms "equally important", above
    /// 400 ms "equally useless"). NaN goes to the bad bin.
    pub fn slot(&self, x: f64) -> usize {
        if x >= self.a && x <= self.b {
            GOOD
        } else if x < self.a && x > self.c {
            let k = ((x - self.c) / (self.a - self.c) * self.bins as f64) as usize;
            self.lower_base() + k.min(self.bins - 1)
        } else if x > self.b && x < self.d {
            let k = ((x - self.b) / (self.d - self.b) * self.bins as f64) as usize;
            self.upper_base() + k.min(self.bins - 1)
        } else {
            BAD
        }
    }

    /// The utility of a slot: 1 for good, 0 for bad, u at the bin centre for
    /// a ramp bin (002 note §5 A.3). Slots past [`Qos::slots`] give 0.
    pub fn slot_utility(&self, slot: usize) -> f64 {
        let k = self.bins as f64;
        if slot == GOOD {
            1.0
        } else if slot == BAD || slot >= self.slots() {
            0.0
        } else if self.has_lower_ramp() && slot < self.upper_base() {
            (slot - self.lower_base()) as f64 / k + 0.5 / k
        } else {
            1.0 - ((slot - self.upper_base()) as f64 / k + 0.5 / k)
        }
    }

    /// The value interval `[lo, hi)` a ramp slot covers (good and bad slots
    /// give the satisfied range and NaN bounds); for reports and tests.
    pub fn slot_bounds(&self, slot: usize) -> (f64, f64) {
        if slot == GOOD {
            return (self.a, self.b);
        }
        if slot == BAD || slot >= self.slots() {
            return (f64::NAN, f64::NAN);
        }
        let k = self.bins as f64;
        if self.has_lower_ramp() && slot < self.upper_base() {
            let w = (self.a - self.c) / k;
            let i = (slot - self.lower_base()) as f64;
            (self.c + i * w, self.c + (i + 1.0) * w)
        } else {
            let w = (self.d - self.b) / k;
            let i = (slot - self.upper_base()) as f64;
            (self.b + i * w, self.b + (i + 1.0) * w)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    /// 002 Table 5.2: RTT [0, 300, 0, 350] ms: no lower ramp, u = 1 up to
    /// 300 ms, (350 − x)/50 above, 0 past 350 (note §1.4).
    #[test]
    fn golden_table_5_2_rtt() {
        let q = Qos::new("rtt_ms", 0.0, 300.0, 0.0, 350.0, 10).unwrap();
        for (x, u) in [
            (0.0, 1.0),
            (40.0, 1.0),
            (300.0, 1.0),
            (310.0, 0.8),
            (325.0, 0.5),
            (349.0, 0.02),
            (350.0, 0.0),
            (1e6, 0.0),
            (-1.0, 0.0),
        ] {
            assert!(
                (q.utility(x) - u).abs() < 1e-12,
                "u({x}) = {}, want {u}",
                q.utility(x)
            );
        }
        assert_eq!(q.slots(), 12);
    }

    /// 002 Table 5.2: throughput [9.5, 50, 8, 0] Mbps, the sentinel D = 0
    /// meaning "no upper bound": u = 1 above 9.5, (x − 8)/1.5 on [8, 9.5).
    #[test]
    fn golden_table_5_2_throughput() {
        let q = Qos::new("throughput_mbps", 9.5, INF, 8.0, INF, 10).unwrap();
        for (x, u) in [
            (100.0, 1.0),
            (9.5, 1.0),
            (8.75, 0.5),
            (8.0, 0.0),
            (2.0, 0.0),
        ] {
            assert!(
                (q.utility(x) - u).abs() < 1e-12,
                "u({x}) = {}",
                q.utility(x)
            );
        }
        assert_eq!(q.slot(1e9), GOOD);
        assert_eq!(q.slot(7.9), BAD);
        assert_eq!(q.slot(8.0), BAD);
        // Lower ramp of 1.5 Mbps in 10 bins of 0.15: 8.76 is bin 5, centre u = 0.55.
        let s = q.slot(8.76);
        assert_eq!(s, 2 + 5);
        assert!((q.slot_utility(s) - 0.55).abs() < 1e-12);
    }

    /// 002 §4.5 example: RTT [0, 300, 0, 400] with "fixed bin size (say, 10)",
    /// read as 10 bins of 10 ms over the ramp (note §1.5 gap): bin i covers
    /// [300 + 10i, 310 + 10i) and its centre utility is 0.95 − 0.1·i.
    #[test]
    fn golden_section_4_5_bins() {
        let q = Qos::new("rtt_ms", 0.0, 300.0, 0.0, 400.0, 10).unwrap();
        for i in 0..10 {
            let s = 2 + i;
            let (lo, hi) = q.slot_bounds(s);
            assert!((lo - (300.0 + 10.0 * i as f64)).abs() < 1e-9 && (hi - lo - 10.0).abs() < 1e-9);
            assert_eq!(q.slot(lo + 5.0), s);
            assert!((q.slot_utility(s) - (0.95 - 0.1 * i as f64)).abs() < 1e-12);
        }
        assert_eq!(q.slot(299.0), GOOD);
        assert_eq!(q.slot(400.0), BAD);
        assert_eq!(q.slot(f64::NAN), BAD);
        assert_eq!(q.utility(f64::NAN), 0.0);
    }

    #[test]
    fn two_ramps_layout() {
        let q = Qos::new("rtt_ms", 10.0, 20.0, 0.0, 40.0, 4).unwrap();
        assert_eq!(q.slots(), 10);
        assert_eq!(q.slot(1.0), 2);
        assert_eq!(q.slot(9.99), 5);
        assert_eq!(q.slot(20.5), 6);
        assert_eq!(q.slot(39.0), 9);
        assert!((q.slot_utility(2) - 0.125).abs() < 1e-12);
        assert!((q.slot_utility(6) - 0.875).abs() < 1e-12);
        assert_eq!(q.slot_utility(10), 0.0);
    }

    #[test]
    fn bad_ranges_name_the_value() {
        for ((a, b, c, d, bins), needle) in [
            ((400.0, 300.0, 0.0, 450.0, 10), "A = 400 > B = 300"),
            ((5.0, 10.0, 6.0, 20.0, 10), "C = 6 > A = 5"),
            ((5.0, 10.0, 0.0, 9.0, 10), "B = 10 > D = 9"),
            ((f64::NAN, 10.0, 0.0, 20.0, 10), "A = NaN"),
            ((5.0, 10.0, f64::NEG_INFINITY, 20.0, 10), "C = -inf"),
            ((5.0, INF, 0.0, 20.0, 10), "B = inf, D = 20"),
            ((5.0, 10.0, 0.0, 20.0, 0), "bins per ramp = 0"),
            ((5.0, 10.0, 0.0, 20.0, 33), "= 33"),
        ] {
            let e = Qos::new("rtt_ms", a, b, c, d, bins)
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle) && e.contains("invalid input"), "{e}");
        }
    }
}
