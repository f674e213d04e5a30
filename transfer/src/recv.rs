//! `opsel recv` / `opsel serve`: a network server that accepts transfers
//! (protocol in `proto.rs`), writes each to a temporary file beside its
//! destination and renames it into place only once the byte count and the
//! digest (BLAKE3 or XXH3-128, `hashing.rs`) are confirmed, and answers UDP
//! echoes for the sender's RTT probe.
//!
//! Robustness (what any peer that reaches the port can do):
//! * every connection gets its own thread, a deadline for its handshake
//!   (`Limits::handshake`), reads of at most `proto::MAX_LINE` bytes per line,
//!   and at most `Limits::max_conns` connections exist at once
//!   (`Limits::max_conns_per_host` from one address);
//! * a bad peer is logged and dropped; the accept loop never exits because of one;
//! * one transfer at a time: a second authenticated sender is refused
//!   ("busy"), the running one is not disturbed;
//! * a running transfer is dropped after `Limits::idle` without data and when
//!   the sender sends more than it announced; its verified prefix stays in
//!   the `.NAME.opsel-part` file for a resume, the destination is untouched.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opsel::sys::linux::rtt::UdpEchoResponder;
use opsel::{Error, Result};

use super::hashing::{hash_state, HashSpec, Hasher};
use super::proto::{self, Key, LineReader, MAX_LINE, PREAMBLE_LEN};
use super::{random, write_line};

/// Where transfers go.
#[derive(Debug, Clone)]
pub enum Target {
    /// One file (`recv --out`); with `append`, an existing file may serve as
    /// the verified prefix of a resumed transfer.
    File { path: PathBuf, append: bool },
    /// A directory (`serve --dir`); each sender names its file (checked by `proto::safe_name`).
    Dir(PathBuf),
}

/// Bounds on what a peer may cost the receiver.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest file accepted, bytes.
    pub max_size: u64,
    /// From accept to an authenticated request, and for the data connection to arrive.
    pub handshake: Duration,
    /// Longest silence on a running transfer (data, then the completion
    /// message). Must exceed the longest silent segment of a probing pattern.
    pub idle: Duration,
    /// Connections open at once (handshakes and the running transfer); more
    /// are closed at once.
    pub max_conns: usize,
    /// The same from one host address, so one host cannot take every slot.
    pub max_conns_per_host: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_size: 1 << 40,
            handshake: Duration::from_secs(10),
            idle: Duration::from_secs(60),
            max_conns: 32,
            // One striped transfer is its control connection plus up to
            // MAX_STREAMS data connections, all from the sender's address;
            // twice that leaves room for the next transfer's handshake while
            // the last one's connections close.
            max_conns_per_host: 2 * (crate::proto::MAX_STREAMS as usize + 1),
        }
    }
}

/// What to receive and where.
#[derive(Debug, Clone)]
pub struct RecvOpts {
    pub listen: SocketAddr,
    pub target: Target,
    /// Replace an existing destination (only ever by a verified transfer).
    pub force: bool,
    /// Keep serving after a transfer (serve mode); otherwise return after the
    /// first verified transfer.
    pub keep_serving: bool,
    /// Give up when no connection arrives for this long while no transfer
    /// runs (`None` = wait forever).
    pub accept_timeout: Option<Duration>,
    pub limits: Limits,
    /// Pre-shared key: senders must prove they hold it (`None` = no authentication).
    pub key: Option<Key>,
}

/// Outcome of one received transfer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecvReport {
    pub peer: SocketAddr,
    pub path: PathBuf,
    pub offset: u64,
    pub received: u64,
    /// The check the sender asked for ("xxh3", "blake3", "blake3-keyed").
    pub hash: &'static str,
    /// Its digest of the bytes received (hex).
    pub digest: String,
    pub verified: bool,
    /// The whole file arrived and was renamed into place.
    pub complete: bool,
    pub file_size: u64,
    /// The same hash over the whole file `[0, file_size)` (hex).
    pub file_digest: String,
    #[serde(rename = "elapsed_s", serialize_with = "secs")]
    pub elapsed: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// A bound receiver (TCP listener + UDP echo responder on the same port).
pub struct Receiver {
    opts: RecvOpts,
    listener: TcpListener,
    echo: Option<UdpEchoResponder>,
}

/// The transfer waiting for its data connection.
struct Pending {
    token: [u8; proto::TOKEN_LEN],
    tx: mpsc::SyncSender<(u16, TcpStream)>,
    /// Data connections the transfer stripes over, and which have arrived.
    streams: u16,
    seen: u16,
}

struct Shared {
    opts: RecvOpts,
    busy: AtomicBool,
    pending: Mutex<Option<Pending>>,
    conns: AtomicUsize,
    per_host: Mutex<HashMap<IpAddr, usize>>,
    on_bytes: Arc<dyn Fn(u64) + Send + Sync>,
    log: Arc<dyn Fn(&str) + Send + Sync>,
}

/// Decrements the live-connection counts however a handler ends.
struct ConnGuard<'a>(&'a Shared, IpAddr);
impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.0.release_conn(self.1);
    }
}

impl Shared {
    /// Count a new connection from `ip`, or say why it must be dropped.
    fn admit_conn(&self, ip: IpAddr) -> std::result::Result<(), String> {
        let live = self.conns.fetch_add(1, Ordering::SeqCst);
        if live >= self.opts.limits.max_conns {
            self.conns.fetch_sub(1, Ordering::SeqCst);
            return Err(format!("{live} connections are already open (limit)"));
        }
        let mut m = self.per_host.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= self.opts.limits.max_conns_per_host {
            let n = *n;
            drop(m);
            self.conns.fetch_sub(1, Ordering::SeqCst);
            return Err(format!(
                "{n} connections from this host are already open (limit)"
            ));
        }
        *n += 1;
        Ok(())
    }

    fn release_conn(&self, ip: IpAddr) {
        self.conns.fetch_sub(1, Ordering::SeqCst);
        let mut m = self.per_host.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&ip);
            }
        }
    }
}

/// Clears the busy flag however a transfer ends (once).
struct BusyGuard<'a>(Option<&'a AtomicBool>);
impl BusyGuard<'_> {
    /// The transfer is over: the next sender may start (before the
    /// confirmation goes out, so a sender that starts right after it is not refused).
    fn release(&mut self) {
        if let Some(b) = self.0.take() {
            b.store(false, Ordering::SeqCst);
        }
    }
}
impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

fn timed_out(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_string())
}

/// Set the read timeout to what is left before `deadline` (error once passed).
fn until(s: &TcpStream, deadline: Instant) -> std::io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(timed_out("deadline passed"));
    }
    s.set_read_timeout(Some(left))
}

fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        until(s, deadline)?;
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("closed after {got} bytes"),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Why a read failed, in words a log reader needs.
pub(super) fn why(e: &std::io::Error, limit: Duration) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("silent for {:.1} s (limit)", limit.as_secs_f64())
        }
        std::io::ErrorKind::UnexpectedEof => format!("closed the connection ({e})"),
        std::io::ErrorKind::ConnectionReset => "reset the connection".into(),
        _ => e.to_string(),
    }
}

fn part_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    dest.with_file_name(format!(".{name}.opsel-part"))
}

/// Free bytes for an unprivileged writer in `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: zeroed statvfs is a valid out-parameter; `c` is NUL-terminated.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path pointer and out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Make a bound socket listen (on a listening one this only sets the
/// backlog). A caller that starts the receiver on another thread calls this
/// first, so that a sender may connect as soon as it returns.
pub fn listen(listener: &TcpListener) -> Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: listen(2) on a descriptor the caller owns.
    if unsafe { libc::listen(listener.as_raw_fd(), 128) } != 0 {
        return Err(Error::io(
            "listen on the receiver's socket (a bound TCP socket is needed)",
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

impl Receiver {
    /// Bind the listener and start the echo responder.
    pub fn bind(opts: RecvOpts) -> Result<Receiver> {
        let listener = TcpListener::bind(opts.listen).map_err(|e| {
            Error::io(
                format!("listen on {} (is another opsel recv running?)", opts.listen),
                e,
            )
        })?;
        Receiver::from_listener(listener, opts)
    }

    /// Serve on a socket the caller bound (`opts.listen` is not used),
    /// listening or not yet (it is made to listen). The control connection
    /// and every data connection of a transfer arrive on it. The UDP echo
    /// responder for the sender's RTT probe is started on the same port.
    pub fn from_listener(listener: TcpListener, opts: RecvOpts) -> Result<Receiver> {
        listen(&listener)?;
        if let Target::Dir(d) = &opts.target {
            if !d.is_dir() {
                return Err(Error::invalid(format!(
                    "--dir {} is not a directory; create it first",
                    d.display()
                )));
            }
        }
        let local = listener
            .local_addr()
            .map_err(|e| Error::io("listener address", e))?;
        // 000 §3.2: the RTT probe targets the peer; a UDP echo needs no privilege.
        let udp = UdpSocket::bind(local)
            .map_err(|e| Error::io(format!("bind the UDP echo responder on {local}"), e))?;
        let echo = UdpEchoResponder::spawn(udp, Duration::ZERO)?;
        Ok(Receiver {
            opts,
            listener,
            echo: Some(echo),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("listener address", e))
    }

    /// Serve transfers: return after the first verified one (one-shot), or
    /// never (keep serving) unless the accept timeout passes. `on_bytes(n)`
    /// sees every chunk written; `log` every event worth a line.
    pub fn serve(
        mut self,
        on_bytes: Arc<dyn Fn(u64) + Send + Sync>,
        log: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Result<RecvReport> {
        // The accept loop polls (non-blocking); a listener the caller handed
        // over (`from_listener`; a duplicated descriptor shares the flag)
        // gets its own flag back afterwards.
        use std::os::fd::AsFd;
        let restore = crate::Blocking::new(self.listener.as_fd());
        let r = self.serve_inner(on_bytes, log);
        if let Some(e) = self.echo.take() {
            let _ = e.stop();
        }
        let _ = self.listener.set_nonblocking(false);
        drop(restore);
        r
    }

    fn serve_inner(
        &mut self,
        on_bytes: Arc<dyn Fn(u64) + Send + Sync>,
        log: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Result<RecvReport> {
        let shared = Arc::new(Shared {
            opts: self.opts.clone(),
            busy: AtomicBool::new(false),
            pending: Mutex::new(None),
            conns: AtomicUsize::new(0),
            per_host: Mutex::new(HashMap::new()),
            on_bytes,
            log,
        });
        let (done_tx, done_rx) = mpsc::channel::<Result<RecvReport>>();
        self.listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("set listener non-blocking", e))?;
        // The loop sleeps in poll(2) on the listener and on this pair, which a
        // connection thread writes to after it sent its outcome: a new
        // connection or a finished transfer wakes it at once, and an idle
        // receiver wakes only to check the accept timeout.
        let (wake_rx, wake_tx) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| Error::io("create the receiver's wake-up pair", e))?;
        let _ = wake_rx.set_nonblocking(true);
        let wake_tx = Arc::new(wake_tx);
        let mut last_activity = Instant::now();
        loop {
            while let Ok(r) = done_rx.try_recv() {
                last_activity = Instant::now();
                match r {
                    Ok(rep) if rep.verified && !self.opts.keep_serving => return Ok(rep),
                    Ok(_) => {}
                    Err(e) => (shared.log)(&format!("transfer failed: {e}")),
                }
            }
            match self.listener.accept() {
                Ok((s, peer)) => {
                    last_activity = Instant::now();
                    if let Err(why) = shared.admit_conn(peer.ip()) {
                        (shared.log)(&format!("{peer}: dropped: {why}"));
                        continue;
                    }
                    let sh = shared.clone();
                    let tx = done_tx.clone();
                    let wake = wake_tx.clone();
                    let spawned = std::thread::Builder::new()
                        .name("opsel-recv-conn".into())
                        .spawn(move || {
                            // A second descriptor of the socket, closed only
                            // after the slot is released: a peer that sees
                            // its connection end may connect again at once
                            // without meeting the per-host cap (a sender
                            // retrying after a refusal, or the next sender
                            // after a dropped one). A data connection handed
                            // to its transfer stays open there.
                            let hold = s.try_clone().ok();
                            let g = ConnGuard(&sh, peer.ip());
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_nodelay(true);
                            if let Some(r) = handle_conn(&sh, s, peer) {
                                let _ = tx.send(r);
                                let _ = (&*wake).write(&[1]);
                            }
                            drop(g);
                            drop(hold);
                        });
                    if spawned.is_err() {
                        shared.release_conn(peer.ip());
                        (shared.log)(&format!("{peer}: dropped: cannot start a thread"));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Some(t) = self.opts.accept_timeout {
                        if !shared.busy.load(Ordering::SeqCst) && last_activity.elapsed() > t {
                            return Err(Error::io(
                                "waiting for a sender",
                                std::io::Error::new(
                                    std::io::ErrorKind::TimedOut,
                                    format!("no transfer arrived within {t:?}"),
                                ),
                            ));
                        }
                    }
                    wait_readable(&self.listener, &wake_rx, ACCEPT_POLL_MS);
                }
                // A connection that died before accept, or a full fd table:
                // back off and keep serving.
                Err(e) => {
                    (shared.log)(&format!("accept failed: {e}; retrying"));
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
}

/// How long the accept loop sleeps at most between looks at the accept
/// timeout (a connection or a finished transfer wakes it earlier).
const ACCEPT_POLL_MS: i32 = 100;

/// Sleep until `listener` has a connection, `wake` has bytes (drained
/// here), or `ms` milliseconds passed.
fn wait_readable(listener: &TcpListener, wake: &std::os::unix::net::UnixStream, ms: i32) {
    use std::os::fd::AsRawFd;
    let mut fds = [
        libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: fds is a valid array of two pollfd for the call's duration.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if n > 0 && fds[1].revents != 0 {
        let mut buf = [0u8; 64];
        while matches!((&*wake).read(&mut buf), Ok(k) if k > 0) {}
    }
}

/// One accepted connection: control, data, or something else.
/// Returns the outcome of a transfer, if this connection ran one.
fn handle_conn(sh: &Shared, mut s: TcpStream, peer: SocketAddr) -> Option<Result<RecvReport>> {
    let log = |m: String| (sh.log)(&format!("{peer}: {m}"));
    let deadline = Instant::now() + sh.opts.limits.handshake;
    let mut first = [0u8; 4];
    if let Err(e) = read_exact_by(&mut s, &mut first, deadline) {
        log(format!(
            "dropped before saying anything: {}",
            why(&e, sh.opts.limits.handshake)
        ));
        return None;
    }
    if first == proto::DATA_MAGIC {
        handle_data(sh, s, peer, first, deadline);
        return None;
    }
    if first[0] != b'{' {
        log(format!(
            "dropped: not an opsel sender (first bytes {})",
            proto::excerpt(&first)
        ));
        return None;
    }
    handle_control(sh, s, peer, first, deadline)
}

fn handle_data(sh: &Shared, mut s: TcpStream, peer: SocketAddr, first: [u8; 4], deadline: Instant) {
    let log = |m: String| (sh.log)(&format!("{peer}: {m}"));
    let mut p = [0u8; PREAMBLE_LEN];
    p[..4].copy_from_slice(&first);
    if let Err(e) = read_exact_by(&mut s, &mut p[4..], deadline) {
        log(format!(
            "data connection dropped: incomplete preamble: {}",
            why(&e, sh.opts.limits.handshake)
        ));
        return;
    }
    let (token, stream) = match proto::parse_preamble(&p) {
        Ok(x) => x,
        Err(e) => {
            log(format!("data connection dropped: {e}"));
            return;
        }
    };
    let mut pending = sh.pending.lock().unwrap_or_else(|e| e.into_inner());
    let matches = pending
        .as_ref()
        .is_some_and(|pd| proto::same_token(&pd.token, &token));
    let why_not = match pending.as_ref() {
        Some(pd) if matches && stream >= pd.streams => Some(format!(
            "this transfer stripes over {} data connections (indices 0 to {})",
            pd.streams,
            pd.streams - 1
        )),
        Some(pd) if matches && pd.seen & (1 << stream) != 0 => {
            Some("a connection with this stream index already arrived".to_string())
        }
        _ if matches => None,
        _ => Some("its token belongs to no transfer waiting for data".to_string()),
    };
    if let Some(w) = why_not {
        drop(pending);
        log(format!("data connection dropped: {w} (stream {stream})"));
        return;
    }
    if let Some(pd) = pending.as_mut() {
        pd.seen |= 1 << stream;
        let _ = pd.tx.try_send((stream, s));
        // Taken once every stream arrived: a further connection with the
        // same token finds nothing.
        if pd.seen.count_ones() == u32::from(pd.streams) {
            pending.take();
        }
    }
}

/// Reply with a refusal, log it, and end the connection.
fn refuse(w: &mut TcpStream, log: &dyn Fn(String), msg: String) {
    let _ = w.set_write_timeout(Some(Duration::from_secs(2)));
    let _ = write_line(w, &proto::refusal_msg(&msg));
    log(format!("refused: {msg}"));
}

fn handle_control(
    sh: &Shared,
    s: TcpStream,
    peer: SocketAddr,
    first: [u8; 4],
    deadline: Instant,
) -> Option<Result<RecvReport>> {
    let log = |m: String| (sh.log)(&format!("{peer}: {m}"));
    let hs = sh.opts.limits.handshake;
    let mut w = match s.try_clone() {
        Ok(w) => w,
        Err(e) => {
            log(format!("dropped: cannot clone the socket: {e}"));
            return None;
        }
    };
    let _ = w.set_write_timeout(Some(hs));
    let mut r = LineReader::with_prefix(s, &first);
    let line = |r: &mut LineReader<TcpStream>| -> std::result::Result<Vec<u8>, String> {
        match r.read_line(MAX_LINE, |s| until(s, deadline)) {
            Ok(Some(l)) => Ok(l),
            Ok(None) => Err("closed the connection".into()),
            Err(e) => Err(why(&e, hs)),
        }
    };
    let hello = match line(&mut r) {
        Ok(l) => l,
        Err(e) => {
            log(format!("dropped during the hello: {e}"));
            return None;
        }
    };
    let nonce = match proto::parse_hello(&hello) {
        Ok(n) => n,
        Err(proto::HelloError::Version(v)) => {
            refuse(&mut w, &log, proto::version_refusal(v));
            return None;
        }
        Err(proto::HelloError::NotOpsel(e)) => {
            log(format!("dropped: {e}"));
            return None;
        }
    };
    let challenge = proto::Challenge {
        auth: sh.opts.key.is_some(),
        challenge: random(),
    };
    if let Err(e) = write_line(&mut w, &proto::challenge_msg(&challenge)) {
        log(format!("dropped: cannot send the challenge: {e}"));
        return None;
    }
    let req_line = match line(&mut r) {
        Ok(l) => l,
        Err(e) => {
            log(format!("dropped before its request: {e}"));
            return None;
        }
    };
    let req = match proto::parse_request(&req_line) {
        Ok(q) => q,
        Err(e) => {
            // Say why only to a peer that may write; anyone else learns nothing.
            if sh.opts.key.is_none() {
                refuse(&mut w, &log, e.0);
            } else {
                log(format!("dropped: bad request: {e}"));
            }
            return None;
        }
    };
    let proof = match &sh.opts.key {
        Some(k) => {
            let ok = req
                .mac
                .as_ref()
                .is_some_and(|m| k.check_sender(&challenge.challenge, &nonce, m));
            if !ok {
                refuse(
                    &mut w,
                    &log,
                    format!(
                        "authentication failed ({}): the sender needs the receiver's pre-shared key (--key-file or OPSEL_KEY)",
                        if req.mac.is_some() { "wrong key" } else { "no key" }
                    ),
                );
                return None;
            }
            Some(k.receiver_proof(&nonce, &challenge.challenge))
        }
        None => None,
    };
    // With a pre-shared key the check must be tamper-evident: keyed BLAKE3
    // under this transfer's data key (proto.rs; docs/results/datapath.md,
    // "The integrity guarantee"). xxh3 is refused, not silently upgraded,
    // so both sides always agree on what was checked.
    let hash = match &sh.opts.key {
        Some(_) if req.hash != proto::HashAlgo::Blake3 => {
            refuse(
                &mut w,
                &log,
                format!(
                    "this receiver uses a pre-shared key, so transfers are checked with keyed BLAKE3, not {}: send with --hash blake3 (the default with a key)",
                    req.hash
                ),
            );
            return None;
        }
        Some(k) => HashSpec {
            algo: proto::HashAlgo::Blake3,
            key: Some(k.data_key(&challenge.challenge, &nonce)),
        },
        None => HashSpec::plain(req.hash),
    };
    // Authenticated (or no key configured): one transfer at a time.
    if sh
        .busy
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        refuse(
            &mut w,
            &log,
            "busy: another transfer is running on this receiver; retry when it ends".into(),
        );
        return None;
    }
    let mut busy = BusyGuard(Some(&sh.busy));
    let out = run_transfer(sh, &mut w, r, peer, &req, proof, hash, &mut busy);
    busy.release();
    match &out {
        Ok(rep) => log(format!(
            "{} {} bytes into {} (from offset {}): {}",
            if rep.verified {
                "verified"
            } else {
                "MISMATCH of"
            },
            rep.received,
            rep.path.display(),
            rep.offset,
            if rep.complete {
                "complete, renamed into place".to_string()
            } else if rep.verified {
                format!(
                    "a verified prefix of {} bytes is kept for a resume (opsel send --resume)",
                    rep.file_size
                )
            } else {
                "the unverified bytes were dropped".to_string()
            }
        )),
        Err(e) => {
            let _ = w.set_write_timeout(Some(Duration::from_secs(2)));
            let _ = write_line(&mut w, &proto::refusal_msg(&e.to_string()));
            log(format!("transfer dropped: {e}"));
        }
    }
    Some(out)
}

/// The destination path of a request.
fn destination(opts: &RecvOpts, req: &proto::Request) -> Result<(PathBuf, bool)> {
    match &opts.target {
        Target::File { path, append } => Ok((path.clone(), *append)),
        Target::Dir(dir) => {
            let name = req.name.as_deref().ok_or_else(|| {
                Error::invalid(
                    "the sender named no file; a serve directory needs a name (opsel send --name)",
                )
            })?;
            let name = proto::safe_name(name).map_err(|e| Error::invalid(e.0))?;
            Ok((dir.join(name), false))
        }
    }
}

/// Open the part file holding exactly `offset` verified-to-be bytes (a
/// prefix the sender checks against its own file before sending).
// The request's fields and the receiver's options, passed apart (a struct for
// one private call site would only rename them).
#[allow(clippy::too_many_arguments)]
fn prepare_part(
    dest: &Path,
    part: &Path,
    append: bool,
    offset_req: Option<u64>,
    size: u64,
    force: bool,
    max_size: u64,
    hash: &HashSpec,
) -> Result<(File, u64, Hasher)> {
    if size > max_size {
        return Err(Error::invalid(format!(
            "the file has {size} bytes, more than this receiver's --max-size {max_size}"
        )));
    }
    let meta = |p: &Path| std::fs::symlink_metadata(p).ok();
    let dest_meta = meta(dest);
    if let Some(m) = &dest_meta {
        if !m.is_file() {
            return Err(Error::invalid(format!(
                "{} exists and is not a regular file; choose another destination",
                dest.display()
            )));
        }
        if !force && !append {
            return Err(Error::invalid(format!(
                "{} already exists; the receiver replaces a file only with --force (and only by a verified transfer), or resumes it with --append",
                dest.display()
            )));
        }
    }
    let part_meta = meta(part);
    if part_meta.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(Error::invalid(format!(
            "{} exists and is not a regular file; remove it",
            part.display()
        )));
    }
    // The prefix on hand: an earlier transfer's part file, else (with
    // --append) the destination itself.
    let (base_len, from_dest) = match (&part_meta, &dest_meta) {
        (Some(m), _) => (m.len(), false),
        (None, Some(m)) if append => (m.len(), true),
        _ => (0, false),
    };
    let offset = offset_req.unwrap_or(base_len.min(size));
    if offset > 0 {
        if base_len == 0 {
            return Err(Error::invalid(format!(
                "nothing to resume: no earlier bytes of {} are here; start at offset 0",
                dest.display()
            )));
        }
        if (from_dest && base_len != offset) || base_len < offset {
            return Err(Error::invalid(format!(
                "{} holds {base_len} bytes but the sender starts at offset {offset}; resume with `opsel send --offset {base_len}` (or --resume)",
                if from_dest { dest } else { part }.display()
            )));
        }
    }
    let need = size - offset + if from_dest { offset } else { 0 };
    let dir = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Some(free) = free_bytes(dir) {
        if need > free {
            return Err(Error::invalid(format!(
                "{} has {free} bytes free but the transfer needs {need}; free some space",
                dir.display()
            )));
        }
    }
    if from_dest && offset > 0 {
        // Never write into the user's file: extend a copy, rename when verified.
        std::fs::copy(dest, part).map_err(|e| {
            let _ = std::fs::remove_file(part);
            Error::io(format!("copy {} to {}", dest.display(), part.display()), e)
        })?;
    }
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(offset == 0)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(part)
        .map_err(|e| Error::io(format!("create {}", part.display()), e))?;
    f.set_len(offset)
        .map_err(|e| Error::io(format!("truncate {} to {offset}", part.display()), e))?;
    // The prefix is re-hashed with this transfer's hash (and key): a resume
    // may use another hash than the transfer that wrote the prefix.
    let (n, prefix_state) = hash_state(part, 0, Some(offset), hash)?;
    if n != offset {
        return Err(Error::invalid(format!(
            "{} holds {n} bytes, not {offset}",
            part.display()
        )));
    }
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {}", part.display()), e))?;
    Ok((f, offset, prefix_state))
}

#[allow(clippy::too_many_arguments)]
fn run_transfer(
    sh: &Shared,
    w: &mut TcpStream,
    mut r: LineReader<TcpStream>,
    peer: SocketAddr,
    req: &proto::Request,
    proof: Option<[u8; 32]>,
    hash: HashSpec,
    busy: &mut BusyGuard,
) -> Result<RecvReport> {
    let log = |m: String| (sh.log)(&format!("{peer}: {m}"));
    let lim = sh.opts.limits;
    let start = Instant::now();
    let (dest, append) = destination(&sh.opts, req)?;
    let part = part_path(&dest);
    let (file, offset, prefix_state) = prepare_part(
        &dest,
        &part,
        append,
        req.offset,
        req.size,
        sh.opts.force,
        lim.max_size,
        &hash,
    )?;
    let prefix = prefix_state.finalize();
    let token: [u8; proto::TOKEN_LEN] = random();
    let n_streams = req.streams.max(1);
    let (tx, rx) = mpsc::sync_channel::<(u16, TcpStream)>(usize::from(n_streams));
    *sh.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(Pending {
        token,
        tx,
        streams: n_streams,
        seen: 0,
    });
    let accept = proto::Accept {
        token,
        offset,
        prefix_digest: prefix,
        proof,
        streams: n_streams,
    };
    let clear = || {
        sh.pending.lock().unwrap_or_else(|e| e.into_inner()).take();
    };
    if let Err(e) = write_line(w, &proto::accept_msg(&accept)) {
        clear();
        return Err(e);
    }
    log(format!(
        "accepted: {} bytes from offset {offset} into {}",
        req.size - offset,
        dest.display()
    ));
    // Every data connection of the transfer, within the handshake limit.
    let deadline = Instant::now() + lim.handshake;
    let mut conns: Vec<Option<TcpStream>> = (0..n_streams).map(|_| None).collect();
    let mut arrived = 0u16;
    while arrived < n_streams {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((i, c)) => {
                conns[usize::from(i)] = Some(c);
                arrived += 1;
            }
            Err(_) => break,
        }
    }
    clear();
    if arrived < n_streams {
        if offset == 0 {
            // Nothing was written: leave no empty part file behind.
            let _ = std::fs::remove_file(&part);
        }
        return Err(Error::invalid(if arrived == 0 {
            format!(
                "no data connection arrived within {:.1} s",
                lim.handshake.as_secs_f64()
            )
        } else {
            format!(
                "only {arrived} of {n_streams} data connections arrived within {:.1} s",
                lim.handshake.as_secs_f64()
            )
        }));
    }
    let conns: Vec<TcpStream> = conns.into_iter().flatten().collect();
    let expect = req.size - offset;
    let fail = |file: File, received: u64, msg: String| -> Error {
        // Keep what arrived (a later resume checks it against the sender's file).
        let _ = file.sync_all();
        Error::invalid(format!(
            "{msg}; {} bytes of {} are kept in {} and the destination is untouched; resume with `opsel send --resume`",
            offset + received,
            req.size,
            part.display()
        ))
    };
    let (file, received, sha, whole_sha) = if n_streams > 1 {
        match super::streams::receive(
            file,
            &part,
            offset,
            req.size,
            conns,
            prefix_state,
            hash,
            lim.idle,
            &*sh.on_bytes,
        ) {
            Ok(r) => r,
            Err((file, kept, msg)) => return Err(fail(file, kept, msg)),
        }
    } else {
        let mut data = conns
            .into_iter()
            .next()
            .expect("one data connection arrived");
        data.set_read_timeout(Some(lim.idle))
            .map_err(|e| Error::io("data read timeout", e))?;
        // Socket reads + hashing and file writes run on two threads joined by a
        // bounded pool of buffers, so neither waits for the other (memory: at
        // most POOL * BUF bytes per transfer). The hash runs on the reading
        // thread, over each buffer right after it arrived (still in the cache),
        // which splits the work about evenly between the threads
        // (docs/results/datapath.md: with hash and write together the writer
        // was the receiver's critical path). The buffers reach the writer in
        // the order they were hashed, and the digests are used only when every
        // buffer was written, so they cover exactly the bytes written.
        const POOL: usize = 4;
        const BUF: usize = 1 << 20;
        let (full_tx, full_rx) = mpsc::sync_channel::<(Vec<u8>, usize)>(POOL);
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<u8>>(POOL);
        for _ in 0..POOL {
            let _ = free_tx.send(vec![0u8; BUF]);
        }
        let part_w = part.clone();
        let writer = std::thread::Builder::new()
            .name("opsel-recv-write".into())
            .spawn(move || {
                let mut file = file;
                let mut written = 0u64;
                for (buf, n) in full_rx {
                    if let Err(e) = file.write_all(&buf[..n]) {
                        let msg = format!("write {}: {e}", part_w.display());
                        return (file, written, Err(msg));
                    }
                    written += n as u64;
                    let _ = free_tx.send(buf);
                }
                (file, written, Ok(()))
            })
            .map_err(|e| Error::io("start the writer thread", e))?;
        // The whole-file hash continues the prefix's (read from the part file
        // above); from offset 0 the range is the whole file.
        let mut whole = prefix_state;
        let mut range = (offset > 0).then(|| hash.hasher());
        let mut received = 0u64;
        let mut read_err: Option<String> = None;
        // Each buffer is filled by as many reads as it takes to hold FILL bytes
        // (or the stream ends) before it is hashed and handed to the writer: a
        // read returns what has arrived, often a few segments at netlab rates,
        // and one hand-off and one hash update per read cost the receiver
        // CPU that the path then lacks (docs/results/datapath.md, netlab).
        const FILL: usize = BUF / 2;
        // A buffer is free again once written; none means the writer stopped (an error).
        while let Ok(mut buf) = free_rx.recv() {
            let mut n = 0usize;
            let mut done = false;
            while n < FILL {
                match data.read(&mut buf[n..]) {
                    Ok(0) => {
                        done = true;
                        break;
                    }
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        read_err = Some(format!(
                            "the data connection {} after {} bytes",
                            why(&e, lim.idle),
                            received + n as u64
                        ));
                        done = true;
                        break;
                    }
                }
            }
            if received + n as u64 > expect {
                // Keep what was announced; refuse the rest.
                n = (expect - received) as usize;
                read_err = Some(format!(
                    "the sender sent more than the {expect} bytes it announced"
                ));
                done = true;
            }
            if n > 0 {
                whole.update(&buf[..n]);
                if let Some(r) = range.as_mut() {
                    r.update(&buf[..n]);
                }
                if full_tx.send((buf, n)).is_err() {
                    break;
                }
                received += n as u64;
                (sh.on_bytes)(n as u64);
            }
            if done {
                break;
            }
        }
        drop(full_tx);
        let (file, written, wrote) = match writer.join() {
            Ok(r) => r,
            Err(_) => return Err(Error::invalid("the writer thread failed")),
        };
        if let Err(msg) = wrote {
            return Err(fail(file, written, msg));
        }
        if let Some(msg) = read_err {
            return Err(fail(file, written, msg));
        }
        if written != received {
            // The writer stopped early without an error: never rename a file
            // whose hash covers bytes that are not in it.
            return Err(fail(
                file,
                written,
                format!("internal: {received} bytes received but {written} written"),
            ));
        }
        let whole_sha = whole.finalize();
        let sha = range.map_or(whole_sha, |r| r.finalize());
        (file, written, sha, whole_sha)
    };
    file.sync_all()
        .map_err(|e| Error::io(format!("fsync {}", part.display()), e))?;
    // The completion message, within the idle limit.
    let end_deadline = Instant::now() + lim.idle;
    let end = match r.read_line(MAX_LINE, |s| until(s, end_deadline)) {
        Ok(Some(l)) => proto::parse_end(&l, hash.algo).map_err(|e| Error::invalid(e.0)),
        Ok(None) => Err(Error::invalid("the sender closed the control connection")),
        Err(e) => Err(Error::invalid(why(&e, lim.idle))),
    }
    .map_err(|e| {
        Error::invalid(format!(
            "the sender ended without its completion message after {received} bytes ({e}); {} bytes are kept in {} and the destination is untouched; resume with `opsel send --resume`",
            offset + received,
            part.display()
        ))
    })?;
    // The part file's length now; its content is the verified prefix plus
    // every received byte, written in order by the one writer thread and
    // hashed as written.
    let file_size = file
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", part.display()), e))?
        .len();
    let file_sha = whole_sha;
    let verified = end.sent == received
        && end.digest == sha
        && file_sha == end.file_digest
        && file_size == offset + received;
    let mut complete = verified && file_size == req.size;
    if !verified {
        // Only a verified prefix may remain for a resume.
        let _ = file.set_len(offset);
        let _ = file.sync_all();
        if offset == 0 {
            let _ = std::fs::remove_file(&part);
        }
    } else if complete {
        // The destination may have appeared meanwhile: the same rule as at the start.
        if std::fs::symlink_metadata(&dest).is_ok() && !sh.opts.force && !append {
            complete = false;
            log(format!(
                "{} appeared during the transfer; the verified file stays in {} (no --force)",
                dest.display(),
                part.display()
            ));
        } else {
            std::fs::rename(&part, &dest).map_err(|e| {
                Error::io(
                    format!("rename {} to {}", part.display(), dest.display()),
                    e,
                )
            })?;
            let dir = dest
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let _ = fsync_dir(dir);
        }
    }
    let conf = proto::Confirm {
        ok: verified,
        received,
        digest: sha,
        file_size,
        file_digest: file_sha,
        complete,
    };
    let _ = w.set_write_timeout(Some(lim.idle));
    busy.release();
    write_line(w, &proto::confirm_msg(&conf))?;
    Ok(RecvReport {
        peer,
        path: if complete { dest } else { part },
        offset,
        received,
        hash: hash.label(),
        digest: sha.hex(),
        verified,
        complete,
        file_size,
        file_digest: file_sha.hex(),
        elapsed: start.elapsed(),
    })
}
