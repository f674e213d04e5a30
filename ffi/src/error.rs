//! Status codes, the thread-local last-error message, and the guard every
//! entry point runs in (DESIGN.md, Conventions: "C: status codes plus
//! `opsel_last_error_message()`"; "FFI entry points catch unwinds").

use opsel::{Error, ErrorKind};
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Result of every fallible opsel call. `OPSEL_OK` is zero; every other value
/// comes with a message from `opsel_last_error_message()` that names the
/// offending value and what to do. Codes 1..6 mirror the core error kinds
/// (and the Node binding's `code` strings, see `opsel_status_name()`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum opsel_status {
    /// Success.
    OPSEL_OK = 0,
    /// A caller-supplied value is invalid: NaN/inf sample, wrong length,
    /// zero length, k too large, invalid UTF-8, unknown enum value.
    OPSEL_INVALID_INPUT = 1,
    /// A model file or model JSON is damaged, foreign or inconsistent.
    OPSEL_INVALID_MODEL = 2,
    /// A model file declares a format version this build does not read.
    OPSEL_UNSUPPORTED_VERSION = 3,
    /// An operating-system call failed (e.g. the model file cannot be read).
    OPSEL_IO = 4,
    /// The operation needs a privilege the process does not have.
    OPSEL_PERMISSION = 5,
    /// The platform does not offer the requested feature.
    OPSEL_UNSUPPORTED = 6,
    /// A required pointer argument was NULL.
    OPSEL_NULL_POINTER = 7,
    /// opsel hit an internal error (a Rust panic, caught at the boundary).
    /// Please report it with the message; the handles involved stay valid.
    OPSEL_PANIC = 8,
}

impl From<ErrorKind> for opsel_status {
    fn from(k: ErrorKind) -> Self {
        match k {
            ErrorKind::InvalidInput => opsel_status::OPSEL_INVALID_INPUT,
            ErrorKind::InvalidModel => opsel_status::OPSEL_INVALID_MODEL,
            ErrorKind::UnsupportedVersion => opsel_status::OPSEL_UNSUPPORTED_VERSION,
            ErrorKind::Io => opsel_status::OPSEL_IO,
            ErrorKind::Permission => opsel_status::OPSEL_PERMISSION,
            ErrorKind::Unsupported => opsel_status::OPSEL_UNSUPPORTED,
        }
    }
}

/// A failed call: the status to return and the message to store.
#[derive(Debug)]
pub(crate) struct Fail {
    pub status: opsel_status,
    pub message: String,
}

impl Fail {
    pub fn invalid(message: impl Into<String>) -> Self {
        Fail {
            status: opsel_status::OPSEL_INVALID_INPUT,
            message: message.into(),
        }
    }
    pub fn null(what: &str) -> Self {
        Fail {
            status: opsel_status::OPSEL_NULL_POINTER,
            message: format!("{what} is NULL; pass a valid pointer"),
        }
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail {
            status: e.kind().into(),
            message: e.to_string(),
        }
    }
}

thread_local! {
    /// `None` after a successful call: clearing must not allocate, because
    /// every successful classify passes through here (hot path, zero allocations).
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(message: &str) {
    // Messages may quote user strings; C strings cannot hold NUL, so escape it.
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = Some(c));
}

fn clear_last_error() {
    LAST_ERROR.with(|l| {
        if let Ok(mut l) = l.try_borrow_mut() {
            *l = None;
        }
    });
}

/// Run an entry point's body: catch panics, store the message of a failure,
/// clear it on success, and turn the outcome into a status.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Fail>) -> opsel_status {
    // AssertUnwindSafe: after a caught panic the handles are still memory-safe
    // (every core buffer is re-sized before use), and the caller learns of the
    // panic through OPSEL_PANIC.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            clear_last_error();
            opsel_status::OPSEL_OK
        }
        Ok(Err(f)) => {
            set_last_error(&f.message);
            f.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            set_last_error(&format!(
                "internal error in opsel (a bug; please report it): {what}"
            ));
            opsel_status::OPSEL_PANIC
        }
    }
}

/// Borrow `len` doubles at `ptr`, rejecting NULL, zero length, misalignment
/// and non-finite values (named by index).
pub(crate) unsafe fn f64_slice<'a>(
    ptr: *const f64,
    len: usize,
    what: &str,
) -> Result<&'a [f64], Fail> {
    let s = unsafe { f64_slice_any(ptr, len, what) }?;
    opsel::error::check_finite(what, s)?;
    Ok(s)
}

/// As [`f64_slice`] without the finiteness check (the core checks it and
/// names the window).
pub(crate) unsafe fn f64_slice_any<'a>(
    ptr: *const f64,
    len: usize,
    what: &str,
) -> Result<&'a [f64], Fail> {
    if ptr.is_null() {
        return Err(Fail::null(what));
    }
    if len == 0 {
        return Err(Fail::invalid(format!(
            "{what} has length 0; pass at least one value"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Fail::invalid(format!(
            "{what} pointer {ptr:p} is not aligned for double"
        )));
    }
    if len > isize::MAX as usize / std::mem::size_of::<f64>() {
        return Err(Fail::invalid(format!("{what} length {len} is too large")));
    }
    // SAFETY: non-null, aligned, and the caller promises `len` readable doubles.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrow a NUL-terminated UTF-8 string.
pub(crate) unsafe fn utf8<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Fail> {
    if ptr.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: caller promises a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str().map_err(|e| {
        Fail::invalid(format!(
            "{what} is not valid UTF-8 (bad byte at offset {}: {:?}); pass UTF-8 text",
            e.valid_up_to(),
            String::from_utf8_lossy(c.to_bytes())
        ))
    })
}

/// Write through an out-pointer that was checked for NULL.
pub(crate) fn out_ptr<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Fail> {
    // SAFETY: non-null checked; the caller promises it points to a writable T.
    unsafe { ptr.as_mut() }.ok_or_else(|| Fail::null(what))
}

/// The message of the most recent failed opsel call on this thread, or `""`
/// when the most recent call succeeded. Never NULL.
///
/// Ownership: owned by opsel; do not free. Valid until the next opsel call
/// that returns an `opsel_status` on the same thread; copy it to keep it.
/// Thread-safety: each thread has its own message.
#[no_mangle]
pub extern "C" fn opsel_last_error_message() -> *const c_char {
    LAST_ERROR.with(|l| match &*l.borrow() {
        Some(c) => c.as_ptr(),
        None => c"".as_ptr(),
    })
}

/// The name of a status code as a static string (`"OPSEL_INVALID_INPUT"`,
/// equal to the Node binding's `error.code`), or `"OPSEL_UNKNOWN_STATUS"` for
/// a value that is not a status.
///
/// Ownership: static; never free. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_status_name(status: i32) -> *const c_char {
    let s: &'static str = match status {
        0 => "OPSEL_OK\0",
        1 => "OPSEL_INVALID_INPUT\0",
        2 => "OPSEL_INVALID_MODEL\0",
        3 => "OPSEL_UNSUPPORTED_VERSION\0",
        4 => "OPSEL_IO\0",
        5 => "OPSEL_PERMISSION\0",
        6 => "OPSEL_UNSUPPORTED\0",
        7 => "OPSEL_NULL_POINTER\0",
        8 => "OPSEL_PANIC\0",
        _ => "OPSEL_UNKNOWN_STATUS\0",
    };
    s.as_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_match_core_codes() {
        for k in [
            ErrorKind::InvalidInput,
            ErrorKind::InvalidModel,
            ErrorKind::UnsupportedVersion,
            ErrorKind::Io,
            ErrorKind::Permission,
            ErrorKind::Unsupported,
        ] {
            let st = opsel_status::from(k);
            let name = unsafe { CStr::from_ptr(opsel_status_name(st as i32)) };
            assert_eq!(name.to_str().unwrap(), k.code());
        }
        let name = unsafe { CStr::from_ptr(opsel_status_name(99)) };
        assert_eq!(name.to_str().unwrap(), "OPSEL_UNKNOWN_STATUS");
    }

    #[test]
    fn guard_catches_panics_and_keeps_messages_per_thread() {
        let st = guard(|| panic!("boom {}", 7));
        assert_eq!(st, opsel_status::OPSEL_PANIC);
        let msg = unsafe { CStr::from_ptr(opsel_last_error_message()) };
        assert!(msg.to_str().unwrap().contains("boom 7"), "{msg:?}");
        // Another thread sees its own (empty) message.
        std::thread::spawn(|| {
            let m = unsafe { CStr::from_ptr(opsel_last_error_message()) };
            assert_eq!(m.to_bytes(), b"");
        })
        .join()
        .unwrap();
        assert_eq!(guard(|| Ok(())), opsel_status::OPSEL_OK);
        let msg = unsafe { CStr::from_ptr(opsel_last_error_message()) };
        assert_eq!(msg.to_bytes(), b"");
    }

    #[test]
    fn interior_nul_is_escaped() {
        let st = guard(|| Err(Fail::invalid("class \0x")));
        assert_eq!(st, opsel_status::OPSEL_INVALID_INPUT);
        let msg = unsafe { CStr::from_ptr(opsel_last_error_message()) };
        assert_eq!(msg.to_str().unwrap(), "class \\0x");
    }
}
