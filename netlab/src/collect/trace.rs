//! The trace files: the CSV (one row per 1 Hz sample, appended run by run)
//! and its JSON side-car, how a rerun reads them back to resume, and the
//! check that a resumed trace keeps its conditions.

use std::io::Write;
use std::path::Path;

use opsel::{Error, Result};

/// CSV header of a trace (one row per 1 Hz sample).
pub const CSV_HEADER: &str = "run,k,t_unix_s,rtt_ms,min_ms,max_ms,answered,cycle,phase,segment";
/// Format tag of the side-car JSON.
pub const SIDECAR_FORMAT: &str = "opsel-trace";

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

/// Time between a trace's samples, ms, from its side-car (`conditions.probe.
/// sample_interval_ms`); 1000 when the side-car or the field is missing (1 Hz,
/// as every trace recorded before the field existed).
pub fn trace_sample_interval_ms(csv: &Path) -> Result<f64> {
    let side = read_sidecar(&csv.with_extension("json"))?;
    let ms = side
        .as_ref()
        .and_then(|v| v.pointer("/conditions/probe/sample_interval_ms"))
        .and_then(|v| v.as_f64())
        .unwrap_or(1000.0);
    if !(ms.is_finite() && ms > 0.0) {
        return Err(Error::invalid(format!(
            "{}: side-car sample_interval_ms is {ms}",
            csv.display()
        )));
    }
    Ok(ms)
}

pub(super) fn read_sidecar(path: &Path) -> Result<Option<serde_json::Value>> {
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

pub(super) fn write_sidecar(path: &Path, v: &serde_json::Value) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    std::fs::write(&tmp, text + "\n")
        .map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("rename {}", tmp.display()), e))
}

/// Opens the CSV for appending, writing the header into a new file and
/// cutting a torn last line (crash mid-write) so appends stay parseable.
pub(super) fn open_append(path: &Path) -> Result<std::fs::File> {
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
