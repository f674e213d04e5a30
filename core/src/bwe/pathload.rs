//! Baselines: Pathload PCT/PDT trend tests (001 §2.2.1.2, notes §1.2) and IMR-Pathload
//! denoising — IMR-avg and IMR-wavelet (001 §5.1, notes §3.2) — so the comparisons of
//! 001 Ch 5 and §9.1 can be rerun. All on relative one-way delays rebuilt from gaps:
//! `d_i = d_{i−1} + g_r^i − g_s^i` (the clock offset cancels in every test).

use crate::error::{Error, Result};

/// PCT threshold for "increasing" (Pathload).
pub const PCT_INCREASING: f64 = 0.66;
/// PDT threshold for "increasing".
pub const PDT_INCREASING: f64 = 0.55;
/// PCT threshold for "no trend".
pub const PCT_NO_TREND: f64 = 0.54;
/// PDT threshold for "no trend".
pub const PDT_NO_TREND: f64 = 0.45;

/// Outcome of the trend test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    /// Increasing OWDs: the probing rate exceeds the available bandwidth.
    Increasing,
    /// No trend: the probing rate is below the available bandwidth.
    NoTrend,
    /// PCT and PDT disagree or fall between the thresholds (001 §9.1 footnote).
    Ambiguous,
}

crate::names::named!(Trend {
    "increasing" => Trend::Increasing,
    "no_trend" => Trend::NoTrend,
    "ambiguous" => Trend::Ambiguous,
});

/// The single-rate baselines of 001 Ch 5 by name, for the bindings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// Pathload's trend test on the raw one-way delays.
    Pathload,
    /// IMR-avg: 10 averaged points.
    ImrAvg,
    /// IMR-wavelet: a Daubechies D4 approximation.
    ImrWavelet,
}

crate::names::named!(Baseline {
    "pathload" => Baseline::Pathload,
    "imr-avg" => Baseline::ImrAvg,
    "imr-wavelet" => Baseline::ImrWavelet,
});

/// Run `method` on one p-stream (`levels` is used by IMR-wavelet only).
pub fn baseline(
    method: Baseline,
    gs: &[f64],
    gr: &[f64],
    levels: usize,
    ws: &mut ImrWorkspace,
) -> Result<Trend> {
    match method {
        Baseline::Pathload => pathload(gs, gr, ws),
        Baseline::ImrAvg => imr_avg(gs, gr, ws),
        Baseline::ImrWavelet => imr_wavelet(gs, gr, levels, ws),
    }
}

/// Pairwise comparison test `S_PCT = Σ_{k≥2} I(d_k > d_{k−1}) / (N−1)`.
pub fn pct(owd: &[f64]) -> Result<f64> {
    check(owd, 2)?;
    let up = owd.windows(2).filter(|w| w[1] > w[0]).count();
    Ok(up as f64 / (owd.len() - 1) as f64)
}

/// Pairwise difference test `S_PDT = (d_N − d_1) / Σ |d_k − d_{k−1}|` (0 for a flat series).
pub fn pdt(owd: &[f64]) -> Result<f64> {
    check(owd, 2)?;
    let den: f64 = owd.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    if den == 0.0 {
        return Ok(0.0);
    }
    Ok((owd[owd.len() - 1] - owd[0]) / den)
}

/// Pathload's decision from PCT and PDT (both must agree).
pub fn trend(owd: &[f64]) -> Result<Trend> {
    let (c, d) = (pct(owd)?, pdt(owd)?);
    Ok(if c > PCT_INCREASING && d > PDT_INCREASING {
        Trend::Increasing
    } else if c < PCT_NO_TREND && d < PDT_NO_TREND {
        Trend::NoTrend
    } else {
        Trend::Ambiguous
    })
}

fn check(x: &[f64], min: usize) -> Result<()> {
    if x.len() < min {
        return Err(Error::invalid(format!(
            "trend test needs at least {min} delay samples, got {}",
            x.len()
        )));
    }
    crate::error::check_finite("one-way delays", x)
}

/// Buffers for the IMR baselines (zero allocation per call).
#[derive(Debug, Clone)]
pub struct ImrWorkspace {
    owd: Vec<f64>,
    tmp: Vec<f64>,
}

impl ImrWorkspace {
    /// Workspace for p-streams of up to `max_packets` packets.
    pub fn new(max_packets: usize) -> Self {
        ImrWorkspace {
            owd: vec![0.0; max_packets],
            tmp: vec![0.0; max_packets],
        }
    }
}

/// Relative OWDs from gaps into `out` (same length).
pub fn relative_owd(gs: &[f64], gr: &[f64], out: &mut [f64]) -> Result<()> {
    if gs.len() != gr.len() || out.len() != gs.len() {
        return Err(Error::invalid(format!(
            "send ({}), receive ({}) and output ({}) lengths must be equal",
            gs.len(),
            gr.len(),
            out.len()
        )));
    }
    crate::error::check_finite("send gaps (ns)", gs)?;
    crate::error::check_finite("receive gaps (ns)", gr)?;
    let mut d = 0.0;
    for i in 0..gs.len() {
        d += gr[i] - gs[i];
        out[i] = d;
    }
    Ok(())
}

fn load<'a>(gs: &[f64], gr: &[f64], ws: &'a mut ImrWorkspace) -> Result<&'a mut [f64]> {
    let n = gs.len();
    if n > ws.owd.len() {
        return Err(Error::invalid(format!(
            "p-stream of {n} packets exceeds the IMR workspace capacity {}; create ImrWorkspace::new({n})",
            ws.owd.len()
        )));
    }
    relative_owd(gs, gr, &mut ws.owd[..n])?;
    Ok(&mut ws.owd[..n])
}

/// Pathload on raw OWDs of a single-rate p-stream.
pub fn pathload(gs: &[f64], gr: &[f64], ws: &mut ImrWorkspace) -> Result<Trend> {
    let d = load(gs, gr, ws)?;
    trend(d)
}

/// IMR-avg: average every `N/10` adjacent OWDs into 10 points, then PCT/PDT
/// (notes §3.2). Needs N ≥ 10; trailing `N mod 10` samples are not used.
pub fn imr_avg(gs: &[f64], gr: &[f64], ws: &mut ImrWorkspace) -> Result<Trend> {
    if gs.len() < 10 {
        return Err(Error::invalid(format!(
            "IMR-avg needs at least 10 packets to form 10 averaged points, got {}",
            gs.len()
        )));
    }
    let d = load(gs, gr, ws)?;
    let k = d.len() / 10;
    for j in 0..10 {
        let s: f64 = d[j * k..(j + 1) * k].iter().sum();
        d[j] = s / k as f64;
    }
    trend(&d[..10])
}

/// Daubechies D4 (db2) low-pass filter: the "standard Daubechies" wavelet [Interp.:
/// the thesis names no order; D4 is the classic one].
const SQ3: f64 = 1.732_050_807_568_877_2;
const D4: [f64; 4] = [
    (1.0 + SQ3) / (4.0 * std::f64::consts::SQRT_2),
    (3.0 + SQ3) / (4.0 * std::f64::consts::SQRT_2),
    (3.0 - SQ3) / (4.0 * std::f64::consts::SQRT_2),
    (1.0 - SQ3) / (4.0 * std::f64::consts::SQRT_2),
];

/// One DWT stage: approximation coefficients of `x` into `out` (length ⌈n/2⌉), with
/// half-point symmetric extension at the end (a periodic wrap would glue the end of a
/// rising delay series to its start and fake a drop).
fn dwt_approx(x: &[f64], out: &mut [f64]) -> usize {
    let n = x.len();
    let m = n.div_ceil(2);
    for (k, o) in out[..m].iter_mut().enumerate() {
        let mut acc = 0.0;
        for (j, h) in D4.iter().enumerate() {
            let mut idx = 2 * k + j;
            if idx >= n {
                idx = (2 * n - 1 - idx).min(n - 1);
            }
            acc += h * x[idx];
        }
        *o = acc;
    }
    m
}

/// IMR-wavelet: `levels`-stage DWT keeping only the approximation (scale) coefficients
/// of each stage, then PCT/PDT on the last stage (notes §3.2; 3 stages in the thesis).
/// Refuses inputs leaving fewer than 8 points (001 §9.1 keeps ≥ 8).
pub fn imr_wavelet(gs: &[f64], gr: &[f64], levels: usize, ws: &mut ImrWorkspace) -> Result<Trend> {
    let n = gs.len();
    let mut m = n;
    for _ in 0..levels {
        m = m.div_ceil(2);
    }
    if n == 0 || m < 8 {
        return Err(Error::invalid(format!(
            "IMR-wavelet with {levels} levels on {n} packets leaves {m} points; need >= 8 (use N >= {} or fewer levels)",
            8usize << levels
        )));
    }
    load(gs, gr, ws)?;
    let mut len = n;
    for _ in 0..levels {
        let (src, dst) = (&ws.owd[..len], &mut ws.tmp[..]);
        len = dwt_approx(src, dst);
        ws.owd[..len].copy_from_slice(&ws.tmp[..len]);
    }
    trend(&ws.owd[..len])
}
