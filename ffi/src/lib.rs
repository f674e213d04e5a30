//! C ABI for opsel (DESIGN.md: "a C API of opaque handles, status codes and a
//! cbindgen header; no Rust type leaks", after rustls-ffi).
//!
//! Every `extern "C"` function here:
//! - returns an [`opsel_status`] (or a plain value that cannot fail),
//! - checks every pointer for NULL, every length for zero and every float for
//!   NaN/inf before touching it, and reports the problem through the status
//!   and [`opsel_last_error_message`],
//! - runs inside `catch_unwind`, so a Rust panic becomes `OPSEL_PANIC`
//!   instead of unwinding into C (which would be undefined behaviour).
//!
//! The header `include/opsel.h` is generated from these items by cbindgen
//! (`make header`); `tests/header.rs` fails when the checked-in copy is stale.
//! One file per core module: `dtw.rs` wraps `opsel::dtw`, `knn.rs` wraps
//! `opsel::knn`, `model.rs` wraps `opsel::model`, `dps.rs` wraps `opsel::dps` and the
//! fairness manager of `opsel::fair`.
#![allow(non_camel_case_types)]
// Every entry point is `unsafe extern "C"`; its safety contract is written in
// its doc comment (which becomes the C documentation in opsel.h).
#![allow(clippy::missing_safety_doc)]

pub mod bwe;
#[cfg(target_os = "linux")]
pub mod dps;
pub mod dtw;
pub mod error;
pub mod fastprob;
pub mod flows;
mod handle;
mod json;
pub mod knn;
pub mod model;
#[cfg(target_os = "linux")]
pub mod ops;
#[cfg(target_os = "linux")]
pub mod ops_driver;
#[cfg(target_os = "linux")]
pub mod sys;
#[cfg(target_os = "linux")]
pub mod transfer;

pub use bwe::*;
#[cfg(target_os = "linux")]
pub use dps::*;
pub use dtw::*;
pub use error::*;
pub use fastprob::*;
pub use flows::*;
pub use knn::*;
pub use model::*;
#[cfg(target_os = "linux")]
pub use ops::*;
#[cfg(target_os = "linux")]
pub use ops_driver::*;
#[cfg(target_os = "linux")]
pub use sys::*;
#[cfg(target_os = "linux")]
pub use transfer::*;

use std::ffi::c_char;

/// Major version of the library this header belongs to (compare with
/// `opsel_version()` at run time to detect a mismatched shared library).
pub const OPSEL_VERSION_MAJOR: u32 = 0;
/// Minor version of the library this header belongs to.
pub const OPSEL_VERSION_MINOR: u32 = 1;
/// Patch version of the library this header belongs to.
pub const OPSEL_VERSION_PATCH: u32 = 0;

/// The library version as a NUL-terminated string, e.g. `"0.1.0"`.
///
/// Ownership: the string is static; never free it.
/// Thread-safety: may be called from any thread at any time.
#[no_mangle]
pub extern "C" fn opsel_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_macros_match_cargo() {
        // The macros are literals in the header; keep them equal to Cargo.toml.
        let v = format!(
            "{}.{}.{}",
            super::OPSEL_VERSION_MAJOR,
            super::OPSEL_VERSION_MINOR,
            super::OPSEL_VERSION_PATCH
        );
        assert_eq!(v, env!("CARGO_PKG_VERSION"));
        let c = unsafe { std::ffi::CStr::from_ptr(super::opsel_version()) };
        assert_eq!(c.to_str().unwrap(), v);
    }
}
