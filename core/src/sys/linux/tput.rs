//! Live per-interval throughput of one TCP connection from `TCP_INFO`: the input
//! stream of FastProb (004 §III: one throughput report per interval i; 004 §8A:
//! derived in the socket adapter from the delta of `tcpi_bytes_acked`, with
//! `tcpi_delivery_rate` as an extra signal).
//!
//! Sender side the throughput is acknowledged bytes per interval; receiver side it
//! is received bytes. Sampling follows a fixed grid `t0 + k·i` so that a late wake-up
//! shortens the next interval instead of drifting the schedule; each sample carries
//! its true interval length, so rates stay exact.

use std::os::fd::AsFd;
use std::time::Duration;

use super::clock::{monotonic_ns, sleep_until_monotonic};
use super::tcp_info::{tcp_info, TcpInfo, TcpInterval};
use crate::error::{Error, Result};

/// Which byte counter is the transfer's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Bytes acknowledged by the peer (`tcpi_bytes_acked`).
    Sender,
    /// Bytes received (`tcpi_bytes_received`).
    Receiver,
}

/// One interval's throughput.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputSample {
    /// Monotonic time at the end of the interval (ns).
    pub at_ns: u64,
    /// Actual interval length (ns), > 0.
    pub interval_ns: u64,
    /// Bytes acknowledged (sender) or received (receiver) in the interval.
    pub bytes: u64,
    /// `bytes · 8 / interval`, bit/s: the FastProb sample.
    pub rate_bps: f64,
    /// The kernel's latest delivery-rate estimate, bit/s (sender; `None` when the
    /// kernel does not report it or nothing was delivered yet).
    pub delivery_rate_bps: Option<f64>,
    /// The delivery-rate sample was application-limited (sender had nothing to send).
    pub app_limited: bool,
    /// Smoothed RTT at the end of the interval (ns).
    pub rtt_ns: u64,
    /// Segments retransmitted in the interval.
    pub retrans_segs: u32,
}

impl ThroughputSample {
    /// Pure conversion of a snapshot difference; `None` when the counter of `side`
    /// is missing (kernel too old) or went backwards (a different socket).
    pub fn from_interval(iv: &TcpInterval, cur: &TcpInfo, side: Side) -> Option<Self> {
        let bytes = match side {
            Side::Sender => iv.acked_bytes,
            Side::Receiver => iv.received_bytes,
        }?;
        Some(ThroughputSample {
            at_ns: iv.at_ns,
            interval_ns: iv.interval_ns,
            bytes,
            rate_bps: bytes as f64 * 8.0 * 1e9 / iv.interval_ns as f64,
            delivery_rate_bps: cur
                .delivery_rate_bytes_per_s
                .filter(|r| *r > 0)
                .map(|r| r as f64 * 8.0),
            app_limited: cur.delivery_rate_app_limited,
            rtt_ns: iv.rtt_ns,
            retrans_segs: iv.retrans_segs,
        })
    }
}

/// Samples one connection's throughput every `interval`. Owns no thread: call
/// [`ThroughputSampler::wait_next`] (blocks until the next grid point) or
/// [`ThroughputSampler::sample_now`] from the application's loop.
pub struct ThroughputSampler<F: AsFd> {
    fd: F,
    side: Side,
    interval_ns: u64,
    prev: TcpInfo,
    prev_ns: u64,
    next_ns: u64,
}

impl<F: AsFd> ThroughputSampler<F> {
    /// Take the first snapshot now. Errors: `interval` is zero or above an hour,
    /// the socket is not TCP, or the kernel does not report the counter of `side`.
    pub fn new(fd: F, side: Side, interval: Duration) -> Result<Self> {
        let interval_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
        if interval_ns == 0 || interval_ns > 3_600_000_000_000 {
            return Err(Error::invalid(format!(
                "throughput interval {interval:?} must be in (0, 1 h] (004 §III: 1 s; 100 ms on a LAN)"
            )));
        }
        let prev = tcp_info(fd.as_fd())?;
        let has = match side {
            Side::Sender => prev.bytes_acked.is_some(),
            Side::Receiver => prev.bytes_received.is_some(),
        };
        if !has {
            return Err(Error::Unsupported(format!(
                "this kernel's TCP_INFO ({} bytes) has no {} counter (Linux >= 4.1 reports it)",
                prev.len,
                match side {
                    Side::Sender => "tcpi_bytes_acked",
                    Side::Receiver => "tcpi_bytes_received",
                }
            )));
        }
        let now = monotonic_ns();
        Ok(ThroughputSampler {
            fd,
            side,
            interval_ns,
            prev,
            prev_ns: now,
            next_ns: now.saturating_add(interval_ns),
        })
    }

    /// The sampling interval (ns).
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Snapshot now and return the throughput since the previous snapshot (`None`
    /// if the monotonic clock has not advanced).
    pub fn sample_now(&mut self) -> Result<Option<ThroughputSample>> {
        let cur = tcp_info(self.fd.as_fd())?;
        let now = monotonic_ns();
        let Some(iv) = TcpInterval::between(&self.prev, self.prev_ns, &cur, now) else {
            return Ok(None);
        };
        self.prev = cur;
        self.prev_ns = now;
        ThroughputSample::from_interval(&iv, &cur, self.side)
            .map(Some)
            .ok_or_else(|| {
                Error::invalid(
                    "the socket's byte counter went backwards; was the descriptor reused for another connection?",
                )
            })
    }

    /// Sleep until the next grid point and sample. Missed grid points (the caller
    /// was late) are skipped; the returned interval covers the whole gap.
    pub fn wait_next(&mut self) -> Result<ThroughputSample> {
        let now = monotonic_ns();
        if self.next_ns <= now {
            let missed = (now - self.next_ns) / self.interval_ns + 1;
            self.next_ns = self
                .next_ns
                .saturating_add(missed.saturating_mul(self.interval_ns));
        }
        sleep_until_monotonic(self.next_ns);
        self.next_ns = self.next_ns.saturating_add(self.interval_ns);
        loop {
            if let Some(s) = self.sample_now()? {
                return Ok(s);
            }
        }
    }

    /// Monotonic time of the next grid point (ns): the deadline of an event
    /// loop that calls [`ThroughputSampler::poll`] instead of sleeping here.
    pub fn due_ns(&self) -> u64 {
        self.next_ns
    }

    /// The non-blocking form of [`ThroughputSampler::wait_next`] for a loop
    /// that also moves bytes (`opsel send`'s pump): `None` before the next
    /// grid point; at or after it, the sample, and the grid moves past `now_ns`
    /// (missed points are skipped as in `wait_next`).
    pub fn poll(&mut self, now_ns: u64) -> Result<Option<ThroughputSample>> {
        if now_ns < self.next_ns {
            return Ok(None);
        }
        let missed = (now_ns - self.next_ns) / self.interval_ns + 1;
        self.next_ns = self
            .next_ns
            .saturating_add(missed.saturating_mul(self.interval_ns));
        self.sample_now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_from_snapshots() {
        let a = TcpInfo {
            bytes_acked: Some(1_000),
            bytes_received: Some(10),
            ..Default::default()
        };
        let b = TcpInfo {
            bytes_acked: Some(126_000),
            bytes_received: Some(10),
            delivery_rate_bytes_per_s: Some(250_000),
            delivery_rate_app_limited: true,
            total_retrans: 3,
            rtt_us: 900,
            ..Default::default()
        };
        let iv = TcpInterval::between(&a, 0, &b, 100_000_000).unwrap();
        let s = ThroughputSample::from_interval(&iv, &b, Side::Sender).unwrap();
        assert_eq!(s.bytes, 125_000);
        assert_eq!(s.rate_bps, 10_000_000.0);
        assert_eq!(s.delivery_rate_bps, Some(2_000_000.0));
        assert!(s.app_limited);
        assert_eq!((s.retrans_segs, s.rtt_ns), (3, 900_000));
        let r = ThroughputSample::from_interval(&iv, &b, Side::Receiver).unwrap();
        assert_eq!((r.bytes, r.rate_bps), (0, 0.0));
        // Missing counter (old kernel) or a counter that went backwards: None.
        let old = TcpInfo::default();
        let iv = TcpInterval::between(&old, 0, &old, 1).unwrap();
        assert!(ThroughputSample::from_interval(&iv, &old, Side::Sender).is_none());
        let iv = TcpInterval::between(&b, 0, &a, 1).unwrap();
        assert!(ThroughputSample::from_interval(&iv, &a, Side::Sender).is_none());
    }
}
