//! Collection plans: which (condition, mode, class) traces to record, how
//! many windows each still needs, and which one a free lab records next.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use opsel::{Error, Result};

use crate::sys;

use super::session::{collect_session, CollectConfig};
use super::spec::{Condition, Mode, TraceSpec, DENSE, GRID};
use super::trace::trace_state;

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
        let conditions: Vec<Condition> = if cond == "grid" || cond == "dense" {
            let names: &[&str] = if cond == "grid" { &GRID } else { &DENSE };
            names
                .iter()
                .map(|g| Condition::preset(g))
                .collect::<Result<_>>()?
        } else {
            vec![Condition::preset(cond)?]
        };
        let mode = Mode::parse(mode)?;
        let many = cond == "grid" || cond == "dense";
        for condition in &conditions {
            condition.validate()?;
            // In a grid or dense plan, a condition whose largest RTT does not
            // fit in a sub-second sample period is recorded at 1 Hz: its
            // 1 Hz series is what every analysis reads anyway.
            let mode = if many && mode.check_fits(condition).is_err() {
                Mode::Passive
            } else {
                mode.clone()
            };
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
                            trace_state(&it.spec.csv_path(out), cfg.w_samples(&it.spec.mode))
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

/// A one-line summary per trace: `key windows rows` (windows of `w_s` seconds).
pub fn status(items: &[PlanItem], out: &Path, w_s: usize) -> String {
    let mut s = String::new();
    for it in items {
        let w = it.spec.mode.window_samples(w_s);
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
