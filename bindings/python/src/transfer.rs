//! `opsel.send_file` / `opsel.recv_file`: the `opsel-transfer` crate's
//! one-transfer functions. Conversions only: the socket's descriptor is
//! duplicated (the caller's socket stays open and theirs), the spec dict
//! goes through the crate's `SendSpec` / `RecvSpec`, the report comes back
//! through its serde form. The GIL is released for the whole transfer (and
//! re-acquired per event for `on_event`). `opsel.Stop` is the stop flag a
//! running `send_file` reads: `.set()` from any thread ends it early with a
//! verified prefix.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use opsel_transfer::{RecvSpec, SendSpec};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{invalid, json_text, to_dict};
use crate::errors::IntoPy;
use crate::sys::fd_of;

/// An owned duplicate of the caller's descriptor.
fn dup(sock: &Bound<'_, PyAny>) -> PyResult<OwnedFd> {
    let fd = fd_of(sock)?;
    if fd < 0 {
        return Err(invalid(format!("file descriptor {fd} is not open")));
    }
    // SAFETY: the caller's object keeps `fd` open for the duration of this call.
    unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|e| invalid(format!("descriptor {fd}: {e}")))
}

fn spec_text(spec: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<String> {
    spec.map(|s| json_text(s, what))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// A stop flag for `send_file`, shared between threads: `set()` ends a
/// running transfer early (the receiver keeps the bytes sent as a verified
/// prefix); `is_set()` reads it. Like `threading.Event`, it stays set.
#[pyclass(module = "opsel", frozen)]
pub struct Stop(Arc<AtomicBool>);

#[pymethods]
impl Stop {
    #[new]
    fn new() -> Self {
        Stop(Arc::new(AtomicBool::new(false)))
    }
    /// Raise the flag (any thread; also before the transfer starts).
    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    fn __repr__(&self) -> String {
        format!(
            "opsel.Stop(set={})",
            if self.is_set() { "True" } else { "False" }
        )
    }
}

/// Send the file at `path` over `sock` (a connected TCP socket or its
/// descriptor) to an opsel receiver; returns the report once the receiver
/// confirmed every byte and its digest (with `spec["ops"]`, `report["ops"]`
/// lists the decisions and the CCAs used). `stop`: an `opsel.Stop`.
/// `on_event`: called with each driver event as a dict (intervals, CCA
/// sets, OPS phases, classifications, selections); an exception in it stops
/// the transfer and is raised from `send_file`.
#[pyfunction]
#[pyo3(signature = (sock, path, spec=None, stop=None, on_event=None))]
fn send_file<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    path: PathBuf,
    spec: Option<&Bound<'py, PyAny>>,
    stop: Option<&Bound<'py, PyAny>>,
    on_event: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = SendSpec::from_json(&spec_text(spec, "spec")?).py_err()?;
    let stop = match stop {
        None => Arc::new(AtomicBool::new(false)),
        Some(s) => match s.cast::<Stop>() {
            Ok(s) => Arc::clone(&s.get().0),
            Err(_) => {
                return Err(invalid(format!(
                    "stop must be an opsel.Stop (call .set() on it to stop), got {}",
                    s.get_type().name()?
                )))
            }
        },
    };
    if let Some(f) = on_event.filter(|f| !f.is_callable()) {
        return Err(invalid(format!(
            "on_event must be callable, got {}",
            f.get_type().name()?
        )));
    }
    let on_event = on_event.map(|f| f.clone().unbind());
    let ctl = TcpStream::from(dup(sock)?);
    let mut raised: Option<PyErr> = None;
    let r = py.detach(|| {
        opsel_transfer::send_file(ctl, &path, &spec, &stop, &mut |e| {
            let Some(f) = &on_event else { return };
            if raised.is_some() {
                return;
            }
            let r = Python::attach(|py| f.bind(py).call1((to_dict(py, e)?,)).map(|_| ()));
            if let Err(err) = r {
                raised = Some(err);
                stop.store(true, Ordering::Relaxed);
            }
        })
    });
    if let Some(err) = raised {
        let e = crate::errors::to_py(opsel::Error::invalid(
            "the on_event callback raised an exception; the transfer stopped (the receiver keeps a verified prefix)",
        ));
        e.set_cause(py, Some(err));
        return Err(e);
    }
    to_dict(py, &r.py_err()?)
}

/// Receive one transfer into `path` on `sock` (a listening TCP socket or
/// its descriptor; the sender's control and data connections arrive there);
/// returns the report after the first verified transfer. The listener is
/// left blocking.
#[pyfunction]
#[pyo3(signature = (sock, path, spec=None))]
fn recv_file<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    path: PathBuf,
    spec: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = RecvSpec::from_json(&spec_text(spec, "spec")?).py_err()?;
    let listener = TcpListener::from(dup(sock)?);
    let r = py
        .detach(|| opsel_transfer::recv_file(listener, &path, &spec))
        .py_err()?;
    to_dict(py, &r)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Stop>()?;
    m.add_function(wrap_pyfunction!(send_file, m)?)?;
    m.add_function(wrap_pyfunction!(recv_file, m)?)?;
    Ok(())
}
