//! The sending side of one transfer on a connected control socket: the
//! handshake, the resume check, the data connection(s), the sender's hash off
//! the data path, and the completion and confirmation (protocol in
//! `proto.rs`). How the bytes are pushed onto the data connection is a
//! [`Drive`]: a fixed CCA here ([`FixedCca`]), OPS or DPS in the CLI.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_fixed_source, DriverConfig, DriverEvent, DriverReport, FileSource, Source,
};
use opsel::{Error, Result};

use crate::hashing::{hash_state, FollowHasher, HashSpec};
use crate::proto::{self, HashAlgo, Key, LineReader};
use crate::{random, write_line};

/// What to send and how to check it.
#[derive(Debug, Clone)]
pub struct SendOpts {
    pub file: PathBuf,
    /// Stop after this many seconds (the receiver keeps a verified prefix).
    pub time_s: Option<f64>,
    /// First byte to send (`None` = 0, unless `resume`).
    pub offset: Option<u64>,
    /// Let the receiver say where to start: after its verified prefix.
    pub resume: bool,
    /// File name for the receiver (serve mode; default: the file's own name).
    pub name: Option<String>,
    /// Pre-shared key (both sides prove they hold it).
    pub key: Option<Key>,
    /// Seconds per [`DriverEvent::Interval`].
    pub interval_s: f64,
    /// Data connections the file is striped over (1 to 8, `streams.rs`).
    pub streams: u16,
    /// The whole-transfer check; `None`: [`default_hash`].
    pub hash: Option<HashAlgo>,
}

impl SendOpts {
    /// Sending `file` whole, one stream, the default check.
    pub fn new(file: impl Into<PathBuf>) -> SendOpts {
        SendOpts {
            file: file.into(),
            time_s: None,
            offset: None,
            resume: false,
            name: None,
            key: None,
            interval_s: 1.0,
            streams: 1,
            hash: None,
        }
    }
}

/// The check used when none is asked for: keyed BLAKE3 when both sides hold
/// a pre-shared key (tamper-evident), else XXH3-128. Without a key the
/// control connection is not authenticated, so whoever can change the data
/// on the path can change the digest in the completion message too: BLAKE3
/// would then guard only against accidents, which XXH3-128 detects at a
/// fraction of the CPU (docs/results/datapath.md, "The integrity guarantee").
pub fn default_hash(authenticated: bool) -> HashAlgo {
    if authenticated {
        HashAlgo::Blake3
    } else {
        HashAlgo::Xxh3
    }
}

/// Outcome of a confirmed transfer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SendReport {
    pub driver: DriverReport,
    pub offset: u64,
    /// The receiver's whole file equals the source's first `file_size` bytes.
    pub file_identical: bool,
    /// The receiver holds the whole file now, renamed into place.
    pub complete: bool,
    pub file_size: u64,
    /// The check used ("xxh3", "blake3", "blake3-keyed").
    pub hash: &'static str,
    /// Its digest of the range sent (hex), as the receiver confirmed it.
    pub digest: String,
    /// The same over the receiver's whole file `[0, file_size)` (hex).
    pub file_digest: String,
    /// Streams 1..N of a striped transfer (empty with one stream).
    pub streams: Vec<crate::streams::StreamReport>,
    /// With OPS ([`crate::send_file`] with an `ops` spec): the decisions
    /// made and the CCAs used; `None` otherwise.
    pub ops: Option<crate::ops::OpsReport>,
}

/// How the bytes of stream 0 go onto its data connection.
pub trait Drive {
    /// The CCA streams 1..N start with (every later one follows stream 0's
    /// [`DriverEvent::CcaSet`], `streams::follow_cca`).
    fn first_cca(&self) -> CcaName;
    /// Whether this driver may run with `n` > 1 streams (DPS learns one
    /// connection): `Err` says why not.
    fn allows_streams(&self, n: u16) -> Result<()>;
    /// With more than one stream: a flag the driver keeps true while stream
    /// 0 may send and false during its silences (an active OPS pattern,
    /// `OpsDriver::publish_sending`); streams 1..N send only while it is
    /// true. `None`: they never pause.
    fn sending_gate(&self) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        None
    }
    /// The receiver accepted: the transfer starts at byte `offset` of `size`
    /// (a resume starts past 0). Called once, before [`Drive::drive`].
    fn accepted(&mut self, offset: u64, size: u64) {
        let _ = (offset, size);
    }
    /// Send `src` on `data` until its end, `stop`, or the time limit of `cfg`.
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        cfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport>;
}

/// A fixed CCA for the whole transfer.
pub struct FixedCca(pub CcaName);

impl Drive for FixedCca {
    fn first_cca(&self) -> CcaName {
        self.0
    }
    fn allows_streams(&self, _: u16) -> Result<()> {
        Ok(())
    }
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        cfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        send_fixed_source(data, src, self.0, &without_silences(cfg), stop, on_event)
    }
}

/// The driver configuration of a sending loop with no silent segments to
/// start on time (a fixed CCA, passive OPS, a FastProb probe): the send
/// buffer may stay full (no TCP_NOTSENT_LOWAT: fewer wake-ups) and the file
/// is read in larger pieces.
pub(crate) fn without_silences(cfg: DriverConfig) -> DriverConfig {
    DriverConfig {
        notsent_lowat_bytes: None,
        chunk_bytes: 1 << 20,
        ..cfg
    }
}

/// Connect to `to` (the receiver's listen address) within 10 s.
pub fn connect(to: SocketAddr, what: &str) -> Result<TcpStream> {
    TcpStream::connect_timeout(&to, Duration::from_secs(10)).map_err(|e| {
        Error::io(
            format!(
                "connect the {what} connection to {to} (is `opsel recv` or `opsel serve` listening there?)"
            ),
            e,
        )
    })
}

/// Check what can be checked before connecting: the file, the offset, the
/// streams against the driver and the time limit. Returns the file's size.
pub fn check(opts: &SendOpts, drive: &dyn Drive) -> Result<u64> {
    let path = &opts.file;
    let size = std::fs::metadata(path)
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
        .len();
    if let Some(o) = opts.offset.filter(|&o| o > size) {
        return Err(Error::invalid(format!(
            "--offset {o} is past the end of {} ({size} bytes)",
            path.display()
        )));
    }
    let n = opts.streams;
    if !(1..=proto::MAX_STREAMS).contains(&u64::from(n)) {
        return Err(Error::invalid(format!(
            "--streams {n}: use 1 to {}",
            proto::MAX_STREAMS
        )));
    }
    if n > 1 {
        drive.allows_streams(n)?;
    }
    Ok(size)
}

/// Run one transfer on `ctl`, a control connection to a receiver (data
/// connections go to the same address). `on_event` sees every driver event;
/// `stop` ends the sending early (then the transfer is completed and
/// confirmed up to the bytes sent, and the receiver keeps them as a verified
/// prefix for a resume).
pub fn send_on(
    ctl: TcpStream,
    opts: &SendOpts,
    drive: &mut dyn Drive,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    send_impl(ctl, opts, None, drive, stop, on_event)
}

/// [`send_on`] from a reader instead of `opts.file`: the receiver is told
/// `size` bytes; the bytes are hashed as the sending loop reads them (no
/// second pass, so no resume: `opts.offset`, `resume`, `time_s` and
/// `streams` > 1 are refused, and `opts.name` names the file for a serve
/// directory). A reader that ends before `size` bytes is reported as a
/// short transfer (the receiver keeps what arrived as a verified prefix);
/// more than `size` is not read.
pub fn send_reader_on(
    ctl: TcpStream,
    reader: &mut dyn Read,
    size: u64,
    opts: &SendOpts,
    drive: &mut dyn Drive,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    if opts.resume
        || opts.offset.is_some_and(|o| o > 0)
        || opts.time_s.is_some()
        || opts.streams != 1
    {
        return Err(Error::invalid(
            "sending from a reader: offset, resume, time_s and more than one stream need a file (the bytes are read once)",
        ));
    }
    send_impl(ctl, opts, Some((reader, size)), drive, stop, on_event)
}

/// Hashes what the sending loop reads, counting it (the reader form of the
/// sender's check: every byte read is sent before the loop ends at EOF).
struct HashingReader<'a> {
    inner: std::io::Take<&'a mut dyn Read>,
    hash: crate::hashing::Hasher,
    read: u64,
}

impl Read for HashingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// The sender's hash in copy mode: updated with every byte the socket took.
struct InlineHash {
    /// `[offset, …)` when the transfer starts past 0 (else `whole` is it).
    range: Option<crate::hashing::Hasher>,
    /// `[0, …)`, continuing the verified prefix's state.
    whole: crate::hashing::Hasher,
    sent: u64,
}

impl InlineHash {
    fn update(&mut self, b: &[u8]) {
        self.whole.update(b);
        if let Some(r) = self.range.as_mut() {
            r.update(b);
        }
        self.sent += b.len() as u64;
    }

    /// (end, digest of the range, digest of `[0, end)`), as
    /// [`FollowHasher::finish`] gives them.
    fn finish(self, offset: u64) -> crate::hashing::Digests {
        let whole = self.whole.finalize();
        let range = self.range.map_or(whole, |r| r.finalize());
        (offset + self.sent, range, whole)
    }
}

/// Whether the peer of `s` is this host: a loopback address, or the
/// connection's own local address.
fn same_host(s: &TcpStream) -> bool {
    match (s.local_addr(), s.peer_addr()) {
        (Ok(l), Ok(p)) => p.ip().is_loopback() || l.ip() == p.ip(),
        _ => false,
    }
}

fn send_impl(
    ctl: TcpStream,
    opts: &SendOpts,
    reader: Option<(&mut dyn Read, u64)>,
    drive: &mut dyn Drive,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    let path: &Path = &opts.file;
    let (size, file, mut reader) = match reader {
        None => {
            let size = check(opts, drive)?;
            let file = std::fs::File::open(path)
                .map_err(|e| Error::io(format!("open {} to send it", path.display()), e))?;
            (size, Some(file), None)
        }
        Some((r, size)) => (size, None, Some(r)),
    };
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let n_streams = opts.streams;
    // Blocking reads with timeouts on the caller's socket; its flag is
    // restored on return.
    let _blocking = crate::Blocking::new(ctl.as_fd());
    let to = ctl
        .peer_addr()
        .map_err(|e| Error::io("the control connection's peer address", e))?;
    // The handshake is bounded: a receiver that says nothing is not waited for.
    ctl.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| Error::io("control read timeout", e))?;
    let mut ctl_w = ctl
        .try_clone()
        .map_err(|e| Error::io("clone control socket", e))?;
    let mut ctl_r = LineReader::new(ctl);
    let read = |r: &mut LineReader<TcpStream>, what: &str| -> Result<Vec<u8>> {
        match r.read_line(proto::MAX_LINE, |_| Ok(())) {
            Ok(Some(l)) => Ok(l),
            Ok(None) => Err(Error::invalid(format!(
                "the receiver closed the control connection before its {what}"
            ))),
            Err(e) => Err(Error::io(format!("read the receiver's {what}"), e)),
        }
    };
    let proto_err = |e: proto::ProtoError| Error::invalid(e.0);
    let nonce: [u8; proto::NONCE_LEN] = random();
    write_line(&mut ctl_w, &proto::hello_msg(&nonce))?;
    let ch = proto::parse_challenge(&read(&mut ctl_r, "challenge")?).map_err(|e| {
        if e.0.contains("version 1") {
            Error::invalid(format!(
                "{e}; the receiver runs an older opsel (protocol version 1): upgrade it"
            ))
        } else {
            proto_err(e)
        }
    })?;
    let mac = match (&opts.key, ch.auth) {
        (Some(k), _) => Some(k.sender_mac(&ch.challenge, &nonce)),
        (None, true) => {
            return Err(Error::invalid(
                "the receiver requires a pre-shared key: pass --key-file FILE or set OPSEL_KEY",
            ))
        }
        (None, false) => None,
    };
    // Keyed BLAKE3 whenever the receiver authenticates us (its key is ours);
    // xxh3 is not offered then, so a keyed transfer is always tamper-evident.
    let hash = match (opts.hash, &opts.key, ch.auth) {
        (Some(HashAlgo::Xxh3), Some(_), true) => {
            return Err(Error::invalid(
                "--hash xxh3 with a pre-shared key: keyed transfers are checked with keyed BLAKE3 (xxh3 is not tamper-evident); drop --hash or use --hash blake3",
            ))
        }
        (_, Some(k), true) => HashSpec {
            algo: HashAlgo::Blake3,
            key: Some(k.data_key(&ch.challenge, &nonce)),
        },
        (h, _, _) => HashSpec::plain(h.unwrap_or(default_hash(false))),
    };
    let req = proto::Request {
        mac,
        size,
        offset: if opts.resume {
            None
        } else {
            Some(opts.offset.unwrap_or(0))
        },
        name: Some(name),
        streams: n_streams,
        hash: hash.algo,
    };
    write_line(&mut ctl_w, &proto::request_msg(&req))?;
    let acc = proto::parse_accept(&read(&mut ctl_r, "answer")?, hash.algo).map_err(proto_err)?;
    if let Some(k) = &opts.key {
        // Mutual: the file goes only to a receiver that holds the key too.
        let ok = acc
            .proof
            .as_ref()
            .is_some_and(|p| k.check_receiver(&nonce, &ch.challenge, p));
        if !ok {
            return Err(Error::invalid(
                "the receiver did not prove it holds the pre-shared key; nothing was sent (is it the receiver you meant, started with the same key?)",
            ));
        }
    }
    let offset = acc.offset;
    if offset > size {
        return Err(Error::invalid(format!(
            "the receiver asks to resume at byte {offset}, past the end of {} ({size} bytes)",
            path.display()
        )));
    }
    // Resume only onto a prefix identical to ours (with this transfer's hash
    // and key: the prefix may have been written by a transfer that used another).
    let (n, prefix_state) = match &file {
        Some(_) => hash_state(path, 0, Some(offset), &hash)?,
        None => (0, hash.hasher()),
    };
    if n != offset || prefix_state.finalize() != acc.prefix_digest {
        return Err(Error::invalid(format!(
            "the receiver's first {offset} bytes differ from {}'s; nothing was sent. Start over with --offset 0 (the receiver then replaces its partial file)",
            path.display()
        )));
    }
    if acc.streams != n_streams {
        return Err(Error::invalid(format!(
            "the receiver answered with {} data streams for the {n_streams} asked for",
            acc.streams
        )));
    }
    let mut data = connect(to, "data")?;
    data.write_all(&proto::preamble(&acc.token, 0))
        .map_err(|e| Error::io("send the data connection's preamble", e))?;
    // Streams 1..N (streams.rs): stream 0 carries the first segment below.
    let extra = (1..n_streams)
        .map(|i| {
            let mut c = connect(to, "data")?;
            c.write_all(&proto::preamble(&acc.token, i))
                .map_err(|e| Error::io("send a data connection's preamble", e))?;
            Ok(c)
        })
        .collect::<Result<Vec<TcpStream>>>()?;
    let (seg0_start, seg0_end) = proto::stripe(offset, size, n_streams, 0);

    let dcfg = DriverConfig {
        interval_ns: (opts.interval_s.max(0.01) * 1e9) as u64,
        time_limit_ns: opts.time_s.map(|t| (t.max(0.0) * 1e9) as u64),
        ..DriverConfig::default()
    };
    // The data goes out with sendfile(2) (no user-space copy); the hash runs
    // on a second thread over the same page-cache bytes, following the
    // position the pump has handed to the socket (docs/results/datapath.md).
    // To a receiver on this host the file is copied through the pump's
    // buffer instead and hashed there as it goes out (`FileSource::copied`).
    let progress = Arc::new(AtomicU64::new(offset));
    let mut hashing_reader = reader.take().map(|r| HashingReader {
        inner: r.take(size),
        hash: prefix_state.clone(),
        read: 0,
    });
    let mut inline = (file.is_some() && n_streams == 1 && same_host(&data)).then(|| InlineHash {
        range: (offset > 0).then(|| hash.hasher()),
        whole: prefix_state.clone(),
        sent: 0,
    });
    // A striped send that stops early confirms its contiguous prefix, hashed
    // again from this state (`streams::hash_range`).
    let striped_prefix = (n_streams > 1).then(|| prefix_state.clone());
    let (hasher, ahead) = if hashing_reader.is_some() || inline.is_some() {
        (None, None)
    } else if n_streams == 1 {
        let h = FollowHasher::start(
            path.to_path_buf(),
            offset,
            prefix_state,
            hash,
            progress.clone(),
        )?;
        (Some(h), None)
    } else {
        // Striped: the segments go out concurrently, so the hash reads the
        // whole range ahead of them; it is used only when every segment was
        // sent whole.
        let h = crate::streams::hash_ahead(path.to_path_buf(), offset, size, prefix_state, hash);
        (None, Some(h))
    };
    let copy = inline.is_some();
    let mut on_sent = |b: &[u8]| {
        if let Some(h) = inline.as_mut() {
            h.update(b);
        }
    };
    let mut src = match (&file, hashing_reader.as_mut()) {
        (Some(f), _) => {
            let fs = FileSource::new(f.as_fd(), seg0_start, seg0_end)?.with_progress(&progress);
            Source::File(if copy { fs.copied(&mut on_sent) } else { fs })
        }
        (None, Some(r)) => Source::Reader(r),
        (None, None) => unreachable!("a file or a reader"),
    };
    drive.accepted(offset, size);
    let first_cca = drive.first_cca();
    let extra_cfg = without_silences(dcfg);
    let gate = if n_streams > 1 {
        drive.sending_gate()
    } else {
        None
    };
    // Followers of an active pattern drain their queue in its silences as
    // stream 0 does (TCP_NOTSENT_LOWAT, sent in the driver's chunks).
    let extra_cfg = if gate.is_some() { dcfg } else { extra_cfg };
    let mut follow_sets = vec![0u64; extra.len()];
    let (driven, others) = std::thread::scope(|sc| {
        let senders = crate::streams::spawn_senders(
            sc,
            &extra,
            path,
            offset,
            size,
            first_cca,
            extra_cfg,
            stop,
            gate.as_deref(),
        );
        let mut cb = |e: &DriverEvent| {
            crate::streams::follow_cca(&extra, e, &mut follow_sets);
            on_event(e)
        };
        let driven = drive.drive(&data, &mut src, dcfg, stop, &mut cb);
        // Stream 0 is done (maybe in a silence): the others finish their
        // segments without pausing.
        if let Some(g) = &gate {
            g.store(true, std::sync::atomic::Ordering::Release);
        }
        let others: Vec<Result<crate::streams::Followed>> = senders
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a data stream's thread failed")))
            })
            .collect();
        (driven, others)
    });
    // A failed stream fails a striped transfer; streams that stopped early
    // (the time limit, the stop flag) leave the contiguous prefix
    // (`streams::contiguous_sent`), which is what the receiver keeps and
    // what the completion message then covers.
    let mut stream_reports = Vec::with_capacity(others.len());
    let driven = driven.and_then(|mut d| {
        let mut sent = vec![d.bytes_sent];
        for (i, r) in others.into_iter().enumerate() {
            let (r, intervals) =
                r.map_err(|e| Error::invalid(format!("data stream {}: {e}", i + 1)))?;
            sent.push(r.bytes_sent);
            stream_reports.push(crate::streams::StreamReport {
                stream: i as u16 + 1,
                bytes_sent: r.bytes_sent,
                cca_sets: follow_sets[i],
                intervals,
            });
        }
        if n_streams > 1 {
            d.bytes_sent = crate::streams::contiguous_sent(offset, size, &sent);
        }
        Ok(d)
    });
    let driver = match driven {
        Ok(d) => d,
        Err(e) => {
            // The receiver says why it dropped us (disk full, limit) on the control connection.
            let _ = ctl_r
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(2)));
            let reason = ctl_r
                .read_line(proto::MAX_LINE, |_| Ok(()))
                .ok()
                .flatten()
                .and_then(|l| proto::parse_line(&l).ok())
                .and_then(|m| proto::refusal(&m));
            return Err(match reason {
                Some(r) => Error::invalid(format!("the receiver dropped the transfer: {r}")),
                None => Error::invalid(format!(
                    "{e}; the receiver keeps what arrived: resume with `opsel send --resume`"
                )),
            });
        }
    };
    // Last byte written: close our side so the receiver sees EOF after it.
    data.shutdown(Shutdown::Write)
        .map_err(|e| Error::io("shut down the data connection", e))?;
    let end = offset + driver.bytes_sent;
    let (hashed, range_sha, file_sha) = match (hasher, ahead, hashing_reader) {
        _ if inline.is_some() => inline.take().map(|h| h.finish(offset)).expect("inline"),
        (Some(h), _, _) => h.finish(end)?,
        (None, Some(h), _) => {
            let ahead = h
                .join()
                .unwrap_or_else(|_| Err(Error::invalid("the hashing thread failed")))?;
            match striped_prefix {
                // Stopped early: the digests of the contiguous prefix only.
                Some(p) if end < size => crate::streams::hash_range(path, offset, end, p, hash)?,
                _ => ahead,
            }
        }
        // From a reader the offset is 0: the range is the whole file.
        (None, None, Some(r)) => (r.read, r.hash.finalize(), r.hash.finalize()),
        (None, None, None) => unreachable!("one of the hashers runs"),
    };
    if hashed != end {
        return Err(Error::invalid(if file.is_some() {
            format!(
                "{} changed while it was sent: could re-read only {hashed} of {end} bytes",
                path.display(),
            )
        } else {
            format!("the sending stopped with {hashed} bytes read from the reader but {end} sent")
        }));
    }
    write_line(
        &mut ctl_w,
        &proto::end_msg(&proto::End {
            sent: driver.bytes_sent,
            digest: range_sha,
            file_digest: file_sha,
        }),
    )?;
    // The receiver answers once every byte is on its disk and hashed.
    ctl_r
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(600)))
        .map_err(|e| Error::io("control read timeout", e))?;
    let conf =
        proto::parse_confirm(&read(&mut ctl_r, "confirmation")?, hash.algo).map_err(proto_err)?;
    let sha = range_sha.hex();
    let confirmed = conf.ok && conf.received == driver.bytes_sent && conf.digest == range_sha;
    let file_identical = confirmed && conf.file_size == end && conf.file_digest == file_sha;
    if !confirmed {
        return Err(Error::invalid(format!(
            "the receiver did not confirm the transfer: it has {} of {} bytes, {} {} vs ours {sha}; it kept its verified prefix: resend with --resume",
            conf.received,
            driver.bytes_sent,
            hash.label(),
            conf.digest.hex(),
        )));
    }
    Ok(SendReport {
        driver,
        offset,
        file_identical,
        complete: conf.complete,
        file_size: conf.file_size,
        hash: hash.label(),
        digest: sha,
        file_digest: file_sha.hex(),
        streams: stream_reports,
        ops: None,
    })
}
