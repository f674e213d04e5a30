//! Acting on real sockets owned by the application (DESIGN.md, "How data flows").
//!
//! Everything here is a thin, checked layer over kernel interfaces; the
//! algorithms that consume its output (`series`, `bwe`, `ops`) stay sans-IO.
//! Only Linux is supported today: the [`linux`] module is compiled on
//! `target_os = "linux"` and holds
//!
//! * congestion-control listing, live get/set with read-back ([`linux::cca`]),
//! * `TCP_INFO` snapshots and a per-interval sampler ([`linux::tcp_info`]),
//! * the `SO_MAX_PACING_RATE` cap ([`linux::pacing_rate`]),
//! * a paced UDP sender for probe trains and p-streams with an honest
//!   `SO_TXTIME` / user-space fallback ([`linux::sender`], [`linux::qdisc`]),
//! * a receiver with per-packet kernel RX timestamps ([`linux::receiver`]),
//! * RTT probes: ICMP echo, UDP echo and a burst aggregation ([`linux::rtt`]).

#[cfg(target_os = "linux")]
pub mod linux;
