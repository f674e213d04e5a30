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

use super::search::insert;
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
    /// Bounded finish: B, in finished (reported) units.
    pub(super) bound: f64,
    /// The exact finish filled `Workspace::class_best` (k = 1).
    class_best: bool,
}

impl Prepared {
    /// Size the buffers for `guesses` guesses; allocates only when growing
    /// (or when the window changes).
    pub(super) fn fit_to(&mut self, window: usize, n_refs: usize) {
        self.reserve(window, n_refs, 1);
    }

    /// [`Prepared::fit_to`] for `guesses` guesses.
    pub(super) fn reserve(&mut self, window: usize, n_refs: usize, guesses: usize) {
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
    }
}

/// The smallest (distance, index) by distance, then index (the order
/// `insert` keeps), skipping classes without a reference (index `usize::MAX`).
fn lowest(it: impl Iterator<Item = (f64, usize)>) -> Option<(f64, usize)> {
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

/// One row `i` of the banded programme for `LANES` references: `prev` and
/// `curr` hold `[1 + column]`, slot 0 the virtual column −1 (infinite).
#[inline(always)]
fn row<const SQ: bool>(
    q: f64,
    s: &[Lanes],
    lo: usize,
    hi: usize,
    prev: &[Lanes],
    curr: &mut [Lanes],
) {
    let inf = [f64::INFINITY; LANES];
    curr[..=lo].iter_mut().for_each(|c| *c = inf);
    let mut left = inf;
    for j in lo..=hi {
        let l = local::<SQ>(q, &s[j]);
        let m = vmin(&vmin(&prev[j], &prev[j + 1]), &left);
        let v: Lanes = std::array::from_fn(|t| l[t] + m[t]);
        curr[j + 1] = v;
        left = v;
    }
    curr[hi + 2..].iter_mut().for_each(|c| *c = inf);
}

/// The last cell of row `i` of the banded programme for `LANES` references,
/// `[lo, hi]` its band and `prev` row `i − 1` as [`row`] takes it: the same
/// operations in the same order as [`row`] (so the same bits), without
/// storing the row. The finish needs only the programme's corner.
#[inline(always)]
///
/// `up[j]` holds `min(prev[j], prev[j + 1])` (the two upper neighbours of
/// cell j, taken at prepare time, off the decision's path: [`Model::prepare`]
/// stores the row so): `min` is exact and applied to the same operands in the
/// same order, so the bits are those of [`row`].
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
    /// Guesses a preparation of this model holds (its workspace reserves them).
    pub(super) fn prepared_guesses(&self) -> usize {
        match self.config.normalization {
            Normalization::ZScore => ZSCORE_GUESSES_SD.len(),
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
        ws.fit_to(w, self.config.k, self.classes.len(), self.labels.len());
        let guesses = self.prepared_guesses();
        ws.prepared.reserve(w, self.labels.len(), guesses.max(1));
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
        ws.prepared.model = self.id;
        true
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

    /// Rows 0..w−1 of every reference's programme against each guessed prefix.
    #[inline(always)]
    fn prepare_rows<const SQ: bool>(&self, ws: &mut Workspace) {
        let w = self.window;
        let r = self.config.dtw.radius_or_max();
        let groups = self.labels.len().div_ceil(LANES);
        // The previous row lives in `rows` itself; the current one in
        // `cb_lanes` (w + 1 slots, scratch of the search, free here).
        let Workspace {
            prepared, cb_lanes, ..
        } = ws;
        let inf = [f64::INFINITY; LANES];
        let per_guess = groups * (w + 1);
        for g in 0..prepared.guesses {
            let query = &prepared.query[g * (w - 1)..(g + 1) * (w - 1)];
            let rows = &mut prepared.rows[g * per_guess..(g + 1) * per_guess];
            for (grp, out) in rows.chunks_exact_mut(w + 1).enumerate() {
                let s = &self.refs_lanes[grp * w..(grp + 1) * w];
                // Row −1: only the corner (−1, −1) is 0.
                out.iter_mut().for_each(|c| *c = inf);
                out[0] = [0.0; LANES];
                for (i, &qi) in query.iter().enumerate() {
                    let lo = i.saturating_sub(r);
                    let hi = i.saturating_add(r).min(w - 1);
                    row::<SQ>(qi, s, lo, hi, out, &mut cb_lanes[..=w]);
                    out.copy_from_slice(&cb_lanes[..=w]);
                }
                // The last row reads row w − 2 only as min(slot j, slot j + 1)
                // for its band's columns j: take those minimums now (ascending
                // j reads slot j + 1 before it is overwritten; `last_cell`).
                for j in (w - 1).saturating_sub(r)..w {
                    out[j] = vmin(&out[j], &out[j + 1]);
                }
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
            Normalization::ZScore => false,
        }
    }

    /// If `ws` holds a preparation valid for `window` (validated, length w,
    /// normalised into `ws.query` by `prepare_query`), finish it (see
    /// [`Finished`]). When exact, `ws.neighbors` gets the k nearest (finished).
    pub(super) fn finish_prepared(&self, window: &[f64], ws: &mut Workspace) -> Finished {
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
        self.run_finish(last, 0, ws);
        // k nearest in index order with the search's tie rule: the same list
        // the exhaustive search builds.
        let k = self.config.k;
        ws.neighbors.clear();
        ws.prepared.class_best = false;
        if k == 1 {
            // One scan: each class's nearest (ties to the lower index, as
            // `insert` breaks them), then the nearest of all; the margin's
            // other-class nearest is then a look-up (`other_class_prepared`).
            ws.class_best.fill((f64::INFINITY, usize::MAX));
            for (i, (&d, &l)) in ws.prepared.dist.iter().zip(&self.labels).enumerate() {
                let b = &mut ws.class_best[l as usize];
                if d < b.0 || b.1 == usize::MAX {
                    *b = (d, i);
                }
            }
            if let Some(best) = lowest(ws.class_best.iter().copied()) {
                ws.neighbors.push(best);
            }
            ws.prepared.class_best = true;
        } else {
            for (i, &d) in ws.prepared.dist.iter().enumerate() {
                insert(&mut ws.neighbors, k, d, i);
            }
        }
        let cost = self.config.dtw.cost;
        for nb in ws.neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        let n = self.labels.len();
        ws.stats = SearchStats {
            references: n,
            full_dtw: n,
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
        self.run_finish(last, g, ws);
        Finished::Bounded
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

    /// Classify a window through a valid preparation (exact or bounded), or `None`.
    pub(super) fn classify_prepared(
        &self,
        window: &[f64],
        ws: &mut Workspace,
    ) -> Option<Prediction> {
        match self.finish_prepared(window, ws) {
            Finished::No => None,
            Finished::Exact => Some(self.vote(ws)),
            Finished::Bounded => {
                self.search_bounded(ws, None);
                Some(self.vote(ws))
            }
        }
    }
}
