//! C wrappers for `opsel::sys::linux::ops_driver`: the OPS driver that runs
//! the controller of `ops.rs` on the application's own connected TCP socket
//! (000 Ch. 6–7, Table 7.2): it switches the CCA on the live socket, sends
//! the caller's data at full speed during bursts and steady phases (bursts
//! carry real payload: constructive probing, 000 §1.2), stays silent during
//! silences, runs the 1 Hz echo-burst RTT probe toward the peer (000 §3.2)
//! and reports every phase, classification, CCA switch, decision latency,
//! RTT sample and per-interval byte count to a callback.
//!
//! ```c
//! opsel_ops_driver_config dc = opsel_ops_driver_config_default();
//! dc.probe_peer = "10.0.0.2:5001";        // a UDP echo responder at the peer
//! opsel_ops_driver *drv;
//! opsel_ops_driver_new(model, policy, &ops_cfg, &dc, &drv);
//! opsel_ops_driver_run(drv, sock_fd, my_read, my_file, on_event, NULL, &report);
//! opsel_ops_driver_free(drv);
//! ```
//!
//! `opsel_ops_driver_run()` blocks the calling thread for the whole transfer;
//! `opsel_ops_driver_stop()` ends it from any other thread. The socket stays
//! open and owned by the caller.
//!
//! Stable status codes: a descriptor that is not a TCP socket, a negative
//! descriptor, an unknown CCA in the pattern → `OPSEL_INVALID_INPUT`; a CCA
//! not allowed for this process → `OPSEL_PERMISSION`; an ICMP probe without
//! the privilege → `OPSEL_PERMISSION`; a failed send or read → `OPSEL_IO`.

use crate::error::{guard, opsel_status, utf8, Fail};
use crate::handle::Handle;
use crate::model::{clear_out, opsel_model};
use crate::ops::{
    build_controller, cca_arr, opsel_ops_config, opsel_ops_policy, opsel_ops_stats, phase_c,
    stats_c, CtlCore, OPSEL_OPS_EVENT_CLASSIFIED, OPSEL_OPS_EVENT_CYCLE_CLASSIFIED,
    OPSEL_OPS_EVENT_DECISION_FAILED, OPSEL_OPS_EVENT_PHASE, OPSEL_OPS_EVENT_PROBE_INCOMPLETE,
    OPSEL_OPS_EVENT_SELECTED,
};
use crate::sys::{sock_addr, OPSEL_NOT_AVAILABLE};
use opsel::ops::Event;
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_fixed, DriverConfig, DriverEvent, DriverReport, EndReason, OpsDriver, RttSource,
};
use opsel::sys::linux::rtt::BurstConfig;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// `opsel_ops_driver_config.probe`: UDP echo to `probe_peer` (`"ip:port"`),
/// e.g. an `opsel_udp_echo_responder` or `opsel recv`'s listen port. No privilege needed.
pub const OPSEL_DRIVER_PROBE_UDP: u32 = 0;
/// `opsel_ops_driver_config.probe`: ICMP echo to `probe_peer` (an IPv4
/// address, or an IPv6 address for ICMPv6); needs `net.ipv4.ping_group_range`
/// or CAP_NET_RAW.
pub const OPSEL_DRIVER_PROBE_ICMP: u32 = 1;

/// Driver settings. Start from `opsel_ops_driver_config_default()` (000 §3.2:
/// 10 echoes 1 ms apart per 1 s sample; bytes per 1 s interval; lead-in on;
/// `TCP_NOTSENT_LOWAT` 128 KiB) and set `probe_peer`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_ops_driver_config {
    /// `OPSEL_DRIVER_PROBE_UDP` or `OPSEL_DRIVER_PROBE_ICMP`.
    pub probe: u32,
    /// Where the RTT probe goes (NUL-terminated; read during
    /// `opsel_ops_driver_new()` only): `"ip:port"` for UDP, `"ip"` for ICMP.
    pub probe_peer: *const c_char,
    /// Stop after this long, ns (fixed-time transfer); 0 = until EOF or stop.
    pub time_limit_ns: u64,
    /// Length of the byte-accounting interval of INTERVAL events, ns.
    pub interval_ns: u64,
    /// Active probing: run the pattern's last segment right before every
    /// probe (as the training collection saw it).
    pub lead_in: bool,
    /// Set `TCP_NOTSENT_LOWAT` to `notsent_lowat_bytes` while running (so a
    /// silence is silent); false leaves the socket alone.
    pub set_notsent_lowat: bool,
    pub notsent_lowat_bytes: u32,
    /// Bytes read from the data source per read call (1..=64 MiB).
    pub chunk_bytes: usize,
    /// Echoes per RTT sample, their spacing and the reply timeout, ns.
    pub echo_count: u16,
    pub echo_interval_ns: u64,
    pub echo_timeout_ns: u64,
}

/// The defaults of the Rust `DriverConfig` (000 §3.2), UDP probe, no peer yet.
#[no_mangle]
pub extern "C" fn opsel_ops_driver_config_default() -> opsel_ops_driver_config {
    let d = DriverConfig::default();
    opsel_ops_driver_config {
        probe: OPSEL_DRIVER_PROBE_UDP,
        probe_peer: std::ptr::null(),
        time_limit_ns: d.time_limit_ns.unwrap_or(0),
        interval_ns: d.interval_ns,
        lead_in: d.lead_in,
        set_notsent_lowat: d.notsent_lowat_bytes.is_some(),
        notsent_lowat_bytes: d.notsent_lowat_bytes.unwrap_or(0),
        chunk_bytes: d.chunk_bytes,
        echo_count: d.burst.count,
        echo_interval_ns: d.burst.interval_ns,
        echo_timeout_ns: d.burst.timeout_ns,
    }
}

/// The one place that maps `opsel_ops_driver_config` to the core (keep in
/// step with `opsel_ops_driver_config_default()` when `DriverConfig` grows).
/// Every field is mapped today; the struct update keeps a field added to
/// `DriverConfig` later at its Rust default until the C struct grows one.
#[allow(clippy::needless_update)]
fn driver_config_from_c(c: &opsel_ops_driver_config) -> DriverConfig {
    DriverConfig {
        burst: BurstConfig {
            count: c.echo_count,
            interval_ns: c.echo_interval_ns,
            timeout_ns: c.echo_timeout_ns,
        },
        interval_ns: c.interval_ns,
        time_limit_ns: (c.time_limit_ns != 0).then_some(c.time_limit_ns),
        notsent_lowat_bytes: c.set_notsent_lowat.then_some(c.notsent_lowat_bytes),
        chunk_bytes: c.chunk_bytes,
        lead_in: c.lead_in,
        ..DriverConfig::default()
    }
}

fn rtt_source_from_c(c: &opsel_ops_driver_config) -> Result<RttSource, Fail> {
    match c.probe {
        OPSEL_DRIVER_PROBE_UDP => Ok(RttSource::UdpEcho(sock_addr(
            c.probe_peer,
            "config.probe_peer",
        )?)),
        OPSEL_DRIVER_PROBE_ICMP => {
            let s = unsafe { utf8(c.probe_peer, "config.probe_peer") }?;
            let ip = opsel::sys::linux::parse_ip(s, "config.probe_peer")?;
            Ok(RttSource::Icmp(ip))
        }
        p => Err(Fail::invalid(format!(
            "config.probe {p} is unknown; use OPSEL_DRIVER_PROBE_UDP (0) or OPSEL_DRIVER_PROBE_ICMP (1)"
        ))),
    }
}

/// `opsel_ops_driver_event.kind` (beyond the controller's
/// `OPSEL_OPS_EVENT_PHASE` … `OPSEL_OPS_EVENT_PROBE_INCOMPLETE`, which keep
/// their values): the CCA was set on the socket and read back (`cca`,
/// `at_ns`; `latency_ns` when the switch was decided on an RTT sample).
pub const OPSEL_DRIVER_EVENT_CCA_SET: u32 = 9;
/// A decision was carried out: `cca`, `switched`, and `latency_ns` from the
/// reading of the window's last echo to the end of the setsockopt call
/// (000 §5.5: the decision latency).
pub const OPSEL_DRIVER_EVENT_DECISION: u32 = 10;
/// One 1 Hz RTT sample: `rtt_ms` (NaN when every echo was lost), `answered`, `at_ns`.
pub const OPSEL_DRIVER_EVENT_RTT: u32 = 11;
/// Bytes handed to the socket in `[start_ns, end_ns)`: `bytes`,
/// `acked_bytes` (`OPSEL_NOT_AVAILABLE` when the kernel does not say),
/// `total_bytes`, the socket's `cca` and the controller's `phase`.
pub const OPSEL_DRIVER_EVENT_INTERVAL: u32 = 12;

/// One driver event; which fields are meaningful depends on `kind` (see the
/// `OPSEL_DRIVER_EVENT_*` and `OPSEL_OPS_EVENT_*` kinds); the others are zero.
/// Valid during the callback only (copy what you keep).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_ops_driver_event {
    pub kind: u32,
    /// CCA name (CCA_SET, DECISION, INTERVAL, SELECTED), NUL-terminated.
    pub cca: [c_char; 16],
    /// Event time, CLOCK_MONOTONIC ns.
    pub at_ns: u64,
    /// `OPSEL_OPS_PHASE_*` (PHASE, INTERVAL).
    pub phase: u32,
    /// OPS cycle (PHASE).
    pub cycle: u64,
    /// Class name (CLASSIFIED), valid while the driver lives.
    pub label: *const c_char,
    pub class_index: usize,
    pub confidence: f64,
    pub distance: f64,
    /// Samples in the classified window (CLASSIFIED) or that arrived (PROBE_INCOMPLETE).
    pub samples: usize,
    pub needed: usize,
    /// The probe ended early (CLASSIFIED, progressive probing).
    pub early: bool,
    /// Steady time Y chosen (SELECTED); `has_steady` false = to the end.
    pub steady_ns: u64,
    pub has_steady: bool,
    /// Failure message (DECISION_FAILED), valid during the callback; else "".
    pub message: *const c_char,
    /// Decision latency, ns (DECISION; CCA_SET when `has_latency`).
    pub latency_ns: u64,
    pub has_latency: bool,
    /// The decision changed the socket's CCA (DECISION).
    pub switched: bool,
    /// Mean RTT of the answered echoes, ms; NaN when all were lost (RTT).
    pub rtt_ms: f64,
    pub answered: u16,
    /// Interval bounds and byte counts (INTERVAL).
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: u64,
    pub acked_bytes: u64,
    pub total_bytes: u64,
    /// CYCLE_CLASSIFIED (config.cycles > 1): 0-based window index, windows
    /// per decision, running min-sum class index (`confidence` = its margin).
    pub window: usize,
    pub windows: usize,
    pub leader: usize,
}

impl opsel_ops_driver_event {
    fn new(kind: u32) -> Self {
        Self {
            kind,
            cca: [0; 16],
            at_ns: 0,
            phase: 0,
            cycle: 0,
            label: c"".as_ptr(),
            class_index: 0,
            confidence: 0.0,
            distance: 0.0,
            samples: 0,
            needed: 0,
            early: false,
            steady_ns: 0,
            has_steady: false,
            message: c"".as_ptr(),
            latency_ns: 0,
            has_latency: false,
            switched: false,
            rtt_ms: 0.0,
            answered: 0,
            start_ns: 0,
            end_ns: 0,
            bytes: 0,
            acked_bytes: 0,
            total_bytes: 0,
            window: 0,
            windows: 0,
            leader: 0,
        }
    }
}

/// Receives every driver event on the thread that runs the driver. Return 0
/// to continue; any other value stops the driver (the run then ends with
/// `OPSEL_DRIVER_END_STOPPED`). Must not call back into the same driver
/// except `opsel_ops_driver_stop()`.
pub type opsel_ops_driver_event_fn = Option<
    unsafe extern "C" fn(user_data: *mut c_void, event: *const opsel_ops_driver_event) -> c_int,
>;

/// The data source: write up to `cap` bytes into `buf` and return how many
/// (> 0), 0 at end of data, or a negative value (e.g. `-errno`) on failure,
/// which ends the run with `OPSEL_IO`. Called on the driver's thread.
pub type opsel_read_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, buf: *mut u8, cap: usize) -> isize>;

/// `opsel_ops_driver_report.end`: the data source reached EOF and every byte
/// was handed to the socket.
pub const OPSEL_DRIVER_END_EOF: u32 = 0;
/// `time_limit_ns` passed.
pub const OPSEL_DRIVER_END_TIME_LIMIT: u32 = 1;
/// `opsel_ops_driver_stop()` was called or the event callback returned non-zero.
pub const OPSEL_DRIVER_END_STOPPED: u32 = 2;

/// Summary of a run.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_ops_driver_report {
    /// Bytes handed to the socket (the next byte offset past where the source started).
    pub bytes_sent: u64,
    pub started_ns: u64,
    pub ended_ns: u64,
    /// `OPSEL_DRIVER_END_*`.
    pub end: u32,
    /// Successful `setsockopt(TCP_CONGESTION)` calls.
    pub cca_sets: u64,
    /// RTT samples where every echo was lost.
    pub lost_samples: u64,
    /// Controller counters at the end (zero for `opsel_send_fixed()`, except `phase`).
    pub stats: opsel_ops_stats,
}

fn report_c(r: &DriverReport, stats: opsel_ops_stats) -> opsel_ops_driver_report {
    opsel_ops_driver_report {
        bytes_sent: r.bytes_sent,
        started_ns: r.started_ns,
        ended_ns: r.ended_ns,
        end: match r.end {
            EndReason::Eof => OPSEL_DRIVER_END_EOF,
            EndReason::TimeLimit => OPSEL_DRIVER_END_TIME_LIMIT,
            EndReason::Stopped => OPSEL_DRIVER_END_STOPPED,
        },
        cca_sets: r.cca_sets,
        lost_samples: r.lost_samples,
        stats,
    }
}

/// An OPS driver: a controller plus the RTT probe target, for one run.
/// Opaque: `opsel_ops_driver_new()` / `opsel_ops_driver_free()`.
/// Thread-safety: `opsel_ops_driver_stop()` may be called from any thread
/// while another thread is inside `opsel_ops_driver_run()`; free only after
/// the run returned.
pub struct opsel_ops_driver {
    inner: Mutex<OpsDriver<Box<dyn opsel::ops::Classifier + Send>, crate::ops::PolicyKind>>,
    stop: Arc<AtomicBool>,
    names: Vec<CString>,
}

// Compile-time check that the handle can be shared with a stopping thread.
const _: fn() = || {
    fn sync<T: Sync + Send>() {}
    sync::<opsel_ops_driver>();
};

/// Create a driver for one transfer: a controller built exactly as
/// `opsel_ops_controller_new(model, policy, ops_config)` (the model is
/// copied; NULL policy = the stump; NULL ops_config = passive) and the
/// driver settings `driver_config` (NULL = defaults, which have no probe
/// peer, so pass one).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a bad pattern,
/// CCA name, probe peer or setting (named in the message).
/// Ownership: the caller owns `*out_driver`.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_driver_new(
    model: *const opsel_model,
    policy: *const opsel_ops_policy,
    ops_config: *const opsel_ops_config,
    driver_config: *const opsel_ops_driver_config,
    out_driver: *mut *mut opsel_ops_driver,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_driver)?;
        let dc = match unsafe { driver_config.as_ref() } {
            Some(c) => *c,
            None => opsel_ops_driver_config_default(),
        };
        let rtt = rtt_source_from_c(&dc)?;
        let (ctl, names): (CtlCore, _) = unsafe { build_controller(model, policy, ops_config) }?;
        let drv = OpsDriver::new(ctl, rtt, driver_config_from_c(&dc))?;
        let stop = Arc::new(AtomicBool::new(false));
        Handle::into_out(
            opsel_ops_driver {
                inner: Mutex::new(drv),
                stop,
                names,
            },
            out,
        );
        Ok(())
    })
}

/// Release a driver (NULL ignored). Not while it runs.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_driver_free(driver: *mut opsel_ops_driver) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(driver) }
}

/// Ask a running driver to stop (any thread; also before the run starts, in
/// which case the run returns at once). The run ends within a few ms with
/// `OPSEL_DRIVER_END_STOPPED`.
/// Errors: `OPSEL_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_driver_stop(driver: *const opsel_ops_driver) -> opsel_status {
    guard(|| {
        let d = unsafe { Handle::borrow(driver) }?;
        d.stop.store(true, Ordering::Relaxed);
        Ok(())
    })
}

/// The C read callback as a `std::io::Read`.
struct CallbackSource {
    f: unsafe extern "C" fn(*mut c_void, *mut u8, usize) -> isize,
    user: *mut c_void,
}

impl io::Read for CallbackSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the user's callback with the contract of opsel_read_fn.
        let n = unsafe { (self.f)(self.user, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            let errno = i32::try_from(-n).unwrap_or(0);
            return Err(io::Error::other(format!(
                "the read callback returned {n}{}",
                if errno > 0 {
                    format!(" ({})", io::Error::from_raw_os_error(errno))
                } else {
                    String::new()
                }
            )));
        }
        if n as usize > buf.len() {
            return Err(io::Error::other(format!(
                "the read callback returned {n} but the buffer holds only {} bytes",
                buf.len()
            )));
        }
        Ok(n as usize)
    }
}

/// A borrowed file descriptor as a `std::io::Read` (blocking reads).
struct FdSource(c_int);

impl io::Read for FdSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: valid buffer; a bad descriptor yields EBADF.
        let n = unsafe { libc::read(self.0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// Translate one core event and hand it to the C callback; a non-zero return
/// raises `stop`.
fn deliver(
    e: &DriverEvent,
    names: &[CString],
    cb: Option<(
        unsafe extern "C" fn(*mut c_void, *const opsel_ops_driver_event) -> c_int,
        *mut c_void,
    )>,
    stop: &AtomicBool,
) {
    let Some((f, user)) = cb else { return };
    let mut message = CString::default();
    let mut r;
    match e {
        DriverEvent::Ops(ev) => match ev {
            Event::Phase {
                phase,
                cycle,
                at_ns,
            } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_PHASE);
                (r.phase, r.cycle, r.at_ns) = (phase_c(*phase), *cycle, *at_ns);
            }
            Event::Classified {
                classified,
                samples,
                early,
                at_ns,
            } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_CLASSIFIED);
                r.label = names
                    .get(classified.class_index)
                    .map_or(c"".as_ptr(), |n| n.as_ptr());
                r.class_index = classified.class_index;
                r.confidence = classified.confidence;
                r.distance = classified.distance;
                (r.samples, r.early, r.at_ns) = (*samples, *early, *at_ns);
            }
            Event::Selected {
                cca,
                steady_ns,
                at_ns,
            } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_SELECTED);
                r.cca = cca_arr(cca);
                (r.steady_ns, r.has_steady) = (steady_ns.unwrap_or(0), steady_ns.is_some());
                r.at_ns = *at_ns;
            }
            Event::DecisionFailed { message: m, at_ns } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_DECISION_FAILED);
                message = CString::new(m.replace('\0', "\\0")).unwrap_or_default();
                r.at_ns = *at_ns;
            }
            Event::ProbeIncomplete {
                samples,
                needed,
                at_ns,
            } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_PROBE_INCOMPLETE);
                (r.samples, r.needed, r.at_ns) = (*samples, *needed, *at_ns);
            }
            Event::CycleClassified {
                index,
                cycles,
                class_index,
                distance,
                leader,
                margin,
                at_ns,
            } => {
                r = opsel_ops_driver_event::new(OPSEL_OPS_EVENT_CYCLE_CLASSIFIED);
                r.label = names.get(*class_index).map_or(c"".as_ptr(), |n| n.as_ptr());
                (r.class_index, r.distance, r.confidence) = (*class_index, *distance, *margin);
                (r.window, r.windows, r.leader, r.at_ns) = (*index, *cycles, *leader, *at_ns);
            }
        },
        DriverEvent::CcaSet {
            cca,
            at_ns,
            latency_ns,
        } => {
            r = opsel_ops_driver_event::new(OPSEL_DRIVER_EVENT_CCA_SET);
            r.cca = cca_arr(cca);
            r.at_ns = *at_ns;
            (r.latency_ns, r.has_latency) = (latency_ns.unwrap_or(0), latency_ns.is_some());
        }
        DriverEvent::Decision {
            cca,
            latency_ns,
            switched,
        } => {
            r = opsel_ops_driver_event::new(OPSEL_DRIVER_EVENT_DECISION);
            r.cca = cca_arr(cca);
            (r.latency_ns, r.has_latency, r.switched) = (*latency_ns, true, *switched);
        }
        DriverEvent::Rtt {
            at_ns,
            rtt_ms,
            answered,
        } => {
            r = opsel_ops_driver_event::new(OPSEL_DRIVER_EVENT_RTT);
            (r.at_ns, r.rtt_ms, r.answered) = (*at_ns, rtt_ms.unwrap_or(f64::NAN), *answered);
        }
        DriverEvent::Interval {
            start_ns,
            end_ns,
            bytes,
            acked_bytes,
            total_bytes,
            cca,
            phase,
        } => {
            r = opsel_ops_driver_event::new(OPSEL_DRIVER_EVENT_INTERVAL);
            (r.start_ns, r.end_ns, r.at_ns) = (*start_ns, *end_ns, *end_ns);
            (r.bytes, r.total_bytes) = (*bytes, *total_bytes);
            r.acked_bytes = acked_bytes.unwrap_or(OPSEL_NOT_AVAILABLE);
            r.cca = cca_arr(cca);
            r.phase = phase_c(*phase);
        }
    }
    if !message.as_bytes().is_empty() {
        r.message = message.as_ptr();
    }
    // SAFETY: the user's callback with the contract of opsel_ops_driver_event_fn.
    if unsafe { f(user, &r) } != 0 {
        stop.store(true, Ordering::Relaxed);
    }
}

fn run_driver(
    driver: *const opsel_ops_driver,
    fd: c_int,
    source: &mut dyn io::Read,
    on_event: opsel_ops_driver_event_fn,
    event_user: *mut c_void,
    out_report: *mut opsel_ops_driver_report,
) -> Result<(), Fail> {
    let d = unsafe { Handle::borrow(driver) }?;
    if fd < 0 {
        return Err(Fail::invalid(format!(
            "socket descriptor {fd} is negative; pass the connected TCP socket's descriptor"
        )));
    }
    let mut drv = d.inner.try_lock().map_err(|_| {
        Fail::invalid("this driver is already running on another thread; one run per driver")
    })?;
    // SAFETY: fd is non-negative; only passed to syscalls during the run,
    // where a stale number yields EBADF (reported), never memory unsafety.
    let sock = unsafe { BorrowedFd::borrow_raw(fd) };
    let cb = on_event.map(|f| (f, event_user));
    let stop = Arc::clone(&d.stop);
    let names = &d.names;
    let report = drv.run(sock, source, &stop, &mut |e| deliver(e, names, cb, &stop))?;
    if let Some(o) = unsafe { out_report.as_mut() } {
        let ctl = drv.controller();
        *o = report_c(&report, stats_c(ctl, report.stats));
    }
    Ok(())
}

/// Run the OPS cycle on the connected TCP socket `fd` (borrowed, left open),
/// sending data from `read(read_user, buf, cap)`, until the data source is
/// exhausted, `time_limit_ns` passes or the driver is stopped. Every event
/// goes to `on_event(event_user, event)` (may be NULL). The summary goes to
/// `*out_report` (may be NULL). Blocks the calling thread. A driver runs once.
///
/// Errors: `OPSEL_NULL_POINTER` (driver, read); `OPSEL_INVALID_INPUT` (fd is
/// negative or not a TCP socket, an unknown CCA, the driver already ran or
/// is running); `OPSEL_PERMISSION` (a CCA not allowed, ICMP without
/// privilege); `OPSEL_IO` (send failed, the read callback failed).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_driver_run(
    driver: *const opsel_ops_driver,
    fd: c_int,
    read: opsel_read_fn,
    read_user: *mut c_void,
    on_event: opsel_ops_driver_event_fn,
    event_user: *mut c_void,
    out_report: *mut opsel_ops_driver_report,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { out_report.as_mut() } {
            *o = opsel_ops_driver_report::default();
        }
        let f = read.ok_or_else(|| Fail::null("read"))?;
        let mut src = CallbackSource { f, user: read_user };
        run_driver(driver, fd, &mut src, on_event, event_user, out_report)
    })
}

/// As `opsel_ops_driver_run()`, reading the data from the descriptor
/// `data_fd` (a file or pipe, borrowed and left open) until EOF.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_driver_run_fd(
    driver: *const opsel_ops_driver,
    fd: c_int,
    data_fd: c_int,
    on_event: opsel_ops_driver_event_fn,
    event_user: *mut c_void,
    out_report: *mut opsel_ops_driver_report,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { out_report.as_mut() } {
            *o = opsel_ops_driver_report::default();
        }
        if data_fd < 0 {
            return Err(Fail::invalid(format!(
                "data_fd {data_fd} is negative; pass an open file descriptor"
            )));
        }
        run_driver(
            driver,
            fd,
            &mut FdSource(data_fd),
            on_event,
            event_user,
            out_report,
        )
    })
}

/// The fixed-CCA baseline (000 Table 6.3 "fixed CUBIC" / "fixed BBR"): set
/// `cca` on `fd` once, then send from `read` with the driver's sending loop
/// and INTERVAL events (no RTT probe) until EOF, `config->time_limit_ns` or
/// a non-zero return of `on_event`. `config` NULL = defaults (its probe
/// fields are ignored).
/// Errors: as `opsel_ops_driver_run()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_send_fixed(
    fd: c_int,
    cca: *const c_char,
    config: *const opsel_ops_driver_config,
    read: opsel_read_fn,
    read_user: *mut c_void,
    on_event: opsel_ops_driver_event_fn,
    event_user: *mut c_void,
    out_report: *mut opsel_ops_driver_report,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { out_report.as_mut() } {
            *o = opsel_ops_driver_report::default();
        }
        let cca = CcaName::new(unsafe { utf8(cca, "cca") }?)?;
        let f = read.ok_or_else(|| Fail::null("read"))?;
        if fd < 0 {
            return Err(Fail::invalid(format!(
                "socket descriptor {fd} is negative; pass the connected TCP socket's descriptor"
            )));
        }
        let dc = match unsafe { config.as_ref() } {
            Some(c) => *c,
            None => opsel_ops_driver_config_default(),
        };
        let cfg = driver_config_from_c(&dc);
        let stop = AtomicBool::new(false);
        let cb = on_event.map(|f| (f, event_user));
        // SAFETY: as in run_driver.
        let sock = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut src = CallbackSource { f, user: read_user };
        let report = send_fixed(sock, &mut src, cca, &cfg, &stop, &mut |e| {
            deliver(e, &[], cb, &stop)
        })?;
        if let Some(o) = unsafe { out_report.as_mut() } {
            let stats = opsel_ops_stats {
                phase: crate::ops::OPSEL_OPS_PHASE_STEADY,
                ..Default::default()
            };
            *o = report_c(&report, stats);
        }
        Ok(())
    })
}
