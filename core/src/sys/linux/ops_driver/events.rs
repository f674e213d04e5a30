//! What the driver reports: [`DriverEvent`] (the controller's events plus
//! CCA switches, decision latency, RTT samples and byte intervals) and the
//! run's [`DriverReport`], in the one event schema (docs/architecture.md
//! "One event schema"; decision latency: 000 §5.5).

use crate::ops::{ClassRefs, Event, Phase, Stats};
use crate::probe::CcaName;

/// What the driver reports while it runs. Serialized like the controller's
/// [`Event`]s, tagged by `kind` (`cca_set`, `decision`, `rtt`, `interval`,
/// or the controller event's own kind), units in field names.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DriverEvent {
    /// `setsockopt(TCP_CONGESTION)` succeeded and the read-back matched.
    /// `latency_ns` is set for a switch decided on an RTT sample: from the
    /// prober's reading of the window's last echo to the return of setsockopt
    /// (the decision latency, 000 §5.5 / A16).
    CcaSet {
        cca: CcaName,
        at_ns: u64,
        latency_ns: Option<u64>,
    },
    /// A decision taken on an RTT sample has been carried out: `latency_ns`
    /// runs from the prober's reading of the window's last echo to the end of
    /// the setsockopt call (`switched`) or, when the socket already had the
    /// chosen CCA, to the moment the steady phase began.
    Decision {
        cca: CcaName,
        latency_ns: u64,
        switched: bool,
    },
    /// One 1 Hz RTT sample (mean of the burst's answered echoes; `None` if
    /// every echo was lost, in which case the previous sample is held).
    Rtt {
        at_ns: u64,
        rtt_ms: Option<f64>,
        answered: u16,
    },
    /// Bytes handed to the socket during `[start_ns, end_ns)`; `acked_bytes`
    /// is the peer-acknowledged delta from `TCP_INFO` when the kernel has it.
    Interval {
        start_ns: u64,
        end_ns: u64,
        bytes: u64,
        acked_bytes: Option<u64>,
        /// Total bytes handed to the socket since the driver started.
        total_bytes: u64,
        cca: CcaName,
        phase: Phase,
    },
    /// A controller event: phase change, classification, selection, failures
    /// (last: serialized untagged, as the event's own tagged form).
    #[serde(untagged)]
    Ops(Event),
}

impl ClassRefs for DriverEvent {
    fn class_refs(&self) -> (Option<usize>, Option<usize>) {
        match self {
            DriverEvent::Ops(e) => e.class_refs(),
            _ => (None, None),
        }
    }
}

/// Why [`OpsDriver::run`](super::OpsDriver::run) returned (serialized in snake_case: `"time_limit"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The data source reached EOF and every byte was handed to the socket.
    Eof,
    /// `time_limit_ns` passed.
    TimeLimit,
    /// The stop flag was raised.
    Stopped,
}

/// Summary of a run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DriverReport {
    /// Bytes handed to the socket (the next byte offset, relative to the start).
    pub bytes_sent: u64,
    pub started_ns: u64,
    pub ended_ns: u64,
    pub end: EndReason,
    /// Controller counters (time probing / steady, decisions, switches).
    pub stats: Stats,
    /// Successful `setsockopt(TCP_CONGESTION)` calls.
    pub cca_sets: u64,
    /// Samples where every echo was lost.
    pub lost_samples: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_events_serialize_in_the_event_schema() {
        let j = |e: &DriverEvent| serde_json::to_value(e).unwrap();
        let iv = DriverEvent::Interval {
            start_ns: 0,
            end_ns: 1_000,
            bytes: 10,
            acked_bytes: None,
            total_bytes: 10,
            cca: CcaName::CUBIC,
            phase: Phase::Steady,
        };
        assert_eq!(
            j(&iv),
            serde_json::json!({"kind": "interval", "start_ns": 0, "end_ns": 1000, "bytes": 10,
                               "acked_bytes": null, "total_bytes": 10, "cca": "cubic", "phase": "steady"})
        );
        let set = DriverEvent::CcaSet {
            cca: CcaName::BBR,
            at_ns: 5,
            latency_ns: Some(7),
        };
        assert_eq!(
            j(&set),
            serde_json::json!({"kind": "cca_set", "cca": "bbr", "at_ns": 5, "latency_ns": 7})
        );
        // A controller event keeps its own tag.
        let ev = DriverEvent::Ops(Event::DecisionFailed {
            message: "m".into(),
            at_ns: 1,
        });
        assert_eq!(
            j(&ev),
            serde_json::json!({"kind": "decision_failed", "message": "m", "at_ns": 1})
        );
        assert_eq!(
            serde_json::to_value(EndReason::TimeLimit).unwrap(),
            "time_limit"
        );
    }
}
