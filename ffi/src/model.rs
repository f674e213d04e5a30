//! C wrappers for `opsel::model`: load, parse, save and serialise model files,
//! and the opaque `opsel_model` handle.

use crate::error::{guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use opsel::model::KnnModelFile;
use std::ffi::{c_char, CString};

/// A fitted DTW K-NN background-mix classifier with its model-file metadata.
///
/// Opaque: create with `opsel_model_load()`, `opsel_model_from_json()` or
/// `opsel_model_fit()`; release with `opsel_model_free()`.
/// Immutable after creation, so one model may be used by any number of
/// threads at once (each with its own `opsel_workspace`).
pub struct opsel_model {
    pub(crate) file: KnnModelFile,
    /// What classification runs: the file's model, or its two-stage
    /// classifier when the file has `stage2` (never stage 1 alone).
    pub(crate) clf: opsel::knn::AnyModel,
    /// Class names as C strings, so `opsel_model_class_name` can hand out
    /// pointers that live as long as the model.
    pub(crate) names: Vec<CString>,
}

impl opsel_model {
    pub(crate) fn new(file: KnnModelFile) -> Result<Self, Fail> {
        let names = file
            .model
            .classes()
            .iter()
            .map(|c| {
                CString::new(c.as_str()).map_err(|_| Fail {
                    status: opsel_status::OPSEL_INVALID_MODEL,
                    message: format!(
                        "class name {c:?} contains a NUL byte, which C strings cannot hold; rename the class"
                    ),
                })
            })
            .collect::<Result<_, _>>()?;
        let clf = file.any_model()?;
        Ok(Self { file, clf, names })
    }
}

/// Set `*out` to NULL first, so a failed create never leaves a stale pointer.
pub(crate) fn clear_out<'a, T>(out: *mut *mut T) -> Result<&'a mut *mut T, Fail> {
    let o = out_ptr(out, "out pointer")?;
    *o = std::ptr::null_mut();
    Ok(o)
}

/// Read and validate the model file at `path` (a NUL-terminated UTF-8 path)
/// and store a new model handle in `*out_model`.
///
/// Errors: `OPSEL_NULL_POINTER` (NULL `path` or `out_model`),
/// `OPSEL_INVALID_INPUT` (path not UTF-8), `OPSEL_IO` (cannot read the file),
/// `OPSEL_INVALID_MODEL` (not an opsel model, damaged, inconsistent),
/// `OPSEL_UNSUPPORTED_VERSION` (format version this build does not read).
/// On error `*out_model` is set to NULL (when `out_model` is not NULL).
///
/// Ownership: on success the caller owns `*out_model` and must release it
/// with `opsel_model_free()`. `path` is only borrowed during the call.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_load(
    path: *const c_char,
    out_model: *mut *mut opsel_model,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_model)?;
        let path = unsafe { utf8(path, "path") }?;
        let m = opsel_model::new(KnnModelFile::load(path)?)?;
        Handle::into_out(m, out);
        Ok(())
    })
}

/// Parse and validate model JSON: `json_len` bytes of UTF-8 at `json` (no NUL
/// terminator needed) and store a new model handle in `*out_model`.
///
/// Errors: as `opsel_model_load()` without `OPSEL_IO`; `OPSEL_INVALID_INPUT`
/// for zero length or bytes that are not UTF-8. On error `*out_model` is NULL.
///
/// Ownership: the caller owns `*out_model` (free with `opsel_model_free()`);
/// `json` is only borrowed during the call.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_from_json(
    json: *const c_char,
    json_len: usize,
    out_model: *mut *mut opsel_model,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_model)?;
        if json.is_null() {
            return Err(Fail::null("json"));
        }
        if json_len == 0 {
            return Err(Fail::invalid(
                "json has length 0; pass the bytes of an opsel model file",
            ));
        }
        // SAFETY: non-null; the caller promises json_len readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), json_len) };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Fail::invalid(format!(
                "model JSON is not valid UTF-8 (bad byte at offset {}); pass UTF-8 text",
                e.valid_up_to()
            ))
        })?;
        let m = opsel_model::new(KnnModelFile::from_json(text)?)?;
        Handle::into_out(m, out);
        Ok(())
    })
}

/// Write `model` as a model file at `path` (NUL-terminated UTF-8), atomically:
/// a temporary file `<path>.json.tmp` is written, then renamed over `path`.
///
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT` (path not UTF-8),
/// `OPSEL_IO` (cannot write or rename).
///
/// Ownership: borrows `model` and `path`. Thread-safety: any thread,
/// concurrently with other reads of `model`.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_save(
    model: *const opsel_model,
    path: *const c_char,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow(model) }?;
        let path = unsafe { utf8(path, "path") }?;
        m.file.save(path)?;
        Ok(())
    })
}

/// Serialise `model` to model-file JSON. Stores a new NUL-terminated string
/// in `*out_json` and its length in bytes (without the NUL) in `*out_len`
/// (`out_len` may be NULL).
///
/// Ownership: the caller owns `*out_json` and must release it with
/// `opsel_string_free()` (not `free()`). On error `*out_json` is NULL.
/// Thread-safety: any thread, concurrently with other reads of `model`.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_to_json(
    model: *const opsel_model,
    out_json: *mut *mut c_char,
    out_len: *mut usize,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let m = unsafe { Handle::borrow(model) }?;
        let text = m.file.to_json()?;
        let len = text.len();
        // serde_json escapes control characters, so the JSON holds no NUL.
        let c = CString::new(text).map_err(|_| Fail::invalid("model JSON contains NUL"))?;
        *out = c.into_raw();
        if !out_len.is_null() {
            // SAFETY: non-null; the caller promises a writable size_t.
            unsafe { *out_len = len };
        }
        Ok(())
    })
}

/// Release a string returned by opsel (`opsel_model_to_json()`).
/// NULL is ignored. Never pass a string twice or one not made by opsel.
/// Thread-safety: any thread, but not while the string is in use.
#[no_mangle]
pub unsafe extern "C" fn opsel_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: the caller promises `s` came from CString::into_raw in opsel.
        crate::handle::release(|| drop(unsafe { CString::from_raw(s) }));
    }
}

/// Release a model. NULL is ignored.
///
/// Ownership: `model` must come from an opsel create function and must not be
/// used afterwards (class-name pointers from it become invalid too).
/// Thread-safety: only when no other thread uses the model. Workspaces made
/// from the model stay valid (free them separately).
#[no_mangle]
pub unsafe extern "C" fn opsel_model_free(model: *mut opsel_model) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(model) }
}

/// Window length w (samples per window) the model classifies; 0 for NULL.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_window(model: *const opsel_model) -> usize {
    unsafe { Handle::borrow(model) }.map_or(0, |m| m.file.model.window())
}

/// Number of classes; 0 for NULL. Class indices run from 0 to this − 1.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_class_count(model: *const opsel_model) -> usize {
    unsafe { Handle::borrow(model) }.map_or(0, |m| m.names.len())
}

/// Number of reference windows; 0 for NULL.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_reference_count(model: *const opsel_model) -> usize {
    unsafe { Handle::borrow(model) }.map_or(0, |m| m.file.model.len())
}

/// Store a pointer to the NUL-terminated UTF-8 name of class `class_index`
/// (e.g. `"B1-C1"`) in `*out_name`.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` when `class_index` ≥
/// `opsel_model_class_count(model)`.
///
/// Ownership: the string belongs to the model; do not free it. It stays valid
/// until `opsel_model_free(model)`.
/// Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_class_name(
    model: *const opsel_model,
    class_index: usize,
    out_name: *mut *const c_char,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_name, "out_name")?;
        let m = unsafe { Handle::borrow(model) }?;
        let name = m.names.get(class_index).ok_or_else(|| {
            Fail::invalid(format!(
                "class index {class_index} is out of range; the model has {} classes",
                m.names.len()
            ))
        })?;
        *out = name.as_ptr();
        Ok(())
    })
}
