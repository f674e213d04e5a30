//! Exact k-nearest-neighbour search under banded DTW with the UCR Suite
//! cascade. Pruning never changes the answer: a reference is skipped only when a
//! lower bound proves its distance exceeds the current k-th best.

use super::{Model, SearchStats, Workspace};
use crate::dtw;

/// Relative slack on cut-offs so floating-point rounding in a bound can never
/// prune a reference whose true distance ties the k-th best.
const CUTOFF_SLACK: f64 = 1e-12;

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
            // Seed the cut-off with the reference whose LB_Keogh is smallest: on
            // well-separated classes it is usually the true nearest neighbour.
            let mut seed = 0;
            for i in 0..n {
                let (u, l) = self.envelope(i);
                let b = dtw::lb_keogh(q, u, l, cost, f64::INFINITY, None).max(dtw::lb_kim(
                    q,
                    self.reference(i),
                    cost,
                ));
                lb[i] = b;
                if b < lb[seed] {
                    seed = i;
                }
            }
            let mut cutoff = f64::INFINITY;
            for step in 0..=n {
                // Step 0 is the seed; then every other reference in order.
                let i = if step == 0 {
                    seed
                } else if step - 1 == seed {
                    continue;
                } else {
                    step - 1
                };
                if i >= n {
                    continue;
                }
                if lb[i] > cutoff {
                    stats.pruned_by_bounds += 1;
                    continue;
                }
                let s = self.reference(i);
                // LB_Keogh the other way round: the reference against the query's envelope.
                if dtw::lb_keogh(s, q_upper, q_lower, cost, cutoff, None) > cutoff {
                    stats.pruned_by_bounds += 1;
                    continue;
                }
                let (u, l) = self.envelope(i);
                dtw::lb_keogh(q, u, l, cost, f64::INFINITY, Some(&mut cb[..=w]));
                let acc = dtw::accumulated(q, s, r, cost, cutoff, Some(&cb[..=w]), dws);
                if acc.is_infinite() {
                    stats.abandoned += 1;
                    continue;
                }
                stats.full_dtw += 1;
                if insert(neighbors, k, acc, i) && neighbors.len() == k {
                    let kth = neighbors[k - 1].0;
                    cutoff = kth * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE;
                }
            }
        }
        for nb in neighbors.iter_mut() {
            nb.0 = cost.finish(nb.0);
        }
        ws.stats = stats;
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
