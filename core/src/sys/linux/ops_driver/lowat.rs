//! Silence must really be silent: with a large send buffer the kernel would
//! keep draining megabytes queued before a silent segment began (000 §3.2
//! active probing). The driver sets `TCP_NOTSENT_LOWAT` (default 128 KiB, what
//! the netlab training collection used) so that little unsent data sits in
//! the socket, and restores the previous value when it returns.

use std::os::fd::BorrowedFd;

use crate::sys::linux::sockopt::{get_int, set_val};
use crate::Result;

/// Sets `TCP_NOTSENT_LOWAT` and restores the previous value on drop.
pub(super) struct LowatGuard<'a> {
    fd: BorrowedFd<'a>,
    old: Option<libc::c_int>,
}

impl<'a> LowatGuard<'a> {
    pub(super) fn set(fd: BorrowedFd<'a>, bytes: Option<u32>) -> Result<Self> {
        let Some(b) = bytes else {
            return Ok(Self { fd, old: None });
        };
        let old = get_int(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            "getsockopt(TCP_NOTSENT_LOWAT)",
        )?;
        let v = b.min(i32::MAX as u32) as libc::c_int;
        set_val(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            "setsockopt(TCP_NOTSENT_LOWAT)",
            v,
        )?;
        Ok(Self { fd, old: Some(old) })
    }
}

impl Drop for LowatGuard<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            let _ = set_val(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                "setsockopt(TCP_NOTSENT_LOWAT)",
                old,
            );
        }
    }
}
