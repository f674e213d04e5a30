//! The driver's CCA calls: the allocation-free switch on the live socket
//! (000 Table 7.2: `TCP_CONGESTION` on the open connection, read back) and
//! the check that the kernel offers the CCAs a transfer may set.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::probe::CcaName;
use crate::sys::linux::cca::set_cca;
use crate::sys::linux::sockopt::{get_raw, set_raw};
use crate::{Error, Result};

/// `setsockopt(TCP_CONGESTION)` with read-back, allocation-free on success
/// (the hot path of every pattern segment). On failure the adapter's
/// [`set_cca`] runs again to produce its precise error (unknown CCA, not
/// allowed, not TCP).
pub(super) fn switch_cca(fd: BorrowedFd<'_>, cca: CcaName) -> Result<()> {
    let name = cca.as_str().as_bytes();
    if set_raw(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name).is_err() {
        return set_cca(fd, cca.as_str()).map(|_| ());
    }
    let mut buf = [0u8; 16];
    let n = get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        "getsockopt(TCP_CONGESTION)",
        &mut buf,
    )?;
    let raw = &buf[..n.min(16)];
    let back = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
    if back != name {
        return Err(Error::Unsupported(format!(
            "set congestion control {cca} on fd {} but the kernel reports {:?}",
            fd.as_raw_fd(),
            String::from_utf8_lossy(back)
        )));
    }
    Ok(())
}

/// Check that the kernel offers every CCA in `ccas`
/// (`net.ipv4.tcp_available_congestion_control`), e.g. those of
/// [`ControllerSpec::ccas`](crate::ops::ControllerSpec::ccas) before a
/// transfer, or a policy callback's answer before it reaches the live socket.
/// Reads the sysctl; opens no socket. A CCA built as a module that is not
/// loaded yet is reported as missing (load it with `modprobe tcp_<name>`).
pub fn check_ccas_available(ccas: &[CcaName]) -> Result<()> {
    let have = crate::sys::linux::cca::available_ccas()?;
    match ccas.iter().find(|c| !have.iter().any(|h| c.as_str() == h)) {
        None => Ok(()),
        Some(c) => Err(Error::invalid(format!(
            "congestion control {c:?} is not available in this kernel (available: {}); load it (modprobe tcp_{c}) or choose another",
            have.join(" ")
        ))),
    }
}
