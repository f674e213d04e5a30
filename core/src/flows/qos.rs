//! QoS advice as a Linux tc plan (003 Ch. 4, notes §7.2).
//!
//! 003's recommendation (§4.4, notes §6.4): **two queues (α / β), WFQ + PQ,
//! work-conserving transmitter, no policing**, with the α class selected by a
//! firewall filter on the α prefix IDs (§3.4.1: src/dst prefixes, never
//! ports). [`plan`] maps it onto what a Linux host has:
//!
//! - a root **htb** with one parent class at the link rate C;
//! - an α class (`rate = s_α·C`) and a β class (`rate = s_β·C`, the default
//!   class, so everything unmatched is β). `ceil = C` lends idle capacity
//!   across classes (the MX80's default work-conserving transmitter, Exp 1
//!   scenario 2); `ceil = rate` is the "strictly partitioned" mode of Exp 1
//!   scenario 3;
//! - priorities α before β when both borrow (003 Exp 2: α medium-high, β
//!   medium-low); β's protection comes from its guaranteed rate and its own
//!   buffer, not from priority;
//! - a **bfifo** leaf per class with `share × buffer` bytes: Fig. 4.2's
//!   strictly partitioned buffer;
//! - one **u32** filter per α prefix ID (the classifier this kernel family
//!   reliably has; `flower`, `basic` and `act_police` may be missing);
//! - **no policer** on α (Exp 3–5: policing cut TCP throughput 6.46 →
//!   0.34–0.61 Gb/s).
//!
//! The plan is data ([`TcPlan`]); [`TcPlan::commands`] renders it as `tc`
//! argument vectors and [`TcPlan::script`] as a shell script. Nothing here
//! runs a command.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::prefix::PrefixId;
use crate::error::{Error, Result};

/// Most α prefix IDs one plan classifies. u32 filters in one list are matched
/// linearly per packet; 003 H4 found the filter manageable with A = 30 (tens
/// to a few hundred /24 rules), so thousands means the input is not an α set.
pub const MAX_RULES: usize = 4096;

/// How idle capacity is shared between the two classes (003 Exp 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// `ceil = link`: a class may borrow what the other leaves idle (003's
    /// recommendation; MX80 default).
    WorkConserving,
    /// `ceil = rate`: each class is held to its share even when the other is
    /// idle (Exp 1 scenario 3: ping 102 ms instead of 2.1 ms).
    Strict,
}

/// The two-class configuration. Defaults: α 60 % / β 40 % (Exp 4, 5, 7),
/// work-conserving, α first when borrowing, 100 ms of buffer at the link rate
/// (notes §10: keep ≈ 100 ms as the MX80's 125 MB at 10 Gb/s, eq 4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QosSpec {
    /// Link (egress) rate C in bit/s; required (0 = unset).
    pub link_rate_bps: u64,
    /// α share s_α of the rate and the buffer, in (0, 1); β gets 1 − s_α.
    pub alpha_share: f64,
    pub sharing: Sharing,
    /// Total buffer in bytes, split by share; 0 = 100 ms at the link rate.
    pub buffer_bytes: u64,
    /// htb priorities (0 = served first when borrowing; 0..=7).
    pub alpha_prio: u8,
    pub beta_prio: u8,
    /// Largest packet on the link (bytes at L2 the qdisc sees); sizes the
    /// smallest useful bfifo and htb quantum.
    pub mtu_bytes: u32,
    /// Also send dst → src packets of each α prefix ID to the α class (for a
    /// device that carries both directions of the transfers).
    pub both_directions: bool,
}

impl Default for QosSpec {
    fn default() -> Self {
        QosSpec {
            link_rate_bps: 0,
            alpha_share: 0.6,
            sharing: Sharing::WorkConserving,
            buffer_bytes: 0,
            alpha_prio: 0,
            beta_prio: 1,
            mtu_bytes: 1514,
            both_directions: false,
        }
    }
}

/// Named starting points from 003's experiments.
pub fn preset(name: &str) -> Result<QosSpec> {
    let mut s = QosSpec::default();
    match name {
        // Exp 4/5/7: 60/40, work-conserving.
        "default" | "exp4" => {}
        // Exp 2: 95/5 of rate and buffer protected ping (60.4 → 2.3 ms).
        "exp2" => s.alpha_share = 0.95,
        // §3.2.2 testbed: WFQ 40/60 (β 40 %), work-conserving.
        "testbed" => s.alpha_share = 0.6,
        other => {
            return Err(Error::invalid(format!(
                "unknown QoS preset {other:?}; use default (60/40), exp2 (95/5) or testbed (60/40)"
            )))
        }
    }
    Ok(s)
}

impl QosSpec {
    /// The total buffer after defaults (100 ms at the link rate).
    pub fn effective_buffer_bytes(&self) -> u64 {
        if self.buffer_bytes > 0 {
            self.buffer_bytes
        } else {
            self.link_rate_bps / 8 / 10
        }
    }

    /// Check every field; errors name the value and what to do.
    pub fn validate(&self) -> Result<()> {
        if self.link_rate_bps == 0 {
            return Err(Error::invalid(
                "link_rate_bps is 0: give the egress link rate (e.g. --rate-mbps 100)",
            ));
        }
        if !(self.alpha_share.is_finite() && self.alpha_share > 0.0 && self.alpha_share < 1.0) {
            return Err(Error::invalid(format!(
                "alpha_share {} must be strictly between 0 and 1 (003 used 0.6 and 0.95)",
                self.alpha_share
            )));
        }
        for (what, p) in [
            ("alpha_prio", self.alpha_prio),
            ("beta_prio", self.beta_prio),
        ] {
            if p > 7 {
                return Err(Error::invalid(format!("{what} {p} is outside htb's 0..=7")));
            }
        }
        if !(64..=65_536).contains(&self.mtu_bytes) {
            return Err(Error::invalid(format!(
                "mtu_bytes {} is outside 64..=65536",
                self.mtu_bytes
            )));
        }
        let (ra, rb) = self.rates_bps();
        if ra < 8_000 || rb < 8_000 {
            return Err(Error::invalid(format!(
                "class rates {ra} / {rb} bit/s: each class needs at least 8 kbit/s; raise link_rate_bps or move alpha_share away from 0 and 1"
            )));
        }
        let (ba, bb) = self.buffers_bytes();
        let min = 2 * u64::from(self.mtu_bytes);
        if ba < min || bb < min {
            return Err(Error::invalid(format!(
                "class buffers {ba} / {bb} bytes: each bfifo needs at least two packets ({min} bytes); raise buffer_bytes (total {})",
                self.effective_buffer_bytes()
            )));
        }
        Ok(())
    }

    /// (α, β) rates in bit/s; they add up to the link rate.
    pub fn rates_bps(&self) -> (u64, u64) {
        let a = (self.link_rate_bps as f64 * self.alpha_share).round() as u64;
        (a, self.link_rate_bps.saturating_sub(a))
    }

    /// (α, β) bfifo limits in bytes (the strict buffer partition of Fig. 4.2).
    pub fn buffers_bytes(&self) -> (u64, u64) {
        let t = self.effective_buffer_bytes();
        let a = (t as f64 * self.alpha_share).round() as u64;
        (a, t.saturating_sub(a))
    }
}

/// One htb class of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcClass {
    /// e.g. "1:10".
    pub classid: String,
    pub parent: String,
    pub rate_bps: u64,
    pub ceil_bps: u64,
    /// None for the parent class.
    pub prio: Option<u8>,
    /// htb's quantum (bytes a class may send per round when borrowing).
    pub quantum_bytes: u64,
    /// The bfifo leaf under this class (handle, limit); None for the parent.
    pub leaf: Option<(String, u64)>,
}

/// One u32 filter: packets from `src` to `dst` go to `classid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcFilter {
    pub src: super::prefix::Prefix,
    pub dst: super::prefix::Prefix,
    pub classid: String,
    /// The filter priority (ip and ipv6 filters need distinct priorities).
    pub pref: u16,
}

/// The whole configuration, as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcPlan {
    pub spec: QosSpec,
    /// The class unmatched packets use ("1:20", β).
    pub default_class: String,
    pub classes: Vec<TcClass>,
    pub filters: Vec<TcFilter>,
    /// Advice that is not an error (e.g. a β share below 003 Exp 6's 30 %).
    pub notes: Vec<String>,
}

pub const ROOT: &str = "1:";
pub const PARENT: &str = "1:1";
pub const ALPHA_CLASS: &str = "1:10";
pub const BETA_CLASS: &str = "1:20";

/// Build the two-class plan for `ids` (duplicates merged) under `spec`.
pub fn plan<'a>(ids: impl IntoIterator<Item = &'a PrefixId>, spec: &QosSpec) -> Result<TcPlan> {
    spec.validate()?;
    let mut set: BTreeSet<(super::prefix::Prefix, super::prefix::Prefix)> = BTreeSet::new();
    for id in ids {
        if matches!(
            (id.src.addr(), id.dst.addr()),
            (IpAddr::V4(_), IpAddr::V6(_)) | (IpAddr::V6(_), IpAddr::V4(_))
        ) {
            return Err(Error::invalid(format!(
                "α prefix ID {id} mixes IPv4 and IPv6; no packet can match it"
            )));
        }
        set.insert((id.src, id.dst));
        if spec.both_directions {
            set.insert((id.dst, id.src));
        }
    }
    if set.is_empty() {
        return Err(Error::invalid(
            "no α prefix IDs: the plan would only rename the default queue; run `opsel flows report` over flow records that contain α reports, or give a prefix file",
        ));
    }
    if set.len() > MAX_RULES {
        return Err(Error::invalid(format!(
            "{} filter rules exceed {MAX_RULES}; age the α set (003 uses A = 30 days) or aggregate to /24",
            set.len()
        )));
    }
    let c = spec.link_rate_bps;
    let (ra, rb) = spec.rates_bps();
    let (ba, bb) = spec.buffers_bytes();
    let (ca, cb) = match spec.sharing {
        Sharing::WorkConserving => (c, c),
        Sharing::Strict => (ra, rb),
    };
    // htb lends excess in proportion to quantum: keep the quanta in the
    // ratio of the shares, within [MTU, 200 000] (htb warns above that).
    let mtu = u64::from(spec.mtu_bytes);
    let q = |share: f64| ((200_000.0 * share).round() as u64).max(mtu);
    let classes = vec![
        TcClass {
            classid: PARENT.into(),
            parent: ROOT.into(),
            rate_bps: c,
            ceil_bps: c,
            prio: None,
            quantum_bytes: q(1.0),
            leaf: None,
        },
        TcClass {
            classid: ALPHA_CLASS.into(),
            parent: PARENT.into(),
            rate_bps: ra,
            ceil_bps: ca,
            prio: Some(spec.alpha_prio),
            quantum_bytes: q(spec.alpha_share),
            leaf: Some(("10:".into(), ba)),
        },
        TcClass {
            classid: BETA_CLASS.into(),
            parent: PARENT.into(),
            rate_bps: rb,
            ceil_bps: cb,
            prio: Some(spec.beta_prio),
            quantum_bytes: q(1.0 - spec.alpha_share),
            leaf: Some(("20:".into(), bb)),
        },
    ];
    let filters = set
        .into_iter()
        .map(|(src, dst)| TcFilter {
            pref: if src.addr().is_ipv4() { 10 } else { 11 },
            src,
            dst,
            classid: ALPHA_CLASS.into(),
        })
        .collect();
    let mut notes = Vec::new();
    if 1.0 - spec.alpha_share < 0.3 {
        notes.push(format!(
            "β share {:.0} % is below 30 %: 003 Exp 6 lost 5–39 % of β UDP at a 20 % share when β carried 20–30 % of the link; size β for its peak",
            (1.0 - spec.alpha_share) * 100.0
        ));
    }
    if spec.sharing == Sharing::Strict {
        notes.push(
            "strict partition: a class cannot borrow idle capacity (003 Exp 1 scenario 3: ping 2.1 → 102 ms); 003 recommends work-conserving".into(),
        );
    }
    Ok(TcPlan {
        spec: spec.clone(),
        default_class: BETA_CLASS.into(),
        classes,
        filters,
        notes,
    })
}

fn s(x: impl ToString) -> String {
    x.to_string()
}

impl TcPlan {
    /// The `tc` argument vectors (without the program name) that install the
    /// plan on `dev`, in order. `netns` adds `-n NS` to each.
    pub fn commands(&self, dev: &str, netns: Option<&str>) -> Result<Vec<Vec<String>>> {
        check_name("device", dev)?;
        if let Some(ns) = netns {
            check_name("namespace", ns)?;
        }
        let head = |v: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = Vec::new();
            if let Some(ns) = netns {
                a.extend([s("-n"), s(ns)]);
            }
            a.extend(v.iter().map(s));
            a
        };
        let minor = self.default_class.trim_start_matches("1:");
        let mut out = vec![head(&[
            "qdisc", "add", "dev", dev, "root", "handle", ROOT, "htb", "default", minor,
        ])];
        for c in &self.classes {
            let mut a = head(&["class", "add", "dev", dev, "parent", &c.parent]);
            a.extend([
                s("classid"),
                c.classid.clone(),
                s("htb"),
                s("rate"),
                format!("{}bit", c.rate_bps),
                s("ceil"),
                format!("{}bit", c.ceil_bps),
                s("quantum"),
                s(c.quantum_bytes),
            ]);
            if let Some(p) = c.prio {
                a.extend([s("prio"), s(p)]);
            }
            out.push(a);
            if let Some((h, limit)) = &c.leaf {
                let mut a = head(&["qdisc", "add", "dev", dev, "parent", &c.classid]);
                a.extend([s("handle"), h.clone(), s("bfifo"), s("limit"), s(limit)]);
                out.push(a);
            }
        }
        for f in &self.filters {
            let (proto, m) = if f.src.addr().is_ipv4() {
                ("ip", "ip")
            } else {
                ("ipv6", "ip6")
            };
            let mut a = head(&["filter", "add", "dev", dev, "parent", ROOT]);
            a.extend([
                s("protocol"),
                s(proto),
                s("prio"),
                s(f.pref),
                s("u32"),
                s("match"),
                s(m),
                s("src"),
                s(f.src),
                s("match"),
                s(m),
                s("dst"),
                s(f.dst),
                s("flowid"),
                f.classid.clone(),
            ]);
            out.push(a);
        }
        Ok(out)
    }

    /// The argument vector that removes the plan (and any root qdisc) from `dev`.
    pub fn remove_command(dev: &str, netns: Option<&str>) -> Result<Vec<String>> {
        check_name("device", dev)?;
        let mut a = Vec::new();
        if let Some(ns) = netns {
            check_name("namespace", ns)?;
            a.extend([s("-n"), s(ns)]);
        }
        a.extend(["qdisc", "del", "dev", dev, "root"].map(s));
        Ok(a)
    }

    /// A shell script: remove any root qdisc, then install the plan.
    pub fn script(&self, dev: &str, netns: Option<&str>) -> Result<String> {
        let mut t = String::from("#!/bin/sh\n");
        let _ = writeln!(
            t,
            "# 003 two-queue advice: α {:.0} % / β {:.0} % of {} bit/s, {}, {} α filter rule(s)",
            self.spec.alpha_share * 100.0,
            (1.0 - self.spec.alpha_share) * 100.0,
            self.spec.link_rate_bps,
            match self.spec.sharing {
                Sharing::WorkConserving => "work-conserving",
                Sharing::Strict => "strict",
            },
            self.filters.len()
        );
        for n in &self.notes {
            let _ = writeln!(t, "# note: {n}");
        }
        t.push_str("set -e\n");
        let _ = writeln!(
            t,
            "tc {} 2>/dev/null || true",
            Self::remove_command(dev, netns)?.join(" ")
        );
        for c in self.commands(dev, netns)? {
            let _ = writeln!(t, "tc {}", c.join(" "));
        }
        Ok(t)
    }
}

/// Device and namespace names go into argument vectors and a shell script:
/// allow only what Linux interface / netns names use.
fn check_name(what: &str, n: &str) -> Result<()> {
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if !ok {
        return Err(Error::invalid(format!(
            "{what} name {n:?} is not a valid name (letters, digits, - _ . @; at most 64 characters)"
        )));
    }
    Ok(())
}

/// Parse a prefix file: one α prefix ID per line as `SRC DST` or
/// `SRC -> DST` (e.g. `10.1.2.0/24 -> 10.3.4.0/24`); `#` starts a comment.
pub fn parse_prefix_ids<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Vec<PrefixId>> {
    let mut out = Vec::new();
    for (i, line) in lines.into_iter().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let parts: Vec<&str> = l.split_whitespace().filter(|p| *p != "->").collect();
        if parts.len() != 2 {
            return Err(Error::invalid(format!(
                "line {}: {line:?} is not an α prefix ID; write `SRC/len DST/len` or `SRC/len -> DST/len`",
                i + 1
            )));
        }
        let p = |x: &str| {
            x.parse()
                .map_err(|e: Error| Error::invalid(format!("line {}: {e}", i + 1)))
        };
        out.push(PrefixId {
            src: p(parts[0])?,
            dst: p(parts[1])?,
        });
    }
    Ok(out)
}

/// The α set a nightly run would install (003 §3.4.1): every prefix ID with
/// an α prefix flow in the last `aging_days` aggregation intervals of `days`
/// (the filter F_last with aging A), sorted.
pub fn alpha_set_from_days(
    days: &[super::study::DaySummary],
    aging_days: u32,
) -> Result<Vec<PrefixId>> {
    if aging_days == 0 {
        return Err(Error::invalid(
            "aging 0 days keeps no α prefix ID; use >= 1 (003: 30)",
        ));
    }
    let Some(last) = days.iter().map(|d| d.day).max() else {
        return Ok(Vec::new());
    };
    let set: BTreeSet<PrefixId> = days
        .iter()
        .filter(|d| last - d.day < u64::from(aging_days))
        .flat_map(|d| d.prefix_flows.iter().map(|p| p.id))
        .collect();
    Ok(set.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(a: &str, b: &str) -> PrefixId {
        PrefixId {
            src: a.parse().unwrap(),
            dst: b.parse().unwrap(),
        }
    }

    fn spec(rate: u64) -> QosSpec {
        QosSpec {
            link_rate_bps: rate,
            ..QosSpec::default()
        }
    }

    #[test]
    fn default_plan_is_003_two_queues() {
        let ids = [id("10.1.2.0/24", "10.3.4.0/24")];
        let p = plan(&ids, &spec(100_000_000)).unwrap();
        let a = &p.classes[1];
        let b = &p.classes[2];
        assert_eq!((a.rate_bps, a.ceil_bps), (60_000_000, 100_000_000));
        assert_eq!((b.rate_bps, b.ceil_bps), (40_000_000, 100_000_000));
        // 100 ms at 100 Mbit/s = 1.25 MB, split 60/40.
        assert_eq!(a.leaf, Some(("10:".into(), 750_000)));
        assert_eq!(b.leaf, Some(("20:".into(), 500_000)));
        assert_eq!((a.prio, b.prio), (Some(0), Some(1)));
        assert_eq!(p.default_class, BETA_CLASS);
        assert_eq!(p.filters.len(), 1);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        let cmds = p.commands("eth1", None).unwrap();
        assert_eq!(
            cmds[0].join(" "),
            "qdisc add dev eth1 root handle 1: htb default 20"
        );
        assert_eq!(
            cmds.last().unwrap().join(" "),
            "filter add dev eth1 parent 1: protocol ip prio 10 u32 match ip src 10.1.2.0/24 match ip dst 10.3.4.0/24 flowid 1:10"
        );
        // root + 3 classes + 2 leaves + 1 filter
        assert_eq!(cmds.len(), 7);
        // No policer anywhere (003 Exp 3–5).
        assert!(!cmds.iter().flatten().any(|w| w == "police" || w == "tbf"));
    }

    #[test]
    fn strict_mode_caps_ceil_and_warns() {
        let s = QosSpec {
            sharing: Sharing::Strict,
            alpha_share: 0.95,
            ..spec(1_000_000_000)
        };
        let p = plan(&[id("10.0.0.0/24", "10.9.0.0/24")], &s).unwrap();
        assert_eq!(p.classes[1].ceil_bps, p.classes[1].rate_bps);
        assert_eq!(p.classes[2].ceil_bps, 50_000_000);
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].contains("below 30 %"));
        // Quanta keep the share ratio (htb lends excess by quantum).
        assert_eq!(p.classes[1].quantum_bytes, 190_000);
        assert_eq!(p.classes[2].quantum_bytes, 10_000);
    }

    #[test]
    fn duplicates_merge_and_reverse_direction_is_optional() {
        let ids = [
            id("10.1.2.0/24", "10.3.4.0/24"),
            id("10.1.2.7/24", "10.3.4.9/24"),
            id("2001:db8::/48", "2001:db8:1::/48"),
        ];
        let p = plan(&ids, &spec(10_000_000)).unwrap();
        assert_eq!(p.filters.len(), 2);
        let v6 = p.commands("v", Some("ns1")).unwrap();
        let last = v6.last().unwrap().join(" ");
        assert!(last.starts_with("-n ns1 filter add dev v"), "{last}");
        assert!(last.contains("protocol ipv6 prio 11 u32 match ip6 src 2001:db8::/48"));
        let both = QosSpec {
            both_directions: true,
            ..spec(10_000_000)
        };
        let p = plan(&ids, &both).unwrap();
        assert_eq!(p.filters.len(), 4);
        assert!(p
            .filters
            .iter()
            .any(|f| f.src.to_string() == "10.3.4.0/24" && f.dst.to_string() == "10.1.2.0/24"));
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        let ids = [id("10.1.2.0/24", "10.3.4.0/24")];
        let e = plan(&ids, &QosSpec::default()).unwrap_err().to_string();
        assert!(e.contains("link_rate_bps is 0"), "{e}");
        for share in [0.0, 1.0, f64::NAN, -0.5] {
            let s = QosSpec {
                alpha_share: share,
                ..spec(100_000_000)
            };
            let e = plan(&ids, &s).unwrap_err().to_string();
            assert!(e.contains("alpha_share"), "{e}");
        }
        let e = plan(&[], &spec(100_000_000)).unwrap_err().to_string();
        assert!(e.contains("no α prefix IDs"), "{e}");
        let tiny = QosSpec {
            buffer_bytes: 3000,
            ..spec(100_000_000)
        };
        let e = plan(&ids, &tiny).unwrap_err().to_string();
        assert!(e.contains("two packets"), "{e}");
        let mixed = [id("10.1.2.0/24", "2001:db8::/48")];
        let e = plan(&mixed, &spec(100_000_000)).unwrap_err().to_string();
        assert!(e.contains("mixes IPv4 and IPv6"), "{e}");
        let p = plan(&ids, &spec(100_000_000)).unwrap();
        for bad in ["", "eth0; rm -rf /", "a b", "$(x)"] {
            let e = p.commands(bad, None).unwrap_err().to_string();
            assert!(e.contains("not a valid name"), "{bad}: {e}");
        }
        let e = p.commands("eth0", Some("n s")).unwrap_err().to_string();
        assert!(e.contains("namespace"), "{e}");
        let many: Vec<PrefixId> = (0..(MAX_RULES as u32 + 1))
            .map(|i| {
                let a = std::net::Ipv4Addr::from(0x0a00_0000 + (i << 8));
                PrefixId {
                    src: super::super::prefix::Prefix::new(a.into(), 24).unwrap(),
                    dst: "10.200.0.0/16".parse().unwrap(),
                }
            })
            .collect();
        let e = plan(&many, &spec(100_000_000)).unwrap_err().to_string();
        assert!(e.contains("exceed"), "{e}");
        assert!(preset("nope").unwrap_err().to_string().contains("exp2"));
        assert_eq!(preset("exp2").unwrap().alpha_share, 0.95);
    }

    #[test]
    fn rates_and_buffers_add_up() {
        for share in [0.05, 0.3, 0.6, 0.95] {
            let s = QosSpec {
                alpha_share: share,
                buffer_bytes: 1_000_003,
                ..spec(99_999_999)
            };
            let (a, b) = s.rates_bps();
            assert_eq!(a + b, 99_999_999);
            let (x, y) = s.buffers_bytes();
            assert_eq!(x + y, 1_000_003);
        }
    }

    #[test]
    fn prefix_file_parses_both_forms() {
        let t = "# α set\n10.1.2.0/24 -> 10.3.4.0/24\n192.0.2.1 198.51.100.0/24  # host\n\n";
        let ids = parse_prefix_ids(t.lines()).unwrap();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[1].src.to_string(), "192.0.2.1/32");
        let e = parse_prefix_ids(["10.1.2.0/24"]).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_prefix_ids(["# c", "10.0.0.0/8 10.0.0.0/33"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("/33"), "{e}");
    }

    #[test]
    fn alpha_set_follows_aging() {
        use crate::flows::study::{analyze_slice, StudySpec};
        use crate::flows::FlowRecord;
        const DAY: u64 = 86_400_000_000_000;
        // One α report (2 GB corrected at 1-in-1000) per listed (day, src).
        let rec = |day: u64, src: &str| FlowRecord {
            src_addr: src.parse().unwrap(),
            dst_addr: "10.9.9.9".parse().unwrap(),
            src_port: 5000,
            dst_port: 6000,
            proto: 6,
            bytes: 2_000_000,
            packets: 1400,
            first_ns: day * DAY + 1_000,
            last_ns: day * DAY + 30_000_000_000,
            sampling_interval: 1000,
        };
        let recs = [rec(0, "10.1.0.1"), rec(5, "10.2.0.1"), rec(40, "10.3.0.1")];
        let rep = analyze_slice(&StudySpec::default(), &recs).unwrap();
        let set = |a| {
            alpha_set_from_days(&rep.days, a)
                .unwrap()
                .iter()
                .map(|i| i.src.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(set(30), ["10.3.0.0/24"]);
        assert_eq!(set(36), ["10.2.0.0/24", "10.3.0.0/24"]);
        assert_eq!(set(41).len(), 3);
        assert!(alpha_set_from_days(&rep.days, 0).is_err());
        assert!(alpha_set_from_days(&[], 30).unwrap().is_empty());
    }

    #[test]
    fn script_removes_then_installs() {
        let p = plan(&[id("10.1.2.0/24", "10.3.4.0/24")], &spec(100_000_000)).unwrap();
        let t = p.script("eth0", Some("lab")).unwrap();
        let lines: Vec<&str> = t.lines().filter(|l| l.starts_with("tc ")).collect();
        assert_eq!(
            lines[0],
            "tc -n lab qdisc del dev eth0 root 2>/dev/null || true"
        );
        assert_eq!(lines.len(), 8);
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<TcPlan>(&j).unwrap(), p);
    }
}
