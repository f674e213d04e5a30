//! K-nearest-neighbour classification of RTT windows under DTW (000 §3.5:
//! 1-NN with DTW, warping 10, majority vote over k).
//!
//! The reference set is stored flat (`n × w` contiguous f64) with each
//! reference's band envelope precomputed at fit time, so a query runs the UCR
//! Suite cascade (LB_Enhanced over every reference in SIMD lanes, early-abandoned DTW with the
//! cumulative bound) without allocating.
//!
//! Fitting on a few labelled windows and classifying a new one:
//!
//! ```
//! use opsel::knn::{KnnConfig, Model};
//!
//! // Four references of 5 samples (ms): an idle path and one with a BBR flow.
//! let refs = [
//!     20.0, 20.5, 20.0, 21.0, 20.0, //
//!     21.0, 20.0, 20.5, 20.0, 20.5, //
//!     45.0, 60.0, 52.0, 48.0, 58.0, //
//!     50.0, 47.0, 61.0, 55.0, 49.0,
//! ];
//! let labels = ["B0-C0", "B0-C0", "B1-C0", "B1-C0"];
//! let model = Model::fit_labels(&refs, 5, &labels, KnnConfig::default())?;
//! assert_eq!(model.classes(), ["B0-C0", "B1-C0"]);
//!
//! let mut ws = model.workspace(); // reused across queries: no allocation
//! let p = model.classify(&[46.0, 59.0, 51.0, 50.0, 57.0], &mut ws)?;
//! assert_eq!(model.classes()[p.class], "B1-C0");
//! assert!(model.class_mix(p.class)?.bbr_present());
//! # Ok::<(), opsel::Error>(())
//! ```

mod batch;
mod combined;
pub mod cv;
pub mod metrics;
mod per_class;
mod prepared;
mod search;
mod steps;
mod two_stage;
mod vote;

pub use cv::{cross_validate, stratified_folds, CvReport};
pub use metrics::Confusion;
pub use per_class::{ClassSearchStats, ClassWorkspace};
pub use steps::{sorted_steps, Stage1Term, TermKind};
pub use two_stage::{
    AnyModel, CombinedStats, D1Source, Split, Stage2, TwoStage, TwoStagePrediction,
    TwoStageWorkspace, SCALE_SAMPLE,
};

use crate::dtw::{self, DtwParams};
use crate::error::{check_finite, Error, Result};
use crate::mix::Mix;
use crate::series::Normalization;

/// Classifier settings. Defaults follow 000: 1-NN, band radius 10, raw RTT.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KnnConfig {
    /// Neighbours that vote (000 §3.5: 1 is best).
    pub k: usize,
    /// DTW band and local cost.
    pub dtw: DtwParams,
    /// Per-window normalisation applied to references and queries alike.
    pub normalization: Normalization,
}

impl Default for KnnConfig {
    fn default() -> Self {
        Self {
            k: 1,
            dtw: DtwParams::default(),
            normalization: Normalization::None,
        }
    }
}

/// The outcome of classifying one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prediction {
    /// Index into [`Model::classes`].
    pub class: usize,
    /// DTW distance to the nearest reference (of any class); with a stage-1
    /// term ([`Model::with_stage1_term`]), that reference's C1.
    pub distance: f64,
    /// Index of that nearest reference in the reference set.
    pub neighbor: usize,
    /// Votes the winning class received among the k nearest.
    pub votes: u32,
    /// Share of the k votes won by the predicted class, in (0, 1].
    pub confidence: f64,
}

/// A fitted DTW K-NN classifier: flat references, their envelopes, labels.
#[derive(Debug, Clone)]
pub struct Model {
    config: KnnConfig,
    window: usize,
    classes: Vec<String>,
    /// References as given (kept so a saved model reproduces its training data).
    raw: Vec<f64>,
    /// References after normalisation; what the search compares against.
    refs: Vec<f64>,
    /// Each normalised reference's last sample, contiguous: the bound of an
    /// exact prepared finish reads one per reference (`prepared.rs`,
    /// [`Model::exact_lower_bound`]) without a cache line of `refs` each.
    refs_last: Vec<f64>,
    upper: Vec<f64>,
    lower: Vec<f64>,
    /// The same envelopes interleaved by groups of `LANES` (8) references
    /// (`[group][sample][lane]`), so the per-query bound pass over every
    /// reference runs several references per SIMD operation.
    upper_lanes: Vec<dtw::lanes::Lanes>,
    lower_lanes: Vec<dtw::lanes::Lanes>,
    /// The references interleaved the same way (LB_Enhanced's end bands).
    refs_lanes: Vec<dtw::lanes::Lanes>,
    labels: Vec<u32>,
    /// The stage-1 feature term (`steps.rs`), scales fitted; `None`: D1 alone.
    term: Option<Stage1Term>,
    /// With the term: each reference's sorted steps (`n × (w − 1)`, flat).
    steps: Vec<f64>,
    /// With the term: the block sums of each reference's sorted steps in
    /// single precision, interleaved `[group][block][lane]` (`steps.rs`, the
    /// bound on F), and the largest over references of `Σ_b |S_b − f32(S_b)|`.
    steps_blocks: Vec<[f32; dtw::lanes::LANES]>,
    steps_blocks_err: f64,
    /// Unique per fit (clones share it: a model never changes after fit), so
    /// a workspace's preparation ([`Model::prepare`]) is used only with the
    /// model that made it.
    id: u64,
}

/// Class names are distinct and every label indexes one of them (the checks
/// of [`Model::fit`], shared with [`TwoStage::fit`], whose side models are
/// fitted on side labels and cannot make them).
pub(crate) fn check_classes_and_labels(classes: &[String], labels: &[u32]) -> Result<()> {
    for (i, c) in classes.iter().enumerate() {
        if classes[..i].contains(c) {
            return Err(Error::invalid(format!("class name {c:?} appears twice")));
        }
    }
    if let Some((i, &l)) = labels
        .iter()
        .enumerate()
        .find(|(_, &l)| l as usize >= classes.len())
    {
        return Err(Error::invalid(format!(
            "label {l} of window {i} is not a class index (there are {} classes)",
            classes.len()
        )));
    }
    Ok(())
}

/// Source of [`Model`] ids; 0 means "no model".
static NEXT_MODEL_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Model {
    /// Fit on `windows` (flat, `labels.len()` windows of `window` samples) with
    /// labels given as indices into `classes`.
    pub fn fit(
        windows: &[f64],
        window: usize,
        labels: &[u32],
        classes: Vec<String>,
        config: KnnConfig,
    ) -> Result<Self> {
        if window == 0 {
            return Err(Error::invalid(
                "window length is 0; use the number of 1 Hz samples per window (000: 5..60)",
            ));
        }
        let n = labels.len();
        if n == 0 {
            return Err(Error::invalid(
                "the reference set is empty; fit needs at least one labelled window",
            ));
        }
        if windows.len() != n * window {
            return Err(Error::invalid(format!(
                "{} values do not make {n} windows of length {window} (expected {})",
                windows.len(),
                n * window
            )));
        }
        if classes.is_empty() {
            return Err(Error::invalid("no class names given"));
        }
        check_classes_and_labels(&classes, labels)?;
        if config.k == 0 || config.k > n {
            return Err(Error::invalid(format!(
                "k = {} but the reference set has {n} windows; use 1 <= k <= {n}",
                config.k
            )));
        }
        for (i, w) in windows.chunks_exact(window).enumerate() {
            check_finite(&format!("reference window {i}"), w)?;
        }
        let mut refs = windows.to_vec();
        for (i, w) in refs.chunks_exact_mut(window).enumerate() {
            config
                .normalization
                .apply(w)
                .map_err(|e| Error::invalid(format!("reference window {i}: {e}")))?;
        }
        let r = config.dtw.radius_or_max();
        let mut upper = vec![0.0; refs.len()];
        let mut lower = vec![0.0; refs.len()];
        for ((s, u), l) in refs
            .chunks_exact(window)
            .zip(upper.chunks_exact_mut(window))
            .zip(lower.chunks_exact_mut(window))
        {
            dtw::envelope(s, r, u, l);
        }
        let (upper_lanes, lower_lanes) = (interleave(&upper, window), interleave(&lower, window));
        let refs_lanes = interleave(&refs, window);
        let refs_last = refs.chunks_exact(window).map(|r| r[window - 1]).collect();
        Ok(Self {
            config,
            window,
            classes,
            raw: windows.to_vec(),
            refs,
            refs_last,
            upper,
            lower,
            upper_lanes,
            lower_lanes,
            refs_lanes,
            labels: labels.to_vec(),
            term: None,
            steps: Vec::new(),
            steps_blocks: Vec::new(),
            steps_blocks_err: 0.0,
            id: NEXT_MODEL_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// Fit with string labels; classes become the sorted distinct labels (as
    /// scikit-learn's `classes_`).
    pub fn fit_labels<S: AsRef<str>>(
        windows: &[f64],
        window: usize,
        labels: &[S],
        config: KnnConfig,
    ) -> Result<Self> {
        let mut classes: Vec<String> = labels.iter().map(|s| s.as_ref().to_string()).collect();
        classes.sort();
        classes.dedup();
        let idx: Vec<u32> = labels
            .iter()
            .map(|s| {
                classes
                    .binary_search_by(|c| c.as_str().cmp(s.as_ref()))
                    .expect("label is in classes") as u32
            })
            .collect();
        Self::fit(windows, window, &idx, classes, config)
    }

    /// Window length w the model classifies.
    pub fn window(&self) -> usize {
        self.window
    }
    /// Settings the model was fitted with.
    pub fn config(&self) -> &KnnConfig {
        &self.config
    }
    /// Class names; [`Prediction::class`] indexes this.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
    /// Number of reference windows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// True when the model has no references (never, for a fitted model).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// Reference labels (class indices).
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }
    /// References as given at fit time, flat.
    pub fn raw_references(&self) -> &[f64] {
        &self.raw
    }
    /// Reference `i` as given at fit time.
    pub fn raw_reference(&self, i: usize) -> &[f64] {
        &self.raw[i * self.window..(i + 1) * self.window]
    }
    /// The model refitted without reference `i`, same classes and config:
    /// the leave-one-out model that tests, benches and studies query with
    /// reference `i`.
    pub fn without_reference(&self, i: usize) -> Result<Model> {
        let (w, n) = (self.window, self.labels.len());
        if i >= n {
            return Err(Error::invalid(format!(
                "reference index {i} out of range (the model has {n})"
            )));
        }
        let mut x = Vec::with_capacity((n - 1) * w);
        let mut y = Vec::with_capacity(n - 1);
        for j in (0..n).filter(|&j| j != i) {
            x.extend_from_slice(self.raw_reference(j));
            y.push(self.labels[j]);
        }
        Model::fit(&x, w, &y, self.classes.clone(), self.config)?.with_stage1_term(self.term)
    }
    /// The mix a class name denotes, if it parses as one (`B1-C1` …).
    pub fn class_mix(&self, class: usize) -> Result<Mix> {
        let name = self
            .classes
            .get(class)
            .ok_or_else(|| Error::invalid(format!("class index {class} out of range")))?;
        Mix::parse(name)
    }

    /// A workspace sized for this model; reuse it for every call on one thread.
    pub fn workspace(&self) -> Workspace {
        let mut ws = Workspace::new(
            self.window,
            self.config.k,
            self.classes.len(),
            self.labels.len(),
        );
        let guesses = self.prepared_guesses();
        ws.prepared.reserve(
            self.window,
            self.labels.len(),
            guesses,
            self.last_row_cells(),
        );
        ws
    }

    /// Classify one window of `window()` samples. No allocation once `ws` came
    /// from [`Model::workspace`].
    pub fn classify(&self, window: &[f64], ws: &mut Workspace) -> Result<Prediction> {
        self.prepare_query(window, ws)?;
        if self.term.is_some() {
            return Ok(self.classify_term(window, ws, false, false).0);
        }
        if let Some(p) = self.classify_prepared(window, ws) {
            return Ok(p);
        }
        self.search(ws, true, None);
        Ok(self.vote(ws))
    }

    /// Classify without any pruning: every DTW computed in full. The reference
    /// answer the pruned search must equal (tests, benchmarks).
    pub fn classify_exhaustive(&self, window: &[f64], ws: &mut Workspace) -> Result<Prediction> {
        self.prepare_query(window, ws)?;
        if self.term.is_some() {
            return Ok(self.classify_term(window, ws, false, true).0);
        }
        self.search(ws, false, None);
        Ok(self.vote(ws))
    }

    /// Classify and measure how clearly the window belongs to its class: the
    /// DTW distance to the nearest reference of any *other* class, and the
    /// margin `1 − d_nearest / d_other` in [0, 1] (0: another class is as
    /// near; 1: only the predicted class is near). A 1-NN vote share is always
    /// 1, so progressive probing uses this margin as its confidence.
    ///
    /// With a stage-1 term ([`Model::with_stage1_term`]) both distances are
    /// C1 (the quantity the 1-NN minimises): `d_nearest` the prediction's
    /// C1, `d_other` the smallest C1 of another class, margin `1 − C1 /
    /// C1_other`.
    pub fn classify_with_margin(
        &self,
        window: &[f64],
        ws: &mut Workspace,
    ) -> Result<(Prediction, f64, f64)> {
        self.prepare_query(window, ws)?;
        if self.term.is_some() {
            return Ok(self.classify_term(window, ws, true, false));
        }
        let finished = self.finish_prepared(window, ws, false);
        let mut prepared = finished == prepared::Finished::Exact;
        let bounded = finished == prepared::Finished::Bounded;
        if bounded && self.config.k == 1 {
            // One search for the nearest and the nearest of another class
            // (`search_bounded_margin`); the margin is then a look-up.
            self.search_bounded_margin(ws);
            ws.prepared.class_best = true;
            prepared = true;
        } else if bounded {
            self.search_bounded(ws, None);
        } else if !prepared {
            self.search(ws, true, None);
        }
        let p = self.vote(ws);
        if self.classes.len() < 2 || self.labels.iter().all(|&l| l as usize == p.class) {
            return Ok((p, f64::INFINITY, 1.0));
        }
        let other = if prepared {
            // Every exact distance is known: the other class's nearest is a scan.
            self.other_class_prepared(p.class as u32, ws)
        } else {
            // The query is already normalised in the workspace; search again
            // without the predicted class (k = 1 semantics: the first neighbour).
            if bounded {
                self.search_bounded(ws, Some(p.class as u32));
            } else {
                self.search(ws, true, Some(p.class as u32));
            }
            ws.neighbors.first().map_or(f64::INFINITY, |n| n.0)
        };
        let margin = if other > 0.0 && other.is_finite() {
            (1.0 - p.distance / other).clamp(0.0, 1.0)
        } else {
            0.0
        };
        // Note: `ws.neighbors()` now describes the other-class search.
        Ok((p, other, margin))
    }

    /// A model over the first `len` samples of every reference window: the
    /// prefix models of progressive probing (000 §6), no new data needed.
    pub fn truncated(&self, len: usize) -> Result<Model> {
        if len == 0 || len > self.window {
            return Err(Error::invalid(format!(
                "prefix length {len} must be between 1 and the window {}",
                self.window
            )));
        }
        let flat: Vec<f64> = self
            .raw
            .chunks_exact(self.window)
            .flat_map(|w| w[..len].iter().copied())
            .collect();
        // The term keeps its scales, as `TwoStage::truncated` keeps stage
        // 2's: both distances shrink alike with the prefix.
        Model::fit(&flat, len, &self.labels, self.classes.clone(), self.config)?
            .with_stage1_term(self.term)
    }

    /// Vote shares per class for one window (scikit-learn `predict_proba`).
    pub fn class_probabilities(
        &self,
        window: &[f64],
        ws: &mut Workspace,
        out: &mut [f64],
    ) -> Result<Prediction> {
        if out.len() != self.classes.len() {
            return Err(Error::invalid(format!(
                "probability buffer has {} slots, the model has {} classes",
                out.len(),
                self.classes.len()
            )));
        }
        let p = self.classify(window, ws)?;
        let k = ws.neighbors.len() as f64;
        for (o, &v) in out.iter_mut().zip(&ws.votes) {
            *o = v as f64 / k;
        }
        Ok(p)
    }

    fn prepare_query(&self, window: &[f64], ws: &mut Workspace) -> Result<()> {
        if window.len() != self.window {
            return Err(Error::invalid(format!(
                "window has {} samples but the model was trained on windows of {}",
                window.len(),
                self.window
            )));
        }
        check_finite("window", window)?;
        ws.fit_to(
            self.window,
            self.config.k,
            self.classes.len(),
            self.labels.len(),
        );
        ws.query[..self.window].copy_from_slice(window);
        self.term_query(window, ws);
        self.config
            .normalization
            .apply(&mut ws.query[..self.window])
    }
}

/// `[ref][sample]` → `[group of LANES refs][sample][lane]`; lanes past the last
/// reference are zero (their bounds are never read).
fn interleave(flat: &[f64], window: usize) -> Vec<dtw::lanes::Lanes> {
    let n = flat.len() / window;
    let groups = n.div_ceil(dtw::lanes::LANES);
    let mut out = vec![[0.0; dtw::lanes::LANES]; groups * window];
    for (i, row) in flat.chunks_exact(window).enumerate() {
        let (g, lane) = (i / dtw::lanes::LANES, i % dtw::lanes::LANES);
        for (j, &v) in row.iter().enumerate() {
            out[g * window + j][lane] = v;
        }
    }
    out
}

/// References with the smallest lower bounds evaluated first, beyond k.
const SEEDS_BEYOND_K: usize = 7;

/// Per-thread scratch memory for classification. Create with
/// [`Model::workspace`]; after a call, [`Workspace::neighbors`] and
/// [`Workspace::votes`] describe the decision.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    dtw: dtw::Workspace,
    query: Vec<f64>,
    q_upper: Vec<f64>,
    q_lower: Vec<f64>,
    cb: Vec<f64>,
    lb: Vec<f64>,
    neighbors: Vec<(f64, usize)>,
    seeds: Vec<(f64, usize)>,
    /// Candidates and their cumulative bounds, interleaved for `dtw::lanes`.
    b_lanes: Vec<dtw::lanes::Lanes>,
    cb_lanes: Vec<dtw::lanes::Lanes>,
    lanes: dtw::lanes::LaneWorkspace,
    votes: Vec<u32>,
    /// Exact prepared finish with k = 1: the nearest reference of each class
    /// (accumulated distance, index; index `usize::MAX` for a class with no
    /// reference), from one scan, so the margin's other-class nearest needs
    /// no second scan (`prepared.rs`, decision latency).
    class_best: Vec<(f64, usize)>,
    /// Stage-1 term: the query's sorted steps (w − 1) and each class's
    /// smallest C1 (`steps.rs`).
    steps_q: Vec<f64>,
    term_best: Vec<(f64, usize)>,
    /// Stage-1 term: the block sums of `steps_q`, and a lower bound of every
    /// reference's C1 (`steps.rs`).
    steps_qb: Vec<f64>,
    term_lb: Vec<f64>,
    /// Stage-1 term after an exact finish: the references whose bound of C1
    /// is within the seeds' threshold (bound, index).
    term_cand: Vec<(f64, u32)>,
    /// Counters for the last query: (references, pruned by a bound, DTW abandoned).
    stats: SearchStats,
    /// The speculative work of [`Model::prepare`].
    prepared: prepared::Prepared,
}

/// How much work the last query did (for benchmarks and tuning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchStats {
    pub references: usize,
    pub pruned_by_bounds: usize,
    pub abandoned: usize,
    pub full_dtw: usize,
    /// The bounds came from a speculative preparation ([`Model::prepare`]
    /// with a guessed last sample), not from LB_Enhanced.
    pub speculative: bool,
    /// The decision finished a preparation of [`Model::prepare`] (exact, or
    /// speculative with `speculative` set) instead of searching afresh.
    pub prepared: bool,
}

impl Workspace {
    fn new(window: usize, k: usize, n_classes: usize, n_refs: usize) -> Self {
        let mut ws = Self::default();
        ws.fit_to(window, k, n_classes, n_refs);
        ws
    }

    /// Size the buffers for a model; allocates only when a size changes.
    fn fit_to(&mut self, window: usize, k: usize, n_classes: usize, n_refs: usize) {
        if self.lb.len() != n_refs {
            self.lb.resize(n_refs, 0.0);
            self.term_lb.resize(n_refs, 0.0);
            self.term_cand = Vec::with_capacity(n_refs);
        }
        if self.query.len() != window {
            self.query.resize(window, 0.0);
            self.steps_q.resize(window.saturating_sub(1), 0.0);
            self.steps_qb
                .resize(steps::n_blocks(window.saturating_sub(1)), 0.0);
            self.q_upper.resize(window, 0.0);
            self.q_lower.resize(window, 0.0);
            self.cb.resize(window + 1, 0.0);
            self.b_lanes.resize(window, [0.0; dtw::lanes::LANES]);
            self.cb_lanes.resize(window + 1, [0.0; dtw::lanes::LANES]);
            self.lanes.ensure(window);
            self.dtw.ensure(window);
        }
        if self.neighbors.capacity() < k {
            self.neighbors.reserve(k);
        }
        if self.seeds.capacity() < k + SEEDS_BEYOND_K {
            self.seeds = Vec::with_capacity(k + SEEDS_BEYOND_K);
        }
        if self.votes.len() != n_classes {
            self.votes.resize(n_classes, 0);
            self.class_best
                .resize(n_classes, (f64::INFINITY, usize::MAX));
            self.term_best
                .resize(n_classes, (f64::INFINITY, usize::MAX));
        }
        self.prepared.fit_to(window, n_refs);
    }

    /// The k nearest references of the last query: (distance, reference index), ascending.
    pub fn neighbors(&self) -> &[(f64, usize)] {
        &self.neighbors
    }
    /// Votes per class of the last query.
    pub fn votes(&self) -> &[u32] {
        &self.votes
    }
    /// Work counters of the last query.
    pub fn stats(&self) -> SearchStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
