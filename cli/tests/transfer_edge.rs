//! `opsel recv` / `opsel serve` facing hostile or broken peers on loopback:
//! each bad peer is dropped within its bounds and logged, the receiver keeps
//! serving, the legitimate sender that follows succeeds, and no existing
//! file is ever lost. Timeouts are shortened (1 s) so every case is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{s, write_file, TempDir};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_opsel");
const KEY: &str = "correct horse battery staple 42";

/// Kills the child on drop so a failing assertion leaves no receiver behind.
struct Proc {
    child: Option<Child>,
    /// The thread that reads stderr when [`spawn_listening`] took it to
    /// learn the port (its text comes after stdout's, as with a plain child).
    err: Option<std::thread::JoinHandle<String>>,
}
impl Proc {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }
    fn with_stderr(&mut self, out: String) -> String {
        match self.err.take() {
            Some(t) => out + &t.join().unwrap(),
            None => out,
        }
    }
    fn finish(mut self, limit: Duration, what: &str) -> (bool, String) {
        let (ok, out) = common::wait_within(self.child.take().unwrap(), limit);
        let out = self.with_stderr(out);
        match ok {
            Some(ok) => (ok, out),
            None => panic!("{what} did not finish within {limit:?}: {out}"),
        }
    }
    /// Stop a server and return what it printed.
    fn kill(mut self) -> String {
        let mut c = self.child.take().unwrap();
        let _ = c.kill();
        let out = c.wait_with_output().unwrap();
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.with_stderr(out)
    }
}
impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(args: &[&str], key: Option<&str>) -> Proc {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_remove("OPSEL_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(k) = key {
        c.env("OPSEL_KEY", k);
    }
    Proc {
        child: Some(c.spawn().unwrap()),
        err: None,
    }
}

/// Starts a receiver (`recv` or `serve` with `--listen 127.0.0.1:0` in
/// `args`) and returns it with the address it bound, read from its
/// "listening on" line: the kernel picks a free port and the receiver holds
/// it from that moment (a port found free and bound later by the receiver
/// could be taken in between by any connection on the machine).
fn spawn_listening(args: &[&str], key: Option<&str>) -> (Proc, String) {
    let mut p = spawn(args, key);
    let mut r = BufReader::new(p.child.as_mut().unwrap().stderr.take().unwrap());
    let mut head = String::new();
    let addr = loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap() == 0 {
            panic!("the receiver ended before listening: {head}");
        }
        head.push_str(&l);
        if let Some(rest) = l.split(": listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    p.err = Some(std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        head + &String::from_utf8_lossy(&rest)
    }));
    (p, addr)
}

/// The peer closed `s` (EOF or reset) within `limit`; what it sent before is
/// read and dropped.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// How many of `conns` the receiver has not closed yet (looked at without
/// waiting; what they were sent is read and dropped).
fn still_open(conns: &mut [TcpStream]) -> usize {
    let mut open = 0;
    for c in conns.iter_mut() {
        c.set_nonblocking(true).unwrap();
        let mut b = [0u8; 4096];
        let closed = loop {
            match c.read(&mut b) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
            }
        };
        c.set_nonblocking(false).unwrap();
        open += usize::from(!closed);
    }
    open
}

/// Waits until the receiver has closed all but `n` of `conns` and returns
/// how many are open then. The bound only keeps a broken receiver from
/// hanging the suite; it is far above what the receiver needs (its own
/// deadlines are 1 to 5 s).
fn wait_open_at_most(conns: &mut [TcpStream], n: usize, what: &str) -> usize {
    let t = Instant::now();
    loop {
        let open = still_open(conns);
        if open <= n {
            return open;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: {open} connections still open"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A peer hangs up: it half-closes `s` and waits until the receiver, having
/// seen the end, has finished with the connection and closed it. A
/// receiver's handler releases the connection's slot (and a transfer the
/// busy flag) before the peer can see that close, so a sender started
/// afterwards meets neither (a fixed sleep here raced the receiver's
/// threads on a loaded machine).
fn hang_up(mut s: TcpStream, what: &str) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    assert!(
        closed_within(&mut s, Duration::from_secs(30)),
        "{what}: the receiver kept the connection"
    );
}

/// A hand-rolled protocol-v3 client (no key) to misbehave at any step.
struct Raw {
    s: TcpStream,
    r: BufReader<TcpStream>,
}
impl Raw {
    fn connect(addr: &str) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let r = BufReader::new(s.try_clone().unwrap());
        Raw { s, r }
    }
    fn send(&mut self, v: &Value) {
        let mut l = v.to_string();
        l.push('\n');
        self.s.write_all(l.as_bytes()).unwrap();
    }
    fn line(&mut self) -> Option<Value> {
        let mut l = String::new();
        match self.r.read_line(&mut l) {
            Ok(n) if n > 0 => serde_json::from_str(&l).ok(),
            _ => None,
        }
    }
    fn hello(addr: &str) -> (Raw, Value) {
        let mut c = Raw::connect(addr);
        c.send(&json!({"hello": "opsel-transfer", "version": 4, "nonce": "00112233445566778899aabbccddeeff"}));
        let ch = c.line().expect("a challenge");
        (c, ch)
    }
    /// Hello + request; returns the receiver's answer. A request without a
    /// `hash` asks for xxh3 (protocol v4 requires one; its absence is a
    /// proto unit test).
    fn request(addr: &str, mut req: Value) -> (Raw, Value) {
        let (mut c, _) = Raw::hello(addr);
        if let Some(m) = req.as_object_mut() {
            m.entry("hash").or_insert(json!("xxh3"));
        }
        c.send(&req);
        let a = c.line().unwrap_or(Value::Null);
        (c, a)
    }
    /// The peer closed (EOF or reset) within `limit`.
    fn closed_within(&mut self, limit: Duration) -> bool {
        closed_within(&mut self.s, limit)
    }
    /// The sender vanishes: see [`hang_up`].
    fn hang_up(self, what: &str) {
        hang_up(self.s, what)
    }
}

fn data_conn(addr: &str, token_hex: &str) -> TcpStream {
    let mut d = TcpStream::connect(addr).unwrap();
    let mut p = Vec::from(*b"OPSD");
    p.extend_from_slice(&[4, 0, 0, 0]);
    for i in 0..16 {
        p.push(u8::from_str_radix(&token_hex[2 * i..2 * i + 2], 16).unwrap());
    }
    d.write_all(&p).unwrap();
    d
}

/// `opsel recv` on a free loopback port with 1 s handshake and idle limits
/// (unless `extra` sets them): the receiver and its address.
fn fast_recv(out: &Path, extra: &[&str], key: Option<&str>) -> (Proc, String) {
    let mut args = vec!["recv", "--listen", "127.0.0.1:0", "--timeout", "60"];
    for limit in ["--handshake-timeout", "--idle-timeout"] {
        if !extra.contains(&limit) {
            args.extend([limit, "1"]);
        }
    }
    let out = s(out);
    args.extend(["--out", out.as_str()]);
    args.extend(extra);
    spawn_listening(&args, key)
}

/// A test's directory with `src.bin` (`n` bytes from `seed`, also
/// returned) and the path `dst.bin` a receiver writes.
fn source_and_dest(tag: &str, n: usize, seed: u64) -> (TempDir, PathBuf, Vec<u8>, PathBuf) {
    let d = TempDir::new(tag);
    let src = d.0.join("src.bin");
    let data = write_file(&src, n, seed);
    let dst = d.0.join("dst.bin");
    (d, src, data, dst)
}

/// `opsel send --to addr --file file extra…` to its end (a minute at most:
/// a hang guard, not a measure): its success and what it printed; `what`
/// names it in a panic.
fn send(addr: &str, file: &Path, extra: &[&str], key: Option<&str>, what: &str) -> (bool, String) {
    let file = s(file);
    let mut args = vec!["send", "--to", addr, "--file", file.as_str()];
    args.extend(extra);
    spawn(&args, key).finish(Duration::from_secs(60), what)
}

/// [`send`] to the one-shot receiver `rx`, and both succeed: what each printed.
fn send_and_recv(
    rx: Proc,
    addr: &str,
    file: &Path,
    extra: &[&str],
    key: Option<&str>,
) -> (String, String) {
    let (ok_tx, out_tx) = send(addr, file, extra, key, "send");
    let (ok_rx, out_rx) = rx.finish(Duration::from_secs(60), "recv");
    assert!(ok_tx && ok_rx, "send {extra:?}: {out_tx}\nrecv: {out_rx}");
    (out_tx, out_rx)
}

#[test]
fn hostile_peers_are_dropped_and_the_next_sender_succeeds() {
    let (d, src, data, dst) = source_and_dest("hostile", 2_000_000, 11);
    let (rx, addr) = fast_recv(&dst, &["--max-size", "10M"], None);

    // 1. A port scanner: connect and close.
    drop(TcpStream::connect(&addr).unwrap());
    // 2. An HTTP request.
    let mut c = Raw::connect(&addr);
    c.s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(
        c.closed_within(Duration::from_secs(3)),
        "HTTP peer not dropped"
    );
    // 3. Says nothing: dropped at the handshake deadline (1 s), not earlier than asked.
    let mut c = Raw::connect(&addr);
    let t = Instant::now();
    assert!(
        c.closed_within(Duration::from_secs(4)),
        "silent peer not dropped"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(800),
        "{:?}",
        t.elapsed()
    );
    // 4. Slowloris: one byte every 200 ms never completes a hello in time.
    //    The 51 bytes take 10 s: a receiver that let each byte renew the 1 s
    //    deadline would take them all, so the drop must come while they trickle.
    let mut c = Raw::connect(&addr);
    let dropped = br#"{"hello":"opsel-transfer","version":4,"nonce":"00"#
        .iter()
        .any(|b| {
            std::thread::sleep(Duration::from_millis(200));
            c.s.write_all(&[*b]).is_err()
        });
    assert!(dropped, "slowloris not dropped");
    // 5. A line longer than any control message (bounded memory).
    let mut c = Raw::connect(&addr);
    let _ = c.s.write_all(&[b'{'; 100_000]);
    assert!(
        c.closed_within(Duration::from_secs(3)),
        "oversized line not dropped"
    );
    // 6. Not JSON.
    let mut c = Raw::connect(&addr);
    c.s.write_all(b"{this is not json}\n").unwrap();
    assert!(c.closed_within(Duration::from_secs(3)));
    // 7. The old protocol: refused with a message naming both versions.
    let mut c = Raw::connect(&addr);
    c.send(&json!({"hello": "opsel-transfer", "version": 1, "offset": 0, "size": 5}));
    let r = c.line().expect("a refusal");
    assert_eq!(r["ok"], false);
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("version 4") && e.contains("version 1"), "{e}");
    // 7b. A version-3 sender (BLAKE3 only, before the hash was negotiated):
    // refused the same way, naming both versions.
    let mut c = Raw::connect(&addr);
    c.send(&json!({"hello": "opsel-transfer", "version": 3, "nonce": "00112233445566778899aabbccddeeff"}));
    let r = c.line().expect("a refusal");
    assert_eq!(r["ok"], false);
    let e = r["error"].as_str().unwrap();
    assert!(e.contains("version 4 and the sender version 3"), "{e}");
    // 8. A valid hello, then gone.
    let (c, ch) = Raw::hello(&addr);
    assert_eq!(ch["auth"], "none");
    drop(c);
    // 9. A request with a lying type.
    let (_c, a) = Raw::request(&addr, json!({"size": "huge"}));
    assert_eq!(a["ok"], false, "{a}");
    // 10. Bigger than --max-size.
    let (_c, a) = Raw::request(&addr, json!({"size": 1u64 << 40, "offset": 0}));
    assert!(a["error"].as_str().unwrap().contains("--max-size"), "{a}");
    // 11. More data streams than a transfer may stripe over.
    let (_c, a) = Raw::request(&addr, json!({"size": 10, "offset": 0, "streams": 9}));
    assert!(a["error"].as_str().unwrap().contains("1 to 8"), "{a}");
    // 12. A data connection nobody asked for (out of order), with a made-up token.
    let mut dc = data_conn(&addr, "0123456789abcdef0123456789abcdef");
    let _ = dc.write_all(&[0u8; 1000]);
    let mut rc = Raw {
        r: BufReader::new(dc.try_clone().unwrap()),
        s: dc,
    };
    assert!(
        rc.closed_within(Duration::from_secs(3)),
        "stray data connection kept"
    );
    // 13. Accepted, but the data connection never comes: dropped after 1 s.
    let (mut c, a) = Raw::request(&addr, json!({"size": 1000, "offset": 0}));
    assert_eq!(a["ok"], true, "{a}");
    let r = c.line().expect("the reason");
    assert!(
        r["error"].as_str().unwrap().contains("no data connection"),
        "{r}"
    );
    assert!(
        !d.0.join(".dst.bin.opsel-part").exists(),
        "an empty part file was left"
    );
    // 14. Two data connections present the same token: one attaches, the
    //     other is refused. Each has its own handler thread, so either may
    //     come first; each sends its own byte value, and the bytes kept are
    //     all from one of them.
    let (mut c, a) = Raw::request(&addr, json!({"size": 1000, "offset": 0}));
    let tok = a["token"].as_str().unwrap().to_string();
    let mut d1 = data_conn(&addr, &tok);
    let mut d2 = data_conn(&addr, &tok);
    // 15. ... and that transfer lies about its size: 5000 bytes for 1000 announced.
    let _ = d1.write_all(&[7u8; 5000]);
    let _ = d2.write_all(&[8u8; 5000]);
    let r = c.line().expect("the reason");
    assert!(r["error"].as_str().unwrap().contains("more than"), "{r}");
    let kept = std::fs::read(d.0.join(".dst.bin.opsel-part")).unwrap();
    assert!(
        kept.len() == 1000 && (kept.iter().all(|&b| b == 7) || kept.iter().all(|&b| b == 8)),
        "the bytes kept mix two connections: {kept:?}"
    );
    assert!(
        closed_within(&mut d1, Duration::from_secs(3)),
        "token reused"
    );
    assert!(
        closed_within(&mut d2, Duration::from_secs(3)),
        "token reused"
    );
    // 16. Accepted, some data, then silence: dropped after the idle limit.
    let (mut c, a) = Raw::request(&addr, json!({"size": 1000, "offset": 0}));
    let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
    d1.write_all(&[1u8; 100]).unwrap();
    let r = c.line().expect("the reason");
    assert!(r["error"].as_str().unwrap().contains("silent"), "{r}");
    // 17. Sends everything, then vanishes without its completion message.
    let (c, a) = Raw::request(&addr, json!({"size": 1000, "offset": 0}));
    let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
    d1.write_all(&data[..1000]).unwrap();
    drop(d1);
    c.hang_up("the vanished sender");
    // 18. A flood of connections that say nothing: the cap drops the excess at
    //     once (before any handshake deadline could free a slot), then the
    //     flood hangs up.
    let mut flood: Vec<TcpStream> = (0..40)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    wait_open_at_most(&mut flood, 18, "the flood beyond the cap");
    for f in flood {
        hang_up(f, "a flood connection");
    }
    assert!(!dst.exists(), "no bad peer may create the destination");

    // The real sender, after all of that.
    let (_, out_rx) = send_and_recv(rx, &addr, &src, &[], None);
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    for want in [
        "dropped before saying anything",
        "not an opsel sender",
        "longer than 4096",
        "not JSON",
        "refused: this receiver speaks opsel-transfer protocol version 4",
        "dropped before its request",
        "--max-size",
        "belongs to no transfer",
        "no data connection arrived",
        "more than the 1000 bytes",
        "silent for 1.0 s",
        "without its completion message",
        "connections from this host are already open",
        "verified 2000000 bytes",
    ] {
        assert!(
            out_rx.contains(want),
            "no log line with {want:?}:\n{out_rx}"
        );
    }
    // Step 12's made-up token and step 14's second connection.
    assert!(
        out_rx
            .matches("its token belongs to no transfer waiting for data")
            .count()
            >= 2,
        "{out_rx}"
    );
    // The part file of the lying and vanished transfers was replaced by the good one.
    assert!(!d.0.join(".dst.bin.opsel-part").exists());
}

#[test]
fn a_second_sender_is_refused_without_disturbing_the_first() {
    let (d, _, data, dst) = source_and_dest("busy", 300_000, 5);
    // The first transfer's data connection is silent while the second sender
    // runs (up to the 20 s this test gives it): the idle limit must outlast that.
    let (rx, addr) = fast_recv(&dst, &["--idle-timeout", "30"], None);
    // The first transfer is running (accepted, data flowing slowly).
    let (mut c, a) = Raw::request(&addr, json!({"size": 300_000, "offset": 0}));
    assert_eq!(a["ok"], true, "{a}");
    let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
    d1.write_all(&data[..100_000]).unwrap();
    // A second sender comes: refused as busy.
    let other = d.0.join("other.bin");
    write_file(&other, 1000, 6);
    let (ok2, out2) = send(&addr, &other, &[], None, "second send");
    assert!(!ok2 && out2.contains("busy"), "{out2}");
    // The first one completes and is verified.
    d1.write_all(&data[100_000..]).unwrap();
    drop(d1);
    // Raw::request asked for xxh3: the canonical XXH3-128 (`xxhsum -H2`).
    let x = |b: &[u8]| format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b));
    c.send(&json!({"end": 300_000, "digest": x(&data), "file_digest": x(&data)}));
    let conf = c.line().expect("a confirmation");
    assert_eq!(
        (conf["ok"].clone(), conf["complete"].clone()),
        (json!(true), json!(true)),
        "{conf}"
    );
    let (ok, out) = rx.finish(Duration::from_secs(10), "recv");
    assert!(ok, "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
}

#[test]
fn existing_files_are_kept_unless_a_verified_transfer_replaces_them() {
    let (d, src, data, dst) = source_and_dest("keep", 500_000, 8);
    std::fs::write(&dst, b"the user's precious file").unwrap();

    // Without --force: refused, untouched.
    let (rx, addr) = fast_recv(&dst, &[], None);
    let (ok, out) = send(&addr, &src, &[], None, "send");
    assert!(
        !ok && out.contains("already exists") && out.contains("--force"),
        "{out}"
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"the user's precious file");

    // A sender that vanishes mid-transfer (even with --force on the receiver) leaves it too.
    drop(rx.kill());
    let (rx, addr) = fast_recv(&dst, &["--force"], None);
    let (c, a) = Raw::request(&addr, json!({"size": 500_000, "offset": 0}));
    let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
    d1.write_all(&data[..200_000]).unwrap();
    drop(d1);
    c.hang_up("the vanished sender");
    assert_eq!(std::fs::read(&dst).unwrap(), b"the user's precious file");
    // The verified prefix is kept beside it; a resume completes it and only then replaces.
    let part = d.0.join(".dst.bin.opsel-part");
    assert_eq!(std::fs::metadata(&part).unwrap().len(), 200_000);
    let (ok, out) = send(&addr, &src, &["--resume"], None, "send --resume");
    assert!(ok && out.contains("byte-identical"), "{out}");
    let (ok, out) = rx.finish(Duration::from_secs(10), "recv");
    assert!(ok && out.contains("from offset 200000"), "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    assert!(!part.exists());

    // A resume onto a prefix that differs from the sender's file sends nothing.
    std::fs::write(&part, vec![0u8; 1000]).unwrap();
    let (rx, addr) = fast_recv(&d.0.join("new.bin"), &[], None);
    std::fs::rename(&part, d.0.join(".new.bin.opsel-part")).unwrap();
    let (ok, out) = send(&addr, &src, &["--resume"], None, "send --resume");
    assert!(!ok && out.contains("differ"), "{out}");
    drop(rx.kill());
    assert!(!d.0.join("new.bin").exists());
}

#[test]
fn authentication_admits_only_key_holders() {
    let (d, src, data, dst) = source_and_dest("auth", 200_000, 9);
    let (rx, addr) = fast_recv(&dst, &[], Some(KEY));

    // No key: told a key is needed, nothing written.
    let (ok, out) = send(&addr, &src, &[], None, "send without key");
    assert!(!ok && out.contains("requires a pre-shared key"), "{out}");
    // Wrong key: refused.
    let (ok, out) = send(
        &addr,
        &src,
        &[],
        Some("a wrong key of enough length"),
        "send with a wrong key",
    );
    assert!(!ok && out.contains("authentication failed"), "{out}");
    // A raw peer that skips the MAC learns nothing but the refusal.
    let (_c, a) = Raw::request(&addr, json!({"size": 10, "offset": 0}));
    assert_eq!(a["ok"], false);
    assert!(a.get("token").is_none() && a.get("offset").is_none(), "{a}");
    // The key from a file works; the receiver proves itself back.
    let kf = d.0.join("key");
    std::fs::write(&kf, format!("{KEY}\n")).unwrap();
    let (ok, out) = send(
        &addr,
        &src,
        &["--key-file", &s(&kf)],
        None,
        "send with the key",
    );
    assert!(ok, "{out}");
    let (ok, out) = rx.finish(Duration::from_secs(10), "recv");
    assert!(ok, "{out}");
    assert!(out.contains("authentication failed (wrong key)"), "{out}");
    assert!(out.contains("authentication failed (no key)"), "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);

    // A sender holding a key does not send to a receiver that cannot prove it has it.
    let (rx, addr) = fast_recv(&d.0.join("x.bin"), &[], None);
    let (ok, out) = send(&addr, &src, &[], Some(KEY), "send to an impostor");
    assert!(!ok && out.contains("did not prove"), "{out}");
    drop(rx.kill());
    assert!(!d.0.join("x.bin").exists());

    // A non-loopback receiver without a key refuses to start.
    let p = spawn(&["recv", "--listen", "0.0.0.0:0", "--out", &s(&dst)], None);
    let (ok, out) = p.finish(Duration::from_secs(10), "recv on 0.0.0.0");
    assert!(!ok && out.contains("--no-auth"), "{out}");
    // A key that is too short is refused with how to make one.
    let p = spawn(
        &["recv", "--listen", "127.0.0.1:0", "--out", &s(&dst)],
        Some("short"),
    );
    let (ok, out) = p.finish(Duration::from_secs(10), "recv with a short key");
    assert!(!ok && out.contains("at least 16"), "{out}");
}

#[test]
fn serve_receives_transfer_after_transfer_and_names_cannot_escape() {
    let d = TempDir::new("serve");
    let dir = d.0.join("inbox");
    std::fs::create_dir_all(&dir).unwrap();
    let (srv, addr) = spawn_listening(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dir",
            &s(&dir),
            "--handshake-timeout",
            "1",
        ],
        Some(KEY),
    );
    let mut sent = Vec::new();
    for i in 0..3u64 {
        let f = d.0.join(format!("f{i}.bin"));
        sent.push(write_file(&f, 10_000 + 7919 * i as usize, i));
        let (ok, out) = send(&addr, &f, &[], Some(KEY), "send");
        assert!(ok, "{out}");
    }
    for name in ["../escape.bin", "/tmp/abs.bin", ".hidden", "a/b", ".."] {
        let f = d.0.join("f0.bin");
        let (ok, out) = send(
            &addr,
            &f,
            &["--name", name],
            Some(KEY),
            "send with a bad name",
        );
        assert!(!ok && out.contains("name"), "{name}: {out}");
    }
    // The same name again: refused (serve never overwrites without --force).
    let (ok, out) = send(&addr, &d.0.join("f1.bin"), &[], Some(KEY), "send again");
    assert!(!ok && out.contains("already exists"), "{out}");
    let log = srv.kill();
    for i in 0..3u64 {
        assert_eq!(
            std::fs::read(dir.join(format!("f{i}.bin"))).unwrap(),
            sent[i as usize],
            "{log}"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["f0.bin", "f1.bin", "f2.bin"], "{log}");
    assert!(!d.0.join("escape.bin").exists() && !Path::new("/tmp/abs.bin").exists());
}

/// A small tmpfs mounted for one test and unmounted however it ends.
struct Tmpfs(PathBuf);
impl Tmpfs {
    fn mount(p: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(p).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", &s(p)])
            .status()
            .map(|st| st.success())
            .unwrap_or(false);
        ok.then(|| Tmpfs(p.to_path_buf()))
    }
    fn remount_ro(&self) {
        let st = Command::new("mount")
            .args(["-o", "remount,ro", &s(&self.0)])
            .status()
            .unwrap();
        assert!(st.success());
    }
}
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").args(["-l", &s(&self.0)]).status();
    }
}

#[test]
fn a_full_disk_or_a_read_only_directory_keep_the_old_file_and_say_why() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to mount a small tmpfs");
        return;
    }
    let d = TempDir::new("disk");
    let Some(fs) = Tmpfs::mount(&d.0.join("mnt"), "2m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here");
        return;
    };
    let dst = fs.0.join("dst.bin");
    std::fs::write(&dst, b"old contents").unwrap();
    let big = d.0.join("big.bin");
    write_file(&big, 3_000_000, 1);
    let (rx, addr) = fast_recv(&dst, &["--force"], None);

    // More than the free space: refused before any byte moves.
    let (ok, out) = send(&addr, &big, &[], None, "send too big");
    assert!(!ok && out.contains("bytes free"), "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), b"old contents");

    // The disk fills up during the transfer: the write fails, the sender is told why.
    let (mut c, a) = Raw::request(&addr, json!({"size": 1_000_000, "offset": 0}));
    assert_eq!(a["ok"], true, "{a}");
    std::fs::write(fs.0.join("filler"), vec![0u8; 1_500_000]).unwrap();
    let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
    let _ = d1.write_all(&vec![5u8; 1_000_000]);
    drop(d1);
    let r = c.line().expect("the reason");
    assert!(
        r["error"].as_str().unwrap().contains("No space left"),
        "{r}"
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"old contents");
    std::fs::remove_file(fs.0.join("filler")).unwrap();

    // A read-only directory (even for root): refused, saying so.
    fs.remount_ro();
    let small = d.0.join("small.bin");
    write_file(&small, 1000, 2);
    let (ok, out) = send(&addr, &small, &[], None, "send to a read-only directory");
    assert!(!ok && out.contains("Read-only file system"), "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), b"old contents");
    let log = rx.kill();
    assert!(
        log.contains("No space left") && log.contains("Read-only"),
        "{log}"
    );
}

fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_connection_flood_costs_bounded_memory_and_threads() {
    let d = TempDir::new("flood");
    // A 5 s handshake limit: the flood (a fraction of a second) is over, and
    // the excess dropped, long before the first admitted connection times
    // out, so no slot is freed while the threads are counted. Freed slots
    // would let new handler threads start while the old ones are still
    // exiting, and the count seen would no longer be the cap's.
    let (rx, addr) = fast_recv(&d.0.join("out.bin"), &["--handshake-timeout", "5"], None);
    let pid = rx.pid();
    let rss0 = proc_status(pid, "VmRSS:");
    // The most threads seen while the flood lasts.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut most = 0;
        while !st.load(std::sync::atomic::Ordering::SeqCst) {
            most = most.max(proc_status(pid, "Threads:"));
            std::thread::sleep(Duration::from_millis(5));
        }
        most
    });
    let t0 = Instant::now();
    // 300 connections that each hold a handshake slot until the limit:
    // silent, an unterminated line just under the line limit, a hello
    // without a request.
    let mut conns = Vec::new();
    for i in 0..300 {
        if let Ok(mut c) = TcpStream::connect(&addr) {
            let _ = match i % 3 {
                1 => c.write_all(&[b'{'; 4000]),
                2 => c.write_all(
                    b"{\"hello\":\"opsel-transfer\",\"version\":4,\"nonce\":\"00112233445566778899aabbccddeeff\"}\n",
                ),
                _ => Ok(()),
            };
            conns.push(c);
        }
    }
    let connect_s = t0.elapsed().as_secs_f64();
    // Main + UDP echo + at most 18 handshakes from one host (`Limits::max_conns_per_host`:
    // two striped transfers of a control and 8 data connections); the rest
    // are closed at once.
    let held = wait_open_at_most(&mut conns, 18, "the flood beyond the cap");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let threads = sampler.join().unwrap();
    let hwm = proc_status(pid, "VmHWM:");
    // The held ones are closed at the handshake limit, and their threads end.
    wait_open_at_most(&mut conns, 0, "the held connections");
    let t = Instant::now();
    let mut threads_after = proc_status(pid, "Threads:");
    while threads_after > 2 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
        threads_after = proc_status(pid, "Threads:");
    }
    drop(rx.kill());
    println!(
        "300 hostile connections ({} connected in {connect_s:.2} s): {held} held; RSS {rss0} kB before, peak {hwm} kB; at most {threads} threads, {threads_after} after",
        conns.len()
    );
    assert_eq!(held, 18, "held connections");
    assert!((3..=2 + 18).contains(&threads), "{threads} threads");
    assert_eq!(threads_after, 2);
    assert!(hwm < rss0 + 8 * 1024, "peak {hwm} kB from {rss0} kB");
}

// fuzz/common.rs allows its own dead code (each user takes a part).
#[path = "../../fuzz/common.rs"]
mod fuzzing;

#[test]
fn a_receiver_fed_mutated_sessions_keeps_serving() {
    // Network-level fuzzing: whole sessions of mutated control lines and
    // preambles against one live receiver, then a real transfer.
    let (_d, src, data, dst) = source_and_dest("sessions", 100_000, 3);
    let (rx, addr) = fast_recv(&dst, &[], None);
    let hello = json!({"hello": "opsel-transfer", "version": 4, "nonce": "00112233445566778899aabbccddeeff"});
    let seeds: Vec<Vec<u8>> = [
        hello.clone(),
        json!({"size": 1000, "offset": 0, "name": "x", "streams": 1, "hash": "xxh3"}),
        json!({"size": 1000, "hash": "blake3"}),
        json!({"end": 10, "digest": "00", "file_digest": "11"}),
    ]
    .iter()
    .map(|v| v.to_string().into_bytes())
    .collect();
    let mut rng = fuzzing::Rng(0x5eed);
    let t0 = Instant::now();
    // Every session half-closes when done (as a closed socket would look to
    // the receiver) and is kept, to wait below until the receiver let it go.
    let mut sessions = Vec::new();
    for i in 0..120 {
        let Ok(mut c) = TcpStream::connect(&addr) else {
            continue;
        };
        c.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        for step in 0..3 {
            let mut line = seeds[if step == 0 && i % 2 == 0 {
                0
            } else {
                rng.below(seeds.len())
            }]
            .clone();
            if i % 2 == 1 || step > 0 {
                fuzzing::mutate_bytes(&mut rng, &seeds, &mut line);
            }
            line.push(b'\n');
            if c.write_all(&line).is_err() {
                break;
            }
            let mut b = [0u8; 4096];
            let _ = c.read(&mut b);
        }
        let _ = c.shutdown(std::net::Shutdown::Write);
        sessions.push(c);
        if i % 4 == 0 {
            // A mutated data preamble on its own connection.
            let mut p = Vec::from(*b"OPSD\x03\x00\x00\x00");
            p.extend((0..16).map(|_| rng.next() as u8));
            fuzzing::mutate_bytes(&mut rng, &seeds, &mut p);
            if let Ok(mut dc) = TcpStream::connect(&addr) {
                let _ = dc.write_all(&p);
                let _ = dc.shutdown(std::net::Shutdown::Write);
                sessions.push(dc);
            }
        }
    }
    let fuzz_s = t0.elapsed().as_secs_f64();
    // The real sender must not meet the per-host cap or a transfer a
    // mutated session started: wait until the receiver closed every session
    // (a fixed sleep raced its threads on a loaded machine).
    wait_open_at_most(&mut sessions, 0, "the mutated sessions");
    let (_, out_rx) = send_and_recv(rx, &addr, &src, &[], None);
    assert_eq!(std::fs::read(&dst).unwrap(), data);
    println!(
        "120 mutated sessions in {fuzz_s:.1} s: {} log lines, then a verified transfer",
        out_rx.lines().count()
    );
}

fn striped_data_conn(addr: &str, token_hex: &str, stream: u16) -> TcpStream {
    let mut d = TcpStream::connect(addr).unwrap();
    let mut p = Vec::from(*b"OPSD");
    p.extend_from_slice(&[4, 0]);
    p.extend_from_slice(&stream.to_be_bytes());
    for i in 0..16 {
        p.push(u8::from_str_radix(&token_hex[2 * i..2 * i + 2], 16).unwrap());
    }
    d.write_all(&p).unwrap();
    d
}

/// `--streams N`: the file striped over N connections arrives byte-identical
/// (sizes not a multiple of N, and from a resume offset); a stream that dies
/// mid-transfer fails it with an error naming the stream, renames nothing and
/// leaves the contiguous prefix, which `--resume` then completes.
#[test]
fn striped_transfers_and_a_dead_stream_then_resume() {
    let d = TempDir::new("streams");
    let src = d.0.join("src.bin");
    let data = write_file(&src, 3_000_017, 11);
    for n in ["2", "3", "8"] {
        let dst = d.0.join(format!("dst{n}.bin"));
        let (rx, addr) = fast_recv(&dst, &[], None);
        let (out_tx, _) = send_and_recv(rx, &addr, &src, &["--cca", "cubic", "--streams", n], None);
        assert!(out_tx.contains("byte-identical"), "{out_tx}");
        assert!(std::fs::read(&dst).unwrap() == data, "{n} streams");
    }

    // A dead stream: 2 streams over 1 000 003 bytes, segments [0, 500 002)
    // and [500 002, 1 000 003); stream 1 sends 1000 bytes and closes.
    let dst = d.0.join("dead.bin");
    let part = d.0.join(".dead.bin.opsel-part");
    let (rx, addr) = fast_recv(&dst, &[], None);
    let (mut c, a) = Raw::request(
        &addr,
        json!({"size": 1_000_003, "offset": 0, "name": "x", "streams": 2}),
    );
    assert_eq!(a["streams"], 2, "{a}");
    let token = a["token"].as_str().unwrap().to_string();
    // An index past the transfer's streams is dropped, the transfer goes on.
    let mut bad = striped_data_conn(&addr, &token, 5);
    let mut b = [0u8; 1];
    bad.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(bad.read(&mut b), Ok(0) | Err(_)));
    let mut d0 = striped_data_conn(&addr, &token, 0);
    let mut d1 = striped_data_conn(&addr, &token, 1);
    d0.write_all(&data[..500_002]).unwrap();
    d1.write_all(&data[500_002..501_002]).unwrap();
    drop(d1);
    let r = c.line().expect("the reason");
    let e = r["error"].as_str().unwrap_or_default().to_string();
    assert!(
        e.contains("data stream 1 ended after 1000 of its 500001 bytes"),
        "{r}"
    );
    drop(d0);
    drop(c);
    assert!(!dst.exists(), "nothing may be renamed into place");
    let kept = std::fs::read(&part).unwrap();
    assert!(kept.len() <= 501_002, "{}", kept.len());
    assert!(
        kept == data[..kept.len()],
        "the part file is a prefix of the source"
    );
    // The receiver keeps serving: a resume over 3 streams completes it.
    std::fs::copy(&src, d.0.join("x")).unwrap();
    let (ok_tx, out_tx) = send(
        &addr,
        &d.0.join("x"),
        &["--cca", "cubic", "--streams", "3", "--resume"],
        None,
        "send",
    );
    let out_rx = rx.kill();
    assert!(ok_tx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert!(std::fs::read(&dst).unwrap() == data);
    assert!(
        out_rx.contains("stripes over 2 data connections (indices 0 to 1)"),
        "{out_rx}"
    );
}

/// `--streams N --time T`: every stream stops at T, the sender confirms the
/// contiguous prefix (segment 0 up to the first segment not sent whole) and
/// the receiver keeps exactly that as its verified part file; `--resume`
/// (with another stream count) then completes the file byte-identically.
#[test]
fn striped_send_stopped_at_time_keeps_the_contiguous_prefix() {
    let d = TempDir::new("streams-time");
    let src = d.0.join("src.bin");
    // 64 MiB over 4 streams, stopped after 1 ms: each stream sends at most a
    // few MiB of its 16 MiB segment (loopback moves a few GB/s).
    let data = write_file(&src, 64 << 20, 5);
    let dst = d.0.join("dst.bin");
    let part = d.0.join(".dst.bin.opsel-part");
    let (rx, addr) = fast_recv(&dst, &["--idle-timeout", "10"], None);
    let (out_tx, out_rx) = send_and_recv(
        rx,
        &addr,
        &src,
        &["--cca", "cubic", "--streams", "4", "--time", "0.001"],
        None,
    );
    assert!(out_tx.contains("stopped at byte"), "{out_tx}");
    assert!(out_rx.contains("verified prefix"), "{out_rx}");
    assert!(!dst.exists(), "a prefix is not renamed into place");
    let kept = std::fs::read(&part).unwrap();
    assert!(kept.len() < data.len(), "{}", kept.len());
    assert!(
        kept == data[..kept.len()],
        "the part file is the file's prefix"
    );
    assert!(
        out_tx.contains(&format!("stopped at byte {} ", kept.len())),
        "the sender names the kept prefix: {out_tx}"
    );
    // Resume over 3 streams from the kept prefix.
    let (rx, addr) = fast_recv(&dst, &["--idle-timeout", "10"], None);
    let (out_tx, _) = send_and_recv(
        rx,
        &addr,
        &src,
        &["--cca", "cubic", "--streams", "3", "--resume"],
        None,
    );
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert!(std::fs::read(&dst).unwrap() == data);
}

/// A digest as protocol v4 writes it: XXH3-128 in its canonical form
/// (`xxhsum -H2`) or BLAKE3 (`b3sum`).
fn digest(hash: &str, b: &[u8]) -> String {
    match hash {
        "xxh3" => format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b)),
        "blake3" => blake3::hash(b).to_hex().to_string(),
        other => panic!("no hash {other}"),
    }
}

/// With each hash: a byte changed in flight is caught (nothing renamed, the
/// receiver's digest is that of what arrived), and a prefix written under
/// one hash is resumed under the other (the prefix is re-hashed with the
/// resume's hash on both sides).
#[test]
fn each_hash_catches_a_changed_byte_and_resumes_the_others_prefix() {
    let d = TempDir::new("hashes");
    let src = d.0.join("src.bin");
    let data = write_file(&src, 400_000, 11);
    for (first, second) in [("xxh3", "blake3"), ("blake3", "xxh3")] {
        let dst = d.0.join(format!("dst-{first}.bin"));
        let part = d.0.join(format!(".dst-{first}.bin.opsel-part"));
        let (rx, addr) = fast_recv(&dst, &[], None);

        // 1. One bit flipped on the data connection; the completion message
        //    carries the digests of the true file.
        let (mut c, a) = Raw::request(&addr, json!({"size": 400_000, "offset": 0, "hash": first}));
        assert_eq!(a["ok"], true, "{a}");
        assert_eq!(a["prefix_digest"], digest(first, b""), "{a}");
        let mut bad = data.clone();
        bad[123_456] ^= 0x04;
        let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
        d1.write_all(&bad).unwrap();
        drop(d1);
        let good = digest(first, &data);
        c.send(&json!({"end": 400_000, "digest": good, "file_digest": good}));
        let conf = c.line().expect("a confirmation");
        assert_eq!(conf["ok"], false, "{first}: {conf}");
        assert_eq!(conf["complete"], false, "{first}: {conf}");
        assert_eq!(conf["digest"], digest(first, &bad), "{first}: {conf}");
        drop(c);
        assert!(!dst.exists(), "{first}: a corrupted file was renamed");
        assert!(!part.exists(), "{first}: unverified bytes were kept");

        // 2. A prefix under `first`: 150 000 bytes, then the sender vanishes.
        let (c, a) = Raw::request(&addr, json!({"size": 400_000, "offset": 0, "hash": first}));
        let mut d1 = data_conn(&addr, a["token"].as_str().unwrap());
        d1.write_all(&data[..150_000]).unwrap();
        drop(d1);
        c.hang_up("the vanished sender");
        assert_eq!(std::fs::metadata(&part).unwrap().len(), 150_000);

        // 3. `opsel send --resume --hash second` completes it.
        let (ok, out) = send(
            &addr,
            &src,
            &["--resume", "--hash", second],
            None,
            "send --resume",
        );
        assert!(ok && out.contains("byte-identical"), "{out}");
        // The sender reports the resumed range's digest in the second hash.
        let want = format!("{second} {}", digest(second, &data[150_000..]));
        assert!(out.contains(&want), "{want} not in {out}");
        let (ok, out) = rx.finish(Duration::from_secs(10), "recv");
        assert!(ok && out.contains("from offset 150000"), "{out}");
        assert!(
            out.contains(&digest(second, &data)),
            "whole-file digest: {out}"
        );
        assert_eq!(std::fs::read(&dst).unwrap(), data);
        assert!(!part.exists());
    }
}

/// With a pre-shared key the check is keyed BLAKE3: the sender does not
/// offer xxh3, the receiver refuses a key holder that asks for it, and the
/// default transfer's digest is a keyed one (not the file's plain BLAKE3).
#[test]
fn a_keyed_transfer_is_checked_with_keyed_blake3_only() {
    use hmac::{Hmac, KeyInit, Mac};
    let (_d, src, data, dst) = source_and_dest("keyedhash", 200_000, 12);
    let (rx, addr) = fast_recv(&dst, &[], Some(KEY));

    let (ok, out) = send(
        &addr,
        &src,
        &["--hash", "xxh3"],
        Some(KEY),
        "send --hash xxh3 with a key",
    );
    assert!(!ok && out.contains("keyed BLAKE3"), "{out}");

    // A hand-made key holder asking for xxh3: authenticated, then refused.
    let nonce = "00112233445566778899aabbccddeeff";
    let (mut c, ch) = Raw::hello(&addr);
    assert_eq!(ch["auth"], "hmac-sha256", "{ch}");
    let unhex = |h: &str| -> Vec<u8> {
        (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    let mut m = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(KEY.as_bytes()).unwrap();
    m.update(b"opsel-transfer v4 sender");
    m.update(&unhex(ch["challenge"].as_str().unwrap()));
    m.update(&unhex(nonce));
    let mac: String = m
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    c.send(&json!({"mac": mac, "size": 200_000, "offset": 0, "hash": "xxh3"}));
    let a = c.line().expect("a refusal");
    assert_eq!(a["ok"], false, "{a}");
    let e = a["error"].as_str().unwrap();
    assert!(e.contains("keyed BLAKE3") && e.contains("xxh3"), "{e}");
    drop(c);

    // The default with a key: keyed BLAKE3.
    let (ok, out) = send(&addr, &src, &[], Some(KEY), "send with the key");
    assert!(ok && out.contains("blake3-keyed"), "{out}");
    assert!(!out.contains(&digest("blake3", &data)), "{out}");
    let (ok, out) = rx.finish(Duration::from_secs(10), "recv");
    assert!(ok && out.contains("blake3-keyed"), "{out}");
    assert_eq!(std::fs::read(&dst).unwrap(), data);
}

/// A receiver of protocol version 3 (BLAKE3 only, before the hash was
/// negotiated) answers a v4 hello with its refusal: the sender shows it,
/// naming both versions, and sends nothing.
#[test]
fn a_version_3_receiver_is_named_by_the_sender() {
    let d = TempDir::new("v3peer");
    let src = d.0.join("src.bin");
    write_file(&src, 1000, 13);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let peer = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut hello = String::new();
        r.read_line(&mut hello).unwrap();
        // What a v3 build answers (its `version_refusal`).
        let refusal = json!({"ok": false, "error": "this receiver speaks opsel-transfer protocol version 3 and the sender version 4; run the same opsel release on both hosts"});
        (&s).write_all(format!("{refusal}\n").as_bytes()).unwrap();
        hello
    });
    let (ok, out) = send(&addr, &src, &[], None, "send to a v3 receiver");
    let hello: Value = serde_json::from_str(&peer.join().unwrap()).unwrap();
    assert_eq!(hello["version"], 4, "{hello}");
    assert!(
        !ok && out.contains("version 3") && out.contains("version 4"),
        "{out}"
    );
}
