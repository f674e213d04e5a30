//! Utility-based CCA selection with online learning (document 002, DPS).

pub mod rng;
mod spec;
mod stats;
mod utility;

pub use spec::{DpsSpec, Exploration, Guard, MetricSpec, MAX_CCAS};
pub use stats::{History, MetricStats, PeriodReport, PeriodStats};
pub use utility::{Metric, Qos, BAD, GOOD, HIST_SLOTS, MAX_RAMP_BINS};
