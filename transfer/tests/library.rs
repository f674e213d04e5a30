//! The library without the CLI: `send_file` on a connected socket and
//! `recv_file` on a listener, in two threads over loopback, with each hash;
//! a bad spec fails before anything is sent.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use opsel_transfer::{recv_file, send_file, send_reader, RecvSpec, SendSpec};

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("opsel-xfer-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn data(n: usize) -> Vec<u8> {
    (0..n as u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9) >> 11) as u8)
        .collect()
}

#[test]
fn a_file_crosses_loopback_with_each_hash_and_the_reports_agree() {
    let d = TempDir::new("lib");
    let src = d.0.join("src.bin");
    let bytes = data(3_000_017);
    std::fs::write(&src, &bytes).unwrap();
    for (hash, label, digest) in [
        (
            "xxh3",
            "xxh3",
            format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes)),
        ),
        (
            "blake3",
            "blake3",
            blake3::hash(&bytes).to_hex().to_string(),
        ),
    ] {
        let dst = d.0.join(format!("dst-{hash}.bin"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let out = dst.clone();
        let rx = std::thread::spawn(move || {
            let spec = RecvSpec::from_json(r#"{"idle_s": 10, "accept_timeout_s": 20}"#).unwrap();
            recv_file(listener, &out, &spec)
        });
        let spec =
            SendSpec::from_json(&format!(r#"{{"hash": "{hash}", "cca": "cubic"}}"#)).unwrap();
        let mut intervals = 0;
        let sent = send_file(
            TcpStream::connect(addr).unwrap(),
            &src,
            &spec,
            &AtomicBool::new(false),
            &mut |_| intervals += 1,
        )
        .unwrap();
        let got = rx.join().unwrap().unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), bytes, "{hash}");
        assert!(sent.complete && sent.file_identical, "{sent:?}");
        assert_eq!((sent.hash, got.hash), (label, label));
        assert_eq!(sent.digest, digest, "{hash}: the file's own digest");
        assert_eq!(
            (got.digest.clone(), got.file_digest.clone()),
            (digest.clone(), digest)
        );
        assert_eq!(
            (sent.driver.bytes_sent, got.received, got.file_size),
            (3_000_017, 3_000_017, 3_000_017)
        );
        assert!(got.verified && got.complete && got.path == dst);
        assert!(intervals > 0, "events reach the callback");
        // The reports serialise (what the bindings hand back).
        let j = serde_json::to_value(&got).unwrap();
        assert_eq!(j["received"], 3_000_017);
        assert!(j["elapsed_s"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn a_bad_spec_fails_before_anything_is_sent() {
    let d = TempDir::new("badspec");
    let src = d.0.join("src.bin");
    std::fs::write(&src, b"x").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let spec = SendSpec {
        cca: Some("no-such-cca".into()),
        ..SendSpec::default()
    };
    let e = send_file(sock, &src, &spec, &AtomicBool::new(false), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("no-such-cca"), "{e}");
    let (mut peer, _) = listener.accept().unwrap();
    let mut b = [0u8; 1];
    assert_eq!(
        std::io::Read::read(&mut peer, &mut b).unwrap(),
        0,
        "nothing sent"
    );
}

/// A reader instead of a file: the bytes are hashed as the sending loop
/// reads them; a reader shorter than announced leaves a verified prefix.
#[test]
fn a_reader_is_sent_and_a_short_one_leaves_a_verified_prefix() {
    let d = TempDir::new("reader");
    let bytes = data(1_234_567);
    for (hash, announced) in [("xxh3", 1_234_567u64), ("blake3", 2_000_000)] {
        let dst = d.0.join(format!("dst-{hash}.bin"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let out = dst.clone();
        let rx = std::thread::spawn(move || {
            let spec = RecvSpec::from_json(r#"{"idle_s": 10, "accept_timeout_s": 20}"#).unwrap();
            recv_file(listener, &out, &spec)
        });
        let spec = SendSpec::from_json(&format!(r#"{{"hash": "{hash}"}}"#)).unwrap();
        let mut r = std::io::Cursor::new(bytes.clone());
        let sent = send_reader(
            TcpStream::connect(addr).unwrap(),
            &mut r,
            announced,
            &spec,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
        let got = rx.join().unwrap().unwrap();
        assert_eq!(sent.driver.bytes_sent, 1_234_567, "{hash}");
        assert_eq!(sent.digest, got.digest, "{hash}");
        assert!(got.verified, "{hash}: {got:?}");
        let want = match hash {
            "xxh3" => format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&bytes)),
            _ => blake3::hash(&bytes).to_hex().to_string(),
        };
        assert_eq!(sent.digest, want, "{hash}");
        if announced == bytes.len() as u64 {
            assert!(sent.complete && got.complete);
            assert_eq!(std::fs::read(&dst).unwrap(), bytes);
        } else {
            // 1 234 567 of 2 000 000 bytes: verified, kept as the part file
            // for a resume, the destination not created.
            assert!(!sent.complete && !got.complete);
            assert!(!dst.exists());
            assert_eq!(std::fs::read(&got.path).unwrap(), bytes);
        }
    }
    // A reader cannot resume or stripe: refused before anything is sent.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = SendSpec {
        resume: true,
        ..SendSpec::default()
    };
    let e = send_reader(
        TcpStream::connect(listener.local_addr().unwrap()).unwrap(),
        &mut std::io::empty(),
        10,
        &spec,
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("reader"), "{e}");
}

/// The shared fixture model of the OPS send tests: a silent probe of 3 samples
/// (tests/fixtures/README.md, `ops_send_silent.model.json`).
fn silent_model() -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/ops_send_silent.model.json")
        .display()
        .to_string()
}

/// `send_file` with an `ops` section: the controller probes (a silent probe
/// of 3 samples, RTT by UDP echo to the receiver's port), decides by the table
/// policy, switches the live connection and sends the file byte-identically;
/// the report lists the decision and the CCAs used.
#[test]
fn an_ops_send_decides_switches_and_moves_the_file() {
    let d = TempDir::new("ops");
    let src = d.0.join("src.bin");
    let bytes = data(5_000_011);
    std::fs::write(&src, &bytes).unwrap();
    let dst = d.0.join("dst.bin");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let out = dst.clone();
    let rx = std::thread::spawn(move || {
        let spec = RecvSpec::from_json(r#"{"idle_s": 20, "accept_timeout_s": 30}"#).unwrap();
        recv_file(listener, &out, &spec)
    });
    let spec = SendSpec::from_json(&format!(
        r#"{{"ops": {{"model": "{}", "pattern": "S3", "steady_s": 0, "lead_in": false, "policy": "*=reno"}}}}"#,
        silent_model()
    ))
    .unwrap();
    let mut selected = 0;
    let sent = send_file(
        TcpStream::connect(addr).unwrap(),
        &src,
        &spec,
        &AtomicBool::new(false),
        &mut |e| {
            if let opsel::sys::linux::ops_driver::DriverEvent::Ops(opsel::ops::Event::Selected {
                ..
            }) = e
            {
                selected += 1
            }
        },
    )
    .unwrap();
    let got = rx.join().unwrap().unwrap();
    assert_eq!(std::fs::read(&dst).unwrap(), bytes);
    assert!(
        sent.complete && sent.file_identical && got.verified,
        "{sent:?}"
    );
    let ops = sent.ops.as_ref().expect("an OPS report");
    assert_eq!(ops.decisions.len(), 1, "{ops:?}");
    assert_eq!(ops.decisions[0].cca, "reno");
    assert_eq!(ops.decisions[0].samples, 3);
    assert_eq!(ops.ccas, vec!["cubic", "reno"]);
    assert_eq!((sent.driver.stats.decisions, selected), (1, 1));
    // The JSON form the bindings return carries the same.
    let v = serde_json::to_value(&sent).unwrap();
    assert_eq!(v["ops"]["decisions"][0]["cca"], "reno", "{v}");
}

/// The stop flag, raised from another thread once the receiver holds data,
/// ends the transfer early: the bytes sent are confirmed and kept as the
/// verified prefix of the part file, and a resume completes the file.
#[test]
fn a_stop_from_another_thread_keeps_a_verified_prefix() {
    use std::sync::atomic::Ordering;
    let d = TempDir::new("stop");
    let src = d.0.join("src.bin");
    // Large enough that the transfer is still running when the stop comes
    // (the watcher reacts within a few ms; loopback moves a few GB/s).
    let block = data(1 << 20);
    let n_blocks = 128;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&src).unwrap();
        for _ in 0..n_blocks {
            f.write_all(&block).unwrap();
        }
    }
    let size = (n_blocks << 20) as u64;
    let dst = d.0.join("dst.bin");
    let part = d.0.join(".dst.bin.opsel-part");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let recv = |dst: PathBuf| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let spec = RecvSpec::from_json(r#"{"idle_s": 20, "accept_timeout_s": 30, "append": true}"#)
            .unwrap();
        (
            addr,
            std::thread::spawn(move || recv_file(listener, &dst, &spec)),
        )
    };
    let (addr, rx) = recv(dst.clone());
    let watcher = {
        let (stop, part) = (stop.clone(), part.clone());
        std::thread::spawn(move || {
            while std::fs::metadata(&part).map_or(0, |m| m.len()) < 1 << 20 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    let sent = send_file(
        TcpStream::connect(addr).unwrap(),
        &src,
        &SendSpec::default(),
        &stop,
        &mut |_| {},
    )
    .unwrap();
    watcher.join().unwrap();
    let got = rx.join().unwrap().unwrap();
    let n = sent.driver.bytes_sent;
    assert!(n >= 1 << 20 && n < size, "{n} of {size}");
    assert_eq!(
        sent.driver.end,
        opsel::sys::linux::ops_driver::EndReason::Stopped
    );
    assert!(!sent.complete && got.verified && !got.complete, "{got:?}");
    assert!(!dst.exists());
    let kept = std::fs::read(&part).unwrap();
    assert_eq!(kept.len() as u64, n);
    assert!(
        kept.chunks(1 << 20).all(|c| c == &block[..c.len()]),
        "the part file is the file's prefix"
    );
    // A resume sends the rest.
    let (addr, rx) = recv(dst.clone());
    let spec = SendSpec {
        resume: true,
        ..SendSpec::default()
    };
    let sent = send_file(
        TcpStream::connect(addr).unwrap(),
        &src,
        &spec,
        &AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    rx.join().unwrap().unwrap();
    assert!(sent.complete && sent.file_identical && sent.offset == n);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), size);
}

/// A bad `ops` section is refused before anything is sent, naming the field.
#[test]
fn a_bad_ops_spec_is_a_clear_error() {
    let d = TempDir::new("badops");
    let src = d.0.join("src.bin");
    std::fs::write(&src, b"x").unwrap();
    for (spec, want) in [
        (r#"{"ops": {"steady_s": -2}}"#, "steady_s"),
        (r#"{"ops": {"model": "no-such-model"}}"#, "no-such-model"),
        (r#"{"ops": {"rtt": "pigeon"}}"#, "pigeon"),
        (r#"{"ops": {}, "cca": "bbr"}"#, "exclude"),
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let e = send_file(
            sock,
            &src,
            &SendSpec::from_json(spec).unwrap(),
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(want) && e.contains("send spec"), "{spec}: {e}");
    }
    let e = SendSpec::from_json(r#"{"ops": {"patern": "S3"}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("patern"), "{e}");
}
