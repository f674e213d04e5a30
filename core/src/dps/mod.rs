//! Utility-based CCA selection with online learning (document 002, DPS).
//!
//! * [`DpsSpec`]: the application's QoS per metric as `[A, B, C, D]` with
//!   priorities (002 Fig 4.3), exploration p, monitoring periods t/T, the
//!   guard after a switch, history decay; one serde type with defaults and
//!   validation.
//! * [`Qos`], [`PeriodStats`], [`MetricStats`]: the piecewise-linear
//!   utility, fixed-size histograms over its ramps, and the {D, M, N}
//!   statistics merged by Alg 2.
//! * [`Agent`]: the sans-IO framework cycle (Alg 3 → Alg 1 → switch → guard
//!   → monitor → Alg 2), on its own or under a [`crate::fair::Manager`].
//! * [`LiveFlow`]: an agent on a live transfer, alone or under the host's
//!   fairness manager service (the glue every driver shares).
//! * [`DpsPolicy`]: DPS as an [`crate::ops::Policy`]; OPS's recognised
//!   background mix becomes DPS's network-state label.
//! * [`sim`]: a deterministic simulator for 002 Fig 5.4/5.5/5.8.
//!
//! Driving an agent (what a socket driver does each sampling interval):
//!
//! ```
//! use opsel::dps::{Agent, DpsSpec, Feedback, Output};
//!
//! const S: u64 = 1_000_000_000;
//! let spec = DpsSpec::from_json(r#"{
//!     "ccas": ["cubic", "bbr"],
//!     "metrics": [
//!         {"metric": "rtt_ms", "range": [0, 300, 0, 350], "priority": 0.4},
//!         {"metric": "throughput_mbps", "range": [9.5, null, 8, null], "priority": 0.6}
//!     ],
//!     "selection_period_ms": 6000, "random_period_ms": 3000, "seed": 1
//! }"#)?;
//! let mut agent = Agent::new(&spec)?;
//! agent.start(0)?;
//! let mut cca = None;
//! for t in 1..=120u64 {
//!     while let Some(out) = agent.poll() {
//!         if let Output::SetCca(c) = out {
//!             cca = Some(c); // setsockopt(TCP_CONGESTION, c) on the live socket
//!         }
//!     }
//!     // From TCP_INFO: tcpi_rtt / 1000 and tcpi_delivery_rate · 8 / 1e6.
//!     let tput = if cca.unwrap().as_str() == "bbr" { 9.8 } else { 8.5 };
//!     agent.handle_feedback(t * S, &Feedback::sender(t * S, 60.0, tput))?;
//! }
//! assert_eq!(agent.current().unwrap().as_str(), "bbr"); // the one meeting 9.5 Mbps
//! assert_eq!(agent.stats().learning_cycles, Some(2));
//! # Ok::<(), opsel::Error>(())
//! ```

mod agent;
mod feedback;
#[cfg(target_os = "linux")]
mod live;
mod policy;
pub mod rng;
pub mod schema;
mod select;
pub mod sim;
mod spec;
mod stats;
mod utility;

pub use agent::{Agent, AgentStats, Decision, Event, Mode, Output, Phase, Reason};
pub use feedback::Feedback;
#[cfg(target_os = "linux")]
pub use live::{LiveFlow, LiveOutput};
pub use policy::DpsPolicy;
pub use select::{Database, ProtocolStats, SelectedBy, StateStats, TIE_EPS};
pub use spec::{DpsSpec, Exploration, Guard, MetricSpec, MAX_CCAS};
pub use stats::{History, MetricStats, PeriodReport, PeriodStats};
pub use utility::{Metric, Qos, BAD, GOOD, HIST_SLOTS, MAX_RAMP_BINS};
