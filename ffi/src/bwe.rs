//! C wrappers for `opsel::bwe` (document 001, TCP Rapid): p-stream rates and send
//! gaps, multi-pass BASS + ABest, the single-rate decision, the ML multi-rate
//! estimator and the rate adapter. Gaps are `double` nanoseconds, rates bit/s.

use crate::error::{f64_slice, guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use crate::model::clear_out;
use opsel::bwe::abest::AbestConfig;
use opsel::bwe::adapter::{RateAdapter, RateAdapterConfig};
use opsel::bwe::bass::{
    BassConfig, BassVariant, HeadSegment, SpikeThresholds, TailSegment, ThresholdScale, WindowAlign,
};
use opsel::bwe::ml::MlEstimator;
use opsel::bwe::pathload::{self, ImrWorkspace};
use opsel::bwe::{self, Abest, EstimatorWorkspace, PStreamSpec};
use opsel::names::Named;
use std::ffi::c_char;

/// Thresholds in nanoseconds.
pub const OPSEL_BASS_SCALE_NS: u32 = 0;
/// Thresholds as multiples of the p-stream's mean send gap.
pub const OPSEL_BASS_SCALE_RELATIVE: u32 = 1;
/// Head segment before the first spike is averaged (Fig 5.5 as printed).
pub const OPSEL_BASS_HEAD_AVERAGE: u32 = 0;
/// Head segment is left raw (the prose).
pub const OPSEL_BASS_HEAD_KEEP: u32 = 1;
/// A valid event open at the stream end is averaged (notes §3.5 proposal).
pub const OPSEL_BASS_TAIL_AVERAGE: u32 = 0;
/// It is left raw.
pub const OPSEL_BASS_TAIL_KEEP: u32 = 1;
/// Corrected end conditions of Fig 5.5.
pub const OPSEL_BASS_VARIANT_CORRECTED: u32 = 0;
/// Fig 5.5 as printed.
pub const OPSEL_BASS_VARIANT_LITERAL: u32 = 1;
/// Trailing AVG_WINDOW.
pub const OPSEL_BASS_WINDOW_TRAILING: u32 = 0;
/// Centred AVG_WINDOW.
pub const OPSEL_BASS_WINDOW_CENTRED: u32 = 1;
/// ABest: last run of >= L congested packets reaching the stream end.
pub const OPSEL_ABEST_CORRECTED: u32 = 0;
/// ABest: Alg. 1 verbatim.
pub const OPSEL_ABEST_LITERAL: u32 = 1;
/// Pathload trend: increasing one-way delays (rate > available bandwidth).
pub const OPSEL_TREND_INCREASING: u32 = 0;
/// Pathload trend: no trend (rate <= available bandwidth).
pub const OPSEL_TREND_NO_TREND: u32 = 1;
/// Pathload trend: PCT and PDT disagree or fall between their thresholds.
pub const OPSEL_TREND_AMBIGUOUS: u32 = 2;
/// Rate adapter: eta is a count of p-streams (Ch 2 formula).
pub const OPSEL_ETA_FORMULA: u32 = 0;
/// Rate adapter: eta is a per-update decrease fraction (Ch 8 tables).
pub const OPSEL_ETA_TABULATED: u32 = 1;

/// Shape of one p-stream (001 §1.3). Start from `opsel_pstream_spec_thesis()` or
/// `opsel_pstream_spec_with_range()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_pstream_spec {
    /// Average send rate (harmonic mean of the rates), bit/s.
    pub r_avg_bps: f64,
    /// Number of rates N_r (>= 1).
    pub n_rates: usize,
    /// Packets per rate N_p (>= 1).
    pub packets_per_rate: usize,
    /// Spread factor s >= 1 between consecutive rates.
    pub spread: f64,
    /// Packet size on the wire, bytes.
    pub packet_bytes: u32,
}

impl From<PStreamSpec> for opsel_pstream_spec {
    fn from(s: PStreamSpec) -> Self {
        Self {
            r_avg_bps: s.r_avg_bps,
            n_rates: s.n_rates,
            packets_per_rate: s.packets_per_rate,
            spread: s.spread,
            packet_bytes: s.packet_bytes,
        }
    }
}

fn spec_from_c(s: &opsel_pstream_spec) -> Result<PStreamSpec, Fail> {
    let p = PStreamSpec {
        r_avg_bps: s.r_avg_bps,
        n_rates: s.n_rates,
        packets_per_rate: s.packets_per_rate,
        spread: s.spread,
        packet_bytes: s.packet_bytes,
    };
    p.validate()?;
    Ok(p)
}

/// BASS settings (001 §5.3, Alg. 5). Start from `opsel_bass_config_thesis()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_bass_config {
    /// SPIKE_UP of passes 1, 2, 3 (thesis: 20, 5, 2 µs in ns).
    pub spike_up: [f64; 3],
    /// SPIKE_DOWN of passes 1, 2, 3 (thesis: 10, 4, 1 µs in ns).
    pub spike_down: [f64; 3],
    /// How often pass 3 may repeat.
    pub max_repeats: usize,
    /// AVG_WINDOW (1 disables).
    pub avg_window: usize,
    /// `OPSEL_BASS_SCALE_*`.
    pub scale: u32,
    /// `OPSEL_BASS_HEAD_*`.
    pub head: u32,
    /// `OPSEL_BASS_TAIL_*`.
    pub tail: u32,
    /// `OPSEL_BASS_VARIANT_*`.
    pub variant: u32,
    /// `OPSEL_BASS_WINDOW_*`.
    pub window_align: u32,
}

impl From<BassConfig> for opsel_bass_config {
    fn from(c: BassConfig) -> Self {
        Self {
            spike_up: [c.passes[0].up, c.passes[1].up, c.passes[2].up],
            spike_down: [c.passes[0].down, c.passes[1].down, c.passes[2].down],
            max_repeats: c.max_repeats,
            avg_window: c.avg_window,
            scale: match c.scale {
                ThresholdScale::Ns => OPSEL_BASS_SCALE_NS,
                ThresholdScale::RelativeToMeanSendGap => OPSEL_BASS_SCALE_RELATIVE,
            },
            head: match c.head {
                HeadSegment::Average => OPSEL_BASS_HEAD_AVERAGE,
                HeadSegment::Keep => OPSEL_BASS_HEAD_KEEP,
            },
            tail: match c.tail {
                TailSegment::Average => OPSEL_BASS_TAIL_AVERAGE,
                TailSegment::Keep => OPSEL_BASS_TAIL_KEEP,
            },
            variant: match c.variant {
                BassVariant::Corrected => OPSEL_BASS_VARIANT_CORRECTED,
                BassVariant::Literal => OPSEL_BASS_VARIANT_LITERAL,
            },
            window_align: match c.window_align {
                WindowAlign::Trailing => OPSEL_BASS_WINDOW_TRAILING,
                WindowAlign::Centred => OPSEL_BASS_WINDOW_CENTRED,
            },
        }
    }
}

/// A C enum constant as the core value: the `OPSEL_*` constants are the
/// indices of the core's name tables (`opsel::names::Named::NAMES`).
fn pick<T: Named>(v: u32, what: &str, names: &str) -> Result<T, Fail> {
    T::NAMES
        .get(v as usize)
        .map(|(_, t)| *t)
        .ok_or_else(|| Fail::invalid(format!("{what} {v} is unknown; use {names}")))
}

/// The C constant of a core value (its index in the name table).
fn code<T: Named>(t: T) -> u32 {
    T::NAMES.iter().position(|(_, x)| *x == t).unwrap_or(0) as u32
}

fn bass_from_c(c: &opsel_bass_config) -> Result<BassConfig, Fail> {
    let p = |k: usize| SpikeThresholds {
        up: c.spike_up[k],
        down: c.spike_down[k],
    };
    let cfg = BassConfig {
        passes: [p(0), p(1), p(2)],
        max_repeats: c.max_repeats,
        avg_window: c.avg_window,
        scale: pick(
            c.scale,
            "scale",
            "OPSEL_BASS_SCALE_NS (0) or OPSEL_BASS_SCALE_RELATIVE (1)",
        )?,
        head: pick(
            c.head,
            "head",
            "OPSEL_BASS_HEAD_AVERAGE (0) or OPSEL_BASS_HEAD_KEEP (1)",
        )?,
        tail: pick(
            c.tail,
            "tail",
            "OPSEL_BASS_TAIL_AVERAGE (0) or OPSEL_BASS_TAIL_KEEP (1)",
        )?,
        variant: pick(
            c.variant,
            "variant",
            "OPSEL_BASS_VARIANT_CORRECTED (0) or OPSEL_BASS_VARIANT_LITERAL (1)",
        )?,
        window_align: pick(
            c.window_align,
            "window_align",
            "OPSEL_BASS_WINDOW_TRAILING (0) or OPSEL_BASS_WINDOW_CENTRED (1)",
        )?,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// ABest settings (001 Alg. 1). Start from `opsel_abest_config_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_abest_config {
    /// GAP_NS_EPSILON, ns (thesis: 100).
    pub epsilon_ns: f64,
    /// Minimum excursion length L (thesis: 4).
    pub min_excursion: usize,
    /// `OPSEL_ABEST_*`.
    pub variant: u32,
}

fn abest_from_c(c: &opsel_abest_config) -> Result<AbestConfig, Fail> {
    Ok(AbestConfig {
        epsilon_ns: c.epsilon_ns,
        min_excursion: c.min_excursion,
        variant: pick(
            c.variant,
            "variant",
            "OPSEL_ABEST_CORRECTED (0) or OPSEL_ABEST_LITERAL (1)",
        )?,
    })
}

/// One ABest estimate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_abest {
    /// Estimated available bandwidth, bit/s.
    pub abest_bps: f64,
    /// First packet of the terminal excursion, or -1 when there is none.
    pub excursion_start: i64,
    /// The whole stream was congested: the answer is "below the lowest rate".
    pub below_range: bool,
    /// No excursion: the answer is "at least the highest rate".
    pub above_range: bool,
}

impl From<Abest> for opsel_abest {
    fn from(a: Abest) -> Self {
        Self {
            abest_bps: a.abest_bps,
            excursion_start: a.excursion_start.map(|v| v as i64).unwrap_or(-1),
            below_range: a.below_range,
            above_range: a.above_range,
        }
    }
}

/// The thesis' adopted p-stream at average rate `r_avg_bps`: N_r = 4, N_p = 16,
/// s = 1.15, 9038-byte packets (001 §5.5). Not validated (pass it to a function).
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_pstream_spec_thesis(r_avg_bps: f64) -> opsel_pstream_spec {
    PStreamSpec::thesis_default(r_avg_bps).into()
}

/// A p-stream from a probing range `R_max/R_min − 1` (0.5 = 50 %) instead of a
/// spread, stored in `*out_spec`.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a non-finite or
/// negative range or rate, zero counts, zero packet size. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_pstream_spec_with_range(
    r_avg_bps: f64,
    n_rates: usize,
    packets_per_rate: usize,
    range: f64,
    packet_bytes: u32,
    out_spec: *mut opsel_pstream_spec,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_spec, "out_spec")?;
        *out = PStreamSpec::with_range(r_avg_bps, n_rates, packets_per_rate, range, packet_bytes)?
            .into();
        Ok(())
    })
}

fn out_f64<'a>(ptr: *mut f64, len: usize, what: &str) -> Result<&'a mut [f64], Fail> {
    if ptr.is_null() {
        return Err(Fail::null(what));
    }
    if !ptr.is_aligned() {
        return Err(Fail::invalid(format!("{what} is not aligned for double")));
    }
    // SAFETY: non-null, aligned; the caller promises `len` writable doubles.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// Write the N_r probing rates (bit/s, lowest first) of `spec` to `out_rates`
/// (`rates_len` must equal `spec->n_rates`).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for an invalid spec or a
/// wrong length. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_pstream_rates(
    spec: *const opsel_pstream_spec,
    out_rates: *mut f64,
    rates_len: usize,
) -> opsel_status {
    guard(|| {
        let s = spec_from_c(unsafe { spec.as_ref() }.ok_or_else(|| Fail::null("spec"))?)?;
        s.rates_into(out_f64(out_rates, rates_len, "out_rates")?)?;
        Ok(())
    })
}

/// Write the N intended send gaps (ns, `g_s = P/R`) of `spec` to `out_gaps`
/// (`gaps_len` must equal N_r × N_p).
///
/// Errors: as `opsel_pstream_rates()`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_pstream_send_gaps(
    spec: *const opsel_pstream_spec,
    out_gaps: *mut f64,
    gaps_len: usize,
) -> opsel_status {
    guard(|| {
        let s = spec_from_c(unsafe { spec.as_ref() }.ok_or_else(|| Fail::null("spec"))?)?;
        s.send_gaps_into(out_f64(out_gaps, gaps_len, "out_gaps")?)?;
        Ok(())
    })
}

/// The thesis BASS settings in ns: 20/10, 5/4, 2/1 µs, AVG_WINDOW 16, head
/// averaged, tail averaged, corrected end conditions, trailing window.
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_bass_config_thesis() -> opsel_bass_config {
    BassConfig::thesis().into()
}

/// The thesis thresholds rescaled to multiples of the mean send gap, relative to
/// `reference_gap_ns` (the gap they were tuned at: 10329 ns = 9038 B at 7 Gbps),
/// stored in `*out_config`.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a gap that is not > 0.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_bass_config_relative(
    reference_gap_ns: f64,
    out_config: *mut opsel_bass_config,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_config, "out_config")?;
        *out = BassConfig::thesis_relative(reference_gap_ns)?.into();
        Ok(())
    })
}

/// The thesis ABest settings: ε = 100 ns, L = 4, corrected reading.
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_abest_config_default() -> opsel_abest_config {
    let c = AbestConfig::default();
    opsel_abest_config {
        epsilon_ns: c.epsilon_ns,
        min_excursion: c.min_excursion,
        variant: OPSEL_ABEST_CORRECTED,
    }
}

/// Scratch memory for BASS estimates of p-streams up to a fixed length. Opaque:
/// create with `opsel_bwe_workspace_new()`, free with `opsel_bwe_workspace_free()`.
/// One call at a time.
pub struct opsel_bwe_workspace {
    ws: EstimatorWorkspace,
    imr: ImrWorkspace,
    max_packets: usize,
}

/// Create a workspace for p-streams of up to `max_packets` packets.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for 0 or more than 65536.
/// Ownership: the caller frees `*out_workspace` with `opsel_bwe_workspace_free()`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_workspace_new(
    max_packets: usize,
    out_workspace: *mut *mut opsel_bwe_workspace,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_workspace)?;
        if max_packets == 0 || max_packets > opsel::bwe::pstream::MAX_PACKETS {
            return Err(Fail::invalid(format!(
                "max_packets {max_packets} must be in 1..={}",
                opsel::bwe::pstream::MAX_PACKETS
            )));
        }
        Handle::into_out(
            opsel_bwe_workspace {
                ws: EstimatorWorkspace::new(max_packets),
                imr: ImrWorkspace::new(max_packets),
                max_packets,
            },
            out,
        );
        Ok(())
    })
}

/// Release a workspace. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_workspace_free(workspace: *mut opsel_bwe_workspace) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(workspace) }
}

unsafe fn gaps<'a>(
    gs: *const f64,
    gr: *const f64,
    len: usize,
    ws: &opsel_bwe_workspace,
) -> Result<(&'a [f64], &'a [f64]), Fail> {
    if len > ws.max_packets {
        return Err(Fail::invalid(format!(
            "p-stream of {len} gaps exceeds the workspace's {} packets; create a larger workspace",
            ws.max_packets
        )));
    }
    Ok((unsafe { f64_slice(gs, len, "send_gaps_ns") }?, unsafe {
        f64_slice(gr, len, "recv_gaps_ns")
    }?))
}

/// Rapid's multi-rate estimate of one p-stream (001 Alg. 5): multi-pass BASS,
/// AVG_WINDOW, then ABest. `send_gaps_ns`/`recv_gaps_ns` hold `len` gaps (ns);
/// `len` must equal `spec->n_rates * spec->packets_per_rate`. The caller's arrays
/// are not modified. `bass`/`abest` may be NULL for the thesis defaults.
/// No allocation.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for wrong lengths,
/// NaN/inf gaps (named by index), invalid settings.
/// Thread-safety: `workspace` one call at a time.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_estimate(
    workspace: *mut opsel_bwe_workspace,
    send_gaps_ns: *const f64,
    recv_gaps_ns: *const f64,
    len: usize,
    spec: *const opsel_pstream_spec,
    bass: *const opsel_bass_config,
    abest: *const opsel_abest_config,
    out_abest: *mut opsel_abest,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_abest, "out_abest")?;
        let ws = unsafe { Handle::borrow_mut(workspace) }?;
        let (gs, gr) = unsafe { gaps(send_gaps_ns, recv_gaps_ns, len, ws) }?;
        let s = spec_from_c(unsafe { spec.as_ref() }.ok_or_else(|| Fail::null("spec"))?)?;
        let b = match unsafe { bass.as_ref() } {
            Some(c) => bass_from_c(c)?,
            None => BassConfig::thesis(),
        };
        let a = match unsafe { abest.as_ref() } {
            Some(c) => abest_from_c(c)?,
            None => AbestConfig::default(),
        };
        *out = bwe::estimate_multi_rate(gs, gr, &s, &b, &a, &mut ws.ws)?.into();
        Ok(())
    })
}

/// Single-rate decision (001 §5.3.2) after single-pass BASS: `*out_exceeds` is
/// true when the probing rate exceeds the available bandwidth. `rel_tol` = 0 is
/// the thesis rule (`r_in > r_out`); a positive value requires
/// `r_out < r_in (1 − rel_tol)`. `bass` may be NULL for the thesis settings.
///
/// Errors: as `opsel_bwe_estimate()`, plus `rel_tol` outside [0, 1).
/// Thread-safety: `workspace` one call at a time.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_decide_single_rate(
    workspace: *mut opsel_bwe_workspace,
    send_gaps_ns: *const f64,
    recv_gaps_ns: *const f64,
    len: usize,
    bass: *const opsel_bass_config,
    rel_tol: f64,
    out_exceeds: *mut bool,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_exceeds, "out_exceeds")?;
        let ws = unsafe { Handle::borrow_mut(workspace) }?;
        let (gs, gr) = unsafe { gaps(send_gaps_ns, recv_gaps_ns, len, ws) }?;
        let b = match unsafe { bass.as_ref() } {
            Some(c) => bass_from_c(c)?,
            None => BassConfig::thesis(),
        };
        *out = bwe::decide_single_rate(gs, gr, &b, rel_tol, &mut ws.ws)?;
        Ok(())
    })
}

/// The ML multi-rate estimator (001 Ch 6): a gbt/rf regressor on FFT-magnitude
/// features of (g_s ‖ g_r). Opaque; one call at a time (it owns its buffers).
pub struct opsel_bwe_ml {
    ml: MlEstimator,
}

/// Load a regressor model file for `n_packets`-packet p-streams; its feature kind
/// (FFT magnitude or FFT real/imaginary parts) is read off its feature count.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (path not UTF-8, model is a
/// classifier or its feature count does not fit `n_packets`); `OPSEL_IO`;
/// `OPSEL_INVALID_MODEL`; `OPSEL_UNSUPPORTED_VERSION`. On error `*out_ml` is NULL.
/// Ownership: free `*out_ml` with `opsel_bwe_ml_free()`. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_ml_load(
    path: *const c_char,
    n_packets: usize,
    out_ml: *mut *mut opsel_bwe_ml,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_ml)?;
        let p = unsafe { utf8(path, "path") }?;
        let model = opsel::trees::Ensemble::load(std::path::Path::new(p))?;
        let ml = MlEstimator::for_model(model, n_packets)?;
        Handle::into_out(opsel_bwe_ml { ml }, out);
        Ok(())
    })
}

/// As `opsel_bwe_ml_load()` from `json_len` bytes of model JSON.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_ml_from_json(
    json: *const c_char,
    json_len: usize,
    n_packets: usize,
    out_ml: *mut *mut opsel_bwe_ml,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_ml)?;
        if json.is_null() {
            return Err(Fail::null("json"));
        }
        // SAFETY: non-null; the caller promises json_len readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(json.cast::<u8>(), json_len) };
        let text = std::str::from_utf8(bytes)
            .map_err(|e| Fail::invalid(format!("model JSON is not UTF-8: {e}")))?;
        let ml = MlEstimator::for_json(text, n_packets)?;
        Handle::into_out(opsel_bwe_ml { ml }, out);
        Ok(())
    })
}

/// Release an ML estimator. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_ml_free(ml: *mut opsel_bwe_ml) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(ml) }
}

/// ML estimate (bit/s) of one p-stream sent at average rate `r_avg_bps`; `len`
/// must equal the model's p-stream length. No allocation.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for wrong lengths,
/// NaN/inf gaps, a rate that is not > 0. Thread-safety: one call at a time per handle.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_ml_estimate(
    ml: *mut opsel_bwe_ml,
    send_gaps_ns: *const f64,
    recv_gaps_ns: *const f64,
    len: usize,
    r_avg_bps: f64,
    out_bps: *mut f64,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_bps, "out_bps")?;
        let m = unsafe { Handle::borrow_mut(ml) }?;
        let gs = unsafe { f64_slice(send_gaps_ns, len, "send_gaps_ns") }?;
        let gr = unsafe { f64_slice(recv_gaps_ns, len, "recv_gaps_ns") }?;
        *out = m.ml.estimate(gs, gr, r_avg_bps)?;
        Ok(())
    })
}

/// Rate-adapter settings (001 §2.3, §8.1). Start from `opsel_rate_adapter_config_default()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_rate_adapter_config {
    /// Initial R_avg, bit/s (thesis: 100 kbit/s).
    pub init_bps: f64,
    /// Lower bound, bit/s.
    pub min_bps: f64,
    /// Upper bound, bit/s (INFINITY for none).
    pub max_bps: f64,
    /// τ, ns.
    pub tau_ns: f64,
    /// η (a count for `OPSEL_ETA_FORMULA`, a fraction for `OPSEL_ETA_TABULATED`).
    pub eta: f64,
    /// `OPSEL_ETA_*`.
    pub eta_param: u32,
    /// Estimates averaged per update (γ = 3).
    pub gamma: usize,
    /// Multiplicative cut after a loss (0.25 = −25 %).
    pub loss_cut: f64,
}

/// The thesis evaluation setting: τ = 50 ms, η = 1/4 (tabulated), γ = 3, from 100 kbit/s.
#[no_mangle]
pub extern "C" fn opsel_rate_adapter_config_default() -> opsel_rate_adapter_config {
    let c = RateAdapterConfig::default();
    opsel_rate_adapter_config {
        init_bps: c.init_bps,
        min_bps: c.min_bps,
        max_bps: c.max_bps,
        tau_ns: c.tau_ns,
        eta: c.eta,
        eta_param: OPSEL_ETA_TABULATED,
        gamma: c.gamma,
        loss_cut: c.loss_cut,
    }
}

/// Rapid's rate adapter. Opaque; one call at a time.
pub struct opsel_rate_adapter {
    a: RateAdapter,
}

/// Create a rate adapter (`config` NULL = defaults).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for invalid settings.
/// Ownership: free with `opsel_rate_adapter_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_rate_adapter_new(
    config: *const opsel_rate_adapter_config,
    out_adapter: *mut *mut opsel_rate_adapter,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_adapter)?;
        let c = match unsafe { config.as_ref() } {
            Some(c) => RateAdapterConfig {
                init_bps: c.init_bps,
                min_bps: c.min_bps,
                max_bps: c.max_bps,
                tau_ns: c.tau_ns,
                eta: c.eta,
                param: pick(
                    c.eta_param,
                    "eta_param",
                    "OPSEL_ETA_FORMULA (0) or OPSEL_ETA_TABULATED (1)",
                )?,
                gamma: c.gamma,
                loss_cut: c.loss_cut,
            },
            None => RateAdapterConfig::default(),
        };
        Handle::into_out(
            opsel_rate_adapter {
                a: RateAdapter::new(c)?,
            },
            out,
        );
        Ok(())
    })
}

/// Release a rate adapter. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_rate_adapter_free(adapter: *mut opsel_rate_adapter) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(adapter) }
}

/// Current R_avg (bit/s); NaN for a NULL handle.
#[no_mangle]
pub unsafe extern "C" fn opsel_rate_adapter_r_avg(adapter: *const opsel_rate_adapter) -> f64 {
    unsafe { Handle::borrow(adapter) }.map_or(f64::NAN, |a| a.a.r_avg_bps())
}

/// Feed one loss-free p-stream's estimate (`abest_bps`) and its duration (ns).
/// `*out_updated` (may be NULL) tells whether this completed a γ-group; `*out_r_avg`
/// (may be NULL) receives R_avg afterwards.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for negative or non-finite values.
#[no_mangle]
pub unsafe extern "C" fn opsel_rate_adapter_on_estimate(
    adapter: *mut opsel_rate_adapter,
    abest_bps: f64,
    duration_ns: f64,
    out_updated: *mut bool,
    out_r_avg: *mut f64,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(adapter) }?;
        let up = a.a.on_estimate(abest_bps, duration_ns)?;
        if let Some(o) = unsafe { out_updated.as_mut() } {
            *o = up.is_some();
        }
        if let Some(o) = unsafe { out_r_avg.as_mut() } {
            *o = a.a.r_avg_bps();
        }
        Ok(())
    })
}

/// A loss was recovered: R_avg is cut by `loss_cut` and the partial γ-group
/// dropped. `*out_r_avg` (may be NULL) receives the new R_avg.
///
/// Errors: `OPSEL_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn opsel_rate_adapter_on_loss(
    adapter: *mut opsel_rate_adapter,
    out_r_avg: *mut f64,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(adapter) }?;
        let r = a.a.on_loss_recovery();
        if let Some(o) = unsafe { out_r_avg.as_mut() } {
            *o = r;
        }
        Ok(())
    })
}

/// Pathload's trend tests (001 §2.2.1.2) on `len` one-way delays (any unit, any
/// offset): `*out_pct` = PCT, `*out_pdt` = PDT, `*out_trend` = `OPSEL_TREND_*`
/// (increasing if PCT > 0.66 and PDT > 0.55, no trend if PCT < 0.54 and PDT < 0.45,
/// else ambiguous). Any out pointer may be NULL when not wanted. No allocation.
///
/// Errors: `OPSEL_NULL_POINTER` (`owd`); `OPSEL_INVALID_INPUT` for fewer than 2
/// delays or NaN/inf. Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_trend(
    owd: *const f64,
    len: usize,
    out_pct: *mut f64,
    out_pdt: *mut f64,
    out_trend: *mut u32,
) -> opsel_status {
    guard(|| {
        let d = unsafe { f64_slice(owd, len, "owd") }?;
        let (c, p, t) = (pathload::pct(d)?, pathload::pdt(d)?, pathload::trend(d)?);
        // SAFETY: each pointer is either NULL (skipped) or valid per the contract.
        unsafe {
            if let Some(o) = out_pct.as_mut() {
                *o = c;
            }
            if let Some(o) = out_pdt.as_mut() {
                *o = p;
            }
            if let Some(o) = out_trend.as_mut() {
                *o = code(t);
            }
        }
        Ok(())
    })
}

/// Which IMR-Pathload baseline `opsel_bwe_baseline()` runs.
/// Raw Pathload on the one-way delays rebuilt from the gaps.
pub const OPSEL_BASELINE_PATHLOAD: u32 = 0;
/// IMR-avg: 10 averaged points (001 §5.1).
pub const OPSEL_BASELINE_IMR_AVG: u32 = 1;
/// IMR-wavelet: `levels`-stage Daubechies D4 approximation (001 §5.1: 3 stages).
pub const OPSEL_BASELINE_IMR_WAVELET: u32 = 2;

/// A single-rate baseline of 001 Ch 5 on one p-stream: relative one-way delays
/// `d_i = d_{i-1} + g_r^i - g_s^i` from `len` gaps (ns), denoised per `baseline`
/// (`OPSEL_BASELINE_*`), then Pathload's PCT/PDT; `*out_trend` = `OPSEL_TREND_*`.
/// `levels` is used by IMR-wavelet only (the thesis: 3). No allocation.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for an unknown baseline,
/// NaN/inf gaps, `len` above the workspace size, IMR-avg with fewer than 10 packets,
/// IMR-wavelet leaving fewer than 8 points. Thread-safety: `workspace` one call at
/// a time.
#[no_mangle]
pub unsafe extern "C" fn opsel_bwe_baseline(
    workspace: *mut opsel_bwe_workspace,
    send_gaps_ns: *const f64,
    recv_gaps_ns: *const f64,
    len: usize,
    baseline: u32,
    levels: usize,
    out_trend: *mut u32,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_trend, "out_trend")?;
        let ws = unsafe { Handle::borrow_mut(workspace) }?;
        let (gs, gr) = unsafe { gaps(send_gaps_ns, recv_gaps_ns, len, ws) }?;
        let m = pick(
            baseline,
            "baseline",
            "OPSEL_BASELINE_PATHLOAD (0), _IMR_AVG (1) or _IMR_WAVELET (2)",
        )?;
        let t = pathload::baseline(m, gs, gr, levels, &mut ws.imr)?;
        *out = code(t);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsel::bwe::abest::AbestVariant;
    use opsel::bwe::adapter::EtaParam;
    use opsel::bwe::bass::ThresholdScale;
    use opsel::bwe::pathload::{Baseline, Trend};

    /// The `OPSEL_*` constants are part of the C ABI: they must stay the
    /// indices of the core's name tables that `pick` and `code` use.
    #[test]
    fn c_constants_follow_the_name_tables() {
        assert_eq!(
            code(ThresholdScale::RelativeToMeanSendGap),
            OPSEL_BASS_SCALE_RELATIVE
        );
        assert_eq!(code(HeadSegment::Keep), OPSEL_BASS_HEAD_KEEP);
        assert_eq!(code(TailSegment::Keep), OPSEL_BASS_TAIL_KEEP);
        assert_eq!(code(BassVariant::Literal), OPSEL_BASS_VARIANT_LITERAL);
        assert_eq!(code(WindowAlign::Centred), OPSEL_BASS_WINDOW_CENTRED);
        assert_eq!(code(AbestVariant::Literal), OPSEL_ABEST_LITERAL);
        assert_eq!(code(EtaParam::Tabulated), OPSEL_ETA_TABULATED);
        assert_eq!(code(EtaParam::Formula), OPSEL_ETA_FORMULA);
        assert_eq!(code(Trend::NoTrend), OPSEL_TREND_NO_TREND);
        assert_eq!(code(Trend::Ambiguous), OPSEL_TREND_AMBIGUOUS);
        assert_eq!(code(Baseline::ImrWavelet), OPSEL_BASELINE_IMR_WAVELET);
        assert_eq!(code(Baseline::Pathload), OPSEL_BASELINE_PATHLOAD);
        assert!(pick::<Trend>(3, "trend", "").is_err());
    }
}
