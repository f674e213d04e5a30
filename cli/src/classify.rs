//! `opsel classify`: run a background-mix model on RTT windows — one window
//! given on the command line or in a file, or every window of a folder of
//! labelled traces (`opsel lab collect` / `opsel calibrate` output), which
//! prints the accuracy and the confusion matrix.

use std::path::PathBuf;

use clap::Args;

use opsel::model::{KnnModelFile, ProbingMode};
use opsel::{Error, Result};
use opsel_netlab::collect::Mode;

use crate::calibrate::read_windows;

#[derive(Args)]
pub struct ClassifyArgs {
    /// Model file (`opsel-model`, kind `knn-dtw`).
    #[arg(long, default_value = "models/passive/model.json")]
    model: PathBuf,
    /// One window of RTT samples in ms, comma-separated (as many as the model's w).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    window: Vec<f64>,
    /// A file with one window per line (comma- or whitespace-separated ms).
    #[arg(long)]
    file: Option<PathBuf>,
    /// A folder of labelled traces `<class>.csv`: accuracy and confusion matrix.
    #[arg(long)]
    traces: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn main(a: ClassifyArgs) -> Result<()> {
    let file = KnnModelFile::load(&a.model)?;
    let m = &file.model;
    let w = m.window();
    let mut ws = m.workspace();
    if let Some(dir) = &a.traces {
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
            for win in read_windows(&p, w, &mode)? {
                let pred = m.classify(&win, &mut ws)?;
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
                    "model": a.model, "traces": dir, "windows": total,
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
        return Ok(());
    }
    let mut windows: Vec<Vec<f64>> = Vec::new();
    if !a.window.is_empty() {
        windows.push(a.window.clone());
    }
    if let Some(p) = &a.file {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Error::io(format!("read windows from {}", p.display()), e))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<f64>())
                .collect::<std::result::Result<Vec<f64>, _>>()
                .map_err(|e| Error::invalid(format!("{} line {}: {e}", p.display(), i + 1)))?;
            windows.push(v);
        }
    }
    if windows.is_empty() {
        return Err(Error::invalid(
            "give --window v1,v2,... , --file FILE or --traces DIR",
        ));
    }
    for (i, win) in windows.iter().enumerate() {
        if win.len() != w {
            return Err(Error::invalid(format!(
                "window {} has {} samples; the model {} takes w = {w}",
                i + 1,
                win.len(),
                a.model.display()
            )));
        }
        let (p, _, margin) = m.classify_with_margin(win, &mut ws)?;
        let class = &m.classes()[p.class];
        if a.json {
            println!(
                "{}",
                serde_json::json!({"class": class, "distance": p.distance, "margin": margin})
            );
        } else {
            println!("{class}\tdistance {:.4}\tmargin {margin:.4}", p.distance);
        }
    }
    Ok(())
}
