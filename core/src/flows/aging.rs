//! The nightly firewall filter F_i with aging, and its effectiveness
//! (003 §3.4.1, §3.6.1, Table 3.7, Fig. 3.10/3.11).
//!
//! After day i, every α prefix ID of day i is (re)stamped `last_seen = i`, and
//! F_i = { id : i − last_seen(id) < A }. Effectiveness is the share of α-bytes
//! of day i whose prefix ID was already in F_{i−1}, the filter in force during
//! day i. The dissertation does not say whether a prefix first seen earlier the
//! *same* day counts; a nightly run cannot redirect it, so it does not
//! (notes §4.4, §12).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::alpha::DayReport;
use super::prefix::PrefixId;
use crate::error::{Error, Result};

/// F_i: α prefix IDs with their last day of α activity.
#[derive(Debug, Clone, Default)]
pub struct AgingFilter {
    aging_days: u32,
    last_seen: HashMap<PrefixId, u64>,
    /// The last day folded in (the filter is F_{today}).
    today: Option<u64>,
}

impl AgingFilter {
    /// An empty filter that forgets IDs after `aging_days` days without α flows.
    pub fn new(aging_days: u32) -> Result<Self> {
        if aging_days == 0 {
            return Err(Error::invalid(
                "aging_days 0 would empty the filter every night; use >= 1 (document: 7, 14, 30, 214)",
            ));
        }
        Ok(AgingFilter {
            aging_days,
            last_seen: HashMap::new(),
            today: None,
        })
    }

    /// Whether `id` is in the filter as it stands after the last folded day.
    pub fn contains(&self, id: &PrefixId) -> bool {
        match (self.today, self.last_seen.get(id)) {
            (Some(t), Some(&l)) => t - l < u64::from(self.aging_days),
            _ => false,
        }
    }

    /// Fold in day `day`'s α prefix IDs and age the filter to F_day. Days must
    /// not go backwards; skipped days (no records) age the filter too.
    pub fn advance<'a>(
        &mut self,
        day: u64,
        ids: impl IntoIterator<Item = &'a PrefixId>,
    ) -> Result<()> {
        if let Some(t) = self.today {
            if day < t {
                return Err(Error::invalid(format!(
                    "aging filter is at day {t}; day {day} comes too late (feed days in order)"
                )));
            }
        }
        for id in ids {
            self.last_seen.insert(*id, day);
        }
        self.today = Some(day);
        // Drop rules whose last α day is A or more days ago (§3.4.1 aging).
        let a = u64::from(self.aging_days);
        self.last_seen.retain(|_, &mut l| day - l < a);
        Ok(())
    }

    /// Number of rules in the filter (Fig. 3.11).
    pub fn len(&self) -> usize {
        self.last_seen.len()
    }

    /// Whether the filter has no rule.
    pub fn is_empty(&self) -> bool {
        self.last_seen.is_empty()
    }

    /// The rules, sorted.
    pub fn rules(&self) -> Vec<PrefixId> {
        let mut v: Vec<PrefixId> = self.last_seen.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

/// One day of the effectiveness evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayEffect {
    pub day: u64,
    /// α-bytes whose prefix ID was in F_{i−1}.
    pub redirected_bytes: u64,
    /// All α-bytes of the day.
    pub alpha_bytes: u64,
    /// α prefix IDs of the day not in F_{i−1} (Fig. 3.8 when A never ages).
    pub new_ids: u32,
    /// Filter size after the night's update, |F_i| (Fig. 3.11).
    pub filter_rules: u32,
}

/// Effectiveness for one aging value (one cell pair of Table 3.7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgingEvaluation {
    pub aging_days: u32,
    pub per_day: Vec<DayEffect>,
    /// Σ redirected / Σ α-bytes over all days (Table 3.7); 0 when there are no α-bytes.
    pub effectiveness: f64,
    /// Largest filter size over the period.
    pub max_filter_rules: u32,
}

impl AgingEvaluation {
    /// Effectiveness per block of `days_per_block` consecutive interval indices
    /// (e.g. 30 for the monthly bars of Fig. 3.10): (first day of block, ratio).
    pub fn by_block(&self, days_per_block: u64) -> Vec<(u64, f64)> {
        let b = days_per_block.max(1);
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for d in &self.per_day {
            let k = d.day / b * b;
            match out.last_mut() {
                Some(last) if last.0 == k => {
                    last.1 = last.1.saturating_add(d.redirected_bytes);
                    last.2 = last.2.saturating_add(d.alpha_bytes);
                }
                _ => out.push((k, d.redirected_bytes, d.alpha_bytes)),
            }
        }
        out.into_iter()
            .map(|(k, r, t)| (k, if t == 0 { 0.0 } else { r as f64 / t as f64 }))
            .collect()
    }
}

/// Table 3.7 semantics over day reports in day order.
pub fn evaluate(days: &[DayReport], aging_days: u32) -> Result<AgingEvaluation> {
    let mut f = AgingFilter::new(aging_days)?;
    let mut per_day = Vec::with_capacity(days.len());
    let (mut red, mut tot) = (0u128, 0u128);
    let mut max_rules = 0u32;
    for d in days {
        let mut e = DayEffect {
            day: d.day,
            redirected_bytes: 0,
            alpha_bytes: 0,
            new_ids: 0,
            filter_rules: 0,
        };
        // F_{i−1} must be the filter of the previous *calendar* day: age it to
        // day i − 1 first, so a gap in the data still ages rules.
        if d.day > 0 {
            if let Some(t) = f.today {
                if d.day - 1 > t {
                    f.advance(d.day - 1, [].iter())?;
                }
            }
        }
        for p in &d.prefix_flows {
            e.alpha_bytes = e.alpha_bytes.saturating_add(p.alpha_bytes);
            if f.contains(&p.id) {
                e.redirected_bytes = e.redirected_bytes.saturating_add(p.alpha_bytes);
            } else {
                e.new_ids += 1;
            }
        }
        f.advance(d.day, d.prefix_flows.iter().map(|p| &p.id))?;
        e.filter_rules = f.len() as u32;
        max_rules = max_rules.max(e.filter_rules);
        red += u128::from(e.redirected_bytes);
        tot += u128::from(e.alpha_bytes);
        per_day.push(e);
    }
    Ok(AgingEvaluation {
        aging_days,
        per_day,
        effectiveness: if tot == 0 {
            0.0
        } else {
            red as f64 / tot as f64
        },
        max_filter_rules: max_rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::alpha::PrefixFlow;

    fn id(s: u8) -> PrefixId {
        PrefixId::of(
            format!("10.{s}.0.1").parse().unwrap(),
            "10.200.0.1".parse().unwrap(),
            24,
            64,
        )
    }

    fn day(i: u64, flows: &[(u8, u64)]) -> DayReport {
        DayReport {
            day: i,
            start_ns: 0,
            reports: 0,
            est_bytes: 0,
            est_packets: 0,
            alpha_reports: 0,
            alpha_flows: vec![],
            prefix_flows: flows
                .iter()
                .map(|&(s, b)| PrefixFlow {
                    id: id(s),
                    alpha_bytes: b,
                    alpha_time_ns: 0,
                    alpha_reports: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn same_day_prefixes_are_not_redirected() {
        let days = [day(0, &[(1, 100)]), day(1, &[(1, 300), (2, 100)])];
        let ev = evaluate(&days, 30).unwrap();
        assert_eq!(ev.per_day[0].redirected_bytes, 0);
        assert_eq!(ev.per_day[1].redirected_bytes, 300);
        assert_eq!(ev.per_day[1].new_ids, 1);
        assert!((ev.effectiveness - 300.0 / 500.0).abs() < 1e-12);
    }

    #[test]
    fn aging_forgets_after_a_days_even_across_gaps() {
        // Seen on day 0; back on day 7. With A = 7, F_6 = {id: 6 − 0 < 7} still holds it.
        let days = [day(0, &[(1, 10)]), day(7, &[(1, 10)])];
        assert_eq!(evaluate(&days, 7).unwrap().per_day[1].redirected_bytes, 10);
        // Back on day 8: F_7 = {id: 7 − 0 < 7} is empty.
        let days = [day(0, &[(1, 10)]), day(8, &[(1, 10)])];
        let ev = evaluate(&days, 7).unwrap();
        assert_eq!(ev.per_day[1].redirected_bytes, 0);
        assert_eq!(
            evaluate(&days, 214).unwrap().per_day[1].redirected_bytes,
            10
        );
    }

    #[test]
    fn filter_size_levels_off_with_aging() {
        // A new ID every day: without aging the filter grows, with A = 3 it stays at 3.
        let days: Vec<DayReport> = (0..20).map(|i| day(i, &[(i as u8, 1)])).collect();
        assert_eq!(evaluate(&days, 214).unwrap().max_filter_rules, 20);
        let ev = evaluate(&days, 3).unwrap();
        assert_eq!(ev.max_filter_rules, 3);
        assert_eq!(ev.per_day.last().unwrap().filter_rules, 3);
    }

    #[test]
    fn out_of_order_days_are_an_error() {
        let mut f = AgingFilter::new(5).unwrap();
        f.advance(3, [].iter()).unwrap();
        assert!(f
            .advance(2, [].iter())
            .unwrap_err()
            .to_string()
            .contains("in order"));
        assert!(AgingFilter::new(0).is_err());
    }

    #[test]
    fn blocks_group_days() {
        let days = [day(0, &[(1, 10)]), day(1, &[(1, 30)]), day(30, &[(1, 5)])];
        let ev = evaluate(&days, 214).unwrap();
        let b = ev.by_block(30);
        assert_eq!(b.len(), 2);
        assert!((b[0].1 - 0.75).abs() < 1e-12);
        assert!((b[1].1 - 1.0).abs() < 1e-12);
    }
}
