//! C API of the `opsel-transfer` crate: one transfer over a socket
//! descriptor, the spec and the report as JSON text (the crate's
//! `SendSpec` / `RecvSpec` / `SendReport` / `RecvReport` serde forms).
//! Conversions only; the descriptor is duplicated, so the caller's stays
//! open and theirs. An `opsel_stop` is the stop flag a running send reads:
//! `opsel_stop_set()` from any thread ends it early with a verified prefix.

use std::ffi::{c_char, c_int};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use opsel_transfer::{RecvSpec, SendSpec};

use crate::error::{guard, opsel_status, utf8, Fail};
use crate::handle::Handle;
use crate::json;

/// A stop flag for `opsel_transfer_send_fd()` (opaque; an atomic flag).
/// Thread-safety: `opsel_stop_set()` and `opsel_stop_is_set()` may be called
/// from any thread while a send reads it; free it only after that send returned.
pub struct opsel_stop(AtomicBool);

/// Make a stop flag (not set) into `*out`; release it with `opsel_stop_free()`.
/// Errors: NULL_POINTER (`out`).
#[no_mangle]
pub unsafe extern "C" fn opsel_stop_new(out: *mut *mut opsel_stop) -> opsel_status {
    guard(|| {
        let out = crate::model::clear_out(out)?;
        opsel_stop(AtomicBool::new(false)).into_out(out);
        Ok(())
    })
}

/// Raise the flag: a send reading it ends early (within one chunk), and
/// the receiver keeps the bytes sent as a verified prefix. Stays raised.
/// Errors: NULL_POINTER.
#[no_mangle]
pub unsafe extern "C" fn opsel_stop_set(stop: *const opsel_stop) -> opsel_status {
    guard(|| {
        unsafe { opsel_stop::borrow(stop) }?
            .0
            .store(true, Ordering::Relaxed);
        Ok(())
    })
}

/// Whether the flag is raised (false for NULL).
#[no_mangle]
pub unsafe extern "C" fn opsel_stop_is_set(stop: *const opsel_stop) -> bool {
    unsafe { stop.as_ref() }.is_some_and(|s| s.0.load(Ordering::Relaxed))
}

/// Release a stop flag (NULL ignored); not while a send still reads it.
#[no_mangle]
pub unsafe extern "C" fn opsel_stop_free(stop: *mut opsel_stop) {
    unsafe { opsel_stop::free(stop) }
}

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
/// offset, resume, name, streams, time_s, interval_s, key, ops; NULL =
/// defaults: CUBIC, XXH3-128 or keyed BLAKE3 with a key). `ops` lets OPS
/// choose the CCA on the live connection, e.g. `{"ops":{}}` (passive probing;
/// model "auto": the 5-Hz passive-200ms-two-stage model while the path's RTTs fit it,
/// else the 1 Hz passive model) or `{"ops":{"pattern":"S5-C5-S5-B5",
/// "steady_s":100,"gate":"default"}}`; the report's `ops` then lists the
/// decisions, the CCAs used and, with "auto", `auto_model` (which model ran
/// and why). `stop`: NULL, or a flag from
/// `opsel_stop_new()` that another thread may raise with `opsel_stop_set()`
/// to end the sending early (the report's `driver.end` is then "stopped",
/// `complete` false, and the receiver keeps the bytes sent as a verified
/// prefix). On success `*report_json` (if `report_json` is not NULL)
/// receives the report as JSON, released with `opsel_string_free()`; on
/// failure it is set to NULL.
/// Errors: INVALID_INPUT (a bad spec or descriptor, the transfer refused or
/// not confirmed), IO (the file, the connection), NULL_POINTER (`path`).
/// Thread-safety: any thread; blocks for the whole transfer.
#[no_mangle]
pub unsafe extern "C" fn opsel_transfer_send_fd(
    fd: c_int,
    path: *const c_char,
    spec_json: *const c_char,
    stop: *const opsel_stop,
    report_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        if let Some(o) = unsafe { report_json.as_mut() } {
            *o = std::ptr::null_mut();
        }
        let path = Path::new(unsafe { utf8(path, "path") }?);
        let spec: SendSpec = spec(spec_json, "send spec")?;
        let ctl = TcpStream::from(dup(fd)?);
        let never = AtomicBool::new(false);
        // SAFETY: NULL or a live flag from opsel_stop_new (the caller's promise).
        let stop = unsafe { stop.as_ref() }.map_or(&never, |s| &s.0);
        let r = opsel_transfer::send_file(ctl, path, &spec, stop, &mut |_| {})?;
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
