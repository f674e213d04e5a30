//! opsel: optimization through protocol selection.
//!
//! Recognise the background traffic mix on a shared path from RTT time series
//! (DTW K-NN, document 000), estimate available bandwidth (document 001),
//! decide a congestion control (OPS, DPS) and act on Linux sockets.
//! See `DESIGN.md` in the repository for the architecture.

pub mod dtw;
pub mod error;
pub mod knn;
pub mod mix;
pub mod model;
pub mod series;

pub use error::{Error, ErrorKind, Result};

/// Library version, as in Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
