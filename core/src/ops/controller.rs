//! The OPS cycle as a sans-IO state machine (000 §1.2, Fig 6.1, §5.3):
//! probe → classify → select → steady for Y s → repeat.
//!
//! Like quinn-proto, the controller never touches a socket or a clock. The
//! driver feeds it time (`u64` ns from any monotonic clock), 1 Hz RTT samples
//! and optionally bytes sent, and drains [`Output`]s: [`Action`]s it must carry
//! out on the socket and [`Event`]s for logs and UIs. `poll_timeout` says when
//! to call `handle_timeout` next.
//!
//! Time conventions (project decisions for 000 §10 gap 2):
//! * every [`Action`] lasts until the next one; its `until_ns` is the planned
//!   end, used by the driver to size sends;
//! * a sample passed to `handle_sample(now_ns, ..)` summarises the period
//!   *ending* at `now_ns` (an aggregator reports after its echoes); it joins the
//!   probe window if at least half of that period lies inside the probe, i.e.
//!   `now_ns >= probe_start + period/2`. With an active pattern, window sample
//!   k then covers pattern time [k·P, (k+1)·P), matching
//!   [`Pattern::segment_of_sample`](crate::probe::Pattern::segment_of_sample).
//! * a sample handed in with the time its echo burst *began*
//!   ([`Controller::handle_echo_sample`]) is aligned here, not in the driver,
//!   by that start time, not by when its replies came in: window sample k is
//!   the burst fired in period k of the probe (the netlab training
//!   collection reads sample k at second k of the pattern, 000 §3.2); the
//!   prober's grid starts at [`Controller::sample_grid_origin_ns`]. Sample 0
//!   joins half a period into the probe (or when it comes in, if later) and
//!   a later-begun burst of period 0 still replaces it until sample 1
//!   joins. A sample whose echoes were all lost, or a period the prober
//!   fired no burst in, repeats the previous sample so the window keeps its
//!   alignment.
//! * the lead-in ([`Config::lead_in`]) is a pair of actions like any probe
//!   segment: the pattern's last segment runs before the first probe and at
//!   the end of every steady phase, so the simulator and the tests see it.

use super::classifier::{Classified, Classifier, Verdict};
use super::gate::ProbeGate;
use super::policy::Policy;
use crate::error::{Error, Result};
use crate::probe::{CcaName, Pattern, Segment, SegmentKind};
use std::collections::VecDeque;

const NS_PER_S: u64 = 1_000_000_000;

/// How long before a probe's start an echo burst may begin and still be that
/// probe's sample 0 ([`Controller::handle_echo_sample`]): the prober notices
/// its tick up to this late, and a burst that began this early belongs to
/// the probe that started during it (the burst fired at the probe's start,
/// if the prober fires one, replaces it).
pub const FIRST_SAMPLE_SLACK_NS: u64 = 100_000_000;

/// How the controller probes the background (000 §3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeMode {
    /// Keep sending with the current CCA while the RTT window fills.
    Passive,
    /// Follow this pattern of full-speed bursts and silences while the RTT
    /// window fills (000 §3.2). The pattern repeats if the window is longer
    /// than one run; once the window's nominal span is over, the segment
    /// running at its end is held until the last sample arrives. Bursts are
    /// constructive (000 §1.2): the driver sends real payload during them.
    Active(Pattern),
}

/// Which change shrinks an adaptive Y.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StabilityKey {
    /// The recognised class, literally 000 §6 ("grow Y while the class is
    /// stable"). Count confusions (B0-C1 vs C1-C1, the dominant error left by
    /// active probing, 000 §3.6) then shrink Y on a stable path.
    Class,
    /// The selected CCA (default): class flips that do not change the
    /// decision do not count. In the simulator (docs/results/ops-sim.md) a
    /// static CUBIC background kept Y at its minimum when keyed on the class
    /// and grew it to the maximum when keyed on the decision.
    #[default]
    Decision,
}

/// Adaptive steady time (000 §6 future work: "grow Y while the class is
/// stable and shrink it when the class changes, much as cwnd grows").
///
/// After each decision: same key as the previous decision → `Y ← min(Y·grow,
/// max)`; different → `Y ← max(Y·shrink, min)`. The first decision uses the
/// base Y. Multiplicative both ways so a long-stable path amortises probing
/// quickly and a changing one is tracked within a few cycles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveSteady {
    pub min_ns: u64,
    pub max_ns: u64,
    /// Factor applied while stable, >= 1.
    pub grow: f64,
    /// Factor applied on a change, in (0, 1].
    pub shrink: f64,
    pub key: StabilityKey,
}

impl AdaptiveSteady {
    /// Defaults around a base Y: bounds [Y/2, 8·Y], grow ×2, shrink ×0.5
    /// (cwnd-like halving), keyed on the decision.
    pub fn around(base_ns: u64) -> Self {
        Self {
            min_ns: (base_ns / 2).max(1),
            max_ns: base_ns.saturating_mul(8),
            grow: 2.0,
            shrink: 0.5,
            key: StabilityKey::Decision,
        }
    }
}

/// Progressive probing (000 §6 future work: "early termination when
/// confident, cutting step 1 to 5, 10 or 15 s").
///
/// At `min_samples`, then every `step` samples, the controller asks
/// [`Classifier::classify_prefix`]. When `agree` consecutive checks return the
/// same class with confidence >= `min_confidence`, the probe ends and that
/// prefix classification is used. A classifier without prefix support
/// (`classify_prefix` → `None`) always runs the full window.
///
/// The confidence's scale depends on the classifier: a vote share for k > 1,
/// the margin `1 − d_nearest / d_other_class` for 1-NN (`KnnClassifier`). The
/// default 0.8 is conservative for 1-NN margins: on the shipped netlab models
/// a grouped CV lets it end 12–28 % of probes early, while 0.3 (active) or
/// 0.5 (passive) halves the mean probe for about 1–2 points of decision
/// accuracy (`core/examples/progressive_calibration.rs`, docs/results/ops.md).
///
/// With several cycles per decision ([`Config::cycles`] > 1) the checks move
/// to window boundaries: after each full window but the last, once at least
/// `min_samples` samples are in, the running min-sum leader and its margin
/// `1 − Σ_leader / Σ_runner-up` are checked against `min_confidence` (and
/// `agree` consecutive boundaries with the same leader); `step` and prefix
/// models are not used. The decision is then the min-sum over the windows
/// collected so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progressive {
    pub min_samples: usize,
    pub step: usize,
    pub min_confidence: f64,
    pub agree: usize,
}

impl Default for Progressive {
    /// Check at 5, 10, 15 … samples (the cut points 000 §6 names), stop on
    /// the first prefix classified with confidence >= 0.8.
    fn default() -> Self {
        Self {
            min_samples: 5,
            step: 5,
            min_confidence: 0.8,
            agree: 1,
        }
    }
}

/// A cached decision as a prior (003 §7 item 5, hypothesis H2: α transfers
/// repeat toward the same /24, so the last background class seen there is a
/// good guess for the next transfer; `flows::decision_cache`).
///
/// The rule, for the **first probe of a transfer only** and only when the
/// front end named a prior class ([`Controller::set_prior_class`]): at
/// `min_samples`, then every `step` samples, the prefix is classified
/// ([`Classifier::classify_prefix`], the same per-prefix-length models as
/// progressive probing, 000 §6's early-exit cut points 5, 10, 15 s).
/// * Prefix class == prior class with confidence >= `min_confidence`: two
///   independent pieces of evidence agree, so the probe ends there, at a
///   lower margin than progressive probing alone needs (its default 0.8).
/// * Prefix class != prior class with confidence >= `min_confidence`: the
///   path changed since the cache entry; the prior is dropped and the probe
///   runs as without it (the full window, or progressive probing if on).
/// * A less confident prefix: wait for the next check.
///
/// A wrong prior therefore costs nothing but the checks, and a right one
/// shortens the probe; later probes of the transfer have the transfer's own
/// decisions and ignore the prior. Needs one window per decision (cycles = 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriorProbe {
    pub min_samples: usize,
    pub step: usize,
    pub min_confidence: f64,
}

impl Default for PriorProbe {
    /// Check at 5, 10, 15 … samples; agreement at a 1-NN margin >= 0.3 ends
    /// the probe (0.3 is the margin at which progressive probing alone halves
    /// the mean probe for 1–2 points of accuracy, docs/results/ops.md; the
    /// agreeing prior is the extra evidence that makes it safe to stop).
    fn default() -> Self {
        Self {
            min_samples: 5,
            step: 5,
            min_confidence: 0.3,
        }
    }
}

/// Controller configuration. `Config::passive()` and `Config::active(..)`
/// give the thesis defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub mode: ProbeMode,
    /// RTT sample period (000 §3.2: 1 s).
    pub sample_period_ns: u64,
    /// Steady time Y; 0 = probe once, then steady until the transfer ends
    /// (iPerfOPS `-S 0`, 000 §5.3).
    pub steady_ns: u64,
    /// CCA of the socket before the first decision (iPerfOPS default cubic).
    pub initial_cca: CcaName,
    /// Adaptive Y; `None` (default) keeps Y fixed as in the thesis.
    pub adaptive: Option<AdaptiveSteady>,
    /// Early exit from the probe; `None` (default) always fills the window.
    pub progressive: Option<Progressive>,
    /// How a prior class shortens the first probe ([`PriorProbe`]); used
    /// only once [`Controller::set_prior_class`] names a class. `None`
    /// (default): no prior.
    pub prior: Option<PriorProbe>,
    /// A learned gate that ends each probe at the first check length whose
    /// prefix decision it judges safe ([`ProbeGate`], 004 §8 B.1); `None`
    /// (default): no gate. Needs one window per decision (cycles = 1), a
    /// classifier with prefix models at the gate's check lengths, and the
    /// gate's window equal to the model's. Checked after the prior
    /// ([`PriorProbe`]); excludes [`Config::progressive`], which it replaces.
    pub gate: Option<ProbeGate>,
    /// Extra sample periods a probe may take before it is abandoned because
    /// samples stopped arriving.
    pub grace_periods: u32,
    /// Randomise each steady time by up to ±this fraction (0 = off, the
    /// thesis's behaviour; at most 0.5). A fixed Y whose cycle is a multiple
    /// of a periodic background's period probes the same background phase
    /// every time (docs/results/ops-sim.md, ALT-30/60); jitter breaks that
    /// lockstep, as randomised timers do for periodic routing updates.
    /// Applied after adaptation: a steady phase lasts Y·(1 ± jitter), which
    /// may exceed the adaptive bounds by that fraction.
    pub steady_jitter: f64,
    /// Seed of the jitter PRNG (runs are reproducible bit for bit).
    pub seed: u64,
    /// Windows (cycles) per decision, >= 1. 1 (default) is the thesis's one
    /// window per probe. With n > 1 (issues #6/#7, beyond 000 §3.5) a probe
    /// collects n windows of w samples back to back (active: the pattern
    /// repeats n times; passive: n windows), each window is compared with
    /// every reference ([`Classifier::class_distances`]) and the class with
    /// the smallest sum over the windows of its nearest distance wins
    /// ("min-sum", `opsel.train cycles`: 94.9–97.2 % at 3 cycles of
    /// S5-C5-S5-B5 against about 91 % for one). Needs a classifier that
    /// reports per-class distances (`KnnClassifier` does); at most
    /// [`MAX_CYCLES`]. Progressive probing then checks only at window
    /// boundaries, see [`Progressive`].
    pub cycles: usize,
    /// Active probing only: run the pattern's last segment (e.g. the B5 burst
    /// of S5-C5-S5-B5) right before every probe: before the first one and at
    /// the end of each steady phase. Models trained on back-to-back pattern
    /// runs (the netlab collection, 000 §3.2) saw every window follow that
    /// segment, and the background's state at the window's start (a CUBIC
    /// flow just knocked back by a BBR burst) is part of the signature.
    /// Off by default (the thesis's cycle); `OpsDriver` sets it from
    /// `DriverConfig::lead_in` (on by default there).
    pub lead_in: bool,
}

/// The largest [`Config::cycles`] accepted (the probe buffer holds
/// `cycles × w` samples).
pub const MAX_CYCLES: usize = 100;

impl Config {
    /// Passive probing, OPS-60 (000 Table 6.2).
    pub fn passive() -> Self {
        Self {
            mode: ProbeMode::Passive,
            sample_period_ns: NS_PER_S,
            steady_ns: 60 * NS_PER_S,
            initial_cca: CcaName::CUBIC,
            adaptive: None,
            progressive: None,
            prior: None,
            gate: None,
            grace_periods: 5,
            steady_jitter: 0.0,
            seed: 0,
            cycles: 1,
            lead_in: false,
        }
    }

    /// Active probing with `pattern` (000 §5.6 uses S5-C5-S5-B5), Y = 100 s.
    pub fn active(pattern: Pattern) -> Self {
        Self {
            mode: ProbeMode::Active(pattern),
            steady_ns: 100 * NS_PER_S,
            ..Self::passive()
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.sample_period_ns == 0 {
            return Err(Error::invalid(
                "sample_period_ns is 0; use the RTT sampler's period, e.g. 1e9 (1 s, 000 §3.2)",
            ));
        }
        if !(0.0..=0.5).contains(&self.steady_jitter) {
            return Err(Error::invalid(format!(
                "steady_jitter {} must be a fraction in [0, 0.5] (0.1 = ±10%)",
                self.steady_jitter
            )));
        }
        if self.cycles == 0 || self.cycles > MAX_CYCLES {
            return Err(Error::invalid(format!(
                "cycles = {} windows per decision is out of range; use 1 (one window, the thesis) to {MAX_CYCLES} (3 cycles of S5-C5-S5-B5 = 60 s of probing)",
                self.cycles
            )));
        }
        if self.grace_periods == 0 {
            return Err(Error::invalid(
                "grace_periods is 0; allow at least 1 extra sample period for the last sample of a window to arrive",
            ));
        }
        if let Some(a) = &self.adaptive {
            if self.steady_ns == 0 {
                return Err(Error::invalid(
                    "adaptive steady time needs steady_ns > 0 (Y = 0 probes once, so there is nothing to adapt); set a base Y or disable adaptive",
                ));
            }
            if a.min_ns == 0
                || a.min_ns > a.max_ns
                || !(a.min_ns..=a.max_ns).contains(&self.steady_ns)
            {
                return Err(Error::invalid(format!(
                    "adaptive bounds [{}, {}] ns must satisfy 0 < min <= Y = {} <= max",
                    a.min_ns, a.max_ns, self.steady_ns
                )));
            }
            let grow_ok = a.grow.is_finite() && a.grow >= 1.0;
            let shrink_ok = a.shrink > 0.0 && a.shrink <= 1.0; // false for NaN
            if !grow_ok || !shrink_ok {
                return Err(Error::invalid(format!(
                    "adaptive factors grow = {} and shrink = {} must satisfy grow >= 1 and 0 < shrink <= 1",
                    a.grow, a.shrink
                )));
            }
        }
        if let Some(p) = &self.progressive {
            if p.min_samples == 0 || p.step == 0 || p.agree == 0 {
                return Err(Error::invalid(format!(
                    "progressive probing needs min_samples, step and agree >= 1 (got {}, {}, {})",
                    p.min_samples, p.step, p.agree
                )));
            }
            if !(0.0..=1.0).contains(&p.min_confidence) {
                return Err(Error::invalid(format!(
                    "progressive min_confidence {} must be in [0, 1]",
                    p.min_confidence
                )));
            }
        }
        if let Some(p) = &self.prior {
            if p.min_samples == 0 || p.step == 0 {
                return Err(Error::invalid(format!(
                    "prior probing needs min_samples and step >= 1 (got {}, {})",
                    p.min_samples, p.step
                )));
            }
            if !(0.0..=1.0).contains(&p.min_confidence) {
                return Err(Error::invalid(format!(
                    "prior min_confidence {} must be in [0, 1]",
                    p.min_confidence
                )));
            }
            if self.cycles > 1 {
                return Err(Error::invalid(format!(
                    "a prior shortens one-window probes; cycles is {}: use cycles = 1 or drop the prior",
                    self.cycles
                )));
            }
        }
        if self.gate.is_some() {
            if self.progressive.is_some() {
                return Err(Error::invalid(
                    "a probe gate and progressive probing both end probes early; use one (the gate replaces the margin threshold)",
                ));
            }
            if self.cycles > 1 {
                return Err(Error::invalid(format!(
                    "a probe gate ends one-window probes; cycles is {}: use cycles = 1 or drop the gate",
                    self.cycles
                )));
            }
        }
        Ok(())
    }
}

/// Where the controller is in the OPS cycle (serialized in snake_case:
/// `"probe"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Created, `start` not called yet; or started and running the lead-in
    /// before the first probe ([`Config::lead_in`]).
    Idle,
    /// Step 1: collecting the RTT window (000 §1.2).
    Probe,
    /// Step 2: classifying the window (instantaneous in controller time).
    Classify,
    /// Step 3: choosing the CCA (instantaneous in controller time).
    Select,
    /// Step 4: steady transfer.
    Steady,
}

impl Phase {
    /// The phase's name as serialized (`"probe"`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Probe => "probe",
            Phase::Classify => "classify",
            Phase::Select => "select",
            Phase::Steady => "steady",
        }
    }
}

/// What the driver must do on the socket. Each action lasts until the next.
///
/// Serialized as an object tagged by `kind` (`set_cca`, `send_full_speed`,
/// `silence`, `steady`) with the fields below (`cca`, `until_ns`): the one
/// schema of the CLI log, Python dicts and Node objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(into = "ActionRecord")]
pub enum Action {
    /// `setsockopt(TCP_CONGESTION, name)` on the live connection before
    /// sending more (000 Table 7.2). Emitted only when the CCA changes.
    SetCca(CcaName),
    /// Probe traffic: send payload at full, CCA-regulated speed (no pacing,
    /// 000 §3.2) with `cca` until `until_ns`.
    SendFullSpeed { cca: CcaName, until_ns: u64 },
    /// Probe silence: send nothing until `until_ns`.
    Silence { until_ns: u64 },
    /// Steady transfer with `cca` until `until_ns` (`None` = until the end of
    /// the transfer, Y = 0).
    Steady { cca: CcaName, until_ns: Option<u64> },
}

/// [`Action`] in its serialized form: the newtype `SetCca` as `{"cca": …}`
/// (a tagged object cannot hold a bare string).
#[derive(serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum ActionRecord {
    SetCca { cca: CcaName },
    SendFullSpeed { cca: CcaName, until_ns: u64 },
    Silence { until_ns: u64 },
    Steady { cca: CcaName, until_ns: Option<u64> },
}

impl From<Action> for ActionRecord {
    fn from(a: Action) -> Self {
        match a {
            Action::SetCca(cca) => ActionRecord::SetCca { cca },
            Action::SendFullSpeed { cca, until_ns } => {
                ActionRecord::SendFullSpeed { cca, until_ns }
            }
            Action::Silence { until_ns } => ActionRecord::Silence { until_ns },
            Action::Steady { cca, until_ns } => ActionRecord::Steady { cca, until_ns },
        }
    }
}

/// Informational outputs, in order with the actions. Serialized as an object
/// tagged by `kind` (`phase`, `classified`, `cycle_classified`, `selected`,
/// `decision_failed`, `probe_incomplete`) with the fields below;
/// `Classified`'s fields are inlined and `CycleClassified::leader` is
/// `leader_index`. [`Labeled`](super::Labeled) adds the class names.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// Entered `phase` in OPS cycle `cycle` (0-based) at `at_ns`.
    Phase {
        phase: Phase,
        cycle: u64,
        at_ns: u64,
    },
    /// The classifier's verdict on the probe window; `samples` < w means the
    /// probe ended early (progressive probing).
    Classified {
        #[serde(flatten)]
        classified: Classified,
        samples: usize,
        early: bool,
        at_ns: u64,
    },
    /// Several cycles per decision ([`Config::cycles`] > 1): window `index`
    /// (0-based) of the probe's `cycles` was compared with the references.
    /// `class_index`/`distance`: the nearest class of this window alone (its
    /// 1-NN verdict); `leader`/`margin`: the min-sum decision over windows
    /// 0..=index and its margin `1 − Σ_leader / Σ_runner-up` in [0, 1]. The
    /// probe's final [`Event::Classified`] carries the min-sum class, its sum
    /// as `distance` and the margin as `confidence`.
    CycleClassified {
        index: usize,
        cycles: usize,
        class_index: usize,
        distance: f64,
        #[serde(rename = "leader_index")]
        leader: usize,
        margin: f64,
        at_ns: u64,
    },
    /// The policy's choice and the steady time that follows.
    Selected {
        cca: CcaName,
        steady_ns: Option<u64>,
        at_ns: u64,
    },
    /// The classifier or the policy failed; the steady phase uses the last
    /// decided CCA (initially `initial_cca`) and the next cycle probes again.
    DecisionFailed { message: String, at_ns: u64 },
    /// Samples stopped arriving: only `samples` of `needed` came before the
    /// probe deadline. The probe is abandoned (steady with the last decided
    /// CCA, or probe again at once when Y = 0).
    ProbeIncomplete {
        samples: usize,
        needed: usize,
        at_ns: u64,
    },
}

/// One output of the controller, serialized as its action or event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Output {
    Action(Action),
    Event(Event),
}

/// Cumulative accounting, for "time spent probing" and throughput by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Stats {
    /// Decisions taken (classifications that reached the policy).
    pub decisions: u64,
    /// Probes that ended early (progressive probing or an agreeing prior).
    pub early_exits: u64,
    /// Of those, probes ended because a prefix agreed with the prior class
    /// ([`PriorProbe`]).
    pub prior_exits: u64,
    /// First probes whose prefix confidently disagreed with the prior class,
    /// which was then dropped.
    pub prior_overruled: u64,
    /// Classifier or policy failures.
    pub failed_decisions: u64,
    /// Probes the probe gate ended early ([`ProbeGate`]); also counted in
    /// `early_exits`.
    pub gate_exits: u64,
    /// Probes abandoned for missing samples.
    pub incomplete_probes: u64,
    /// `SetCca` actions emitted.
    pub cca_switches: u64,
    /// Time spent in probe phases.
    pub probe_ns: u64,
    /// Time spent in steady phases.
    pub steady_ns: u64,
    /// Bytes reported with `handle_bytes` during probe phases.
    pub probe_bytes: u64,
    /// Bytes reported during steady phases.
    pub steady_bytes: u64,
}

/// The OPS controller. See the module docs.
pub struct Controller<C = Box<dyn Classifier + Send>, P = Box<dyn Policy + Send>> {
    cfg: Config,
    classifier: C,
    policy: P,
    w: usize,
    phase: Phase,
    cycle: u64,
    window: Vec<f64>,
    probe_start_ns: u64,
    probe_span_ns: u64,
    probe_deadline_ns: u64,
    /// Active probing: absolute segment number (counting repeats) and the
    /// time it started; `next_boundary_ns` = when the next one starts.
    seg_abs: u64,
    next_boundary_ns: Option<u64>,
    steady_until_ns: Option<u64>,
    socket_cca: CcaName,
    /// The last CCA chosen for a steady phase (initially `initial_cca`): the
    /// fallback when a decision fails, rather than whatever the last probe
    /// burst left on the socket.
    decided_cca: CcaName,
    y_ns: u64,
    last_key: Option<(usize, CcaName)>,
    agree: Option<(usize, usize)>,
    phase_since_ns: u64,
    last_now_ns: u64,
    out: VecDeque<Output>,
    stats: Stats,
    rng: u64,
    /// Several cycles per decision: this window's per-class distances and
    /// their running sums over the probe's windows (both one per class).
    cycle_dist: Vec<f64>,
    cycle_sums: Vec<f64>,
    started: bool,
    /// The lead-in segment ([`Config::lead_in`], active probing only).
    lead: Option<Segment>,
    /// When the next lead-in begins (in a steady phase).
    lead_at_ns: Option<u64>,
    /// With a lead-in before the first probe: when that probe begins.
    first_probe_ns: Option<u64>,
    /// Where the prober's 1 Hz grid starts: the start of the transfer, then
    /// of each probe (sample k ↔ second k of the pattern).
    grid_origin_ns: u64,
    /// Sample 0 of the probe, read at its start, waiting to join the window
    /// half a period in (the module's time conventions).
    held_rtt_ms: Option<f64>,
    /// When the echo burst now held or in the window as sample 0 began: a
    /// burst of period 0 replaces it only if it began later.
    sample0_began_ns: Option<u64>,
    /// The last answered sample, repeated for a sample whose echoes were lost.
    last_rtt_ms: Option<f64>,
    /// The prior class of the first probe ([`PriorProbe`]); cleared once
    /// that probe ends or the prefix disagrees.
    prior_class: Option<usize>,
    /// Probe gate state ([`ProbeGate`]): the previous check's decision (BBR
    /// present or not) and how many checks in a row gave it.
    gate_last: Option<bool>,
    gate_streak: usize,
    /// BBR flows per class, counted once here (`Mix::count` allocates its
    /// lower-cased key; the gate's checks must not).
    class_bbr: Vec<u32>,
}

impl<C: Classifier, P: Policy> Controller<C, P> {
    /// Check the configuration and that `policy` answers for every class of
    /// `classifier`.
    pub fn new(cfg: Config, classifier: C, policy: P) -> Result<Self> {
        cfg.validate()?;
        let w = classifier.window_len();
        if w == 0 {
            return Err(Error::invalid(
                "classifier window length is 0; the model must expect w >= 1 samples",
            ));
        }
        if cfg.mode == ProbeMode::Passive && classifier.counts_own_flow() {
            // The policy will be asked about backgrounds: each class minus
            // one flow of whichever CCA the socket runs (`background_of`).
            let mut seen = classifier.classes().to_vec();
            for m in classifier.classes() {
                seen.extend(m.iter().filter_map(|(cca, _)| m.without_one(cca)));
            }
            policy.check_classes(&seen)?;
        } else {
            policy.check_classes(classifier.classes())?;
        }
        let probe_span_ns = (w as u64)
            .checked_mul(cfg.cycles as u64)
            .and_then(|s| s.checked_mul(cfg.sample_period_ns))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{} window(s) of {w} samples × period {} ns overflows u64 ns",
                    cfg.cycles, cfg.sample_period_ns
                ))
            })?;
        if cfg.cycles > 1 {
            if !classifier.supports_class_distances() {
                return Err(Error::invalid(format!(
                    "cycles = {} needs a classifier that reports its distance to every class (the DTW K-NN model does); use cycles = 1 with this classifier",
                    cfg.cycles
                )));
            }
            if let ProbeMode::Active(pattern) = &cfg.mode {
                // Each window must start at the pattern's start, as the
                // training windows do (aligned windows, 000 §10 gap 2).
                let window_ns = w as u64 * cfg.sample_period_ns;
                let run_ns = pattern.total_ns();
                if run_ns == 0 || window_ns % run_ns != 0 {
                    return Err(Error::invalid(format!(
                        "cycles = {} with pattern {pattern} ({} s) needs the model window ({w} samples = {} s) to be a whole number of pattern runs, so every window starts at the pattern's start; use a model with w a multiple of the pattern length or cycles = 1",
                        cfg.cycles,
                        run_ns as f64 / 1e9,
                        window_ns as f64 / 1e9
                    )));
                }
            }
        }
        if let Some(g) = &cfg.gate {
            if g.window() != w {
                return Err(Error::invalid(format!(
                    "the probe gate was trained for windows of {} samples but the model's window is {w}; use the gate trained with this model",
                    g.window()
                )));
            }
        }
        let n_classes = classifier.classes().len();
        let window_cap = w * cfg.cycles;
        let rng = cfg.seed;
        let mut me = Self {
            y_ns: cfg.steady_ns,
            socket_cca: cfg.initial_cca,
            decided_cca: cfg.initial_cca,
            cfg,
            classifier,
            policy,
            w,
            phase: Phase::Idle,
            cycle: 0,
            window: Vec::with_capacity(window_cap),
            probe_start_ns: 0,
            probe_span_ns,
            probe_deadline_ns: 0,
            seg_abs: 0,
            next_boundary_ns: None,
            steady_until_ns: None,
            last_key: None,
            agree: None,
            phase_since_ns: 0,
            last_now_ns: 0,
            // Room for several cycles of outputs so a driver that drains once
            // per call never makes the queue grow (no allocation when steady).
            out: VecDeque::with_capacity(64),
            stats: Stats::default(),
            rng: 0,
            cycle_dist: vec![0.0; n_classes],
            cycle_sums: vec![0.0; n_classes],
            started: false,
            lead: None,
            lead_at_ns: None,
            first_probe_ns: None,
            grid_origin_ns: 0,
            held_rtt_ms: None,
            sample0_began_ns: None,
            last_rtt_ms: None,
            prior_class: None,
            gate_last: None,
            gate_streak: 0,
            class_bbr: Vec::new(),
        };
        me.class_bbr = me
            .classifier
            .classes()
            .iter()
            .map(|m| m.count("bbr"))
            .collect();
        me.rng = rng;
        me.lead = me.lead_segment();
        Ok(me)
    }

    /// The lead-in segment if [`Config::lead_in`] is on and probing is active.
    fn lead_segment(&self) -> Option<Segment> {
        match &self.cfg.mode {
            ProbeMode::Active(p) if self.cfg.lead_in => p.segments().last().copied(),
            _ => None,
        }
    }

    /// Turn the lead-in ([`Config::lead_in`]) on or off before `start` (a
    /// driver's own setting, e.g. `DriverConfig::lead_in`, applied to a
    /// controller built from a spec).
    pub fn set_lead_in(&mut self, on: bool) -> Result<()> {
        if self.started {
            return Err(Error::invalid(
                "the lead-in is set before the controller starts; create a new controller",
            ));
        }
        self.cfg.lead_in = on;
        self.lead = self.lead_segment();
        Ok(())
    }

    /// Name the class a cache expects on this path (e.g. the last decision
    /// toward the destination's /24, `flows::decision_cache`), before
    /// `start`. The first probe may then end early when a prefix agrees with
    /// it ([`PriorProbe`]). Errors when the controller has started, when
    /// [`Config::prior`] is off, when `class_index` is not one of the
    /// classifier's classes, or when the classifier cannot classify prefixes.
    pub fn set_prior_class(&mut self, class_index: usize) -> Result<()> {
        if self.started {
            return Err(Error::invalid(
                "the prior class is set before the controller starts; create a new controller",
            ));
        }
        if self.cfg.prior.is_none() {
            return Err(Error::invalid(
                "set_prior_class needs Config::prior (the spec's \"prior\": true) to say how the prior may shorten the probe",
            ));
        }
        let n = self.classifier.classes().len();
        if class_index >= n {
            return Err(Error::invalid(format!(
                "prior class index {class_index} is out of range: the model has {n} classes"
            )));
        }
        self.prior_class = Some(class_index);
        Ok(())
    }

    /// The prior class still in force (first probe, not yet overruled).
    pub fn prior_class(&self) -> Option<usize> {
        self.prior_class
    }

    /// Begin the first probe at `now_ns`.
    /// With a lead-in ([`Config::lead_in`]) the first probe begins after it,
    /// at `now_ns` + the segment's length; until then the phase stays `Idle`.
    pub fn start(&mut self, now_ns: u64) -> Result<()> {
        if self.started {
            return Err(Error::invalid(
                "OPS controller already started; create a new controller for a new transfer",
            ));
        }
        self.started = true;
        self.last_now_ns = now_ns;
        self.phase_since_ns = now_ns;
        self.grid_origin_ns = now_ns;
        match self.lead {
            Some(seg) => {
                let until_ns = now_ns.saturating_add(seg.duration_ns);
                self.first_probe_ns = Some(until_ns);
                self.begin_lead_in(seg, until_ns);
            }
            None => self.start_probe(now_ns),
        }
        Ok(())
    }

    /// Feed one aggregated RTT sample (mean rtt_ms over the period ending at
    /// `now_ns`). Errors, with no state change, on a non-finite or negative
    /// RTT, a time earlier than a previous call, or before `start`.
    pub fn handle_sample(&mut self, now_ns: u64, rtt_ms: f64) -> Result<()> {
        if !rtt_ms.is_finite() || rtt_ms < 0.0 {
            return Err(Error::invalid(format!(
                "RTT sample {rtt_ms} ms at {now_ns} ns is not a finite non-negative number; drop or interpolate lost samples"
            )));
        }
        self.check_time(now_ns)?;
        self.advance(now_ns);
        self.take_sample(now_ns, rtt_ms);
        Ok(())
    }

    /// Feed one RTT sample as a live prober reads it: `first_echo_ns` is when
    /// its echo burst began, `now_ns` when its last reply came in (or its
    /// timeout ran out), `rtt_ms` the mean of the answered echoes (`None`:
    /// every echo was lost, the previous sample is repeated; before any
    /// answered sample there is nothing to repeat and the sample is dropped).
    ///
    /// Window sample k is the burst that began in period k of the probe,
    /// `[start + k·period, start + (k+1)·period)`, whenever its replies come
    /// in (000 §3.2: the training collection reads sample k at second k of
    /// the probe; a live reply may take up to the echo timeout, nearly a
    /// whole period at 5 Hz). Period 0 also takes a burst that began up to
    /// [`FIRST_SAMPLE_SLACK_NS`] before the start (fired on the previous
    /// grid as the probe began); of several bursts of period 0 the one that
    /// began last is sample 0, so the burst fired at the probe's start wins.
    /// Sample 0 joins the window half a period into the probe, by this
    /// controller's convention (it is held until then; [`Controller::poll_timeout`]
    /// includes that time), or when it comes in if later; a burst of period
    /// 0 whose replies come in after that replaces it as long as sample 1
    /// has not joined (only a check on a one-sample prefix, `min_samples` =
    /// 1, can have seen the replaced value). A burst that began earlier than
    /// the slack, or a second burst for a period already in the window, is
    /// dropped; a period without a burst (the prober missed its tick) is
    /// filled with the previous sample, as a lost burst is. Errors as
    /// `handle_sample`, and when the burst began after `now_ns`.
    pub fn handle_echo_sample(
        &mut self,
        now_ns: u64,
        first_echo_ns: u64,
        rtt_ms: Option<f64>,
    ) -> Result<()> {
        if let Some(v) = rtt_ms.filter(|v| !v.is_finite() || *v < 0.0) {
            return Err(Error::invalid(format!(
                "RTT sample {v} ms at {now_ns} ns is not a finite non-negative number; pass None for a sample whose echoes were all lost"
            )));
        }
        if first_echo_ns > now_ns {
            return Err(Error::invalid(format!(
                "echo burst began at {first_echo_ns} ns, after its sample was read at {now_ns} ns; pass the time the burst's first echo left"
            )));
        }
        self.check_time(now_ns)?;
        self.advance(now_ns);
        let prev_rtt_ms = self.last_rtt_ms;
        if rtt_ms.is_some() {
            self.last_rtt_ms = rtt_ms;
        }
        let Some(v) = self.last_rtt_ms else {
            return Ok(());
        };
        if self.phase != Phase::Probe {
            return Ok(());
        }
        let Some(period) = self.echo_period(first_echo_ns) else {
            return Ok(()); // begun before the probe: a sample of the phase before.
        };
        if period == 0 {
            self.take_sample0(now_ns, first_echo_ns, v);
            return Ok(());
        }
        // Periods the prober fired no burst in repeat the previous sample.
        let fill = prev_rtt_ms.unwrap_or(v);
        let cycle = self.cycle;
        let same_probe = |c: &Self| c.phase == Phase::Probe && c.cycle == cycle;
        while same_probe(self) && (self.window.len() as u64) < period {
            self.take_sample(now_ns, fill);
        }
        if same_probe(self) && self.window.len() as u64 == period {
            self.take_sample(now_ns, v);
        }
        Ok(())
    }

    /// The probe period an echo burst that began at `first_echo_ns` samples
    /// (window sample k ↔ period k), `None` if it began before the probe's
    /// sample-0 slack.
    fn echo_period(&self, first_echo_ns: u64) -> Option<u64> {
        let start = self.probe_start_ns;
        if first_echo_ns >= start {
            Some((first_echo_ns - start) / self.cfg.sample_period_ns)
        } else if first_echo_ns.saturating_add(FIRST_SAMPLE_SLACK_NS) >= start {
            Some(0)
        } else {
            None
        }
    }

    /// A burst of probe period 0 that began at `began_ns` with value `v`:
    /// held until sample 0 is due, taken as sample 0, or replacing sample 0
    /// while it is the window's only sample (`handle_echo_sample`).
    fn take_sample0(&mut self, now_ns: u64, began_ns: u64, v: f64) {
        if self.sample0_began_ns.is_some_and(|b| began_ns < b) {
            return; // an earlier candidate than the one already chosen.
        }
        if now_ns < self.sample0_due_ns() {
            self.held_rtt_ms = Some(v);
            self.sample0_began_ns = Some(began_ns);
        } else if self.window.is_empty() {
            self.sample0_began_ns = Some(began_ns);
            self.take_sample(now_ns, v);
        } else if self.window.len() == 1 && self.sample0_began_ns.is_some() {
            // The burst fired at the probe's start came in after an earlier
            // candidate joined: it is sample 0 (000 §3.2), not sample 1.
            self.window[0] = v;
            self.sample0_began_ns = Some(began_ns);
            if self.w == 2 {
                // `take_sample` prepared the classifier on the old sample 0.
                self.classifier.prepare(&self.window);
            }
        }
        // Otherwise sample 1 has joined: too late to be sample 0, dropped.
    }

    /// When a probe's sample 0 joins the window: half a period in.
    fn sample0_due_ns(&self) -> u64 {
        self.probe_start_ns
            .saturating_add(self.cfg.sample_period_ns / 2)
    }

    /// Where the live prober's 1 Hz grid starts: the time given to `start`,
    /// then the start of the current (or last) probe, so that sample k of a
    /// window is read at second k of the probe (000 §3.2). A driver reads it
    /// after every step and fires its echo bursts at `origin + k·period`.
    pub fn sample_grid_origin_ns(&self) -> u64 {
        self.grid_origin_ns
    }

    /// Add a sample summarising the period ending at `now_ns` to the probe
    /// window, if it belongs there, and decide when the window is full.
    fn take_sample(&mut self, now_ns: u64, rtt_ms: f64) {
        if self.phase != Phase::Probe
            || now_ns
                < self
                    .probe_start_ns
                    .saturating_add(self.cfg.sample_period_ns / 2)
        {
            return; // steady path: nothing to do, nothing allocated.
        }
        self.window.push(rtt_ms);
        let n = self.window.len();
        if self.cfg.cycles > 1 {
            if n % self.w == 0 {
                self.window_done(now_ns);
            } else if n % self.w + 1 == self.w {
                // As for one window: the current window's first w − 1
                // samples, prepared a sample period ahead, so its per-class
                // distances cost one row per reference (latency).
                self.classifier.prepare(&self.window[n + 1 - self.w..]);
            }
            return;
        }
        if n >= self.w {
            self.decide(now_ns, None, false);
        } else {
            if self.check_prior(now_ns, n) || self.check_gate(now_ns, n) {
                return;
            }
            if let Some(p) = self.cfg.progressive {
                if n >= p.min_samples && (n - p.min_samples) % p.step == 0 {
                    self.check_prefix(now_ns, p);
                }
            }
            // One sample to go (and the probe did not just end early): let the
            // classifier do now, a sample period ahead, whatever does not
            // depend on the last sample (decision latency).
            if n + 1 == self.w && self.phase == Phase::Probe {
                self.classifier.prepare(&self.window);
            }
        }
    }

    /// Hand the policy one interval's measurements of the transfer
    /// ([`Policy::observe`]; a DPS policy learns CCA utilities from them,
    /// 002 §1.7 Monitoring). `now_ns` is the controller time of the call (a
    /// monotonic input like every other); the policy's error, if any, is
    /// returned. The OPS policies (stump, table) ignore feedback.
    pub fn handle_feedback(&mut self, now_ns: u64, feedback: &crate::dps::Feedback) -> Result<()> {
        self.check_time(now_ns)?;
        self.advance(now_ns);
        self.policy.observe(feedback)
    }

    /// Account bytes sent (e.g. per 1 s interval) to the current phase.
    pub fn handle_bytes(&mut self, now_ns: u64, bytes: u64) -> Result<()> {
        self.check_time(now_ns)?;
        self.advance(now_ns);
        match self.phase {
            Phase::Probe => self.stats.probe_bytes = self.stats.probe_bytes.saturating_add(bytes),
            Phase::Steady => {
                self.stats.steady_bytes = self.stats.steady_bytes.saturating_add(bytes)
            }
            _ => {}
        }
        Ok(())
    }

    /// Let time pass: runs pattern segment changes, probe deadlines and the
    /// end of the steady phase that are due at `now_ns`.
    pub fn handle_timeout(&mut self, now_ns: u64) -> Result<()> {
        self.check_time(now_ns)?;
        self.advance(now_ns);
        Ok(())
    }

    /// When `handle_timeout` should next be called, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Probe => {
                let mut t = match self.next_boundary_ns {
                    Some(b) => b.min(self.probe_deadline_ns),
                    None => self.probe_deadline_ns,
                };
                if self.held_rtt_ms.is_some() {
                    t = t.min(self.sample0_due_ns());
                }
                Some(t)
            }
            // A pending lead-in begins before the steady phase ends.
            Phase::Steady => self.lead_at_ns.or(self.steady_until_ns),
            Phase::Idle => self.first_probe_ns,
            _ => None,
        }
    }

    /// Next output, oldest first.
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// Current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Current OPS cycle (0-based).
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// The CCA the socket is (to be) set to.
    pub fn socket_cca(&self) -> CcaName {
        self.socket_cca
    }

    /// The base steady time Y after adaptation, before jitter.
    pub fn steady_ns(&self) -> u64 {
        self.y_ns
    }

    /// The window length w.
    pub fn window_len(&self) -> usize {
        self.w
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters with phase times accounted up to the last input.
    pub fn stats(&self) -> Stats {
        self.stats_at(self.last_now_ns)
    }

    /// Counters with the running phase accounted up to `now_ns`.
    pub fn stats_at(&self, now_ns: u64) -> Stats {
        let mut s = self.stats;
        let d = now_ns.saturating_sub(self.phase_since_ns);
        match self.phase {
            Phase::Probe => s.probe_ns += d,
            Phase::Steady => s.steady_ns += d,
            _ => {}
        }
        s
    }

    /// The classifier (e.g. to inspect a test double).
    pub fn classifier(&self) -> &C {
        &self.classifier
    }

    fn check_time(&mut self, now_ns: u64) -> Result<()> {
        if !self.started {
            return Err(Error::invalid(
                "OPS controller not started; call start(now_ns) first",
            ));
        }
        if now_ns < self.last_now_ns {
            return Err(Error::invalid(format!(
                "time went backwards: {now_ns} ns after {} ns; pass a monotonic clock",
                self.last_now_ns
            )));
        }
        self.last_now_ns = now_ns;
        Ok(())
    }

    fn emit_phase(&mut self, phase: Phase, at_ns: u64) {
        // Close the time accounting of the phase we leave.
        let d = at_ns.saturating_sub(self.phase_since_ns);
        match self.phase {
            Phase::Probe => self.stats.probe_ns += d,
            Phase::Steady => self.stats.steady_ns += d,
            _ => {}
        }
        self.phase = phase;
        self.phase_since_ns = at_ns;
        self.out.push_back(Output::Event(Event::Phase {
            phase,
            cycle: self.cycle,
            at_ns,
        }));
    }

    fn set_cca(&mut self, cca: CcaName) {
        if cca != self.socket_cca {
            self.socket_cca = cca;
            self.stats.cca_switches += 1;
            self.out.push_back(Output::Action(Action::SetCca(cca)));
        }
    }

    /// Run every scheduled transition due at or before `now_ns`, each at its
    /// scheduled time so that a late driver does not shift the schedule.
    fn advance(&mut self, now_ns: u64) {
        loop {
            match self.phase {
                Phase::Probe => {
                    let boundary = self
                        .next_boundary_ns
                        .filter(|&b| b <= self.probe_deadline_ns);
                    let due = self.sample0_due_ns();
                    match (self.held_rtt_ms, boundary) {
                        // The held sample 0 first if it is due before the
                        // next segment change (each input at its own time).
                        (Some(v), b) if due <= now_ns && b.is_none_or(|b| due <= b) => {
                            self.held_rtt_ms = None;
                            self.take_sample(due, v);
                        }
                        (_, Some(b)) if b <= now_ns => self.enter_segment(self.seg_abs + 1, b),
                        _ if self.probe_deadline_ns <= now_ns => {
                            self.probe_incomplete(self.probe_deadline_ns)
                        }
                        _ => return,
                    }
                }
                Phase::Steady => match (self.lead_at_ns, self.steady_until_ns) {
                    (Some(l), Some(u)) if l <= now_ns => {
                        if let Some(seg) = self.lead {
                            self.begin_lead_in(seg, u);
                        }
                    }
                    (_, Some(u)) if u <= now_ns => {
                        self.cycle += 1;
                        self.start_probe(u);
                    }
                    _ => return,
                },
                Phase::Idle => match self.first_probe_ns {
                    Some(t) if t <= now_ns => self.start_probe(t),
                    _ => return,
                },
                _ => return,
            }
        }
    }

    /// Run the lead-in segment until `until_ns` (the next probe's start):
    /// the same actions as that segment in a probe.
    fn begin_lead_in(&mut self, seg: Segment, until_ns: u64) {
        self.lead_at_ns = None;
        self.run_segment(seg.kind, until_ns);
    }

    /// The actions of a pattern segment (in a probe or as the lead-in):
    /// silence, or a full-speed burst with the segment's CCA.
    fn run_segment(&mut self, kind: SegmentKind, until_ns: u64) {
        match kind {
            SegmentKind::Silence => self
                .out
                .push_back(Output::Action(Action::Silence { until_ns })),
            SegmentKind::Burst(cca) => {
                self.set_cca(cca);
                self.out
                    .push_back(Output::Action(Action::SendFullSpeed { cca, until_ns }));
            }
        }
    }

    fn start_probe(&mut self, at_ns: u64) {
        if self.cycle > 0 {
            // The prior is for the transfer's first probe only.
            self.prior_class = None;
        }
        self.emit_phase(Phase::Probe, at_ns);
        self.first_probe_ns = None;
        self.lead_at_ns = None;
        self.held_rtt_ms = None;
        self.sample0_began_ns = None;
        self.grid_origin_ns = at_ns;
        self.window.clear();
        self.agree = None;
        self.gate_last = None;
        self.gate_streak = 0;
        self.cycle_sums.iter_mut().for_each(|s| *s = 0.0);
        self.steady_until_ns = None;
        self.probe_start_ns = at_ns;
        let slack = u64::from(self.cfg.grace_periods).saturating_mul(self.cfg.sample_period_ns);
        self.probe_deadline_ns = at_ns
            .saturating_add(self.probe_span_ns)
            .saturating_add(slack);
        match self.cfg.mode {
            ProbeMode::Passive => {
                self.next_boundary_ns = None;
                let cca = self.socket_cca;
                let until_ns = at_ns.saturating_add(self.probe_span_ns);
                self.out
                    .push_back(Output::Action(Action::SendFullSpeed { cca, until_ns }));
            }
            ProbeMode::Active(_) => self.enter_segment(0, at_ns),
        }
    }

    /// Start absolute segment `abs` (pattern segment `abs % len`) at `at_ns`.
    fn enter_segment(&mut self, abs: u64, at_ns: u64) {
        let ProbeMode::Active(pattern) = &self.cfg.mode else {
            return;
        };
        let segs = pattern.segments();
        let seg = segs[(abs % segs.len() as u64) as usize];
        let span_end = self.probe_start_ns.saturating_add(self.probe_span_ns);
        let natural_end = at_ns.saturating_add(seg.duration_ns);
        // The last segment of the window's span is held until the window is
        // full (see ProbeMode::Active).
        let (until_ns, next) = if natural_end >= span_end {
            (span_end, None)
        } else {
            (natural_end, Some(natural_end))
        };
        self.seg_abs = abs;
        self.next_boundary_ns = next;
        self.run_segment(seg.kind, until_ns);
    }

    fn probe_incomplete(&mut self, at_ns: u64) {
        self.stats.incomplete_probes += 1;
        let (samples, needed) = (self.window.len(), self.w * self.cfg.cycles);
        self.out.push_back(Output::Event(Event::ProbeIncomplete {
            samples,
            needed,
            at_ns,
        }));
        if self.cfg.steady_ns == 0 {
            // Y = 0 must still reach a decision: probe again.
            self.cycle += 1;
            self.start_probe(at_ns);
        } else {
            let cca = self.decided_cca;
            let y_ns = self.draw_steady_ns();
            self.enter_steady(cca, at_ns, y_ns);
        }
    }

    /// The prior rule ([`PriorProbe`]) at sample `n` of the first probe;
    /// true when it ended the probe.
    fn check_prior(&mut self, now_ns: u64, n: usize) -> bool {
        let (Some(p), Some(prior)) = (self.cfg.prior, self.prior_class) else {
            return false;
        };
        if n < p.min_samples || (n - p.min_samples) % p.step != 0 {
            return false;
        }
        // The mix-free verdict: a check that does not end the probe allocates nothing.
        match self.classifier.prefix_verdict(&self.window) {
            Some(Ok(v))
                if v.confidence >= p.min_confidence
                    && v.class_index < self.classifier.classes().len() =>
            {
                self.prior_class = None;
                if v.class_index == prior {
                    self.stats.prior_exits += 1;
                    let c = self.classified(v);
                    self.decide(now_ns, Some(c), true);
                    true
                } else {
                    // The path changed since the cached decision: probe as
                    // without a prior.
                    self.stats.prior_overruled += 1;
                    false
                }
            }
            _ => false,
        }
    }

    /// The probe gate ([`ProbeGate`]) at sample `n`; true when it ended the
    /// probe. A check that does not fire allocates nothing: the prefix is
    /// classified without its mix ([`Classifier::prefix_verdict`]) and the
    /// decision is read from the class's counts.
    fn check_gate(&mut self, now_ns: u64, n: usize) -> bool {
        let Some(gate) = &self.cfg.gate else {
            return false;
        };
        if !gate.is_check(n) {
            return false;
        }
        let v = match self.classifier.prefix_verdict(&self.window) {
            Some(Ok(v)) if v.class_index < self.classifier.classes().len() => v,
            // No prefix model or a failed prefix: the full window decides.
            _ => return false,
        };
        let bbr = self.decision_bbr(v.class_index);
        let same = self.gate_last == Some(bbr);
        self.gate_streak = if same { self.gate_streak + 1 } else { 1 };
        self.gate_last = Some(bbr);
        if !gate.fires(n, v.confidence, same, self.gate_streak) {
            return false;
        }
        self.stats.gate_exits += 1;
        let c = self.classified(v);
        self.decide(now_ns, Some(c), true);
        true
    }

    /// A verdict with its class's mix (`class_index` checked by the caller).
    fn classified(&self, v: Verdict) -> Classified {
        Classified {
            mix: self.classifier.classes()[v.class_index].clone(),
            class_index: v.class_index,
            confidence: v.confidence,
            distance: v.distance,
        }
    }

    /// Whether the stump would see BBR in the background of `class_index`
    /// (the gate's notion of a decision, the label it was trained on): with
    /// passive probing and a class that counts the transfer's own flow, one
    /// flow of the socket's CCA is not background ([`Classifier::counts_own_flow`]).
    fn decision_bbr(&self, class_index: usize) -> bool {
        let own = self.cfg.mode == ProbeMode::Passive
            && self.classifier.counts_own_flow()
            && self.socket_cca == CcaName::BBR;
        self.class_bbr.get(class_index).copied().unwrap_or(0) > u32::from(own)
    }

    fn check_prefix(&mut self, now_ns: u64, p: Progressive) {
        match self.classifier.classify_prefix(&self.window) {
            Some(Ok(c)) if c.confidence >= p.min_confidence => {
                let count = match self.agree {
                    Some((class, k)) if class == c.class_index => k + 1,
                    _ => 1,
                };
                self.agree = Some((c.class_index, count));
                if count >= p.agree {
                    self.decide(now_ns, Some(c), true);
                }
            }
            // Unsure, unsupported or failed prefix: wait for more samples;
            // the full window is always classified in the end.
            _ => self.agree = None,
        }
    }

    /// Several cycles per decision: window `index` of the probe is complete.
    /// Add its per-class distances to the sums, report it, and decide after
    /// the last window (or earlier when progressive probing is confident).
    fn window_done(&mut self, now_ns: u64) {
        let n = self.window.len();
        let index = n / self.w - 1;
        let win = &self.window[n - self.w..];
        let res = self.classifier.class_distances(win, &mut self.cycle_dist);
        let failed = match res {
            Some(Ok(())) if self.cycle_dist.iter().any(|d| d.is_nan() || *d < 0.0) => {
                Some("the classifier reported a NaN or negative class distance".to_string())
            }
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e.to_string()),
            None => Some("the classifier does not report per-class distances".to_string()),
        };
        if let Some(m) = failed {
            self.emit_phase(Phase::Classify, now_ns);
            return self.decision_failed(
                format!("classification of window {index} failed: {m}"),
                now_ns,
            );
        }
        for (s, d) in self.cycle_sums.iter_mut().zip(&self.cycle_dist) {
            *s += d;
        }
        let (class_index, distance, _) = min_two(&self.cycle_dist);
        let (leader, best, second) = min_two(&self.cycle_sums);
        let margin = sum_margin(best, second);
        self.out.push_back(Output::Event(Event::CycleClassified {
            index,
            cycles: self.cfg.cycles,
            class_index,
            distance,
            leader,
            margin,
            at_ns: now_ns,
        }));
        let verdict = |me: &Self| Classified {
            mix: me.classifier.classes()[leader].clone(),
            class_index: leader,
            confidence: margin,
            distance: best,
        };
        if index + 1 >= self.cfg.cycles {
            let c = verdict(self);
            return self.decide(now_ns, Some(c), false);
        }
        let Some(p) = self.cfg.progressive else {
            return;
        };
        if n < p.min_samples || margin < p.min_confidence {
            self.agree = None;
            return;
        }
        let count = match self.agree {
            Some((class, k)) if class == leader => k + 1,
            _ => 1,
        };
        self.agree = Some((leader, count));
        if count >= p.agree {
            let c = verdict(self);
            self.decide(now_ns, Some(c), true);
        }
    }

    /// Steps 2–4 (000 §1.2): classify (unless a verdict is given: a
    /// confident prefix, or the min-sum over several windows), select, adapt
    /// Y, start the steady phase. `early`: the probe ended before its full span.
    fn decide(&mut self, now_ns: u64, verdict: Option<Classified>, early: bool) {
        self.prior_class = None;
        if early {
            self.stats.early_exits += 1;
        }
        self.emit_phase(Phase::Classify, now_ns);
        let verdict = match verdict {
            Some(c) => Ok(c),
            None => self.classifier.classify(&self.window),
        };
        let classified = match verdict {
            Ok(c) => c,
            Err(e) => return self.decision_failed(format!("classification failed: {e}"), now_ns),
        };
        let samples = self.window.len();
        let class_index = classified.class_index;
        let choice = match self.background_of(&classified) {
            Some(background) => self.policy.select(&background),
            None => self.policy.select(&classified),
        };
        self.out.push_back(Output::Event(Event::Classified {
            classified,
            samples,
            early,
            at_ns: now_ns,
        }));
        self.emit_phase(Phase::Select, now_ns);
        let cca = match choice {
            Ok(c) => c,
            Err(e) => return self.decision_failed(format!("policy failed: {e}"), now_ns),
        };
        self.stats.decisions += 1;
        self.decided_cca = cca;
        self.adapt_y(class_index, cca);
        let y_ns = self.draw_steady_ns();
        let steady_ns = (self.cfg.steady_ns > 0).then_some(y_ns);
        self.out.push_back(Output::Event(Event::Selected {
            cca,
            steady_ns,
            at_ns: now_ns,
        }));
        self.enter_steady(cca, now_ns, y_ns);
    }

    /// What the policy is asked about a passive window whose class counts
    /// this transfer's own flow ([`Classifier::counts_own_flow`]): the class
    /// minus one flow of the CCA the socket sent with while the window
    /// filled. `None`: ask about the class as it is (active probing, whose
    /// windows are shaped by the pattern; a classifier whose classes are the
    /// background; a class without a flow of the socket's CCA).
    fn background_of(&self, c: &Classified) -> Option<Classified> {
        if self.cfg.mode != ProbeMode::Passive || !self.classifier.counts_own_flow() {
            return None;
        }
        let mix = c.mix.without_one(self.socket_cca.as_str())?;
        Some(Classified { mix, ..c.clone() })
    }

    fn decision_failed(&mut self, message: String, at_ns: u64) {
        self.stats.failed_decisions += 1;
        self.out
            .push_back(Output::Event(Event::DecisionFailed { message, at_ns }));
        if self.cfg.steady_ns == 0 {
            self.cycle += 1;
            self.start_probe(at_ns);
        } else {
            let cca = self.decided_cca;
            let y_ns = self.draw_steady_ns();
            self.enter_steady(cca, at_ns, y_ns);
        }
    }

    fn adapt_y(&mut self, class_index: usize, cca: CcaName) {
        let Some(a) = self.cfg.adaptive else { return };
        if let Some((last_class, last_cca)) = self.last_key {
            let same = match a.key {
                StabilityKey::Class => last_class == class_index,
                StabilityKey::Decision => last_cca == cca,
            };
            let y = if same {
                self.y_ns as f64 * a.grow
            } else {
                self.y_ns as f64 * a.shrink
            };
            // f64 → u64 saturates; the clamp enforces the documented bounds.
            self.y_ns = (y as u64).clamp(a.min_ns, a.max_ns);
        }
        self.last_key = Some((class_index, cca));
    }

    /// The steady time of the next steady phase: Y (adapted), jittered.
    fn draw_steady_ns(&mut self) -> u64 {
        let j = self.cfg.steady_jitter;
        if j == 0.0 {
            return self.y_ns;
        }
        // splitmix64 (Steele, Lea, Flood 2014); u uniform in [-1, 1).
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
        ((self.y_ns as f64 * (1.0 + j * u)) as u64).max(1)
    }

    fn enter_steady(&mut self, cca: CcaName, at_ns: u64, y_ns: u64) {
        self.emit_phase(Phase::Steady, at_ns);
        self.next_boundary_ns = None;
        self.set_cca(cca);
        let until_ns = (self.cfg.steady_ns > 0).then(|| at_ns.saturating_add(y_ns));
        self.steady_until_ns = until_ns;
        self.held_rtt_ms = None;
        // The lead-in takes the steady phase's last segment length (all of a
        // shorter steady phase).
        self.lead_at_ns = match (self.lead, until_ns) {
            (Some(seg), Some(u)) => Some(u.saturating_sub(seg.duration_ns).max(at_ns)),
            _ => None,
        };
        self.out
            .push_back(Output::Action(Action::Steady { cca, until_ns }));
        if let (Some(seg), Some(u), Some(at)) = (self.lead, until_ns, self.lead_at_ns) {
            if at <= at_ns {
                // No room before the lead-in: it starts with the phase.
                self.begin_lead_in(seg, u);
            }
        }
    }
}

/// (index of the smallest value — the first on ties, like `numpy.argmin` —,
/// that value, the smallest among the others). Empty: (0, ∞, ∞).
fn min_two(v: &[f64]) -> (usize, f64, f64) {
    let mut best = (0, f64::INFINITY);
    for (i, &x) in v.iter().enumerate() {
        if x < best.1 {
            best = (i, x);
        }
    }
    let second = v
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != best.0)
        .fold(f64::INFINITY, |m, (_, &x)| m.min(x));
    (best.0, best.1, second)
}

/// Margin of a min-sum decision, `1 − best / runner-up` in [0, 1] (the 1-NN
/// margin of `Model::classify_with_margin`, on sums): 1 when only one class
/// is finite, 0 when the runner-up ties or both are 0.
fn sum_margin(best: f64, second: f64) -> f64 {
    if !best.is_finite() {
        0.0
    } else if !second.is_finite() {
        1.0
    } else if second > 0.0 {
        (1.0 - best / second).clamp(0.0, 1.0)
    } else {
        0.0
    }
}
