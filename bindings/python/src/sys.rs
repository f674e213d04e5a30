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

use crate::convert::{invalid, to_dict};
use crate::errors::IntoPy;
use numpy::PyArray1;
use opsel::names::Named;
use opsel::sys::linux::{
    self as sys, bind_udp, parse_ip, parse_ipv4, parse_sock_addr, qdisc,
    receiver::{ProbeReceiver as CoreReceiver, RxColumns, RxRecord},
    rtt::{self, BurstConfig, EchoProber},
    sender::{BackendChoice, CatchUp, PacedSender as CoreSender, SenderConfig, TrainReport},
    RawSock, TcpInfo, TcpInfoSampler as CoreSampler,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

/// An int descriptor, or the result of `obj.fileno()`.
pub(crate) fn fd_of(sock: &Bound<'_, PyAny>) -> PyResult<RawFd> {
    if let Ok(fd) = sock.extract::<i64>() {
        return RawFd::try_from(fd).map_err(|_| {
            invalid(format!(
                "file descriptor {fd} is out of range; pass an open socket or its fileno()"
            ))
        });
    }
    match sock.call_method0("fileno") {
        Ok(v) => v.extract::<RawFd>(),
        Err(_) => Err(invalid(format!(
            "expected a socket (an object with fileno()) or an int descriptor, got {}",
            sock.get_type().name()?
        ))),
    }
}

fn with_fd<T>(
    sock: &Bound<'_, PyAny>,
    f: impl FnOnce(BorrowedFd<'_>) -> opsel::Result<T>,
) -> PyResult<T> {
    sys::with_raw_fd(fd_of(sock)?, f).py_err()
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

/// The snapshot's serde form plus the named congestion-avoidance state.
fn info_dict<'py>(py: Python<'py>, i: &TcpInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = to_dict(py, i)?;
    d.set_item("ca_state", i.ca_state().name())?;
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

/// Polls TCP_INFO of one socket: `sample()` returns the interval since the
/// previous call (throughput from bytes acked/received, RTT) or None when no
/// time elapsed. Keep the socket open while the sampler is used.
#[pyclass(module = "opsel")]
struct TcpInfoSampler {
    inner: Mutex<CoreSampler<RawSock>>,
}

#[pymethods]
impl TcpInfoSampler {
    #[new]
    fn new(sock: &Bound<'_, PyAny>) -> PyResult<Self> {
        let fd = RawSock::new(fd_of(sock)?).py_err()?;
        Ok(Self {
            inner: Mutex::new(CoreSampler::new(fd).py_err()?),
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
        r.map(|i| to_dict(py, &i)).transpose()
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

/// Whether SO_TXTIME launch times would be enforced for packets to the IP
/// address `dst` (fq or etf on the egress device; the setsockopt return code
/// alone proves nothing). Returns a dict: enforced, device, root_qdisc,
/// clockid, reason.
#[pyfunction]
fn detect_txtime<'py>(py: Python<'py>, dst: &str) -> PyResult<Bound<'py, PyDict>> {
    let ip = parse_ip(dst, "dst").py_err()?;
    let sock = bind_udp(None, Some(ip)).py_err()?;
    let t = py.detach(|| qdisc::detect_txtime(&sock, ip)).py_err()?;
    to_dict(py, &t)
}

// ----------------------------------------------------------- sender ---

fn u64s(values: Vec<i64>, what: &str) -> PyResult<Vec<u64>> {
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            u64::try_from(v).map_err(|_| {
                invalid(format!(
                    "{what}[{i}] = {v} is negative; departure offsets are ns >= 0"
                ))
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
    txtime: qdisc::TxTimeSupport,
    tx_timestamping: bool,
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
        let dst = parse_sock_addr(dst, "dst").py_err()?;
        let d = SenderConfig::default();
        let cfg = SenderConfig {
            backend: BackendChoice::parse("backend", backend).py_err()?,
            catch_up: CatchUp::parse("catch_up", catch_up).py_err()?,
            sched_fifo,
            spin_ns: spin_ns.unwrap_or(d.spin_ns),
            stall_ns: stall_ns.unwrap_or(d.stall_ns),
            tx_timestamps,
            start_delay_ns: start_delay_ns.unwrap_or(d.start_delay_ns),
            ..d
        };
        let sock = bind_udp(bind, Some(dst.ip())).py_err()?;
        let s = py
            .detach(|| CoreSender::new(sock, dst, payload_max, cfg))
            .py_err()?;
        Ok(Self {
            backend: s.backend().name(),
            txtime: s.txtime_report(),
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
    /// root_qdisc, clockid, reason); when detection itself failed, not
    /// enforced, with the failure as the reason.
    #[getter]
    fn txtime<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, &self.txtime)
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
        // Copy the report out under the lock, the GIL released (see `inner`).
        let r = py
            .detach(|| {
                let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                let (s, r) = &mut *g;
                s.send_train(&sched, payload_len, train_id, r)?;
                Ok::<_, opsel::Error>(r.clone())
            })
            .py_err()?;
        let c = r.columns();
        let d = PyDict::new(py);
        d.set_item("backend", r.backend_name())?;
        d.set_item("train_id", r.train_id)?;
        d.set_item("start_ns", r.start_mono_ns)?;
        d.set_item("rebases", r.rebases)?;
        d.set_item("max_lateness_ns", r.max_lateness_ns)?;
        d.set_item("sched_fifo", r.sched_fifo)?;
        d.set_item("tx_stamped", r.tx_stamped)?;
        d.set_item("refused", r.refused)?;
        d.set_item("seq", PyArray1::from_vec(py, c.seq))?;
        d.set_item("scheduled_ns", PyArray1::from_vec(py, c.scheduled_ns))?;
        d.set_item("departure_ns", PyArray1::from_vec(py, c.departure_ns))?;
        d.set_item("sent_ns", PyArray1::from_vec(py, c.sent_ns))?;
        d.set_item("tx_stamped_mask", PyArray1::from_vec(py, c.tx_stamped))?;
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
        let sock = bind_udp(Some(bind), None).py_err()?;
        let port = sock
            .local_addr()
            .map_err(|e| opsel::Error::io("getsockname of the receiver socket", e))
            .py_err()?
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
            return Err(invalid(format!(
                "idle_s {idle_s} must be a number of seconds in [0, 3600]"
            )));
        }
        // Lock with the GIL released (see PacedSender.inner); copy the records out.
        let r = py
            .detach(|| {
                let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
                let (rx, recs) = &mut *g;
                recs.clear();
                rx.recv_train(expected, Duration::from_secs_f64(idle_s), recs)?;
                Ok::<_, opsel::Error>(RxColumns::of(recs))
            })
            .py_err()?;
        let d = PyDict::new(py);
        d.set_item("seq", PyArray1::from_vec(py, r.seq))?;
        d.set_item("train_id", PyArray1::from_vec(py, r.train_id))?;
        d.set_item("sched_offset_ns", PyArray1::from_vec(py, r.sched_offset_ns))?;
        d.set_item("send_ns", PyArray1::from_vec(py, r.send_ns))?;
        d.set_item("rx_ns", PyArray1::from_vec(py, r.rx_ns))?;
        d.set_item("rx_kernel_mask", PyArray1::from_vec(py, r.rx_kernel))?;
        d.set_item("len", PyArray1::from_vec(py, r.len))?;
        Ok(d)
    }
}

// -------------------------------------------------------------- RTT ---

fn burst_dict<'py>(
    py: Python<'py>,
    inner: &Mutex<EchoProber>,
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
        .detach(|| inner.lock().unwrap_or_else(|p| p.into_inner()).burst(cfg))
        .py_err()?;
    let d = PyDict::new(py);
    d.set_item("start_ns", b.start_mono_ns)?;
    d.set_item("rtts_ms", PyArray1::from_iter(py, b.rtts_ms()))?;
    d.set_item("mean_rtt_ms", b.mean_rtt_ms())?;
    d.set_item("lost", b.lost())?;
    Ok(d)
}

/// ICMP echo prober toward an IPv4 address: an unprivileged ping socket when
/// net.ipv4.ping_group_range admits the process's group, else a raw socket
/// (CAP_NET_RAW). `burst()` is one 000 §3.2 sample.
#[pyclass(module = "opsel")]
struct IcmpProber {
    inner: Mutex<EchoProber>,
    kind: &'static str,
}

#[pymethods]
impl IcmpProber {
    #[new]
    fn new(dst: &str) -> PyResult<Self> {
        let p = EchoProber::icmp(parse_ipv4(dst, "dst").py_err()?).py_err()?;
        Ok(Self {
            kind: p.icmp_kind().map_or("udp", Named::name),
            inner: Mutex::new(p),
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
    inner: Mutex<EchoProber>,
}

#[pymethods]
impl UdpEchoProber {
    #[new]
    fn new(dst: &str) -> PyResult<Self> {
        let p = EchoProber::udp(parse_sock_addr(dst, "dst").py_err()?).py_err()?;
        Ok(Self {
            inner: Mutex::new(p),
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
            return Err(invalid(format!(
                "delay_s {delay_s} must be in [0, 60] seconds"
            )));
        }
        let sock = bind_udp(Some(bind), None).py_err()?;
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
            .ok_or_else(|| invalid("responder was already stopped"))?;
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
