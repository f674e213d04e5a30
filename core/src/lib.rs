//! opsel: optimization through protocol selection.
//!
//! Recognise the background traffic mix on a shared path from RTT time series
//! (DTW K-NN, document 000), estimate available bandwidth (document 001),
//! decide a congestion control (OPS, DPS) and act on Linux sockets.
//! See `DESIGN.md` in the repository for the architecture.
//!
//! The tour: recognise the background mix in an RTT window with a DTW K-NN
//! model and let the thesis's decision stump (000 §4.1) pick the CCA:
//!
//! ```
//! use opsel::knn::{KnnConfig, Model};
//! use opsel::ops::{Classifier, KnnClassifier, Policy, Stump};
//!
//! // Labelled 1 Hz RTT windows (ms) of 5 samples; a real model has thousands.
//! let refs = [20.0, 21.0, 20.5, 20.0, 21.0, 48.0, 60.0, 51.0, 57.0, 50.0];
//! let model = Model::fit_labels(&refs, 5, &["B0-C0", "B1-C0"], KnnConfig::default())?;
//! let mut classifier = KnnClassifier::new(model)?;
//! let seen = classifier.classify(&[47.0, 58.0, 52.0, 56.0, 49.0])?;
//! assert!(seen.mix.bbr_present());
//! let mut stump = Stump::default(); // BBR present → bbr, otherwise cubic
//! assert_eq!(stump.select(&seen)?.as_str(), "bbr");
//! let idle = classifier.classify(&[20.0, 20.5, 21.0, 20.0, 20.5])?;
//! assert_eq!(stump.select(&idle)?.as_str(), "cubic");
//! # Ok::<(), opsel::Error>(())
//! ```

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
pub mod names;
pub mod ops;
pub mod probe;
pub mod series;
pub mod sys;
pub mod trees;

pub use error::{Error, ErrorKind, Result};

/// Library version, as in Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
