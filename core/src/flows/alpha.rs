//! α reports, α flows and α prefix flows per aggregation interval
//! (003 §3.5.1, Table 3.3/3.4, eq 3.1–3.3).
//!
//! Streaming: [`AlphaAggregator::push`] looks at one record at a time and keeps
//! only the α reports' aggregates (a few per prefix ID per day), so a day of
//! records never has to be in memory. A non-α record costs a comparison and a
//! counter update and allocates nothing once its day is open.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::interval::union_length;
use super::prefix::PrefixId;
use super::record::{FiveTuple, FlowRecord};
use super::spec::AlphaSpec;
use crate::error::Result;

/// Eq 3.1: a report is an α NetFlow report when its sampling-corrected bytes
/// reach H.
pub fn is_alpha_report(rec: &FlowRecord, spec: &AlphaSpec) -> bool {
    rec.est_bytes(spec.sampling_n(rec.sampling_interval)) >= spec.h_bytes
}

/// One α prefix flow p_il (Table 3.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefixFlow {
    /// ζ_il: the prefix ID.
    pub id: PrefixId,
    /// η_il: α-bytes, the sum of its α reports' corrected bytes (eq 3.2).
    pub alpha_bytes: u64,
    /// μ_il: α-time, the union of its α-intervals inside the interval (eq 3.3), ns.
    pub alpha_time_ns: u64,
    /// g_il: number of α reports aggregated.
    pub alpha_reports: u32,
}

/// Everything the identifier learnt about one aggregation interval i.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayReport {
    /// Interval index i (from `agg_origin_ns`).
    pub day: u64,
    /// Start of the interval, ns since the epoch.
    pub start_ns: u64,
    /// All reports seen in the interval.
    pub reports: u64,
    /// Their corrected bytes.
    pub est_bytes: u64,
    /// Their corrected packets.
    pub est_packets: u64,
    /// m_i: α reports.
    pub alpha_reports: u64,
    /// α flows: 5-tuples with at least one α report (Table 3.3), sorted.
    pub alpha_flows: Vec<FiveTuple>,
    /// P_i, sorted by α-bytes, largest first (ties by ID).
    pub prefix_flows: Vec<PrefixFlow>,
}

impl DayReport {
    /// Σ η over the day's α prefix flows (Fig. 3.6 cumulative α-bytes).
    pub fn alpha_bytes(&self) -> u64 {
        self.prefix_flows
            .iter()
            .fold(0u64, |a, p| a.saturating_add(p.alpha_bytes))
    }

    /// Σ μ over the day's α prefix flows (Fig. 3.6 cumulative α-time), ns.
    pub fn alpha_time_ns(&self) -> u64 {
        self.prefix_flows
            .iter()
            .fold(0u64, |a, p| a.saturating_add(p.alpha_time_ns))
    }

    /// Whether `id` is one of the day's α prefix IDs.
    pub fn has_prefix(&self, id: &PrefixId) -> bool {
        self.prefix_flows.iter().any(|p| p.id == *id)
    }
}

#[derive(Debug, Default)]
struct PrefixAcc {
    alpha_bytes: u64,
    reports: u32,
    intervals: Vec<(u64, u64)>,
}

#[derive(Debug)]
struct DayAcc {
    start_ns: u64,
    reports: u64,
    est_bytes: u64,
    est_packets: u64,
    alpha_reports: u64,
    prefixes: HashMap<PrefixId, PrefixAcc>,
    alpha_flows: HashSet<FiveTuple>,
}

/// Streaming eq 3.1–3.3 over records of any number of aggregation intervals.
#[derive(Debug)]
pub struct AlphaAggregator {
    spec: AlphaSpec,
    days: BTreeMap<u64, DayAcc>,
}

impl AlphaAggregator {
    /// Validate `spec` and start empty.
    pub fn new(spec: AlphaSpec) -> Result<Self> {
        spec.validate()?;
        Ok(AlphaAggregator {
            spec,
            days: BTreeMap::new(),
        })
    }

    /// The spec in force.
    pub fn spec(&self) -> &AlphaSpec {
        &self.spec
    }

    /// Take one report. Returns whether it is an α report. A report belongs to
    /// the interval holding its first packet; its α-interval is clipped to that
    /// interval ("total time within the aggregation interval", §3.5.1).
    pub fn push(&mut self, rec: &FlowRecord) -> Result<bool> {
        rec.validate()?;
        let n = self.spec.sampling_n(rec.sampling_interval);
        let (day, start_ns) = self.spec.interval_of(rec.first_ns);
        let acc = self.days.entry(day).or_insert_with(|| DayAcc {
            start_ns,
            reports: 0,
            est_bytes: 0,
            est_packets: 0,
            alpha_reports: 0,
            prefixes: HashMap::new(),
            alpha_flows: HashSet::new(),
        });
        let est = rec.est_bytes(n);
        acc.reports += 1;
        acc.est_bytes = acc.est_bytes.saturating_add(est);
        acc.est_packets = acc.est_packets.saturating_add(rec.est_packets(n));
        // 003 §3.5.1 eq 3.1: β_ij ≥ H on the sampling-corrected count.
        if est < self.spec.h_bytes {
            return Ok(false);
        }
        acc.alpha_reports += 1;
        acc.alpha_flows.insert(rec.five_tuple());
        let id = PrefixId::of(
            rec.src_addr,
            rec.dst_addr,
            self.spec.prefix_len_v4,
            self.spec.prefix_len_v6,
        );
        let end = start_ns.saturating_add(self.spec.agg_interval_ns);
        let p = acc.prefixes.entry(id).or_default();
        p.alpha_bytes = p.alpha_bytes.saturating_add(est); // eq 3.2
        p.reports = p.reports.saturating_add(1);
        p.intervals.push((rec.first_ns, rec.last_ns.min(end))); // eq 3.3 input
        Ok(true)
    }

    /// Close and return every interval that starts before `day` (records of
    /// later intervals may still come). Sorted by day.
    pub fn take_days_before(&mut self, day: u64) -> Vec<DayReport> {
        let keep = self.days.split_off(&day);
        let done = std::mem::replace(&mut self.days, keep);
        done.into_iter().map(|(d, a)| close(d, a)).collect()
    }

    /// Close and return every interval, sorted by day.
    pub fn finish(self) -> Vec<DayReport> {
        self.days.into_iter().map(|(d, a)| close(d, a)).collect()
    }
}

fn close(day: u64, acc: DayAcc) -> DayReport {
    let mut prefix_flows: Vec<PrefixFlow> = acc
        .prefixes
        .into_iter()
        .map(|(id, mut p)| PrefixFlow {
            id,
            alpha_bytes: p.alpha_bytes,
            alpha_time_ns: union_length(&mut p.intervals), // eq 3.3
            alpha_reports: p.reports,
        })
        .collect();
    prefix_flows.sort_by(|a, b| b.alpha_bytes.cmp(&a.alpha_bytes).then(a.id.cmp(&b.id)));
    let mut alpha_flows: Vec<FiveTuple> = acc.alpha_flows.into_iter().collect();
    alpha_flows.sort_unstable();
    DayReport {
        day,
        start_ns: acc.start_ns,
        reports: acc.reports,
        est_bytes: acc.est_bytes,
        est_packets: acc.est_packets,
        alpha_reports: acc.alpha_reports,
        alpha_flows,
        prefix_flows,
    }
}

/// Run the aggregator over a whole record sequence.
pub fn aggregate<'a>(
    spec: &AlphaSpec,
    records: impl IntoIterator<Item = &'a FlowRecord>,
) -> Result<Vec<DayReport>> {
    let mut agg = AlphaAggregator::new(spec.clone())?;
    for r in records {
        agg.push(r)?;
    }
    Ok(agg.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    const S: u64 = 1_000_000_000;

    fn rec(src: &str, dst: &str, sport: u16, bytes: u64, first_s: u64, last_s: u64) -> FlowRecord {
        FlowRecord {
            src_addr: src.parse::<IpAddr>().unwrap(),
            dst_addr: dst.parse().unwrap(),
            src_port: sport,
            dst_port: 2811,
            proto: 6,
            bytes,
            packets: bytes / 1448 + 1,
            first_ns: first_s * S,
            last_ns: last_s * S,
            sampling_interval: 1000,
        }
    }

    #[test]
    fn eq_3_1_threshold_is_on_corrected_bytes() {
        let spec = AlphaSpec::default();
        // 1 000 000 sampled bytes × 1000 = exactly H: an α report (≥).
        assert!(is_alpha_report(
            &rec("10.0.0.1", "10.1.0.1", 5000, 1_000_000, 0, 60),
            &spec
        ));
        assert!(!is_alpha_report(
            &rec("10.0.0.1", "10.1.0.1", 5000, 999_999, 0, 60),
            &spec
        ));
        // The raw count alone would never reach H on a 10 Gb/s link within τ.
        let unsampled = FlowRecord {
            sampling_interval: 1,
            ..rec("10.0.0.1", "10.1.0.1", 5000, 1_000_000, 0, 60)
        };
        assert!(!is_alpha_report(&unsampled, &spec));
    }

    #[test]
    fn prefix_flows_sum_bytes_and_union_times() {
        let spec = AlphaSpec::default();
        let recs = [
            // Two hosts of one /24 pair, overlapping α-intervals [0,60] and [30,90],
            // a third report [200,260]: μ = 90 + 60 = 150 s (eq 3.3).
            rec("10.0.0.1", "10.1.0.1", 5000, 2_000_000, 0, 60),
            rec("10.0.0.2", "10.1.0.9", 5001, 1_500_000, 30, 90),
            rec("10.0.0.1", "10.1.0.1", 5000, 1_000_000, 200, 260),
            // A β report of the same pair adds nothing to η or μ.
            rec("10.0.0.1", "10.1.0.1", 5002, 10, 0, 1000),
            // Another /24 pair.
            rec("10.2.0.1", "10.1.0.1", 6000, 4_000_000, 100, 130),
        ];
        let days = aggregate(&spec, &recs).unwrap();
        assert_eq!(days.len(), 1);
        let d = &days[0];
        assert_eq!((d.reports, d.alpha_reports), (5, 4));
        assert_eq!(d.alpha_flows.len(), 3);
        assert_eq!(d.prefix_flows.len(), 2);
        let a = &d.prefix_flows[0];
        assert_eq!(a.id.to_string(), "10.0.0.0/24 -> 10.1.0.0/24");
        assert_eq!(a.alpha_bytes, 4_500_000_000);
        assert_eq!(a.alpha_time_ns, 150 * S);
        assert_eq!(a.alpha_reports, 3);
        let b = &d.prefix_flows[1];
        assert_eq!((b.alpha_bytes, b.alpha_time_ns), (4_000_000_000, 30 * S));
        assert_eq!(d.alpha_bytes(), 8_500_000_000);

        // /32: the two hosts become separate prefix flows.
        let s32 = AlphaSpec {
            prefix_len_v4: 32,
            ..AlphaSpec::default()
        };
        let d32 = &aggregate(&s32, &recs).unwrap()[0];
        assert_eq!(d32.prefix_flows.len(), 3);
        assert_eq!(d32.alpha_bytes(), d.alpha_bytes());
    }

    #[test]
    fn days_split_and_clip() {
        let spec = AlphaSpec::default();
        let day = 86_400;
        let recs = [
            rec("10.0.0.1", "10.1.0.1", 1, 2_000_000, day - 30, day + 30),
            rec(
                "10.0.0.1",
                "10.1.0.1",
                1,
                2_000_000,
                3 * day + 5,
                3 * day + 65,
            ),
        ];
        let days = aggregate(&spec, &recs).unwrap();
        assert_eq!(days.iter().map(|d| d.day).collect::<Vec<_>>(), vec![0, 3]);
        // The first report is clipped at midnight: 30 s inside day 0.
        assert_eq!(days[0].prefix_flows[0].alpha_time_ns, 30 * S);
        assert_eq!(days[1].start_ns, 3 * day * S);

        let mut agg = AlphaAggregator::new(spec).unwrap();
        for r in &recs {
            agg.push(r).unwrap();
        }
        let early = agg.take_days_before(2);
        assert_eq!(early.len(), 1);
        assert_eq!(agg.finish().len(), 1);
    }

    #[test]
    fn invalid_records_are_rejected() {
        let mut agg = AlphaAggregator::new(AlphaSpec::default()).unwrap();
        let bad = rec("10.0.0.1", "10.1.0.1", 1, 5, 10, 9);
        assert!(agg
            .push(&bad)
            .unwrap_err()
            .to_string()
            .contains("before it starts"));
        let zero_n = FlowRecord {
            sampling_interval: 0,
            ..rec("10.0.0.1", "10.1.0.1", 1, 5, 1, 9)
        };
        assert!(agg.push(&zero_n).is_err());
    }
}
