//! The α-identification settings: one serde type with its defaults and checks
//! (DESIGN.md "one spec, one schema"). Defaults are the dissertation's
//! (003 §3.5.2, notes §4.4, §7).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Well-known ports of the hapless-β WNP group (003 §3.6.2): ssh 22, smtp 25,
/// http 80, pop3 110, sftp 115, nntp 119, imap 143, bftp 152, unidata (LDM) 388,
/// https 443, ssmtp 465, rtsp 554, imap4ssl 585, rsync 873, ftps 989/990,
/// imaps 993, sslpop 995.
pub const WELL_KNOWN_PORTS: [u16; 18] = [
    22, 25, 80, 110, 115, 119, 143, 152, 388, 443, 465, 554, 585, 873, 989, 990, 993, 995,
];

/// Settings of the offline α-flow identifier (AFTES, 003 §3.4–3.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlphaSpec {
    /// H: an α NetFlow report has ≥ this many sampling-corrected bytes (eq 3.1; 1 GB).
    pub h_bytes: u64,
    /// IPv4 prefix length of prefix IDs: 24 or 32 in the document (§3.5.2).
    pub prefix_len_v4: u8,
    /// IPv6 prefix length [Ours: the document is IPv4-only].
    pub prefix_len_v6: u8,
    /// Aggregation interval (1 day, §3.5.1), ns.
    pub agg_interval_ns: u64,
    /// Start of aggregation interval 0, ns since the epoch (0 = UTC midnight days).
    pub agg_origin_ns: u64,
    /// A: prefix IDs with no α flow in the last A intervals leave the filter
    /// (§3.4.1; evaluated 7, 14, 30, 214; recommended 30).
    pub aging_days: u32,
    /// G: a hapless-β report needs more than G estimated bytes to count as a
    /// file transfer (§3.6.2; 10 MB, G < H).
    pub g_bytes: u64,
    /// FT criterion (a): at least this many bytes per packet (§3.6.2; 1000).
    pub ft_min_bytes_per_packet: u64,
    /// Use this N instead of each record's own sampling interval (for record
    /// files whose exporter did not say; ESnet: 1000). None = trust the records.
    pub sampling_interval_override: Option<u32>,
    /// Ports of the WNP group (§3.6.2).
    pub well_known_ports: Vec<u16>,
}

impl Default for AlphaSpec {
    fn default() -> Self {
        AlphaSpec {
            h_bytes: 1_000_000_000,
            prefix_len_v4: 24,
            prefix_len_v6: 64,
            agg_interval_ns: 86_400 * 1_000_000_000,
            agg_origin_ns: 0,
            aging_days: 30,
            g_bytes: 10_000_000,
            ft_min_bytes_per_packet: 1000,
            sampling_interval_override: None,
            well_known_ports: WELL_KNOWN_PORTS.to_vec(),
        }
    }
}

impl AlphaSpec {
    /// Check every field; the message names the field, its value and the range.
    pub fn validate(&self) -> Result<()> {
        if self.h_bytes == 0 {
            return Err(Error::invalid(
                "h_bytes 0 makes every report an alpha report; the document uses H = 1 GB (1000000000)",
            ));
        }
        if !(1..=32).contains(&self.prefix_len_v4) {
            return Err(Error::invalid(format!(
                "prefix_len_v4 {} must be in 1..=32 (the document evaluates 24 and 32)",
                self.prefix_len_v4
            )));
        }
        if !(1..=128).contains(&self.prefix_len_v6) {
            return Err(Error::invalid(format!(
                "prefix_len_v6 {} must be in 1..=128",
                self.prefix_len_v6
            )));
        }
        if self.agg_interval_ns == 0 {
            return Err(Error::invalid(
                "agg_interval_ns 0: the aggregation interval must be positive (one day = 86400000000000)",
            ));
        }
        if self.aging_days == 0 {
            return Err(Error::invalid(
                "aging_days 0 would empty the filter every night; use >= 1 (document: 7, 14, 30, 214)",
            ));
        }
        if self.g_bytes >= self.h_bytes {
            return Err(Error::invalid(format!(
                "g_bytes {} must be below h_bytes {} (003 §3.6.2: G < H)",
                self.g_bytes, self.h_bytes
            )));
        }
        if self.sampling_interval_override == Some(0) {
            return Err(Error::invalid(
                "sampling_interval_override 0: 1-in-N sampling needs N >= 1 (1 = unsampled)",
            ));
        }
        Ok(())
    }

    /// Parse and validate a JSON spec; absent fields take the defaults.
    pub fn from_json(s: &str) -> Result<Self> {
        let spec: AlphaSpec =
            serde_json::from_str(s).map_err(|e| Error::invalid(format!("alpha spec JSON: {e}")))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The sampling denominator to apply to `record_n` (the record's own).
    pub fn sampling_n(&self, record_n: u32) -> u32 {
        self.sampling_interval_override.unwrap_or(record_n).max(1)
    }

    /// Index of the aggregation interval holding time `t_ns`, and its start.
    pub fn interval_of(&self, t_ns: u64) -> (u64, u64) {
        let rel = t_ns.saturating_sub(self.agg_origin_ns);
        let i = rel / self.agg_interval_ns;
        (i, self.agg_origin_ns + i * self.agg_interval_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documents() {
        let s = AlphaSpec::default();
        s.validate().unwrap();
        assert_eq!(
            (s.h_bytes, s.g_bytes, s.aging_days),
            (1_000_000_000, 10_000_000, 30)
        );
        assert_eq!(AlphaSpec::from_json("{}").unwrap(), s);
        let s32 = AlphaSpec::from_json(r#"{"prefix_len_v4": 32, "aging_days": 214}"#).unwrap();
        assert_eq!((s32.prefix_len_v4, s32.aging_days), (32, 214));
    }

    #[test]
    fn bad_specs_name_the_field() {
        for (j, what) in [
            (r#"{"h_bytes": 0}"#, "h_bytes"),
            (r#"{"prefix_len_v4": 33}"#, "prefix_len_v4"),
            (r#"{"prefix_len_v6": 0}"#, "prefix_len_v6"),
            (r#"{"agg_interval_ns": 0}"#, "agg_interval_ns"),
            (r#"{"aging_days": 0}"#, "aging_days"),
            (r#"{"g_bytes": 2000000000}"#, "g_bytes"),
            (
                r#"{"sampling_interval_override": 0}"#,
                "sampling_interval_override",
            ),
            (r#"{"h_byte": 5}"#, "h_byte"),
        ] {
            let e = AlphaSpec::from_json(j).unwrap_err().to_string();
            assert!(e.contains(what), "{j}: {e}");
        }
    }

    #[test]
    fn intervals_from_origin() {
        let s = AlphaSpec {
            agg_origin_ns: 100,
            agg_interval_ns: 10,
            ..AlphaSpec::default()
        };
        assert_eq!(s.interval_of(125), (2, 120));
        assert_eq!(s.interval_of(5), (0, 100));
    }
}
