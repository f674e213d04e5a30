//! `opsel calibrate`: extend a background-mix model with references recorded
//! at the user's own network condition.
//!
//! The shipped models are trained on netlab's condition grid
//! (docs/results/generalisation.md). A path far from the grid (a much lower
//! rate, a much longer RTT) can fall outside what they have seen. This
//! command (1) measures the path the user names — base RTT from echo bursts
//! toward the peer, bottleneck rate and buffer from a short CUBIC burst to a
//! discard sink (or given on the command line) — (2) records a small labelled corpus
//! of the six background mixes in netlab at that condition, at the buffer the
//! burst measured or the buffers asked, and (3) writes a model with the base
//! model's references plus the new ones, same DTW and normalisation
//! configuration, so `opsel send --ops --model FILE` uses it; or, sampled
//! every 200 ms (`--sample-ms`), a model of the path's references alone.
//!
//! `target`: what the new references are (sample period, window, whether
//! they join the base model's); `measure`: the path's base RTT, rate and
//! buffer; `windows`: cutting recorded traces into windows.

mod measure;
mod target;
mod windows;

pub use windows::read_windows;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use opsel::knn::{AnyModel, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, ProbingMode};
use opsel::{Error, Result};
use opsel_netlab::collect::{self, CollectConfig, Condition, TraceSpec};

use measure::{measure_base_rtt_ms, measure_load};
use target::{check_fits, target, Target};

#[derive(Args)]
pub struct CalibrateArgs {
    /// Echo target for the base RTT: `icmp:ADDR` (IPv4 or IPv6) or `HOST:PORT`
    /// of a UDP echo responder (e.g. `opsel recv`'s listen port).
    #[arg(long)]
    probe: Option<String>,
    /// Base RTT in ms instead of measuring it.
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// TCP sink that reads and discards (`HOST:PORT`, e.g. `opsel probe --sink`
    /// at the peer) for a short bulk CUBIC burst: the bottleneck rate (its
    /// goodput) and the buffer (its largest RTT above the base RTT).
    #[arg(long)]
    sink: Option<String>,
    /// Seconds of the measurement's TCP burst.
    #[arg(long, default_value_t = 5.0)]
    sink_s: f64,
    /// Bottleneck rate in Mbit/s instead of measuring it.
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Buffer sizes to record, as multiples of the BDP (comma-separated).
    /// Default: the buffer the --sink burst measured, else 1. At 5 samples a
    /// second the buffer decides what the mixes look like (references at
    /// 0.25 and 1 × BDP misread a 0.59 × BDP path), so measure it or give it.
    #[arg(long, value_delimiter = ',')]
    buffers: Option<Vec<f64>>,
    /// Windows to record per class and buffer.
    #[arg(long, default_value_t = 8)]
    windows: usize,
    /// Labs at once (each records one class).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Background time before each recording (s).
    #[arg(long, default_value_t = 10.0)]
    warmup: f64,
    /// Time between the new references' RTT samples, ms (default: the base
    /// model's; 1000 for the shipped ones). 200 records the same 10-echo
    /// bursts five times a second (`opsel lab collect --mode passive-200ms`):
    /// at the path's own condition 10-s windows then separate the six mixes
    /// about as well as 40-s windows at 1 Hz (docs/results/generalisation.md,
    /// "A finer time resolution"). A period or window other than the base
    /// model's writes a model of the new references alone (passive only).
    #[arg(long, value_name = "MS")]
    sample_ms: Option<u32>,
    /// Window of the written model in whole seconds (default: the base model's).
    #[arg(long, value_name = "S")]
    window_s: Option<u32>,
    /// The model to extend.
    #[arg(long, default_value = "models/passive/model.json")]
    model: PathBuf,
    /// Folder for the recorded corpus (kept; a rerun resumes it).
    #[arg(long, default_value = "opsel-calibration")]
    corpus: PathBuf,
    /// Where to write the extended model.
    #[arg(long)]
    out: PathBuf,
    /// Measure and print the condition, record nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn main(a: CalibrateArgs) -> Result<()> {
    let base = KnnModelFile::load(&a.model)?;
    let t = target(&base, a.sample_ms, a.window_s)
        .map_err(|e| Error::invalid(format!("{}: {e}", a.model.display())))?;
    let (w, mode) = (t.w, &t.mode);
    if a.windows == 0 || a.jobs == 0 || a.jobs > 8 {
        return Err(Error::invalid(format!(
            "--windows {} and --jobs {} must be at least 1 (jobs at most 8)",
            a.windows, a.jobs
        )));
    }
    let rtt_ms = match (a.rtt_ms, &a.probe) {
        (Some(v), _) => v,
        (None, Some(p)) => measure_base_rtt_ms(p)?,
        (None, None) => {
            return Err(Error::invalid(
                "give --probe icmp:ADDR | HOST:PORT to measure the base RTT, or --rtt-ms",
            ))
        }
    };
    let load = match &a.sink {
        Some(s) if a.rate_mbps.is_none() || a.buffers.is_none() => {
            let l = measure_load(s, a.sink_s)?;
            println!(
                "burst to {s}: {:.1} Mbit/s, largest smoothed RTT {:.1} ms (buffer about {:.2} × BDP)",
                l.rate_mbps,
                l.max_srtt_ms,
                l.buffer_bdp(rtt_ms)
            );
            Some(l)
        }
        _ => None,
    };
    let rate_mbps = match (a.rate_mbps, &load) {
        (Some(v), _) => v,
        (None, Some(l)) => l.rate_mbps,
        (None, None) => return Err(Error::invalid(
            "give --sink HOST:PORT (a TCP sink that discards) to measure the rate, or --rate-mbps",
        )),
    };
    let buffers = match (&a.buffers, &load) {
        (Some(b), _) => b.clone(),
        (None, Some(l)) => vec![sig2(l.buffer_bdp(rtt_ms).clamp(0.05, 8.0))],
        (None, None) => {
            eprintln!(
                "opsel calibrate: no --buffers and no --sink to measure the buffer: recording 1 × BDP"
            );
            vec![1.0]
        }
    };
    let conditions: Vec<Condition> = buffers
        .iter()
        .map(|&b| {
            let c = Condition {
                name: format!("cal-r{}-d{}-b{}", sig3(rate_mbps), sig3(rtt_ms), sig3(b)),
                rate_mbps: sig3(rate_mbps),
                rtt_ms: sig3(rtt_ms),
                buffer_bdp: b,
                mtu: 1500,
            };
            c.validate()?;
            check_fits(mode, &c).map(|_| c)
        })
        .collect::<Result<_>>()?;
    println!(
        "path: base RTT {rtt_ms:.2} ms, rate {rate_mbps:.1} Mbit/s; recording {} (windows of {} s) in netlab: {}",
        mode.dir_name(),
        t.w_s,
        conditions
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if a.dry_run {
        return Ok(());
    }
    opsel_netlab::sys::require_root()?;
    let specs: Vec<TraceSpec> = conditions
        .iter()
        .flat_map(|c| SIX_CLASSES.iter().map(move |cl| (c, cl)))
        .map(|(c, cl)| TraceSpec::new(c.clone(), mode.clone(), cl))
        .collect::<Result<_>>()?;
    record(&specs, &a, &t)?;

    // The new references, in the base model's class order.
    let mut windows = Vec::new();
    let mut labels = Vec::new();
    for s in &specs {
        let class = base
            .model
            .classes()
            .iter()
            .position(|c| c == &s.class)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{}: class {} is not among the model's classes {:?}",
                    a.model.display(),
                    s.class,
                    base.model.classes()
                ))
            })?;
        for win in read_windows(&s.csv_path(&a.corpus), w, mode, 1)? {
            windows.extend_from_slice(&win);
            labels.push(class as u32);
        }
    }
    let before = if t.own_only {
        base_on_same_traffic(&base, &specs, &a.corpus, &t)?
    } else {
        accuracy(&base.any_model()?, &windows, &labels, w)?
    };
    let model = if t.own_only {
        // The base model's DTW band as the same share of the window (a
        // radius of 20 in 40 samples becomes 25 in 50).
        let mut config = *base.model.config();
        config.dtw.radius = config
            .dtw
            .radius
            .map(|r| ((r * w) as f64 / base.model.window() as f64).round() as usize);
        Model::fit(&windows, w, &labels, base.model.classes().to_vec(), config)?
    } else {
        let mut raw = base.model.raw_references().to_vec();
        raw.extend_from_slice(&windows);
        let mut all_labels = base.model.labels().to_vec();
        all_labels.extend_from_slice(&labels);
        Model::fit(
            &raw,
            w,
            &all_labels,
            base.model.classes().to_vec(),
            *base.model.config(),
        )?
    };
    let mut meta = base.meta.clone();
    meta.probing.sample_interval_ms = t.sample_ms;
    meta.training = serde_json::json!({
        "base_model": base.meta.training,
        "calibration": {
            "base_rtt_ms": rtt_ms,
            "rate_mbps": rate_mbps,
            "buffers_bdp": buffers,
            "measured": load.as_ref().map(|l| serde_json::json!({
                "rate_mbps": l.rate_mbps, "max_srtt_ms": l.max_srtt_ms,
            })),
            "conditions": conditions.iter().map(|c| &c.name).collect::<Vec<_>>(),
            "windows_added": labels.len(),
            "sample_interval_ms": t.sample_ms,
            "window_s": t.w_s,
            "references": if t.own_only { "the recorded path's alone" } else { "the base model's plus the recorded path's" },
        },
    });
    // A calibrated model extends the base: a two-stage base stays two-stage,
    // with its stage 2 as it is (k, weight and the base's fitted scales: they
    // weigh two distances, not the references, and are never refitted).
    let file = KnnModelFile {
        model,
        meta,
        stage2: base.stage2,
    };
    file.save(&a.out)?;
    if t.own_only {
        println!(
            "wrote {}: {} references of this path alone, windows of {} samples every {} ms; \
             the base model classified {:.1} % of the same traffic (read every {} ms) right",
            a.out.display(),
            labels.len(),
            w,
            t.sample_ms,
            100.0 * before,
            base.meta.probing.sample_interval_ms
        );
    } else {
        println!(
            "wrote {}: {} + {} references; the base model classified {:.1} % of the new windows right",
            a.out.display(),
            base.model.len(),
            labels.len(),
            100.0 * before
        );
    }
    Ok(())
}

/// `v` rounded to `digits` significant digits: names and conditions stay
/// readable (three), a measured buffer is 0.59 or 1.3 (two).
fn sig(v: f64, digits: i32) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(digits - 1 - v.log10().floor() as i32);
    (v * mag).round() / mag
}

fn sig2(v: f64) -> f64 {
    sig(v, 2)
}

fn sig3(v: f64) -> f64 {
    sig(v, 3)
}

/// Runs the traces with `a.jobs` labs at a time, one overall progress bar.
fn record(specs: &[TraceSpec], a: &CalibrateArgs, t: &Target) -> Result<()> {
    let w = t.w;
    let cfg = CollectConfig {
        w: t.w_s,
        target_windows: a.windows,
        chunk_windows: usize::MAX,
        warmup_s: a.warmup,
        seed: 1,
    };
    let per_trace = (a.windows * w) as u64;
    let pb = ProgressBar::new(per_trace * specs.len() as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} samples, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message("recording");
    // Traces already recorded (a resumed run) count as done.
    for s in specs {
        let have = collect::trace_state(&s.csv_path(&a.corpus), w)?.windows;
        pb.inc((have.min(a.windows) * w) as u64);
    }
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..a.jobs.min(specs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { return };
                let mut last = 0u64;
                let r = collect::collect_session(spec, &cfg, &a.corpus, &cancel, &mut |d, _| {
                    pb.inc(d.saturating_sub(last));
                    last = d;
                });
                match r {
                    Ok(r) if r.interrupted => {
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        cancel.store(true, Ordering::Relaxed);
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert_with(|| format!("{}: {e}", spec.key()));
                        }
                        return;
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(Error::invalid(format!(
            "recording failed ({e}); rerun the same command to resume"
        )));
    }
    for s in specs {
        let have = collect::trace_state(&s.csv_path(&a.corpus), w)?.windows;
        if have < a.windows {
            return Err(Error::invalid(format!(
                "{} has {have} of {} windows (interrupted?); rerun the same command to resume",
                s.key(),
                a.windows
            )));
        }
    }
    Ok(())
}

/// The base model on the recorded traffic read at its own sample period
/// (every 5th sample of a 200-ms trace for a 1 Hz model) and window: how it
/// did on this path before the path's own references.
fn base_on_same_traffic(
    base: &KnnModelFile,
    specs: &[TraceSpec],
    corpus: &Path,
    t: &Target,
) -> Result<f64> {
    let ratio = base.meta.probing.sample_interval_ms / t.sample_ms;
    if ratio < 1.0 || ratio.fract() != 0.0 || base.meta.probing.mode != ProbingMode::Passive {
        return Ok(f64::NAN);
    }
    let bw = base.model.window();
    let (mut windows, mut labels) = (Vec::new(), Vec::new());
    for s in specs {
        let Some(class) = base.model.classes().iter().position(|c| c == &s.class) else {
            continue;
        };
        for win in read_windows(&s.csv_path(corpus), bw, &t.mode, ratio as usize)? {
            windows.extend_from_slice(&win);
            labels.push(class as u32);
        }
    }
    accuracy(&base.any_model()?, &windows, &labels, bw)
}

fn accuracy(model: &AnyModel, windows: &[f64], labels: &[u32], w: usize) -> Result<f64> {
    if labels.is_empty() {
        return Ok(f64::NAN);
    }
    let mut ws = model.workspace();
    let mut right = 0usize;
    for (win, &l) in windows.chunks_exact(w).zip(labels) {
        if model.classify(win, &mut ws)?.class as u32 == l {
            right += 1;
        }
    }
    Ok(right as f64 / labels.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sig2_and_sig3_round_to_significant_digits() {
        assert_eq!(sig3(19.87), 19.9);
        assert_eq!(sig3(151.26), 151.0);
        assert_eq!(sig3(0.5), 0.5);
        assert_eq!(sig3(1234.0), 1230.0);
        assert_eq!(sig2(0.5912), 0.59);
        assert_eq!(sig2(1.349), 1.3);
    }
}
