//! Receive side of probe trains: per-packet kernel RX timestamps
//! (`SO_TIMESTAMPNS`, software, 1 ns resolution), `recvmmsg` batches, and the
//! sequence number / send stamp parsed from the payload ([`super::wire`]).
//!
//! 001 §3 lists receiver timestamping errors among the causes of wrong
//! receive gaps (user-space `gettimeofday` after `recv` adds scheduling
//! noise); the kernel stamp is taken when the packet enters the stack, so the
//! receive gaps `g_r` are measured before any of that.

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use super::clock::{monotonic_ns, realtime_minus_monotonic_ns, timespec_ns};
use super::sockopt::{os_error, set_val};
use super::wire::{ProbeHeader, HEADER_LEN};
use crate::{Error, Result};

/// Datagrams read per `recvmmsg`.
pub const RX_BATCH: usize = 32;

/// One received probe packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxRecord {
    pub seq: u32,
    pub train_id: u32,
    pub sched_offset_ns: u64,
    /// Sender's CLOCK_MONOTONIC just before its send call.
    pub send_mono_ns: u64,
    /// Kernel RX timestamp (CLOCK_REALTIME ns), if the kernel attached one.
    pub rx_kernel_realtime_ns: Option<u64>,
    /// Kernel RX timestamp converted to CLOCK_MONOTONIC ns.
    pub rx_kernel_mono_ns: Option<u64>,
    /// CLOCK_MONOTONIC when `recvmmsg` returned (fallback, noisier).
    pub rx_user_mono_ns: u64,
    /// Payload bytes.
    pub len: usize,
}

impl RxRecord {
    /// Best receive time (kernel stamp when present), CLOCK_MONOTONIC ns.
    pub fn rx_mono_ns(&self) -> u64 {
        self.rx_kernel_mono_ns.unwrap_or(self.rx_user_mono_ns)
    }
}

/// Received packets as columns in arrival order (the Python and Node array form).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RxColumns {
    pub seq: Vec<u32>,
    pub train_id: Vec<u32>,
    pub sched_offset_ns: Vec<u64>,
    pub send_ns: Vec<u64>,
    /// [`RxRecord::rx_mono_ns`].
    pub rx_ns: Vec<u64>,
    /// Whether each `rx_ns` is a kernel stamp.
    pub rx_kernel: Vec<bool>,
    pub len: Vec<u64>,
}

impl RxColumns {
    pub fn of(r: &[RxRecord]) -> Self {
        RxColumns {
            seq: r.iter().map(|x| x.seq).collect(),
            train_id: r.iter().map(|x| x.train_id).collect(),
            sched_offset_ns: r.iter().map(|x| x.sched_offset_ns).collect(),
            send_ns: r.iter().map(|x| x.send_mono_ns).collect(),
            rx_ns: r.iter().map(|x| x.rx_mono_ns()).collect(),
            rx_kernel: r.iter().map(|x| x.rx_kernel_mono_ns.is_some()).collect(),
            len: r.iter().map(|x| x.len as u64).collect(),
        }
    }
}

/// A UDP socket receiving opsel probe packets.
pub struct ProbeReceiver {
    sock: UdpSocket,
    bufs: Vec<Vec<u8>>,
    ctrl: Vec<[u64; 16]>,
    rt_off: i128,
    foreign: u64,
}

impl ProbeReceiver {
    /// Enable `SO_TIMESTAMPNS` on `sock` and preallocate `RX_BATCH` buffers of `buf_len` bytes.
    pub fn new(sock: UdpSocket, buf_len: usize) -> Result<ProbeReceiver> {
        if !(HEADER_LEN..=65_536).contains(&buf_len) {
            return Err(Error::invalid(format!(
                "buf_len {buf_len} outside {HEADER_LEN}..=65536"
            )));
        }
        let fd = sock.as_fd();
        set_val(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            "setsockopt(SO_TIMESTAMPNS)",
            1 as libc::c_int,
        )?;
        let rcv: libc::c_int = 16 << 20;
        if set_val(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            "SO_RCVBUFFORCE",
            rcv,
        )
        .is_err()
        {
            let _ = set_val(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, "SO_RCVBUF", rcv);
        }
        Ok(ProbeReceiver {
            sock,
            bufs: (0..RX_BATCH).map(|_| vec![0u8; buf_len]).collect(),
            ctrl: vec![[0u64; 16]; RX_BATCH],
            rt_off: realtime_minus_monotonic_ns(),
            foreign: 0,
        })
    }

    /// The underlying socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Datagrams received that were not opsel probes (ignored).
    pub fn foreign_packets(&self) -> u64 {
        self.foreign
    }

    /// Wait up to `timeout` for data, then read one batch (up to [`RX_BATCH`])
    /// and append the probe packets to `out`. Returns how many were appended
    /// (0 on timeout).
    pub fn recv_batch(&mut self, timeout: Duration, out: &mut Vec<RxRecord>) -> Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(os_error("poll", self.sock.as_fd(), e));
        }
        if rc == 0 {
            return Ok(0);
        }
        // SAFETY: zeroed arrays are valid; pointers below refer to self's buffers.
        let mut iov: [libc::iovec; RX_BATCH] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; RX_BATCH] = unsafe { std::mem::zeroed() };
        for k in 0..RX_BATCH {
            iov[k].iov_base = self.bufs[k].as_mut_ptr().cast();
            iov[k].iov_len = self.bufs[k].len();
            msgs[k].msg_hdr.msg_iov = &mut iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
            msgs[k].msg_hdr.msg_control = self.ctrl[k].as_mut_ptr().cast();
            msgs[k].msg_hdr.msg_controllen = std::mem::size_of::<[u64; 16]>() as _;
        }
        // SAFETY: msgs describe live buffers; MSG_DONTWAIT since poll said readable.
        let n = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                RX_BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let user = monotonic_ns();
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                return Ok(0);
            }
            return Err(os_error("recvmmsg", self.sock.as_fd(), e));
        }
        let mut appended = 0;
        for m in msgs.iter().take(n as usize) {
            let len = m.msg_len as usize;
            let idx = (m.msg_hdr.msg_iov as usize - iov.as_ptr() as usize)
                / std::mem::size_of::<libc::iovec>();
            let Some(h) = ProbeHeader::decode(&self.bufs[idx][..len]) else {
                self.foreign += 1;
                continue;
            };
            let mut rt = None;
            // SAFETY: walking cmsgs the kernel wrote within msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    {
                        let ts: libc::timespec =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        rt = Some(timespec_ns(&ts));
                    }
                    c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
                }
            }
            out.push(RxRecord {
                seq: h.seq,
                train_id: h.train_id,
                sched_offset_ns: h.sched_offset_ns,
                send_mono_ns: h.send_mono_ns,
                rx_kernel_realtime_ns: rt,
                rx_kernel_mono_ns: rt.map(|r| (r as i128 - self.rt_off).max(0) as u64),
                rx_user_mono_ns: user,
                len,
            });
            appended += 1;
        }
        Ok(appended)
    }

    /// Receive until `expected` probe packets arrived or nothing arrived for `idle`.
    pub fn recv_train(
        &mut self,
        expected: usize,
        idle: Duration,
        out: &mut Vec<RxRecord>,
    ) -> Result<usize> {
        self.rt_off = realtime_minus_monotonic_ns();
        let mut got = 0;
        while got < expected {
            let k = self.recv_batch(idle, out)?;
            if k == 0 {
                break;
            }
            got += k;
        }
        Ok(got)
    }
}

/// Gap errors `g_o - g_i` (001 §2 Fig 4.5: observed minus intended) in ns,
/// for consecutive sequence numbers of one train, observed = kernel receive
/// gap, intended = scheduled gap. Pairs with a loss or reordering between
/// them are skipped. Appends to `out`.
pub fn receive_gap_errors_ns(records: &[RxRecord], out: &mut Vec<i64>) {
    for w in records.windows(2) {
        if w[1].seq != w[0].seq.wrapping_add(1) || w[1].train_id != w[0].train_id {
            continue;
        }
        let observed = w[1].rx_mono_ns() as i64 - w[0].rx_mono_ns() as i64;
        let intended = w[1].sched_offset_ns as i64 - w[0].sched_offset_ns as i64;
        out.push(observed - intended);
    }
}

/// Mean, standard deviation and percentiles of gap errors (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapStats {
    pub count: usize,
    pub mean_ns: f64,
    pub std_ns: f64,
    /// 99th percentile of |error|.
    pub p99_abs_ns: f64,
    /// 50th percentile of |error|.
    pub p50_abs_ns: f64,
    pub max_abs_ns: f64,
}

impl GapStats {
    /// Statistics of `errors_ns`; `None` when empty. Sorts a copy.
    pub fn of(errors_ns: &[i64]) -> Option<GapStats> {
        if errors_ns.is_empty() {
            return None;
        }
        let n = errors_ns.len() as f64;
        let mean = errors_ns.iter().map(|&e| e as f64).sum::<f64>() / n;
        let var = errors_ns
            .iter()
            .map(|&e| (e as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        let mut abs: Vec<u64> = errors_ns.iter().map(|e| e.unsigned_abs()).collect();
        abs.sort_unstable();
        let pct = |p: f64| abs[(((abs.len() - 1) as f64) * p).round() as usize] as f64;
        Some(GapStats {
            count: errors_ns.len(),
            mean_ns: mean,
            std_ns: var.sqrt(),
            p99_abs_ns: pct(0.99),
            p50_abs_ns: pct(0.50),
            max_abs_ns: abs[abs.len() - 1] as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(seq: u32, sched: u64, rx: u64) -> RxRecord {
        RxRecord {
            seq,
            sched_offset_ns: sched,
            rx_kernel_mono_ns: Some(rx),
            ..Default::default()
        }
    }

    #[test]
    fn gap_errors_skip_losses() {
        let r = [
            rec(0, 0, 1000),
            rec(1, 100, 1110),
            rec(3, 300, 1290),
            rec(4, 400, 1385),
        ];
        let mut e = Vec::new();
        receive_gap_errors_ns(&r, &mut e);
        assert_eq!(e, vec![10, -5]);
        let s = GapStats::of(&e).unwrap();
        assert_eq!(s.count, 2);
        assert!((s.mean_ns - 2.5).abs() < 1e-9);
        assert!((s.std_ns - 7.5).abs() < 1e-9);
        assert_eq!(s.max_abs_ns, 10.0);
        assert!(GapStats::of(&[]).is_none());
    }

    proptest! {
        #[test]
        fn perfect_pacing_has_zero_error(n in 2usize..200, gap in 1u64..1_000_000, t0 in 0u64..1_000_000_000) {
            let r: Vec<RxRecord> = (0..n).map(|i| rec(i as u32, i as u64 * gap, t0 + i as u64 * gap)).collect();
            let mut e = Vec::new();
            receive_gap_errors_ns(&r, &mut e);
            prop_assert_eq!(e.len(), n - 1);
            let s = GapStats::of(&e).unwrap();
            prop_assert_eq!(s.p99_abs_ns, 0.0);
        }

        #[test]
        fn stats_bounds(e in proptest::collection::vec(-1_000_000i64..1_000_000, 1..300)) {
            let s = GapStats::of(&e).unwrap();
            prop_assert!(s.p50_abs_ns <= s.p99_abs_ns && s.p99_abs_ns <= s.max_abs_ns);
            prop_assert!(s.std_ns >= 0.0 && s.mean_ns.abs() <= s.max_abs_ns + 1e-6);
        }
    }
}
