//! The selection step of the OPS cycle (000 §1.2 step 3, §4.1): map the
//! recognised background mix to the congestion control to use.

use super::classifier::Classified;
use crate::error::{Error, Result};
use crate::mix::Mix;
use crate::probe::CcaName;
use std::collections::BTreeMap;

/// Chooses a CCA from a classification. User policies implement this trait
/// (bindings wrap a Python/Node callback or a C function pointer in it).
pub trait Policy {
    /// The CCA for the steady phase after this classification.
    fn select(&mut self, classified: &Classified) -> Result<CcaName>;

    /// Check up front that every class the classifier can output has an
    /// answer, so a transfer never fails mid-way on an unmapped label.
    fn check_classes(&self, classes: &[Mix]) -> Result<()> {
        let _ = classes;
        Ok(())
    }

    /// Feedback hook for learning policies (002 DPS, [`crate::dps::DpsPolicy`]):
    /// one sampling interval's measurements of the transfer on the CCA the
    /// policy chose (RTT and delivery rate from `TCP_INFO`, receiver goodput
    /// when reported). Drivers pass it during the steady phase only: the
    /// probe's bursts and silences are not the chosen CCA's performance.
    /// Default: ignored, so fixed policies need not implement it.
    fn observe(&mut self, feedback: &crate::dps::Feedback) -> Result<()> {
        let _ = feedback;
        Ok(())
    }
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        (**self).select(c)
    }
    fn check_classes(&self, classes: &[Mix]) -> Result<()> {
        (**self).check_classes(classes)
    }
    fn observe(&mut self, feedback: &crate::dps::Feedback) -> Result<()> {
        (**self).observe(feedback)
    }
}

/// The thesis's decision stump (000 §4.1, Fig 6.8): BBR present in the
/// background → BBR (BBR is fair to BBR and still claims its share), otherwise
/// CUBIC (keeps a CUBIC-only network CUBIC-only). So B0-C0 → cubic and
/// B1-C1 → bbr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stump {
    /// Choice when at least one BBR flow is present (default bbr).
    pub bbr_present: CcaName,
    /// Choice otherwise (default cubic).
    pub otherwise: CcaName,
}

impl Default for Stump {
    fn default() -> Self {
        Self {
            bbr_present: CcaName::BBR,
            otherwise: CcaName::CUBIC,
        }
    }
}

impl Policy for Stump {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        Ok(if c.mix.bbr_present() {
            self.bbr_present
        } else {
            self.otherwise
        })
    }
}

/// A table from mix label to CCA, e.g. `B1-C1=bbr, B0-C1=cubic, *=cubic`.
/// Labels are compared as mixes, so `B1-C1`, `b1c1` and `bbr:1-cubic:1` are
/// the same key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePolicy {
    table: BTreeMap<String, (Mix, CcaName)>,
    default: Option<CcaName>,
}

impl TablePolicy {
    /// Build from (label, cca) pairs and an optional fallback for labels not
    /// in the table. Duplicate labels (after canonicalisation) are an error.
    pub fn new<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        default: Option<&str>,
    ) -> Result<Self> {
        let mut table = BTreeMap::new();
        for (label, cca) in pairs {
            let mix = Mix::parse(label)?;
            let cca = CcaName::new(cca)?;
            let key = mix.canonical();
            if table.insert(key.clone(), (mix, cca)).is_some() {
                return Err(Error::invalid(format!(
                    "policy table lists mix {label:?} ({key}) twice; keep one entry per mix"
                )));
            }
        }
        let default = default.map(CcaName::new).transpose()?;
        if table.is_empty() && default.is_none() {
            return Err(Error::invalid(
                "policy table is empty; give entries like \"B1-C1=bbr\" or a default \"*=cubic\"",
            ));
        }
        Ok(Self { table, default })
    }

    /// Parse `label=cca` entries separated by `,` or `;`; `*=cca` is the
    /// fallback. Example: `"B1-C0=bbr, B1-C1=bbr, B1-B1=bbr, *=cubic"`.
    pub fn parse(spec: &str) -> Result<Self> {
        let mut pairs = Vec::new();
        let mut default = None;
        for entry in spec
            .split([',', ';'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let (label, cca) = entry.split_once('=').ok_or_else(|| {
                Error::invalid(format!(
                    "policy entry {entry:?} has no '='; write <mix>=<cca>, e.g. \"B1-C1=bbr\""
                ))
            })?;
            let (label, cca) = (label.trim(), cca.trim());
            if label == "*" {
                if default.replace(cca).is_some() {
                    return Err(Error::invalid(
                        "policy table has two '*' defaults; keep one",
                    ));
                }
            } else {
                pairs.push((label, cca));
            }
        }
        Self::new(pairs, default)
    }

    /// Every CCA the table can answer (entries and fallback).
    pub fn ccas(&self) -> impl Iterator<Item = CcaName> + '_ {
        self.table.values().map(|(_, c)| *c).chain(self.default)
    }

    /// The CCA for a mix, or an error naming the label and the known labels.
    pub fn lookup(&self, mix: &Mix) -> Result<CcaName> {
        if let Some((_, cca)) = self.table.get(&mix.canonical()) {
            return Ok(*cca);
        }
        self.default.ok_or_else(|| {
            Error::invalid(format!(
                "policy table has no entry for mix {} and no '*' default; known mixes: {}; add an entry or a default",
                mix,
                self.table.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

impl Policy for TablePolicy {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        self.lookup(&c.mix)
    }
    fn check_classes(&self, classes: &[Mix]) -> Result<()> {
        classes.iter().try_for_each(|m| self.lookup(m).map(|_| ()))
    }
}

/// A user policy from a closure: `FnPolicy(|c: &Classified| Ok(CcaName::BBR))`.
pub struct FnPolicy<F>(pub F);

impl<F: FnMut(&Classified) -> Result<CcaName>> Policy for FnPolicy<F> {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        (self.0)(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::SIX_CLASSES;

    fn classified(label: &str) -> Classified {
        Classified {
            mix: Mix::parse(label).unwrap(),
            class_index: 0,
            confidence: 1.0,
            distance: 0.0,
        }
    }

    #[test]
    fn stump_matches_000_fig_6_8() {
        // 000 §4.1: {B1-C0, B1-C1, B1-B1} → bbr, {B0-C0, B0-C1, C1-C1} → cubic.
        let want = ["cubic", "cubic", "bbr", "bbr", "bbr", "cubic"];
        let mut s = Stump::default();
        for (label, w) in SIX_CLASSES.iter().zip(want) {
            assert_eq!(s.select(&classified(label)).unwrap().as_str(), w, "{label}");
        }
    }

    #[test]
    fn table_policy() {
        let mut t = TablePolicy::parse("B1-C0=bbr; b1c1=BBR, bbr:2=bbr, *=cubic").unwrap();
        assert_eq!(t.select(&classified("B1-B1")).unwrap(), CcaName::BBR);
        assert_eq!(
            t.select(&classified("bbr:1-cubic:1")).unwrap(),
            CcaName::BBR
        );
        assert_eq!(t.select(&classified("C1-C1")).unwrap(), CcaName::CUBIC);
        let classes: Vec<Mix> = SIX_CLASSES.iter().map(|l| Mix::parse(l).unwrap()).collect();
        t.check_classes(&classes).unwrap();

        let strict = TablePolicy::parse("B1-C0=bbr").unwrap();
        let e = strict.check_classes(&classes).unwrap_err().to_string();
        assert!(
            e.contains("no entry for mix none") && e.contains("bbr:1"),
            "{e}"
        );
    }

    #[test]
    fn table_errors() {
        for (bad, needle) in [
            ("", "empty"),
            ("B1-C0", "no '='"),
            ("X1=bbr", "X1"),
            ("B1=bad cca", "congestion control name"),
            ("B1-C0=bbr,b1c0=cubic", "twice"),
            ("*=bbr,*=cubic", "two '*'"),
        ] {
            let e = TablePolicy::parse(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn user_closure_policy() {
        // A throughput-greedy user policy: always BBR unless the class is empty.
        let mut p = FnPolicy(|c: &Classified| {
            Ok(if c.mix.total() == 0 {
                CcaName::CUBIC
            } else {
                CcaName::BBR
            })
        });
        assert_eq!(p.select(&classified("B0-C0")).unwrap(), CcaName::CUBIC);
        assert_eq!(p.select(&classified("C1-C1")).unwrap(), CcaName::BBR);
    }
}
