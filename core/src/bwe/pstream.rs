//! P-stream generator and send schedule (001 §1.3, notes §9.2 item 1).
//!
//! A p-stream of `N = N_r × N_p` packets probes `N_r` exponentially spaced rates
//! `R_k = R_1 · s^{k−1}`; its *average* send rate (total bytes / total duration,
//! i.e. the harmonic mean of the rates) equals `R_avg` from the rate adapter:
//! `R_1 = R_avg · (Σ_{j=0}^{N_r−1} s^{−j}) / N_r` [notes §1.3, Derived; golden
//! check: R_avg = 7 Gbps, s = 1.15, N_r = 4 → 5.746/6.608/7.599/8.738 Gbps].

use crate::error::{Error, Result};

/// Jumbo-frame wire size of the thesis testbed (MTU 9000), bytes (001 notes conventions).
pub const THESIS_PACKET_BYTES: u32 = 9038;
/// Spread factor constant of the kernel implementation (001 §7.3: 1000/1.15 ≈ 871).
pub const THESIS_SPREAD: f64 = 1.15;
/// Largest p-stream the library accepts; far above any thesis setting (N ≤ 3000 for PRC-MT).
pub const MAX_PACKETS: usize = 1 << 16;

/// Shape of one p-stream: rates, packets per rate, packet size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PStreamSpec {
    /// Average send rate of the whole p-stream (harmonic mean of the rates), bit/s.
    pub r_avg_bps: f64,
    /// Number of distinct probing rates `N_r` (≥ 1).
    pub n_rates: usize,
    /// Packets per rate `N_p` (≥ 1).
    pub packets_per_rate: usize,
    /// Spread factor `s` (> 1 for multi-rate, any value ≥ 1 accepted; 1 = single-rate).
    pub spread: f64,
    /// Packet size on the wire, bytes.
    pub packet_bytes: u32,
}

impl PStreamSpec {
    /// The thesis' adopted stream (001 §5.5): N_r = 4, N_p = 16, s = 1.15, 9038 B packets.
    pub fn thesis_default(r_avg_bps: f64) -> Self {
        PStreamSpec {
            r_avg_bps,
            n_rates: 4,
            packets_per_rate: 16,
            spread: THESIS_SPREAD,
            packet_bytes: THESIS_PACKET_BYTES,
        }
    }

    /// Build a spec from a probing *range* instead of a spread: the thesis never defines
    /// "range"; we read it as `R_{N_r}/R_1 − 1 = s^{N_r−1} − 1` [notes §1.3 Interp.], so
    /// range 50 % with N_r = 4 gives s = 1.5^{1/3} ≈ 1.1447.
    pub fn with_range(
        r_avg_bps: f64,
        n_rates: usize,
        packets_per_rate: usize,
        range: f64,
        packet_bytes: u32,
    ) -> Result<Self> {
        if !(range.is_finite() && range >= 0.0) {
            return Err(Error::invalid(format!(
                "probing range {range} must be a finite fraction >= 0 (0.5 means 50 %)"
            )));
        }
        if n_rates == 0 {
            return Err(Error::invalid(
                "n_rates 0: a p-stream needs at least one rate",
            ));
        }
        let spread = if n_rates == 1 {
            1.0
        } else {
            (1.0 + range).powf(1.0 / (n_rates - 1) as f64)
        };
        let s = PStreamSpec {
            r_avg_bps,
            n_rates,
            packets_per_rate,
            spread,
            packet_bytes,
        };
        s.validate()?;
        Ok(s)
    }

    /// Single-rate p-stream of `n` packets at `rate_bps` (Pathload / PRC-MT / BASS single-rate).
    pub fn single_rate(rate_bps: f64, n: usize, packet_bytes: u32) -> Self {
        PStreamSpec {
            r_avg_bps: rate_bps,
            n_rates: 1,
            packets_per_rate: n,
            spread: 1.0,
            packet_bytes,
        }
    }

    /// Check every field; the message names the offending value.
    pub fn validate(&self) -> Result<()> {
        if !(self.r_avg_bps.is_finite() && self.r_avg_bps > 0.0) {
            return Err(Error::invalid(format!(
                "r_avg_bps {} must be a finite rate > 0 bit/s",
                self.r_avg_bps
            )));
        }
        if self.n_rates == 0 || self.packets_per_rate == 0 {
            return Err(Error::invalid(format!(
                "n_rates {} and packets_per_rate {} must both be >= 1",
                self.n_rates, self.packets_per_rate
            )));
        }
        if self.n_rates.saturating_mul(self.packets_per_rate) > MAX_PACKETS {
            return Err(Error::invalid(format!(
                "p-stream of {} x {} packets exceeds the limit of {MAX_PACKETS}; use shorter p-streams",
                self.n_rates, self.packets_per_rate
            )));
        }
        if !(self.spread.is_finite() && self.spread >= 1.0) {
            return Err(Error::invalid(format!(
                "spread factor {} must be finite and >= 1 (the thesis uses 1.15)",
                self.spread
            )));
        }
        if self.packet_bytes == 0 {
            return Err(Error::invalid(
                "packet_bytes 0: packets must carry at least one byte",
            ));
        }
        Ok(())
    }

    /// Total packets `N = N_r × N_p`.
    pub fn len(&self) -> usize {
        self.n_rates * self.packets_per_rate
    }

    /// Always false for a validated spec (kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Probing range `s^{N_r−1} − 1` (notes §1.3 Interp.).
    pub fn range(&self) -> f64 {
        self.spread.powi(self.n_rates as i32 - 1) - 1.0
    }

    /// Lowest rate `R_1 = R_avg · Σ_{j<N_r} s^{−j} / N_r` (bit/s).
    pub fn first_rate_bps(&self) -> f64 {
        let mut sum = 0.0;
        let mut f = 1.0;
        for _ in 0..self.n_rates {
            sum += f;
            f /= self.spread;
        }
        self.r_avg_bps * sum / self.n_rates as f64
    }

    /// Rate `k` (0-based) in bit/s; `None` past the last rate.
    pub fn rate_bps(&self, k: usize) -> Option<f64> {
        (k < self.n_rates).then(|| self.first_rate_bps() * self.spread.powi(k as i32))
    }

    /// Write the `N_r` rates into `out` (must have length `N_r`).
    pub fn rates_into(&self, out: &mut [f64]) -> Result<()> {
        if out.len() != self.n_rates {
            return Err(Error::invalid(format!(
                "rates buffer has length {} but the p-stream has {} rates",
                out.len(),
                self.n_rates
            )));
        }
        let r1 = self.first_rate_bps();
        let mut r = r1;
        for o in out.iter_mut() {
            *o = r;
            r *= self.spread;
        }
        Ok(())
    }

    /// Probing rate of packet `i` (0-based): `R_{⌈(i+1)/N_p⌉}` (notes §9.2 item 1).
    pub fn packet_rate_bps(&self, i: usize) -> f64 {
        let k = (i / self.packets_per_rate).min(self.n_rates - 1);
        self.first_rate_bps() * self.spread.powi(k as i32)
    }

    /// Intended send gap of packet `i` in ns: `g_s = P / R` (001 §1.3). Gap `i` separates
    /// packet `i` from the packet before it (for `i = 0`, the last packet of the previous
    /// p-stream, since Rapid sends continuously).
    pub fn send_gap_ns(&self, i: usize) -> f64 {
        self.packet_bytes as f64 * 8.0 * 1e9 / self.packet_rate_bps(i)
    }

    /// Fill `out` (length N) with the intended send gaps in ns (f64 because `P/R` is
    /// rarely an integer number of ns and BASS averages gaps anyway).
    pub fn send_gaps_into(&self, out: &mut [f64]) -> Result<()> {
        self.validate()?;
        if out.len() != self.len() {
            return Err(Error::invalid(format!(
                "send-gap buffer has length {} but the p-stream has {} packets",
                out.len(),
                self.len()
            )));
        }
        let bits = self.packet_bytes as f64 * 8.0 * 1e9;
        let mut r = self.first_rate_bps();
        for k in 0..self.n_rates {
            let g = bits / r;
            for o in &mut out[k * self.packets_per_rate..(k + 1) * self.packets_per_rate] {
                *o = g;
            }
            r *= self.spread;
        }
        Ok(())
    }

    /// Send schedule: departure offsets in whole ns relative to the first packet
    /// (`s_1 = 0`, `s_i = s_{i−1} + P/R_{k(i)}`, notes §9.2 item 1). Offsets are rounded
    /// from the exact cumulative sum, so rounding never accumulates.
    pub fn schedule_ns_into(&self, out: &mut [u64]) -> Result<()> {
        self.validate()?;
        if out.len() != self.len() {
            return Err(Error::invalid(format!(
                "schedule buffer has length {} but the p-stream has {} packets",
                out.len(),
                self.len()
            )));
        }
        let mut t = 0.0f64;
        for (i, o) in out.iter_mut().enumerate() {
            if i > 0 {
                t += self.send_gap_ns(i);
            }
            *o = t.round() as u64;
        }
        Ok(())
    }

    /// Duration of the p-stream (sum of its N send gaps), ns.
    pub fn duration_ns(&self) -> f64 {
        self.packet_bytes as f64 * 8.0 * 1e9 * self.len() as f64 / self.r_avg_bps
    }
}
