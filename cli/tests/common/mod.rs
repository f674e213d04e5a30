//! Helpers shared by the transfer suites (each suite uses some of them).
#![allow(dead_code)]

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
