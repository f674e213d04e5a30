//! The stage-1 feature term: the 1-NN of record (000 §3.5: 1-NN with DTW)
//! ranked by `C1 = D1 / s1 + b · F / sF` instead of D1 alone.
//!
//! Our extension, not 000's. D1 is the model's DTW distance (its
//! normalisation, band and cost, in [`crate::dtw::Cost::finish`] form); F
//! the L1 distance between the windows' *sorted steps*: `sort(diff(x) /
//! max(sd(x), 1e-9))` of the raw window (population standard deviation,
//! w − 1 values), the distribution of sample-to-sample steps (a CUBIC
//! sawtooth's slow rises and sharp drops) that DTW's warping does not keep;
//! `b` the weight and `(s1, sF)` the medians of the pairwise D1 and F among
//! up to [`SCALE_SAMPLE`] evenly spaced references, fitted once
//! ([`Model::with_stage1_term`]) and stored in the model file. Nested
//! leave-one-condition-out over the 28 conditions of the 5-Hz corpus
//! (`research/generalisation/percond.py`, docs/results/generalisation.md)
//! picked b = 0.25 in every fold: 24 of 28 held-out conditions at ≥ 97 %
//! BBR present against 18 with D1 alone.
//!
//! The search is exact: the reference it returns is the argmin of C1 over
//! every reference, ties to the lower index, bit for bit what the brute force
//! ([`Model::classify_exhaustive`]) returns, because every C1 it compares is
//! computed by the one expression [`Stage1Term::combine`] from the DTW value
//! every search computes alike and from F computed by one function. Pruning
//! uses that F ≥ 0: any lower bound of D1 the model already has (an exact
//! preparation's `fl(M + l)`, a bounded one's D − B, LB_Enhanced otherwise)
//! divided by s1 lower-bounds C1; F (w − 1 subtractions) is then added
//! before any DTW, and the DTW is abandoned once D1 exceeds
//! `(best − b · F / sF) · s1`. No allocation per query.
//!
//! F has its own lower bound: each reference's sorted steps summed in ten
//! blocks (five steps each at w = 50, stored at fit in single precision),
//! `Σ_b |S_b(q) − S_b(r)| ≤ F` by the triangle inequality within each block,
//! lowered by an allowance for rounding (F's and the sums' own, and the
//! single-precision storage); with D1's bound it bounds C1 (`C1Lower`), and
//! one pass eight references at a time bounds every reference before any F
//! or DTW. After an exact prepared finish the pass keeps the references
//! whose bound is within the threshold of the finish's per-class
//! DTW-nearest (a group of eight is skipped on D1's bounds before its block
//! sums are read), and visits them by ascending bound until the bound
//! passes the threshold; the other sources seed with each class's smallest
//! bound and the eight smallest of all. On the 5-Hz two-stage file (4909
//! references) stage 1's prepared decision with the term went from 182.6 /
//! 686.1 µs (median / p99) to 57.4 / 201.9 µs, against 8.0 / 80.3 µs
//! without the term in the same run (`cargo run --release -p opsel --example
//! two_stage_knn_latency -- models/passive-200ms-two-stage/model.json
//! TERM.json`, TERM.json the same training with `--stage1-steps 0.25`;
//! research/results/ops-latency/loaded-two-stage-stage1-steps-term.txt);
//! the whole two-stage decision 60.7 → 109.8 µs median, 222.4 → 292.3 µs
//! p99. A median of 3 references get F and D1 in full; what remains is the
//! pass over all references (about 10 µs with its data in cache, more when
//! the decision finds it evicted), which the term's threshold, not known
//! before the last sample, keeps from being cut short the way D1's ordered
//! preparation is.

use super::prepared::{lowest, Finished, SPECULATIVE_SLACK};
use super::search::two_smallest;
use super::{Model, Prediction, SearchStats, Workspace, SCALE_SAMPLE};
use crate::dtw;
use crate::dtw::lanes::{Lanes, LANES};
use crate::error::{Error, Result};

/// Which window feature the term compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TermKind {
    /// The sorted steps divided by the window's standard deviation
    /// (`"sorted-steps"`, module docs).
    #[default]
    SortedSteps,
}

impl TermKind {
    /// Name as used in model files.
    pub fn name(self) -> &'static str {
        match self {
            TermKind::SortedSteps => "sorted-steps",
        }
    }

    /// Parse a name (`sorted-steps`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "sorted-steps" => Ok(TermKind::SortedSteps),
            other => Err(Error::invalid(format!(
                "unknown stage-1 term kind {other:?}; use \"sorted-steps\""
            ))),
        }
    }
}

/// The stage-1 term of a model (`"stage1_term": {"kind": "sorted-steps",
/// "weight": 0.25, "scales": [s1, sF]}` in a model file, version 4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage1Term {
    pub kind: TermKind,
    /// `b`, the weight of F / sF (0: no term; the model is D1's 1-NN).
    pub weight: f64,
    /// `(s1, sF)`: the medians of the pairwise D1 and F among up to
    /// [`SCALE_SAMPLE`] evenly spaced references (computed by
    /// [`Model::with_stage1_term`] when absent; a model file stores them and
    /// a load never recomputes them).
    pub scales: Option<[f64; 2]>,
}

impl Stage1Term {
    /// The sorted-steps term of weight `weight`, scales to be fitted.
    pub fn sorted_steps(weight: f64) -> Self {
        Self {
            kind: TermKind::SortedSteps,
            weight,
            scales: None,
        }
    }

    /// C1 of a reference at DTW distance `d1` (finished) and feature
    /// distance `f`: `d1 / s1 + b · f / sF`. The one expression every search
    /// and the brute force evaluate, so their results agree bit for bit.
    #[inline(always)]
    pub fn combine(&self, d1: f64, f: f64) -> f64 {
        let [s1, sf] = self.scales.unwrap_or([1.0, 1.0]);
        d1 / s1 + self.weight * f / sf
    }

    /// The checks that need no references; `need_scales`: a model file
    /// (which must carry them) rather than a fit (which computes them).
    pub fn check(&self, need_scales: bool) -> Result<()> {
        let b = self.weight;
        if !(b.is_finite() && b >= 0.0) {
            return Err(Error::invalid(format!(
                "stage1_term.weight is {b}; it must be a finite number >= 0 (0: no term; 0.25 was picked by leave-one-condition-out)"
            )));
        }
        if let Some(sc) = self.scales {
            if let Some(v) = sc.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
                return Err(Error::invalid(format!(
                    "stage1_term.scales has {v}; both scales (s1, sF) must be finite and positive (medians of pairwise distances)"
                )));
            }
        }
        if need_scales && self.scales.is_none() {
            return Err(Error::invalid(format!(
                "stage1_term.weight is {b} but stage1_term.scales is missing; the scales are fixed at fit and must be stored with the weight"
            )));
        }
        Ok(())
    }
}

/// The sorted steps of `x` into `out` (`x.len() − 1` values): `sort(diff(x)
/// / max(sd(x), 1e-9))`, sd the population standard deviation (numpy's
/// default). No allocation.
pub fn sorted_steps(x: &[f64], out: &mut [f64]) {
    let n = x.len();
    debug_assert_eq!(out.len(), n.saturating_sub(1));
    if n < 2 {
        return;
    }
    let mean = x.iter().sum::<f64>() / n as f64;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let sd = var.sqrt().max(1e-9);
    for (o, p) in out.iter_mut().zip(x.windows(2)) {
        *o = (p[1] - p[0]) / sd;
    }
    out.sort_unstable_by(f64::total_cmp);
}

/// F: the L1 distance of two sorted-step rows, summed in index order (the
/// one function every search and the brute force call).
#[inline(always)]
fn l1(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for (x, y) in a.iter().zip(b) {
        s += (x - y).abs();
    }
    s
}

/// Blocks of the sorted steps whose sums bound F from below: ten (five
/// steps each at w = 50, the split of the combined stage 2's bound on L).
const BLOCKS: usize = 10;

/// Blocks of `f` sorted steps.
pub(super) fn n_blocks(f: usize) -> usize {
    f.min(BLOCKS)
}

/// Sums of the blocks `[b·f/B, (b+1)·f/B)` of `v`, each in index order.
#[inline(always)]
fn block_sums(v: &[f64], out: &mut [f64]) {
    let (f, nb) = (v.len(), out.len());
    for (b, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0;
        for &x in &v[b * f / nb..(b + 1) * f / nb] {
            acc += x;
        }
        *o = acc;
    }
}

/// Rounding allowance of the bound on F, absolute: a sorted step is at most
/// √(2w) in size (no two samples differ by more than √(2w) standard
/// deviations), so the rounding of F's sum and of the block sums is below
/// `2 · f² · √(2f) · ε` each (f = w − 1 steps); four times that covers both.
fn f_rounding(f: usize) -> f64 {
    let f = f as f64;
    8.0 * f * f * (2.0 * (f + 1.0)).sqrt() * f64::EPSILON
}

/// A lower bound of the computed C1 from lower bounds of D1 and F is
/// multiplied by this (and lowered by the smallest normal number): it is
/// computed with reciprocals of the scales instead of [`Stage1Term::combine`]'s
/// divisions, a few roundings (each relative 2⁻⁵³) from it.
const C1_BOUND_DOWN: f64 = 1.0 - 1e-12;

/// Lower bounds of the computed C1 from lower bounds of D1 and of the block
/// distance `Σ_b |S_b(q) − S_b(r)|` ([`Model::term_bounds`]).
#[derive(Clone, Copy)]
struct C1Lower {
    /// 1 / s1, b / sF.
    a1: f64,
    af: f64,
    /// [`f_rounding`] of the window plus the single-precision rounding of
    /// the references' block sums (`Σ_b |S_b − f32(S_b)|`, the largest):
    /// `Σ_b |q_b − r_b| ≥ Σ_b |q_b − f32(r_b)| − Σ_b |r_b − f32(r_b)|`.
    round: f64,
}

impl C1Lower {
    fn new(t: &Stage1Term, f: usize, err: f64) -> Self {
        let [s1, sf] = t.scales.unwrap_or([1.0, 1.0]);
        Self {
            a1: 1.0 / s1,
            af: t.weight / sf,
            round: f_rounding(f) + err,
        }
    }

    /// At most the C1 computed from any D1 ≥ `d` and F ≥ the block distance
    /// `a` (module docs): F's bound lowered by its rounding allowance, the
    /// sum lowered by [`C1_BOUND_DOWN`] and the smallest normal number.
    #[inline(always)]
    fn lower(&self, d: f64, a: f64) -> f64 {
        let lf = a - SPECULATIVE_SLACK * (1.0 + a) - self.round;
        let lf = if lf > 0.0 { lf } else { 0.0 };
        let c = (d * self.a1 + self.af * lf) * C1_BOUND_DOWN - f64::MIN_POSITIVE;
        if c > 0.0 {
            c
        } else {
            0.0
        }
    }
}

/// Where a term search takes D1 and its lower bounds from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Every C1 in full, nothing pruned (the brute force).
    Exhaustive,
    /// An exact prepared finish: `fl(M + l)` bounds, last rows for D1.
    Exact,
    /// A bounded finish: D − B bounds, early-abandoned DTW for D1.
    Bounded,
    /// No preparation: LB_Enhanced bounds (`ws.lb`), early-abandoned DTW.
    Enhanced,
}

/// Most seeds (references evaluated first to set the threshold).
const MAX_SEEDS: usize = 32;

/// Candidates visited per selection after an exact finish.
const CHUNK: usize = 16;

/// Seeds taken by the smallest bound of C1 regardless of class.
const TOP_SEEDS: usize = 8;

impl Model {
    /// This model with the stage-1 term `term` (module docs): its scales are
    /// fitted from the references when absent, and each reference's sorted
    /// steps are stored. `None` or weight 0 removes the term (the model is
    /// then exactly D1's 1-NN). Needs k = 1 (the term ranks the 1-NN).
    pub fn with_stage1_term(mut self, term: Option<Stage1Term>) -> Result<Self> {
        let Some(mut t) = term.filter(|t| t.weight != 0.0) else {
            self.term = None;
            self.steps = Vec::new();
            self.steps_blocks = Vec::new();
            self.steps_blocks_err = 0.0;
            return Ok(self);
        };
        t.check(false)?;
        if self.config.k != 1 {
            return Err(Error::invalid(format!(
                "a stage-1 term ranks the 1-NN but k = {}; use k = 1",
                self.config.k
            )));
        }
        let (n, w) = (self.labels.len(), self.window);
        let f = w - 1;
        let mut steps = vec![0.0; n * f];
        if f > 0 {
            for (i, row) in steps.chunks_exact_mut(f).enumerate() {
                sorted_steps(self.raw_reference(i), row);
            }
        }
        // Block sums per reference, interleaved for the bound pass.
        let nb = n_blocks(f);
        // Single precision halves the pass's memory traffic; the rounding
        // (each `v − f32(v)` exact in double) is allowed for in the bound.
        let mut blocks = vec![[0.0f32; LANES]; n.div_ceil(LANES) * nb];
        let mut s = [0.0; BLOCKS];
        let mut err = 0.0f64;
        if nb > 0 {
            for (i, row) in steps.chunks_exact(f).enumerate() {
                block_sums(row, &mut s[..nb]);
                let mut e = 0.0;
                for (b, &v) in s[..nb].iter().enumerate() {
                    let v32 = v as f32;
                    blocks[(i / LANES) * nb + b][i % LANES] = v32;
                    e += (v - v32 as f64).abs();
                }
                err = err.max(e);
            }
        }
        self.steps = steps;
        self.steps_blocks = blocks;
        self.steps_blocks_err = err * (1.0 + 1e-6);
        if t.scales.is_none() {
            t.scales = Some(self.fit_term_scales()?);
        }
        self.term = Some(t);
        Ok(self)
    }

    /// The stage-1 term, with its scales, if the model has one.
    pub fn stage1_term(&self) -> Option<Stage1Term> {
        self.term
    }

    /// Reference `i`'s sorted steps.
    #[inline(always)]
    fn steps_row(&self, i: usize) -> &[f64] {
        let f = self.window - 1;
        &self.steps[i * f..(i + 1) * f]
    }

    /// `(s1, sF)` ([`Stage1Term::scales`]): with n references and m =
    /// min(n, [`SCALE_SAMPLE`]), references `⌊i · n / m⌋` for i in 0..m (as
    /// the combined stage 2's scales), the median over every pair of D1 and
    /// of F. About 180 000 DTWs at m = 600.
    fn fit_term_scales(&self) -> Result<[f64; 2]> {
        let n = self.labels.len();
        let m = n.min(SCALE_SAMPLE);
        if m < 2 {
            return Err(Error::invalid(format!(
                "a stage-1 term needs scales from pairs of references, but the model has {n}; add references or give stage1_term.scales"
            )));
        }
        let idx: Vec<usize> = (0..m).map(|i| i * n / m).collect();
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        let pairs = m * (m - 1) / 2;
        let (mut ds, mut fs) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
        let mut dws = dtw::Workspace::with_capacity(self.window);
        for a in 0..m {
            for b in a + 1..m {
                let (i, j) = (idx[a], idx[b]);
                let acc = dtw::accumulated(
                    self.reference(i),
                    self.reference(j),
                    r,
                    cost,
                    f64::INFINITY,
                    None,
                    &mut dws,
                );
                ds.push(cost.finish(acc));
                fs.push(l1(self.steps_row(i), self.steps_row(j)));
            }
        }
        super::combined::median_scales(
            "the stage-1 scale",
            [("s1 (DTW)", &mut ds), ("sF (sorted steps)", &mut fs)],
        )
    }

    /// Read, at preparation time, what the decision's bound pass reads of
    /// every reference (the block sums; `M` and the last samples through
    /// [`Model::warm_exact_bounds`]): the preparation's programme rows
    /// (megabytes) have evicted them, as for the combined stage 2's
    /// `warm_combined`.
    pub(super) fn warm_term(&self, ws: &Workspace) {
        if self.term.is_none() {
            return;
        }
        let mut acc = self.warm_exact_bounds(ws);
        for b in self.steps_blocks.iter().step_by(2) {
            acc += b[0] as f64;
        }
        for v in self.refs_last.iter().step_by(8) {
            acc += v;
        }
        std::hint::black_box(acc);
    }

    /// The query's sorted steps into the workspace (raw window).
    pub(super) fn term_query(&self, window: &[f64], ws: &mut Workspace) {
        if self.term.is_some() {
            let f = self.window - 1;
            sorted_steps(window, &mut ws.steps_q[..f]);
            let nb = n_blocks(f);
            block_sums(&ws.steps_q[..f], &mut ws.steps_qb[..nb]);
        }
    }

    /// Classify with the term (`self.term` is set): the argmin of C1, and
    /// with `margin` the nearest C1 of any other class and the margin
    /// `1 − C1_nearest / C1_other` ([`Model::classify_with_margin`]'s, on
    /// C1). The prediction's distance is C1. `ws.query` and the term's
    /// query are filled (`prepare_query`).
    pub(super) fn classify_term(
        &self,
        window: &[f64],
        ws: &mut Workspace,
        margin: bool,
        exhaustive: bool,
    ) -> (Prediction, f64, f64) {
        let source = if exhaustive {
            Source::Exhaustive
        } else {
            match self.finish_prepared(window, ws, false) {
                Finished::Exact => Source::Exact,
                Finished::Bounded => Source::Bounded,
                Finished::No => {
                    self.enhanced_bounds(ws, None);
                    Source::Enhanced
                }
            }
        };
        self.term_search(ws, source, margin);
        let best = std::mem::take(&mut ws.term_best);
        ws.neighbors.clear();
        let nearest = lowest(best.iter().copied());
        if let Some(b) = nearest {
            ws.neighbors.push(b);
        }
        let p = self.vote(ws);
        let single = self.classes.len() < 2 || self.labels.iter().all(|&l| l as usize == p.class);
        let (other, m) = if !margin || single {
            (f64::INFINITY, 1.0)
        } else {
            let other = lowest(
                best.iter()
                    .enumerate()
                    .filter(|&(c, _)| c != p.class)
                    .map(|(_, &b)| b),
            )
            .map_or(f64::INFINITY, |b| b.0);
            let m = if other > 0.0 && other.is_finite() {
                (1.0 - p.distance / other).clamp(0.0, 1.0)
            } else {
                0.0
            };
            (other, m)
        };
        ws.term_best = best;
        (p, other, m)
    }

    /// The argmin of C1 per class into `ws.term_best` (C1, index; ties to the
    /// lower index). Without `per_class` only the nearest of all is exact
    /// (every class entry is at least it); with it also the nearest of every
    /// other class that can be the margin's (the two classes first under
    /// [`lowest`]), as [`Model::search_bounded_margin`] argues: a reference
    /// is skipped when its lower bound exceeds T, the second smallest class
    /// best (it can be neither answer), or its own class's best.
    ///
    /// Pruned searches first bound every reference's C1 from below
    /// ([`Model::term_bounds`]), then compute C1 in full for seeds (each
    /// class's smallest bound, the [`TOP_SEEDS`] smallest of all, and after
    /// an exact finish each class's DTW-nearest), so the thresholds are close
    /// to final before the scan, which skips a reference on one comparison.
    fn term_search(&self, ws: &mut Workspace, source: Source, per_class: bool) {
        let t = self.term.expect("classify_term needs a term");
        let n = self.labels.len();
        let w = self.window;
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        let [s1, sf] = t.scales.unwrap_or([1.0, 1.0]);
        let prune = source != Source::Exhaustive;
        let mut stats = SearchStats {
            references: n,
            speculative: source == Source::Bounded,
            prepared: matches!(source, Source::Exact | Source::Bounded),
            ..SearchStats::default()
        };
        let mut best = std::mem::take(&mut ws.term_best);
        // Seeds, sorted by index so the scan skips them.
        let mut seeds = [usize::MAX; MAX_SEEDS];
        let mut n_seeds = 0;
        if prune && source != Source::Exact {
            self.run_term_bounds(ws, source);
            let mut push = |j: usize| {
                if j != usize::MAX && n_seeds < MAX_SEEDS && !seeds[..n_seeds].contains(&j) {
                    seeds[n_seeds] = j;
                    n_seeds += 1;
                }
            };
            // Each class's smallest bound (in `best`, reset below) and the
            // smallest of all, in one pass.
            best.fill((f64::INFINITY, usize::MAX));
            let mut top = [(f64::INFINITY, usize::MAX); TOP_SEEDS];
            for (j, (&b, &l)) in ws.term_lb[..n].iter().zip(&self.labels).enumerate() {
                let c = &mut best[l as usize];
                if b < c.0 {
                    *c = (b, j);
                }
                if b < top[TOP_SEEDS - 1].0 {
                    let mut k = TOP_SEEDS - 1;
                    while k > 0 && b < top[k - 1].0 {
                        top[k] = top[k - 1];
                        k -= 1;
                    }
                    top[k] = (b, j);
                }
            }
            for c in best.iter() {
                push(c.1);
            }
            for c in top.iter() {
                push(c.1);
            }
        } else if source == Source::Exact {
            // The finish left each leading class's DTW-nearest.
            for c in ws.class_best.iter() {
                if c.1 != usize::MAX && n_seeds < MAX_SEEDS {
                    seeds[n_seeds] = c.1;
                    n_seeds += 1;
                }
            }
        }
        let seeds = &mut seeds[..n_seeds];
        seeds.sort_unstable();
        best.fill((f64::INFINITY, usize::MAX));
        let (mut lo1, mut lo2) = (f64::INFINITY, f64::INFINITY);
        let slack = |v: f64| v + SPECULATIVE_SLACK * v + f64::MIN_POSITIVE;
        // One reference: bounds, F, DTW (abandoned above the threshold), merge.
        let visit = |j: usize,
                     lbc: f64,
                     ws: &mut Workspace,
                     best: &mut [(f64, usize)],
                     lo1: &mut f64,
                     lo2: &mut f64,
                     stats: &mut SearchStats| {
            let label = self.labels[j] as usize;
            let limit = if per_class {
                let own = best[label].0;
                if own < *lo2 {
                    own
                } else {
                    *lo2
                }
            } else {
                *lo1
            };
            let limit = slack(limit);
            if prune && lbc > limit {
                stats.pruned_by_bounds += 1;
                return;
            }
            let f = l1(&ws.steps_q[..w - 1], self.steps_row(j));
            if prune && t.combine(self.term_lower(ws, source, j), f) > limit {
                stats.pruned_by_bounds += 1;
                return;
            }
            let acc_max = if prune && limit.is_finite() {
                // C1 <= limit needs D1 <= (limit − b·F/sF)·s1; the slack
                // is relative to the limit, so rounding in C1's sum never
                // abandons a reference that ties.
                let room = limit - t.weight * f / sf + SPECULATIVE_SLACK * limit;
                slack(cost.unfinish(slack(room * s1)))
            } else {
                f64::INFINITY
            };
            let acc = if source == Source::Exact {
                self.exact_distance(ws, j)
            } else {
                let Workspace {
                    query, dtw: dws, ..
                } = ws;
                dtw::accumulated(&query[..w], self.reference(j), r, cost, acc_max, None, dws)
            };
            if acc > acc_max {
                stats.abandoned += 1;
                return;
            }
            stats.full_dtw += 1;
            let c = t.combine(cost.finish(acc), f);
            let b = &mut best[label];
            if c < b.0 || (c == b.0 && j < b.1) {
                *b = (c, j);
                (*lo1, *lo2) = two_smallest(best);
            }
        };
        if source == Source::Exact {
            // The seeds' C1 (their D1 is a last row from the preparation).
            for &j in seeds.iter() {
                visit(j, 0.0, ws, &mut best, &mut lo1, &mut lo2, &mut stats);
            }
            // One pass bounds every reference's C1 and keeps those within
            // the seeds' largest limit (T, or the nearest); the CHUNK
            // smallest bounds are visited in ascending order, then the rest
            // within the tightened limit (sorted: few), until a bound
            // passes the limit.
            let hi = slack(if per_class { lo2 } else { lo1 });
            let mut cand = std::mem::take(&mut ws.term_cand);
            cand.clear();
            self.run_term_candidates(ws, hi, &mut cand);
            let by_bound = |a: &(f64, u32), b: &(f64, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            let below = |a: &(f64, u32), b: &(f64, u32)| by_bound(a, b).is_lt();
            // The CHUNK smallest, by one scan (most fail one comparison).
            let mut top = [(f64::INFINITY, u32::MAX); CHUNK];
            for c in cand.iter() {
                if below(c, &top[CHUNK - 1]) {
                    let mut k = CHUNK - 1;
                    while k > 0 && below(c, &top[k - 1]) {
                        top[k] = top[k - 1];
                        k -= 1;
                    }
                    top[k] = *c;
                }
            }
            let last = top[CHUNK - 1];
            let mut done = false;
            for &(lbc, j) in top.iter().take_while(|c| c.1 != u32::MAX) {
                // Every later candidate's bound is at least this one's.
                if lbc > slack(if per_class { lo2 } else { lo1 }) {
                    done = true;
                    break;
                }
                let j = j as usize;
                if !seeds.contains(&j) {
                    visit(j, lbc, ws, &mut best, &mut lo1, &mut lo2, &mut stats);
                }
            }
            if !done && last.1 != u32::MAX {
                // The rest (each after `last`) within the tightened limit.
                let hi = slack(if per_class { lo2 } else { lo1 });
                cand.retain(|c| c.0 <= hi && below(&last, c));
                cand.sort_unstable_by(by_bound);
                for &(lbc, j) in cand.iter() {
                    if lbc > slack(if per_class { lo2 } else { lo1 }) {
                        break;
                    }
                    let j = j as usize;
                    if !seeds.contains(&j) {
                        visit(j, lbc, ws, &mut best, &mut lo1, &mut lo2, &mut stats);
                    }
                }
            }
            stats.pruned_by_bounds = n - stats.full_dtw - stats.abandoned;
            ws.term_cand = cand;
            ws.term_best = best;
            ws.stats = stats;
            return;
        }
        for &j in seeds.iter() {
            visit(
                j,
                ws.term_lb[j],
                ws,
                &mut best,
                &mut lo1,
                &mut lo2,
                &mut stats,
            );
        }
        let mut next = 0;
        for j in 0..n {
            if next < seeds.len() && seeds[next] == j {
                next += 1;
                continue;
            }
            // Every reference's limit is at most T (per class) or the
            // nearest so far: most are skipped here without their label.
            if prune && ws.term_lb[j] > slack(if per_class { lo2 } else { lo1 }) {
                stats.pruned_by_bounds += 1;
                continue;
            }
            let lbc = if prune { ws.term_lb[j] } else { 0.0 };
            visit(j, lbc, ws, &mut best, &mut lo1, &mut lo2, &mut stats);
        }
        ws.term_best = best;
        ws.stats = stats;
    }

    fn run_term_candidates(&self, ws: &Workspace, hi: f64, cand: &mut Vec<(f64, u32)>) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.term_candidates_avx2(ws, hi, cand) };
            }
        }
        self.term_candidates(ws, hi, cand)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn term_candidates_avx2(&self, ws: &Workspace, hi: f64, cand: &mut Vec<(f64, u32)>) {
        self.term_candidates(ws, hi, cand)
    }

    /// After an exact finish: [`Model::term_bounds`]'s bound of C1 for every
    /// reference (D1's from the preparation, `fl(M + l)`), the references
    /// whose bound is at most `hi` pushed to `cand` (capacity n: no
    /// allocation).
    #[inline(always)]
    fn term_candidates(&self, ws: &Workspace, hi: f64, cand: &mut Vec<(f64, u32)>) {
        let t = self.term.expect("term_candidates needs a term");
        let n = self.labels.len();
        let f = self.window - 1;
        let bound = C1Lower::new(&t, f, self.steps_blocks_err);
        if n_blocks(f) == 0 {
            for j in 0..n {
                let c = bound.lower(self.term_lower(ws, Source::Exact, j), 0.0);
                if c <= hi {
                    cand.push((c, j as u32));
                }
            }
            return;
        }
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.term_candidate_groups::<false>(ws, hi, &bound, cand),
            dtw::Cost::Squared => self.term_candidate_groups::<true>(ws, hi, &bound, cand),
        }
    }

    /// [`Model::term_candidates`]' pass, `fl(M + l)` computed as
    /// [`Model::exact_lower_bound`] does, eight references at a time.
    #[inline(always)]
    fn term_candidate_groups<const SQ: bool>(
        &self,
        ws: &Workspace,
        hi: f64,
        bound: &C1Lower,
        cand: &mut Vec<(f64, u32)>,
    ) {
        let n = self.labels.len();
        let nb = n_blocks(self.window - 1);
        let qb = &ws.steps_qb[..nb];
        let min_up = self.exact_min_up(ws);
        let last = ws.query[self.window - 1];
        for (g, rows) in self.steps_blocks.chunks_exact(nb).enumerate() {
            // D1's bounds first: a group none of whose references can enter
            // on D1 alone is skipped without reading its block sums
            // (neighbouring references are alike).
            let base = g * LANES;
            let used = LANES.min(n - base);
            let mut d: Lanes = [f64::INFINITY; LANES];
            if used == LANES {
                let (m, r) = (
                    &min_up[base..base + LANES],
                    &self.refs_last[base..base + LANES],
                );
                for l in 0..LANES {
                    let x = last - r[l];
                    let loc = if SQ { x * x } else { x.abs() };
                    let v = m[l] + loc;
                    d[l] = if SQ { v.sqrt() } else { v };
                }
            } else {
                for (l, o) in d[..used].iter_mut().enumerate() {
                    *o = self.term_lower(ws, Source::Exact, base + l);
                }
            }
            let mut lo = d[0];
            for &v in &d[1..] {
                lo = if v < lo { v } else { lo };
            }
            if bound.lower(lo, 0.0) > hi {
                continue;
            }
            let mut acc: Lanes = [0.0; LANES];
            for (&q, s) in qb.iter().zip(rows) {
                for l in 0..LANES {
                    acc[l] += (q - s[l] as f64).abs();
                }
            }
            let mut c: Lanes = [0.0; LANES];
            for l in 0..LANES {
                c[l] = bound.lower(d[l], acc[l]);
            }
            for (l, &c) in c[..used].iter().enumerate() {
                if c <= hi {
                    cand.push((c, (base + l) as u32));
                }
            }
        }
    }

    fn run_term_bounds(&self, ws: &mut Workspace, source: Source) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.term_bounds_avx2(ws, source) };
            }
        }
        self.term_bounds(ws, source)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn term_bounds_avx2(&self, ws: &mut Workspace, source: Source) {
        self.term_bounds(ws, source)
    }

    /// A lower bound of every reference's C1 into `ws.term_lb`: D1's lower
    /// bound from `source` ([`Model::term_lower`]) and F's from the block
    /// sums of the sorted steps, `Σ_b |S_b(q) − S_b(r)| ≤ F` (the triangle
    /// inequality within each block), lowered by [`f_rounding`]; combined with
    /// the scales' reciprocals and [`C1_BOUND_DOWN`], so the bound never
    /// exceeds the C1 the search computes. One pass, eight references per
    /// group (the blocks are interleaved by lanes).
    #[inline(always)]
    fn term_bounds(&self, ws: &mut Workspace, source: Source) {
        let t = self.term.expect("term_bounds needs a term");
        let n = self.labels.len();
        let f = self.window - 1;
        let mut lb = std::mem::take(&mut ws.term_lb);
        let lb_n = &mut lb[..n];
        // The source is a constant in each loop, so its match folds away.
        match source {
            Source::Exhaustive => lb_n.fill(0.0),
            Source::Exact => {
                for (j, o) in lb_n.iter_mut().enumerate() {
                    *o = self.term_lower(ws, Source::Exact, j);
                }
            }
            Source::Bounded => {
                for (j, o) in lb_n.iter_mut().enumerate() {
                    *o = self.term_lower(ws, Source::Bounded, j);
                }
            }
            Source::Enhanced => {
                for (j, o) in lb_n.iter_mut().enumerate() {
                    *o = self.term_lower(ws, Source::Enhanced, j);
                }
            }
        }
        let bound = C1Lower::new(&t, f, self.steps_blocks_err);
        let lower = |d: f64, a: f64| bound.lower(d, a);
        let nb = n_blocks(f);
        let qb = &ws.steps_qb[..nb];
        if nb == 0 {
            for o in lb_n.iter_mut() {
                *o = lower(*o, 0.0);
            }
        } else {
            for (g, rows) in self.steps_blocks.chunks_exact(nb).enumerate() {
                let mut acc: Lanes = [0.0; LANES];
                for (&q, s) in qb.iter().zip(rows) {
                    for l in 0..LANES {
                        acc[l] += (q - s[l] as f64).abs();
                    }
                }
                let used = LANES.min(n - g * LANES);
                for (o, &a) in lb_n[g * LANES..g * LANES + used].iter_mut().zip(&acc) {
                    *o = lower(*o, a);
                }
            }
        }
        ws.term_lb = lb;
    }

    /// A lower bound of reference `j`'s D1 (finished units) from `source`.
    #[inline(always)]
    fn term_lower(&self, ws: &Workspace, source: Source, j: usize) -> f64 {
        let cost = self.config.dtw.cost;
        match source {
            Source::Exhaustive => 0.0,
            // fl(M + l) bounds the programme's own value from below.
            Source::Exact => cost.finish(self.exact_lower_bound(ws, j)),
            Source::Bounded => {
                let (f, b) = (cost.finish(ws.prepared.dist[j]), ws.prepared.bound);
                let lo = (f - b) - SPECULATIVE_SLACK * (f + b);
                if lo > 0.0 {
                    lo
                } else {
                    0.0
                }
            }
            Source::Enhanced => {
                let lb = cost.finish(ws.lb[j]);
                let lo = lb - SPECULATIVE_SLACK * lb;
                if lo > 0.0 {
                    lo
                } else {
                    0.0
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "steps_tests.rs"]
mod tests;
