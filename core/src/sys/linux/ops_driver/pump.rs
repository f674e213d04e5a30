//! Moving the payload: read the caller's source in chunks, write what the
//! socket takes without blocking (bursts and steady phases send real file
//! bytes, "constructive active probing", 000 §1.2), and wait for the socket
//! or a prober sample until a deadline.
//!
//! A regular file can be sent with `sendfile(2)` instead ([`FileSource`]):
//! the kernel hands page-cache pages to the socket, so the sender makes no
//! user-space copy (docs/results/datapath.md: the copy into and out of the
//! pump's buffer was the sender's largest cost after hashing). The socket is
//! made non-blocking for the run (`sendfile` has no `MSG_DONTWAIT`), so
//! silences, `TCP_NOTSENT_LOWAT` and the stop flag work as with `send`.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{EndReason, NS_PER_S};
use crate::sys::linux::clock::monotonic_ns;
use crate::sys::linux::sockopt::os_error;
use crate::{Error, Result};

/// The longest a sending loop sleeps without looking at the stop flag.
pub(super) const MAX_WAIT_NS: u64 = 50_000_000;

/// The largest piece a file in copy mode ([`FileSource::copied`]) reads,
/// hashes and sends at a time: small enough that the three passes find it
/// in the core's cache (on loopback 256 KiB pieces were faster than 512 KiB
/// and 1 MiB ones: docs/results/datapath.md, "Loopback").
pub const COPY_CHUNK: usize = 256 << 10;

/// Where a driver's payload comes from.
pub enum Source<'a> {
    /// Any reader: read into the driver's buffer, then `send` it.
    Reader(&'a mut dyn Read),
    /// A range of a regular file, sent with `sendfile(2)` (no user-space
    /// copy), or copied through the buffer ([`FileSource::copied`]).
    File(FileSource<'a>),
}

/// The copy mode's callback: every byte the socket took, in order.
pub type OnSent<'a> = &'a mut dyn FnMut(&[u8]);

/// `[offset, end)` of a regular file for `sendfile(2)`. The file's own
/// position is not used or moved (sendfile takes an explicit offset).
pub struct FileSource<'a> {
    file: BorrowedFd<'a>,
    /// The next byte to hand to the socket.
    pos: u64,
    end: u64,
    progress: Option<&'a AtomicU64>,
    /// Copy mode ([`FileSource::copied`]): every byte the socket took.
    on_sent: Option<OnSent<'a>>,
}

impl<'a> FileSource<'a> {
    /// Send `file` from byte `offset` up to byte `end` (e.g. its size when
    /// the transfer began). Errors: `file` is not a regular file, or
    /// `offset > end`.
    pub fn new(file: BorrowedFd<'a>, offset: u64, end: u64) -> Result<Self> {
        // SAFETY: st is plain data filled by fstat on a valid fd.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::io(
                "fstat the file to send",
                io::Error::last_os_error(),
            ));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::invalid(
                "sendfile needs a regular file; send other sources through a reader",
            ));
        }
        if offset > end {
            return Err(Error::invalid(format!(
                "file source offset {offset} is past its end {end}"
            )));
        }
        Ok(Self {
            file,
            pos: offset,
            end,
            progress: None,
            on_sent: None,
        })
    }

    /// Send with `pread` into the pump's buffer and `send` instead of
    /// `sendfile`, and hand every byte the socket took to `on_sent`, in
    /// order, while it is still in the cache (the sender's hash: one pass
    /// over the data, covering exactly the bytes sent). For a receiver on
    /// the same host: `sendfile` gives the receiving socket the page-cache
    /// pages themselves, so the receiver's copy reads the file from memory
    /// instead of segments the sender just wrote, and the receiver, the
    /// slower side, pays for it (docs/results/datapath.md, "Loopback").
    pub fn copied(mut self, on_sent: OnSent<'a>) -> Self {
        self.on_sent = Some(on_sent);
        self
    }

    /// After every `sendfile`, store (Release) the file position up to which
    /// bytes have been handed to the socket: a second thread (the sender's
    /// hash) follows it without ever running ahead of what was sent.
    pub fn with_progress(mut self, progress: &'a AtomicU64) -> Self {
        progress.store(self.pos, Ordering::Release);
        self.progress = Some(progress);
        self
    }
}

/// Makes the socket non-blocking while a file is sent (`sendfile` blocks on a
/// blocking socket, which would delay silences and the stop flag), and
/// restores its flags on drop. Readers keep the socket as it is
/// (`send(MSG_DONTWAIT)`).
pub(super) struct NonBlockGuard<'a> {
    fd: BorrowedFd<'a>,
    old: Option<libc::c_int>,
}

impl<'a> NonBlockGuard<'a> {
    pub(super) fn set(fd: BorrowedFd<'a>, source: &Source<'_>) -> Result<Self> {
        if !matches!(source, Source::File(_)) {
            return Ok(Self { fd, old: None });
        }
        // SAFETY: fcntl on the caller's valid socket.
        let old = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if old < 0 {
            return Err(os_error("fcntl(F_GETFL)", fd, io::Error::last_os_error()));
        }
        if old & libc::O_NONBLOCK == 0 {
            // SAFETY: as above.
            if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, old | libc::O_NONBLOCK) } < 0 {
                return Err(os_error(
                    "fcntl(F_SETFL, O_NONBLOCK)",
                    fd,
                    io::Error::last_os_error(),
                ));
            }
        }
        Ok(Self { fd, old: Some(old) })
    }
}

impl Drop for NonBlockGuard<'_> {
    fn drop(&mut self) {
        if let Some(old) = self.old.filter(|o| o & libc::O_NONBLOCK == 0) {
            // SAFETY: as above.
            unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_SETFL, old) };
        }
    }
}

/// Sends from a data source over the caller's socket: reads chunks (or has
/// the kernel send file pages), writes without blocking past a deadline,
/// counts bytes.
pub(super) struct Pump<'a> {
    fd: BorrowedFd<'a>,
    buf: Vec<u8>,
    chunk: usize,
    pos: usize,
    len: usize,
    eof: bool,
    pub(super) total: u64,
}

impl<'a> Pump<'a> {
    /// A reader source gets a `chunk`-byte buffer, a file in copy mode one
    /// of at most [`COPY_CHUNK`]; a file source needs none and sends up to
    /// `chunk` bytes per `sendfile`.
    pub(super) fn new(fd: BorrowedFd<'a>, chunk: usize, source: &Source<'_>) -> Self {
        Self {
            fd,
            buf: match source {
                Source::Reader(_) => vec![0u8; chunk],
                Source::File(f) if f.on_sent.is_some() => vec![0u8; chunk.min(COPY_CHUNK)],
                Source::File(_) => Vec::new(),
            },
            chunk,
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
    pub(super) fn try_send(&mut self, source: &mut Source<'_>) -> Result<bool> {
        match source {
            Source::Reader(r) => self.try_send_read(&mut **r),
            Source::File(f) if f.on_sent.is_some() => self.try_send_copied(f),
            Source::File(f) => self.try_sendfile(f),
        }
    }

    /// Copy mode: the buffer holds the file's bytes `[f.pos, f.pos + len -
    /// pos)`; it is refilled with `pread` at `f.pos` once the socket took
    /// all of it.
    fn try_send_copied(&mut self, f: &mut FileSource<'_>) -> Result<bool> {
        if self.pos == self.len {
            if self.eof {
                return Ok(false);
            }
            if f.pos >= f.end {
                self.eof = true;
                return Ok(false);
            }
            let want = (f.end - f.pos).min(self.buf.len() as u64) as usize;
            let n = loop {
                // SAFETY: buf[..want] is valid writable memory; the fd is the caller's file.
                let rc = unsafe {
                    libc::pread(
                        f.file.as_raw_fd(),
                        self.buf.as_mut_ptr().cast(),
                        want,
                        f.pos as libc::off_t,
                    )
                };
                if rc >= 0 {
                    break rc as usize;
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(Error::io("read the file to send", e));
                }
            };
            if n == 0 {
                // The file ended before `end` (it shrank), as with sendfile.
                self.eof = true;
                return Ok(false);
            }
            self.pos = 0;
            self.len = n;
        }
        let Some(k) = self.send_buffered()? else {
            return Ok(false);
        };
        if let Some(cb) = f.on_sent.as_mut() {
            cb(&self.buf[self.pos - k..self.pos]);
        }
        f.pos += k as u64;
        if let Some(p) = f.progress {
            p.store(f.pos, Ordering::Release);
        }
        Ok(true)
    }

    fn try_sendfile(&mut self, f: &mut FileSource<'_>) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if f.pos >= f.end {
            self.eof = true;
            return Ok(false);
        }
        let want = (f.end - f.pos).min(self.chunk as u64) as usize;
        let mut off = f.pos as libc::off_t;
        // SAFETY: both fds are valid; off is a valid off_t the kernel advances.
        let rc = unsafe { libc::sendfile(self.fd.as_raw_fd(), f.file.as_raw_fd(), &mut off, want) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(os_error("sendfile (transfer data)", self.fd, e)),
            };
        }
        if rc == 0 {
            // The file ended before `end` (it shrank): stop here, as a reader
            // at EOF would.
            self.eof = true;
            return Ok(false);
        }
        f.pos += rc as u64;
        self.total += rc as u64;
        if let Some(p) = f.progress {
            p.store(f.pos, Ordering::Release);
        }
        Ok(true)
    }

    fn try_send_read(&mut self, source: &mut dyn Read) -> Result<bool> {
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
        Ok(self.send_buffered()?.is_some())
    }

    /// Send what the buffer holds (`buf[pos..len]`) without blocking;
    /// `Some(k)`: the socket took `k` bytes (`pos` and `total` advanced),
    /// `None`: it would block.
    fn send_buffered(&mut self) -> Result<Option<usize>> {
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
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(os_error("send (transfer data)", self.fd, e)),
            };
        }
        let k = rc as usize;
        self.pos += k;
        self.total += k as u64;
        Ok(Some(k))
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

#[cfg(test)]
mod tests {
    use super::super::{send_fixed_source, DriverConfig, EndReason};
    use super::*;
    use crate::probe::CcaName;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    fn flags(s: &TcpStream) -> libc::c_int {
        // SAFETY: fcntl on a valid socket.
        unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFL) }
    }

    #[test]
    fn a_file_range_goes_out_with_sendfile_and_the_progress_follows() {
        let path = std::env::temp_dir().join(format!("opsel-pump-sendfile-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).unwrap();
            got
        });
        let before = flags(&tx);
        assert_eq!(before & libc::O_NONBLOCK, 0);
        let progress = AtomicU64::new(0);
        let (offset, end) = (123_457u64, 2_900_001u64);
        let mut src = Source::File(
            FileSource::new(file.as_fd(), offset, end)
                .unwrap()
                .with_progress(&progress),
        );
        let cfg = DriverConfig {
            chunk_bytes: 100_000,
            notsent_lowat_bytes: None,
            ..DriverConfig::default()
        };
        let stop = AtomicBool::new(false);
        let r = send_fixed_source(&tx, &mut src, CcaName::CUBIC, &cfg, &stop, &mut |_| {}).unwrap();
        assert_eq!(r.end, EndReason::Eof);
        assert_eq!(r.bytes_sent, end - offset);
        assert_eq!(progress.load(Ordering::Acquire), end);
        // The socket is blocking again for the caller.
        assert_eq!(flags(&tx), before);
        drop(tx);
        let got = reader.join().unwrap();
        assert!(got == data[offset as usize..end as usize]);
        let _ = std::fs::remove_file(&path);
    }

    /// Copy mode: the receiver gets the range, `on_sent` sees exactly the
    /// bytes the socket took, in order, and the progress follows; stopped
    /// part-way (the reader stalls, the stop flag rises), `on_sent` still
    /// covers exactly `bytes_sent`, not the unsent rest of the buffer.
    #[test]
    fn a_copied_file_range_reports_exactly_the_bytes_sent() {
        let path = std::env::temp_dir().join(format!("opsel-pump-copied-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i * 11 + i / 257) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let cfg = DriverConfig {
            chunk_bytes: 100_000,
            notsent_lowat_bytes: None,
            ..DriverConfig::default()
        };
        let (offset, end) = (77_777u64, 2_950_001u64);
        // Whole range.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).unwrap();
            got
        });
        let (progress, stop) = (AtomicU64::new(0), AtomicBool::new(false));
        let mut seen = Vec::new();
        let mut on_sent = |b: &[u8]| seen.extend_from_slice(b);
        let mut src = Source::File(
            FileSource::new(file.as_fd(), offset, end)
                .unwrap()
                .with_progress(&progress)
                .copied(&mut on_sent),
        );
        let r = send_fixed_source(&tx, &mut src, CcaName::CUBIC, &cfg, &stop, &mut |_| {}).unwrap();
        assert_eq!((r.end, r.bytes_sent), (EndReason::Eof, end - offset));
        assert_eq!(progress.load(Ordering::Acquire), end);
        drop(tx);
        let range = &data[offset as usize..end as usize];
        assert!(reader.join().unwrap() == range);
        assert!(seen == range);
        // Stopped while the peer reads nothing: the (small) socket buffers
        // fill, the pump holds unsent bytes in its buffer when the flag rises.
        let small = |fd: libc::c_int, opt: libc::c_int| {
            let v: libc::c_int = 32 << 10;
            // SAFETY: setsockopt on a valid socket with an int value.
            let rc = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&v as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0);
        };
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        small(l.as_raw_fd(), libc::SO_RCVBUF);
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        small(tx.as_raw_fd(), libc::SO_SNDBUF);
        let (rx, _) = l.accept().unwrap();
        let mut seen = Vec::new();
        let mut on_sent = |b: &[u8]| seen.extend_from_slice(b);
        let mut src = Source::File(
            FileSource::new(file.as_fd(), offset, end)
                .unwrap()
                .copied(&mut on_sent),
        );
        let mut intervals = 0;
        let stop = AtomicBool::new(false);
        let cfg = DriverConfig {
            interval_ns: 20_000_000,
            ..cfg
        };
        let r = send_fixed_source(&tx, &mut src, CcaName::CUBIC, &cfg, &stop, &mut |e| {
            if matches!(e, super::super::DriverEvent::Interval { .. }) {
                intervals += 1;
                if intervals == 5 {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        })
        .unwrap();
        assert_eq!(r.end, EndReason::Stopped);
        assert!(
            r.bytes_sent > 0 && r.bytes_sent < end - offset,
            "{}",
            r.bytes_sent
        );
        assert!(seen == data[offset as usize..(offset + r.bytes_sent) as usize]);
        drop(rx);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn sendfile_needs_a_regular_file_and_an_offset_within_the_range() {
        let (r, _w) = super::super::prober::pipe().unwrap();
        let e = FileSource::new(r.as_fd(), 0, 10).err().unwrap().to_string();
        assert!(e.contains("regular file"), "{e}");
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let e = FileSource::new(f.as_fd(), 11, 10)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("offset 11 is past its end 10"), "{e}");
    }
}
