//! `--streams N`: one file striped over N data connections
//! (docs/results/datapath.md, "Parallel streams"). Stream `i` carries the
//! contiguous segment `proto::stripe(offset, size, N, i)`, so each connection
//! is one `sendfile` range and the bytes need no framing.
//!
//! * Sender: stream 0 runs the driver (fixed CCA or OPS) as a single
//!   stream does; streams 1..N run the fixed-CCA loop on their own threads and
//!   follow every CCA the driver sets on stream 0 (one OPS decision for the
//!   path, applied to every connection) and, with an active pattern, its
//!   silences (they send only while stream 0's driver sends). The BLAKE3 of `[offset, size)` runs on
//!   its own thread from the page cache while the data goes out.
//! * Receiver: one thread per connection writes its segment with `pwrite`;
//!   the calling thread hashes the contiguous written prefix in file order,
//!   reading it back from the part file. A stream that ends short (the
//!   sender stopped at `--time` or on its stop flag) is not a failure: the
//!   part file is cut to the contiguous prefix, and the sender's completion
//!   message, which covers exactly that prefix, verifies it (a resume then
//!   continues after it; bytes sent past it are sent again). When a stream fails, every
//!   connection is shut down, the part file is cut back to that prefix
//!   (hashed, so a resume continues from it) and the error names the stream.

use std::fs::File;
use std::io::Read;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_fixed_source, send_follower_source, DriverConfig, DriverEvent, DriverReport, FileSource,
    Source,
};
use opsel::{Error, Result};

use super::hashing::{HashSpec, Hasher};
use super::proto::{self, Digest};
use super::recv::why;

/// What a receive yields: (file, bytes received, digest of the range,
/// digest of the whole file).
type Received = (File, u64, Digest, Digest);

/// Receive `[offset, size)` of a transfer striped over `conns` into `file`
/// (the part file at `part`), continuing `prefix` (the hash state of
/// `[0, offset)`; `spec` makes the range's). On failure: the file cut back to the contiguous prefix,
/// the bytes kept past `offset`, and why.
#[allow(clippy::too_many_arguments)]
pub(super) fn receive(
    file: File,
    part: &Path,
    offset: u64,
    size: u64,
    conns: Vec<TcpStream>,
    prefix: Hasher,
    spec: HashSpec,
    idle: Duration,
    on_bytes: &(dyn Fn(u64) + Send + Sync),
) -> std::result::Result<Received, (File, u64, String)> {
    let n = conns.len() as u16;
    let segs: Vec<(u64, u64)> = (0..n).map(|i| proto::stripe(offset, size, n, i)).collect();
    let progress: Vec<AtomicU64> = segs.iter().map(|_| AtomicU64::new(0)).collect();
    let finished = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_err: Mutex<Option<String>> = Mutex::new(None);
    // The first stream that ended short: named in the error if the transfer
    // then fails (a sender that died, not one that stopped).
    let first_short: Mutex<Option<String>> = Mutex::new(None);
    let closers: Vec<TcpStream> = conns.iter().filter_map(|c| c.try_clone().ok()).collect();
    let back = match File::open(part) {
        Ok(f) => f,
        Err(e) => return Err((file, 0, format!("open {} to hash it: {e}", part.display()))),
    };
    let fail_all = |msg: String| {
        if !failed.swap(true, Ordering::AcqRel) {
            *first_err.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
            // The other streams stop at once instead of waiting for the idle limit.
            for c in &closers {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    };
    let hashed: std::result::Result<(u64, Hasher, Option<Hasher>), String> =
        std::thread::scope(|sc| {
            for (i, mut c) in conns.into_iter().enumerate() {
                let (a, b) = segs[i];
                let (file, progress, finished, fail_all) = (&file, &progress, &finished, &fail_all);
                let first_short = &first_short;
                sc.spawn(move || {
                    let r = (|| -> std::result::Result<(), String> {
                        c.set_read_timeout(Some(idle))
                            .map_err(|e| format!("data stream {i}: read timeout: {e}"))?;
                        let mut buf = vec![0u8; 1 << 20];
                        let (want, mut got) = (b - a, 0u64);
                        loop {
                            let k = match c.read(&mut buf) {
                                // A stream may end short: the sender stopped
                                // (`--time`, a stop flag). The contiguous
                                // prefix is what the completion message then
                                // covers; without one the transfer fails.
                                Ok(0) => {
                                    if got < want {
                                        first_short
                                            .lock()
                                            .unwrap_or_else(|e| e.into_inner())
                                            .get_or_insert(format!(
                                            "data stream {i} ended after {got} of its {want} bytes"
                                        ));
                                    }
                                    return Ok(());
                                }
                                Ok(k) => k,
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                                Err(e) => {
                                    return Err(format!(
                                        "data stream {i} {} after {got} of its {want} bytes",
                                        why(&e, idle)
                                    ))
                                }
                            };
                            if got + k as u64 > want {
                                return Err(format!(
                                    "data stream {i} sent more than its {want} bytes"
                                ));
                            }
                            file.write_all_at(&buf[..k], a + got)
                                .map_err(|e| format!("write {}: {e}", part.display()))?;
                            got += k as u64;
                            progress[i].store(got, Ordering::Release);
                            on_bytes(k as u64);
                        }
                    })();
                    if let Err(m) = r {
                        fail_all(m);
                    }
                    finished.fetch_add(1, Ordering::AcqRel);
                });
            }
            // The hash follows the contiguous written prefix in file order.
            let mut whole = prefix;
            let mut range = (offset > 0).then(|| spec.hasher());
            let mut pos = offset;
            let mut seg = 0usize;
            let mut buf = vec![0u8; 256 << 10];
            loop {
                // Read before the progress: once every stream is done, the
                // progress read after it is final.
                let done = finished.load(Ordering::Acquire) == segs.len();
                let mut upto = pos;
                while seg < segs.len() {
                    let (a, b) = segs[seg];
                    upto = a + progress[seg].load(Ordering::Acquire);
                    if upto < b {
                        break;
                    }
                    seg += 1;
                }
                while pos < upto {
                    let k = buf.len().min((upto - pos) as usize);
                    if let Err(e) = back.read_exact_at(&mut buf[..k], pos) {
                        fail_all(format!("read back {}: {e}", part.display()));
                        break;
                    }
                    whole.update(&buf[..k]);
                    if let Some(r) = range.as_mut() {
                        r.update(&buf[..k]);
                    }
                    pos += k as u64;
                }
                // A failed stream shuts every connection down, so `done`
                // comes soon after a failure too.
                if done {
                    break;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            match first_err.lock().unwrap_or_else(|e| e.into_inner()).take() {
                Some(m) => Err(m),
                None => Ok((pos, whole, range)),
            }
        });
    match hashed {
        Ok((pos, whole, range)) => {
            // Streams that ended short (a stopped sender) leave bytes past
            // the contiguous prefix `pos`: only the prefix is hashed and
            // kept, and the sender's completion message covers exactly it.
            if pos < size {
                if let Err(e) = file.set_len(pos) {
                    return Err((
                        file,
                        pos - offset,
                        format!("cut {} to {pos} bytes: {e}", part.display()),
                    ));
                }
            }
            let whole = whole.finalize();
            let range = range.map_or(whole, |r| r.finalize());
            Ok((file, pos - offset, range, whole))
        }
        Err(m) => {
            let m = match first_short.into_inner().unwrap_or_else(|e| e.into_inner()) {
                Some(short) => format!("{short}; then {m}"),
                None => m,
            };
            // Only the contiguous prefix may remain (a resume checks it).
            let kept = contiguous(&segs, &progress);
            let _ = file.set_len(kept);
            Err((file, kept - offset, m))
        }
    }
}

/// The end of the contiguous prefix the streams have written.
fn contiguous(segs: &[(u64, u64)], progress: &[AtomicU64]) -> u64 {
    let mut end = segs.first().map_or(0, |s| s.0);
    for (i, &(a, b)) in segs.iter().enumerate() {
        end = a + progress[i].load(Ordering::Acquire);
        if end < b {
            break;
        }
    }
    end
}

/// The sender's digests of `[offset, size)` (range and whole file), read from
/// the page cache on its own thread while the streams send.
pub(super) fn hash_ahead(
    path: PathBuf,
    offset: u64,
    size: u64,
    prefix: Hasher,
    spec: HashSpec,
) -> JoinHandle<Result<super::hashing::Digests>> {
    std::thread::spawn(move || hash_range(&path, offset, size, prefix, spec))
}

/// The digests of `[offset, end)` of `path` (range, and whole file continuing
/// `prefix`): what [`hash_ahead`] computes, and the contiguous prefix of a
/// striped send that stopped early.
pub(super) fn hash_range(
    path: &Path,
    offset: u64,
    end: u64,
    prefix: Hasher,
    spec: HashSpec,
) -> Result<super::hashing::Digests> {
    let mut f = File::open(path)
        .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
    let mut whole = prefix;
    // From offset 0 the range is the whole file: one hash, not two.
    let mut range = (offset > 0).then(|| spec.hasher());
    let mut buf = vec![0u8; 256 << 10];
    let n = {
        let mut hs: Vec<&mut Hasher> = vec![&mut whole];
        if let Some(r) = range.as_mut() {
            hs.push(r);
        }
        super::hashing::hash_from(&mut f, path, end - offset, &mut buf, &mut hs)?
    };
    let whole = whole.finalize();
    let range = range.map_or(whole, |r| r.finalize());
    Ok((offset + n, range, whole))
}

/// The contiguous prefix of a striped range: the bytes from the start of
/// segment 0 up to the first segment that was not sent whole (`sent[i]`
/// bytes of segment `i`). What a receiver keeps of a stopped striped send.
pub fn contiguous_sent(offset: u64, size: u64, sent: &[u64]) -> u64 {
    let n = sent.len() as u16;
    let mut total = 0;
    for (i, &s) in sent.iter().enumerate() {
        let (a, b) = proto::stripe(offset, size, n, i as u16);
        total += s.min(b - a);
        if s < b - a {
            break;
        }
    }
    total
}

/// What one of streams 1..N of a striped send did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StreamReport {
    /// The stream's index (1..N; stream 0 is the driver's).
    pub stream: u16,
    pub bytes_sent: u64,
    /// CCAs set on this stream following the driver's (`follow_cca`): one
    /// per `CcaSet` of stream 0 when every switch succeeded.
    pub cca_sets: u64,
    /// Its byte intervals (`DriverEvent::Interval`, one per `interval_s`).
    pub intervals: Vec<DriverEvent>,
}

/// A follower's report and its byte intervals.
pub(super) type Followed = (DriverReport, Vec<DriverEvent>);

/// Streams 1..N of a striped send: each runs the fixed-CCA loop over its
/// segment on its own thread, starting with `cca` (stream 0's driver then
/// sets every later CCA on them through [`follow_cca`]). With `gate` (an
/// active OPS pattern on stream 0, `OpsDriver::publish_sending`) a stream
/// sends only while the gate is open, so the pattern's silences are silent
/// on every connection (000 §3.2).
#[allow(clippy::too_many_arguments)]
pub(super) fn spawn_senders<'s>(
    sc: &'s std::thread::Scope<'s, '_>,
    conns: &'s [TcpStream],
    path: &'s Path,
    offset: u64,
    size: u64,
    cca: CcaName,
    cfg: DriverConfig,
    stop: &'s AtomicBool,
    gate: Option<&'s AtomicBool>,
) -> Vec<std::thread::ScopedJoinHandle<'s, Result<Followed>>> {
    let n = conns.len() as u16 + 1;
    conns
        .iter()
        .enumerate()
        .map(|(j, c)| {
            let (a, b) = proto::stripe(offset, size, n, j as u16 + 1);
            sc.spawn(move || {
                let f = File::open(path)
                    .map_err(|e| Error::io(format!("open {} to send it", path.display()), e))?;
                let mut src = Source::File(FileSource::new(f.as_fd(), a, b)?);
                // One interval a second: not a hot path.
                let mut ivs = Vec::new();
                let mut keep = |e: &DriverEvent| {
                    if matches!(e, DriverEvent::Interval { .. }) {
                        ivs.push(e.clone());
                    }
                };
                let r = match gate {
                    Some(g) => send_follower_source(c, &mut src, cca, &cfg, stop, g, &mut keep),
                    None => send_fixed_source(c, &mut src, cca, &cfg, stop, &mut keep),
                };
                let _ = c.shutdown(Shutdown::Write);
                r.map(|r| (r, ivs))
            })
        })
        .collect()
}

/// Apply every CCA the driver sets on stream 0 to the other streams too,
/// counting the switches that succeeded per stream in `sets`.
pub(super) fn follow_cca(conns: &[TcpStream], e: &DriverEvent, sets: &mut [u64]) {
    if let DriverEvent::CcaSet { cca, .. } = e {
        for (c, n) in conns.iter().zip(sets.iter_mut()) {
            if opsel::sys::linux::set_cca(c, cca.as_str()).is_ok() {
                *n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contiguous_prefix_stops_at_the_first_short_segment() {
        // 10 bytes from 0 over 3 streams: segments [0, 4), [4, 8), [8, 10).
        assert_eq!(proto::stripe(0, 10, 3, 1), (4, 8));
        assert_eq!(contiguous_sent(0, 10, &[4, 4, 2]), 10);
        assert_eq!(contiguous_sent(0, 10, &[4, 1, 2]), 5);
        assert_eq!(contiguous_sent(0, 10, &[2, 4, 2]), 2);
        assert_eq!(contiguous_sent(0, 10, &[0, 4, 2]), 0);
        // From a resume offset, the prefix counts from there.
        let (a, b) = proto::stripe(100, 110, 2, 0);
        assert_eq!(contiguous_sent(100, 110, &[b - a, 2]), b - a + 2);
    }
}
