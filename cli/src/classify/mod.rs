//! `opsel classify`: run a background-mix model on RTT windows and say
//! what OPS would do: the class (000 Table 6.1 label), its confidence (for
//! 1-NN the margin 1 − d_nearest / d_other, `ops::KnnClassifier`; for a
//! two-stage model the margin to the other side of BBR present,
//! `ops::TwoStageClassifier`) and the
//! CCA the OPS policy picks (000 §4.1 stump by default).
//!
//! Windows come from the command line, a CSV or JSON file or stdin
//! ([`input`]), or a live RTT probe toward a host (passive probing, 000
//! §3.2, [`crate::rtt_series`]). A folder of labelled traces (`opsel lab
//! collect` / `opsel calibrate` output) prints the accuracy and the
//! confusion matrix instead.

pub mod input;

use std::io::Read as _;
use std::path::PathBuf;

use clap::Args;

use opsel::model::{KnnModelFile, ProbingMode};
use opsel::ops::{Classifier, ControllerSpec, NoCallback, Policy, PolicyInput, PolicySpec};
use opsel::{Error, Result};
use opsel_netlab::collect::{self, Mode};
use serde::Serialize;

use crate::calibrate::read_windows;
use crate::models;
use crate::rtt_series::{self, SeriesSpec};

#[derive(Args)]
pub struct ClassifyArgs {
    /// Model: a file, a folder with model.json, or a shipped name (passive,
    /// active-s5c5s5b5, …) looked up in $OPSEL_MODELS,
    /// <exe dir>/../share/opsel/models, ./models and the built-in copies.
    /// Default: passive.
    #[arg(long)]
    model: Option<PathBuf>,
    /// One window of RTT samples in ms, comma-separated (as many as the model's w).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    window: Vec<f64>,
    /// A CSV or JSON file of windows or of one RTT series (`-` = stdin): one
    /// window per line; a CSV with an rtt_ms column; `[v, …]`, `[[…], …]`,
    /// {"rtt_ms": […]} or `opsel probe --json` output.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Probe the RTT toward HOST live (HOST, icmp:HOST or udp:HOST:PORT; w
    /// samples at the model's rate, 000 §3.2: w s at 1 Hz) and classify that
    /// window. Passive models only.
    #[arg(long)]
    host: Option<String>,
    /// A folder of labelled traces `<class>.csv`: accuracy and confusion matrix.
    #[arg(long)]
    traces: Option<PathBuf>,
    /// OPS policy: `stump` (000 §4.1: BBR present → bbr, else cubic) or a
    /// table such as "B1-C1=bbr, *=cubic".
    #[arg(long, default_value = "stump")]
    policy: String,
    /// Print JSON (one object per window) instead of text.
    #[arg(long)]
    json: bool,
}

/// One window's result: the core's policy input (label, confidence,
/// distance, the background views) and the policy's CCA.
#[derive(Serialize)]
struct Verdict<'a> {
    window: usize,
    #[serde(flatten)]
    input: PolicyInput<'a>,
    cca: String,
    model: String,
}

pub fn main(a: ClassifyArgs) -> Result<()> {
    let src = models::locate(a.model.as_deref(), models::PASSIVE)?;
    let file = models::load(&src)?;
    let model_name = src.to_string();
    if let Some(dir) = &a.traces {
        return traces(&a, &file, &model_name, dir);
    }
    let w = file.model.window();
    let mut windows: Vec<Vec<f64>> = Vec::new();
    if !a.window.is_empty() {
        windows.push(a.window.clone());
    }
    if let Some(p) = &a.file {
        let (text, name) = if p.as_os_str() == "-" {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .map_err(|e| Error::io("read windows from stdin", e))?;
            (t, "stdin".to_string())
        } else {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("read windows from {}", p.display()), e))?;
            (t, p.display().to_string())
        };
        let got = input::parse(&text, &name, w)?;
        if got.leftover > 0 {
            eprintln!(
                "({name}: the last {} samples make no whole window of {w}; not classified)",
                got.leftover
            );
        }
        windows.extend(got.windows);
    }
    if let Some(h) = &a.host {
        windows.push(live_window(h, &file)?);
    }
    if windows.is_empty() {
        return Err(Error::invalid(
            "give --window v1,v2,... , --file FILE (or - for stdin), --host HOST or --traces DIR",
        ));
    }
    for (i, win) in windows.iter().enumerate() {
        if win.is_empty() {
            return Err(Error::invalid(format!("window {} is empty", i + 1)));
        }
        if win.len() != w {
            return Err(Error::invalid(format!(
                "window {} has {} samples; the model {model_name} takes w = {w}",
                i + 1,
                win.len(),
            )));
        }
        if let Some(j) = win.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "window {} sample {} is {}; every RTT sample must be a finite number of ms",
                i + 1,
                j + 1,
                win[j]
            )));
        }
    }
    // The same classifier and policy objects the OPS controller uses, so
    // this prints what a transfer would decide on the same window.
    let spec = ControllerSpec {
        policy: PolicySpec::from(a.policy.clone()),
        ..ControllerSpec::default()
    };
    let mut policy = spec.policy::<NoCallback>(None)?;
    let classes = file.model.classes().to_vec();
    // The spec's factory: a two-stage file (stage2) gets its two-stage
    // classifier, never stage 1 alone.
    let mut clf = spec.classifier(&file)?;
    policy.check_classes(clf.classes())?;
    for (i, win) in windows.iter().enumerate() {
        let c = clf.classify(win)?;
        let cca = policy.select(&c)?;
        let v = Verdict {
            window: i + 1,
            input: PolicyInput::new(&c, &classes),
            cca: cca.to_string(),
            model: model_name.clone(),
        };
        if a.json {
            println!(
                "{}",
                serde_json::to_string(&v).map_err(|e| Error::invalid(e.to_string()))?
            );
        } else {
            println!(
                "{}\tconfidence {:.3}\tOPS picks {}\t(distance {:.4})",
                v.input.label, v.input.confidence, v.cca, v.input.distance
            );
        }
    }
    Ok(())
}

/// w samples toward `host` at the model's probing rate (000 §3.2).
fn live_window(host: &str, file: &KnnModelFile) -> Result<Vec<f64>> {
    let p = &file.meta.probing;
    if p.mode == ProbingMode::Active {
        return Err(Error::invalid(format!(
            "--host probes passively, but the model was trained with the active pattern {}; \
             use a passive model (--model passive) or `opsel send --ops` for active probing",
            p.pattern.as_deref().unwrap_or("?")
        )));
    }
    let target = rtt_series::parse_target(host)?;
    let w = file.model.window();
    let mut spec = SeriesSpec::ops(w);
    spec.period = std::time::Duration::from_secs_f64(p.sample_interval_ms / 1e3);
    spec.burst.count = p.echoes_per_sample.clamp(1, 1000) as u16;
    spec.burst.interval_ns = (p.echo_interval_ms * 1e6) as u64;
    eprintln!(
        "probing {target}: {w} samples, one every {} s ({} echoes each) ...",
        spec.period.as_secs_f64(),
        spec.burst.count
    );
    let samples = rtt_series::probe(&target, spec, &mut |s| {
        eprint!("\r{:>4}/{w}", s.t_s as usize + 1);
    })?;
    eprintln!();
    rtt_series::window(&target, &samples)
}

/// Accuracy and confusion matrix over a folder of labelled traces.
fn traces(
    a: &ClassifyArgs,
    file: &KnnModelFile,
    model_name: &str,
    dir: &std::path::Path,
) -> Result<()> {
    let m = &file.model;
    // Classified through the file's classifier (two stages when it has stage2).
    let clf = file.any_model()?;
    let w = m.window();
    let mut ws = clf.workspace();
    let mode = match file.meta.probing.mode {
        ProbingMode::Passive => Mode::Passive,
        ProbingMode::Active => Mode::parse(file.meta.probing.pattern.as_deref().unwrap_or(""))?,
    };
    let n = m.classes().len();
    let mut conf = vec![vec![0usize; n]; n];
    for (ti, class) in m.classes().iter().enumerate() {
        let p = dir.join(format!("{class}.csv"));
        if !p.exists() {
            continue;
        }
        // A trace recorded more often than the model samples is read at the
        // model's period (every 5th sample of a 200-ms trace for a 1 Hz model).
        let trace_ms = collect::trace_sample_interval_ms(&p)?;
        let model_ms = file.meta.probing.sample_interval_ms;
        let step = model_ms / trace_ms;
        if step < 1.0 || step.fract() != 0.0 {
            return Err(Error::invalid(format!(
                "{}: samples every {trace_ms} ms cannot be read as the model's series (every {model_ms} ms)",
                p.display()
            )));
        }
        for win in read_windows(&p, w, &mode, step as usize)? {
            let pred = clf.classify(&win, &mut ws)?;
            conf[ti][pred.class] += 1;
        }
    }
    let total: usize = conf.iter().flatten().sum();
    if total == 0 {
        return Err(Error::invalid(format!(
            "no complete windows of w = {w} under {} (expected files <class>.csv named {:?})",
            dir.display(),
            m.classes()
        )));
    }
    let right: usize = (0..n).map(|i| conf[i][i]).sum();
    let bbr: Vec<bool> = (0..n)
        .map(|i| m.class_mix(i).map(|x| x.bbr_present()).unwrap_or(false))
        .collect();
    let bbr_right: usize = (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|&(i, j)| bbr[i] == bbr[j])
        .map(|(i, j)| conf[i][j])
        .sum();
    let (acc, bacc) = (right as f64 / total as f64, bbr_right as f64 / total as f64);
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "model": model_name, "traces": dir, "windows": total,
                "accuracy": acc, "bbr_present_accuracy": bacc,
                "classes": m.classes(), "confusion": conf,
            })
        );
    } else {
        println!(
            "{total} windows: 6-class {:.1} %, BBR present {:.1} % (rows: truth, columns: predicted)",
            100.0 * acc,
            100.0 * bacc
        );
        print!("{:>8}", "");
        for c in m.classes() {
            print!("{c:>8}");
        }
        println!();
        for (i, row) in conf.iter().enumerate() {
            print!("{:>8}", m.classes()[i]);
            for v in row {
                print!("{v:>8}");
            }
            println!();
        }
    }
    Ok(())
}
