//! FastProb as the start of a transfer (`opsel send --fastprob` / `--ab`):
//! the first seconds of the file's own bytes are the probe, so the probe
//! costs nothing extra (004 §VI counts probe time as overhead because its
//! probes are separate transfers; here they are not).
//!
//! Two modes share one sans-IO state machine, fed one acknowledged-rate
//! sample per model interval by the sending loop:
//! * **estimate**: a FastProb [`Prober`] on the transfer's CCA; at its stop,
//!   the predicted converged throughput and the ETA of the rest of the file;
//! * **A/B**: the [`AbEvaluator`] (switch, probe each candidate with early
//!   stopping, keep the better one under the fairness rule, notes 004 §8
//!   B.2); the rest of the file goes with the chosen CCA and the chosen
//!   candidate's estimate is the prediction.
//!
//! The driver applies [`StartAction`]s and never decides anything itself
//! (DESIGN.md "Drivers are dumb"). `push` allocates nothing on the sample
//! path (a switch clones one CCA name; the end clones the outcome once).

use std::sync::Arc;

use serde::Serialize;

use super::ab::{AbAction, AbEvaluator, AbOutcome, AbSpec};
use super::model::{Decision, FastProbModel, ProbeBudget, Prober};
use crate::error::{Error, Result};

/// What the sending loop does after a sample.
#[derive(Debug, Clone, PartialEq)]
pub enum StartAction {
    /// Keep sending and sampling.
    Continue,
    /// Set the socket's congestion control to this one, keep sampling.
    SetCca(String),
    /// The probe is over: set `set_cca` when given, stop sampling, send the
    /// rest of the file.
    Done { set_cca: Option<String> },
}

/// Where the probe stopped and what it predicts (units in names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StartStop {
    /// Predicted converged throughput of the rest of the transfer, bit/s
    /// (A/B: the chosen candidate's estimate).
    pub predicted_bps: f64,
    /// Samples the estimator used (A/B: over every candidate, without the
    /// settle samples).
    pub samples: usize,
    /// Probe time from the first byte to the stop, ns (A/B: every
    /// candidate's probe including the settle samples).
    pub probe_ns: u64,
    /// FastProb reached its cap instead of its gate saying "predictable"
    /// (A/B: for the chosen candidate).
    pub forced: bool,
    /// Bytes the peer had acknowledged when the probe stopped.
    pub acked_bytes: u64,
    /// Bytes of the transfer still to be delivered then.
    pub remaining_bytes: u64,
    /// `remaining_bytes · 8 / predicted_bps`, ns (`None` when the prediction is 0).
    pub eta_ns: Option<u64>,
}

/// The probe's report for the transfer's JSON report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartReport {
    /// `"fastprob"` (estimate on the transfer's CCA) or `"ab"`.
    pub mode: &'static str,
    /// `None`: the transfer ended (or was stopped) before the probe did.
    pub stop: Option<StartStop>,
    /// Samples taken (the settle samples of an A/B included).
    pub samples_taken: usize,
    /// The A/B's outcome (A/B mode; with `stop` = `None` only the
    /// candidates probed so far, and `chosen` empty).
    pub ab: Option<AbOutcome>,
}

enum Mode {
    Estimate(Box<Prober<'static>>),
    Ab {
        ev: Box<AbEvaluator>,
        /// The CCA last set on the socket.
        cur: String,
        outcome: Option<AbOutcome>,
    },
}

/// The state machine of a probe at the start of a transfer.
pub struct StartProbe {
    mode: Mode,
    interval_ns: u64,
    first_cca: Option<String>,
    /// Bytes this transfer delivers in all (set by [`StartProbe::set_total`]).
    total_bytes: u64,
    acked_bytes: u64,
    taken: usize,
    stop: Option<StartStop>,
}

impl StartProbe {
    /// FastProb on the transfer's own CCA, with the model's default budget.
    pub fn estimate(model: Arc<FastProbModel>) -> StartProbe {
        Self::with_prober(Prober::shared(model))
    }

    /// FastProb on the transfer's own CCA with an error budget: a family of
    /// the file's `family_budgets` or an explicit E % (checked against the
    /// model here, before the transfer starts).
    pub fn estimate_with(model: Arc<FastProbModel>, budget: &ProbeBudget) -> Result<StartProbe> {
        Ok(Self::with_prober(Prober::shared(model).budget(budget)?))
    }

    fn with_prober(prober: Prober<'static>) -> StartProbe {
        let interval_ns = prober.model().spec().interval_ns;
        StartProbe {
            mode: Mode::Estimate(Box::new(prober)),
            interval_ns,
            first_cca: None,
            total_bytes: 0,
            acked_bytes: 0,
            taken: 0,
            stop: None,
        }
    }

    /// A CCA A/B (checked by [`AbSpec::validate`]).
    pub fn ab(model: Arc<FastProbModel>, spec: AbSpec) -> Result<StartProbe> {
        let interval_ns = model.spec().interval_ns;
        let mut ev = AbEvaluator::new(model, spec)?;
        let first = match ev.start()? {
            AbAction::Switch(c) => c,
            // validate() guarantees a candidate the fairness rule allows.
            other => {
                return Err(Error::invalid(format!(
                    "internal: the A/B did not start with a switch ({other:?})"
                )))
            }
        };
        Ok(StartProbe {
            mode: Mode::Ab {
                ev: Box::new(ev),
                cur: first.clone(),
                outcome: None,
            },
            interval_ns,
            first_cca: Some(first),
            total_bytes: 0,
            acked_bytes: 0,
            taken: 0,
            stop: None,
        })
    }

    /// The sample interval (the model's), ns.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The CCA the transfer must start with (A/B: the first candidate the
    /// fairness rule allows); `None`: the transfer's own.
    pub fn first_cca(&self) -> Option<&str> {
        self.first_cca.as_deref()
    }

    /// Bytes the transfer will deliver (for the ETA).
    pub fn set_total(&mut self, bytes: u64) {
        self.total_bytes = bytes;
    }

    /// The probe has stopped.
    pub fn is_done(&self) -> bool {
        self.stop.is_some()
    }

    /// Feed one interval: its acknowledged rate (bit/s) and acknowledged bytes.
    pub fn push(&mut self, rate_bps: f64, acked_bytes: u64) -> Result<StartAction> {
        if self.stop.is_some() {
            return Err(Error::invalid("the start probe is done"));
        }
        self.taken += 1;
        self.acked_bytes = self.acked_bytes.saturating_add(acked_bytes);
        let (stop, set_cca) = match &mut self.mode {
            Mode::Estimate(p) => match p.push(rate_bps)? {
                Decision::Continue => return Ok(StartAction::Continue),
                Decision::Stop(p) | Decision::ForcedStop(p) => {
                    ((p.throughput_bps, p.samples, p.probe_ns, p.forced), None)
                }
            },
            Mode::Ab { ev, cur, outcome } => match ev.push(rate_bps)? {
                AbAction::Continue => return Ok(StartAction::Continue),
                AbAction::Switch(c) => {
                    cur.clone_from(&c);
                    return Ok(StartAction::SetCca(c));
                }
                AbAction::Done(o) => {
                    let chosen = o.candidates.iter().find(|c| c.cca == o.chosen);
                    let (est, forced) = chosen.map_or((0.0, false), |c| (c.estimate_bps, c.forced));
                    let samples = o.candidates.iter().map(|c| c.samples).sum();
                    let set = (!o.chosen.is_empty() && o.chosen != *cur).then(|| o.chosen.clone());
                    let probe_ns = o.total_probe_ns;
                    *outcome = Some(o);
                    ((est, samples, probe_ns, forced), set)
                }
            },
        };
        let (predicted_bps, samples, probe_ns, forced) = stop;
        let remaining_bytes = self.total_bytes.saturating_sub(self.acked_bytes);
        let eta_ns = (predicted_bps > 0.0).then(|| {
            (remaining_bytes as f64 * 8.0 / predicted_bps * 1e9).min(u64::MAX as f64) as u64
        });
        self.stop = Some(StartStop {
            predicted_bps,
            samples,
            probe_ns,
            forced,
            acked_bytes: self.acked_bytes,
            remaining_bytes,
            eta_ns,
        });
        Ok(StartAction::Done { set_cca })
    }

    /// Where the probe stopped (`None` while it runs).
    pub fn stopped(&self) -> Option<&StartStop> {
        self.stop.as_ref()
    }

    /// The report, whether the probe stopped or the transfer ended first.
    pub fn report(&self) -> StartReport {
        let (mode, ab) = match &self.mode {
            Mode::Estimate(_) => ("fastprob", None),
            Mode::Ab { ev, outcome, .. } => (
                "ab",
                Some(outcome.clone().unwrap_or_else(|| ev.outcome_so_far())),
            ),
        };
        StartReport {
            mode,
            stop: self.stop,
            samples_taken: self.taken,
            ab,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastprob::ab::{AbMethod, Background};

    fn model() -> Arc<FastProbModel> {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/fastprob/model_small.json"
        ))
        .unwrap();
        Arc::new(FastProbModel::from_json(&text).unwrap())
    }

    /// The estimate stops where a bare Prober stops, with the same
    /// prediction, and the ETA is the rest of the bytes at that rate.
    #[test]
    fn estimate_matches_the_prober_and_gives_the_eta() {
        let m = model();
        let mut bare = Prober::shared(m.clone());
        let mut sp = StartProbe::estimate(m.clone());
        assert_eq!(sp.first_cca(), None);
        sp.set_total(10_000_000_000);
        let interval_s = m.spec().interval_ns as f64 / 1e9;
        let (mut expected, mut acked) = (None, 0u64);
        for i in 0..100 {
            let rate = if i < 3 { 2e8 } else { 9e8 };
            let bytes = (rate * interval_s / 8.0) as u64;
            acked += bytes;
            let a = sp.push(rate, bytes).unwrap();
            match bare.push(rate).unwrap() {
                Decision::Continue => assert_eq!(a, StartAction::Continue),
                Decision::Stop(p) | Decision::ForcedStop(p) => {
                    assert_eq!(a, StartAction::Done { set_cca: None });
                    expected = Some((p, acked));
                    break;
                }
            }
        }
        let (p, acked) = expected.expect("the prober stops within its cap");
        let s = *sp.stopped().unwrap();
        assert_eq!(s.predicted_bps, p.throughput_bps);
        assert_eq!(
            (s.samples, s.probe_ns, s.forced),
            (p.samples, p.probe_ns, p.forced)
        );
        assert_eq!(s.acked_bytes, acked);
        assert_eq!(s.remaining_bytes, 10_000_000_000 - acked);
        let eta_s = s.eta_ns.unwrap() as f64 / 1e9;
        let want = s.remaining_bytes as f64 * 8.0 / p.throughput_bps;
        assert!((eta_s - want).abs() < 1e-6, "{eta_s} vs {want}");
        assert!(sp.push(1.0, 1).is_err(), "no sample after the stop");
        let r = sp.report();
        assert_eq!(
            (r.mode, r.samples_taken, r.ab),
            ("fastprob", p.samples, None)
        );
    }

    /// The file may end first: no stop, the samples taken are reported.
    #[test]
    fn a_transfer_that_ends_first_reports_no_stop() {
        let mut sp = StartProbe::estimate(model());
        sp.set_total(1_000);
        assert_eq!(sp.push(1e8, 500).unwrap(), StartAction::Continue);
        let r = sp.report();
        assert_eq!((r.stop, r.samples_taken), (None, 1));
    }

    fn ab_spec(bg: Background) -> AbSpec {
        AbSpec {
            candidates: vec!["cubic".into(), "bbr".into()],
            background: bg,
            settle_samples: 1,
            method: AbMethod::Fixed { samples: 2 },
            budget: Default::default(),
        }
    }

    /// A/B: start on the first candidate, switch to the second, end on the
    /// better one (switching back only when it is not the current one).
    #[test]
    fn ab_switches_and_ends_on_the_better_candidate() {
        let mut sp = StartProbe::ab(model(), ab_spec(Background::Unknown)).unwrap();
        assert_eq!(sp.first_cca(), Some("cubic"));
        sp.set_total(1 << 30);
        // cubic: settle, 4e7, 4e7 -> switch to bbr
        assert_eq!(sp.push(1e7, 1).unwrap(), StartAction::Continue);
        assert_eq!(sp.push(4e7, 1).unwrap(), StartAction::Continue);
        assert_eq!(sp.push(4e7, 1).unwrap(), StartAction::SetCca("bbr".into()));
        // bbr: settle, 2e7, 2e7 -> cubic wins: switch back
        assert_eq!(sp.push(1e7, 1).unwrap(), StartAction::Continue);
        assert_eq!(sp.push(2e7, 1).unwrap(), StartAction::Continue);
        assert_eq!(
            sp.push(2e7, 1).unwrap(),
            StartAction::Done {
                set_cca: Some("cubic".into())
            }
        );
        let r = sp.report();
        let ab = r.ab.unwrap();
        assert_eq!(ab.chosen, "cubic");
        let s = r.stop.unwrap();
        assert_eq!((s.predicted_bps, s.samples, s.acked_bytes), (4e7, 4, 6));
        // bbr better: no switch back, it stays.
        let mut sp = StartProbe::ab(model(), ab_spec(Background::Unknown)).unwrap();
        for r in [1e7, 1e7, 1e7, 1e7, 5e7] {
            sp.push(r, 1).unwrap();
        }
        assert_eq!(
            sp.push(5e7, 1).unwrap(),
            StartAction::Done { set_cca: None }
        );
        assert_eq!(sp.report().ab.unwrap().chosen, "bbr");
    }

    /// With a CUBIC-only background the fairness rule leaves cubic alone:
    /// no switch to BBR ever, and cubic is the choice.
    #[test]
    fn ab_with_a_cubic_background_never_switches_to_bbr() {
        let mut sp = StartProbe::ab(model(), ab_spec(Background::CubicOnly)).unwrap();
        assert_eq!(sp.first_cca(), Some("cubic"));
        sp.set_total(100);
        assert_eq!(sp.push(1e7, 10).unwrap(), StartAction::Continue);
        assert_eq!(sp.push(1e7, 10).unwrap(), StartAction::Continue);
        assert_eq!(
            sp.push(1e7, 10).unwrap(),
            StartAction::Done { set_cca: None }
        );
        let r = sp.report();
        let ab = r.ab.unwrap();
        assert_eq!(ab.chosen, "cubic");
        assert!(!ab.candidates[1].probed);
        assert_eq!(r.stop.unwrap().remaining_bytes, 70);
    }

    /// An A/B cut short reports what it probed and no choice.
    #[test]
    fn ab_cut_short_reports_the_candidates_so_far() {
        let mut sp = StartProbe::ab(model(), ab_spec(Background::Unknown)).unwrap();
        for _ in 0..3 {
            sp.push(3e7, 1).unwrap();
        }
        let r = sp.report();
        assert!(r.stop.is_none());
        let ab = r.ab.unwrap();
        assert_eq!(ab.chosen, "");
        assert!(ab.candidates[0].probed && !ab.candidates[1].probed);
    }
}
