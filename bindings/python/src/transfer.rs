//! `opsel.send_file` / `opsel.recv_file`: the `opsel-transfer` crate's
//! one-transfer functions. Conversions only: the socket's descriptor is
//! duplicated (the caller's socket stays open and theirs), the spec dict
//! goes through the crate's `SendSpec` / `RecvSpec`, the report comes back
//! through its serde form. The GIL is released for the whole transfer.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

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

/// Send the file at `path` over `sock` (a connected TCP socket or its
/// descriptor) to an opsel receiver; returns the report once the receiver
/// confirmed every byte and its digest.
#[pyfunction]
#[pyo3(signature = (sock, path, spec=None))]
fn send_file<'py>(
    py: Python<'py>,
    sock: &Bound<'py, PyAny>,
    path: PathBuf,
    spec: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = SendSpec::from_json(&spec_text(spec, "spec")?).py_err()?;
    let ctl = TcpStream::from(dup(sock)?);
    let stop = AtomicBool::new(false);
    let r = py
        .detach(|| opsel_transfer::send_file(ctl, &path, &spec, &stop, &mut |_| {}))
        .py_err()?;
    to_dict(py, &r)
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
    m.add_function(wrap_pyfunction!(send_file, m)?)?;
    m.add_function(wrap_pyfunction!(recv_file, m)?)?;
    Ok(())
}
