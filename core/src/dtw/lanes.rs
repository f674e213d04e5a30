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
    curr: Vec<Lanes>,
}

impl LaneWorkspace {
    /// Room for series of `len` samples.
    pub fn ensure(&mut self, len: usize) {
        if self.prev.len() < len + 1 {
            self.prev.resize(len + 1, [0.0; LANES]);
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
    let (mut prev, mut curr) = (&mut ws.prev[..=n], &mut ws.curr[..=n]);
    prev.fill(INF);
    prev[0] = [0.0; LANES];
    let mut dead = [false; LANES];
    for (i, &ai) in a.iter().enumerate() {
        let lo = i.saturating_sub(radius);
        let hi = i.saturating_add(radius).min(n - 1);
        curr[lo] = INF;
        let mut left = INF;
        let mut rmin = INF;
        for j in lo..=hi {
            let bj = b_lanes[j];
            let m = vmin(vmin(prev[j], prev[j + 1]), left);
            let mut v = m;
            for l in 0..LANES {
                v[l] = C::local(ai, bj[l]) + m[l];
            }
            curr[j + 1] = v;
            left = v;
            rmin = vmin(rmin, v);
        }
        // The next row reads one column past this row's band: fence it.
        if hi + 2 <= n {
            curr[hi + 2] = INF;
        }
        let rest = cb_lanes[i + 1];
        let mut all_dead = true;
        for l in 0..LANES {
            dead[l] |= rmin[l] + rest[l] > cutoff;
            all_dead &= dead[l];
        }
        if all_dead {
            return INF;
        }
        std::mem::swap(&mut prev, &mut curr);
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
