//! `opsel lab …`: run scenarios on the emulated WAN, benchmark the pipe,
//! reproduce 000 Table 6.3's fixed strategies, and clean up leftovers.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use opsel::sys::linux::signal;
use opsel::Result;
use opsel_netlab::{experiments, scenario::Scenario, topo};

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Subcommand)]
enum LabCmd {
    /// Run a scenario file (TOML) and write flows.csv, rtt.csv, queue.csv,
    /// events.jsonl and summary.json into --out.
    Run {
        /// Scenario file; omit for the built-in default (100 Mbit/s, 65 ms, 1.5 BDP).
        scenario: Option<PathBuf>,
        #[arg(long, default_value = "netlab-out")]
        out: PathBuf,
        /// Override the scenario's duration (seconds).
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Record RTT training traces for the background-mix classifier (resumable).
    Collect(crate::collect::CollectArgs),
    /// Record throughput logs for FastProb (004 §III) from a plan (resumable).
    TputLogs(crate::tput_logs::TputLogsArgs),
    /// Replay FastProb and the 004 baselines over throughput logs.
    FastprobEval(crate::tput_logs::EvalArgs),
    /// CCA A/B on the emulated WAN: FastProb against a fixed-length evaluation (004 §VI analogue).
    FastprobAb(crate::tput_logs::AbLabArgs),
    /// `opsel send --fastprob` and `--ab` on the emulated WAN beside fixed-CCA
    /// transfers: prediction vs the rate after the probe, transfer times.
    FastprobSend(crate::send_probe_lab::SendLabArgs),
    /// Remove leftover lab namespaces of crashed runs (all `onl*` with --all).
    Down {
        #[arg(long)]
        all: bool,
    },
    /// List lab namespaces and whether their owner process is alive.
    List,
    /// Highest rate the pipe sustains at 65 ms RTT with one CUBIC and one BBR flow.
    Bench {
        /// Bottleneck rates to try (Mbit/s).
        #[arg(long, value_delimiter = ',', default_value = "200,400,800")]
        rates: Vec<f64>,
        /// MTUs to try.
        #[arg(long, value_delimiter = ',', default_value = "1500,9000")]
        mtus: Vec<usize>,
        #[arg(long, default_value_t = 20.0)]
        seconds: f64,
        /// Write the markdown table here as well.
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
    /// 000 Table 6.3 fixed strategies at the default scenario: {CUBIC, BBR}
    /// background × {fixed CUBIC, fixed BBR} foreground, Jain per run.
    Table {
        #[arg(long, default_value_t = 90.0)]
        seconds: f64,
        #[arg(long, default_value_t = 1)]
        runs: usize,
        /// Drop-tail buffer in BDPs (the thesis: 1.5).
        #[arg(long, default_value_t = 1.5)]
        buffer_bdp: f64,
        #[arg(long)]
        markdown: Option<PathBuf>,
    },
}

fn bar(total_s: f64, msg: String) -> ProgressBar {
    let pb = ProgressBar::new((total_s * 10.0) as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ×100 ms ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

pub fn main(a: LabArgs) -> Result<()> {
    signal::install_interrupt_handler();
    match a.cmd {
        LabCmd::Run {
            scenario,
            out,
            duration,
        } => {
            let mut scn = match &scenario {
                Some(p) => Scenario::load(p)?,
                None => Scenario::default_testbed(),
            };
            if let Some(d) = duration {
                scn.duration_s = d;
            }
            let pb = bar(scn.duration_s, scn.name.clone());
            let res = opsel_netlab::run(&scn, &mut |t, _| pb.set_position((t * 10.0) as u64))?;
            pb.finish_and_clear();
            opsel_netlab::write_outputs(&res, &out)?;
            let s = &res.summary;
            println!(
                "{}: {} Mbit/s, RTT {} ms, buffer {} B, window {:?} s",
                s.scenario, s.rate_mbps, s.rtt_ms, s.buffer_bytes, s.measure_window_s
            );
            for f in &s.flows {
                println!("  {:<12} {:<18} {:8.2} Mbit/s", f.name, f.kind, f.mean_mbps);
            }
            println!(
                "  Jain {:.3}, total {:.2} Mbit/s, RTT mean {:.1} ms, queue mean {:.0} B max {} B, drops {}",
                s.jain,
                s.total_mbps,
                s.rtt_mean_ms.unwrap_or(f64::NAN),
                s.queue_mean_bytes,
                s.queue_max_bytes,
                s.fwd_final.drop_queue_pkts
            );
            println!("  outputs in {}", out.display());
            Ok(())
        }
        LabCmd::Collect(c) => crate::collect::main(c),
        LabCmd::TputLogs(c) => crate::tput_logs::record(c),
        LabCmd::FastprobEval(c) => crate::tput_logs::eval(c),
        LabCmd::FastprobAb(c) => crate::tput_logs::ab_lab(c),
        LabCmd::FastprobSend(c) => crate::send_probe_lab::main(c),
        LabCmd::Down { all } => {
            let v = topo::down(all)?;
            println!(
                "removed {} namespace(s){}",
                v.len(),
                if v.is_empty() {
                    String::new()
                } else {
                    format!(": {}", v.join(" "))
                }
            );
            Ok(())
        }
        LabCmd::List => {
            for (ns, alive) in topo::list_namespaces() {
                println!("{ns}\t{}", if alive { "live" } else { "leftover" });
            }
            Ok(())
        }
        LabCmd::Bench {
            rates,
            mtus,
            seconds,
            markdown,
        } => {
            let md = experiments::bench(&rates, &mtus, seconds, &mut |msg| eprintln!("{msg}"))?;
            println!("{md}");
            if let Some(p) = markdown {
                std::fs::write(&p, &md)
                    .map_err(|e| opsel::Error::io(format!("write {}", p.display()), e))?;
            }
            Ok(())
        }
        LabCmd::Table {
            seconds,
            runs,
            buffer_bdp,
            markdown,
        } => {
            let md =
                experiments::table63(seconds, runs, buffer_bdp, &mut |msg| eprintln!("{msg}"))?;
            println!("{md}");
            if let Some(p) = markdown {
                std::fs::write(&p, &md)
                    .map_err(|e| opsel::Error::io(format!("write {}", p.display()), e))?;
            }
            Ok(())
        }
    }
}
