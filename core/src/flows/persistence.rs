//! Persistence N_u and the pooled percentile tables (003 §3.5.2, Fig. 3.5,
//! Table 3.5).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::alpha::DayReport;
use super::prefix::PrefixId;

/// N_u for every α prefix ID u: the number of days with η > 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persistence {
    /// (ID, N_u), sorted by N_u descending then ID.
    pub days_per_id: Vec<(PrefixId, u32)>,
}

impl Persistence {
    /// Count the days on which each ID had α-bytes.
    pub fn from_days(days: &[DayReport]) -> Self {
        let mut m: HashMap<PrefixId, u32> = HashMap::new();
        for d in days {
            for p in &d.prefix_flows {
                if p.alpha_bytes > 0 {
                    *m.entry(p.id).or_default() += 1;
                }
            }
        }
        let mut v: Vec<(PrefixId, u32)> = m.into_iter().collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Persistence { days_per_id: v }
    }

    /// Number of unique α prefix IDs (003: 125 for /24, 1548 for /32).
    pub fn unique_ids(&self) -> usize {
        self.days_per_id.len()
    }

    /// max N_u (003: 114 days /24, 68 days /32).
    pub fn max_days(&self) -> u32 {
        self.days_per_id.first().map_or(0, |x| x.1)
    }

    /// Share of IDs seen on more than `k` days (003: > 15 days 21.6 % /24, 4.5 % /32).
    pub fn fraction_more_than(&self, k: u32) -> f64 {
        if self.days_per_id.is_empty() {
            return 0.0;
        }
        self.days_per_id.iter().filter(|x| x.1 > k).count() as f64 / self.days_per_id.len() as f64
    }

    /// The empirical CDF of N_u: (n, share of IDs with N_u ≤ n), one point per distinct n.
    pub fn cdf(&self) -> Vec<(u32, f64)> {
        let mut ns: Vec<u32> = self.days_per_id.iter().map(|x| x.1).collect();
        ns.sort_unstable();
        let total = ns.len() as f64;
        let mut out: Vec<(u32, f64)> = Vec::new();
        for (i, n) in ns.iter().enumerate() {
            let share = (i + 1) as f64 / total;
            match out.last_mut() {
                Some(last) if last.0 == *n => last.1 = share,
                _ => out.push((*n, share)),
            }
        }
        out
    }
}

/// Nearest-rank percentiles of `values` (sorted in place): for each `q` in
/// 0..=1 the smallest value with at least q of the values ≤ it (Table 3.5 rows
/// 100/90/…/50 %). Empty input gives zeros.
pub fn percentiles(values: &mut [u64], qs: &[f64]) -> Vec<u64> {
    values.sort_unstable();
    qs.iter()
        .map(|&q| {
            if values.is_empty() {
                return 0;
            }
            let q = if q.is_finite() {
                q.clamp(0.0, 1.0)
            } else {
                1.0
            };
            let rank = (q * values.len() as f64).ceil() as usize;
            values[rank.clamp(1, values.len()) - 1]
        })
        .collect()
}

/// Table 3.5 for one prefix length: α-bytes and α-time of all per-day α prefix
/// flows pooled over the period, at 100/90/80/70/60/50 %.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PercentileTable {
    pub quantiles_pct: Vec<u32>,
    pub alpha_bytes: Vec<u64>,
    pub alpha_time_ns: Vec<u64>,
}

/// Build Table 3.5 from day reports.
pub fn percentile_table(days: &[DayReport]) -> PercentileTable {
    let pct = [100u32, 90, 80, 70, 60, 50];
    let qs: Vec<f64> = pct.iter().map(|&p| f64::from(p) / 100.0).collect();
    let mut b: Vec<u64> = days
        .iter()
        .flat_map(|d| d.prefix_flows.iter().map(|p| p.alpha_bytes))
        .collect();
    let mut t: Vec<u64> = days
        .iter()
        .flat_map(|d| d.prefix_flows.iter().map(|p| p.alpha_time_ns))
        .collect();
    PercentileTable {
        quantiles_pct: pct.to_vec(),
        alpha_bytes: percentiles(&mut b, &qs),
        alpha_time_ns: percentiles(&mut t, &qs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::alpha::PrefixFlow;

    #[test]
    fn nearest_rank() {
        let mut v: Vec<u64> = (1..=10).collect();
        assert_eq!(
            percentiles(&mut v, &[1.0, 0.9, 0.5, 0.0]),
            vec![10, 9, 5, 1]
        );
        assert_eq!(percentiles(&mut [], &[0.5]), vec![0]);
        assert_eq!(percentiles(&mut [7], &[f64::NAN]), vec![7]);
    }

    #[test]
    fn n_u_counts_days() {
        let id = |s: &str| PrefixId::of(s.parse().unwrap(), "10.9.9.9".parse().unwrap(), 24, 64);
        let pf = |s: &str| PrefixFlow {
            id: id(s),
            alpha_bytes: 1,
            alpha_time_ns: 1,
            alpha_reports: 1,
        };
        let day = |i: u64, ids: &[&str]| DayReport {
            day: i,
            start_ns: 0,
            reports: 0,
            est_bytes: 0,
            est_packets: 0,
            alpha_reports: 0,
            alpha_flows: vec![],
            prefix_flows: ids.iter().map(|s| pf(s)).collect(),
        };
        let days = [
            day(0, &["10.0.0.1", "10.1.0.1"]),
            day(1, &["10.0.0.1"]),
            day(2, &["10.0.0.1"]),
        ];
        let p = Persistence::from_days(&days);
        assert_eq!(p.unique_ids(), 2);
        assert_eq!(p.max_days(), 3);
        assert!((p.fraction_more_than(1) - 0.5).abs() < 1e-12);
        assert_eq!(p.cdf(), vec![(1, 0.5), (3, 1.0)]);
        let t = percentile_table(&days);
        assert_eq!(t.alpha_bytes, vec![1; 6]);
    }
}
