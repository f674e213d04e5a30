//! The byte-accounting interval of [`DriverEvent::Interval`], one meter for
//! [`OpsDriver::run`](super::OpsDriver::run) and
//! [`send_fixed`](super::send_fixed) so the OPS run and its fixed-CCA
//! baselines (000 Table 6.3) count bytes the same way: bytes handed to the
//! socket per interval, and the peer-acknowledged delta from `TCP_INFO`.

use std::os::fd::BorrowedFd;

use super::DriverEvent;
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
}

impl IntervalMeter {
    /// Intervals of `len_ns` from `t0_ns`; the acknowledged count starts at
    /// what `TCP_INFO` says now.
    pub(super) fn new(fd: BorrowedFd<'_>, t0_ns: u64, len_ns: u64) -> Self {
        Self::with_acked(t0_ns, len_ns, acked(fd))
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
        Some(self.close_with(total_bytes, acked(fd)))
    }

    fn close_with(&mut self, total_bytes: u64, acked: Option<u64>) -> Interval {
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
        };
        self.base_bytes = total_bytes;
        self.start_ns = self.end_ns;
        self.end_ns = self.end_ns.saturating_add(self.len_ns);
        iv
    }
}

/// The peer-acknowledged byte count, where the kernel reports it.
fn acked(fd: BorrowedFd<'_>) -> Option<u64> {
    tcp_info(fd).ok().and_then(|i| i.bytes_acked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_consecutive_and_count_deltas() {
        let mut m = IntervalMeter::with_acked(100, 10, Some(5));
        assert_eq!(m.due_ns(), 110);
        let a = m.close_with(40, Some(25));
        assert_eq!(
            a,
            Interval {
                start_ns: 100,
                end_ns: 110,
                bytes: 40,
                acked_bytes: Some(20)
            }
        );
        // A late close keeps the grid: the next interval is [110, 120).
        let b = m.close_with(100, None);
        assert_eq!(
            (b.start_ns, b.end_ns, b.bytes, b.acked_bytes),
            (110, 120, 60, None)
        );
        // No acknowledged base: no delta, then one again.
        let c = m.close_with(100, Some(30));
        assert_eq!((c.bytes, c.acked_bytes), (0, None));
        let e = m
            .close_with(150, Some(70))
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
    }
}
