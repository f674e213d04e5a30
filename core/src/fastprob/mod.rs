//! Early-stopping throughput prediction (document 004, FastProb).
//!
//! A probing transfer reports its throughput every interval (004 §III: 1 s). After
//! each report, a per-length binary classifier ("is the converged throughput
//! predictable from these n samples yet?") gates a per-length regressor that predicts
//! `t_avg`, the mean throughput of the whole transfer; at the cap (15 samples) the
//! cap regressor predicts regardless (004 §IV Fig. 6).
//!
//! - [`metrics`]: the sample model, the `t_avg` label, per-transfer error, MAPE,
//!   summaries (mean probe time, share of errors > 50 %).
//! - [`baselines`]: closeness θ, AR with the 5 % rule, last-k mean, fixed size,
//!   fixed duration (004 §III); the fixed-n RF is [`FastProbModel::predict_fixed`].
//! - [`model`]: the model file (`"kind": "fastprob"`, versions 1-4), [`FastProbSpec`],
//!   and the allocation-free online loop [`Prober::push`]; version 4 adds one pooled
//!   error gate for every length, the regressor's tree spread and the absolute scale
//!   as gate inputs, optional per-family budgets beside the one default budget, and
//!   an optional family classifier whose inferred family sets each gate's budget;
//!   [`ProbeBudget`] is a caller's family or budget.
//! - [`eval`]: replay FastProb and the baselines over logs, 004 §9 metrics.
//! - [`retrain`]: the batch-of-30 / 20 % retraining rule (004 §V).
//! - [`ab`]: fast CCA A/B evaluation on a live socket, the analogue of 004 §VI
//!   (notes 004 §8 B.2), sans-IO.
//! - [`start`]: FastProb or the A/B as the first seconds of a transfer
//!   (`opsel send --fastprob` / `--ab`): prediction, ETA, sans-IO.
//!
//! Training lives in Python (`opsel.train_fastprob`, scikit-learn); inference runs
//! on [`crate::trees`], equal to scikit-learn.
//!
//! ```
//! # fn main() -> opsel::Result<()> {
//! use opsel::fastprob::{Decision, FastProbModel, Prober};
//! # let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/fastprob/model_small.json")).unwrap();
//! let model = FastProbModel::from_json(&text)?;
//! let mut probe = Prober::new(&model);
//! for sample_bps in [4.0e8, 8.5e8, 9.1e8, 9.0e8, 9.2e8, 8.9e8, 9.0e8, 9.1e8,
//!                    9.0e8, 9.0e8, 9.1e8, 8.9e8, 9.0e8, 9.0e8, 9.0e8] {
//!     match probe.push(sample_bps)? {
//!         Decision::Continue => continue,
//!         Decision::Stop(p) | Decision::ForcedStop(p) => {
//!             println!("t_avg ≈ {:.0} bit/s after {} samples", p.throughput_bps, p.samples);
//!             break;
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```

pub mod ab;
pub mod baselines;
pub mod eval;
pub mod metrics;
pub mod model;
pub mod retrain;
pub mod start;

pub use ab::{AbAction, AbEvaluator, AbMethod, AbOutcome, AbSpec, Background, CandidateResult};
pub use baselines::{ArVariant, Baseline, Denominator};
pub use metrics::{mape_pct, pct_error, t_avg, Estimate, Summary, TransferLog};
pub use model::{
    Decision, FamilyMode, FastProbModel, FastProbSpec, Features, GateInputs, GateKind, GateLayout,
    Prediction, ProbeBudget, Prober, Target, FAMILY_INPUTS, MAX_FAMILIES, POOLED_BASE_INPUTS,
};
pub use retrain::{BatchVerdict, RetrainMonitor, RetrainPolicy};
pub use start::{StartAction, StartProbe, StartReport, StartStop};
