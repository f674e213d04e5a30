//! The cost of prefix filters on β flows: hapless-β classification
//! (003 §3.6.2).
//!
//! Hapless β reports are the non-α reports of day i whose prefix ID is one of
//! day i's α prefix IDs. Filters apply **in order**:
//! 1. reports of α flows (same 5-tuple as an α report) are removed;
//! 2. **FT** (file transfer): bytes/packet ≥ 1000, corrected bytes > G, and at
//!    least one *other* report of the day with the same src IP, dst IP and
//!    protocol and the same source or the same destination port (parallel
//!    streams, e.g. GridFTP's 8). The text says "another NetFlow report" and
//!    does not exclude later reports of the same 5-tuple; neither do we;
//! 3. **WNP**: either port is a well-known port of the spec;
//! 4. **Leftover**.
//!
//! Shares count sampled *packets*, not bytes: small-flow byte estimates are
//! unreliable (§3.6.2). Streaming: a second pass over the day's records keeps
//! only reports inside α prefix IDs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::alpha::DayReport;
use super::prefix::PrefixId;
use super::record::{FiveTuple, FlowRecord};
use super::spec::AlphaSpec;
use crate::error::Result;

/// The group a report inside an α prefix ID falls into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BetaGroup {
    /// An α report itself.
    AlphaReport,
    /// A non-α report of an α flow (filter 1: not hapless).
    AlphaFlow,
    /// Filter 2.
    FileTransfer,
    /// Filter 3.
    WellKnownPort,
    /// Everything else.
    Leftover,
}

/// Reports and sampled packets per group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaplessCounts {
    pub alpha_flow_reports: u64,
    pub alpha_flow_packets: u64,
    pub ft_reports: u64,
    pub ft_packets: u64,
    pub wnp_reports: u64,
    pub wnp_packets: u64,
    pub leftover_reports: u64,
    pub leftover_packets: u64,
}

impl HaplessCounts {
    /// Sampled packets of hapless β reports (FT + WNP + Leftover).
    pub fn hapless_packets(&self) -> u64 {
        self.ft_packets + self.wnp_packets + self.leftover_packets
    }

    /// (FT, WNP, Leftover) shares of hapless-β packets (003: 89.37 %, 0.026 %,
    /// 10.6 % for /24); zeros when there is none.
    pub fn packet_shares(&self) -> (f64, f64, f64) {
        let t = self.hapless_packets();
        if t == 0 {
            return (0.0, 0.0, 0.0);
        }
        let t = t as f64;
        (
            self.ft_packets as f64 / t,
            self.wnp_packets as f64 / t,
            self.leftover_packets as f64 / t,
        )
    }

    /// Add another day's counts.
    pub fn add(&mut self, o: &HaplessCounts) {
        self.alpha_flow_reports += o.alpha_flow_reports;
        self.alpha_flow_packets += o.alpha_flow_packets;
        self.ft_reports += o.ft_reports;
        self.ft_packets += o.ft_packets;
        self.wnp_reports += o.wnp_reports;
        self.wnp_packets += o.wnp_packets;
        self.leftover_reports += o.leftover_reports;
        self.leftover_packets += o.leftover_packets;
    }

    fn count(&mut self, g: BetaGroup, packets: u64) {
        let (r, p) = match g {
            BetaGroup::AlphaReport => return,
            BetaGroup::AlphaFlow => (&mut self.alpha_flow_reports, &mut self.alpha_flow_packets),
            BetaGroup::FileTransfer => (&mut self.ft_reports, &mut self.ft_packets),
            BetaGroup::WellKnownPort => (&mut self.wnp_reports, &mut self.wnp_packets),
            BetaGroup::Leftover => (&mut self.leftover_reports, &mut self.leftover_packets),
        };
        *r += 1;
        *p = p.saturating_add(packets);
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    t: FiveTuple,
    packets: u64,
    est_bytes: u64,
    bytes_per_packet_ok: bool,
    alpha: bool,
}

type PortKey = (IpAddr, IpAddr, u8, u16);

/// Hapless-β classification of one aggregation interval.
#[derive(Debug)]
pub struct HaplessDay {
    spec: AlphaSpec,
    day: u64,
    alpha_ids: HashSet<PrefixId>,
    alpha_flows: HashSet<FiveTuple>,
    entries: Vec<Entry>,
}

impl HaplessDay {
    /// Prepare the second pass over the records of `day`.
    pub fn new(spec: &AlphaSpec, day: &DayReport) -> Result<Self> {
        spec.validate()?;
        Ok(HaplessDay {
            spec: spec.clone(),
            day: day.day,
            alpha_ids: day.prefix_flows.iter().map(|p| p.id).collect(),
            alpha_flows: day.alpha_flows.iter().copied().collect(),
            entries: Vec::new(),
        })
    }

    /// Offer one record of the day (records of other days are ignored).
    /// Returns whether it lies inside one of the day's α prefix IDs.
    pub fn push(&mut self, rec: &FlowRecord) -> Result<bool> {
        rec.validate()?;
        if self.spec.interval_of(rec.first_ns).0 != self.day {
            return Ok(false);
        }
        let id = PrefixId::of(
            rec.src_addr,
            rec.dst_addr,
            self.spec.prefix_len_v4,
            self.spec.prefix_len_v6,
        );
        if !self.alpha_ids.contains(&id) {
            return Ok(false);
        }
        let n = self.spec.sampling_n(rec.sampling_interval);
        let est = rec.est_bytes(n);
        self.entries.push(Entry {
            t: rec.five_tuple(),
            packets: rec.packets,
            est_bytes: est,
            // FT (a): raw bytes/raw packets equals the corrected ratio.
            bytes_per_packet_ok: rec.packets > 0
                && rec.bytes / rec.packets >= self.spec.ft_min_bytes_per_packet,
            alpha: est >= self.spec.h_bytes,
        });
        Ok(true)
    }

    /// Classify every kept report (filters 1–4 in order) and count packets.
    pub fn finish(self) -> HaplessCounts {
        let mut by_sport: HashMap<PortKey, u32> = HashMap::new();
        let mut by_dport: HashMap<PortKey, u32> = HashMap::new();
        let mut by_tuple: HashMap<FiveTuple, u32> = HashMap::new();
        for e in &self.entries {
            let t = &e.t;
            *by_sport
                .entry((t.src_addr, t.dst_addr, t.proto, t.src_port))
                .or_default() += 1;
            *by_dport
                .entry((t.src_addr, t.dst_addr, t.proto, t.dst_port))
                .or_default() += 1;
            *by_tuple.entry(*t).or_default() += 1;
        }
        let mut c = HaplessCounts::default();
        for e in &self.entries {
            let t = &e.t;
            let g = if e.alpha {
                BetaGroup::AlphaReport
            } else if self.alpha_flows.contains(t) {
                BetaGroup::AlphaFlow
            } else {
                // Other reports sharing the source port, or the destination port;
                // those sharing both (same 5-tuple) are counted once.
                let s = by_sport[&(t.src_addr, t.dst_addr, t.proto, t.src_port)];
                let d = by_dport[&(t.src_addr, t.dst_addr, t.proto, t.dst_port)];
                let both = by_tuple[t];
                let others = (s - 1) + (d - 1) - (both - 1);
                if e.bytes_per_packet_ok && e.est_bytes > self.spec.g_bytes && others > 0 {
                    BetaGroup::FileTransfer
                } else if self.spec.well_known_ports.contains(&t.src_port)
                    || self.spec.well_known_ports.contains(&t.dst_port)
                {
                    BetaGroup::WellKnownPort
                } else {
                    BetaGroup::Leftover
                }
            };
            c.count(g, e.packets);
        }
        c
    }
}

/// Hapless-β classification of many days in one pass over their records.
#[derive(Debug)]
pub struct HaplessPass {
    days: BTreeMap<u64, HaplessDay>,
    spec: AlphaSpec,
}

impl HaplessPass {
    /// One [`HaplessDay`] per day report.
    pub fn new(spec: &AlphaSpec, days: &[DayReport]) -> Result<Self> {
        let mut m = BTreeMap::new();
        for d in days {
            m.insert(d.day, HaplessDay::new(spec, d)?);
        }
        Ok(HaplessPass {
            days: m,
            spec: spec.clone(),
        })
    }

    /// Route one record to its day.
    pub fn push(&mut self, rec: &FlowRecord) -> Result<bool> {
        rec.validate()?;
        let day = self.spec.interval_of(rec.first_ns).0;
        match self.days.get_mut(&day) {
            Some(h) => h.push(rec),
            None => Ok(false),
        }
    }

    /// Counts per day, in day order.
    pub fn finish(self) -> Vec<(u64, HaplessCounts)> {
        self.days
            .into_iter()
            .map(|(d, h)| (d, h.finish()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::alpha::aggregate;

    fn rec(src: &str, dst: &str, sport: u16, dport: u16, bytes: u64, packets: u64) -> FlowRecord {
        FlowRecord {
            src_addr: src.parse().unwrap(),
            dst_addr: dst.parse().unwrap(),
            src_port: sport,
            dst_port: dport,
            proto: 6,
            bytes,
            packets,
            first_ns: 1_000_000_000,
            last_ns: 50_000_000_000,
            sampling_interval: 1000,
        }
    }

    #[test]
    fn filters_apply_in_the_stated_order() {
        let spec = AlphaSpec::default();
        let recs = [
            // α report of 5-tuple A (2 GB corrected).
            rec("10.0.0.1", "10.1.0.1", 40000, 50000, 2_000_000, 1400),
            // Non-α report of the same α flow A: filter 1.
            rec("10.0.0.1", "10.1.0.1", 40000, 50000, 100_000, 70),
            // Two parallel streams sharing dst port 50001, 14.5 MB corrected each,
            // 1450 B/packet: FT.
            rec("10.0.0.1", "10.1.0.1", 40001, 50001, 14_500, 10),
            rec("10.0.0.1", "10.1.0.1", 40002, 50001, 14_500, 10),
            // A lone big stream (no sibling) on ssh: WNP (scp would be FT only with siblings).
            rec("10.0.0.1", "10.1.0.1", 22, 41000, 14_500, 10),
            // Small packets: not FT; port 5060: Leftover.
            rec("10.0.0.2", "10.1.0.3", 5060, 5060, 300, 3),
            // Sibling present but G not exceeded (10 MB exactly is not > G): Leftover.
            rec("10.0.0.2", "10.1.0.3", 6000, 7000, 10_000, 5),
            rec("10.0.0.2", "10.1.0.3", 6001, 7000, 100, 1),
            // Outside the α prefix IDs: not hapless at all.
            rec("10.9.0.1", "10.1.0.1", 1, 2, 50_000, 40),
        ];
        let days = aggregate(&spec, &recs).unwrap();
        let mut h = HaplessDay::new(&spec, &days[0]).unwrap();
        let inside: Vec<bool> = recs.iter().map(|r| h.push(r).unwrap()).collect();
        assert_eq!(
            inside,
            [true, true, true, true, true, true, true, true, false]
        );
        let c = h.finish();
        assert_eq!((c.alpha_flow_reports, c.alpha_flow_packets), (1, 70));
        assert_eq!((c.ft_reports, c.ft_packets), (2, 20));
        assert_eq!((c.wnp_reports, c.wnp_packets), (1, 10));
        assert_eq!((c.leftover_reports, c.leftover_packets), (3, 9));
        let (ft, wnp, left) = c.packet_shares();
        assert!((ft - 20.0 / 39.0).abs() < 1e-12);
        assert!((ft + wnp + left - 1.0).abs() < 1e-12);
    }

    #[test]
    fn pass_routes_by_day() {
        let spec = AlphaSpec::default();
        let mut a = rec("10.0.0.1", "10.1.0.1", 40000, 50000, 2_000_000, 1400);
        let days = aggregate(&spec, [&a]).unwrap();
        let mut p = HaplessPass::new(&spec, &days).unwrap();
        let b = rec("10.0.0.1", "10.1.0.1", 9, 9, 10, 1);
        assert!(p.push(&b).unwrap());
        a.first_ns += 86_400_000_000_000;
        a.last_ns += 86_400_000_000_000;
        assert!(!p.push(&a).unwrap());
        let out = p.finish();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].1.leftover_packets, 1);
    }
}
