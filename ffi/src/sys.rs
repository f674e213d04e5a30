//! C wrappers for `opsel::sys::linux`, the socket adapter: congestion-control
//! list/get/set on the application's own TCP socket, `TCP_INFO` snapshots and
//! a per-interval sampler, the `SO_MAX_PACING_RATE` cap, the paced UDP sender
//! (SO_TXTIME when the egress qdisc enforces it, else the user-space pacer)
//! with per-packet departure reports, the probe receiver with kernel RX
//! timestamps, and RTT probes (ICMP echo, UDP echo + responder, the 000 §3.2
//! burst of 10 echoes 1 ms apart → one 1 Hz sample, RTT from `TCP_INFO`).
//!
//! Descriptors are borrowed: opsel never closes a socket it did not create.
//! A closed or foreign descriptor number makes the kernel call fail
//! (`OPSEL_INVALID_INPUT` / `OPSEL_IO`), never undefined behaviour.
//!
//! Error codes that callers can rely on (stable):
//! - unknown CCA name (kernel ENOENT) → `OPSEL_INVALID_INPUT`, the message
//!   lists the available CCAs;
//! - CCA not allowed for this process (EPERM) → `OPSEL_PERMISSION`, the
//!   message names `net.ipv4.tcp_allowed_congestion_control`;
//! - a descriptor that is not a TCP socket → `OPSEL_INVALID_INPUT`.

use crate::error::{guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use crate::model::clear_out;
use opsel::sys::linux::{
    self as sys,
    qdisc::{detect_txtime, TxTimeSupport},
    receiver::{ProbeReceiver, RxRecord},
    rtt::{self, BurstConfig, EchoProber, UdpEchoResponder},
    sender::{
        Backend, BackendChoice, CatchUp, DepartureSource, PacedSender, SenderConfig, TrainReport,
    },
    RawSock, TcpInfo, TcpInfoSampler, TcpInterval,
};
use std::ffi::{c_char, c_int};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Bytes a buffer needs for any congestion-control name plus its NUL
/// (`TCP_CA_NAME_MAX` in the kernel).
pub const OPSEL_CCA_NAME_CAP: usize = 16;

/// Marks an optional `opsel_tcp_info` / `opsel_tcp_interval` field the kernel
/// did not report (its `struct tcp_info` is shorter than the field's end).
pub const OPSEL_NOT_AVAILABLE: u64 = u64::MAX;

fn opt<T: Into<u64>>(v: Option<T>) -> u64 {
    v.map_or(OPSEL_NOT_AVAILABLE, Into::into)
}

/// Copy `s` plus a NUL into `buf` (capacity `cap` bytes), or fail naming the
/// size needed. `needed` (if not NULL) always receives `s.len() + 1`.
fn write_cstr(
    s: &str,
    buf: *mut c_char,
    cap: usize,
    needed: *mut usize,
    what: &str,
) -> Result<(), Fail> {
    if let Some(n) = unsafe { needed.as_mut() } {
        *n = s.len() + 1;
    }
    if buf.is_null() {
        return Err(Fail::null(what));
    }
    if cap < s.len() + 1 {
        return Err(Fail::invalid(format!(
            "{what} holds {cap} bytes but {} are needed for {s:?} and its NUL; pass a larger buffer",
            s.len() + 1
        )));
    }
    // SAFETY: non-null; the caller promises `cap` writable bytes; s.len() + 1 <= cap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        *buf.add(s.len()) = 0;
    }
    Ok(())
}

/// Copy `s` into a fixed array, truncated on a UTF-8 boundary, NUL-terminated.
fn fill<const N: usize>(dst: &mut [c_char; N], s: &str) {
    let mut end = s.len().min(N - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..end]) {
        *d = b as c_char;
    }
    dst[end] = 0;
}

fn with_fd<T>(fd: c_int, f: impl FnOnce(BorrowedFd<'_>) -> opsel::Result<T>) -> Result<T, Fail> {
    Ok(sys::with_raw_fd(fd, f)?)
}

pub(crate) fn sock_addr(ptr: *const c_char, what: &str) -> Result<SocketAddr, Fail> {
    Ok(sys::parse_sock_addr(unsafe { utf8(ptr, what) }?, what)?)
}

/// A UDP socket bound to `bind` (`"ip:port"`), or with NULL to an ephemeral
/// port of `peer`'s family.
fn bind_udp(bind: *const c_char, peer: Option<IpAddr>) -> Result<UdpSocket, Fail> {
    let bind = match bind.is_null() {
        true => None,
        false => Some(unsafe { utf8(bind, "bind") }?),
    };
    Ok(sys::bind_udp(bind, peer)?)
}

// ---------------------------------------------------------------- CCA ---

/// The CCAs registered in the kernel
/// (`net.ipv4.tcp_available_congestion_control`) as one space-separated,
/// NUL-terminated string in `buf` (`cap` bytes). `*out_needed` (may be NULL)
/// receives the bytes needed including the NUL, also on failure.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` when `cap` is too
/// small; `OPSEL_IO` when /proc cannot be read.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_cca_available(
    buf: *mut c_char,
    cap: usize,
    out_needed: *mut usize,
) -> opsel_status {
    guard(|| {
        write_cstr(
            &sys::available_ccas()?.join(" "),
            buf,
            cap,
            out_needed,
            "buf",
        )
    })
}

/// The CCAs an unprivileged process may select
/// (`net.ipv4.tcp_allowed_congestion_control`); same conventions as
/// `opsel_cca_available()`. A process with CAP_NET_ADMIN may select any
/// available CCA.
#[no_mangle]
pub unsafe extern "C" fn opsel_cca_allowed(
    buf: *mut c_char,
    cap: usize,
    out_needed: *mut usize,
) -> opsel_status {
    guard(|| write_cstr(&sys::allowed_ccas()?.join(" "), buf, cap, out_needed, "buf"))
}

/// Write the CCA of the TCP socket `fd` into `buf` (`cap` bytes,
/// `OPSEL_CCA_NAME_CAP` always suffices), NUL-terminated.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a negative fd, an
/// fd that is not a TCP socket, or a small buffer; `OPSEL_IO`.
/// Ownership: `fd` stays the caller's. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_cca_get(fd: c_int, buf: *mut c_char, cap: usize) -> opsel_status {
    guard(|| {
        let name = with_fd(fd, |f| sys::get_cca(f))?;
        write_cstr(&name, buf, cap, std::ptr::null_mut(), "buf")
    })
}

/// Switch the live TCP socket `fd` to the CCA `name` (e.g. `"bbr"`), read it
/// back, and fail unless the kernel reports the same name. The read-back
/// name is written to `out_readback` (may be NULL; else at least
/// `OPSEL_CCA_NAME_CAP` bytes). The connection keeps running: no data is lost.
///
/// Errors: `OPSEL_INVALID_INPUT` for an unknown CCA (ENOENT; the message
/// lists the available ones), a malformed name, or an fd that is not a TCP
/// socket; `OPSEL_PERMISSION` when the CCA is not in
/// `net.ipv4.tcp_allowed_congestion_control` and the process lacks
/// CAP_NET_ADMIN; `OPSEL_UNSUPPORTED` when the read-back differs; `OPSEL_IO`.
/// Ownership: `fd` stays the caller's. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_cca_set(
    fd: c_int,
    name: *const c_char,
    out_readback: *mut c_char,
) -> opsel_status {
    guard(|| {
        let name = unsafe { utf8(name, "name") }?;
        let back = with_fd(fd, |f| sys::set_cca(f, name))?;
        if !out_readback.is_null() {
            write_cstr(
                &back,
                out_readback,
                OPSEL_CCA_NAME_CAP,
                std::ptr::null_mut(),
                "out_readback",
            )?;
        }
        Ok(())
    })
}

// ----------------------------------------------------------- TCP_INFO ---

/// One `TCP_INFO` snapshot. Times in µs as the kernel reports them, rates in
/// bytes per second. Fields the running kernel does not report are
/// `OPSEL_NOT_AVAILABLE`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_tcp_info {
    /// Bytes of `struct tcp_info` the kernel returned.
    pub len: usize,
    /// TCP state (`TCP_ESTABLISHED` = 1 …).
    pub state: u8,
    /// Congestion-avoidance state (0 open, 1 disorder, 2 CWR, 3 recovery, 4 loss).
    pub ca_state: u8,
    pub retransmits: u8,
    pub rto_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub total_retrans: u32,
    /// Smoothed RTT (srtt), µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub min_rtt_us: u64,
    pub pacing_rate_bytes_per_s: u64,
    pub max_pacing_rate_bytes_per_s: u64,
    pub delivery_rate_bytes_per_s: u64,
    pub bytes_sent: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_retrans: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub delivered: u64,
    pub notsent_bytes: u64,
    pub busy_time_us: u64,
}

impl From<&TcpInfo> for opsel_tcp_info {
    fn from(i: &TcpInfo) -> Self {
        Self {
            len: i.len,
            state: i.state,
            ca_state: i.ca_state_raw,
            retransmits: i.retransmits,
            rto_us: i.rto_us,
            snd_mss: i.snd_mss,
            rcv_mss: i.rcv_mss,
            unacked: i.unacked,
            lost: i.lost,
            retrans: i.retrans,
            total_retrans: i.total_retrans,
            rtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            snd_cwnd: i.snd_cwnd,
            snd_ssthresh: i.snd_ssthresh,
            min_rtt_us: opt(i.min_rtt_us),
            pacing_rate_bytes_per_s: opt(i.pacing_rate_bytes_per_s),
            max_pacing_rate_bytes_per_s: opt(i.max_pacing_rate_bytes_per_s),
            delivery_rate_bytes_per_s: opt(i.delivery_rate_bytes_per_s),
            bytes_sent: opt(i.bytes_sent),
            bytes_acked: opt(i.bytes_acked),
            bytes_received: opt(i.bytes_received),
            bytes_retrans: opt(i.bytes_retrans),
            segs_out: opt(i.segs_out),
            segs_in: opt(i.segs_in),
            delivered: opt(i.delivered),
            notsent_bytes: opt(i.notsent_bytes),
            busy_time_us: opt(i.busy_time_us),
        }
    }
}

/// Read `TCP_INFO` of the TCP socket `fd` into `*out_info`.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (negative fd, not a
/// TCP socket); `OPSEL_IO`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_tcp_info_get(
    fd: c_int,
    out_info: *mut opsel_tcp_info,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_info, "out_info")?;
        *out = (&with_fd(fd, |f| sys::tcp_info(f))?).into();
        Ok(())
    })
}

/// What happened on a connection between two sampler snapshots.
/// Optional fields are `OPSEL_NOT_AVAILABLE` / NaN when not reported.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_tcp_interval {
    /// CLOCK_MONOTONIC of the later snapshot, ns.
    pub at_ns: u64,
    /// Interval length, ns (> 0).
    pub interval_ns: u64,
    /// Bytes acknowledged by the peer in the interval (sender side).
    pub acked_bytes: u64,
    /// Bytes received in the interval (receiver side).
    pub received_bytes: u64,
    /// Goodput from `acked_bytes`, bit/s (NaN if not reported).
    pub acked_rate_bps: f64,
    /// Receive rate from `received_bytes`, bit/s (NaN if not reported).
    pub received_rate_bps: f64,
    /// Smoothed RTT at the end of the interval, ns.
    pub rtt_ns: u64,
    pub rttvar_ns: u64,
    pub min_rtt_ns: u64,
    /// Segments retransmitted in the interval.
    pub retrans_segs: u32,
    /// Congestion window at the end, segments.
    pub cwnd: u32,
}

impl From<&TcpInterval> for opsel_tcp_interval {
    fn from(i: &TcpInterval) -> Self {
        Self {
            at_ns: i.at_ns,
            interval_ns: i.interval_ns,
            acked_bytes: opt(i.acked_bytes),
            received_bytes: opt(i.received_bytes),
            acked_rate_bps: i.acked_rate_bps.unwrap_or(f64::NAN),
            received_rate_bps: i.received_rate_bps.unwrap_or(f64::NAN),
            rtt_ns: i.rtt_ns,
            rttvar_ns: i.rttvar_ns,
            min_rtt_ns: opt(i.min_rtt_ns),
            retrans_segs: i.retrans_segs,
            cwnd: i.cwnd,
        }
    }
}

/// Polls `TCP_INFO` of one socket and yields per-interval throughput and RTT.
/// Opaque: `opsel_tcp_sampler_new()` / `opsel_tcp_sampler_free()`.
/// One thread at a time.
pub struct opsel_tcp_sampler {
    inner: TcpInfoSampler<RawSock>,
}

/// Take a first `TCP_INFO` snapshot of `fd` and store a sampler in
/// `*out_sampler`. Call `opsel_tcp_sampler_sample()` at the cadence you want
/// (000 §3.2 uses 1 s).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (negative fd, not TCP).
/// Ownership: the sampler borrows `fd` by number; keep it open until
/// `opsel_tcp_sampler_free()`. The caller owns `*out_sampler`.
#[no_mangle]
pub unsafe extern "C" fn opsel_tcp_sampler_new(
    fd: c_int,
    out_sampler: *mut *mut opsel_tcp_sampler,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_sampler)?;
        let inner = TcpInfoSampler::new(RawSock::new(fd)?)?;
        Handle::into_out(opsel_tcp_sampler { inner }, out);
        Ok(())
    })
}

/// Take a snapshot and write the interval since the previous one to
/// `*out_interval`; `*out_has_interval` is false (and `*out_interval`
/// untouched) when no time elapsed on the monotonic clock.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` / `OPSEL_IO` when the
/// socket went away. Thread-safety: one call at a time per sampler.
#[no_mangle]
pub unsafe extern "C" fn opsel_tcp_sampler_sample(
    sampler: *mut opsel_tcp_sampler,
    out_interval: *mut opsel_tcp_interval,
    out_has_interval: *mut bool,
) -> opsel_status {
    guard(|| {
        let s = unsafe { Handle::borrow_mut(sampler) }?;
        let out = out_ptr(out_interval, "out_interval")?;
        let has = out_ptr(out_has_interval, "out_has_interval")?;
        *has = false;
        if let Some(i) = s.inner.sample()? {
            *out = (&i).into();
            *has = true;
        }
        Ok(())
    })
}

/// Release a sampler (NULL ignored). The socket is not closed.
#[no_mangle]
pub unsafe extern "C" fn opsel_tcp_sampler_free(sampler: *mut opsel_tcp_sampler) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(sampler) }
}

/// Smoothed RTT of the live TCP connection `fd` from `TCP_INFO`, ns.
/// Errors: as `opsel_tcp_info_get()`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_tcp_rtt_ns(fd: c_int, out_rtt_ns: *mut u64) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_rtt_ns, "out_rtt_ns")?;
        *out = with_fd(fd, |f| rtt::tcp_rtt_ns(f))?;
        Ok(())
    })
}

// ------------------------------------------------------------- pacing ---

/// Cap the pacing rate of socket `fd` at `rate_bps` bit/s with
/// `SO_MAX_PACING_RATE` (TCP paces internally without fq since Linux 4.13);
/// 0 removes the cap. Rounded down to whole bytes per second.
///
/// Errors: `OPSEL_INVALID_INPUT` (negative fd, rate 1..7 bit/s); `OPSEL_IO`.
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_max_pacing_rate_set(fd: c_int, rate_bps: u64) -> opsel_status {
    guard(|| {
        let r = (rate_bps != 0).then_some(rate_bps);
        with_fd(fd, |f| sys::set_max_pacing_rate(f, r))
    })
}

/// The pacing cap of `fd` in bit/s, 0 when uncapped.
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT`, `OPSEL_IO`.
#[no_mangle]
pub unsafe extern "C" fn opsel_max_pacing_rate_get(
    fd: c_int,
    out_rate_bps: *mut u64,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_rate_bps, "out_rate_bps")?;
        *out = with_fd(fd, |f| sys::get_max_pacing_rate(f))?.unwrap_or(0);
        Ok(())
    })
}

// ------------------------------------------------------------ SO_TXTIME ---

/// Outcome of the SO_TXTIME check for one destination: enforced only when
/// every packet passes an fq or etf qdisc on the egress device (the
/// setsockopt return code alone proves nothing: the kernel accepts
/// `SO_TXTIME` and silently ignores launch times without fq/etf).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_txtime_support {
    /// True when launch times would be honoured.
    pub enforced: bool,
    /// Clock launch times must use (`CLOCK_MONOTONIC` for fq, the etf
    /// clockid for etf), -1 when not enforced.
    pub clockid: i32,
    /// Egress device, NUL-terminated.
    pub device: [c_char; 16],
    /// Kind of its root qdisc ("noqueue", "fq", "mq" …), NUL-terminated.
    pub root_qdisc: [c_char; 16],
    /// One-line explanation of the decision, NUL-terminated (truncated to fit).
    pub reason: [c_char; 256],
}

impl From<&TxTimeSupport> for opsel_txtime_support {
    fn from(t: &TxTimeSupport) -> Self {
        let mut o = Self {
            enforced: t.enforced,
            clockid: t.clockid.unwrap_or(-1),
            device: [0; 16],
            root_qdisc: [0; 16],
            reason: [0; 256],
        };
        fill(&mut o.device, &t.device);
        fill(&mut o.root_qdisc, &t.root_qdisc);
        fill(&mut o.reason, &t.reason);
        o
    }
}

/// Check whether SO_TXTIME launch times would be enforced for packets to
/// `dst` (an IP address, NUL-terminated, e.g. `"10.0.0.2"`) from this
/// network namespace: route lookup and qdisc dump over rtnetlink.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (not an IP address);
/// `OPSEL_IO` (netlink failed). Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_txtime_detect(
    dst: *const c_char,
    out_support: *mut opsel_txtime_support,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_support, "out_support")?;
        let ip = sys::parse_ip(unsafe { utf8(dst, "dst") }?, "dst")?;
        let sock = bind_udp(std::ptr::null(), Some(ip))?;
        *out = (&detect_txtime(&sock, ip)?).into();
        Ok(())
    })
}

// ----------------------------------------------------------- sender ---

/// `opsel_sender_config.backend`: SO_TXTIME when enforced, else user space.
pub const OPSEL_BACKEND_AUTO: u32 = 0;
/// `opsel_sender_config.backend`: always the user-space pacer.
pub const OPSEL_BACKEND_USERSPACE: u32 = 1;
/// `opsel_sender_config.backend`: SO_TXTIME or an error saying why it would be ignored.
pub const OPSEL_BACKEND_TXTIME: u32 = 2;
/// `opsel_sender_config.catch_up`: after a stall shift the rest of the schedule (gaps kept).
pub const OPSEL_CATCH_UP_REBASE: u32 = 0;
/// `opsel_sender_config.catch_up`: after a stall send overdue packets at once.
pub const OPSEL_CATCH_UP_BURST: u32 = 1;
/// `opsel_packet_report.source`: software TX timestamp from the driver.
pub const OPSEL_DEPARTURE_TX_STAMP: u32 = 0;
/// `opsel_packet_report.source`: CLOCK_MONOTONIC right after the send call.
pub const OPSEL_DEPARTURE_CLOCK_AFTER_SEND: u32 = 1;

/// Paced-sender settings; start from `opsel_sender_config_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_sender_config {
    /// `OPSEL_BACKEND_AUTO` (default), `_USERSPACE` or `_TXTIME`.
    pub backend: u32,
    /// User-space pacer: stop sleeping this long before a deadline, then spin (50 µs).
    pub spin_ns: u64,
    /// Timer slack while sending (1 ns).
    pub timer_slack_ns: u64,
    /// Try SCHED_FIFO at `fifo_priority` while sending; ignored without permission.
    pub sched_fifo: bool,
    pub fifo_priority: i32,
    /// Packets closer than this share one `sendmmsg` (1 µs).
    pub batch_gap_ns: u64,
    /// `OPSEL_CATCH_UP_REBASE` (default) or `OPSEL_CATCH_UP_BURST`.
    pub catch_up: u32,
    /// Lateness that counts as a stall (50 µs).
    pub stall_ns: u64,
    /// Request software TX timestamps for departure times (true).
    pub tx_timestamps: bool,
    /// Delay from the send call to the first departure (200 µs).
    pub start_delay_ns: u64,
    /// SO_TXTIME: hand packets to the kernel this long before launch (1 ms).
    pub txtime_lead_ns: u64,
    /// Wait this long after the last packet for TX timestamps (20 ms).
    pub stamp_wait_ns: u64,
}

/// The default sender settings (see the field comments).
#[no_mangle]
pub extern "C" fn opsel_sender_config_default() -> opsel_sender_config {
    let d = SenderConfig::default();
    opsel_sender_config {
        backend: OPSEL_BACKEND_AUTO,
        spin_ns: d.spin_ns,
        timer_slack_ns: d.timer_slack_ns,
        sched_fifo: d.sched_fifo,
        fifo_priority: d.fifo_priority,
        batch_gap_ns: d.batch_gap_ns,
        catch_up: OPSEL_CATCH_UP_REBASE,
        stall_ns: d.stall_ns,
        tx_timestamps: d.tx_timestamps,
        start_delay_ns: d.start_delay_ns,
        txtime_lead_ns: d.txtime_lead_ns,
        stamp_wait_ns: d.stamp_wait_ns,
    }
}

fn sender_config(c: &opsel_sender_config) -> Result<SenderConfig, Fail> {
    Ok(SenderConfig {
        backend: match c.backend {
            OPSEL_BACKEND_AUTO => BackendChoice::Auto,
            OPSEL_BACKEND_USERSPACE => BackendChoice::UserSpace,
            OPSEL_BACKEND_TXTIME => BackendChoice::TxTime,
            b => {
                return Err(Fail::invalid(format!(
                    "backend {b} is unknown; use OPSEL_BACKEND_AUTO (0), _USERSPACE (1) or _TXTIME (2)"
                )))
            }
        },
        spin_ns: c.spin_ns,
        timer_slack_ns: c.timer_slack_ns,
        sched_fifo: c.sched_fifo,
        fifo_priority: c.fifo_priority,
        batch_gap_ns: c.batch_gap_ns,
        catch_up: match c.catch_up {
            OPSEL_CATCH_UP_REBASE => CatchUp::Rebase,
            OPSEL_CATCH_UP_BURST => CatchUp::Burst,
            x => {
                return Err(Fail::invalid(format!(
                    "catch_up {x} is unknown; use OPSEL_CATCH_UP_REBASE (0) or OPSEL_CATCH_UP_BURST (1)"
                )))
            }
        },
        stall_ns: c.stall_ns,
        tx_timestamps: c.tx_timestamps,
        start_delay_ns: c.start_delay_ns,
        txtime_lead_ns: c.txtime_lead_ns,
        stamp_wait_ns: c.stamp_wait_ns,
    })
}

/// A UDP socket connected to one destination plus the pacing machinery.
/// Opaque: `opsel_paced_sender_new()` / `opsel_paced_sender_free()`.
/// One thread at a time (a train blocks its thread while it is sent).
pub struct opsel_paced_sender {
    inner: PacedSender,
    report: TrainReport,
}

/// Which backend a sender uses and why.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_sender_info {
    /// `OPSEL_BACKEND_USERSPACE` or `OPSEL_BACKEND_TXTIME`.
    pub backend: u32,
    /// Launch-time clock of the SO_TXTIME backend, -1 for user space.
    pub clockid: i32,
    /// Whether software TX timestamps are enabled on the socket.
    pub tx_timestamping: bool,
    /// The SO_TXTIME detection result (if detection failed, `enforced` is
    /// false and `reason` holds the detection error).
    pub txtime: opsel_txtime_support,
}

/// Bind a UDP socket to `bind` (`"ip:port"`, or NULL for an ephemeral port
/// on all addresses), connect it to `dst` (`"ip:port"`), detect whether
/// SO_TXTIME is enforced on the egress device, pick the backend per
/// `config` (NULL = defaults) and preallocate buffers for payloads up to
/// `payload_max` bytes (32 ..= 65507; the opsel probe header is 32 bytes).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (bad address, size
/// or setting; `OPSEL_BACKEND_TXTIME` when the qdisc would ignore launch
/// times, with the reason); `OPSEL_IO`. On error `*out_sender` is NULL.
/// Ownership: the caller owns `*out_sender`; opsel owns the socket.
#[no_mangle]
pub unsafe extern "C" fn opsel_paced_sender_new(
    dst: *const c_char,
    bind: *const c_char,
    payload_max: usize,
    config: *const opsel_sender_config,
    out_sender: *mut *mut opsel_paced_sender,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_sender)?;
        let dst = sock_addr(dst, "dst")?;
        let cfg = match unsafe { config.as_ref() } {
            None => SenderConfig::default(),
            Some(c) => sender_config(c)?,
        };
        let sock = bind_udp(bind, Some(dst.ip()))?;
        let inner = PacedSender::new(sock, dst, payload_max, cfg)?;
        Handle::into_out(
            opsel_paced_sender {
                inner,
                report: TrainReport::default(),
            },
            out,
        );
        Ok(())
    })
}

/// Which backend `sender` uses, whether SO_TXTIME is enforced and why.
/// Errors: `OPSEL_NULL_POINTER`. Thread-safety: not during a send on the same sender.
#[no_mangle]
pub unsafe extern "C" fn opsel_paced_sender_info(
    sender: *const opsel_paced_sender,
    out_info: *mut opsel_sender_info,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_info, "out_info")?;
        let s = unsafe { Handle::borrow(sender) }?;
        let (backend, clockid) = match s.inner.backend() {
            Backend::TxTime { clockid } => (OPSEL_BACKEND_TXTIME, clockid),
            Backend::UserSpace => (OPSEL_BACKEND_USERSPACE, -1),
        };
        *out = opsel_sender_info {
            backend,
            clockid,
            tx_timestamping: s.inner.tx_timestamping(),
            txtime: (&s.inner.txtime_report()).into(),
        };
        Ok(())
    })
}

/// One packet of a train as it was sent. Times are CLOCK_MONOTONIC ns.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_packet_report {
    pub seq: u32,
    /// `OPSEL_DEPARTURE_TX_STAMP` or `OPSEL_DEPARTURE_CLOCK_AFTER_SEND`.
    pub source: u32,
    /// Deadline after any re-basing.
    pub scheduled_ns: u64,
    /// Best available departure time (TX stamp, else clock after send).
    pub departure_ns: u64,
    /// Clock right after the send call returned.
    pub sent_ns: u64,
    /// Software TX timestamp, `OPSEL_NOT_AVAILABLE` if none.
    pub tx_stamp_ns: u64,
}

/// Summary of one train.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_train_summary {
    /// Backend used (`OPSEL_BACKEND_USERSPACE` / `_TXTIME`).
    pub backend: u32,
    /// CLOCK_MONOTONIC of schedule offset 0, ns.
    pub start_ns: u64,
    /// Packets sent (= schedule length).
    pub packets: usize,
    /// Times the schedule was shifted after a stall (catch-up = rebase).
    pub rebases: u32,
    /// Largest lateness of a hand-off to the kernel, ns.
    pub max_lateness_ns: u64,
    /// Whether SCHED_FIFO was in effect.
    pub sched_fifo: bool,
    /// Packets with a software TX timestamp.
    pub tx_stamped: usize,
    /// Sends refused (ECONNREFUSED: nobody listening) and retried.
    pub refused: u32,
}

/// Send one train: packet i leaves at start + `schedule_ns[i]` (offsets
/// from the first departure, non-decreasing, `schedule_len` >= 1) carrying
/// `payload_len` bytes (the opsel header with sequence number, `train_id`,
/// scheduled offset and send stamp, then zero padding). Blocks until sent
/// and TX stamps are collected. Writes one report per packet to
/// `out_packets` (`packets_cap` must be >= `schedule_len`) and a summary to
/// `out_summary` (may be NULL).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (empty or decreasing
/// schedule, payload out of range, small output); `OPSEL_IO`.
/// Thread-safety: one call at a time per sender.
#[no_mangle]
pub unsafe extern "C" fn opsel_paced_sender_send_train(
    sender: *mut opsel_paced_sender,
    schedule_ns: *const u64,
    schedule_len: usize,
    payload_len: usize,
    train_id: u32,
    out_packets: *mut opsel_packet_report,
    packets_cap: usize,
    out_summary: *mut opsel_train_summary,
) -> opsel_status {
    guard(|| {
        let s = unsafe { Handle::borrow_mut(sender) }?;
        if schedule_ns.is_null() {
            return Err(Fail::null("schedule_ns"));
        }
        if schedule_len == 0 {
            return Err(Fail::invalid(
                "schedule_len is 0; pass at least one departure offset",
            ));
        }
        if out_packets.is_null() {
            return Err(Fail::null("out_packets"));
        }
        if packets_cap < schedule_len {
            return Err(Fail::invalid(format!(
                "packets_cap {packets_cap} is smaller than schedule_len {schedule_len}; pass room for one report per packet"
            )));
        }
        if !schedule_ns.is_aligned() || !out_packets.is_aligned() {
            return Err(Fail::invalid("schedule_ns or out_packets is not aligned"));
        }
        // SAFETY: non-null, aligned; the caller promises schedule_len readable values.
        let sched = unsafe { std::slice::from_raw_parts(schedule_ns, schedule_len) };
        s.inner
            .send_train(sched, payload_len, train_id, &mut s.report)?;
        // SAFETY: non-null, aligned; packets_cap >= schedule_len writable slots.
        let outs = unsafe { std::slice::from_raw_parts_mut(out_packets, schedule_len) };
        for (o, p) in outs.iter_mut().zip(&s.report.packets) {
            let (dep, src) = p.departure();
            *o = opsel_packet_report {
                seq: p.seq,
                source: match src {
                    DepartureSource::TxSoftwareStamp => OPSEL_DEPARTURE_TX_STAMP,
                    DepartureSource::ClockAfterSend => OPSEL_DEPARTURE_CLOCK_AFTER_SEND,
                },
                scheduled_ns: p.scheduled_mono_ns,
                departure_ns: dep,
                sent_ns: p.sent_mono_ns,
                tx_stamp_ns: opt(p.tx_stamp_mono_ns),
            };
        }
        if let Some(sum) = unsafe { out_summary.as_mut() } {
            let r = &s.report;
            *sum = opsel_train_summary {
                backend: match r.backend {
                    Some(Backend::TxTime { .. }) => OPSEL_BACKEND_TXTIME,
                    _ => OPSEL_BACKEND_USERSPACE,
                },
                start_ns: r.start_mono_ns,
                packets: r.packets.len(),
                rebases: r.rebases,
                max_lateness_ns: r.max_lateness_ns,
                sched_fifo: r.sched_fifo,
                tx_stamped: r.tx_stamped,
                refused: r.refused,
            };
        }
        Ok(())
    })
}

/// Release a sender and close its socket (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_paced_sender_free(sender: *mut opsel_paced_sender) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(sender) }
}

// --------------------------------------------------------- receiver ---

/// One received opsel probe packet.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_rx_record {
    pub seq: u32,
    pub train_id: u32,
    /// Scheduled offset carried in the payload, ns.
    pub sched_offset_ns: u64,
    /// Sender's CLOCK_MONOTONIC just before its send call, ns.
    pub send_ns: u64,
    /// Best receive time, CLOCK_MONOTONIC ns (kernel stamp when present).
    pub rx_ns: u64,
    /// Kernel RX timestamp converted to CLOCK_MONOTONIC, `OPSEL_NOT_AVAILABLE` if none.
    pub rx_kernel_ns: u64,
    /// CLOCK_MONOTONIC when recvmmsg returned.
    pub rx_user_ns: u64,
    /// Payload bytes.
    pub len: usize,
}

impl From<&RxRecord> for opsel_rx_record {
    fn from(r: &RxRecord) -> Self {
        Self {
            seq: r.seq,
            train_id: r.train_id,
            sched_offset_ns: r.sched_offset_ns,
            send_ns: r.send_mono_ns,
            rx_ns: r.rx_mono_ns(),
            rx_kernel_ns: opt(r.rx_kernel_mono_ns),
            rx_user_ns: r.rx_user_mono_ns,
            len: r.len,
        }
    }
}

/// A UDP socket receiving opsel probe packets with per-packet kernel RX
/// timestamps (`SO_TIMESTAMPNS`) in `recvmmsg` batches.
/// Opaque: `opsel_probe_receiver_new()` / `opsel_probe_receiver_free()`.
pub struct opsel_probe_receiver {
    inner: ProbeReceiver,
    records: Vec<RxRecord>,
}

/// Bind a receiver to `bind` (`"ip:port"`; port 0 = ephemeral, read it with
/// `opsel_probe_receiver_port()`), receive buffers of `buf_len` bytes.
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT`, `OPSEL_IO`.
#[no_mangle]
pub unsafe extern "C" fn opsel_probe_receiver_new(
    bind: *const c_char,
    buf_len: usize,
    out_receiver: *mut *mut opsel_probe_receiver,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_receiver)?;
        if bind.is_null() {
            return Err(Fail::null("bind"));
        }
        let sock = bind_udp(bind, None)?;
        let inner = ProbeReceiver::new(sock, buf_len)?;
        Handle::into_out(
            opsel_probe_receiver {
                inner,
                records: Vec::new(),
            },
            out,
        );
        Ok(())
    })
}

/// The local UDP port the receiver is bound to.
#[no_mangle]
pub unsafe extern "C" fn opsel_probe_receiver_port(
    receiver: *const opsel_probe_receiver,
    out_port: *mut u16,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_port, "out_port")?;
        let r = unsafe { Handle::borrow(receiver) }?;
        *out = r
            .inner
            .socket()
            .local_addr()
            .map_err(|e| opsel::Error::io("getsockname of the receiver socket", e))?
            .port();
        Ok(())
    })
}

/// Receive until `expected` probe packets arrived or nothing arrived for
/// `idle_ns`; writes up to `records_cap` records (arrival order) to
/// `out_records` and their count to `*out_count`. Packets beyond
/// `records_cap` are dropped from the report.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_IO`. Blocks the calling thread.
/// Thread-safety: one call at a time per receiver.
#[no_mangle]
pub unsafe extern "C" fn opsel_probe_receiver_recv_train(
    receiver: *mut opsel_probe_receiver,
    expected: usize,
    idle_ns: u64,
    out_records: *mut opsel_rx_record,
    records_cap: usize,
    out_count: *mut usize,
) -> opsel_status {
    guard(|| {
        let r = unsafe { Handle::borrow_mut(receiver) }?;
        let count = out_ptr(out_count, "out_count")?;
        *count = 0;
        if out_records.is_null() {
            return Err(Fail::null("out_records"));
        }
        if !out_records.is_aligned() {
            return Err(Fail::invalid("out_records is not aligned"));
        }
        r.records.clear();
        r.inner
            .recv_train(expected, Duration::from_nanos(idle_ns), &mut r.records)?;
        let n = r.records.len().min(records_cap);
        // SAFETY: non-null, aligned; the caller promises records_cap writable slots.
        let outs = unsafe { std::slice::from_raw_parts_mut(out_records, n) };
        for (o, rec) in outs.iter_mut().zip(&r.records) {
            *o = rec.into();
        }
        *count = n;
        Ok(())
    })
}

/// Release a receiver and close its socket (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_probe_receiver_free(receiver: *mut opsel_probe_receiver) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(receiver) }
}

// -------------------------------------------------------------- RTT ---

/// An RTT prober toward one host: ICMP echo or UDP echo.
/// Opaque: `opsel_rtt_prober_icmp()` / `opsel_rtt_prober_udp()`,
/// `opsel_rtt_prober_free()`. One thread at a time.
pub struct opsel_rtt_prober {
    inner: EchoProber,
}

/// An ICMP echo prober toward the IPv4 address `dst` (e.g. `"10.0.0.2"`):
/// an unprivileged ping socket when `net.ipv4.ping_group_range` admits the
/// process's group, else a raw socket (CAP_NET_RAW).
/// Errors: `OPSEL_INVALID_INPUT` (not IPv4); `OPSEL_PERMISSION` (neither
/// socket allowed; the message names `net.ipv4.ping_group_range`); `OPSEL_IO`.
#[no_mangle]
pub unsafe extern "C" fn opsel_rtt_prober_icmp(
    dst: *const c_char,
    out_prober: *mut *mut opsel_rtt_prober,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_prober)?;
        let ip = sys::parse_ipv4(unsafe { utf8(dst, "dst") }?, "dst")?;
        let inner = EchoProber::icmp(ip)?;
        Handle::into_out(opsel_rtt_prober { inner }, out);
        Ok(())
    })
}

/// A UDP echo prober toward an `opsel_udp_echo_responder` (or any UDP echo
/// service) at `dst` (`"ip:port"`).
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT`, `OPSEL_IO`.
#[no_mangle]
pub unsafe extern "C" fn opsel_rtt_prober_udp(
    dst: *const c_char,
    out_prober: *mut *mut opsel_rtt_prober,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_prober)?;
        let inner = EchoProber::udp(sock_addr(dst, "dst")?)?;
        Handle::into_out(opsel_rtt_prober { inner }, out);
        Ok(())
    })
}

/// One 000 §3.2 RTT sample: send `count` echoes `interval_ns` apart (10 and
/// 1 ms in the thesis; pass 0 for both to use them) without waiting for
/// replies, collect replies until `timeout_ns` after the last echo (0 = 1 s),
/// and write the mean RTT of the answered echoes in ms to `*out_mean_rtt_ms`
/// (NaN when none was answered). Each echo's RTT in ms goes to
/// `out_rtts_ms[i]` (NaN = no reply) when `out_rtts_ms` is not NULL
/// (`rtts_cap` must then be >= count). RTT = kernel RX stamp of the reply −
/// the clock just before the request was sent (as iputils ping).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT`; `OPSEL_IO`.
/// Blocks for about `count · interval_ns` plus the wait for replies.
#[no_mangle]
pub unsafe extern "C" fn opsel_rtt_prober_burst(
    prober: *mut opsel_rtt_prober,
    count: u16,
    interval_ns: u64,
    timeout_ns: u64,
    out_rtts_ms: *mut f64,
    rtts_cap: usize,
    out_mean_rtt_ms: *mut f64,
) -> opsel_status {
    guard(|| {
        let p = unsafe { Handle::borrow_mut(prober) }?;
        let mean = out_ptr(out_mean_rtt_ms, "out_mean_rtt_ms")?;
        let d = BurstConfig::default();
        let cfg = BurstConfig {
            count: if count == 0 { d.count } else { count },
            interval_ns: if interval_ns == 0 {
                d.interval_ns
            } else {
                interval_ns
            },
            timeout_ns: if timeout_ns == 0 {
                d.timeout_ns
            } else {
                timeout_ns
            },
        };
        if !out_rtts_ms.is_null() && rtts_cap < cfg.count as usize {
            return Err(Fail::invalid(format!(
                "rtts_cap {rtts_cap} is smaller than the burst of {} echoes",
                cfg.count
            )));
        }
        let b = p.inner.burst(cfg)?;
        *mean = b.mean_rtt_ms().unwrap_or(f64::NAN);
        if !out_rtts_ms.is_null() {
            if !out_rtts_ms.is_aligned() {
                return Err(Fail::invalid("out_rtts_ms is not aligned for double"));
            }
            // SAFETY: non-null, aligned, rtts_cap >= count writable doubles.
            let o = unsafe { std::slice::from_raw_parts_mut(out_rtts_ms, b.rtts_ns.len()) };
            for (o, r) in o.iter_mut().zip(b.rtts_ms()) {
                *o = r;
            }
        }
        Ok(())
    })
}

/// Release a prober and close its socket (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_rtt_prober_free(prober: *mut opsel_rtt_prober) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(prober) }
}

/// A tiny UDP echo responder running on a background thread.
/// Opaque: `opsel_udp_echo_responder_new()` / `opsel_udp_echo_responder_free()`.
pub struct opsel_udp_echo_responder {
    inner: Option<UdpEchoResponder>,
}

/// Start echoing every datagram received on `bind` (`"ip:port"`, port 0 =
/// ephemeral) back to its sender after `delay_ns` (0 = at once; a delay line
/// for tests on loopback).
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT`, `OPSEL_IO`.
#[no_mangle]
pub unsafe extern "C" fn opsel_udp_echo_responder_new(
    bind: *const c_char,
    delay_ns: u64,
    out_responder: *mut *mut opsel_udp_echo_responder,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_responder)?;
        if bind.is_null() {
            return Err(Fail::null("bind"));
        }
        let sock = bind_udp(bind, None)?;
        let r = UdpEchoResponder::spawn(sock, Duration::from_nanos(delay_ns))?;
        Handle::into_out(opsel_udp_echo_responder { inner: Some(r) }, out);
        Ok(())
    })
}

/// The UDP port the responder listens on.
#[no_mangle]
pub unsafe extern "C" fn opsel_udp_echo_responder_port(
    responder: *const opsel_udp_echo_responder,
    out_port: *mut u16,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_port, "out_port")?;
        let r = unsafe { Handle::borrow(responder) }?;
        let inner = r
            .inner
            .as_ref()
            .ok_or_else(|| Fail::invalid("responder was stopped"))?;
        *out = inner.local_addr().port();
        Ok(())
    })
}

/// Stop the responder thread and write how many datagrams it echoed to
/// `*out_echoed` (may be NULL). The handle must still be freed.
#[no_mangle]
pub unsafe extern "C" fn opsel_udp_echo_responder_stop(
    responder: *mut opsel_udp_echo_responder,
    out_echoed: *mut u64,
) -> opsel_status {
    guard(|| {
        let r = unsafe { Handle::borrow_mut(responder) }?;
        let inner = r
            .inner
            .take()
            .ok_or_else(|| Fail::invalid("responder was already stopped"))?;
        let n = inner.stop()?;
        if let Some(o) = unsafe { out_echoed.as_mut() } {
            *o = n;
        }
        Ok(())
    })
}

/// Stop (if running) and release a responder (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_udp_echo_responder_free(responder: *mut opsel_udp_echo_responder) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(responder) }
}
