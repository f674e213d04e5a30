//! `OpsDriver`: runs the sans-IO [`Controller`] on a live, connected TCP socket
//! owned by the caller (DESIGN.md "How data flows"; 000 §1.2, Fig 6.1, §5.3).
//!
//! * The CCA is switched with `setsockopt(TCP_CONGESTION)` on the same socket
//!   (000 Table 7.2: the connection is never reopened) and read back.
//! * Bursts and steady phases send payload from the caller's data source at
//!   full, CCA-regulated speed; bursts therefore carry real file bytes
//!   ("constructive active probing", 000 §1.2). Silences send nothing.
//! * An RTT prober thread sends 10 echoes 1 ms apart once per second and hands
//!   their mean to the controller as one 1 Hz sample (000 §3.2). ICMP needs
//!   root or `net.ipv4.ping_group_range`; UDP echo to a [`UdpEchoResponder`]
//!   (which `opsel recv` runs on its listen port) needs no privilege.
//! * Every phase, prediction, CCA switch, RTT sample and per-interval byte
//!   count is reported to a callback as a [`DriverEvent`].
//!
//! Time: CLOCK_MONOTONIC ns throughout ([`monotonic_ns`]).
//!
//! Silence must really be silent: with a large send buffer the kernel would
//! keep draining megabytes queued before the silence began. The driver sets
//! `TCP_NOTSENT_LOWAT` (default 128 KiB) so that little unsent data sits in
//! the socket, and restores the previous value when it returns.
//!
//! [`UdpEchoResponder`]: super::rtt::UdpEchoResponder

use std::io::{self, Read};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::cca::set_cca;
use super::clock::{monotonic_ns, sleep_until_monotonic};
use super::rtt::{echo_burst, BurstConfig, EchoProbe, IcmpProber, UdpEchoProber};
use super::sockopt::{get_int, get_raw, os_error, require_tcp, set_raw, set_val};
use super::tcp_info::tcp_info;
use crate::ops::{Action, ClassRefs, Classifier, Controller, Event, Output, Phase, Policy, Stats};
use crate::probe::CcaName;
use crate::{Error, Result};

const NS_PER_S: u64 = 1_000_000_000;
/// How late the prober may notice a tick and still fire it.
const LATE_NS: u64 = 100_000_000;

/// Where the RTT probe goes (000 §3.2: toward the peer).
pub enum RttSource {
    /// ICMP echo to the peer (ping socket if `ping_group_range` admits the
    /// process, else a raw socket: root / CAP_NET_RAW).
    Icmp(Ipv4Addr),
    /// UDP echo to a [`super::rtt::UdpEchoResponder`], e.g. the one `opsel
    /// recv` runs on its listen port. Works without privileges.
    UdpEcho(SocketAddr),
    /// Any echo prober (tests, other transports).
    Custom(Box<dyn EchoProbe + Send>),
}

impl std::fmt::Debug for RttSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RttSource::Icmp(a) => write!(f, "Icmp({a})"),
            RttSource::UdpEcho(a) => write!(f, "UdpEcho({a})"),
            RttSource::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The probe spec the CLI and the bindings take: `icmp:IPV4` for ICMP echo,
/// `HOST:PORT` or `udp:HOST:PORT` for UDP echo (e.g. toward `opsel recv`'s
/// listen port). One parser so every front end gives the same errors.
impl std::str::FromStr for RttSource {
    type Err = Error;

    fn from_str(probe: &str) -> Result<Self> {
        if let Some(ip) = probe.strip_prefix("icmp:") {
            let a: Ipv4Addr = ip.parse().map_err(|_| {
                Error::invalid(format!(
                    "probe {probe:?}: {ip:?} is not an IPv4 address; write e.g. \"icmp:10.0.0.2\""
                ))
            })?;
            return Ok(RttSource::Icmp(a));
        }
        let addr = probe.strip_prefix("udp:").unwrap_or(probe);
        let a: SocketAddr = addr.parse().map_err(|_| {
            Error::invalid(format!(
                "probe {probe:?} is not an address with a port; write e.g. \"127.0.0.1:9000\" (UDP echo) or \"icmp:10.0.0.2\""
            ))
        })?;
        Ok(RttSource::UdpEcho(a))
    }
}

impl RttSource {
    /// Open the prober now, in the calling thread's network namespace.
    fn open(self) -> Result<Box<dyn EchoProbe + Send>> {
        Ok(match self {
            RttSource::Icmp(a) => Box::new(IcmpProber::new(a)?),
            RttSource::UdpEcho(a) => {
                let bind: SocketAddr = if a.is_ipv4() {
                    (Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let sock = UdpSocket::bind(bind)
                    .map_err(|e| Error::io(format!("bind UDP echo prober toward {a}"), e))?;
                Box::new(UdpEchoProber::new(sock, a)?)
            }
            RttSource::Custom(p) => p,
        })
    }
}

/// Driver settings. `Default` follows 000 §3.2 (10 echoes 1 ms apart, one
/// sample per second) and logs bytes per 1 s interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverConfig {
    /// Echoes per sample and their spacing; the reply timeout is capped at
    /// half the sample period so a lost echo never delays the next sample.
    pub burst: BurstConfig,
    /// Length of the byte-accounting interval of [`DriverEvent::Interval`].
    pub interval_ns: u64,
    /// Stop after this long (fixed-time transfer, iPerfOPS `-t`); `None` = until EOF.
    pub time_limit_ns: Option<u64>,
    /// `TCP_NOTSENT_LOWAT` while the driver runs (`None` leaves the socket
    /// alone; then silences start only after the send buffer has drained).
    pub notsent_lowat_bytes: Option<u32>,
    /// Bytes read from the source per read call.
    pub chunk_bytes: usize,
    /// Active probing only: run the pattern's last segment (e.g. the B5 burst
    /// of S5-C5-S5-B5) right before every probe, at the end of the steady
    /// phase and before the first probe. Models trained on back-to-back
    /// pattern runs (the netlab collection) saw every window follow that
    /// segment, and the background's state at the window's start (a CUBIC
    /// flow just knocked back by a BBR burst) is part of the signature.
    pub lead_in: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            burst: BurstConfig {
                timeout_ns: 400_000_000,
                ..BurstConfig::default()
            },
            interval_ns: NS_PER_S,
            time_limit_ns: None,
            // 128 KiB: what the netlab training collection used.
            notsent_lowat_bytes: Some(128 * 1024),
            chunk_bytes: 256 * 1024,
            lead_in: true,
        }
    }
}

impl DriverConfig {
    fn validate(&self, sample_period_ns: u64) -> Result<()> {
        if self.interval_ns == 0 {
            return Err(Error::invalid(
                "driver interval_ns is 0; use e.g. 1e9 (bytes per second)",
            ));
        }
        if self.chunk_bytes == 0 || self.chunk_bytes > 64 << 20 {
            return Err(Error::invalid(format!(
                "driver chunk_bytes = {} must be in 1..=64 MiB",
                self.chunk_bytes
            )));
        }
        let echoes_ns = u64::from(self.burst.count).saturating_mul(self.burst.interval_ns);
        if self.burst.count == 0 || echoes_ns >= sample_period_ns / 2 {
            return Err(Error::invalid(format!(
                "{} echoes {} ns apart do not fit in half a sample period ({} ns); 000 §3.2 uses 10 echoes 1 ms apart per 1 s sample",
                self.burst.count, self.burst.interval_ns, sample_period_ns
            )));
        }
        Ok(())
    }
}

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

/// Why [`OpsDriver::run`] returned (serialized in snake_case: `"time_limit"`).
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

/// Sends from a data source over the caller's socket: reads chunks, writes
/// without blocking past a deadline, counts bytes.
struct Pump<'a> {
    fd: BorrowedFd<'a>,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    total: u64,
}

impl<'a> Pump<'a> {
    fn new(fd: BorrowedFd<'a>, chunk: usize) -> Self {
        Self {
            fd,
            buf: vec![0u8; chunk],
            pos: 0,
            len: 0,
            eof: false,
            total: 0,
        }
    }

    fn drained(&self) -> bool {
        self.eof && self.pos == self.len
    }

    /// Write what the socket takes now; `Ok(false)` when it would block (or
    /// the source is done).
    fn try_send(&mut self, source: &mut dyn Read) -> Result<bool> {
        if self.pos == self.len {
            if self.eof {
                return Ok(false);
            }
            let n = loop {
                match source.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io("read from the transfer's data source", e)),
                }
            };
            if n == 0 {
                self.eof = true;
                return Ok(false);
            }
            self.pos = 0;
            self.len = n;
        }
        let chunk = &self.buf[self.pos..self.len];
        // SAFETY: chunk is a valid readable buffer; fd is the caller's socket.
        let rc = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                chunk.as_ptr().cast(),
                chunk.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(os_error("send (transfer data)", self.fd, e)),
            };
        }
        self.pos += rc as usize;
        self.total += rc as u64;
        Ok(true)
    }
}

/// Wait until `deadline_ns` for the socket to become writable (if
/// `want_write`) or a sample to arrive on `wake`.
fn wait(sock: BorrowedFd<'_>, want_write: bool, wake: &OwnedFd, deadline_ns: u64) {
    let left = deadline_ns.saturating_sub(monotonic_ns());
    if left == 0 {
        return;
    }
    let mut pfds = [
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        },
    ];
    let n = if want_write { 2 } else { 1 };
    let ts = libc::timespec {
        tv_sec: (left / NS_PER_S) as libc::time_t,
        tv_nsec: (left % NS_PER_S) as libc::c_long,
    };
    // SAFETY: pfds holds n valid pollfds; ts is a valid timespec.
    unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
}

const WIRE: usize = 32;

/// One sample as written by the prober thread into the wake pipe: 32 bytes
/// (atomic for pipes, < PIPE_BUF).
#[derive(Debug, Clone, Copy)]
struct WireSample {
    /// When the burst's last reply was in (or its timeout ran out).
    at_ns: u64,
    /// When the burst's first echo left.
    start_ns: u64,
    rtt_ms: f64,
    answered: u16,
}

impl WireSample {
    fn encode(&self) -> [u8; WIRE] {
        let mut b = [0u8; WIRE];
        b[..8].copy_from_slice(&self.at_ns.to_ne_bytes());
        b[8..16].copy_from_slice(&self.start_ns.to_ne_bytes());
        b[16..24].copy_from_slice(&self.rtt_ms.to_bits().to_ne_bytes());
        b[24..26].copy_from_slice(&self.answered.to_ne_bytes());
        b
    }
    fn decode(b: &[u8; WIRE]) -> Self {
        let u = |r: &[u8]| u64::from_ne_bytes(r.try_into().unwrap_or([0; 8]));
        Self {
            at_ns: u(&b[..8]),
            start_ns: u(&b[8..16]),
            rtt_ms: f64::from_bits(u(&b[16..24])),
            answered: u16::from_ne_bytes([b[24], b[25]]),
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(Error::io(
            "pipe2 for the RTT prober",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors are fresh and owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `echo_burst` takes a sized prober; this forwards to a boxed one.
struct DynProbe<'a>(&'a mut (dyn EchoProbe + Send));

impl EchoProbe for DynProbe<'_> {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        self.0.send_echo(seq)
    }
    fn recv_reply(&mut self, timeout: std::time::Duration) -> Result<Option<(u16, u64)>> {
        self.0.recv_reply(timeout)
    }
}

/// The prober thread: one echo burst per period at `origin + k·period`, the
/// start of each second of the probe, as the netlab training collection
/// samples (the burst goes out as the pattern segment changes); `origin` is
/// moved to each probe's start. A tick noticed up to [`LATE_NS`] late still
/// fires, so a probe never loses its first sample to the prober's sleep.
fn spawn_prober(
    mut probe: Box<dyn EchoProbe + Send>,
    burst: BurstConfig,
    period_ns: u64,
    origin: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tx: OwnedFd,
) -> Result<JoinHandle<Result<()>>> {
    std::thread::Builder::new()
        .name("opsel-rtt".into())
        .spawn(move || -> Result<()> {
            // 1 ns timer slack: the default 50 µs would blur the 1 ms echo spacing.
            // SAFETY: prctl on this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            let mut seq: u16 = 0;
            let mut fired: Option<u64> = None;
            loop {
                let tick = loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let now = monotonic_ns();
                    let o = origin.load(Ordering::Relaxed);
                    // The latest grid point at or before now, if still fresh
                    // and not fired yet; else the next one.
                    let tick = if now < o {
                        o
                    } else {
                        let last = o + (now - o) / period_ns * period_ns;
                        if now - last <= LATE_NS && fired != Some(last) {
                            last
                        } else {
                            last + period_ns
                        }
                    };
                    if tick <= now {
                        break tick;
                    }
                    // Sleep in short steps so a moved origin or stop is seen.
                    let step = tick.min(now + 10_000_000);
                    sleep_until_monotonic(step);
                    if step == tick {
                        break tick;
                    }
                };
                fired = Some(tick);
                let b = echo_burst(&mut DynProbe(probe.as_mut()), burst, seq)?;
                seq = seq.wrapping_add(burst.count);
                let s = WireSample {
                    at_ns: monotonic_ns(),
                    start_ns: b.start_mono_ns,
                    rtt_ms: b.mean_rtt_ms().unwrap_or(f64::NAN),
                    answered: (b.rtts_ns.len() - b.lost()) as u16,
                };
                let bytes = s.encode();
                // SAFETY: valid buffer; a full pipe (reader gone) drops the sample.
                unsafe { libc::write(tx.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
            }
        })
        .map_err(|e| Error::io("spawn the RTT prober thread", e))
}

/// Runs an OPS [`Controller`] on a connected TCP socket (see the module docs).
///
/// ```no_run
/// # fn main() -> opsel::Result<()> {
/// use opsel::ops::{Config, Controller, KnnClassifier, Stump};
/// use opsel::probe::Pattern;
/// use opsel::sys::linux::ops_driver::{DriverConfig, OpsDriver, RttSource};
///
/// let model = opsel::model::load("models/active-s5c5s5b5/model.json")?.model;
/// let ctl = Controller::new(
///     Config::active(Pattern::parse("S5-C5-S5-B5")?),
///     KnnClassifier::new(model)?,
///     Stump::default(),
/// )?;
/// let conn = std::net::TcpStream::connect("10.0.0.2:5001").map_err(|e| opsel::Error::io("connect", e))?;
/// let rtt = RttSource::UdpEcho("10.0.0.2:5001".parse().unwrap());
/// let mut drv = OpsDriver::new(ctl, rtt, DriverConfig::default())?;
/// let mut file = std::fs::File::open("data.bin").map_err(|e| opsel::Error::io("open", e))?;
/// let report = drv.run(&conn, &mut file, &mut |ev| println!("{ev:?}"))?;
/// println!("sent {} bytes", report.bytes_sent);
/// # Ok(()) }
/// ```
pub struct OpsDriver<C, P> {
    ctl: Controller<C, P>,
    cfg: DriverConfig,
    rtt: Option<RttSource>,
    stop: Arc<AtomicBool>,
    sending: bool,
    cca_sets: u64,
    /// The CCA the driver last set on the socket (the controller's view can
    /// differ during a lead-in).
    actual: Option<CcaName>,
    /// The lead-in segment, if enabled and probing is active.
    lead: Option<crate::probe::Segment>,
    leading: bool,
    last_rtt_ms: Option<f64>,
    origin: Arc<AtomicU64>,
    /// Latest time passed to the controller.
    t_in: u64,
    /// Events of the current step, reported once its actions are carried
    /// out: a slow callback (a log line, a progress bar) must not stand
    /// between a decision and its `setsockopt` (decision latency).
    /// Keeps its capacity, so reporting allocates nothing.
    pending: Vec<DriverEvent>,
}

impl<C: Classifier, P: Policy> OpsDriver<C, P> {
    /// A driver for a controller that has not been started.
    pub fn new(ctl: Controller<C, P>, rtt: RttSource, cfg: DriverConfig) -> Result<Self> {
        cfg.validate(ctl.config().sample_period_ns)?;
        if ctl.phase() != Phase::Idle {
            return Err(Error::invalid(
                "the OPS controller was already started; give the driver a fresh controller",
            ));
        }
        let lead = match &ctl.config().mode {
            crate::ops::ProbeMode::Active(p) if cfg.lead_in => p.segments().last().copied(),
            _ => None,
        };
        Ok(Self {
            ctl,
            cfg,
            rtt: Some(rtt),
            stop: Arc::new(AtomicBool::new(false)),
            sending: false,
            actual: None,
            lead,
            leading: false,
            cca_sets: 0,
            last_rtt_ms: None,
            origin: Arc::new(AtomicU64::new(0)),
            t_in: 0,
            pending: Vec::with_capacity(32),
        })
    }

    /// A flag that ends [`OpsDriver::run`] (from another thread or a signal
    /// handler) within a few ms; the run returns [`EndReason::Stopped`].
    pub fn stop_handle(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The controller (phase, stats, configuration).
    pub fn controller(&self) -> &Controller<C, P> {
        &self.ctl
    }

    /// Start the controller at `now_ns` and carry out its first actions on
    /// `sock` (for custom loops and benches; [`OpsDriver::run`] calls it).
    /// The socket is first set to the controller's initial CCA.
    pub fn start(
        &mut self,
        sock: impl AsFd,
        now_ns: u64,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let fd = sock.as_fd();
        require_tcp(fd, "run OPS")?;
        let initial = self.ctl.config().initial_cca;
        set_cca(fd, initial.as_str())?;
        self.actual = Some(initial);
        self.cca_sets += 1;
        on_event(&DriverEvent::CcaSet {
            cca: initial,
            at_ns: monotonic_ns(),
            latency_ns: None,
        });
        self.ctl.start(now_ns)?;
        self.t_in = now_ns;
        self.apply(fd, None, on_event)
    }

    /// Report the events of the current step, in order.
    fn flush(&mut self, on_event: &mut dyn FnMut(&DriverEvent)) {
        for e in self.pending.drain(..) {
            on_event(&e);
        }
    }

    /// Feed one RTT sample taken at `sample_ns` and carry out the resulting
    /// actions on `sock` at once, then report the events: this is the path
    /// from the last sample of a window to the `setsockopt` call that
    /// [`DriverEvent::CcaSet`]'s latency measures (public for benches and
    /// custom loops). The sample before the last one also makes the
    /// classifier prepare the decision ([`Classifier::prepare`]).
    pub fn feed_sample(
        &mut self,
        sock: impl AsFd,
        sample_ns: u64,
        rtt_ms: f64,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let fd = sock.as_fd();
        self.ctl.handle_sample(sample_ns, rtt_ms)?;
        self.t_in = self.t_in.max(sample_ns);
        self.apply(fd, Some(sample_ns), on_event)
    }

    /// Switch the socket to `cca` unless the driver already set it; true if it switched.
    /// The [`DriverEvent::CcaSet`] waits in `pending` for the next `flush`.
    fn ensure_cca(
        &mut self,
        fd: BorrowedFd<'_>,
        cca: CcaName,
        sample_ns: Option<u64>,
    ) -> Result<bool> {
        if self.actual == Some(cca) {
            return Ok(false);
        }
        // 000 Table 7.2: TCP_CONGESTION on the live connection, read back.
        switch_cca(fd, cca)?;
        self.actual = Some(cca);
        let at_ns = monotonic_ns();
        self.cca_sets += 1;
        self.pending.push(DriverEvent::CcaSet {
            cca,
            at_ns,
            latency_ns: sample_ns.map(|s| at_ns.saturating_sub(s)),
        });
        Ok(true)
    }

    /// Begin the lead-in segment (see [`DriverConfig::lead_in`]).
    fn begin_lead_in(
        &mut self,
        fd: BorrowedFd<'_>,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let Some(seg) = self.lead else { return Ok(()) };
        self.leading = true;
        let r = match seg.cca() {
            Some(c) => self.ensure_cca(fd, c, None).map(|_| self.sending = true),
            None => {
                self.sending = false;
                Ok(())
            }
        };
        self.flush(on_event);
        r
    }

    /// Drain the controller's outputs: switch the CCA, start/stop sending;
    /// then report every event of the step (also when an action failed).
    fn apply(
        &mut self,
        fd: BorrowedFd<'_>,
        sample_ns: Option<u64>,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let r = self.act(fd, sample_ns);
        self.flush(on_event);
        r
    }

    /// The actions of [`OpsDriver::apply`]; events go to `pending`.
    fn act(&mut self, fd: BorrowedFd<'_>, sample_ns: Option<u64>) -> Result<()> {
        let mut decided: Option<CcaName> = None;
        let mut switched = false;
        while let Some(out) = self.ctl.poll() {
            match out {
                Output::Action(Action::SetCca(cca)) => {
                    if self.ensure_cca(fd, cca, sample_ns)? {
                        switched |= decided == Some(cca);
                    }
                }
                Output::Action(Action::SendFullSpeed { cca, .. } | Action::Steady { cca, .. }) => {
                    // After a lead-in the socket may hold another CCA than
                    // the controller believes: make it the action's CCA.
                    if self.ensure_cca(fd, cca, sample_ns)? {
                        switched |= decided == Some(cca);
                    }
                    self.sending = true;
                    self.leading = false;
                }
                Output::Action(Action::Silence { .. }) => {
                    self.sending = false;
                    self.leading = false;
                }
                Output::Event(ev) => {
                    if let Event::Phase {
                        phase: Phase::Probe,
                        at_ns,
                        ..
                    } = ev
                    {
                        // Align the prober's 1 Hz grid to this probe (sample k ↔ second k).
                        self.origin.store(at_ns, Ordering::Relaxed);
                    }
                    if let Event::Selected { cca, .. } = ev {
                        decided = Some(cca);
                    }
                    self.pending.push(DriverEvent::Ops(ev));
                }
            }
        }
        if let (Some(cca), Some(s)) = (decided, sample_ns) {
            // Taken before any event is reported: the decision's own span.
            self.pending.push(DriverEvent::Decision {
                cca,
                latency_ns: monotonic_ns().saturating_sub(s),
                switched,
            });
        }
        Ok(())
    }

    /// Run the OPS cycle on `sock`, sending from `source`, until EOF, the time
    /// limit or the stop flag. The socket stays open and owned by the caller
    /// (the next byte offset is `report.bytes_sent` past where `source`
    /// started). Errors: the socket is not TCP, a CCA is unavailable or not
    /// allowed, the prober cannot be opened, a send fails.
    pub fn run(
        &mut self,
        sock: impl AsFd,
        source: &mut dyn Read,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        let fd = sock.as_fd();
        require_tcp(fd, "run OPS")?;
        let rtt = self.rtt.take().ok_or_else(|| {
            Error::invalid(
                "this OpsDriver has already run; create a new driver (and controller) per transfer",
            )
        })?;
        let probe = rtt.open()?;
        let lowat_guard = LowatGuard::set(fd, self.cfg.notsent_lowat_bytes)?;
        let (rx, tx) = pipe()?;
        let period = self.ctl.config().sample_period_ns;
        let t0 = monotonic_ns();
        self.origin.store(t0, Ordering::Relaxed);
        let prober_stop = Arc::new(AtomicBool::new(false));
        let prober = spawn_prober(
            probe,
            BurstConfig {
                timeout_ns: self.cfg.burst.timeout_ns.min(period / 2),
                ..self.cfg.burst
            },
            period,
            self.origin.clone(),
            prober_stop.clone(),
            tx,
        )?;
        // Stop and join the prober on every exit path.
        struct Join(Arc<AtomicBool>, Option<JoinHandle<Result<()>>>);
        impl Drop for Join {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
                if let Some(h) = self.1.take() {
                    let _ = h.join();
                }
            }
        }
        let join = Join(prober_stop, Some(prober));

        let r = self.run_loop(fd, source, on_event, &rx, t0);
        drop(join);
        drop(lowat_guard);
        r
    }

    fn run_loop(
        &mut self,
        fd: BorrowedFd<'_>,
        source: &mut dyn Read,
        on_event: &mut dyn FnMut(&DriverEvent),
        rx: &OwnedFd,
        t0: u64,
    ) -> Result<DriverReport> {
        // Lead-in before the first probe; the controller starts after it.
        let lead_ns = self.lead.map_or(0, |s| s.duration_ns);
        let ctl_start = t0 + lead_ns;
        let mut started = false;
        if self.lead.is_some() {
            require_tcp(fd, "run OPS")?;
            if let Some(c) = self.lead.and_then(|s| s.cca()) {
                set_cca(fd, c.as_str())?;
                self.actual = Some(c);
                self.cca_sets += 1;
                on_event(&DriverEvent::CcaSet {
                    cca: c,
                    at_ns: monotonic_ns(),
                    latency_ns: None,
                });
            }
            self.begin_lead_in(fd, on_event)?;
        } else {
            self.start(fd, t0, on_event)?;
            started = true;
        }
        let mut pump = Pump::new(fd, self.cfg.chunk_bytes);
        let limit = self.cfg.time_limit_ns.map(|l| t0.saturating_add(l));
        let mut next_interval = t0 + self.cfg.interval_ns;
        let mut interval_start = t0;
        let mut interval_base = 0u64;
        let acked0 = tcp_info(fd).ok().and_then(|i| i.bytes_acked);
        let mut acked_base = acked0;
        let mut lost_samples = 0u64;
        let mut sbuf = [0u8; WIRE];
        let half = self.ctl.config().sample_period_ns / 2;
        // The first sample of a probe, held until half a period into the probe.
        let mut held: Option<(u64, f64)> = None;
        let end = loop {
            let now = monotonic_ns();
            // Samples from the prober.
            loop {
                // SAFETY: valid buffer; non-blocking pipe.
                let n = unsafe { libc::read(rx.as_raw_fd(), sbuf.as_mut_ptr().cast(), WIRE) };
                if n != WIRE as isize {
                    break;
                }
                let s = WireSample::decode(&sbuf);
                let rtt = s.rtt_ms.is_finite().then_some(s.rtt_ms);
                // Reported with the events of the step this sample causes,
                // after its actions (see `pending`).
                self.pending.push(DriverEvent::Rtt {
                    at_ns: s.at_ns,
                    rtt_ms: rtt,
                    answered: s.answered,
                });
                let value = match rtt {
                    Some(v) => {
                        self.last_rtt_ms = Some(v);
                        Some(v)
                    }
                    None => {
                        // Every echo lost: hold the previous sample so the
                        // window keeps its 1 Hz alignment.
                        lost_samples += 1;
                        self.last_rtt_ms
                    }
                };
                let origin = self.origin.load(Ordering::Relaxed);
                if !started {
                    // Lead-in before the first probe: nothing to classify yet.
                } else if let Some(v) = value.filter(|_| {
                    self.ctl.phase() == Phase::Probe
                        && s.start_ns.saturating_add(LATE_NS) >= origin
                        && s.at_ns < origin + half
                }) {
                    // Sample 0 of a probe is read at the probe's start (the
                    // training alignment) but, by the controller's convention,
                    // joins the window only from half a period in: hold it.
                    held = Some((origin + half, v));
                } else if let Some(v) = value {
                    // Inputs must not go back in time: the main loop may have
                    // passed a later `now` before it read this sample.
                    let at = s.at_ns.max(self.t_in);
                    self.t_in = at;
                    if let Err(e) = self.ctl.handle_sample(at, v) {
                        self.flush(on_event);
                        return Err(e);
                    }
                    self.apply(fd, Some(s.at_ns), on_event)?;
                }
                self.flush(on_event);
            }
            if let Some((due, v)) = held {
                if now >= due {
                    held = None;
                    let at = due.max(self.t_in);
                    self.t_in = at;
                    self.ctl.handle_sample(at, v)?;
                    self.apply(fd, Some(at), on_event)?;
                }
            }
            if !started && now >= ctl_start {
                self.leading = false;
                self.start(fd, ctl_start, on_event)?;
                started = true;
            }
            let now = now.max(self.t_in);
            self.t_in = now;
            if started && self.ctl.poll_timeout().is_some_and(|t| t <= now) {
                self.ctl.handle_timeout(now)?;
                self.apply(fd, None, on_event)?;
            }
            // Lead-in at the end of each steady phase.
            if started && !self.leading && lead_ns > 0 && self.ctl.phase() == Phase::Steady {
                if let Some(u) = self.ctl.poll_timeout() {
                    if now.saturating_add(lead_ns) >= u {
                        self.begin_lead_in(fd, on_event)?;
                    }
                }
            }
            if now >= next_interval {
                let bytes = pump.total - interval_base;
                let acked = tcp_info(fd).ok().and_then(|i| i.bytes_acked);
                let acked_delta = match (acked, acked_base) {
                    (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                    _ => None,
                };
                acked_base = acked;
                if started {
                    self.ctl.handle_bytes(now, bytes)?;
                    self.apply(fd, None, on_event)?;
                }
                on_event(&DriverEvent::Interval {
                    start_ns: interval_start,
                    end_ns: next_interval,
                    bytes,
                    acked_bytes: acked_delta,
                    total_bytes: pump.total,
                    cca: self.actual.unwrap_or(self.ctl.socket_cca()),
                    phase: self.ctl.phase(),
                });
                interval_base = pump.total;
                interval_start = next_interval;
                next_interval += self.cfg.interval_ns;
            }
            if self.stop.load(Ordering::Relaxed) {
                break EndReason::Stopped;
            }
            if limit.is_some_and(|l| now >= l) {
                break EndReason::TimeLimit;
            }
            if pump.drained() {
                break EndReason::Eof;
            }
            let mut deadline = next_interval.min(now + 50_000_000);
            if let Some(t) = self.ctl.poll_timeout() {
                deadline = deadline.min(t);
            }
            if let Some(l) = limit {
                deadline = deadline.min(l);
            }
            if let Some((due, _)) = held {
                deadline = deadline.min(due);
            }
            if !started {
                deadline = deadline.min(ctl_start);
            } else if lead_ns > 0 && !self.leading && self.ctl.phase() == Phase::Steady {
                if let Some(u) = self.ctl.poll_timeout() {
                    deadline = deadline.min(u.saturating_sub(lead_ns).max(now));
                }
            }
            if self.sending {
                if pump.try_send(source)? {
                    continue;
                }
                if pump.drained() {
                    continue;
                }
                wait(fd, true, rx, deadline);
            } else {
                wait(fd, false, rx, deadline);
            }
        };
        let ended = monotonic_ns();
        Ok(DriverReport {
            bytes_sent: pump.total,
            started_ns: t0,
            ended_ns: ended,
            end,
            stats: self.ctl.stats_at(ended.max(self.t_in)),
            cca_sets: self.cca_sets,
            lost_samples,
        })
    }
}

/// `setsockopt(TCP_CONGESTION)` with read-back, allocation-free on success
/// (the hot path of every pattern segment). On failure the adapter's
/// [`set_cca`] runs again to produce its precise error (unknown CCA, not
/// allowed, not TCP).
fn switch_cca(fd: BorrowedFd<'_>, cca: CcaName) -> Result<()> {
    let name = cca.as_str().as_bytes();
    if set_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name).is_err() {
        return set_cca(fd, cca.as_str()).map(|_| ());
    }
    let mut buf = [0u8; 16];
    let n = get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        "getsockopt(TCP_CONGESTION)",
        &mut buf,
    )?;
    let raw = &buf[..n.min(16)];
    let back = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
    if back != name {
        return Err(Error::Unsupported(format!(
            "set congestion control {cca} on fd {} but the kernel reports {:?}",
            fd.as_raw_fd(),
            String::from_utf8_lossy(back)
        )));
    }
    Ok(())
}

/// Sets `TCP_NOTSENT_LOWAT` and restores the previous value on drop.
struct LowatGuard<'a> {
    fd: BorrowedFd<'a>,
    old: Option<libc::c_int>,
}

impl<'a> LowatGuard<'a> {
    fn set(fd: BorrowedFd<'a>, bytes: Option<u32>) -> Result<Self> {
        let Some(b) = bytes else {
            return Ok(Self { fd, old: None });
        };
        let old = get_int(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            "getsockopt(TCP_NOTSENT_LOWAT)",
        )?;
        let v = b.min(i32::MAX as u32) as libc::c_int;
        set_val(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            "setsockopt(TCP_NOTSENT_LOWAT)",
            v,
        )?;
        Ok(Self { fd, old: Some(old) })
    }
}

impl Drop for LowatGuard<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            let _ = set_val(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                "setsockopt(TCP_NOTSENT_LOWAT)",
                old,
            );
        }
    }
}

/// Check that the kernel offers every CCA in `ccas`
/// (`net.ipv4.tcp_available_congestion_control`), e.g. those of
/// [`ControllerSpec::ccas`](crate::ops::ControllerSpec::ccas) before a
/// transfer, or a policy callback's answer before it reaches the live socket.
/// Reads the sysctl; opens no socket. A CCA built as a module that is not
/// loaded yet is reported as missing (load it with `modprobe tcp_<name>`).
pub fn check_ccas_available(ccas: &[CcaName]) -> Result<()> {
    let have = super::cca::available_ccas()?;
    match ccas.iter().find(|c| !have.iter().any(|h| c.as_str() == h)) {
        None => Ok(()),
        Some(c) => Err(Error::invalid(format!(
            "congestion control {c:?} is not available in this kernel (available: {}); load it (modprobe tcp_{c}) or choose another",
            have.join(" ")
        ))),
    }
}

/// The fixed-CCA baseline of 000 Table 6.3 (FG "fixed CUBIC" / "fixed BBR")
/// with the same sending loop and [`DriverEvent::Interval`] events as
/// [`OpsDriver::run`]: set `cca` once, then send from `source` until EOF, the
/// time limit or `stop`. No RTT probe runs.
pub fn send_fixed(
    sock: impl AsFd,
    source: &mut dyn Read,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    let fd = sock.as_fd();
    cfg.validate(NS_PER_S)?;
    require_tcp(fd, "send")?;
    set_cca(fd, cca.as_str())?;
    let t0 = monotonic_ns();
    on_event(&DriverEvent::CcaSet {
        cca,
        at_ns: t0,
        latency_ns: None,
    });
    let _lowat = LowatGuard::set(fd, cfg.notsent_lowat_bytes)?;
    let (rx, _tx) = pipe()?;
    let mut pump = Pump::new(fd, cfg.chunk_bytes);
    let limit = cfg.time_limit_ns.map(|l| t0.saturating_add(l));
    let mut next_interval = t0 + cfg.interval_ns;
    let (mut start, mut base) = (t0, 0u64);
    let mut acked_base = tcp_info(fd).ok().and_then(|i| i.bytes_acked);
    let end = loop {
        let now = monotonic_ns();
        if now >= next_interval {
            let acked = tcp_info(fd).ok().and_then(|i| i.bytes_acked);
            let acked_delta = match (acked, acked_base) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                _ => None,
            };
            acked_base = acked;
            on_event(&DriverEvent::Interval {
                start_ns: start,
                end_ns: next_interval,
                bytes: pump.total - base,
                acked_bytes: acked_delta,
                total_bytes: pump.total,
                cca,
                phase: Phase::Steady,
            });
            base = pump.total;
            start = next_interval;
            next_interval += cfg.interval_ns;
        }
        if stop.load(Ordering::Relaxed) {
            break EndReason::Stopped;
        }
        if limit.is_some_and(|l| now >= l) {
            break EndReason::TimeLimit;
        }
        if pump.drained() {
            break EndReason::Eof;
        }
        if pump.try_send(source)? || pump.drained() {
            continue;
        }
        let mut deadline = next_interval.min(now + 50_000_000);
        if let Some(l) = limit {
            deadline = deadline.min(l);
        }
        wait(fd, true, &rx, deadline);
    };
    let ended = monotonic_ns();
    Ok(DriverReport {
        bytes_sent: pump.total,
        started_ns: t0,
        ended_ns: ended,
        end,
        stats: Stats::default(),
        cca_sets: 1,
        lost_samples: 0,
    })
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

    #[test]
    fn rtt_source_parses_the_probe_spec() {
        let icmp: RttSource = "icmp:10.0.0.2".parse().unwrap();
        assert!(matches!(icmp, RttSource::Icmp(a) if a == Ipv4Addr::new(10, 0, 0, 2)));
        for spec in ["127.0.0.1:9000", "udp:127.0.0.1:9000"] {
            let udp: RttSource = spec.parse().unwrap();
            assert!(matches!(udp, RttSource::UdpEcho(a) if a == "127.0.0.1:9000".parse().unwrap()));
        }
        let v6: RttSource = "[::1]:9000".parse().unwrap();
        assert!(matches!(v6, RttSource::UdpEcho(a) if a.is_ipv6()));
        let e = "icmp:host".parse::<RttSource>().unwrap_err().to_string();
        assert!(e.contains("\"host\" is not an IPv4 address"), "{e}");
        for bad in ["10.0.0.2", "udp:", "", "icmp:10.0.0.2:5"] {
            let e = bad.parse::<RttSource>().unwrap_err().to_string();
            assert!(
                e.contains("probe") && e.contains("write e.g."),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn wire_sample_roundtrip() {
        let s = WireSample {
            at_ns: 123_456_789_012,
            start_ns: 123_000_000_000,
            rtt_ms: 65.25,
            answered: 9,
        };
        let d = WireSample::decode(&s.encode());
        assert_eq!(
            (d.at_ns, d.start_ns, d.rtt_ms, d.answered),
            (123_456_789_012, 123_000_000_000, 65.25, 9)
        );
        let lost = WireSample {
            rtt_ms: f64::NAN,
            ..s
        };
        assert!(WireSample::decode(&lost.encode()).rtt_ms.is_nan());
    }

    proptest::proptest! {
        #[test]
        fn wire_sample_roundtrips(at in proptest::prelude::any::<u64>(), rtt in proptest::prelude::any::<f64>(), n in proptest::prelude::any::<u16>()) {
            let d = WireSample::decode(&WireSample { at_ns: at, start_ns: at ^ 1, rtt_ms: rtt, answered: n }.encode());
            proptest::prop_assert_eq!(d.at_ns, at);
            proptest::prop_assert_eq!(d.rtt_ms.to_bits(), rtt.to_bits());
            proptest::prop_assert_eq!(d.answered, n);
        }
    }

    #[test]
    fn config_rejects_bad_values() {
        let mut c = DriverConfig::default();
        c.validate(NS_PER_S).unwrap();
        c.interval_ns = 0;
        assert!(c
            .validate(NS_PER_S)
            .unwrap_err()
            .to_string()
            .contains("interval_ns"));
        let mut c = DriverConfig::default();
        c.burst.count = 600; // 600 ms of echoes in a 1 s period
        assert!(c
            .validate(NS_PER_S)
            .unwrap_err()
            .to_string()
            .contains("600 echoes"));
        let c = DriverConfig {
            chunk_bytes: 0,
            ..DriverConfig::default()
        };
        assert!(c.validate(NS_PER_S).is_err());
    }
}
