//! What a trace is: the network condition, the probing mode and the
//! background class, and where its files live.

use std::path::{Path, PathBuf};

use opsel::mix::{Mix, SIX_CLASSES};
use opsel::probe::Pattern;
use opsel::{Error, Result};

use crate::scenario::bdp_bytes;

/// A network condition of the dumbbell.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Condition {
    pub name: String,
    pub rate_mbps: f64,
    pub rtt_ms: f64,
    /// Drop-tail buffer as a multiple of the BDP.
    pub buffer_bdp: f64,
    pub mtu: usize,
}

impl Condition {
    /// Named presets. `default`: 100 Mbit/s, 65 ms, 0.5 × BDP — the buffer at
    /// which the CCA choice matters in netlab (docs/results/netlab.md: at
    /// 1.5 × BDP, the thesis's stated buffer, wrong CCA pairs stay fair here);
    /// `c50`: 50 Mbit/s, 40 ms, 1 × BDP (a second condition for generalisation).
    pub fn preset(name: &str) -> Result<Condition> {
        let (rate_mbps, rtt_ms, buffer_bdp) = match name {
            "default" => (100.0, 65.0, 0.5),
            "c50" => (50.0, 40.0, 1.0),
            "thesis" => (100.0, 65.0, 1.5),
            other => match parse_grid_name(other) {
                Some(t) => t,
                None => {
                    return Err(Error::invalid(format!(
                        "unknown condition {other:?}; use default, c50, thesis, grid or dense (every GRID or DENSE condition, in a plan), \
                         a name r<Mbit/s>-d<RTT ms>-b<buffer × BDP> such as r100-d65-b0.5, \
                         or give --rate-mbps, --rtt-ms and --buffer-bdp for a custom one"
                    )))
                }
            },
        };
        Ok(Condition {
            name: name.into(),
            rate_mbps,
            rtt_ms,
            buffer_bdp,
            mtu: 1500,
        })
    }

    pub fn buffer_bytes(&self) -> u64 {
        bdp_bytes(self.rate_mbps, self.rtt_ms, self.buffer_bdp)
    }

    pub fn validate(&self) -> Result<()> {
        if !valid_name(&self.name) {
            return Err(Error::invalid(format!(
                "condition name {:?} must be 1-32 characters of [A-Za-z0-9_.-] (it becomes a folder name)",
                self.name
            )));
        }
        if !(self.rate_mbps.is_finite() && (0.1..=10_000.0).contains(&self.rate_mbps)) {
            return Err(Error::invalid(format!(
                "rate {} Mbit/s is outside 0.1..=10000",
                self.rate_mbps
            )));
        }
        if !(self.rtt_ms.is_finite() && (1.0..=2000.0).contains(&self.rtt_ms)) {
            return Err(Error::invalid(format!(
                "RTT {} ms is outside 1..=2000",
                self.rtt_ms
            )));
        }
        if !(self.buffer_bdp.is_finite() && (0.01..=100.0).contains(&self.buffer_bdp)) {
            return Err(Error::invalid(format!(
                "buffer {} × BDP is outside 0.01..=100",
                self.buffer_bdp
            )));
        }
        if !(576..=9000).contains(&self.mtu) {
            return Err(Error::invalid(format!(
                "MTU {} is outside 576..=9000",
                self.mtu
            )));
        }
        Ok(())
    }
}

/// The training grid for recognition across networks (notes 000 §8, "sweep
/// BDP and buffer size"): 12 conditions spread over bottleneck 10–300 Mbit/s,
/// RTT 10–200 ms and buffer 0.25–2 × BDP, each rate, RTT and buffer level used
/// more than once but no two conditions alike, so a leave-one-condition-out
/// test always holds out a network the model has not seen. 300 Mbit/s is the
/// top: two labs at once on two cores sustain it (docs/results/netlab-bench.md:
/// one lab sustains 800). `default` and `c50` are recorded too and join the
/// grid in evaluation.
pub const GRID: [&str; 12] = [
    "r10-d100-b1",
    "r10-d20-b2",
    "r20-d200-b0.5",
    "r25-d40-b0.25",
    "r50-d150-b2",
    "r50-d10-b0.5",
    "r100-d30-b1",
    "r100-d120-b0.25",
    "r200-d50-b0.5",
    "r200-d200-b1",
    "r300-d80-b0.25",
    "r300-d20-b2",
];

/// Conditions filling the grid's ranges evenly in log space (Halton
/// sequence in bases 2, 3, 5, two significant digits; the grid's and the
/// three external OPS conditions skipped: research/generalisation/dense_grid.py).
/// Leave-one-condition-out accuracy at a condition rises when a recorded
/// condition lies near it (docs/results/generalisation.md), so coverage, not
/// more windows per condition, is what the corpus needs. Plan entry
/// `dense/<mode>`; recorded in this order, so a partial recording still
/// covers the space.
pub const DENSE: [&str; 24] = [
    "r55-d27-b0.38",
    "r23-d74-b0.57",
    "r130-d14-b0.87",
    "r15-d38-b1.3",
    "r84-d100-b0.27",
    "r36-d19-b0.41",
    "r200-d53-b0.62",
    "r12-d140-b0.95",
    "r68-d11-b1.4",
    "r29-d30-b0.3",
    "r160-d82-b0.45",
    "r19-d16-b0.68",
    "r100-d42-b1",
    "r44-d110-b1.6",
    "r240-d22-b0.32",
    "r11-d59-b0.49",
    "r61-d160-b0.74",
    "r26-d12-b1.1",
    "r140-d34-b1.7",
    "r17-d92-b0.35",
    "r93-d17-b0.53",
    "r40-d47-b0.8",
    "r220-d130-b1.2",
    "r14-d24-b1.8",
];

/// `r<rate Mbit/s>-d<RTT ms>-b<buffer × BDP>` → (rate, RTT, buffer); the name
/// is the condition, so a trace folder says what network it was recorded on.
pub fn parse_grid_name(name: &str) -> Option<(f64, f64, f64)> {
    let mut it = name.split('-');
    let num = |s: Option<&str>, p: char| -> Option<f64> {
        s?.strip_prefix(p)?
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let t = (
        num(it.next(), 'r')?,
        num(it.next(), 'd')?,
        num(it.next(), 'b')?,
    );
    it.next().is_none().then_some(t)
}

pub(super) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && s != "."
        && s != ".."
}

/// Passive or active probing (with its pattern).
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// One echo-burst sample a second (000 §3.2).
    Passive,
    /// Passive probing with a sample every `period_ms` (< 1000): the same
    /// 10-echo bursts, more often. Our extension, to test whether a finer
    /// time resolution resolves queue dynamics that 1 Hz aliases (a short
    /// CUBIC sawtooth at a shallow buffer, BBR's 200 ms ProbeRTT dip); every
    /// `1000 / period_ms`-th sample of such a trace is a 1 Hz series, so
    /// both resolutions are compared on the same traffic.
    PassiveEvery {
        period_ms: u32,
    },
    Active {
        pattern: Pattern,
        text: String,
    },
}

impl Mode {
    /// `passive`, `passive-<ms>ms` (e.g. `passive-200ms`, a divisor of 1000
    /// from 10 to 500), or a pattern such as `S5-C5-S5-B5` (with or without
    /// an `active:` / `active-` prefix).
    pub fn parse(s: &str) -> Result<Mode> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("passive") {
            return Ok(Mode::Passive);
        }
        if let Some(ms) = t
            .to_ascii_lowercase()
            .strip_prefix("passive-")
            .and_then(|r| r.strip_suffix("ms"))
        {
            let period_ms = ms
                .parse::<u32>()
                .ok()
                .filter(|p| (10..=500).contains(p) && 1000 % p == 0)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "mode {s:?}: the sample period must be a divisor of 1000 ms from 10 to 500, e.g. passive-200ms"
                    ))
                })?;
            return Ok(Mode::PassiveEvery { period_ms });
        }
        let p = t
            .strip_prefix("active:")
            .or_else(|| t.strip_prefix("active-"))
            .or_else(|| t.strip_prefix("active/"))
            .unwrap_or(t);
        let pattern = Pattern::parse(p).map_err(|e| {
            Error::invalid(format!(
                "mode {s:?} is neither `passive` nor a probing pattern such as S5-C5-S5-B5: {e}"
            ))
        })?;
        Ok(Mode::Active {
            pattern,
            text: p.to_ascii_uppercase(),
        })
    }

    /// Folder name: `passive`, `passive-200ms` or `active-s5c5s5b5`.
    pub fn dir_name(&self) -> String {
        match self {
            Mode::Passive => "passive".into(),
            Mode::PassiveEvery { period_ms } => format!("passive-{period_ms}ms"),
            Mode::Active { text, .. } => format!(
                "active-{}",
                text.chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
                    .to_ascii_lowercase()
            ),
        }
    }

    /// Time between two samples of the RTT series.
    pub fn sample_ns(&self) -> u64 {
        match self {
            Mode::PassiveEvery { period_ms } => *period_ms as u64 * 1_000_000,
            Mode::Passive | Mode::Active { .. } => super::NS,
        }
    }

    /// Whether the condition's echoes fit in the sample period: a burst's
    /// echoes are awaited until just before the next burst, so the path's
    /// largest RTT (base RTT plus a full drop-tail buffer) must stay below
    /// the period with a 10 % margin. Always true at 1 Hz on the grid's
    /// ranges (at most 200 ms × 3).
    pub fn check_fits(&self, c: &Condition) -> Result<()> {
        let room_ms = crate::traffic::burst_config_every(self.sample_ns()).timeout_ns as f64 / 1e6;
        let worst_ms = c.rtt_ms * (1.0 + c.buffer_bdp);
        if worst_ms > 0.9 * room_ms {
            return Err(Error::invalid(format!(
                "condition {}: its largest RTT ({worst_ms:.0} ms: {} ms base plus a full {} × BDP buffer) \
                 does not fit in a sample every {:.0} ms (echoes are awaited until the next burst); \
                 record it with --mode passive (1 Hz)",
                c.name,
                c.rtt_ms,
                c.buffer_bdp,
                self.sample_ns() as f64 / 1e6
            )));
        }
        Ok(())
    }

    /// Samples in a window of `w_s` seconds (`--w` counts seconds, which are
    /// samples at 1 Hz; 5 w samples with passive-200ms).
    pub fn window_samples(&self, w_s: usize) -> usize {
        w_s * (super::NS / self.sample_ns()) as usize
    }

    pub fn is_active(&self) -> bool {
        matches!(self, Mode::Active { .. })
    }

    pub fn pattern_text(&self) -> Option<&str> {
        match self {
            Mode::Passive | Mode::PassiveEvery { .. } => None,
            Mode::Active { text, .. } => Some(text),
        }
    }
}

/// One (condition, mode, class) to record.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSpec {
    pub condition: Condition,
    pub mode: Mode,
    /// One of the six labels of 000 Table 6.1.
    pub class: String,
}

impl TraceSpec {
    pub fn new(condition: Condition, mode: Mode, class: &str) -> Result<TraceSpec> {
        condition.validate()?;
        mode.check_fits(&condition)?;
        let class = class.trim().to_ascii_uppercase();
        if !SIX_CLASSES.contains(&class.as_str()) {
            return Err(Error::invalid(format!(
                "class {class:?} is not one of {}",
                SIX_CLASSES.join(", ")
            )));
        }
        Ok(TraceSpec {
            condition,
            mode,
            class,
        })
    }

    /// The background flows' CCAs, BBR first.
    pub fn background(&self) -> Vec<&'static str> {
        // Validated in `new`, so parse cannot fail; an empty mix otherwise.
        let mix = Mix::parse(&self.class).unwrap_or_default();
        let mut v = vec!["bbr"; mix.count("bbr") as usize];
        v.extend(std::iter::repeat_n("cubic", mix.count("cubic") as usize));
        v
    }

    /// `<condition>/<mode>/<class>` (without extension).
    pub fn rel_stem(&self) -> PathBuf {
        PathBuf::from(&self.condition.name)
            .join(self.mode.dir_name())
            .join(&self.class)
    }

    pub fn csv_path(&self, out: &Path) -> PathBuf {
        out.join(self.rel_stem()).with_extension("csv")
    }

    pub fn sidecar_path(&self, out: &Path) -> PathBuf {
        out.join(self.rel_stem()).with_extension("json")
    }

    /// Short display name.
    pub fn key(&self) -> String {
        self.rel_stem().display().to_string()
    }
}
