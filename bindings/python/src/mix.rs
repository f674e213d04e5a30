//! Background-mix labels (core: `opsel::mix`).

use crate::errors::IntoPy;
use opsel::mix::{self, Mix};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Parse a mix label ("B1-C1", "bbr:2-cubic:1") into a dict with `counts`
/// (cca → flows), `bbr_present`, `heterogeneous` and `canonical`.
#[pyfunction]
fn parse_mix<'py>(py: Python<'py>, label: &str) -> PyResult<Bound<'py, PyDict>> {
    let m = Mix::parse(label).py_err()?;
    let d = PyDict::new(py);
    let counts = PyDict::new(py);
    for (cca, n) in m.iter() {
        counts.set_item(cca, n)?;
    }
    d.set_item("counts", counts)?;
    d.set_item("bbr_present", m.bbr_present())?;
    d.set_item("heterogeneous", m.heterogeneous())?;
    d.set_item("canonical", m.canonical())?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_mix, m)?)?;
    m.add("SIX_CLASSES", mix::SIX_CLASSES.to_vec())?;
    Ok(())
}
