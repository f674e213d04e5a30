//! The banded DTW dynamic programme on two rolling rows, with early abandoning.

use super::{Cost, Workspace};

/// Accumulated DTW path cost (sum of local costs, before [`Cost::finish`]).
///
/// Rows follow `a` (length n), columns `b` (length m). Row i covers columns
/// `i − max(0, n−m) − r ..= i + max(0, m−n) + r`. Returns `f64::INFINITY` as
/// soon as every cell of a row, plus the remaining lower bound `cb[i + 1]`
/// (UCR Suite cumulative LB_Keogh; `cb[k]` bounds the cost of rows k..n), exceeds
/// `cutoff`: the true distance is then larger than `cutoff`. Inputs must be
/// finite and non-empty (callers validate).
pub fn accumulated(
    a: &[f64],
    b: &[f64],
    radius: usize,
    cost: Cost,
    cutoff: f64,
    cb: Option<&[f64]>,
    ws: &mut Workspace,
) -> f64 {
    let n = a.len();
    let m = b.len();
    ws.ensure(m);
    let below = radius.saturating_add(n.saturating_sub(m));
    let above = radius.saturating_add(m.saturating_sub(n));
    let (mut prev, mut curr) = (&mut ws.prev[..=m], &mut ws.curr[..=m]);
    // Row −1: only the virtual corner (−1, −1) is reachable.
    prev.fill(f64::INFINITY);
    prev[0] = 0.0;
    curr[0] = f64::INFINITY;
    for (i, &ai) in a.iter().enumerate() {
        let lo = i.saturating_sub(below);
        let hi = i.saturating_add(above).min(m - 1);
        if lo > hi {
            return f64::INFINITY;
        }
        // Index j+1 holds column j; the cell left of the band is unreachable.
        curr[lo] = f64::INFINITY;
        let mut row_min = f64::INFINITY;
        let mut left = f64::INFINITY;
        for j in lo..=hi {
            let best = prev[j].min(prev[j + 1]).min(left);
            let v = cost.local(ai, b[j]) + best;
            curr[j + 1] = v;
            left = v;
            row_min = row_min.min(v);
        }
        // The next row may read one column past this row's band.
        if hi + 2 <= m {
            curr[hi + 2] = f64::INFINITY;
        }
        let rest = match cb {
            Some(cb) if i + 1 < cb.len() => cb[i + 1],
            _ => 0.0,
        };
        if row_min + rest > cutoff {
            return f64::INFINITY;
        }
        std::mem::swap(&mut prev, &mut curr);
    }
    prev[m]
}
