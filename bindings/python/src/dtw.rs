//! `opsel.dtw_distance` (core: `opsel::dtw`).

use crate::errors::IntoPy;
use numpy::PyReadonlyArray1;
use opsel::dtw::{self, Cost, DtwParams};
use pyo3::prelude::*;

/// Parse the Python-side DTW options into core parameters.
pub fn params(radius: Option<usize>, cost: &str) -> PyResult<DtwParams> {
    Ok(DtwParams {
        radius,
        cost: Cost::parse(cost).py_err()?,
    })
}

/// DTW distance between two 1-D float64 arrays.
///
/// radius: Sakoe–Chiba band radius (|i − j| ≤ radius); None = unconstrained.
/// cost: "abs" (sum of |a − b|) or "squared" (square root of the sum of (a − b)²,
/// as dtaidistance and tslearn report).
#[pyfunction]
#[pyo3(signature = (a, b, radius = Some(dtw::DEFAULT_RADIUS), cost = "abs"))]
fn dtw_distance(
    py: Python<'_>,
    a: PyReadonlyArray1<'_, f64>,
    b: PyReadonlyArray1<'_, f64>,
    radius: Option<usize>,
    cost: &str,
) -> PyResult<f64> {
    let p = params(radius, cost)?;
    let (a, b) = (a.as_array(), b.as_array());
    let (a, b) = (a.to_vec(), b.to_vec());
    py.detach(|| dtw::distance(&a, &b, &p)).py_err()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dtw_distance, m)?)?;
    m.add("DEFAULT_RADIUS", dtw::DEFAULT_RADIUS)?;
    Ok(())
}
