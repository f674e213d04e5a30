//! Linux socket adapter. See the parent module for the overview.
//!
//! All functions take borrowed file descriptors (`BorrowedFd`, or anything
//! `AsFd`) so that the application keeps ownership of its sockets: opsel acts
//! on a live connection, it never closes it.

pub mod addr;
pub mod bwe_driver;
pub mod cca;
pub mod clock;
pub mod ops_driver;
pub mod pacing_rate;
pub mod qdisc;
pub mod receiver;
pub mod rtt;
pub mod sender;
pub mod signal;
pub mod tcp_info;
pub mod tcp_rtt;
pub mod tput;
pub mod wire;

mod netlink;
mod sockopt;

pub use addr::{bind_udp, parse_ip, parse_ipv4, parse_sock_addr, RawSock};
pub use cca::{allowed_ccas, available_ccas, get_cca, set_cca, Cca};
pub use ops_driver::{DriverConfig, DriverEvent, DriverReport, EndReason, OpsDriver, RttSource};
pub use pacing_rate::{get_max_pacing_rate, set_max_pacing_rate};
pub use tcp_info::{tcp_info, TcpInfo, TcpInfoSampler, TcpInterval};

use std::os::fd::{BorrowedFd, RawFd};

/// Call `f` with a borrowed view of a raw descriptor number, for callers that
/// only have an integer (C, Python, Node bindings). A negative `fd` is
/// rejected; a closed or foreign number makes the syscalls fail with EBADF /
/// ENOTSOCK, reported as [`crate::Error::InvalidInput`], never undefined
/// behaviour (the adapter only passes the number to the kernel).
///
/// ```no_run
/// # fn main() -> opsel::Result<()> {
/// let fd: std::os::fd::RawFd = 5; // from the application
/// let cca = opsel::sys::linux::with_raw_fd(fd, |fd| opsel::sys::linux::get_cca(fd))?;
/// # Ok(()) }
/// ```
pub fn with_raw_fd<T>(
    fd: RawFd,
    f: impl FnOnce(BorrowedFd<'_>) -> crate::Result<T>,
) -> crate::Result<T> {
    if fd < 0 {
        return Err(crate::Error::invalid(format!(
            "file descriptor {fd} is negative; pass an open socket descriptor"
        )));
    }
    // SAFETY: fd is non-negative; BorrowedFd is used only for syscalls during
    // `f`, where a stale number yields EBADF rather than memory unsafety.
    f(unsafe { BorrowedFd::borrow_raw(fd) })
}
