//! Dynamic time warping with a Sakoe–Chiba band, lower bounds and early
//! abandoning (000 §3.5: 1-NN DTW, "max warping 10"; the UCR Suite's cascade).
//!
//! Conventions (000 §10 gap 1, decided here):
//! - `radius` r allows cells with |i − j| ≤ r (tslearn's `sakoe_chiba_radius`;
//!   dtaidistance's `window` is r + 1). For unequal lengths the band is widened
//!   by the length difference, as dtaidistance does.
//! - [`Cost::Abs`] sums |a − b| along the path; [`Cost::Squared`] sums (a − b)²
//!   and reports the square root, like dtaidistance and tslearn.
//!
//! A peak shifted by one sample costs nothing once the band lets the path
//! warp by one, while the lock-step alignment (radius 0) pays for it:
//!
//! ```
//! use opsel::dtw::{self, Cost, DtwParams};
//!
//! let a = [0.0, 0.0, 1.0, 2.0, 1.0, 0.0, 0.0];
//! let b = [0.0, 1.0, 2.0, 1.0, 0.0, 0.0, 0.0]; // a, one sample earlier
//! let band1 = DtwParams { radius: Some(1), cost: Cost::Abs };
//! let lockstep = DtwParams { radius: Some(0), cost: Cost::Abs };
//! assert_eq!(dtw::distance(&a, &b, &band1)?, 0.0);
//! assert_eq!(dtw::distance(&a, &b, &lockstep)?, 4.0); // Σ|a_i − b_i|
//! // The default is the thesis's "max warping 10" with |a − b| cost.
//! assert_eq!(DtwParams::default().radius, Some(dtw::DEFAULT_RADIUS));
//! // Lower bounds never exceed the distance they prune for.
//! assert!(dtw::lb_kim(&a, &b, Cost::Abs) <= dtw::distance(&a, &b, &band1)?);
//! # Ok::<(), opsel::Error>(())
//! ```

mod bounds;
mod core_dp;
pub mod lanes;

pub use bounds::{envelope, gap, lb_enhanced, lb_keogh, lb_kim};
pub use core_dp::accumulated;

use crate::error::{check_finite, Error, Result};

/// 000 Table 6.2: "max-warping = 10".
pub const DEFAULT_RADIUS: usize = 10;

/// Local cost between two samples.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Cost {
    /// |a − b|; the distance is the path sum.
    #[default]
    Abs,
    /// (a − b)²; the distance is the square root of the path sum.
    Squared,
}

impl Cost {
    /// Local cost of one cell.
    #[inline(always)]
    pub fn local(self, a: f64, b: f64) -> f64 {
        let d = a - b;
        match self {
            Cost::Abs => d.abs(),
            Cost::Squared => d * d,
        }
    }

    /// Map an accumulated path sum to the reported distance.
    #[inline]
    pub fn finish(self, acc: f64) -> f64 {
        match self {
            Cost::Abs => acc,
            Cost::Squared => acc.sqrt(),
        }
    }

    /// Map a reported distance back to path-sum space (for cut-offs).
    #[inline]
    pub fn unfinish(self, dist: f64) -> f64 {
        match self {
            Cost::Abs => dist,
            Cost::Squared => dist * dist,
        }
    }

    /// Name as used in model files (`abs`, `squared`).
    pub fn name(self) -> &'static str {
        match self {
            Cost::Abs => "abs",
            Cost::Squared => "squared",
        }
    }

    /// Parse `abs` / `squared` (also `l1`, `sq`, `l2`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "abs" | "l1" | "absolute" => Ok(Cost::Abs),
            "squared" | "sq" | "l2" | "sqeuclidean" => Ok(Cost::Squared),
            other => Err(Error::invalid(format!(
                "unknown DTW cost {other:?}; use \"abs\" or \"squared\""
            ))),
        }
    }
}

/// DTW parameters: band radius (`None` = unconstrained) and local cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct DtwParams {
    pub radius: Option<usize>,
    pub cost: Cost,
}

impl Default for DtwParams {
    fn default() -> Self {
        Self {
            radius: Some(DEFAULT_RADIUS),
            cost: Cost::Abs,
        }
    }
}

impl DtwParams {
    /// Band radius as a number; unconstrained becomes a radius covering any length.
    #[inline]
    pub fn radius_or_max(&self) -> usize {
        self.radius.unwrap_or(usize::MAX / 4)
    }
}

/// Reusable rows for the dynamic programme; grows once, then never allocates.
#[derive(Debug, Clone, Default)]
pub struct Workspace {
    pub(crate) prev: Vec<f64>,
    pub(crate) curr: Vec<f64>,
}

impl Workspace {
    /// A workspace sized for series up to `max_len` columns.
    pub fn with_capacity(max_len: usize) -> Self {
        Self {
            prev: vec![0.0; max_len + 1],
            curr: vec![0.0; max_len + 1],
        }
    }

    /// Make room for `len` columns (allocates only when growing).
    pub(crate) fn ensure(&mut self, len: usize) {
        if self.prev.len() < len + 1 {
            self.prev.resize(len + 1, 0.0);
            self.curr.resize(len + 1, 0.0);
        }
    }
}

/// DTW distance between `a` and `b` (allocates a temporary workspace).
pub fn distance(a: &[f64], b: &[f64], params: &DtwParams) -> Result<f64> {
    let mut ws = Workspace::with_capacity(b.len());
    distance_with(a, b, params, &mut ws)
}

/// DTW distance using a caller-owned workspace: no allocation once the
/// workspace has seen a series this long.
pub fn distance_with(a: &[f64], b: &[f64], params: &DtwParams, ws: &mut Workspace) -> Result<f64> {
    if a.is_empty() || b.is_empty() {
        return Err(Error::invalid(format!(
            "DTW needs two non-empty series, got lengths {} and {}",
            a.len(),
            b.len()
        )));
    }
    check_finite("series a", a)?;
    check_finite("series b", b)?;
    let acc = accumulated(
        a,
        b,
        params.radius_or_max(),
        params.cost,
        f64::INFINITY,
        None,
        ws,
    );
    Ok(params.cost.finish(acc))
}

#[cfg(test)]
mod tests;
