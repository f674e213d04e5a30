//! The transfer's own RTT as an OPS probe: `TCP_INFO` read from the data
//! socket, shaped like an echo burst so the 000 §3.2 aggregation (10 readings
//! 1 ms apart → one 1 Hz sample) and every consumer of [`EchoProbe`] take it
//! unchanged.
//!
//! Why: echo probes need something at the peer (an ICMP path, or a UDP echo
//! responder such as `opsel recv`'s) and ICMP needs a ping socket or
//! CAP_NET_RAW. The data socket already carries an RTT estimate the kernel
//! updates on every ACK, with no packet of our own on the path.
//!
//! What the reading is: `tcpi_rtt`, the kernel's smoothed RTT (RFC 6298
//! srtt, gain 1/8 per ACK). While the transfer sends, ACKs arrive every
//! packet or two, so srtt follows the queue within a few ACKs; it lags a step
//! change by about 8 ACKs (sub-millisecond at tens of Mbit/s and above).
//! While the socket is silent (an active pattern's S segments, an
//! application stall) no ACK arrives and srtt freezes: such readings are
//! reported as unanswered, so a silent second becomes a lost sample rather
//! than a stale number. This makes the source fit passive probing (the
//! transfer keeps sending) and the bursts of active patterns, not silences.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use super::clock::monotonic_ns;
use super::rtt::EchoProbe;
use super::tcp_info::tcp_info;
use crate::{Error, Result};

/// Default: a reading counts only if the socket received an ACK within the
/// last 200 ms (a 1 Hz sample spans 10 ms of readings; an ACK gap of 200 ms
/// means the transfer is not sending).
pub const DEFAULT_MAX_ACK_AGE_MS: u32 = 200;

/// Readings kept for a caller that has not collected them (a burst is 10).
const MAX_PENDING: usize = 64;

/// [`EchoProbe`] over a TCP socket's `TCP_INFO`: `send_echo` reads srtt,
/// `recv_reply` hands it back at once as `send time + srtt`.
#[derive(Debug)]
pub struct TcpInfoRttProbe {
    fd: OwnedFd,
    max_ack_age_ms: u32,
    /// Fresh readings not yet handed back: (seq, send time, srtt ns). A
    /// queue, not one slot: a caller that runs late may send the next echo
    /// before it asked for the previous reply (echo_burst does on a loaded
    /// machine), and that reading must not be lost.
    pending: VecDeque<(u16, u64, u64)>,
}

impl TcpInfoRttProbe {
    /// Probe the RTT of `sock` (a connected TCP socket; opsel keeps a
    /// duplicate of the descriptor, the application keeps its own).
    pub fn new(sock: impl AsFd) -> Result<Self> {
        Self::with_max_ack_age(sock.as_fd(), DEFAULT_MAX_ACK_AGE_MS)
    }

    /// Like [`TcpInfoRttProbe::new`], counting readings only when the last ACK
    /// arrived within `max_ack_age_ms`.
    pub fn with_max_ack_age(sock: BorrowedFd<'_>, max_ack_age_ms: u32) -> Result<Self> {
        if max_ack_age_ms == 0 {
            return Err(Error::invalid(
                "max ACK age 0 ms would reject every reading; use e.g. 200",
            ));
        }
        // TCP_INFO fails with a clear error on anything but a TCP socket.
        tcp_info(sock)?;
        let fd = sock
            .try_clone_to_owned()
            .map_err(|e| Error::io("duplicate the data socket for the TCP_INFO RTT probe", e))?;
        Ok(TcpInfoRttProbe {
            fd,
            max_ack_age_ms,
            pending: VecDeque::with_capacity(MAX_PENDING),
        })
    }
}

impl EchoProbe for TcpInfoRttProbe {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        let now = monotonic_ns();
        let ti = tcp_info(&self.fd)?;
        // srtt is 0 until the first RTT sample of the connection.
        let fresh = ti.rtt_us > 0 && ti.last_ack_recv_ms <= self.max_ack_age_ms;
        if fresh {
            if self.pending.len() == MAX_PENDING {
                self.pending.pop_front(); // nobody is collecting; keep it bounded
            }
            self.pending.push_back((seq, now, ti.rtt_ns()));
        }
        Ok(now)
    }

    fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>> {
        match self.pending.pop_front() {
            // The answer exists as soon as it was read.
            Some((seq, sent, rtt)) => Ok(Some((seq, sent + rtt))),
            // A stale reading never gets an answer: wait out the timeout like
            // a lost echo instead of returning at once, so a caller polling
            // for replies does not spin.
            None => {
                std::thread::sleep(timeout);
                Ok(None)
            }
        }
    }
}
