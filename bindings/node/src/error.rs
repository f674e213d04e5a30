//! opsel errors as JavaScript `Error` objects with a `code` property
//! (DESIGN.md, Conventions: "Node: `Error` with a `code` property"). The
//! codes are the core's `ErrorKind::code()` strings, the same names the C
//! API's `opsel_status_name()` returns.

use napi::bindgen_prelude::*;
use napi::NapiValue;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The `code` of a thrown error (`"OPSEL_INVALID_INPUT"` …).
#[derive(Debug, Clone, Copy)]
pub struct Code(pub &'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// A caught Rust panic (a bug in opsel): reported, never unwound into Node.
pub const PANIC: Code = Code("OPSEL_PANIC");

pub fn to_js(e: opsel::Error) -> napi::Error<Code> {
    napi::Error::new(Code(e.kind().code()), e.to_string())
}

pub fn invalid(msg: impl Into<String>) -> napi::Error<Code> {
    napi::Error::new(Code(opsel::ErrorKind::InvalidInput.code()), msg.into())
}

/// Run an export's body, turning a panic into an `OPSEL_PANIC` error.
pub fn guard<T>(body: impl FnOnce() -> napi::Result<T, Code>) -> napi::Result<T, Code> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".into());
        Err(napi::Error::new(
            PANIC,
            format!("internal error in opsel (a bug; please report it): {what}"),
        ))
    })
}

/// For async tasks, whose rejection path only carries a plain `napi::Error`:
/// build the coded JS error object here and hand it over by reference, so the
/// promise rejects with exactly this object (napi keeps referenced errors).
pub fn coded_error_value(env: Env, e: napi::Error<Code>) -> napi::Error {
    match coded_error_object(env, e) {
        Ok(o) => napi::Error::from(o.into_unknown()),
        Err(e) => e,
    }
}

/// The JS `Error` object of a coded error (`code`, `message`), to add
/// properties to: the one place the Node binding builds an error value by hand.
pub fn coded_error_object(env: Env, e: napi::Error<Code>) -> napi::Result<napi::JsObject> {
    // SAFETY: `env` is the live environment of the calling callback; `raw`
    // is the error object just created in it.
    unsafe {
        let raw = JsError::from(e).into_value(env.raw());
        Ok(napi::JsObject::from_raw_unchecked(env.raw(), raw))
    }
}
