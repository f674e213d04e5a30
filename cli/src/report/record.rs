//! What `opsel demo --report` records: the lab's setup and, per run, the
//! receivers' throughput over time and the foreground driver's events in
//! the core's one event schema (`ops::Labeled<DriverEvent>`: tagged by
//! `kind`, units in field names, class names beside indices; docs/architecture.md
//! "One event schema"), each with `t_s`, seconds since the run's time zero.
//!
//! The report is a function of this record alone ([`super::html::render`]),
//! so it is re-rendered (`opsel demo --report DIR --replay FILE`) and tested
//! without running the lab.

use opsel::ops::Labeled;
use opsel::sys::linux::ops_driver::DriverEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The recorded file's `format` value.
pub const FORMAT: &str = "opsel-demo-record";

/// One `opsel demo` invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoRecord {
    pub format: String,
    pub setup: Setup,
    pub runs: Vec<RunRecord>,
}

/// The emulated path and the OPS configuration shared by every run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub rate_mbps: f64,
    pub rtt_ms: f64,
    pub buffer_bdp: f64,
    /// `passive` or the active pattern (000 §3.2).
    pub pattern: String,
    pub steady_s: f64,
    pub model: String,
    /// The model's class names (000 Table 6.1 labels).
    pub classes: Vec<String>,
    /// The model's window length w, in samples.
    pub window: usize,
    /// Time between two RTT samples, ms (the model's). Written only when
    /// it is not 1000, so a 1 Hz record reads and rewrites as before the
    /// field existed.
    #[serde(default = "one_second_ms", skip_serializing_if = "is_one_second")]
    pub sample_interval_ms: f64,
}

fn one_second_ms() -> f64 {
    1000.0
}

fn is_one_second(ms: &f64) -> bool {
    *ms == 1000.0
}

/// One run: one background against one foreground strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// `cubic`, `bbr` or `ALT-X`.
    pub bg: String,
    /// `fixed cubic`, `fixed bbr`, `OPS`, …
    pub fg: String,
    pub run: usize,
    pub seconds: f64,
    pub fg_start_s: f64,
    pub measure_from_s: f64,
    /// Means over [measure_from_s, seconds], as the demo's table prints them.
    pub bg_mbps: f64,
    pub fg_mbps: f64,
    pub jain: f64,
    /// Width of one throughput bin.
    pub bin_s: f64,
    /// Receiver-counted throughput per bin from t = 0.
    pub bg_series_mbps: Vec<f64>,
    pub fg_series_mbps: Vec<f64>,
    /// The foreground driver's events (no `interval`s: the receivers'
    /// series above are the throughput), each with `t_s`.
    pub events: Vec<Value>,
    /// With `--model auto`: which model the foreground ran and why (the
    /// 5-Hz model for the whole run, or until its fallback to the 1 Hz one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_used: Option<ModelUsed>,
}

/// The model a `--model auto` foreground ran (`opsel_transfer` auto plan).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelUsed {
    /// Seconds after the foreground started when the 5-Hz model gave way to
    /// the 1 Hz one; `None`: the 5-Hz model ran the whole run.
    pub fallback_after_s: Option<f64>,
    /// The rule's reason, with the measured values.
    pub reason: String,
}

impl ModelUsed {
    pub fn describe(&self) -> String {
        match self.fallback_after_s {
            Some(s) => format!(
                "the 5-Hz model until {s:.1} s after the foreground started, then the 1 Hz model ({})",
                self.reason
            ),
            None => format!("the 5-Hz model for the whole run ({})", self.reason),
        }
    }
}

/// Receiver bins (bytes per `bin_ns`) summed into `bin_s`-wide bins, in Mbit/s.
pub fn series_mbps(bins: &[u64], bin_ns: u64, bin_s: f64, seconds: f64) -> Vec<f64> {
    let per = ((bin_s * 1e9) / bin_ns as f64).round().max(1.0) as usize;
    let n = (seconds / bin_s).floor() as usize;
    (0..n)
        .map(|i| {
            let b: u64 = bins.iter().skip(i * per).take(per).sum();
            b as f64 * 8.0 / bin_s / 1e6
        })
        .collect()
}

/// The driver's event `e` in the core's serialized form, with `t_s` since
/// `t0_ns` (null for events that carry no time); `None` for intervals.
pub fn event_value(e: &DriverEvent, classes: &[String], t0_ns: u64) -> Option<Value> {
    if matches!(e, DriverEvent::Interval { .. }) {
        return None;
    }
    let Ok(Value::Object(mut m)) = serde_json::to_value(Labeled::new(e, classes)) else {
        return None;
    };
    let t = m
        .get("at_ns")
        .and_then(Value::as_u64)
        .map(|a| a.saturating_sub(t0_ns) as f64 / 1e9);
    m.insert("t_s".into(), t.map_or(Value::Null, Value::from));
    Some(Value::Object(m))
}

/// A run's events read back by kind: what the report draws.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// (start s, end s) of every probe phase (000 §1.2 step 1).
    pub probes: Vec<(f64, f64)>,
    /// (t s, rtt_ms) of every answered 1 Hz sample.
    pub rtt: Vec<(f64, f64)>,
    /// Every classification: the window it judged and the decision.
    pub decisions: Vec<Decision>,
    /// (t s, cca) of every CCA the socket was set to.
    pub cca_set: Vec<(f64, String)>,
}

/// One classified window and what OPS chose on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The RTT window: from its probe's start to the classification.
    pub from_s: f64,
    pub at_s: f64,
    pub label: String,
    pub confidence: f64,
    /// The CCA selected on it (None if the selection failed).
    pub cca: Option<String>,
}

fn f(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}
fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

impl RunRecord {
    /// Read the events back into what the report draws. A probe still open
    /// at the end of the run closes at `seconds`.
    pub fn timeline(&self) -> Timeline {
        let mut tl = Timeline::default();
        let mut open_probe: Option<f64> = None;
        for e in &self.events {
            let Some(t) = f(e, "t_s") else { continue };
            match s(e, "kind").as_deref() {
                Some("phase") => {
                    let phase = s(e, "phase");
                    if let Some(p0) = open_probe.take() {
                        tl.probes.push((p0, t));
                    }
                    if phase.as_deref() == Some("probe") {
                        open_probe = Some(t);
                    }
                }
                Some("rtt") => {
                    if let Some(r) = f(e, "rtt_ms") {
                        tl.rtt.push((t, r));
                    }
                }
                Some("classified") => {
                    let from_s = tl.probes.last().map_or(open_probe.unwrap_or(t), |p| p.0);
                    let from_s = open_probe.unwrap_or(from_s);
                    tl.decisions.push(Decision {
                        from_s,
                        at_s: t,
                        label: s(e, "label")
                            .or_else(|| s(e, "mix"))
                            .unwrap_or_else(|| "?".into()),
                        confidence: f(e, "confidence").unwrap_or(f64::NAN),
                        cca: None,
                    });
                }
                Some("selected") => {
                    if let Some(d) = tl.decisions.last_mut() {
                        if d.cca.is_none() {
                            d.cca = s(e, "cca");
                        }
                    }
                }
                Some("cca_set") => {
                    if let Some(c) = s(e, "cca") {
                        tl.cca_set.push((t, c));
                    }
                }
                _ => {}
            }
        }
        if let Some(p0) = open_probe {
            tl.probes.push((p0, self.seconds.max(p0)));
        }
        tl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(events: Vec<Value>) -> RunRecord {
        RunRecord {
            bg: "bbr".into(),
            fg: "OPS".into(),
            run: 1,
            seconds: 70.0,
            fg_start_s: 10.0,
            measure_from_s: 40.0,
            bg_mbps: 50.0,
            fg_mbps: 45.0,
            jain: 0.99,
            bin_s: 1.0,
            bg_series_mbps: vec![],
            fg_series_mbps: vec![],
            events,
            model_used: None,
        }
    }

    #[test]
    fn the_auto_model_of_a_run_round_trips_and_older_records_have_none() {
        let mut r = run(vec![]);
        let v = serde_json::to_value(&r).unwrap();
        assert!(v.get("model_used").is_none(), "{v}");
        r.model_used = Some(ModelUsed {
            fallback_after_s: Some(0.11),
            reason: "10 of 10 echoes of the first burst unanswered".into(),
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["model_used"]["fallback_after_s"], json!(0.11));
        let back: RunRecord = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        let d = back.model_used.unwrap().describe();
        assert!(d.starts_with("the 5-Hz model until 0.1 s"), "{d}");
        assert!(d.contains("then the 1 Hz model (10 of 10 echoes"), "{d}");
        let kept = ModelUsed {
            fallback_after_s: None,
            reason: "kept".into(),
        };
        assert_eq!(kept.describe(), "the 5-Hz model for the whole run (kept)");
    }

    #[test]
    fn a_record_without_the_sample_period_is_read_at_one_hertz() {
        let mut setup = json!({"rate_mbps": 100.0, "rtt_ms": 65.0, "buffer_bdp": 0.5,
            "pattern": "passive", "steady_s": 60.0, "model": "passive", "classes": ["B0-C0"], "window": 40});
        let s: Setup = serde_json::from_value(setup.clone()).unwrap();
        assert_eq!(s.sample_interval_ms, 1000.0);
        assert_eq!(serde_json::to_value(&s).unwrap(), setup);
        setup["sample_interval_ms"] = json!(200.0);
        let s: Setup = serde_json::from_value(setup.clone()).unwrap();
        assert_eq!(s.sample_interval_ms, 200.0);
        assert_eq!(serde_json::to_value(&s).unwrap(), setup);
    }

    #[test]
    fn phases_become_probe_spans_and_decisions_carry_their_window() {
        let r = run(vec![
            json!({"kind": "phase", "phase": "probe", "cycle": 1, "t_s": 10.0}),
            json!({"kind": "rtt", "rtt_ms": 66.0, "t_s": 11.0}),
            json!({"kind": "rtt", "rtt_ms": null, "t_s": 12.0}),
            json!({"kind": "phase", "phase": "classify", "cycle": 1, "t_s": 50.0}),
            json!({"kind": "classified", "label": "B1-C0", "confidence": 0.7, "t_s": 50.0}),
            json!({"kind": "selected", "cca": "bbr", "t_s": 50.0}),
            json!({"kind": "cca_set", "cca": "bbr", "t_s": 50.001}),
            json!({"kind": "phase", "phase": "steady", "cycle": 1, "t_s": 50.0}),
            json!({"kind": "phase", "phase": "probe", "cycle": 2, "t_s": 60.0}),
        ]);
        let tl = r.timeline();
        assert_eq!(tl.probes, vec![(10.0, 50.0), (60.0, 70.0)]);
        assert_eq!(tl.rtt, vec![(11.0, 66.0)]);
        assert_eq!(
            tl.decisions,
            vec![Decision {
                from_s: 10.0,
                at_s: 50.0,
                label: "B1-C0".into(),
                confidence: 0.7,
                cca: Some("bbr".into())
            }]
        );
        assert_eq!(tl.cca_set, vec![(50.001, "bbr".into())]);
    }

    #[test]
    fn receiver_bins_sum_into_mbps() {
        // Ten 100 ms bins of 125 000 bytes = 1 Mbit each → 10 Mbit/s over 1 s.
        let bins = vec![125_000u64; 25];
        assert_eq!(series_mbps(&bins, 100_000_000, 1.0, 2.0), vec![10.0, 10.0]);
    }
}
