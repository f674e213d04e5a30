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
        let text = opsel_netlab::tput_store::read(&dir)?;
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
    /// JSON-lines log file, a recorded plan's folder (gzip segments and tail), or a
    /// folder holding either (recorded or synthetic logs).
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

/// Transfers from a JSON-lines file, a recorded plan's folder (its gzip
/// segments and tail, `opsel_netlab::tput_store`) or a folder holding either
/// (searched recursively; a folder with a `manifest.json` is a plan's).
fn read_logs(path: &std::path::Path) -> Result<Vec<(u64, TransferLog)>> {
    let is_plan = |d: &std::path::Path| d.join("manifest.json").is_file();
    let mut files = Vec::new();
    if path.is_dir() && !is_plan(path) {
        let mut stack = vec![path.to_path_buf()];
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d)
                .map_err(|e| Error::io(format!("listing {}", d.display()), e))?;
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() && is_plan(&p) {
                    files.push(p);
                } else if p.is_dir() {
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
        let text = if f.is_dir() {
            opsel_netlab::tput_store::read(&f)?
        } else {
            std::fs::read_to_string(&f)
                .map_err(|e| Error::io(format!("reading {}", f.display()), e))?
        };
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

#[derive(Args)]
pub struct AbLabArgs {
    /// FastProb model (file or shipped name; default fastprob-netlab).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Congestion controls to A/B, in order.
    #[arg(long, value_delimiter = ',', default_value = "cubic,bbr")]
    candidates: Vec<String>,
    /// Bottleneck rate (Mbit/s).
    #[arg(long, default_value_t = 50.0)]
    rate_mbps: f64,
    /// Round-trip time of the path (ms).
    #[arg(long, default_value_t = 30.0)]
    rtt_ms: f64,
    /// Drop-tail buffer in BDPs.
    #[arg(long, default_value_t = 1.0)]
    buffer_bdp: f64,
    /// Background flows on the path: none, cubic, bbr, cubic+bbr, onoff-cubic, onoff-bbr.
    #[arg(long, default_value = "cubic")]
    background: String,
    /// The background class handed to the fairness rule (unknown, cubic, bbr).
    #[arg(long, default_value = "unknown")]
    class: String,
    /// A/B evaluations (each: one FastProb A/B and one fixed-length A/B, each on a fresh connection).
    #[arg(long, default_value_t = 10)]
    evals: usize,
    /// Samples per candidate of the fixed-length evaluation.
    #[arg(long, default_value_t = 50)]
    fixed_samples: usize,
    /// Samples measured with the chosen control after each choice.
    #[arg(long, default_value_t = 30)]
    steady_samples: usize,
    /// Write every evaluation as JSON here as well.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// `opsel lab fastprob-ab`: the CCA A/B of `opsel probe --throughput --ab` on
/// the emulated WAN with a background, FastProb against a fixed-length
/// evaluation (004 §VI analogue, notes 004 §8 B.2). Each evaluation runs a
/// FastProb A/B on a fresh connection, then a fixed-length A/B on another, and
/// after each choice measures the chosen control for `steady_samples`.
pub fn ab_lab(a: AbLabArgs) -> Result<()> {
    let rows = ab_lab_rows(&a)?;
    let fixed = a.fixed_samples;
    let steady = a.steady_samples;
    ab_summary(&a, &rows);
    if let Some(p) = &a.json {
        let v = serde_json::json!({
            "conditions": {"rate_mbps": a.rate_mbps, "rtt_ms": a.rtt_ms, "buffer_bdp": a.buffer_bdp,
                           "background": a.background, "class": a.class,
                           "candidates": a.candidates, "fixed_samples": fixed,
                           "steady_samples": steady},
            "evaluations": rows,
        });
        std::fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default())
            .map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    }
    Ok(())
}

/// Bring the lab up, run the evaluations, take the lab down (also on error:
/// `Lab` and the traffic threads clean up on drop). One JSON object per
/// evaluation: `{"fastprob": {"outcome", "steady_bps"}, "fixed": {...}}`.
fn ab_lab_rows(a: &AbLabArgs) -> Result<Vec<serde_json::Value>> {
    use opsel::fastprob::{AbMethod, AbSpec};
    use opsel_netlab::scenario::BASE_PORT;
    use opsel_netlab::sys;
    use opsel_netlab::topo;
    use opsel_netlab::traffic;
    use std::net::{SocketAddrV4, TcpStream};
    use std::sync::Arc;
    use std::time::Duration;

    sys::require_root()?;
    let model = Arc::new(crate::probe::fastprob_model(a.model.as_deref())?);
    let class: opsel::fastprob::Background = a.class.parse()?;
    let spec = |method| AbSpec {
        candidates: a.candidates.clone(),
        background: class,
        settle_samples: 1,
        method,
        budget: Default::default(),
    };
    // Validate both specs before bringing a lab up.
    spec(AbMethod::Fastprob).validate()?;
    spec(AbMethod::Fixed {
        samples: a.fixed_samples,
    })
    .validate()?;
    let total_ns = (a.evals as u64 + 1) * 120_000_000_000;
    let mut bl = bg_lab(a.rate_mbps, a.rtt_ms, a.buffer_bdp, &a.background, total_ns)?;
    let stop = bl.stop.clone();
    // The foreground sink: every connection read until EOF or stop.
    let dst = SocketAddrV4::new(topo::receiver_ip(0), BASE_PORT + 60);
    bl.th.handles.push(traffic::spawn_sink(
        &bl.lab.receiver_ns[0],
        "ab-sink",
        dst,
        stop.clone(),
    )?);
    // Let the background reach its steady state.
    std::thread::sleep(Duration::from_secs(3));
    let (evals, fixed, steady) = (a.evals, a.fixed_samples, a.steady_samples);
    let (sf, sx) = (
        spec(AbMethod::Fastprob),
        spec(AbMethod::Fixed { samples: fixed }),
    );
    let rows = sys::in_netns(&bl.lab.sender_ns[0], move || {
        let mut rows = Vec::new();
        for e in 0..evals {
            let mut row = serde_json::Map::new();
            for (name, s) in [("fastprob", sf.clone()), ("fixed", sx.clone())] {
                let sock = TcpStream::connect_timeout(&dst.into(), Duration::from_secs(3))
                    .map_err(|err| Error::io(format!("connect to {dst}"), err))?;
                let r = crate::probe::ab_on_socket(&sock, model.clone(), s, Some(steady))?;
                let _ = sock.shutdown(std::net::Shutdown::Both);
                row.insert(
                    name.into(),
                    serde_json::json!({"outcome": r.outcome, "steady_bps": r.steady_bps}),
                );
            }
            let f = &row["fastprob"];
            let x = &row["fixed"];
            eprintln!(
                "eval {}/{evals}: FastProb chose {} after {:.2} s ({:.1} Mbit/s after); fixed chose {} after {:.2} s ({:.1} Mbit/s after)",
                e + 1,
                f["outcome"]["chosen"].as_str().unwrap_or(""),
                f["outcome"]["total_probe_ns"].as_f64().unwrap_or(0.0) / 1e9,
                f["steady_bps"].as_f64().unwrap_or(0.0) / 1e6,
                x["outcome"]["chosen"].as_str().unwrap_or(""),
                x["outcome"]["total_probe_ns"].as_f64().unwrap_or(0.0) / 1e9,
                x["steady_bps"].as_f64().unwrap_or(0.0) / 1e6,
            );
            rows.push(serde_json::Value::Object(row));
        }
        Ok(rows)
    })?;
    drop(bl);
    Ok(rows)
}

/// A netlab path (TUN pipe: rate, RTT, drop-tail buffer in BDPs) with
/// background flows running from the start: `none`, `cubic`, `bbr`,
/// `cubic+bbr`, `onoff-cubic`, `onoff-bbr` (pairs 1.. of the lab; pair 0 is
/// the foreground's). Dropping it stops the flows and every thread pushed
/// onto `th`, then takes the lab down (also on error).
pub(crate) struct BgLab {
    // Declared first: the threads stop before the lab goes down.
    pub th: BgThreads,
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub lab: opsel_netlab::topo::Lab,
}

/// Threads of a [`BgLab`], stopped and joined on drop.
pub(crate) struct BgThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub handles: Vec<std::thread::JoinHandle<Result<u64>>>,
}

impl Drop for BgThreads {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

pub(crate) fn bg_lab(
    rate_mbps: f64,
    rtt_ms: f64,
    buffer_bdp: f64,
    background: &str,
    total_ns: u64,
) -> Result<BgLab> {
    use opsel_netlab::scenario::{bdp_bytes, BASE_PORT};
    use opsel_netlab::sys;
    use opsel_netlab::topo::{self, Lab, PipeSpec, TopologySpec};
    use opsel_netlab::traffic::{self, Bins, FlowPlan, Traffic};
    use std::net::SocketAddrV4;
    use std::sync::{Arc, Mutex};

    let bg: Vec<(&str, bool)> = match background {
        "none" => vec![],
        "cubic" => vec![("cubic", false)],
        "bbr" => vec![("bbr", false)],
        "cubic+bbr" => vec![("cubic", false), ("bbr", false)],
        "onoff-cubic" => vec![("cubic", true)],
        "onoff-bbr" => vec![("bbr", true)],
        other => {
            return Err(Error::invalid(format!(
                "--background {other:?}: expected none, cubic, bbr, cubic+bbr, onoff-cubic or onoff-bbr"
            )))
        }
    };
    let lab = Lab::up(
        &TopologySpec::dumbbell(1 + bg.len()),
        &PipeSpec::tun(
            rate_mbps,
            rtt_ms,
            bdp_bytes(rate_mbps, rtt_ms, buffer_bdp),
            1,
        ),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut th = BgThreads {
        stop: stop.clone(),
        handles: Vec::new(),
    };
    let t0 = sys::now_ns();
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    for (i, (cca, onoff)) in bg.iter().enumerate() {
        let fp = FlowPlan {
            name: format!("bg{i}-{cca}"),
            traffic: Traffic::Tcp {
                cca: cca.to_string(),
                on_off_s: onoff.then_some((1.5, 1.5)),
            },
            src_ns: lab.sender_ns[1 + i].clone(),
            dst_ns: lab.receiver_ns[1 + i].clone(),
            dst: SocketAddrV4::new(topo::receiver_ip(1 + i), BASE_PORT + i as u16),
            start_ns: 0,
            stop_ns: total_ns,
        };
        let b = Arc::new(Bins::new(t0, total_ns));
        th.handles
            .push(traffic::spawn_receiver(&fp, b, stop.clone())?);
        th.handles
            .push(traffic::spawn_sender(fp, t0, stop.clone(), events.clone())?);
    }
    Ok(BgLab { th, stop, lab })
}

/// The markdown summary: probe seconds, choices, agreement, throughput after the choice.
fn ab_summary(a: &AbLabArgs, rows: &[serde_json::Value]) {
    let fixed = a.fixed_samples;
    let get = |r: &serde_json::Value, m: &str, k: &str| -> f64 {
        match k {
            "probe_s" => r[m]["outcome"]["total_probe_ns"].as_f64().unwrap_or(0.0) / 1e9,
            _ => r[m]["steady_bps"].as_f64().unwrap_or(0.0) / 1e6,
        }
    };
    let n = rows.len().max(1) as f64;
    let agree = rows
        .iter()
        .filter(|r| r["fastprob"]["outcome"]["chosen"] == r["fixed"]["outcome"]["chosen"])
        .count();
    let mean = |m: &str, k: &str| rows.iter().map(|r| get(r, m, k)).sum::<f64>() / n;
    let count = |m: &str, c: &str| {
        rows.iter()
            .filter(|r| r[m]["outcome"]["chosen"] == c)
            .count()
    };
    println!(
        "| method | evaluations | mean probe s | chosen ({}) | Mbit/s after the choice |",
        a.candidates.join(" / ")
    );
    println!("|---|---|---|---|---|");
    for (m, label) in [
        ("fastprob", "FastProb".to_string()),
        ("fixed", format!("fixed {fixed} samples")),
    ] {
        println!(
            "| {label} | {} | {:.2} | {} | {:.1} |",
            rows.len(),
            mean(m, "probe_s"),
            a.candidates
                .iter()
                .map(|c| count(m, c).to_string())
                .collect::<Vec<_>>()
                .join(" / "),
            mean(m, "steady")
        );
    }
    println!(
        "FastProb chose what the fixed-length evaluation chose in {agree} of {}",
        rows.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One FastProb A/B and one fixed-length A/B of cubic and bbr on netlab
    /// (50 Mbit/s, 30 ms, CUBIC background), through the code path of
    /// `opsel probe --throughput --ab`. Bounded: about 25 s; the lab and its
    /// threads are torn down on return or error.
    #[test]
    #[ignore = "needs root and netlab; run with cargo test -p opsel-cli -- --ignored fastprob_ab"]
    fn fastprob_ab_on_netlab_probes_both_and_agrees_on_form() {
        let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../models/fastprob-netlab/model.json");
        let a = AbLabArgs {
            model: Some(model),
            candidates: vec!["cubic".into(), "bbr".into()],
            rate_mbps: 50.0,
            rtt_ms: 30.0,
            buffer_bdp: 1.0,
            background: "cubic".into(),
            class: "unknown".into(),
            evals: 1,
            fixed_samples: 20,
            steady_samples: 5,
            json: None,
        };
        let rows = ab_lab_rows(&a).unwrap();
        assert_eq!(rows.len(), 1);
        let f = &rows[0]["fastprob"]["outcome"];
        let x = &rows[0]["fixed"]["outcome"];
        for o in [f, x] {
            let c = o["candidates"].as_array().unwrap();
            assert_eq!(c.len(), 2);
            assert!(c
                .iter()
                .all(|c| c["probed"] == true && c["estimate_bps"].as_f64().unwrap() > 0.0));
            let chosen = o["chosen"].as_str().unwrap();
            let best = c
                .iter()
                .max_by(|p, q| {
                    p["estimate_bps"]
                        .as_f64()
                        .unwrap()
                        .total_cmp(&q["estimate_bps"].as_f64().unwrap())
                })
                .unwrap();
            assert_eq!(chosen, best["cca"].as_str().unwrap());
            assert!(rows[0]["fastprob"]["steady_bps"].as_f64().unwrap() > 0.0);
        }
        // Fixed: 1 settle + 20 samples of 100 ms per candidate.
        assert_eq!(x["total_probe_ns"].as_u64().unwrap(), 2 * 21 * 100_000_000);
        // FastProb: at most the model's cap (50 samples) per candidate.
        let cap = FastProbModel::load(&a.model.clone().unwrap())
            .unwrap()
            .spec()
            .cap as u64;
        for c in f["candidates"].as_array().unwrap() {
            assert!(c["samples"].as_u64().unwrap() <= cap);
        }
    }
}
