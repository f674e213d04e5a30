//! Speculative classification of a window whose last sample is still to come.
//!
//! OPS classifies a window the moment its last 1 Hz sample arrives (000 §1.2
//! steps 2–3); the sample before it arrives a whole period earlier. With
//! [`Model::prepare`] the driver spends that idle second on the DTW rows that
//! do not depend on the last sample: for every reference, rows 0..w−1 of the
//! banded dynamic programme of the (normalised) prefix. When the last sample
//! comes, only row w−1 remains: `radius + 1` cells per reference, eight
//! references per SIMD operation, with no bound cascade and no second search
//! for the margin (every exact distance is known, so the nearest reference of
//! any other class is a scan).
//!
//! Every cell gets the value the full programme gives it (the same local
//! cost plus the same minimum of the same three neighbours; `min` is exact),
//! so the result is bit-identical to [`Model::classify_exhaustive`] and hence
//! to the pruned search (tests: `prepared_equals_unprepared`).
//!
//! The exact finish is used only when it still holds: same model, the window's
//! first w−1 samples bit-identical to the prepared prefix, and the last sample
//! leaves the normalisation unchanged (`none` always; `subtract-min` and
//! `divide-min` when the last sample is not a new minimum).
//!
//! When the last sample changes the normalisation of the whole window
//! (`z-score` always: its mean and deviation move with every sample; a new
//! minimum under `subtract-min`/`divide-min`), the preparation is
//! *speculative* and the finish *bounded*, still exact in its answer:
//! - At prepare time the prefix is normalised as if the last sample were a
//!   guess (z-score: [`ZSCORE_GUESSES_SD`], several guesses around the
//!   previous sample; the min norms: [`MIN_GUESSES_REL`], new minimums below
//!   the prefix's own), and rows 0..w−1 are computed for every guess.
//! - At the last sample the guess nearest to it is finished with the true
//!   normalised last value: D(s) = DTW(h, s) for every reference s, with h the
//!   guessed prefix followed by the true last value.
//! - Every path's cost moves by at most the sum of |q_i − h_i| over its cells
//!   (triangle inequality on each cell; Minkowski for the squared cost), so
//!   |DTW(q, s) − D(s)| ≤ B, B = the largest such sum over the band's paths (a
//!   max-plus programme over w rows, once per query, independent of s).
//! - D − B lower-bounds every reference's distance; the k smallest D + B bound
//!   the k-th nearest from above. The search ([`Model::search_bounded`]) then
//!   computes exactly, with early abandoning, only the references whose lower
//!   bound is not above the cut-off, nearest D first. On the shipped z-score
//!   model the bound leaves a median of 5 references of 1181 (leave-one-out,
//!   `examples/knn_speculative_study.rs`, docs/results/ops-latency.md).
//! - Bounds carry a relative slack ([`SPECULATIVE_SLACK`]) far above the
//!   rounding of sums of a few dozen terms, so rounding never prunes a
//!   reference that ties the k-th; every distance reported is computed by the
//!   same programme as the exhaustive search, bit for bit.

use super::search::{insert, two_smallest};
use super::{Model, Prediction, SearchStats, Workspace};
use crate::dtw::{
    self,
    lanes::{Lanes, LANES},
};
use crate::series::Normalization;

/// Guessed last samples of a z-score preparation, in standard deviations of
/// the prefix from its last sample. On the shipped z-score model
/// (leave-one-out, `examples/knn_speculative_study.rs`) the true last sample
/// lies a median 0.22 sd from the previous one (p90 1.36); with these nine
/// guesses the nearest is a median 0.06 sd away (p90 0.19) and the bound
/// leaves a median of 5 references to compute (p90 33) instead of 22 (p90
/// 748) with the previous sample alone.
pub(super) const ZSCORE_GUESSES_SD: [f64; 9] = [0.0, -0.25, 0.25, -0.6, 0.6, -1.0, 1.0, -1.5, 1.5];
/// Guessed new minimums of a `subtract-min` / `divide-min` preparation, as
/// relative drops below the prefix's minimum (guess 0 is the minimum itself,
/// the exact path). On the shipped passive model (divide-min, 1800
/// references, leave-one-out) 4 % of windows end on a new minimum, dropping
/// it by a median 1 % (p10 0.02 %, p90 11 %, p99 23 %); with one guess those
/// windows' bound covered most references (p99 of the decision 334 µs, two
/// orders above the median). Log-spaced guesses over that range keep the
/// nearest within a factor of about 2.5 of the true drop.
pub(super) const MIN_GUESSES_REL: [f64; 8] = [0.0005, 0.002, 0.006, 0.015, 0.03, 0.06, 0.12, 0.22];
/// Most guesses a preparation holds.
const MAX_GUESSES: usize = {
    let a = ZSCORE_GUESSES_SD.len();
    let b = 1 + MIN_GUESSES_REL.len();
    if a > b {
        a
    } else {
        b
    }
};

/// Relative slack on the speculative bounds: they are sums of at most 2w − 1
/// non-negative terms, rounded to within (2w)·2⁻⁵³ relative; 1e-9 covers
/// windows of millions of samples.
pub(super) const SPECULATIVE_SLACK: f64 = 1e-9;

/// References per guess that the preparation puts in ascending order of the
/// pruned finishes' bound, with their operands copied contiguously; the rest
/// follow unordered. On `models/passive-200ms` (2749 references) the exact
/// finish computes a median of 20 and a p99 of 132 last rows, nearly all
/// from the head; a reference in the tail is still handled exactly.
pub(super) const ORDERED_HEAD: usize = 512;

/// How [`Model::finish_prepared`] finished a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finished {
    /// No valid preparation: the normal search must run.
    No,
    /// Exact: every reference's distance is in `Prepared::dist`, `ws.neighbors` holds the k nearest.
    Exact,
    /// Bounded: `Prepared::dist` and `Prepared::bound` bound every distance;
    /// [`Model::search_bounded`] must run.
    Bounded,
}

/// The preparation a workspace holds (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct Prepared {
    /// [`Model`]'s id, 0 when nothing is prepared.
    model: u64,
    /// The raw prefix (w − 1 samples) it was prepared for.
    prefix: Vec<f64>,
    /// Minimum of the raw prefix (the normalisation's base).
    base: f64,
    /// Guesses prepared (1 for `none`).
    guesses: usize,
    /// The guessed raw last sample of each guess (z-score), or the guessed
    /// window minimum (the min norms).
    guess_x: [f64; MAX_GUESSES],
    /// The prefix after normalisation, per guess: `[guess][sample]`.
    query: Vec<f64>,
    /// Row w − 2 of the programme per guess and group of `LANES` references:
    /// `[guess][group][1 + column][lane]`, slot 0 the virtual column −1.
    rows: Vec<Lanes>,
    /// Accumulated distance of every reference after the finish (exact, or
    /// to the guessed query when bounded).
    pub(super) dist: Vec<f64>,
    /// Bounded finish: whether `dist[i]` is D(i) itself (else a lower bound
    /// of it, [`Model::finish_bounded_pruned`]).
    pub(super) exact: Vec<bool>,
    /// Bounded finish: B, in finished (reported) units.
    pub(super) bound: f64,
    /// The exact finish (or the bounded margin search) filled
    /// `Workspace::class_best` (k = 1).
    pub(super) class_best: bool,
    /// The pruned finishes ([`Model::finish_class_best`],
    /// [`Model::finish_bounded_pruned`]), per guess (`[guess][position]`):
    /// reference indices ordered by `M` (the minimum over the last row's
    /// band of the prepared `min(prev[j], prev[j + 1])`): the `head` smallest
    /// (ties to the lower index) first and in ascending order, then the rest
    /// unordered, each at least the head's last. Per position `M`, the
    /// reference's last normalised value and its label; for head positions
    /// also the finish operands (`[up; c][s; c]`, c = the last row's band
    /// width; `[guess][head position]`), tail references read theirs from
    /// `rows` and the model ([`Model::tail_corner`]). A full sort and a copy
    /// of every reference's operands cost about 15 % of the preparation; the
    /// pruned finishes rarely go past the first few dozen positions. Written
    /// at prepare time, off the decision's path; reserved with the workspace.
    /// `min_up` holds `M` per guess and reference (`[guess][ref]`), written
    /// by [`Model::prepare`]'s row pass while the rows are in cache.
    min_up: Vec<f64>,
    head: usize,
    /// The most head positions (0: [`ORDERED_HEAD`]); tests lower it to
    /// exercise the tail.
    pub(super) head_cap: usize,
    order: Vec<u32>,
    ord_min: Vec<f64>,
    ord_last: Vec<f64>,
    ord_label: Vec<u32>,
    ord_cells: Vec<f64>,
    /// Classes with at least one reference (the early exit needs each
    /// class's best).
    present: usize,
}

impl Prepared {
    /// Size the buffers for `guesses` guesses; allocates only when growing
    /// (or when the window changes).
    pub(super) fn fit_to(&mut self, window: usize, n_refs: usize) {
        self.reserve(window, n_refs, 1, 0);
    }

    /// [`Prepared::fit_to`] for `guesses` guesses and a last row of `cells`
    /// band columns.
    pub(super) fn reserve(&mut self, window: usize, n_refs: usize, guesses: usize, cells: usize) {
        let p = window.saturating_sub(1);
        if self.prefix.len() != p {
            self.model = 0;
            self.prefix.resize(p, 0.0);
        }
        if self.query.len() < p * guesses {
            self.query.resize(p * guesses, 0.0);
        }
        let rows = n_refs.div_ceil(LANES) * (window + 1) * guesses;
        if self.rows.len() < rows {
            self.rows.resize(rows, [0.0; LANES]);
        }
        if self.dist.len() != n_refs {
            self.model = 0;
            self.dist.resize(n_refs, 0.0);
        }
        if self.exact.len() < n_refs {
            self.exact.resize(n_refs, false);
        }
        if self.min_up.len() < guesses * n_refs {
            self.min_up.resize(guesses * n_refs, 0.0);
        }
        if self.order.len() < guesses * n_refs {
            self.order.resize(guesses * n_refs, 0);
            self.ord_min.resize(guesses * n_refs, 0.0);
            self.ord_last.resize(guesses * n_refs, 0.0);
            self.ord_label.resize(guesses * n_refs, 0);
        }
        let head = n_refs.min(self.head_limit());
        if self.ord_cells.len() < guesses * 2 * cells * head {
            self.ord_cells.resize(guesses * 2 * cells * head, 0.0);
        }
    }
}

impl Prepared {
    fn head_limit(&self) -> usize {
        if self.head_cap == 0 {
            ORDERED_HEAD
        } else {
            self.head_cap
        }
    }
}

/// The smallest (distance, index) by distance, then index (the order
/// `insert` keeps), skipping classes without a reference (index `usize::MAX`).
pub(super) fn lowest(it: impl Iterator<Item = (f64, usize)>) -> Option<(f64, usize)> {
    it.filter(|b| b.1 != usize::MAX)
        .fold(None, |acc: Option<(f64, usize)>, b| match acc {
            Some(a) if a.0 < b.0 || (a.0 == b.0 && a.1 < b.1) => Some(a),
            _ => Some(b),
        })
}

/// `a < b ? a : b` (inputs are never NaN), as `dtw`'s programme computes it.
#[inline(always)]
fn vmin(a: &Lanes, b: &Lanes) -> Lanes {
    std::array::from_fn(|t| if a[t] < b[t] { a[t] } else { b[t] })
}

#[inline(always)]
fn local<const SQ: bool>(a: f64, b: &Lanes) -> Lanes {
    std::array::from_fn(|t| {
        let d = a - b[t];
        if SQ {
            d * d
        } else {
            d.abs()
        }
    })
}

/// [`last_cell`] for one reference from its finish operands `[up; c][s; c]`:
/// the same operations in the same order, so the same bits.
#[inline(always)]
fn corner<const SQ: bool>(last: f64, cells: &[f64]) -> f64 {
    let (up, s) = cells.split_at(cells.len() / 2);
    let mut left = f64::INFINITY;
    for (&u, &s) in up.iter().zip(s) {
        let d = last - s;
        let l = if SQ { d * d } else { d.abs() };
        let m = if u < left { u } else { left };
        left = l + m;
    }
    left
}

/// [`corner`] for four references at once: four independent chains, each
/// with [`corner`]'s operations in its order (the same bits).
#[inline(always)]
fn corners4<const SQ: bool>(last: f64, cells: [&[f64]; 4], c: usize) -> [f64; 4] {
    let cells = cells.map(|x| &x[..2 * c]);
    let mut left = [f64::INFINITY; 4];
    for t in 0..c {
        for (l, x) in left.iter_mut().zip(&cells) {
            let (u, s) = (x[t], x[c + t]);
            let d = last - s;
            let cost = if SQ { d * d } else { d.abs() };
            let m = if u < *l { u } else { *l };
            *l = cost + m;
        }
    }
    left
}

/// The last cell of row `i` of the banded programme for `LANES` references,
/// `[lo, hi]` its band and `prev` row `i − 1` as [`Model::prepare_rows`] leaves
/// it: the same operations in the same order as a row there (so the same bits), without
/// storing the row. The finish needs only the programme's corner.
#[inline(always)]
///
/// `up[j]` holds `min(prev[j], prev[j + 1])` (the two upper neighbours of
/// cell j, taken at prepare time, off the decision's path: [`Model::prepare`]
/// stores the row so): `min` is exact and applied to the same operands in the
/// same order, so the bits are those of a full row.
fn last_cell<const SQ: bool>(q: f64, s: &[Lanes], lo: usize, hi: usize, up: &[Lanes]) -> Lanes {
    let mut left = [f64::INFINITY; LANES];
    for j in lo..=hi {
        let l = local::<SQ>(q, &s[j]);
        let m = vmin(&up[j], &left);
        left = std::array::from_fn(|t| l[t] + m[t]);
    }
    left
}

impl Model {
    /// Columns of the last row's band (the pruned finishes' operands per reference).
    pub(super) fn last_row_cells(&self) -> usize {
        let w = self.window;
        w - (w - 1).saturating_sub(self.config.dtw.radius_or_max())
    }

    /// Guesses a preparation of this model holds (its workspace reserves them).
    pub(super) fn prepared_guesses(&self) -> usize {
        match self.config.normalization {
            Normalization::ZScore => ZSCORE_GUESSES_SD.len(),
            // Never prepared (`Model::prepare`).
            Normalization::ZSorted => 1,
            Normalization::SubtractMin | Normalization::DivideMin => 1 + MIN_GUESSES_REL.len(),
            Normalization::None => 1,
        }
    }

    /// Prepare the classification of a window whose first `w − 1` samples
    /// are `prefix` (the last one still to come): afterwards [`Model::classify`]
    /// and [`Model::classify_with_margin`] on such a window with this
    /// workspace give the same result with much less work: one programme row
    /// per reference when the last sample leaves the normalisation unchanged,
    /// else (`z-score`, a new minimum) that row for one guessed prefix and an
    /// exact search over the few references its bound leaves (module docs).
    /// Returns whether anything was prepared (not for w = 1, a non-finite
    /// prefix or a `divide-min` prefix whose minimum is not positive: those
    /// windows take the normal search). No allocation once `ws` came from
    /// [`Model::workspace`].
    pub fn prepare(&self, prefix: &[f64], ws: &mut Workspace) -> bool {
        let w = self.window;
        ws.prepared.model = 0;
        if w < 2 || prefix.len() != w - 1 || prefix.iter().any(|v| !v.is_finite()) {
            return false;
        }
        let base = prefix.iter().copied().fold(f64::INFINITY, f64::min);
        let norm = self.config.normalization;
        if norm == Normalization::DivideMin && base <= 0.0 {
            return false;
        }
        // The sort moves every sample with the last one: no row of the
        // programme is known before it comes (the normal search runs).
        if norm == Normalization::ZSorted {
            return false;
        }
        ws.fit_to(w, self.config.k, self.classes.len(), self.labels.len());
        let guesses = self.prepared_guesses();
        ws.prepared
            .reserve(w, self.labels.len(), guesses.max(1), self.last_row_cells());
        let p = &mut ws.prepared;
        p.prefix.copy_from_slice(prefix);
        p.base = base;
        if norm == Normalization::ZScore {
            // The prefix normalised as if the last sample were each guess,
            // with `Normalization::apply` itself (the query buffer is scratch
            // until the window comes).
            let n = (w - 1) as f64;
            let mean = prefix.iter().sum::<f64>() / n;
            let sd = (prefix.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
            let prev = prefix[w - 2];
            p.guesses = 0;
            for &o in ZSCORE_GUESSES_SD.iter() {
                let x = prev + o * sd;
                // A flat prefix has one guess; a huge one may overflow.
                if !x.is_finite() || (p.guesses > 0 && (sd.is_nan() || sd <= 0.0)) {
                    continue;
                }
                let q = &mut ws.query[..w];
                q[..w - 1].copy_from_slice(prefix);
                q[w - 1] = x;
                if norm.apply(q).is_err() || q.iter().any(|v| !v.is_finite()) {
                    continue;
                }
                let g = p.guesses;
                p.query[g * (w - 1)..(g + 1) * (w - 1)].copy_from_slice(&q[..w - 1]);
                p.guess_x[g] = x;
                p.guesses += 1;
            }
            if p.guesses == 0 {
                return false;
            }
        } else {
            // Guess 0: the same arithmetic as `Normalization::apply` with the
            // window's minimum equal to the prefix's (checked when the last
            // sample comes: the exact finish). Guesses 1..: a new minimum
            // below it (the bounded finish picks the nearest).
            let extra = match norm {
                Normalization::SubtractMin | Normalization::DivideMin => &MIN_GUESSES_REL[..],
                _ => &[],
            };
            p.guesses = 0;
            for f in std::iter::once(0.0).chain(extra.iter().copied()) {
                let x = base - f * base.abs();
                if p.guesses > 0
                    && !(x.is_finite() && x < base && (norm != Normalization::DivideMin || x > 0.0))
                {
                    continue;
                }
                let g = p.guesses;
                let q = &mut p.query[g * (w - 1)..(g + 1) * (w - 1)];
                q.copy_from_slice(prefix);
                match norm {
                    Normalization::SubtractMin => q.iter_mut().for_each(|v| *v -= x),
                    Normalization::DivideMin => q.iter_mut().for_each(|v| *v /= x),
                    _ => {}
                }
                p.guess_x[g] = x;
                p.guesses += 1;
            }
        }
        self.run_prepare(ws);
        self.prepare_order(ws);
        self.warm_term(ws);
        ws.prepared.model = self.id;
        true
    }

    /// The pruned finishes' order and operands for every guess (the fields
    /// after `Prepared::class_best`): off the decision's path, at prepare
    /// time. `M` is already in `min_up` ([`Model::prepare_rows`]).
    fn prepare_order(&self, ws: &mut Workspace) {
        let w = self.window;
        let n = self.labels.len();
        let lo = (w - 1).saturating_sub(self.config.dtw.radius_or_max());
        let c = w - lo;
        let p = &mut ws.prepared;
        let per_guess = n.div_ceil(LANES) * (w + 1);
        let mut present = 0u64;
        for &l in &self.labels {
            if l < 64 {
                present |= 1 << l;
            }
        }
        p.present = if self.classes.len() <= 64 {
            present.count_ones() as usize
        } else {
            usize::MAX // no early exit
        };
        let head = n.min(p.head_limit());
        p.head = head;
        // Guess 0 last (as in `prepare_rows`): its operands, the exact
        // finish's and the likeliest, are then the most recently written.
        for g in (0..p.guesses).rev() {
            let rows = &p.rows[g * per_guess..(g + 1) * per_guess];
            let min_up = &p.min_up[g * n..(g + 1) * n];
            let order = &mut p.order[g * n..(g + 1) * n];
            for (i, o) in order.iter_mut().enumerate() {
                *o = i as u32;
            }
            // The `head` smallest by (M, index), then those in order: a
            // selection and a short sort instead of sorting all n. Both are
            // in place (no allocation); the index breaks ties, so the order
            // is deterministic.
            let by_m = |a: &u32, b: &u32| {
                min_up[*a as usize]
                    .total_cmp(&min_up[*b as usize])
                    .then(a.cmp(b))
            };
            if head < n {
                order.select_nth_unstable_by(head - 1, by_m);
            }
            order[..head].sort_unstable_by(by_m);
            for (pos, &i) in order.iter().enumerate() {
                let i = i as usize;
                let at = g * n + pos;
                p.ord_min[at] = min_up[i];
                p.ord_last[at] = self.refs[i * w + w - 1];
                p.ord_label[at] = self.labels[i];
            }
            for (pos, &i) in order[..head].iter().enumerate() {
                let i = i as usize;
                let (grp, lane) = (i / LANES, i % LANES);
                let rows = &rows[grp * (w + 1)..(grp + 1) * (w + 1)];
                let s = self.reference(i);
                let at = g * head + pos;
                let cells = &mut p.ord_cells[at * 2 * c..(at + 1) * 2 * c];
                for t in 0..c {
                    cells[t] = rows[lo + t][lane];
                    cells[c + t] = s[lo + t];
                }
            }
        }
    }

    /// [`corner`] for reference `i` of guess `g` outside the ordered head:
    /// its operands read where they live (`prepared.rows`, lane-major, and
    /// the reference), the same values in the same order, so the same bits.
    #[inline(always)]
    fn tail_corner<const SQ: bool>(&self, p: &Prepared, g: usize, i: usize, last: f64) -> f64 {
        let w = self.window;
        let lo = (w - 1).saturating_sub(self.config.dtw.radius_or_max());
        let per_guess = self.labels.len().div_ceil(LANES) * (w + 1);
        let (grp, lane) = (i / LANES, i % LANES);
        let at = g * per_guess + grp * (w + 1);
        let up = &p.rows[at + lo..at + w];
        let s = &self.reference(i)[lo..w];
        let mut left = f64::INFINITY;
        for (u, &s) in up.iter().zip(s) {
            let u = u[lane];
            let d = last - s;
            let l = if SQ { d * d } else { d.abs() };
            let m = if u < left { u } else { left };
            left = l + m;
        }
        left
    }

    /// The exact finish's per-class nearest references, pruned: into
    /// `ws.class_best` (accumulated distance, index; ties to the lower index,
    /// `usize::MAX` for a class without references). With `all` every
    /// class's entry is what the full finish's scan gives, bit for bit;
    /// without, only the two classes whose entries come first under
    /// [`lowest`] (the nearest class, and the nearest other class: all that
    /// 1-NN and its margin read), the others being at least those two.
    /// Returns how many references' distances were computed.
    ///
    /// Why it is exact: the last cell is `l(w−1) + min(…)` over a chain
    /// whose every value is at least `M`, the minimum of the chain's `up`
    /// operands (each value is a non-negative local cost plus a minimum of
    /// values at least `M`; rounding is monotone), so the computed distance
    /// is at least `fl(M + l(w−1))`, computed here with the same local cost.
    /// A reference whose bound exceeds its class's best so far can neither be
    /// its class's nearest nor tie it; without `all`, neither can one whose
    /// bound exceeds T, the second smallest class best so far (the two
    /// answers are at most T, and class bests only decrease). The ordered
    /// head runs in ascending `M`, so once `M` exceeds the largest threshold
    /// (every class's best, or T) nothing later can enter; in the unordered
    /// tail such a reference is skipped, and the scan stops once the head's
    /// last `M` (at most every tail `M`) exceeds the threshold. A computed distance gets
    /// the operations of [`last_cell`] in its order ([`corner`]). Candidates
    /// are checked against the bests as they stand and computed four at a
    /// time (independent chains overlap in the core); a best that has since
    /// dropped only means a candidate computed in vain.
    #[inline(always)]
    fn finish_class_best<const SQ: bool>(&self, last: f64, all: bool, ws: &mut Workspace) -> usize {
        let n = self.labels.len();
        let c = self.last_row_cells();
        let Workspace {
            prepared: p,
            class_best,
            ..
        } = ws;
        class_best.fill((f64::INFINITY, usize::MAX));
        let local = |s: f64| {
            let d = last - s;
            if SQ {
                d * d
            } else {
                d.abs()
            }
        };
        // The largest threshold (stop once M exceeds it) and T.
        let need = if all { p.present } else { p.present.min(2) };
        let (mut filled, mut stop, mut second) = (0usize, f64::INFINITY, f64::INFINITY);
        let mut computed = 0;
        let mut batch = [0usize; 4];
        let mut pos = 0;
        // The tail (positions from `head` on) is unordered, each M at least
        // the head's last (`floor`).
        let head = p.head;
        let floor = if head < n {
            p.ord_min[head - 1]
        } else {
            f64::INFINITY
        };
        while pos < n {
            let mut used = 0;
            while pos < n && used < 4 {
                let m = p.ord_min[pos];
                if filled >= need && m > stop {
                    if pos < head || floor > stop {
                        pos = n;
                        break;
                    }
                    pos += 1;
                    continue;
                }
                let best = class_best[p.ord_label[pos] as usize].0;
                let limit = if best < second { best } else { second };
                if m + local(p.ord_last[pos]) <= limit {
                    batch[used] = pos;
                    used += 1;
                }
                pos += 1;
            }
            let mut d = [f64::INFINITY; 4];
            if used == 4 && batch[3] < head {
                let cells = batch.map(|b| &p.ord_cells[b * 2 * c..(b + 1) * 2 * c]);
                d = corners4::<SQ>(last, cells, c);
            } else {
                for t in 0..used {
                    let b = batch[t];
                    d[t] = if b < head {
                        corner::<SQ>(last, &p.ord_cells[b * 2 * c..(b + 1) * 2 * c])
                    } else {
                        self.tail_corner::<SQ>(p, 0, p.order[b] as usize, last)
                    };
                }
            }
            computed += used;
            let mut changed = false;
            for t in 0..used {
                let (b, d) = (batch[t], d[t]);
                let i = p.order[b] as usize;
                let best = &mut class_best[p.ord_label[b] as usize];
                if d < best.0 || (d == best.0 && i < best.1) {
                    if best.1 == usize::MAX {
                        filled += 1;
                    }
                    *best = (d, i);
                    changed = true;
                }
            }
            if changed && filled >= 2 {
                let (mut lo1, mut lo2, mut hi) = (f64::INFINITY, f64::INFINITY, 0.0f64);
                for b in class_best.iter().filter(|b| b.1 != usize::MAX) {
                    if b.0 < lo1 {
                        lo2 = lo1;
                        lo1 = b.0;
                    } else if b.0 < lo2 {
                        lo2 = b.0;
                    }
                    hi = if b.0 > hi { b.0 } else { hi };
                }
                if !all {
                    second = lo2;
                }
                stop = if all { hi } else { lo2 };
            } else if changed && filled >= need {
                // One class present: its best is the only threshold.
                stop = class_best
                    .iter()
                    .filter(|b| b.1 != usize::MAX)
                    .fold(0.0, |a, b| if b.0 > a { b.0 } else { a });
            }
        }
        computed
    }

    fn run_prepare(&self, ws: &mut Workspace) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.prepare_avx2(ws) };
            }
        }
        self.prepare_impl(ws)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn prepare_avx2(&self, ws: &mut Workspace) {
        self.prepare_impl(ws)
    }

    #[inline(always)]
    fn prepare_impl(&self, ws: &mut Workspace) {
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.prepare_rows::<false>(ws),
            dtw::Cost::Squared => self.prepare_rows::<true>(ws),
        }
    }

    /// Rows 0..w−1 of every reference's programme against each guessed
    /// prefix, and each reference's `M` (`prepared.min_up`).
    ///
    /// Each group's rows are computed in place in its slots of `rows`: cell
    /// j of row i reads slots j and j + 1 of row i − 1, and writes slot
    /// j + 1, so slot j + 1's old value is kept in a register for cell
    /// j + 1. No row is copied and only the slot left of the band is reset
    /// to ∞ (columns right of the band have never been written, ∞ since
    /// row −1). Every cell gets `l + min(min(up, upper right), left)`, the
    /// full programme's operations in its order (the same bits). Afterwards slots `lo..=w` of the last row's band are
    /// valid, the only ones read; slots left of it hold stale values.
    #[inline(always)]
    fn prepare_rows<const SQ: bool>(&self, ws: &mut Workspace) {
        let w = self.window;
        let n = self.labels.len();
        let r = self.config.dtw.radius_or_max();
        let groups = n.div_ceil(LANES);
        let prepared = &mut ws.prepared;
        let inf = [f64::INFINITY; LANES];
        let per_guess = groups * (w + 1);
        let last_lo = (w - 1).saturating_sub(r);
        // Guess 0 last: the exact finish's rows are then the freshest in the
        // cache (`prepare_order` reads them next).
        for g in (0..prepared.guesses).rev() {
            let query = &prepared.query[g * (w - 1)..(g + 1) * (w - 1)];
            let rows = &mut prepared.rows[g * per_guess..(g + 1) * per_guess];
            let min_up = &mut prepared.min_up[g * n..(g + 1) * n];
            for (grp, out) in rows.chunks_exact_mut(w + 1).enumerate() {
                let s = &self.refs_lanes[grp * w..(grp + 1) * w];
                // Row −1: only the corner (−1, −1) is 0.
                out.iter_mut().for_each(|c| *c = inf);
                out[0] = [0.0; LANES];
                for (i, &qi) in query.iter().enumerate() {
                    let lo = i.saturating_sub(r);
                    let hi = i.saturating_add(r).min(w - 1);
                    let mut up = out[lo];
                    let mut left = inf;
                    for j in lo..=hi {
                        let next = out[j + 1];
                        let l = local::<SQ>(qi, &s[j]);
                        let m = vmin(&vmin(&up, &next), &left);
                        let v: Lanes = std::array::from_fn(|t| l[t] + m[t]);
                        out[j + 1] = v;
                        left = v;
                        up = next;
                    }
                    // Column lo − 1 is outside every later row's band, but
                    // row i + 1 reads it when its band starts at lo too.
                    out[lo] = inf;
                }
                // The last row reads row w − 2 only as min(slot j, slot j + 1)
                // for its band's columns j: take those minimums now (ascending
                // j reads slot j + 1 before it is overwritten; `last_cell`),
                // and their minimum, `M` (the pruned finishes' bound).
                let mut m = inf;
                for j in last_lo..w {
                    out[j] = vmin(&out[j], &out[j + 1]);
                    m = vmin(&out[j], &m);
                }
                let used = LANES.min(n - grp * LANES);
                min_up[grp * LANES..grp * LANES + used].copy_from_slice(&m[..used]);
            }
        }
    }

    /// Whether `ws` holds a usable preparation of this model whose prefix is
    /// `window`'s first w − 1 samples, bit for bit.
    fn holds_prefix_of(&self, window: &[f64], ws: &Workspace) -> bool {
        let p = &ws.prepared;
        p.model == self.id
            && p.prefix.len() + 1 == self.window
            && p.guesses != 0
            && p.prefix
                .iter()
                .zip(window)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }

    /// Whether `ws` holds a preparation of this model for `window`'s prefix
    /// whose finish will be exact (the last sample leaves the normalisation
    /// unchanged). Cheap: lets callers skip a bounded finish they cannot use.
    pub(super) fn prepared_exactly_for(&self, window: &[f64], ws: &Workspace) -> bool {
        let w = self.window;
        if window.len() != w || !self.holds_prefix_of(window, ws) {
            return false;
        }
        let p = &ws.prepared;
        let x = window[w - 1];
        match self.config.normalization {
            Normalization::None => true,
            Normalization::SubtractMin | Normalization::DivideMin => {
                x > p.base || x.to_bits() == p.base.to_bits()
            }
            Normalization::ZScore | Normalization::ZSorted => false,
        }
    }

    /// If `ws` holds a preparation valid for `window` (validated, length w,
    /// normalised into `ws.query` by `prepare_query`), finish it (see
    /// [`Finished`]). When exact, `ws.neighbors` gets the k nearest (finished).
    /// With `per_class` (or k = 1) an exact finish fills only
    /// `ws.class_best` (and, for k = 1, `ws.neighbors`), not `prepared.dist`.
    pub(super) fn finish_prepared(
        &self,
        window: &[f64],
        ws: &mut Workspace,
        per_class: bool,
    ) -> Finished {
        let w = self.window;
        if !self.holds_prefix_of(window, ws) {
            return Finished::No;
        }
        let p = &ws.prepared;
        let x = window[w - 1];
        // The window's minimum must be the prefix's, bit for bit.
        let same_base = x > p.base || x.to_bits() == p.base.to_bits();
        let last = match self.config.normalization {
            Normalization::None => x,
            Normalization::SubtractMin if same_base => x - p.base,
            Normalization::DivideMin if same_base => x / p.base,
            _ => return self.finish_bounded(x, ws),
        };
        ws.query[..w - 1].copy_from_slice(&ws.prepared.query[..w - 1]);
        ws.query[w - 1] = last;
        // k nearest in index order with the search's tie rule: the same list
        // the exhaustive search builds.
        let k = self.config.k;
        ws.neighbors.clear();
        ws.prepared.class_best = false;
        let n = self.labels.len();
        if k == 1 || per_class {
            // Each class's nearest (ties to the lower index, as `insert`
            // breaks them), pruned (`finish_class_best`), then the nearest of
            // all; the margin's other-class nearest is then a look-up
            // (`other_class_prepared`). `prepared.dist` is not filled.
            let computed = self.run_class_best(last, per_class, ws);
            if k == 1 {
                if let Some(best) = lowest(ws.class_best.iter().copied()) {
                    ws.neighbors.push(best);
                }
            }
            ws.prepared.class_best = true;
            ws.stats = SearchStats {
                references: n,
                pruned_by_bounds: n - computed,
                full_dtw: computed,
                prepared: true,
                ..SearchStats::default()
            };
            if k == 1 {
                let cost = self.config.dtw.cost;
                for nb in ws.neighbors.iter_mut() {
                    nb.0 = cost.finish(nb.0);
                }
            }
            return Finished::Exact;
        }
        self.run_finish(last, 0, ws);
        for (i, &d) in ws.prepared.dist.iter().enumerate() {
            insert(&mut ws.neighbors, k, d, i);
        }
        let cost = self.config.dtw.cost;
        for nb in ws.neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.stats = SearchStats {
            references: n,
            full_dtw: n,
            prepared: true,
            ..SearchStats::default()
        };
        Finished::Exact
    }

    /// The bounded finish (module docs): the guess nearest to the raw last
    /// sample `x`, its last row with the true normalised last value, and B.
    fn finish_bounded(&self, x: f64, ws: &mut Workspace) -> Finished {
        let w = self.window;
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        let p = &ws.prepared;
        let mut g = 0;
        for t in 1..p.guesses {
            if (x - p.guess_x[t]).abs() < (x - p.guess_x[g]).abs() {
                g = t;
            }
        }
        // B: the largest sum of local(q_i − h_i) over the cells of a band
        // path, by a max-plus programme (cell (i, j) costs c_i; the last row
        // costs 0: it is computed with the true value).
        let h = &p.query[g * (w - 1)..(g + 1) * (w - 1)];
        let q = &ws.query[..w];
        let (prev, curr) = (&mut ws.dtw.prev[..=w], &mut ws.dtw.curr[..=w]);
        prev.fill(f64::NEG_INFINITY);
        prev[0] = 0.0;
        for i in 0..w {
            let c = if i + 1 < w {
                cost.local(q[i], h[i])
            } else {
                0.0
            };
            curr.fill(f64::NEG_INFINITY);
            let lo = i.saturating_sub(r);
            let hi = i.saturating_add(r).min(w - 1);
            let mut left = f64::NEG_INFINITY;
            for j in lo..=hi {
                // Plain comparisons: no NaN here (−∞ and sums of costs >= 0),
                // so this is `f64::max` without its NaN handling.
                let up = if prev[j] > prev[j + 1] {
                    prev[j]
                } else {
                    prev[j + 1]
                };
                let v = c + if up > left { up } else { left };
                curr[j + 1] = v;
                left = v;
            }
            prev.copy_from_slice(curr);
        }
        let bound = cost.finish(prev[w]);
        if !bound.is_finite() {
            return Finished::No;
        }
        ws.prepared.bound = bound;
        let last = ws.query[w - 1];
        self.run_bounded_pruned(last, g, ws);
        Finished::Bounded
    }

    /// The bounded finish's `prepared.dist`, pruned: for guess `g`, D(s)
    /// exactly (the operations of [`last_cell`]; `prepared.exact` set) for
    /// the references that can matter, and for the others a lower bound of
    /// D(s), `fl(M + l(w−1))` (see [`Model::finish_class_best`]). That is all
    /// [`Model::search_bounded`] needs of them: their bound D − B still
    /// lower-bounds the distance, and the cut-off is taken from computed D
    /// only (`prepared_bounds`), so any choice here is exact; the choice only
    /// decides how much the search must compute. Left out: references whose
    /// bound exceeds, in finished units, by more than 2B the k-th smallest D
    /// computed so far (the search prunes those anyway), and for k = 1 also
    /// their class's smallest D so far when that is lower, unless it exceeds
    /// the second smallest class's (the margin's search excluding the nearest
    /// class then still finds its seed). References run in the prepared order
    /// of guess `g` (ascending `M` in the head; the order only decides how
    /// much is computed). `ws.neighbors` and `ws.class_best`
    /// are scratch here (the search and the vote rewrite them).
    #[inline(always)]
    fn finish_bounded_pruned<const SQ: bool>(&self, last: f64, g: usize, ws: &mut Workspace) {
        let n = self.labels.len();
        let k = self.config.k;
        let cost = self.config.dtw.cost;
        let c = self.last_row_cells();
        let Workspace {
            prepared: p,
            neighbors,
            class_best,
            ..
        } = ws;
        neighbors.clear();
        class_best.fill((f64::INFINITY, usize::MAX));
        let two_b = 2.0 * p.bound;
        let slack = |f: f64| {
            let f = f + two_b;
            f + SPECULATIVE_SLACK * f
        };
        let local = |s: f64| {
            let d = last - s;
            if SQ {
                d * d
            } else {
                d.abs()
            }
        };
        // In finished units, plus 2B, with slack: the k-th smallest D so far;
        // for k = 1 (`class_best[c].0`: class c's smallest D so far) the two
        // smallest class values.
        let (mut limit, mut lo1, mut lo2) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
        let base = g * n;
        // Every reference's lower bound first, in index order (sequential,
        // no branch: the same `fl(M + l)` as below, from the same operands:
        // `ord_min`/`ord_last` are copies of `min_up`/`refs_last`); the loop
        // below overwrites the ones it computes. A skip in that loop then
        // writes nothing, and once `M` alone puts a head position above every
        // threshold (ascending `M`: so are the rest of the head and the tail,
        // whose `M` are at least the head's last), the loop stops: what it
        // would have skipped already holds its bound. The thresholds only
        // decrease, so a reference skipped later would be skipped now.
        for ((d, &m), &s) in p.dist[..n]
            .iter_mut()
            .zip(&p.min_up[base..base + n])
            .zip(&self.refs_last[..n])
        {
            *d = m + local(s);
        }
        p.exact[..n].fill(false);
        let head = p.head;
        let floor = if head < n {
            cost.finish(p.ord_min[base + head - 1])
        } else {
            f64::INFINITY
        };
        for pos in 0..n {
            let at = base + pos;
            // Above lo2 (k = 1: lo1 <= lo2 and own or lo2 <= lo2) or the
            // limit, any later position is skipped too.
            let stop = if k == 1 { lo2 } else { limit };
            if (pos < head && cost.finish(p.ord_min[at]) > stop) || (pos >= head && floor > stop) {
                break;
            }
            let i = p.order[at] as usize;
            let lb = p.ord_min[at] + local(p.ord_last[at]);
            let f = cost.finish(lb);
            let label = p.ord_label[at] as usize;
            let skip = if k == 1 {
                let own = class_best[label].0;
                f > lo1 && f > if own < lo2 { own } else { lo2 }
            } else {
                f > limit
            };
            if skip {
                continue;
            }
            let d = if pos < p.head {
                let at = g * p.head + pos;
                corner::<SQ>(last, &p.ord_cells[at * 2 * c..(at + 1) * 2 * c])
            } else {
                self.tail_corner::<SQ>(p, g, i, last)
            };
            p.dist[i] = d;
            p.exact[i] = true;
            if k == 1 {
                let fd = slack(cost.finish(d));
                let b = &mut class_best[label];
                if fd < b.0 {
                    b.0 = fd;
                    (lo1, lo2) = two_smallest(class_best);
                }
            } else if insert(neighbors, k, d, i) && neighbors.len() == k {
                limit = slack(cost.finish(neighbors[k - 1].0));
            }
        }
    }

    fn run_bounded_pruned(&self, last: f64, guess: usize, ws: &mut Workspace) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.bounded_pruned_avx2(last, guess, ws) };
            }
        }
        self.bounded_pruned_impl(last, guess, ws)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn bounded_pruned_avx2(&self, last: f64, guess: usize, ws: &mut Workspace) {
        self.bounded_pruned_impl(last, guess, ws)
    }

    #[inline(always)]
    fn bounded_pruned_impl(&self, last: f64, guess: usize, ws: &mut Workspace) {
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.finish_bounded_pruned::<false>(last, guess, ws),
            dtw::Cost::Squared => self.finish_bounded_pruned::<true>(last, guess, ws),
        }
    }

    /// The nearest reference of any class but `class` from an exact finish,
    /// as the excluding search reports it (`ws.neighbors` then describes that
    /// search, like [`Model::classify_with_margin`]'s).
    pub(super) fn other_class_prepared(&self, class: u32, ws: &mut Workspace) -> f64 {
        let k = self.config.k;
        ws.neighbors.clear();
        if k == 1 && ws.prepared.class_best {
            let others = ws
                .class_best
                .iter()
                .enumerate()
                .filter(|&(c, _)| c != class as usize)
                .map(|(_, &b)| b);
            if let Some(best) = lowest(others) {
                ws.neighbors.push(best);
            }
        } else {
            for (i, &d) in ws.prepared.dist.iter().enumerate() {
                if self.labels[i] != class {
                    insert(&mut ws.neighbors, k, d, i);
                }
            }
        }
        let cost = self.config.dtw.cost;
        for nb in ws.neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.neighbors.first().map_or(f64::INFINITY, |n| n.0)
    }

    fn run_class_best(&self, last: f64, all: bool, ws: &mut Workspace) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.class_best_avx2(last, all, ws) };
            }
        }
        self.class_best_impl(last, all, ws)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn class_best_avx2(&self, last: f64, all: bool, ws: &mut Workspace) -> usize {
        self.class_best_impl(last, all, ws)
    }

    #[inline(always)]
    fn class_best_impl(&self, last: f64, all: bool, ws: &mut Workspace) -> usize {
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.finish_class_best::<false>(last, all, ws),
            dtw::Cost::Squared => self.finish_class_best::<true>(last, all, ws),
        }
    }

    fn run_finish(&self, last: f64, guess: usize, ws: &mut Workspace) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.finish_avx2(last, guess, ws) };
            }
        }
        self.finish_impl(last, guess, ws)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn finish_avx2(&self, last: f64, guess: usize, ws: &mut Workspace) {
        self.finish_impl(last, guess, ws)
    }

    #[inline(always)]
    fn finish_impl(&self, last: f64, guess: usize, ws: &mut Workspace) {
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.finish_rows::<false>(last, guess, ws),
            dtw::Cost::Squared => self.finish_rows::<true>(last, guess, ws),
        }
    }

    /// Row w − 1 of one guess for every group; accumulated distances into
    /// `prepared.dist`.
    #[inline(always)]
    fn finish_rows<const SQ: bool>(&self, last: f64, guess: usize, ws: &mut Workspace) {
        let w = self.window;
        let n = self.labels.len();
        let r = self.config.dtw.radius_or_max();
        let lo = (w - 1).saturating_sub(r);
        let prepared = &mut ws.prepared;
        let groups = n.div_ceil(LANES);
        let per_guess = groups * (w + 1);
        let rows = &prepared.rows[guess * per_guess..(guess + 1) * per_guess];
        for (g, prev) in rows.chunks_exact(w + 1).enumerate() {
            let s = &self.refs_lanes[g * w..(g + 1) * w];
            // Only the corner (w − 1, w − 1) is needed: no row is stored.
            let d = last_cell::<SQ>(last, s, lo, w - 1, prev);
            let used = LANES.min(n - g * LANES);
            prepared.dist[g * LANES..g * LANES + used].copy_from_slice(&d[..used]);
        }
    }

    /// After a query of this model that finished its preparation exactly
    /// (`stats.prepared` and not `stats.speculative`): true, and then
    /// [`Model::exact_lower_bound`] and [`Model::exact_distance`] give any
    /// reference's distance bound and distance for that query. False after
    /// any other query.
    pub(super) fn exact_finish_holds(&self, ws: &Workspace) -> bool {
        let s = ws.stats;
        s.prepared && !s.speculative && ws.prepared.model == self.id
    }

    /// After [`Model::prepare`] of this model on `ws`: guess 0's `M` of every
    /// reference (the bound [`Model::exact_lower_bound`] adds the last local
    /// cost to) and the normalised last value an exact finish would give the
    /// raw last sample `x`, as a function: `None` when `x` would take the
    /// bounded finish (a new minimum) or the model has no exact finish
    /// (z-score). `None` when nothing is prepared.
    pub(super) fn exact_finish_plan<'a>(
        &self,
        ws: &'a Workspace,
    ) -> Option<(&'a [f64], ExactLast)> {
        let p = &ws.prepared;
        if p.model != self.id || p.guesses == 0 {
            return None;
        }
        let last = match self.config.normalization {
            Normalization::None => ExactLast::Raw,
            Normalization::SubtractMin => ExactLast::Minus(p.base),
            Normalization::DivideMin => ExactLast::Over(p.base),
            Normalization::ZScore | Normalization::ZSorted => return None,
        };
        Some((&p.min_up[..self.labels.len()], last))
    }

    /// After [`Model::prepare`] on `ws`: reference `j`'s operands of an exact
    /// finish (`[up; c][s; c]`, c = [`Model::last_row_cells`], guess 0) into
    /// `out`, for [`Model::exact_distance_of`] (callers copy them at prepare
    /// time into a layout of their own).
    pub(super) fn exact_operands(&self, ws: &Workspace, j: usize, out: &mut [f64]) {
        let w = self.window;
        let lo = (w - 1).saturating_sub(self.config.dtw.radius_or_max());
        let c = w - lo;
        let (grp, lane) = (j / LANES, j % LANES);
        let at = grp * (w + 1);
        let s = &self.reference(j)[lo..w];
        for t in 0..c {
            out[t] = ws.prepared.rows[at + lo + t][lane];
            out[c + t] = s[t];
        }
    }

    /// After an exact finish: the accumulated distance of the reference whose
    /// [`Model::exact_operands`] are `cells` ([`corner`]: the operations of
    /// [`Model::exact_distance`] in its order, so the same bits).
    #[inline(always)]
    pub(super) fn exact_distance_of(&self, ws: &Workspace, cells: &[f64]) -> f64 {
        let last = ws.query[self.window - 1];
        match self.config.dtw.cost {
            dtw::Cost::Abs => corner::<false>(last, cells),
            dtw::Cost::Squared => corner::<true>(last, cells),
        }
    }

    /// Read what an exact finish reads first (guess 0's ordered head: its
    /// bounds, labels and operands), once per cache line, after other
    /// preparation work has evicted it. Returns a sum to keep the reads.
    pub(super) fn warm_exact_finish(&self, ws: &Workspace) -> f64 {
        let p = &ws.prepared;
        if p.model != self.id {
            return 0.0;
        }
        let c = self.last_row_cells();
        let head = p.head;
        let mut acc = 0.0;
        acc += p.ord_min[..head].iter().step_by(8).sum::<f64>();
        acc += p.ord_last[..head].iter().step_by(8).sum::<f64>();
        acc += p.ord_label[..head]
            .iter()
            .step_by(16)
            .map(|&l| l as f64)
            .sum::<f64>();
        acc += p.ord_cells[..head * 2 * c].iter().step_by(8).sum::<f64>();
        acc
    }

    /// Read every reference's `M` (guess 0) once per cache line, after other
    /// preparation work has evicted it (the stage-1 term's bound pass reads
    /// them all, `steps.rs`). Returns a sum to keep the reads.
    pub(super) fn warm_exact_bounds(&self, ws: &Workspace) -> f64 {
        let n = self.labels.len();
        ws.prepared.min_up[..n.min(ws.prepared.min_up.len())]
            .iter()
            .step_by(8)
            .sum()
    }

    /// After an exact finish ([`Model::exact_finish_holds`]): a lower bound of
    /// reference `j`'s accumulated distance, `fl(M + l(w − 1))` with M from
    /// the preparation (the bound [`Model::finish_class_best`] prunes with:
    /// every value of the last row's chain is at least M). One read of two
    /// values per reference, no programme row.
    #[inline(always)]
    pub(super) fn exact_lower_bound(&self, ws: &Workspace, j: usize) -> f64 {
        let d = ws.query[self.window - 1] - self.refs_last[j];
        let l = match self.config.dtw.cost {
            dtw::Cost::Abs => d.abs(),
            dtw::Cost::Squared => d * d,
        };
        ws.prepared.min_up[j] + l
    }

    /// Every reference's `M` (guess 0), [`Model::exact_lower_bound`]'s
    /// operand, for a pass over all references (stage-1 term, `steps.rs`).
    pub(super) fn exact_min_up<'a>(&self, ws: &'a Workspace) -> &'a [f64] {
        &ws.prepared.min_up[..self.labels.len()]
    }

    /// After an exact finish ([`Model::exact_finish_holds`]): reference `j`'s
    /// accumulated distance, the corner of its programme from the prepared
    /// row ([`Model::tail_corner`]: the operations of the full programme in
    /// its order, so the bits of the exhaustive search).
    #[inline(always)]
    pub(super) fn exact_distance(&self, ws: &Workspace, j: usize) -> f64 {
        let last = ws.query[self.window - 1];
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.tail_corner::<false>(&ws.prepared, 0, j, last),
            dtw::Cost::Squared => self.tail_corner::<true>(&ws.prepared, 0, j, last),
        }
    }

    /// After a query of this model that took a bounded finish
    /// (`stats.speculative`): `prepared.dist` (accumulated D, or a lower
    /// bound of it) and B (finished units), so that `finish(dist) − B`
    /// lower-bounds every reference's distance. `None` after any other query.
    pub(super) fn bounded_distances<'a>(&self, ws: &'a Workspace) -> Option<(&'a [f64], f64)> {
        let s = ws.stats;
        (s.speculative && ws.prepared.model == self.id)
            .then(|| (&ws.prepared.dist[..self.labels.len()], ws.prepared.bound))
    }

    /// Classify a window through a valid preparation (exact or bounded), or `None`.
    pub(super) fn classify_prepared(
        &self,
        window: &[f64],
        ws: &mut Workspace,
    ) -> Option<Prediction> {
        match self.finish_prepared(window, ws, false) {
            Finished::No => None,
            Finished::Exact => Some(self.vote(ws)),
            Finished::Bounded => {
                self.search_bounded(ws, None);
                Some(self.vote(ws))
            }
        }
    }
}

/// How an exact finish normalises the raw last sample x
/// ([`Model::exact_finish_plan`]): the arithmetic of
/// [`Model::finish_prepared`], and whether x keeps the prefix's minimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ExactLast {
    /// `none`: x itself.
    Raw,
    /// `subtract-min` with the prefix's minimum: x − base, for x >= base.
    Minus(f64),
    /// `divide-min` with the prefix's minimum: x / base, for x >= base.
    Over(f64),
}

impl ExactLast {
    /// The normalised last value of an exact finish on raw last sample `x`,
    /// or `None` when `x` is a new minimum (the bounded finish).
    pub(super) fn of(self, x: f64) -> Option<f64> {
        let keeps = |base: f64| x > base || x.to_bits() == base.to_bits();
        match self {
            ExactLast::Raw => Some(x),
            ExactLast::Minus(b) => keeps(b).then_some(x - b),
            ExactLast::Over(b) => keeps(b).then_some(x / b),
        }
    }
}
