//! `dtwDistance` (wraps `opsel::dtw`; 000 §3.5 banded DTW).

use crate::error::{guard, invalid, to_js, Code};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use opsel::dtw::{self, Cost, DtwParams, DEFAULT_RADIUS};

/// DTW settings.
#[napi(object)]
#[derive(Default)]
pub struct DtwOptions {
    /// Sakoe–Chiba band radius in samples (cells with |i − j| ≤ radius);
    /// `Infinity` for no band. Default 10 (000 Table 6.2).
    pub radius: Option<f64>,
    /// `"abs"` (sum of |a − b|, default) or `"squared"` (square root of the
    /// sum of (a − b)², as dtaidistance and tslearn report it).
    pub cost: Option<String>,
}

/// `radius` from JS: a whole number ≥ 0, or Infinity for unconstrained.
pub(crate) fn radius_from_js(r: Option<f64>) -> napi::Result<Option<usize>, Code> {
    match r {
        None => Ok(Some(DEFAULT_RADIUS)),
        Some(r) if r == f64::INFINITY => Ok(None),
        Some(r) if r >= 0.0 && r.fract() == 0.0 && r < 1e15 => Ok(Some(r as usize)),
        Some(r) => Err(invalid(format!(
            "radius {r} is not a whole number >= 0; pass e.g. 10, or Infinity for no band"
        ))),
    }
}

pub(crate) fn radius_to_js(r: Option<usize>) -> f64 {
    r.map_or(f64::INFINITY, |r| r as f64)
}

pub(crate) fn params_from_js(o: &DtwOptions) -> napi::Result<DtwParams, Code> {
    Ok(DtwParams {
        radius: radius_from_js(o.radius)?,
        cost: match &o.cost {
            None => Cost::Abs,
            Some(c) => Cost::parse(c).map_err(to_js)?,
        },
    })
}

/// DTW distance between two series (lengths may differ; the band is widened
/// by the length difference). Throws an `Error` with `code`
/// `"OPSEL_INVALID_INPUT"` for empty series, NaN/Infinity samples (the
/// message names the index), or bad options.
#[napi]
pub fn dtw_distance(
    a: Float64Array,
    b: Float64Array,
    options: Option<DtwOptions>,
) -> napi::Result<f64, Code> {
    guard(|| {
        let params = params_from_js(&options.unwrap_or_default())?;
        dtw::distance(&a, &b, &params).map_err(to_js)
    })
}
