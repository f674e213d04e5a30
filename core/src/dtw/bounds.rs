//! Lower bounds on banded DTW (UCR Suite cascade): LB_Kim (first and last
//! points) and LB_Keogh (distance of a series to the other's band envelope).

use super::Cost;

/// Upper and lower envelope of `s` for band radius `r`:
/// `upper[i] = max(s[i−r ..= i+r])`, `lower[i] = min(...)`. Computed once per
/// reference at fit time and once per query.
pub fn envelope(s: &[f64], radius: usize, upper: &mut [f64], lower: &mut [f64]) {
    let n = s.len();
    debug_assert!(upper.len() >= n && lower.len() >= n);
    for i in 0..n {
        let lo = i.saturating_sub(radius);
        let hi = i.saturating_add(radius).min(n - 1);
        let mut u = f64::NEG_INFINITY;
        let mut l = f64::INFINITY;
        for &v in &s[lo..=hi] {
            u = u.max(v);
            l = l.min(v);
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
/// from `q[i]` to `[lower[i], upper[i]]`. When `contrib` is given, it receives
/// the suffix sums (`contrib[i]` = bound for rows i..n, `contrib[n]` = 0) for
/// early abandoning inside the DP. Stops early once the sum exceeds `cutoff`
/// (then `contrib` is not filled).
#[inline]
pub fn lb_keogh(
    q: &[f64],
    upper: &[f64],
    lower: &[f64],
    cost: Cost,
    cutoff: f64,
    contrib: Option<&mut [f64]>,
) -> f64 {
    let n = q.len();
    match contrib {
        None => {
            let mut sum = 0.0;
            for i in 0..n {
                sum += gap(q[i], upper[i], lower[i], cost);
                if sum > cutoff {
                    return sum;
                }
            }
            sum
        }
        Some(c) => {
            let mut sum = 0.0;
            for i in 0..n {
                let g = gap(q[i], upper[i], lower[i], cost);
                c[i] = g;
                sum += g;
                if sum > cutoff {
                    return sum;
                }
            }
            // Turn per-row gaps into suffix sums.
            c[n] = 0.0;
            let mut acc = 0.0;
            for i in (0..n).rev() {
                acc += c[i];
                c[i] = acc;
            }
            sum
        }
    }
}

#[inline(always)]
fn gap(v: f64, u: f64, l: f64, cost: Cost) -> f64 {
    if v > u {
        cost.local(v, u)
    } else if v < l {
        cost.local(v, l)
    } else {
        0.0
    }
}
