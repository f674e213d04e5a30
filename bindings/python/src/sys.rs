//! The Linux socket adapter (core: `opsel::sys::linux`): congestion control
//! on the application's own TCP socket, `TCP_INFO` and its sampler, the
//! `SO_MAX_PACING_RATE` cap, SO_TXTIME enforcement detection, the paced UDP
//! sender and the probe receiver, RTT probes (ICMP echo, UDP echo +
//! responder, the 000 §3.2 burst of 10 echoes 1 ms apart → one 1 Hz sample,
//! RTT from `TCP_INFO`).
//!
//! Sockets are passed as an int descriptor or any object with `fileno()`
//! (`socket.socket`); opsel borrows them and never closes them. Calls that
//! block (trains, bursts, receiving) release the GIL.

use crate::errors::{to_py, IntoPy};
use numpy::PyArray1;
use opsel::sys::linux::{
    self as sys,
    qdisc::{self, TxTimeSupport},
    receiver::{ProbeReceiver as CoreReceiver, RxRecord},
    rtt::{self, BurstConfig, EchoProbe, IcmpProber as CoreIcmp, UdpEchoProber as CoreUdp},
    sender::{
        Backend, BackendChoice, CatchUp, DepartureSource, PacedSender as CoreSender, SenderConfig,
        TrainReport,
    },
    TcpInfo, TcpInfoSampler as CoreSampler, TcpInterval,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

/// An int descriptor, or the result of `obj.fileno()`.
pub(crate) fn fd_of(sock: &Bound<'_, PyAny>) -> PyResult<RawFd> {
    if let Ok(fd) = sock.extract::<i64>() {
        return RawFd::try_from(fd).map_err(|_| {
            to_py(opsel::Error::invalid(format!(
                "file descriptor {fd} is out of range; pass an open socket or its fileno()"
            )))
        });
    }
    match sock.call_method0("fileno") {
        Ok(v) => v.extract::<RawFd>(),
        Err(_) => Err(to_py(opsel::Error::invalid(format!(
            "expected a socket (an object with fileno()) or an int descriptor, got {}",
            sock.get_type().name()?
        )))),
    }
}

fn with_fd<T>(
    sock: &Bound<'_, PyAny>,
    f: impl FnOnce(BorrowedFd<'_>) -> opsel::Result<T>,
) -> PyResult<T> {
    sys::with_raw_fd(fd_of(sock)?, f).py_err()
}

fn sock_addr(s: &str, what: &str) -> PyResult<SocketAddr> {
    s.parse().map_err(|_| {
        to_py(opsel::Error::invalid(format!(
            "{what} {s:?} is not an address with a port; write e.g. \"127.0.0.1:9000\" or \"[::1]:9000\""
        )))
    })
}

fn bind_udp(bind: Option<&str>, peer: Option<IpAddr>) -> PyResult<UdpSocket> {
    let addr = match bind {
        Some(b) => sock_addr(b, "bind")?,
        None => match peer {
            Some(IpAddr::V6(_)) => "[::]:0".parse().unwrap(),
            _ => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        },
    };
    UdpSocket::bind(addr)
        .map_err(|e| to_py(opsel::Error::io(format!("bind UDP socket to {addr}"), e)))
}

// ---------------------------------------------------------------- CCA ---

/// CCAs registered in the kernel (net.ipv4.tcp_available_congestion_control).
#[pyfunction]
fn available_ccas() -> PyResult<Vec<String>> {
    sys::available_ccas().py_err()
}

/// CCAs an unprivileged process may select (net.ipv4.tcp_allowed_congestion_control).
#[pyfunction]
fn allowed_ccas() -> PyResult<Vec<String>> {
    sys::allowed_ccas().py_err()
}

/// The CCA of a TCP socket (socket object or int fd).
#[pyfunction]
fn get_cca(sock: &Bound<'_, PyAny>) -> PyResult<String> {
    with_fd(sock, |f| sys::get_cca(f))
}

/// Switch a live TCP socket to the CCA `name`, read it back, return the
/// read-back name. Raises InvalidInputError for an unknown CCA (ENOENT) or a
/// socket that is not TCP, OpselPermissionError when the CCA is not in
/// net.ipv4.tcp_allowed_congestion_control (EPERM).
#[pyfunction]
fn set_cca(sock: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    with_fd(sock, |f| sys::set_cca(f, name))
}

// ----------------------------------------------------------- TCP_INFO ---

fn info_dict<'py>(py: Python<'py>, i: &TcpInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    macro_rules! put {
        ($($f:ident),*) => { $( d.set_item(stringify!($f), i.$f)?; )* };
    }
    put!(
        len,
        state,
        ca_state_raw,
        retransmits,
        probes,
        backoff,
        options,
        snd_wscale,
        rcv_wscale,
        delivery_rate_app_limited,
        rto_us,
        ato_us,
        snd_mss,
        rcv_mss,
        unacked,
        sacked,
        lost,
        retrans,
        last_data_sent_ms,
        last_ack_sent_ms,
        last_data_recv_ms,
        last_ack_recv_ms,
        pmtu,
        rcv_ssthresh,
        rtt_us,
        rttvar_us,
        snd_ssthresh,
        snd_cwnd,
        advmss,
        reordering,
        rcv_rtt_us,
        rcv_space,
        total_retrans,
        pacing_rate_bytes_per_s,
        max_pacing_rate_bytes_per_s,
        bytes_acked,
        bytes_received,
        segs_out,
        segs_in,
        notsent_bytes,
        min_rtt_us,
        data_segs_in,
        data_segs_out,
        delivery_rate_bytes_per_s,
        busy_time_us,
        rwnd_limited_us,
        sndbuf_limited_us,
        delivered,
        delivered_ce,
        bytes_sent,
        bytes_retrans,
        dsack_dups,
        reord_seen,
        rcv_ooopack,
        snd_wnd,
        rcv_wnd,
        rehash,
        total_rto,
        total_rto_recoveries,
        total_rto_time_ms
    );
    use opsel::sys::linux::tcp_info::CaState;
    let ca = match i.ca_state() {
        CaState::Open => "open",
        CaState::Disorder => "disorder",
        CaState::Cwr => "cwr",
        CaState::Recovery => "recovery",
        CaState::Loss => "loss",
        CaState::Other(_) => "other",
    };
    d.set_item("ca_state", ca)?;
    Ok(d)
}

fn interval_dict<'py>(py: Python<'py>, i: &TcpInterval) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    macro_rules! put {
        ($($f:ident),*) => { $( d.set_item(stringify!($f), i.$f)?; )* };
    }
    put!(
        at_ns,
        interval_ns,
        acked_bytes,
        received_bytes,
        acked_rate_bps,
        received_rate_bps,
        rtt_ns,
        rttvar_ns,
        min_rtt_ns,
        retrans_segs,
        cwnd
    );
    Ok(d)
}

/// One TCP_INFO snapshot as a dict (times µs, rates bytes/s; fields the
/// kernel does not report are None).
#[pyfunction]
fn tcp_info<'py>(py: Python<'py>, sock: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let i = with_fd(sock, |f| sys::tcp_info(f))?;
    info_dict(py, &i)
}

/// Smoothed RTT of a live TCP connection from TCP_INFO, ns.
#[pyfunction]
fn tcp_rtt_ns(sock: &Bound<'_, PyAny>) -> PyResult<u64> {
    with_fd(sock, |f| rtt::tcp_rtt_ns(f))
}

struct Fd(RawFd);
impl AsFd for Fd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: non-negative (checked); a closed number only makes getsockopt fail.
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

/// Polls TCP_INFO of one socket: `sample()` returns the interval since the
/// previous call (throughput from bytes acked/received, RTT) or None when no
/// time elapsed. Keep the socket open while the sampler is used.
#[pyclass(module = "opsel")]
struct TcpInfoSampler {
    inner: Mutex<CoreSampler<Fd>>,
}

#[pymethods]
impl TcpInfoSampler {
    #[new]
    fn new(sock: &Bound<'_, PyAny>) -> PyResult<Self> {
        let fd = fd_of(sock)?;
        if fd < 0 {
            return Err(to_py(opsel::Error::invalid(format!(
                "file descriptor {fd} is negative; pass an open TCP socket"
            ))));
        }
        Ok(Self {
            inner: Mutex::new(CoreSampler::new(Fd(fd)).py_err()?),
        })
    }

    /// The interval since the previous snapshot as a dict, or None.
    fn sample<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let r = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sample()
            .py_err()?;
        r.map(|i| interval_dict(py, &i)).transpose()
    }

    /// The last snapshot as a dict.
    fn last<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let i = *self.inner.lock().unwrap_or_else(|p| p.into_inner()).last();
        info_dict(py, &i)
    }
}

// ------------------------------------------------------------- pacing ---

/// Cap a socket's pacing rate at `rate_bps` bit/s (SO_MAX_PACING_RATE; TCP
/// paces internally without fq). None removes the cap.
#[pyfunction]
fn set_max_pacing_rate(sock: &Bound<'_, PyAny>, rate_bps: Option<u64>) -> PyResult<()> {
    with_fd(sock, |f| sys::set_max_pacing_rate(f, rate_bps))
}

/// The pacing cap in bit/s, None when uncapped.
#[pyfunction]
fn get_max_pacing_rate(sock: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    with_fd(sock, |f| sys::get_max_pacing_rate(f))
}

// ------------------------------------------------------------ SO_TXTIME ---

fn txtime_dict<'py>(py: Python<'py>, t: &TxTimeSupport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("enforced", t.enforced)?;
    d.set_item("device", &t.device)?;
    d.set_item("root_qdisc", &t.root_qdisc)?;
    d.set_item("clockid", t.clockid)?;
    d.set_item("reason", &t.reason)?;
    Ok(d)
}

/// Whether SO_TXTIME launch times would be enforced for packets to the IP
/// address `dst` (fq or etf on the egress device; the setsockopt return code
/// alone proves nothing). Returns a dict: enforced, device, root_qdisc,
/// clockid, reason.
#[pyfunction]
fn detect_txtime<'py>(py: Python<'py>, dst: &str) -> PyResult<Bound<'py, PyDict>> {
    let ip: IpAddr = dst.parse().map_err(|_| {
        to_py(opsel::Error::invalid(format!(
            "dst {dst:?} is not an IP address; write e.g. \"10.0.0.2\""
        )))
    })?;
    let sock = bind_udp(None, Some(ip))?;
    let t = py.detach(|| qdisc::detect_txtime(&sock, ip)).py_err()?;
    txtime_dict(py, &t)
}

// ----------------------------------------------------------- sender ---

fn u64s(values: Vec<i64>, what: &str) -> PyResult<Vec<u64>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            u64::try_from(v).map_err(|_| {
                to_py(opsel::Error::invalid(format!(
                    "{what}[{i}] = {v} is negative; departure offsets are ns >= 0"
                )))
            })
        })
        .collect()
}

/// A paced UDP sender toward `dst` ("ip:port") for probe trains and
/// p-streams. Uses SO_TXTIME when the egress qdisc enforces it (backend
/// "auto"), else a user-space pacer (absolute deadlines, sleep until
/// `spin_ns` before, then spin). `catch_up`: "rebase" shifts the rest of the
/// schedule after a stall (gaps kept), "burst" sends overdue packets at once.
#[pyclass(module = "opsel")]
struct PacedSender {
    /// Locked only with the GIL released (inside `py.detach`), so a thread
    /// holding the GIL never waits for a thread that needs it back.
    inner: Mutex<(CoreSender, TrainReport)>,
    backend: &'static str,
    txtime: Option<TxTimeSupport>,
    detect_error: Option<String>,
    tx_timestamping: bool,
}

/// A train's report copied out of the sender while the GIL is released.
struct TrainOut {
    backend: &'static str,
    train_id: u32,
    start_ns: u64,
    rebases: u32,
    max_lateness_ns: u64,
    sched_fifo: bool,
    tx_stamped: usize,
    refused: u32,
    seq: Vec<u32>,
    scheduled: Vec<u64>,
    departure: Vec<u64>,
    sent: Vec<u64>,
    stamped: Vec<bool>,
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::TxTime { .. } => "txtime",
        Backend::UserSpace => "userspace",
    }
}

#[pymethods]
impl PacedSender {
    #[new]
    #[pyo3(signature = (dst, payload_max = 1472, bind = None, backend = "auto", catch_up = "rebase", sched_fifo = false, spin_ns = None, stall_ns = None, tx_timestamps = true, start_delay_ns = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dst: &str,
        payload_max: usize,
        bind: Option<&str>,
        backend: &str,
        catch_up: &str,
        sched_fifo: bool,
        spin_ns: Option<u64>,
        stall_ns: Option<u64>,
        tx_timestamps: bool,
        start_delay_ns: Option<u64>,
    ) -> PyResult<Self> {
        let dst = sock_addr(dst, "dst")?;
        let d = SenderConfig::default();
        let cfg = SenderConfig {
            backend: match backend {
                "auto" => BackendChoice::Auto,
                "userspace" => BackendChoice::UserSpace,
                "txtime" => BackendChoice::TxTime,
                b => {
                    return Err(to_py(opsel::Error::invalid(format!(
                        "backend {b:?} is unknown; use \"auto\", \"userspace\" or \"txtime\""
                    ))))
                }
            },
            catch_up: match catch_up {
                "rebase" => CatchUp::Rebase,
                "burst" => CatchUp::Burst,
                c => {
                    return Err(to_py(opsel::Error::invalid(format!(
                        "catch_up {c:?} is unknown; use \"rebase\" or \"burst\""
                    ))))
                }
            },
            sched_fifo,
            spin_ns: spin_ns.unwrap_or(d.spin_ns),
            stall_ns: stall_ns.unwrap_or(d.stall_ns),
            tx_timestamps,
            start_delay_ns: start_delay_ns.unwrap_or(d.start_delay_ns),
            ..d
        };
        let sock = bind_udp(bind, Some(dst.ip()))?;
        let s = py
            .detach(|| CoreSender::new(sock, dst, payload_max, cfg))
            .py_err()?;
        Ok(Self {
            backend: backend_name(s.backend()),
            txtime: s.txtime_support().cloned(),
            detect_error: s.detection_error().map(str::to_owned),
            tx_timestamping: s.tx_timestamping(),
            inner: Mutex::new((s, TrainReport::default())),
        })
    }

    /// "txtime" or "userspace".
    #[getter]
    fn backend(&self) -> &'static str {
        self.backend
    }

    /// Why this backend: the SO_TXTIME detection dict (enforced, device,
    /// root_qdisc, clockid, reason), or {"enforced": False, "reason": <error>}
    /// when detection itself failed.
    #[getter]
    fn txtime<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.txtime {
            Some(t) => txtime_dict(py, t),
            None => {
                let d = PyDict::new(py);
                d.set_item("enforced", false)?;
                let why = self.detect_error.as_deref().unwrap_or("detection failed");
                d.set_item("reason", why)?;
                Ok(d)
            }
        }
    }

    /// Whether software TX timestamps are enabled.
    #[getter]
    fn tx_timestamping(&self) -> bool {
        self.tx_timestamping
    }

    /// Send one train: packet i leaves at start + schedule_ns[i] (ns offsets,
    /// non-decreasing; a numpy integer array or a sequence) with
    /// `payload_len` bytes. Blocks with the GIL released. Returns a dict:
    /// backend, start_ns, rebases, max_lateness_ns, sched_fifo, tx_stamped,
    /// refused, and numpy arrays seq, scheduled_ns, departure_ns (best
    /// achieved departure: TX stamp, else clock after send), sent_ns,
    /// tx_stamped_mask (bool). Times are CLOCK_MONOTONIC ns.
    #[pyo3(signature = (schedule_ns, payload_len = 1472, train_id = 0))]
    fn send_train<'py>(
        &self,
        py: Python<'py>,
        schedule_ns: Vec<i64>,
        payload_len: usize,
        train_id: u32,
    ) -> PyResult<Bound<'py, PyDict>> {
        let sched = u64s(schedule_ns, "schedule_ns")?;
        let r = py
            .detach(|| {
                let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                let (s, r) = &mut *g;
                s.send_train(&sched, payload_len, train_id, r)?;
                let p = &r.packets;
                Ok::<_, opsel::Error>(TrainOut {
                    backend: backend_name(r.backend.unwrap_or(Backend::UserSpace)),
                    train_id: r.train_id,
                    start_ns: r.start_mono_ns,
                    rebases: r.rebases,
                    max_lateness_ns: r.max_lateness_ns,
                    sched_fifo: r.sched_fifo,
                    tx_stamped: r.tx_stamped,
                    refused: r.refused,
                    seq: p.iter().map(|x| x.seq).collect(),
                    scheduled: p.iter().map(|x| x.scheduled_mono_ns).collect(),
                    departure: p.iter().map(|x| x.departure().0).collect(),
                    sent: p.iter().map(|x| x.sent_mono_ns).collect(),
                    stamped: p
                        .iter()
                        .map(|x| x.departure().1 == DepartureSource::TxSoftwareStamp)
                        .collect(),
                })
            })
            .py_err()?;
        let d = PyDict::new(py);
        d.set_item("backend", r.backend)?;
        d.set_item("train_id", r.train_id)?;
        d.set_item("start_ns", r.start_ns)?;
        d.set_item("rebases", r.rebases)?;
        d.set_item("max_lateness_ns", r.max_lateness_ns)?;
        d.set_item("sched_fifo", r.sched_fifo)?;
        d.set_item("tx_stamped", r.tx_stamped)?;
        d.set_item("refused", r.refused)?;
        d.set_item("seq", PyArray1::from_vec(py, r.seq))?;
        d.set_item("scheduled_ns", PyArray1::from_vec(py, r.scheduled))?;
        d.set_item("departure_ns", PyArray1::from_vec(py, r.departure))?;
        d.set_item("sent_ns", PyArray1::from_vec(py, r.sent))?;
        d.set_item("tx_stamped_mask", PyArray1::from_vec(py, r.stamped))?;
        Ok(d)
    }
}

// --------------------------------------------------------- receiver ---

/// A UDP socket receiving opsel probe packets with per-packet kernel RX
/// timestamps (SO_TIMESTAMPNS) in recvmmsg batches. `bind` is "ip:port"
/// (port 0 = ephemeral; read `port`).
#[pyclass(module = "opsel")]
struct ProbeReceiver {
    inner: Mutex<(CoreReceiver, Vec<RxRecord>)>,
    port: u16,
}

#[pymethods]
impl ProbeReceiver {
    #[new]
    #[pyo3(signature = (bind = "127.0.0.1:0", buf_len = 2048))]
    fn new(bind: &str, buf_len: usize) -> PyResult<Self> {
        let sock = bind_udp(Some(bind), None)?;
        let port = sock
            .local_addr()
            .map_err(|e| to_py(opsel::Error::io("getsockname of the receiver socket", e)))?
            .port();
        Ok(Self {
            inner: Mutex::new((CoreReceiver::new(sock, buf_len).py_err()?, Vec::new())),
            port,
        })
    }

    /// The local UDP port.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// Receive until `expected` probe packets arrived or nothing arrived for
    /// `idle_s` seconds (GIL released). Returns a dict of numpy arrays in
    /// arrival order: seq, train_id, sched_offset_ns, send_ns, rx_ns (kernel
    /// stamp when present, CLOCK_MONOTONIC), rx_kernel_mask (bool), len.
    #[pyo3(signature = (expected, idle_s = 0.2))]
    fn recv_train<'py>(
        &self,
        py: Python<'py>,
        expected: usize,
        idle_s: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        if !(idle_s.is_finite() && (0.0..=3600.0).contains(&idle_s)) {
            return Err(to_py(opsel::Error::invalid(format!(
                "idle_s {idle_s} must be a number of seconds in [0, 3600]"
            ))));
        }
        // Lock with the GIL released (see PacedSender.inner); copy the records out.
        let r = py
            .detach(|| {
                let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                let (rx, recs) = &mut *g;
                recs.clear();
                rx.recv_train(expected, Duration::from_secs_f64(idle_s), recs)?;
                Ok::<_, opsel::Error>(recs.clone())
            })
            .py_err()?;
        let d = PyDict::new(py);
        d.set_item("seq", PyArray1::from_iter(py, r.iter().map(|x| x.seq)))?;
        d.set_item(
            "train_id",
            PyArray1::from_iter(py, r.iter().map(|x| x.train_id)),
        )?;
        d.set_item(
            "sched_offset_ns",
            PyArray1::from_iter(py, r.iter().map(|x| x.sched_offset_ns)),
        )?;
        d.set_item(
            "send_ns",
            PyArray1::from_iter(py, r.iter().map(|x| x.send_mono_ns)),
        )?;
        d.set_item(
            "rx_ns",
            PyArray1::from_iter(py, r.iter().map(|x| x.rx_mono_ns())),
        )?;
        d.set_item(
            "rx_kernel_mask",
            PyArray1::from_iter(py, r.iter().map(|x| x.rx_kernel_mono_ns.is_some())),
        )?;
        d.set_item(
            "len",
            PyArray1::from_iter(py, r.iter().map(|x| x.len as u64)),
        )?;
        Ok(d)
    }
}

// -------------------------------------------------------------- RTT ---

fn burst_dict<'py, P: EchoProbe + Send>(
    py: Python<'py>,
    inner: &Mutex<(P, u16)>,
    count: u16,
    interval_ns: u64,
    timeout_ns: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = BurstConfig {
        count,
        interval_ns,
        timeout_ns,
    };
    // Lock with the GIL released (see PacedSender.inner).
    let b = py
        .detach(|| {
            let mut g = inner.lock().unwrap_or_else(|p| p.into_inner());
            let (probe, seq) = &mut *g;
            let seq0 = *seq;
            *seq = seq.wrapping_add(count);
            rtt::echo_burst(probe, cfg, seq0)
        })
        .py_err()?;
    let d = PyDict::new(py);
    d.set_item("start_ns", b.start_mono_ns)?;
    d.set_item(
        "rtts_ms",
        PyArray1::from_iter(
            py,
            b.rtts_ns
                .iter()
                .map(|r| r.map_or(f64::NAN, |ns| ns as f64 / 1e6)),
        ),
    )?;
    d.set_item("mean_rtt_ms", b.mean_rtt_ms())?;
    d.set_item("lost", b.lost())?;
    Ok(d)
}

/// ICMP echo prober toward an IPv4 address: an unprivileged ping socket when
/// net.ipv4.ping_group_range admits the process's group, else a raw socket
/// (CAP_NET_RAW). `burst()` is one 000 §3.2 sample.
#[pyclass(module = "opsel")]
struct IcmpProber {
    inner: Mutex<(CoreIcmp, u16)>,
    kind: &'static str,
}

#[pymethods]
impl IcmpProber {
    #[new]
    fn new(dst: &str) -> PyResult<Self> {
        let ip: Ipv4Addr = dst.parse().map_err(|_| {
            to_py(opsel::Error::invalid(format!(
                "dst {dst:?} is not an IPv4 address; write e.g. \"10.0.0.2\""
            )))
        })?;
        let p = CoreIcmp::new(ip).py_err()?;
        let kind = match p.kind() {
            rtt::IcmpSocketKind::Ping => "ping",
            rtt::IcmpSocketKind::Raw => "raw",
        };
        Ok(Self {
            inner: Mutex::new((p, 0)),
            kind,
        })
    }

    /// "ping" (unprivileged ping socket) or "raw".
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }

    /// Send `count` echoes `interval_ns` apart without waiting for replies,
    /// wait up to `timeout_ns` after the last, GIL released. Returns a dict:
    /// rtts_ms (numpy, NaN = no reply), mean_rtt_ms (None if all lost; the
    /// 1 Hz sample of 000 §3.2), lost, start_ns.
    #[pyo3(signature = (count = 10, interval_ns = 1_000_000, timeout_ns = 1_000_000_000))]
    fn burst<'py>(
        &self,
        py: Python<'py>,
        count: u16,
        interval_ns: u64,
        timeout_ns: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        burst_dict(py, &self.inner, count, interval_ns, timeout_ns)
    }
}

/// UDP echo prober toward a UdpEchoResponder (or any UDP echo service) at
/// `dst` ("ip:port").
#[pyclass(module = "opsel")]
struct UdpEchoProber {
    inner: Mutex<(CoreUdp, u16)>,
}

#[pymethods]
impl UdpEchoProber {
    #[new]
    fn new(dst: &str) -> PyResult<Self> {
        let dst = sock_addr(dst, "dst")?;
        let sock = bind_udp(None, Some(dst.ip()))?;
        Ok(Self {
            inner: Mutex::new((CoreUdp::new(sock, dst).py_err()?, 0)),
        })
    }

    /// As IcmpProber.burst.
    #[pyo3(signature = (count = 10, interval_ns = 1_000_000, timeout_ns = 1_000_000_000))]
    fn burst<'py>(
        &self,
        py: Python<'py>,
        count: u16,
        interval_ns: u64,
        timeout_ns: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        burst_dict(py, &self.inner, count, interval_ns, timeout_ns)
    }
}

/// Echoes every datagram on `bind` back to its sender from a background
/// thread after `delay_s` (a delay line for tests). Use as a context manager
/// or call stop().
#[pyclass(module = "opsel")]
struct UdpEchoResponder {
    inner: Mutex<Option<rtt::UdpEchoResponder>>,
    port: u16,
}

#[pymethods]
impl UdpEchoResponder {
    #[new]
    #[pyo3(signature = (bind = "127.0.0.1:0", delay_s = 0.0))]
    fn new(bind: &str, delay_s: f64) -> PyResult<Self> {
        if !(delay_s.is_finite() && (0.0..=60.0).contains(&delay_s)) {
            return Err(to_py(opsel::Error::invalid(format!(
                "delay_s {delay_s} must be in [0, 60] seconds"
            ))));
        }
        let sock = bind_udp(Some(bind), None)?;
        let r = rtt::UdpEchoResponder::spawn(sock, Duration::from_secs_f64(delay_s)).py_err()?;
        let port = r.local_addr().port();
        Ok(Self {
            inner: Mutex::new(Some(r)),
            port,
        })
    }

    /// The UDP port it listens on.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// Stop the thread; returns how many datagrams were echoed.
    fn stop(&self, py: Python<'_>) -> PyResult<u64> {
        let r = self
            .inner
            .lock()
            .unwrap()
            .take()
            .ok_or_else(|| to_py(opsel::Error::invalid("responder was already stopped")))?;
        py.detach(|| r.stop()).py_err()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if let Some(r) = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take() {
            py.detach(|| r.stop()).py_err()?;
        }
        Ok(false)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(available_ccas, m)?)?;
    m.add_function(wrap_pyfunction!(allowed_ccas, m)?)?;
    m.add_function(wrap_pyfunction!(get_cca, m)?)?;
    m.add_function(wrap_pyfunction!(set_cca, m)?)?;
    m.add_function(wrap_pyfunction!(tcp_info, m)?)?;
    m.add_function(wrap_pyfunction!(tcp_rtt_ns, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_pacing_rate, m)?)?;
    m.add_function(wrap_pyfunction!(get_max_pacing_rate, m)?)?;
    m.add_function(wrap_pyfunction!(detect_txtime, m)?)?;
    m.add_class::<TcpInfoSampler>()?;
    m.add_class::<PacedSender>()?;
    m.add_class::<ProbeReceiver>()?;
    m.add_class::<IcmpProber>()?;
    m.add_class::<UdpEchoProber>()?;
    m.add_class::<UdpEchoResponder>()?;
    Ok(())
}
