//! Versioned JSON model files (DESIGN.md, Conventions: `"format": "opsel-model"`,
//! `"version": 1`, `"kind"`, training metadata). Loading validates everything
//! and rejects unknown formats, kinds and versions with a clear error.
//!
//! Saving a fitted classifier and loading it back:
//!
//! ```
//! use opsel::knn::{KnnConfig, Model};
//! use opsel::model::{KnnModelFile, Metadata};
//!
//! let refs = [20.0, 20.5, 21.0, 50.0, 58.0, 47.0];
//! let model = Model::fit_labels(&refs, 3, &["B0-C0", "B1-C0"], KnnConfig::default())?;
//! let file = KnnModelFile { model, meta: Metadata::default(), stage2: None };
//!
//! let json = file.to_json()?;
//! assert!(json.contains(r#""format":"opsel-model""#));
//! let path = std::env::temp_dir().join(format!("opsel-doc-model-{}.json", std::process::id()));
//! file.save(&path)?;
//! let back = KnnModelFile::load(&path)?;
//! std::fs::remove_file(&path).ok();
//! assert_eq!(back.to_json()?, json); // floats round-trip exactly
//! assert_eq!(back.model.classes(), ["B0-C0", "B1-C0"]);
//! // A file that is not an opsel model is rejected with a clear error.
//! assert!(KnnModelFile::from_json(r#"{"format": "something-else"}"#).is_err());
//! # Ok::<(), opsel::Error>(())
//! ```

use crate::dtw::{Cost, DtwParams};
use crate::error::{Error, Result};
use crate::knn::{self, KnnConfig};
use crate::series::Normalization;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The `format` value of every opsel model file.
pub const FORMAT: &str = "opsel-model";
/// The model-file version every kind shares ([`check_format`]); a knn-dtw
/// file is written with it unless it has a second stage ([`VERSION_STAGE2`]).
pub const VERSION: u64 = 1;
/// The version of a knn-dtw file with a `stage2` field: an older reader,
/// which knows version 1 only, refuses it instead of running stage 1 alone.
pub const VERSION_STAGE2: u64 = 2;
/// The version of a knn-dtw file whose `stage2` carries `k`,
/// `stage1_weight` or `scales` (the combined k-NN stage 2): a reader of
/// version 2 would ignore nothing (it denies unknown fields) but refuses it
/// by the version first, with the clearer message.
pub const VERSION_STAGE2_KNN: u64 = 3;
/// The version of a knn-dtw file with a `stage1_term` (the 1-NN of record
/// ranked by `D1 / s1 + b · F / sF`, `knn::Stage1Term`), with or without a
/// `stage2`: a reader of version 3 would answer with D1 alone, so it must
/// refuse the file. Readers of this build accept 1 to 4.
pub const VERSION_STAGE1_TERM: u64 = 4;
/// The `kind` of a DTW K-NN background-mix classifier.
pub const KIND_KNN_DTW: &str = "knn-dtw";

/// How the RTT series the model classifies was probed (000 §3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probing {
    /// `passive` (ping only) or `active` (ping while sending a probing pattern).
    pub mode: ProbingMode,
    /// The active pattern, e.g. `S5-C5-S5-B5`; absent for passive models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Echoes averaged into one sample (000: 10).
    #[serde(default = "default_echoes")]
    pub echoes_per_sample: usize,
    /// Spacing of the echoes within a sample, ms (000: 1).
    #[serde(default = "default_echo_gap")]
    pub echo_interval_ms: f64,
    /// Time between samples, ms (000: 1000, i.e. 1 Hz).
    #[serde(default = "default_sample_interval")]
    pub sample_interval_ms: f64,
}

fn default_echoes() -> usize {
    crate::series::DEFAULT_ECHOES_PER_SAMPLE
}
fn default_echo_gap() -> f64 {
    1.0
}
fn default_sample_interval() -> f64 {
    1000.0
}

impl Probing {
    /// The checks a model file's probing section must pass (also for a
    /// model built in memory before it is written).
    pub fn validate(&self) -> Result<()> {
        if let Some(p) = &self.pattern {
            if self.mode == ProbingMode::Passive {
                return Err(Error::InvalidModel(format!("a passive model carries a probing pattern {p:?}; remove it or set mode \"active\"")));
            }
        }
        if self.echoes_per_sample == 0 {
            return Err(Error::InvalidModel("probing.echoes_per_sample is 0".into()));
        }
        for (name, v) in [
            ("echo_interval_ms", self.echo_interval_ms),
            ("sample_interval_ms", self.sample_interval_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::InvalidModel(format!(
                    "probing.{name} is {v}; it must be a positive number"
                )));
            }
        }
        Ok(())
    }
}

impl Default for Probing {
    fn default() -> Self {
        Self {
            mode: ProbingMode::Passive,
            pattern: None,
            echoes_per_sample: default_echoes(),
            echo_interval_ms: default_echo_gap(),
            sample_interval_ms: default_sample_interval(),
        }
    }
}

/// Passive or active probing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbingMode {
    Passive,
    Active,
}

/// Everything in a model file besides the reference data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// How queries must be probed to match the training data.
    pub probing: Probing,
    /// Free-form training conditions (bottleneck, RTT, buffer, dates, source).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub training: serde_json::Value,
}

/// A DTW K-NN model with its metadata, as stored in a model file.
///
/// With `stage2` the file describes a two-stage classifier
/// ([`knn::TwoStage`]) over `model`'s references: classify through
/// [`KnnModelFile::any_model`] (or `ops::ControllerSpec`), never through
/// `model` alone, which is stage 1's one-stage answer.
#[derive(Debug, Clone)]
pub struct KnnModelFile {
    /// The references, classes and settings (stage 1's normalisation).
    pub model: knn::Model,
    pub meta: Metadata,
    /// The second stage, if any (`"stage2"` in the file, version 2, or 3
    /// with its k-NN fields).
    pub stage2: Option<knn::Stage2>,
}
// The stage-1 term lives on `model` (`knn::Model::stage1_term`): a file with
// `"stage1_term"` is version 4.

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: String,
    version: u64,
    kind: String,
    window: usize,
    k: usize,
    dtw: WireDtw,
    normalization: String,
    probing: Probing,
    classes: Vec<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    training: serde_json::Value,
    /// Version 2 only: the two-stage classifier's second stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage2: Option<WireStage2>,
    /// Version 4 only: the stage-1 term.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage1_term: Option<WireTerm>,
    references: WireRefs,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireTerm {
    /// The window feature (`sorted-steps`).
    kind: String,
    /// `b`, the weight of F / sF (> 0).
    weight: f64,
    /// `[s1, sF]`, fixed at fit.
    scales: Vec<f64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireStage2 {
    /// Stage 2's per-window normalisation (`none`, `subtract-min`,
    /// `divide-min`, `z-score`).
    normalization: String,
    /// How stage 1 splits the classes (`bbr-present`).
    split: String,
    /// Version 3: stage 2's neighbours (absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<usize>,
    /// Version 3: the weight of stage 1's distance (absent: 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stage1_weight: Option<f64>,
    /// Version 3: the scales `[s2, s1]` (required with a weight above 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scales: Option<Vec<f64>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireDtw {
    /// Sakoe–Chiba radius; null = unconstrained.
    radius: Option<usize>,
    cost: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRefs {
    labels: Vec<u32>,
    windows: Vec<Vec<f64>>,
}

impl KnnModelFile {
    /// Parse and validate model JSON.
    pub fn from_json(text: &str) -> Result<Self> {
        // Look at the envelope first so a foreign or newer file gets the right message.
        let head: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::InvalidModel(format!(
                "not valid JSON ({e}); is this an opsel model file?"
            ))
        })?;
        let version = check_knn_header(&head)?;
        let w: Wire = serde_json::from_value(head).map_err(|e| {
            Error::InvalidModel(format!(
                "knn-dtw model does not match format version {version}: {e}"
            ))
        })?;
        let knn_fields = w
            .stage2
            .as_ref()
            .is_some_and(|s| s.k.is_some() || s.stage1_weight.is_some() || s.scales.is_some());
        match (&w.stage1_term, version) {
            (Some(_), v) if v != VERSION_STAGE1_TERM => {
                return Err(Error::InvalidModel(format!(
                    "a knn-dtw file with \"stage1_term\" must have version {VERSION_STAGE1_TERM} (it has {v}), so that readers that rank stage 1 by DTW alone refuse it; set \"version\": {VERSION_STAGE1_TERM}"
                )))
            }
            (None, VERSION_STAGE1_TERM) => {
                return Err(Error::InvalidModel(format!(
                    "a knn-dtw file of version {VERSION_STAGE1_TERM} must have a \"stage1_term\" object; add it or set the version the rest of the file needs (1 one stage, 2 or 3 with stage2)"
                )))
            }
            _ => {}
        }
        match (&w.stage2, version) {
            (Some(_), VERSION) => {
                return Err(Error::InvalidModel(format!(
                    "a knn-dtw file with \"stage2\" must have version {VERSION_STAGE2} (it has {VERSION}), so that readers that know one stage only refuse it; set \"version\": {VERSION_STAGE2}"
                )))
            }
            (None, VERSION_STAGE2 | VERSION_STAGE2_KNN) => {
                return Err(Error::InvalidModel(format!(
                    "a knn-dtw file of version {version} must have a \"stage2\" object (a one-stage model is version {VERSION}); add stage2 or set \"version\": {VERSION}"
                )))
            }
            (Some(_), VERSION_STAGE2) if knn_fields => {
                return Err(Error::InvalidModel(format!(
                    "stage2 has k, stage1_weight or scales, which need version {VERSION_STAGE2_KNN} (the file has {VERSION_STAGE2}), so that readers that know the 1-NN stage 2 only refuse it; set \"version\": {VERSION_STAGE2_KNN}"
                )))
            }
            _ => {}
        }
        w.probing.validate()?;
        if w.references.labels.len() != w.references.windows.len() {
            return Err(Error::InvalidModel(format!(
                "references have {} labels but {} windows",
                w.references.labels.len(),
                w.references.windows.len()
            )));
        }
        if let Some((i, r)) = w
            .references
            .windows
            .iter()
            .enumerate()
            .find(|(_, r)| r.len() != w.window)
        {
            return Err(Error::InvalidModel(format!(
                "reference window {i} has {} samples, the model's window is {}",
                r.len(),
                w.window
            )));
        }
        for c in 0..w.classes.len() as u32 {
            if !w.references.labels.contains(&c) {
                return Err(Error::InvalidModel(format!(
                    "class {:?} has no reference window; a class that can never be predicted means the file is damaged",
                    w.classes[c as usize]
                )));
            }
        }
        let config = KnnConfig {
            k: w.k,
            dtw: DtwParams {
                radius: w.dtw.radius,
                cost: Cost::parse(&w.dtw.cost).map_err(to_model)?,
            },
            normalization: Normalization::parse(&w.normalization).map_err(to_model)?,
        };
        let stage2 = match &w.stage2 {
            None => None,
            Some(s) => Some(knn::Stage2 {
                normalization: Normalization::parse(&s.normalization)
                    .map_err(|e| Error::InvalidModel(format!("stage2.normalization: {e}")))?,
                split: knn::Split::parse(&s.split)
                    .map_err(|e| Error::InvalidModel(format!("stage2.split: {e}")))?,
                k: s.k.unwrap_or(1),
                stage1_weight: s.stage1_weight.unwrap_or(0.0),
                scales: match s.scales.as_deref() {
                    None => None,
                    Some(&[s2, s1]) => Some([s2, s1]),
                    Some(other) => {
                        return Err(Error::InvalidModel(format!(
                            "stage2.scales has {} values; it must be two, [s2, s1]",
                            other.len()
                        )))
                    }
                },
            }),
        };
        let flat: Vec<f64> = w.references.windows.concat();
        let term = match &w.stage1_term {
            None => None,
            Some(t) => {
                let kind = knn::TermKind::parse(&t.kind)
                    .map_err(|e| Error::InvalidModel(format!("stage1_term.kind: {e}")))?;
                let scales = match t.scales.as_slice() {
                    &[s1, sf] => [s1, sf],
                    other => {
                        return Err(Error::InvalidModel(format!(
                            "stage1_term.scales has {} values; it must be two, [s1, sF]",
                            other.len()
                        )))
                    }
                };
                if t.weight == 0.0 {
                    return Err(Error::InvalidModel(
                        "stage1_term.weight is 0; a file without the term has no stage1_term (and the version the rest needs)".into(),
                    ));
                }
                let term = knn::Stage1Term {
                    kind,
                    weight: t.weight,
                    scales: Some(scales),
                };
                term.check(true)
                    .map_err(|e| Error::InvalidModel(e.to_string()))?;
                Some(term)
            }
        };
        let model = knn::Model::fit(&flat, w.window, &w.references.labels, w.classes, config)
            .and_then(|m| m.with_stage1_term(term))
            .map_err(to_model)?;
        if let Some(s) = stage2 {
            knn::TwoStage::validate(&model, s)
                .map_err(|e| Error::InvalidModel(format!("stage2: {e}")))?;
        }
        Ok(Self {
            model,
            meta: Metadata {
                probing: w.probing,
                training: w.training,
            },
            stage2,
        })
    }

    /// The classifier this file describes: the one-stage model, or the
    /// two-stage one when the file has `stage2` (fits the stage models).
    pub fn any_model(&self) -> Result<knn::AnyModel> {
        knn::AnyModel::new(self.model.clone(), self.stage2)
    }

    /// Serialise to compact JSON (floats round-trip exactly). A file with a
    /// second stage is checked ([`knn::TwoStage::validate`]) and written as
    /// version 2, or 3 when the stage has k-NN fields
    /// ([`knn::Stage2::needs_version_3`]).
    pub fn to_json(&self) -> Result<String> {
        let m = &self.model;
        let c = m.config();
        if let Some(s) = self.stage2 {
            knn::TwoStage::validate(m, s)
                .map_err(|e| Error::InvalidModel(format!("cannot write the stage2 field: {e}")))?;
        }
        let wire = Wire {
            format: FORMAT.into(),
            version: match self.stage2 {
                _ if m.stage1_term().is_some() => VERSION_STAGE1_TERM,
                Some(s) if s.needs_version_3() => VERSION_STAGE2_KNN,
                Some(_) => VERSION_STAGE2,
                None => VERSION,
            },
            kind: KIND_KNN_DTW.into(),
            window: m.window(),
            k: c.k,
            dtw: WireDtw {
                radius: c.dtw.radius,
                cost: c.dtw.cost.name().into(),
            },
            normalization: c.normalization.name().into(),
            probing: self.meta.probing.clone(),
            classes: m.classes().to_vec(),
            training: self.meta.training.clone(),
            stage2: self.stage2.map(|s| WireStage2 {
                normalization: s.normalization.name().into(),
                split: s.split.name().into(),
                k: s.needs_version_3().then_some(s.k),
                stage1_weight: s.needs_version_3().then_some(s.stage1_weight),
                scales: s.scales.map(|sc| sc.to_vec()),
            }),
            stage1_term: m.stage1_term().map(|t| WireTerm {
                kind: t.kind.name().into(),
                weight: t.weight,
                scales: t.scales.map_or_else(Vec::new, |sc| sc.to_vec()),
            }),
            references: WireRefs {
                labels: m.labels().to_vec(),
                windows: m
                    .raw_references()
                    .chunks_exact(m.window())
                    .map(|w| w.to_vec())
                    .collect(),
            },
        };
        serde_json::to_string(&wire)
            .map_err(|e| Error::InvalidModel(format!("cannot serialise model: {e}")))
    }

    /// Read and validate a model file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("cannot read model file {}", path.display()), e))?;
        Self::from_json(&text).map_err(|e| match e {
            Error::InvalidModel(m) => Error::InvalidModel(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Write the model file atomically (temporary file, then rename), so a
    /// crash never leaves half a model where a good one was.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        write_atomic(path.as_ref(), &self.to_json()?, "model")
    }
}

/// Write `text` to `path` through `PATH.tmp` and a rename, so a crash never
/// leaves half a file where a good one was. `what` names the file in errors.
pub fn write_atomic(path: &Path, text: &str, what: &str) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)
        .map_err(|e| Error::io(format!("cannot write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        Error::io(
            format!("cannot move {what} into place at {}", path.display()),
            e,
        )
    })
}

/// The part of the header every opsel model file shares, whatever its kind
/// (DTW K-NN, tree ensembles, FastProb): an object with `"format":
/// "opsel-model"` and a supported `"version"`. Loaders of every kind call
/// this first, so a wrong file gets the same clear error from each.
pub fn check_format(v: &serde_json::Value) -> Result<&serde_json::Map<String, serde_json::Value>> {
    let obj = v.as_object().ok_or_else(|| {
        Error::InvalidModel("the JSON is not an object; is this an opsel model file?".into())
    })?;
    match obj.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(Error::InvalidModel(format!(
                "format is {other:?}, expected {FORMAT:?}: not an opsel model"
            )))
        }
        None => {
            return Err(Error::InvalidModel(format!(
                "no \"format\" field: not an opsel model file (expected \"format\": {FORMAT:?})"
            )))
        }
    }
    match obj.get("version").and_then(|x| x.as_u64()) {
        Some(VERSION) => Ok(obj),
        Some(found) => Err(Error::UnsupportedVersion {
            found,
            supported: VERSION,
        }),
        None => Err(Error::InvalidModel(
            "\"version\" is missing or not a whole number".into(),
        )),
    }
}

/// Check `format`, `version` and `kind` of any model file's JSON.
pub fn check_header(v: &serde_json::Value, kind: &str) -> Result<()> {
    let obj = check_format(v)?;
    match obj.get("kind").and_then(|x| x.as_str()) {
        Some(k) if k == kind => Ok(()),
        Some(k) => Err(Error::InvalidModel(format!(
            "model kind is {k:?}, expected {kind:?}"
        ))),
        None => Err(Error::InvalidModel("\"kind\" is missing".into())),
    }
}

/// `format`, `version` (1, 2 and 3 with a second stage, 4 with a stage-1
/// term) and `kind` of a
/// knn-dtw file; returns the version. The shared check knows version 1 only
/// (every kind's), so versions 2 and 3 are checked on a copy that carries
/// version 1, as FastProb files do (`fastprob::model`).
fn check_knn_header(v: &serde_json::Value) -> Result<u64> {
    match v.get("version").and_then(|x| x.as_u64()) {
        Some(found @ (VERSION_STAGE2 | VERSION_STAGE2_KNN | VERSION_STAGE1_TERM)) => {
            let mut v1 = v.clone();
            v1["version"] = serde_json::json!(VERSION);
            check_header(&v1, KIND_KNN_DTW)?;
            Ok(found)
        }
        Some(found) if found != VERSION => {
            // Format first, so a foreign file is named as such.
            check_format_only(v)?;
            Err(Error::UnsupportedVersion {
                found,
                supported: VERSION_STAGE1_TERM,
            })
        }
        _ => check_header(v, KIND_KNN_DTW).map(|()| VERSION),
    }
}

/// [`check_format`]'s format test alone.
fn check_format_only(v: &serde_json::Value) -> Result<()> {
    let mut v1 = v.clone();
    if let Some(o) = v1.as_object_mut() {
        o.insert("version".into(), serde_json::json!(VERSION));
    }
    check_format(&v1).map(|_| ())
}

fn to_model(e: Error) -> Error {
    match e {
        Error::InvalidInput(m) => Error::InvalidModel(m),
        other => other,
    }
}

/// Load a DTW K-NN model file (shorthand for [`KnnModelFile::load`]).
pub fn load(path: impl AsRef<Path>) -> Result<KnnModelFile> {
    KnnModelFile::load(path)
}

#[cfg(test)]
mod tests;
