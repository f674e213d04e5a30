//! Acting on real sockets owned by the application (DESIGN.md, "How data flows").
//!
//! Everything here is a thin, checked layer over kernel interfaces; the
//! algorithms that consume its output (`series`, `bwe`, `ops`) stay sans-IO.
//! Only Linux is supported today: the [`linux`] module is compiled on
//! `target_os = "linux"` and holds
//!
//! * congestion-control listing, live get/set with read-back ([`linux::cca`]),
//! * `TCP_INFO` snapshots and a per-interval sampler ([`linux::tcp_info`](mod@linux::tcp_info)),
//! * the `SO_MAX_PACING_RATE` cap ([`linux::pacing_rate`]),
//! * a paced UDP sender for probe trains and p-streams with an honest
//!   `SO_TXTIME` / user-space fallback ([`linux::sender`], [`linux::qdisc`]),
//! * a receiver with per-packet kernel RX timestamps ([`linux::receiver`]),
//! * RTT probes: ICMP echo, UDP echo and a burst aggregation ([`linux::rtt`]).

//!
//! ```no_run
//! # #[cfg(target_os = "linux")]
//! # fn main() -> opsel::Result<()> {
//! use opsel::sys::linux::{self as sys, sender::{PacedSender, SenderConfig, TrainReport}};
//!
//! // Switch the CCA of the application's live connection and confirm it.
//! let conn = std::net::TcpStream::connect("10.0.0.2:5001").map_err(|e| opsel::Error::io("connect", e))?;
//! assert_eq!(sys::set_cca(&conn, "bbr")?, "bbr");
//! let info = sys::tcp_info(&conn)?;
//! println!("srtt {} us, cwnd {}", info.rtt_us, info.snd_cwnd);
//!
//! // Send a 100-packet train 100 us apart; the sender says which backend it used.
//! let sock = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| opsel::Error::io("bind", e))?;
//! let mut tx = PacedSender::new(sock, "10.0.0.2:9000".parse().unwrap(), 1472, SenderConfig::default())?;
//! let schedule: Vec<u64> = (0..100).map(|i| i * 100_000).collect();
//! let mut report = TrainReport::default();
//! tx.send_train(&schedule, 1472, 1, &mut report)?;
//! println!("backend {:?}, first departure {:?}", tx.backend(), report.packets[0].departure());
//! # Ok(()) }
//! # #[cfg(not(target_os = "linux"))]
//! # fn main() {}
//! ```

#[cfg(target_os = "linux")]
pub mod linux;
