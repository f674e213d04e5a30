//! Bandwidth estimation (document 001, TCP Rapid): `bweEstimate`,
//! `bweDecideSingleRate`, `pstreamRates`, `pstreamSendGaps`, `BweMl` and
//! `RateAdapter`, and the Ch 5 baselines `bweTrend` / `bweBaseline`; wraps `opsel::bwe`. Gaps are `Float64Array`s in nanoseconds,
//! rates bit/s.

use crate::error::{guard, to_js, Code};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use opsel::bwe::abest::{AbestConfig, AbestVariant};
use opsel::bwe::adapter::{EtaParam, RateAdapter as CoreAdapter, RateAdapterConfig};
use opsel::bwe::bass::{BassConfig, BassNames};
use opsel::bwe::ml::MlEstimator;
use opsel::bwe::pathload::{self, Baseline, ImrWorkspace};
use opsel::bwe::{self, EstimatorWorkspace, PStreamSpec};
use opsel::names::Named;

/// Shape of a p-stream (all optional: the thesis' N_r = 4, N_p = 16, range 0.5,
/// 9038-byte packets).
#[napi(object)]
#[derive(Default)]
pub struct PStreamOptions {
    /// Number of rates N_r.
    pub n_rates: Option<u32>,
    /// Packets per rate N_p.
    pub packets_per_rate: Option<u32>,
    /// Probing range R_max / R_min − 1.
    pub range: Option<f64>,
    /// Packet size on the wire, bytes.
    pub packet_bytes: Option<u32>,
}

/// BASS and ABest settings (all optional; thesis defaults).
#[napi(object)]
#[derive(Default)]
pub struct BassOptions {
    /// `"thesis"` (ns, default) or `"relative"` (thesis values rescaled to the mean send gap).
    pub thresholds: Option<String>,
    /// Gap the thesis values were tuned at (default 10329 ns = 9038 B at 7 Gbps).
    pub reference_gap_ns: Option<f64>,
    /// AVG_WINDOW (default N_p).
    pub avg_window: Option<u32>,
    /// `"trailing"` (default) or `"centred"`.
    pub window: Option<String>,
    /// `"average"` (default) or `"keep"`.
    pub head: Option<String>,
    /// `"average"` (default) or `"keep"`.
    pub tail: Option<String>,
    /// `"corrected"` (default) or `"literal"`.
    pub variant: Option<String>,
    /// GAP_NS_EPSILON (default 100).
    pub epsilon_ns: Option<f64>,
    /// Minimum excursion length L (default 4).
    pub min_excursion: Option<u32>,
    /// `"corrected"` (default) or `"literal"` reading of Alg. 1.
    pub abest_variant: Option<String>,
}

/// One ABest estimate.
#[napi(object)]
pub struct Abest {
    /// Estimated available bandwidth, bit/s.
    pub abest_bps: f64,
    /// First packet of the terminal excursion, or null.
    pub excursion_start: Option<u32>,
    /// The whole stream was congested (answer: below the lowest rate).
    pub below_range: bool,
    /// No excursion (answer: at least the highest rate).
    pub above_range: bool,
}

/// A named option (`opsel::names`); absent gives `default`.
fn named<T: Named>(what: &str, v: Option<&str>, default: T) -> napi::Result<T, Code> {
    v.map_or(Ok(default), |v| T::parse(what, v).map_err(to_js))
}

fn spec(r_avg_bps: f64, o: &PStreamOptions) -> napi::Result<PStreamSpec, Code> {
    PStreamSpec::with_range(
        r_avg_bps,
        o.n_rates.unwrap_or(4) as usize,
        o.packets_per_rate.unwrap_or(16) as usize,
        o.range.unwrap_or(0.5),
        o.packet_bytes.unwrap_or(9038),
    )
    .map_err(to_js)
}

fn bass(o: &BassOptions, default_window: usize) -> napi::Result<BassConfig, Code> {
    let d = BassNames::default();
    BassNames {
        thresholds: o.thresholds.as_deref().unwrap_or(d.thresholds),
        reference_gap_ns: o.reference_gap_ns.unwrap_or(d.reference_gap_ns),
        avg_window: o.avg_window.map_or(default_window, |w| w as usize),
        window: o.window.as_deref().unwrap_or(d.window),
        head: o.head.as_deref().unwrap_or(d.head),
        tail: o.tail.as_deref().unwrap_or(d.tail),
        variant: o.variant.as_deref().unwrap_or(d.variant),
    }
    .config()
    .map_err(to_js)
}

/// Rapid's multi-rate estimate of one p-stream sent at average rate `rAvgBps`
/// (001 Alg. 5: multi-pass BASS, AVG_WINDOW, ABest). Throws an `Error` with `code`
/// `"OPSEL_INVALID_INPUT"` for wrong lengths, NaN/Infinity gaps or bad options.
#[napi]
pub fn bwe_estimate(
    send_gaps_ns: Float64Array,
    recv_gaps_ns: Float64Array,
    r_avg_bps: f64,
    pstream: Option<PStreamOptions>,
    options: Option<BassOptions>,
) -> napi::Result<Abest, Code> {
    guard(|| {
        let s = spec(r_avg_bps, &pstream.unwrap_or_default())?;
        let o = options.unwrap_or_default();
        let b = bass(&o, s.packets_per_rate)?;
        let ab = AbestConfig {
            epsilon_ns: o.epsilon_ns.unwrap_or(bwe::GAP_NS_EPSILON),
            min_excursion: o.min_excursion.unwrap_or(4) as usize,
            variant: named(
                "abestVariant",
                o.abest_variant.as_deref(),
                AbestVariant::Corrected,
            )?,
        };
        let mut ws = EstimatorWorkspace::new(send_gaps_ns.len().max(1));
        let a = bwe::estimate_multi_rate(&send_gaps_ns, &recv_gaps_ns, &s, &b, &ab, &mut ws)
            .map_err(to_js)?;
        Ok(Abest {
            abest_bps: a.abest_bps,
            excursion_start: a.excursion_start.map(|v| v as u32),
            below_range: a.below_range,
            above_range: a.above_range,
        })
    })
}

/// Single-rate decision (001 §5.3.2) after single-pass BASS: true when the probing
/// rate exceeds the available bandwidth. `relTol` 0 (default) is the thesis rule.
#[napi]
pub fn bwe_decide_single_rate(
    send_gaps_ns: Float64Array,
    recv_gaps_ns: Float64Array,
    rel_tol: Option<f64>,
    options: Option<BassOptions>,
) -> napi::Result<bool, Code> {
    guard(|| {
        let b = bass(&options.unwrap_or_default(), 1)?;
        let mut ws = EstimatorWorkspace::new(send_gaps_ns.len().max(1));
        bwe::decide_single_rate(
            &send_gaps_ns,
            &recv_gaps_ns,
            &b,
            rel_tol.unwrap_or(0.0),
            &mut ws,
        )
        .map_err(to_js)
    })
}

/// Result of Pathload's trend tests.
#[napi(object)]
pub struct TrendResult {
    /// `"increasing"`, `"no_trend"` or `"ambiguous"`.
    pub trend: String,
    /// Pairwise comparison test S_PCT.
    pub pct: f64,
    /// Pairwise difference test S_PDT.
    pub pdt: f64,
}

/// Pathload's trend tests (001 §2.2.1.2) on one-way delays (any unit and offset).
#[napi]
pub fn bwe_trend(owd: Float64Array) -> napi::Result<TrendResult, Code> {
    guard(|| {
        Ok(TrendResult {
            pct: pathload::pct(&owd).map_err(to_js)?,
            pdt: pathload::pdt(&owd).map_err(to_js)?,
            trend: pathload::trend(&owd).map_err(to_js)?.name().into(),
        })
    })
}

/// A single-rate baseline of 001 Ch 5 on one p-stream: one-way delays rebuilt from
/// the gaps, denoised by `method` (`"pathload"` = none, `"imr-avg"` (default) = 10
/// averaged points, `"imr-wavelet"` = `levels`-stage (default 3) Daubechies D4
/// approximation), then PCT/PDT. Returns `"increasing"`, `"no_trend"` or `"ambiguous"`.
#[napi]
pub fn bwe_baseline(
    send_gaps_ns: Float64Array,
    recv_gaps_ns: Float64Array,
    method: Option<String>,
    levels: Option<u32>,
) -> napi::Result<String, Code> {
    guard(|| {
        let m = named("method", method.as_deref(), Baseline::ImrAvg)?;
        let (gs, gr) = (&send_gaps_ns[..], &recv_gaps_ns[..]);
        let mut ws = ImrWorkspace::new(gs.len());
        let t =
            pathload::baseline(m, gs, gr, levels.unwrap_or(3) as usize, &mut ws).map_err(to_js)?;
        Ok(t.name().into())
    })
}

/// The N_r probing rates (bit/s, lowest first) of a p-stream (001 §1.3).
#[napi]
pub fn pstream_rates(
    r_avg_bps: f64,
    pstream: Option<PStreamOptions>,
) -> napi::Result<Float64Array, Code> {
    guard(|| {
        let s = spec(r_avg_bps, &pstream.unwrap_or_default())?;
        let mut out = vec![0.0; s.n_rates];
        s.rates_into(&mut out).map_err(to_js)?;
        Ok(Float64Array::new(out))
    })
}

/// The N intended send gaps (ns) of a p-stream, `g_s = P / R`.
#[napi]
pub fn pstream_send_gaps(
    r_avg_bps: f64,
    pstream: Option<PStreamOptions>,
) -> napi::Result<Float64Array, Code> {
    guard(|| {
        let s = spec(r_avg_bps, &pstream.unwrap_or_default())?;
        let mut out = vec![0.0; s.len()];
        s.send_gaps_into(&mut out).map_err(to_js)?;
        Ok(Float64Array::new(out))
    })
}

/// ML multi-rate estimator (001 Ch 6): tree regressor on FFT-magnitude features.
#[napi]
pub struct BweMl {
    ml: MlEstimator,
}

#[napi]
impl BweMl {
    /// Load a model file for `nPackets`-packet p-streams (default 64).
    #[napi(factory)]
    pub fn load(path: String, n_packets: Option<u32>) -> napi::Result<BweMl, Code> {
        guard(|| {
            let m = opsel::trees::Ensemble::load(std::path::Path::new(&path)).map_err(to_js)?;
            let ml = MlEstimator::for_model(m, n_packets.unwrap_or(64) as usize).map_err(to_js)?;
            Ok(BweMl { ml })
        })
    }

    /// Parse model JSON text.
    #[napi(factory)]
    pub fn from_json(json: String, n_packets: Option<u32>) -> napi::Result<BweMl, Code> {
        guard(|| {
            let ml =
                MlEstimator::for_json(&json, n_packets.unwrap_or(64) as usize).map_err(to_js)?;
            Ok(BweMl { ml })
        })
    }

    /// p-stream length the model serves.
    #[napi(getter)]
    pub fn n_packets(&self) -> u32 {
        self.ml.n_packets() as u32
    }

    /// Estimate (bit/s) of one p-stream sent at average rate `rAvgBps`.
    #[napi]
    pub fn estimate(
        &mut self,
        send_gaps_ns: Float64Array,
        recv_gaps_ns: Float64Array,
        r_avg_bps: f64,
    ) -> napi::Result<f64, Code> {
        guard(|| {
            self.ml
                .estimate(&send_gaps_ns, &recv_gaps_ns, r_avg_bps)
                .map_err(to_js)
        })
    }
}

/// Rate-adapter settings (all optional; thesis: from 100 kbit/s, τ = 50 ms,
/// η = 1/4 tabulated, γ = 3, −25 % after a loss).
#[napi(object)]
#[derive(Default)]
pub struct RateAdapterOptions {
    pub init_bps: Option<f64>,
    pub min_bps: Option<f64>,
    pub max_bps: Option<f64>,
    pub tau_ns: Option<f64>,
    pub eta: Option<f64>,
    /// `"tabulated"` (default) or `"formula"`.
    pub eta_param: Option<String>,
    pub gamma: Option<u32>,
    pub loss_cut: Option<f64>,
}

/// Rapid's rate adapter (001 §2.3, §8.1).
#[napi]
pub struct RateAdapter {
    a: CoreAdapter,
}

#[napi]
impl RateAdapter {
    #[napi(constructor)]
    pub fn new(options: Option<RateAdapterOptions>) -> napi::Result<Self, Code> {
        guard(|| {
            let o = options.unwrap_or_default();
            let d = RateAdapterConfig::default();
            let a = CoreAdapter::new(RateAdapterConfig {
                init_bps: o.init_bps.unwrap_or(d.init_bps),
                min_bps: o.min_bps.unwrap_or(d.min_bps),
                max_bps: o.max_bps.unwrap_or(d.max_bps),
                tau_ns: o.tau_ns.unwrap_or(d.tau_ns),
                eta: o.eta.unwrap_or(d.eta),
                param: named("etaParam", o.eta_param.as_deref(), EtaParam::Tabulated)?,
                gamma: o.gamma.map(|g| g as usize).unwrap_or(d.gamma),
                loss_cut: o.loss_cut.unwrap_or(d.loss_cut),
            })
            .map_err(to_js)?;
            Ok(RateAdapter { a })
        })
    }

    /// Current average rate for the next p-stream, bit/s.
    #[napi(getter)]
    pub fn r_avg_bps(&self) -> f64 {
        self.a.r_avg_bps()
    }

    /// Feed one loss-free p-stream's estimate; returns the new R_avg when it
    /// completed a γ-group, else null.
    #[napi]
    pub fn on_estimate(
        &mut self,
        abest_bps: f64,
        duration_ns: f64,
    ) -> napi::Result<Option<f64>, Code> {
        guard(|| self.a.on_estimate(abest_bps, duration_ns).map_err(to_js))
    }

    /// A loss was recovered: cut R_avg; returns the new R_avg.
    #[napi]
    pub fn on_loss(&mut self) -> f64 {
        self.a.on_loss_recovery()
    }
}
