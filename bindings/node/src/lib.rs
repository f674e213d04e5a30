//! Node.js binding for opsel (napi-rs), thin like Hugging Face tokenizers'
//! `bindings/node`: no algorithm lives here. One file per core module:
//! `dtw.rs` → `opsel::dtw`, `knn.rs` → `opsel::knn`, `model.rs` →
//! `opsel::model`; `error.rs` maps `opsel::Error` to `Error` objects with a
//! `code` property (`ErrorKind::code()`).

// The #[napi] exports are registered at load time, which a `cfg(test)` build never does.
#![cfg_attr(test, allow(dead_code))]

mod bwe;
mod convert;
mod dps;
mod dtw;
mod error;
mod fastprob;
mod flows;
mod knn;
mod model;
#[cfg(target_os = "linux")]
mod ops;
#[cfg(target_os = "linux")]
mod ops_driver;
#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
mod transfer;

use napi_derive::napi;

/// Version of the opsel core this binding was built with.
#[napi]
pub fn version() -> String {
    opsel::VERSION.to_string()
}
