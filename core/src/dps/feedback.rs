//! The feedback a DPS learner needs per sampling interval (002 §4.4,
//! Monitoring), as one serde type so a driver, a receiver report or a
//! binding can hand it over unchanged.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// One sampling interval's measurements of the transfer.
///
/// Where each field comes from on Linux (002 §4.4 used the `ss` CLI, which
/// reads the same `struct tcp_info` through inet_diag; `getsockopt(TCP_INFO)`
/// is the cheaper, allocation-free equivalent):
///
/// * `rtt_ms`: `tcpi_rtt / 1000` (the kernel's smoothed RTT, µs), the
///   thesis's sender-side RTT;
/// * `delivery_rate_mbps`: `tcpi_delivery_rate · 8 / 1e6` (bytes/s), or the
///   change of `tcpi_bytes_acked` over the interval;
/// * `goodput_mbps`: the receiver's application goodput when the receiver
///   reports it (the thesis measures throughput at the receiver); preferred
///   over `delivery_rate_mbps` for the throughput metric when present;
/// * `sending_rate_mbps`: the change of `tcpi_bytes_sent` over the interval,
///   what the fairness manager compares across flows (002 §4.6: sending
///   rate "needs no signalling and tracks throughput closely").
///
/// A field the driver cannot measure is `None` and simply not counted.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    /// End of the interval, ns on the driver's monotonic clock.
    pub at_ns: u64,
    /// Smoothed RTT at the sender, milliseconds.
    #[serde(default)]
    pub rtt_ms: Option<f64>,
    /// Sender-side delivery rate, megabits per second.
    #[serde(default)]
    pub delivery_rate_mbps: Option<f64>,
    /// Receiver-side goodput, megabits per second.
    #[serde(default)]
    pub goodput_mbps: Option<f64>,
    /// Sender-side sending rate, megabits per second.
    #[serde(default)]
    pub sending_rate_mbps: Option<f64>,
}

impl Feedback {
    /// RTT and delivery rate only (what `TCP_INFO` gives a sender).
    pub fn sender(at_ns: u64, rtt_ms: f64, delivery_rate_mbps: f64) -> Self {
        Self {
            at_ns,
            rtt_ms: Some(rtt_ms),
            delivery_rate_mbps: Some(delivery_rate_mbps),
            ..Self::default()
        }
    }

    /// The value of the throughput metric: receiver goodput if reported,
    /// else the sender's delivery rate.
    pub fn throughput_mbps(&self) -> Option<f64> {
        self.goodput_mbps.or(self.delivery_rate_mbps)
    }

    /// Reject NaN, infinite and negative values, naming the field.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("rtt_ms", self.rtt_ms),
            ("delivery_rate_mbps", self.delivery_rate_mbps),
            ("goodput_mbps", self.goodput_mbps),
            ("sending_rate_mbps", self.sending_rate_mbps),
        ] {
            if let Some(x) = v {
                if !x.is_finite() || x < 0.0 {
                    return Err(Error::invalid(format!(
                        "feedback {name} = {x} must be finite and >= 0; leave it out (null) when not measured"
                    )));
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
    fn json_and_checks() {
        let f: Feedback =
            serde_json::from_str(r#"{"at_ns": 5, "rtt_ms": 41.5, "goodput_mbps": 9.6}"#).unwrap();
        assert_eq!(f.throughput_mbps(), Some(9.6));
        f.validate().unwrap();
        let s = Feedback::sender(1, 40.0, 9.0);
        assert_eq!(s.throughput_mbps(), Some(9.0));
        let bad = Feedback {
            rtt_ms: Some(-3.0),
            ..s
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("rtt_ms = -3"));
        let bad = Feedback {
            sending_rate_mbps: Some(f64::NAN),
            ..s
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("sending_rate_mbps = NaN"));
        assert!(serde_json::from_str::<Feedback>(r#"{"at_ns": 1, "cwnd": 3}"#).is_err());
    }
}
