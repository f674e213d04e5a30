//! Python module `opsel._opsel`: thin wrappers over the core crate, one file
//! per core module (DESIGN.md: bindings hold no algorithm).

use pyo3::prelude::*;

mod bwe;
mod convert;
mod dps;
mod dtw;
mod errors;
mod fastprob;
mod flows;
mod knn;
mod mix;
#[cfg(target_os = "linux")]
mod ops;
#[cfg(target_os = "linux")]
mod ops_driver;
mod series;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod transfer;

#[pymodule]
fn _opsel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", opsel::VERSION)?;
    bwe::register(m)?;
    dps::register(m)?;
    dtw::register(m)?;
    fastprob::register(m)?;
    flows::register(m)?;
    knn::register(m)?;
    mix::register(m)?;
    series::register(m)?;
    #[cfg(target_os = "linux")]
    {
        ops::register(m)?;
        ops_driver::register(m)?;
        sys::register(m)?;
        transfer::register(m)?;
    }
    Ok(())
}
