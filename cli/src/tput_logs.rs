//! `opsel lab tput-logs`: record throughput logs for FastProb (004 §III) on the
//! emulated WAN (resumable; see `opsel_netlab::tput_logs`), and
//! `opsel lab fastprob-eval`: replay FastProb and the 004 baselines over logs.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;

use opsel::fastprob::eval::{default_baselines, evaluate, markdown};
use opsel::fastprob::{FastProbModel, TransferLog};
use opsel::{Error, Result};
use opsel_netlab::tput_logs::{self, Plan};

#[derive(Args)]
pub struct TputLogsArgs {
    /// Plan file (TOML): name, interval_ms, samples, transfers, seed, [[family]] lists.
    #[arg(long)]
    plan: PathBuf,
    /// Output folder: <out>/<plan name>/transfers.jsonl + manifest.json.
    #[arg(long, default_value = "data/tput-logs")]
    out: PathBuf,
    /// Override the plan's total number of transfers (a rerun records the missing ones).
    #[arg(long)]
    transfers: Option<usize>,
    /// Print how many transfers are recorded and exit.
    #[arg(long)]
    status: bool,
}

pub fn record(a: TputLogsArgs) -> Result<()> {
    let mut plan = Plan::load(&a.plan)?;
    if let Some(t) = a.transfers {
        plan.transfers = t;
    }
    let dir = tput_logs::plan_dir(&a.out, &plan);
    if a.status {
        let text = std::fs::read_to_string(dir.join("transfers.jsonl")).unwrap_or_default();
        let (n, _) = tput_logs::scan(&text)?;
        println!(
            "{}: {n} of {} transfers recorded",
            dir.display(),
            plan.transfers
        );
        return Ok(());
    }
    let cancel = AtomicBool::new(false);
    let r = tput_logs::record_plan(&plan, &a.out, &cancel, &mut |seq, of| {
        let c = tput_logs::draw(&plan, seq);
        eprintln!(
            "transfer {}/{of}: {} {} {} Mbit/s {} ms {:.1} BDP bg={} streams={} setup={} ms stalls={}",
            seq + 1,
            c.family,
            c.cca,
            c.rate_mbps,
            c.rtt_ms,
            c.buffer_bdp,
            c.background,
            c.streams,
            c.setup_delay_ms,
            c.stalls_s.len()
        );
    })?;
    println!(
        "{}: {} → {} transfers{}",
        dir.display(),
        r.before,
        r.after,
        if r.interrupted {
            " (interrupted; rerun to continue)"
        } else {
            ""
        }
    );
    Ok(())
}

#[derive(Args)]
pub struct EvalArgs {
    /// FastProb model file (kind "fastprob"); without it only the baselines run.
    #[arg(long)]
    model: Option<PathBuf>,
    /// JSON-lines log file or a folder of *.jsonl (recorded or synthetic logs).
    #[arg(long)]
    logs: PathBuf,
    /// Evaluate only the logs from this fraction of the time order on (0.8: the
    /// held-out last 20 % of a time-ordered 80/20 split, 004 §IV).
    #[arg(long, default_value_t = 0.8)]
    from_fraction: f64,
    /// Fixed-n RF baselines to report (the model must hold those regressors).
    #[arg(long, value_delimiter = ',', default_value = "3,10")]
    fixed_n: Vec<usize>,
    /// Write the results as JSON here as well.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn read_logs(path: &std::path::Path) -> Result<Vec<(u64, TransferLog)>> {
    let mut files = Vec::new();
    if path.is_dir() {
        let mut stack = vec![path.to_path_buf()];
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d)
                .map_err(|e| Error::io(format!("listing {}", d.display()), e))?;
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    files.push(p);
                }
            }
        }
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| Error::io(format!("reading {}", f.display()), e))?;
        for (i, l) in text.lines().enumerate() {
            if l.trim().is_empty() {
                continue;
            }
            let at = |m: String| Error::invalid(format!("{} line {}: {m}", f.display(), i + 1));
            let v: serde_json::Value = serde_json::from_str(l).map_err(|e| at(e.to_string()))?;
            let seq = v["seq"].as_u64().unwrap_or(i as u64);
            let iv = v["interval_ns"]
                .as_u64()
                .ok_or_else(|| at("no integer interval_ns".into()))?;
            let samples: Vec<f64> = v["samples_bps"]
                .as_array()
                .ok_or_else(|| at("no samples_bps array".into()))?
                .iter()
                .map(|x| {
                    x.as_f64()
                        .ok_or_else(|| at(format!("sample {x} is not a number")))
                })
                .collect::<Result<_>>()?;
            let log = TransferLog::new(iv, samples, 60).map_err(|e| at(e.to_string()))?;
            out.push((seq, log));
        }
    }
    out.sort_by_key(|(s, _)| *s);
    Ok(out)
}

pub fn eval(a: EvalArgs) -> Result<()> {
    if !(0.0..1.0).contains(&a.from_fraction) {
        return Err(Error::invalid(format!(
            "--from-fraction {} must be in [0, 1)",
            a.from_fraction
        )));
    }
    let all = read_logs(&a.logs)?;
    let from = (all.len() as f64 * a.from_fraction).round() as usize;
    let logs: Vec<TransferLog> = all.into_iter().skip(from).map(|(_, l)| l).collect();
    let model = a.model.as_deref().map(FastProbModel::load).transpose()?;
    let iv = logs.first().map(|l| l.interval_ns).unwrap_or(1);
    let cap = model.as_ref().map(|m| m.spec().cap).unwrap_or(15);
    // Fixed size: 10 intervals at the median label rate of the set (004 §III: a
    // fixed share of the dataset; here a fixed byte count for every transfer).
    let mut rates: Vec<f64> = logs.iter().filter_map(|l| l.t_avg_bps().ok()).collect();
    rates.sort_by(f64::total_cmp);
    let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
    let size = (median * 10.0 * iv as f64 * 1e-9 / 8.0) as u64;
    let fixed: Vec<usize> = if model.is_some() {
        a.fixed_n.clone()
    } else {
        Vec::new()
    };
    let res = evaluate(
        model.as_ref(),
        &fixed,
        &default_baselines(iv, cap, size),
        &logs,
    )?;
    print!("{}", markdown(&res));
    if let Some(p) = a.json {
        let text = serde_json::to_string_pretty(&res).map_err(|e| Error::invalid(e.to_string()))?;
        std::fs::write(&p, text).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    }
    Ok(())
}
