//! The Linux socket adapter (core: `opsel::sys::linux`): congestion control
//! on the application's own TCP socket, `TCP_INFO` and its sampler, the
//! `SO_MAX_PACING_RATE` cap, SO_TXTIME enforcement detection, the paced UDP
//! sender and the probe receiver, RTT probes (ICMP echo, UDP echo +
//! responder, the 000 §3.2 burst of 10 echoes 1 ms apart → one 1 Hz sample,
//! RTT from `TCP_INFO`).
//!
//! Sockets are numeric descriptors. For a `net.Socket` use
//! `socket._handle.fd` (an undocumented but long-stable Node field, -1 until
//! the socket is connected); opsel borrows the descriptor and never closes it.
//! Everything that blocks (trains, receiving, echo bursts) runs as an
//! `AsyncTask` on the libuv pool and returns a Promise, so the event loop is
//! never blocked. Times are nanoseconds as JS numbers (exact below 2^53 ns,
//! about 104 days of CLOCK_MONOTONIC uptime).

use crate::convert::{ns, via_serde, whole};
use crate::error::{coded_error_value, guard, invalid, to_js, Code, PANIC};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use opsel::names::Named;
use opsel::sys::linux::{
    self as sys, bind_udp, parse_ip, parse_ipv4, parse_sock_addr,
    qdisc::{self, TxTimeSupport},
    receiver::{ProbeReceiver as CoreReceiver, RxColumns, RxRecord},
    rtt::{self, BurstConfig, EchoProber},
    sender::{
        BackendChoice, CatchUp, PacedSender as CoreSender, SenderConfig, TrainReport as CoreReport,
    },
    RawSock, TcpInfo as CoreInfo, TcpInfoSampler as CoreSampler,
};
use std::os::fd::BorrowedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type R<T> = napi::Result<T, Code>;

fn with_fd<T>(fd: i32, f: impl FnOnce(BorrowedFd<'_>) -> opsel::Result<T>) -> R<T> {
    sys::with_raw_fd(fd, f).map_err(to_js)
}

/// Run blocking work on a libuv worker; a panic becomes an OPSEL_PANIC error.
pub(crate) fn off_loop<T>(what: &str, f: impl FnOnce() -> R<T>) -> napi::Result<R<T>> {
    Ok(catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(napi::Error::new(
            PANIC,
            format!("internal error in opsel during {what} (a bug; please report it)"),
        ))
    }))
}

// ---------------------------------------------------------------- CCA ---

/// CCAs registered in the kernel (`net.ipv4.tcp_available_congestion_control`).
#[napi]
pub fn available_ccas() -> napi::Result<Vec<String>, Code> {
    guard(|| sys::available_ccas().map_err(to_js))
}

/// CCAs an unprivileged process may select (`net.ipv4.tcp_allowed_congestion_control`).
#[napi]
pub fn allowed_ccas() -> napi::Result<Vec<String>, Code> {
    guard(|| sys::allowed_ccas().map_err(to_js))
}

/// The CCA of the TCP socket `fd` (for a `net.Socket`: `socket._handle.fd`).
#[napi]
pub fn get_cca(fd: i32) -> napi::Result<String, Code> {
    guard(|| with_fd(fd, |f| sys::get_cca(f)))
}

/// Switch the live TCP socket `fd` to the CCA `name`, read it back and return
/// the read-back name. Throws with `code` `"OPSEL_INVALID_INPUT"` for an
/// unknown CCA (ENOENT; the message lists the available ones) or a descriptor
/// that is not a TCP socket, `"OPSEL_PERMISSION"` when the CCA is not in
/// `net.ipv4.tcp_allowed_congestion_control` (EPERM).
#[napi]
pub fn set_cca(fd: i32, name: String) -> napi::Result<String, Code> {
    guard(|| with_fd(fd, |f| sys::set_cca(f, &name)))
}

// ----------------------------------------------------------- TCP_INFO ---

/// One `TCP_INFO` snapshot (times µs, rates bytes/s). Fields the kernel does
/// not report are `null`.
#[napi(object)]
#[derive(serde::Deserialize)]
pub struct TcpInfo {
    pub len: u32,
    pub state: u32,
    /// "open", "disorder", "cwr", "recovery", "loss" or "other".
    #[serde(default)]
    pub ca_state: String,
    pub retransmits: u32,
    pub rto_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub total_retrans: u32,
    /// Smoothed RTT, µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: Option<u32>,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    pub snd_ssthresh: u32,
    pub pacing_rate_bytes_per_s: Option<f64>,
    pub max_pacing_rate_bytes_per_s: Option<f64>,
    pub delivery_rate_bytes_per_s: Option<f64>,
    pub bytes_sent: Option<f64>,
    pub bytes_acked: Option<f64>,
    pub bytes_received: Option<f64>,
    pub bytes_retrans: Option<f64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub delivered: Option<u32>,
    pub notsent_bytes: Option<u32>,
    pub busy_time_us: Option<f64>,
}

/// The core snapshot through its serde form (the fields `TcpInfo` declares),
/// with the named CA state; the kernel's "unlimited" pacing rate
/// (`u64::MAX`) becomes `Infinity`.
fn info_js(i: &CoreInfo) -> R<TcpInfo> {
    let mut t: TcpInfo = via_serde(i)?;
    t.ca_state = i.ca_state().name().into();
    for r in [
        &mut t.pacing_rate_bytes_per_s,
        &mut t.max_pacing_rate_bytes_per_s,
    ] {
        if *r == Some(u64::MAX as f64) {
            *r = Some(f64::INFINITY);
        }
    }
    Ok(t)
}

/// `TCP_INFO` of the TCP socket `fd`.
#[napi]
pub fn tcp_info(fd: i32) -> napi::Result<TcpInfo, Code> {
    guard(|| info_js(&with_fd(fd, |f| sys::tcp_info(f))?))
}

/// Smoothed RTT of the live TCP connection `fd` from `TCP_INFO`, ns.
#[napi]
pub fn tcp_rtt_ns(fd: i32) -> napi::Result<f64, Code> {
    guard(|| Ok(with_fd(fd, |f| rtt::tcp_rtt_ns(f))? as f64))
}

/// What happened on a connection between two sampler snapshots.
#[napi(object)]
#[derive(serde::Deserialize)]
pub struct TcpInterval {
    /// CLOCK_MONOTONIC of the later snapshot, ns.
    pub at_ns: f64,
    pub interval_ns: f64,
    /// Bytes acknowledged by the peer in the interval (sender side).
    pub acked_bytes: Option<f64>,
    /// Bytes received in the interval (receiver side).
    pub received_bytes: Option<f64>,
    /// Goodput from `ackedBytes`, bit/s.
    pub acked_rate_bps: Option<f64>,
    pub received_rate_bps: Option<f64>,
    pub rtt_ns: f64,
    pub rttvar_ns: f64,
    pub min_rtt_ns: Option<f64>,
    pub retrans_segs: u32,
    pub cwnd: u32,
}

/// Polls `TCP_INFO` of one socket. `sample()` returns the interval since the
/// previous call (throughput, RTT), or `null` when no time elapsed. Keep the
/// socket open while sampling. Sampling is one `getsockopt`: synchronous.
#[napi]
pub struct TcpInfoSampler {
    inner: CoreSampler<RawSock>,
}

#[napi]
impl TcpInfoSampler {
    #[napi(constructor)]
    pub fn new(fd: i32) -> napi::Result<Self, Code> {
        guard(|| {
            let fd = RawSock::new(fd).map_err(to_js)?;
            Ok(Self {
                inner: CoreSampler::new(fd).map_err(to_js)?,
            })
        })
    }

    /// The interval since the previous snapshot, or null.
    #[napi]
    pub fn sample(&mut self) -> napi::Result<Option<TcpInterval>, Code> {
        guard(|| {
            self.inner
                .sample()
                .map_err(to_js)?
                .as_ref()
                .map(via_serde)
                .transpose()
        })
    }
}

// ------------------------------------------------------------- pacing ---

/// Cap the pacing rate of socket `fd` at `rateBps` bit/s (`SO_MAX_PACING_RATE`;
/// TCP paces internally without fq). `null` removes the cap.
#[napi]
pub fn set_max_pacing_rate(fd: i32, rate_bps: Option<f64>) -> napi::Result<(), Code> {
    guard(|| {
        let r = rate_bps.map(|r| whole(r, "rateBps", "bit/s")).transpose()?;
        with_fd(fd, |f| sys::set_max_pacing_rate(f, r))
    })
}

/// The pacing cap of `fd` in bit/s, `null` when uncapped.
#[napi]
pub fn get_max_pacing_rate(fd: i32) -> napi::Result<Option<f64>, Code> {
    guard(|| Ok(with_fd(fd, |f| sys::get_max_pacing_rate(f))?.map(|v| v as f64)))
}

// ------------------------------------------------------------ SO_TXTIME ---

/// Whether SO_TXTIME launch times are enforced on the egress device.
#[napi(object)]
pub struct TxTimeInfo {
    /// True only when every packet passes an fq or etf qdisc.
    pub enforced: bool,
    pub device: String,
    pub root_qdisc: String,
    /// Launch-time clock (CLOCK_MONOTONIC for fq), null when not enforced.
    pub clockid: Option<i32>,
    /// One-line explanation.
    pub reason: String,
}

impl From<&TxTimeSupport> for TxTimeInfo {
    fn from(t: &TxTimeSupport) -> Self {
        Self {
            enforced: t.enforced,
            device: t.device.clone(),
            root_qdisc: t.root_qdisc.clone(),
            clockid: t.clockid,
            reason: t.reason.clone(),
        }
    }
}

/// Whether SO_TXTIME launch times would be enforced for packets to the IP
/// address `dst` (fq/etf on the egress device; the setsockopt return code
/// alone proves nothing). One rtnetlink round trip: synchronous.
#[napi]
pub fn detect_txtime(dst: String) -> napi::Result<TxTimeInfo, Code> {
    guard(|| {
        let ip = parse_ip(&dst, "dst").map_err(to_js)?;
        let sock = bind_udp(None, Some(ip)).map_err(to_js)?;
        Ok((&qdisc::detect_txtime(&sock, ip).map_err(to_js)?).into())
    })
}

// ----------------------------------------------------------- sender ---

/// Paced-sender options (all optional).
#[napi(object)]
#[derive(Default)]
pub struct SenderOptions {
    /// Largest payload in bytes (32..65507; default 1472).
    pub payload_max: Option<u32>,
    /// Local "ip:port" (default: ephemeral port on all addresses).
    pub bind: Option<String>,
    /// "auto" (default: SO_TXTIME when enforced, else user space), "userspace" or "txtime".
    pub backend: Option<String>,
    /// After a stall: "rebase" (default; shift the rest, gaps kept) or "burst".
    pub catch_up: Option<String>,
    /// Try SCHED_FIFO while sending (ignored without permission).
    pub sched_fifo: Option<bool>,
    /// User-space pacer: spin this long before each deadline (default 50 µs).
    pub spin_ns: Option<f64>,
    /// Request software TX timestamps (default true).
    pub tx_timestamps: Option<bool>,
}

/// One train as sent. Arrays are indexed by packet; times CLOCK_MONOTONIC ns.
#[napi(object)]
pub struct TrainReport {
    /// "userspace" or "txtime".
    pub backend: String,
    pub train_id: u32,
    pub start_ns: f64,
    pub rebases: u32,
    pub max_lateness_ns: f64,
    pub sched_fifo: bool,
    pub tx_stamped: u32,
    pub refused: u32,
    pub seq: Vec<u32>,
    pub scheduled_ns: Float64Array,
    /// Best achieved departure: software TX stamp, else the clock right after send.
    pub departure_ns: Float64Array,
    pub sent_ns: Float64Array,
    /// Whether each departure is a TX stamp.
    pub tx_stamped_mask: Vec<bool>,
}

/// A paced UDP sender toward `dst` ("ip:port") for probe trains and
/// p-streams: SO_TXTIME when the egress qdisc enforces it, else a user-space
/// pacer (absolute deadlines, sleep then spin). `sendTrain` runs off the
/// event loop.
#[napi]
pub struct PacedSender {
    /// The core report is reused across trains (no allocation once sized).
    inner: Arc<Mutex<(CoreSender, CoreReport)>>,
    backend: &'static str,
    txtime: TxTimeSupport,
}

#[napi]
impl PacedSender {
    #[napi(constructor)]
    pub fn new(dst: String, options: Option<SenderOptions>) -> napi::Result<Self, Code> {
        guard(|| {
            let o = options.unwrap_or_default();
            let dst = parse_sock_addr(&dst, "dst").map_err(to_js)?;
            let d = SenderConfig::default();
            let cfg = SenderConfig {
                backend: BackendChoice::parse("backend", o.backend.as_deref().unwrap_or("auto"))
                    .map_err(to_js)?,
                catch_up: CatchUp::parse("catchUp", o.catch_up.as_deref().unwrap_or("rebase"))
                    .map_err(to_js)?,
                sched_fifo: o.sched_fifo.unwrap_or(false),
                spin_ns: o
                    .spin_ns
                    .map(|v| ns(v, "spinNs"))
                    .transpose()?
                    .unwrap_or(d.spin_ns),
                tx_timestamps: o.tx_timestamps.unwrap_or(true),
                ..d
            };
            let sock = bind_udp(o.bind.as_deref(), Some(dst.ip())).map_err(to_js)?;
            let s = CoreSender::new(sock, dst, o.payload_max.unwrap_or(1472) as usize, cfg)
                .map_err(to_js)?;
            Ok(Self {
                backend: s.backend().name(),
                txtime: s.txtime_report(),
                inner: Arc::new(Mutex::new((s, CoreReport::default()))),
            })
        })
    }

    /// "txtime" or "userspace".
    #[napi(getter)]
    pub fn backend(&self) -> String {
        self.backend.into()
    }

    /// Why this backend: the SO_TXTIME detection (when detection itself
    /// failed, not enforced, with the failure as the reason).
    #[napi(getter)]
    pub fn txtime(&self) -> TxTimeInfo {
        (&self.txtime).into()
    }

    /// Send one train: packet i leaves at start + `scheduleNs[i]` (ns offsets,
    /// non-decreasing) with `payloadLen` bytes (default 1472). Resolves to a
    /// `TrainReport` with every packet's achieved departure time.
    #[napi(ts_return_type = "Promise<TrainReport>")]
    pub fn send_train(
        &self,
        schedule_ns: Float64Array,
        payload_len: Option<u32>,
        train_id: Option<u32>,
    ) -> AsyncTask<SendTrain> {
        AsyncTask::new(SendTrain {
            inner: Arc::clone(&self.inner),
            schedule: schedule_ns.to_vec(),
            payload_len: payload_len.unwrap_or(1472) as usize,
            train_id: train_id.unwrap_or(0),
        })
    }
}

/// The work of `PacedSender.sendTrain`, on a libuv worker thread.
pub struct SendTrain {
    inner: Arc<Mutex<(CoreSender, CoreReport)>>,
    schedule: Vec<f64>,
    payload_len: usize,
    train_id: u32,
}

impl Task for SendTrain {
    type Output = R<CoreReport>;
    type JsValue = TrainReport;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        off_loop("sendTrain", || {
            let sched = self
                .schedule
                .iter()
                .enumerate()
                .map(|(i, &v)| ns(v, &format!("scheduleNs[{i}]")))
                .collect::<R<Vec<u64>>>()?;
            let mut g = self
                .inner
                .lock()
                .map_err(|_| invalid("sender is poisoned by an earlier panic"))?;
            let (s, r) = &mut *g;
            s.send_train(&sched, self.payload_len, self.train_id, r)
                .map_err(to_js)?;
            Ok(r.clone())
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        let f64s = |v: Vec<u64>| Float64Array::new(v.into_iter().map(|x| x as f64).collect());
        match output {
            Ok(r) => Ok({
                let c = r.columns();
                TrainReport {
                    backend: r.backend_name().into(),
                    train_id: r.train_id,
                    start_ns: r.start_mono_ns as f64,
                    rebases: r.rebases,
                    max_lateness_ns: r.max_lateness_ns as f64,
                    sched_fifo: r.sched_fifo,
                    tx_stamped: r.tx_stamped as u32,
                    refused: r.refused,
                    seq: c.seq,
                    scheduled_ns: f64s(c.scheduled_ns),
                    departure_ns: f64s(c.departure_ns),
                    sent_ns: f64s(c.sent_ns),
                    tx_stamped_mask: c.tx_stamped,
                }
            }),
            Err(e) => Err(coded_error_value(env, e)),
        }
    }
}

// --------------------------------------------------------- receiver ---

/// Received probe packets in arrival order (CLOCK_MONOTONIC ns).
#[napi(object)]
pub struct RxTrain {
    pub seq: Vec<u32>,
    pub train_id: Vec<u32>,
    pub sched_offset_ns: Float64Array,
    /// Sender's clock just before its send call.
    pub send_ns: Float64Array,
    /// Kernel RX timestamp when present, else the clock after recvmmsg.
    pub rx_ns: Float64Array,
    /// Whether each `rxNs` is a kernel timestamp.
    pub rx_kernel_mask: Vec<bool>,
    pub len: Vec<u32>,
}

/// A UDP socket receiving opsel probe packets with per-packet kernel RX
/// timestamps (`SO_TIMESTAMPNS`) in `recvmmsg` batches.
#[napi]
pub struct ProbeReceiver {
    inner: Arc<Mutex<(CoreReceiver, Vec<RxRecord>)>>,
    port: u16,
}

#[napi]
impl ProbeReceiver {
    /// Bind to `bind` ("ip:port", default "127.0.0.1:0"); buffers of `bufLen` bytes (default 2048).
    #[napi(constructor)]
    pub fn new(bind: Option<String>, buf_len: Option<u32>) -> napi::Result<Self, Code> {
        guard(|| {
            let sock =
                bind_udp(Some(bind.as_deref().unwrap_or("127.0.0.1:0")), None).map_err(to_js)?;
            let port = sock
                .local_addr()
                .map_err(|e| to_js(opsel::Error::io("getsockname of the receiver socket", e)))?
                .port();
            let rx = CoreReceiver::new(sock, buf_len.unwrap_or(2048) as usize).map_err(to_js)?;
            Ok(Self {
                inner: Arc::new(Mutex::new((rx, Vec::new()))),
                port,
            })
        })
    }

    /// The local UDP port.
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        self.port.into()
    }

    /// Receive until `expected` probe packets arrived or nothing arrived for
    /// `idleMs` (default 200), off the event loop.
    #[napi(ts_return_type = "Promise<RxTrain>")]
    pub fn recv_train(&self, expected: u32, idle_ms: Option<f64>) -> AsyncTask<RecvTrain> {
        AsyncTask::new(RecvTrain {
            inner: Arc::clone(&self.inner),
            expected: expected as usize,
            idle_ms: idle_ms.unwrap_or(200.0),
        })
    }
}

/// The work of `ProbeReceiver.recvTrain`.
pub struct RecvTrain {
    inner: Arc<Mutex<(CoreReceiver, Vec<RxRecord>)>>,
    expected: usize,
    idle_ms: f64,
}

impl Task for RecvTrain {
    type Output = R<RxColumns>;
    type JsValue = RxTrain;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        off_loop("recvTrain", || {
            if !(self.idle_ms.is_finite() && (0.0..=3_600_000.0).contains(&self.idle_ms)) {
                return Err(invalid(format!(
                    "idleMs {} must be in [0, 3600000]",
                    self.idle_ms
                )));
            }
            let mut g = self
                .inner
                .lock()
                .map_err(|_| invalid("receiver is poisoned by an earlier panic"))?;
            let (rx, recs) = &mut *g;
            recs.clear();
            rx.recv_train(
                self.expected,
                Duration::from_secs_f64(self.idle_ms / 1e3),
                recs,
            )
            .map_err(to_js)?;
            Ok(RxColumns::of(recs))
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        match output {
            Ok(r) => {
                let f64s =
                    |v: Vec<u64>| Float64Array::new(v.into_iter().map(|x| x as f64).collect());
                Ok(RxTrain {
                    seq: r.seq,
                    train_id: r.train_id,
                    sched_offset_ns: f64s(r.sched_offset_ns),
                    send_ns: f64s(r.send_ns),
                    rx_ns: f64s(r.rx_ns),
                    rx_kernel_mask: r.rx_kernel,
                    len: r.len.into_iter().map(|l| l as u32).collect(),
                })
            }
            Err(e) => Err(coded_error_value(env, e)),
        }
    }
}

// -------------------------------------------------------------- RTT ---

/// Echo burst settings (defaults: 000 §3.2, 10 echoes 1 ms apart, 1 s wait).
#[napi(object)]
#[derive(Default)]
pub struct BurstOptions {
    pub count: Option<u32>,
    pub interval_ns: Option<f64>,
    pub timeout_ns: Option<f64>,
}

/// One burst: per-echo RTTs (NaN = no reply) and their mean, the 1 Hz sample
/// of 000 §3.2 (`null` when every echo was lost).
#[napi(object)]
pub struct Burst {
    pub start_ns: f64,
    pub rtts_ms: Float64Array,
    pub mean_rtt_ms: Option<f64>,
    pub lost: u32,
}

/// The work of `burst()`.
pub struct EchoBurst {
    inner: Arc<Mutex<EchoProber>>,
    cfg: R<BurstConfig>,
}

fn burst_task(inner: &Arc<Mutex<EchoProber>>, o: Option<BurstOptions>) -> AsyncTask<EchoBurst> {
    let o = o.unwrap_or_default();
    let d = BurstConfig::default();
    let cfg = (|| {
        let count = match o.count {
            None => d.count,
            Some(c) => {
                u16::try_from(c).map_err(|_| invalid(format!("count {c} must be at most 65535")))?
            }
        };
        Ok(BurstConfig {
            count,
            interval_ns: o
                .interval_ns
                .map(|v| ns(v, "intervalNs"))
                .transpose()?
                .unwrap_or(d.interval_ns),
            timeout_ns: o
                .timeout_ns
                .map(|v| ns(v, "timeoutNs"))
                .transpose()?
                .unwrap_or(d.timeout_ns),
        })
    })();
    AsyncTask::new(EchoBurst {
        inner: Arc::clone(inner),
        cfg,
    })
}

impl Task for EchoBurst {
    type Output = R<rtt::BurstSample>;
    type JsValue = Burst;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        off_loop("burst", || {
            let cfg = self.cfg.clone()?;
            let mut g = self
                .inner
                .lock()
                .map_err(|_| invalid("prober is poisoned by an earlier panic"))?;
            g.burst(cfg).map_err(to_js)
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        match output {
            Ok(b) => Ok(Burst {
                start_ns: b.start_mono_ns as f64,
                rtts_ms: Float64Array::new(b.rtts_ms().collect()),
                mean_rtt_ms: b.mean_rtt_ms(),
                lost: b.lost() as u32,
            }),
            Err(e) => Err(coded_error_value(env, e)),
        }
    }
}

/// ICMP echo prober toward an IPv4 address: an unprivileged ping socket when
/// `net.ipv4.ping_group_range` admits the process's group, else a raw socket
/// (CAP_NET_RAW); otherwise the constructor throws `OPSEL_PERMISSION`.
#[napi]
pub struct IcmpProber {
    inner: Arc<Mutex<EchoProber>>,
    kind: &'static str,
}

#[napi]
impl IcmpProber {
    #[napi(constructor)]
    pub fn new(dst: String) -> napi::Result<Self, Code> {
        guard(|| {
            let p = EchoProber::icmp(parse_ipv4(&dst, "dst").map_err(to_js)?).map_err(to_js)?;
            Ok(Self {
                kind: p.icmp_kind().map_or("udp", Named::name),
                inner: Arc::new(Mutex::new(p)),
            })
        })
    }

    /// "ping" or "raw".
    #[napi(getter)]
    pub fn kind(&self) -> String {
        self.kind.into()
    }

    /// One 000 §3.2 sample, off the event loop.
    #[napi(ts_return_type = "Promise<Burst>")]
    pub fn burst(&self, options: Option<BurstOptions>) -> AsyncTask<EchoBurst> {
        burst_task(&self.inner, options)
    }
}

/// UDP echo prober toward a `UdpEchoResponder` (or any UDP echo service).
#[napi]
pub struct UdpEchoProber {
    inner: Arc<Mutex<EchoProber>>,
}

#[napi]
impl UdpEchoProber {
    /// `dst` is "ip:port".
    #[napi(constructor)]
    pub fn new(dst: String) -> napi::Result<Self, Code> {
        guard(|| {
            let dst = parse_sock_addr(&dst, "dst").map_err(to_js)?;
            Ok(Self {
                inner: Arc::new(Mutex::new(EchoProber::udp(dst).map_err(to_js)?)),
            })
        })
    }

    /// One 000 §3.2 sample, off the event loop.
    #[napi(ts_return_type = "Promise<Burst>")]
    pub fn burst(&self, options: Option<BurstOptions>) -> AsyncTask<EchoBurst> {
        burst_task(&self.inner, options)
    }
}

/// Echoes every datagram back to its sender from a background thread after
/// `delayMs` (a delay line for tests). Call `stop()` when done.
#[napi]
pub struct UdpEchoResponder {
    inner: Option<rtt::UdpEchoResponder>,
    port: u16,
}

#[napi]
impl UdpEchoResponder {
    /// `bind` "ip:port" (default "127.0.0.1:0"), `delayMs` (default 0).
    #[napi(constructor)]
    pub fn new(bind: Option<String>, delay_ms: Option<f64>) -> napi::Result<Self, Code> {
        guard(|| {
            let delay = delay_ms.unwrap_or(0.0);
            if !(delay.is_finite() && (0.0..=60_000.0).contains(&delay)) {
                return Err(invalid(format!("delayMs {delay} must be in [0, 60000]")));
            }
            let sock =
                bind_udp(Some(bind.as_deref().unwrap_or("127.0.0.1:0")), None).map_err(to_js)?;
            let r = rtt::UdpEchoResponder::spawn(sock, Duration::from_secs_f64(delay / 1e3))
                .map_err(to_js)?;
            let port = r.local_addr().port();
            Ok(Self {
                inner: Some(r),
                port,
            })
        })
    }

    /// The UDP port it listens on.
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        self.port.into()
    }

    /// Stop the thread; returns how many datagrams were echoed.
    #[napi]
    pub fn stop(&mut self) -> napi::Result<f64, Code> {
        guard(|| {
            let r = self
                .inner
                .take()
                .ok_or_else(|| invalid("responder was already stopped"))?;
            Ok(r.stop().map_err(to_js)? as f64)
        })
    }
}
