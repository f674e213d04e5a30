//! Alpha-flow identification from sampled flow records (document 003, HNTES/AFTES).
//!
//! AFTES (003 Ch. 3) finds "α flows" — flows with at least one sampled NetFlow
//! report of ≥ H = 1 GB (sampling-corrected) — aggregates them per day into
//! source/destination prefix pairs, and builds a nightly firewall filter of
//! those pairs with aging. Everything here is sans-IO over [`FlowRecord`]s;
//! [`export`] decodes NetFlow v5/v9 and IPFIX datagrams into them.
//!
//! - [`record`]: flow records with the sampling denominator (§2.4.2)
//! - [`spec`]: [`AlphaSpec`], the settings and their defaults
//! - [`prefix`]: /24, /32 (and IPv6) prefix IDs
//! - [`interval`]: α-time as an interval union (eq 3.3)
//! - [`alpha`]: α reports (eq 3.1), α flows, α prefix flows (eq 3.2, 3.3), streaming per day
//! - [`aging`]: the nightly filter F_i with aging A and its effectiveness (Table 3.7)
//! - [`persistence`]: N_u and the percentile tables (§3.5.2, Table 3.5, Fig. 3.5)
//! - [`hapless`]: hapless-β FT / WNP / Leftover (§3.6.2)
//! - [`doors`]: the data-door ratio (§3.6.3)
//! - [`baseline`]: relative thresholds for contrast (mean + 3σ, top 1 %, 50 % of bytes; §3.3)
//! - [`decision_cache`]: the last OPS decision per destination prefix, with aging (notes §7 item 5)
//! - [`qos`]: the two-queue advice as a tc plan (htb + bfifo + u32; Ch. 4)
//! - [`accuracy`]: the size-accuracy ratio of sampled estimates (§3.4.3, Table 3.2)
//! - [`export`]: NetFlow v5 / v9 / IPFIX decoding with templates and sampling
//! - [`nffile`]: nfdump capture files (nfcapd, layout 2, uncompressed or LZ4)
//! - [`synth`]: a seeded multi-day record generator (notes §10)
//! - [`study`]: the whole offline analysis over a record source
//!
//! A day of sampled reports (1 in 1000 packets) between two /24s, aggregated
//! into its α prefix flow (eq 3.1–3.3), then the decision cache that lets the
//! next transfer toward that /24 start from the last OPS decision:
//!
//! ```
//! use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache};
//! use opsel::flows::{self, AlphaSpec, FlowRecord};
//!
//! const S: u64 = 1_000_000_000;
//! let rec = |src: &str, dst: &str, bytes: u64, first_s: u64, last_s: u64| FlowRecord {
//!     src_addr: src.parse().unwrap(), dst_addr: dst.parse().unwrap(),
//!     src_port: 5000, dst_port: 2811, proto: 6, bytes, packets: bytes / 1448 + 1,
//!     first_ns: first_s * S, last_ns: last_s * S, sampling_interval: 1000,
//! };
//! let records = [
//!     rec("10.0.0.1", "10.1.0.1", 2_000_000, 0, 60), // 2 GB corrected ≥ H = 1 GB: α
//!     rec("10.0.0.2", "10.1.0.9", 1_500_000, 30, 90), // same /24 pair, overlapping
//!     rec("10.0.0.1", "10.1.0.1", 10, 0, 1000), // β: adds nothing to η or μ
//! ];
//! let days = flows::aggregate(&AlphaSpec::default(), &records)?;
//! let day = &days[0];
//! assert_eq!((days.len(), day.reports, day.alpha_reports), (1, 3, 2));
//! assert_eq!(day.prefix_flows.len(), 1); // 10.0.0.0/24 → 10.1.0.0/24
//! assert_eq!(day.alpha_bytes(), 3_500_000_000);
//! assert_eq!(day.alpha_time_ns(), 90 * S); // [0, 60] ∪ [30, 90] s (eq 3.3)
//!
//! let mut cache = DecisionCache::new(CacheSpec::default())?; // /24 keys, 30 days
//! let decided = Decision { label: "B1-C1".into(), cca: "bbr".into(), confidence: 0.9, at_s: 0.0 };
//! cache.record("10.1.0.1".parse().unwrap(), decided)?;
//! let prior = cache.lookup("10.1.0.77".parse().unwrap(), 86_400.0).unwrap(); // same /24, a day on
//! assert_eq!((prior.decision.cca.as_str(), prior.age_s), ("bbr", 86_400.0));
//! assert!(cache.lookup("10.1.0.1".parse().unwrap(), 31.0 * 86_400.0).is_none()); // aged out
//! # Ok::<(), opsel::Error>(())
//! ```

pub mod accuracy;
pub mod aging;
pub mod alpha;
pub mod baseline;
pub mod decision_cache;
pub mod doors;
pub mod export;
pub mod hapless;
pub mod interval;
pub mod nffile;
pub mod persistence;
pub mod prefix;
pub mod qos;
pub mod record;
pub mod spec;
pub mod study;
pub mod synth;

pub use alpha::{aggregate, is_alpha_report, AlphaAggregator, DayReport, PrefixFlow};
pub use prefix::{Prefix, PrefixId};
pub use record::{FiveTuple, FlowRecord};
pub use spec::AlphaSpec;
