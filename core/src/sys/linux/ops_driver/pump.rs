//! Moving the payload: read the caller's source in chunks, write what the
//! socket takes without blocking (bursts and steady phases send real file
//! bytes, "constructive active probing", 000 §1.2), and wait for the socket
//! or a prober sample until a deadline.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use super::{EndReason, NS_PER_S};
use crate::sys::linux::clock::monotonic_ns;
use crate::sys::linux::sockopt::os_error;
use crate::{Error, Result};

/// The longest a sending loop sleeps without looking at the stop flag.
pub(super) const MAX_WAIT_NS: u64 = 50_000_000;

/// Sends from a data source over the caller's socket: reads chunks, writes
/// without blocking past a deadline, counts bytes.
pub(super) struct Pump<'a> {
    fd: BorrowedFd<'a>,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    pub(super) total: u64,
}

impl<'a> Pump<'a> {
    pub(super) fn new(fd: BorrowedFd<'a>, chunk: usize) -> Self {
        Self {
            fd,
            buf: vec![0u8; chunk],
            pos: 0,
            len: 0,
            eof: false,
            total: 0,
        }
    }

    pub(super) fn drained(&self) -> bool {
        self.eof && self.pos == self.len
    }

    /// Write what the socket takes now; `Ok(false)` when it would block (or
    /// the source is done).
    pub(super) fn try_send(&mut self, source: &mut dyn Read) -> Result<bool> {
        if self.pos == self.len {
            if self.eof {
                return Ok(false);
            }
            let n = loop {
                match source.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io("read from the transfer's data source", e)),
                }
            };
            if n == 0 {
                self.eof = true;
                return Ok(false);
            }
            self.pos = 0;
            self.len = n;
        }
        let chunk = &self.buf[self.pos..self.len];
        // SAFETY: chunk is a valid readable buffer; fd is the caller's socket.
        let rc = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                chunk.as_ptr().cast(),
                chunk.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(os_error("send (transfer data)", self.fd, e)),
            };
        }
        self.pos += rc as usize;
        self.total += rc as u64;
        Ok(true)
    }

    /// Why a sending loop ends now, if it does: the stop flag, the time
    /// limit, or every byte of the source handed to the socket (checked in
    /// that order, the same for [`OpsDriver::run`](super::OpsDriver::run)
    /// and [`send_fixed`](super::send_fixed)).
    pub(super) fn end(
        &self,
        stop: &AtomicBool,
        now_ns: u64,
        limit_ns: Option<u64>,
    ) -> Option<EndReason> {
        if stop.load(Ordering::Relaxed) {
            Some(EndReason::Stopped)
        } else if limit_ns.is_some_and(|l| now_ns >= l) {
            Some(EndReason::TimeLimit)
        } else if self.drained() {
            Some(EndReason::Eof)
        } else {
            None
        }
    }
}

/// Wait until `deadline_ns` for the socket to become writable (if
/// `want_write`) or a sample to arrive on `wake`.
pub(super) fn wait(sock: BorrowedFd<'_>, want_write: bool, wake: &OwnedFd, deadline_ns: u64) {
    let left = deadline_ns.saturating_sub(monotonic_ns());
    if left == 0 {
        return;
    }
    let mut pfds = [
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        },
    ];
    let n = if want_write { 2 } else { 1 };
    let ts = libc::timespec {
        tv_sec: (left / NS_PER_S) as libc::time_t,
        tv_nsec: (left % NS_PER_S) as libc::c_long,
    };
    // SAFETY: pfds holds n valid pollfds; ts is a valid timespec.
    unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
}
