//! A two-stage DTW classifier: stage 1 decides the side of a split (BBR
//! present or not) with the model's own normalisation, stage 2 picks the mix
//! among the references on that side only, with a second representation of
//! the same window.
//!
//! 000 §3.5 classifies with one 1-NN DTW over one representation; the second
//! stage is our extension. Leave-one-condition-out over the 5-Hz corpus
//! (`research/generalisation/two_stage.py`, docs/results/generalisation.md,
//! "Where the 6-class decision fails") shows why: the 6-class errors of the
//! shipped 5-Hz model stay on one side of "BBR present" (B1-C1 read as B1-C0 or
//! B1-B1; one CUBIC flow read as two), and a z-score 1-NN among the references
//! of that side separates them better than divide-min does, while stage 1
//! keeps divide-min's BBR-present score.
//!
//! Built from three [`Model`]s over the same raw references, each searched by
//! the existing exact pruned search (and prepared by [`Model::prepare`]):
//! - stage 1: every reference, labelled by its side (two classes), with the
//!   model's normalisation. Its nearest reference is exactly the one-stage
//!   model's nearest (the search orders by distance, then index, whatever the
//!   labels), so its class is the one-stage answer and its side the split's;
//!   and [`Model::classify_with_margin`] on it gives the nearest reference on
//!   the *other side* at no extra cost (see [`TwoStage::classify_with_margin`]).
//! - stage 2, one model per side: that side's references with their own
//!   classes, normalised with the stage-2 normalisation. Its class and
//!   reference indices are mapped back to the full class list and reference
//!   set.
//!
//! Stage 1 is always 1-NN (a k-NN vote over sides would not be the side of
//! the 6-class vote). Stage 2 is the side model's 1-NN by default ([`Stage2`]
//! with k = 1 and no stage-1 weight: the version-2 file). With k > 1 or a
//! stage-1 weight a > 0 it is the *combined k-NN* (`combined.rs`): windows
//! z-sorted ([`Normalization::ZSorted`], compared by L1), ranked by
//! `c = L / s2 + a · D1 / s1` with D1 stage 1's DTW distance, a majority vote
//! over the k nearest. Nested leave-one-condition-out over the 28 conditions
//! of the 5-Hz corpus picked z-sorted, k = 7, a = 0.25 (docs/results/generalisation.md).
//!
//! ```
//! use opsel::knn::{KnnConfig, Model, Split, Stage2, TwoStage};
//! use opsel::mix::SIX_CLASSES;
//! use opsel::series::{synth, Normalization};
//!
//! let (x, y) = synth::dataset(&SIX_CLASSES, 10, 20, 1)?;
//! let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
//! let cfg = KnnConfig { normalization: Normalization::DivideMin, ..KnnConfig::default() };
//! let one = Model::fit(&x, 20, &y, classes, cfg)?;
//! let two = TwoStage::new(&one, Stage2::new(Normalization::ZScore, Split::BbrPresent))?;
//! let mut ws = two.workspace();
//! let (p, _other_side, margin) = two.classify_with_margin(&x[..20], &mut ws)?;
//! assert_eq!(p.class, y[0] as usize); // a reference is its own nearest in both stages
//! assert!(p.bbr_present == two.class_bbr_present(p.class));
//! assert_eq!(margin, 1.0);
//! # Ok::<(), opsel::Error>(())
//! ```

use super::{KnnConfig, Model, Prediction, Workspace};
use crate::error::{Error, Result};
use crate::mix::Mix;
use crate::series::Normalization;

/// How stage 1 splits the classes. One split exists: whether BBR is in the
/// mix (000 §4.1, the decision the OPS stump acts on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Split {
    /// [`Mix::bbr_present`] of the class name.
    #[default]
    BbrPresent,
}

impl Split {
    /// Name as used in model files (`"bbr-present"`).
    pub fn name(self) -> &'static str {
        match self {
            Split::BbrPresent => "bbr-present",
        }
    }

    /// Parse a name (`bbr-present`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "bbr-present" => Ok(Split::BbrPresent),
            other => Err(Error::invalid(format!(
                "unknown two-stage split {other:?}; use \"bbr-present\""
            ))),
        }
    }

    /// The side (0 or 1) of a class name; an error when the name is not a mix.
    pub fn side_of(self, class: &str) -> Result<usize> {
        let mix = Mix::parse(class).map_err(|e| {
            Error::invalid(format!(
                "the {} split needs class names that are mixes (B1-C1 ...): {e}",
                self.name()
            ))
        })?;
        Ok(match self {
            Split::BbrPresent => mix.bbr_present() as usize,
        })
    }

    /// The two sides' names (stage 1's class names), side 0 first.
    pub fn side_names(self) -> [&'static str; 2] {
        match self {
            Split::BbrPresent => ["bbr-absent", "bbr-present"],
        }
    }
}

/// The second stage of a model file (`"stage2": {"normalization": "z-score",
/// "split": "bbr-present"}`, version 2; with `k`, `stage1_weight` or
/// `scales`, version 3).
///
/// With `k` = 1 and `stage1_weight` = 0 (the defaults, version 2) stage 2 is
/// the 1-NN under its normalisation. Otherwise (our extension, measured by
/// leave-one-condition-out in docs/results/generalisation.md) stage 2 is a
/// k-NN vote under the *combined distance*
/// `c(r) = L(r) / s2 + a · D1(r) / s1`: L the stage-2 distance (z-sorted
/// windows, L1), D1 stage 1's DTW distance, `a` = `stage1_weight`,
/// `(s2, s1)` = `scales` (module docs). With a = 0, c = L and the scales are
/// unused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage2 {
    /// Per-window normalisation of stage 2 (query and references alike).
    /// [`Normalization::ZSorted`] compares windows sample by sample (L1: DTW
    /// with band 0 and |a − b|): warping sorted windows would align values
    /// of different ranks.
    pub normalization: Normalization,
    /// How stage 1 splits the classes.
    pub split: Split,
    /// Neighbours that vote in stage 2 (1: the 1-NN of version 2). Above 1
    /// needs `normalization` z-sorted.
    pub k: usize,
    /// `a`, the weight of stage 1's distance in the combined distance (0:
    /// stage 2's distance alone). Above 0 needs `normalization` z-sorted
    /// and `scales`.
    pub stage1_weight: f64,
    /// `(s2, s1)`: the medians of the pairwise stage-2 and stage-1 distances
    /// among (up to [`SCALE_SAMPLE`] evenly spaced) training references
    /// ([`TwoStage::fit`] computes them when `stage1_weight` > 0 and they
    /// are absent; a model file stores them, a load never recomputes them).
    pub scales: Option<[f64; 2]>,
}

impl Default for Stage2 {
    /// z-score, bbr-present, 1-NN, no stage-1 term (the version-2 rule).
    fn default() -> Self {
        Self::new(Normalization::ZScore, Split::BbrPresent)
    }
}

/// Most references whose pairwise distances set the scales
/// ([`Stage2::scales`]): 600 give 179 700 pairs, a median stable to well
/// under 1 %, in about a second of DTW at fit.
pub const SCALE_SAMPLE: usize = 600;

impl Stage2 {
    /// 1-NN under `normalization` on the side `split` picks (the version-2
    /// rule).
    pub fn new(normalization: Normalization, split: Split) -> Self {
        Self {
            normalization,
            split,
            k: 1,
            stage1_weight: 0.0,
            scales: None,
        }
    }

    /// Whether stage 2 runs the combined k-NN (k > 1 or a > 0) instead of
    /// the side model's 1-NN.
    pub fn is_combined(&self) -> bool {
        self.k != 1 || self.stage1_weight != 0.0
    }

    /// Whether a model file needs version 3 for this stage 2 (any of `k`,
    /// `stage1_weight`, `scales` away from the version-2 defaults).
    pub fn needs_version_3(&self) -> bool {
        self.is_combined() || self.scales.is_some()
    }

    /// The combined distance of a reference at stage-2 distance `l` and
    /// stage-1 distance `d1`: `l / s2 + a · d1 / s1`, or `l` when a = 0.
    /// The one expression every search and the brute force evaluate (so
    /// their results agree bit for bit).
    #[inline(always)]
    pub fn combine(&self, l: f64, d1: f64) -> f64 {
        let a = self.stage1_weight;
        if a == 0.0 {
            return l;
        }
        let [s2, s1] = self.scales.unwrap_or([1.0, 1.0]);
        l / s2 + a * d1 / s1
    }

    /// The checks that need no references; `need_scales`: a model file
    /// (which must carry them) rather than a fit (which computes them).
    fn check(&self, need_scales: bool) -> Result<()> {
        if self.k == 0 {
            return Err(Error::invalid(
                "stage2.k is 0; use k >= 1 (1: the 1-NN; 7 was picked by leave-one-condition-out)",
            ));
        }
        let a = self.stage1_weight;
        if !(a.is_finite() && a >= 0.0) {
            return Err(Error::invalid(format!(
                "stage2.stage1_weight is {a}; it must be a finite number >= 0 (0: stage 2's distance alone)"
            )));
        }
        if let Some(sc) = self.scales {
            if let Some(v) = sc.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(Error::invalid(format!(
                    "stage2.scales has {v}; both scales (s2, s1) must be finite and positive (medians of pairwise distances)"
                )));
            }
        }
        if self.is_combined() && self.normalization != Normalization::ZSorted {
            return Err(Error::invalid(format!(
                "stage2 with k = {} and stage1_weight = {a} needs normalization \"z-sorted\" (the combined k-NN is built on it), not {:?}; use z-sorted, or k = 1 and weight 0",
                self.k,
                self.normalization.name()
            )));
        }
        if need_scales && a > 0.0 && self.scales.is_none() {
            return Err(Error::invalid(format!(
                "stage2.stage1_weight is {a} but stage2.scales is missing; the scales are fixed at fit (TwoStage::fit computes them) and must be stored with the weight"
            )));
        }
        Ok(())
    }
}

/// One two-stage classification.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TwoStagePrediction {
    /// The answer: stage 2's class, an index into [`TwoStage::classes`].
    pub class: usize,
    /// 1-NN stage 2 (k = 1, a = 0): stage 2's distance (under the stage-2
    /// normalisation) to its nearest reference on stage 1's side. Combined
    /// stage 2: the combined distance c of the nearest reference of the
    /// winning class among the k voters (the one the tie-break names).
    pub distance: f64,
    /// That reference's index in the full reference set.
    pub neighbor: usize,
    /// Votes the class received among stage 2's k nearest (1 for 1-NN).
    pub votes: u32,
    /// `votes / k`, in (0, 1].
    pub vote_share: f64,
    /// Stage 1's side: whether the split's second side (BBR present) won.
    pub bbr_present: bool,
    /// Stage 1: the class of the nearest reference of all (the one-stage
    /// model's answer), its distance under the model's normalisation and its
    /// index.
    pub stage1_class: usize,
    pub stage1_distance: f64,
    pub stage1_neighbor: usize,
}

impl TwoStagePrediction {
    /// As a one-stage [`Prediction`] (class, stage-2 distance and neighbour,
    /// stage 2's votes and their share).
    pub fn prediction(&self) -> Prediction {
        Prediction {
            class: self.class,
            distance: self.distance,
            neighbor: self.neighbor,
            votes: self.votes,
            confidence: self.vote_share,
        }
    }
}

/// One side's stage-2 model and the maps back to the full model.
#[derive(Debug, Clone)]
struct Side {
    model: Model,
    /// Stage-2 class index → full class index.
    classes: Vec<usize>,
    /// Stage-2 reference index → full reference index.
    refs: Vec<usize>,
}

/// A two-stage DTW classifier (module docs).
#[derive(Debug, Clone)]
pub struct TwoStage {
    classes: Vec<String>,
    labels: Vec<u32>,
    /// Side of each class.
    class_side: Vec<usize>,
    stage1: Model,
    sides: [Side; 2],
    /// As given, with the scales computed at fit when they were needed.
    stage2: Stage2,
    /// Combined stage 2: per side, the block sums of every z-sorted
    /// reference, interleaved (`combined.rs`, the bound on L).
    pub(super) blocks: [Vec<crate::dtw::lanes::Lanes>; 2],
}

/// Scratch memory for [`TwoStage`] (and for [`AnyModel`], whose one-stage
/// model uses the first workspace only). Create with [`TwoStage::workspace`]
/// or [`AnyModel::workspace`]; reuse it for every call on one thread.
#[derive(Debug, Clone, Default)]
pub struct TwoStageWorkspace {
    pub(super) stage1: Workspace,
    stage2: [Workspace; 2],
    pub(super) combined: super::combined::CombinedWorkspace,
}

impl TwoStageWorkspace {
    /// Stage 1's workspace (its neighbours and counters after a call).
    pub fn stage1(&self) -> &Workspace {
        &self.stage1
    }
    /// Stage 2's workspace of side `side` (0 or 1); the 1-NN stage 2 only.
    pub fn stage2(&self, side: usize) -> &Workspace {
        &self.stage2[side.min(1)]
    }
    /// What the combined stage 2 did in the last call (zeros after a 1-NN
    /// stage 2).
    pub fn combined_stats(&self) -> CombinedStats {
        self.combined.stats
    }
}

pub use super::combined::{CombinedStats, D1Source};

impl TwoStage {
    /// Check that `model` can be split by `stage2` without fitting anything:
    /// stage 1 k = 1, every class name a mix, a reference on each side, and
    /// stage 2's fields valid (k at most each side's references, scales
    /// present when the weight is above 0). What a model file with a
    /// `stage2` field must pass at load and at write.
    pub fn validate(model: &Model, stage2: Stage2) -> Result<()> {
        stage2.check(true)?;
        Self::sides_of(model.config(), model.classes(), model.labels(), stage2).map(|_| ())
    }

    fn sides_of(
        config: &KnnConfig,
        classes: &[String],
        labels: &[u32],
        stage2: Stage2,
    ) -> Result<Vec<usize>> {
        if config.k != 1 {
            return Err(Error::invalid(format!(
                "a two-stage model's stage 1 is 1-NN but k = {}; use k = 1 (stage 2's neighbours are stage2.k)",
                config.k
            )));
        }
        let class_side = classes
            .iter()
            .map(|c| stage2.split.side_of(c))
            .collect::<Result<Vec<_>>>()?;
        for (side, name) in stage2.split.side_names().iter().enumerate() {
            let n = labels
                .iter()
                .filter(|&&l| class_side.get(l as usize) == Some(&side))
                .count();
            if n == 0 {
                return Err(Error::invalid(format!(
                    "the two-stage split {} has no reference on the side {name}; stage 2 would have nothing to choose from there (add references of a class on that side, or drop stage2)",
                    stage2.split.name()
                )));
            }
            if stage2.k > n {
                return Err(Error::invalid(format!(
                    "stage2.k = {} but the side {name} has {n} references; use k <= {n}",
                    stage2.k
                )));
            }
        }
        Ok(class_side)
    }

    /// The two-stage model over `model`'s raw references, classes and
    /// settings (stage 1 keeps its normalisation; stage 2 uses
    /// `stage2.normalization`).
    pub fn new(model: &Model, stage2: Stage2) -> Result<Self> {
        Self::fit(
            model.raw_references(),
            model.window(),
            model.labels(),
            model.classes().to_vec(),
            *model.config(),
            stage2,
        )?
        .with_stage1_term(model.stage1_term())
    }

    /// This model with stage 1 ranked by C1 ([`Model::with_stage1_term`],
    /// `steps.rs`; scales fitted when absent). Stage 2 is unchanged: the
    /// combined k-NN keeps D1 alone.
    pub fn with_stage1_term(mut self, term: Option<super::Stage1Term>) -> Result<Self> {
        self.stage1 = self.stage1.with_stage1_term(term)?;
        Ok(self)
    }

    /// Stage 1's term, if any.
    pub fn stage1_term(&self) -> Option<super::Stage1Term> {
        self.stage1.stage1_term()
    }

    /// Fit on raw `windows` (flat, `labels.len()` windows of `window`
    /// samples) labelled with indices into `classes`; `config` is stage 1's
    /// (and stage 2's but for the normalisation; a z-sorted stage 2 uses
    /// band 0 and |a − b|). With `stage2.stage1_weight` > 0 and no
    /// `stage2.scales`, computes them ([`Stage2::scales`]; read them back
    /// with [`TwoStage::stage2`] to store them).
    pub fn fit(
        windows: &[f64],
        window: usize,
        labels: &[u32],
        classes: Vec<String>,
        config: KnnConfig,
        stage2: Stage2,
    ) -> Result<Self> {
        if labels.is_empty() {
            return Err(Error::invalid(
                "the reference set is empty; fit needs at least one labelled window",
            ));
        }
        stage2.check(false)?;
        // The label and class checks of `Model::fit` that the side models
        // (fitted on side labels and subsets of the classes) cannot make.
        super::check_classes_and_labels(&classes, labels)?;
        let class_side = Self::sides_of(&config, &classes, labels, stage2)?;
        let side_labels: Vec<u32> = labels
            .iter()
            .map(|&l| class_side[l as usize] as u32)
            .collect();
        let names = stage2.split.side_names().map(String::from).to_vec();
        let stage1 = Model::fit(windows, window, &side_labels, names, config)?;
        let mut stage2 = stage2;
        if stage2.stage1_weight > 0.0 && stage2.scales.is_none() {
            stage2.scales = Some(super::combined::fit_scales(&stage1, stage2.normalization)?);
        }
        let cfg2 = KnnConfig {
            normalization: stage2.normalization,
            dtw: if stage2.normalization == Normalization::ZSorted {
                crate::dtw::DtwParams {
                    radius: Some(0),
                    cost: crate::dtw::Cost::Abs,
                }
            } else {
                config.dtw
            },
            ..config
        };
        let side = |s: usize| -> Result<Side> {
            let full: Vec<usize> = (0..classes.len()).filter(|&c| class_side[c] == s).collect();
            let refs: Vec<usize> = (0..labels.len())
                .filter(|&i| class_side[labels[i] as usize] == s)
                .collect();
            let mut x = Vec::with_capacity(refs.len() * window);
            let mut y = Vec::with_capacity(refs.len());
            for &i in &refs {
                x.extend_from_slice(&windows[i * window..(i + 1) * window]);
                let c = labels[i] as usize;
                y.push(
                    full.iter()
                        .position(|&f| f == c)
                        .expect("class on its side") as u32,
                );
            }
            let names = full.iter().map(|&c| classes[c].clone()).collect();
            let model = Model::fit(&x, window, &y, names, cfg2)
                .map_err(|e| Error::invalid(format!("two-stage side {s}: {e}")))?;
            Ok(Side {
                model,
                classes: full,
                refs,
            })
        };
        let sides = [side(0)?, side(1)?];
        let blocks = if stage2.is_combined() {
            [0, 1].map(|s| super::combined::block_sums(&sides[s].model))
        } else {
            Default::default()
        };
        Ok(Self {
            classes,
            labels: labels.to_vec(),
            class_side,
            stage1,
            sides,
            stage2,
            blocks,
        })
    }

    /// Window length w.
    pub fn window(&self) -> usize {
        self.stage1.window()
    }
    /// Class names; [`TwoStagePrediction::class`] indexes this.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
    /// Stage 1's settings (stage 2's differ in the normalisation, and for
    /// z-sorted in the band and cost).
    pub fn config(&self) -> &KnnConfig {
        self.stage1.config()
    }
    /// The second stage's settings, with the scales fitted (what a model
    /// file stores).
    pub fn stage2(&self) -> Stage2 {
        self.stage2
    }
    /// Reference labels (full class indices).
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }
    /// Number of references.
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    /// Never true for a fitted model.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// Raw references, flat (as given at fit).
    pub fn raw_references(&self) -> &[f64] {
        self.stage1.raw_references()
    }
    /// Whether class `class` is on the split's second side (BBR present).
    pub fn class_bbr_present(&self, class: usize) -> bool {
        self.class_side.get(class) == Some(&1)
    }
    /// Stage 1: every reference labelled by side (class 0 the first side).
    pub fn stage1_model(&self) -> &Model {
        &self.stage1
    }
    /// Stage 2's model of side `side` (0: BBR absent, 1: present), its
    /// classes and references in the full model's order.
    pub fn stage2_model(&self, side: usize) -> &Model {
        &self.sides[side.min(1)].model
    }
    /// The full reference index of each of side `side`'s references.
    pub fn side_references(&self, side: usize) -> &[usize] {
        &self.sides[side.min(1)].refs
    }
    /// The full class index of each of side `side`'s classes.
    pub(super) fn side_classes(&self, side: usize) -> &[usize] {
        &self.sides[side.min(1)].classes
    }

    /// A workspace sized for all three models.
    pub fn workspace(&self) -> TwoStageWorkspace {
        let mut ws = TwoStageWorkspace {
            stage1: self.stage1.workspace(),
            stage2: [
                self.sides[0].model.workspace(),
                self.sides[1].model.workspace(),
            ],
            combined: Default::default(),
        };
        self.fit_combined(&mut ws);
        ws
    }

    fn finish(&self, p1: Prediction, p2: Prediction, side: usize) -> TwoStagePrediction {
        let s = &self.sides[side];
        TwoStagePrediction {
            class: s.classes[p2.class],
            distance: p2.distance,
            neighbor: s.refs[p2.neighbor],
            votes: p2.votes,
            vote_share: p2.confidence,
            bbr_present: side == 1,
            stage1_class: self.labels[p1.neighbor] as usize,
            stage1_distance: p1.distance,
            stage1_neighbor: p1.neighbor,
        }
    }

    /// Stage 2 after stage 1 chose `side` (stage 1's workspace holds its
    /// query and, after a prepared finish, its distances or bounds).
    fn stage2_after(
        &self,
        window: &[f64],
        p1: Prediction,
        side: usize,
        exhaustive: bool,
        ws: &mut TwoStageWorkspace,
    ) -> Result<TwoStagePrediction> {
        if self.stage2.is_combined() {
            return self.classify_combined(window, p1, side, exhaustive, ws);
        }
        ws.combined.stats = CombinedStats::default();
        let m = &self.sides[side].model;
        let p2 = if exhaustive {
            m.classify_exhaustive(window, &mut ws.stage2[side])?
        } else {
            m.classify(window, &mut ws.stage2[side])?
        };
        Ok(self.finish(p1, p2, side))
    }

    /// Classify one window of `window()` samples. Exact (both stages are
    /// pruned searches that equal [`TwoStage::classify_exhaustive`]); no
    /// allocation once `ws` came from [`TwoStage::workspace`].
    pub fn classify(
        &self,
        window: &[f64],
        ws: &mut TwoStageWorkspace,
    ) -> Result<TwoStagePrediction> {
        let p1 = self.stage1.classify(window, &mut ws.stage1)?;
        self.stage2_after(window, p1, p1.class, false, ws)
    }

    /// Classify and measure how clearly the window is on its side: the DTW
    /// distance (stage 1, the model's normalisation) to the nearest reference
    /// on the *other* side of the split, and the margin `1 − d_nearest /
    /// d_other_side` in [0, 1], as [`Model::classify_with_margin`] defines it.
    ///
    /// Why the side margin and not a margin of stage 2: the OPS decision acts
    /// on BBR present (000 §4.1 stump), which stage 1 alone decides; a mix
    /// confused within its side (B1-C1 against B1-B1) changes no CCA, so a
    /// stage-2 margin would lower the confidence (and lengthen progressive
    /// probes) on exactly the windows whose decision is already safe.
    pub fn classify_with_margin(
        &self,
        window: &[f64],
        ws: &mut TwoStageWorkspace,
    ) -> Result<(TwoStagePrediction, f64, f64)> {
        let (p1, other, margin) = self.stage1.classify_with_margin(window, &mut ws.stage1)?;
        let p = self.stage2_after(window, p1, p1.class, false, ws)?;
        Ok((p, other, margin))
    }

    /// [`TwoStage::classify`] with every distance computed in full in both
    /// stages (the reference answer of tests and benches; for a combined
    /// stage 2, c of every reference on the side, brute force).
    pub fn classify_exhaustive(
        &self,
        window: &[f64],
        ws: &mut TwoStageWorkspace,
    ) -> Result<TwoStagePrediction> {
        let p1 = self.stage1.classify_exhaustive(window, &mut ws.stage1)?;
        self.stage2_after(window, p1, p1.class, true, ws)
    }

    /// Prepare the classification of a window whose first `w − 1` samples are
    /// `prefix` ([`Model::prepare`]): stage 1 and both stage-2 models (the
    /// side is known only with the last sample; the combined stage 2
    /// prepares its own bounds on guessed last samples and orders the
    /// references by them, after stage 1, whose prepared bounds it uses:
    /// `combined.rs`, "Prepared"). Returns whether stage 1 was prepared.
    /// Results are unchanged; no allocation once `ws` came from
    /// [`TwoStage::workspace`].
    pub fn prepare(&self, prefix: &[f64], ws: &mut TwoStageWorkspace) -> bool {
        let one = self.stage1.prepare(prefix, &mut ws.stage1);
        if !self.stage2.is_combined() {
            for (s, w) in self.sides.iter().zip(ws.stage2.iter_mut()) {
                s.model.prepare(prefix, w);
            }
        } else {
            self.prepare_combined(prefix, ws);
        }
        one
    }

    /// The two-stage model over the first `len` samples of every reference
    /// (the prefix models of progressive probing, 000 §6). The scales are
    /// kept: both distances are sums over the samples, so a prefix shrinks
    /// them alike, and only their ratio orders the references.
    pub fn truncated(&self, len: usize) -> Result<TwoStage> {
        let w = self.window();
        if len == 0 || len > w {
            return Err(Error::invalid(format!(
                "prefix length {len} must be between 1 and the window {w}"
            )));
        }
        let flat: Vec<f64> = self
            .raw_references()
            .chunks_exact(w)
            .flat_map(|r| r[..len].iter().copied())
            .collect();
        TwoStage::fit(
            &flat,
            len,
            &self.labels,
            self.classes.clone(),
            *self.config(),
            self.stage2,
        )?
        .with_stage1_term(self.stage1_term())
    }

    /// Classify `windows` (flat, a multiple of `window()` values) on up to
    /// `threads` threads (0 = all cores); equal to one-by-one classification.
    pub fn classify_batch(
        &self,
        windows: &[f64],
        threads: usize,
    ) -> Result<Vec<TwoStagePrediction>> {
        super::batch::run(
            windows,
            self.window(),
            threads,
            || self.workspace(),
            |w, ws| self.classify(w, ws),
        )
    }

    /// Vote shares per class of stage 2 into `out` (one slot per class)
    /// after [`TwoStage::classify`] on `ws`.
    fn vote_shares(&self, p: &TwoStagePrediction, ws: &TwoStageWorkspace, out: &mut [f64]) {
        out.fill(0.0);
        if self.stage2.is_combined() {
            let k = self.stage2.k as f64;
            for (o, &v) in out.iter_mut().zip(&ws.combined.votes) {
                *o = v as f64 / k;
            }
        } else {
            out[p.class] = 1.0;
        }
    }
}

/// The classifier a knn-dtw model file describes: one stage, or two when the
/// file has a `stage2` field ([`crate::model::KnnModelFile::any_model`]).
/// Loaders classify through this so a two-stage file is never answered by
/// its first stage alone.
#[derive(Debug, Clone)]
// Built once per loaded file and never moved on a hot path: a box would
// only add an indirection to every classification.
#[allow(clippy::large_enum_variant)]
pub enum AnyModel {
    One(Model),
    Two(TwoStage),
}

impl AnyModel {
    /// `model` alone, or split by `stage2`.
    pub fn new(model: Model, stage2: Option<Stage2>) -> Result<Self> {
        Ok(match stage2 {
            None => AnyModel::One(model),
            Some(s) => AnyModel::Two(TwoStage::new(&model, s)?),
        })
    }
    /// Window length w.
    pub fn window(&self) -> usize {
        match self {
            AnyModel::One(m) => m.window(),
            AnyModel::Two(t) => t.window(),
        }
    }
    /// Class names.
    pub fn classes(&self) -> &[String] {
        match self {
            AnyModel::One(m) => m.classes(),
            AnyModel::Two(t) => t.classes(),
        }
    }
    /// The two-stage model, if this is one.
    pub fn two_stage(&self) -> Option<&TwoStage> {
        match self {
            AnyModel::One(_) => None,
            AnyModel::Two(t) => Some(t),
        }
    }
    /// A workspace for [`AnyModel::classify`].
    pub fn workspace(&self) -> TwoStageWorkspace {
        match self {
            AnyModel::One(m) => TwoStageWorkspace {
                stage1: m.workspace(),
                ..Default::default()
            },
            AnyModel::Two(t) => t.workspace(),
        }
    }
    /// Classify one window: [`Model::classify`], or the two-stage answer as a
    /// [`Prediction`] ([`TwoStagePrediction::prediction`]).
    pub fn classify(&self, window: &[f64], ws: &mut TwoStageWorkspace) -> Result<Prediction> {
        match self {
            AnyModel::One(m) => m.classify(window, &mut ws.stage1),
            AnyModel::Two(t) => t.classify(window, ws).map(|p| p.prediction()),
        }
    }
    /// Batch classification ([`Model::classify_batch`]).
    pub fn classify_batch(&self, windows: &[f64], threads: usize) -> Result<Vec<Prediction>> {
        match self {
            AnyModel::One(m) => m.classify_batch(windows, threads),
            AnyModel::Two(t) => Ok(t
                .classify_batch(windows, threads)?
                .iter()
                .map(|p| p.prediction())
                .collect()),
        }
    }
    /// Vote shares per class ([`Model::class_probabilities`]); for a
    /// two-stage model stage 2's (a 1-NN stage 2: all on its class).
    pub fn class_probabilities(
        &self,
        window: &[f64],
        ws: &mut TwoStageWorkspace,
        out: &mut [f64],
    ) -> Result<Prediction> {
        match self {
            AnyModel::One(m) => m.class_probabilities(window, &mut ws.stage1, out),
            AnyModel::Two(t) => {
                if out.len() != t.classes.len() {
                    return Err(Error::invalid(format!(
                        "probability buffer has {} slots, the model has {} classes",
                        out.len(),
                        t.classes.len()
                    )));
                }
                let p = t.classify(window, ws)?;
                t.vote_shares(&p, ws, out);
                Ok(p.prediction())
            }
        }
    }
}
