//! Addresses and descriptors as the bindings receive them: strings such as
//! `"127.0.0.1:9000"` and integer descriptor numbers. Parsing and checking them
//! here gives Python, Node and C one error message per mistake
//! (`docs/architecture.md`, "Front ends convert").

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd, RawFd};

use crate::{Error, Result};

/// `"ip:port"` (`"[::1]:9000"` for IPv6); `what` names the argument in the error.
pub fn parse_sock_addr(s: &str, what: &str) -> Result<SocketAddr> {
    s.parse().map_err(|_| {
        Error::invalid(format!(
            "{what} {s:?} is not an address with a port; write e.g. \"127.0.0.1:9000\" or \"[::1]:9000\""
        ))
    })
}

/// An IPv4 or IPv6 address without a port.
pub fn parse_ip(s: &str, what: &str) -> Result<IpAddr> {
    s.parse().map_err(|_| {
        Error::invalid(format!(
            "{what} {s:?} is not an IP address; write e.g. \"10.0.0.2\""
        ))
    })
}

/// An IPv4 address (ICMP echo probes are IPv4 only).
pub fn parse_ipv4(s: &str, what: &str) -> Result<Ipv4Addr> {
    s.parse().map_err(|_| {
        Error::invalid(format!(
            "{what} {s:?} is not an IPv4 address; write e.g. \"10.0.0.2\""
        ))
    })
}

/// A UDP socket bound to `bind` (`"ip:port"`), or, without one, to an
/// ephemeral port on every address of `peer`'s family (IPv4 when no peer).
pub fn bind_udp(bind: Option<&str>, peer: Option<IpAddr>) -> Result<UdpSocket> {
    let addr = match (bind, peer) {
        (Some(b), _) => parse_sock_addr(b, "bind")?,
        (None, Some(IpAddr::V6(_))) => SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
        (None, _) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
    };
    UdpSocket::bind(addr).map_err(|e| Error::io(format!("bind UDP socket to {addr}"), e))
}

/// A descriptor number the caller keeps open, for types that hold an `AsFd`
/// (the `TCP_INFO` sampler) on behalf of a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSock(RawFd);

impl RawSock {
    /// A negative number is an invalid-input error.
    pub fn new(fd: RawFd) -> Result<Self> {
        if fd < 0 {
            return Err(Error::invalid(format!(
                "file descriptor {fd} is negative; pass an open TCP socket descriptor"
            )));
        }
        Ok(RawSock(fd))
    }
}

impl AsFd for RawSock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: non-negative (checked in `new`); a closed or foreign number
        // only makes the syscalls fail with EBADF / ENOTSOCK (see `with_raw_fd`).
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_the_argument_in_errors() {
        assert_eq!(parse_sock_addr("[::1]:9", "dst").unwrap().port(), 9);
        let e = parse_sock_addr("127.0.0.1", "dst").unwrap_err().to_string();
        assert!(
            e.contains("dst \"127.0.0.1\" is not an address with a port"),
            "{e}"
        );
        assert!(parse_ip("::1", "dst").unwrap().is_ipv6());
        assert!(parse_ipv4("::1", "dst").is_err());
        assert!(RawSock::new(-1).is_err());
        let s = bind_udp(Some("127.0.0.1:0"), None).unwrap();
        assert!(s.local_addr().unwrap().port() > 0);
    }
}
