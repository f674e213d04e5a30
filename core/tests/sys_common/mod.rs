//! Test lab for the `sys` integration tests and the pacing bench: two network
//! namespaces joined by a veth pair, created by the test and removed by an RAII
//! guard even when the test fails. Names start with `osy-<pid>-` so leftovers
//! of crashed runs (dead pid) are removed by [`cleanup_leftovers`] and never
//! collide with other users of this machine.
#![allow(dead_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);
pub const PREFIX: &str = "osy-";

/// Namespace "a" holds `veth-a` with 10.201.0.1/24, "b" holds `veth-b` with 10.201.0.2/24.
pub const ADDR_A: &str = "10.201.0.1";
pub const ADDR_B: &str = "10.201.0.2";

const MAC_A: &str = "02:00:0a:c9:00:01";
const MAC_B: &str = "02:00:0a:c9:00:02";

/// Polls `ip -o link show` until `dev` has its carrier and a qdisc other than `noop`.
fn wait_link_ready(ns: &str, dev: &str) -> Result<(), String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let out = Command::new("ip")
            .args(["-n", ns, "-o", "link", "show", "dev", dev])
            .output()
            .map_err(|e| format!("ip link show: {e}"))?;
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        if line.contains("LOWER_UP") && !line.contains(" qdisc noop ") {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "{dev} in {ns} not ready after 10 s: {}",
                line.trim()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// True when the process can create namespaces; tests print why they skip otherwise.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = Command::new("ip")
        .arg("-V")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !root || !ip {
        eprintln!("SKIPPED {test}: needs root and iproute2 `ip` to create network namespaces (root={root}, ip={ip})");
        return false;
    }
    true
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Remove namespaces left by earlier runs whose process is gone.
pub fn cleanup_leftovers() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: i32 = rest
            .split('-')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        // SAFETY: kill with signal 0 only checks existence.
        let alive = pid > 0 && unsafe { libc::kill(pid, 0) } == 0;
        if !alive {
            let _ = run(&["ip", "netns", "del", name]);
        }
    }
}

/// Two namespaces and a veth pair; dropped = deleted.
pub struct Lab {
    pub a: String,
    pub b: String,
}

pub struct LabOptions {
    pub mtu: u32,
    pub offloads_off: bool,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            mtu: 1500,
            offloads_off: false,
        }
    }
}

impl Lab {
    pub fn new() -> Lab {
        Lab::with(LabOptions::default())
    }

    pub fn with(opt: LabOptions) -> Lab {
        cleanup_leftovers();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let lab = Lab {
            a: format!("{PREFIX}{pid}-{n}-a"),
            b: format!("{PREFIX}{pid}-{n}-b"),
        };
        // The guard exists before the first command, so a failure below still cleans up.
        lab.setup(&opt).unwrap_or_else(|e| panic!("lab setup: {e}"));
        lab
    }

    fn setup(&self, opt: &LabOptions) -> Result<(), String> {
        let (a, b) = (self.a.as_str(), self.b.as_str());
        run(&["ip", "netns", "add", a])?;
        run(&["ip", "netns", "add", b])?;
        run(&[
            "ip", "-n", a, "link", "add", "veth-a", "address", MAC_A, "type", "veth", "peer",
            "name", "veth-b", "address", MAC_B, "netns", b,
        ])?;
        let mtu = opt.mtu.to_string();
        for (ns, dev, addr) in [(a, "veth-a", ADDR_A), (b, "veth-b", ADDR_B)] {
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", ns, "link", "set", dev, "mtu", &mtu])?;
            run(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                dev,
            ])?;
            run(&["ip", "-n", ns, "link", "set", dev, "up"])?;
            if opt.offloads_off {
                run(&[
                    "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off",
                    "gro", "off", "tx", "off", "rx", "off",
                ])
                .map_err(|e| format!("{e} (install ethtool: apt-get install ethtool)"))?;
            }
        }
        // Fixed MACs and permanent neighbour entries: no test waits for ARP,
        // whose dropped first request would be retried only after 1 s.
        for (ns, dev, peer, mac) in [(a, "veth-a", ADDR_B, MAC_B), (b, "veth-b", ADDR_A, MAC_A)] {
            run(&[
                "ip",
                "-n",
                ns,
                "neigh",
                "replace",
                peer,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ])?;
        }
        // `ip link set up` returns before linkwatch has replaced the `noop`
        // qdisc, which drops everything; wait until both ends can send.
        for (ns, dev) in [(a, "veth-a"), (b, "veth-b")] {
            wait_link_ready(ns, dev)?;
        }
        Ok(())
    }

    /// Run `f` on a fresh thread that has joined namespace `ns`; sockets it
    /// creates stay in that namespace and can be used from any thread.
    pub fn run_in<T: Send + 'static>(&self, ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{ns}");
        std::thread::spawn(move || {
            let file = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns on this thread only; file is an open netns fd.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in netns panicked")
    }

    /// Spawn a long-running thread inside `ns`.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        ns: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/var/run/netns/{ns}");
        std::thread::spawn(move || {
            let file = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: as above.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
    }

    /// `ip netns exec ns <args>`; returns stdout or the error text.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .map_err(|e| format!("{args:?}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it and, with it, the peer.
        let _ = run(&["ip", "netns", "del", &self.a]);
        let _ = run(&["ip", "netns", "del", &self.b]);
    }
}

/// Deterministic byte stream (splitmix64) so sender and receiver agree on content.
pub struct Stream(u64);

impl Stream {
    pub fn new(seed: u64) -> Stream {
        Stream(seed)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// FNV-1a 64 over a byte stream, independent of chunk boundaries.
#[derive(Clone, Copy)]
pub struct Fnv(pub u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
}
