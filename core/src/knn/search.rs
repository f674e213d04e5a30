//! Exact k-nearest-neighbour search under banded DTW with the UCR Suite
//! cascade. Pruning never changes the answer: a reference is skipped only when a
//! lower bound proves its distance exceeds the current k-th best.
//!
//! Order of work per query:
//! 1. LB_Enhanced^V (Tan, Petitjean & Webb 2019: exact L-shaped bands at both
//!    ends, LB_Keogh rows between; it is at least LB_Kim and usually above
//!    LB_Keogh) of the query against every reference, `LANES` (8) references
//!    per SIMD operation from the interleaved copies made at fit; the
//!    references with the smallest bounds become seeds, evaluated first so the
//!    cut-off is tight early.
//! 2. Every other reference whose bound is not above the cut-off is queued
//!    `LANES` at a time into the lockstep DTW (`dtw::lanes`), which abandons a
//!    lane once its row minimum plus the remaining LB_Keogh exceeds the
//!    cut-off. (LB_Keogh of the reference against the query's envelope pruned
//!    under 2% of the candidates it saw on the bench data, so it is not run.)
//!
//! After a speculative preparation ([`Model::prepare`], `prepared.rs`) the
//! bounds of pass 1 come from the prepared distances instead
//! ([`Model::search_bounded`]): |DTW(q, s) − D(s)| ≤ B for every reference,
//! far tighter than LB_Enhanced on z-normalised windows, and the k smallest
//! D + B give a cut-off before any DTW runs.

use super::prepared::SPECULATIVE_SLACK;
use super::{Model, SearchStats, Workspace};
use crate::dtw::{
    self,
    lanes::{Lanes, LANES},
};

/// Relative slack on cut-offs so floating-point rounding in a bound can never
/// prune a reference whose true distance ties the k-th best.
const CUTOFF_SLACK: f64 = 1e-12;

/// V of LB_Enhanced^V: L-shaped bands at each end (Tan et al. 2019 find small
/// V already tight; 000's windows are 5..60 samples).
const ENHANCED_BANDS: usize = 4;

/// Which search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every DTW in full (the reference answer).
    Exhaustive,
    /// LB_Enhanced seeds and pruning, early-abandoned DTW.
    Pruned,
    /// Bounds from a bounded finish of a speculative preparation.
    Bounded,
    /// [`Mode::Bounded`] for k = 1 and its margin at once: each class's
    /// nearest into `ws.class_best` ([`Model::search_bounded_margin`]).
    BoundedMargin,
}

/// The DTW candidates queued for one lockstep run.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Batch {
    ids: [usize; LANES],
    len: usize,
    /// Merge into `ws.class_best` (per class) instead of `ws.neighbors`.
    per_class: bool,
}

impl Model {
    /// Fill `ws.neighbors` with the k nearest references of `ws.query`, sorted by
    /// (distance, index). Distances are reported in [`dtw::Cost::finish`] form.
    pub(super) fn search(&self, ws: &mut Workspace, prune: bool, exclude: Option<u32>) {
        let mode = if prune {
            Mode::Pruned
        } else {
            Mode::Exhaustive
        };
        self.search_mode(ws, mode, exclude)
    }

    /// [`Model::search`] with the bounds of a bounded finish
    /// ([`Model::finish_prepared`] returned `Finished::Bounded` for this query).
    pub(super) fn search_bounded(&self, ws: &mut Workspace, exclude: Option<u32>) {
        self.search_mode(ws, Mode::Bounded, exclude)
    }

    /// One bounded search for 1-NN and its margin (k = 1, after
    /// `Finished::Bounded`): `ws.class_best` gets the nearest reference of
    /// every class that can be the nearest or the nearest of another class
    /// (accumulated distance, index; ties to the lower index), exactly what
    /// [`Model::search_bounded`] without and then excluding the predicted
    /// class would find; `ws.neighbors` the nearest (finished). Classes
    /// farther than the second-nearest class may hold a larger value or none.
    ///
    /// Why one search is enough: both answers are at most T, the second
    /// smallest class nearest (of the two nearest classes, one is not the
    /// predicted one). So a reference is skipped when its lower bound exceeds
    /// T as it stands (it can be neither answer), or its own class's nearest
    /// so far (it can be neither that class's nearest nor tie it), and a DTW
    /// is abandoned above T. Before any DTW, T is bounded by the second
    /// smallest class minimum of D + B over the prepared distances (each an
    /// upper bound of a distance). This replaces the second search's pass
    /// over every reference's bound and its DTWs of references already
    /// computed by the first.
    pub(super) fn search_bounded_margin(&self, ws: &mut Workspace) {
        self.search_mode(ws, Mode::BoundedMargin, None)
    }

    fn search_mode(&self, ws: &mut Workspace, mode: Mode, exclude: Option<u32>) {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2 (checked just above).
                return unsafe { self.search_avx2(ws, mode, exclude) };
            }
        }
        self.search_impl(ws, mode, exclude)
    }

    /// The whole search compiled for AVX2: the bounds and the lockstep DTW are
    /// inlined here, so one feature check per query covers all of them.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn search_avx2(&self, ws: &mut Workspace, mode: Mode, exclude: Option<u32>) {
        self.search_impl(ws, mode, exclude)
    }

    #[inline(always)]
    fn search_impl(&self, ws: &mut Workspace, mode: Mode, exclude: Option<u32>) {
        let w = self.window;
        let n = self.labels.len();
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        ws.neighbors.clear();
        let mut stats = SearchStats {
            references: n,
            ..Default::default()
        };
        if mode == Mode::Exhaustive {
            let q = &ws.query[..w];
            for i in 0..n {
                if exclude == Some(self.labels[i]) {
                    continue;
                }
                let acc = dtw::accumulated(
                    q,
                    self.reference(i),
                    r,
                    cost,
                    f64::INFINITY,
                    None,
                    &mut ws.dtw,
                );
                insert(&mut ws.neighbors, self.config.k, acc, i);
            }
            stats.full_dtw = n;
        } else {
            self.pruned_search(ws, &mut stats, mode, exclude);
        }
        if mode == Mode::BoundedMargin {
            ws.neighbors.clear();
            if let Some(best) = super::prepared::lowest(ws.class_best.iter().copied()) {
                ws.neighbors.push(best);
            }
        }
        for nb in ws.neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.stats = stats;
    }

    #[inline(always)]
    fn pruned_search(
        &self,
        ws: &mut Workspace,
        stats: &mut SearchStats,
        mode: Mode,
        exclude: Option<u32>,
    ) {
        let n = self.labels.len();
        let per_class = mode == Mode::BoundedMargin;
        let mut cutoff = if mode == Mode::Pruned {
            self.enhanced_bounds(ws, exclude);
            f64::INFINITY
        } else {
            stats.speculative = true;
            stats.prepared = true;
            let c = self.prepared_bounds(ws, exclude);
            if per_class {
                self.margin_cutoff(ws)
            } else {
                c
            }
        };
        if per_class {
            ws.class_best.fill((f64::INFINITY, usize::MAX));
        }
        // Per class: also above its class's nearest so far (slack as `cutoff`).
        let own = |ws: &Workspace, i: usize| {
            let b = ws.class_best[self.labels[i] as usize].0;
            b * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE
        };
        let mut batch = Batch {
            per_class,
            ..Batch::default()
        };
        // Pass 2: seeds in ascending bound order, then everything else in order.
        for s in 0..ws.seeds.len() {
            let i = ws.seeds[s].1;
            let b = ws.lb[i];
            ws.lb[i] = f64::NEG_INFINITY; // done; pass 3 skips it
            if b > cutoff || (per_class && b > own(ws, i)) {
                stats.pruned_by_bounds += 1;
                continue;
            }
            self.consider(i, ws, &mut batch, &mut cutoff, stats);
        }
        for i in 0..n {
            let b = ws.lb[i];
            if b == f64::NEG_INFINITY {
                continue;
            }
            if b > cutoff || (per_class && b > own(ws, i)) {
                stats.pruned_by_bounds += 1;
                continue;
            }
            self.consider(i, ws, &mut batch, &mut cutoff, stats);
        }
        self.run_batch(ws, &mut batch, &mut cutoff, stats);
    }

    /// Pass 1 of a bounded search: `ws.lb[i] = D(i) − B` (in path-sum units,
    /// with slack, at least 0), seeds = the references of smallest D; returns
    /// the cut-off the k smallest D + B give (path-sum units, with slack).
    #[inline(always)]
    fn prepared_bounds(&self, ws: &mut Workspace, exclude: Option<u32>) -> f64 {
        let n = self.labels.len();
        let k = self.config.k;
        let cost = self.config.dtw.cost;
        let bound = ws.prepared.bound;
        let dist = &ws.prepared.dist[..n];
        let exact = &ws.prepared.exact[..n];
        let seeds = &mut ws.seeds;
        seeds.clear();
        let n_seeds = seeds.capacity().min(n).min(self.candidates(exclude));
        let by_key = |x: &(f64, usize), y: &(f64, usize)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
        for (i, &d) in dist.iter().enumerate() {
            if exclude == Some(self.labels[i]) {
                ws.lb[i] = f64::NEG_INFINITY; // never a candidate
                continue;
            }
            let f = cost.finish(d);
            let lo = (f - bound) - SPECULATIVE_SLACK * (f + bound);
            // `max` (no branch: about half these signs are unpredictable);
            // unfinish(0) = 0.
            ws.lb[i] = cost.unfinish(lo.max(0.0));
            // Seeds by D itself: with B large many lower bounds are 0, D still
            // ranks. Only references whose D was computed (the pruned finish
            // leaves a lower bound of D for the others): the cut-off needs D.
            if !exact[i] {
                continue;
            }
            if seeds.len() < n_seeds {
                seeds.push((d, i));
                if seeds.len() == n_seeds {
                    seeds.sort_unstable_by(by_key);
                }
            } else if d < seeds[n_seeds - 1].0 {
                seeds.pop();
                let pos = seeds.iter().position(|s| d < s.0).unwrap_or(seeds.len());
                seeds.insert(pos, (d, i));
            }
        }
        if seeds.len() < n_seeds {
            seeds.sort_unstable_by(by_key);
        }
        if seeds.len() < k {
            return f64::INFINITY;
        }
        // Any k references' upper bounds bound the k-th nearest from above.
        let upper = seeds[..k]
            .iter()
            .map(|s| cost.finish(s.0) + bound)
            .fold(0.0, f64::max);
        let upper = upper + SPECULATIVE_SLACK * upper;
        cost.unfinish(upper) * (1.0 + SPECULATIVE_SLACK) + f64::MIN_POSITIVE
    }

    /// The per-class search's first cut-off (path-sum units, with slack):
    /// the second smallest over classes of the smallest D + B among computed
    /// D (`prepared.exact`), each an upper bound of a distance of that class.
    fn margin_cutoff(&self, ws: &mut Workspace) -> f64 {
        let n = self.labels.len();
        let cost = self.config.dtw.cost;
        let p = &ws.prepared;
        // `class_best` as scratch: each class's smallest computed D.
        ws.class_best.fill((f64::INFINITY, usize::MAX));
        for i in 0..n {
            if p.exact[i] {
                let b = &mut ws.class_best[self.labels[i] as usize].0;
                if p.dist[i] < *b {
                    *b = p.dist[i];
                }
            }
        }
        let (_, lo2) = two_smallest(&ws.class_best);
        if !lo2.is_finite() {
            return f64::INFINITY;
        }
        let upper = cost.finish(lo2) + p.bound;
        let upper = upper + SPECULATIVE_SLACK * upper;
        cost.unfinish(upper) * (1.0 + SPECULATIVE_SLACK) + f64::MIN_POSITIVE
    }

    /// Pass 1 of the normal search: LB_Enhanced for every reference into
    /// `ws.lb`, the smallest bounds as seeds.
    #[inline(always)]
    pub(super) fn enhanced_bounds(&self, ws: &mut Workspace, exclude: Option<u32>) {
        let w = self.window;
        let n = self.labels.len();
        let cost = self.config.dtw.cost;
        {
            let q = &ws.query[..w];
            // Pass 1: a bound for every reference; keep the smallest as seeds.
            let seeds = &mut ws.seeds;
            seeds.clear();
            let n_seeds = seeds.capacity().min(n).min(self.candidates(exclude));
            let by_bound =
                |x: &(f64, usize), y: &(f64, usize)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
            let groups = n.div_ceil(LANES);
            let r = self.config.dtw.radius_or_max();
            for g in 0..groups {
                // LB_Enhanced of the query against `LANES` references at once.
                let rows = g * w..(g + 1) * w;
                let (s_lanes, u_lanes, l_lanes) = (
                    &self.refs_lanes[rows.clone()],
                    &self.upper_lanes[rows.clone()],
                    &self.lower_lanes[rows],
                );
                let acc = match cost {
                    dtw::Cost::Abs => {
                        enhanced_lanes::<false>(q, s_lanes, u_lanes, l_lanes, r, ENHANCED_BANDS)
                    }
                    dtw::Cost::Squared => {
                        enhanced_lanes::<true>(q, s_lanes, u_lanes, l_lanes, r, ENHANCED_BANDS)
                    }
                };
                let used = LANES.min(n - g * LANES);
                ws.lb[g * LANES..g * LANES + used].copy_from_slice(&acc[..used]);
                // Only bounds below the current worst seed can become seeds.
                let worst = if seeds.len() < n_seeds {
                    f64::INFINITY
                } else {
                    seeds[n_seeds - 1].0
                };
                if exclude.is_none() && acc[..used].iter().all(|&b| b >= worst) {
                    continue;
                }
                for (lane, &b) in acc[..used].iter().enumerate() {
                    let i = g * LANES + lane;
                    if exclude == Some(self.labels[i]) {
                        ws.lb[i] = f64::NEG_INFINITY; // never a candidate
                        continue;
                    }
                    if seeds.len() < n_seeds {
                        seeds.push((b, i));
                        if seeds.len() == n_seeds {
                            seeds.sort_unstable_by(by_bound);
                        }
                    } else if b < seeds[n_seeds - 1].0 {
                        seeds.pop();
                        let pos = seeds.iter().position(|s| b < s.0).unwrap_or(seeds.len());
                        seeds.insert(pos, (b, i));
                    }
                }
            }
            if seeds.len() < n_seeds {
                seeds.sort_unstable_by(by_bound);
            }
        }
    }

    /// The rest of the bound cascade for reference `i`; survivors join the batch.
    #[inline(always)]
    fn consider(
        &self,
        i: usize,
        ws: &mut Workspace,
        batch: &mut Batch,
        cutoff: &mut f64,
        stats: &mut SearchStats,
    ) {
        let w = self.window;
        let cost = self.config.dtw.cost;
        let q = &ws.query[..w];
        let s = self.reference(i);
        let (u, l) = self.envelope(i);
        // Queue it: the reference and its per-row LB_Keogh terms go into lane
        // `slot`; `run_batch` turns the terms into suffix sums for all lanes at
        // once (one vector chain per batch instead of a serial chain per candidate).
        let slot = batch.len;
        let mut lb = 0.0;
        for j in 0..w {
            ws.b_lanes[j][slot] = s[j];
            let g = dtw::gap(q[j], u[j], l[j], cost);
            ws.cb_lanes[j][slot] = g;
            lb += g;
        }
        // Their sum, LB_Keogh, prunes like the bound that let the reference
        // in (`b > cutoff`): the reference's distance exceeds the cut-off, so
        // it is neither an answer nor, per class, its class's nearest below
        // it. After a bounded finish, whose bound D − B is loose, this saves
        // lockstep DTWs; the slack keeps rounding from pruning a tie.
        let lb = lb - SPECULATIVE_SLACK * lb;
        let own = if batch.per_class {
            ws.class_best[self.labels[i] as usize].0 * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE
        } else {
            f64::INFINITY
        };
        if lb > *cutoff || lb > own {
            stats.pruned_by_bounds += 1;
            return;
        }
        batch.ids[slot] = i;
        batch.len += 1;
        if batch.len == LANES {
            self.run_batch(ws, batch, cutoff, stats);
        }
    }

    /// Run the queued candidates in lockstep and merge them into the top-k.
    #[inline(always)]
    fn run_batch(
        &self,
        ws: &mut Workspace,
        batch: &mut Batch,
        cutoff: &mut f64,
        stats: &mut SearchStats,
    ) {
        let used = batch.len;
        if used == 0 {
            return;
        }
        let w = self.window;
        // Unused lanes repeat lane 0; their results are ignored.
        for slot in used..LANES {
            for j in 0..w {
                ws.b_lanes[j][slot] = ws.b_lanes[j][0];
                ws.cb_lanes[j][slot] = ws.cb_lanes[j][0];
            }
        }
        // UCR Suite cumulative LB_Keogh: cb[j] bounds the cost of rows j..w.
        let mut acc = [0.0; LANES];
        ws.cb_lanes[w] = acc;
        for j in (0..w).rev() {
            for (a, c) in acc.iter_mut().zip(ws.cb_lanes[j].iter_mut()) {
                *a += *c;
                *c = *a;
            }
        }
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        let acc = dtw::lanes::accumulated_lanes_inline(
            &ws.query[..w],
            &ws.b_lanes[..w],
            r,
            cost,
            *cutoff,
            &ws.cb_lanes[..=w],
            &mut ws.lanes,
        );
        let k = self.config.k;
        for (slot, &d) in acc.iter().enumerate().take(used) {
            if d.is_infinite() {
                stats.abandoned += 1;
                continue;
            }
            stats.full_dtw += 1;
            if batch.per_class {
                let i = batch.ids[slot];
                let best = &mut ws.class_best[self.labels[i] as usize];
                if d < best.0 || (d == best.0 && i < best.1) {
                    *best = (d, i);
                    // T: the second smallest class nearest.
                    let (_, lo2) = two_smallest(&ws.class_best);
                    let c = lo2 * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE;
                    *cutoff = cutoff.min(c);
                }
                continue;
            }
            if insert(&mut ws.neighbors, k, d, batch.ids[slot]) && ws.neighbors.len() == k {
                // Never above a cut-off the bounds set before (bounded search).
                let c = ws.neighbors[k - 1].0 * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE;
                *cutoff = cutoff.min(c);
            }
        }
        batch.len = 0;
    }

    /// References not excluded from a search.
    fn candidates(&self, exclude: Option<u32>) -> usize {
        match exclude {
            None => self.labels.len(),
            Some(c) => self.labels.iter().filter(|&&l| l != c).count(),
        }
    }

    #[inline(always)]
    pub(super) fn reference(&self, i: usize) -> &[f64] {
        &self.refs[i * self.window..(i + 1) * self.window]
    }

    #[inline(always)]
    pub(super) fn envelope(&self, i: usize) -> (&[f64], &[f64]) {
        let s = i * self.window..(i + 1) * self.window;
        (&self.upper[s.clone()], &self.lower[s])
    }
}

/// [`dtw::lb_enhanced`] of `q` against `LANES` interleaved references (values
/// `s_lanes`, envelopes `u_lanes`/`l_lanes`): the same bands and rows in the
/// same order per lane, one vertical SIMD operation for `LANES` references.
#[inline(always)]
pub(super) fn enhanced_lanes<const SQ: bool>(
    q: &[f64],
    s_lanes: &[Lanes],
    u_lanes: &[Lanes],
    l_lanes: &[Lanes],
    radius: usize,
    v: usize,
) -> Lanes {
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
    #[inline(always)]
    fn vmin(a: Lanes, b: Lanes) -> Lanes {
        std::array::from_fn(|t| if a[t] < b[t] { a[t] } else { b[t] })
    }
    #[inline(always)]
    fn pos(x: f64) -> f64 {
        if x > 0.0 {
            x
        } else {
            0.0
        }
    }
    let n = q.len();
    let (s_lanes, u_lanes, l_lanes) = (&s_lanes[..n], &u_lanes[..n], &l_lanes[..n]);
    if n == 1 {
        return local::<SQ>(q[0], &s_lanes[0]);
    }
    let v = v.min(n / 2).max(1);
    let (first, last) = (
        local::<SQ>(q[0], &s_lanes[0]),
        local::<SQ>(q[n - 1], &s_lanes[n - 1]),
    );
    let mut sum: Lanes = std::array::from_fn(|t| first[t] + last[t]);
    for t in 1..v {
        let lo = t.saturating_sub(radius);
        let mut left = local::<SQ>(q[t], &s_lanes[t]);
        for j in lo..t {
            left = vmin(
                vmin(left, local::<SQ>(q[t], &s_lanes[j])),
                local::<SQ>(q[j], &s_lanes[t]),
            );
        }
        let e = n - 1 - t;
        let hi = e.saturating_add(radius).min(n - 1);
        let mut right = local::<SQ>(q[e], &s_lanes[e]);
        for j in e + 1..=hi {
            right = vmin(
                vmin(right, local::<SQ>(q[e], &s_lanes[j])),
                local::<SQ>(q[j], &s_lanes[e]),
            );
        }
        for l in 0..LANES {
            sum[l] += left[l] + right[l];
        }
    }
    for i in v..n - v {
        let (qi, u, l) = (q[i], &u_lanes[i], &l_lanes[i]);
        for t in 0..LANES {
            let d = pos(qi - u[t]) + pos(l[t] - qi);
            sum[t] += if SQ { d * d } else { d };
        }
    }
    sum
}

/// Insert (acc, i) into the ascending top-k list if it belongs there; ties on
/// distance go to the lower reference index. Returns whether it was inserted.
#[inline]
/// The smallest and second smallest distance over the classes' bests
/// (`(distance, reference)` per class; ∞ where a class has none yet).
pub(super) fn two_smallest(class_best: &[(f64, usize)]) -> (f64, f64) {
    let (mut lo1, mut lo2) = (f64::INFINITY, f64::INFINITY);
    for b in class_best {
        if b.0 < lo1 {
            lo2 = lo1;
            lo1 = b.0;
        } else if b.0 < lo2 {
            lo2 = b.0;
        }
    }
    (lo1, lo2)
}

pub(super) fn insert(list: &mut Vec<(f64, usize)>, k: usize, acc: f64, i: usize) -> bool {
    let before = |a: &(f64, usize)| acc < a.0 || (acc == a.0 && i < a.1);
    if list.len() == k {
        if !before(&list[k - 1]) {
            return false;
        }
        list.pop();
    }
    let pos = list.iter().position(before).unwrap_or(list.len());
    list.insert(pos, (acc, i));
    true
}
