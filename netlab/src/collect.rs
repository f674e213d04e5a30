//! Training-data collection for the 6-class background-mix classifier
//! (000 §3.2–3.3, Ch 5; notes 000 §2.2 "Ch. 5 data-collection roles": BG
//! stream 1 on S1→D1, BG stream 2 on S2→D2, RTT probing on S3→D3).
//!
//! One *trace* is one (condition, mode, class): a lab with the probing host on
//! pair 0 and the background flows (n BBR + m CUBIC bulk TCP, each on its own
//! sender/receiver pair) on pairs 1.., recorded as a 1 Hz RTT series (each
//! sample the mean of 10 echoes 1 ms apart, 000 §3.2) from the probing host.
//!
//! - **Passive**: the probing host only pings.
//! - **Active** (e.g. `S5-C5-S5-B5`): the probing host also runs the pattern
//!   on one persistent TCP connection of its own to its receiver: a burst
//!   sends at full speed after switching the live socket to the burst's CCA
//!   (`TCP_CONGESTION`, as OPS does, 000 §5.2), a silence sends nothing.
//!   `TCP_NOTSENT_LOWAT` keeps the unsent backlog small so a silence is
//!   silent once the in-flight data has drained. The pattern starts with
//!   sample 0 of each run, so windows of a multiple of the pattern length are
//!   aligned to it (000 §10 gap 2: project decision, align).
//!
//! Traces are CSV files appended run by run (`run` column): a rerun reads the
//! trace, counts the complete windows and records only what is missing, so a
//! crash or a Ctrl-C loses at most the unfinished window. A JSON side-car
//! next to each CSV holds the conditions and one entry per run (start time,
//! kernel, load, base RTT, background goodput). Windows never straddle runs.

use std::fmt::Write as _;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use opsel::mix::{Mix, SIX_CLASSES};
use opsel::probe::{Pattern, SegmentKind};
use opsel::{Error, Result};

use crate::scenario::{bdp_bytes, BASE_PORT, ECHO_PORT};
use crate::sys::{self, now_ns, sleep_until_ns};
use crate::topo::{self, Lab, PipeKind, PipeSpec, TopologySpec};
use crate::traffic::{self, Bins, FlowPlan, Traffic, ECHOES};

const NS: u64 = 1_000_000_000;
/// CSV header of a trace (one row per 1 Hz sample).
pub const CSV_HEADER: &str = "run,k,t_unix_s,rtt_ms,min_ms,max_ms,answered,cycle,phase,segment";
/// Format tag of the side-car JSON.
pub const SIDECAR_FORMAT: &str = "opsel-trace";
/// Port of the active-probing flow on the probing pair's receiver.
const ACTIVE_PORT: u16 = BASE_PORT + 40;
/// Unsent bytes the kernel may hold for the active flow (TCP_NOTSENT_LOWAT):
/// small, so a silence segment starts silent once in-flight data drains.
const ACTIVE_NOTSENT_LOWAT: i32 = 128 * 1024;
/// Seconds of base-RTT samples taken before the background starts.
const BASE_RTT_SAMPLES: u64 = 2;

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
                        "unknown condition {other:?}; use default, c50, thesis, grid (every GRID condition), \
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

fn valid_name(s: &str) -> bool {
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
    Passive,
    Active { pattern: Pattern, text: String },
}

impl Mode {
    /// `passive`, or a pattern such as `S5-C5-S5-B5` (with or without an
    /// `active:` / `active-` prefix).
    pub fn parse(s: &str) -> Result<Mode> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("passive") {
            return Ok(Mode::Passive);
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

    /// Folder name: `passive` or `active-s5c5s5b5`.
    pub fn dir_name(&self) -> String {
        match self {
            Mode::Passive => "passive".into(),
            Mode::Active { text, .. } => format!(
                "active-{}",
                text.chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
                    .to_ascii_lowercase()
            ),
        }
    }

    pub fn pattern_text(&self) -> Option<&str> {
        match self {
            Mode::Passive => None,
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

/// One row of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub run: u32,
    /// Sample index within the run (0 = pattern start in active mode).
    pub k: u64,
    pub t_unix_s: f64,
    /// Mean of the answered echoes; NaN when none came back.
    pub rtt_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub answered: u32,
    /// Pattern cycle and sample phase within it (active only).
    pub cycle: Option<u64>,
    pub phase: Option<u64>,
    /// `silence`, the burst CCA, or `-` (passive).
    pub segment: String,
}

impl Row {
    pub fn valid(&self) -> bool {
        self.answered > 0 && self.rtt_ms.is_finite() && self.rtt_ms > 0.0
    }

    pub fn to_csv(&self) -> String {
        let f = |v: f64| {
            if v.is_finite() {
                format!("{v:.3}")
            } else {
                String::new()
            }
        };
        let o = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        format!(
            "{},{},{:.3},{},{},{},{},{},{},{}",
            self.run,
            self.k,
            self.t_unix_s,
            f(self.rtt_ms),
            f(self.min_ms),
            f(self.max_ms),
            self.answered,
            o(self.cycle),
            o(self.phase),
            self.segment
        )
    }
}

/// Parses a trace. A last line without a newline (a crash mid-write) is
/// ignored; any other malformed line is an error naming its line number.
pub fn parse_trace(text: &str) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    for (i, line) in complete.lines().enumerate() {
        let n = i + 1;
        if n == 1 {
            if line.trim() != CSV_HEADER {
                return Err(Error::invalid(format!(
                    "trace header is {line:?}, expected {CSV_HEADER:?}; is this an opsel trace?"
                )));
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let c: Vec<&str> = line.split(',').collect();
        if c.len() != 10 {
            return Err(Error::invalid(format!(
                "trace line {n} has {} fields, expected 10: {line:?}",
                c.len()
            )));
        }
        let bad = |what: &str| Error::invalid(format!("trace line {n}: bad {what} in {line:?}"));
        let fl = |s: &str, what: &str| -> Result<f64> {
            if s.is_empty() {
                Ok(f64::NAN)
            } else {
                s.parse::<f64>().map_err(|_| bad(what))
            }
        };
        let opt = |s: &str, what: &str| -> Result<Option<u64>> {
            if s.is_empty() {
                Ok(None)
            } else {
                s.parse().map(Some).map_err(|_| bad(what))
            }
        };
        rows.push(Row {
            run: c[0].parse().map_err(|_| bad("run"))?,
            k: c[1].parse().map_err(|_| bad("k"))?,
            t_unix_s: fl(c[2], "t_unix_s")?,
            rtt_ms: fl(c[3], "rtt_ms")?,
            min_ms: fl(c[4], "min_ms")?,
            max_ms: fl(c[5], "max_ms")?,
            answered: c[6].parse().map_err(|_| bad("answered"))?,
            cycle: opt(c[7], "cycle")?,
            phase: opt(c[8], "phase")?,
            segment: c[9].trim().to_string(),
        });
    }
    Ok(rows)
}

/// Complete windows of `w` samples in a trace: per run, the groups
/// `k / w` (aligned to the run start, hence to the pattern in active mode)
/// with all `w` samples present and valid.
pub fn count_windows(rows: &[Row], w: usize) -> usize {
    if w == 0 {
        return 0;
    }
    let mut total = 0;
    let mut cur: Option<(u32, u64)> = None;
    let mut n = 0usize;
    let mut ok = true;
    for r in rows {
        let g = (r.run, r.k / w as u64);
        if cur != Some(g) {
            if n == w && ok {
                total += 1;
            }
            cur = Some(g);
            n = 0;
            ok = true;
        }
        n += 1;
        ok &= r.valid();
    }
    if n == w && ok {
        total += 1;
    }
    total
}

/// What is already on disk for a trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceState {
    pub rows: usize,
    pub windows: usize,
    /// The next run number.
    pub next_run: u32,
}

/// Reads the trace at `path` (missing = empty).
pub fn trace_state(path: &Path, w: usize) -> Result<TraceState> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TraceState::default()),
        Err(e) => return Err(Error::io(format!("read trace {}", path.display()), e)),
    };
    let rows = parse_trace(&text).map_err(|e| {
        Error::invalid(format!(
            "{}: {e}; move the file away to start this trace afresh",
            path.display()
        ))
    })?;
    Ok(TraceState {
        windows: count_windows(&rows, w),
        next_run: rows.iter().map(|r| r.run + 1).max().unwrap_or(0),
        rows: rows.len(),
    })
}

/// Samples to record in one session: the windows still missing, at most
/// `max_windows` of them (a chunk), times `w`. 0 when the trace is complete.
pub fn plan_samples(
    have_windows: usize,
    target_windows: usize,
    max_windows: usize,
    w: usize,
) -> u64 {
    let need = target_windows.saturating_sub(have_windows).min(max_windows);
    (need * w) as u64
}

/// Settings of a collection session.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    /// Window length (samples); resume counts windows of this length.
    pub w: usize,
    /// Windows wanted in the whole trace.
    pub target_windows: usize,
    /// At most this many windows per session (lab life); `usize::MAX` = all.
    pub chunk_windows: usize,
    /// Background time before recording starts.
    pub warmup_s: f64,
    /// Seed of the pipe's (unused, loss = 0) PRNG, recorded for completeness.
    pub seed: u64,
}

impl Default for CollectConfig {
    fn default() -> Self {
        Self {
            w: 20,
            target_windows: 300,
            chunk_windows: usize::MAX,
            warmup_s: 10.0,
            seed: 1,
        }
    }
}

impl CollectConfig {
    pub fn validate(&self, mode: &Mode) -> Result<()> {
        if self.w == 0 || self.w > 3600 {
            return Err(Error::invalid(format!(
                "window length w = {} is outside 1..=3600",
                self.w
            )));
        }
        if !(self.warmup_s.is_finite() && (0.0..=600.0).contains(&self.warmup_s)) {
            return Err(Error::invalid(format!(
                "warm-up {} s is outside 0..=600",
                self.warmup_s
            )));
        }
        if let Mode::Active { pattern, text } = mode {
            let per = pattern.samples_per_run(NS)?;
            if pattern.total_ns() % NS != 0 || per == 0 || self.w as u64 % per != 0 {
                return Err(Error::invalid(format!(
                    "w = {} is not a multiple of pattern {text}'s length ({} s); windows must align to the pattern",
                    self.w,
                    pattern.total_ns() as f64 / 1e9
                )));
            }
        }
        Ok(())
    }
}

/// Outcome of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionResult {
    pub run: Option<u32>,
    pub written: u64,
    pub windows_before: usize,
    pub windows_after: usize,
    pub interrupted: bool,
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The side-car's fixed part (conditions); resumes must match it.
fn sidecar_conditions(spec: &TraceSpec, cfg: &CollectConfig) -> serde_json::Value {
    let bg = spec.background();
    serde_json::json!({
        "condition": spec.condition.name,
        "rate_mbps": spec.condition.rate_mbps,
        "rtt_ms": spec.condition.rtt_ms,
        "buffer_bdp": spec.condition.buffer_bdp,
        "buffer_bytes": spec.condition.buffer_bytes(),
        "mtu": spec.condition.mtu,
        "pipe": "tun",
        "mode": match spec.mode { Mode::Passive => "passive", Mode::Active { .. } => "active" },
        "pattern": spec.mode.pattern_text(),
        "active_transport": spec.mode.pattern_text().map(|_| "one persistent TCP connection, CCA switched live (TCP_CONGESTION) at each burst, TCP_NOTSENT_LOWAT 128 KiB, nothing sent in silences"),
        "class": spec.class,
        "background": {
            "bbr": bg.iter().filter(|c| **c == "bbr").count(),
            "cubic": bg.iter().filter(|c| **c == "cubic").count(),
            "flows": "bulk TCP, one sender/receiver pair each, constant for the whole run",
        },
        "probe": {
            "transport": "udp-echo",
            "echoes_per_sample": ECHOES,
            "echo_interval_ms": 1.0,
            "sample_interval_ms": 1000.0,
        },
        "window": cfg.w,
        "warmup_s": cfg.warmup_s,
    })
}

fn read_sidecar(path: &Path) -> Result<Option<serde_json::Value>> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).map(Some).map_err(|e| {
            Error::invalid(format!(
                "side-car {} is not valid JSON ({e}); fix or remove it",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
    }
}

/// Checks that a resumed trace was recorded under the same conditions.
pub fn check_sidecar_matches(existing: &serde_json::Value, want: &serde_json::Value) -> Result<()> {
    let got = existing
        .get("conditions")
        .unwrap_or(&serde_json::Value::Null);
    for key in [
        "rate_mbps",
        "rtt_ms",
        "buffer_bdp",
        "mtu",
        "mode",
        "pattern",
        "class",
    ] {
        if got.get(key) != want.get(key) {
            return Err(Error::invalid(format!(
                "the existing trace was recorded with {key} = {}, this run asks for {}; use another --out or condition name instead of mixing conditions in one trace",
                got.get(key).unwrap_or(&serde_json::Value::Null),
                want.get(key).unwrap_or(&serde_json::Value::Null)
            )));
        }
    }
    Ok(())
}

fn write_sidecar(path: &Path, v: &serde_json::Value) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    std::fs::write(&tmp, text + "\n")
        .map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("rename {}", tmp.display()), e))
}

/// Opens the CSV for appending, writing the header into a new file and
/// cutting a torn last line (crash mid-write) so appends stay parseable.
fn open_append(path: &Path) -> Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    }
    let io = |e| Error::io(format!("open {}", path.display()), e);
    let existing = match std::fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    match existing {
        None => writeln!(f, "{CSV_HEADER}").map_err(io)?,
        Some(b) if b.is_empty() => writeln!(f, "{CSV_HEADER}").map_err(io)?,
        Some(b) if b.last() != Some(&b'\n') => {
            let keep = b
                .iter()
                .rposition(|c| *c == b'\n')
                .map(|i| i + 1)
                .unwrap_or(0);
            f.set_len(keep as u64).map_err(io)?;
            if keep == 0 {
                writeln!(f, "{CSV_HEADER}").map_err(io)?;
            }
        }
        Some(_) => {}
    }
    Ok(f)
}

/// A probe sample as the streaming prober reports it.
#[derive(Debug, Clone, Copy)]
struct Tick {
    tick_ns: u64,
    rtt_ms: f64,
    min_ms: f64,
    max_ms: f64,
    answered: u32,
}

/// The passive prober of [`traffic::spawn_prober`] (000 §3.2: 10 echoes 1 ms
/// apart, one sample per second), streaming each sample as it completes so a
/// long collection is written to disk as it goes.
fn spawn_stream_prober(
    ns: &str,
    dst: SocketAddrV4,
    first_tick_ns: u64,
    out: mpsc::Sender<Tick>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    sys::spawn_in_netns(ns, "collect-prober", move || {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        // Like the pipe threads (docs/results/netlab.md): on a loaded machine
        // a late wake-up of the prober reads as RTT. It sleeps between echoes,
        // so real-time priority costs the machine nothing.
        sys::set_realtime_priority();
        let s =
            UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| Error::io("bind prober", e))?;
        s.connect(dst)
            .map_err(|e| Error::io(format!("connect prober to {dst}"), e))?;
        s.set_nonblocking(true)
            .map_err(|e| Error::io("nonblocking prober", e))?;
        let mut buf = [0u8; 64];
        let mut k: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let tick = first_tick_ns + k * NS;
            while now_ns() < tick {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                sleep_until_ns(tick.min(now_ns() + 50_000_000));
            }
            let mut rtts = [0.0f64; ECHOES as usize];
            let mut n = 0usize;
            let mut j = 0u32;
            let next_tick = tick + NS;
            loop {
                let now = now_ns();
                if j < ECHOES && now >= tick + j as u64 * 1_000_000 {
                    let mut p = [0u8; 24];
                    p[..8].copy_from_slice(&k.to_le_bytes());
                    p[8..16].copy_from_slice(&(j as u64).to_le_bytes());
                    p[16..24].copy_from_slice(&now.to_le_bytes());
                    let _ = s.send(&p);
                    j += 1;
                    continue;
                }
                while let Ok(len) = s.recv(&mut buf) {
                    if len >= 24 && u64::from_le_bytes(buf[..8].try_into().unwrap_or([0; 8])) == k {
                        let sent = u64::from_le_bytes(buf[16..24].try_into().unwrap_or([0; 8]));
                        if n < rtts.len() {
                            rtts[n] = now_ns().saturating_sub(sent) as f64 / 1e6;
                            n += 1;
                        }
                    }
                }
                if (j == ECHOES && n == ECHOES as usize)
                    || now >= next_tick - 2_000_000
                    || stop.load(Ordering::Relaxed)
                {
                    break;
                }
                sleep_until_ns(now + 100_000);
            }
            let v = &rtts[..n];
            let t = Tick {
                tick_ns: tick,
                rtt_ms: if n > 0 {
                    v.iter().sum::<f64>() / n as f64
                } else {
                    f64::NAN
                },
                min_ms: v.iter().cloned().fold(f64::INFINITY, f64::min),
                max_ms: v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                answered: n as u32,
            };
            if out.send(t).is_err() {
                return Ok(());
            }
            k += 1;
        }
        Ok(())
    })
}

/// The active-probing sender: one persistent TCP connection from the probing
/// host, following `pattern` cyclically from `pattern_start_ns` until `stop`.
fn spawn_active_sender(
    ns: &str,
    dst: SocketAddrV4,
    connect_at_ns: u64,
    pattern_start_ns: u64,
    pattern: Pattern,
    stop: Arc<AtomicBool>,
    switches: Arc<AtomicU64>,
) -> Result<std::thread::JoinHandle<Result<u64>>> {
    sys::spawn_in_netns(ns, "collect-active", move || {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let wait = |t: u64| -> bool {
            while now_ns() < t {
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                sleep_until_ns(t.min(now_ns() + 50_000_000));
            }
            !stop.load(Ordering::Relaxed)
        };
        if !wait(connect_at_ns) {
            return Ok(0);
        }
        let mut s = loop {
            match std::net::TcpStream::connect_timeout(&dst.into(), Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(e) => {
                    if now_ns() > pattern_start_ns || stop.load(Ordering::Relaxed) {
                        return Err(Error::io(format!("connect active probe to {dst}"), e));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        let lowat = ACTIVE_NOTSENT_LOWAT;
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&lowat as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
        let _ = s.set_nodelay(true);
        s.set_write_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| Error::io("SO_SNDTIMEO", e))?;
        let buf = vec![0x5au8; 1 << 16];
        let mut sent = 0u64;
        let mut cycle_start = pattern_start_ns;
        loop {
            for (i, seg) in pattern.segments().iter().enumerate() {
                let a = cycle_start + pattern.segment_start_ns(i).unwrap_or(0);
                let b = a + seg.duration_ns;
                if !wait(a) {
                    return Ok(sent);
                }
                if let SegmentKind::Burst(cca) = seg.kind {
                    // 000 §5.2: switch the live socket, no reconnect.
                    opsel::sys::linux::set_cca(&s, cca.as_str())?;
                    switches.fetch_add(1, Ordering::Relaxed);
                    while now_ns() < b && !stop.load(Ordering::Relaxed) {
                        match s.write(&buf) {
                            Ok(n) => sent += n as u64,
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut
                                    || e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(Error::io("send active probe burst", e)),
                        }
                    }
                }
            }
            cycle_start += pattern.total_ns();
        }
    })
}

/// Records one session of a trace: builds the lab, runs the background,
/// waits `warmup_s`, and appends `plan_samples` samples to the CSV.
/// `progress(done, total)` is called after each sample; `cancel` (or
/// Ctrl-C) ends the session early, keeping what was written.
pub fn collect_session(
    spec: &TraceSpec,
    cfg: &CollectConfig,
    out: &Path,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SessionResult> {
    cfg.validate(&spec.mode)?;
    let csv = spec.csv_path(out);
    let side = spec.sidecar_path(out);
    let state = trace_state(&csv, cfg.w)?;
    let conditions = sidecar_conditions(spec, cfg);
    let mut sidecar = read_sidecar(&side)?;
    if let Some(existing) = &sidecar {
        check_sidecar_matches(existing, &conditions)?;
    }
    let samples = plan_samples(state.windows, cfg.target_windows, cfg.chunk_windows, cfg.w);
    if samples == 0 {
        return Ok(SessionResult {
            run: None,
            written: 0,
            windows_before: state.windows,
            windows_after: state.windows,
            interrupted: false,
        });
    }
    sys::require_root()?;
    let run = state.next_run;
    let c = &spec.condition;
    let bg = spec.background();
    let lab = Lab::up(
        &TopologySpec {
            pairs: 3,
            mtu: c.mtu,
            offloads_off: true,
        },
        &PipeSpec {
            kind: PipeKind::Tun,
            rate_bps: Some((c.rate_mbps * 1e6).round() as u64),
            delay_ns: (c.rtt_ms * 1e6 / 2.0).round() as u64,
            buffer_bytes: c.buffer_bytes(),
            loss: 0.0,
            seed: cfg.seed,
        },
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let switches = Arc::new(AtomicU64::new(0));
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    // Timeline: base-RTT samples, then the background starts, warm-up, then recording.
    let first_tick = now_ns() + 300_000_000;
    let bg_start = first_tick + BASE_RTT_SAMPLES * NS;
    let rec_start = bg_start + (cfg.warmup_s * 1e9) as u64;
    let total_ns = rec_start - bg_start + samples * NS + 2 * NS;

    struct Threads {
        stop: Arc<AtomicBool>,
        handles: Vec<std::thread::JoinHandle<Result<u64>>>,
        units: Vec<std::thread::JoinHandle<Result<()>>>,
    }
    impl Drop for Threads {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
            for h in self.units.drain(..) {
                let _ = h.join();
            }
        }
    }
    let mut th = Threads {
        stop: stop.clone(),
        handles: Vec::new(),
        units: Vec::new(),
    };
    let mut bins = Vec::new();
    for (i, cca) in bg.iter().enumerate() {
        let pair = 1 + i;
        let plan = FlowPlan {
            name: format!("bg{i}-{cca}"),
            traffic: Traffic::Tcp {
                cca: cca.to_string(),
                on_off_s: None,
            },
            src_ns: lab.sender_ns[pair].clone(),
            dst_ns: lab.receiver_ns[pair].clone(),
            dst: SocketAddrV4::new(topo::receiver_ip(pair), BASE_PORT + i as u16),
            start_ns: 0,
            stop_ns: total_ns,
        };
        let b = Arc::new(Bins::new(bg_start, total_ns));
        th.handles
            .push(traffic::spawn_receiver(&plan, b.clone(), stop.clone())?);
        th.handles.push(traffic::spawn_sender(
            plan,
            bg_start,
            stop.clone(),
            events.clone(),
        )?);
        bins.push(b);
    }
    let echo = SocketAddrV4::new(topo::receiver_ip(0), ECHO_PORT);
    th.units.push(crate::traffic::spawn_echo_with(
        &lab.receiver_ns[0],
        echo,
        stop.clone(),
        true,
    )?);
    let active_bins = Arc::new(Bins::new(bg_start, total_ns));
    if let Mode::Active { pattern, .. } = &spec.mode {
        let dst = SocketAddrV4::new(topo::receiver_ip(0), ACTIVE_PORT);
        let plan = FlowPlan {
            name: "active".into(),
            traffic: Traffic::Tcp {
                cca: "cubic".into(),
                on_off_s: None,
            },
            src_ns: lab.sender_ns[0].clone(),
            dst_ns: lab.receiver_ns[0].clone(),
            dst,
            start_ns: 0,
            stop_ns: total_ns,
        };
        th.handles.push(traffic::spawn_receiver(
            &plan,
            active_bins.clone(),
            stop.clone(),
        )?);
        th.handles.push(spawn_active_sender(
            &lab.sender_ns[0],
            dst,
            bg_start,
            rec_start,
            pattern.clone(),
            stop.clone(),
            switches.clone(),
        )?);
    }
    let (tx, rx) = mpsc::channel();
    th.units.push(spawn_stream_prober(
        &lab.sender_ns[0],
        echo,
        first_tick,
        tx,
        stop.clone(),
    )?);

    // The side-car gets this run's entry before any row is written.
    // Monotonic tick → wall clock: one offset for the whole run.
    let unix_offset_s = unix_now_s() - now_ns() as f64 / 1e9;
    let mut entry = serde_json::json!({
        "run": run,
        "start_unix_s": unix_offset_s + rec_start as f64 / 1e9,
        "kernel": read_trim("/proc/sys/kernel/osrelease"),
        "loadavg_at_start": read_trim("/proc/loadavg"),
        "lab": lab.id,
        "samples_planned": samples,
    });
    let mut sc = sidecar.take().unwrap_or_else(|| {
        serde_json::json!({
            "format": SIDECAR_FORMAT,
            "version": 1,
            "conditions": conditions,
            "columns": CSV_HEADER,
            "runs": [],
        })
    });
    let push_run = |sc: &mut serde_json::Value, entry: &serde_json::Value, replace: bool| {
        if let Some(runs) = sc.get_mut("runs").and_then(|r| r.as_array_mut()) {
            if replace {
                runs.pop();
            }
            runs.push(entry.clone());
        }
    };
    push_run(&mut sc, &entry, false);
    if let Some(dir) = side.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    }
    write_sidecar(&side, &sc)?;

    let mut f = open_append(&csv)?;
    let per_run = match &spec.mode {
        Mode::Active { pattern, .. } => Some((pattern.clone(), pattern.samples_per_run(NS)?)),
        Mode::Passive => None,
    };
    let mut base = Vec::new();
    let mut written = 0u64;
    let mut lost = 0u64;
    let mut rtt_sum = 0.0;
    let mut interrupted = false;
    let deadline = rec_start + (samples + 5) * NS;
    while written < samples {
        if cancel.load(Ordering::Relaxed) || sys::interrupted() {
            interrupted = true;
            break;
        }
        let t = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(t) => t,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if now_ns() > deadline + 5 * NS {
                    return Err(Error::invalid(format!(
                        "prober of {} stopped delivering samples ({written} of {samples} written)",
                        spec.key()
                    )));
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::invalid(format!(
                    "prober of {} ended after {written} of {samples} samples",
                    spec.key()
                )))
            }
        };
        if t.tick_ns < bg_start {
            if t.answered > 0 {
                base.push(t.rtt_ms);
            }
            continue;
        }
        if t.tick_ns < rec_start {
            continue;
        }
        let k = (t.tick_ns - rec_start + NS / 2) / NS;
        let (cycle, phase, segment) = match &per_run {
            Some((p, per)) => {
                let seg = p.segment_of_sample(k, NS)?;
                let name = match p.segments()[seg].kind {
                    SegmentKind::Silence => "silence".to_string(),
                    SegmentKind::Burst(c) => c.as_str().to_string(),
                };
                (Some(k / per), Some(k % per), name)
            }
            None => (None, None, "-".to_string()),
        };
        let row = Row {
            run,
            k,
            t_unix_s: unix_offset_s + t.tick_ns as f64 / 1e9,
            rtt_ms: t.rtt_ms,
            min_ms: if t.answered > 0 { t.min_ms } else { f64::NAN },
            max_ms: if t.answered > 0 { t.max_ms } else { f64::NAN },
            answered: t.answered,
            cycle,
            phase,
            segment,
        };
        if row.valid() {
            rtt_sum += row.rtt_ms;
        } else {
            lost += 1;
        }
        writeln!(f, "{}", row.to_csv())
            .map_err(|e| Error::io(format!("append to {}", csv.display()), e))?;
        f.flush()
            .map_err(|e| Error::io(format!("flush {}", csv.display()), e))?;
        written += 1;
        progress(written, samples);
    }
    let rec_end = now_ns();
    drop(th);
    let mean_mbps = |b: &Bins| {
        let v = b.values();
        let a = ((rec_start - bg_start) / traffic::BIN_NS) as usize;
        let e = (((rec_end.max(rec_start + 1)) - bg_start) / traffic::BIN_NS) as usize;
        let e = e.min(v.len());
        if e <= a {
            return 0.0;
        }
        v[a..e].iter().sum::<u64>() as f64 * 8.0 / ((e - a) as f64 * 0.1) / 1e6
    };
    let fwd = lab.fwd_stats.snapshot(false);
    drop(lab);
    let after = trace_state(&csv, cfg.w)?;
    let mut bgm = serde_json::Map::new();
    for (i, (cca, b)) in bg.iter().zip(&bins).enumerate() {
        bgm.insert(format!("bg{i}-{cca}"), serde_json::json!(mean_mbps(b)));
    }
    if let Some(o) = entry.as_object_mut() {
        o.insert("end_unix_s".into(), serde_json::json!(unix_now_s()));
        o.insert("samples_written".into(), serde_json::json!(written));
        o.insert("samples_lost".into(), serde_json::json!(lost));
        o.insert(
            "rtt_mean_ms".into(),
            serde_json::json!(if written > lost {
                rtt_sum / (written - lost) as f64
            } else {
                f64::NAN
            }),
        );
        o.insert("base_rtt_ms".into(), serde_json::json!(base));
        o.insert("background_mbps".into(), serde_json::Value::Object(bgm));
        if spec.mode != Mode::Passive {
            o.insert(
                "active_mbps_mean".into(),
                serde_json::json!(mean_mbps(&active_bins)),
            );
            o.insert(
                "active_cca_switches".into(),
                serde_json::json!(switches.load(Ordering::Relaxed)),
            );
        }
        o.insert(
            "bottleneck_drops".into(),
            serde_json::json!(fwd.drop_queue_pkts),
        );
        let errs: Vec<String> = events
            .lock()
            .map(|v| {
                v.iter()
                    .filter(|e| e.what.starts_with("error"))
                    .map(|e| format!("{}: {}", e.flow, e.what))
                    .collect()
            })
            .unwrap_or_default();
        o.insert("errors".into(), serde_json::json!(errs));
        o.insert("interrupted".into(), serde_json::json!(interrupted));
    }
    push_run(&mut sc, &entry, true);
    write_sidecar(&side, &sc)?;
    Ok(SessionResult {
        run: Some(run),
        written,
        windows_before: state.windows,
        windows_after: after.windows,
        interrupted,
    })
}

/// One entry of a collection plan: a (condition, mode) over a set of classes,
/// with a weight that sets how fast it grows relative to the others.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanItem {
    pub spec: TraceSpec,
    pub weight: f64,
}

/// Parses `condition/mode[@weight]` entries, e.g.
/// `default/passive@1,default/S5-C5-S5-B5@1,c50/passive@0.4`, over `classes`.
pub fn parse_plan(text: &str, classes: &[String]) -> Result<Vec<PlanItem>> {
    let mut v = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (body, weight) = match item.rsplit_once('@') {
            Some((b, w)) => (
                b,
                w.parse::<f64>()
                    .ok()
                    .filter(|w| w.is_finite() && *w > 0.0)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "plan entry {item:?}: weight {w:?} is not a positive number"
                        ))
                    })?,
            ),
            None => (item, 1.0),
        };
        let (cond, mode) = body.split_once('/').ok_or_else(|| {
            Error::invalid(format!(
                "plan entry {item:?} is not <condition>/<mode>[@weight], e.g. default/passive or default/S5-C5-S5-B5@0.5"
            ))
        })?;
        let conditions: Vec<Condition> = if cond == "grid" {
            GRID.iter()
                .map(|g| Condition::preset(g))
                .collect::<Result<_>>()?
        } else {
            vec![Condition::preset(cond)?]
        };
        let mode = Mode::parse(mode)?;
        for condition in &conditions {
            condition.validate()?;
            for c in classes {
                v.push(PlanItem {
                    spec: TraceSpec::new(condition.clone(), mode.clone(), c)?,
                    weight,
                });
            }
        }
    }
    if v.is_empty() {
        return Err(Error::invalid(
            "empty collection plan; give e.g. default/passive,default/S5-C5-S5-B5",
        ));
    }
    Ok(v)
}

/// The next trace a free worker should record: the incomplete, idle one whose
/// window count *after* one more chunk, per unit weight, is smallest (ties:
/// plan order) — weighted fair queueing, so a trace of weight 0.5 gets a
/// chunk for every two of a weight-1 trace. `None` when every idle trace is
/// complete.
pub fn pick_next(
    items: &[PlanItem],
    have: &[usize],
    busy: &[bool],
    target: usize,
    chunk: usize,
) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for (i, it) in items.iter().enumerate() {
        if busy.get(i).copied().unwrap_or(true)
            || have.get(i).copied().unwrap_or(usize::MAX) >= target
        {
            continue;
        }
        let score = (have[i] as f64 + chunk.min(target) as f64) / it.weight;
        if best.is_none_or(|(s, _)| score < s) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| i)
}

/// Runs a plan with `jobs` labs at a time, each session recording at most
/// `cfg.chunk_windows` windows so every trace grows in turn. `log` gets one
/// line per session start/end. Returns when every trace reaches the target,
/// or on Ctrl-C / SIGTERM.
pub fn collect_plan(
    items: &[PlanItem],
    cfg: &CollectConfig,
    out: &Path,
    jobs: usize,
    log: &(dyn Fn(String) + Sync),
) -> Result<()> {
    if jobs == 0 || jobs > 16 {
        return Err(Error::invalid(format!("jobs = {jobs} is outside 1..=16")));
    }
    for it in items {
        cfg.validate(&it.spec.mode)?;
    }
    let busy = Mutex::new(vec![false; items.len()]);
    let failures = Mutex::new(vec![0u32; items.len()]);
    let cancel = AtomicBool::new(false);
    std::thread::scope(|s| {
        for j in 0..jobs {
            let (busy, failures, cancel) = (&busy, &failures, &cancel);
            s.spawn(move || loop {
                if sys::interrupted() {
                    return;
                }
                let pick = {
                    let mut b = match busy.lock() {
                        Ok(b) => b,
                        Err(_) => return,
                    };
                    let fails = failures.lock().map(|f| f.clone()).unwrap_or_default();
                    let have: Vec<usize> = items
                        .iter()
                        .enumerate()
                        .map(|(i, it)| {
                            if fails.get(i).copied().unwrap_or(0) >= 3 {
                                return usize::MAX; // gave up on this trace
                            }
                            trace_state(&it.spec.csv_path(out), cfg.w)
                                .map(|t| t.windows)
                                .unwrap_or(usize::MAX)
                        })
                        .collect();
                    let p = pick_next(items, &have, &b, cfg.target_windows, cfg.chunk_windows);
                    if let Some(i) = p {
                        b[i] = true;
                    }
                    p.map(|i| (i, have[i]))
                };
                let Some((i, have)) = pick else { return };
                let key = items[i].spec.key();
                log(format!("job {j}: start {key} ({have} windows)"));
                let r = collect_session(&items[i].spec, cfg, out, cancel, &mut |_, _| {});
                match &r {
                    Ok(res) => log(format!(
                        "job {j}: done {key}: run {:?}, {} samples, {} -> {} windows{}",
                        res.run,
                        res.written,
                        res.windows_before,
                        res.windows_after,
                        if res.interrupted {
                            " (interrupted)"
                        } else {
                            ""
                        }
                    )),
                    Err(e) => {
                        log(format!("job {j}: FAILED {key}: {e}"));
                        if let Ok(mut f) = failures.lock() {
                            f[i] += 1;
                        }
                        std::thread::sleep(Duration::from_secs(5));
                    }
                }
                if let Ok(mut b) = busy.lock() {
                    b[i] = false;
                }
            });
        }
    });
    Ok(())
}

/// A one-line summary per trace: `key windows rows`.
pub fn status(items: &[PlanItem], out: &Path, w: usize) -> String {
    let mut s = String::new();
    for it in items {
        let st = trace_state(&it.spec.csv_path(out), w);
        let _ = match st {
            Ok(t) => writeln!(
                s,
                "{:<40} {:>4} windows of w={w}  {:>6} samples",
                it.spec.key(),
                t.windows,
                t.rows
            ),
            Err(e) => writeln!(s, "{:<40} error: {e}", it.spec.key()),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(run: u32, k: u64, rtt: f64) -> Row {
        Row {
            run,
            k,
            t_unix_s: 1.7e9 + k as f64,
            rtt_ms: rtt,
            min_ms: rtt - 0.5,
            max_ms: rtt + 0.5,
            answered: if rtt.is_finite() { 10 } else { 0 },
            cycle: Some(k / 20),
            phase: Some(k % 20),
            segment: "silence".into(),
        }
    }

    fn csv(rows: &[Row]) -> String {
        let mut s = format!("{CSV_HEADER}\n");
        for r in rows {
            s.push_str(&r.to_csv());
            s.push('\n');
        }
        s
    }

    #[test]
    fn csv_roundtrip_and_nan_for_lost_samples() {
        let rows = vec![row(0, 0, 65.25), row(0, 1, f64::NAN), row(1, 0, 80.125)];
        let text = csv(&rows);
        assert!(text.lines().nth(2).unwrap().contains(",,,,0,"));
        let back = parse_trace(&text).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].rtt_ms, 65.25);
        assert!(back[1].rtt_ms.is_nan() && !back[1].valid());
        assert_eq!(back[2].run, 1);
        assert_eq!(back[2].cycle, Some(0));
    }

    #[test]
    fn torn_last_line_is_ignored_and_bad_lines_are_named() {
        let mut text = csv(&[row(0, 0, 65.0), row(0, 1, 66.0)]);
        text.push_str("0,2,1700000002.000,67.0"); // crash mid-write
        assert_eq!(parse_trace(&text).unwrap().len(), 2);
        let bad = format!("{CSV_HEADER}\n0,x,1,2,3,4,10,,,-\n");
        let e = parse_trace(&bad).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("bad k"), "{e}");
        let e = parse_trace("a,b\n").unwrap_err().to_string();
        assert!(e.contains("header"), "{e}");
        assert!(parse_trace("").unwrap().is_empty());
    }

    #[test]
    fn windows_are_counted_per_run_aligned_and_complete() {
        let mut rows: Vec<Row> = (0..45).map(|k| row(0, k, 70.0)).collect();
        // run 0: 2 full windows (0..20, 20..40), 5 left over.
        assert_eq!(count_windows(&rows, 20), 2);
        // run 1: 20 samples but one lost → 0 windows; then a full one.
        rows.extend((0..40).map(|k| row(1, k, if k == 3 { f64::NAN } else { 70.0 })));
        assert_eq!(count_windows(&rows, 20), 3);
        assert_eq!(count_windows(&rows, 5), 9 + 7);
        assert_eq!(count_windows(&rows, 0), 0);
        // Leftovers of run 0 never combine with run 1.
        let rows: Vec<Row> = (10..30)
            .map(|k| row(0, k, 70.0))
            .chain((0..10).map(|k| row(1, k, 70.0)))
            .collect();
        assert_eq!(count_windows(&rows, 20), 0);
    }

    #[test]
    fn resume_plans_only_missing_windows() {
        assert_eq!(plan_samples(0, 300, usize::MAX, 20), 6000);
        assert_eq!(plan_samples(290, 300, usize::MAX, 20), 200);
        assert_eq!(plan_samples(290, 300, 5, 20), 100);
        assert_eq!(plan_samples(300, 300, 5, 20), 0);
        assert_eq!(plan_samples(400, 300, 5, 20), 0);
    }

    #[test]
    fn trace_state_and_append_after_a_crash() {
        let dir = std::env::temp_dir().join(format!("opsel-collect-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let spec =
            TraceSpec::new(Condition::preset("c50").unwrap(), Mode::Passive, "b1-c1").unwrap();
        let p = spec.csv_path(&dir);
        assert!(p.ends_with("c50/passive/B1-C1.csv"), "{}", p.display());
        assert_eq!(trace_state(&p, 20).unwrap(), TraceState::default());
        {
            let mut f = open_append(&p).unwrap();
            for k in 0..25 {
                writeln!(f, "{}", row(0, k, 60.0).to_csv()).unwrap();
            }
            write!(f, "0,25,17000").unwrap(); // torn line
        }
        let st = trace_state(&p, 20).unwrap();
        assert_eq!((st.rows, st.windows, st.next_run), (25, 1, 1));
        {
            let mut f = open_append(&p).unwrap();
            for k in 0..20 {
                writeln!(f, "{}", row(1, k, 61.0).to_csv()).unwrap();
            }
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches(CSV_HEADER).count(), 1);
        let st = trace_state(&p, 20).unwrap();
        assert_eq!((st.rows, st.windows, st.next_run), (45, 2, 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn specs_modes_and_conditions() {
        let d = Condition::preset("default").unwrap();
        assert_eq!(d.buffer_bytes(), 406_250);
        assert_eq!(Condition::preset("c50").unwrap().buffer_bytes(), 250_000);
        assert!(Condition::preset("nope")
            .unwrap_err()
            .to_string()
            .contains("nope"));
        let m = Mode::parse("s5-c5-s5-b5").unwrap();
        assert_eq!(m.dir_name(), "active-s5c5s5b5");
        assert_eq!(m.pattern_text(), Some("S5-C5-S5-B5"));
        assert_eq!(
            Mode::parse("active:C5-B5-C5-S5").unwrap().dir_name(),
            "active-c5b5c5s5"
        );
        assert!(Mode::parse("sometimes").is_err());
        let s = TraceSpec::new(d.clone(), Mode::Passive, "B1-B1").unwrap();
        assert_eq!(s.background(), vec!["bbr", "bbr"]);
        let s = TraceSpec::new(d.clone(), Mode::Passive, "B1-C1").unwrap();
        assert_eq!(s.background(), vec!["bbr", "cubic"]);
        let s = TraceSpec::new(d.clone(), Mode::Passive, "B0-C0").unwrap();
        assert!(s.background().is_empty());
        assert!(TraceSpec::new(d.clone(), Mode::Passive, "B2-C0").is_err());
        let mut bad = d;
        bad.name = "../x".into();
        assert!(TraceSpec::new(bad, Mode::Passive, "B0-C0").is_err());
        let cfg = CollectConfig {
            w: 30,
            ..Default::default()
        };
        assert!(cfg
            .validate(&m)
            .unwrap_err()
            .to_string()
            .contains("multiple"));
        let cfg = CollectConfig {
            w: 40,
            ..Default::default()
        };
        assert!(cfg.validate(&m).is_ok());
        assert!(cfg.validate(&Mode::Passive).is_ok());
    }

    #[test]
    fn plans_parse_and_weighted_pick() {
        let classes: Vec<String> = ["B0-C0", "B1-C1"].iter().map(|s| s.to_string()).collect();
        let p = parse_plan(
            "default/passive@1, default/S5-C5-S5-B5, c50/passive@0.5",
            &classes,
        )
        .unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[2].spec.key(), "default/active-s5c5s5b5/B0-C0");
        assert_eq!(p[4].weight, 0.5);
        assert!(parse_plan("default", &classes).is_err());
        // `grid` expands to every grid condition; names carry the parameters.
        let g = parse_plan("grid/passive", &classes).unwrap();
        assert_eq!(g.len(), GRID.len() * classes.len());
        let c = Condition::preset("r300-d20-b2").unwrap();
        assert_eq!((c.rate_mbps, c.rtt_ms, c.buffer_bdp), (300.0, 20.0, 2.0));
        assert_eq!(c.buffer_bytes(), 1_500_000);
        for bad in [
            "r100-d65",
            "r100-d65-b0.5-x",
            "rx-d65-b1",
            "r-5-d65-b1",
            "r100-d0-b1",
        ] {
            assert!(Condition::preset(bad).is_err(), "{bad}");
        }
        let mut seen = std::collections::HashSet::new();
        for g in GRID {
            let c = Condition::preset(g).unwrap();
            c.validate().unwrap();
            assert!(seen.insert((
                c.rate_mbps as u64,
                c.rtt_ms as u64,
                (c.buffer_bdp * 100.0) as u64
            )));
        }
        assert!(parse_plan("default/passive@-1", &classes).is_err());
        assert!(parse_plan("", &classes).is_err());
        let idle = vec![false; 6];
        // Fewest windows after one more chunk, per weight; c50 (weight 0.5) counts double.
        assert_eq!(pick_next(&p, &[0; 6], &idle, 300, 10), Some(0));
        // c50 at 0 windows scores (0+10)/0.5 = 20, behind weight-1 traces at 5 (15).
        assert_eq!(pick_next(&p, &[5, 5, 5, 5, 0, 0], &idle, 300, 10), Some(0));
        // A tie (20 = 20) goes to plan order.
        assert_eq!(
            pick_next(&p, &[10, 10, 10, 10, 0, 0], &idle, 300, 10),
            Some(0)
        );
        assert_eq!(
            pick_next(&p, &[11, 11, 11, 11, 0, 0], &idle, 300, 10),
            Some(4)
        );
        assert_eq!(
            pick_next(&p, &[11, 11, 11, 11, 1, 0], &idle, 300, 10),
            Some(5)
        );
        let mut busy = idle.clone();
        busy[0] = true;
        assert_eq!(
            pick_next(&p, &[1, 2, 10, 10, 10, 10], &busy, 300, 10),
            Some(1)
        );
        assert_eq!(pick_next(&p, &[300; 6], &idle, 300, 10), None);
        assert_eq!(
            pick_next(&p, &[300, 300, 300, 300, 300, 299], &idle, 300, 10),
            Some(5)
        );
    }

    #[test]
    fn resumed_trace_must_match_conditions() {
        let d = Condition::preset("default").unwrap();
        let cfg = CollectConfig::default();
        let a = sidecar_conditions(
            &TraceSpec::new(d.clone(), Mode::Passive, "B0-C1").unwrap(),
            &cfg,
        );
        let existing = serde_json::json!({ "conditions": a.clone() });
        assert!(check_sidecar_matches(&existing, &a).is_ok());
        let mut other = d;
        other.buffer_bdp = 1.5;
        let b = sidecar_conditions(
            &TraceSpec::new(other, Mode::Passive, "B0-C1").unwrap(),
            &cfg,
        );
        let e = check_sidecar_matches(&existing, &b)
            .unwrap_err()
            .to_string();
        assert!(e.contains("buffer_bdp"), "{e}");
    }
}
