//! The whole-transfer check and the sender's hash off the data path.
//!
//! [`HashSpec`] makes the hasher a transfer asked for: BLAKE3 (keyed when a
//! pre-shared key is in use) or XXH3-128 (docs/results/datapath.md, "The
//! integrity guarantee"). [`FollowHasher`] is a second thread that hashes
//! the file from the page cache while the data connection sends it with
//! `sendfile(2)`, following the position the driver's pump has handed to the
//! socket, so the completion message is ready as soon as the last byte is
//! sent instead of after a second pass over the file.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use opsel::{Error, Result};
use twox_hash::XxHash3_128;

use super::proto::{Digest, HashAlgo};

/// The hash one transfer uses for every digest (prefix, range, whole file).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HashSpec {
    pub algo: HashAlgo,
    /// BLAKE3's key (`proto::Key::data_key`), when a pre-shared key is in use.
    pub key: Option<[u8; 32]>,
}

impl std::fmt::Debug for HashSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key is secret.
        write!(
            f,
            "HashSpec({}{})",
            self.algo,
            if self.key.is_some() { ", keyed" } else { "" }
        )
    }
}

impl HashSpec {
    pub fn plain(algo: HashAlgo) -> HashSpec {
        HashSpec { algo, key: None }
    }

    /// A fresh hasher.
    pub fn hasher(&self) -> Hasher {
        match (self.algo, &self.key) {
            (HashAlgo::Blake3, None) => Hasher::Blake3(Box::new(blake3::Hasher::new())),
            (HashAlgo::Blake3, Some(k)) => Hasher::Blake3(Box::new(blake3::Hasher::new_keyed(k))),
            // XXH3 has no key worth the name (its seed is not a MAC key):
            // a keyed transfer is BLAKE3 (checked where the hash is chosen).
            (HashAlgo::Xxh3, _) => Hasher::Xxh3(Box::new(XxHash3_128::new())),
        }
    }

    /// The name a report prints ("blake3", "blake3-keyed", "xxh3").
    pub fn label(&self) -> &'static str {
        match (self.algo, self.key.is_some()) {
            (HashAlgo::Blake3, true) => "blake3-keyed",
            (HashAlgo::Blake3, false) => "blake3",
            (HashAlgo::Xxh3, _) => "xxh3",
        }
    }
}

/// A running hash of one of the [`HashAlgo`]s (boxed: both states are
/// large, and one is made per transfer, not per buffer).
#[derive(Clone)]
pub enum Hasher {
    Blake3(Box<blake3::Hasher>),
    Xxh3(Box<XxHash3_128>),
}

impl Hasher {
    pub fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Blake3(h) => {
                h.update(b);
            }
            Hasher::Xxh3(h) => h.write(b),
        }
    }

    /// The digest so far (the state may continue).
    pub fn finalize(&self) -> Digest {
        match self {
            Hasher::Blake3(h) => Digest::new(h.finalize().as_bytes()),
            // The canonical XXH128 form (high half first, big-endian), as
            // `xxhsum -H2` prints it.
            Hasher::Xxh3(h) => Digest::new(&h.finish_128().to_be_bytes()),
        }
    }
}

/// The hash state of `spec` over `len` bytes of `path` from `offset` (`None`
/// = to EOF): (bytes hashed, the state, to be continued or finalised).
pub fn hash_state(
    path: &Path,
    offset: u64,
    len: Option<u64>,
    spec: &HashSpec,
) -> Result<(u64, Hasher)> {
    let mut f = File::open(path)
        .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
    f.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
    let mut h = spec.hasher();
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

/// What the hashing thread returns: (end reached, digest of `[offset, end)`,
/// digest of `[0, end)`).
pub type Digests = (u64, Digest, Digest);

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
    /// hash state over `[0, offset)` (already computed for the resume
    /// check), continued into the whole-file hash; the range hash is a
    /// fresh state of the same spec.
    pub fn start(
        path: PathBuf,
        offset: u64,
        prefix: Hasher,
        spec: HashSpec,
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
                let mut range = (offset > 0).then(|| spec.hasher());
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
                let whole = whole.finalize();
                let range = range.map_or(whole, |r| r.finalize());
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

    const SPECS: [HashSpec; 3] = [
        HashSpec {
            algo: HashAlgo::Blake3,
            key: None,
        },
        HashSpec {
            algo: HashAlgo::Blake3,
            key: Some([7; 32]),
        },
        HashSpec {
            algo: HashAlgo::Xxh3,
            key: None,
        },
    ];

    /// The reference digests, from the crates' one-shot functions.
    fn reference(spec: &HashSpec, b: &[u8]) -> Digest {
        match (spec.algo, &spec.key) {
            (HashAlgo::Blake3, None) => Digest::new(blake3::hash(b).as_bytes()),
            (HashAlgo::Blake3, Some(k)) => Digest::new(blake3::keyed_hash(k, b).as_bytes()),
            (HashAlgo::Xxh3, _) => Digest::new(&xxhash_rust::xxh3::xxh3_128(b).to_be_bytes()),
        }
    }

    #[test]
    fn golden_vectors() {
        // xxhsum -H2 of the empty input and of "abc" (the xxHash project's
        // test vectors for XXH3_128bits with seed 0).
        let x = HashSpec::plain(HashAlgo::Xxh3);
        let d = |b: &[u8]| {
            let mut h = x.hasher();
            h.update(b);
            h.finalize().hex()
        };
        assert_eq!(d(b""), "99aa06d3014798d86001c324468d497f");
        assert_eq!(d(b"abc"), "06b05ab6733a618578af5f94892f3950");
        // BLAKE3 of the empty input (the reference implementation's vector).
        let b = HashSpec::plain(HashAlgo::Blake3).hasher().finalize().hex();
        assert_eq!(
            b,
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
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
    fn follow(
        path: &Path,
        offset: u64,
        prefix: Hasher,
        spec: HashSpec,
        pieces: u64,
        len: u64,
    ) -> Digests {
        let progress = Arc::new(AtomicU64::new(offset));
        let h = FollowHasher::start(path.to_path_buf(), offset, prefix, spec, progress.clone())
            .unwrap();
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
        for spec in SPECS {
            let r = |b: &[u8]| reference(&spec, b);
            // To EOF.
            let (end, range, whole) = follow(&p, 0, spec.hasher(), spec, 11, 1_000_000);
            assert_eq!(end, 1_000_000);
            assert_eq!((range, whole), (r(&data), r(&data)), "{spec:?}");
            // Stopped after 4 pieces (--time, Ctrl-C).
            let (end, range, whole) = follow(&p, 0, spec.hasher(), spec, 4, 1_000_000);
            assert_eq!(end, 400_000);
            assert_eq!((range, whole), (r(&data[..400_000]), r(&data[..400_000])));
        }
    }

    #[test]
    fn a_resume_hashes_the_range_and_continues_the_prefix() {
        let (_t, p, data) = file_of(500_000, "resume");
        for spec in SPECS {
            let r = |b: &[u8]| reference(&spec, b);
            let (n, prefix) = hash_state(&p, 0, Some(123_457), &spec).unwrap();
            assert_eq!(n, 123_457);
            assert_eq!(prefix.finalize(), r(&data[..123_457]), "{spec:?}");
            // The state goes on after a finalize (the receiver sends the
            // prefix digest, then continues the same state).
            let (end, range, whole) = follow(&p, 123_457, prefix, spec, 2, 500_000);
            assert_eq!(end, 323_457);
            assert_eq!(range, r(&data[123_457..323_457]), "{spec:?}");
            assert_eq!(whole, r(&data[..323_457]), "{spec:?}");
        }
    }

    #[test]
    fn one_changed_byte_changes_every_digest() {
        let (_t, p, mut data) = file_of(300_000, "flip");
        for spec in SPECS {
            let good = hash_state(&p, 0, None, &spec).unwrap().1.finalize();
            for at in [0usize, 150_001, 299_999] {
                data[at] ^= 0x10;
                assert_ne!(reference(&spec, &data), good, "{spec:?} byte {at}");
                data[at] ^= 0x10;
            }
        }
        // Keyed and plain BLAKE3 differ, and so do two keys.
        let d = |k: Option<[u8; 32]>| {
            let s = HashSpec {
                algo: HashAlgo::Blake3,
                key: k,
            };
            hash_state(&p, 0, None, &s).unwrap().1.finalize()
        };
        assert_ne!(d(None), d(Some([1; 32])));
        assert_ne!(d(Some([1; 32])), d(Some([2; 32])));
    }

    #[test]
    fn an_end_other_than_the_bytes_sent_is_refused() {
        let (_t, p, _) = file_of(300_000, "ahead");
        let spec = HashSpec::plain(HashAlgo::Xxh3);
        for claimed in [100_000, 300_000] {
            let progress = Arc::new(AtomicU64::new(0));
            let h =
                FollowHasher::start(p.clone(), 0, spec.hasher(), spec, progress.clone()).unwrap();
            progress.store(200_000, Ordering::Release);
            let e = h.finish(claimed).err().unwrap().to_string();
            assert!(e.contains("handed 200000 to the socket"), "{e}");
        }
    }

    #[test]
    fn a_file_that_shrank_gives_a_short_hash() {
        let (_t, p, _) = file_of(300_000, "shrank");
        let spec = HashSpec::plain(HashAlgo::Blake3);
        let progress = Arc::new(AtomicU64::new(0));
        let h = FollowHasher::start(p.clone(), 0, spec.hasher(), spec, progress.clone()).unwrap();
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
