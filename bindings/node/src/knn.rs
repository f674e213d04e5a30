//! `Model` (a fitted classifier: classify, classifyBatch, classProbabilities)
//! and `KnnDtw` (scikit-learn-style fit/predict/save); wraps `opsel::knn`
//! (000 §3.5: k-NN with DTW, majority vote).

use crate::dtw::{params_from_js, radius_to_js, DtwOptions};
use crate::error::{coded_error_value, guard, invalid, to_js, Code, PANIC};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use opsel::knn::{self, AnyModel, KnnConfig, TwoStageWorkspace};
use opsel::model::{KnnModelFile, Metadata};
use opsel::series::Normalization;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The outcome of classifying one window.
#[napi(object)]
#[derive(Clone)]
pub struct Prediction {
    /// Predicted class name, e.g. `"B1-C1"`.
    #[napi(js_name = "class")]
    pub class_name: String,
    /// Index of the predicted class in `model.classes`.
    pub class_index: u32,
    /// DTW distance to the nearest reference (of any class).
    pub distance: f64,
    /// Index of that nearest reference in the model's reference set.
    pub neighbor: u32,
    /// Votes the predicted class received among the k nearest.
    pub votes: u32,
    /// Share of the k votes won by the predicted class, in (0, 1].
    pub confidence: f64,
}

fn prediction(m: &AnyModel, p: knn::Prediction) -> Prediction {
    Prediction {
        class_name: m.classes()[p.class].clone(),
        class_index: p.class as u32,
        distance: p.distance,
        neighbor: p.neighbor as u32,
        votes: p.votes,
        confidence: p.confidence,
    }
}

/// Classifier settings (all optional; defaults follow 000: k = 1, radius 10,
/// cost "abs", normalization "none").
#[napi(object)]
#[derive(Default)]
pub struct KnnOptions {
    /// Neighbours that vote, 1 ≤ k ≤ number of references.
    pub k: Option<u32>,
    /// Sakoe–Chiba band radius in samples, or `Infinity` for no band.
    pub radius: Option<f64>,
    /// `"abs"` or `"squared"`.
    pub cost: Option<String>,
    /// `"none"`, `"subtract-min"`, `"divide-min"`, `"z-score"` or `"z-sorted"`.
    pub normalization: Option<String>,
}

fn config_from_js(o: &KnnOptions) -> napi::Result<KnnConfig, Code> {
    let d = KnnConfig::default();
    Ok(KnnConfig {
        k: o.k.map_or(d.k, |k| k as usize),
        dtw: params_from_js(&DtwOptions {
            radius: o.radius,
            cost: o.cost.clone(),
        })?,
        normalization: match &o.normalization {
            None => d.normalization,
            Some(n) => Normalization::parse(n).map_err(to_js)?,
        },
    })
}

fn config_to_js(c: &KnnConfig) -> KnnOptions {
    KnnOptions {
        k: Some(c.k as u32),
        radius: Some(radius_to_js(c.dtw.radius)),
        cost: Some(c.dtw.cost.name().to_string()),
        normalization: Some(c.normalization.name().to_string()),
    }
}

/// A fitted DTW K-NN background-mix classifier. Get one from `loadModel()`,
/// `modelFromJson()` or `KnnDtw.toModel()`. Each `Model` object keeps its own
/// workspace, so `classify` allocates nothing in the core. A two-stage model
/// file (`stage2`) classifies with both stages.
#[napi]
pub struct Model {
    pub(crate) file: Arc<KnnModelFile>,
    /// What classification runs: the file's model, or its two-stage
    /// classifier when the file has `stage2` (never stage 1 alone).
    clf: Arc<AnyModel>,
    ws: TwoStageWorkspace,
}

impl Model {
    pub(crate) fn new(file: Arc<KnnModelFile>) -> napi::Result<Self, Code> {
        let clf = Arc::new(file.any_model().map_err(to_js)?);
        Ok(Self::with(file, clf))
    }

    fn with(file: Arc<KnnModelFile>, clf: Arc<AnyModel>) -> Self {
        let ws = clf.workspace();
        Self { file, clf, ws }
    }
}

/// The second stage of a two-stage model (`Model.stage2`).
#[napi(object)]
pub struct Stage2 {
    /// Stage 2's per-window normalisation, e.g. `"z-score"`.
    pub normalization: String,
    /// How stage 1 splits the classes: `"bbr-present"`.
    pub split: String,
    /// Stage 2's neighbours (version-3 files; absent: 1).
    pub k: Option<u32>,
    /// Weight of stage 1's distance in stage 2's combined distance
    /// (version-3 files; absent: 0).
    pub stage1_weight: Option<f64>,
    /// The combined distance's scales `[s2, s1]` (version-3 files).
    pub scales: Option<Vec<f64>>,
}

#[napi]
impl Model {
    /// Window length w (samples per window) the model classifies.
    #[napi(getter)]
    pub fn window(&self) -> u32 {
        self.file.model.window() as u32
    }

    /// Class names; `Prediction.classIndex` indexes this array.
    #[napi(getter)]
    pub fn classes(&self) -> Vec<String> {
        self.file.model.classes().to_vec()
    }

    /// Number of reference windows.
    #[napi(getter)]
    pub fn reference_count(&self) -> u32 {
        self.file.model.len() as u32
    }

    /// The settings the model was fitted with (stage 1's for a two-stage model).
    #[napi(getter)]
    pub fn config(&self) -> KnnOptions {
        config_to_js(self.file.model.config())
    }

    /// The second stage of a two-stage model file, or `null` for one stage.
    #[napi(getter)]
    pub fn stage2(&self) -> Option<Stage2> {
        self.file.stage2.map(|s| {
            let v3 = s.needs_version_3();
            Stage2 {
                normalization: s.normalization.name().to_string(),
                split: s.split.name().to_string(),
                k: v3.then_some(s.k as u32),
                stage1_weight: v3.then_some(s.stage1_weight),
                scales: s.scales.map(|sc| sc.to_vec()),
            }
        })
    }

    /// Classify one window of `window` RTT samples (ms, 1 Hz). Throws an
    /// `Error` with `code` `"OPSEL_INVALID_INPUT"` for a wrong length or a
    /// NaN/Infinity sample (the message names the index).
    #[napi]
    pub fn classify(&mut self, window: Float64Array) -> napi::Result<Prediction, Code> {
        guard(|| {
            let p = self.clf.classify(&window, &mut self.ws).map_err(to_js)?;
            Ok(prediction(&self.clf, p))
        })
    }

    /// Vote share per class (index order of `classes`), as scikit-learn's
    /// `predict_proba`.
    #[napi]
    pub fn class_probabilities(
        &mut self,
        window: Float64Array,
    ) -> napi::Result<Float64Array, Code> {
        guard(|| {
            let mut out = vec![0.0; self.clf.classes().len()];
            self.clf
                .class_probabilities(&window, &mut self.ws, &mut out)
                .map_err(to_js)?;
            Ok(Float64Array::new(out))
        })
    }

    /// Classify many windows stored one after the other in `windows` (length
    /// a multiple of `window`), off the event loop on the libuv thread pool,
    /// using up to `threads` threads (default 0 = one per core). Resolves to
    /// one `Prediction` per window, identical to calling `classify` on each;
    /// rejects with a coded `Error` (the message names the bad window).
    #[napi(ts_return_type = "Promise<Array<Prediction>>")]
    pub fn classify_batch(
        &self,
        windows: Float64Array,
        threads: Option<u32>,
    ) -> AsyncTask<ClassifyBatch> {
        AsyncTask::new(ClassifyBatch {
            clf: Arc::clone(&self.clf),
            // Copied: the task runs on another thread while JS may reuse the array.
            windows: windows.to_vec(),
            threads: threads.unwrap_or(0) as usize,
        })
    }

    /// Write the model as a versioned JSON model file (atomically).
    #[napi]
    pub fn save(&self, path: String) -> napi::Result<(), Code> {
        guard(|| self.file.save(&path).map_err(to_js))
    }

    /// The model as model-file JSON text.
    #[napi]
    pub fn to_json(&self) -> napi::Result<String, Code> {
        guard(|| self.file.to_json().map_err(to_js))
    }
}

/// The work of `Model.classifyBatch`, run on a libuv worker thread.
pub struct ClassifyBatch {
    clf: Arc<AnyModel>,
    windows: Vec<f64>,
    threads: usize,
}

impl Task for ClassifyBatch {
    type Output = std::result::Result<Vec<knn::Prediction>, napi::Error<Code>>;
    type JsValue = Vec<Prediction>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        // A panic must not cross into libuv (it would abort the process).
        let r = catch_unwind(AssertUnwindSafe(|| {
            if self.windows.is_empty() {
                return Err(invalid(
                    "windows is empty; pass a Float64Array of n × window samples",
                ));
            }
            self.clf
                .classify_batch(&self.windows, self.threads)
                .map_err(to_js)
        }))
        .unwrap_or_else(|_| {
            Err(napi::Error::new(
                PANIC,
                "internal error in opsel during classifyBatch (a bug; please report it)",
            ))
        });
        Ok(r)
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        match output {
            Ok(ps) => Ok(ps.into_iter().map(|p| prediction(&self.clf, p)).collect()),
            Err(e) => Err(coded_error_value(env, e)),
        }
    }
}

/// A DTW K-NN estimator with a scikit-learn-like interface.
///
/// ```js
/// const clf = new KnnDtw({ k: 1, radius: 10 })
/// clf.fit(windows, 20, labels)   // windows: Float64Array of n × 20
/// clf.predict(queries)           // -> ['B1-C1', ...]
/// clf.save('model.json')
/// ```
#[napi]
pub struct KnnDtw {
    config: KnnConfig,
    /// The model file and what classifies it (two stages for a loaded
    /// two-stage file).
    fitted: Option<(Arc<KnnModelFile>, Arc<AnyModel>)>,
}

#[napi]
impl KnnDtw {
    /// Settings are checked here (unknown cost or normalisation throws).
    #[napi(constructor)]
    pub fn new(options: Option<KnnOptions>) -> napi::Result<Self, Code> {
        guard(|| {
            Ok(Self {
                config: config_from_js(&options.unwrap_or_default())?,
                fitted: None,
            })
        })
    }

    /// Load a saved model file as a fitted estimator.
    #[napi(factory)]
    pub fn load(path: String) -> napi::Result<Self, Code> {
        guard(|| {
            let file = KnnModelFile::load(&path).map_err(to_js)?;
            let clf = file.any_model().map_err(to_js)?;
            Ok(Self {
                config: *file.model.config(),
                fitted: Some((Arc::new(file), Arc::new(clf))),
            })
        })
    }

    /// Fit on `labels.length` windows of `windowLength` samples stored one
    /// after the other in `windows`. Classes become the sorted distinct labels.
    #[napi]
    pub fn fit(
        &mut self,
        windows: Float64Array,
        window_length: u32,
        labels: Vec<String>,
    ) -> napi::Result<(), Code> {
        guard(|| {
            let model =
                knn::Model::fit_labels(&windows, window_length as usize, &labels, self.config)
                    .map_err(to_js)?;
            let clf = AnyModel::One(model.clone());
            self.fitted = Some((
                Arc::new(KnnModelFile {
                    stage2: None,
                    model,
                    meta: Metadata::default(),
                }),
                Arc::new(clf),
            ));
            Ok(())
        })
    }

    fn fitted(&self) -> napi::Result<&(Arc<KnnModelFile>, Arc<AnyModel>), Code> {
        self.fitted
            .as_ref()
            .ok_or_else(|| invalid("this KnnDtw is not fitted; call fit() or KnnDtw.load() first"))
    }

    /// Predicted class name per window (windows stored one after the other).
    /// Runs on the calling thread; use `toModel().classifyBatch()` to stay off
    /// the event loop.
    #[napi]
    pub fn predict(&self, windows: Float64Array) -> napi::Result<Vec<String>, Code> {
        guard(|| {
            let (_, c) = self.fitted()?;
            if windows.is_empty() {
                return Err(invalid("windows is empty; pass n × window samples"));
            }
            let ps = c.classify_batch(&windows, 1).map_err(to_js)?;
            Ok(ps
                .into_iter()
                .map(|p| c.classes()[p.class].clone())
                .collect())
        })
    }

    /// Class names after fitting (sorted distinct labels).
    #[napi(getter)]
    pub fn classes(&self) -> napi::Result<Vec<String>, Code> {
        guard(|| Ok(self.fitted()?.1.classes().to_vec()))
    }

    /// Write the fitted model as a versioned JSON model file.
    #[napi]
    pub fn save(&self, path: String) -> napi::Result<(), Code> {
        guard(|| self.fitted()?.0.save(&path).map_err(to_js))
    }

    /// The fitted classifier as a `Model` (shares the references, no copy).
    #[napi]
    pub fn to_model(&self) -> napi::Result<Model, Code> {
        guard(|| {
            let (f, c) = self.fitted()?;
            Ok(Model::with(Arc::clone(f), Arc::clone(c)))
        })
    }
}
