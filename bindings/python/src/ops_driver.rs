//! `opsel.OpsDriver` and `opsel.send_fixed` (core:
//! `opsel::sys::linux::ops_driver`): the OPS controller run on the
//! application's own connected TCP socket (000 Ch. 6–7, Table 7.2). The
//! driver switches the CCA on the live socket, sends the caller's data at
//! full speed in bursts and steady phases (constructive probing, 000 §1.2),
//! stays silent in silences, runs the 1 Hz echo-burst RTT probe toward the
//! peer (000 §3.2) and reports phases, classifications, CCA switches,
//! decision latency, RTT samples and bytes per interval as event dicts.
//!
//! `run()` releases the GIL for the whole transfer; the event callable, a
//! file object or callable data source and a policy callable re-acquire it
//! when they are called. An exception in any of them stops the driver
//! cleanly (the socket is left open, `TCP_NOTSENT_LOWAT` restored) and is
//! re-raised as `OpselError` chained to it. `stop()` ends a run from another
//! thread.

use crate::convert::{invalid, to_dict};
use crate::errors::{to_py, IntoPy};
use crate::ops::{secs_to_ns, AnyPolicy, Controller};
use crate::sys::fd_of;
use opsel::ops::{Classifier, Event, Labeled};
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_fixed as core_send_fixed, DriverConfig, DriverEvent, DriverReport, OpsDriver as Core,
    RttSource,
};
use opsel::sys::linux::with_raw_fd;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyMemoryView};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Drv = Core<Box<dyn Classifier + Send>, AnyPolicy>;

/// Keyword arguments that configure the driver (the rest go to
/// `opsel.Controller`). The one place that maps Python names to
/// `DriverConfig`; add new fields here and to the .pyi.
const DRIVER_KEYS: &[&str] = &[
    "time_limit_s",
    "interval_s",
    "lead_in",
    "notsent_lowat_bytes",
    "chunk_bytes",
    "echo_count",
    "echo_interval_s",
    "echo_timeout_s",
];

/// Pop the driver's keyword arguments out of `kw` into a `DriverConfig`.
fn driver_config(kw: Option<&Bound<'_, PyDict>>) -> PyResult<DriverConfig> {
    let mut c = DriverConfig::default();
    let Some(kw) = kw else { return Ok(c) };
    for &key in DRIVER_KEYS {
        let Some(v) = kw.get_item(key)? else { continue };
        kw.del_item(key)?;
        match key {
            "time_limit_s" => {
                c.time_limit_ns = match v.extract::<Option<f64>>()? {
                    Some(s) => Some(secs_to_ns(s, "time_limit_s")?),
                    None => None,
                }
            }
            "interval_s" => c.interval_ns = secs_to_ns(v.extract()?, "interval_s")?,
            "lead_in" => c.lead_in = v.is_truthy()?,
            "notsent_lowat_bytes" => c.notsent_lowat_bytes = v.extract::<Option<u32>>()?,
            "chunk_bytes" => c.chunk_bytes = v.extract()?,
            "echo_count" => c.burst.count = v.extract()?,
            "echo_interval_s" => c.burst.interval_ns = secs_to_ns(v.extract()?, "echo_interval_s")?,
            "echo_timeout_s" => c.burst.timeout_ns = secs_to_ns(v.extract()?, "echo_timeout_s")?,
            _ => unreachable!("every DRIVER_KEYS entry is handled"),
        }
    }
    Ok(c)
}

/// Where the first Python exception of a run lands (the driver stops).
type Raised = Arc<Mutex<Option<(String, PyErr)>>>;

fn keep(raised: &Raised, what: &str, e: PyErr) {
    let mut g = raised.lock().unwrap_or_else(|p| p.into_inner());
    if g.is_none() {
        *g = Some((what.to_string(), e));
    }
}

/// The bytes of a bytes, bytearray or memoryview object (copied); `None`
/// for anything else.
fn bytes_of(o: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if let Ok(b) = o.cast::<PyBytes>() {
        return Ok(Some(b.as_bytes().to_vec()));
    }
    if let Ok(b) = o.cast::<PyByteArray>() {
        return Ok(Some(b.to_vec()));
    }
    if o.is_instance_of::<PyMemoryView>() {
        let b = o.call_method0("tobytes")?;
        return Ok(Some(b.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Ok(None)
}

/// The data to send: bytes (copied once), a file object (`read(n)`) or a
/// callable `f(n) -> bytes` (empty = end of data).
enum Source {
    Bytes(io::Cursor<Vec<u8>>),
    Py {
        obj: Py<PyAny>,
        file: bool,
        raised: Raised,
    },
}

impl Source {
    fn new(data: &Bound<'_, PyAny>, raised: &Raised) -> PyResult<Self> {
        if let Some(v) = bytes_of(data)? {
            return Ok(Source::Bytes(io::Cursor::new(v)));
        }
        let file = data.hasattr("read")?;
        if !file && !data.is_callable() {
            return Err(invalid(format!(
                "data must be bytes-like, a binary file object or a callable(n) -> bytes, got {}",
                data.get_type().name()?
            )));
        }
        Ok(Source::Py {
            obj: data.clone().unbind(),
            file,
            raised: Arc::clone(raised),
        })
    }
}

impl io::Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::Bytes(c) => c.read(buf),
            Source::Py { obj, file, raised } => Python::attach(|py| {
                let r = (|| -> PyResult<usize> {
                    let o = obj.bind(py);
                    let chunk = if *file {
                        o.call_method1("read", (buf.len(),))?
                    } else {
                        o.call1((buf.len(),))?
                    };
                    let v = bytes_of(&chunk)?.ok_or_else(|| {
                        invalid(format!(
                            "the data source returned {}, not bytes",
                            chunk
                                .get_type()
                                .name()
                                .map(|n| n.to_string())
                                .unwrap_or_default()
                        ))
                    })?;
                    if v.len() > buf.len() {
                        return Err(invalid(format!(
                            "the data source returned {} bytes for a read of {}",
                            v.len(),
                            buf.len()
                        )));
                    }
                    buf[..v.len()].copy_from_slice(&v);
                    Ok(v.len())
                })();
                r.map_err(|e| {
                    keep(raised, "the data source", e);
                    io::Error::other("the Python data source raised an exception")
                })
            }),
        }
    }
}

/// One driver event as a dict, with the class names (`label`, `leader`).
fn event_dict<'py>(
    py: Python<'py>,
    e: &DriverEvent,
    classes: &[String],
) -> PyResult<Bound<'py, PyDict>> {
    to_dict(py, &Labeled::new(e, classes))
}

/// Where the driver's events go (runs without the GIL; re-acquires it per
/// event for `on_event`).
struct Sink {
    on_event: Option<Py<PyAny>>,
    collect: bool,
    events: Vec<DriverEvent>,
    raised: Raised,
    stop: Arc<AtomicBool>,
    classes: Vec<String>,
    /// Where a policy callable's exception lands (OpsDriver only).
    policy_raised: Option<Arc<Mutex<Option<PyErr>>>>,
}

impl Sink {
    fn deliver(&mut self, e: &DriverEvent) {
        // A policy callable that raised made the decision fail: stop the
        // driver too (the exception is re-raised when run() returns).
        if let (DriverEvent::Ops(Event::DecisionFailed { .. }), Some(slot)) =
            (e, &self.policy_raised)
        {
            if slot.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        if self.collect {
            self.events.push(e.clone());
        }
        if let Some(f) = &self.on_event {
            let r = Python::attach(|py| -> PyResult<()> {
                f.bind(py).call1((event_dict(py, e, &self.classes)?,))?;
                Ok(())
            });
            if let Err(err) = r {
                keep(&self.raised, "the on_event callback", err);
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// Everything a run needs besides the driver: the socket, the source, the
/// event sink.
struct RunCtx {
    fd: i32,
    source: Source,
    sink: Sink,
}

impl RunCtx {
    fn new(
        sock: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        on_event: Option<&Bound<'_, PyAny>>,
        collect_events: Option<bool>,
        stop: Arc<AtomicBool>,
        classes: Vec<String>,
    ) -> PyResult<Self> {
        let fd = fd_of(sock)?;
        let raised: Raised = Arc::new(Mutex::new(None));
        let source = Source::new(data, &raised)?;
        if let Some(f) = on_event {
            if !f.is_callable() {
                return Err(invalid(format!(
                    "on_event must be a callable(dict) or None, got {}",
                    f.get_type().name()?
                )));
            }
        }
        Ok(Self {
            fd,
            source,
            sink: Sink {
                on_event: on_event.map(|f| f.clone().unbind()),
                collect: collect_events.unwrap_or(on_event.is_none()),
                events: Vec::new(),
                raised,
                stop,
                classes,
                policy_raised: None,
            },
        })
    }

    /// The report dict, or the first Python exception of the run chained
    /// into an `OpselError`.
    fn finish<'py>(
        self,
        py: Python<'py>,
        r: opsel::Result<DriverReport>,
        policy_raised: Option<PyErr>,
        with_stats: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let raised = self
            .sink
            .raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let raised = raised.or_else(|| policy_raised.map(|e| ("the policy callable".into(), e)));
        if let Some((what, e)) = raised {
            let outcome = match &r {
                Ok(rep) => format!("the driver stopped after {} bytes", rep.bytes_sent),
                Err(err) => format!("the driver stopped: {err}"),
            };
            let err = PyErr::from_type(
                py.import("opsel._errors")?
                    .getattr("OpselError")?
                    .cast_into()
                    .map_err(|_| invalid("opsel._errors.OpselError is not a class"))?,
                format!("{what} raised {}; {outcome}", e.value(py).repr()?),
            );
            err.set_cause(py, Some(e));
            return Err(err);
        }
        let rep = r.py_err()?;
        let d = to_dict(py, &rep)?;
        if !with_stats {
            d.del_item("stats")?;
        }
        if self.sink.collect {
            let l = PyList::empty(py);
            for e in &self.sink.events {
                l.append(event_dict(py, e, &self.sink.classes)?)?;
            }
            d.set_item("events", l)?;
        }
        Ok(d)
    }
}

/// Run OPS on your own connected TCP socket (000 Ch. 6–7).
///
/// `OpsDriver(model_or_controller, probe, **kwargs)`:
///
/// - `model_or_controller`: an `opsel.Model` or model-file path, with the
///   `opsel.Controller` keyword arguments (mode, pattern, steady_s, policy,
///   initial_cca, adaptive, progressive, ...); or a fresh `opsel.Controller`
///   (which is then used up).
/// - `probe`: the RTT probe target, `"HOST:PORT"` / `"udp:HOST:PORT"` (a UDP
///   echo responder, e.g. `opsel recv`'s port) or `"icmp:IP"` (ICMPv6 for an IPv6 address).
/// - driver keywords: time_limit_s (None = until the data ends),
///   interval_s (1.0), lead_in (True), notsent_lowat_bytes (131072; None
///   leaves the socket alone), chunk_bytes (262144), echo_count (10),
///   echo_interval_s (0.001), echo_timeout_s (0.4).
///
/// One run per driver.
#[pyclass(module = "opsel", frozen)]
pub struct OpsDriver {
    inner: Mutex<Drv>,
    stop: Arc<AtomicBool>,
    classes: Vec<String>,
    policy_raised: Arc<Mutex<Option<PyErr>>>,
}

#[pymethods]
impl OpsDriver {
    #[new]
    #[pyo3(signature = (model, probe, **kwargs))]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        probe: &str,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cfg = driver_config(kwargs)?;
        let rtt: RttSource = probe.parse().map_err(to_py)?;
        let ctl = if let Ok(c) = model.cast::<Controller>() {
            if kwargs.is_some_and(|k| !k.is_empty()) {
                return Err(invalid(format!(
                    "controller options {} were given with an opsel.Controller; set them on the Controller",
                    kwargs.map(|k| k.keys().to_string()).unwrap_or_default()
                )));
            }
            c.clone()
        } else {
            py.get_type::<Controller>()
                .call((model,), kwargs)?
                .cast_into::<Controller>()?
        };
        let (core, classes, policy_raised) = ctl.borrow().take_core()?;
        let drv = Core::new(core, rtt, cfg).py_err()?;
        Ok(Self {
            stop: Arc::new(AtomicBool::new(false)),
            inner: Mutex::new(drv),
            classes,
            policy_raised,
        })
    }

    /// Run the OPS cycle on `sock` (an int descriptor or an object with
    /// fileno(), connected TCP, left open) sending `data` until it ends, the
    /// time limit passes or `stop()` is called. Events go to
    /// `on_event(dict)` as they happen and, when `collect_events` (default:
    /// when there is no on_event), to the report's "events" list. Releases
    /// the GIL. Returns the report dict: bytes_sent (the offset to resume
    /// the data at), started_ns, ended_ns, end ("eof", "time_limit",
    /// "stopped"), cca_sets, lost_samples, stats, events.
    #[pyo3(signature = (sock, data, on_event = None, collect_events = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        sock: &Bound<'py, PyAny>,
        data: &Bound<'py, PyAny>,
        on_event: Option<&Bound<'py, PyAny>>,
        collect_events: Option<bool>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut ctx = RunCtx::new(
            sock,
            data,
            on_event,
            collect_events,
            Arc::clone(&self.stop),
            self.classes.clone(),
        )?;
        ctx.sink.policy_raised = Some(Arc::clone(&self.policy_raised));
        let mut drv = self.inner.try_lock().map_err(|_| {
            invalid("this driver is already running in another thread; one run per driver")
        })?;
        let drv: &mut Drv = &mut drv;
        let (fd, source, sink) = (ctx.fd, &mut ctx.source, &mut ctx.sink);
        let stop = Arc::clone(&self.stop);
        let r =
            py.detach(|| with_raw_fd(fd, |b| drv.run(b, source, &stop, &mut |e| sink.deliver(e))));
        let policy_raised = self
            .policy_raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        ctx.finish(py, r, policy_raised, true)
    }

    /// End a running `run()` (from another thread) within a few ms; the
    /// report's end is then "stopped". Before a run, the run returns at once.
    fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The model's class names (labels of "classified" events).
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }
}

/// The fixed-CCA baseline (000 Table 6.3 "fixed CUBIC" / "fixed BBR"): set
/// `cca` on `sock` once and send `data` with the driver's loop and
/// "interval" events (no RTT probe) until the data ends or `time_limit_s`
/// passes (or on_event raises). Driver keywords as for `OpsDriver`.
/// Releases the GIL. Returns the report dict (without stats).
#[pyfunction]
#[pyo3(signature = (sock, data, cca, on_event = None, collect_events = None, **kwargs))]
fn send_fixed<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    cca: &str,
    on_event: Option<&Bound<'py, PyAny>>,
    collect_events: Option<bool>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = driver_config(kwargs)?;
    if let Some(k) = kwargs.filter(|k| !k.is_empty()) {
        return Err(to_py(opsel::Error::invalid(format!(
            "send_fixed got unknown keyword arguments {}; driver keywords are {DRIVER_KEYS:?}",
            k.keys()
        ))));
    }
    let cca = CcaName::new(cca).py_err()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut ctx = RunCtx::new(
        sock,
        data,
        on_event,
        collect_events,
        Arc::clone(&stop),
        Vec::new(),
    )?;
    let (fd, source, sink) = (ctx.fd, &mut ctx.source, &mut ctx.sink);
    let r = py.detach(|| {
        with_raw_fd(fd, |b| {
            core_send_fixed(b, source, cca, &cfg, &stop, &mut |e| sink.deliver(e))
        })
    });
    ctx.finish(py, r, None, false)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<OpsDriver>()?;
    m.add_function(wrap_pyfunction!(send_fixed, m)?)?;
    Ok(())
}
