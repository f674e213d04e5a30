//! Fast CCA A/B evaluation on a live socket: the analogue of 004 §VI's
//! concurrency search, applied to the congestion control (notes 004 §8 B.2).
//!
//! For each candidate in turn the driver switches the socket's congestion
//! control (`TCP_CONGESTION`), then feeds one throughput sample per interval;
//! the evaluator ends that candidate's probe when FastProb stops (or, for the
//! fixed-length comparison, after a fixed number of samples) and records the
//! estimate and the probe time. After the last candidate it chooses the
//! candidate with the highest estimate among those the fairness rule allows.
//!
//! **Fairness rule** (000 OPS decision stump, notes 004 §8 B.2): the
//! foreground must not turn BBR on against a background that OPS classified as
//! CUBIC-only, because BBR takes more than its share from loss-based flows
//! there (000 §5: BBR present → bbr, else cubic). So with
//! [`Background::CubicOnly`] BBR candidates are not probed and cannot be
//! chosen; with [`Background::BbrPresent`] or [`Background::Unknown`] the
//! choice is the argmax of the estimates.
//!
//! Sans-IO: [`AbEvaluator::start`] and [`AbEvaluator::push`] return
//! [`AbAction`]s; the evaluator never touches a socket or a clock.

use super::model::{Decision, FastProbModel, ProbeBudget, Prober};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What OPS knows about the background (000 §5 classes reduced to the view the
/// fairness rule needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Background {
    /// No class given: choose the argmax.
    #[default]
    Unknown,
    /// Only loss-based (CUBIC) flows in the background: never choose BBR.
    CubicOnly,
    /// BBR in the background: any candidate may be chosen.
    BbrPresent,
}

impl std::str::FromStr for Background {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "unknown" => Ok(Background::Unknown),
            "cubic" | "cubic_only" | "cubic-only" => Ok(Background::CubicOnly),
            "bbr" | "bbr_present" | "bbr-present" => Ok(Background::BbrPresent),
            other => Err(Error::invalid(format!(
                "background class {other:?}: expected unknown, cubic (CUBIC only) or bbr (BBR present)"
            ))),
        }
    }
}

/// How each candidate is probed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AbMethod {
    /// FastProb's early stop (004 §IV Fig. 6b); the model's cap bounds it.
    Fastprob,
    /// A fixed-length evaluation: `samples` intervals, estimate = their mean
    /// (004 §III fixed duration).
    Fixed { samples: usize },
}

/// The A/B configuration (the one schema the CLI converts into).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbSpec {
    /// Congestion controls to try, in order (e.g. `["cubic", "bbr"]`).
    pub candidates: Vec<String>,
    /// Background class for the fairness rule.
    #[serde(default)]
    pub background: Background,
    /// Samples discarded after each switch before the probe starts: the first
    /// interval after `TCP_CONGESTION` still carries the previous control's
    /// window (default 1).
    #[serde(default = "one")]
    pub settle_samples: usize,
    /// FastProb or a fixed-length evaluation.
    #[serde(default = "fastprob")]
    pub method: AbMethod,
    /// FastProb's error budget for every candidate: a family of the model
    /// file's `family_budgets`, an explicit E %, or (default) the file's own.
    #[serde(default, skip_serializing_if = "ProbeBudget::is_default")]
    pub budget: ProbeBudget,
}

fn one() -> usize {
    1
}
fn fastprob() -> AbMethod {
    AbMethod::Fastprob
}

/// Largest fixed-length evaluation (samples).
pub const MAX_FIXED_SAMPLES: usize = 10_000;

impl AbSpec {
    /// Check every field; errors name the bad value.
    pub fn validate(&self) -> Result<()> {
        if self.candidates.is_empty() {
            return Err(Error::invalid(
                "A/B needs at least one candidate congestion control (e.g. cubic,bbr)",
            ));
        }
        for (i, c) in self.candidates.iter().enumerate() {
            if c.is_empty() || c.len() > 15 || !c.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::invalid(format!(
                    "candidate {c:?} is not a congestion-control name (1-15 printable characters)"
                )));
            }
            if self.candidates[..i].contains(c) {
                return Err(Error::invalid(format!("candidate {c:?} is listed twice")));
            }
        }
        if self.settle_samples > 100 {
            return Err(Error::invalid(format!(
                "settle_samples {} is more than 100 intervals",
                self.settle_samples
            )));
        }
        if let AbMethod::Fixed { samples } = self.method {
            if samples == 0 || samples > MAX_FIXED_SAMPLES {
                return Err(Error::invalid(format!(
                    "fixed-length evaluation of {samples} samples: give 1..={MAX_FIXED_SAMPLES}"
                )));
            }
        }
        self.budget.validate()?;
        if self.background == Background::CubicOnly && self.candidates.iter().all(|c| is_bbr(c)) {
            return Err(Error::invalid(
                "every candidate is BBR, but the background is CUBIC-only and the fairness rule never chooses BBR there; add a loss-based candidate (cubic)",
            ));
        }
        Ok(())
    }

    fn allowed(&self, cca: &str) -> bool {
        !(self.background == Background::CubicOnly && is_bbr(cca))
    }
}

/// BBR in any version (`bbr`, `bbr2`, `bbr3`).
fn is_bbr(cca: &str) -> bool {
    cca.starts_with("bbr")
}

/// One candidate's probe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateResult {
    /// Congestion control.
    pub cca: String,
    /// False when the fairness rule excluded it (not probed).
    pub probed: bool,
    /// Estimated converged throughput, bit/s (0 when not probed).
    pub estimate_bps: f64,
    /// Samples fed to the estimator (without the settle samples).
    pub samples: usize,
    /// Probe time including the settle samples, ns.
    pub probe_ns: u64,
    /// FastProb reached its cap (always false for a fixed-length evaluation).
    pub forced: bool,
}

/// The evaluation's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AbOutcome {
    /// Every candidate in the order given.
    pub candidates: Vec<CandidateResult>,
    /// The chosen congestion control.
    pub chosen: String,
    /// Sum of the probe times, ns.
    pub total_probe_ns: u64,
    /// The rule applied.
    pub background: Background,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq)]
pub enum AbAction {
    /// Set the socket's congestion control to this candidate, then keep
    /// pushing one sample per interval.
    Switch(String),
    /// Push the next interval's sample.
    Continue,
    /// All candidates are probed: set the socket to `chosen` and stop.
    Done(AbOutcome),
}

/// The A/B state machine.
#[derive(Debug, Clone)]
pub struct AbEvaluator {
    spec: AbSpec,
    prober: Prober<'static>,
    interval_ns: u64,
    results: Vec<CandidateResult>,
    /// Index of the candidate being probed.
    cur: usize,
    /// Samples seen since the switch (settle included).
    seen: usize,
    /// Running sum for the fixed-length method.
    sum: f64,
    started: bool,
    done: bool,
}

impl AbEvaluator {
    /// An evaluator with FastProb model `model` (its interval is the sample interval).
    pub fn new(model: Arc<FastProbModel>, spec: AbSpec) -> Result<Self> {
        spec.validate()?;
        let interval_ns = model.spec().interval_ns;
        let results = spec
            .candidates
            .iter()
            .map(|c| CandidateResult {
                cca: c.clone(),
                probed: false,
                estimate_bps: 0.0,
                samples: 0,
                probe_ns: 0,
                forced: false,
            })
            .collect();
        Ok(AbEvaluator {
            // The budget is checked against the model here, before any switch.
            prober: Prober::shared(model).budget(&spec.budget)?,
            spec,
            interval_ns,
            results,
            cur: 0,
            seen: 0,
            sum: 0.0,
            started: false,
            done: false,
        })
    }

    /// The configuration.
    pub fn spec(&self) -> &AbSpec {
        &self.spec
    }

    /// The sample interval the driver must use, ns.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The first action: switch to the first candidate the fairness rule allows.
    pub fn start(&mut self) -> Result<AbAction> {
        if self.started {
            return Err(Error::invalid("the A/B evaluation has already started"));
        }
        self.started = true;
        self.advance_from(0)
    }

    /// Move to the first allowed candidate at index ≥ `i`, or finish.
    fn advance_from(&mut self, i: usize) -> Result<AbAction> {
        let next = (i..self.results.len()).find(|&k| self.spec.allowed(&self.results[k].cca));
        match next {
            Some(k) => {
                self.cur = k;
                self.seen = 0;
                self.sum = 0.0;
                self.prober.reset();
                Ok(AbAction::Switch(self.results[k].cca.clone()))
            }
            None => {
                self.done = true;
                Ok(AbAction::Done(self.outcome()))
            }
        }
    }

    fn outcome(&self) -> AbOutcome {
        // Argmax over the allowed, probed candidates; ties keep the earlier one.
        let mut best: Option<&CandidateResult> = None;
        for r in self.results.iter().filter(|r| r.probed) {
            if best.is_none_or(|b| r.estimate_bps > b.estimate_bps) {
                best = Some(r);
            }
        }
        AbOutcome {
            chosen: best.map(|b| b.cca.clone()).unwrap_or_default(),
            total_probe_ns: self.results.iter().map(|r| r.probe_ns).sum(),
            candidates: self.results.clone(),
            background: self.spec.background,
        }
    }

    /// The outcome of an evaluation cut short (the transfer ended first):
    /// the candidates probed so far, `chosen` empty until it is done.
    pub fn outcome_so_far(&self) -> AbOutcome {
        let mut o = self.outcome();
        if !self.done {
            o.chosen.clear();
        }
        o
    }

    /// Feed the throughput of the interval that just ended (bit/s) for the
    /// current candidate.
    pub fn push(&mut self, sample_bps: f64) -> Result<AbAction> {
        if !self.started {
            return Err(Error::invalid("call start() before push()"));
        }
        if self.done {
            return Err(Error::invalid("the A/B evaluation is done"));
        }
        if !(sample_bps.is_finite() && sample_bps >= 0.0) {
            return Err(Error::invalid(format!(
                "throughput sample {sample_bps} bit/s must be finite and >= 0"
            )));
        }
        self.seen += 1;
        if self.seen <= self.spec.settle_samples {
            return Ok(AbAction::Continue);
        }
        let n = self.seen - self.spec.settle_samples;
        let stop = match self.spec.method {
            AbMethod::Fastprob => match self.prober.push(sample_bps)? {
                Decision::Continue => None,
                Decision::Stop(p) => Some((p.throughput_bps, false)),
                Decision::ForcedStop(p) => Some((p.throughput_bps, true)),
            },
            AbMethod::Fixed { samples } => {
                self.sum += sample_bps;
                (n == samples).then(|| (self.sum / samples as f64, false))
            }
        };
        let Some((estimate_bps, forced)) = stop else {
            return Ok(AbAction::Continue);
        };
        let interval_ns = self.interval_ns;
        let r = &mut self.results[self.cur];
        r.probed = true;
        r.estimate_bps = estimate_bps;
        r.samples = n;
        r.probe_ns = self.seen as u64 * interval_ns;
        r.forced = forced;
        self.advance_from(self.cur + 1)
    }
}
