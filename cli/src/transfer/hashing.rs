//! The sender's BLAKE3 off the data path: a second thread hashes the file
//! from the page cache while the data connection sends it with `sendfile(2)`,
//! following the position the driver's pump has handed to the socket, so the
//! completion message is ready as soon as the last byte is sent instead of
//! after a second pass over the file (docs/results/datapath.md).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use blake3::Hasher;
use opsel::{Error, Result};

/// BLAKE3 state over `len` bytes of `path` from `offset` (`None` = to EOF):
/// (bytes hashed, the state, to be continued or finalised).
pub fn hash_state(path: &Path, offset: u64, len: Option<u64>) -> Result<(u64, Hasher)> {
    let mut f = File::open(path)
        .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
    f.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
    let mut h = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let n = hash_from(
        &mut f,
        path,
        len.unwrap_or(u64::MAX),
        &mut buf,
        &mut [&mut h],
    )?;
    Ok((n, h))
}

/// Hash up to `len` bytes read from `f` (through `buf`) into every hasher;
/// returns the bytes read.
pub(super) fn hash_from(
    f: &mut File,
    path: &Path,
    len: u64,
    buf: &mut [u8],
    hs: &mut [&mut Hasher],
) -> Result<u64> {
    let mut total = 0u64;
    while total < len {
        let want = buf.len().min((len - total).min(usize::MAX as u64) as usize);
        let n = match f.read(&mut buf[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
        };
        if n == 0 {
            break;
        }
        for h in hs.iter_mut() {
            h.update(&buf[..n]);
        }
        total += n as u64;
    }
    Ok(total)
}

/// What the hashing thread returns: (end reached, BLAKE3 of `[offset, end)`,
/// BLAKE3 of `[0, end)`).
type Digests = (u64, [u8; 32], [u8; 32]);

/// A thread hashing `[offset, end)` of a file as the sender hands it to the
/// socket; `end` is known only when sending stops (EOF, `--time`, Ctrl-C).
pub struct FollowHasher {
    tx: Option<mpsc::Sender<u64>>,
    progress: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<Digests>>>,
}

impl FollowHasher {
    /// The pump stores in `progress` the file position up to which bytes
    /// are handed to the socket
    /// (`opsel::sys::linux::ops_driver::FileSource::with_progress`); this
    /// thread hashes the page cache up to it, never past it. `prefix`: the
    /// BLAKE3 state over `[0, offset)` (already computed for the resume
    /// check), continued into the whole-file hash.
    pub fn start(
        path: PathBuf,
        offset: u64,
        prefix: Hasher,
        progress: Arc<AtomicU64>,
    ) -> Result<Self> {
        let mut f = File::open(&path)
            .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
        f.seek(std::io::SeekFrom::Start(offset))
            .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
        let (tx, rx) = mpsc::channel::<u64>();
        let sent = progress.clone();
        let thread = std::thread::Builder::new()
            .name("opsel-send-hash".into())
            .spawn(move || {
                let mut whole = prefix;
                // From offset 0 the range is the whole file: one hash, not two.
                let mut range = (offset > 0).then(Hasher::new);
                let mut pos = offset;
                // 256 KiB pieces: each is hashed right after the read copied
                // it, while it is still in the cache.
                let mut buf = vec![0u8; 256 << 10];
                let mut hash_to = |pos: &mut u64, upto: u64| -> Result<bool> {
                    let mut hs: Vec<&mut Hasher> = vec![&mut whole];
                    if let Some(r) = range.as_mut() {
                        hs.push(r);
                    }
                    let n = hash_from(&mut f, &path, upto - *pos, &mut buf, &mut hs)?;
                    *pos += n;
                    Ok(*pos == upto)
                };
                // How long to wait once caught up. On a slow path a fixed
                // short wait wakes the thread thousands of times a second to
                // hash a few kB each time; the wait doubles while less than
                // 1 MiB arrives per wait (up to 20 ms: the hash then trails
                // the socket by at most 20 ms of data) and halves while more
                // than 4 MiB does. `finish` wakes it at once.
                const MIN_WAIT: Duration = Duration::from_micros(500);
                const MAX_WAIT: Duration = Duration::from_millis(20);
                let mut wait = MIN_WAIT;
                let mut waited_at = pos;
                loop {
                    let upto = sent.load(Ordering::Acquire);
                    if upto > pos {
                        if !hash_to(&mut pos, upto)? {
                            break; // the file shrank: reported as a short hash
                        }
                        continue;
                    }
                    let arrived = pos - waited_at;
                    if arrived < 1 << 20 {
                        wait = (wait * 2).min(MAX_WAIT);
                    } else if arrived > 4 << 20 {
                        wait = (wait / 2).max(MIN_WAIT);
                    }
                    waited_at = pos;
                    // Caught up: wait for more, or for the end.
                    match rx.recv_timeout(wait) {
                        Ok(end) => {
                            // `finish` checked that `end` is what was sent.
                            if end > pos {
                                hash_to(&mut pos, end)?;
                            }
                            break;
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                let whole: [u8; 32] = *whole.finalize().as_bytes();
                let range = range.map_or(whole, |r| *r.finalize().as_bytes());
                Ok((pos, range, whole))
            })
            .map_err(|e| Error::io("start the hashing thread", e))?;
        Ok(Self {
            tx: Some(tx),
            progress,
            thread: Some(thread),
        })
    }

    /// The digests of `[offset, end)` and `[0, end)`, once every byte up to
    /// `end` is hashed. `end` must be the last position stored in the
    /// progress: a hash over bytes that were not sent, or that misses some
    /// that were, is refused rather than reported.
    pub fn finish(mut self, end: u64) -> Result<Digests> {
        let sent = self.progress.load(Ordering::Acquire);
        if end != sent {
            return Err(Error::invalid(format!(
                "internal: the sender ended at byte {end} but handed {sent} to the socket"
            )));
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(end);
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(Error::invalid("the hashing thread failed")),
        }
    }
}

impl Drop for FollowHasher {
    fn drop(&mut self) {
        // On an error path nobody waits for the digests: let the thread end.
        self.tx.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b3(b: &[u8]) -> [u8; 32] {
        *blake3::hash(b).as_bytes()
    }

    /// A file removed when dropped (the test suite has no temp-dir crate).
    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn file_of(len: usize, name: &str) -> (Tmp, PathBuf, Vec<u8>) {
        let p = std::env::temp_dir().join(format!("opsel-hash-{}-{name}", std::process::id()));
        let data: Vec<u8> = (0..len as u64)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        (Tmp(p.clone()), p, data)
    }

    /// Advances the progress the way the pump does (a piece per sendfile)
    /// by `pieces` pieces of 100 000 bytes, then finishes there.
    fn follow(path: &Path, offset: u64, prefix: Hasher, pieces: u64, len: u64) -> Digests {
        let progress = Arc::new(AtomicU64::new(offset));
        let h = FollowHasher::start(path.to_path_buf(), offset, prefix, progress.clone()).unwrap();
        let mut at = offset;
        for _ in 0..pieces {
            at = (at + 100_000).min(len);
            progress.store(at, Ordering::Release);
            std::thread::yield_now();
        }
        h.finish(at).unwrap()
    }

    #[test]
    fn the_hash_covers_exactly_the_bytes_sent() {
        let (_t, p, data) = file_of(1_000_000, "exact");
        // To EOF.
        let (end, range, whole) = follow(&p, 0, Hasher::new(), 11, 1_000_000);
        assert_eq!(end, 1_000_000);
        assert_eq!((range, whole), (b3(&data), b3(&data)));
        // Stopped after 4 pieces (--time, Ctrl-C).
        let (end, range, whole) = follow(&p, 0, Hasher::new(), 4, 1_000_000);
        assert_eq!(end, 400_000);
        assert_eq!((range, whole), (b3(&data[..400_000]), b3(&data[..400_000])));
    }

    #[test]
    fn a_resume_hashes_the_range_and_continues_the_prefix() {
        let (_t, p, data) = file_of(500_000, "resume");
        let (n, prefix) = hash_state(&p, 0, Some(123_457)).unwrap();
        assert_eq!(n, 123_457);
        let (end, range, whole) = follow(&p, 123_457, prefix, 2, 500_000);
        assert_eq!(end, 323_457);
        assert_eq!(range, b3(&data[123_457..323_457]));
        assert_eq!(whole, b3(&data[..323_457]));
    }

    #[test]
    fn an_end_other_than_the_bytes_sent_is_refused() {
        let (_t, p, _) = file_of(300_000, "ahead");
        for claimed in [100_000, 300_000] {
            let progress = Arc::new(AtomicU64::new(0));
            let h = FollowHasher::start(p.clone(), 0, Hasher::new(), progress.clone()).unwrap();
            progress.store(200_000, Ordering::Release);
            let e = h.finish(claimed).err().unwrap().to_string();
            assert!(e.contains("handed 200000 to the socket"), "{e}");
        }
    }

    #[test]
    fn a_file_that_shrank_gives_a_short_hash() {
        let (_t, p, _) = file_of(300_000, "shrank");
        let progress = Arc::new(AtomicU64::new(0));
        let h = FollowHasher::start(p.clone(), 0, Hasher::new(), progress.clone()).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(150_000)
            .unwrap();
        progress.store(300_000, Ordering::Release);
        let (end, _, _) = h.finish(300_000).unwrap();
        assert_eq!(end, 150_000);
    }
}
