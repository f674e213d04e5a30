//! Address prefixes and prefix IDs (003 Table 3.3: "α prefix ID: the src/dst
//! address-prefix pair"; §3.5.2 evaluates /24 and /32).
//!
//! A /24 ID covers the 256 addresses of a subnet (the dissertation's "255" is a
//! slip, notes §12). IPv6 is not in the document; its prefix length is a
//! separate setting (\[Ours\], default /64).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// A masked address prefix such as `10.1.2.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// The prefix of `addr` with `len` leading bits kept. Errors if `len`
    /// exceeds the address width (32 or 128).
    pub fn new(addr: IpAddr, len: u8) -> Result<Self> {
        let width = match addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if len > width {
            return Err(Error::invalid(format!(
                "prefix length /{len} is longer than the {width}-bit address {addr}"
            )));
        }
        Ok(Self::masked(addr, len))
    }

    /// `new` without the length check; `len` is clamped to the address width.
    pub(crate) fn masked(addr: IpAddr, len: u8) -> Self {
        match addr {
            IpAddr::V4(a) => {
                let len = len.min(32);
                let m = if len == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(len))
                };
                Prefix {
                    addr: IpAddr::V4(Ipv4Addr::from(u32::from(a) & m)),
                    len,
                }
            }
            IpAddr::V6(a) => {
                let len = len.min(128);
                let m = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(len))
                };
                Prefix {
                    addr: IpAddr::V6(Ipv6Addr::from(u128::from(a) & m)),
                    len,
                }
            }
        }
    }

    /// The network address (host bits zero).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for the zero-length prefix (matches every address of its family).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `addr` lies inside this prefix (same family only).
    pub fn contains(&self, addr: IpAddr) -> bool {
        matches!(
            (self.addr, addr),
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_))
        ) && Self::masked(addr, self.len).addr == self.addr
    }

    /// Whether the two prefixes share any address (one contains the other).
    pub fn overlaps(&self, other: &Prefix) -> bool {
        if self.len <= other.len {
            self.contains(other.addr)
        } else {
            other.contains(self.addr)
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = Error;
    /// `"10.1.2.0/24"`, or a bare address taken as a host prefix (/32 or /128).
    fn from_str(s: &str) -> Result<Self> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| {
            Error::invalid(format!(
                "'{s}' is not an address prefix; write it like 10.1.2.0/24 or 2001:db8::/48"
            ))
        })?;
        let len = match l {
            Some(l) => l.trim().parse::<u8>().map_err(|_| {
                Error::invalid(format!(
                    "'{s}' has prefix length '{l}', which is not a number 0..=128"
                ))
            })?,
            None => match addr {
                IpAddr::V4(_) => 32,
                IpAddr::V6(_) => 128,
            },
        };
        Prefix::new(addr, len)
    }
}

impl Serialize for Prefix {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The identifier ω / ζ of a prefix flow: (source prefix, destination prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PrefixId {
    pub src: Prefix,
    pub dst: Prefix,
}

impl PrefixId {
    /// The ID of a src/dst address pair at the given IPv4 / IPv6 prefix lengths.
    pub fn of(src: IpAddr, dst: IpAddr, len_v4: u8, len_v6: u8) -> Self {
        let l = |a: IpAddr| match a {
            IpAddr::V4(_) => len_v4,
            IpAddr::V6(_) => len_v6,
        };
        PrefixId {
            src: Prefix::masked(src, l(src)),
            dst: Prefix::masked(dst, l(dst)),
        }
    }
}

impl fmt::Display for PrefixId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.src, self.dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_and_contains() {
        let p: Prefix = "10.1.2.77/24".parse().unwrap();
        assert_eq!(p.to_string(), "10.1.2.0/24");
        assert!(p.contains("10.1.2.255".parse().unwrap()));
        assert!(!p.contains("10.1.3.0".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
        let h: Prefix = "10.1.2.9".parse().unwrap();
        assert_eq!(h.len(), 32);
        assert!(p.overlaps(&h) && h.overlaps(&p));
        let v6: Prefix = "2001:db8:1:2::5/48".parse().unwrap();
        assert_eq!(v6.to_string(), "2001:db8:1::/48");
        let all: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("255.1.1.1".parse().unwrap()));
    }

    #[test]
    fn bad_prefixes_are_clear_errors() {
        for s in ["10.1.2.0/33", "::/129", "10.1.2/24", "x/8", "10.0.0.0/a"] {
            let e = s.parse::<Prefix>().unwrap_err().to_string();
            assert!(e.contains(s) || e.contains("longer"), "{s}: {e}");
        }
    }

    #[test]
    fn id_uses_family_lengths() {
        let id = PrefixId::of(
            "192.0.2.130".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
            24,
            64,
        );
        assert_eq!(id.to_string(), "192.0.2.0/24 -> 2001:db8::/64");
        let j = serde_json::to_string(&id).unwrap();
        assert_eq!(j, r#"{"src":"192.0.2.0/24","dst":"2001:db8::/64"}"#);
        assert_eq!(serde_json::from_str::<PrefixId>(&j).unwrap(), id);
    }
}
