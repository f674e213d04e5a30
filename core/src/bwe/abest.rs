//! Excursion estimator ABest (001 Alg. 1, notes §1.4) and the single-rate decision
//! (001 §5.3.2).
//!
//! Alg. 1 as printed extends an excursion `while g_r^j < g_r^i + ε` and returns
//! `avg(AB)` over entries that may stay 0 — both garbled (notes §1.4 Interp.). The
//! corrected estimator implements the stated semantics: "the probing rate after which
//! g_r becomes consistently larger than g_s" (001 §4.6.2). The literal transcription is
//! kept as [`AbestVariant::Literal`] for comparison.

use super::pstream::PStreamSpec;
use crate::error::{Error, Result};

/// Noise margin for declaring self-induced congestion, ns (001 §5.4: 100 ns adopted).
pub const GAP_NS_EPSILON: f64 = 100.0;
/// Minimum excursion length (pathChirp busy-period threshold, 001 Alg. 1 line 1).
pub const MIN_EXCURSION: usize = 4;

/// Which reading of Alg. 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbestVariant {
    /// Last run of ≥ L packets with `g_r > g_s + ε` reaching the end of the p-stream;
    /// ABest = rate of the packet before it; none → highest probing rate.
    Corrected,
    /// Alg. 1 verbatim (0-based, bounds-guarded): inner loop `while g_r[j] < g_r[i] + ε`,
    /// `AB[m..=j] = R[i−1]`, result = mean of all `AB` entries including zeros.
    Literal,
}

/// Estimator parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AbestConfig {
    /// GAP_NS_EPSILON in ns.
    pub epsilon_ns: f64,
    /// L, minimum excursion length in packets.
    pub min_excursion: usize,
    /// Reading of Alg. 1.
    pub variant: AbestVariant,
}

impl Default for AbestConfig {
    fn default() -> Self {
        AbestConfig {
            epsilon_ns: GAP_NS_EPSILON,
            min_excursion: MIN_EXCURSION,
            variant: AbestVariant::Corrected,
        }
    }
}

/// One ABest estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Abest {
    /// Estimated available bandwidth, bit/s.
    pub abest_bps: f64,
    /// Index of the first packet of the terminal excursion (Corrected only).
    pub excursion_start: Option<usize>,
    /// The whole stream was congested: the answer is "below the lowest rate" and the
    /// lowest rate is reported.
    pub below_range: bool,
    /// No excursion: the answer is "at least the highest rate" (over-estimation risk).
    pub above_range: bool,
}

fn check(gs: &[f64], gr: &[f64], spec: &PStreamSpec, cfg: &AbestConfig) -> Result<()> {
    spec.validate()?;
    if gs.len() != spec.len() || gr.len() != spec.len() {
        return Err(Error::invalid(format!(
            "gap arrays have lengths {} (send) and {} (receive) but the p-stream has {} packets",
            gs.len(),
            gr.len(),
            spec.len()
        )));
    }
    if !(cfg.epsilon_ns.is_finite() && cfg.epsilon_ns >= 0.0) {
        return Err(Error::invalid(format!(
            "epsilon_ns {} must be finite and >= 0 (thesis: 100 ns)",
            cfg.epsilon_ns
        )));
    }
    if cfg.min_excursion == 0 {
        return Err(Error::invalid("min_excursion 0: the thesis uses L = 4"));
    }
    crate::error::check_finite("send gaps (ns)", gs)?;
    crate::error::check_finite("receive gaps (ns)", gr)?;
    Ok(())
}

/// ABest of one (denoised) p-stream. Allocation-free.
pub fn abest(gs: &[f64], gr: &[f64], spec: &PStreamSpec, cfg: &AbestConfig) -> Result<Abest> {
    check(gs, gr, spec, cfg)?;
    let n = gs.len();
    let top = spec.packet_rate_bps(n - 1);
    match cfg.variant {
        AbestVariant::Corrected => {
            let mut start = n;
            while start > 0 && gr[start - 1] > gs[start - 1] + cfg.epsilon_ns {
                start -= 1;
            }
            if n - start >= cfg.min_excursion {
                if start == 0 {
                    return Ok(Abest {
                        abest_bps: spec.packet_rate_bps(0),
                        excursion_start: Some(0),
                        below_range: true,
                        above_range: false,
                    });
                }
                return Ok(Abest {
                    abest_bps: spec.packet_rate_bps(start - 1),
                    excursion_start: Some(start),
                    below_range: false,
                    above_range: false,
                });
            }
            Ok(Abest {
                abest_bps: top,
                excursion_start: None,
                below_range: false,
                above_range: true,
            })
        }
        AbestVariant::Literal => {
            // Alg. 1 lines 1–11 with running sum instead of the AB array (same mean).
            let l = cfg.min_excursion;
            let (mut i, mut m) = (0usize, 0usize);
            let mut sum = 0.0;
            while i + 1 < n {
                let mut j = i + 1;
                while j < n && gr[j] < gr[i] + cfg.epsilon_ns {
                    j += 1;
                }
                if j - i + 1 >= l {
                    let r = spec.packet_rate_bps(i.saturating_sub(1));
                    let hi = j.min(n - 1);
                    if hi >= m {
                        sum += r * (hi - m + 1) as f64;
                    }
                    i = j + 1;
                    m = j + 1;
                } else {
                    i += 1;
                }
            }
            Ok(Abest {
                abest_bps: sum / n as f64,
                excursion_start: None,
                below_range: false,
                above_range: false,
            })
        }
    }
}

/// Single-rate decision after BASS (001 §5.3.2): the probing rate exceeds the
/// available bandwidth iff `r_in > r_out`, i.e. `Σ g_s < Σ g_r` over `span`
/// (inclusive; pass [`super::bass::BassReport::complete_span`] to count only complete
/// buffering events, or `None` for the whole stream). `rel_tol` = 0 is the thesis rule;
/// a positive value requires `r_out < r_in · (1 − rel_tol)` [Ours: below the available
/// bandwidth `r_out ≈ r_in`, so the strict comparison is a coin toss on noise].
pub fn rate_exceeds_avail_bw(
    gs: &[f64],
    gr: &[f64],
    span: Option<(usize, usize)>,
    rel_tol: f64,
) -> Result<bool> {
    if !(rel_tol.is_finite() && (0.0..1.0).contains(&rel_tol)) {
        return Err(Error::invalid(format!(
            "rel_tol {rel_tol} must be in [0, 1)"
        )));
    }
    if gs.len() != gr.len() || gs.is_empty() {
        return Err(Error::invalid(format!(
            "send ({}) and receive ({}) gap arrays must be non-empty and of equal length",
            gs.len(),
            gr.len()
        )));
    }
    let (b, e) = span.unwrap_or((0, gs.len() - 1));
    if b > e || e >= gs.len() {
        return Err(Error::invalid(format!(
            "span ({b}, {e}) is outside the p-stream of {} gaps",
            gs.len()
        )));
    }
    crate::error::check_finite("send gaps (ns)", gs)?;
    crate::error::check_finite("receive gaps (ns)", gr)?;
    let ss: f64 = gs[b..=e].iter().sum();
    let sr: f64 = gr[b..=e].iter().sum();
    // r_out < r_in (1 − tol)  ⇔  Σg_s < Σg_r (1 − tol)
    Ok(ss < sr * (1.0 - rel_tol))
}

crate::names::named!(AbestVariant { "corrected" => AbestVariant::Corrected, "literal" => AbestVariant::Literal });
