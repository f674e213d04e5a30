//! Active-probing patterns and their schedules (000 §3.2, §5.3–5.4, Fig 7.6).
//!
//! A pattern is a sequence of segments joined by `-`. Each segment is either a
//! full-speed burst with one congestion control or a silence:
//!
//! * thesis letters: `S5-C5-S5-B5`, `c5-b5-c5-s5` (case-insensitive; C = cubic,
//!   B = bbr, R = reno, S = silence; the number is seconds);
//! * any CCA name: `cubic:5-silence:5-bbr:5`, `htcp:2.5-s:1`.
//!
//! Durations are decimal seconds with at most 9 fractional digits (whole
//! nanoseconds), parsed exactly without floating point so that
//! `Pattern::parse(&p.to_string()) == p` always holds.
//!
//! The end-to-end pattern of §7.6 and its schedule:
//!
//! ```
//! use opsel::probe::{Pattern, SegmentKind};
//!
//! let p = Pattern::parse(Pattern::S5_C5_S5_B5)?;
//! assert_eq!(p.segments().len(), 4);
//! assert_eq!(p.segments()[0].kind, SegmentKind::Silence);
//! assert_eq!(p.segments()[1].cca().unwrap().as_str(), "cubic");
//! assert_eq!(p.total_ns(), 20_000_000_000);
//! assert!(p.uses("bbr") && !p.uses("reno"));
//! // Which segment is running 12 s in, and how many 1 Hz samples one run takes.
//! assert_eq!(p.segment_index_at(12_000_000_000), Some(2));
//! assert_eq!(p.samples_per_run(1_000_000_000)?, 20);
//! // Any CCA name works; the canonical form re-parses to the same pattern.
//! let q = Pattern::parse("cubic:5-silence:5-bbr:2.5")?;
//! assert_eq!(q.to_string(), "C5-S5-B2.5");
//! assert_eq!(Pattern::parse(&q.to_string())?, q);
//! # Ok::<(), opsel::Error>(())
//! ```

mod cca;

pub use cca::CcaName;

use crate::error::{Error, Result};
use std::fmt;

const NS_PER_S: u64 = 1_000_000_000;

/// Longest accepted segment: one day. A probe segment longer than that is
/// almost certainly a unit mistake (ms written as s).
pub const MAX_SEGMENT_NS: u64 = 86_400 * NS_PER_S;

/// Most segments accepted in one pattern (keeps schedules small and bounded).
pub const MAX_SEGMENTS: usize = 256;

/// What the prober does during one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentKind {
    /// Send nothing (000 §7.6: the silence *before* each burst is what makes
    /// S5-C5-S5-B5 effective end to end).
    Silence,
    /// Send at full speed as regulated by this CCA (000 §5.3: no rate cap, no
    /// pacing). With constructive probing the burst carries real payload.
    Burst(CcaName),
}

/// One segment of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    pub kind: SegmentKind,
    pub duration_ns: u64,
}

impl Segment {
    /// The CCA of a burst, `None` for a silence.
    pub fn cca(&self) -> Option<CcaName> {
        match self.kind {
            SegmentKind::Silence => None,
            SegmentKind::Burst(c) => Some(c),
        }
    }
}

/// A parsed probing pattern with its schedule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    segments: Vec<Segment>,
    /// `starts_ns[i]` = offset of segment i from the pattern start.
    starts_ns: Vec<u64>,
    total_ns: u64,
}

impl Pattern {
    /// The pattern effective end to end in iPerfOPS (000 §5.6, anchor A11).
    pub const S5_C5_S5_B5: &'static str = "S5-C5-S5-B5";
    /// The pattern of the Ch. 5/6 classifier study (000 §3.2).
    pub const C5_B5_C5_S5: &'static str = "C5-B5-C5-S5";

    /// Parse a pattern; see the module docs for the syntax. Errors name the
    /// offending segment and its 1-based position.
    pub fn parse(text: &str) -> Result<Self> {
        let s = text.trim();
        if s.is_empty() {
            return Err(Error::invalid(
                "empty probing pattern; expected segments joined by '-', e.g. \"S5-C5-S5-B5\" or \"cubic:5-silence:5-bbr:5\"",
            ));
        }
        let mut segments = Vec::new();
        for (i, tok) in s.split('-').enumerate() {
            if segments.len() == MAX_SEGMENTS {
                return Err(Error::invalid(format!(
                    "probing pattern {text:?} has more than {MAX_SEGMENTS} segments; shorten it"
                )));
            }
            segments.push(parse_segment(text, i + 1, tok)?);
        }
        Self::from_segments(segments)
    }

    /// Build from segments (each must last > 0 and at most [`MAX_SEGMENT_NS`]).
    pub fn from_segments(segments: Vec<Segment>) -> Result<Self> {
        if segments.is_empty() {
            return Err(Error::invalid(
                "probing pattern has no segments; give at least one, e.g. \"C5\"",
            ));
        }
        if segments.len() > MAX_SEGMENTS {
            return Err(Error::invalid(format!(
                "probing pattern has {} segments, more than {MAX_SEGMENTS}; shorten it",
                segments.len()
            )));
        }
        let mut starts_ns = Vec::with_capacity(segments.len());
        let mut t = 0u64;
        for (i, seg) in segments.iter().enumerate() {
            if seg.duration_ns == 0 || seg.duration_ns > MAX_SEGMENT_NS {
                return Err(Error::invalid(format!(
                    "segment {} lasts {} ns; each segment must last more than 0 and at most 86400 s",
                    i + 1,
                    seg.duration_ns
                )));
            }
            if let SegmentKind::Burst(c) = seg.kind {
                if c == "s" || c == "silence" {
                    return Err(Error::invalid(format!(
                        "segment {} bursts with a CCA named {c:?}, which the pattern language reserves for silence; use SegmentKind::Silence",
                        i + 1
                    )));
                }
            }
            starts_ns.push(t);
            // Cannot overflow: at most 256 segments of at most 8.64e13 ns each.
            t += seg.duration_ns;
        }
        Ok(Self {
            segments,
            starts_ns,
            total_ns: t,
        })
    }

    /// The segments in order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Duration of one run of the pattern.
    pub fn total_ns(&self) -> u64 {
        self.total_ns
    }

    /// Offset of segment `i` from the pattern start (`None` if out of range).
    pub fn segment_start_ns(&self, i: usize) -> Option<u64> {
        self.starts_ns.get(i).copied()
    }

    /// Index of the segment running at offset `t_ns` from the pattern start;
    /// `None` once the pattern is over (`t_ns >= total_ns`).
    pub fn segment_index_at(&self, t_ns: u64) -> Option<usize> {
        if t_ns >= self.total_ns {
            return None;
        }
        // starts_ns is sorted and starts at 0, so the partition point is >= 1.
        Some(self.starts_ns.partition_point(|&s| s <= t_ns) - 1)
    }

    /// The segment running at offset `t_ns` (see [`Pattern::segment_index_at`]).
    pub fn segment_at(&self, t_ns: u64) -> Option<&Segment> {
        self.segment_index_at(t_ns).map(|i| &self.segments[i])
    }

    /// Segment index at offset `t_ns` when the pattern repeats back to back,
    /// as when a window is longer than one pattern run.
    pub fn segment_index_at_cyclic(&self, t_ns: u64) -> usize {
        // total_ns > 0 by construction.
        self.segment_index_at(t_ns % self.total_ns).unwrap_or(0)
    }

    /// Which segment 1 Hz sample `k` belongs to, for samples taken every
    /// `period_ns` from the pattern start (cyclic). Project decision for
    /// 000 §10 gap 2 (alignment is unstated in the thesis): sample `k` summarises
    /// the interval `[k·P, (k+1)·P)` and belongs to the segment that contains the
    /// interval's midpoint, so with whole-second segments and P = 1 s every
    /// sample lies entirely inside one segment. Errors if `period_ns == 0`.
    pub fn segment_of_sample(&self, k: u64, period_ns: u64) -> Result<usize> {
        if period_ns == 0 {
            return Err(Error::invalid(
                "sample period is 0 ns; use a positive period such as 1 s (1e9 ns)",
            ));
        }
        let mid = (k as u128) * (period_ns as u128) + (period_ns as u128) / 2;
        let t = (mid % self.total_ns as u128) as u64;
        Ok(self.segment_index_at_cyclic(t))
    }

    /// Segment index of each of the first `n` samples (see
    /// [`Pattern::segment_of_sample`]), written into `out` (cleared first).
    pub fn sample_segments(&self, n: usize, period_ns: u64, out: &mut Vec<usize>) -> Result<()> {
        out.clear();
        for k in 0..n {
            out.push(self.segment_of_sample(k as u64, period_ns)?);
        }
        Ok(())
    }

    /// Number of whole samples of period `period_ns` in one pattern run.
    pub fn samples_per_run(&self, period_ns: u64) -> Result<u64> {
        if period_ns == 0 {
            return Err(Error::invalid(
                "sample period is 0 ns; use a positive period such as 1 s (1e9 ns)",
            ));
        }
        Ok(self.total_ns / period_ns)
    }

    /// Does any segment burst with `cca`?
    pub fn uses(&self, cca: &str) -> bool {
        self.segments.iter().any(|s| {
            s.cca()
                .is_some_and(|c| c.as_str().eq_ignore_ascii_case(cca))
        })
    }
}

impl fmt::Display for Pattern {
    /// Canonical form: thesis letters for cubic/bbr/reno/silence, `name:secs`
    /// for other CCAs; seconds without trailing zeros.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str("-")?;
            }
            match seg.kind {
                SegmentKind::Silence => f.write_str("S")?,
                SegmentKind::Burst(c) => match c.as_str() {
                    "cubic" => f.write_str("C")?,
                    "bbr" => f.write_str("B")?,
                    "reno" => f.write_str("R")?,
                    other => write!(f, "{other}:")?,
                },
            }
            write_seconds(f, seg.duration_ns)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Pattern {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Pattern::parse(s)
    }
}

fn write_seconds(f: &mut fmt::Formatter<'_>, ns: u64) -> fmt::Result {
    let whole = ns / NS_PER_S;
    let frac = ns % NS_PER_S;
    if frac == 0 {
        return write!(f, "{whole}");
    }
    let mut digits = format!("{frac:09}");
    while digits.ends_with('0') {
        digits.pop();
    }
    write!(f, "{whole}.{digits}")
}

fn parse_segment(text: &str, pos: usize, tok: &str) -> Result<Segment> {
    let t = tok.trim();
    let bad = |why: &str| {
        Error::invalid(format!(
            "probing pattern {text:?}: segment {pos} {tok:?} {why}; expected <C|B|R|S><seconds> (e.g. C5) or <cca>:<seconds> (e.g. cubic:5, silence:2.5)"
        ))
    };
    if t.is_empty() {
        return Err(bad("is empty (doubled or trailing '-')"));
    }
    let (name, secs) = if let Some((n, s)) = t.split_once(':') {
        (n.trim(), s.trim())
    } else {
        // Letter form: first char is the letter, the rest the seconds.
        let mut chars = t.chars();
        let letter = chars.next().unwrap_or(' ');
        let name = match letter.to_ascii_uppercase() {
            'C' => "cubic",
            'B' => "bbr",
            'R' => "reno",
            'S' => "silence",
            _ => return Err(bad("starts with an unknown letter")),
        };
        (name, chars.as_str().trim())
    };
    let duration_ns = parse_seconds_ns(secs).map_err(|why| bad(&why))?;
    let kind = if name.eq_ignore_ascii_case("silence") || name.eq_ignore_ascii_case("s") {
        SegmentKind::Silence
    } else {
        // In the `name:secs` form the name is taken literally (`b:5` is a CCA
        // called "b"); only `s`/`silence` are reserved, for the silence.
        SegmentKind::Burst(
            CcaName::new(name).map_err(|e| bad(&format!("has a bad CCA name ({e})")))?,
        )
    };
    Ok(Segment { kind, duration_ns })
}

/// Exact decimal seconds → ns ("5" → 5e9, "0.25" → 2.5e8). No float rounding.
fn parse_seconds_ns(s: &str) -> std::result::Result<u64, String> {
    if s.is_empty() {
        return Err("has no duration".into());
    }
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return Err("has no duration digits".into());
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("has a non-numeric duration {s:?}"));
    }
    if frac.len() > 9 {
        return Err(format!(
            "has duration {s:?} finer than 1 ns (more than 9 decimals)"
        ));
    }
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse()
            .map_err(|_| format!("has an out-of-range duration {s:?}"))?
    };
    let mut frac_ns: u64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        frac_ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    let ns = whole
        .checked_mul(NS_PER_S)
        .and_then(|w| w.checked_add(frac_ns))
        .filter(|&ns| ns <= MAX_SEGMENT_NS)
        .ok_or_else(|| format!("lasts {s} s, more than the 86400 s limit"))?;
    if ns == 0 {
        return Err("lasts 0 s; every segment must last longer than 0".into());
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_S;

    #[test]
    fn thesis_patterns() {
        let p = Pattern::parse("S5-C5-S5-B5").unwrap();
        assert_eq!(p.total_ns(), 20 * S);
        let kinds: Vec<Option<CcaName>> = p.segments().iter().map(|s| s.cca()).collect();
        let names: Vec<Option<&str>> = kinds
            .iter()
            .map(|c| c.as_ref().map(|c| c.as_str()))
            .collect();
        assert_eq!(names, [None, Some("cubic"), None, Some("bbr")]);
        // Lower-case iPerfOPS form parses to the same pattern.
        assert_eq!(Pattern::parse("s5-c5-s5-b5").unwrap(), p);
        assert_eq!(
            Pattern::parse("c5-b5-c5-s5").unwrap().to_string(),
            "C5-B5-C5-S5"
        );
    }

    #[test]
    fn general_form_and_fractions() {
        let p = Pattern::parse("cubic:5-silence:2.5-htcp:0.125-R1").unwrap();
        assert_eq!(p.total_ns(), 5 * S + 2_500_000_000 + 125_000_000 + S);
        assert_eq!(p.to_string(), "C5-S2.5-htcp:0.125-R1");
        assert_eq!(Pattern::parse(&p.to_string()).unwrap(), p);
        assert_eq!(
            Pattern::parse(" CUBIC:5 - BBR:.5 ").unwrap().to_string(),
            "C5-B0.5"
        );
        // Only the letter form abbreviates; `b:1` is a CCA literally named "b".
        assert_eq!(Pattern::parse("b:1").unwrap().to_string(), "b:1");
        assert!(Pattern::parse("silence:1").unwrap().segments()[0]
            .cca()
            .is_none());
    }

    #[test]
    fn schedule_queries() {
        let p = Pattern::parse("S5-C5-S5-B5").unwrap();
        assert_eq!(p.segment_index_at(0), Some(0));
        assert_eq!(p.segment_index_at(5 * S - 1), Some(0));
        assert_eq!(p.segment_index_at(5 * S), Some(1));
        assert_eq!(p.segment_index_at(19 * S), Some(3));
        assert_eq!(p.segment_index_at(20 * S), None);
        assert_eq!(p.segment_index_at_cyclic(25 * S), 1);
        assert_eq!(p.segment_start_ns(3), Some(15 * S));
        let mut segs = Vec::new();
        p.sample_segments(22, S, &mut segs).unwrap();
        assert_eq!(
            segs,
            [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 0, 0]
        );
        assert_eq!(p.samples_per_run(S).unwrap(), 20);
        assert!(p.uses("BBR") && !p.uses("reno"));
        assert!(p.segment_of_sample(0, 0).is_err());
    }

    #[test]
    fn errors_name_the_token() {
        for (bad, needle) in [
            ("", "empty"),
            ("S5--C5", "segment 2 \"\""),
            ("S5-X5", "\"X5\""),
            ("C", "no duration"),
            ("C0", "0 s"),
            ("C5-Bx", "\"Bx\""),
            ("C1.0000000001", "finer than 1 ns"),
            ("C100000", "86400"),
            ("bad name:5", "CCA name"),
            ("C-5", "segment 1"),
            ("C5-", "segment 2"),
            ("averyveryverylongccaname:5", "CCA name"),
        ] {
            let e = Pattern::parse(bad).unwrap_err().to_string();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }
}
