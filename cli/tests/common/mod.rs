//! Helpers shared by the transfer suites (each suite uses some of them).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Waits for `c` at most `limit`: its exit success (`None` when it had to be killed at the
/// deadline) and what it printed on stdout then stderr.
pub fn wait_within(mut c: Child, limit: Duration) -> (Option<bool>, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(st) = c.try_wait().unwrap() {
            break Some(st.success());
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = c.wait_with_output().unwrap();
    (
        status,
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Starts the `opsel` binary with `args`, behind `prefix` (e.g. `ip netns exec
/// NS`; empty: none), with `key` as the pre-shared key (`OPSEL_KEY`: the
/// netlab tests listen on non-loopback addresses) and its output piped.
pub fn spawn_opsel(prefix: &[&str], args: &[&str], key: &str) -> Child {
    let bin = env!("CARGO_BIN_EXE_opsel");
    let mut cmd = if prefix.is_empty() {
        Command::new(bin)
    } else {
        let mut c = Command::new(prefix[0]);
        c.args(&prefix[1..]).arg(bin);
        c
    };
    cmd.args(args)
        .env("OPSEL_KEY", key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// [`wait_within`] that panics, naming `what`, when `c` had to be killed.
pub fn wait_ok(c: Child, limit: Duration, what: &str) -> (bool, String) {
    match wait_within(c, limit) {
        (Some(ok), out) => (ok, out),
        (None, _) => panic!("{what} did not finish within {limit:?}"),
    }
}

/// A directory of its own for one test (`tag` and the process id), removed
/// however the test ends.
pub struct TempDir(pub PathBuf);
impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("opsel-test-{tag}-{}", std::process::id()));
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

/// Writes `n` deterministic incompressible bytes (splitmix64 of `seed`) to
/// `p` and returns them.
pub fn write_file(p: &Path, n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    v.truncate(n);
    std::fs::write(p, &v).unwrap();
    v
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}
