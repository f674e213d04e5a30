//! Seeded synthetic multi-day flow records shaped after the ESnet data of
//! 003 §3.5–3.6 (the real data is not public; notes §10).
//!
//! The model, each part a knob of [`SynthSpec`]:
//! - **Site pairs** (a source /24 and a destination /24, each a cluster of
//!   data-transfer hosts) appear over time: `initial_pairs` on day 0 (003: 9
//!   new /24 IDs on day 1), then Poisson arrivals, faster in the first
//!   `early_days` (003 Fig. 3.8: after day 45, 0 or 1 new /24 IDs on 94.7 % of days).
//! - **Persistence**: each pair is active on a day with its own probability: a
//!   `regular_share` of pairs are regulars (p uniform in `regular_p`), the rest
//!   occasional (p log-uniform in `occasional_p`). This gives the heavy-tailed
//!   N_u of Fig. 3.5 (a few IDs on ~100 of 214 days, most on a handful).
//! - **Transfers** on an active day: Poisson count, Pareto sizes (heavy tail),
//!   log-normal aggregate rates, 1, 4 or 8 parallel TCP streams sharing the
//!   server's data port (GridFTP, §3.6.2), each stream cut into reports by
//!   the active timeout τ = 60 s (§2.4.2). Hosts within the /24s: a main data
//!   door most of the time, otherwise one of up to `hosts_per_site` hosts
//!   (this is what makes /32 IDs less effective than /24).
//! - **Other β traffic** in the same subnets: single-stream bulk flows on
//!   ephemeral ports (no sibling: Leftover), small web flows (WNP), plus
//!   background reports between unrelated subnets.
//! - **Sampling**: each report's packets are sampled 1-in-N; the sampled count
//!   is Poisson for small means and normal with its sd multiplied by
//!   `variance_inflation` otherwise (Table 3.2's observed sd is 2–4.5× the
//!   binomial one, notes §4.3). Reports with no sampled packet are not exported.
//!
//! Records are produced one day at a time ([`Synth::next_day`]), so a long
//! period never needs to be in memory.

use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use super::record::FlowRecord;
use crate::error::{Error, Result};

const NS: u64 = 1_000_000_000;
const DAY_NS: u64 = 86_400 * NS;
const MSS: u64 = 1448;

/// Generator settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthSpec {
    pub seed: u64,
    /// Days to generate (003: 214).
    pub days: u32,
    /// Start of day 0, ns since the epoch.
    pub start_ns: u64,
    /// 1-in-N packet sampling (003: 1000).
    pub sampling_n: u32,
    /// Multiplier on the sd of the sampled packet count (1 = binomial).
    pub variance_inflation: f64,
    pub initial_pairs: u32,
    pub early_days: u32,
    pub new_pairs_per_day_early: f64,
    pub new_pairs_per_day: f64,
    pub regular_share: f64,
    pub regular_p: (f64, f64),
    pub occasional_p: (f64, f64),
    /// Mean lifetime of a site pair, days (exponential).
    pub pair_lifetime_days_mean: f64,
    /// Transfers-per-day multiplier of regular pairs.
    pub regular_volume: f64,
    /// Hosts per site besides the main data door.
    pub hosts_per_site: u32,
    /// Share of transfers that use the main data door at each end.
    pub main_host_share: f64,
    /// Mean transfers per active pair-day.
    pub transfers_per_day: f64,
    pub size_min_bytes: f64,
    pub size_pareto_alpha: f64,
    pub size_max_bytes: f64,
    pub rate_median_bps: f64,
    pub rate_sigma_ln: f64,
    pub rate_max_bps: f64,
    /// Mean single-stream bulk flows (no siblings) per active pair-day.
    pub other_flows_per_day: f64,
    /// Mean small web flows per active pair-day.
    pub web_flows_per_day: f64,
    /// Reports per day between unrelated subnets.
    pub background_reports_per_day: u32,
    /// NetFlow active timeout τ, ns (003: 60 s).
    pub active_timeout_ns: u64,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            seed: 1,
            days: 214,
            start_ns: 1_304_208_000 * NS, // a UTC midnight
            sampling_n: 1000,
            variance_inflation: 1.0,
            initial_pairs: 9,
            early_days: 45,
            new_pairs_per_day_early: 0.8,
            new_pairs_per_day: 0.3,
            regular_share: 0.25,
            regular_p: (0.35, 0.75),
            occasional_p: (0.01, 0.15),
            regular_volume: 2.0,
            pair_lifetime_days_mean: 150.0,
            hosts_per_site: 4,
            main_host_share: 0.75,
            transfers_per_day: 2.0,
            size_min_bytes: 2e9,
            size_pareto_alpha: 1.3,
            size_max_bytes: 3e11,
            rate_median_bps: 1.5e9,
            rate_sigma_ln: 0.6,
            rate_max_bps: 9e9,
            other_flows_per_day: 20.0,
            web_flows_per_day: 2.0,
            background_reports_per_day: 100,
            active_timeout_ns: 60 * NS,
        }
    }
}

impl SynthSpec {
    /// Check ranges; messages name the field.
    pub fn validate(&self) -> Result<()> {
        let pos = |name: &str, v: f64| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(format!("{name} {v} must be finite and > 0")))
            }
        };
        let nonneg = |name: &str, v: f64| -> Result<()> {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(format!(
                    "{name} {v} must be finite and >= 0"
                )))
            }
        };
        let prob = |name: &str, v: f64| -> Result<()> {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(format!("{name} {v} must be in [0, 1]")))
            }
        };
        if self.sampling_n == 0 {
            return Err(Error::invalid("sampling_n 0: use 1 for unsampled records"));
        }
        pos("variance_inflation", self.variance_inflation)?;
        nonneg("new_pairs_per_day_early", self.new_pairs_per_day_early)?;
        nonneg("new_pairs_per_day", self.new_pairs_per_day)?;
        prob("regular_share", self.regular_share)?;
        prob("main_host_share", self.main_host_share)?;
        for (n, (lo, hi)) in [
            ("regular_p", self.regular_p),
            ("occasional_p", self.occasional_p),
        ] {
            if !(lo > 0.0 && lo <= hi && hi <= 1.0) {
                return Err(Error::invalid(format!(
                    "{n} ({lo}, {hi}) must satisfy 0 < lo <= hi <= 1"
                )));
            }
        }
        nonneg("transfers_per_day", self.transfers_per_day)?;
        pos("regular_volume", self.regular_volume)?;
        pos("pair_lifetime_days_mean", self.pair_lifetime_days_mean)?;
        pos("size_min_bytes", self.size_min_bytes)?;
        pos("size_pareto_alpha", self.size_pareto_alpha)?;
        if self.size_max_bytes < self.size_min_bytes {
            return Err(Error::invalid(format!(
                "size_max_bytes {} is below size_min_bytes {}",
                self.size_max_bytes, self.size_min_bytes
            )));
        }
        pos("rate_median_bps", self.rate_median_bps)?;
        nonneg("rate_sigma_ln", self.rate_sigma_ln)?;
        pos("rate_max_bps", self.rate_max_bps)?;
        nonneg("other_flows_per_day", self.other_flows_per_day)?;
        nonneg("web_flows_per_day", self.web_flows_per_day)?;
        if self.active_timeout_ns == 0 {
            return Err(Error::invalid(
                "active_timeout_ns 0: NetFlow's τ must be positive (003: 60 s)",
            ));
        }
        if self.hosts_per_site > 250 {
            return Err(Error::invalid(format!(
                "hosts_per_site {} does not fit a /24 (max 250)",
                self.hosts_per_site
            )));
        }
        Ok(())
    }
}

/// splitmix64 with the few distributions the generator needs.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(1e-300);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    pub fn poisson(&mut self, mean: f64) -> u64 {
        if mean <= 0.0 {
            return 0;
        }
        if mean > 30.0 {
            return (mean + mean.sqrt() * self.normal()).round().max(0.0) as u64;
        }
        let l = (-mean).exp();
        let (mut k, mut p) = (0u64, 1.0);
        loop {
            p *= self.f64();
            if p <= l {
                return k;
            }
            k += 1;
        }
    }
}

/// Sampled packets of a report of `packets` packets under 1-in-`n` sampling,
/// with the sd scaled by `inflation` for large means (see the module doc).
pub fn sample_packets(rng: &mut Rng, packets: u64, n: u32, inflation: f64) -> u64 {
    if n <= 1 {
        return packets;
    }
    let p = 1.0 / f64::from(n);
    let mean = packets as f64 * p;
    if mean < 30.0 {
        return rng.poisson(mean).min(packets);
    }
    let sd = (packets as f64 * p * (1.0 - p)).sqrt() * inflation;
    ((mean + sd * rng.normal()).round().max(0.0) as u64).min(packets)
}

#[derive(Debug, Clone)]
struct Pair {
    src_site: u32,
    dst_site: u32,
    p_active: f64,
    /// Last day the pair is active (exclusive).
    end_day: u32,
    /// Transfer-count multiplier: regulars move more data per active day.
    volume: f64,
    /// Server data port the streams of this pair share.
    port: u16,
}

/// The generator: call [`next_day`](Self::next_day) until it returns `None`.
#[derive(Debug, Clone)]
pub struct Synth {
    spec: SynthSpec,
    rng: Rng,
    pairs: Vec<Pair>,
    day: u32,
    next_site: u32,
    next_port: u16,
}

fn site_addr(base: u8, site: u32, host: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        base,
        (site >> 8) as u8,
        (site & 0xff) as u8,
        (host + 1) as u8,
    ))
}

impl Synth {
    /// Validate the spec and start at day 0.
    pub fn new(spec: SynthSpec) -> Result<Self> {
        spec.validate()?;
        Ok(Synth {
            rng: Rng::new(spec.seed),
            spec,
            pairs: Vec::new(),
            day: 0,
            next_site: 0,
            next_port: 50_000,
        })
    }

    /// The spec in force.
    pub fn spec(&self) -> &SynthSpec {
        &self.spec
    }

    /// The main data-door host of every site pair created so far (§3.6.3).
    pub fn data_doors(&self) -> Vec<IpAddr> {
        let mut v: Vec<IpAddr> = self
            .pairs
            .iter()
            .flat_map(|p| [site_addr(10, p.src_site, 0), site_addr(172, p.dst_site, 0)])
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn new_pair(&mut self) {
        let s = &self.spec;
        let (p, volume) = if self.rng.f64() < s.regular_share {
            (
                s.regular_p.0 + self.rng.f64() * (s.regular_p.1 - s.regular_p.0),
                s.regular_volume,
            )
        } else {
            let (lo, hi) = (s.occasional_p.0.ln(), s.occasional_p.1.ln());
            ((lo + self.rng.f64() * (hi - lo)).exp(), 1.0)
        };
        // Sites: mostly new clusters; sometimes a known site talks to a new one.
        let src_site = if !self.pairs.is_empty() && self.rng.f64() < 0.3 {
            self.pairs[self.rng.below(self.pairs.len() as u64) as usize].src_site
        } else {
            self.next_site += 1;
            self.next_site
        };
        self.next_site += 1;
        let dst_site = self.next_site;
        // Collaborations end: exponential lifetime (the filter with aging levels off, Fig. 3.11).
        let life = (-s.pair_lifetime_days_mean * (1.0 - self.rng.f64()).ln()).min(1e9) as u32 + 1;
        self.next_port = self.next_port.wrapping_add(1).max(50_000);
        self.pairs.push(Pair {
            src_site,
            dst_site,
            p_active: p,
            volume,
            end_day: self.day.saturating_add(life),
            port: self.next_port,
        });
    }

    fn host(&mut self) -> u32 {
        if self.rng.f64() < self.spec.main_host_share || self.spec.hosts_per_site == 0 {
            0
        } else {
            1 + self.rng.below(u64::from(self.spec.hosts_per_site)) as u32
        }
    }

    /// Cut one stream of `bytes` at `rate_bps` starting at `t0` into τ reports.
    #[allow(clippy::too_many_arguments)]
    fn stream(
        &mut self,
        out: &mut Vec<FlowRecord>,
        src: IpAddr,
        dst: IpAddr,
        sport: u16,
        dport: u16,
        proto: u8,
        bytes: u64,
        pkt_size: u64,
        rate_bps: f64,
        t0: u64,
    ) {
        let tau = self.spec.active_timeout_ns;
        let dur_ns = (bytes as f64 * 8.0 / rate_bps * 1e9) as u64;
        let mut t = t0;
        let end = t0 + dur_ns.max(1_000_000);
        let (n, vi) = (self.spec.sampling_n, self.spec.variance_inflation);
        while t < end {
            let e = (t + tau).min(end);
            let b = ((e - t) as f64 / 1e9 * rate_bps / 8.0) as u64;
            let pk = b.div_ceil(pkt_size).max(1);
            let sp = sample_packets(&mut self.rng, pk, n, vi);
            if sp > 0 {
                out.push(FlowRecord {
                    src_addr: src,
                    dst_addr: dst,
                    src_port: sport,
                    dst_port: dport,
                    proto,
                    bytes: sp * pkt_size,
                    packets: sp,
                    first_ns: t,
                    last_ns: e.saturating_sub(1).max(t),
                    sampling_interval: n,
                });
            }
            t = e;
        }
    }

    /// The next day's records (unsorted), or None after `days` days.
    pub fn next_day(&mut self) -> Option<Vec<FlowRecord>> {
        if self.day >= self.spec.days {
            return None;
        }
        let s = self.spec.clone();
        let day_start = s.start_ns + u64::from(self.day) * DAY_NS;
        let arrivals = if self.day == 0 {
            u64::from(s.initial_pairs)
        } else if self.day < s.early_days {
            self.rng.poisson(s.new_pairs_per_day_early)
        } else {
            self.rng.poisson(s.new_pairs_per_day)
        };
        let first_new = self.pairs.len();
        for _ in 0..arrivals {
            self.new_pair();
        }
        let mut out = Vec::new();
        for i in 0..self.pairs.len() {
            // A new pair is active on its arrival day; others by their p.
            let pair = self.pairs[i].clone();
            if self.day >= pair.end_day || (i < first_new && self.rng.f64() >= pair.p_active) {
                continue;
            }
            let k = 1 + self
                .rng
                .poisson((s.transfers_per_day * pair.volume - 1.0).max(0.0));
            for _ in 0..k {
                let (hs, hd) = (self.host(), self.host());
                let (src, dst) = (
                    site_addr(10, pair.src_site, hs),
                    site_addr(172, pair.dst_site, hd),
                );
                let u = self.rng.f64().max(1e-12);
                let size =
                    (s.size_min_bytes * u.powf(-1.0 / s.size_pareto_alpha)).min(s.size_max_bytes);
                let rate = (s.rate_median_bps * (s.rate_sigma_ln * self.rng.normal()).exp())
                    .clamp(1e7, s.rate_max_bps);
                let streams = [1u64, 4, 8, 8][self.rng.below(4) as usize];
                let t0 = day_start + self.rng.below(DAY_NS - 4 * 3600 * NS);
                let base_port = 20_000 + self.rng.below(30_000) as u16;
                for st in 0..streams {
                    self.stream(
                        &mut out,
                        src,
                        dst,
                        base_port.wrapping_add(st as u16),
                        pair.port,
                        6,
                        (size / streams as f64) as u64,
                        MSS,
                        rate / streams as f64,
                        t0,
                    );
                }
            }
            // Single-stream bulk flows with no sibling: Leftover when hapless.
            for _ in 0..self.rng.poisson(s.other_flows_per_day) {
                let (hs, hd) = (self.host(), self.host());
                let bytes = 5e8 * (0.2 + self.rng.f64() * 1.6);
                let sport = 30_000 + self.rng.below(30_000) as u16;
                let dport = 1024 + self.rng.below(20_000) as u16;
                let t0 = day_start + self.rng.below(DAY_NS - 3600 * NS);
                self.stream(
                    &mut out,
                    site_addr(10, pair.src_site, hs),
                    site_addr(172, pair.dst_site, hd),
                    sport,
                    dport,
                    6,
                    bytes as u64,
                    MSS,
                    5e7,
                    t0,
                );
            }
            // Small web flows: WNP when hapless.
            for _ in 0..self.rng.poisson(s.web_flows_per_day) {
                let (hs, hd) = (self.host(), self.host());
                let t0 = day_start + self.rng.below(DAY_NS - 3600 * NS);
                let sport = 40_000 + self.rng.below(20_000) as u16;
                self.stream(
                    &mut out,
                    site_addr(10, pair.src_site, hs),
                    site_addr(172, pair.dst_site, hd),
                    sport,
                    443,
                    6,
                    200_000,
                    600,
                    2e6,
                    t0,
                );
            }
        }
        // Background between unrelated subnets (never α: below H per report).
        for _ in 0..s.background_reports_per_day {
            let src = site_addr(192, self.rng.below(4096) as u32, self.rng.below(200) as u32);
            let dst = site_addr(198, self.rng.below(4096) as u32, self.rng.below(200) as u32);
            let t0 = day_start + self.rng.below(DAY_NS - 3600 * NS);
            let bytes = 1e6 * (1.0 + 400.0 * self.rng.f64());
            let port = [80u16, 443, 53, 22, 5060, 8080][self.rng.below(6) as usize];
            let sport = 30_000 + self.rng.below(30_000) as u16;
            self.stream(
                &mut out,
                src,
                dst,
                sport,
                port,
                6,
                bytes as u64,
                900,
                2e7,
                t0,
            );
        }
        self.day += 1;
        Some(out)
    }
}

impl Iterator for Synth {
    type Item = Vec<FlowRecord>;
    fn next(&mut self) -> Option<Vec<FlowRecord>> {
        self.next_day()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_valid() {
        let spec = SynthSpec {
            days: 3,
            ..SynthSpec::default()
        };
        let a: Vec<Vec<FlowRecord>> = Synth::new(spec.clone()).unwrap().collect();
        let b: Vec<Vec<FlowRecord>> = Synth::new(spec.clone()).unwrap().collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 3);
        for (d, recs) in a.iter().enumerate() {
            assert!(!recs.is_empty());
            for r in recs {
                r.validate().unwrap();
                assert!(r.duration_ns() < 60 * NS);
                assert!(r.first_ns / DAY_NS >= spec.start_ns / DAY_NS + d as u64);
            }
        }
        let c: Vec<Vec<FlowRecord>> = Synth::new(SynthSpec { seed: 2, ..spec }).unwrap().collect();
        assert_ne!(a, c);
    }

    #[test]
    fn bad_specs() {
        for s in [
            SynthSpec {
                sampling_n: 0,
                ..SynthSpec::default()
            },
            SynthSpec {
                regular_p: (0.5, 0.2),
                ..SynthSpec::default()
            },
            SynthSpec {
                variance_inflation: f64::NAN,
                ..SynthSpec::default()
            },
            SynthSpec {
                size_max_bytes: 1.0,
                ..SynthSpec::default()
            },
            SynthSpec {
                hosts_per_site: 251,
                ..SynthSpec::default()
            },
        ] {
            assert!(Synth::new(s).is_err());
        }
    }

    #[test]
    fn sampling_is_unbiased_and_inflatable() {
        let mut rng = Rng::new(3);
        let pk = 690_000; // 1 GB of 1448-B packets
        let draw = |rng: &mut Rng, vi: f64| -> (f64, f64) {
            let v: Vec<f64> = (0..2000)
                .map(|_| sample_packets(rng, pk, 1000, vi) as f64 / 690.0)
                .collect();
            let m = v.iter().sum::<f64>() / v.len() as f64;
            let sd =
                (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
            (m, sd)
        };
        let (m1, sd1) = draw(&mut rng, 1.0);
        let (m3, sd3) = draw(&mut rng, 3.0);
        assert!((m1 - 1.0).abs() < 0.01 && (m3 - 1.0).abs() < 0.02);
        assert!((sd1 - 0.038).abs() < 0.004, "{sd1}");
        assert!((sd3 / sd1 - 3.0).abs() < 0.3, "{sd3} / {sd1}");
    }
}
