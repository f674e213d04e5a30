//! `opsel send` / `opsel recv`: a reliable bulk file transfer whose sender
//! runs OPS (000 Ch. 7, iPerfOPS) or a fixed CCA.
//!
//! Protocol (000 §5.2 iPerf-DT semantics, on two persistent TCP connections):
//!
//! 1. control: sender → `{"hello":"opsel-transfer","version":1,"offset":N,"size":S}`
//!    (one JSON object per line); receiver → `{"ok":true,"token":T,"out_size":B}`
//!    or `{"ok":false,"error":"..."}`.
//! 2. data: the sender opens one data connection, writes the 8-byte token,
//!    then the payload: file bytes from `offset` on. Every CCA switch happens
//!    on this connection (`setsockopt(TCP_CONGESTION)`); it is never reopened.
//!    The sender closes its write side after the last byte.
//! 3. control: sender → `{"end":BYTES,"sha256":HEX}` (hash of the file range
//!    it sent, re-read from disk); the receiver answers only once it has
//!    written and fsynced every byte: `{"received":R,"sha256":HEX,"ok":bool,
//!    "file_size":F,"file_sha256":HEX}` (000 §5.2 PR #1178: the receiver
//!    confirms every byte before the transfer ends).
//!
//! The receiver also answers UDP echoes on its listen port, so the sender's
//! RTT probe (000 §3.2) needs no privilege.
//!
//! Resume: `send --offset N` seeks the source; `recv --append` appends and
//! requires the output to hold exactly N bytes already.

pub mod args;
pub mod demo;
pub mod recv;
pub mod send;

use std::io::{BufRead, Read, Write};
use std::path::Path;

use opsel::{Error, Result};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub const HELLO: &str = "opsel-transfer";
pub const VERSION: u64 = 1;

/// Write one JSON message line.
pub fn write_msg(w: &mut impl Write, v: &Value) -> Result<()> {
    let mut line = serde_json::to_string(v)
        .map_err(|e| Error::invalid(format!("cannot encode control message: {e}")))?;
    line.push('\n');
    w.write_all(line.as_bytes())
        .and_then(|_| w.flush())
        .map_err(|e| Error::io("write control message", e))
}

/// Read one JSON message line (at most 64 KiB).
pub fn read_msg(r: &mut impl BufRead) -> Result<Value> {
    let mut line = String::new();
    let n = r
        .by_ref()
        .take(64 * 1024)
        .read_line(&mut line)
        .map_err(|e| Error::io("read control message", e))?;
    if n == 0 {
        return Err(Error::io(
            "read control message",
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the peer closed the control connection",
            ),
        ));
    }
    serde_json::from_str(line.trim()).map_err(|e| {
        Error::invalid(format!(
            "control message is not JSON ({e}): {:?}",
            line.chars().take(200).collect::<String>()
        ))
    })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

/// Field of a JSON message as u64, or a clear error.
pub fn field_u64(v: &Value, key: &str) -> Result<u64> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::invalid(format!("control message lacks a whole-number {key:?}: {v}")))
}

pub fn field_str<'a>(v: &'a Value, key: &str) -> Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| Error::invalid(format!("control message lacks a string {key:?}: {v}")))
}
