//! The DPS configuration: one serde type with its defaults and validation
//! (DESIGN.md, "One spec, one schema"). Bindings and the CLI convert into
//! [`DpsSpec`] and hold no checks of their own.
//!
//! ```json
//! {
//!   "ccas": ["cubic", "bbr", "reno"],
//!   "metrics": [
//!     {"metric": "rtt_ms", "range": [0, 300, 0, 350], "priority": 0.4},
//!     {"metric": "throughput_mbps", "range": [9.5, null, 8, null], "priority": 0.6}
//!   ],
//!   "exploration": {"p_learning": 1.0, "p_learnt": 0.25}
//! }
//! ```
//! `range` is the thesis's `[A, B, C, D]` (002 Fig 4.3) with `null` for an
//! unbounded end; every other field has a default.

use super::stats::History;
use super::utility::{Metric, Qos, MAX_RAMP_BINS};
use crate::error::{Error, Result};
use crate::probe::CcaName;
use serde::{Deserialize, Serialize};

/// Most candidate CCAs per flow (sets are bit masks; the thesis uses 2 or 4).
pub const MAX_CCAS: usize = 16;

const NS_PER_MS: u64 = 1_000_000;

/// The requirement on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// Which metric (`"rtt_ms"` or `"throughput_mbps"`).
    pub metric: Metric,
    /// `[A, B, C, D]`: utility 1 on [A, B], falling linearly to 0 at C below
    /// and at D above (002 Fig 4.3). `null` for A and C means no lower
    /// requirement, for B and D no upper one. C = A is a hard cut-off.
    pub range: [Option<f64>; 4],
    /// The weight P_j of this metric in Eq 4.1, in [0, 1]; equal (1) by
    /// default (002 §4.4: "equal by default").
    #[serde(default = "one")]
    pub priority: f64,
}

fn one() -> f64 {
    1.0
}

/// Exploration probability p of the random_trigger (002 §4.5, §5.3): a
/// Bernoulli(p) draw per framework cycle. The thesis uses a static p or a
/// dynamic one (p_learning = 1 until every protocol has statistics, then
/// p_learnt = 0.25, Table 5.3); a static p sets both equal.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exploration {
    /// p while some protocol has no statistics (learning phase).
    pub p_learning: f64,
    /// p once every protocol has statistics (learnt phase).
    pub p_learnt: f64,
}

impl Exploration {
    /// The same p in both phases.
    pub fn fixed(p: f64) -> Self {
        Self {
            p_learning: p,
            p_learnt: p,
        }
    }

    /// Short flows, that finish within the learning time, should explore
    /// little: only per-cycle performance counts for them (002 §5.3.3).
    pub fn short_flow() -> Self {
        Self::fixed(0.25)
    }

    /// Long flows should learn fast, then mostly exploit (002 §5.3.3; the
    /// dynamic schedule of Table 5.3).
    pub fn long_flow() -> Self {
        Self {
            p_learning: 1.0,
            p_learnt: 0.25,
        }
    }

    /// p for the current phase.
    pub fn p(&self, learning: bool) -> f64 {
        if learning {
            self.p_learning
        } else {
            self.p_learnt
        }
    }
}

impl Default for Exploration {
    fn default() -> Self {
        Self::long_flow()
    }
}

/// The period after each switch whose samples are discarded, so the
/// transient of the new CCA stays out of its statistics (002 §5.3: "switch
/// period of 10 s with no monitoring").
///
/// The thesis needs 10 s because it replaces the connection and waits for
/// the old one to drain (Full-pause switching period up to 7.53 s, 002
/// Fig 5.3b). A live `setsockopt(TCP_CONGESTION)` on the established socket
/// changes the CCA at once, so the transient is the new CCA's own start (BBR
/// STARTUP, a CUBIC epoch): a few RTTs. The guard lasts
/// `max(ms, rtts × latest RTT)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Guard {
    /// Fixed part, milliseconds (thesis: 10 000).
    pub ms: u64,
    /// RTT-relative part, in round trips of the latest RTT sample (default 3).
    /// Before any RTT sample, [`Guard::ASSUMED_RTT_MS`] stands in.
    pub rtts: u32,
}

impl Guard {
    /// The RTT assumed before the first sample (a conservative WAN RTT).
    pub const ASSUMED_RTT_MS: f64 = 100.0;

    /// The thesis's fixed 10 s switch period (002 Table 5.2).
    pub fn thesis() -> Self {
        Self {
            ms: 10_000,
            rtts: 0,
        }
    }

    /// The guard length given the latest RTT sample (`None` before one).
    pub fn duration_ns(&self, latest_rtt_ms: Option<f64>) -> u64 {
        let rtt = latest_rtt_ms.unwrap_or(Self::ASSUMED_RTT_MS);
        let rel = (rtt * self.rtts as f64 * NS_PER_MS as f64) as u64;
        (self.ms.saturating_mul(NS_PER_MS)).max(rel)
    }
}

impl Default for Guard {
    fn default() -> Self {
        Self { ms: 0, rtts: 3 }
    }
}

/// A DPS configuration (002 §4.4, §4.5; Tables 5.2 and 5.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DpsSpec {
    /// Candidate CCAs (the protocol list of the Framework Database, 002
    /// §4.4, "Creation"); 1 to [`MAX_CCAS`] distinct names.
    pub ccas: Vec<String>,
    /// QoS requirements, one per metric, each metric at most once.
    pub metrics: Vec<MetricSpec>,
    /// Fixed-width histogram bins per utility ramp (002 §4.5: "fixed bin size
    /// (say, 10)", read as 10 bins).
    #[serde(default = "default_bins")]
    pub bins: usize,
    /// A protocol satisfies the application when U_stat,j > thres_stat for
    /// every metric (002 Alg 1). The thesis never gives a value (note §1.5
    /// gap); 0.5, more than half of the achievable utility, is ours.
    #[serde(default = "default_thres_stat")]
    pub thres_stat: f64,
    /// Exploration probability schedule.
    #[serde(default)]
    pub exploration: Exploration,
    /// Monitoring period T after a utility-based selection, ms (002 Table
    /// 5.2: 60 s).
    #[serde(default = "default_selection_ms")]
    pub selection_period_ms: u64,
    /// Monitoring period t after a random selection, ms (002 Table 5.2:
    /// 30 s; t < T so a poor random pick costs less).
    #[serde(default = "default_random_ms")]
    pub random_period_ms: u64,
    /// Samples discarded after a switch.
    #[serde(default)]
    pub guard: Guard,
    /// How the stored statistics forget.
    #[serde(default)]
    pub history: History,
    /// Seed of the random_trigger and random tie-breaks.
    #[serde(default)]
    pub seed: u64,
}

fn default_bins() -> usize {
    10
}
fn default_thres_stat() -> f64 {
    0.5
}
fn default_selection_ms() -> u64 {
    60_000
}
fn default_random_ms() -> u64 {
    30_000
}

impl DpsSpec {
    /// The learning experiment of 002 Table 5.2 for a CCA set: RTT
    /// [0, 300, 0, 350] ms at priority 0.4, throughput [9.5, ∞, 8, ∞] Mbps
    /// at 0.6, T = 60 s, t = 30 s, a 10 s switch period, static p.
    pub fn table_5_2(ccas: &[&str], p: f64) -> Self {
        Self {
            ccas: ccas.iter().map(|s| s.to_string()).collect(),
            metrics: vec![
                MetricSpec {
                    metric: Metric::RttMs,
                    range: [Some(0.0), Some(300.0), Some(0.0), Some(350.0)],
                    priority: 0.4,
                },
                MetricSpec {
                    metric: Metric::ThroughputMbps,
                    range: [Some(9.5), None, Some(8.0), None],
                    priority: 0.6,
                },
            ],
            bins: default_bins(),
            thres_stat: default_thres_stat(),
            exploration: Exploration::fixed(p),
            selection_period_ms: 60_000,
            random_period_ms: 30_000,
            guard: Guard::thesis(),
            history: History::default(),
            seed: 0,
        }
    }

    /// The fairness experiment of 002 Table 5.3: as Table 5.2 but RTT
    /// [0, 350, 0, 450] ms and p 1 → 0.25.
    pub fn table_5_3(ccas: &[&str]) -> Self {
        let mut s = Self::table_5_2(ccas, 1.0);
        s.metrics[0].range = [Some(0.0), Some(350.0), Some(0.0), Some(450.0)];
        s.exploration = Exploration::long_flow();
        s
    }

    /// The same spec with every period and the fixed guard divided by
    /// `factor` (> 0), for time-scaled runs: 002's T = 60 s, t = 30 s and
    /// 10 s switch period at factor 10 become 6 s, 3 s and 1 s, short
    /// enough for emulated-network tests (002 note §7). The RTT-relative
    /// guard is left alone: round trips do not scale.
    pub fn time_scaled(&self, factor: f64) -> Result<Self> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(Error::invalid(format!(
                "time scale factor {factor} must be a finite number > 0 (10 turns T = 60 s into 6 s)"
            )));
        }
        let scale = |ms: u64| ((ms as f64 / factor).round() as u64).max(1);
        let mut s = self.clone();
        s.selection_period_ms = scale(self.selection_period_ms);
        s.random_period_ms = scale(self.random_period_ms);
        s.guard.ms = if self.guard.ms == 0 {
            0
        } else {
            scale(self.guard.ms)
        };
        s.validate()?;
        Ok(s)
    }

    /// Parse JSON and validate. Unknown fields and unknown metric names are
    /// rejected with the offending name.
    pub fn from_json(json: &str) -> Result<Self> {
        let spec: Self =
            serde_json::from_str(json).map_err(|e| Error::invalid(format!("DPS spec: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The spec as JSON.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Error::invalid(format!("DPS spec cannot be written as JSON: {e}")))
    }

    /// Check everything; each message names the offending value.
    pub fn validate(&self) -> Result<()> {
        self.compile().map(|_| ())
    }

    /// Validate and convert into the forms the algorithms use.
    pub(crate) fn compile(&self) -> Result<Compiled> {
        if self.ccas.is_empty() || self.ccas.len() > MAX_CCAS {
            return Err(Error::invalid(format!(
                "DPS needs 1 to {MAX_CCAS} candidate CCAs, got {}; list them in \"ccas\", e.g. [\"cubic\", \"bbr\"]",
                self.ccas.len()
            )));
        }
        let mut ccas = Vec::with_capacity(self.ccas.len());
        for name in &self.ccas {
            let c = CcaName::new(name)?;
            if ccas.contains(&c) {
                return Err(Error::invalid(format!(
                    "candidate CCA {name:?} is listed twice; keep one"
                )));
            }
            ccas.push(c);
        }
        if self.metrics.is_empty() {
            return Err(Error::invalid(
                "DPS needs at least one metric requirement, e.g. {\"metric\": \"rtt_ms\", \"range\": [0, 300, 0, 350]}",
            ));
        }
        if self.bins == 0 || self.bins > MAX_RAMP_BINS {
            return Err(Error::invalid(format!(
                "bins = {} must be between 1 and {MAX_RAMP_BINS} (histogram bins per utility ramp)",
                self.bins
            )));
        }
        let mut metrics: Vec<(Metric, Qos, f64)> = Vec::with_capacity(self.metrics.len());
        for m in &self.metrics {
            if metrics.iter().any(|(x, _, _)| *x == m.metric) {
                return Err(Error::invalid(format!(
                    "metric {} is listed twice; give one requirement per metric",
                    m.metric
                )));
            }
            if !(0.0..=1.0).contains(&m.priority) {
                return Err(Error::invalid(format!(
                    "priority {} of metric {} must be in [0, 1] (002 §4.4)",
                    m.priority, m.metric
                )));
            }
            let [a, b, c, d] = m.range;
            let q = Qos::new(
                m.metric.name(),
                a.unwrap_or(f64::NEG_INFINITY),
                b.unwrap_or(f64::INFINITY),
                c.unwrap_or(f64::NEG_INFINITY),
                d.unwrap_or(f64::INFINITY),
                self.bins,
            )?;
            metrics.push((m.metric, q, m.priority));
        }
        if metrics.iter().all(|(_, _, p)| *p == 0.0) {
            return Err(Error::invalid(
                "every metric has priority 0, so no protocol can be preferred; give at least one priority > 0",
            ));
        }
        if !(0.0..1.0).contains(&self.thres_stat) {
            return Err(Error::invalid(format!(
                "thres_stat {} must be in [0, 1): a protocol is valid when its expected utility per metric exceeds it",
                self.thres_stat
            )));
        }
        for (name, p) in [
            ("p_learning", self.exploration.p_learning),
            ("p_learnt", self.exploration.p_learnt),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::invalid(format!(
                    "exploration {name} = {p} must be a probability in [0, 1]"
                )));
            }
        }
        if self.selection_period_ms == 0 || self.random_period_ms == 0 {
            return Err(Error::invalid(format!(
                "monitoring periods must be > 0 ms (selection_period_ms = {}, random_period_ms = {})",
                self.selection_period_ms, self.random_period_ms
            )));
        }
        if self.random_period_ms > self.selection_period_ms {
            return Err(Error::invalid(format!(
                "random_period_ms = {} exceeds selection_period_ms = {}; 002 §4.5 keeps t < T so a poor random pick costs less",
                self.random_period_ms, self.selection_period_ms
            )));
        }
        self.history.validate()?;
        let max_ms = u64::MAX / NS_PER_MS / 4;
        for (name, v) in [
            ("selection_period_ms", self.selection_period_ms),
            ("random_period_ms", self.random_period_ms),
            ("guard.ms", self.guard.ms),
        ] {
            if v > max_ms {
                return Err(Error::invalid(format!("{name} = {v} is too large")));
            }
        }
        Ok(Compiled {
            ccas,
            metrics,
            thres_stat: self.thres_stat,
            exploration: self.exploration,
            selection_ns: self.selection_period_ms * NS_PER_MS,
            random_ns: self.random_period_ms * NS_PER_MS,
            guard: self.guard,
            history: self.history,
            seed: self.seed,
        })
    }
}

/// A validated spec in the form the algorithms use.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compiled {
    pub ccas: Vec<CcaName>,
    pub metrics: Vec<(Metric, Qos, f64)>,
    pub thres_stat: f64,
    pub exploration: Exploration,
    pub selection_ns: u64,
    pub random_ns: u64,
    pub guard: Guard,
    pub history: History,
    pub seed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
        "ccas": ["cubic", "bbr", "reno"],
        "metrics": [
            {"metric": "rtt_ms", "range": [0, 300, 0, 350], "priority": 0.4},
            {"metric": "throughput_mbps", "range": [9.5, null, 8, null], "priority": 0.6}
        ]
    }"#;

    #[test]
    fn parses_with_defaults() {
        let s = DpsSpec::from_json(GOOD).unwrap();
        assert_eq!(s.bins, 10);
        assert_eq!(s.thres_stat, 0.5);
        assert_eq!(s.exploration, Exploration::long_flow());
        assert_eq!(
            (s.selection_period_ms, s.random_period_ms),
            (60_000, 30_000)
        );
        assert_eq!(s.guard, Guard { ms: 0, rtts: 3 });
        let c = s.compile().unwrap();
        assert_eq!(
            c.metrics[1].1.range(),
            [9.5, f64::INFINITY, 8.0, f64::INFINITY]
        );
        // Round trip through JSON keeps every field.
        assert_eq!(DpsSpec::from_json(&s.to_json().unwrap()).unwrap(), s);
        DpsSpec::table_5_2(&["cubic", "reno"], 0.25)
            .validate()
            .unwrap();
        DpsSpec::table_5_3(&["cubic", "bbr"]).validate().unwrap();
    }

    #[test]
    fn bad_specs_name_the_value() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"loss_pct","range":[0,1,0,2]}]}"#,
                "loss_pct",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[400,300,0,450]}]}"#,
                "A = 400 > B = 300",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"exploration":{"p_learning":1.5,"p_learnt":0.2}}"#,
                "p_learning = 1.5",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"exploration":{"p_learning":1,"p_learnt":-0.1}}"#,
                "p_learnt = -0.1",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450],"priority":2}]}"#,
                "priority 2",
            ),
            (
                r#"{"ccas":["cubic","CUBIC"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}]}"#,
                "\"CUBIC\" is listed twice",
            ),
            (
                r#"{"ccas":[],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}]}"#,
                "got 0",
            ),
            (
                r#"{"ccas":["cu bic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}]}"#,
                "cu bic",
            ),
            (r#"{"ccas":["cubic"],"metrics":[]}"#, "at least one metric"),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]},{"metric":"rtt_ms","range":[0,300,0,450]}]}"#,
                "rtt_ms is listed twice",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"bins":0}"#,
                "bins = 0",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"thres_stat":1}"#,
                "thres_stat 1",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"random_period_ms":90000}"#,
                "random_period_ms = 90000",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"colour":1}"#,
                "colour",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450],"priority":0}]}"#,
                "priority 0",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0]}]}"#,
                "3",
            ),
            (
                r#"{"ccas":["cubic"],"metrics":[{"metric":"rtt_ms","range":[0,300,0,450]}],"history":{"decay":0}}"#,
                "decay 0",
            ),
        ];
        for (json, needle) in cases {
            let e = DpsSpec::from_json(json).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
            let msg = e.to_string();
            assert!(msg.contains(needle), "{json}\n→ {msg}\nwant {needle:?}");
        }
        // NaN cannot be written in JSON; built in code it is still rejected.
        let mut s = DpsSpec::table_5_2(&["cubic"], 1.0);
        s.metrics[0].range[1] = Some(f64::NAN);
        assert!(s.validate().unwrap_err().to_string().contains("B = NaN"));
        let mut s = DpsSpec::table_5_2(&["cubic"], f64::NAN);
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("p_learning = NaN"));
        s.exploration = Exploration::fixed(0.5);
        s.metrics[1].priority = f64::NAN;
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("priority NaN"));
    }

    #[test]
    fn time_scaling() {
        let s = DpsSpec::table_5_2(&["cubic", "reno"], 0.5)
            .time_scaled(10.0)
            .unwrap();
        assert_eq!(
            (s.selection_period_ms, s.random_period_ms, s.guard.ms),
            (6000, 3000, 1000)
        );
        assert_eq!(
            s.metrics,
            DpsSpec::table_5_2(&["cubic", "reno"], 0.5).metrics
        );
        let live = DpsSpec::from_json(GOOD).unwrap().time_scaled(4.0).unwrap();
        assert_eq!((live.guard.ms, live.guard.rtts), (0, 3));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(s
                .time_scaled(bad)
                .unwrap_err()
                .to_string()
                .contains("time scale factor"));
        }
    }

    #[test]
    fn guard_lengths() {
        const MS: u64 = 1_000_000;
        assert_eq!(Guard::thesis().duration_ns(Some(40.0)), 10_000 * MS);
        assert_eq!(Guard::default().duration_ns(Some(40.0)), 120 * MS);
        assert_eq!(Guard::default().duration_ns(None), 300 * MS);
        assert_eq!(Guard { ms: 200, rtts: 3 }.duration_ns(Some(40.0)), 200 * MS);
    }
}
