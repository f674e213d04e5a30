//! Shared stable-Rust fuzz driver (the `core/tests/flows_fuzz.rs` pattern,
//! generalised): seeded mutations of valid inputs, byte-level and, for JSON,
//! tree-level (edge numbers, empty/huge containers, wrong types), fed to a
//! parser under `catch_unwind`. Included with `#[path]` by each harness so
//! every crate's tests can use it without a shared test crate.
//!
//! * `cargo test` runs a fixed number of inputs (bounded, a few seconds);
//! * `OPSEL_FUZZ_SECS=600 OPSEL_FUZZ_SEED=7` runs for that long with that seed;
//! * a panicking input is saved to `fuzz/<target>/regressions/` and every later
//!   run replays that folder first;
//! * an input that aborts the process (out of memory, stack overflow) cannot
//!   be caught, so each input is first written to a scratch file in the temp
//!   directory; the next run finds it there, moves it into `regressions/` and
//!   fails on it, so it is never lost.

#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub fn regressions_dir(repo_root: &str, target: &str) -> PathBuf {
    PathBuf::from(repo_root)
        .join("fuzz")
        .join(target)
        .join("regressions")
}

fn fnv(input: &[u8]) -> u64 {
    input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn save(dir: &PathBuf, input: &[u8]) -> PathBuf {
    let p = dir.join(format!("crash-{:016x}.bin", fnv(input)));
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(&p, input);
    p
}

/// Byte-level mutation: bit flips, byte writes, truncation, splicing,
/// insertion, duplication of a span.
pub fn mutate_bytes(rng: &mut Rng, seeds: &[Vec<u8>], buf: &mut Vec<u8>) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = buf.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                buf[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                // Bias towards the characters that structure text formats.
                const STRUCT: &[u8] = b"{}[]\",:=-.0123456789eE\n\\ \0\xff";
                buf[i] = if rng.below(2) == 0 {
                    STRUCT[rng.below(STRUCT.len())]
                } else {
                    rng.next() as u8
                };
            }
            2 => {
                let n = rng.below(len + 1);
                buf.truncate(n);
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                buf.truncate(cut);
                buf.extend_from_slice(&other[from..]);
            }
            4 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                buf.splice(at..at, ins);
            }
            5 if len > 1 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                let span = buf[a..b].to_vec();
                let at = rng.below(len + 1);
                buf.splice(at..at, span);
            }
            _ => {
                let n = rng.below(32);
                for _ in 0..n {
                    buf.push(rng.next() as u8);
                }
            }
        }
    }
}

/// Tree-level JSON mutation: pick nodes and replace them with edge values.
pub fn mutate_json(rng: &mut Rng, v: &mut serde_json::Value) {
    use serde_json::{json, Value};
    fn count(v: &Value) -> usize {
        1 + match v {
            Value::Array(a) => a.iter().map(count).sum(),
            Value::Object(o) => o.values().map(count).sum(),
            _ => 0,
        }
    }
    fn nth<'a>(v: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
        if *n == 0 {
            return Some(v);
        }
        *n -= 1;
        match v {
            Value::Array(a) => a.iter_mut().find_map(|c| nth(c, n)),
            Value::Object(o) => o.values_mut().find_map(|c| nth(c, n)),
            _ => None,
        }
    }
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        let total = count(v);
        let mut k = rng.below(total);
        let Some(node) = nth(v, &mut k) else { return };
        let edge: Value = match rng.below(16) {
            0 => json!(0),
            1 => json!(-1),
            2 => json!(1),
            3 => json!(u64::MAX),
            4 => json!(i64::MIN),
            5 => json!(1e308),
            6 => json!(-1e-308),
            7 => json!(4_294_967_296u64),
            8 => Value::Null,
            9 => json!(""),
            10 => json!([]),
            11 => json!({}),
            12 => json!(true),
            13 => json!("x".repeat(rng.below(300))),
            14 => match node {
                // Grow or shrink arrays: lengths that disagree with declared sizes.
                Value::Array(a) if !a.is_empty() => {
                    let mut a = a.clone();
                    if rng.below(2) == 0 {
                        a.truncate(rng.below(a.len()));
                    } else {
                        let e = a[rng.below(a.len())].clone();
                        a.push(e);
                    }
                    Value::Array(a)
                }
                _ => json!(2),
            },
            _ => match node {
                Value::Number(n) => {
                    let f = n.as_f64().unwrap_or(0.0);
                    json!(f * [2.0, 0.5, -1.0, 1e6, 1e-6][rng.below(5)])
                }
                Value::Object(o) if !o.is_empty() => {
                    let mut o = o.clone();
                    let key = o
                        .keys()
                        .nth(rng.below(o.len()))
                        .cloned()
                        .unwrap_or_default();
                    o.remove(&key);
                    Value::Object(o)
                }
                _ => json!(7),
            },
        };
        *node = edge;
    }
}

/// Run one fuzz target. `seeds` are valid inputs; `json` selects tree-level
/// mutation (half the inputs) as well as byte-level; `run` parses one input
/// and must not panic. Returns the number of inputs tried.
pub fn fuzz(
    repo_root: &str,
    target: &str,
    mut seeds: Vec<Vec<u8>>,
    json: bool,
    bounded_inputs: u64,
    mut run: impl FnMut(&[u8]),
) -> u64 {
    let secs: Option<u64> = std::env::var("OPSEL_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let seed: u64 = std::env::var("OPSEL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = regressions_dir(repo_root, target);
    let scratch = std::env::temp_dir().join(format!("opsel-fuzz-{target}-inflight.bin"));
    // An input that killed an earlier run (abort, OOM) becomes a regression.
    if let Ok(b) = std::fs::read(&scratch) {
        let p = save(&dir, &b);
        let _ = std::fs::remove_file(&scratch);
        panic!("{target}: an earlier run died on an input; saved as {p:?}");
    }
    let mut regressions = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        paths.sort();
        for p in paths {
            if let Ok(b) = std::fs::read(&p) {
                regressions.push(b);
            }
        }
    }
    // Regressions first, then every seed: none may panic.
    for s in regressions.iter().chain(seeds.iter()) {
        let r = catch_unwind(AssertUnwindSafe(|| run(s)));
        assert!(
            r.is_ok(),
            "{target}: seed/regression input panicked: saved as {:?}",
            save(&dir, s)
        );
    }
    seeds.extend(regressions);
    let budget = secs.map(Duration::from_secs);
    let max_inputs = if budget.is_some() {
        u64::MAX
    } else {
        bounded_inputs
    };
    let parsed: Vec<Option<serde_json::Value>> = seeds
        .iter()
        .map(|s| {
            if json {
                serde_json::from_slice(s).ok()
            } else {
                None
            }
        })
        .collect();
    let mut rng = Rng(seed);
    let start = Instant::now();
    let mut buf = Vec::new();
    let mut inputs = 0u64;
    while inputs < max_inputs {
        if let Some(b) = budget {
            if inputs % 64 == 0 && start.elapsed() >= b {
                break;
            }
        }
        let i = rng.below(seeds.len());
        buf.clear();
        match &parsed[i] {
            Some(v) if rng.below(2) == 0 => {
                let mut v = v.clone();
                mutate_json(&mut rng, &mut v);
                buf.extend_from_slice(v.to_string().as_bytes());
                if rng.below(4) == 0 {
                    mutate_bytes(&mut rng, &seeds, &mut buf);
                }
            }
            _ => {
                buf.extend_from_slice(&seeds[i]);
                mutate_bytes(&mut rng, &seeds, &mut buf);
            }
        }
        if budget.is_some() {
            let _ = std::fs::write(&scratch, &buf);
        }
        let r = catch_unwind(AssertUnwindSafe(|| run(&buf)));
        if r.is_err() {
            let _ = std::fs::remove_file(&scratch);
            panic!(
                "{target}: panicked on input {inputs} (seed {seed}); saved as {:?}",
                save(&dir, &buf)
            );
        }
        inputs += 1;
    }
    let _ = std::fs::remove_file(&scratch);
    println!(
        "{target}: seed {seed}: {inputs} inputs without a crash in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert!(inputs > 0);
    inputs
}
