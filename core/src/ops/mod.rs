//! OPS: optimization through protocol selection (000 Ch. 6–7).
//!
//! * [`Controller`]: the sans-IO probe → classify → select → steady cycle,
//!   with the thesis's passive/active probing and constructive bursts, plus
//!   two extensions from its future work (000 §6), both off by default:
//!   adaptive steady time ([`AdaptiveSteady`]) and progressive probing that
//!   ends the probe once the classifier is confident ([`Progressive`]).
//! * [`Classifier`]: the classification step behind a trait (the DTW K-NN
//!   model plugs in through a thin adapter); [`doubles`] has test doubles.
//! * [`Policy`]: the decision step: the thesis's [`Stump`], a [`TablePolicy`]
//!   and user policies.
//! * [`sim`]: a deterministic synthetic RTT generator and a trace-driven
//!   simulator that runs a controller against a background schedule.

mod classifier;
mod controller;
pub mod doubles;
mod policy;
pub mod sim;

pub use crate::probe::CcaName;
pub use classifier::{Classified, Classifier, PrefixEnsemble};
pub use controller::{
    Action, AdaptiveSteady, Config, Controller, Event, Output, Phase, ProbeMode, Progressive,
    StabilityKey, Stats,
};
pub use policy::{FnPolicy, Policy, Stump, TablePolicy};
