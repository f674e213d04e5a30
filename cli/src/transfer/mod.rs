//! `opsel send` / `opsel recv` / `opsel serve`: a reliable bulk file transfer
//! whose sender runs OPS (000 Ch. 7, iPerfOPS) or a fixed CCA.
//!
//! Protocol version 3 (`proto.rs` has the messages): a control connection
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
pub mod hashing;
pub mod proto;
pub mod recv;
pub mod send;
pub mod streams;

use std::io::Write;

use opsel::{Error, Result};
use serde_json::Value;

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
