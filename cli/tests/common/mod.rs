//! Helpers shared by the transfer suites.

use std::process::Child;
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
