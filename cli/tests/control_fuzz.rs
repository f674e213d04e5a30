//! Stable-Rust fuzz harness for everything a transfer peer sends: the control
//! lines of protocol v4 (hello, challenge, request, accept, end, confirmation),
//! the line reader that frames them, the data-connection preamble and the
//! serve-mode name check, all from `transfer/src/proto.rs` (included as is).
//! Nothing may panic; an accepted message must re-encode to one that parses
//! to the same value.
//!
//! Bounded in `cargo test`. On demand: `OPSEL_FUZZ_SECS=600 OPSEL_FUZZ_SEED=7
//! cargo test -p opsel-cli --release --test control_fuzz -- --nocapture`.
//! Crashing inputs go to `fuzz/control/regressions/` and are replayed first.

#[path = "../../fuzz/common.rs"]
mod fuzzing;
#[path = "../../transfer/src/proto.rs"]
mod proto;

use proto::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn seeds() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        hello_msg(&[0xab; NONCE_LEN]),
        challenge_msg(&Challenge {
            auth: true,
            challenge: [1; CHALLENGE_LEN],
        }),
        challenge_msg(&Challenge {
            auth: false,
            challenge: [2; CHALLENGE_LEN],
        }),
        request_msg(&Request {
            mac: Some([3; 32]),
            size: 1 << 30,
            offset: Some(4096),
            name: Some("data.tar".into()),
            streams: 1,
            hash: HashAlgo::Blake3,
        }),
        request_msg(&Request {
            mac: None,
            size: 10,
            offset: None,
            name: None,
            streams: 1,
            hash: HashAlgo::Xxh3,
        }),
        accept_msg(&Accept {
            token: [4; TOKEN_LEN],
            offset: 7,
            prefix_digest: Digest::new(&[5; 32]),
            proof: Some([6; 32]),
            streams: 1,
        }),
        end_msg(&End {
            sent: 99,
            digest: Digest::new(&[7; 32]),
            file_digest: Digest::new(&[8; 32]),
        }),
        end_msg(&End {
            sent: 99,
            digest: Digest::new(&[7; 16]),
            file_digest: Digest::new(&[8; 16]),
        }),
        confirm_msg(&Confirm {
            ok: true,
            received: 99,
            digest: Digest::new(&[7; 16]),
            file_size: 106,
            file_digest: Digest::new(&[8; 16]),
            complete: false,
        }),
        refusal_msg("busy"),
        serde_json::json!({"hello": "opsel-transfer", "version": 1, "offset": 0, "size": 5}),
    ]
    .into_iter()
    .map(|v| v.to_string().into_bytes())
    .collect();
    out.push(preamble(&[9; TOKEN_LEN], 0).to_vec());
    out.push(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec());
    out.push(b"../../etc/passwd".to_vec());
    out
}

fn run(input: &[u8]) {
    // Framing: the same bytes as a stream, with small and default limits.
    for max in [16usize, MAX_LINE] {
        let mut r = LineReader::new(input);
        for _ in 0..8 {
            match r.read_line(max, |_| Ok(())) {
                Ok(Some(l)) => assert!(l.len() <= max && !l.contains(&b'\n')),
                _ => break,
            }
        }
    }
    let line = input.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let _ = parse_line(line);
    let _ = parse_hello(line);
    if let Ok(c) = parse_challenge(line) {
        assert_eq!(
            parse_challenge(challenge_msg(&c).to_string().as_bytes()),
            Ok(c)
        );
    }
    if let Ok(q) = parse_request(line) {
        assert!(q.offset.is_none_or(|o| o <= q.size));
        assert_eq!(
            parse_request(request_msg(&q).to_string().as_bytes()),
            Ok(q.clone())
        );
        if let Some(n) = &q.name {
            if let Ok(ok) = safe_name(n) {
                assert!(!ok.contains('/') && !ok.starts_with('.') && !ok.is_empty());
            }
        }
    }
    for h in [HashAlgo::Blake3, HashAlgo::Xxh3] {
        if let Ok(a) = parse_accept(line, h) {
            assert_eq!(a.prefix_digest.as_bytes().len(), h.digest_len());
            let again = parse_accept(accept_msg(&a).to_string().as_bytes(), h);
            assert_eq!(again, Ok(a));
        }
        if let Ok(e) = parse_end(line, h) {
            assert_eq!(e.digest.as_bytes().len(), h.digest_len());
            assert_eq!(parse_end(end_msg(&e).to_string().as_bytes(), h), Ok(e));
        }
        if let Ok(c) = parse_confirm(line, h) {
            let again = parse_confirm(confirm_msg(&c).to_string().as_bytes(), h);
            assert_eq!(again, Ok(c));
        }
    }
    if input.len() >= PREAMBLE_LEN {
        if let Ok((t, i)) = parse_preamble(&input[..PREAMBLE_LEN]) {
            assert_eq!(preamble(&t, i).as_slice(), &input[..PREAMBLE_LEN]);
        }
    }
    let _ = parse_preamble(input);
    if let Ok(text) = std::str::from_utf8(line) {
        let _ = safe_name(text);
        let _ = Key::from_bytes(line, "fuzz");
    }
}

#[test]
fn control_messages_survive_mutation() {
    fuzzing::fuzz(ROOT, "control", seeds(), true, 30_000, run);
}
