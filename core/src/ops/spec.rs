//! [`ControllerSpec`]: the one description of an OPS controller that every
//! front end (CLI flags, Python keyword arguments, Node option objects, the C
//! config struct) converts into. Its defaults and checks live here and only
//! here, so the four front ends cannot drift apart.
//!
//! A spec is plain data (serde, unknown fields rejected): times in seconds
//! with `_s` in the name, the policy by name, the model by path or given
//! separately. [`ControllerSpec::build`] turns it, a model and (for a
//! callback policy) the front end's callback into a [`Controller`].

use super::classifier::Classifier;
use super::controller::{
    AdaptiveSteady, Config, Controller, PriorProbe, Progressive, StabilityKey,
};
use super::gate::ProbeGate;
use super::knn_classifier::KnnClassifier;
use super::policy::{Policy, Stump, TablePolicy};
use super::two_stage_classifier::TwoStageClassifier;
use super::Classified;
use crate::error::{Error, Result};
use crate::mix::Mix;
use crate::model::{KnnModelFile, ProbingMode};
use crate::probe::{CcaName, Pattern, SegmentKind};
use serde::{Deserialize, Deserializer, Serialize};
use std::path::PathBuf;

const NS_PER_S: f64 = 1e9;
/// Longest time a spec accepts, s (about 570 years: far beyond any transfer,
/// well inside u64 ns).
const MAX_S: f64 = 1.8e10;

/// How the controller probes (000 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModeSpec {
    /// Keep sending while the RTT window fills; Y defaults to 60 s (OPS-60,
    /// 000 Table 6.2).
    #[default]
    Passive,
    /// Follow `pattern` (default S5-C5-S5-B5, 000 §5.6); Y defaults to 100 s.
    Active,
}

/// The decision step (000 §4.1). In JSON: `"stump"`, `"callback"` or a table
/// such as `"B1-C1=bbr, *=cubic"`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(into = "String")]
pub enum PolicySpec {
    /// BBR present → bbr, otherwise cubic (000 §4.1).
    #[default]
    Stump,
    /// `label=cca` entries, `*=cca` as the fallback ([`TablePolicy::parse`]).
    Table(String),
    /// A function of the front end (Python callable, JS function, C function
    /// pointer), passed to [`ControllerSpec::build`].
    Callback,
}

impl From<String> for PolicySpec {
    fn from(s: String) -> Self {
        match s.trim() {
            "stump" => PolicySpec::Stump,
            "callback" => PolicySpec::Callback,
            _ => PolicySpec::Table(s),
        }
    }
}

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PolicySpec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a policy: \"stump\", \"callback\" or a table spec such as \"B1-C1=bbr, *=cubic\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<PolicySpec, E> {
                Ok(PolicySpec::from(s.to_string()))
            }
            // null (Python None) is the default policy, the stump.
            fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<PolicySpec, E> {
                Ok(PolicySpec::Stump)
            }
            fn visit_none<E: serde::de::Error>(self) -> std::result::Result<PolicySpec, E> {
                Ok(PolicySpec::Stump)
            }
        }
        d.deserialize_any(V)
    }
}

impl From<PolicySpec> for String {
    fn from(p: PolicySpec) -> String {
        match p {
            PolicySpec::Stump => "stump".into(),
            PolicySpec::Callback => "callback".into(),
            PolicySpec::Table(t) => t,
        }
    }
}

/// Adaptive steady time (000 §6 future work; [`AdaptiveSteady`]). Every field
/// is optional: bounds default to [Y/2, 8·Y], factors to ×2 and ×0.5.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveSpec {
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
    pub grow: Option<f64>,
    pub shrink: Option<f64>,
    /// `"decision"` (default) or `"class"`.
    pub key: StabilityKeySpec,
}

/// Which change shrinks an adaptive Y ([`StabilityKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StabilityKeySpec {
    #[default]
    Decision,
    Class,
}

/// Progressive probing (000 §6 future work; [`Progressive`]): end the probe
/// once `agree` consecutive checks classify a prefix with `min_confidence`,
/// checking at `min_samples`, then every `step` samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProgressiveSpec {
    pub min_samples: usize,
    pub step: usize,
    pub min_confidence: f64,
    pub agree: usize,
}

impl Default for ProgressiveSpec {
    fn default() -> Self {
        let p = Progressive::default();
        Self {
            min_samples: p.min_samples,
            step: p.step,
            min_confidence: p.min_confidence,
            agree: p.agree,
        }
    }
}

/// A cached class as a prior for the first probe ([`PriorProbe`]): the prefix
/// checks at `min_samples`, then every `step` samples, end the probe when the
/// prefix agrees with the prior at a margin >= `min_confidence`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorSpec {
    pub min_samples: usize,
    pub step: usize,
    pub min_confidence: f64,
}

impl Default for PriorSpec {
    fn default() -> Self {
        let p = PriorProbe::default();
        Self {
            min_samples: p.min_samples,
            step: p.step,
            min_confidence: p.min_confidence,
        }
    }
}

/// Everything that configures an OPS controller. `ControllerSpec::default()`
/// is passive probing with the thesis's defaults; see each field.
///
/// ```
/// use opsel::ops::ControllerSpec;
/// let spec = ControllerSpec::from_json(r#"{"mode": "active", "steady_s": 20, "adaptive": true}"#)?;
/// assert_eq!(spec.config()?.steady_ns, 20_000_000_000);
/// assert!(ControllerSpec::from_json(r#"{"steady": 20}"#).is_err()); // unknown field
/// # Ok::<(), opsel::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControllerSpec {
    /// `"passive"` (default) or `"active"`.
    pub mode: ModeSpec,
    /// Active probing pattern (default `"S5-C5-S5-B5"`, 000 §5.6); an error
    /// with passive probing.
    pub pattern: Option<String>,
    /// Steady time Y, s; 0 = probe once, then steady to the end (iPerfOPS
    /// `-S 0`, 000 §5.3). Default 60 (passive) or 100 (active).
    pub steady_s: Option<f64>,
    /// RTT sample period, s (000 §3.2: 1).
    pub sample_period_s: f64,
    /// CCA of the socket before the first decision (iPerfOPS: cubic).
    pub initial_cca: String,
    /// Adaptive Y: `true` for the defaults, or an object of overrides.
    #[serde(deserialize_with = "toggle")]
    pub adaptive: Option<AdaptiveSpec>,
    /// Progressive probing: `true` for the defaults, or an object of overrides.
    #[serde(deserialize_with = "toggle")]
    pub progressive: Option<ProgressiveSpec>,
    /// How a prior class (a decision cache's, set with
    /// `Controller::set_prior_class`) may shorten the first probe: `true`
    /// for the defaults, or an object of overrides. Off by default.
    #[serde(deserialize_with = "toggle")]
    pub prior: Option<PriorSpec>,
    /// A probe gate file (`models/passive/gate.json`, [`ProbeGate`], 004 §8
    /// B.1): each probe ends at the first of the gate's check lengths whose
    /// prefix decision the gate judges safe, else runs the full window.
    /// Off by default. Excludes `progressive`; needs `cycles` = 1.
    pub gate: Option<PathBuf>,
    /// Override of the gate file's threshold, a probability in [0, 1]
    /// (higher: longer probes, more right decisions).
    pub gate_threshold: Option<f64>,
    /// Prefix lengths that get a prefix model (progressive probing with one
    /// window per decision). Default: every `step` from `min_samples` below w,
    /// i.e. 5, 10, 15 for w = 20 (the cut points of 000 §6).
    pub prefix_lens: Option<Vec<usize>>,
    /// Windows per decision, 1..=100 (1 = the thesis; n > 1 = min-sum over n
    /// back-to-back windows, [`Config::cycles`]).
    pub cycles: usize,
    /// Margin-gated probing: with `cycles` = N >= 2, decide after the first
    /// window whose running min-sum margin reaches this value, else after N
    /// windows (docs/results/ops.md §1c). Excludes `progressive`, which it is
    /// a special case of.
    pub gate_margin: Option<f64>,
    /// Extra sample periods a probe may wait for missing samples (5).
    pub grace_periods: u32,
    /// Randomise each steady time by ± this fraction, [0, 0.5] (0 = off).
    pub steady_jitter: f64,
    /// Seed of the jitter PRNG.
    pub seed: u64,
    /// `"stump"` (default), `"callback"` or a table spec.
    pub policy: PolicySpec,
    /// Model file; `None` when the front end passes a loaded model.
    pub model: Option<PathBuf>,
    /// Reject a model trained for another probing mode or pattern (default
    /// true): its windows would not look like the training windows.
    pub check_model: bool,
}

impl Default for ControllerSpec {
    fn default() -> Self {
        Self {
            mode: ModeSpec::Passive,
            pattern: None,
            steady_s: None,
            sample_period_s: 1.0,
            initial_cca: "cubic".into(),
            adaptive: None,
            progressive: None,
            prior: None,
            gate: None,
            gate_threshold: None,
            prefix_lens: None,
            cycles: 1,
            gate_margin: None,
            grace_periods: 5,
            steady_jitter: 0.0,
            seed: 0,
            policy: PolicySpec::Stump,
            model: None,
            check_model: true,
        }
    }
}

/// `false`/`null` → off, `true` → the defaults, an object → those fields.
fn toggle<'de, D, T>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    // An untagged enum would hide T's own message (which field is wrong), so
    // take a JSON value and decide by its type.
    let v = serde_json::Value::deserialize(d)?;
    match v {
        serde_json::Value::Null | serde_json::Value::Bool(false) => Ok(None),
        serde_json::Value::Bool(true) => Ok(Some(T::default())),
        serde_json::Value::Object(_) => T::deserialize(v)
            .map(Some)
            .map_err(serde::de::Error::custom),
        other => Err(serde::de::Error::custom(format!(
            "expected true, false or an object of options, got {other}"
        ))),
    }
}

fn secs_to_ns(s: f64, what: &str) -> Result<u64> {
    if !(s.is_finite() && (0.0..MAX_S).contains(&s)) {
        return Err(Error::invalid(format!(
            "{what} = {s} s must be a finite number of seconds >= 0"
        )));
    }
    Ok((s * NS_PER_S).round() as u64)
}

impl ControllerSpec {
    /// Parse a JSON object; unknown fields and wrong types are errors that
    /// name the field.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::invalid(format!("controller spec is not JSON: {e}")))?;
        Self::from_value(v)
    }

    /// From a JSON value (what the bindings build from kwargs and objects).
    pub fn from_value(v: serde_json::Value) -> Result<Self> {
        serde_json::from_value(v.clone()).map_err(|e| {
            // serde_json does not say which field failed; find it by
            // reading the fields one at a time.
            let field = v.as_object().and_then(|m| {
                m.iter().find_map(|(k, x)| {
                    let one =
                        serde_json::Value::Object([(k.clone(), x.clone())].into_iter().collect());
                    serde_json::from_value::<Self>(one)
                        .is_err()
                        .then(|| k.clone())
                })
            });
            match field {
                Some(k) => Error::invalid(format!("controller spec field {k:?}: {e}")),
                None => Error::invalid(format!("controller spec: {e}")),
            }
        })
    }

    /// The active pattern (default S5-C5-S5-B5), `None` when passive.
    pub fn pattern(&self) -> Result<Option<Pattern>> {
        match (self.mode, &self.pattern) {
            (ModeSpec::Passive, None) => Ok(None),
            (ModeSpec::Passive, Some(p)) => Err(Error::invalid(format!(
                "pattern {p:?} is only used with mode \"active\"; set mode to \"active\" or drop the pattern"
            ))),
            (ModeSpec::Active, p) => {
                Pattern::parse(p.as_deref().unwrap_or(Pattern::S5_C5_S5_B5)).map(Some)
            }
        }
    }

    /// The controller configuration, checked (the same checks as
    /// [`Controller::new`] makes, plus this spec's own).
    pub fn config(&self) -> Result<Config> {
        let mut cfg = match self.pattern()? {
            Some(p) => Config::active(p),
            None => Config::passive(),
        };
        if let Some(s) = self.steady_s {
            cfg.steady_ns = secs_to_ns(s, "steady_s")?;
        }
        cfg.sample_period_ns = secs_to_ns(self.sample_period_s, "sample_period_s")?;
        cfg.initial_cca = CcaName::new(&self.initial_cca)?;
        cfg.grace_periods = self.grace_periods;
        cfg.steady_jitter = self.steady_jitter;
        cfg.seed = self.seed;
        cfg.cycles = self.cycles;
        if let Some(a) = &self.adaptive {
            let mut s = AdaptiveSteady::around(cfg.steady_ns);
            if let Some(v) = a.min_s {
                s.min_ns = secs_to_ns(v, "adaptive min_s")?;
            }
            if let Some(v) = a.max_s {
                s.max_ns = secs_to_ns(v, "adaptive max_s")?;
            }
            s.grow = a.grow.unwrap_or(s.grow);
            s.shrink = a.shrink.unwrap_or(s.shrink);
            s.key = match a.key {
                StabilityKeySpec::Decision => StabilityKey::Decision,
                StabilityKeySpec::Class => StabilityKey::Class,
            };
            cfg.adaptive = Some(s);
        }
        if let Some(p) = &self.progressive {
            cfg.progressive = Some(Progressive {
                min_samples: p.min_samples,
                step: p.step,
                min_confidence: p.min_confidence,
                agree: p.agree,
            });
        }
        if let Some(p) = &self.prior {
            cfg.prior = Some(PriorProbe {
                min_samples: p.min_samples,
                step: p.step,
                min_confidence: p.min_confidence,
            });
        }
        cfg.gate = self.probe_gate()?;
        if self.prefix_lens.is_some() && self.progressive.is_none() && self.prior.is_none() {
            return Err(Error::invalid(
                "prefix_lens needs progressive probing or a prior; set progressive to true or drop prefix_lens",
            ));
        }
        if let Some(tau) = self.gate_margin {
            if self.progressive.is_some() {
                return Err(Error::invalid(
                    "gate_margin and progressive both end probes early; use one",
                ));
            }
            if self.cycles < 2 {
                return Err(Error::invalid(format!(
                    "gate_margin {tau} needs cycles >= 2 (the most windows a probe may take, e.g. 3); cycles is {}",
                    self.cycles
                )));
            }
            if !(0.0..=1.0).contains(&tau) {
                return Err(Error::invalid(format!(
                    "gate_margin {tau} must be a margin in [0, 1] (e.g. 0.1)"
                )));
            }
            // With cycles > 1 the controller checks progressive probing only
            // at window boundaries, against the running min-sum margin:
            // exactly the gate (ops::Progressive, several cycles).
            cfg.progressive = Some(Progressive {
                min_samples: 1,
                step: 1,
                min_confidence: tau,
                agree: 1,
            });
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// The probe gate named by `gate` (loaded and checked), with
    /// `gate_threshold` applied.
    pub fn probe_gate(&self) -> Result<Option<ProbeGate>> {
        match (&self.gate, self.gate_threshold) {
            (None, None) => Ok(None),
            (None, Some(t)) => Err(Error::invalid(format!(
                "gate_threshold {t} needs a gate file; set gate to a probe-gate path (e.g. models/passive/gate.json)"
            ))),
            (Some(p), t) => {
                let g = ProbeGate::load(p)?;
                Ok(Some(match t {
                    Some(t) => g.with_threshold(t)?,
                    None => g,
                }))
            }
        }
    }

    /// Load the model named by `model`.
    pub fn load_model(&self) -> Result<KnnModelFile> {
        let path = self.model.as_ref().ok_or_else(|| {
            Error::invalid("the controller spec names no model; set model to a model-file path")
        })?;
        KnnModelFile::load(path)
    }

    /// Check that `file` was trained for this spec's probing (000 §10 gap 2:
    /// a window classifies well only against references probed the same
    /// way). A no-op when `check_model` is false, and for a model that
    /// declares no metadata at all (built in memory, e.g. `Model.fit`).
    pub fn check_model(&self, file: &KnnModelFile) -> Result<()> {
        if !self.check_model || file.meta == crate::model::Metadata::default() {
            return Ok(());
        }
        let probing = &file.meta.probing;
        // The windows must be sampled as the references were: a model trained
        // on samples every 200 ms compares 40 s as 200 samples, and fed one
        // sample a second it would compare 200 s of another shape.
        let period_ms = self.sample_period_s * 1e3;
        if (period_ms - probing.sample_interval_ms).abs() > 1e-6 * probing.sample_interval_ms {
            return Err(Error::invalid(format!(
                "the model was trained on RTT samples every {} ms but the spec samples every {} ms; set sample_period_s = {} (or check_model = false)",
                probing.sample_interval_ms,
                period_ms,
                probing.sample_interval_ms / 1e3
            )));
        }
        let want = self.pattern()?;
        match (&want, probing.mode) {
            (Some(p), ProbingMode::Active) => {
                if let Some(mp) = &probing.pattern {
                    let mp = Pattern::parse(mp)?;
                    if &mp != p {
                        return Err(Error::invalid(format!(
                            "the model was trained with pattern {mp} but the spec's pattern is {p}; use the same pattern or a matching model (or check_model = false)"
                        )));
                    }
                }
                Ok(())
            }
            (None, ProbingMode::Passive) => Ok(()),
            (p, m) => Err(Error::invalid(format!(
                "the model is for {} probing but the spec asks for {}; pass a matching model (or check_model = false)",
                match m {
                    ProbingMode::Active => "active",
                    ProbingMode::Passive => "passive",
                },
                p.as_ref()
                    .map_or("passive".into(), |p| format!("active {p}"))
            ))),
        }
    }

    /// The classifier for `file`: its DTW K-NN model, or the two-stage model
    /// when the file has a second stage (`stage2`; a two-stage file is never
    /// classified by its first stage alone). With progressive probing (one
    /// window per decision) a prefix ensemble at `prefix_lens`.
    /// With a prior, the prior's check points get prefix models too.
    /// With a probe gate, the gate's check lengths get prefix models too.
    pub fn classifier(&self, file: &KnnModelFile) -> Result<Box<dyn Classifier + Send>> {
        let lens = self.classifier_prefix_lens(file.model.window())?;
        match (file.stage2, lens) {
            (None, None) => Ok(Box::new(KnnClassifier::new(file.model.clone())?)),
            (None, Some(l)) => Ok(Box::new(KnnClassifier::progressive(
                file.model.clone(),
                &l,
            )?)),
            (Some(s), lens) => {
                if self.cycles != 1 {
                    return Err(Error::invalid(format!(
                        "cycles = {} sums per-class distances over windows, which a two-stage model (stage2 {}) does not have; use cycles = 1",
                        self.cycles,
                        s.normalization.name()
                    )));
                }
                let m = crate::knn::TwoStage::new(&file.model, s)?;
                Ok(match lens {
                    None => Box::new(TwoStageClassifier::new(m)?),
                    Some(l) => Box::new(TwoStageClassifier::progressive(m, &l)?),
                })
            }
        }
    }

    /// The prefix lengths the classifier needs models for, or `None` for a
    /// plain classifier (several cycles, or no progressive probing, prior or
    /// gate).
    fn classifier_prefix_lens(&self, w: usize) -> Result<Option<Vec<usize>>> {
        let gate = self.probe_gate()?;
        if self.cycles != 1
            || (self.progressive.is_none() && self.prior.is_none() && gate.is_none())
        {
            return Ok(None);
        }
        let mut lens = match (&self.prefix_lens, &self.progressive) {
            (Some(l), _) => l.clone(),
            (None, Some(p)) => default_prefix_lens(p, w),
            (None, None) => Vec::new(),
        };
        if let (None, Some(p)) = (&self.prefix_lens, &self.prior) {
            let as_progressive = ProgressiveSpec {
                min_samples: p.min_samples,
                step: p.step,
                ..ProgressiveSpec::default()
            };
            lens.extend(default_prefix_lens(&as_progressive, w));
        }
        if let Some(g) = &gate {
            lens.extend(g.checks().iter().copied().filter(|&n| n < w));
        }
        lens.sort_unstable();
        lens.dedup();
        Ok(Some(lens))
    }

    /// The policy, with `callback` for [`PolicySpec::Callback`].
    pub fn policy<F: Policy>(&self, callback: Option<F>) -> Result<AnyPolicy<F>> {
        match (&self.policy, callback) {
            (PolicySpec::Stump, None) => Ok(AnyPolicy::Stump(Stump::default())),
            (PolicySpec::Table(t), None) => Ok(AnyPolicy::Table(TablePolicy::parse(t)?)),
            (PolicySpec::Callback, Some(f)) => Ok(AnyPolicy::Callback(f)),
            (PolicySpec::Callback, None) => Err(Error::invalid(
                "policy \"callback\" needs a function; pass one as the policy",
            )),
            (p, Some(_)) => Err(Error::invalid(format!(
                "a policy function was given but the spec's policy is {:?}; set policy to \"callback\"",
                String::from(p.clone())
            ))),
        }
    }

    /// Check everything, then build the controller over `file` (checked with
    /// [`check_model`](Self::check_model)).
    pub fn build<F: Policy>(
        &self,
        file: &KnnModelFile,
        callback: Option<F>,
    ) -> Result<Controller<Box<dyn Classifier + Send>, AnyPolicy<F>>> {
        let policy = self.policy(callback)?;
        self.build_with_policy(file, policy)
    }

    /// As [`build`](Self::build) with a policy object of the front end's
    /// instead of `policy` (the C API, whose policies are handles of their own).
    pub fn build_with_policy<P: Policy>(
        &self,
        file: &KnnModelFile,
        policy: P,
    ) -> Result<Controller<Box<dyn Classifier + Send>, P>> {
        let cfg = self.config()?;
        self.check_model(file)?;
        let classifier = self.classifier(file)?;
        Controller::new(cfg, classifier, policy)
    }

    /// Every CCA this spec can put on the socket by itself: the initial CCA,
    /// the pattern's bursts and the stump's or table's answers (a callback's
    /// answers are known only when it runs).
    pub fn ccas(&self) -> Result<Vec<CcaName>> {
        let mut v = vec![CcaName::new(&self.initial_cca)?];
        if let Some(p) = self.pattern()? {
            v.extend(p.segments().iter().filter_map(|s| match s.kind {
                SegmentKind::Burst(c) => Some(c),
                SegmentKind::Silence => None,
            }));
        }
        match &self.policy {
            PolicySpec::Stump => {
                let s = Stump::default();
                v.extend([s.bbr_present, s.otherwise]);
            }
            PolicySpec::Table(t) => v.extend(TablePolicy::parse(t)?.ccas()),
            PolicySpec::Callback => {}
        }
        // By name, so the list reads the same in every front end.
        v.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        v.dedup();
        Ok(v)
    }
}

/// Prefix lengths of progressive probing when none are given: every `step`
/// from `min_samples` below w (5, 10, 15 for w = 20 and the defaults; 000 §6).
pub fn default_prefix_lens(p: &ProgressiveSpec, w: usize) -> Vec<usize> {
    (p.min_samples.max(1)..w).step_by(p.step.max(1)).collect()
}

/// The callback type of a front end without callbacks (the CLI):
/// `spec.build::<NoCallback>(&model, None)`.
#[derive(Debug, Clone, Copy)]
pub enum NoCallback {}

impl Policy for NoCallback {
    fn select(&mut self, _: &Classified) -> Result<CcaName> {
        match *self {}
    }
}

/// The policy a spec builds: a built-in one or the front end's callback.
#[derive(Debug, Clone)]
pub enum AnyPolicy<F> {
    Stump(Stump),
    Table(TablePolicy),
    Callback(F),
}

impl<F: Policy> Policy for AnyPolicy<F> {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        match self {
            AnyPolicy::Stump(s) => s.select(c),
            AnyPolicy::Table(t) => t.select(c),
            AnyPolicy::Callback(f) => f.select(c),
        }
    }
    fn check_classes(&self, classes: &[Mix]) -> Result<()> {
        match self {
            AnyPolicy::Stump(s) => s.check_classes(classes),
            AnyPolicy::Table(t) => t.check_classes(classes),
            AnyPolicy::Callback(f) => f.check_classes(classes),
        }
    }
    fn observe(&mut self, feedback: &crate::dps::Feedback) -> Result<()> {
        match self {
            AnyPolicy::Stump(s) => s.observe(feedback),
            AnyPolicy::Table(t) => t.observe(feedback),
            AnyPolicy::Callback(f) => f.observe(feedback),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_thesis_values() {
        let c = ControllerSpec::default().config().unwrap();
        assert_eq!(c, Config::passive());
        let a = ControllerSpec {
            mode: ModeSpec::Active,
            ..Default::default()
        };
        let c = a.config().unwrap();
        assert_eq!(c.steady_ns, 100_000_000_000);
        assert_eq!(a.pattern().unwrap().unwrap().to_string(), "S5-C5-S5-B5");
    }

    #[test]
    fn json_flags_and_objects() {
        let s = ControllerSpec::from_json(
            r#"{"mode":"active","steady_s":20,"adaptive":{"min_s":10,"key":"class"},"progressive":true,"policy":"B1-C0=bbr, *=cubic"}"#,
        )
        .unwrap();
        let c = s.config().unwrap();
        let a = c.adaptive.unwrap();
        assert_eq!((a.min_ns, a.max_ns), (10_000_000_000, 160_000_000_000));
        assert_eq!(a.key, StabilityKey::Class);
        assert_eq!(c.progressive, Some(Progressive::default()));
        assert!(matches!(s.policy, PolicySpec::Table(_)));
        let off =
            ControllerSpec::from_json(r#"{"adaptive":false,"progressive":null,"policy":null}"#)
                .unwrap();
        assert_eq!(off.policy, PolicySpec::Stump);
        assert_eq!(off.adaptive, None);
        assert_eq!(off.progressive, None);
    }

    #[test]
    fn bad_input_names_the_value() {
        let e = |j: &str| {
            ControllerSpec::from_json(j)
                .and_then(|s| s.config())
                .unwrap_err()
                .to_string()
        };
        assert!(e(r#"{"steady":1}"#).contains("steady"));
        assert!(e(r#"{"mode":"sideways"}"#).contains("sideways"));
        assert!(e(r#"{"adaptive":{"grw":2}}"#).contains("grw"));
        assert!(e(r#"{"adaptive":3}"#).contains('3'));
        assert!(e(r#"{"steady_s":-1}"#).contains("-1"));
        assert!(e(r#"{"pattern":"S5-B5"}"#).contains("active"));
        assert!(e(r#"{"steady_jitter":0.9}"#).contains("0.9"));
        assert!(e(r#"{"cycles":0}"#).contains("cycles = 0"));
        assert!(e(r#"{"gate_margin":0.1}"#).contains("cycles >= 2"));
        assert!(e(r#"{"gate_margin":0.1,"cycles":3,"progressive":true}"#).contains("use one"));
        assert!(e(r#"{"prefix_lens":[5]}"#).contains("prefix_lens"));
        assert!(e(r#"{"initial_cca":"Not a CCA"}"#).contains("Not a CCA"));
        let p = e(r#"{"steady_s":5,"policy":42}"#);
        assert!(p.contains("\"policy\"") && p.contains("42"), "{p}");
    }

    #[test]
    fn the_sample_period_must_be_the_models() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/knn_golden.model.json"
        );
        let mut file = crate::model::load(path).unwrap();
        let spec = ControllerSpec::default();
        assert!(spec.check_model(&file).is_ok());
        file.meta.probing.sample_interval_ms = 200.0;
        let e = spec.check_model(&file).unwrap_err().to_string();
        assert!(
            e.contains("every 200 ms") && e.contains("sample_period_s = 0.2"),
            "{e}"
        );
        let fast = ControllerSpec {
            sample_period_s: 0.2,
            ..Default::default()
        };
        assert!(fast.check_model(&file).is_ok());
    }

    /// A two-stage file gets the two-stage classifier (plain and
    /// progressive), never its first stage alone; several cycles are refused.
    #[test]
    fn a_two_stage_file_gets_the_two_stage_classifier() {
        use crate::knn::{KnnConfig, Model, Split, Stage2, TwoStage};
        use crate::mix::SIX_CLASSES;
        use crate::series::{synth, Normalization};
        let (x, y) = synth::dataset(&SIX_CLASSES, 12, 20, 4).unwrap();
        let cfg = KnnConfig {
            normalization: Normalization::DivideMin,
            ..KnnConfig::default()
        };
        let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
        let model = Model::fit(&x, 20, &y, classes, cfg).unwrap();
        let s2 = Stage2::new(Normalization::ZScore, Split::BbrPresent);
        let file = KnnModelFile {
            model: model.clone(),
            meta: Default::default(),
            stage2: Some(s2),
        };
        let two = TwoStage::new(&model, s2).unwrap();
        let mut ws = two.workspace();
        let (q, _) = synth::dataset(&SIX_CLASSES, 4, 20, 5).unwrap();
        let progressive = ControllerSpec {
            progressive: Some(ProgressiveSpec::default()),
            ..Default::default()
        };
        let mut one_stage = KnnClassifier::new(model).unwrap();
        let mut differ = 0;
        for spec in [ControllerSpec::default(), progressive] {
            let mut c = spec.classifier(&file).unwrap();
            assert!(!c.supports_class_distances());
            for w in q.chunks_exact(20) {
                let (p, _, margin) = two.classify_with_margin(w, &mut ws).unwrap();
                let got = c.classify(w).unwrap();
                assert_eq!((got.class_index, got.confidence), (p.class, margin));
                differ += (one_stage.classify(w).unwrap().class_index != p.class) as usize;
            }
        }
        assert!(
            differ > 0,
            "stage 2 must change some answers for this test to tell"
        );
        let cycles = ControllerSpec {
            cycles: 2,
            ..Default::default()
        };
        let e = cycles.classifier(&file).err().unwrap().to_string();
        assert!(e.contains("cycles = 2") && e.contains("z-score"), "{e}");
    }

    #[test]
    fn gate_is_progressive_at_window_boundaries() {
        let s = ControllerSpec {
            cycles: 3,
            gate_margin: Some(0.1),
            ..Default::default()
        };
        let p = s.config().unwrap().progressive.unwrap();
        assert_eq!((p.min_samples, p.step, p.agree), (1, 1, 1));
        assert_eq!(p.min_confidence, 0.1);
    }

    #[test]
    fn default_prefix_lens_cover_the_window() {
        let p = ProgressiveSpec::default();
        assert_eq!(default_prefix_lens(&p, 20), vec![5, 10, 15]);
        assert_eq!(default_prefix_lens(&p, 30), vec![5, 10, 15, 20, 25]);
    }

    #[test]
    fn ccas_lists_what_the_spec_can_set() {
        let s = ControllerSpec {
            mode: ModeSpec::Active,
            pattern: Some("S5-R5".into()),
            policy: PolicySpec::Table("B1-C0=bbr, *=cubic".into()),
            ..Default::default()
        };
        let names: Vec<String> = s.ccas().unwrap().iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ["bbr", "cubic", "reno"]);
    }

    #[test]
    fn round_trips_through_json() {
        let s = ControllerSpec {
            mode: ModeSpec::Active,
            adaptive: Some(AdaptiveSpec::default()),
            policy: PolicySpec::Callback,
            ..Default::default()
        };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(ControllerSpec::from_json(&j).unwrap(), s);
    }
}
