//! opsel: optimization through protocol selection.
//!
//! Recognise the background traffic mix on a shared path from RTT time series
//! (DTW K-NN, document 000), estimate available bandwidth (document 001),
//! decide a congestion control (OPS, DPS) and act on Linux sockets.
//! See `DESIGN.md` in the repository for the architecture.

pub mod bwe;
pub mod dps;
pub mod dtw;
pub mod error;
pub mod fair;
pub mod fastprob;
pub mod flows;
pub mod knn;
pub mod mix;
pub mod model;
pub mod ops;
pub mod probe;
pub mod series;
pub mod sys;
pub mod trees;

pub use error::{Error, ErrorKind, Result};

/// Library version, as in Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
