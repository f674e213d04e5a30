//! Eight DTW programmes in lockstep, one candidate per lane.
//!
//! The row recurrence `v[j] = cost + min(diag, up, v[j−1])` is a serial chain
//! (add + min latency per cell), so one DTW cannot use a modern core. Eight
//! independent candidates against the same query fill that latency (and SIMD
//! lanes where available). Each lane performs exactly the scalar operations in
//! the scalar order, so a lane's distance is bit-identical to
//! [`super::accumulated`] whenever the candidate is not abandoned.

use super::core_dp::{AbsCost, Local, SqCost};
use super::Cost;

/// Candidates per lockstep group.
pub const LANES: usize = 8;
/// One value per lane.
pub type Lanes = [f64; LANES];

/// Rows for [`accumulated_lanes`]; grows once, then never allocates.
#[derive(Debug, Clone, Default)]
pub struct LaneWorkspace {
    prev: Vec<Lanes>,
    mid: Vec<Lanes>,
    curr: Vec<Lanes>,
}

impl LaneWorkspace {
    /// Room for series of `len` samples.
    pub fn ensure(&mut self, len: usize) {
        if self.prev.len() < len + 1 {
            self.prev.resize(len + 1, [0.0; LANES]);
            self.mid.resize(len + 1, [0.0; LANES]);
            self.curr.resize(len + 1, [0.0; LANES]);
        }
    }
}

/// Accumulated banded DTW of `a` against `LANES` (8) equal-length candidates given
/// interleaved (`b_lanes[j][lane]`). A lane whose row minimum plus its remaining
/// bound `cb_lanes[i + 1][lane]` exceeds `cutoff` is dead and reports infinity; the
/// programme stops when every lane is dead. `cb_lanes` has `a.len() + 1` entries.
pub fn accumulated_lanes(
    a: &[f64],
    b_lanes: &[Lanes],
    radius: usize,
    cost: Cost,
    cutoff: f64,
    cb_lanes: &[Lanes],
    ws: &mut LaneWorkspace,
) -> Lanes {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe {
                accumulated_lanes_avx2(a, b_lanes, radius, cost, cutoff, cb_lanes, ws)
            };
        }
    }
    accumulated_lanes_inline(a, b_lanes, radius, cost, cutoff, cb_lanes, ws)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn accumulated_lanes_avx2(
    a: &[f64],
    b_lanes: &[Lanes],
    radius: usize,
    cost: Cost,
    cutoff: f64,
    cb_lanes: &[Lanes],
    ws: &mut LaneWorkspace,
) -> Lanes {
    accumulated_lanes_inline(a, b_lanes, radius, cost, cutoff, cb_lanes, ws)
}

/// [`accumulated_lanes`] without the CPU-feature dispatch, for callers that are
/// themselves compiled for a target feature and want it inlined.
#[inline(always)]
pub fn accumulated_lanes_inline(
    a: &[f64],
    b_lanes: &[Lanes],
    radius: usize,
    cost: Cost,
    cutoff: f64,
    cb_lanes: &[Lanes],
    ws: &mut LaneWorkspace,
) -> Lanes {
    match cost {
        Cost::Abs => dp_lanes::<AbsCost>(a, b_lanes, radius, cutoff, cb_lanes, ws),
        Cost::Squared => dp_lanes::<SqCost>(a, b_lanes, radius, cutoff, cb_lanes, ws),
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

#[inline(always)]
fn vmin(a: Lanes, b: Lanes) -> Lanes {
    let mut out = a;
    for l in 0..LANES {
        out[l] = min(a[l], b[l]);
    }
    out
}

const INF: Lanes = [f64::INFINITY; LANES];

/// One cell for every lane: `local(ai, b) + min(min(diag, up), left)`, the
/// scalar programme's operations in the scalar order (bit-identical results).
#[inline(always)]
fn cell<C: Local>(ai: f64, bj: &Lanes, diag: Lanes, up: Lanes, left: Lanes) -> Lanes {
    let m = vmin(vmin(diag, up), left);
    let mut v = m;
    for l in 0..LANES {
        v[l] = C::local(ai, bj[l]) + m[l];
    }
    v
}

/// Columns of row `i` inside the band.
#[inline(always)]
fn band(i: usize, radius: usize, n: usize) -> (usize, usize) {
    (
        i.saturating_sub(radius),
        i.saturating_add(radius).min(n - 1),
    )
}

/// One row on its own: reads `prev`, writes `curr` (index j + 1 is column j)
/// and returns the row minimum.
#[inline(always)]
fn single_row<C: Local>(
    ai: f64,
    b_lanes: &[Lanes],
    (lo, hi): (usize, usize),
    prev: &[Lanes],
    curr: &mut [Lanes],
) -> Lanes {
    let n = b_lanes.len();
    curr[lo] = INF;
    let mut left = INF;
    let mut rmin = INF;
    for j in lo..=hi {
        let v = cell::<C>(ai, &b_lanes[j], prev[j], prev[j + 1], left);
        curr[j + 1] = v;
        left = v;
        rmin = vmin(rmin, v);
    }
    // The next row reads one column past this row's band: fence it.
    if hi + 2 <= n {
        curr[hi + 2] = INF;
    }
    rmin
}

/// Rows i and i + 1 together, row i + 1 one column behind row i: the two
/// rows' `left` chains (add + min latency per cell) are independent, so the
/// core overlaps them instead of waiting on one chain. Row i + 1 at column
/// j − 1 needs row i's columns j − 2 and j − 1, both done one step earlier
/// (carried in registers). Every cell gets the same operations as in
/// [`single_row`], so results stay bit-identical.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn row_pair<C: Local>(
    (a0, a1): (f64, f64),
    b_lanes: &[Lanes],
    (lo0, hi0): (usize, usize),
    (lo1, hi1): (usize, usize),
    prev: &[Lanes],
    mid: &mut [Lanes],
    next: &mut [Lanes],
) -> (Lanes, Lanes) {
    let n = b_lanes.len();
    mid[lo0] = INF;
    if hi0 + 2 <= n {
        mid[hi0 + 2] = INF;
    }
    next[lo1] = INF;
    let (mut left0, mut rmin0) = (INF, INF);
    let (mut left1, mut rmin1) = (INF, INF);
    // Row i alone until row i + 1's first column has both inputs.
    let first = lo1.min(hi0);
    for j in lo0..=first {
        let v = cell::<C>(a0, &b_lanes[j], prev[j], prev[j + 1], left0);
        mid[j + 1] = v;
        left0 = v;
        rmin0 = vmin(rmin0, v);
    }
    // Both rows: row i at column j, row i + 1 at column j − 1.
    let (mut diag1, mut up1) = (mid[lo1], mid[lo1 + 1]);
    for j in lo1 + 1..=hi0 {
        let v0 = cell::<C>(a0, &b_lanes[j], prev[j], prev[j + 1], left0);
        mid[j + 1] = v0;
        left0 = v0;
        rmin0 = vmin(rmin0, v0);
        let v1 = cell::<C>(a1, &b_lanes[j - 1], diag1, up1, left1);
        next[j] = v1;
        left1 = v1;
        rmin1 = vmin(rmin1, v1);
        diag1 = up1;
        up1 = v0;
    }
    // Row i + 1 alone for its last columns.
    for j in lo1.max(hi0)..=hi1 {
        let v = cell::<C>(a1, &b_lanes[j], mid[j], mid[j + 1], left1);
        next[j + 1] = v;
        left1 = v;
        rmin1 = vmin(rmin1, v);
    }
    if hi1 + 2 <= n {
        next[hi1 + 2] = INF;
    }
    (rmin0, rmin1)
}

#[inline(always)]
fn dp_lanes<C: Local>(
    a: &[f64],
    b_lanes: &[Lanes],
    radius: usize,
    cutoff: f64,
    cb_lanes: &[Lanes],
    ws: &mut LaneWorkspace,
) -> Lanes {
    let n = a.len();
    debug_assert_eq!(b_lanes.len(), n);
    debug_assert!(cb_lanes.len() > n);
    ws.ensure(n);
    let (mut prev, mid, mut next) = (&mut ws.prev[..=n], &mut ws.mid[..=n], &mut ws.curr[..=n]);
    let b_lanes = &b_lanes[..n];
    prev.fill(INF);
    prev[0] = [0.0; LANES];
    let mut dead = [false; LANES];
    // A lane is dead once a row minimum plus the bound on the rows after it
    // exceeds the cut-off; the programme stops when every lane is dead.
    let mut kill = |rmin: Lanes, rest: &Lanes| {
        let mut all_dead = true;
        for l in 0..LANES {
            dead[l] |= rmin[l] + rest[l] > cutoff;
            all_dead &= dead[l];
        }
        all_dead
    };
    let mut i = 0;
    while i + 1 < n {
        let (r0, r1) = row_pair::<C>(
            (a[i], a[i + 1]),
            b_lanes,
            band(i, radius, n),
            band(i + 1, radius, n),
            prev,
            mid,
            next,
        );
        let d0 = kill(r0, &cb_lanes[i + 1]);
        if d0 | kill(r1, &cb_lanes[i + 2]) {
            return INF;
        }
        std::mem::swap(&mut prev, &mut next);
        i += 2;
    }
    if i < n {
        let r = single_row::<C>(a[i], b_lanes, band(i, radius, n), prev, next);
        if kill(r, &cb_lanes[i + 1]) {
            return INF;
        }
        std::mem::swap(&mut prev, &mut next);
    }
    let mut out = prev[n];
    for l in 0..LANES {
        if dead[l] {
            out[l] = f64::INFINITY;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn lanes_equal_scalar(n in 1usize..40, r in 0usize..12, sq in any::<bool>(), seed in any::<u64>()) {
            let cost = if sq { Cost::Squared } else { Cost::Abs };
            let mut s = seed | 1;
            let mut rnd = || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; (s % 10_000) as f64 / 37.0 };
            let a: Vec<f64> = (0..n).map(|_| rnd()).collect();
            let bs: Vec<Vec<f64>> = (0..LANES).map(|_| (0..n).map(|_| rnd()).collect()).collect();
            let b_lanes: Vec<Lanes> = (0..n).map(|j| std::array::from_fn(|l| bs[l][j])).collect();
            let cb_lanes = vec![[0.0; LANES]; n + 1];
            let mut lw = LaneWorkspace::default();
            let got = accumulated_lanes(&a, &b_lanes, r, cost, f64::INFINITY, &cb_lanes, &mut lw);
            let mut ws = super::super::Workspace::default();
            for l in 0..LANES {
                let want = super::super::accumulated(&a, &bs[l], r, cost, f64::INFINITY, None, &mut ws);
                prop_assert_eq!(got[l].to_bits(), want.to_bits());
            }
            // A cut-off below a lane's distance kills exactly the lanes above it.
            let cut = got[1];
            let again = accumulated_lanes(&a, &b_lanes, r, cost, cut, &cb_lanes, &mut lw);
            for l in 0..LANES {
                if got[l] <= cut { prop_assert_eq!(again[l], got[l]); }
            }
        }
    }
}
