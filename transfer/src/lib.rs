//! opsel's reliable bulk file transfer as a library: the protocol, the
//! hashing threads and the send / receive loops that `opsel send`,
//! `opsel recv` and `opsel serve` run, usable without the CLI (the C,
//! Python and Node bindings wrap [`send_file`] and [`recv_file`]).
//!
//! Protocol version 4 (`proto.rs` has the messages): a control connection
//! (JSON lines: hello, challenge, request, accept, end, confirmation) and one
//! data connection per stream, attached by a per-transfer token and a stream
//! index (000 §5.2 iPerf-DT semantics: every CCA switch happens on the one
//! live data connection, never reopened; the receiver confirms every byte and
//! its digest before the transfer ends, 000 §5.2 PR #1178). With a pre-shared
//! key the sender proves itself by HMAC-SHA256 over a fresh challenge, the
//! receiver proves itself back before any file byte moves, and the transfer
//! is checked with BLAKE3 keyed per transfer; without one the check is
//! XXH3-128 unless BLAKE3 is asked for (docs/results/datapath.md, "The
//! integrity guarantee").
//!
//! The receiver writes into `.NAME.opsel-part` beside the destination and
//! renames it into place only when the whole file is verified; a failed or
//! stopped transfer leaves that part file (its bytes are checked against the
//! sender's file before a resume) and the destination untouched.
//!
//! Entry points:
//! * [`send_file`] / [`recv_file`]: one transfer, specs as serde structs
//!   ([`SendSpec`], [`RecvSpec`]) — what the bindings call; a fixed CCA, or
//!   OPS with the spec's `ops` section ([`ops`]: the controller over a model
//!   found by [`models`]' rule, the RTT prober, live CCA switching, the
//!   probe gate); a stop flag ends either early with a verified prefix;
//!   [`send_reader`] sends from any `Read` of a known size;
//! * [`send::send_on`] with a [`send::Drive`]: any way of pushing the bytes
//!   ([`ops::OpsDrive`], the CLI's DPS driver), on a connected control socket;
//!   [`probe::ProbeDrive`] makes the first seconds a FastProb probe or a
//!   CCA A/B on the data connection (`opsel send --fastprob` / `--ab`);
//! * [`recv::Receiver`]: a listener serving one transfer or many (`serve`).
//!
//! The receiver also answers UDP echoes on its listen port, so the sender's
//! RTT probe (000 §3.2) needs no privilege.

pub mod hashing;
pub mod models;
pub mod ops;
pub mod probe;
pub mod proto;
pub mod recv;
pub mod send;
pub mod spec;
pub mod streams;

use std::io::Write;

use opsel::{Error, Result};
use serde_json::Value;

pub use ops::{OpsReport, OpsSpec};
pub use proto::{Digest, HashAlgo, Key};
pub use recv::{Limits, Receiver, RecvOpts, RecvReport, Target};
pub use send::{Drive, FixedCca, SendOpts, SendReport};
pub use spec::{recv_file, send_file, send_reader, RecvSpec, SendSpec};

/// Write one JSON message line.
pub fn write_line(w: &mut impl Write, v: &Value) -> Result<()> {
    let mut line = v.to_string();
    line.push('\n');
    w.write_all(line.as_bytes())
        .and_then(|_| w.flush())
        .map_err(|e| Error::io("write control message", e))
}

/// Clears `O_NONBLOCK` on a descriptor the caller handed over (a Node or
/// other event-loop socket is non-blocking; the transfer's reads use
/// timeouts and must block) and restores it when dropped. The flag belongs
/// to the open file description, which every duplicate shares; the guard
/// holds a duplicate of its own, so it restores the flag however the other
/// descriptors are closed.
pub(crate) struct Blocking {
    fd: Option<(std::os::fd::OwnedFd, libc::c_int)>,
}

impl Blocking {
    pub(crate) fn new(fd: std::os::fd::BorrowedFd<'_>) -> Blocking {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on a descriptor borrowed for this call.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 || flags & libc::O_NONBLOCK == 0 {
            return Blocking { fd: None };
        }
        let Ok(own) = fd.try_clone_to_owned() else {
            return Blocking { fd: None };
        };
        // SAFETY: as above, on our own duplicate.
        unsafe { libc::fcntl(own.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) };
        Blocking {
            fd: Some((own, flags)),
        }
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        if let Some((fd, flags)) = self.fd.take() {
            // SAFETY: fcntl on our own open descriptor.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) };
        }
    }
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
