//! Stable-Rust fuzz harness for the flow-export decoder: seeded mutations of
//! valid NetFlow v5 / v9 / IPFIX datagrams (bit flips, byte writes, length
//! fields, truncation, splicing, insertion) fed to long-lived and fresh
//! decoders, and every decoded record to the α aggregator. Nothing may panic.
//!
//! Bounded in `cargo test` (a fixed number of inputs). On demand, for as long
//! as asked: `OPSEL_FUZZ_SECS=3600 OPSEL_FUZZ_SEED=7 cargo test -p opsel
//! --release --test flows_fuzz -- --nocapture`. A panicking input is written to
//! `fuzz/flows/regressions/` and replayed by every later run.

use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use opsel::flows::export::{encode_ipfix, encode_v5, encode_v9, Decoder, DecoderLimits};
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/flows/regressions")
}

fn seeds() -> Vec<Vec<u8>> {
    const S: u64 = 1_000_000_000;
    let t0 = 1_700_000_000u64;
    let r = |src: &str, dst: &str, b: u64| FlowRecord {
        src_addr: src.parse().unwrap(),
        dst_addr: dst.parse().unwrap(),
        src_port: 40000,
        dst_port: 2811,
        proto: 6,
        bytes: b,
        packets: b / 1400 + 1,
        first_ns: (t0 - 50) * S,
        last_ns: (t0 - 1) * S,
        sampling_interval: 1,
    };
    let v4 = vec![
        r("10.0.0.1", "10.1.0.1", 1_000_000),
        r("10.0.0.2", "10.1.0.2", 900),
    ];
    let v6 = [r("2001:db8::1", "2001:db8:1::1", 5000)];
    let mut out = Vec::new();
    let mut p = Vec::new();
    encode_v5(&v4, t0 * S, 1_000_000, 1000, 1, &mut p).unwrap();
    out.push(p.clone());
    for (t, s) in [(true, Some(1000)), (true, None), (false, None)] {
        let all: Vec<FlowRecord> = v4.iter().chain(v6.iter()).copied().collect();
        encode_v9(&all, t0 as u32, 1_000_000, 3, 1, t, s, &mut p).unwrap();
        out.push(p.clone());
        encode_ipfix(&all, t0 as u32, 3, 1, t, s, &mut p).unwrap();
        out.push(p.clone());
    }
    // A variable-length + enterprise-field IPFIX message.
    let mut m: Vec<u8> = vec![0, 10, 0, 0, 0x65, 0x53, 0xf1, 0x00, 0, 0, 0, 1, 0, 0, 0, 3];
    m.extend_from_slice(&[
        0, 2, 0, 24, 1, 44, 0, 4, 0, 8, 0, 4, 0, 12, 0, 4, 0x80, 7, 0xff, 0xff, 0, 0, 0, 9,
    ]);
    m.extend_from_slice(&[0, 2, 0, 8, 1, 44, 0, 0]);
    m.extend_from_slice(&[
        1, 44, 0, 20, 10, 0, 0, 1, 10, 0, 0, 2, 3, 1, 2, 3, 0, 0, 0, 0,
    ]);
    let l = m.len() as u16;
    m[2..4].copy_from_slice(&l.to_be_bytes());
    out.push(m);
    if let Ok(rd) = std::fs::read_dir(regressions_dir()) {
        for e in rd.flatten() {
            if let Ok(b) = std::fs::read(e.path()) {
                out.push(b);
            }
        }
    }
    out
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&seeds[rng.below(seeds.len())]);
    let rounds = 1 + rng.below(6);
    for _ in 0..rounds {
        let len = buf.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                buf[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                buf[i] = rng.next() as u8;
            }
            2 if len > 1 => {
                // A 16-bit field (lengths, counts, IDs) set to an edge value.
                let i = rng.below(len - 1);
                let v: u16 = [0, 1, 3, 4, 255, 256, 0x7fff, 0x8000, 0xffff][rng.below(9)];
                buf[i..i + 2].copy_from_slice(&v.to_be_bytes());
            }
            3 => {
                let n = rng.below(len + 1);
                buf.truncate(n);
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                buf.truncate(cut);
                buf.extend_from_slice(&other[from..]);
            }
            5 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                for k in 0..n {
                    buf.insert(at + k, rng.next() as u8);
                }
            }
            6 if len > 4 => {
                // Keep the version, randomise the rest of a window.
                let i = 2 + rng.below(len - 2);
                let n = (1 + rng.below(8)).min(len - i);
                for b in &mut buf[i..i + n] {
                    *b = rng.next() as u8;
                }
            }
            7 if len > 2 => {
                let v: u16 = [5, 9, 10][rng.below(3)];
                buf[0..2].copy_from_slice(&v.to_be_bytes());
            }
            _ => {
                let n = rng.below(64);
                for _ in 0..n {
                    buf.push(rng.next() as u8);
                }
            }
        }
    }
}

fn run_one(d: &mut Decoder, agg: &mut AlphaAggregator, from: SocketAddr, input: &[u8]) -> usize {
    let mut n = 0;
    let _ = d.decode(from, input, |r| {
        let _ = agg.push(r);
        n += 1;
    });
    let mut fresh = Decoder::with_limits(DecoderLimits {
        max_templates: 8,
        max_fields: 16,
        max_samplers: 4,
    });
    let _ = fresh.decode(from, input, |_| {});
    n
}

fn save(input: &[u8]) -> PathBuf {
    let h = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let p = regressions_dir().join(format!("crash-{h:016x}.bin"));
    let _ = std::fs::create_dir_all(regressions_dir());
    let _ = std::fs::write(&p, input);
    p
}

#[test]
fn decoder_survives_mutated_datagrams() {
    let secs: Option<u64> = std::env::var("OPSEL_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let seed: u64 = std::env::var("OPSEL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let budget = secs.map(Duration::from_secs);
    let max_inputs = if budget.is_some() { u64::MAX } else { 20_000 };
    let seeds = seeds();
    let mut rng = Rng(seed);
    let mut d = Decoder::new();
    let mut agg = AlphaAggregator::new(AlphaSpec::default()).unwrap();
    let start = Instant::now();
    let mut buf = Vec::new();
    let (mut inputs, mut records) = (0u64, 0usize);
    // Every seed and regression file decodes without a panic first.
    for s in &seeds {
        let r = catch_unwind(AssertUnwindSafe(|| {
            run_one(&mut d, &mut agg, "127.0.0.1:1".parse().unwrap(), s)
        }));
        assert!(
            r.is_ok(),
            "seed/regression input panicked: saved as {:?}",
            save(s)
        );
    }
    while inputs < max_inputs {
        if let Some(b) = budget {
            if inputs % 1024 == 0 && start.elapsed() >= b {
                break;
            }
        }
        mutate(&mut rng, &seeds, &mut buf);
        // Several exporters, so template state per exporter is exercised.
        let from: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9000 + (inputs % 4) as u16));
        let r = catch_unwind(AssertUnwindSafe(|| run_one(&mut d, &mut agg, from, &buf)));
        match r {
            Ok(n) => records += n,
            Err(_) => panic!(
                "decoder panicked on input {inputs} (seed {seed}); saved as {:?}",
                save(&buf)
            ),
        }
        inputs += 1;
        // Bound the long-lived aggregator's memory on hour-long runs.
        if inputs % 100_000 == 0 {
            agg = AlphaAggregator::new(AlphaSpec::default()).unwrap();
        }
    }
    println!(
        "flows_fuzz: seed {seed}: {inputs} inputs without a crash ({records} records decoded, {} templates held) in {:.1} s",
        d.template_count(),
        start.elapsed().as_secs_f64()
    );
    assert!(inputs > 0);
}

/// nfdump capture files (`flows::nffile`): one flow record (V3, generic flow
/// + IPv4 element) in a type-3 block, stored plain or as an LZ4 block of
///   literals followed by a run-length match.
fn nffile_seeds() -> Vec<Vec<u8>> {
    let mut rec = vec![0u8; 12];
    rec[0..2].copy_from_slice(&11u16.to_le_bytes());
    rec[4..6].copy_from_slice(&2u16.to_le_bytes());
    let mut g = Vec::new();
    for v in [
        1_700_000_000_000u64,
        1_700_000_060_000,
        0,
        2_417_000,
        3_500_000_000,
    ] {
        g.extend_from_slice(&v.to_le_bytes());
    }
    g.extend_from_slice(&40_000u16.to_le_bytes());
    g.extend_from_slice(&2811u16.to_le_bytes());
    g.extend_from_slice(&[6, 0, 0, 0]);
    rec.extend_from_slice(&1u16.to_le_bytes());
    rec.extend_from_slice(&((g.len() + 4) as u16).to_le_bytes());
    rec.extend_from_slice(&g);
    rec.extend_from_slice(&2u16.to_le_bytes());
    rec.extend_from_slice(&12u16.to_le_bytes());
    rec.extend_from_slice(&0x0a01_0203u32.to_le_bytes());
    rec.extend_from_slice(&0x0a09_0001u32.to_le_bytes());
    let size = rec.len() as u16;
    rec[2..4].copy_from_slice(&size.to_le_bytes());
    let file = |compression: u8, payload: &[u8], n: u32| {
        let mut f = vec![0u8; 40];
        f[0..2].copy_from_slice(&0xA50Cu16.to_le_bytes());
        f[2..4].copy_from_slice(&2u16.to_le_bytes());
        f[16] = compression;
        f.extend_from_slice(&n.to_le_bytes());
        f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        f.extend_from_slice(&3u16.to_le_bytes());
        f.extend_from_slice(&0u16.to_le_bytes());
        f.extend_from_slice(payload);
        f
    };
    // Two records; the second is an LZ4 match of the first (offset = size).
    let mut lz = vec![0xF0u8, (rec.len() - 15) as u8];
    lz.extend_from_slice(&rec);
    lz[0] |= 15; // match length 15 + ext
    let mlen = rec.len() - 4 - 15;
    lz.extend_from_slice(&(rec.len() as u16).to_le_bytes());
    lz.push(mlen as u8);
    lz.push(0x00); // a last sequence of no literals
    let mut two = rec.clone();
    two.extend_from_slice(&rec);
    vec![file(0, &rec, 1), file(0, &two, 2), file(3, &lz, 2)]
}

#[test]
fn nffile_reader_survives_mutated_files() {
    let secs: Option<u64> = std::env::var("OPSEL_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let seed: u64 = std::env::var("OPSEL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let budget = secs.map(Duration::from_secs);
    let max_inputs = if budget.is_some() { u64::MAX } else { 20_000 };
    let seeds = nffile_seeds();
    // The seeds are valid: 1, 2 and 2 records.
    let counts: Vec<usize> = seeds
        .iter()
        .map(|s| opsel::flows::nffile::read(s, "seed").unwrap().len())
        .collect();
    assert_eq!(counts, [1, 2, 2]);
    let mut rng = Rng(seed);
    let (start, mut buf) = (Instant::now(), Vec::new());
    let (mut inputs, mut records) = (0u64, 0usize);
    while inputs < max_inputs {
        if let Some(b) = budget {
            if inputs % 1024 == 0 && start.elapsed() >= b {
                break;
            }
        }
        mutate(&mut rng, &seeds, &mut buf);
        match catch_unwind(AssertUnwindSafe(|| {
            opsel::flows::nffile::read(&buf, "fuzz")
        })) {
            Ok(r) => records += r.map_or(0, |v| v.len()),
            Err(_) => panic!(
                "nffile reader panicked on input {inputs} (seed {seed}); saved as {:?}",
                save(&buf)
            ),
        }
        inputs += 1;
    }
    println!(
        "flows_fuzz nffile: seed {seed}: {inputs} inputs without a crash ({records} records read) in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(inputs > 0);
}
