//! The per-destination-prefix decision cache (notes 003 §7 item 5).
//!
//! 003's hypothesis H2: α flows repeat between the same /24 pairs; 91 % of
//! α-bytes came from pairs already seen within A = 30 days (§3.6.1,
//! Table 3.7). An OPS foreground transfer is an α flow by definition, so the
//! last background-mix class and CCA seen toward a destination prefix are a
//! useful prior for the next transfer there: OPS can confirm the prior with a
//! short probe instead of a full one. This module is the cache itself, sans-IO
//! apart from its file: lookups and records take the time as an argument.
//!
//! Aging follows the nightly filter's rule (003 §3.4.1, [`super::aging`]): an
//! entry is used only while `now − recorded < max_age`; older entries are
//! dropped on the next record or save. The cache is bounded: at `capacity`
//! entries, recording a new prefix evicts the least recently recorded one.
//!
//! The file is one JSON object (`"format": "opsel-decision-cache"`,
//! `"version": 1`) written atomically (temporary file, then rename). A file
//! that does not parse is refused with its path, never overwritten, so a
//! damaged cache loses nothing a user could still recover.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::prefix::Prefix;
use crate::error::{Error, Result};

/// The `format` field of a cache file.
pub const FORMAT: &str = "opsel-decision-cache";
/// The cache file version this build reads and writes.
pub const VERSION: u64 = 1;

/// Settings of a [`DecisionCache`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// IPv4 prefix length of the key (003 §3.5.2 evaluates /24 and /32; H2 is
    /// stated for /24).
    #[serde(default = "default_len_v4")]
    pub prefix_len_v4: u8,
    /// IPv6 prefix length of the key (not in the document; /64 is a subnet).
    #[serde(default = "default_len_v6")]
    pub prefix_len_v6: u8,
    /// Entries older than this are not used (003's aging A = 30 days, the
    /// setting at which H2's 91 % was measured).
    #[serde(default = "default_max_age_s")]
    pub max_age_s: f64,
    /// Most prefixes kept.
    #[serde(default = "default_capacity")]
    pub capacity: usize,
}

fn default_len_v4() -> u8 {
    24
}
fn default_len_v6() -> u8 {
    64
}
fn default_max_age_s() -> f64 {
    30.0 * 86_400.0
}
fn default_capacity() -> usize {
    4096
}

impl Default for CacheSpec {
    fn default() -> Self {
        CacheSpec {
            prefix_len_v4: default_len_v4(),
            prefix_len_v6: default_len_v6(),
            max_age_s: default_max_age_s(),
            capacity: default_capacity(),
        }
    }
}

impl CacheSpec {
    /// Every check, naming the offending value.
    pub fn validate(&self) -> Result<()> {
        if self.prefix_len_v4 > 32 {
            return Err(Error::invalid(format!(
                "prefix_len_v4 = {} exceeds 32",
                self.prefix_len_v4
            )));
        }
        if self.prefix_len_v6 > 128 {
            return Err(Error::invalid(format!(
                "prefix_len_v6 = {} exceeds 128",
                self.prefix_len_v6
            )));
        }
        if !(self.max_age_s.is_finite() && self.max_age_s > 0.0) {
            return Err(Error::invalid(format!(
                "max_age_s = {} must be a positive number of seconds (003 uses 7 to 214 days)",
                self.max_age_s
            )));
        }
        if self.capacity == 0 || self.capacity > 1_000_000 {
            return Err(Error::invalid(format!(
                "capacity = {} must be in 1..=1000000",
                self.capacity
            )));
        }
        Ok(())
    }

    /// The cache key of a destination address.
    pub fn key(&self, addr: IpAddr) -> Prefix {
        let len = match addr {
            IpAddr::V4(_) => self.prefix_len_v4,
            IpAddr::V6(_) => self.prefix_len_v6,
        };
        Prefix::masked(addr, len)
    }
}

/// What OPS decided toward one prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Background-mix class label of the model (e.g. `B1-C1`).
    pub label: String,
    /// The CCA the policy chose for it.
    pub cca: String,
    /// The classifier's confidence in `label`, in [0, 1].
    pub confidence: f64,
    /// When it was decided, in seconds of the caller's clock (Unix time for a
    /// cache file shared between runs).
    pub at_s: f64,
}

/// A cache hit: the decision and how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Prior<'a> {
    pub prefix: Prefix,
    pub decision: &'a Decision,
    pub age_s: f64,
}

/// Last decision per destination prefix, with aging and a size bound.
#[derive(Debug, Clone)]
pub struct DecisionCache {
    spec: CacheSpec,
    entries: HashMap<Prefix, Decision>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    format: String,
    version: u64,
    spec: CacheSpec,
    entries: Vec<WireEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEntry {
    prefix: Prefix,
    #[serde(flatten)]
    decision: Decision,
}

impl DecisionCache {
    /// An empty cache.
    pub fn new(spec: CacheSpec) -> Result<Self> {
        spec.validate()?;
        Ok(DecisionCache {
            spec,
            entries: HashMap::new(),
        })
    }

    pub fn spec(&self) -> &CacheSpec {
        &self.spec
    }

    /// Entries held, including any that have aged out but were not dropped yet.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The decision recorded toward `dst`'s prefix, if it is younger than
    /// `max_age_s` at `now_s`. A decision from the future (a clock stepped
    /// back) is not used either.
    pub fn lookup(&self, dst: IpAddr, now_s: f64) -> Option<Prior<'_>> {
        let prefix = self.spec.key(dst);
        let d = self.entries.get(&prefix)?;
        let age_s = now_s - d.at_s;
        (age_s >= 0.0 && age_s < self.spec.max_age_s).then_some(Prior {
            prefix,
            decision: d,
            age_s,
        })
    }

    /// Record what OPS decided toward `dst` (replacing that prefix's entry).
    pub fn record(&mut self, dst: IpAddr, decision: Decision) -> Result<()> {
        if decision.label.is_empty() || decision.cca.is_empty() {
            return Err(Error::invalid(
                "a cached decision needs a class label and a CCA name",
            ));
        }
        if !(decision.confidence.is_finite() && (0.0..=1.0).contains(&decision.confidence)) {
            return Err(Error::invalid(format!(
                "confidence = {} must be in [0, 1]",
                decision.confidence
            )));
        }
        if !decision.at_s.is_finite() {
            return Err(Error::invalid(format!(
                "at_s = {} is not a time",
                decision.at_s
            )));
        }
        let now = decision.at_s;
        let key = self.spec.key(dst);
        self.expire(now);
        if !self.entries.contains_key(&key) && self.entries.len() >= self.spec.capacity {
            // Least recently recorded goes first (ties: the smaller prefix, so
            // eviction is deterministic).
            if let Some(old) = self
                .entries
                .iter()
                .min_by(|a, b| a.1.at_s.total_cmp(&b.1.at_s).then(a.0.cmp(b.0)))
                .map(|(p, _)| *p)
            {
                self.entries.remove(&old);
            }
        }
        self.entries.insert(key, decision);
        Ok(())
    }

    /// Forget `dst`'s prefix (a prior that turned out wrong).
    pub fn forget(&mut self, dst: IpAddr) -> bool {
        self.entries.remove(&self.spec.key(dst)).is_some()
    }

    /// Drop entries too old to be used at `now_s`.
    pub fn expire(&mut self, now_s: f64) {
        let max = self.spec.max_age_s;
        self.entries.retain(|_, d| now_s - d.at_s < max);
    }

    /// Entries sorted by prefix (for listing and for a stable file).
    pub fn entries(&self) -> Vec<(Prefix, &Decision)> {
        let mut v: Vec<_> = self.entries.iter().map(|(p, d)| (*p, d)).collect();
        v.sort_by_key(|a| a.0);
        v
    }

    pub fn to_json(&self) -> Result<String> {
        let wire = Wire {
            format: FORMAT.into(),
            version: VERSION,
            spec: self.spec,
            entries: self
                .entries()
                .into_iter()
                .map(|(prefix, d)| WireEntry {
                    prefix,
                    decision: d.clone(),
                })
                .collect(),
        };
        serde_json::to_string_pretty(&wire)
            .map_err(|e| Error::invalid(format!("cannot serialise the decision cache: {e}")))
    }

    pub fn from_json(text: &str) -> Result<Self> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::invalid(format!("not JSON: {e}")))?;
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            other => {
                return Err(Error::invalid(format!(
                    "format is {other:?}, expected {FORMAT:?}: not an opsel decision cache"
                )))
            }
        }
        match v.get("version").and_then(|x| x.as_u64()) {
            Some(VERSION) => {}
            other => {
                return Err(Error::invalid(format!(
                    "decision cache version {other:?}; this build reads version {VERSION}"
                )))
            }
        }
        let wire: Wire = serde_json::from_value(v)
            .map_err(|e| Error::invalid(format!("bad decision cache: {e}")))?;
        let mut cache = DecisionCache::new(wire.spec)?;
        for e in wire.entries {
            if e.prefix.len() != cache.spec.key(e.prefix.addr()).len() {
                return Err(Error::invalid(format!(
                    "entry {} does not have the cache's prefix length (/{} IPv4, /{} IPv6)",
                    e.prefix, cache.spec.prefix_len_v4, cache.spec.prefix_len_v6
                )));
            }
            cache.record(e.prefix.addr(), e.decision)?;
        }
        Ok(cache)
    }

    /// Read a cache file; a missing file is an empty cache with `spec`, and
    /// a file that exists but does not parse is an error naming it.
    pub fn load_or_new(path: impl AsRef<Path>, spec: CacheSpec) -> Result<Self> {
        let path = path.as_ref();
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_json(&text).map_err(|e| {
                Error::invalid(format!(
                    "{}: {e}; the file was left as it is (move it away to start a new cache)",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::new(spec),
            Err(e) => Err(Error::io(
                format!("cannot read decision cache {}", path.display()),
                e,
            )),
        }
    }

    /// Write the cache atomically (temporary file in the same directory, then
    /// rename), dropping entries that have aged out at `now_s`.
    pub fn save(&mut self, path: impl AsRef<Path>, now_s: f64) -> Result<()> {
        let path = path.as_ref();
        self.expire(now_s);
        crate::model::write_atomic(path, &self.to_json()?, "the decision cache")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn dec(label: &str, cca: &str, at_s: f64) -> Decision {
        Decision {
            label: label.into(),
            cca: cca.into(),
            confidence: 0.9,
            at_s,
        }
    }

    #[test]
    fn one_entry_per_24_and_aging_at_30_days() {
        let mut c = DecisionCache::new(CacheSpec::default()).unwrap();
        c.record(ip("10.1.2.3"), dec("B1-C1", "bbr", 1000.0))
            .unwrap();
        // Same /24, another host: the same entry.
        let p = c.lookup(ip("10.1.2.200"), 1000.0 + 86_400.0).unwrap();
        assert_eq!(p.prefix.to_string(), "10.1.2.0/24");
        assert_eq!(p.decision.cca, "bbr");
        assert_eq!(p.age_s, 86_400.0);
        // Another /24: no prior.
        assert!(c.lookup(ip("10.1.3.3"), 1000.0).is_none());
        // 30 days later the entry is too old (age < A is the filter's rule).
        assert!(c.lookup(ip("10.1.2.3"), 1000.0 + 30.0 * 86_400.0).is_none());
        assert!(c
            .lookup(ip("10.1.2.3"), 1000.0 + 30.0 * 86_400.0 - 1.0)
            .is_some());
        // A clock stepped back does not use a decision from the future.
        assert!(c.lookup(ip("10.1.2.3"), 999.0).is_none());
        // A newer record replaces the old one.
        c.record(ip("10.1.2.9"), dec("C1-C1", "cubic", 2000.0))
            .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c.lookup(ip("10.1.2.3"), 2000.0).unwrap().decision.label,
            "C1-C1"
        );
        assert!(c.forget(ip("10.1.2.1")));
        assert!(c.is_empty());
    }

    #[test]
    fn ipv6_keys_use_their_own_length() {
        let mut c = DecisionCache::new(CacheSpec::default()).unwrap();
        c.record(ip("2001:db8:1:2::5"), dec("B1-B1", "bbr", 0.0))
            .unwrap();
        assert!(c.lookup(ip("2001:db8:1:2:ffff::1"), 1.0).is_some());
        assert!(c.lookup(ip("2001:db8:1:3::5"), 1.0).is_none());
    }

    #[test]
    fn capacity_evicts_the_least_recently_recorded() {
        let spec = CacheSpec {
            capacity: 2,
            ..CacheSpec::default()
        };
        let mut c = DecisionCache::new(spec).unwrap();
        c.record(ip("10.0.1.1"), dec("B0-C1", "cubic", 1.0))
            .unwrap();
        c.record(ip("10.0.2.1"), dec("B0-C1", "cubic", 2.0))
            .unwrap();
        c.record(ip("10.0.1.1"), dec("B1-C1", "bbr", 3.0)).unwrap();
        c.record(ip("10.0.3.1"), dec("B1-B1", "bbr", 4.0)).unwrap();
        assert_eq!(c.len(), 2);
        assert!(
            c.lookup(ip("10.0.2.1"), 5.0).is_none(),
            "oldest record evicted"
        );
        assert!(c.lookup(ip("10.0.1.1"), 5.0).is_some());
        assert!(c.lookup(ip("10.0.3.1"), 5.0).is_some());
    }

    #[test]
    fn file_round_trip_and_damaged_files_are_left_alone() {
        let dir = std::env::temp_dir().join(format!("opsel-dcache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache.json");
        let _ = std::fs::remove_file(&path);
        let mut c = DecisionCache::load_or_new(&path, CacheSpec::default()).unwrap();
        assert!(c.is_empty());
        c.record(ip("10.9.8.7"), dec("B1-C1", "bbr", 100.0))
            .unwrap();
        c.record(ip("10.9.9.7"), dec("C1-C1", "cubic", 10.0))
            .unwrap();
        // Saving at t = 30 days + 50 s drops the entry recorded at 10 s.
        c.save(&path, 30.0 * 86_400.0 + 50.0).unwrap();
        let back = DecisionCache::load_or_new(&path, CacheSpec::default()).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            back.lookup(ip("10.9.8.1"), 200.0).unwrap().decision,
            &dec("B1-C1", "bbr", 100.0)
        );

        std::fs::write(
            &path,
            "{\"format\": \"opsel-decision-cache\", \"version\": 1, \"spec\": ",
        )
        .unwrap();
        let e = DecisionCache::load_or_new(&path, CacheSpec::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cache.json") && e.contains("left as it is"),
            "{e}"
        );
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .ends_with("\"spec\": "));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_input_is_refused_with_the_value() {
        let bad = |s: CacheSpec, want: &str| {
            let e = DecisionCache::new(s).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        };
        let d = CacheSpec::default();
        bad(
            CacheSpec {
                prefix_len_v4: 33,
                ..d
            },
            "prefix_len_v4 = 33",
        );
        bad(
            CacheSpec {
                prefix_len_v6: 129,
                ..d
            },
            "prefix_len_v6 = 129",
        );
        bad(
            CacheSpec {
                max_age_s: f64::NAN,
                ..d
            },
            "max_age_s = NaN",
        );
        bad(
            CacheSpec {
                max_age_s: 0.0,
                ..d
            },
            "max_age_s = 0",
        );
        bad(CacheSpec { capacity: 0, ..d }, "capacity = 0");
        let mut c = DecisionCache::new(d).unwrap();
        let mut x = dec("B1-C1", "bbr", 0.0);
        x.confidence = 1.5;
        assert!(c
            .record(ip("10.0.0.1"), x)
            .unwrap_err()
            .to_string()
            .contains("1.5"));
        assert!(c.record(ip("10.0.0.1"), dec("", "bbr", 0.0)).is_err());
        assert!(c
            .record(ip("10.0.0.1"), dec("B1-C1", "bbr", f64::INFINITY))
            .is_err());
        for (text, want) in [
            ("[]", "not an opsel decision cache"),
            ("{\"format\": \"opsel-model\"}", "not an opsel decision cache"),
            ("{\"format\": \"opsel-decision-cache\", \"version\": 9}", "version Some(9)"),
            (
                "{\"format\": \"opsel-decision-cache\", \"version\": 1, \"spec\": {}, \"entries\": [{\"prefix\": \"10.0.0.0/16\", \"label\": \"B1-C1\", \"cca\": \"bbr\", \"confidence\": 1, \"at_s\": 0}]}",
                "prefix length",
            ),
        ] {
            let e = DecisionCache::from_json(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
