//! Rapid's rate adapter (001 §2.3, §8.1–8.4, notes §1.5, §6).
//!
//! `R_avg` starts at 100 kbit/s. Every γ p-streams (γ = 3: probing and adapting
//! timescales decoupled, 001 §8.1) the mean of the γ ABest values drives a conditional
//! low-pass filter:
//! `R_avg += g_up · (ABest − R_avg)` if ABest ≥ R_avg, else `R_avg −= g_down · (R_avg − ABest)`.
//! After each loss recovery `R_avg ← 0.75 · R_avg` (001 §8.2.1).
//!
//! The thesis writes (τ, η) two ways (notes §1.5 Interp.), so both are offered:
//! - [`EtaParam::Formula`] (Ch 2 formula): `g_up = l/τ`, `g_down = 1/η`, η a number of
//!   p-streams (the text's "(τ, η) = (50, 4)").
//!
//! - [`EtaParam::Tabulated`] (Tables 8.1–8.6): η is the per-update decrease *fraction*
//!   (`g_down = η`, e.g. 1/4) and, since throughput there depends only on τ×η, the
//!   effective increase time constant is τ·η: `g_up = l/(τ·η)`.
//!
//! `l` is the duration of the γ p-streams of the update. Gains are clamped to [0, 1].

use crate::error::{Error, Result};

/// Which reading of (τ, η).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtaParam {
    /// Ch 2 formula: increase `l/τ`, decrease `1/η`.
    Formula,
    /// Ch 8 tables: increase `l/(τ·η)`, decrease `η`.
    Tabulated,
}

/// Rate-adapter parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateAdapterConfig {
    /// Initial R_avg, bit/s (thesis: 100 kbit/s).
    pub init_bps: f64,
    /// Lower bound of R_avg, bit/s.
    pub min_bps: f64,
    /// Upper bound of R_avg (e.g. the NIC rate), bit/s.
    pub max_bps: f64,
    /// τ in ns.
    pub tau_ns: f64,
    /// η (a count for `Formula`, a fraction for `Tabulated`).
    pub eta: f64,
    /// Reading of η.
    pub param: EtaParam,
    /// Estimates averaged per update (γ = 3).
    pub gamma: usize,
    /// Multiplicative cut after a loss recovery (0.25 = −25 %).
    pub loss_cut: f64,
}

impl Default for RateAdapterConfig {
    /// The evaluation setting of 001 §8: τ = 50 ms, η = 1/4 (tabulated), γ = 3.
    fn default() -> Self {
        RateAdapterConfig {
            init_bps: 100e3,
            min_bps: 100e3,
            max_bps: f64::INFINITY,
            tau_ns: 50e6,
            eta: 0.25,
            param: EtaParam::Tabulated,
            gamma: 3,
            loss_cut: 0.25,
        }
    }
}

/// The adapter state.
#[derive(Debug, Clone, PartialEq)]
pub struct RateAdapter {
    cfg: RateAdapterConfig,
    r_avg_bps: f64,
    sum_est: f64,
    sum_dur_ns: f64,
    count: usize,
}

impl RateAdapter {
    /// Validate `cfg` and start at `init_bps`.
    pub fn new(cfg: RateAdapterConfig) -> Result<Self> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !ok(cfg.init_bps)
            || !ok(cfg.min_bps)
            || cfg.max_bps.is_nan()
            || cfg.max_bps <= 0.0
            || cfg.min_bps > cfg.max_bps
        {
            return Err(Error::invalid(format!(
                "rate bounds init {} / min {} / max {} bit/s must be > 0 with min <= max",
                cfg.init_bps, cfg.min_bps, cfg.max_bps
            )));
        }
        if !ok(cfg.tau_ns) || !ok(cfg.eta) {
            return Err(Error::invalid(format!(
                "tau_ns {} and eta {} must be finite and > 0 (thesis: 50 ms, 1/4)",
                cfg.tau_ns, cfg.eta
            )));
        }
        if cfg.param == EtaParam::Tabulated && cfg.eta > 1.0 {
            return Err(Error::invalid(format!(
                "tabulated eta {} is a decrease fraction and must be <= 1; for eta as a count use EtaParam::Formula",
                cfg.eta
            )));
        }
        if cfg.gamma == 0 {
            return Err(Error::invalid(
                "gamma 0: average at least one estimate per update (thesis: 3)",
            ));
        }
        if !(cfg.loss_cut.is_finite() && (0.0..1.0).contains(&cfg.loss_cut)) {
            return Err(Error::invalid(format!(
                "loss_cut {} must be in [0, 1)",
                cfg.loss_cut
            )));
        }
        let r = cfg.init_bps.clamp(cfg.min_bps, cfg.max_bps);
        Ok(RateAdapter {
            cfg,
            r_avg_bps: r,
            sum_est: 0.0,
            sum_dur_ns: 0.0,
            count: 0,
        })
    }

    /// Current average send rate for the next p-stream, bit/s.
    pub fn r_avg_bps(&self) -> f64 {
        self.r_avg_bps
    }

    /// Feed the ABest of one loss-free p-stream lasting `duration_ns`. Returns the new
    /// R_avg when this completed a γ-group.
    pub fn on_estimate(&mut self, abest_bps: f64, duration_ns: f64) -> Result<Option<f64>> {
        if !(abest_bps.is_finite()
            && abest_bps >= 0.0
            && duration_ns.is_finite()
            && duration_ns >= 0.0)
        {
            return Err(Error::invalid(format!(
                "estimate {abest_bps} bit/s over {duration_ns} ns must be finite and >= 0"
            )));
        }
        self.sum_est += abest_bps;
        self.sum_dur_ns += duration_ns;
        self.count += 1;
        if self.count < self.cfg.gamma {
            return Ok(None);
        }
        let est = self.sum_est / self.count as f64;
        let l = self.sum_dur_ns;
        let (up, down) = match self.cfg.param {
            EtaParam::Formula => (l / self.cfg.tau_ns, 1.0 / self.cfg.eta),
            EtaParam::Tabulated => (l / (self.cfg.tau_ns * self.cfg.eta), self.cfg.eta),
        };
        let r = self.r_avg_bps;
        let next = if est >= r {
            r + up.min(1.0) * (est - r)
        } else {
            r - down.min(1.0) * (r - est)
        };
        self.r_avg_bps = next.clamp(self.cfg.min_bps, self.cfg.max_bps);
        self.sum_est = 0.0;
        self.sum_dur_ns = 0.0;
        self.count = 0;
        Ok(Some(self.r_avg_bps))
    }

    /// A loss was recovered: cut R_avg by `loss_cut` and drop the partial γ-group
    /// (p-streams with losses give no estimate, 001 §8.2.1).
    pub fn on_loss_recovery(&mut self) -> f64 {
        self.r_avg_bps =
            (self.r_avg_bps * (1.0 - self.cfg.loss_cut)).clamp(self.cfg.min_bps, self.cfg.max_bps);
        self.sum_est = 0.0;
        self.sum_dur_ns = 0.0;
        self.count = 0;
        self.r_avg_bps
    }
}

crate::names::named!(EtaParam { "formula" => EtaParam::Formula, "tabulated" => EtaParam::Tabulated });
