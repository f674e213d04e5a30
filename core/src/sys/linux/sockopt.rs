//! Small checked wrappers over `getsockopt`/`setsockopt` shared by the
//! adapter modules. Every error names the option and the descriptor.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::{Error, Result};

/// `getsockopt` into a byte buffer; returns the length the kernel wrote.
pub(crate) fn get_raw(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
    buf: &mut [u8],
) -> Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes; the kernel writes at most len and updates it.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(os_error(what, fd, io::Error::last_os_error()));
    }
    Ok(len as usize)
}

/// `getsockopt` of a plain `int` option.
pub(crate) fn get_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
) -> Result<libc::c_int> {
    let mut buf = [0u8; 4];
    let n = get_raw(fd, level, name, what, &mut buf)?;
    if n != 4 {
        return Err(Error::Unsupported(format!(
            "getsockopt({what}) on fd {} returned {n} bytes, expected 4",
            fd.as_raw_fd()
        )));
    }
    Ok(libc::c_int::from_ne_bytes(buf))
}

/// `setsockopt` with a byte slice value; returns the raw OS error so that
/// callers can map specific errnos (ENOENT, EPERM) to precise messages.
pub(crate) fn set_raw(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    val: &[u8],
) -> io::Result<()> {
    // SAFETY: val is a valid readable buffer of val.len() bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            val.as_ptr().cast(),
            val.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setsockopt` of a plain value (int, u64, struct) with a descriptive error.
pub(crate) fn set_val<T: Copy>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    what: &str,
    val: T,
) -> Result<()> {
    // SAFETY: T is Copy plain data; we view it as bytes for the syscall only.
    let bytes = unsafe {
        std::slice::from_raw_parts((&val as *const T).cast::<u8>(), std::mem::size_of::<T>())
    };
    set_raw(fd, level, name, bytes).map_err(|e| os_error(what, fd, e))
}

/// Map an OS error to an opsel error, naming the operation and fd.
pub(crate) fn os_error(what: &str, fd: BorrowedFd<'_>, e: io::Error) -> Error {
    let fdn = fd.as_raw_fd();
    match e.raw_os_error() {
        Some(libc::ENOTSOCK) => Error::invalid(format!(
            "{what}: fd {fdn} is not a socket; pass the descriptor of a socket"
        )),
        Some(libc::EBADF) => Error::invalid(format!(
            "{what}: fd {fdn} is not an open file descriptor"
        )),
        Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission(format!(
            "{what} on fd {fdn}: {e}; run with the needed capability (CAP_NET_ADMIN/CAP_NET_RAW) or as root"
        )),
        _ => Error::io(format!("{what} on fd {fdn}"), e),
    }
}

/// What kind of socket a descriptor is, from `SO_TYPE`/`SO_PROTOCOL`/`SO_DOMAIN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketKind {
    pub domain: libc::c_int,
    pub sock_type: libc::c_int,
    pub protocol: libc::c_int,
}

impl SocketKind {
    /// Query the kernel about `fd`. Fails with a clear message for non-sockets.
    pub fn of(fd: BorrowedFd<'_>) -> Result<Self> {
        Ok(SocketKind {
            sock_type: get_int(fd, libc::SOL_SOCKET, libc::SO_TYPE, "getsockopt(SO_TYPE)")?,
            protocol: get_int(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PROTOCOL,
                "getsockopt(SO_PROTOCOL)",
            )?,
            domain: get_int(
                fd,
                libc::SOL_SOCKET,
                libc::SO_DOMAIN,
                "getsockopt(SO_DOMAIN)",
            )?,
        })
    }

    /// True for an IPv4/IPv6 TCP (stream) socket.
    pub fn is_tcp(&self) -> bool {
        (self.domain == libc::AF_INET || self.domain == libc::AF_INET6)
            && self.sock_type == libc::SOCK_STREAM
            && self.protocol == libc::IPPROTO_TCP
    }

    /// Human description for error messages ("AF_INET SOCK_DGRAM proto 17").
    pub fn describe(&self) -> String {
        let d = match self.domain {
            libc::AF_INET => "AF_INET".to_string(),
            libc::AF_INET6 => "AF_INET6".to_string(),
            libc::AF_UNIX => "AF_UNIX".to_string(),
            libc::AF_NETLINK => "AF_NETLINK".to_string(),
            x => format!("domain {x}"),
        };
        let t = match self.sock_type {
            libc::SOCK_STREAM => "SOCK_STREAM".to_string(),
            libc::SOCK_DGRAM => "SOCK_DGRAM".to_string(),
            libc::SOCK_RAW => "SOCK_RAW".to_string(),
            libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".to_string(),
            x => format!("type {x}"),
        };
        format!("{d} {t} protocol {}", self.protocol)
    }
}

/// Fail unless `fd` is a TCP socket; `what` names the operation for the message.
pub(crate) fn require_tcp(fd: BorrowedFd<'_>, what: &str) -> Result<()> {
    let kind = SocketKind::of(fd).map_err(|e| match e {
        Error::InvalidInput(m) => Error::invalid(format!("{what}: {m}")),
        other => other,
    })?;
    if !kind.is_tcp() {
        return Err(Error::invalid(format!(
            "{what}: fd {} is a {} socket, not TCP; congestion control and TCP_INFO apply to TCP sockets only",
            fd.as_raw_fd(),
            kind.describe()
        )));
    }
    Ok(())
}
