//! C wrappers for `opsel::dtw` (000 §3.5: banded DTW).

use crate::error::{f64_slice, guard, opsel_status, out_ptr, Fail};
use opsel::dtw::{self, Cost, DtwParams};

/// Local cost |a − b|; the distance is the sum along the warping path.
pub const OPSEL_COST_ABS: u32 = 0;
/// Local cost (a − b)²; the distance is the square root of the path sum
/// (as dtaidistance and tslearn report it).
pub const OPSEL_COST_SQUARED: u32 = 1;
/// Band radius meaning "no Sakoe–Chiba constraint" (use it for `radius`).
pub const OPSEL_RADIUS_UNCONSTRAINED: usize = usize::MAX;
/// The default band radius (000 Table 6.2: "max-warping = 10").
pub const OPSEL_DEFAULT_RADIUS: usize = 10;

pub(crate) fn cost_from_u32(cost: u32) -> Result<Cost, Fail> {
    match cost {
        OPSEL_COST_ABS => Ok(Cost::Abs),
        OPSEL_COST_SQUARED => Ok(Cost::Squared),
        other => Err(Fail::invalid(format!(
            "cost {other} is not a DTW cost; use OPSEL_COST_ABS (0) or OPSEL_COST_SQUARED (1)"
        ))),
    }
}

pub(crate) fn cost_to_u32(cost: Cost) -> u32 {
    match cost {
        Cost::Abs => OPSEL_COST_ABS,
        Cost::Squared => OPSEL_COST_SQUARED,
    }
}

pub(crate) fn radius_from_usize(radius: usize) -> Option<usize> {
    (radius != OPSEL_RADIUS_UNCONSTRAINED).then_some(radius)
}

pub(crate) fn radius_to_usize(radius: Option<usize>) -> usize {
    radius.unwrap_or(OPSEL_RADIUS_UNCONSTRAINED)
}

/// DTW distance between series `a` (`a_len` doubles) and `b` (`b_len`
/// doubles) with a Sakoe–Chiba band of `radius` (cells with |i − j| ≤ radius;
/// `OPSEL_RADIUS_UNCONSTRAINED` for none; widened by the length difference
/// for unequal lengths) and local cost `cost` (`OPSEL_COST_ABS` or
/// `OPSEL_COST_SQUARED`). Writes the distance to `*out_distance`.
///
/// Errors: `OPSEL_NULL_POINTER` for a NULL pointer; `OPSEL_INVALID_INPUT` for
/// a zero length, a NaN/inf sample (the message names its index) or an
/// unknown cost. `*out_distance` is untouched on error.
///
/// Ownership: borrows `a` and `b` for the duration of the call only.
/// Thread-safety: any thread, concurrently. Allocates a temporary row buffer
/// of `b_len + 1` doubles.
#[no_mangle]
pub unsafe extern "C" fn opsel_dtw_distance(
    a: *const f64,
    a_len: usize,
    b: *const f64,
    b_len: usize,
    radius: usize,
    cost: u32,
    out_distance: *mut f64,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_distance, "out_distance")?;
        let a = unsafe { f64_slice(a, a_len, "series a") }?;
        let b = unsafe { f64_slice(b, b_len, "series b") }?;
        let params = DtwParams {
            radius: radius_from_usize(radius),
            cost: cost_from_u32(cost)?,
        };
        *out = dtw::distance(a, b, &params)?;
        Ok(())
    })
}
