//! The byte-accounting interval of [`DriverEvent::Interval`], one meter for
//! [`OpsDriver::run`](super::OpsDriver::run) and
//! [`send_fixed`](super::send_fixed) so the OPS run and its fixed-CCA
//! baselines (000 Table 6.3) count bytes the same way: bytes handed to the
//! socket per interval, and the peer-acknowledged delta from `TCP_INFO`.
//! The same `TCP_INFO` read gives the interval's smoothed RTT and delivery
//! rate, the per-interval feedback a DPS policy learns from (002 §1.7,
//! Monitoring; [`Interval::feedback`]).

use std::os::fd::BorrowedFd;

use super::DriverEvent;
use crate::dps::Feedback;
use crate::ops::Phase;
use crate::probe::CcaName;
use crate::sys::linux::tcp_info::tcp_info;

/// Consecutive intervals `[start, start + len)` from the run's start.
pub(super) struct IntervalMeter {
    len_ns: u64,
    start_ns: u64,
    end_ns: u64,
    base_bytes: u64,
    acked_base: Option<u64>,
}

/// One closed interval, before the driver adds what it knows at that moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Interval {
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) bytes: u64,
    pub(super) acked_bytes: Option<u64>,
    /// What `TCP_INFO` said at the close.
    pub(super) info: InfoSample,
}

/// The fields of one `TCP_INFO` read the meter uses.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct InfoSample {
    pub(super) bytes_acked: Option<u64>,
    pub(super) rtt_ms: Option<f64>,
    pub(super) delivery_rate_mbps: Option<f64>,
}

impl Interval {
    /// The event, with the totals, CCA and phase at the interval's close.
    pub(super) fn event(self, total_bytes: u64, cca: CcaName, phase: Phase) -> DriverEvent {
        DriverEvent::Interval {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            bytes: self.bytes,
            acked_bytes: self.acked_bytes,
            total_bytes,
            cca,
            phase,
        }
    }

    /// The interval as DPS feedback (002 §1.7): the kernel's smoothed RTT
    /// and delivery rate at its end; `None` where the kernel has none.
    pub(super) fn feedback(&self) -> Feedback {
        Feedback {
            at_ns: self.end_ns,
            rtt_ms: self.info.rtt_ms,
            delivery_rate_mbps: self.info.delivery_rate_mbps,
            ..Feedback::default()
        }
    }
}

impl IntervalMeter {
    /// Intervals of `len_ns` from `t0_ns`; the acknowledged count starts at
    /// what `TCP_INFO` says now.
    pub(super) fn new(fd: BorrowedFd<'_>, t0_ns: u64, len_ns: u64) -> Self {
        Self::with_acked(t0_ns, len_ns, info(fd).bytes_acked)
    }

    fn with_acked(t0_ns: u64, len_ns: u64, acked_base: Option<u64>) -> Self {
        Self {
            len_ns,
            start_ns: t0_ns,
            end_ns: t0_ns.saturating_add(len_ns),
            base_bytes: 0,
            acked_base,
        }
    }

    /// When the current interval ends (a wake-up deadline of the loop).
    pub(super) fn due_ns(&self) -> u64 {
        self.end_ns
    }

    /// Close the current interval if it ended by `now_ns`, with `total_bytes`
    /// handed to the socket so far.
    pub(super) fn close(
        &mut self,
        fd: BorrowedFd<'_>,
        now_ns: u64,
        total_bytes: u64,
    ) -> Option<Interval> {
        if now_ns < self.end_ns {
            return None;
        }
        Some(self.close_with(total_bytes, info(fd)))
    }

    fn close_with(&mut self, total_bytes: u64, info: InfoSample) -> Interval {
        let acked = info.bytes_acked;
        let acked_bytes = match (acked, self.acked_base) {
            (Some(a), Some(b)) => Some(a.saturating_sub(b)),
            _ => None,
        };
        self.acked_base = acked;
        let iv = Interval {
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            bytes: total_bytes - self.base_bytes,
            acked_bytes,
            info,
        };
        self.base_bytes = total_bytes;
        self.start_ns = self.end_ns;
        self.end_ns = self.end_ns.saturating_add(self.len_ns);
        iv
    }
}

/// One `TCP_INFO` read: acknowledged bytes, smoothed RTT (µs → ms) and
/// delivery rate (bytes/s → Mb/s), where the kernel reports them.
fn info(fd: BorrowedFd<'_>) -> InfoSample {
    match tcp_info(fd) {
        Ok(i) => InfoSample {
            bytes_acked: i.bytes_acked,
            rtt_ms: (i.rtt_us > 0).then(|| f64::from(i.rtt_us) / 1e3),
            delivery_rate_mbps: i.delivery_rate_bytes_per_s.map(|r| r as f64 * 8.0 / 1e6),
        },
        Err(_) => InfoSample::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_consecutive_and_count_deltas() {
        let mut m = IntervalMeter::with_acked(100, 10, Some(5));
        assert_eq!(m.due_ns(), 110);
        let acked = |a: Option<u64>| InfoSample {
            bytes_acked: a,
            ..InfoSample::default()
        };
        let a = m.close_with(40, acked(Some(25)));
        assert_eq!(
            (a.start_ns, a.end_ns, a.bytes, a.acked_bytes),
            (100, 110, 40, Some(20))
        );
        // A late close keeps the grid: the next interval is [110, 120).
        let b = m.close_with(100, acked(None));
        assert_eq!(
            (b.start_ns, b.end_ns, b.bytes, b.acked_bytes),
            (110, 120, 60, None)
        );
        // No acknowledged base: no delta, then one again.
        let c = m.close_with(100, acked(Some(30)));
        assert_eq!((c.bytes, c.acked_bytes), (0, None));
        let e = m
            .close_with(150, acked(Some(70)))
            .event(150, CcaName::BBR, Phase::Probe);
        assert_eq!(
            e,
            DriverEvent::Interval {
                start_ns: 130,
                end_ns: 140,
                bytes: 50,
                acked_bytes: Some(40),
                total_bytes: 150,
                cca: CcaName::BBR,
                phase: Phase::Probe
            }
        );
        // Feedback for a DPS policy: the interval's end and the kernel's
        // RTT and delivery rate.
        let info = InfoSample {
            bytes_acked: Some(80),
            rtt_ms: Some(12.5),
            delivery_rate_mbps: Some(96.0),
        };
        let f = m.close_with(160, info).feedback();
        assert_eq!(
            f,
            Feedback {
                at_ns: 150,
                rtt_ms: Some(12.5),
                delivery_rate_mbps: Some(96.0),
                ..Feedback::default()
            }
        );
    }
}
