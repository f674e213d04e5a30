//! The banded DTW dynamic programme on two rolling rows, with early
//! abandoning and cell pruning.
//!
//! Pruning follows PrunedDTW (Silva & Batista 2016) and EAPrunedDTW (Herrmann
//! & Webb 2021): a cell whose value plus the lower bound of the rows still to
//! come exceeds the cut-off can never lie on a path at or below the cut-off, so
//! each row is computed only from its first to its last live cell. Live cells
//! get exactly the value the full programme gives them (same operations, same
//! order), so a distance at or below the cut-off is bit-identical to the
//! unpruned one.

use super::{Cost, Workspace};

/// Accumulated DTW path cost (sum of local costs, before [`Cost::finish`]).
///
/// Rows follow `a` (length n), columns `b` (length m). Row i covers columns
/// `i − max(0, n−m) − r ..= i + max(0, m−n) + r`. Returns `f64::INFINITY` when
/// the distance is proven larger than `cutoff`. `cb`, when given, has n + 1
/// entries and `cb[k]` lower-bounds the cost of rows k..n (UCR Suite cumulative
/// LB_Keogh, `cb[n] = 0`); it must be non-increasing. Inputs must be finite and
/// non-empty (callers validate).
pub fn accumulated(
    a: &[f64],
    b: &[f64],
    radius: usize,
    cost: Cost,
    cutoff: f64,
    cb: Option<&[f64]>,
    ws: &mut Workspace,
) -> f64 {
    match cost {
        Cost::Abs => dp::<AbsCost>(a, b, radius, cutoff, cb, ws),
        Cost::Squared => dp::<SqCost>(a, b, radius, cutoff, cb, ws),
    }
}

/// Local cost, monomorphised so the inner loop has no branch on the cost kind.
pub(crate) trait Local {
    fn local(a: f64, b: f64) -> f64;
}
pub(crate) struct AbsCost;
pub(crate) struct SqCost;
impl Local for AbsCost {
    #[inline(always)]
    fn local(a: f64, b: f64) -> f64 {
        (a - b).abs()
    }
}
impl Local for SqCost {
    #[inline(always)]
    fn local(a: f64, b: f64) -> f64 {
        let d = a - b;
        d * d
    }
}

/// `a < b ? a : b`: one `minsd`. `f64::min`'s NaN handling costs extra
/// instructions in the innermost loop and inputs here are never NaN.
#[inline(always)]
fn min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

#[inline(always)]
fn dp<C: Local>(
    a: &[f64],
    b: &[f64],
    radius: usize,
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
    // Index j + 1 holds column j; index 0 is the virtual column −1. Row −1 has
    // only the corner (−1, −1) = 0 live: live index range [ps, pe] = [0, 0].
    prev[0] = 0.0;
    let (mut ps, mut pe) = (0usize, 0usize);
    for (i, &ai) in a.iter().enumerate() {
        let rest = match cb {
            Some(cb) => cb[i + 1],
            None => 0.0,
        };
        let limit = cutoff - rest;
        let lo = i.saturating_sub(below);
        let hi = i.saturating_add(above).min(m - 1);
        // Column j reads prev[j] (diagonal) and prev[j + 1] (up): nothing left
        // of column ps − 1 can be live.
        let js = lo.max(ps.saturating_sub(1));
        if js > hi {
            return f64::INFINITY;
        }
        // Cells of the previous row outside its live range may be stale or dead:
        // fence them with infinity (dead cells never decide a live cell's minimum).
        if ps > 0 {
            prev[ps - 1] = f64::INFINITY;
        }
        if pe < m {
            prev[pe + 1] = f64::INFINITY;
        }
        curr[js] = f64::INFINITY;
        let (mut ns, mut ne) = (usize::MAX, 0usize);
        let mut left = f64::INFINITY;
        // Part 1: columns that still have a live cell above or diagonal.
        let top = hi.min(pe);
        let mut j = js;
        while j <= top {
            let v = C::local(ai, b[j]) + min(min(prev[j], prev[j + 1]), left);
            curr[j + 1] = v;
            left = v;
            if v <= limit {
                if ns == usize::MAX {
                    ns = j + 1;
                }
                ne = j + 1;
            }
            j += 1;
        }
        // Part 2: beyond the live part of the previous row only the left
        // neighbour feeds a cell; stop at the first dead one.
        while j <= hi {
            let v = C::local(ai, b[j]) + left;
            curr[j + 1] = v;
            left = v;
            if v > limit {
                break;
            }
            if ns == usize::MAX {
                ns = j + 1;
            }
            ne = j + 1;
            j += 1;
        }
        if ns == usize::MAX {
            return f64::INFINITY;
        }
        ps = ns;
        pe = ne;
        std::mem::swap(&mut prev, &mut curr);
    }
    if pe == m {
        prev[m]
    } else {
        f64::INFINITY
    }
}
