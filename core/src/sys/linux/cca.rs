//! Congestion-control algorithms (CCAs): list what the kernel offers, read and
//! switch the CCA of a live TCP socket, and confirm the switch by reading back.
//!
//! OPS (000 §6, DESIGN.md "How data flows") switches the CCA of the
//! foreground connection between probing and steady phases without
//! reconnecting; Linux allows `TCP_CONGESTION` on an established socket and
//! the switch loses no data (asserted by `core/tests/sys_cca.rs`).

use std::os::fd::{AsFd, AsRawFd};

use super::sockopt::{get_raw, require_tcp, set_raw};
use crate::{Error, Result};

/// `TCP_CA_NAME_MAX` in `include/net/tcp.h`: 16 bytes including the NUL.
pub const CCA_NAME_MAX: usize = 15;

const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

/// The three CCAs OPS chooses between on this project's kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cca {
    Cubic,
    Bbr,
    Reno,
}

impl Cca {
    /// Kernel name as accepted by `TCP_CONGESTION`.
    pub fn as_str(self) -> &'static str {
        match self {
            Cca::Cubic => "cubic",
            Cca::Bbr => "bbr",
            Cca::Reno => "reno",
        }
    }

    /// Parse a kernel name; `None` for names outside the three.
    pub fn from_name(name: &str) -> Option<Cca> {
        match name {
            "cubic" => Some(Cca::Cubic),
            "bbr" => Some(Cca::Bbr),
            "reno" => Some(Cca::Reno),
            _ => None,
        }
    }
}

impl std::fmt::Display for Cca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn read_list(path: &str) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::io(
            format!("reading {path} (is /proc mounted and is this Linux with TCP?)"),
            e,
        )
    })?;
    Ok(parse_list(&text))
}

/// Split a space-separated sysctl list ("reno bbr cubic\n").
pub fn parse_list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// CCAs registered in the kernel (`net.ipv4.tcp_available_congestion_control`).
pub fn available_ccas() -> Result<Vec<String>> {
    read_list(AVAILABLE)
}

/// CCAs an unprivileged process may select
/// (`net.ipv4.tcp_allowed_congestion_control`); a process with
/// CAP_NET_ADMIN may select any available one.
pub fn allowed_ccas() -> Result<Vec<String>> {
    read_list(ALLOWED)
}

/// Check a CCA name before handing it to the kernel.
pub fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(
            "empty congestion-control name; use e.g. \"cubic\" or \"bbr\"",
        ));
    }
    if name.len() > CCA_NAME_MAX {
        return Err(Error::invalid(format!(
            "congestion-control name {name:?} is {} bytes; the kernel limit is {CCA_NAME_MAX}",
            name.len()
        )));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(Error::invalid(format!(
            "congestion-control name {name:?} has characters outside [A-Za-z0-9_-]"
        )));
    }
    Ok(())
}

/// The CCA currently used by the TCP socket `fd`.
pub fn get_cca(fd: impl AsFd) -> Result<String> {
    let fd = fd.as_fd();
    require_tcp(fd, "get congestion control")?;
    let mut buf = [0u8; CCA_NAME_MAX + 1];
    let n = get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        "getsockopt(TCP_CONGESTION)",
        &mut buf,
    )?;
    let raw = &buf[..n.min(buf.len())];
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8(raw[..end].to_vec()).map_err(|_| {
        Error::Unsupported(format!(
            "kernel returned a non-UTF-8 congestion-control name {:?} for fd {}",
            &raw[..end],
            fd.as_raw_fd()
        ))
    })
}

/// Switch the TCP socket `fd` to the CCA `name`, then read it back and fail
/// unless the kernel reports the same name. Returns the read-back name.
///
/// Errors: unknown name (ENOENT, the message lists the available CCAs), not
/// allowed for this process (EPERM, names
/// `net.ipv4.tcp_allowed_congestion_control`), `fd` not a TCP socket.
pub fn set_cca(fd: impl AsFd, name: &str) -> Result<String> {
    let fd = fd.as_fd();
    validate_name(name)?;
    require_tcp(fd, "set congestion control")?;
    if let Err(e) = set_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_bytes()) {
        let list = |r: Result<Vec<String>>| r.map(|v| v.join(" ")).unwrap_or_else(|_| "?".into());
        return Err(match e.raw_os_error() {
            Some(libc::ENOENT) => Error::invalid(format!(
                "congestion control {name:?} is not available in this kernel (available: {}); \
                 load its module (modprobe tcp_{name}) or pick an available one",
                list(available_ccas())
            )),
            Some(libc::EPERM) | Some(libc::EACCES) => Error::Permission(format!(
                "congestion control {name:?} is not allowed for this process (allowed: {}); \
                 add it to the sysctl net.ipv4.tcp_allowed_congestion_control or run with CAP_NET_ADMIN",
                list(allowed_ccas())
            )),
            _ => Error::io(format!("setsockopt(TCP_CONGESTION, {name:?}) on fd {}", fd.as_raw_fd()), e),
        });
    }
    let back = get_cca(fd)?;
    if back != name {
        return Err(Error::Unsupported(format!(
            "set congestion control {name:?} on fd {} but the kernel reports {back:?}",
            fd.as_raw_fd()
        )));
    }
    Ok(back)
}
