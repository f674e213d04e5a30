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
//! The preparation is used only when it still holds: same model, the window's
//! first w−1 samples bit-identical to the prepared prefix, and the last sample
//! leaves the normalisation unchanged (`none` always; `subtract-min` and
//! `divide-min` when the last sample is not a new minimum; `z-score` never,
//! since its mean moves with every sample). Otherwise the normal search runs.

use super::search::insert;
use super::{Model, Prediction, SearchStats, Workspace};
use crate::dtw::{
    self,
    lanes::{Lanes, LANES},
};
use crate::series::Normalization;

/// The preparation a workspace holds (see the module docs).
#[derive(Debug, Clone, Default)]
pub(super) struct Prepared {
    /// [`Model`]'s id, 0 when nothing is prepared.
    model: u64,
    /// The raw prefix (w − 1 samples) it was prepared for.
    prefix: Vec<f64>,
    /// The prefix after normalisation.
    query: Vec<f64>,
    /// Minimum of the raw prefix (the normalisation's base).
    base: f64,
    /// Row w − 2 of the programme per group of `LANES` references:
    /// `[group][1 + column][lane]`, slot 0 the virtual column −1.
    rows: Vec<Lanes>,
}

impl Prepared {
    /// Size the buffers (allocates only when a size changes).
    pub(super) fn fit_to(&mut self, window: usize, n_refs: usize) {
        let p = window.saturating_sub(1);
        if self.prefix.len() != p {
            self.model = 0;
            self.prefix.resize(p, 0.0);
            self.query.resize(p, 0.0);
        }
        let rows = n_refs.div_ceil(LANES) * (window + 1);
        if self.rows.len() != rows {
            self.model = 0;
            self.rows.resize(rows, [0.0; LANES]);
        }
    }
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

impl Model {
    /// Prepare the classification of a window whose first `w − 1` samples
    /// are `prefix` (the last one still to come): afterwards [`Model::classify`]
    /// and [`Model::classify_with_margin`] on such a window with this
    /// workspace finish in one programme row per reference, with the same
    /// result. Returns whether anything was prepared (not for w = 1,
    /// `z-score` models, a non-finite prefix or a `divide-min` prefix whose
    /// minimum is not positive: those windows take the normal search). No
    /// allocation once `ws` came from [`Model::workspace`].
    pub fn prepare(&self, prefix: &[f64], ws: &mut Workspace) -> bool {
        let w = self.window;
        ws.prepared.model = 0;
        if w < 2 || prefix.len() != w - 1 || prefix.iter().any(|v| !v.is_finite()) {
            return false;
        }
        let base = prefix.iter().copied().fold(f64::INFINITY, f64::min);
        let norm = self.config.normalization;
        match norm {
            Normalization::ZScore => return false,
            Normalization::DivideMin if base <= 0.0 => return false,
            _ => {}
        }
        ws.fit_to(w, self.config.k, self.classes.len(), self.labels.len());
        let p = &mut ws.prepared;
        p.prefix.copy_from_slice(prefix);
        p.query.copy_from_slice(prefix);
        // The same arithmetic as `Normalization::apply` with the window's
        // minimum equal to the prefix's (checked when the last sample comes).
        match norm {
            Normalization::SubtractMin => p.query.iter_mut().for_each(|v| *v -= base),
            Normalization::DivideMin => p.query.iter_mut().for_each(|v| *v /= base),
            _ => {}
        }
        p.base = base;
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

    /// Rows 0..w−1 of every reference's programme against the prefix.
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
        for g in 0..groups {
            let s = &self.refs_lanes[g * w..(g + 1) * w];
            let out = &mut prepared.rows[g * (w + 1)..(g + 1) * (w + 1)];
            // Row −1: only the corner (−1, −1) is 0.
            out.iter_mut().for_each(|c| *c = inf);
            out[0] = [0.0; LANES];
            for (i, &qi) in prepared.query.iter().enumerate() {
                let lo = i.saturating_sub(r);
                let hi = i.saturating_add(r).min(w - 1);
                row::<SQ>(qi, s, lo, hi, out, &mut cb_lanes[..=w]);
                out.copy_from_slice(&cb_lanes[..=w]);
            }
        }
    }

    /// If `ws` holds a preparation valid for `window` (validated, length w),
    /// finish it: every reference's accumulated distance lands in `ws.lb`,
    /// `ws.neighbors` gets the k nearest (finished), `ws.query` the normalised
    /// window. Returns false when the normal search must run.
    pub(super) fn finish_prepared(&self, window: &[f64], ws: &mut Workspace) -> bool {
        let w = self.window;
        let p = &ws.prepared;
        if p.model != self.id || p.prefix.len() + 1 != w {
            return false;
        }
        if p.prefix
            .iter()
            .zip(window)
            .any(|(a, b)| a.to_bits() != b.to_bits())
        {
            return false;
        }
        let x = window[w - 1];
        // The window's minimum must be the prefix's, bit for bit.
        let same_base = x > p.base || x.to_bits() == p.base.to_bits();
        let last = match self.config.normalization {
            Normalization::None => x,
            Normalization::SubtractMin if same_base => x - p.base,
            Normalization::DivideMin if same_base => x / p.base,
            _ => return false,
        };
        ws.query[..w - 1].copy_from_slice(&ws.prepared.query);
        ws.query[w - 1] = last;
        self.run_finish(last, ws);
        // k nearest in index order with the search's tie rule: the same list
        // the exhaustive search builds.
        let k = self.config.k;
        ws.neighbors.clear();
        for (i, &d) in ws.lb.iter().enumerate() {
            insert(&mut ws.neighbors, k, d, i);
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
        true
    }

    /// The nearest reference of any class but `class` from a finished
    /// preparation, as the excluding search reports it (`ws.neighbors` then
    /// describes that search, like [`Model::classify_with_margin`]'s).
    pub(super) fn other_class_prepared(&self, class: u32, ws: &mut Workspace) -> f64 {
        let k = self.config.k;
        ws.neighbors.clear();
        for (i, &d) in ws.lb.iter().enumerate() {
            if self.labels[i] != class {
                insert(&mut ws.neighbors, k, d, i);
            }
        }
        let cost = self.config.dtw.cost;
        for nb in ws.neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.neighbors.first().map_or(f64::INFINITY, |n| n.0)
    }

    fn run_finish(&self, last: f64, ws: &mut Workspace) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.finish_avx2(last, ws) };
            }
        }
        self.finish_impl(last, ws)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn finish_avx2(&self, last: f64, ws: &mut Workspace) {
        self.finish_impl(last, ws)
    }

    #[inline(always)]
    fn finish_impl(&self, last: f64, ws: &mut Workspace) {
        match self.config.dtw.cost {
            dtw::Cost::Abs => self.finish_rows::<false>(last, ws),
            dtw::Cost::Squared => self.finish_rows::<true>(last, ws),
        }
    }

    /// Row w − 1 for every group; accumulated distances into `ws.lb`.
    #[inline(always)]
    fn finish_rows<const SQ: bool>(&self, last: f64, ws: &mut Workspace) {
        let w = self.window;
        let n = self.labels.len();
        let r = self.config.dtw.radius_or_max();
        let lo = (w - 1).saturating_sub(r);
        let Workspace {
            prepared,
            cb_lanes,
            lb,
            ..
        } = ws;
        for g in 0..n.div_ceil(LANES) {
            let s = &self.refs_lanes[g * w..(g + 1) * w];
            let prev = &prepared.rows[g * (w + 1)..(g + 1) * (w + 1)];
            row::<SQ>(last, s, lo, w - 1, prev, &mut cb_lanes[..=w]);
            let used = LANES.min(n - g * LANES);
            lb[g * LANES..g * LANES + used].copy_from_slice(&cb_lanes[w][..used]);
        }
    }

    /// Classify a window through a valid preparation, or `None`.
    pub(super) fn classify_prepared(
        &self,
        window: &[f64],
        ws: &mut Workspace,
    ) -> Option<Prediction> {
        self.finish_prepared(window, ws).then(|| self.vote(ws))
    }
}
