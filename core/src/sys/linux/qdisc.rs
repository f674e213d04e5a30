//! Does the egress path of a socket enforce `SO_TXTIME` departure times?
//!
//! 001 §2.4: `SO_TXTIME` stores a launch time in `skb->tstamp`; only the fq
//! and etf qdiscs act on it. Every other qdisc (pfifo, bfifo, tbf, htb,
//! noqueue on veth/lo) ignores it while `setsockopt(SO_TXTIME)` and the
//! `SCM_TXTIME` cmsg still succeed (on this project's machine a 9.9 ms train
//! left in 0.44 ms). So we look at the qdiscs of the device the route uses
//! (rtnetlink `RTM_GETROUTE` + `RTM_GETQDISC`), never at return codes.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use super::netlink::{self, RawQdisc};
use crate::{Error, Result};

const TC_H_ROOT: u32 = 0xFFFF_FFFF;

/// One qdisc: kind ("fq", "etf", "pfifo_fast", "noqueue" …), handle, parent.
pub type Qdisc = RawQdisc;

/// Outcome of the SO_TXTIME check for one destination.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TxTimeSupport {
    /// Egress device name.
    pub device: String,
    /// Kind of the root qdisc ("none" if the device reports no qdisc).
    pub root_qdisc: String,
    /// True when every packet of the socket passes an fq or etf qdisc.
    pub enforced: bool,
    /// Clock the launch times must use (CLOCK_MONOTONIC for fq, the etf clockid for etf).
    pub clockid: Option<i32>,
    /// One-line human explanation of the decision.
    pub reason: String,
}

fn is_txtime_qdisc(kind: &str) -> bool {
    kind == "fq" || kind == "etf"
}

/// Pure decision from a device's qdisc list.
///
/// Enforced when the root qdisc is fq/etf, or when the root is a classful
/// multiqueue qdisc (mq, mqprio, taprio) whose every direct child is fq/etf
/// (the usual `default_qdisc=fq` layout on multiqueue NICs: a packet may land
/// on any tx queue, so all of them must honour launch times).
pub fn decide(device: &str, qdiscs: &[Qdisc]) -> TxTimeSupport {
    let root = qdiscs.iter().find(|q| q.parent == TC_H_ROOT);
    let Some(root) = root else {
        return TxTimeSupport {
            device: device.into(),
            root_qdisc: "none".into(),
            enforced: false,
            clockid: None,
            reason: format!(
                "device {device} reports no root qdisc; SO_TXTIME launch times would be ignored"
            ),
        };
    };
    let clock_of = |q: &Qdisc| {
        if q.kind == "etf" {
            q.etf_clockid
        } else {
            Some(libc::CLOCK_MONOTONIC)
        }
    };
    if is_txtime_qdisc(&root.kind) {
        return TxTimeSupport {
            device: device.into(),
            root_qdisc: root.kind.clone(),
            enforced: true,
            clockid: clock_of(root),
            reason: format!("root qdisc of {device} is {}, which releases packets at their SO_TXTIME launch time", root.kind),
        };
    }
    if matches!(root.kind.as_str(), "mq" | "mqprio" | "taprio") {
        let major = root.handle & 0xFFFF_0000;
        let children: Vec<&Qdisc> = qdiscs
            .iter()
            .filter(|q| q.parent != TC_H_ROOT && (q.parent & 0xFFFF_0000) == major)
            .collect();
        let clocks: Vec<Option<i32>> = children.iter().map(|q| clock_of(q)).collect();
        let same_clock = clocks.windows(2).all(|w| w[0] == w[1]);
        if !children.is_empty() && children.iter().all(|q| is_txtime_qdisc(&q.kind)) && same_clock {
            return TxTimeSupport {
                device: device.into(),
                root_qdisc: root.kind.clone(),
                enforced: true,
                clockid: clocks[0],
                reason: format!(
                    "root qdisc of {device} is {} and all {} tx-queue qdiscs are fq/etf",
                    root.kind,
                    children.len()
                ),
            };
        }
        let kinds: Vec<&str> = children.iter().map(|q| q.kind.as_str()).collect();
        return TxTimeSupport {
            device: device.into(),
            root_qdisc: root.kind.clone(),
            enforced: false,
            clockid: None,
            reason: format!(
                "root qdisc of {device} is {} with tx-queue qdiscs {kinds:?}; not all are fq/etf, so SO_TXTIME would be ignored on some queues",
                root.kind
            ),
        };
    }
    TxTimeSupport {
        device: device.into(),
        root_qdisc: root.kind.clone(),
        enforced: false,
        clockid: None,
        reason: format!(
            "root qdisc of {device} is {}, which ignores SO_TXTIME launch times (only fq and etf enforce them); \
             add one with `tc qdisc replace dev {device} root fq` if the kernel has sch_fq",
            root.kind
        ),
    }
}

/// Inode of a namespace file, to compare namespaces.
fn ns_ino(fd: i32) -> Option<u64> {
    // SAFETY: zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open descriptor; st is valid.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_ino)
}

/// Run `f` in the network namespace of socket `sock` (a helper thread joins
/// it when it differs from the caller's, e.g. a socket created in a test
/// namespace). Netlink answers for the namespace of the calling thread.
fn in_socket_netns<T: Send>(sock: i32, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    // SAFETY: SIOCGSKNS returns a new fd referring to the socket's netns.
    let nsfd = unsafe { libc::ioctl(sock, libc::SIOCGSKNS as _) };
    if nsfd < 0 {
        // Old kernels (< 4.9) lack SIOCGSKNS: assume the caller's namespace.
        return f();
    }
    // SAFETY: nsfd was just returned by the kernel and is owned here.
    let nsfd = unsafe { OwnedFd::from_raw_fd(nsfd) };
    let mine = std::fs::File::open("/proc/thread-self/ns/net").ok();
    let same = match &mine {
        Some(m) => ns_ino(m.as_raw_fd()) == ns_ino(nsfd.as_raw_fd()),
        None => true,
    };
    if same {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: affects only this helper thread, which ends afterwards.
            if unsafe { libc::setns(nsfd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::io(
                    "join the socket's network namespace (setns)",
                    io::Error::last_os_error(),
                ));
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Unsupported("qdisc detection thread panicked".into())))
    })
}

/// Check whether packets from `sock` to `dst` would have their SO_TXTIME
/// launch times enforced. Works in the socket's own network namespace.
pub fn detect_txtime(sock: impl AsFd, dst: IpAddr) -> Result<TxTimeSupport> {
    in_socket_netns(sock.as_fd().as_raw_fd(), move || {
        let oif = netlink::route_oif(dst)?;
        let name = netlink::ifname(oif);
        let qs = netlink::qdiscs(oif)?;
        Ok(decide(&name, &qs))
    })
}

/// The qdiscs of the device used to reach `dst` from `sock` (for reports).
pub fn egress_qdiscs(sock: impl AsFd, dst: IpAddr) -> Result<(String, Vec<Qdisc>)> {
    in_socket_netns(sock.as_fd().as_raw_fd(), move || {
        let oif = netlink::route_oif(dst)?;
        Ok((netlink::ifname(oif), netlink::qdiscs(oif)?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KINDS: [&str; 8] = [
        "fq",
        "etf",
        "noqueue",
        "pfifo_fast",
        "htb",
        "tbf",
        "mq",
        "fq_codel",
    ];

    proptest! {
        /// Enforced only if every packet passes fq/etf: the root is fq/etf, or
        /// the root is multiqueue and every child of it is fq/etf.
        #[test]
        fn enforced_implies_txtime_qdisc_on_every_path(
            root in 0usize..8,
            children in proptest::collection::vec(0usize..8, 0..6),
        ) {
            let mut qs = vec![q(KINDS[root], 0x1_0000, TC_H_ROOT)];
            for (i, &k) in children.iter().enumerate() {
                qs.push(q(KINDS[k], 0x20_0000 + i as u32, 0x1_0000 + i as u32 + 1));
            }
            let d = decide("eth0", &qs);
            if d.enforced {
                let root_ok = is_txtime_qdisc(KINDS[root]);
                let kids_ok = KINDS[root] == "mq" && !children.is_empty()
                    && children.iter().all(|&k| is_txtime_qdisc(KINDS[k]));
                prop_assert!(root_ok || kids_ok, "{:?}", d);
                prop_assert!(d.clockid.is_some());
            }
            prop_assert_eq!(d.root_qdisc, KINDS[root]);
        }
    }

    fn q(kind: &str, handle: u32, parent: u32) -> Qdisc {
        Qdisc {
            ifindex: 2,
            kind: kind.into(),
            handle,
            parent,
            etf_clockid: if kind == "etf" { Some(11) } else { None },
        }
    }

    #[test]
    fn root_kinds() {
        for (kind, want) in [
            ("fq", true),
            ("etf", true),
            ("noqueue", false),
            ("pfifo_fast", false),
            ("htb", false),
            ("tbf", false),
            ("fq_codel", false),
        ] {
            let d = decide("eth0", &[q(kind, 0x8001_0000, TC_H_ROOT)]);
            assert_eq!(d.enforced, want, "{kind}: {}", d.reason);
            assert_eq!(d.root_qdisc, kind);
        }
        assert_eq!(
            decide("eth0", &[q("fq", 0x8001_0000, TC_H_ROOT)]).clockid,
            Some(libc::CLOCK_MONOTONIC)
        );
        assert_eq!(
            decide("eth0", &[q("etf", 0x8001_0000, TC_H_ROOT)]).clockid,
            Some(11)
        );
        assert!(!decide("eth0", &[]).enforced);
    }

    #[test]
    fn multiqueue_needs_all_children() {
        let mq = q("mq", 0, TC_H_ROOT);
        let all_fq = [mq.clone(), q("fq", 0, 1), q("fq", 0, 2)];
        assert!(decide("eth0", &all_fq).enforced);
        let mixed = [mq.clone(), q("fq", 0, 1), q("pfifo_fast", 0, 2)];
        assert!(!decide("eth0", &mixed).enforced);
        let mixed_clock = [mq.clone(), q("fq", 0, 1), q("etf", 0, 2)];
        assert!(
            !decide("eth0", &mixed_clock).enforced,
            "fq (MONOTONIC) and etf (TAI) mixed"
        );
        assert!(!decide("eth0", &[mq]).enforced);
        // A fq child below htb does not count: htb is the root that decides departures.
        assert!(
            !decide(
                "eth0",
                &[q("htb", 0x1_0000, TC_H_ROOT), q("fq", 0x10_0000, 0x1_0001)]
            )
            .enforced
        );
    }
}
