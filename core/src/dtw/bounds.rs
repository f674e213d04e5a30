//! Lower bounds on banded DTW (UCR Suite cascade): LB_Kim (first and last
//! points) and LB_Keogh (distance of a series to the other's band envelope).

use super::Cost;

/// Upper and lower envelope of `s` for band radius `r`:
/// `upper[i] = max(s[i−r ..= i+r])`, `lower[i] = min(...)`. Computed once per
/// reference at fit time and once per query.
#[inline(always)]
pub fn envelope(s: &[f64], radius: usize, upper: &mut [f64], lower: &mut [f64]) {
    let n = s.len();
    debug_assert!(upper.len() >= n && lower.len() >= n);
    for i in 0..n {
        let lo = i.saturating_sub(radius);
        let hi = i.saturating_add(radius).min(n - 1);
        let mut u = f64::NEG_INFINITY;
        let mut l = f64::INFINITY;
        for &v in &s[lo..=hi] {
            u = if v > u { v } else { u };
            l = if v < l { v } else { l };
        }
        upper[i] = u;
        lower[i] = l;
    }
}

/// LB_Kim (first/last variant): any warping path of equal-length series starts
/// at (0, 0) and ends at (n−1, n−1). In path-sum space.
#[inline]
pub fn lb_kim(a: &[f64], b: &[f64], cost: Cost) -> f64 {
    let n = a.len();
    if n == 0 || b.is_empty() {
        return 0.0;
    }
    let first = cost.local(a[0], b[0]);
    if n == 1 && b.len() == 1 {
        return first;
    }
    first + cost.local(a[n - 1], b[b.len() - 1])
}

/// LB_Keogh of `q` against the envelope of another series of the same length,
/// in path-sum space. Each row i of a warping path costs at least the distance
/// from `q[i]` to `[lower[i], upper[i]]`. When `contrib` is given (n + 1
/// slots), it receives the suffix sums (`contrib[i]` = bound for rows i..n,
/// `contrib[n]` = 0) for early abandoning inside the DP. Without `contrib` the
/// sum stops early once it exceeds `cutoff`.
#[inline(always)]
pub fn lb_keogh(
    q: &[f64],
    upper: &[f64],
    lower: &[f64],
    cost: Cost,
    cutoff: f64,
    contrib: Option<&mut [f64]>,
) -> f64 {
    let n = q.len();
    let (upper, lower) = (&upper[..n], &lower[..n]);
    match contrib {
        None => {
            // Four independent partial sums: no add-latency chain, and a check
            // against the cut-off every 8 samples.
            let mut acc = [0.0f64; 4];
            let mut i = 0;
            while i + 4 <= n {
                for l in 0..4 {
                    acc[l] += gap(q[i + l], upper[i + l], lower[i + l], cost);
                }
                i += 4;
                if i % 8 == 0 && (acc[0] + acc[1]) + (acc[2] + acc[3]) > cutoff {
                    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
                }
            }
            let mut sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
            while i < n {
                sum += gap(q[i], upper[i], lower[i], cost);
                i += 1;
            }
            sum
        }
        Some(c) => {
            let c = &mut c[..=n];
            c[n] = 0.0;
            let mut acc = 0.0;
            for i in (0..n).rev() {
                acc += gap(q[i], upper[i], lower[i], cost);
                c[i] = acc;
            }
            acc
        }
    }
}

#[inline(always)]
fn min(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

/// Distance from `v` to the interval [l, u] under `cost`, branch-free: one
/// row's LB_Keogh term.
#[inline(always)]
pub fn gap(v: f64, u: f64, l: f64, cost: Cost) -> f64 {
    let (x, y) = (v - u, l - v);
    let d = if x > 0.0 { x } else { 0.0 } + if y > 0.0 { y } else { 0.0 };
    match cost {
        Cost::Abs => d,
        Cost::Squared => d * d,
    }
}

/// LB_Enhanced^V (Tan, Petitjean & Webb, SDM 2019), for equal lengths: tight
/// for the wide bands 000 uses (radius 10 on windows of 20). Every warping path
/// crosses each "L-shaped" band {cells with max(i, j) = t} for t < V and each
/// mirrored band {min(i, j) = n−1−t} at the end; the rows between are bounded
/// by LB_Keogh against `b`'s envelope. The cell sets are disjoint, so the sum
/// of their minima bounds the path cost. Stops once the sum exceeds `cutoff`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn lb_enhanced(
    a: &[f64],
    b: &[f64],
    radius: usize,
    v: usize,
    upper_b: &[f64],
    lower_b: &[f64],
    cost: Cost,
    cutoff: f64,
) -> f64 {
    let n = a.len();
    if n == 0 || b.len() != n {
        return 0.0;
    }
    if n == 1 {
        return cost.local(a[0], b[0]);
    }
    let v = v.min(n / 2).max(1);
    let mut sum = cost.local(a[0], b[0]) + cost.local(a[n - 1], b[n - 1]);
    for t in 1..v {
        let lo = t.saturating_sub(radius);
        let mut left = cost.local(a[t], b[t]);
        for j in lo..t {
            left = min(min(left, cost.local(a[t], b[j])), cost.local(a[j], b[t]));
        }
        let e = n - 1 - t;
        let hi = e.saturating_add(radius).min(n - 1);
        let mut right = cost.local(a[e], b[e]);
        for j in e + 1..=hi {
            right = min(min(right, cost.local(a[e], b[j])), cost.local(a[j], b[e]));
        }
        sum += left + right;
        if sum > cutoff {
            return sum;
        }
    }
    for i in v..n - v {
        sum += gap(a[i], upper_b[i], lower_b[i], cost);
    }
    sum
}
