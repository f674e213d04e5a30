//! Data-door matching (003 §3.6.3, Fig. 3.14–3.16): which share of a day's α
//! prefix IDs, and of its α-bytes, is from or to a known data door (a
//! dedicated data-transfer server, e.g. `rftpexp.rhic.bnl.gov`).

use serde::{Deserialize, Serialize};

use super::alpha::DayReport;
use super::prefix::Prefix;
use crate::error::Result;

/// Known data-door addresses or prefixes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataDoors {
    pub prefixes: Vec<Prefix>,
}

impl DataDoors {
    /// Parse addresses or prefixes, one per item (`"198.51.100.7"`, `"203.0.113.0/24"`).
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Result<Self> {
        let prefixes = items
            .into_iter()
            .map(str::trim)
            .filter(|s| !s.is_empty() && !s.starts_with('#'))
            .map(str::parse)
            .collect::<Result<Vec<Prefix>>>()?;
        Ok(DataDoors { prefixes })
    }

    /// Whether a prefix holds or lies in a data door.
    pub fn matches(&self, p: &Prefix) -> bool {
        self.prefixes.iter().any(|d| d.overlaps(p))
    }
}

/// One day's data-door ratios.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DoorRatio {
    pub day: u64,
    pub ids_matched: u32,
    pub ids_total: u32,
    pub bytes_matched: u64,
    pub bytes_total: u64,
}

impl DoorRatio {
    /// Share of α prefix IDs from/to data doors (Fig. 3.14); 0 with no ID.
    pub fn id_ratio(&self) -> f64 {
        if self.ids_total == 0 {
            0.0
        } else {
            f64::from(self.ids_matched) / f64::from(self.ids_total)
        }
    }

    /// Share of α-bytes from/to data doors (Fig. 3.15); 0 with no α-bytes.
    pub fn byte_ratio(&self) -> f64 {
        if self.bytes_total == 0 {
            0.0
        } else {
            self.bytes_matched as f64 / self.bytes_total as f64
        }
    }
}

/// The day's ratios: an α prefix ID matches when its source or its
/// destination prefix holds a data door ("from/to data doors").
pub fn door_ratio(day: &DayReport, doors: &DataDoors) -> DoorRatio {
    let mut r = DoorRatio {
        day: day.day,
        ids_matched: 0,
        ids_total: 0,
        bytes_matched: 0,
        bytes_total: 0,
    };
    for p in &day.prefix_flows {
        r.ids_total += 1;
        r.bytes_total = r.bytes_total.saturating_add(p.alpha_bytes);
        if doors.matches(&p.id.src) || doors.matches(&p.id.dst) {
            r.ids_matched += 1;
            r.bytes_matched = r.bytes_matched.saturating_add(p.alpha_bytes);
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::alpha::PrefixFlow;
    use crate::flows::prefix::PrefixId;

    #[test]
    fn ratios_by_ids_and_bytes() {
        let doors = DataDoors::parse(["# DTNs", "10.0.0.7", "", "10.5.0.0/16"]).unwrap();
        assert_eq!(doors.prefixes.len(), 2);
        let pf = |s: &str, d: &str, b: u64| PrefixFlow {
            id: PrefixId::of(s.parse().unwrap(), d.parse().unwrap(), 24, 64),
            alpha_bytes: b,
            alpha_time_ns: 0,
            alpha_reports: 1,
        };
        let day = DayReport {
            day: 3,
            start_ns: 0,
            reports: 0,
            est_bytes: 0,
            est_packets: 0,
            alpha_reports: 0,
            alpha_flows: vec![],
            prefix_flows: vec![
                pf("10.0.0.1", "10.9.0.1", 300), // /24 holds door 10.0.0.7
                pf("10.8.0.1", "10.5.3.1", 100), // dst inside door /16
                pf("10.8.0.1", "10.6.0.1", 100),
            ],
        };
        let r = door_ratio(&day, &doors);
        assert_eq!((r.ids_matched, r.ids_total), (2, 3));
        assert!((r.byte_ratio() - 0.8).abs() < 1e-12);
        assert!(DataDoors::parse(["10.0.0.300"]).is_err());
    }
}
