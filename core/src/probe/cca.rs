//! A validated congestion-control name that is `Copy` and never allocates, so
//! controller actions can carry it on hot paths.

use crate::error::{Error, Result};
use std::fmt;

/// Longest CCA name Linux accepts: `TCP_CA_NAME_MAX` is 16 bytes including the
/// terminating NUL (include/net/tcp.h).
pub const CCA_NAME_MAX: usize = 15;

/// A congestion-control name such as `cubic` or `bbr`: lower-case ASCII
/// letters, digits and `_`, 1..=15 bytes. Whether the running kernel offers it
/// is checked by the socket adapter, not here.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CcaName {
    len: u8,
    buf: [u8; CCA_NAME_MAX],
}

impl CcaName {
    /// TCP CUBIC (the Linux default; the OPS choice when no BBR is present, 000 §4.1).
    pub const CUBIC: CcaName = CcaName::from_static("cubic");
    /// TCP BBR (v1 in the thesis; the OPS choice when BBR is present, 000 §4.1).
    pub const BBR: CcaName = CcaName::from_static("bbr");
    /// TCP Reno.
    pub const RENO: CcaName = CcaName::from_static("reno");

    const fn from_static(s: &str) -> CcaName {
        let b = s.as_bytes();
        let mut buf = [0u8; CCA_NAME_MAX];
        let mut i = 0;
        while i < b.len() {
            buf[i] = b[i];
            i += 1;
        }
        CcaName {
            len: b.len() as u8,
            buf,
        }
    }

    /// Validate and store a name; upper case is folded to lower case.
    pub fn new(name: &str) -> Result<Self> {
        let n = name.trim();
        if n.is_empty() || n.len() > CCA_NAME_MAX {
            return Err(Error::invalid(format!(
                "congestion control name {name:?} must be 1 to {CCA_NAME_MAX} characters (Linux TCP_CA_NAME_MAX); e.g. \"cubic\" or \"bbr\""
            )));
        }
        if !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(Error::invalid(format!(
                "congestion control name {name:?} may only hold letters, digits and '_'; e.g. \"cubic\" or \"bbr\""
            )));
        }
        let mut buf = [0u8; CCA_NAME_MAX];
        for (d, s) in buf.iter_mut().zip(n.bytes()) {
            *d = s.to_ascii_lowercase();
        }
        Ok(CcaName {
            len: n.len() as u8,
            buf,
        })
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        // Only ASCII bytes are ever stored (checked in `new`/`from_static`).
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("")
    }
}

impl fmt::Debug for CcaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for CcaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CcaName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        CcaName::new(s)
    }
}

impl PartialEq<str> for CcaName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CcaName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A CCA serializes as its name (`"bbr"`), as every front end shows it.
impl serde::Serialize for CcaName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(CcaName::new("BBR").unwrap(), CcaName::BBR);
        assert_eq!(CcaName::CUBIC.as_str(), "cubic");
        assert_eq!(CcaName::new("bbr2_x").unwrap().to_string(), "bbr2_x");
        for bad in ["", "a b", "cubic!", "sixteen_chars_xx"] {
            assert!(
                CcaName::new(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("congestion control name"),
                "{bad}"
            );
        }
    }
}
