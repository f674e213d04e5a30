//! OPS: optimization through protocol selection (000 Ch. 6–7).
//!
//! * [`Controller`]: the sans-IO probe → classify → select → steady cycle,
//!   with the thesis's passive/active probing and constructive bursts, plus
//!   two extensions from its future work (000 §6), both off by default:
//!   adaptive steady time ([`AdaptiveSteady`]) and progressive probing that
//!   ends the probe once the classifier is confident ([`Progressive`]), or
//!   once a learned gate says the prefix's decision is safe ([`ProbeGate`],
//!   004 §8 B.1).
//! * [`Classifier`]: the classification step behind a trait (the DTW K-NN
//!   model plugs in through a thin adapter); [`doubles`] has test doubles.
//! * [`Policy`]: the decision step: the thesis's [`Stump`], a [`TablePolicy`]
//!   and user policies.
//! * [`ControllerSpec`]: the serde description every front end converts
//!   into; its defaults and checks are the only ones.
//! * [`sim`]: a deterministic synthetic RTT generator and a trace-driven
//!   simulator that runs a controller against a background schedule.
//!
//! Driving the controller (what `sys::linux::OpsDriver` does on a socket):
//!
//! ```
//! use opsel::ops::{doubles::ScriptedClassifier, Action, Config, Controller, Event, Output, Stump};
//! use opsel::probe::Pattern;
//!
//! const S: u64 = 1_000_000_000;
//! let classifier = ScriptedClassifier::new(20, &opsel::mix::SIX_CLASSES, &[("B1-C0", 0.9)])?;
//! let cfg = Config::active(Pattern::parse("S5-C5-S5-B5")?);
//! let mut ops = Controller::new(cfg, classifier, Stump::default())?;
//! ops.start(0)?;
//! let mut chosen = None;
//! for t in 1..=20 {
//!     ops.handle_timeout(t * S)?; // pattern segment changes
//!     ops.handle_sample(t * S, 80.0)?; // one 1 Hz RTT sample (rtt_ms)
//!     while let Some(out) = ops.poll() {
//!         match out {
//!             Output::Action(Action::SetCca(cca)) => { /* setsockopt(TCP_CONGESTION, cca) */ }
//!             Output::Action(Action::SendFullSpeed { .. } | Action::Steady { .. }) => { /* send payload */ }
//!             Output::Action(Action::Silence { .. }) => { /* pause sending */ }
//!             Output::Event(Event::Selected { cca, .. }) => chosen = Some(cca),
//!             Output::Event(_) => { /* log */ }
//!         }
//!     }
//! }
//! assert_eq!(chosen.unwrap().as_str(), "bbr"); // BBR present → bbr (000 §4.1)
//! assert_eq!(ops.poll_timeout(), Some(120 * S)); // steady until 20 s + Y (100 s)
//! # Ok::<(), opsel::Error>(())
//! ```

mod classifier;
mod controller;
pub mod doubles;
mod gate;
mod knn_classifier;
mod policy;
mod schema;
pub mod sim;
mod spec;
mod two_stage_classifier;

pub use crate::probe::CcaName;
pub use classifier::{Classified, Classifier, PrefixEnsemble, Verdict};
pub use controller::{
    Action, AdaptiveSteady, Config, Controller, Event, Output, Phase, PriorProbe, ProbeMode,
    Progressive, StabilityKey, Stats, FIRST_SAMPLE_SLACK_NS, MAX_CYCLES,
};
pub use gate::{ProbeGate, GATE_FEATURES};
pub use knn_classifier::KnnClassifier;
pub use policy::{FnPolicy, Policy, Stump, TablePolicy};
pub use schema::{ClassRefs, Labeled, PolicyInput};
pub use spec::{
    default_prefix_lens, AdaptiveSpec, AnyPolicy, ControllerSpec, ModeSpec, NoCallback, PolicySpec,
    PriorSpec, ProgressiveSpec, StabilityKeySpec,
};
pub use two_stage_classifier::TwoStageClassifier;
