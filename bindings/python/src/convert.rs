//! Python values ↔ core serde types, for every module (not Linux-gated): specs
//! come in as dicts or JSON text and go through the core's `Deserialize`,
//! outputs go out through its `Serialize` (pythonize), so the keys and units
//! are the core's (`docs/architecture.md`, "One event schema").

use crate::errors::to_py;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// An invalid-input error (`opsel.InvalidInputError`).
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    to_py(opsel::Error::invalid(msg))
}

/// A core value as Python dicts, lists and numbers, through its serde form.
pub(crate) fn to_dict<'py, T: serde::Serialize>(
    py: Python<'py>,
    v: &T,
) -> PyResult<Bound<'py, PyDict>> {
    pythonize::pythonize(py, v)?
        .cast_into::<PyDict>()
        .map_err(|e| invalid(format!("a core value did not convert to a dict: {e}")))
}

/// A dict (or JSON text) as JSON text, for a core `from_json`.
pub(crate) fn json_text(v: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_string());
    }
    if v.cast::<PyDict>().is_err() {
        return Err(invalid(format!(
            "{what} must be a dict or JSON text, got {}",
            v.get_type().name()?
        )));
    }
    v.py()
        .import("json")?
        .call_method1("dumps", (v,))
        .and_then(|t| t.extract::<String>())
        .map_err(|e| invalid(format!("{what} is not JSON-serialisable: {e}")))
}

/// A dict (or JSON text) as a core serde value.
pub(crate) fn from_any<T: serde::de::DeserializeOwned>(
    v: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<T> {
    let text = json_text(v, what)?;
    serde_json::from_str(&text).map_err(|e| invalid(format!("bad {what}: {e}")))
}

/// [`from_any`], with None giving the default.
pub(crate) fn spec_or_default<T: serde::de::DeserializeOwned + Default>(
    v: Option<&Bound<'_, PyAny>>,
    what: &str,
) -> PyResult<T> {
    v.map_or_else(|| Ok(T::default()), |v| from_any(v, what))
}
