//! Thin Linux plumbing: entering a network namespace from a thread,
//! running `ip`/`tc`, TUN devices, offloads, per-namespace sysctls. The clock
//! and the Ctrl-C flag are re-exported from core.

use std::ffi::CString;
use std::process::Command;

use opsel::{Error, Result};

// The clock and the Ctrl-C flag are core's (`opsel::sys::linux`), so the lab,
// the CLI and the drivers share one monotonic time base and one interrupt flag.
pub use opsel::sys::linux::clock::{
    monotonic_ns as now_ns, sleep_until_monotonic as sleep_until_ns,
};
pub use opsel::sys::linux::signal::{install_interrupt_handler, interrupted};

/// Fails with a clear message unless the process runs as root (namespaces,
/// TUN devices and routing need CAP_NET_ADMIN / CAP_SYS_ADMIN).
pub fn require_root() -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        return Err(Error::Permission(
            "netlab creates network namespaces and TUN devices, which needs root; run with sudo"
                .into(),
        ));
    }
    Ok(())
}

/// Moves the calling thread into the named network namespace (`ip netns`
/// name). Only this thread changes namespace; sockets and TUN devices it
/// creates afterwards live there.
pub fn enter_netns(ns: &str) -> Result<()> {
    let path = format!("/run/netns/{ns}");
    let c = CString::new(path.clone())
        .map_err(|_| Error::invalid(format!("bad namespace name {ns:?}")))?;
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Error::io(
            format!("open {path} (does the namespace exist? `ip netns list`)"),
            std::io::Error::last_os_error(),
        ));
    }
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    let err = std::io::Error::last_os_error();
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(Error::io(format!("setns into network namespace {ns}"), err));
    }
    Ok(())
}

/// Runs `f` on a fresh thread inside namespace `ns` and returns its result.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(format!("netns-{ns}"))
        .spawn(move || {
            enter_netns(&ns)?;
            f()
        })
        .map_err(|e| Error::io("spawn thread", e))?
        .join()
        .map_err(|_| Error::invalid("a netns helper thread panicked"))?
}

/// Spawns a long-running thread inside namespace `ns`.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    name: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<std::thread::JoinHandle<Result<T>>> {
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            enter_netns(&ns)?;
            f()
        })
        .map_err(|e| Error::io(format!("spawn thread {name}"), e))
}

/// Runs a command (`ip`, `tc`), failing with its stderr.
pub fn run_cmd(prog: &str, args: &[&str]) -> Result<()> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| Error::io(format!("run {prog} (is iproute2 installed?)"), e))?;
    if !out.status.success() {
        return Err(Error::io(
            format!(
                "`{prog} {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            std::io::Error::other("command failed"),
        ));
    }
    Ok(())
}

/// Waits until `dev` in namespace `ns` has its carrier and a real qdisc.
///
/// `ip link set up` returns before the kernel's linkwatch work has attached
/// the default qdisc; until then the device sits on `noop`, which drops every
/// packet, ARP included, and a dropped ARP request is retried only after 1 s.
/// Under load that window lasts long enough to lose the first packets of a
/// run, so the topology waits for it to close instead.
pub fn wait_link_ready(ns: &str, dev: &str, timeout: std::time::Duration) -> Result<()> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let line = cmd_output("ip", &["-n", ns, "-o", "link", "show", "dev", dev])?;
        if link_is_ready(&line) {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::io(
                format!("{dev} in {ns} not ready after {timeout:?}: {}", line.trim()),
                std::io::Error::other("link not ready"),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// One line of `ip -o link show`: carrier up (`LOWER_UP`) and a qdisc other than `noop`.
fn link_is_ready(line: &str) -> bool {
    let flags_up = line
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .is_some_and(|(flags, _)| flags.split(',').any(|f| f == "LOWER_UP"));
    flags_up && !line.contains(" qdisc noop ")
}

/// Runs a command and returns its stdout.
pub fn cmd_output(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .map_err(|e| Error::io(format!("run {prog}"), e))?;
    if !out.status.success() {
        return Err(Error::io(
            format!(
                "`{prog} {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            std::io::Error::other("command failed"),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes a sysctl of the calling thread's network namespace (call from a
/// thread inside the namespace: /proc/sys/net follows the opener's netns).
pub fn write_sysctl(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| Error::io(format!("write {value:?} to {path}"), e))
}

fn ifreq_for(name: &str) -> Result<libc::ifreq> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(Error::invalid(format!(
            "interface name {name:?} must have 1..=15 bytes"
        )));
    }
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(ifr)
}

/// Creates a TUN device `name` in the calling thread's namespace and returns
/// its non-blocking fd. IFF_NO_PI: plain IP packets. No IFF_VNET_HDR and no
/// TUNSETOFFLOAD, so the device advertises no TSO/GSO and the kernel
/// segments super-packets before they reach the pipe (000 §2.3: the queue
/// must see MTU-sized packets).
pub fn open_tun(name: &str) -> Result<i32> {
    let mut ifr = ifreq_for(name)?;
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(Error::io(
            "open /dev/net/tun (is the tun module available?)",
            std::io::Error::last_os_error(),
        ));
    }
    let r = unsafe { libc::ioctl(fd, libc::TUNSETIFF, &mut ifr) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        unsafe { libc::close(fd) };
        return Err(Error::io(format!("TUNSETIFF {name}"), e));
    }
    Ok(fd)
}

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Turns TSO, GSO and GRO off on `ifname` in the calling thread's namespace
/// through the legacy ethtool ioctls (no ethtool binary needed), so that
/// qdiscs and the pipe see MTU-sized packets.
pub fn disable_offloads(ifname: &str) -> Result<()> {
    const ETHTOOL_STSO: u32 = 0x1f;
    const ETHTOOL_SGSO: u32 = 0x24;
    const ETHTOOL_SGRO: u32 = 0x2c;
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(Error::io(
            "socket for ethtool",
            std::io::Error::last_os_error(),
        ));
    }
    let mut result = Ok(());
    for cmd in [ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SGRO] {
        let mut v = EthtoolValue { cmd, data: 0 };
        let mut ifr = match ifreq_for(ifname) {
            Ok(i) => i,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        ifr.ifr_ifru.ifru_data = (&mut v as *mut EthtoolValue).cast();
        if unsafe { libc::ioctl(sock, libc::SIOCETHTOOL, &mut ifr) } < 0 {
            result = Err(Error::io(
                format!("ethtool offload off (cmd {cmd:#x}) on {ifname}"),
                std::io::Error::last_os_error(),
            ));
            break;
        }
    }
    unsafe { libc::close(sock) };
    result
}

/// Best effort: SCHED_FIFO priority 10 for the calling thread (the pipe
/// threads; they always block in ppoll, so they cannot starve the machine).
/// Returns false when the kernel refuses (no CAP_SYS_NICE, RT throttling).
pub fn set_realtime_priority() -> bool {
    let p = libc::sched_param { sched_priority: 10 };
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0 }
}

#[cfg(test)]
mod tests {
    use super::link_is_ready;

    #[test]
    fn link_ready_needs_carrier_and_a_real_qdisc() {
        let up = "5: eth0@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT";
        assert!(link_is_ready(up));
        let noop = "5: eth0@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noop state UP mode DEFAULT";
        assert!(!link_is_ready(noop));
        let no_carrier = "5: eth0@if6: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state LOWERLAYERDOWN";
        assert!(!link_is_ready(no_carrier));
    }
}
