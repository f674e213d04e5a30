//! Training-data collection for the 6-class background-mix classifier
//! (000 §3.2–3.3, Ch 5; notes 000 §2.2 "Ch. 5 data-collection roles": BG
//! stream 1 on S1→D1, BG stream 2 on S2→D2, RTT probing on S3→D3).
//!
//! One *trace* is one (condition, mode, class): a lab with the probing host on
//! pair 0 and the background flows (n BBR + m CUBIC bulk TCP, each on its own
//! sender/receiver pair) on pairs 1.., recorded as a 1 Hz RTT series (each
//! sample the mean of 10 echoes 1 ms apart, 000 §3.2) from the probing host.
//!
//! - **Passive**: the probing host only pings.
//! - **Active** (e.g. `S5-C5-S5-B5`): the probing host also runs the pattern
//!   on one persistent TCP connection of its own to its receiver: a burst
//!   sends at full speed after switching the live socket to the burst's CCA
//!   (`TCP_CONGESTION`, as OPS does, 000 §5.2), a silence sends nothing.
//!   `TCP_NOTSENT_LOWAT` keeps the unsent backlog small so a silence is
//!   silent once the in-flight data has drained. The pattern starts with
//!   sample 0 of each run, so windows of a multiple of the pattern length are
//!   aligned to it (000 §10 gap 2: project decision, align).
//!
//! Traces are CSV files appended run by run (`run` column): a rerun reads the
//! trace, counts the complete windows and records only what is missing, so a
//! crash or a Ctrl-C loses at most the unfinished window. A JSON side-car
//! next to each CSV holds the conditions and one entry per run (start time,
//! kernel, load, base RTT, background goodput). Windows never straddle runs.

mod plan;
mod session;
mod spec;
#[cfg(test)]
mod tests;
mod trace;

pub use plan::{collect_plan, parse_plan, pick_next, plan_samples, status, PlanItem};
pub use session::{collect_session, CollectConfig, SessionResult};
pub use spec::{parse_grid_name, Condition, Mode, TraceSpec, DENSE, GRID};
pub use trace::{
    check_sidecar_matches, count_windows, parse_trace, trace_sample_interval_ms, trace_state, Row,
    TraceState, CSV_HEADER, SIDECAR_FORMAT,
};

const NS: u64 = 1_000_000_000;
