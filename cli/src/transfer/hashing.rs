//! The sender's BLAKE3 off the data path: a second thread hashes the file
//! from the page cache while the data connection sends it, following the
//! bytes known to be handed to the socket, so the completion message is
//! ready as soon as the last byte is sent instead of after a second pass
//! over the file (docs/results/datapath.md: that pass and a duplicate one
//! were two thirds of the sender's CPU time).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

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
fn hash_from(
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
    thread: Option<JoinHandle<Result<Digests>>>,
}

impl FollowHasher {
    /// `prefix`: the BLAKE3 state over `[0, offset)` (already computed for
    /// the resume check), continued into the whole-file hash.
    pub fn start(path: PathBuf, offset: u64, prefix: Hasher) -> Result<Self> {
        let mut f = File::open(&path)
            .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
        f.seek(std::io::SeekFrom::Start(offset))
            .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
        let (tx, rx) = mpsc::channel::<u64>();
        let thread = std::thread::Builder::new()
            .name("opsel-send-hash".into())
            .spawn(move || {
                let mut whole = prefix;
                // From offset 0 the range is the whole file: one hash, not two.
                let mut range = (offset > 0).then(Hasher::new);
                let mut pos = offset;
                let mut buf = vec![0u8; 1 << 20];
                // Every message is a position the sender has passed; the last
                // one before the channel closes is the end.
                let mut last = pos;
                for upto in rx {
                    last = upto;
                    if upto > pos {
                        let n = {
                            let mut hs: Vec<&mut Hasher> = vec![&mut whole];
                            if let Some(r) = range.as_mut() {
                                hs.push(r);
                            }
                            hash_from(&mut f, &path, upto - pos, &mut buf, &mut hs)?
                        };
                        pos += n;
                        if pos < upto {
                            break; // the file shrank: reported as a short hash
                        }
                    }
                }
                if pos > last {
                    // The driver read past a piece it never sent: the hash
                    // would cover unsent bytes, so refuse rather than mislead.
                    return Err(Error::invalid(format!(
                        "internal: the sender's hash covers {pos} bytes but only {last} were sent"
                    )));
                }
                let whole: [u8; 32] = *whole.finalize().as_bytes();
                let range = range.map_or(whole, |r| *r.finalize().as_bytes());
                Ok((pos, range, whole))
            })
            .map_err(|e| Error::io("start the hashing thread", e))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// A reader over the file being sent that tells this hasher, at each
    /// read, that every byte read before it has been handed to the socket
    /// (the driver's pump reads again only once its buffer is sent), so the
    /// hash never runs ahead of what is sent.
    pub fn reader(&self, file: File, offset: u64) -> Follow {
        Follow {
            file,
            pos: offset,
            tx: self.tx.clone(),
        }
    }

    /// The digests of `[offset, end)` and `[0, end)`, once every byte up to
    /// `end` is hashed.
    pub fn finish(mut self, end: u64) -> Result<Digests> {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(end);
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(Error::invalid("the hashing thread failed")),
        }
    }
}

/// See [`FollowHasher::reader`].
pub struct Follow {
    file: File,
    pos: u64,
    tx: Option<mpsc::Sender<u64>>,
}

impl Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(tx) = &self.tx {
            // The hasher may be gone (it stopped on a read error); sending
            // goes on and `finish` reports the error.
            if tx.send(self.pos).is_err() {
                self.tx = None;
            }
        }
        let n = self.file.read(buf)?;
        self.pos += n as u64;
        Ok(n)
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

    fn sha(b: &[u8]) -> [u8; 32] {
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

    /// Reads the way the driver's pump does: a piece, then the next only
    /// once the previous one is sent; `sent_pieces` of `pieces` go out.
    fn follow(
        path: &Path,
        offset: u64,
        prefix: Hasher,
        pieces: usize,
        sent_pieces: usize,
    ) -> Digests {
        let h = FollowHasher::start(path.to_path_buf(), offset, prefix).unwrap();
        let mut f = File::open(path).unwrap();
        f.seek(std::io::SeekFrom::Start(offset)).unwrap();
        let mut r = h.reader(f, offset);
        let mut buf = vec![0u8; 100_000];
        let mut sent = 0u64;
        for i in 0..pieces {
            let n = r.read(&mut buf).unwrap();
            if i < sent_pieces {
                sent += n as u64;
            }
        }
        drop(r);
        h.finish(offset + sent).unwrap()
    }

    #[test]
    fn the_hash_covers_exactly_the_bytes_sent() {
        let (_t, p, data) = file_of(1_000_000, "exact");
        // To EOF (the last read returns 0).
        let (end, range, whole) = follow(&p, 0, Hasher::new(), 11, 11);
        assert_eq!(end, 1_000_000);
        assert_eq!((range, whole), (sha(&data), sha(&data)));
        // Stopped with a piece read but not sent (--time, Ctrl-C).
        let (end, range, whole) = follow(&p, 0, Hasher::new(), 5, 4);
        assert_eq!(end, 400_000);
        assert_eq!(
            (range, whole),
            (sha(&data[..400_000]), sha(&data[..400_000]))
        );
    }

    #[test]
    fn a_resume_hashes_the_range_and_continues_the_prefix() {
        let (_t, p, data) = file_of(500_000, "resume");
        let (n, prefix) = hash_state(&p, 0, Some(123_457)).unwrap();
        assert_eq!(n, 123_457);
        let (end, range, whole) = follow(&p, 123_457, prefix, 3, 2);
        assert_eq!(end, 323_457);
        assert_eq!(range, sha(&data[123_457..323_457]));
        assert_eq!(whole, sha(&data[..323_457]));
    }

    #[test]
    fn a_hash_ahead_of_the_bytes_sent_is_refused() {
        let (_t, p, _) = file_of(300_000, "ahead");
        let h = FollowHasher::start(p.clone(), 0, Hasher::new()).unwrap();
        let mut r = h.reader(File::open(&p).unwrap(), 0);
        let mut buf = vec![0u8; 100_000];
        for _ in 0..3 {
            // The third read says 200 000 are sent.
            assert_eq!(r.read(&mut buf).unwrap(), 100_000);
        }
        drop(r);
        let e = h.finish(100_000).err().unwrap().to_string();
        assert!(e.contains("only 100000 were sent"), "{e}");
    }
}
