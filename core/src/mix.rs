//! Background-mix labels: how many flows of which congestion control share the
//! bottleneck (000 §3.1, Table 6.1), and the derived views the OPS decision uses
//! (000 §4.1: "BBR present", "heterogeneous").
//!
//! Parsing a label and asking the questions OPS asks:
//!
//! ```
//! use opsel::mix::Mix;
//!
//! let m = Mix::parse("B1-C1")?;
//! assert!(m.bbr_present() && m.heterogeneous());
//! assert_eq!((m.count("bbr"), m.count("cubic"), m.total()), (1, 1, 2));
//! assert_eq!(m.to_string(), "bbr:1-cubic:1"); // canonical general form
//! assert_eq!(Mix::parse("bbr:1-cubic:1")?, m);
//! // The background a BBR sender sees when it is itself one of the flows.
//! assert!(!m.without_one("bbr").unwrap().bbr_present());
//! assert_eq!(Mix::parse("B0-C0")?, Mix::empty());
//! assert!(Mix::parse("X1").is_err());
//! # Ok::<(), opsel::Error>(())
//! ```

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fmt;

/// The six classes of 000 Table 6.1, in the thesis's order.
pub const SIX_CLASSES: [&str; 6] = ["B0-C0", "B0-C1", "B1-C0", "B1-C1", "B1-B1", "C1-C1"];

/// A background mix: flow count per congestion-control name (lower case).
///
/// Parsed from the thesis notation (`B1-C1`, `B1-B1` = two BBR flows, `B0-C0` =
/// empty) or the general form `bbr:2-cubic:1`. Letters: B = bbr, C = cubic,
/// R = reno. Counts of repeated segments add up.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Mix {
    counts: BTreeMap<String, u32>,
}

impl Mix {
    /// The empty background.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Build from (cca, count) pairs; zero counts are dropped.
    pub fn from_counts<'a>(pairs: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let mut m = Mix::empty();
        for (cca, n) in pairs {
            if n > 0 {
                *m.counts.entry(cca.to_ascii_lowercase()).or_insert(0) += n;
            }
        }
        m
    }

    /// Parse a label such as `B1-C1`, `C1-C1`, `b1c0` (iPerfOPS log form) or `bbr:2-cubic:1`.
    pub fn parse(label: &str) -> Result<Self> {
        let s = label.trim();
        if s.is_empty() {
            return Err(Error::invalid(
                "empty mix label; expected e.g. \"B1-C1\" or \"bbr:1-cubic:1\"",
            ));
        }
        let mut m = Mix::empty();
        for seg in split_segments(s) {
            let (cca, n) = parse_segment(seg).ok_or_else(|| {
                Error::invalid(format!(
                    "mix label {label:?} has a bad segment {seg:?}; expected <letter><count> (B1, C0, R2) or <cca>:<count> (bbr:2)"
                ))
            })?;
            if n > 0 {
                *m.counts.entry(cca).or_insert(0) += n;
            }
        }
        Ok(m)
    }

    /// Number of flows using `cca` (case-insensitive).
    pub fn count(&self, cca: &str) -> u32 {
        self.counts
            .get(&cca.to_ascii_lowercase())
            .copied()
            .unwrap_or(0)
    }

    /// Total number of background flows.
    pub fn total(&self) -> u32 {
        self.counts.values().sum()
    }

    /// (cca, count) pairs with count > 0, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.counts.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// This mix with one flow of `cca` fewer, or `None` if it has no `cca`
    /// flow. The background seen by a sender that is itself one of the flows.
    pub fn without_one(&self, cca: &str) -> Option<Mix> {
        let key = cca.to_ascii_lowercase();
        let n = *self.counts.get(&key)?;
        let mut m = self.clone();
        if n > 1 {
            m.counts.insert(key, n - 1);
        } else {
            m.counts.remove(&key);
        }
        Some(m)
    }

    /// 000 §4.1 scenario 1: is at least one BBR flow present?
    pub fn bbr_present(&self) -> bool {
        self.count("bbr") > 0
    }

    /// 000 §4.1 scenario 2: flows of more than one CCA share the path. The thesis
    /// leaves B0-C0 unassigned [gap 000 §10]; an empty mix is not heterogeneous here.
    pub fn heterogeneous(&self) -> bool {
        self.counts.len() > 1
    }

    /// Canonical general form, e.g. `bbr:1-cubic:1`; `none` for the empty mix.
    pub fn canonical(&self) -> String {
        if self.counts.is_empty() {
            return "none".to_string();
        }
        self.counts
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join("-")
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// A mix serializes as its canonical form (`"bbr:1-cubic:1"`, `"none"`).
impl serde::Serialize for Mix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.canonical())
    }
}

impl std::str::FromStr for Mix {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Mix::parse(s)
    }
}

/// `B1-C1` → [B1, C1]; `b1c0` (no separator) → [b1, c0]; `bbr:2-cubic:1` → [bbr:2, cubic:1].
fn split_segments(s: &str) -> Vec<&str> {
    if s.contains('-') || s.contains(':') {
        return s.split('-').collect();
    }
    // Compact iPerfOPS form: letter followed by digits, repeated.
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = s.as_bytes();
    for i in 1..bytes.len() {
        if bytes[i].is_ascii_alphabetic() && bytes[i - 1].is_ascii_digit() {
            out.push(&s[start..i]);
            start = i;
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_segment(seg: &str) -> Option<(String, u32)> {
    let seg = seg.trim();
    if let Some((name, n)) = seg.split_once(':') {
        let name = name.trim().to_ascii_lowercase();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        return Some((name, n.trim().parse().ok()?));
    }
    let mut chars = seg.chars();
    let letter = chars.next()?;
    let n: u32 = chars.as_str().parse().ok()?;
    let cca = match letter.to_ascii_uppercase() {
        'B' => "bbr",
        'C' => "cubic",
        'R' => "reno",
        _ => return None,
    };
    Some((cca.to_string(), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_one_removes_one_flow_of_that_cca() {
        let m = |l: &str| Mix::parse(l).unwrap();
        assert_eq!(m("C1-C1").without_one("cubic"), Some(m("B0-C1")));
        assert_eq!(m("B1-C1").without_one("BBR"), Some(m("B0-C1")));
        assert_eq!(m("B1-C1").without_one("cubic"), Some(m("B1-C0")));
        assert_eq!(m("B0-C1").without_one("cubic"), Some(Mix::empty()));
        assert_eq!(m("B1-B1").without_one("cubic"), None);
        assert_eq!(Mix::empty().without_one("bbr"), None);
    }

    #[test]
    fn six_classes_table_6_1() {
        // 000 Table 6.1: (#BBR, #CUBIC) per label.
        let expect = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (0, 2)];
        for (label, (b, c)) in SIX_CLASSES.iter().zip(expect) {
            let m = Mix::parse(label).unwrap();
            assert_eq!((m.count("bbr"), m.count("cubic")), (b, c), "{label}");
        }
    }

    #[test]
    fn derived_views() {
        let bbr: Vec<bool> = SIX_CLASSES
            .iter()
            .map(|l| Mix::parse(l).unwrap().bbr_present())
            .collect();
        assert_eq!(bbr, [false, false, true, true, true, false]);
        let het: Vec<bool> = SIX_CLASSES
            .iter()
            .map(|l| Mix::parse(l).unwrap().heterogeneous())
            .collect();
        assert_eq!(het, [false, false, false, true, false, false]);
    }

    #[test]
    fn general_and_compact_forms() {
        assert_eq!(Mix::parse("b1c0").unwrap(), Mix::parse("B1-C0").unwrap());
        assert_eq!(
            Mix::parse("bbr:2-cubic:1").unwrap().canonical(),
            "bbr:2-cubic:1"
        );
        assert_eq!(Mix::parse("B0-C0").unwrap().canonical(), "none");
        assert_eq!(Mix::parse("R1-C1").unwrap().count("reno"), 1);
    }

    #[test]
    fn bad_labels_are_errors() {
        for bad in ["", "X1", "B", "B-1", "bbr:x", ":2", "B1--C1"] {
            let e = Mix::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains("label") || e.to_string().contains("segment"),
                "{bad}: {e}"
            );
        }
    }
}
