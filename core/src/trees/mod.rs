//! Flat tree-ensemble inference: gradient boosting and random forests, regression and
//! binary/multi-class classification, as trained by scikit-learn and exported by
//! `opsel.train` (001 Ch 6 ML estimator; shared with FastProb, 004).
//!
//! Model file (versioned JSON, DESIGN.md "Model files"):
//! ```json
//! {"format": "opsel-model", "version": 1, "kind": "gbt-regressor",
//!  "n_features": 66, "n_outputs": 1, "base_score": [0.93], "learning_rate": 0.1,
//!  "trees": [{"feature": [3, -1, -1], "threshold": [0.25, 0, 0],
//!             "left": [1, -1, -1], "right": [2, -1, -1], "value": [0, 0.1, -0.2]}],
//!  "training": {...}}
//! ```
//! `kind` ∈ {gbt-regressor, gbt-classifier (binary, log-loss), rf-regressor,
//! rf-classifier}. Leaves have `feature < 0`. `value` holds `n_outputs` numbers per
//! node (rf-classifier: class probabilities; otherwise 1). Inference matches
//! scikit-learn exactly: features are rounded to f32 before each comparison
//! (`x <= threshold` goes left), and boosting adds `learning_rate · leaf` tree by tree
//! starting from `base_score`. Prediction allocates nothing.
//!
//! Optional `"threshold_dtype": "float64"` (gradient boosting only): the features are
//! compared unrounded with f64 thresholds, as scikit-learn's
//! `HistGradientBoosting{Regressor,Classifier}.predict` does on float64 input (its
//! `num_threshold`; leaves already carry the shrinkage, so such files say
//! `learning_rate: 1`). The default `"float32"` is the rule of scikit-learn's
//! `DecisionTree`-based ensembles.
//!
//! Loading a one-tree boosted regressor and predicting: `x₀ ≤ 0.25` goes left
//! (leaf 0.1), otherwise right (leaf −0.2), scaled by the learning rate and
//! added to the base score:
//!
//! ```
//! use opsel::trees::{Ensemble, Kind};
//!
//! let model = Ensemble::from_json(r#"{
//!     "format": "opsel-model", "version": 1, "kind": "gbt-regressor",
//!     "n_features": 2, "n_outputs": 1, "base_score": [0.93], "learning_rate": 0.1,
//!     "trees": [{"feature": [0, -1, -1], "threshold": [0.25, 0, 0],
//!                "left": [1, -1, -1], "right": [2, -1, -1], "value": [0, 0.1, -0.2]}]
//! }"#)?;
//! assert_eq!((model.kind(), model.n_features(), model.n_trees()), (Kind::GbtRegressor, 2, 1));
//! assert!((model.predict(&[0.1, 7.0])? - 0.94).abs() < 1e-12); // 0.93 + 0.1 · 0.1
//! assert!((model.predict(&[0.5, 7.0])? - 0.91).abs() < 1e-12); // 0.93 + 0.1 · (−0.2)
//! assert!(model.predict(&[0.1]).is_err()); // one feature short
//! # Ok::<(), opsel::Error>(())
//! ```

use crate::error::{Error, Result};
use serde::Deserialize;

/// Model-file format tag.
pub const FORMAT: &str = "opsel-model";
/// Model-file version this build reads.
pub const VERSION: u64 = 1;
const LEAF: u32 = u32::MAX;

/// What the ensemble computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Gradient-boosted regression trees (squared error).
    GbtRegressor,
    /// Gradient-boosted binary classifier (log-loss): `P(class 1) = σ(raw)`.
    GbtClassifier,
    /// Random-forest regressor (mean of trees).
    RfRegressor,
    /// Random-forest classifier (mean of per-tree class probabilities).
    RfClassifier,
}

impl Kind {
    /// The `kind` string of the model file.
    pub fn name(self) -> &'static str {
        match self {
            Kind::GbtRegressor => "gbt-regressor",
            Kind::GbtClassifier => "gbt-classifier",
            Kind::RfRegressor => "rf-regressor",
            Kind::RfClassifier => "rf-classifier",
        }
    }
    fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "gbt-regressor" => Kind::GbtRegressor,
            "gbt-classifier" => Kind::GbtClassifier,
            "rf-regressor" => Kind::RfRegressor,
            "rf-classifier" => Kind::RfClassifier,
            _ => {
                return Err(Error::InvalidModel(format!(
                    "unknown kind {s:?}; expected gbt-regressor, gbt-classifier, rf-regressor or rf-classifier"
                )))
            }
        })
    }
}

#[derive(Deserialize)]
struct RawTree {
    feature: Vec<i64>,
    threshold: Vec<f64>,
    left: Vec<i64>,
    right: Vec<i64>,
    value: Vec<f64>,
}

#[derive(Deserialize)]
struct RawModel {
    format: String,
    version: u64,
    kind: String,
    n_features: usize,
    #[serde(default = "one")]
    n_outputs: usize,
    #[serde(default)]
    base_score: Vec<f64>,
    #[serde(default = "one_f")]
    learning_rate: f64,
    trees: Vec<RawTree>,
    #[serde(default)]
    training: serde_json::Value,
    #[serde(default)]
    threshold_dtype: Option<String>,
}
fn one() -> usize {
    1
}
fn one_f() -> f64 {
    1.0
}

/// 16-byte node: the child is picked by index (`child[(x > t) as usize]`), which
/// compiles without a data-dependent branch.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Node {
    /// Largest f32 not above the f64 threshold: for any f32 `x`,
    /// `x <= t_f64  ⇔  x <= t_f32` (exact, so scikit-learn's float32 rule is kept).
    threshold: f32,
    feature: u32,
    child: [u32; 2],
}

/// Round an f64 threshold down to the largest f32 that is <= it.
fn f32_floor(t: f64) -> f32 {
    let r = t as f32;
    if (r as f64) <= t {
        return r;
    }
    // Next f32 below r (r is finite or +inf here, and > t).
    if r == 0.0 {
        -f32::from_bits(1)
    } else if r > 0.0 {
        f32::from_bits(r.to_bits() - 1)
    } else {
        f32::from_bits(r.to_bits() + 1)
    }
}

/// Features rounded to f32 once per prediction; stack buffer for up to this many.
const STACK_FEATURES: usize = 512;

/// A validated, flattened ensemble.
#[derive(Debug, Clone, PartialEq)]
pub struct Ensemble {
    kind: Kind,
    n_features: usize,
    n_outputs: usize,
    base_score: f64,
    learning_rate: f64,
    nodes: Vec<Node>,
    /// Exact f64 thresholds per node (`threshold_dtype: float64`), else empty.
    th64: Vec<f64>,
    /// `n_outputs` values per node, same indexing as `nodes`.
    values: Vec<f64>,
    roots: Vec<u32>,
    training: serde_json::Value,
}

fn bad(msg: String) -> Error {
    Error::InvalidModel(msg)
}

impl Ensemble {
    /// Parse and validate a model file's JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        let probe: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("not JSON ({e}); expected an opsel-model file")))?;
        crate::model::check_format(&probe)?;
        let raw: RawModel = serde_json::from_value(probe)
            .map_err(|e| bad(format!("malformed tree-ensemble model: {e}")))?;
        debug_assert_eq!(raw.format, FORMAT);
        debug_assert_eq!(raw.version, VERSION);
        Self::from_raw(raw)
    }

    /// Read and validate a model file.
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading model file {}", path.display()), e))?;
        Self::from_json(&text)
    }

    fn from_raw(raw: RawModel) -> Result<Self> {
        let kind = Kind::parse(&raw.kind)?;
        if raw.n_features == 0 || raw.n_features > u32::MAX as usize - 1 {
            return Err(bad(format!(
                "n_features {} must be in 1..2^32-1",
                raw.n_features
            )));
        }
        let n_out = raw.n_outputs;
        let want_out_ok = match kind {
            Kind::RfClassifier => n_out >= 2,
            _ => n_out == 1,
        };
        if !want_out_ok {
            return Err(bad(format!(
                "n_outputs {n_out} does not fit kind {} (classifier forests: number of classes >= 2, others: 1)",
                kind.name()
            )));
        }
        if raw.trees.is_empty() {
            return Err(bad("model has no trees".into()));
        }
        let base_score = match kind {
            Kind::GbtRegressor | Kind::GbtClassifier => {
                if raw.base_score.len() != 1 || !raw.base_score[0].is_finite() {
                    return Err(bad(format!(
                        "gradient boosting needs one finite base_score, got {:?}",
                        raw.base_score
                    )));
                }
                raw.base_score[0]
            }
            _ => 0.0,
        };
        if !raw.learning_rate.is_finite() {
            return Err(bad(format!(
                "learning_rate {} must be finite",
                raw.learning_rate
            )));
        }
        let exact = match raw.threshold_dtype.as_deref() {
            None | Some("float32") => false,
            Some("float64") if matches!(kind, Kind::GbtRegressor | Kind::GbtClassifier) => true,
            Some("float64") => {
                return Err(bad(format!(
                    "threshold_dtype \"float64\" is only supported for gradient boosting, not {}",
                    kind.name()
                )))
            }
            Some(other) => {
                return Err(bad(format!(
                    "threshold_dtype {other:?}: expected \"float32\" (scikit-learn trees) or \"float64\" (HistGradientBoosting)"
                )))
            }
        };
        let mut nodes = Vec::new();
        let mut th64 = Vec::new();
        let mut values = Vec::new();
        let mut roots = Vec::with_capacity(raw.trees.len());
        for (t, tree) in raw.trees.iter().enumerate() {
            let m = tree.feature.len();
            if m == 0
                || tree.threshold.len() != m
                || tree.left.len() != m
                || tree.right.len() != m
                || tree.value.len() != m * n_out
            {
                return Err(bad(format!(
                    "tree {t}: arrays feature/threshold/left/right/value have lengths {}/{}/{}/{}/{}; expected n, n, n, n, n*{n_out} with n >= 1",
                    m,
                    tree.threshold.len(),
                    tree.left.len(),
                    tree.right.len(),
                    tree.value.len()
                )));
            }
            let off = nodes.len();
            if off + m > LEAF as usize {
                return Err(bad("ensemble has too many nodes".into()));
            }
            roots.push(off as u32);
            for i in 0..m {
                let f = tree.feature[i];
                if f < 0 {
                    // Single-output leaves carry their value inline (one cache line
                    // less per tree); multi-output values stay in `values`.
                    let bits = if n_out == 1 {
                        tree.value[i].to_bits()
                    } else {
                        0
                    };
                    nodes.push(Node {
                        feature: LEAF,
                        child: [bits as u32, (bits >> 32) as u32],
                        threshold: 0.0,
                    });
                    if exact {
                        th64.push(0.0);
                    }
                } else {
                    let (l, r) = (tree.left[i], tree.right[i]);
                    // Children after their parent (scikit-learn's depth-first ids):
                    // guarantees every walk terminates.
                    if f as usize >= raw.n_features {
                        return Err(bad(format!(
                            "tree {t} node {i}: feature {f} >= n_features {}",
                            raw.n_features
                        )));
                    }
                    if l <= i as i64 || r <= i as i64 || l >= m as i64 || r >= m as i64 {
                        return Err(bad(format!(
                            "tree {t} node {i}: children {l}/{r} must lie in ({i}, {m})"
                        )));
                    }
                    let th = tree.threshold[i];
                    if th.is_nan() {
                        return Err(bad(format!("tree {t} node {i}: threshold is NaN")));
                    }
                    nodes.push(Node {
                        feature: f as u32,
                        child: [(off as i64 + l) as u32, (off as i64 + r) as u32],
                        threshold: f32_floor(th),
                    });
                    if exact {
                        th64.push(th);
                    }
                }
            }
            for (j, v) in tree.value.iter().enumerate() {
                if !v.is_finite() {
                    return Err(bad(format!("tree {t}: value[{j}] = {v} is not finite")));
                }
            }
            values.extend_from_slice(&tree.value);
        }
        Ok(Ensemble {
            kind,
            n_features: raw.n_features,
            n_outputs: n_out,
            base_score,
            learning_rate: raw.learning_rate,
            nodes,
            th64,
            values,
            roots,
            training: raw.training,
        })
    }

    /// Kind of ensemble.
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// Number of input features.
    pub fn n_features(&self) -> usize {
        self.n_features
    }
    /// Number of trees.
    pub fn n_trees(&self) -> usize {
        self.roots.len()
    }
    /// Number of classes of an rf-classifier (2 for gbt-classifier, 1 otherwise).
    pub fn n_classes(&self) -> usize {
        match self.kind {
            Kind::RfClassifier => self.n_outputs,
            Kind::GbtClassifier => 2,
            _ => 1,
        }
    }
    /// The free-form training metadata of the file.
    pub fn training(&self) -> &serde_json::Value {
        &self.training
    }

    #[inline]
    fn leaf(&self, root: u32, x: &[f32]) -> usize {
        let mut i = root as usize;
        loop {
            let n = &self.nodes[i];
            if n.feature == LEAF {
                return i;
            }
            // scikit-learn: float32(x) <= threshold goes left.
            i = n.child[(x[n.feature as usize] > n.threshold) as usize] as usize;
        }
    }

    /// Like [`Self::leaf`] with unrounded features and f64 thresholds (`th64`).
    #[inline]
    fn leaf64(&self, root: u32, x: &[f64]) -> usize {
        let mut i = root as usize;
        loop {
            let n = &self.nodes[i];
            if n.feature == LEAF {
                return i;
            }
            // HistGradientBoosting: x <= num_threshold goes left (no NaN: checked).
            i = n.child[(x[n.feature as usize] > self.th64[i]) as usize] as usize;
        }
    }

    /// Inline value of single-output leaf `i`.
    #[inline]
    fn leaf_value(&self, i: usize) -> f64 {
        let c = self.nodes[i].child;
        f64::from_bits((c[1] as u64) << 32 | c[0] as u64)
    }

    /// Run `f` with the features rounded to f32 (on the stack when they fit).
    #[inline]
    fn with_f32<R>(&self, x: &[f64], f: impl FnOnce(&[f32]) -> R) -> R {
        if x.len() <= STACK_FEATURES {
            let mut buf = [0f32; STACK_FEATURES];
            for (b, v) in buf.iter_mut().zip(x) {
                *b = *v as f32;
            }
            f(&buf[..x.len()])
        } else {
            // Wide models (> 512 features) pay one allocation per call.
            let v: Vec<f32> = x.iter().map(|v| *v as f32).collect();
            f(&v)
        }
    }

    fn check_x(&self, x: &[f64]) -> Result<()> {
        if x.len() != self.n_features {
            return Err(Error::invalid(format!(
                "feature vector has {} values but the model expects {}",
                x.len(),
                self.n_features
            )));
        }
        crate::error::check_finite("feature vector", x)
    }

    /// Raw score: regression output, or the log-odds of a gbt-classifier.
    /// For rf-classifier: probability of the last class. Allocation-free.
    pub fn predict_raw(&self, x: &[f64]) -> Result<f64> {
        self.check_x(x)?;
        if !self.th64.is_empty() {
            // Gradient boosting only (checked at load).
            let mut raw = self.base_score;
            for &r in &self.roots {
                raw += self.learning_rate * self.leaf_value(self.leaf64(r, x));
            }
            return Ok(raw);
        }
        Ok(self.with_f32(x, |x| self.raw_f32(x)))
    }

    fn raw_f32(&self, x: &[f32]) -> f64 {
        match self.kind {
            Kind::GbtRegressor | Kind::GbtClassifier => {
                let mut raw = self.base_score;
                for &r in &self.roots {
                    raw += self.learning_rate * self.leaf_value(self.leaf(r, x));
                }
                raw
            }
            Kind::RfRegressor => {
                let mut s = 0.0;
                for &r in &self.roots {
                    s += self.leaf_value(self.leaf(r, x));
                }
                s / self.roots.len() as f64
            }
            Kind::RfClassifier => {
                let k = self.n_outputs;
                let mut s = 0.0;
                for &r in &self.roots {
                    s += self.values[self.leaf(r, x) * k + k - 1];
                }
                s / self.roots.len() as f64
            }
        }
    }

    /// Regression output, or for classifiers the probability of the positive (last)
    /// class — what `predict` of scikit-learn regressors / `predict_proba[:, -1]` return.
    pub fn predict(&self, x: &[f64]) -> Result<f64> {
        let raw = self.predict_raw(x)?;
        Ok(match self.kind {
            Kind::GbtClassifier => 1.0 / (1.0 + (-raw).exp()),
            _ => raw,
        })
    }

    /// A random-forest regressor's output and the population standard deviation of
    /// its trees' outputs around it (how much the trees disagree; FastProb's
    /// tree-spread gate input, docs/results/fastprob.md "Forest spread"). The mean is
    /// summed in tree order exactly as [`Self::predict`] (and scikit-learn's
    /// `RandomForestRegressor.predict`) sums it; the spread is a second pass,
    /// sqrt(Σ (v_t − mean)² / T) in tree order (numpy's `std`, ddof 0). Other
    /// kinds are an error. Allocation-free.
    pub fn predict_mean_sd(&self, x: &[f64]) -> Result<(f64, f64)> {
        if self.kind != Kind::RfRegressor {
            return Err(Error::invalid(format!(
                "the tree spread needs an rf-regressor, not a {}",
                self.kind.name()
            )));
        }
        self.check_x(x)?;
        Ok(self.with_f32(x, |x| {
            let t = self.roots.len() as f64;
            let mut s = 0.0;
            for &r in &self.roots {
                s += self.leaf_value(self.leaf(r, x));
            }
            let mean = s / t;
            let mut ss = 0.0;
            for &r in &self.roots {
                let d = self.leaf_value(self.leaf(r, x)) - mean;
                ss += d * d;
            }
            (mean, (ss / t).sqrt())
        }))
    }

    /// Class probabilities into `out` (length [`Ensemble::n_classes`]); regressors are
    /// an error. Allocation-free.
    pub fn predict_proba(&self, x: &[f64], out: &mut [f64]) -> Result<()> {
        self.check_x(x)?;
        if out.len() != self.n_classes() || self.n_classes() < 2 {
            return Err(Error::invalid(format!(
                "probability buffer of length {} for a {} with {} classes",
                out.len(),
                self.kind.name(),
                self.n_classes()
            )));
        }
        match self.kind {
            Kind::GbtClassifier => {
                let p = self.predict(x)?;
                out[0] = 1.0 - p;
                out[1] = p;
            }
            Kind::RfClassifier => {
                let k = self.n_outputs;
                out.iter_mut().for_each(|o| *o = 0.0);
                let leaves = |x: &[f32], out: &mut [f64]| {
                    for &r in &self.roots {
                        let l = self.leaf(r, x);
                        for (o, v) in out.iter_mut().zip(&self.values[l * k..(l + 1) * k]) {
                            *o += v;
                        }
                    }
                };
                self.with_f32(x, |x| leaves(x, out));
                let n = self.roots.len() as f64;
                out.iter_mut().for_each(|o| *o /= n);
            }
            _ => unreachable!("n_classes() < 2 for regressors"),
        }
        Ok(())
    }

    /// Predict a batch: `x` row-major with `n_features` columns, one output per row.
    pub fn predict_batch(&self, x: &[f64], out: &mut [f64]) -> Result<()> {
        if x.len() != out.len() * self.n_features {
            return Err(Error::invalid(format!(
                "batch of {} values is not {} rows x {} features",
                x.len(),
                out.len(),
                self.n_features
            )));
        }
        for (row, o) in x.chunks_exact(self.n_features).zip(out.iter_mut()) {
            *o = self.predict(row)?;
        }
        Ok(())
    }
}
