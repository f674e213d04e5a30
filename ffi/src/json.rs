//! JSON text in and out of the C API, for the specs, commands and reports
//! that are the core's serde types (DPS, flows): one place for the parse
//! errors and for handing a string to C.

use crate::error::{utf8, Fail};
use std::ffi::{c_char, CString};

/// Parse a NUL-terminated JSON argument into a core serde value.
pub(crate) fn arg<T: serde::de::DeserializeOwned>(p: *const c_char, what: &str) -> Result<T, Fail> {
    let text = unsafe { utf8(p, what) }?;
    serde_json::from_str(text).map_err(|e| Fail::invalid(format!("bad {what}: {e}")))
}

/// [`arg`], with NULL giving the default.
pub(crate) fn arg_or_default<T: serde::de::DeserializeOwned + Default>(
    p: *const c_char,
    what: &str,
) -> Result<T, Fail> {
    if p.is_null() {
        Ok(T::default())
    } else {
        arg(p, what)
    }
}

/// Store a serializable core value as a new C string in `*out` (released by
/// the caller with `opsel_string_free()`).
pub(crate) fn out<T: serde::Serialize>(v: &T, out: &mut *mut c_char) -> Result<(), Fail> {
    let text =
        serde_json::to_string(v).map_err(|e| Fail::invalid(format!("cannot serialise: {e}")))?;
    // serde_json escapes control characters, so the JSON holds no NUL.
    *out = CString::new(text)
        .map_err(|_| Fail::invalid("JSON contains NUL"))?
        .into_raw();
    Ok(())
}
