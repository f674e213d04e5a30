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
