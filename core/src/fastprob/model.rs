//! FastProb's per-length classifier/regressor pairs and the online early-stopping
//! loop (004 §IV Fig. 6).
//!
//! Model file (versioned JSON, DESIGN.md "Model files"):
//! ```json
//! {"format": "opsel-model", "version": 2, "kind": "fastprob",
//!  "spec": {"interval_ns": 1000000000, "cap": 15, "first_gate_n": 1, "last_gate_n": 14,
//!           "stop_threshold": 0.5, "label_error_pct": 5.0,
//!           "features": "raw", "gate_every": 1},
//!  "sample_unit": "bit/s",
//!  "stages": [{"n": 1, "scaler": {"mean": [..], "scale": [..]},
//!              "gate": {rf-classifier model} | "always" | "never",
//!              "regressor": {rf-regressor model}}, …],
//!  "training": {...}}
//! ```
//! Each stage `n` holds the models that see the first `n` samples. A gated length
//! (every `gate_every`-th n of `first_gate_n..=last_gate_n`) must have a stage with
//! a `gate` (the "predictable yet?" classifier; `"always"`/`"never"` when its
//! training labels were all one class); other stages must not.
//!
//! Version 2 added `features` and `gate_every`; a version-1 file is read as
//! `"features": "raw"`, `"gate_every": 1` (the only form version 1 had).
//! `features` (see [`Features`]) is `"raw"` (004 §IV: the n samples, standard-scaled
//! by the stage's `scaler`), or, our extension, `"ratio"` / `"ratio+stats"`:
//! the samples divided by `s` = max(prefix maximum, `ratio_floor_bps`) (plus four
//! prefix statistics), with the regressor predicting `t_avg / s`. Every stage has a regressor; a stage at `n = cap` is
//! required, for the forced prediction. Extra regressor-only stages (e.g. n = 16…30)
//! serve the fixed-n RF baseline of 004 §IV.
//!
//! 004 §IV "14 pairs with a 15-s cap" is ambiguous; the default here is gates at
//! n = 1..14 and a forced prediction by the 15-input regressor at n = 15, i.e. 14
//! classifier/regressor pairs plus one regressor. `first_gate_n`, `last_gate_n` and
//! `cap` make any other reading (2..15, 1..15) a training-time choice.
//!
//! Version 3 (our extensions; docs/results/fastprob.md, "Shorter probes") adds
//! `target` (`"linear"`: the regressor's output r is t_avg / s, or t_avg in bit/s
//! for raw inputs; `"log"`: it is log(t_avg / s) and the prediction is exp(r) · s),
//! `gate` (`"classifier"`: 004's P(predictable) > `stop_threshold`; `"error"`: the
//! gate is a regressor of log(err % + 0.5) and the probe stops when it predicts
//! less than log(`stop_error_pct` + 0.5)) and `stop_error_pct`. Versions 1 and 2
//! cannot set them and read as `"linear"` / `"classifier"`, so older files load
//! and decide exactly as before.
//!
//! Version 4 (our extensions; docs/results/fastprob.md, "A deployable gate: one
//! budget, format version 4") adds `gate_layout` (`"per_length"`: a gate in each
//! gated stage, as before; `"pooled"`: one error-regression forest, the file's
//! top-level `pooled_gate`, for every gate length, with n among its inputs),
//! `gate_inputs` (extra gate inputs after the base ones, in this order: `"abs"`, the
//! log of the prefix mean in bit/s floored at `abs_floor_bps`; `"sd"`, the
//! population standard deviation of the stage regressor's per-tree outputs, a log
//! target's relative spread) and `abs_floor_bps`, and an optional top-level
//! `family_budgets` ({family: E %}) a caller that knows its network may select
//! ([`Prober::family`]); the default stop budget is the one `stop_error_pct`, so the
//! default path needs no family. Versions 1-3 cannot set any of them.
//!
//! Version 4 may also carry a top-level `family_classifier` (our extension;
//! docs/results/fastprob.md, "A family the probe infers itself"): a random-forest
//! classifier over the pooled gate's 16 base inputs and the `abs` input (17 in all)
//! whose `classes` are families of `family_budgets`. With it, and unless the caller
//! sets a budget or a family, every gate's budget follows the family predicted from
//! the probe's own prefix: `"soft"`, E = Σ P(family) · E(family) summed in class
//! order; `"hard"`, the budget of the most probable family (the first on ties).

use super::metrics::{check_samples, Estimate};
use crate::error::{Error, Result};
use crate::trees::{Ensemble, Kind};
use serde::{Deserialize, Serialize};

/// `kind` of a FastProb model file.
pub const KIND: &str = "fastprob";
/// Largest supported probe length (samples); the stack buffers are this long.
pub const MAX_N: usize = 64;
/// Model-file versions this build reads (2 writes `features` and `gate_every`;
/// 3 writes `target`, `gate` and `stop_error_pct`;
/// 4 writes `gate_layout`, `gate_inputs`, `abs_floor_bps`, a pooled gate and
/// optional per-family budgets).
pub const VERSIONS: [u64; 4] = [1, 2, 3, 4];
/// An error gate's output is log(err % + ERR_OFFSET) (the trainer's `ERR_OFFSET`).
const ERR_OFFSET: f64 = 0.5;
/// Extra inputs of [`Features::RatioStats`] beyond the n ratios.
const N_STATS: usize = 4;
/// Ratio samples the pooled gate sees (the last 10, zero-padded in front).
const POOL_LAST: usize = 10;
/// The pooled gate's base inputs: n, the four prefix statistics, the last 10
/// ratios and the coefficient of variation of the last 10 samples (the research
/// harness's `scale.pooled_inputs`).
pub const POOLED_BASE_INPUTS: usize = 1 + N_STATS + POOL_LAST + 1;

/// What a stage's forests see (the model file's `spec.features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Features {
    /// 004 §IV: the n samples (bit/s), standard-scaled per column; the
    /// regressor predicts t_avg in bit/s.
    #[default]
    #[serde(rename = "raw")]
    Raw,
    /// Our extension: each sample divided by `s`, the prefix maximum but at
    /// least `ratio_floor_bps`; the regressor predicts `t_avg / s`. Trees do
    /// not extrapolate beyond the rates they were trained on; the ratio is
    /// scale-free.
    #[serde(rename = "ratio")]
    Ratio,
    /// Our extension: the ratios, then the prefix mean / s, the mean of the
    /// last min(4, n) samples / s, the change over the last min(4, n − 1)
    /// intervals / s (0 at n = 1), and the samples since the first non-zero one.
    #[serde(rename = "ratio+stats")]
    RatioStats,
}

impl Features {
    /// Inputs of the stage that sees `n` samples.
    pub fn n_inputs(self, n: usize) -> usize {
        match self {
            Features::RatioStats => n + N_STATS,
            _ => n,
        }
    }
}

/// What the stage regressors predict (the model file's `spec.target`, version 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Target {
    /// t_avg / s (t_avg in bit/s for raw inputs): the prediction is r · s.
    #[default]
    #[serde(rename = "linear")]
    Linear,
    /// Our extension: log(t_avg / s); the prediction is exp(r) · s. Trees average
    /// in the log domain, so one transfer at 10× the rate does not pull a leaf.
    #[serde(rename = "log")]
    Log,
}

/// What the gates are (the model file's `spec.gate`, version 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum GateKind {
    /// 004 §IV: a binary classifier of "error < P"; stop when P(predictable) >
    /// `stop_threshold`.
    #[default]
    #[serde(rename = "classifier")]
    Classifier,
    /// Our extension: a regressor of log(err % + 0.5), trained on out-of-fold
    /// errors; stop when its prediction is below log(`stop_error_pct` + 0.5).
    #[serde(rename = "error")]
    Error,
}

/// Where the gates live (the model file's `spec.gate_layout`, version 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum GateLayout {
    /// A gate in each gated stage, seeing that stage's inputs.
    #[default]
    #[serde(rename = "per_length")]
    PerLength,
    /// Our extension: one error-regression forest for every gate length (the
    /// file's `pooled_gate`), fitted on the rows of all of them; n is an input.
    /// Ten times the rows per forest is what it buys (docs/results/fastprob.md,
    /// "Absolute scale, Bayesian optimisation and a pooled gate").
    #[serde(rename = "pooled")]
    Pooled,
}

/// Extra gate inputs after the base ones (the model file's `spec.gate_inputs`,
/// version 4: a list of `"abs"` and `"sd"`, written in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct GateInputs {
    /// log(max(prefix mean, `abs_floor_bps`)) in bit/s: the absolute scale the
    /// ratio inputs hide.
    pub abs: bool,
    /// The stage regressor's tree spread: population sd of its trees' outputs
    /// (log target only: a relative spread).
    pub sd: bool,
}

impl GateInputs {
    /// How many inputs these add.
    pub fn count(self) -> usize {
        self.abs as usize + self.sd as usize
    }
}

impl TryFrom<Vec<String>> for GateInputs {
    type Error = String;
    fn try_from(v: Vec<String>) -> std::result::Result<Self, String> {
        let mut g = GateInputs::default();
        for (i, name) in v.iter().enumerate() {
            match name.as_str() {
                "abs" if i == 0 && !g.abs => g.abs = true,
                "sd" if !g.sd => g.sd = true,
                other => {
                    return Err(format!(
                        "gate_inputs {v:?}: {other:?} unknown, repeated or out of order; expected a subset of [\"abs\", \"sd\"] in that order"
                    ))
                }
            }
        }
        Ok(g)
    }
}

impl From<GateInputs> for Vec<String> {
    fn from(g: GateInputs) -> Self {
        let mut v = Vec::new();
        if g.abs {
            v.push("abs".to_string());
        }
        if g.sd {
            v.push("sd".to_string());
        }
        v
    }
}

/// FastProb's configuration: the one schema the CLI and bindings convert into.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastProbSpec {
    /// Sampling interval i (004 §III: 1 s; 100 ms suits veth/LAN, 004 §11).
    #[serde(default = "one_second")]
    pub interval_ns: u64,
    /// Longest probe in samples; at `cap` the cap regressor predicts (004 §IV: 15).
    #[serde(default = "fifteen")]
    pub cap: usize,
    /// First probe length with a classifier gate (default 1).
    #[serde(default = "one")]
    pub first_gate_n: usize,
    /// Last probe length with a classifier gate (default 14: the paper's 14 pairs).
    #[serde(default = "fourteen")]
    pub last_gate_n: usize,
    /// Stop when P(predictable) > this; 0.5 is scikit-learn's `predict` on two classes.
    #[serde(default = "half")]
    pub stop_threshold: f64,
    /// Training label: "predictable" when the regressor's error is below P percent
    /// (004 §IV: P = 5 %). Recorded for the model card; inference does not use it.
    #[serde(default = "five")]
    pub label_error_pct: f64,
    /// Stage inputs (version 2; version-1 files are `raw`).
    #[serde(default)]
    pub features: Features,
    /// Gate only every k-th length from `first_gate_n` (version 2; default 1):
    /// fewer forests, a smaller file, a coarser stop.
    #[serde(default = "one")]
    pub gate_every: usize,
    /// Ratio features divide by max(prefix maximum, this) (version 2; default
    /// 1 Mbit/s): a prefix that has hardly started (a connection-setup delay)
    /// would otherwise give huge ratios and targets.
    #[serde(default = "one_mbps")]
    pub ratio_floor_bps: f64,
    /// What the regressors predict (version 3; default `linear`).
    #[serde(default)]
    pub target: Target,
    /// What the gates are (version 3; default `classifier`).
    #[serde(default)]
    pub gate: GateKind,
    /// An error gate stops when it predicts an error below this, percent
    /// (version 3; default 5; unused by classifier gates).
    #[serde(default = "five")]
    pub stop_error_pct: f64,
    /// Where the gates live (version 4; default `per_length`).
    #[serde(default)]
    pub gate_layout: GateLayout,
    /// Extra gate inputs (version 4; default none).
    #[serde(default)]
    pub gate_inputs: GateInputs,
    /// The `abs` gate input floors the prefix mean here (version 4; default
    /// 1 kbit/s: a prefix still in its setup delay has a mean of 0).
    #[serde(default = "one_kbps")]
    pub abs_floor_bps: f64,
}

fn one_second() -> u64 {
    1_000_000_000
}
fn fifteen() -> usize {
    15
}
fn one() -> usize {
    1
}
fn fourteen() -> usize {
    14
}
fn one_mbps() -> f64 {
    1e6
}
fn one_kbps() -> f64 {
    1e3
}
fn half() -> f64 {
    0.5
}
fn five() -> f64 {
    5.0
}

impl Default for FastProbSpec {
    fn default() -> Self {
        FastProbSpec {
            interval_ns: one_second(),
            cap: fifteen(),
            first_gate_n: one(),
            last_gate_n: fourteen(),
            stop_threshold: half(),
            label_error_pct: five(),
            features: Features::Raw,
            gate_every: one(),
            ratio_floor_bps: one_mbps(),
            target: Target::Linear,
            gate: GateKind::Classifier,
            stop_error_pct: five(),
            gate_layout: GateLayout::PerLength,
            gate_inputs: GateInputs::default(),
            abs_floor_bps: one_kbps(),
        }
    }
}

impl FastProbSpec {
    /// Check every field; errors name the bad value and the allowed range.
    pub fn validate(&self) -> Result<()> {
        if self.interval_ns == 0 {
            return Err(Error::invalid(
                "fastprob interval_ns is 0; give the sampling interval (004 §III: 1 s = 1000000000)",
            ));
        }
        if self.cap == 0 || self.cap > MAX_N {
            return Err(Error::invalid(format!(
                "fastprob cap {} must be in 1..={MAX_N} samples (004 §IV: 15)",
                self.cap
            )));
        }
        if self.first_gate_n == 0
            || self.first_gate_n > self.last_gate_n
            || self.last_gate_n > self.cap
        {
            return Err(Error::invalid(format!(
                "fastprob gates {}..={} must satisfy 1 <= first_gate_n <= last_gate_n <= cap ({})",
                self.first_gate_n, self.last_gate_n, self.cap
            )));
        }
        if !(self.stop_threshold.is_finite() && (0.0..1.0).contains(&self.stop_threshold)) {
            return Err(Error::invalid(format!(
                "fastprob stop_threshold {} must be in [0, 1) (default 0.5)",
                self.stop_threshold
            )));
        }
        if !(self.label_error_pct.is_finite()
            && self.label_error_pct > 0.0
            && self.label_error_pct < 100.0)
        {
            return Err(Error::invalid(format!(
                "fastprob label_error_pct {} must be in (0, 100) (004 §IV: 5)",
                self.label_error_pct
            )));
        }
        if !(self.ratio_floor_bps.is_finite() && self.ratio_floor_bps > 0.0) {
            return Err(Error::invalid(format!(
                "fastprob ratio_floor_bps {} must be finite and > 0 (default 1e6)",
                self.ratio_floor_bps
            )));
        }
        if !(self.stop_error_pct.is_finite()
            && self.stop_error_pct > 0.0
            && self.stop_error_pct < 100.0)
        {
            return Err(Error::invalid(format!(
                "fastprob stop_error_pct {} must be in (0, 100) (default 5)",
                self.stop_error_pct
            )));
        }
        if !(self.abs_floor_bps.is_finite() && self.abs_floor_bps > 0.0) {
            return Err(Error::invalid(format!(
                "fastprob abs_floor_bps {} must be finite and > 0 (default 1e3)",
                self.abs_floor_bps
            )));
        }
        if self.gate_layout == GateLayout::Pooled && self.gate != GateKind::Error {
            return Err(Error::invalid(
                "fastprob gate_layout \"pooled\" needs gate \"error\" (the pooled gate is a regressor of log(err % + 0.5))",
            ));
        }
        if self.gate_inputs.sd && self.target != Target::Log {
            return Err(Error::invalid(
                "fastprob gate input \"sd\" needs target \"log\" (the trees' spread of log(t_avg / s) is relative; of a linear target it is not)",
            ));
        }
        if self.gate_every == 0 || self.gate_every > self.cap {
            return Err(Error::invalid(format!(
                "fastprob gate_every {} must be in 1..=cap ({})",
                self.gate_every, self.cap
            )));
        }
        Ok(())
    }

    /// True when a file of format `version` may hold this spec: versions 1 and 2
    /// predate `target`, `gate` and `stop_error_pct` and must leave them at their
    /// defaults (version 1 also `features`, `gate_every` and `ratio_floor_bps`).
    fn fits_version(&self, version: u64) -> std::result::Result<(), &'static str> {
        if version < 4
            && (self.gate_layout != GateLayout::PerLength
                || self.gate_inputs != GateInputs::default()
                || self.abs_floor_bps != one_kbps())
        {
            return Err("a version-1, -2 or -3 file cannot set spec.gate_layout, gate_inputs or abs_floor_bps; write version 4");
        }
        if version < 3
            && (self.target != Target::Linear
                || self.gate != GateKind::Classifier
                || self.stop_error_pct != five())
        {
            return Err("a version-1 or -2 file cannot set spec.target, gate or stop_error_pct; write version 3");
        }
        if version == 1
            && (self.features != Features::Raw
                || self.gate_every != 1
                || self.ratio_floor_bps != one_mbps())
        {
            return Err("a version-1 file cannot set spec.features, gate_every or ratio_floor_bps; write version 2");
        }
        Ok(())
    }

    /// True when the length `n` has a gate.
    pub fn gated(&self, n: usize) -> bool {
        (self.first_gate_n..=self.last_gate_n).contains(&n)
            && (n - self.first_gate_n) % self.gate_every == 0
    }
}

#[derive(Debug, Clone)]
enum Gate {
    Always,
    Never,
    /// A classifier: P(predictable).
    Model(Ensemble),
    /// A regressor of log(err % + 0.5) (`GateKind::Error`).
    Error(Ensemble),
}

#[derive(Debug, Clone)]
struct Stage {
    mean: Vec<f64>,
    scale: Vec<f64>,
    gate: Option<Gate>,
    regressor: Ensemble,
}

/// Stack buffer for one stage's inputs.
const X_LEN: usize = MAX_N + N_STATS;
/// Stack buffer for one gate's inputs: a stage's inputs or the pooled base, then
/// at most two `gate_inputs`.
const G_LEN: usize = X_LEN + 2;
/// Most families a `family_classifier` may name (its probabilities live on the stack).
pub const MAX_FAMILIES: usize = 8;
/// The family classifier's inputs: the pooled base and `abs`.
pub const FAMILY_INPUTS: usize = POOLED_BASE_INPUTS + 1;

/// How an inferred family sets the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FamilyMode {
    /// E = Σ P(family) · E(family), summed in class order.
    Soft,
    /// E of the most probable family (the first in class order on ties).
    Hard,
}

/// A `family_classifier`: the forest, its mode, and each class's budget in the
/// forest's class order.
#[derive(Debug, Clone)]
struct FamilyClassifier {
    forest: Ensemble,
    mode: FamilyMode,
    classes: Vec<String>,
    budgets: Vec<f64>,
}

/// The four prefix statistics of `ratio+stats`: the prefix mean / s, the mean of
/// the last min(4, n) samples / s, the change over the last min(4, n − 1)
/// intervals / s (0 at n = 1), and the samples since the first non-zero one. Sums
/// run left to right, as the trainer's (`train_fastprob.prefix_features`), so the
/// inputs are bit-identical to scikit-learn's.
#[inline]
fn prefix_stats(raw: &[f64], s: f64) -> [f64; N_STATS] {
    let n = raw.len();
    let sum = raw.iter().fold(0.0, |a, v| a + v);
    let k = n.min(4);
    let last = raw[n - k + 1..].iter().fold(raw[n - k], |a, v| a + v);
    let k2 = n.min(5) - 1;
    let slope = if k2 > 0 {
        (raw[n - 1] - raw[n - 1 - k2]) / s
    } else {
        0.0
    };
    let first = raw.iter().position(|v| *v > 0.0).unwrap_or(n);
    [
        sum / n as f64 / s,
        last / k as f64 / s,
        slope,
        (n - first) as f64,
    ]
}

/// Coefficient of variation (population sd / mean) of the last min(10, n)
/// samples, 0 when their mean is not positive (the harness's `levers.cv10`),
/// summed left to right as the trainer's `cv10`.
#[inline]
fn cv_last(raw: &[f64]) -> f64 {
    let n = raw.len();
    let k = n.min(POOL_LAST);
    let w = &raw[n - k..];
    let m = w.iter().fold(0.0, |a, v| a + v) / k as f64;
    let var = w.iter().fold(0.0, |a, v| a + (v - m) * (v - m)) / k as f64;
    if m > 0.0 {
        var.sqrt() / m
    } else {
        0.0
    }
}

impl Stage {
    /// The stage's inputs for the prefix `raw` into `x` (returns how many), and
    /// the multiplier that turns the regressor's output into bit/s. Sums run
    /// left to right, as the trainer's (`train_fastprob.prefix_features`), so
    /// the inputs are bit-identical to scikit-learn's.
    #[inline]
    fn features_into(
        &self,
        spec: &FastProbSpec,
        raw: &[f64],
        x: &mut [f64; X_LEN],
    ) -> (usize, f64) {
        let n = raw.len();
        let kind = spec.features;
        match kind {
            Features::Raw => {
                // Standard scaling per column (004 §IV pre-processing).
                if self.mean.is_empty() {
                    x[..n].copy_from_slice(raw);
                } else {
                    for i in 0..n {
                        x[i] = (raw[i] - self.mean[i]) / self.scale[i];
                    }
                }
                (n, 1.0)
            }
            Features::Ratio | Features::RatioStats => {
                let s = raw.iter().copied().fold(spec.ratio_floor_bps, f64::max);
                for i in 0..n {
                    x[i] = raw[i] / s;
                }
                if kind == Features::Ratio {
                    return (n, s);
                }
                x[n..n + N_STATS].copy_from_slice(&prefix_stats(raw, s));
                (n + N_STATS, s)
            }
        }
    }
}

/// A loaded, validated FastProb model.
#[derive(Debug, Clone)]
pub struct FastProbModel {
    spec: FastProbSpec,
    /// Indexed by `n − 1`.
    stages: Vec<Option<Stage>>,
    training: serde_json::Value,
    /// log(`stop_error_pct` + 0.5): an error gate stops below it (computed once;
    /// the trainer compares with `math.log` of the same sum).
    error_below: f64,
    /// `gate_layout` `"pooled"`: the gate of every gated length.
    pooled_gate: Option<Ensemble>,
    /// Optional per-family budgets (E %), sorted by name.
    family_budgets: Vec<(String, f64)>,
    /// Optional: the budget follows the family inferred from the prefix.
    family_classifier: Option<FamilyClassifier>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFamilyClassifier {
    mode: FamilyMode,
    /// Class names in the forest's output order.
    classes: Vec<String>,
    forest: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScaler {
    mean: Vec<f64>,
    scale: Vec<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStage {
    n: usize,
    #[serde(default)]
    scaler: Option<RawScaler>,
    #[serde(default)]
    gate: Option<serde_json::Value>,
    regressor: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    #[allow(dead_code)]
    format: String,
    version: u64,
    #[allow(dead_code)]
    kind: String,
    spec: FastProbSpec,
    #[serde(default = "bps")]
    sample_unit: String,
    stages: Vec<RawStage>,
    /// Version 4, `gate_layout` `"pooled"`: the one gate forest.
    #[serde(default)]
    pooled_gate: Option<serde_json::Value>,
    /// Version 4, optional: {family: E %} a caller that knows its network may select.
    #[serde(default)]
    family_budgets: Option<std::collections::BTreeMap<String, f64>>,
    /// Version 4, optional: the family inferred from the prefix picks the budget.
    #[serde(default)]
    family_classifier: Option<RawFamilyClassifier>,
    #[serde(default)]
    training: serde_json::Value,
}
fn bps() -> String {
    "bit/s".into()
}

fn bad(msg: String) -> Error {
    Error::InvalidModel(msg)
}

/// `format`, `version` (1 or 2: [`VERSIONS`]) and `kind` of a FastProb file. The
/// shared check (`crate::model::check_header`) knows one version; FastProb files
/// went to version 2 on their own, and this keeps reading version 1.
fn check_header(v: &serde_json::Value) -> Result<()> {
    let version = v.get("version").and_then(|x| x.as_u64());
    match version {
        Some(found) if !VERSIONS.contains(&found) => {
            return Err(Error::UnsupportedVersion {
                found,
                supported: VERSIONS[VERSIONS.len() - 1],
            })
        }
        Some(1) => return crate::model::check_header(v, KIND),
        _ => {}
    }
    // Version 2 (or missing: the shared check says so): check format and kind
    // on a copy that carries the shared version.
    let mut v1 = v.clone();
    if version.is_some() {
        v1["version"] = serde_json::json!(1);
    }
    crate::model::check_header(&v1, KIND)
}

fn sub_model(n: usize, what: &str, v: &serde_json::Value) -> Result<Ensemble> {
    Ensemble::from_json(&v.to_string()).map_err(|e| match e {
        Error::InvalidModel(m) => bad(format!("stage n={n} {what}: {m}")),
        other => other,
    })
}

/// Validate a `family_classifier` against the file's `family_budgets`.
fn family_classifier(
    fc: RawFamilyClassifier,
    family_budgets: &[(String, f64)],
) -> Result<FamilyClassifier> {
    let forest = Ensemble::from_json(&fc.forest.to_string()).map_err(|e| match e {
        Error::InvalidModel(m) => bad(format!("family_classifier forest: {m}")),
        other => other,
    })?;
    if forest.kind() != Kind::RfClassifier {
        return Err(bad(format!(
            "family_classifier forest is a {}; it is an rf-classifier over the families",
            forest.kind().name()
        )));
    }
    if forest.n_features() != FAMILY_INPUTS {
        return Err(bad(format!(
            "family_classifier takes {} features, expected {FAMILY_INPUTS} ({POOLED_BASE_INPUTS} pooled base inputs and abs)",
            forest.n_features()
        )));
    }
    let k = fc.classes.len();
    if !(2..=MAX_FAMILIES).contains(&k) || forest.n_classes() != k {
        return Err(bad(format!(
            "family_classifier has {k} classes and a forest of {} outputs: give 2..={MAX_FAMILIES} classes, one per output",
            forest.n_classes()
        )));
    }
    let mut budgets = Vec::with_capacity(k);
    for (i, c) in fc.classes.iter().enumerate() {
        if fc.classes[..i].contains(c) {
            return Err(bad(format!(
                "family_classifier class {c:?} is listed twice"
            )));
        }
        let Some(e) = family_budgets.iter().find(|(f, _)| f == c).map(|(_, e)| *e) else {
            return Err(bad(format!(
                "family_classifier class {c:?} has no budget in family_budgets ({:?})",
                family_budgets
                    .iter()
                    .map(|(f, _)| f.as_str())
                    .collect::<Vec<_>>()
            )));
        };
        budgets.push(e);
    }
    Ok(FamilyClassifier {
        forest,
        mode: fc.mode,
        classes: fc.classes,
        budgets,
    })
}

impl FastProbModel {
    /// Parse and validate a FastProb model file's JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("not JSON ({e}); expected an opsel-model file")))?;
        check_header(&v)?;
        let raw: RawModel =
            serde_json::from_value(v).map_err(|e| bad(format!("malformed fastprob model: {e}")))?;
        Self::from_raw(raw)
    }

    /// Read and validate a model file.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading model file {}", path.display()), e))?;
        Self::from_json(&text)
    }

    fn from_raw(raw: RawModel) -> Result<Self> {
        let spec = raw.spec;
        spec.validate().map_err(|e| bad(format!("spec: {e}")))?;
        spec.fits_version(raw.version)
            .map_err(|m| bad(m.to_string()))?;
        if raw.sample_unit != "bit/s" {
            return Err(bad(format!(
                "sample_unit {:?}: this build reads throughput samples in \"bit/s\"",
                raw.sample_unit
            )));
        }
        if raw.version < 4
            && (raw.pooled_gate.is_some()
                || raw.family_budgets.is_some()
                || raw.family_classifier.is_some())
        {
            return Err(bad(
                "a version-1, -2 or -3 file cannot have pooled_gate, family_budgets or family_classifier; write version 4"
                    .to_string(),
            ));
        }
        // A stage's regressor reads the inputs `spec.features` builds for length n;
        // a per-length gate reads them and then `spec.gate_inputs`.
        let extra = spec.gate_inputs.count();
        let inputs = |n: usize, what: &str, e: &Ensemble| -> Result<()> {
            let want = spec.features.n_inputs(n) + if what == "gate" { extra } else { 0 };
            if e.n_features() != want {
                return Err(bad(format!(
                    "stage n={n} {what} takes {} features, expected {want} ({:?} inputs{})",
                    e.n_features(),
                    spec.features,
                    if what == "gate" && extra > 0 {
                        " and the gate_inputs"
                    } else {
                        ""
                    }
                )));
            }
            Ok(())
        };
        let pooled = spec.gate_layout == GateLayout::Pooled;
        let pooled_gate = match (&raw.pooled_gate, pooled) {
            (None, false) => None,
            (Some(_), false) => {
                return Err(bad(
                    "the file has a pooled_gate but spec.gate_layout is \"per_length\"; remove one"
                        .to_string(),
                ))
            }
            (None, true) => {
                return Err(bad(
                    "spec.gate_layout is \"pooled\" but the file has no pooled_gate".to_string(),
                ))
            }
            (Some(g), true) => {
                let e = Ensemble::from_json(&g.to_string()).map_err(|e| match e {
                    Error::InvalidModel(m) => bad(format!("pooled_gate: {m}")),
                    other => other,
                })?;
                if !matches!(e.kind(), Kind::RfRegressor | Kind::GbtRegressor) {
                    return Err(bad(format!(
                        "pooled_gate is a {}; it is a regressor of log(err % + 0.5)",
                        e.kind().name()
                    )));
                }
                let want = POOLED_BASE_INPUTS + extra;
                if e.n_features() != want {
                    return Err(bad(format!(
                        "pooled_gate takes {} features, expected {want} ({POOLED_BASE_INPUTS} base inputs and {extra} gate_inputs)",
                        e.n_features()
                    )));
                }
                Some(e)
            }
        };
        let mut family_budgets = Vec::new();
        for (name, e) in raw.family_budgets.unwrap_or_default() {
            if !(e.is_finite() && e > 0.0 && e < 100.0) || name.is_empty() {
                return Err(bad(format!(
                    "family_budgets {name:?}: {e} must be a named budget in (0, 100) %"
                )));
            }
            if spec.gate != GateKind::Error {
                return Err(bad(
                    "family_budgets need gate \"error\" (they are error budgets E %)".to_string(),
                ));
            }
            family_budgets.push((name, e));
        }
        let family_classifier = match raw.family_classifier {
            None => None,
            Some(fc) => Some(family_classifier(fc, &family_budgets)?),
        };
        let mut stages: Vec<Option<Stage>> = vec![None; MAX_N];
        let mut last = 0;
        for st in raw.stages {
            let n = st.n;
            if n == 0 || n > MAX_N {
                return Err(bad(format!("stage n={n} must be in 1..={MAX_N}")));
            }
            if n <= last {
                return Err(bad(format!(
                    "stage n={n} after n={last}: stages must be in strictly increasing n"
                )));
            }
            last = n;
            let (mean, scale) = match st.scaler {
                None => (Vec::new(), Vec::new()),
                Some(_) if spec.features != Features::Raw => {
                    return Err(bad(format!(
                        "stage n={n} has a scaler, but features {:?} are not scaled; remove it",
                        spec.features
                    )))
                }
                Some(s) => {
                    if s.mean.len() != n || s.scale.len() != n {
                        return Err(bad(format!(
                            "stage n={n}: scaler mean/scale have lengths {}/{}, expected {n}",
                            s.mean.len(),
                            s.scale.len()
                        )));
                    }
                    if s.mean.iter().any(|m| !m.is_finite())
                        || s.scale.iter().any(|v| !(v.is_finite() && *v > 0.0))
                    {
                        return Err(bad(format!(
                            "stage n={n}: scaler needs finite means and finite scales > 0"
                        )));
                    }
                    (s.mean, s.scale)
                }
            };
            let gate = match (&st.gate, spec.gated(n) && !pooled) {
                (Some(_), _) if pooled => {
                    return Err(bad(format!(
                        "stage n={n} has a gate, but spec.gate_layout is \"pooled\": the pooled_gate serves every length"
                    )))
                }
                (None, false) => None,
                (None, true) => {
                    return Err(bad(format!(
                        "stage n={n} is a gated length ({}..={} every {}) but has no gate",
                        spec.first_gate_n, spec.last_gate_n, spec.gate_every
                    )))
                }
                (Some(_), false) => {
                    return Err(bad(format!(
                        "stage n={n} has a gate but is not a gated length ({}..={} every {}); remove it or change the range",
                        spec.first_gate_n, spec.last_gate_n, spec.gate_every
                    )))
                }
                (Some(g), true) if spec.gate == GateKind::Error => {
                    let e = sub_model(n, "gate", g)?;
                    if !matches!(e.kind(), Kind::RfRegressor | Kind::GbtRegressor) {
                        return Err(bad(format!(
                            "stage n={n} gate is a {}; an error gate (spec.gate \"error\") is a regressor of log(err % + 0.5)",
                            e.kind().name()
                        )));
                    }
                    inputs(n, "gate", &e)?;
                    Some(Gate::Error(e))
                }
                (Some(g), true) => Some(match g.as_str() {
                    Some("always") => Gate::Always,
                    Some("never") => Gate::Never,
                    Some(other) => {
                        return Err(bad(format!(
                            "stage n={n} gate {other:?}: expected a classifier model, \"always\" or \"never\""
                        )))
                    }
                    None => {
                        let e = sub_model(n, "gate", g)?;
                        if !matches!(e.kind(), Kind::RfClassifier | Kind::GbtClassifier)
                            || e.n_classes() != 2
                        {
                            return Err(bad(format!(
                                "stage n={n} gate is a {} with {} classes; expected a binary classifier (rf-classifier or gbt-classifier, classes [0, 1])",
                                e.kind().name(),
                                e.n_classes()
                            )));
                        }
                        inputs(n, "gate", &e)?;
                        Gate::Model(e)
                    }
                }),
            };
            let regressor = sub_model(n, "regressor", &st.regressor)?;
            if !matches!(regressor.kind(), Kind::RfRegressor | Kind::GbtRegressor) {
                return Err(bad(format!(
                    "stage n={n} regressor is a {}; expected rf-regressor or gbt-regressor",
                    regressor.kind().name()
                )));
            }
            inputs(n, "regressor", &regressor)?;
            stages[n - 1] = Some(Stage {
                mean,
                scale,
                gate,
                regressor,
            });
        }
        for n in (spec.first_gate_n..=spec.last_gate_n).filter(|n| spec.gated(*n)) {
            if stages[n - 1].is_none() {
                return Err(bad(format!(
                    "no stage for n={n}, a gated length ({}..={} every {})",
                    spec.first_gate_n, spec.last_gate_n, spec.gate_every
                )));
            }
        }
        if spec.gate_inputs.sd {
            for n in (spec.first_gate_n..=spec.last_gate_n).filter(|n| spec.gated(*n)) {
                if let Some(st) = &stages[n - 1] {
                    if st.regressor.kind() != Kind::RfRegressor {
                        return Err(bad(format!(
                            "stage n={n} regressor is a {}; the gate input \"sd\" is the spread of a random forest's trees (rf-regressor)",
                            st.regressor.kind().name()
                        )));
                    }
                }
            }
        }
        if stages[spec.cap - 1].is_none() {
            return Err(bad(format!(
                "no stage for the cap n={}: the forced prediction needs its regressor",
                spec.cap
            )));
        }
        Ok(FastProbModel {
            spec,
            stages,
            training: raw.training,
            error_below: (spec.stop_error_pct + ERR_OFFSET).ln(),
            pooled_gate,
            family_budgets,
            family_classifier,
        })
    }

    /// The configuration stored in the file.
    pub fn spec(&self) -> &FastProbSpec {
        &self.spec
    }

    /// Training metadata of the file.
    pub fn training(&self) -> &serde_json::Value {
        &self.training
    }

    /// Probe lengths that have a regressor.
    pub fn regressor_lengths(&self) -> impl Iterator<Item = usize> + '_ {
        self.stages
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i + 1)
    }

    /// The fixed-n RF baseline (004 §IV, Table II "RF 3 s / 10 s"): the n-input
    /// regressor on the first `n = prefix.len()` samples. Allocation-free.
    pub fn predict_fixed(&self, prefix: &[f64]) -> Result<f64> {
        let n = prefix.len();
        let st = n
            .checked_sub(1)
            .and_then(|i| self.stages.get(i))
            .and_then(|s| s.as_ref())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "the model has no regressor for {n} samples; it has n in {:?}",
                    self.regressor_lengths().collect::<Vec<_>>()
                ))
            })?;
        check_samples(prefix)?;
        let mut x = [0.0; X_LEN];
        let (k, mult) = st.features_into(&self.spec, prefix, &mut x);
        Ok(self.output(st.regressor.predict(&x[..k])?, mult))
    }

    /// A regressor output as bit/s (`spec.target`).
    #[inline]
    fn output(&self, r: f64, mult: f64) -> f64 {
        match self.spec.target {
            Target::Linear => r * mult,
            Target::Log => r.exp() * mult,
        }
    }

    /// The `gate_inputs` (`abs`, then `sd`) for the prefix `raw` into `g` from
    /// position `at`; returns the new length. `sd` walks the stage regressor's
    /// trees once for the mean and once for the spread and leaves the mean in `reg`.
    #[inline]
    fn extras_into(
        &self,
        raw: &[f64],
        st: &Stage,
        x: &[f64],
        reg: &mut Option<f64>,
        g: &mut [f64; G_LEN],
        at: usize,
    ) -> Result<usize> {
        let mut k = at;
        let gi = self.spec.gate_inputs;
        if gi.abs {
            g[k] = self.abs_input(raw);
            k += 1;
        }
        if gi.sd {
            let (m, sd) = st.regressor.predict_mean_sd(x)?;
            *reg = Some(m);
            g[k] = sd;
            k += 1;
        }
        Ok(k)
    }

    /// The pooled gate's inputs at length n = `raw.len()` into `g` (the harness's
    /// `scale.pooled_inputs`, then the `gate_inputs`): n, the four prefix
    /// statistics, the last 10 ratios zero-padded in front, the coefficient of
    /// variation of the last 10 samples. Returns their count.
    #[inline]
    fn pooled_inputs_into(
        &self,
        raw: &[f64],
        st: &Stage,
        x: &[f64],
        reg: &mut Option<f64>,
        g: &mut [f64; G_LEN],
    ) -> Result<usize> {
        self.pooled_base_into(raw, &mut g[..POOLED_BASE_INPUTS]);
        self.extras_into(raw, st, x, reg, g, POOLED_BASE_INPUTS)
    }

    /// The pooled base inputs (`POOLED_BASE_INPUTS` of them) into `g`.
    #[inline]
    fn pooled_base_into(&self, raw: &[f64], g: &mut [f64]) {
        let n = raw.len();
        let s = raw
            .iter()
            .copied()
            .fold(self.spec.ratio_floor_bps, f64::max);
        g[0] = n as f64;
        g[1..1 + N_STATS].copy_from_slice(&prefix_stats(raw, s));
        let k = n.min(POOL_LAST);
        let base = 1 + N_STATS;
        g[base..base + POOL_LAST - k].fill(0.0);
        for (o, v) in g[base + POOL_LAST - k..base + POOL_LAST]
            .iter_mut()
            .zip(&raw[n - k..])
        {
            *o = v / s;
        }
        g[base + POOL_LAST] = cv_last(raw);
    }

    /// scale.py `abs_input`: log of the prefix mean, floored.
    #[inline]
    fn abs_input(&self, raw: &[f64]) -> f64 {
        let mean = raw.iter().fold(0.0, |a, v| a + v) / raw.len() as f64;
        mean.max(self.spec.abs_floor_bps).ln()
    }

    /// log(E + 0.5) for the budget E the family classifier gives the prefix
    /// `raw` (inferred_family.py: soft or hard). Allocation-free.
    #[inline]
    fn inferred_below(&self, fc: &FamilyClassifier, raw: &[f64]) -> Result<f64> {
        let mut g = [0.0; FAMILY_INPUTS];
        self.pooled_base_into(raw, &mut g[..POOLED_BASE_INPUTS]);
        g[POOLED_BASE_INPUTS] = self.abs_input(raw);
        let k = fc.budgets.len();
        let mut p = [0.0; MAX_FAMILIES];
        fc.forest.predict_proba(&g, &mut p[..k])?;
        let e = match fc.mode {
            // Left to right from 0, as the trainer sums it.
            FamilyMode::Soft => p[..k]
                .iter()
                .zip(&fc.budgets)
                .fold(0.0, |a, (p, b)| a + p * b),
            FamilyMode::Hard => {
                let mut best = 0;
                for i in 1..k {
                    if p[i] > p[best] {
                        best = i;
                    }
                }
                fc.budgets[best]
            }
        };
        Ok((e + ERR_OFFSET).ln())
    }

    /// The `family_classifier`'s classes in its output order, and its mode;
    /// `None` when the file has none.
    pub fn family_classifier(&self) -> Option<(&[String], FamilyMode)> {
        self.family_classifier
            .as_ref()
            .map(|fc| (fc.classes.as_slice(), fc.mode))
    }

    /// The per-family budgets of the file (E %), sorted by family name; empty
    /// unless the trainer stored them (version 4).
    pub fn family_budgets(&self) -> &[(String, f64)] {
        &self.family_budgets
    }

    /// True when the gates are one pooled forest (`spec.gate_layout` `"pooled"`).
    pub fn has_pooled_gate(&self) -> bool {
        self.pooled_gate.is_some()
    }

    /// Replay the early-stopping loop over a recorded log (evaluation). Errors if the
    /// log ends before the probe stops.
    pub fn replay(&self, samples_bps: &[f64]) -> Result<Estimate> {
        let mut p = Prober::new(self);
        for s in samples_bps {
            match p.push(*s)? {
                Decision::Continue => {}
                Decision::Stop(pr) | Decision::ForcedStop(pr) => {
                    return Ok(Estimate {
                        samples: pr.samples,
                        prediction_bps: pr.throughput_bps,
                        forced: pr.forced,
                    })
                }
            }
        }
        Err(Error::invalid(format!(
            "log of {} samples ended before the probe stopped (cap {})",
            samples_bps.len(),
            self.spec.cap
        )))
    }
}

/// A FastProb prediction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    /// Predicted converged throughput t_avg, bit/s.
    pub throughput_bps: f64,
    /// Samples consumed.
    pub samples: usize,
    /// Probe time: `samples · interval_ns`.
    pub probe_ns: u64,
    /// The gate's P(predictable) at the stop (`None` at a forced stop outside the
    /// gated range, and with error gates, whose output is not a probability).
    pub p_predictable: Option<f64>,
    /// True at the cap.
    pub forced: bool,
}

/// What to do after a sample (004 §IV Fig. 6b). Serialized tagged by
/// `decision` (`continue`, `stop`, `forced_stop`) with the prediction's fields
/// beside it: the one form of the bindings and the CLI's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Not predictable yet: keep probing.
    Continue,
    /// The gate fired: stop the probe, here is the prediction.
    Stop(Prediction),
    /// The cap was reached: stop with the cap regressor's prediction.
    ForcedStop(Prediction),
}

/// The model a [`Prober`] consults: borrowed, or shared with the caller (the
/// bindings hold a probe beside nothing else that could own the model).
#[derive(Debug, Clone)]
enum ModelRef<'m> {
    Borrowed(&'m FastProbModel),
    Shared(std::sync::Arc<FastProbModel>),
}

/// Which error budget a probe stops on (the one schema the CLI, Python, Node and
/// C convert into): a network family whose budget the model file carries
/// (`family_budgets`, version 4), or an explicit budget E %, or neither (the
/// file's default `stop_error_pct`, which needs no family). Both need a model
/// with error gates; [`Prober::budget`] checks them against the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeBudget {
    /// A family named in the file's `family_budgets` (e.g. `"wan"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// An explicit error budget E, percent in (0, 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_error_pct: Option<f64>,
}

impl ProbeBudget {
    /// Neither set: the model's default budget.
    pub fn is_default(&self) -> bool {
        self.family.is_none() && self.stop_error_pct.is_none()
    }

    /// At most one of the two; the model-dependent checks are [`Prober::budget`]'s.
    pub fn validate(&self) -> Result<()> {
        if let (Some(f), Some(e)) = (&self.family, self.stop_error_pct) {
            return Err(Error::invalid(format!(
                "family {f:?} and stop_error_pct {e} % both given: a family selects the file's budget for it, so give one or the other"
            )));
        }
        Ok(())
    }
}

/// One probe in progress: a fixed buffer of samples and the model it consults.
/// `push` allocates nothing.
#[derive(Debug, Clone)]
pub struct Prober<'m> {
    model: ModelRef<'m>,
    buf: [f64; MAX_N],
    n: usize,
    stopped: bool,
    threshold: f64,
    /// An error gate stops below this: log(E + 0.5), E the model's
    /// `stop_error_pct` unless [`Prober::stop_error_pct`] or [`Prober::family`] set another.
    error_below: f64,
    /// The model's `family_classifier` sets each gate's budget (until the
    /// caller sets one: [`Prober::stop_error_pct`], [`Prober::family`]).
    infer: bool,
}

impl Prober<'static> {
    /// A probe that shares ownership of its model.
    pub fn shared(model: std::sync::Arc<FastProbModel>) -> Self {
        Self::with_model(ModelRef::Shared(model))
    }
}

impl<'m> Prober<'m> {
    /// Start a probe with the model's stop threshold.
    pub fn new(model: &'m FastProbModel) -> Self {
        Self::with_model(ModelRef::Borrowed(model))
    }

    fn with_model(model: ModelRef<'m>) -> Self {
        let m: &FastProbModel = match &model {
            ModelRef::Borrowed(m) => m,
            ModelRef::Shared(m) => m,
        };
        let (threshold, error_below) = (m.spec.stop_threshold, m.error_below);
        let infer = m.family_classifier.is_some();
        Prober {
            model,
            buf: [0.0; MAX_N],
            n: 0,
            stopped: false,
            threshold,
            error_below,
            infer,
        }
    }

    /// The model consulted.
    pub fn model(&self) -> &FastProbModel {
        match &self.model {
            ModelRef::Borrowed(m) => m,
            ModelRef::Shared(m) => m,
        }
    }

    /// Start a probe with another stop threshold (the P(predictable) knob of 004 §8).
    pub fn with_threshold(model: &'m FastProbModel, threshold: f64) -> Result<Self> {
        Self::new(model).threshold(threshold)
    }

    /// Set the stop threshold (in [0, 1)). Classifier gates only: an error gate
    /// (`spec.gate` `"error"`) stops on `spec.stop_error_pct`.
    pub fn threshold(mut self, threshold: f64) -> Result<Self> {
        if !(threshold.is_finite() && (0.0..1.0).contains(&threshold)) {
            return Err(Error::invalid(format!(
                "stop threshold {threshold} must be in [0, 1)"
            )));
        }
        self.threshold = threshold;
        Ok(self)
    }

    /// Set an error gate's budget E (percent, in (0, 100)): stop when the gate
    /// predicts an error below E. Error gates only (`spec.gate` `"error"`).
    pub fn stop_error_pct(mut self, e_pct: f64) -> Result<Self> {
        if self.model().spec.gate != GateKind::Error {
            return Err(Error::invalid(
                "an error budget needs a model with error gates (spec.gate \"error\"); this one has classifier gates: set threshold() instead",
            ));
        }
        if !(e_pct.is_finite() && e_pct > 0.0 && e_pct < 100.0) {
            return Err(Error::invalid(format!(
                "error budget {e_pct} % must be in (0, 100)"
            )));
        }
        self.error_below = (e_pct + ERR_OFFSET).ln();
        self.infer = false;
        Ok(self)
    }

    /// True when each gate's budget comes from the family the model's
    /// `family_classifier` infers from the prefix (no budget or family set).
    pub fn infers_family(&self) -> bool {
        self.infer
    }

    /// Use the file's budget for a network family (its optional
    /// `family_budgets`, version 4). The default budget needs no family; this is
    /// for a caller that knows which kind of network it is on.
    pub fn family(self, name: &str) -> Result<Self> {
        let m = self.model();
        if m.family_budgets.is_empty() {
            return Err(Error::invalid(if m.spec.gate == GateKind::Error {
                format!(
                    "family {name:?}: this model file has no family_budgets (a version-4 option the trainer writes with --family-budgets); it stops on its one default budget (stop_error_pct {} %): drop the family, or set an error budget instead",
                    m.spec.stop_error_pct
                )
            } else {
                format!(
                    "family {name:?}: this model file has no family_budgets; its classifier gates stop on P(predictable) > {}: drop the family, or set a threshold instead",
                    m.spec.stop_threshold
                )
            }));
        }
        let Some(e) = m
            .family_budgets
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, e)| *e)
        else {
            return Err(Error::invalid(format!(
                "unknown family {name:?}: this model has budgets for {} ({})",
                m.family_budgets
                    .iter()
                    .map(|(f, e)| format!("{f:?} ({e} %)"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if m.family_classifier.is_some() {
                    "without a family, each gate's budget follows the family the model infers from the samples".to_string()
                } else {
                    format!(
                        "the default budget, stop_error_pct {} %, needs none",
                        m.spec.stop_error_pct
                    )
                }
            )));
        };
        self.stop_error_pct(e)
    }

    /// Apply a [`ProbeBudget`]: the family's budget, an explicit one, or (both
    /// unset) the model's default.
    pub fn budget(self, b: &ProbeBudget) -> Result<Self> {
        b.validate()?;
        match (&b.family, b.stop_error_pct) {
            (Some(f), _) => self.family(f),
            (None, Some(e)) => self.stop_error_pct(e),
            (None, None) => Ok(self),
        }
    }

    /// Forget the samples and start over (same model and threshold).
    pub fn reset(&mut self) {
        self.n = 0;
        self.stopped = false;
    }

    /// Samples pushed so far.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True before the first sample.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Feed the throughput of the interval that just ended (bit/s). After a stop,
    /// further pushes are an error until [`Prober::reset`]. NaN, infinite or
    /// negative samples are rejected and not recorded.
    pub fn push(&mut self, sample_bps: f64) -> Result<Decision> {
        if self.stopped {
            return Err(Error::invalid(
                "the probe has already stopped; call reset() to start a new one",
            ));
        }
        if !(sample_bps.is_finite() && sample_bps >= 0.0) {
            return Err(Error::invalid(format!(
                "throughput sample {sample_bps} bit/s must be finite and >= 0"
            )));
        }
        self.buf[self.n] = sample_bps;
        self.n += 1;
        let n = self.n;
        let model = match &self.model {
            ModelRef::Borrowed(m) => *m,
            ModelRef::Shared(m) => &**m,
        };
        let spec = &model.spec;
        let gated = spec.gated(n);
        if !gated && n != spec.cap {
            // No gate and not the cap: nothing to decide at this length.
            return Ok(Decision::Continue);
        }
        let Some(st) = model.stages[n - 1].as_ref() else {
            // Unreachable: gated lengths and the cap have stages (validated).
            return Ok(Decision::Continue);
        };
        let raw = &self.buf[..n];
        let mut x = [0.0; X_LEN];
        let (k, mult) = st.features_into(spec, raw, &mut x);
        let x = &x[..k];
        // The regressor's output when the tree spread was computed with it (the
        // same sum as `predict`), so a stop does not walk the trees again.
        let mut reg = None;
        // p: P(predictable) of a classifier gate; an error gate reports none (its
        // output is a predicted log error, not a probability).
        // The budget: the caller's or the file's, or the inferred family's.
        let below = match model.family_classifier.as_ref() {
            Some(fc) if gated && self.infer => model.inferred_below(fc, raw)?,
            _ => self.error_below,
        };
        let (p, fires) = if !gated {
            (None, false)
        } else if let Some(pg) = model.pooled_gate.as_ref() {
            let mut g = [0.0; G_LEN];
            let kg = model.pooled_inputs_into(raw, st, x, &mut reg, &mut g)?;
            (None, pg.predict(&g[..kg])? < below)
        } else {
            let mut g = [0.0; G_LEN];
            let gx = if spec.gate_inputs.count() == 0 {
                x
            } else {
                g[..k].copy_from_slice(x);
                let kg = model.extras_into(raw, st, x, &mut reg, &mut g, k)?;
                &g[..kg]
            };
            match &st.gate {
                None => (None, false),
                Some(Gate::Always) => (Some(1.0), 1.0 > self.threshold),
                Some(Gate::Never) => (Some(0.0), false),
                Some(Gate::Model(c)) => {
                    let p = c.predict(gx)?;
                    (Some(p), p > self.threshold)
                }
                Some(Gate::Error(r)) => (None, r.predict(gx)? < below),
            }
        };
        if fires || n == spec.cap {
            let r = match reg {
                Some(r) => r,
                None => st.regressor.predict(x)?,
            };
            let pred = Prediction {
                throughput_bps: model.output(r, mult),
                samples: n,
                probe_ns: n as u64 * spec.interval_ns,
                p_predictable: p,
                forced: !fires,
            };
            self.stopped = true;
            return Ok(if fires {
                Decision::Stop(pred)
            } else {
                Decision::ForcedStop(pred)
            });
        }
        Ok(Decision::Continue)
    }
}

#[cfg(test)]
mod serialized_form {
    use super::{Decision, Prediction};
    use serde_json::json;

    #[test]
    fn decisions_are_tagged_with_the_prediction_beside() {
        assert_eq!(
            serde_json::to_value(Decision::Continue).unwrap(),
            json!({"decision": "continue"})
        );
        let p = Prediction {
            throughput_bps: 9.0e8,
            samples: 6,
            probe_ns: 6_000_000_000,
            p_predictable: Some(0.8),
            forced: false,
        };
        assert_eq!(
            serde_json::to_value(Decision::Stop(p)).unwrap(),
            json!({"decision": "stop", "throughput_bps": 9.0e8, "samples": 6,
                   "probe_ns": 6_000_000_000u64, "p_predictable": 0.8, "forced": false})
        );
        let f = Prediction {
            p_predictable: None,
            forced: true,
            ..p
        };
        assert_eq!(
            serde_json::to_value(Decision::ForcedStop(f)).unwrap()["decision"],
            "forced_stop"
        );
    }
}
