//! Paced UDP sender for probe trains and p-streams (001 §1–2: packet i
//! probes rate `r_i` through its gap `g_s^i = p_i / r_i`; the estimators need
//! the gaps that really happened, so every departure is reported).
//!
//! Two backends (001 §2.4 \[Ours\]):
//!
//! * **`SO_TXTIME`** — each packet carries an `SCM_TXTIME` launch time and
//!   the qdisc releases it. Chosen only when [`qdisc::detect_txtime`](super::qdisc::detect_txtime) finds
//!   fq/etf on the egress device; `setsockopt` success proves nothing (it
//!   succeeds on every qdisc and the times are then silently ignored).
//! * **User space** — absolute `CLOCK_MONOTONIC` deadlines (no drift, and no
//!   floor of a µs clock, the bias 001 §2.1 found in pathChirp's
//!   `gettimeofday`), `clock_nanosleep` until `spin_ns` before the deadline
//!   with 1 ns timer slack (`PR_SET_TIMERSLACK`; the default 50 µs slack
//!   would add up to 50 µs of sleep overshoot), then busy-wait (001 §2.1
//!   Alg. 2: sleep + spin, `SLEEPTHRESH` made configurable). Optional
//!   `SCHED_FIFO` shields the spin from preemption (001 §2.1 weakness 2) when
//!   the process may use it. Packets whose scheduled gap is below
//!   `batch_gap_ns` leave in one `sendmmsg` (a separate syscall cannot make
//!   a gap that small anyway).
//!
//! **Catch-up after a stall** (the thread was preempted and is late by more
//! than `stall_ns`) is a choice, [`CatchUp`]:
//!
//! * `Rebase` (default) shifts every later deadline by the lateness, so the
//!   train keeps its gaps and only its end moves. Rapid is gap-clocked
//!   (001 §1: "each packet leaves when its gap from the previous packet has
//!   elapsed"), so a p-stream stays a valid probe of its rates.
//! * `Burst` keeps the absolute schedule: packets already due leave
//!   back-to-back, later ones on time. Use it when absolute times matter
//!   (e.g. the 1 ms echo grid of 000 §3.2) more than individual gaps.
//!
//! Either way the achieved departure of every packet is reported (software
//! TX timestamp from the error queue when the driver provides one, else the
//! clock right after the send call), so estimators work with true gaps.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::clock::{monotonic_ns, realtime_minus_monotonic_ns, sleep_until_monotonic, timespec_ns};
use super::qdisc::{detect_txtime, TxTimeSupport};
use super::sockopt::{os_error, set_val};
use super::wire::{ProbeHeader, HEADER_LEN};
use crate::{Error, Result};

/// Packets handed to the kernel in one `sendmmsg`.
pub const BATCH_MAX: usize = 32;
/// Largest UDP payload over IPv4.
pub const MAX_PAYLOAD: usize = 65_507;

/// Which backend the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// SO_TXTIME when the egress qdisc enforces it, else user space.
    Auto,
    /// Always the user-space pacer.
    UserSpace,
    /// SO_TXTIME or an error explaining why it would be ignored.
    TxTime,
}

/// The backend a sender uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Kernel qdisc (fq/etf) releases packets at their `SCM_TXTIME`, on clock `clockid`.
    TxTime { clockid: i32 },
    /// Sleep-then-spin pacer in this thread.
    UserSpace,
}

/// What to do when the sender falls behind its schedule by more than `stall_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Shift the rest of the schedule by the lateness (gaps preserved).
    Rebase,
    /// Send overdue packets at once, keep the absolute schedule.
    Burst,
}

/// Sender settings. `Default` gives the values discussed in the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderConfig {
    pub backend: BackendChoice,
    /// Stop sleeping this long before a deadline and spin (user space). Default 50 µs.
    pub spin_ns: u64,
    /// Timer slack for this thread while sending (ns). Default 1.
    pub timer_slack_ns: u64,
    /// Try SCHED_FIFO (priority `fifo_priority`) while sending; ignored without permission.
    pub sched_fifo: bool,
    pub fifo_priority: i32,
    /// Packets scheduled less than this after the previous one share a `sendmmsg`. Default 1 µs.
    pub batch_gap_ns: u64,
    pub catch_up: CatchUp,
    /// Lateness that counts as a stall. Default 50 µs.
    pub stall_ns: u64,
    /// Request software TX timestamps (SO_TIMESTAMPING) for departure times. Default true.
    pub tx_timestamps: bool,
    /// Delay from `send_train` call to the first departure. Default 200 µs.
    pub start_delay_ns: u64,
    /// SO_TXTIME backend: hand each packet to the kernel this long before its launch time. Default 1 ms.
    pub txtime_lead_ns: u64,
    /// Wait this long after the last packet for outstanding TX timestamps. Default 20 ms.
    pub stamp_wait_ns: u64,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            backend: BackendChoice::Auto,
            spin_ns: 50_000,
            timer_slack_ns: 1,
            sched_fifo: false,
            fifo_priority: 1,
            batch_gap_ns: 1_000,
            catch_up: CatchUp::Rebase,
            stall_ns: 50_000,
            tx_timestamps: true,
            start_delay_ns: 200_000,
            txtime_lead_ns: 1_000_000,
            stamp_wait_ns: 20_000_000,
        }
    }
}

/// Where a reported departure time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepartureSource {
    /// Software TX timestamp taken by the driver (`SOF_TIMESTAMPING_TX_SOFTWARE`).
    TxSoftwareStamp,
    /// `CLOCK_MONOTONIC` read right after the send call returned.
    ClockAfterSend,
}

/// One packet of a train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketReport {
    pub seq: u32,
    /// Deadline after any re-basing (CLOCK_MONOTONIC ns).
    pub scheduled_mono_ns: u64,
    /// Stamp written into the payload just before the send call.
    pub stamped_mono_ns: u64,
    /// CLOCK_MONOTONIC right after the send call returned.
    pub sent_mono_ns: u64,
    /// Software TX timestamp converted to CLOCK_MONOTONIC, if the kernel gave one.
    pub tx_stamp_mono_ns: Option<u64>,
}

impl PacketReport {
    /// Best available departure time (ns, CLOCK_MONOTONIC) and its source.
    pub fn departure(&self) -> (u64, DepartureSource) {
        match self.tx_stamp_mono_ns {
            Some(t) => (t, DepartureSource::TxSoftwareStamp),
            None => (self.sent_mono_ns, DepartureSource::ClockAfterSend),
        }
    }
}

/// Result of one train. Reuse it across trains to avoid allocation.
#[derive(Debug, Clone, Default)]
pub struct TrainReport {
    pub backend: Option<Backend>,
    pub train_id: u32,
    /// CLOCK_MONOTONIC of schedule offset 0.
    pub start_mono_ns: u64,
    pub packets: Vec<PacketReport>,
    /// Times the schedule was shifted (CatchUp::Rebase).
    pub rebases: u32,
    /// Largest lateness of a hand-off to the kernel (ns).
    pub max_lateness_ns: u64,
    /// Whether SCHED_FIFO was in effect.
    pub sched_fifo: bool,
    /// Packets with a software TX timestamp.
    pub tx_stamped: usize,
    /// Send calls that failed with ECONNREFUSED (no listener) and were retried.
    pub refused: u32,
    /// TX stamps discarded because they preceded their packet's send call.
    pub tx_stamp_rejected: usize,
}

crate::names::named!(BackendChoice {
    "auto" => BackendChoice::Auto,
    "userspace" => BackendChoice::UserSpace,
    "txtime" => BackendChoice::TxTime,
});
crate::names::named!(CatchUp { "rebase" => CatchUp::Rebase, "burst" => CatchUp::Burst });

impl Backend {
    /// `"txtime"` or `"userspace"`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::TxTime { .. } => "txtime",
            Backend::UserSpace => "userspace",
        }
    }
}

/// A train's packets as columns (the Python and Node array form).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainColumns {
    pub seq: Vec<u32>,
    pub scheduled_ns: Vec<u64>,
    /// Best achieved departure ([`PacketReport::departure`]).
    pub departure_ns: Vec<u64>,
    pub sent_ns: Vec<u64>,
    /// Whether each departure is a software TX stamp.
    pub tx_stamped: Vec<bool>,
}

impl TrainReport {
    /// The per-packet fields as columns.
    pub fn columns(&self) -> TrainColumns {
        let p = &self.packets;
        TrainColumns {
            seq: p.iter().map(|x| x.seq).collect(),
            scheduled_ns: p.iter().map(|x| x.scheduled_mono_ns).collect(),
            departure_ns: p.iter().map(|x| x.departure().0).collect(),
            sent_ns: p.iter().map(|x| x.sent_mono_ns).collect(),
            tx_stamped: p
                .iter()
                .map(|x| x.departure().1 == DepartureSource::TxSoftwareStamp)
                .collect(),
        }
    }

    /// `"txtime"` or `"userspace"` (user space before the first train).
    pub fn backend_name(&self) -> &'static str {
        self.backend.unwrap_or(Backend::UserSpace).name()
    }

    /// Achieved gaps between consecutive departures (ns), `gaps[i]` between packet i and i+1.
    pub fn departure_gaps_ns(&self) -> impl Iterator<Item = i64> + '_ {
        self.packets
            .windows(2)
            .map(|w| w[1].departure().0 as i64 - w[0].departure().0 as i64)
    }
}

/// A UDP socket plus the pacing machinery. Owns the socket (connected to `dst`).
pub struct PacedSender {
    sock: UdpSocket,
    dst: SocketAddr,
    cfg: SenderConfig,
    backend: Backend,
    txtime: Option<TxTimeSupport>,
    detect_error: Option<String>,
    bufs: Vec<Vec<u8>>,
    /// u64-aligned control buffers, one per batch slot (SCM_TXTIME).
    ctrl: Vec<[u64; 4]>,
    payload_max: usize,
    timestamping: bool,
    /// OPT_ID of the next datagram (kernel counts every datagram sent).
    next_tskey: u32,
}

fn check_schedule(schedule_ns: &[u64]) -> Result<()> {
    if schedule_ns.is_empty() {
        return Err(Error::invalid(
            "empty schedule; give at least one departure offset",
        ));
    }
    if schedule_ns.len() > u32::MAX as usize {
        return Err(Error::invalid(format!(
            "schedule of {} packets exceeds u32 sequence numbers",
            schedule_ns.len()
        )));
    }
    if let Some(i) = schedule_ns.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::invalid(format!(
            "schedule must be non-decreasing: offset {} ns at index {} is before {} ns at index {i}",
            schedule_ns[i + 1],
            i + 1,
            schedule_ns[i]
        )));
    }
    if schedule_ns[schedule_ns.len() - 1] > 3_600_000_000_000 {
        return Err(Error::invalid(format!(
            "schedule spans {} ns (> 1 h); split it into trains",
            schedule_ns[schedule_ns.len() - 1]
        )));
    }
    Ok(())
}

impl PacedSender {
    /// Connect `sock` to `dst`, pick the backend, and preallocate buffers for
    /// payloads up to `payload_max` bytes (>= 32, the probe header).
    pub fn new(
        sock: UdpSocket,
        dst: SocketAddr,
        payload_max: usize,
        cfg: SenderConfig,
    ) -> Result<PacedSender> {
        if !(HEADER_LEN..=MAX_PAYLOAD).contains(&payload_max) {
            return Err(Error::invalid(format!(
                "payload_max {payload_max} bytes outside {HEADER_LEN}..={MAX_PAYLOAD} (header is {HEADER_LEN} bytes)"
            )));
        }
        if cfg.spin_ns > 1_000_000_000 || cfg.stall_ns == 0 {
            return Err(Error::invalid(format!(
                "spin_ns {} must be <= 1 s and stall_ns {} must be > 0",
                cfg.spin_ns, cfg.stall_ns
            )));
        }
        sock.connect(dst)
            .map_err(|e| Error::io(format!("connect UDP socket to {dst}"), e))?;
        let (txtime, detect_error) = match detect_txtime(sock.as_fd(), dst.ip()) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let enforced = txtime
            .as_ref()
            .filter(|t| t.enforced)
            .and_then(|t| t.clockid);
        let backend = match (cfg.backend, enforced) {
            (BackendChoice::UserSpace, _) | (BackendChoice::Auto, None) => Backend::UserSpace,
            (_, Some(clockid)) => Backend::TxTime { clockid },
            (BackendChoice::TxTime, None) => {
                let why = txtime
                    .as_ref()
                    .map(|t| t.reason.clone())
                    .or(detect_error.clone())
                    .unwrap_or_default();
                return Err(Error::Unsupported(format!(
                    "SO_TXTIME requested but it would not be enforced toward {dst}: {why}; use BackendChoice::Auto or UserSpace"
                )));
            }
        };
        let fd = sock.as_fd();
        if let Backend::TxTime { clockid } = backend {
            let st = libc::sock_txtime { clockid, flags: 0 };
            set_val(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TXTIME,
                "setsockopt(SO_TXTIME)",
                st,
            )?;
        }
        let mut timestamping = false;
        if cfg.tx_timestamps {
            let flags: u32 = libc::SOF_TIMESTAMPING_TX_SOFTWARE
                | libc::SOF_TIMESTAMPING_SOFTWARE
                | libc::SOF_TIMESTAMPING_OPT_ID
                | libc::SOF_TIMESTAMPING_OPT_TSONLY;
            timestamping = set_val(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                "setsockopt(SO_TIMESTAMPING)",
                flags,
            )
            .is_ok();
            // Room for a whole train of error-queue stamps (~1 KiB of truesize each).
            let rcv: libc::c_int = 8 << 20;
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
        }
        let snd: libc::c_int = 8 << 20;
        if set_val(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            "SO_SNDBUFFORCE",
            snd,
        )
        .is_err()
        {
            let _ = set_val(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, "SO_SNDBUF", snd);
        }
        Ok(PacedSender {
            sock,
            dst,
            cfg,
            backend,
            txtime,
            detect_error,
            bufs: (0..BATCH_MAX).map(|_| vec![0u8; payload_max]).collect(),
            ctrl: vec![[0u64; 4]; BATCH_MAX],
            payload_max,
            timestamping,
            next_tskey: 0,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SO_TXTIME detection result (None if detection itself failed; see [`Self::detection_error`]).
    pub fn txtime_support(&self) -> Option<&TxTimeSupport> {
        self.txtime.as_ref()
    }

    /// Why detection failed, if it did (the sender then uses user space).
    pub fn detection_error(&self) -> Option<&str> {
        self.detect_error.as_deref()
    }

    /// The detection result as the bindings report it: when detection itself
    /// failed, not enforced, with the failure as the reason.
    pub fn txtime_report(&self) -> TxTimeSupport {
        self.txtime.clone().unwrap_or_else(|| TxTimeSupport {
            device: String::new(),
            root_qdisc: String::new(),
            enforced: false,
            clockid: None,
            reason: self
                .detect_error
                .clone()
                .unwrap_or_else(|| "detection failed".into()),
        })
    }

    /// Whether software TX timestamps were enabled on the socket.
    pub fn tx_timestamping(&self) -> bool {
        self.timestamping
    }

    /// The underlying socket.
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Destination.
    pub fn destination(&self) -> SocketAddr {
        self.dst
    }

    /// Send one train: packet i leaves at `start + schedule_ns[i]` with
    /// `payload_len` bytes (header + zero padding). Blocks until sent and
    /// TX stamps are collected. `report` is overwritten (reuse it: with
    /// enough capacity no allocation happens).
    pub fn send_train(
        &mut self,
        schedule_ns: &[u64],
        payload_len: usize,
        train_id: u32,
        report: &mut TrainReport,
    ) -> Result<()> {
        check_schedule(schedule_ns)?;
        if !(HEADER_LEN..=self.payload_max).contains(&payload_len) {
            return Err(Error::invalid(format!(
                "payload_len {payload_len} outside {HEADER_LEN}..={} (payload_max given to PacedSender::new)",
                self.payload_max
            )));
        }
        let guard = ThreadTuning::apply(&self.cfg);
        report.backend = Some(self.backend);
        report.train_id = train_id;
        report.packets.clear();
        report.packets.reserve(schedule_ns.len());
        report.rebases = 0;
        report.max_lateness_ns = 0;
        report.tx_stamped = 0;
        report.refused = 0;
        report.tx_stamp_rejected = 0;
        report.sched_fifo = guard.fifo;
        for b in self.bufs.iter_mut() {
            b[..payload_len].fill(0);
        }
        let rt_off = realtime_minus_monotonic_ns();
        let first_key = self.next_tskey;
        let base = monotonic_ns() + self.cfg.start_delay_ns;
        report.start_mono_ns = base;
        let res = self.run(
            schedule_ns,
            payload_len,
            train_id,
            base,
            report,
            first_key,
            rt_off,
        );
        if res.is_ok() && self.timestamping {
            let deadline = monotonic_ns() + self.cfg.stamp_wait_ns;
            while report.tx_stamped < report.packets.len() && monotonic_ns() < deadline {
                if self.drain_errqueue(report, first_key, rt_off) == 0 {
                    sleep_until_monotonic(monotonic_ns() + 200_000);
                }
            }
        }
        drop(guard);
        res
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        sched: &[u64],
        payload_len: usize,
        train_id: u32,
        base: u64,
        report: &mut TrainReport,
        first_key: u32,
        rt_off: i128,
    ) -> Result<()> {
        let n = sched.len();
        let txtime = matches!(self.backend, Backend::TxTime { .. });
        let lead = if txtime { self.cfg.txtime_lead_ns } else { 0 };
        // Offset from CLOCK_MONOTONIC to the qdisc clock (etf may use TAI).
        let clock_off: i128 = match self.backend {
            Backend::TxTime { clockid } if clockid != libc::CLOCK_MONOTONIC => {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: valid out-pointer.
                unsafe { libc::clock_gettime(clockid, &mut ts) };
                timespec_ns(&ts) as i128 - monotonic_ns() as i128
            }
            _ => 0,
        };
        let mut shift = 0u64;
        let mut i = 0usize;
        while i < n {
            let deadline = base + sched[i] + shift;
            let handoff = deadline.saturating_sub(lead);
            self.wait_until(handoff, report, first_key, rt_off);
            let now = monotonic_ns();
            let late = now.saturating_sub(handoff);
            report.max_lateness_ns = report.max_lateness_ns.max(late);
            if late > self.cfg.stall_ns && self.cfg.catch_up == CatchUp::Rebase {
                shift += late;
                report.rebases += 1;
            }
            let mut j = i + 1;
            while j < n && j - i < BATCH_MAX {
                let due = base + sched[j] + shift;
                let small_gap = sched[j] - sched[j - 1] < self.cfg.batch_gap_ns;
                let overdue = due.saturating_sub(lead) <= now;
                if small_gap || overdue {
                    j += 1;
                } else {
                    break;
                }
            }
            let count = j - i;
            for k in 0..count {
                let h = ProbeHeader {
                    seq: (i + k) as u32,
                    train_id,
                    sched_offset_ns: sched[i + k],
                    send_mono_ns: 0,
                };
                h.encode(&mut self.bufs[k][..payload_len])?;
                if txtime {
                    let launch = (base + sched[i + k] + shift) as i128 + clock_off;
                    write_txtime_cmsg(&mut self.ctrl[k], launch.max(0) as u64);
                }
            }
            let stamp = monotonic_ns();
            for b in self.bufs[..count].iter_mut() {
                ProbeHeader::stamp(b, stamp);
            }
            self.send_batch(count, payload_len, txtime, report)?;
            let after = monotonic_ns();
            for k in 0..count {
                report.packets.push(PacketReport {
                    seq: (i + k) as u32,
                    scheduled_mono_ns: base + sched[i + k] + shift,
                    stamped_mono_ns: stamp,
                    sent_mono_ns: after,
                    tx_stamp_mono_ns: None,
                });
            }
            i = j;
        }
        Ok(())
    }

    /// Sleep until `spin_ns` before `t`, then spin. Drains TX stamps while
    /// there is time so the error queue never overflows on long trains.
    fn wait_until(&mut self, t: u64, report: &mut TrainReport, first_key: u32, rt_off: i128) {
        let mut now = monotonic_ns();
        if self.timestamping && t > now + 20_000 {
            self.drain_errqueue(report, first_key, rt_off);
            now = monotonic_ns();
        }
        if t > now + self.cfg.spin_ns {
            sleep_until_monotonic(t - self.cfg.spin_ns);
        }
        while monotonic_ns() < t {
            std::hint::spin_loop();
        }
    }

    fn send_batch(
        &mut self,
        count: usize,
        payload_len: usize,
        txtime: bool,
        report: &mut TrainReport,
    ) -> Result<()> {
        // SAFETY: zeroed iovec/mmsghdr arrays are valid "empty" values.
        let mut iov: [libc::iovec; BATCH_MAX] = unsafe { std::mem::zeroed() };
        let mut msgs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
        for k in 0..count {
            iov[k].iov_base = self.bufs[k].as_mut_ptr().cast();
            iov[k].iov_len = payload_len;
            msgs[k].msg_hdr.msg_iov = &mut iov[k];
            msgs[k].msg_hdr.msg_iovlen = 1;
            if txtime {
                msgs[k].msg_hdr.msg_control = self.ctrl[k].as_mut_ptr().cast();
                // SAFETY: CMSG_SPACE is a pure computation.
                msgs[k].msg_hdr.msg_controllen = unsafe { libc::CMSG_SPACE(8) } as _;
            }
        }
        let mut done = 0usize;
        let mut refused_retry = false;
        while done < count {
            // SAFETY: msgs[done..count] point at live buffers owned by self for the call.
            let rc = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs[done..].as_mut_ptr(),
                    (count - done) as u32,
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // A previous datagram drew an ICMP port unreachable; the
                    // error is reported once and cleared. Retry once.
                    Some(libc::ECONNREFUSED) if !refused_retry => {
                        refused_retry = true;
                        report.refused += 1;
                        continue;
                    }
                    _ => {
                        return Err(os_error(
                            &format!("sendmmsg to {}", self.dst),
                            self.sock.as_fd(),
                            e,
                        ));
                    }
                }
            }
            done += rc as usize;
            // Count datagrams as the kernel does, also when a later call fails.
            self.next_tskey = self.next_tskey.wrapping_add(rc as u32);
        }
        Ok(())
    }

    /// Read software TX stamps from the error queue; returns how many were read.
    fn drain_errqueue(&mut self, report: &mut TrainReport, first_key: u32, rt_off: i128) -> usize {
        let mut got = 0;
        loop {
            match read_tx_stamp(self.sock.as_fd()) {
                Some((key, rt_ns)) => {
                    got += 1;
                    let idx = key.wrapping_sub(first_key) as usize;
                    let mono = (rt_ns as i128 - rt_off).max(0) as u64;
                    if let Some(p) = report.packets.get_mut(idx) {
                        // A driver stamp cannot precede the clock read before the
                        // send call (2 µs allows for the realtime->monotonic
                        // conversion). If it does, the OPT_ID counting is off
                        // (e.g. a failed send consumed a key): drop the stamp and
                        // fall back to the clock after send rather than report a
                        // wrong departure.
                        if mono + 2_000 < p.stamped_mono_ns {
                            report.tx_stamp_rejected += 1;
                        } else {
                            if p.tx_stamp_mono_ns.is_none() {
                                report.tx_stamped += 1;
                            }
                            p.tx_stamp_mono_ns = Some(mono);
                        }
                    }
                }
                None => return got,
            }
        }
    }
}

fn write_txtime_cmsg(buf: &mut [u64; 4], launch_ns: u64) {
    // SAFETY: zeroed msghdr pointing at a 32-byte, 8-aligned buffer; CMSG
    // macros stay inside CMSG_SPACE(8) = 24 bytes on Linux.
    unsafe {
        let mut mh: libc::msghdr = std::mem::zeroed();
        mh.msg_control = buf.as_mut_ptr().cast();
        mh.msg_controllen = libc::CMSG_SPACE(8) as _;
        let c = libc::CMSG_FIRSTHDR(&mh);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_TXTIME;
        (*c).cmsg_len = libc::CMSG_LEN(8) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u64>(), launch_ns);
    }
}

/// One error-queue read: (OPT_ID key, software stamp in CLOCK_REALTIME ns).
fn read_tx_stamp(fd: BorrowedFd<'_>) -> Option<(u32, u64)> {
    loop {
        let mut data = [0u8; 64];
        let mut ctrl = [0u64; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: zeroed msghdr then valid pointers to local buffers.
        let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
        mh.msg_iov = &mut iov;
        mh.msg_iovlen = 1;
        mh.msg_control = ctrl.as_mut_ptr().cast();
        mh.msg_controllen = std::mem::size_of_val(&ctrl) as _;
        // SAFETY: mh describes live local buffers.
        let rc = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut mh,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            return None;
        }
        let mut stamp = None;
        let mut key = None;
        // SAFETY: iterating cmsgs the kernel wrote within msg_controllen.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&mh);
            while !c.is_null() {
                let lvl = (*c).cmsg_level;
                let ty = (*c).cmsg_type;
                let d = libc::CMSG_DATA(c);
                if lvl == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPING {
                    let ts: libc::timespec = std::ptr::read_unaligned(d.cast());
                    stamp = Some(timespec_ns(&ts));
                } else if (lvl == libc::SOL_IP && ty == libc::IP_RECVERR)
                    || (lvl == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
                {
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(d.cast());
                    if ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING && ee.ee_info == 0 {
                        key = Some(ee.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&mh, c);
            }
        }
        if let (Some(k), Some(s)) = (key, stamp) {
            return Some((k, s));
        }
        // Not a TX stamp (e.g. an ICMP error): keep reading.
    }
}

/// Per-thread timer slack and scheduling for the duration of a train; restored on drop.
struct ThreadTuning {
    old_slack: Option<libc::c_ulong>,
    old_sched: Option<(libc::c_int, libc::sched_param)>,
    fifo: bool,
}

impl ThreadTuning {
    fn apply(cfg: &SenderConfig) -> ThreadTuning {
        // SAFETY: prctl/sched_* on the calling thread with valid arguments.
        unsafe {
            let old = libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0);
            let old_slack = if old >= 0
                && libc::prctl(
                    libc::PR_SET_TIMERSLACK,
                    cfg.timer_slack_ns.max(1) as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == 0
            {
                Some(old as libc::c_ulong)
            } else {
                None
            };
            let mut old_sched = None;
            let mut fifo = false;
            if cfg.sched_fifo {
                let mut p: libc::sched_param = std::mem::zeroed();
                let pol = libc::sched_getscheduler(0);
                if pol >= 0 && libc::sched_getparam(0, &mut p) == 0 {
                    let newp = libc::sched_param {
                        sched_priority: cfg.fifo_priority.clamp(1, 99),
                    };
                    if libc::sched_setscheduler(0, libc::SCHED_FIFO, &newp) == 0 {
                        old_sched = Some((pol, p));
                        fifo = true;
                    }
                }
            }
            ThreadTuning {
                old_slack,
                old_sched,
                fifo,
            }
        }
    }
}

impl Drop for ThreadTuning {
    fn drop(&mut self) {
        // SAFETY: restoring values read from this same thread.
        unsafe {
            if let Some(s) = self.old_slack {
                libc::prctl(libc::PR_SET_TIMERSLACK, s, 0, 0, 0);
            }
            if let Some((pol, p)) = self.old_sched {
                libc::sched_setscheduler(0, pol, &p);
            }
        }
    }
}

/// Departure offsets (ns) for `count` packets with a constant gap.
pub fn constant_gap_schedule(count: usize, gap_ns: u64) -> Vec<u64> {
    (0..count as u64).map(|i| i * gap_ns).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn schedule_validation() {
        assert!(check_schedule(&[]).is_err());
        let e = check_schedule(&[0, 10, 5]).unwrap_err().to_string();
        assert!(e.contains("index 2") && e.contains("5 ns"), "{e}");
        assert!(check_schedule(&[0, 0, 7]).is_ok());
        assert!(check_schedule(&[0, 4_000_000_000_000]).is_err());
    }

    proptest! {
        #[test]
        fn constant_schedule_is_valid(n in 1usize..500, gap in 0u64..10_000_000) {
            let s = constant_gap_schedule(n, gap);
            prop_assert_eq!(s.len(), n);
            prop_assert!(check_schedule(&s).is_ok());
        }
    }
}
