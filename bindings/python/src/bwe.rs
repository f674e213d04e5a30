//! `opsel.bwe_estimate`, `opsel.bwe_decide_single_rate`, `opsel.pstream_rates`,
//! `opsel.pstream_send_gaps`, `opsel.BweMl`, `opsel.RateAdapter`, and the Ch 5
//! baselines `opsel.bwe_trend` / `opsel.bwe_baseline` (core: `opsel::bwe`, document 001). Gaps are numpy float64 arrays in nanoseconds, rates bit/s.

use crate::convert::invalid;
use crate::errors::IntoPy;
use numpy::{PyArray1, PyReadonlyArray1};
use opsel::bwe::abest::{AbestConfig, AbestVariant};
use opsel::bwe::adapter::{EtaParam, RateAdapter as CoreAdapter, RateAdapterConfig};
use opsel::bwe::bass::BassNames;
use opsel::bwe::ml::MlEstimator;
use opsel::bwe::pathload::{self, Baseline, ImrWorkspace};
use opsel::bwe::{self, EstimatorWorkspace, PStreamSpec};
use opsel::names::Named;
use pyo3::prelude::*;
use std::sync::Mutex;

/// One ABest estimate (001 Alg. 1).
#[pyclass(module = "opsel", frozen, get_all)]
#[derive(Clone)]
pub struct Abest {
    /// Estimated available bandwidth, bit/s.
    abest_bps: f64,
    /// First packet of the terminal excursion, or None.
    excursion_start: Option<usize>,
    /// The whole stream was congested (answer: below the lowest rate).
    below_range: bool,
    /// No excursion (answer: at least the highest rate).
    above_range: bool,
}

#[pymethods]
impl Abest {
    fn __repr__(&self) -> String {
        format!(
            "Abest(abest_bps={}, excursion_start={:?}, below_range={}, above_range={})",
            self.abest_bps, self.excursion_start, self.below_range, self.above_range
        )
    }
}

fn gaps(a: &PyReadonlyArray1<'_, f64>) -> Vec<f64> {
    a.as_array().iter().copied().collect()
}

/// Rapid's multi-rate estimate (001 Alg. 5): multi-pass BASS, AVG_WINDOW, ABest.
#[pyfunction]
#[pyo3(signature = (send_gaps_ns, recv_gaps_ns, r_avg_bps, n_rates = 4, packets_per_rate = 16, range = 0.5, packet_bytes = 9038, thresholds = "thesis", reference_gap_ns = 9038.0 * 8.0 / 7.0, avg_window = None, window = "trailing", head = "average", tail = "average", variant = "corrected", epsilon_ns = 100.0, min_excursion = 4, abest_variant = "corrected"))]
#[allow(clippy::too_many_arguments)]
fn bwe_estimate(
    py: Python<'_>,
    send_gaps_ns: PyReadonlyArray1<'_, f64>,
    recv_gaps_ns: PyReadonlyArray1<'_, f64>,
    r_avg_bps: f64,
    n_rates: usize,
    packets_per_rate: usize,
    range: f64,
    packet_bytes: u32,
    thresholds: &str,
    reference_gap_ns: f64,
    avg_window: Option<usize>,
    window: &str,
    head: &str,
    tail: &str,
    variant: &str,
    epsilon_ns: f64,
    min_excursion: usize,
    abest_variant: &str,
) -> PyResult<Abest> {
    let spec = PStreamSpec::with_range(r_avg_bps, n_rates, packets_per_rate, range, packet_bytes)
        .py_err()?;
    let bass = BassNames {
        thresholds,
        reference_gap_ns,
        avg_window: avg_window.unwrap_or(packets_per_rate),
        window,
        head,
        tail,
        variant,
    }
    .config()
    .py_err()?;
    let ab = AbestConfig {
        epsilon_ns,
        min_excursion,
        variant: AbestVariant::parse("abest_variant", abest_variant).py_err()?,
    };
    let (gs, gr) = (gaps(&send_gaps_ns), gaps(&recv_gaps_ns));
    let a = py
        .detach(|| {
            let mut ws = EstimatorWorkspace::new(gs.len().max(1));
            bwe::estimate_multi_rate(&gs, &gr, &spec, &bass, &ab, &mut ws)
        })
        .py_err()?;
    Ok(Abest {
        abest_bps: a.abest_bps,
        excursion_start: a.excursion_start,
        below_range: a.below_range,
        above_range: a.above_range,
    })
}

/// Single-rate decision (001 §5.3.2) after single-pass BASS: True when the probing
/// rate exceeds the available bandwidth. `rel_tol` 0 is the thesis rule.
#[pyfunction]
#[pyo3(signature = (send_gaps_ns, recv_gaps_ns, rel_tol = 0.0, thresholds = "thesis", reference_gap_ns = 9038.0 * 8.0 / 7.0, head = "average", tail = "average", variant = "corrected"))]
#[allow(clippy::too_many_arguments)]
fn bwe_decide_single_rate(
    send_gaps_ns: PyReadonlyArray1<'_, f64>,
    recv_gaps_ns: PyReadonlyArray1<'_, f64>,
    rel_tol: f64,
    thresholds: &str,
    reference_gap_ns: f64,
    head: &str,
    tail: &str,
    variant: &str,
) -> PyResult<bool> {
    let bass = BassNames {
        thresholds,
        reference_gap_ns,
        avg_window: 1,
        head,
        tail,
        variant,
        ..Default::default()
    }
    .config()
    .py_err()?;
    let (gs, gr) = (gaps(&send_gaps_ns), gaps(&recv_gaps_ns));
    let mut ws = EstimatorWorkspace::new(gs.len().max(1));
    bwe::decide_single_rate(&gs, &gr, &bass, rel_tol, &mut ws).py_err()
}

/// Pathload's trend tests (001 §2.2.1.2) on one-way delays (any unit and offset):
/// `(trend, pct, pdt)` with trend "increasing", "no_trend" or "ambiguous".
#[pyfunction]
fn bwe_trend(owd: PyReadonlyArray1<'_, f64>) -> PyResult<(&'static str, f64, f64)> {
    let d = gaps(&owd);
    let (c, p, t) = (
        pathload::pct(&d).py_err()?,
        pathload::pdt(&d).py_err()?,
        pathload::trend(&d).py_err()?,
    );
    Ok((t.name(), c, p))
}

/// A single-rate baseline of 001 Ch 5 on one p-stream: one-way delays rebuilt from the
/// gaps, denoised by `method` ("pathload" = none, "imr-avg" = 10 averaged points,
/// "imr-wavelet" = `levels`-stage Daubechies D4 approximation), then PCT/PDT.
/// Returns "increasing", "no_trend" or "ambiguous".
#[pyfunction]
#[pyo3(signature = (send_gaps_ns, recv_gaps_ns, method = "imr-avg", levels = 3))]
fn bwe_baseline(
    send_gaps_ns: PyReadonlyArray1<'_, f64>,
    recv_gaps_ns: PyReadonlyArray1<'_, f64>,
    method: &str,
    levels: usize,
) -> PyResult<&'static str> {
    let m = Baseline::parse("method", method).py_err()?;
    let (gs, gr) = (gaps(&send_gaps_ns), gaps(&recv_gaps_ns));
    let mut ws = ImrWorkspace::new(gs.len());
    let t = pathload::baseline(m, &gs, &gr, levels, &mut ws).py_err()?;
    Ok(t.name())
}

/// The N_r probing rates (bit/s, lowest first) of a p-stream (001 §1.3).
#[pyfunction]
#[pyo3(signature = (r_avg_bps, n_rates = 4, packets_per_rate = 16, range = 0.5, packet_bytes = 9038))]
fn pstream_rates<'py>(
    py: Python<'py>,
    r_avg_bps: f64,
    n_rates: usize,
    packets_per_rate: usize,
    range: f64,
    packet_bytes: u32,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let s = PStreamSpec::with_range(r_avg_bps, n_rates, packets_per_rate, range, packet_bytes)
        .py_err()?;
    let mut out = vec![0.0; n_rates];
    s.rates_into(&mut out).py_err()?;
    Ok(PyArray1::from_vec(py, out))
}

/// The N intended send gaps (ns) of a p-stream, `g_s = P / R` (001 §1.3).
#[pyfunction]
#[pyo3(signature = (r_avg_bps, n_rates = 4, packets_per_rate = 16, range = 0.5, packet_bytes = 9038))]
fn pstream_send_gaps<'py>(
    py: Python<'py>,
    r_avg_bps: f64,
    n_rates: usize,
    packets_per_rate: usize,
    range: f64,
    packet_bytes: u32,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let s = PStreamSpec::with_range(r_avg_bps, n_rates, packets_per_rate, range, packet_bytes)
        .py_err()?;
    let mut out = vec![0.0; s.len()];
    s.send_gaps_into(&mut out).py_err()?;
    Ok(PyArray1::from_vec(py, out))
}

/// ML multi-rate estimator (001 Ch 6): a tree-ensemble regressor on FFT-magnitude
/// features of (g_s ‖ g_r), predicting `B_g / R_avg`.
#[pyclass(module = "opsel", frozen)]
pub struct BweMl {
    ml: Mutex<MlEstimator>,
    n_packets: usize,
}

#[pymethods]
impl BweMl {
    /// Load a model file (`path`) or model JSON text (`json`) for `n_packets`-packet p-streams.
    #[new]
    #[pyo3(signature = (path = None, json = None, n_packets = 64))]
    fn new(path: Option<&str>, json: Option<&str>, n_packets: usize) -> PyResult<Self> {
        let ml = match (path, json) {
            (Some(p), None) => MlEstimator::for_model(
                opsel::trees::Ensemble::load(std::path::Path::new(p)).py_err()?,
                n_packets,
            ),
            (None, Some(j)) => MlEstimator::for_json(j, n_packets),
            _ => Err(opsel::Error::invalid(
                "give exactly one of path= (model file) or json= (model JSON text)",
            )),
        }
        .py_err()?;
        Ok(BweMl {
            ml: Mutex::new(ml),
            n_packets,
        })
    }

    /// p-stream length the model serves.
    #[getter]
    fn n_packets(&self) -> usize {
        self.n_packets
    }

    /// Estimate (bit/s) of one p-stream sent at average rate `r_avg_bps`.
    fn estimate(
        &self,
        send_gaps_ns: PyReadonlyArray1<'_, f64>,
        recv_gaps_ns: PyReadonlyArray1<'_, f64>,
        r_avg_bps: f64,
    ) -> PyResult<f64> {
        let (gs, gr) = (gaps(&send_gaps_ns), gaps(&recv_gaps_ns));
        let mut m = self
            .ml
            .lock()
            .map_err(|_| invalid("BweMl lock poisoned by an earlier panic"))?;
        m.estimate(&gs, &gr, r_avg_bps).py_err()
    }
}

/// Rapid's rate adapter (001 §2.3, §8.1): conditional low-pass filter over the mean
/// of γ estimates, −25 % after a loss.
#[pyclass(module = "opsel")]
pub struct RateAdapter {
    a: CoreAdapter,
}

#[pymethods]
impl RateAdapter {
    #[new]
    #[pyo3(signature = (init_bps = 100e3, min_bps = 100e3, max_bps = f64::INFINITY, tau_ns = 50e6, eta = 0.25, eta_param = "tabulated", gamma = 3, loss_cut = 0.25))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        init_bps: f64,
        min_bps: f64,
        max_bps: f64,
        tau_ns: f64,
        eta: f64,
        eta_param: &str,
        gamma: usize,
        loss_cut: f64,
    ) -> PyResult<Self> {
        let param = EtaParam::parse("eta_param", eta_param).py_err()?;
        let a = CoreAdapter::new(RateAdapterConfig {
            init_bps,
            min_bps,
            max_bps,
            tau_ns,
            eta,
            param,
            gamma,
            loss_cut,
        })
        .py_err()?;
        Ok(RateAdapter { a })
    }

    /// Current average rate for the next p-stream, bit/s.
    #[getter]
    fn r_avg_bps(&self) -> f64 {
        self.a.r_avg_bps()
    }

    /// Feed one loss-free p-stream's estimate; returns the new R_avg when it completed
    /// a γ-group, else None.
    fn on_estimate(&mut self, abest_bps: f64, duration_ns: f64) -> PyResult<Option<f64>> {
        self.a.on_estimate(abest_bps, duration_ns).py_err()
    }

    /// A loss was recovered: cut R_avg, drop the partial group; returns the new R_avg.
    fn on_loss(&mut self) -> f64 {
        self.a.on_loss_recovery()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Abest>()?;
    m.add_class::<BweMl>()?;
    m.add_class::<RateAdapter>()?;
    m.add_function(wrap_pyfunction!(bwe_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(bwe_decide_single_rate, m)?)?;
    m.add_function(wrap_pyfunction!(bwe_trend, m)?)?;
    m.add_function(wrap_pyfunction!(bwe_baseline, m)?)?;
    m.add_function(wrap_pyfunction!(pstream_rates, m)?)?;
    m.add_function(wrap_pyfunction!(pstream_send_gaps, m)?)?;
    Ok(())
}
