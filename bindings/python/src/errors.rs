//! opsel::Error → Python exceptions. The classes live in `opsel/_errors.py`
//! (InvalidInputError is both an OpselError and a ValueError, which needs
//! multiple inheritance), so they are looked up by name when raised.

use opsel::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// Convert a core error into the matching `opsel` exception.
pub fn to_py(e: Error) -> PyErr {
    let class = match e.kind() {
        ErrorKind::InvalidInput => "InvalidInputError",
        ErrorKind::InvalidModel => "InvalidModelError",
        ErrorKind::UnsupportedVersion => "UnsupportedVersionError",
        ErrorKind::Io => "OpselIOError",
        ErrorKind::Permission => "OpselPermissionError",
        ErrorKind::Unsupported => "UnsupportedError",
    };
    let msg = e.to_string();
    Python::attach(
        |py| match py.import("opsel._errors").and_then(|m| m.getattr(class)) {
            Ok(cls) => PyErr::from_type(cls.cast_into().expect("exception class"), msg),
            Err(_) => PyRuntimeError::new_err(msg),
        },
    )
}

/// `Result<T, opsel::Error>` → `PyResult<T>`.
pub trait IntoPy<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for opsel::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
