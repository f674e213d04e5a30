//! The one error type of opsel. Every message says what was wrong, with the
//! offending value, and what to do about it (DESIGN.md, Conventions).

use std::fmt;

/// Result alias used across opsel.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure opsel reports. Bad input is split from environment failures
/// so bindings can map it (Python: `ValueError` subclass; C: status code).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A caller-supplied value is invalid (NaN sample, wrong length, k too large …).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A model file or model JSON could not be accepted.
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A model file declares a version this build does not read.
    #[error("unsupported model version {found} (this build reads version {supported}); re-export the model with a matching opsel or upgrade opsel")]
    UnsupportedVersion { found: u64, supported: u64 },
    /// An operating-system call failed; `context` says which and on what.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// The operation needs a privilege the process does not have.
    #[error("permission denied: {0}")]
    Permission(String),
    /// The platform or kernel does not offer the requested feature.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// The coarse category of an [`Error`], stable across versions; bindings use it
/// for status codes (C), exception classes (Python) and `code` (Node).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    InvalidInput,
    InvalidModel,
    UnsupportedVersion,
    Io,
    Permission,
    Unsupported,
}

impl ErrorKind {
    /// Upper-case code used by the Node binding and in logs.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "OPSEL_INVALID_INPUT",
            ErrorKind::InvalidModel => "OPSEL_INVALID_MODEL",
            ErrorKind::UnsupportedVersion => "OPSEL_UNSUPPORTED_VERSION",
            ErrorKind::Io => "OPSEL_IO",
            ErrorKind::Permission => "OPSEL_PERMISSION",
            ErrorKind::Unsupported => "OPSEL_UNSUPPORTED",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput(_) => ErrorKind::InvalidInput,
            Error::InvalidModel(_) => ErrorKind::InvalidModel,
            Error::UnsupportedVersion { .. } => ErrorKind::UnsupportedVersion,
            Error::Io { .. } => ErrorKind::Io,
            Error::Permission(_) => ErrorKind::Permission,
            Error::Unsupported(_) => ErrorKind::Unsupported,
        }
    }

    /// Shorthand for [`Error::InvalidInput`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidInput(msg.into())
    }

    /// Wrap an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Reject NaN and infinite values, naming the first offending index and value.
/// `what` names the array for the message ("window", "reference 12").
pub fn check_finite(what: &str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::invalid(format!(
            "{what} has a non-finite value {} at index {i}; remove or interpolate NaN/inf samples before calling",
            values[i]
        ))),
    }
}
