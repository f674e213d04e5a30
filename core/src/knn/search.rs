//! Exact k-nearest-neighbour search under banded DTW with the UCR Suite
//! cascade. Pruning never changes the answer: a reference is skipped only when a
//! lower bound proves its distance exceeds the current k-th best.

use super::{Model, SearchStats, Workspace};
use crate::dtw;

/// Relative slack on cut-offs so floating-point rounding in a bound can never
/// prune a reference whose true distance ties the k-th best.
const CUTOFF_SLACK: f64 = 1e-12;

/// V of LB_Enhanced^V: L-shaped bands at each end (Tan et al. 2019 find small
/// V already tight; 000's windows are 5..60 samples).
const ENHANCED_BANDS: usize = 8;

impl Model {
    /// Fill `ws.neighbors` with the k nearest references of `ws.query`, sorted by
    /// (distance, index). Distances are reported in [`Cost::finish`] form.
    pub(super) fn search(&self, ws: &mut Workspace, prune: bool) {
        let w = self.window;
        let k = self.config.k;
        let cost = self.config.dtw.cost;
        let r = self.config.dtw.radius_or_max();
        let n = self.labels.len();
        ws.neighbors.clear();
        let mut stats = SearchStats {
            references: n,
            ..Default::default()
        };
        let Workspace {
            dtw: dws,
            query,
            q_upper,
            q_lower,
            cb,
            lb,
            neighbors,
            seeds,
            ..
        } = ws;
        let q = &query[..w];

        if !prune {
            for i in 0..n {
                let acc = dtw::accumulated(q, self.reference(i), r, cost, f64::INFINITY, None, dws);
                insert(neighbors, k, acc, i);
            }
            stats.full_dtw = n;
        } else {
            dtw::envelope(q, r, q_upper, q_lower);
            // Pass 1: LB_Keogh (query against each reference envelope) and LB_Kim
            // for every reference; remember the few smallest as seeds. On
            // well-separated classes the true neighbours are among them, so the
            // cut-off is tight before the main scan starts.
            seeds.clear();
            let n_seeds = seeds.capacity().min(n);
            for i in 0..n {
                let (u, l) = self.envelope(i);
                let b = dtw::lb_keogh(q, u, l, cost, f64::INFINITY, None).max(dtw::lb_kim(
                    q,
                    self.reference(i),
                    cost,
                ));
                lb[i] = b;
                if seeds.len() < n_seeds {
                    seeds.push((b, i));
                    if seeds.len() == n_seeds {
                        seeds.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                    }
                } else if b < seeds[n_seeds - 1].0 {
                    seeds.pop();
                    let pos = seeds.iter().position(|s| b < s.0).unwrap_or(seeds.len());
                    seeds.insert(pos, (b, i));
                }
            }
            if seeds.len() < n_seeds {
                seeds.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            }
            let mut cutoff = f64::INFINITY;
            // Pass 2: the seeds in ascending bound order, then every other reference.
            for s in 0..seeds.len() {
                let i = seeds[s].1;
                lb[i] = f64::NEG_INFINITY; // marks "done" for pass 3
                self.try_candidate(
                    i,
                    q,
                    &mut cutoff,
                    &mut stats,
                    k,
                    r,
                    cost,
                    neighbors,
                    cb,
                    dws,
                    q_upper,
                    q_lower,
                );
            }
            for i in 0..n {
                if lb[i] == f64::NEG_INFINITY {
                    continue;
                }
                if lb[i] > cutoff {
                    stats.pruned_by_bounds += 1;
                    continue;
                }
                self.try_candidate(
                    i,
                    q,
                    &mut cutoff,
                    &mut stats,
                    k,
                    r,
                    cost,
                    neighbors,
                    cb,
                    dws,
                    q_upper,
                    q_lower,
                );
            }
        }
        for nb in neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.stats = stats;
    }

    /// The rest of the cascade for one reference: LB_Keogh of the reference
    /// against the query envelope, then the pruned DTW with the cumulative
    /// bound; keeps the top-k list and the cut-off up to date.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn try_candidate(
        &self,
        i: usize,
        q: &[f64],
        cutoff: &mut f64,
        stats: &mut SearchStats,
        k: usize,
        r: usize,
        cost: dtw::Cost,
        neighbors: &mut Vec<(f64, usize)>,
        cb: &mut [f64],
        dws: &mut dtw::Workspace,
        q_upper: &[f64],
        q_lower: &[f64],
    ) {
        let w = self.window;
        let s = self.reference(i);
        if dtw::lb_keogh(s, q_upper, q_lower, cost, *cutoff, None) > *cutoff {
            stats.pruned_by_bounds += 1;
            return;
        }
        let (u, l) = self.envelope(i);
        // LB_Enhanced: much tighter than LB_Keogh when the band is wide relative to w.
        if dtw::lb_enhanced(q, s, r, ENHANCED_BANDS, u, l, cost, *cutoff) > *cutoff {
            stats.pruned_by_bounds += 1;
            return;
        }
        dtw::lb_keogh(q, u, l, cost, f64::INFINITY, Some(&mut cb[..=w]));
        let acc = dtw::accumulated(q, s, r, cost, *cutoff, Some(&cb[..=w]), dws);
        if acc.is_infinite() {
            stats.abandoned += 1;
            return;
        }
        stats.full_dtw += 1;
        if insert(neighbors, k, acc, i) && neighbors.len() == k {
            *cutoff = neighbors[k - 1].0 * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE;
        }
    }

    #[inline(always)]
    pub(super) fn reference(&self, i: usize) -> &[f64] {
        &self.refs[i * self.window..(i + 1) * self.window]
    }

    #[inline(always)]
    fn envelope(&self, i: usize) -> (&[f64], &[f64]) {
        let s = i * self.window..(i + 1) * self.window;
        (&self.upper[s.clone()], &self.lower[s])
    }
}

/// Insert (acc, i) into the ascending top-k list if it belongs there; ties on
/// distance go to the lower reference index. Returns whether it was inserted.
#[inline]
fn insert(list: &mut Vec<(f64, usize)>, k: usize, acc: f64, i: usize) -> bool {
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
