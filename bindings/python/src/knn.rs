//! `opsel.Model`, `opsel.load_model`, `opsel.cross_validate` (core:
//! `opsel::knn` and `opsel::model`).

use crate::dtw::params;
use crate::errors::{to_py, IntoPy};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use opsel::knn::{self, AnyModel, KnnConfig, TwoStageWorkspace};
use opsel::model::{KnnModelFile, Metadata, Probing, ProbingMode};
use opsel::series::Normalization;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;

/// One classification: the predicted background mix and how sure the model is.
#[pyclass(module = "opsel", frozen, get_all)]
#[derive(Clone)]
pub struct Prediction {
    /// Predicted class name, e.g. "B1-C1".
    label: String,
    /// Index of the class in `Model.classes`.
    class_index: usize,
    /// DTW distance to the nearest reference window.
    distance: f64,
    /// Index of the nearest reference window.
    neighbor: usize,
    /// Votes for the predicted class among the k nearest.
    votes: u32,
    /// Share of the k votes won by the predicted class.
    confidence: f64,
}

#[pymethods]
impl Prediction {
    fn __repr__(&self) -> String {
        format!(
            "Prediction(label={:?}, distance={}, neighbor={}, votes={}, confidence={})",
            self.label, self.distance, self.neighbor, self.votes, self.confidence
        )
    }

    /// 000 §4.1 scenario 1: is BBR in the predicted mix? None when the label is not a mix.
    #[getter]
    fn bbr_present(&self) -> Option<bool> {
        opsel::mix::Mix::parse(&self.label)
            .ok()
            .map(|m| m.bbr_present())
    }

    /// 000 §4.1 scenario 2: several CCAs in the predicted mix? None when the label is not a mix.
    #[getter]
    fn heterogeneous(&self) -> Option<bool> {
        opsel::mix::Mix::parse(&self.label)
            .ok()
            .map(|m| m.heterogeneous())
    }
}

fn wrap(m: &knn::Model, p: knn::Prediction) -> Prediction {
    Prediction {
        label: m.classes()[p.class].clone(),
        class_index: p.class,
        distance: p.distance,
        neighbor: p.neighbor,
        votes: p.votes,
        confidence: p.confidence,
    }
}

/// A DTW K-NN background-mix classifier (load one with `opsel.load_model`, or
/// fit one with `Model.fit` / `opsel.KnnDtw`).
#[pyclass(module = "opsel", frozen)]
pub struct Model {
    pub(crate) file: KnnModelFile,
    /// What classification runs: the file's model, or its two-stage
    /// classifier when the file has `stage2` (never stage 1 alone).
    clf: AnyModel,
    /// A reusable workspace for single calls; concurrent callers make their own.
    ws: Mutex<TwoStageWorkspace>,
}

impl Model {
    fn new(file: KnnModelFile) -> PyResult<Self> {
        let clf = file.any_model().py_err()?;
        let ws = Mutex::new(clf.workspace());
        Ok(Self { file, clf, ws })
    }

    /// Classify the rows of `windows` on `threads` threads with the GIL released.
    fn batch(
        &self,
        py: Python<'_>,
        windows: &PyReadonlyArray2<'_, f64>,
        threads: usize,
    ) -> PyResult<Vec<knn::Prediction>> {
        let (flat, _, w) = flat_windows(windows);
        check_width(&self.file.model, w)?;
        let c = &self.clf;
        py.detach(|| c.classify_batch(&flat, threads)).py_err()
    }

    fn with_ws<R>(&self, f: impl FnOnce(&mut TwoStageWorkspace) -> R) -> R {
        match self.ws.try_lock() {
            Ok(mut ws) => f(&mut ws),
            Err(_) => f(&mut self.clf.workspace()),
        }
    }
}

fn flat_windows(x: &PyReadonlyArray2<'_, f64>) -> (Vec<f64>, usize, usize) {
    let a = x.as_array();
    let (n, w) = a.dim();
    let flat = match a.as_slice() {
        Some(s) => s.to_vec(),
        None => a.iter().copied().collect(),
    };
    (flat, n, w)
}

fn window_vec(x: &PyReadonlyArray1<'_, f64>) -> Vec<f64> {
    let a = x.as_array();
    match a.as_slice() {
        Some(s) => s.to_vec(),
        None => a.iter().copied().collect(),
    }
}

#[pymethods]
impl Model {
    /// Fit a model on windows `x` (2-D, one window per row) with integer labels
    /// `y` indexing `classes`. See `opsel.KnnDtw` for a scikit-learn estimator.
    /// `stage2` (a normalisation name, e.g. "z-score") makes a two-stage
    /// model: stage 1 decides BBR present with `normalization`, stage 2 picks
    /// the mix among that side's references with `stage2` (1-NN both).
    /// `stage2_k` > 1 or `stage2_weight` > 0 (with `stage2="z-sorted"`) make
    /// stage 2 a k-NN vote under the combined distance L/s2 + weight·D1/s1,
    /// the scales fitted by the core (`core/src/knn/combined.rs`).
    /// `stage1_steps` > 0 ranks the 1-NN of record (stage 1 of a two-stage
    /// model) by D1/s1 + stage1_steps·F/sF, F the L1 distance of the
    /// windows' sorted steps, the scales fitted by the core
    /// (`core/src/knn/steps.rs`; the file's `stage1_term`, version 4).
    #[staticmethod]
    #[pyo3(signature = (x, y, classes, k = 1, radius = Some(opsel::dtw::DEFAULT_RADIUS), cost = "abs", normalization = "none", probing = "passive", pattern = None, training = None, sample_interval_ms = 1000.0, stage2 = None, stage2_k = 1, stage2_weight = 0.0, stage1_steps = 0.0))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: Vec<i64>,
        classes: Vec<String>,
        k: usize,
        radius: Option<usize>,
        cost: &str,
        normalization: &str,
        probing: &str,
        pattern: Option<String>,
        training: Option<&Bound<'_, PyAny>>,
        sample_interval_ms: f64,
        stage2: Option<&str>,
        stage2_k: usize,
        stage2_weight: f64,
        stage1_steps: f64,
    ) -> PyResult<Self> {
        if stage2.is_none() && (stage2_k != 1 || stage2_weight != 0.0) {
            return Err(to_py(opsel::Error::invalid(format!(
                "stage2_k = {stage2_k} and stage2_weight = {stage2_weight} need a two-stage model; give stage2 (e.g. \"z-sorted\")"
            ))));
        }
        let stage2 = stage2
            .map(|n| {
                Normalization::parse(n).map(|normalization| knn::Stage2 {
                    k: stage2_k,
                    stage1_weight: stage2_weight,
                    ..knn::Stage2::new(normalization, knn::Split::BbrPresent)
                })
            })
            .transpose()
            .py_err()?;
        let (flat, n, w) = flat_windows(&x);
        if y.len() != n {
            return Err(to_py(opsel::Error::invalid(format!(
                "x has {n} windows but y has {} labels",
                y.len()
            ))));
        }
        let labels = y
            .iter()
            .enumerate()
            .map(|(i, &l)| {
                u32::try_from(l).map_err(|_| {
                    to_py(opsel::Error::invalid(format!(
                        "label {l} of window {i} is negative"
                    )))
                })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        let config = KnnConfig {
            k,
            dtw: params(radius, cost)?,
            normalization: Normalization::parse(normalization).py_err()?,
        };
        let mode = match probing {
            "passive" => ProbingMode::Passive,
            "active" => ProbingMode::Active,
            other => {
                return Err(to_py(opsel::Error::invalid(format!(
                    "probing is {other:?}; use \"passive\" or \"active\""
                ))))
            }
        };
        let training = match training {
            Some(obj) => {
                let s: String = py
                    .import("json")?
                    .call_method1("dumps", (obj,))?
                    .extract()?;
                serde_json::from_str(&s).map_err(|e| {
                    to_py(opsel::Error::invalid(format!(
                        "training metadata is not JSON-serialisable: {e}"
                    )))
                })?
            }
            None => serde_json::Value::Null,
        };
        let model = py
            .detach(|| {
                knn::Model::fit(&flat, w, &labels, classes, config).and_then(|m| {
                    m.with_stage1_term(Some(knn::Stage1Term::sorted_steps(stage1_steps)))
                })
            })
            .py_err()?;
        let probing = Probing {
            mode,
            pattern,
            sample_interval_ms,
            ..Default::default()
        };
        probing.validate().py_err()?;
        let meta = Metadata { probing, training };
        let file = KnnModelFile {
            model,
            meta,
            stage2,
        };
        py.detach(|| {
            file.any_model().map(|clf| {
                // The stage 2 the file stores: with the scales fitted.
                let mut file = file;
                file.stage2 = clf.two_stage().map(|t| t.stage2());
                (file, clf)
            })
        })
        .py_err()
        .map(|(file, clf)| {
            let ws = Mutex::new(clf.workspace());
            Self { file, clf, ws }
        })
    }

    /// Parse a model from JSON text (validated like a file).
    #[staticmethod]
    fn from_json(py: Python<'_>, text: &str) -> PyResult<Self> {
        let t = text.to_owned();
        Self::new(py.detach(|| KnnModelFile::from_json(&t)).py_err()?)
    }

    /// The model as JSON text (format "opsel-model", version 1).
    fn to_json(&self) -> PyResult<String> {
        self.file.to_json().py_err()
    }

    /// Write the model file (atomically: temporary file, then rename).
    fn save(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.file.save(path).py_err()
    }

    /// Classify one window (1-D float64 array of `window` RTT samples in ms).
    fn classify(&self, window: PyReadonlyArray1<'_, f64>) -> PyResult<Prediction> {
        let w = window_vec(&window);
        let c = &self.clf;
        let p = self.with_ws(|ws| c.classify(&w, ws)).py_err()?;
        Ok(wrap(&self.file.model, p))
    }

    /// Classify many windows (2-D array, one per row) on `threads` threads
    /// (0 = all cores) with the GIL released. Returns a list of Prediction.
    #[pyo3(signature = (windows, threads = 0))]
    fn classify_batch(
        &self,
        py: Python<'_>,
        windows: PyReadonlyArray2<'_, f64>,
        threads: usize,
    ) -> PyResult<Vec<Prediction>> {
        let m = &self.file.model;
        Ok(self
            .batch(py, &windows, threads)?
            .into_iter()
            .map(|p| wrap(m, p))
            .collect())
    }

    /// Predicted class indices for many windows (GIL released), as int64 array.
    #[pyo3(signature = (windows, threads = 0))]
    fn predict_indices<'py>(
        &self,
        py: Python<'py>,
        windows: PyReadonlyArray2<'_, f64>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let (flat, _, w) = flat_windows(&windows);
        check_width(&self.file.model, w)?;
        let c = &self.clf;
        let preds = py.detach(|| c.classify_batch(&flat, threads)).py_err()?;
        Ok(PyArray1::from_vec(
            py,
            preds.iter().map(|p| p.class as i64).collect(),
        ))
    }

    /// Vote shares per class, shape (n_windows, n_classes) (scikit-learn `predict_proba`).
    fn predict_proba<'py>(
        &self,
        py: Python<'py>,
        windows: PyReadonlyArray2<'_, f64>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (flat, n, w) = flat_windows(&windows);
        let m = &self.clf;
        check_width(&self.file.model, w)?;
        let c = m.classes().len();
        let out = py
            .detach(|| {
                let mut ws = m.workspace();
                let mut out = vec![0.0; n * c];
                for (i, row) in out.chunks_exact_mut(c).enumerate() {
                    m.class_probabilities(&flat[i * w..(i + 1) * w], &mut ws, row)
                        .map_err(|e| opsel::Error::invalid(format!("window {i}: {e}")))?;
                }
                Ok::<_, opsel::Error>(out)
            })
            .py_err()?;
        PyArray1::from_vec(py, out).reshape([n, c])
    }

    /// Window length (1 Hz samples) the model classifies.
    #[getter]
    fn window(&self) -> usize {
        self.file.model.window()
    }
    /// Class names; `Prediction.class_index` indexes this list.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.file.model.classes().to_vec()
    }
    /// Neighbours that vote.
    #[getter]
    fn k(&self) -> usize {
        self.file.model.config().k
    }
    /// Sakoe–Chiba radius (None = unconstrained).
    #[getter]
    fn radius(&self) -> Option<usize> {
        self.file.model.config().dtw.radius
    }
    /// Local cost, "abs" or "squared".
    #[getter]
    fn cost(&self) -> &'static str {
        self.file.model.config().dtw.cost.name()
    }
    /// Per-window normalisation (stage 1's for a two-stage model).
    #[getter]
    fn normalization(&self) -> &'static str {
        self.file.model.config().normalization.name()
    }
    /// The second stage of a two-stage model, as {"normalization": ...,
    /// "split": "bbr-present"}, plus "k", "stage1_weight" and "scales" when
    /// the file has them (version 3); None for a one-stage model.
    #[getter]
    fn stage2<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.file
            .stage2
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("normalization", s.normalization.name())?;
                d.set_item("split", s.split.name())?;
                if s.needs_version_3() {
                    d.set_item("k", s.k)?;
                    d.set_item("stage1_weight", s.stage1_weight)?;
                    if let Some(sc) = s.scales {
                        d.set_item("scales", sc.to_vec())?;
                    }
                }
                Ok(d)
            })
            .transpose()
    }
    /// The stage-1 term, as {"kind": "sorted-steps", "weight": b, "scales":
    /// [s1, sF]} (version 4); None without one.
    #[getter]
    fn stage1_term<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.file
            .model
            .stage1_term()
            .map(|t| {
                let d = PyDict::new(py);
                d.set_item("kind", t.kind.name())?;
                d.set_item("weight", t.weight)?;
                if let Some(sc) = t.scales {
                    d.set_item("scales", sc.to_vec())?;
                }
                Ok(d)
            })
            .transpose()
    }
    /// "passive" or "active".
    #[getter]
    fn probing(&self) -> &'static str {
        match self.file.meta.probing.mode {
            ProbingMode::Passive => "passive",
            ProbingMode::Active => "active",
        }
    }
    /// Time between the RTT samples the model was trained on, ms (1000: 000 §3.2's 1 Hz).
    #[getter]
    fn sample_interval_ms(&self) -> f64 {
        self.file.meta.probing.sample_interval_ms
    }
    /// The active probing pattern, e.g. "S5-C5-S5-B5" (None for passive models).
    #[getter]
    fn pattern(&self) -> Option<String> {
        self.file.meta.probing.pattern.clone()
    }
    /// Training metadata (a dict) or None.
    #[getter]
    fn training<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.file.meta.training.to_string();
        py.import("json")?.call_method1("loads", (s,))
    }
    /// Reference windows, shape (n_references, window).
    #[getter]
    fn references<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let m = &self.file.model;
        PyArray1::from_vec(py, m.raw_references().to_vec()).reshape([m.len(), m.window()])
    }
    /// Reference labels (class indices).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        PyArray1::from_vec(
            py,
            self.file.model.labels().iter().map(|&l| l as i64).collect(),
        )
    }
    fn __len__(&self) -> usize {
        self.file.model.len()
    }
    fn __repr__(&self) -> String {
        let m = &self.file.model;
        format!(
            "opsel.Model(window={}, references={}, classes={:?}, k={}, radius={:?}, cost={:?}, normalization={:?})",
            m.window(),
            m.len(),
            m.classes(),
            m.config().k,
            m.config().dtw.radius,
            m.config().dtw.cost.name(),
            m.config().normalization.name()
        ) + &match self.file.stage2 {
            Some(s2) => format!(
                " two-stage(split={:?}, stage2={:?}, stage2_k={}, stage2_weight={})",
                s2.split.name(),
                s2.normalization.name(),
                s2.k,
                s2.stage1_weight
            ),
            None => String::new(),
        } + &match m.stage1_term() {
            Some(t) => format!(" stage1_term({:?}, weight={})", t.kind.name(), t.weight),
            None => String::new(),
        }
    }
}

fn check_width(m: &knn::Model, w: usize) -> PyResult<()> {
    if w != m.window() {
        return Err(to_py(opsel::Error::invalid(format!(
            "windows have {w} samples per row but the model was trained on windows of {}",
            m.window()
        ))));
    }
    Ok(())
}

/// Load and validate a model file.
#[pyfunction]
fn load_model(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Model> {
    Model::new(py.detach(|| KnnModelFile::load(&path)).py_err()?)
}

/// Stratified k-fold cross-validation (000 §3.5) of a DTW K-NN configuration.
/// Returns a dict: fold_accuracy, mean_accuracy, confusion (n_classes² int64 array, rows = truth).
#[pyfunction]
#[pyo3(signature = (x, y, classes, k = 1, radius = Some(opsel::dtw::DEFAULT_RADIUS), cost = "abs", normalization = "none", folds = 5, seed = 0))]
#[allow(clippy::too_many_arguments)]
fn cross_validate<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    y: Vec<u32>,
    classes: Vec<String>,
    k: usize,
    radius: Option<usize>,
    cost: &str,
    normalization: &str,
    folds: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let (flat, _, w) = flat_windows(&x);
    let config = KnnConfig {
        k,
        dtw: params(radius, cost)?,
        normalization: Normalization::parse(normalization).py_err()?,
    };
    let r = py
        .detach(|| knn::cross_validate(&flat, w, &y, &classes, config, folds, seed))
        .py_err()?;
    let d = PyDict::new(py);
    d.set_item("fold_accuracy", r.fold_accuracy.clone())?;
    d.set_item("mean_accuracy", r.mean_accuracy)?;
    let c = r.confusion.classes();
    let conf: Vec<i64> = r.confusion.as_slice().iter().map(|&v| v as i64).collect();
    d.set_item("confusion", PyArray1::from_vec(py, conf).reshape([c, c])?)?;
    d.set_item("classes", classes)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_class::<Prediction>()?;
    m.add_function(wrap_pyfunction!(load_model, m)?)?;
    m.add_function(wrap_pyfunction!(cross_validate, m)?)?;
    Ok(())
}
