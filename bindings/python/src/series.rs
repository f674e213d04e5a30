//! RTT series helpers (core: `opsel::series`, `opsel::series::synth`).

use crate::errors::IntoPy;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1};
use opsel::mix::Mix;
use opsel::series::{self, synth, Normalization};
use pyo3::prelude::*;

/// Mean of every `echoes_per_sample` echo RTTs (000 §3.2: 10 echoes 1 ms apart → one 1 Hz sample).
#[pyfunction]
#[pyo3(signature = (echo_rtt_ms, echoes_per_sample = series::DEFAULT_ECHOES_PER_SAMPLE))]
fn aggregate<'py>(
    py: Python<'py>,
    echo_rtt_ms: PyReadonlyArray1<'_, f64>,
    echoes_per_sample: usize,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let v = series::aggregate(&echo_rtt_ms.as_array().to_vec(), echoes_per_sample).py_err()?;
    Ok(PyArray1::from_vec(py, v))
}

/// Non-overlapping windows of `w` samples as a 2-D array (trailing partial window dropped).
#[pyfunction]
fn windows<'py>(
    py: Python<'py>,
    samples: PyReadonlyArray1<'_, f64>,
    w: usize,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let s = samples.as_array().to_vec();
    let rows: Vec<Vec<f64>> = series::windows(&s, w)
        .py_err()?
        .map(|c| c.to_vec())
        .collect();
    if rows.is_empty() {
        return Ok(PyArray2::zeros(py, [0, w], false));
    }
    PyArray2::from_vec2(py, &rows)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// Normalise one window: "none", "subtract-min", "divide-min" or "z-score".
#[pyfunction]
fn normalize<'py>(
    py: Python<'py>,
    window: PyReadonlyArray1<'_, f64>,
    method: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let n = Normalization::parse(method).py_err()?;
    let mut w = window.as_array().to_vec();
    n.apply(&mut w).py_err()?;
    Ok(PyArray1::from_vec(py, w))
}

/// Synthetic 1 Hz RTT series for a background mix (a qualitative model of
/// 000 Fig 5.3; not measured data). Deterministic for a seed.
#[pyfunction]
#[pyo3(signature = (label, seconds, seed = 0))]
fn synthetic_series<'py>(
    py: Python<'py>,
    label: &str,
    seconds: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let mix = Mix::parse(label).py_err()?;
    Ok(PyArray1::from_vec(
        py,
        synth::rtt_series(&mix, seconds, seed),
    ))
}

/// Synthetic windows: `per_class` windows of `w` samples per label. Returns (X, y)
/// with X of shape (len(classes)·per_class, w) and y the label strings.
#[pyfunction]
#[pyo3(signature = (classes, per_class, w, seed = 0))]
fn synthetic_dataset<'py>(
    py: Python<'py>,
    classes: Vec<String>,
    per_class: usize,
    w: usize,
    seed: u64,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Vec<String>)> {
    if w == 0 {
        return Err(crate::errors::to_py(opsel::Error::invalid(
            "w is 0; use w >= 1",
        )));
    }
    let refs: Vec<&str> = classes.iter().map(|s| s.as_str()).collect();
    let (x, y) = synth::dataset(&refs, per_class, w, seed).py_err()?;
    let n = y.len();
    let arr = PyArray1::from_vec(py, x).reshape([n, w])?;
    Ok((
        arr,
        y.iter().map(|&i| classes[i as usize].clone()).collect(),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(windows, m)?)?;
    m.add_function(wrap_pyfunction!(normalize, m)?)?;
    m.add_function(wrap_pyfunction!(synthetic_series, m)?)?;
    m.add_function(wrap_pyfunction!(synthetic_dataset, m)?)?;
    Ok(())
}
