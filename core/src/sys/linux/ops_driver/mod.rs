//! `OpsDriver`: runs the sans-IO [`Controller`](crate::ops::Controller) on a
//! live, connected TCP socket owned by the caller (DESIGN.md "How data
//! flows"; 000 §1.2, Fig 6.1, §5.3). The driver moves bytes, reads clocks and
//! sockets and applies the controller's actions; phases, the lead-in and the
//! alignment of RTT samples to the probe window are the controller's
//! decisions, covered by `ops::sim` and its tests (DESIGN.md "Drivers are
//! dumb").
//!
//! * The CCA is switched with `setsockopt(TCP_CONGESTION)` on the same socket
//!   (000 Table 7.2: the connection is never reopened) and read back
//!   (`driver.rs`, `ccas.rs`).
//! * Bursts and steady phases send payload from the caller's data source at
//!   full, CCA-regulated speed; bursts therefore carry real file bytes
//!   ("constructive active probing", 000 §1.2). Silences send nothing, and
//!   `TCP_NOTSENT_LOWAT` keeps them silent (`pump.rs`, `lowat.rs`).
//! * An RTT prober thread sends 10 echoes 1 ms apart once per second and hands
//!   their mean to the controller as one 1 Hz sample with the time its burst
//!   began (000 §3.2; `prober.rs`). ICMP needs root or
//!   `net.ipv4.ping_group_range`; UDP echo to a [`UdpEchoResponder`] (which
//!   `opsel recv` runs on its listen port) needs no privilege (`rtt_source.rs`).
//! * Every phase, prediction, CCA switch, RTT sample and per-interval byte
//!   count is reported to a callback as a [`DriverEvent`] (`events.rs`); the
//!   intervals come from one meter shared with [`send_fixed`] (`meter.rs`).
//! * [`OpsDriver::run`] (`run_loop.rs`) ends at EOF, the time limit or the
//!   caller's stop flag.
//!
//! Time: CLOCK_MONOTONIC ns throughout ([`monotonic_ns`](crate::sys::linux::clock::monotonic_ns)).
//!
//! [`UdpEchoResponder`]: crate::sys::linux::rtt::UdpEchoResponder

mod auto;
mod ccas;
mod config;
mod driver;
mod events;
mod fixed;
mod lowat;
mod meter;
mod prober;
mod pump;
mod rtt_source;
mod run_loop;

pub use auto::{
    auto_rtt_limit_ms, echo_timeout_ns, run_auto, AutoChoice, AutoModel, AutoWatch,
    AUTO_WATCH_WINDOWS,
};
pub use ccas::check_ccas_available;
pub use config::DriverConfig;
pub use driver::OpsDriver;
pub use events::{DriverEvent, DriverReport, EndReason};
pub use fixed::{
    send_fixed, send_fixed_source, send_follower_source, send_sampled_source, SampleAction,
    Sampling,
};
pub use pump::{FileSource, Source};
pub use rtt_source::RttSource;

const NS_PER_S: u64 = 1_000_000_000;
