//! Utility-based CCA selection with online learning (document 002, DPS).

mod agent;
mod feedback;
mod policy;
pub mod rng;
mod select;
pub mod sim;
mod spec;
mod stats;
mod utility;

pub use agent::{Agent, AgentStats, Decision, Event, Mode, Output, Phase, Reason};
pub use feedback::Feedback;
pub use policy::DpsPolicy;
pub use select::{Database, ProtocolStats, SelectedBy, StateStats, TIE_EPS};
pub use spec::{DpsSpec, Exploration, Guard, MetricSpec, MAX_CCAS};
pub use stats::{History, MetricStats, PeriodReport, PeriodStats};
pub use utility::{Metric, Qos, BAD, GOOD, HIST_SLOTS, MAX_RAMP_BINS};
