//! opsel-transfer protocol version 4: message parsing, bounded line reading,
//! the data-connection preamble and the pre-shared-key challenge-response.
//!
//! Everything a peer sends is parsed here, and nothing here touches a socket
//! or a file, so the fuzz harness (cli/tests/control_fuzz.rs) includes this
//! file as it is (std, serde_json, sha2 and hmac only).
//!
//! Version 4 names the whole-transfer check in the request ([`HashAlgo`]):
//! BLAKE3 (as version 3) or XXH3-128, a non-cryptographic checksum about ten
//! times cheaper per byte that detects accidental corruption but not
//! tampering (docs/results/datapath.md, "The integrity guarantee"). With a
//! pre-shared key the check is always BLAKE3 keyed with a per-transfer key
//! derived from the pre-shared key ([`Key::data_key`]), so a peer on the path
//! cannot rewrite the data and its digest together; xxh3 is refused then.
//! The handshake's HMAC stays HMAC-SHA256. A peer of another version is
//! refused with a message naming both (no fallback: one wire format per
//! release).
//!
//! Control connection (one JSON object per line, at most [`MAX_LINE`] bytes):
//!
//! 1. sender → `{"hello":"opsel-transfer","version":4,"nonce":HEX16}`
//! 2. receiver → `{"hello":"opsel-transfer","version":4,"auth":"hmac-sha256"|"none","challenge":HEX32}`
//!    (a hello of another version gets `{"ok":false,"error":...}` naming both versions)
//! 3. sender → `{"mac":HEX32?,"size":S,"offset":N?,"name":NAME?,"streams":N,"hash":"blake3"|"xxh3"}`;
//!    `mac` = HMAC-SHA256(key, "opsel-transfer v4 sender" ‖ challenge ‖ nonce);
//!    no `offset` asks the receiver to resume wherever its verified prefix ends.
//! 4. receiver → `{"ok":true,"token":HEX16,"offset":N,"prefix_digest":HEX,"streams":N,"proof":HEX32?}`
//!    or `{"ok":false,"error":...}`; `proof` = HMAC(key, "opsel-transfer v4 receiver" ‖ nonce ‖ challenge),
//!    so the sender knows it talks to a key holder before it sends a byte of the file.
//!    `prefix_digest` is the request's hash over `[0, offset)`.
//! 5. data connection(s): [`PREAMBLE_LEN`] bytes (`"OPSD"`, version 4, reserved,
//!    stream index u16 BE, token) then the payload: stream `i` of N (1 to
//!    [`MAX_STREAMS`]) carries the raw bytes of segment [`stripe`]`(offset,
//!    size, N, i)`; with N = 1 that is every byte from `offset` on.
//! 6. sender → `{"end":BYTES,"digest":HEX,"file_digest":HEX}` (the range sent and
//!    the whole prefix `[0, offset + BYTES)`, in the request's hash); receiver →
//!    `{"ok":bool,"received":R,"digest":HEX,"file_size":F,"file_digest":HEX,"complete":bool}`
//!    once every byte is on its disk, or `{"ok":false,"error":...}` whenever it gives up.
//!
//! Digests are hex: 64 digits for BLAKE3, 32 for XXH3-128 (the canonical
//! big-endian form `xxhsum -H2` prints).

#![allow(dead_code)]

use std::io::{self, Read};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;

pub const HELLO: &str = "opsel-transfer";
pub const VERSION: u64 = 4;
/// Most data connections one transfer may stripe over (`--streams`).
pub const MAX_STREAMS: u64 = 8;

/// Stream `i`'s part of `[offset, size)` striped over `n` connections:
/// contiguous, equal segments (the last one shorter), so each connection
/// is one `sendfile` range and needs no framing, and a resume after a
/// failed stream restarts at the end of the first incomplete segment.
pub fn stripe(offset: u64, size: u64, n: u16, i: u16) -> (u64, u64) {
    let len = size.saturating_sub(offset);
    let n = u64::from(n.max(1));
    let seg = len.div_ceil(n);
    let start = (offset + seg * u64::from(i)).min(size);
    (start, (start + seg).min(size))
}
/// Longest control line accepted (the largest legitimate one is ~300 bytes).
pub const MAX_LINE: usize = 4096;
pub const DATA_MAGIC: [u8; 4] = *b"OPSD";
pub const TOKEN_LEN: usize = 16;
pub const NONCE_LEN: usize = 16;
pub const CHALLENGE_LEN: usize = 32;
/// Data preamble: magic 4, version 1, reserved 1, stream index 2, token 16.
pub const PREAMBLE_LEN: usize = 24;
/// Longest file name a sender may ask for (serve mode); most file systems allow 255 bytes.
pub const MAX_NAME: usize = 200;
/// Shortest pre-shared key accepted (128 bits).
pub const MIN_KEY: usize = 16;

const SENDER_LABEL: &[u8] = b"opsel-transfer v4 sender";
const RECEIVER_LABEL: &[u8] = b"opsel-transfer v4 receiver";
const DATA_LABEL: &[u8] = b"opsel-transfer v4 data";

/// The whole-transfer check a sender asks for (request field `hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashAlgo {
    /// BLAKE3-256: cryptographic; keyed with [`Key::data_key`] when a
    /// pre-shared key is in use.
    Blake3,
    /// XXH3-128: detects accidental corruption, not deliberate changes.
    Xxh3,
}

impl HashAlgo {
    pub fn name(self) -> &'static str {
        match self {
            HashAlgo::Blake3 => "blake3",
            HashAlgo::Xxh3 => "xxh3",
        }
    }

    pub fn parse(s: &str) -> Result<HashAlgo, ProtoError> {
        match s {
            "blake3" => Ok(HashAlgo::Blake3),
            "xxh3" => Ok(HashAlgo::Xxh3),
            other => err(format!(
                "unknown hash {:?}: this peer knows \"blake3\" and \"xxh3\"",
                excerpt(other.as_bytes())
            )),
        }
    }

    /// Digest length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            HashAlgo::Blake3 => 32,
            HashAlgo::Xxh3 => 16,
        }
    }
}

impl std::fmt::Display for HashAlgo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A digest of one of the [`HashAlgo`]s (16 or 32 bytes), compared and
/// printed as bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest {
    len: u8,
    bytes: [u8; 32],
}

impl Digest {
    /// At most 32 bytes (longer input is a programming error).
    pub fn new(b: &[u8]) -> Digest {
        assert!(b.len() <= 32, "a digest has at most 32 bytes");
        let mut bytes = [0u8; 32];
        bytes[..b.len()].copy_from_slice(b);
        Digest {
            len: b.len() as u8,
            bytes,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn hex(&self) -> String {
        hex(self.as_bytes())
    }

    /// A digest of `algo` from its hex form.
    pub fn parse(s: &str, algo: HashAlgo, what: &str) -> Result<Digest, ProtoError> {
        match algo.digest_len() {
            32 => unhex::<32>(s, what).map(|b| Digest::new(&b)),
            _ => unhex::<16>(s, what).map(|b| Digest::new(&b)),
        }
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Digest({})", self.hex())
    }
}

/// A protocol violation, with a message meant for the log or the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoError(pub String);

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ProtoError> {
    Err(ProtoError(msg.into()))
}

/// Printable excerpt of peer bytes for a log line (never the whole input).
pub fn excerpt(b: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(&b[..b.len().min(60)])
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    format!("{s:?}{}", if b.len() > 60 { "..." } else { "" })
}

/// Reads `\n`-terminated lines of at most `max` bytes from a stream, keeping
/// what follows a line for the next call. `prep` runs before every read (the
/// receiver sets the socket's read timeout to what is left of its deadline).
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: Vec::new(),
        }
    }

    /// Start with bytes already read from the stream.
    pub fn with_prefix(inner: R, prefix: &[u8]) -> Self {
        LineReader {
            inner,
            buf: prefix.to_vec(),
        }
    }

    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// One line without its `\n`. `Ok(None)`: the peer closed cleanly between lines.
    pub fn read_line(
        &mut self,
        max: usize,
        mut prep: impl FnMut(&mut R) -> io::Result<()>,
    ) -> io::Result<Option<Vec<u8>>> {
        let mut chunk = [0u8; 512];
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                if i > max {
                    break;
                }
                let mut line: Vec<u8> = self.buf.drain(..=i).collect();
                line.pop();
                return Ok(Some(line));
            }
            if self.buf.len() > max {
                break;
            }
            prep(&mut self.inner)?;
            let n = match self.inner.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the peer closed the connection in the middle of a line ({} bytes: {})",
                        self.buf.len(),
                        excerpt(&self.buf)
                    ),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "a control line longer than {max} bytes: {}",
                excerpt(&self.buf)
            ),
        ))
    }
}

/// One control line as a JSON object.
pub fn parse_line(line: &[u8]) -> Result<Map<String, Value>, ProtoError> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t.trim(),
        Err(_) => return err(format!("control line is not UTF-8: {}", excerpt(line))),
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => err(format!(
            "control line is not a JSON object: {}",
            excerpt(line)
        )),
        Err(e) => err(format!("control line is not JSON ({e}): {}", excerpt(line))),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `N` bytes from lowercase or uppercase hex.
pub fn unhex<const N: usize>(s: &str, what: &str) -> Result<[u8; N], ProtoError> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return err(format!(
            "{what} must be {} hex digits, got {} characters",
            2 * N,
            s.chars().count()
        ));
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        let d = |c: u8| -> Result<u8, ProtoError> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                b'A'..=b'F' => Ok(c - b'A' + 10),
                _ => err(format!("{what} is not hex")),
            }
        };
        *o = d(b[2 * i])? << 4 | d(b[2 * i + 1])?;
    }
    Ok(out)
}

fn get_u64(m: &Map<String, Value>, key: &str) -> Result<u64, ProtoError> {
    match m.get(key) {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| ProtoError(format!("{key:?} must be a whole number >= 0, got {v}"))),
        None => err(format!("the message lacks {key:?}")),
    }
}

fn get_str<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a str, ProtoError> {
    match m.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => err(format!(
            "{key:?} must be a string, got {}",
            excerpt(v.to_string().as_bytes())
        )),
        None => err(format!("the message lacks {key:?}")),
    }
}

fn get_bool(m: &Map<String, Value>, key: &str) -> Result<bool, ProtoError> {
    match m.get(key) {
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => err(format!("{key:?} must be true or false, got {v}")),
        None => err(format!("the message lacks {key:?}")),
    }
}

/// A refusal (`{"ok":false,"error":...}`), if `m` is one.
pub fn refusal(m: &Map<String, Value>) -> Option<String> {
    match m.get("ok") {
        Some(Value::Bool(false)) => Some(
            m.get("error")
                .and_then(Value::as_str)
                .unwrap_or("no reason given")
                .chars()
                .take(500)
                .collect(),
        ),
        _ => None,
    }
}

pub fn refusal_msg(error: &str) -> Value {
    json!({"ok": false, "error": error})
}

// ---- 1. hello -----------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloError {
    /// Not an opsel hello at all (log and drop; say nothing).
    NotOpsel(ProtoError),
    /// An opsel hello of another version (answer with a refusal that says so).
    Version(u64),
}

pub fn hello_msg(nonce: &[u8; NONCE_LEN]) -> Value {
    json!({"hello": HELLO, "version": VERSION, "nonce": hex(nonce)})
}

/// The sender's hello: its nonce.
pub fn parse_hello(line: &[u8]) -> Result<[u8; NONCE_LEN], HelloError> {
    let m = parse_line(line).map_err(HelloError::NotOpsel)?;
    if m.get("hello").and_then(Value::as_str) != Some(HELLO) {
        return Err(HelloError::NotOpsel(ProtoError(format!(
            "not an opsel-transfer hello: {}",
            excerpt(line)
        ))));
    }
    let v = get_u64(&m, "version").map_err(HelloError::NotOpsel)?;
    if v != VERSION {
        return Err(HelloError::Version(v));
    }
    unhex::<NONCE_LEN>(get_str(&m, "nonce").map_err(HelloError::NotOpsel)?, "nonce")
        .map_err(HelloError::NotOpsel)
}

pub fn version_refusal(theirs: u64) -> String {
    format!(
        "this receiver speaks opsel-transfer protocol version {VERSION} and the sender version {theirs}; run the same opsel release on both hosts"
    )
}

// ---- 2. challenge ---------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub auth: bool,
    pub challenge: [u8; CHALLENGE_LEN],
}

pub fn challenge_msg(c: &Challenge) -> Value {
    json!({"hello": HELLO, "version": VERSION,
           "auth": if c.auth { "hmac-sha256" } else { "none" },
           "challenge": hex(&c.challenge)})
}

pub fn parse_challenge(line: &[u8]) -> Result<Challenge, ProtoError> {
    let m = parse_line(line)?;
    if let Some(e) = refusal(&m) {
        return err(format!("the receiver refused the transfer: {e}"));
    }
    if m.get("hello").and_then(Value::as_str) != Some(HELLO) {
        return err(format!(
            "the peer is not an opsel receiver: {}",
            excerpt(line)
        ));
    }
    let v = get_u64(&m, "version")?;
    if v != VERSION {
        return err(format!(
            "the receiver speaks protocol version {v}, this sender {VERSION}; run the same opsel release on both hosts"
        ));
    }
    let auth = match get_str(&m, "auth")? {
        "hmac-sha256" => true,
        "none" => false,
        other => {
            return err(format!(
                "unknown authentication scheme {:?}",
                excerpt(other.as_bytes())
            ))
        }
    };
    Ok(Challenge {
        auth,
        challenge: unhex(get_str(&m, "challenge")?, "challenge")?,
    })
}

// ---- 3. request -----------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub mac: Option<[u8; 32]>,
    /// Total size of the sender's file.
    pub size: u64,
    /// First byte to send; `None`: resume where the receiver's verified prefix ends.
    pub offset: Option<u64>,
    /// File name the sender proposes (serve mode); checked by [`safe_name`].
    pub name: Option<String>,
    pub streams: u16,
    /// The whole-transfer check (for every digest of this transfer).
    pub hash: HashAlgo,
}

pub fn request_msg(r: &Request) -> Value {
    let mut v = json!({"size": r.size, "streams": r.streams, "hash": r.hash.name()});
    if let Some(m) = &r.mac {
        v["mac"] = json!(hex(m));
    }
    if let Some(o) = r.offset {
        v["offset"] = json!(o);
    }
    if let Some(n) = &r.name {
        v["name"] = json!(n);
    }
    v
}

pub fn parse_request(line: &[u8]) -> Result<Request, ProtoError> {
    let m = parse_line(line)?;
    let mac = match m.get("mac") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(unhex::<32>(s, "mac")?),
        Some(v) => return err(format!("\"mac\" must be a hex string, got {v}")),
    };
    let size = get_u64(&m, "size")?;
    let offset = match m.get("offset") {
        None | Some(Value::Null) => None,
        Some(_) => Some(get_u64(&m, "offset")?),
    };
    if offset.is_some_and(|o| o > size) {
        return err(format!(
            "offset {} is past the end of the {size}-byte file",
            offset.unwrap_or(0)
        ));
    }
    let name = match m.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            return err(format!(
                "\"name\" must be a string, got {}",
                excerpt(v.to_string().as_bytes())
            ))
        }
    };
    let streams = match m.get("streams") {
        None => 1,
        Some(_) => get_u64(&m, "streams")?,
    };
    if !(1..=MAX_STREAMS).contains(&streams) {
        return err(format!(
            "{streams} data streams asked for; this receiver attaches 1 to {MAX_STREAMS} per transfer"
        ));
    }
    let hash = HashAlgo::parse(get_str(&m, "hash")?)?;
    Ok(Request {
        mac,
        size,
        offset,
        name,
        streams: streams as u16,
        hash,
    })
}

/// A file name a sender may write into the serve directory: one plain path
/// component (no separators, no `.`/`..`, not hidden, so it cannot collide
/// with the `.NAME.opsel-part` files), printable, at most [`MAX_NAME`] bytes.
pub fn safe_name(name: &str) -> Result<&str, ProtoError> {
    if name.is_empty() || name.len() > MAX_NAME {
        return err(format!(
            "file name of {} bytes: it must have 1 to {MAX_NAME}",
            name.len()
        ));
    }
    if name.starts_with('.') {
        return err(format!(
            "file name {:?} starts with a dot (hidden files and . / .. are refused)",
            excerpt(name.as_bytes())
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c == '/' || c == '\\' || c.is_control())
    {
        return err(format!(
            "file name {} holds {c:?}: a name must be one plain path component",
            excerpt(name.as_bytes())
        ));
    }
    Ok(name)
}

// ---- 4. accept ------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accept {
    pub token: [u8; TOKEN_LEN],
    pub offset: u64,
    /// The request's hash over the receiver's `[0, offset)`.
    pub prefix_digest: Digest,
    pub proof: Option<[u8; 32]>,
    /// Data connections the receiver waits for (the request's `streams`).
    pub streams: u16,
}

pub fn accept_msg(a: &Accept) -> Value {
    let mut v = json!({"ok": true, "token": hex(&a.token), "offset": a.offset,
                       "prefix_digest": a.prefix_digest.hex(), "streams": a.streams});
    if let Some(p) = &a.proof {
        v["proof"] = json!(hex(p));
    }
    v
}

/// The receiver's answer to a request that asked for `hash`.
pub fn parse_accept(line: &[u8], hash: HashAlgo) -> Result<Accept, ProtoError> {
    let m = parse_line(line)?;
    if let Some(e) = refusal(&m) {
        return err(format!("the receiver refused the transfer: {e}"));
    }
    if !get_bool(&m, "ok")? {
        return err("the receiver did not accept the transfer");
    }
    let proof = match m.get("proof") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(unhex::<32>(s, "proof")?),
        Some(v) => return err(format!("\"proof\" must be a hex string, got {v}")),
    };
    Ok(Accept {
        token: unhex(get_str(&m, "token")?, "token")?,
        offset: get_u64(&m, "offset")?,
        prefix_digest: Digest::parse(get_str(&m, "prefix_digest")?, hash, "prefix_digest")?,
        proof,
        streams: match m.get("streams") {
            None => 1,
            Some(_) => match get_u64(&m, "streams")? {
                n @ 1..=MAX_STREAMS => n as u16,
                n => return err(format!("the receiver answered with {n} data streams")),
            },
        },
    })
}

// ---- 5. data preamble -----------------------------------------------------------

pub fn preamble(token: &[u8; TOKEN_LEN], stream: u16) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..4].copy_from_slice(&DATA_MAGIC);
    p[4] = VERSION as u8;
    p[6..8].copy_from_slice(&stream.to_be_bytes());
    p[8..].copy_from_slice(token);
    p
}

/// (token, stream index) of a data connection's preamble.
pub fn parse_preamble(p: &[u8]) -> Result<([u8; TOKEN_LEN], u16), ProtoError> {
    if p.len() != PREAMBLE_LEN {
        return err(format!(
            "data preamble of {} bytes, expected {PREAMBLE_LEN}",
            p.len()
        ));
    }
    if p[..4] != DATA_MAGIC {
        return err(format!(
            "not an opsel data connection: {}",
            excerpt(&p[..4])
        ));
    }
    if u64::from(p[4]) != VERSION {
        return err(format!(
            "data connection of protocol version {}, this receiver speaks {VERSION}",
            p[4]
        ));
    }
    if p[5] != 0 {
        // Reserved for later versions: a non-zero value is not ours to ignore.
        return err(format!(
            "data preamble with reserved byte {:#04x} set",
            p[5]
        ));
    }
    let mut t = [0u8; TOKEN_LEN];
    t.copy_from_slice(&p[8..]);
    Ok((t, u16::from_be_bytes([p[6], p[7]])))
}

/// Constant-time equality for tokens (no early exit on the first difference).
pub fn same_token(a: &[u8; TOKEN_LEN], b: &[u8; TOKEN_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---- 6. end and confirmation ----------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub sent: u64,
    /// The transfer's hash over the range sent.
    pub digest: Digest,
    /// The same over `[0, offset + sent)`.
    pub file_digest: Digest,
}

pub fn end_msg(e: &End) -> Value {
    json!({"end": e.sent, "digest": e.digest.hex(), "file_digest": e.file_digest.hex()})
}

/// The completion message of a transfer checked with `hash`.
pub fn parse_end(line: &[u8], hash: HashAlgo) -> Result<End, ProtoError> {
    let m = parse_line(line)?;
    Ok(End {
        sent: get_u64(&m, "end")?,
        digest: Digest::parse(get_str(&m, "digest")?, hash, "digest")?,
        file_digest: Digest::parse(get_str(&m, "file_digest")?, hash, "file_digest")?,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub ok: bool,
    pub received: u64,
    pub digest: Digest,
    pub file_size: u64,
    pub file_digest: Digest,
    pub complete: bool,
}

pub fn confirm_msg(c: &Confirm) -> Value {
    json!({"ok": c.ok, "received": c.received, "digest": c.digest.hex(),
           "file_size": c.file_size, "file_digest": c.file_digest.hex(), "complete": c.complete})
}

/// The receiver's confirmation of a transfer checked with `hash`.
pub fn parse_confirm(line: &[u8], hash: HashAlgo) -> Result<Confirm, ProtoError> {
    let m = parse_line(line)?;
    if let Some(e) = refusal(&m).filter(|_| !m.contains_key("received")) {
        return err(format!("the receiver gave up: {e}"));
    }
    Ok(Confirm {
        ok: get_bool(&m, "ok")?,
        received: get_u64(&m, "received")?,
        digest: Digest::parse(get_str(&m, "digest")?, hash, "digest")?,
        file_size: get_u64(&m, "file_size")?,
        file_digest: Digest::parse(get_str(&m, "file_digest")?, hash, "file_digest")?,
        complete: get_bool(&m, "complete")?,
    })
}

// ---- pre-shared key -------------------------------------------------------------

/// A pre-shared key of at least [`MIN_KEY`] bytes. Never printed.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({} bytes)", self.0.len())
    }
}

impl Key {
    /// The key is the text with surrounding whitespace removed (a file written
    /// by `echo` ends in a newline; the environment may hold the same text).
    pub fn from_bytes(raw: &[u8], whence: &str) -> Result<Key, ProtoError> {
        let start = raw.iter().position(|b| !b.is_ascii_whitespace());
        let end = raw.iter().rposition(|b| !b.is_ascii_whitespace());
        let k = match (start, end) {
            (Some(s), Some(e)) => &raw[s..=e],
            _ => &[][..],
        };
        if k.len() < MIN_KEY {
            return err(format!(
                "the key from {whence} has {} bytes; use at least {MIN_KEY} random bytes, e.g. `head -c 32 /dev/urandom | base64 > opsel.key`",
                k.len()
            ));
        }
        Ok(Key(k.to_vec()))
    }

    fn mac(&self, label: &[u8], a: &[u8], b: &[u8]) -> [u8; 32] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        m.update(label);
        m.update(a);
        m.update(b);
        m.finalize().into_bytes().into()
    }

    fn verify(&self, label: &[u8], a: &[u8], b: &[u8], tag: &[u8; 32]) -> bool {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        m.update(label);
        m.update(a);
        m.update(b);
        // Constant-time comparison.
        m.verify_slice(tag).is_ok()
    }

    /// The sender's answer to the receiver's challenge.
    pub fn sender_mac(&self, challenge: &[u8; CHALLENGE_LEN], nonce: &[u8; NONCE_LEN]) -> [u8; 32] {
        self.mac(SENDER_LABEL, challenge, nonce)
    }

    pub fn check_sender(
        &self,
        challenge: &[u8; CHALLENGE_LEN],
        nonce: &[u8; NONCE_LEN],
        tag: &[u8; 32],
    ) -> bool {
        self.verify(SENDER_LABEL, challenge, nonce, tag)
    }

    /// The receiver's proof (over the sender's nonce) that it holds the key too.
    pub fn receiver_proof(
        &self,
        nonce: &[u8; NONCE_LEN],
        challenge: &[u8; CHALLENGE_LEN],
    ) -> [u8; 32] {
        self.mac(RECEIVER_LABEL, nonce, challenge)
    }

    pub fn check_receiver(
        &self,
        nonce: &[u8; NONCE_LEN],
        challenge: &[u8; CHALLENGE_LEN],
        tag: &[u8; 32],
    ) -> bool {
        self.verify(RECEIVER_LABEL, nonce, challenge, tag)
    }

    /// The key of this transfer's keyed BLAKE3 (both sides derive it from
    /// the pre-shared key and the handshake's challenge and nonce): the
    /// digests in the accept, end and confirmation messages are then MACs
    /// that a peer on the path cannot recompute after changing bytes. Fresh
    /// per transfer, so a resume recomputes the prefix with the new key.
    pub fn data_key(&self, challenge: &[u8; CHALLENGE_LEN], nonce: &[u8; NONCE_LEN]) -> [u8; 32] {
        self.mac(DATA_LABEL, challenge, nonce)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let n = [7u8; NONCE_LEN];
        let line = hello_msg(&n).to_string();
        assert_eq!(parse_hello(line.as_bytes()), Ok(n));
        let c = Challenge {
            auth: true,
            challenge: [9; 32],
        };
        assert_eq!(
            parse_challenge(challenge_msg(&c).to_string().as_bytes()),
            Ok(c)
        );
        let r = Request {
            mac: Some([1; 32]),
            size: 10,
            offset: None,
            name: Some("a.bin".into()),
            streams: 1,
            hash: HashAlgo::Xxh3,
        };
        assert_eq!(parse_request(request_msg(&r).to_string().as_bytes()), Ok(r));
        for (hash, len) in [(HashAlgo::Blake3, 32), (HashAlgo::Xxh3, 16)] {
            let a = Accept {
                token: [3; 16],
                offset: 4,
                prefix_digest: Digest::new(&[5; 32][..len]),
                proof: None,
                streams: 4,
            };
            let line = accept_msg(&a).to_string();
            assert_eq!(parse_accept(line.as_bytes(), hash), Ok(a));
            let e = End {
                sent: 9,
                digest: Digest::new(&[6; 32][..len]),
                file_digest: Digest::new(&[7; 32][..len]),
            };
            assert_eq!(
                parse_end(end_msg(&e).to_string().as_bytes(), hash),
                Ok(e.clone())
            );
            let c = Confirm {
                ok: true,
                received: 9,
                digest: e.digest,
                file_size: 13,
                file_digest: e.file_digest,
                complete: true,
            };
            let line = confirm_msg(&c).to_string();
            assert_eq!(parse_confirm(line.as_bytes(), hash), Ok(c));
        }
        let p = preamble(&[8; 16], 0);
        assert_eq!(parse_preamble(&p), Ok(([8; 16], 0)));
    }

    #[test]
    fn stripes_cover_the_range_once_in_order() {
        for (offset, size) in [
            (0u64, 0u64),
            (0, 1),
            (0, 10),
            (3, 10),
            (5, 1_000_003),
            (7, 7),
        ] {
            for n in 1..=MAX_STREAMS as u16 {
                let mut at = offset;
                for i in 0..n {
                    let (a, b) = stripe(offset, size, n, i);
                    assert_eq!(a, at, "{offset} {size} {n} {i}");
                    assert!(b >= a && b <= size);
                    at = b;
                }
                assert_eq!(at, size.max(offset), "{offset} {size} {n}");
            }
        }
        assert_eq!(stripe(0, 10, 4, 3), (9, 10));
        let r = br#"{"size":10,"offset":0,"streams":9,"hash":"xxh3"}"#;
        assert!(parse_request(r).unwrap_err().0.contains("1 to 8"));
        let r = br#"{"size":10,"offset":0,"streams":0,"hash":"xxh3"}"#;
        assert!(parse_request(r).is_err());
    }

    #[test]
    fn old_versions_are_named() {
        let v1 = br#"{"hello":"opsel-transfer","version":1,"offset":0,"size":5}"#;
        assert_eq!(parse_hello(v1), Err(HelloError::Version(1)));
        assert!(version_refusal(1).contains("version 4 and the sender version 1"));
        // Versions 2 (SHA-256) and 3 (BLAKE3 only) are refused the same way, not misread.
        for v in [2, 3] {
            let h = format!(
                r#"{{"hello":"opsel-transfer","version":{v},"nonce":"00112233445566778899aabbccddeeff"}}"#
            );
            assert_eq!(parse_hello(h.as_bytes()), Err(HelloError::Version(v)));
            assert!(version_refusal(v).contains(&format!("version 4 and the sender version {v}")));
        }
        // A version-3 receiver's challenge: the sender names both versions.
        let c3 = br#"{"hello":"opsel-transfer","version":3,"auth":"none","challenge":"0000000000000000000000000000000000000000000000000000000000000000"}"#;
        let e = parse_challenge(c3).unwrap_err().0;
        assert!(e.contains("version 3, this sender 4"), "{e}");
        // A v3 sender's data preamble is refused, naming the versions.
        let mut p = preamble(&[1; 16], 0);
        p[4] = 3;
        assert!(parse_preamble(&p).unwrap_err().0.contains("version 3"));
    }

    #[test]
    fn hashes_are_named_and_digest_lengths_checked() {
        // A v4 request must name its hash; an unknown one is refused by name.
        let r = br#"{"size":10,"offset":0,"streams":1}"#;
        assert!(parse_request(r).unwrap_err().0.contains("\"hash\""));
        let r = br#"{"size":10,"offset":0,"streams":1,"hash":"md5"}"#;
        let e = parse_request(r).unwrap_err().0;
        assert!(e.contains("md5") && e.contains("xxh3"), "{e}");
        // A digest of the other hash's length is refused, not truncated or padded.
        let e = End {
            sent: 1,
            digest: Digest::new(&[1; 32]),
            file_digest: Digest::new(&[1; 32]),
        };
        let line = end_msg(&e).to_string();
        assert!(parse_end(line.as_bytes(), HashAlgo::Xxh3).is_err());
        assert!(parse_end(line.as_bytes(), HashAlgo::Blake3).is_ok());
    }

    #[test]
    fn unsafe_names_are_refused() {
        for bad in [
            "", ".", "..", "../x", "a/b", ".hidden", "a\0b", "a\nb", "x\\y",
        ] {
            assert!(safe_name(bad).is_err(), "{bad:?}");
        }
        assert!(safe_name(&"x".repeat(MAX_NAME + 1)).is_err());
        assert_eq!(safe_name("data-2024.tar.gz"), Ok("data-2024.tar.gz"));
    }

    #[test]
    fn challenge_response_needs_the_key() {
        let k = Key::from_bytes(b"0123456789abcdef0123\n", "test").unwrap();
        let other = Key::from_bytes(b"0123456789abcdef0124", "test").unwrap();
        let (c, n) = ([1u8; 32], [2u8; 16]);
        let tag = k.sender_mac(&c, &n);
        assert!(k.check_sender(&c, &n, &tag));
        assert!(!other.check_sender(&c, &n, &tag));
        assert!(
            !k.check_sender(&[0; 32], &n, &tag),
            "bound to the challenge"
        );
        // The receiver's proof is not the sender's answer replayed.
        assert!(!k.check_receiver(&n, &c, &tag));
        assert!(k.check_receiver(&n, &c, &k.receiver_proof(&n, &c)));
        // The data key is neither handshake tag, and differs per challenge and per key.
        let dk = k.data_key(&c, &n);
        assert_ne!(dk, tag);
        assert_ne!(dk, k.receiver_proof(&n, &c));
        assert_ne!(dk, k.data_key(&[0; 32], &n));
        assert_ne!(dk, other.data_key(&c, &n));
        assert!(Key::from_bytes(b"  short \n", "test").is_err());
    }

    #[test]
    fn lines_are_bounded() {
        let mut r = LineReader::new(&b"{\"a\":1}\nxyz"[..]);
        assert_eq!(r.read_line(100, |_| Ok(())).unwrap().unwrap(), b"{\"a\":1}");
        assert!(r.read_line(100, |_| Ok(())).is_err(), "EOF inside a line");
        let long = vec![b'x'; 10_000];
        let mut r = LineReader::new(&long[..]);
        let e = r.read_line(MAX_LINE, |_| Ok(())).unwrap_err();
        assert!(e.to_string().contains("longer than 4096"), "{e}");
        let mut r = LineReader::new(&b""[..]);
        assert!(r.read_line(10, |_| Ok(())).unwrap().is_none());
    }
}
