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
//! - [`synth`]: a seeded multi-day record generator (notes §10)
//! - [`study`]: the whole offline analysis over a record source

pub mod accuracy;
pub mod aging;
pub mod alpha;
pub mod baseline;
pub mod decision_cache;
pub mod doors;
pub mod export;
pub mod hapless;
pub mod interval;
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
