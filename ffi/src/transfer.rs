//! C API of the `opsel-transfer` crate: one transfer over a socket
//! descriptor, the spec and the report as JSON text (the crate's
//! `SendSpec` / `RecvSpec` / `SendReport` / `RecvReport` serde forms).
//! Conversions only; the descriptor is duplicated, so the caller's stays
//! open and theirs.

use std::ffi::{c_char, c_int};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::AtomicBool;

use opsel_transfer::{RecvSpec, SendSpec};

use crate::error::{guard, opsel_status, utf8, Fail};
use crate::json;

/// An owned duplicate of the caller's descriptor.
fn dup(fd: c_int) -> Result<OwnedFd, Fail> {
    if fd < 0 {
        return Err(Fail::invalid(format!(
            "socket descriptor {fd} is negative; pass the socket's descriptor"
        )));
    }
    // SAFETY: the caller keeps `fd` open for the duration of the call.
    unsafe { BorrowedFd::borrow_raw(fd) }
        .try_clone_to_owned()
        .map_err(|e| Fail::invalid(format!("descriptor {fd}: {e}")))
}

/// The spec from JSON text; NULL or "" = every default.
fn spec<T: Default + serde::de::DeserializeOwned>(p: *const c_char, what: &str) -> Result<T, Fail> {
    if p.is_null() || unsafe { utf8(p, what) }?.trim().is_empty() {
        return Ok(T::default());
    }
    json::arg(p, what)
}

/// Send the file at `path` over `fd`, a connected TCP socket to an opsel
/// receiver (`opsel recv`, `opsel serve`, `opsel_transfer_recv_fd()`), and
/// block until the receiver confirmed every byte and its digest. Data
/// connections go to the address `fd` is connected to. `spec_json`: the
/// send spec, e.g. `{"hash":"blake3","cca":"cubic"}` (fields cca, hash,
/// offset, resume, name, streams, time_s, interval_s, key; NULL = defaults:
/// CUBIC, XXH3-128 or keyed BLAKE3 with a key). On success `*report_json`
/// (if `report_json` is not NULL) receives the report as JSON, released with
/// `opsel_string_free()`; on failure it is set to NULL.
/// Errors: INVALID_INPUT (a bad spec or descriptor, the transfer refused or
/// not confirmed), IO (the file, the connection), NULL_POINTER (`path`).
/// Thread-safety: any thread; blocks for the whole transfer.
#[no_mangle]
pub unsafe extern "C" fn opsel_transfer_send_fd(
    fd: c_int,
    path: *const c_char,
    spec_json: *const c_char,
    report_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { report_json.as_mut() } {
            *o = std::ptr::null_mut();
        }
        let path = Path::new(unsafe { utf8(path, "path") }?);
        let spec: SendSpec = spec(spec_json, "send spec")?;
        let ctl = TcpStream::from(dup(fd)?);
        let stop = AtomicBool::new(false);
        let r = opsel_transfer::send_file(ctl, path, &spec, &stop, &mut |_| {})?;
        match unsafe { report_json.as_mut() } {
            Some(o) => json::out(&r, o),
            None => Ok(()),
        }
    })
}

/// Receive one transfer into `path` on `fd`, a bound (or listening) TCP
/// socket: the sender's control and data connections arrive there. Blocks
/// until the first verified transfer (failed attempts in between are
/// dropped). `spec_json`: the receive spec (fields force, append, max_size,
/// handshake_s, idle_s, accept_timeout_s, key; NULL = defaults). On success
/// `*report_json` (if not NULL) receives the report as JSON, released with
/// `opsel_string_free()`; on failure it is set to NULL.
/// Errors: INVALID_INPUT (a bad spec or descriptor), IO (listening, the
/// accept timeout), NULL_POINTER (`path`).
/// Thread-safety: any thread; blocks for the whole transfer.
#[no_mangle]
pub unsafe extern "C" fn opsel_transfer_recv_fd(
    fd: c_int,
    path: *const c_char,
    spec_json: *const c_char,
    report_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { report_json.as_mut() } {
            *o = std::ptr::null_mut();
        }
        let path = Path::new(unsafe { utf8(path, "path") }?);
        let spec: RecvSpec = spec(spec_json, "receive spec")?;
        let l = TcpListener::from(dup(fd)?);
        let r = opsel_transfer::recv_file(l, path, &spec)?;
        match unsafe { report_json.as_mut() } {
            Some(o) => json::out(&r, o),
            None => Ok(()),
        }
    })
}
