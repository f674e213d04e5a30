//! ML multi-rate estimator (001 Ch 6, notes §4.1): FFT-magnitude features of
//! `(g_s ‖ g_r)` ([`super::features`]) fed to a gradient-boosted regressor exported by
//! `opsel.train.bwe` ([`crate::trees`]). The regressor predicts `B_g / R_avg`, so the
//! estimate is `prediction · R_avg` [Ours: a dimensionless target lets one model serve
//! every average rate of its training range].
//!
//! Zero allocation per estimate: the feature workspace and buffer live in the
//! estimator.

use super::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use crate::error::{Error, Result};
use crate::trees::{Ensemble, Kind};

/// A loaded regressor plus the buffers one estimate needs.
#[derive(Debug, Clone)]
pub struct MlEstimator {
    model: Ensemble,
    kind: FeatureKind,
    n_packets: usize,
    fw: FeatureWorkspace,
    x: Vec<f64>,
}

impl MlEstimator {
    /// Wrap a regressor trained on p-streams of `n_packets` packets with features of
    /// `kind`. Fails when the model is a classifier or its feature count does not match
    /// `feature_len(kind, n_packets)`.
    pub fn new(model: Ensemble, kind: FeatureKind, n_packets: usize) -> Result<Self> {
        if n_packets < 2 {
            return Err(Error::invalid(format!(
                "n_packets {n_packets}: an ML estimate needs p-streams of at least 2 packets"
            )));
        }
        if !matches!(model.kind(), Kind::GbtRegressor | Kind::RfRegressor) {
            return Err(Error::invalid(format!(
                "model kind {} is not a regressor; the multi-rate estimator needs gbt-regressor or rf-regressor",
                model.kind().name()
            )));
        }
        let nf = feature_len(kind, n_packets);
        if model.n_features() != nf {
            return Err(Error::invalid(format!(
                "model expects {} features but {} for {n_packets}-packet p-streams produce {nf}; train a model for this p-stream length",
                model.n_features(),
                kind.name()
            )));
        }
        Ok(MlEstimator {
            model,
            kind,
            n_packets,
            fw: FeatureWorkspace::new(n_packets),
            x: vec![0.0; nf],
        })
    }

    /// Parse a model file's JSON text (see [`Ensemble::from_json`]) and wrap it.
    pub fn from_json(text: &str, kind: FeatureKind, n_packets: usize) -> Result<Self> {
        Self::new(Ensemble::from_json(text)?, kind, n_packets)
    }

    /// Wrap a regressor whose feature kind is read off its feature count: `n + 2`
    /// values for [`FeatureKind::Magnitude`], `2n + 1` for [`FeatureKind::ReIm`] (the
    /// two differ for every `n ≥ 2`). opsel ships an `fft-reim` model
    /// (models/bwe-mr) beside the magnitude ones, so callers holding only a model file
    /// need not know which transform it was trained on.
    pub fn for_model(model: Ensemble, n_packets: usize) -> Result<Self> {
        let kind = [FeatureKind::Magnitude, FeatureKind::ReIm]
            .into_iter()
            .find(|&k| feature_len(k, n_packets) == model.n_features())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "model expects {} features, which is neither fft-magnitude ({}) nor fft-reim ({}) of {n_packets}-packet p-streams; train a model for this p-stream length",
                    model.n_features(),
                    feature_len(FeatureKind::Magnitude, n_packets),
                    feature_len(FeatureKind::ReIm, n_packets)
                ))
            })?;
        Self::new(model, kind, n_packets)
    }

    /// [`MlEstimator::for_model`] from model JSON text.
    pub fn for_json(text: &str, n_packets: usize) -> Result<Self> {
        Self::for_model(Ensemble::from_json(text)?, n_packets)
    }

    /// Feature kind the estimator computes.
    pub fn kind(&self) -> FeatureKind {
        self.kind
    }

    /// p-stream length the model was trained for.
    pub fn n_packets(&self) -> usize {
        self.n_packets
    }

    /// The wrapped ensemble.
    pub fn model(&self) -> &Ensemble {
        &self.model
    }

    /// Estimate the available bandwidth (bit/s) of one p-stream whose average send
    /// rate was `r_avg_bps`. Allocation-free.
    pub fn estimate(
        &mut self,
        send_gap_ns: &[f64],
        recv_gap_ns: &[f64],
        r_avg_bps: f64,
    ) -> Result<f64> {
        if !(r_avg_bps.is_finite() && r_avg_bps > 0.0) {
            return Err(Error::invalid(format!(
                "r_avg_bps {r_avg_bps} must be a finite rate > 0 bit/s"
            )));
        }
        features(
            send_gap_ns,
            recv_gap_ns,
            self.kind,
            &mut self.fw,
            &mut self.x,
        )?;
        let y = self.model.predict(&self.x)?;
        Ok((y * r_avg_bps).max(0.0))
    }
}
