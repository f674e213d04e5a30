//! The whole offline AFTES analysis over a record source (003 §3.5–3.6): α
//! prefix flows per day, persistence, Table 3.5 percentiles, effectiveness for
//! several aging values (Table 3.7), hapless-β groups, data-door ratios and the
//! relative-threshold baselines.
//!
//! Two streaming passes: the first finds each day's α prefix IDs and α flows,
//! the second classifies the reports inside those IDs (hapless β needs to
//! know the day's α flows before it sees their siblings). `open` is called
//! once per pass and must yield the same records both times.

use serde::{Deserialize, Serialize};

use super::aging::{evaluate, AgingEvaluation};
use super::alpha::{AlphaAggregator, PrefixFlow};
use super::baseline::{relative_thresholds, RelativeThresholds};
use super::doors::{door_ratio, DataDoors, DoorRatio};
use super::hapless::{HaplessCounts, HaplessPass};
use super::persistence::{percentile_table, PercentileTable, Persistence};
use super::record::FlowRecord;
use super::spec::AlphaSpec;
use crate::error::{Error, Result};

/// What to compute besides the per-day α report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StudySpec {
    pub alpha: AlphaSpec,
    /// Aging values to evaluate (Table 3.7: 7, 14, 30, 214).
    pub aging_days: Vec<u32>,
    /// Data-door addresses / prefixes (§3.6.3); empty = skip.
    pub data_doors: DataDoors,
}

impl Default for StudySpec {
    fn default() -> Self {
        StudySpec {
            alpha: AlphaSpec::default(),
            aging_days: vec![7, 14, 30, 214],
            data_doors: DataDoors::default(),
        }
    }
}

impl StudySpec {
    /// Check the α spec and the aging values.
    pub fn validate(&self) -> Result<()> {
        self.alpha.validate()?;
        if let Some(a) = self.aging_days.iter().find(|&&a| a == 0) {
            return Err(Error::invalid(format!(
                "aging value {a} in aging_days: each must be >= 1 day"
            )));
        }
        Ok(())
    }
}

/// One aggregation interval of the study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaySummary {
    pub day: u64,
    pub start_ns: u64,
    pub reports: u64,
    pub est_bytes: u64,
    pub alpha_reports: u64,
    /// Unique α 5-tuples (Fig. 3.6 peak: 1662).
    pub alpha_flows: u64,
    pub alpha_bytes: u64,
    pub alpha_time_ns: u64,
    /// α-bytes as a share of all corrected bytes of the day (Table 3.6 is monthly).
    pub alpha_byte_share: f64,
    pub prefix_flows: Vec<PrefixFlow>,
    pub hapless: HaplessCounts,
    pub doors: Option<DoorRatio>,
}

/// Persistence figures (§3.5.2, Fig. 3.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersistenceSummary {
    pub unique_ids: u64,
    pub max_days: u32,
    pub share_more_than_7_days: f64,
    pub share_more_than_15_days: f64,
    pub cdf: Vec<(u32, f64)>,
}

/// The study's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyReport {
    pub spec: StudySpec,
    pub records: u64,
    pub days: Vec<DaySummary>,
    pub aging: Vec<AgingEvaluation>,
    pub persistence: PersistenceSummary,
    pub percentiles: PercentileTable,
    pub hapless: HaplessCounts,
    /// (FT, WNP, Leftover) shares of hapless-β packets.
    pub hapless_packet_shares: (f64, f64, f64),
    /// Relative thresholds over all reports' corrected bytes (for contrast with H).
    /// The top-1 % and 50 %-of-bytes cuts need the sizes sorted, so the study
    /// keeps 8 bytes per record for them; everything else streams.
    pub baselines: RelativeThresholds,
}

/// Run the study. `open()` yields the records; it is called twice.
pub fn analyze<I>(spec: &StudySpec, mut open: impl FnMut() -> Result<I>) -> Result<StudyReport>
where
    I: Iterator<Item = Result<FlowRecord>>,
{
    spec.validate()?;
    let a = &spec.alpha;
    let mut agg = AlphaAggregator::new(a.clone())?;
    let mut sizes: Vec<u64> = Vec::new();
    let mut records = 0u64;
    for r in open()? {
        let r = r?;
        agg.push(&r)?;
        sizes.push(r.est_bytes(a.sampling_n(r.sampling_interval)));
        records += 1;
    }
    let day_reports = agg.finish();
    let mut pass = HaplessPass::new(a, &day_reports)?;
    let mut again = 0u64;
    for r in open()? {
        pass.push(&r?)?;
        again += 1;
    }
    if again != records {
        return Err(Error::invalid(format!(
            "the record source yielded {records} records on the first pass and {again} on the second; it must be re-readable"
        )));
    }
    let hapless_days = pass.finish();
    let mut total = HaplessCounts::default();
    let days: Vec<DaySummary> = day_reports
        .iter()
        .zip(hapless_days.iter())
        .map(|(d, (_, h))| {
            total.add(h);
            let ab = d.alpha_bytes();
            DaySummary {
                day: d.day,
                start_ns: d.start_ns,
                reports: d.reports,
                est_bytes: d.est_bytes,
                alpha_reports: d.alpha_reports,
                alpha_flows: d.alpha_flows.len() as u64,
                alpha_bytes: ab,
                alpha_time_ns: d.alpha_time_ns(),
                alpha_byte_share: if d.est_bytes == 0 {
                    0.0
                } else {
                    ab as f64 / d.est_bytes as f64
                },
                prefix_flows: d.prefix_flows.clone(),
                hapless: *h,
                doors: (!spec.data_doors.prefixes.is_empty())
                    .then(|| door_ratio(d, &spec.data_doors)),
            }
        })
        .collect();
    let aging = spec
        .aging_days
        .iter()
        .map(|&ad| evaluate(&day_reports, ad))
        .collect::<Result<Vec<_>>>()?;
    let p = Persistence::from_days(&day_reports);
    Ok(StudyReport {
        spec: spec.clone(),
        records,
        days,
        aging,
        persistence: PersistenceSummary {
            unique_ids: p.unique_ids() as u64,
            max_days: p.max_days(),
            share_more_than_7_days: p.fraction_more_than(7),
            share_more_than_15_days: p.fraction_more_than(15),
            cdf: p.cdf(),
        },
        percentiles: percentile_table(&day_reports),
        hapless_packet_shares: total.packet_shares(),
        hapless: total,
        baselines: relative_thresholds(&mut sizes),
    })
}

/// [`analyze`] over records already in memory.
pub fn analyze_slice(spec: &StudySpec, records: &[FlowRecord]) -> Result<StudyReport> {
    analyze(spec, || Ok(records.iter().copied().map(Ok)))
}
