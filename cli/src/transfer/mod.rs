//! `opsel send` / `opsel recv` / `opsel serve`: a reliable bulk file transfer
//! whose sender runs OPS (000 Ch. 7, iPerfOPS) or a fixed CCA.
//!
//! Protocol version 2 (`proto.rs` has the messages): a control connection
//! (JSON lines: hello, challenge, request, accept, end, confirmation) and one
//! data connection per transfer, attached by a per-transfer token and a
//! stream index (000 §5.2 iPerf-DT semantics: every CCA switch happens on the
//! one live data connection, never reopened; the receiver confirms every byte
//! and its SHA-256 before the transfer ends, 000 §5.2 PR #1178). With a
//! pre-shared key the sender proves itself by HMAC-SHA256 over a fresh
//! challenge, and the receiver proves itself back before any file byte moves.
//!
//! The receiver writes into `.NAME.opsel-part` beside the destination and
//! renames it into place only when the whole file is verified; a failed or
//! stopped transfer leaves that part file (its bytes are checked against the
//! sender's file before a resume) and the destination untouched.
//!
//! The receiver also answers UDP echoes on its listen port, so the sender's
//! RTT probe (000 §3.2) needs no privilege.

pub mod args;
pub mod demo;
pub mod proto;
pub mod recv;
pub mod send;

use std::io::{Read, Write};
use std::path::Path;

use opsel::{Error, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Write one JSON message line.
pub fn write_line(w: &mut impl Write, v: &Value) -> Result<()> {
    let mut line = v.to_string();
    line.push('\n');
    w.write_all(line.as_bytes())
        .and_then(|_| w.flush())
        .map_err(|e| Error::io("write control message", e))
}

/// `N` bytes from the OS CSPRNG (challenges, nonces, tokens).
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    if let Err(e) = getrandom::fill(&mut b) {
        // Without randomness neither authentication nor tokens mean anything.
        panic!("the OS random number generator failed: {e}");
    }
    b
}

pub fn hex(bytes: &[u8]) -> String {
    proto::hex(bytes)
}

/// SHA-256 of `len` bytes of `path` starting at `offset` (`None` = to EOF).
/// Returns (bytes hashed, hex digest).
pub fn sha256_range(path: &Path, offset: u64, len: Option<u64>) -> Result<(u64, String)> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
    f.seek(std::io::SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {} to {offset}", path.display()), e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len.unwrap_or(u64::MAX);
    let mut total = 0u64;
    while left > 0 {
        let want = buf.len().min(left.min(usize::MAX as u64) as usize);
        let n = f
            .read(&mut buf[..want])
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
        left -= n as u64;
    }
    Ok((total, hex(&h.finalize())))
}

/// One pass over `[0, end)` of `path`: (bytes read, SHA-256 of `[offset, end)`,
/// SHA-256 of `[0, end)`), the two hashes the completion message carries.
pub fn sha256_range_and_prefix(
    path: &Path,
    offset: u64,
    end: u64,
) -> Result<(u64, [u8; 32], [u8; 32])> {
    let mut f = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("open {} to hash it", path.display()), e))?;
    let (mut whole, mut range) = (Sha256::new(), Sha256::new());
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0u64;
    while pos < end {
        let want = buf.len().min((end - pos).min(usize::MAX as u64) as usize);
        let n = f
            .read(&mut buf[..want])
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        whole.update(chunk);
        if pos + n as u64 > offset {
            let skip = offset.saturating_sub(pos) as usize;
            range.update(&chunk[skip..]);
        }
        pos += n as u64;
    }
    Ok((pos, range.finalize().into(), whole.finalize().into()))
}
