//! `opsel flows lab-qos` and `lab-accuracy`: 003 Ch. 4's queueing experiments on netlab, scaled
//! (see `opsel_netlab::qos_exp`) and §3.4.3's size accuracy with a real
//! exporter (`opsel_netlab::flows_exp`). Resumable: each run's row is a JSON file in
//! `--out`; runs already there are not repeated, and the markdown table is
//! rewritten from all rows at the end.

use std::path::PathBuf;

use clap::Args;

use opsel::{Error, Result};
use opsel_netlab::flows_exp::{self, AccuracyRun, AccuracySpec};
use opsel_netlab::qos_exp::{self, QosExpSpec, QosRow};

#[derive(Args)]
pub struct LabQosArgs {
    /// Directory for the per-run rows (`<config>-<run>.json`) and `table.md`.
    #[arg(long)]
    out: PathBuf,
    /// Runs per configuration.
    #[arg(long, default_value_t = 1)]
    repeats: u32,
    /// A QosExpSpec JSON file (fields absent take the defaults: 100 Mbit/s,
    /// 2 ms RTT, 1.25 MB, 30 Mbit/s UDP, 30 s).
    #[arg(long)]
    spec: Option<PathBuf>,
}

pub fn lab_qos(a: LabQosArgs) -> Result<()> {
    let spec: QosExpSpec = match &a.spec {
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading spec {}", p.display()), e))?;
            serde_json::from_str(&t)
                .map_err(|e| Error::invalid(format!("spec {}: {e}", p.display())))?
        }
        None => QosExpSpec::default(),
    };
    if a.repeats == 0 {
        return Err(Error::invalid(
            "--repeats 0: give at least 1 run per configuration",
        ));
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("creating {}", a.out.display()), e))?;
    opsel_netlab::sys::install_interrupt_handler();
    let mut rows: Vec<QosRow> = Vec::new();
    for cfg in qos_exp::default_configs() {
        for k in 1..=a.repeats {
            let p = a.out.join(format!("{}-{k}.json", cfg.name()));
            if let Ok(t) = std::fs::read_to_string(&p) {
                if let Ok(r) = serde_json::from_str::<QosRow>(&t) {
                    eprintln!(
                        "opsel flows lab-qos: {} run {k}: kept from {}",
                        cfg.name(),
                        p.display()
                    );
                    rows.push(r);
                    continue;
                }
            }
            if opsel_netlab::sys::interrupted() {
                return Err(Error::invalid(
                    "interrupted; rerun the same command to resume",
                ));
            }
            eprintln!(
                "opsel flows lab-qos: {} run {k} ({} s)",
                cfg.name(),
                spec.duration_s
            );
            let r = qos_exp::run_one(&spec, cfg, k)?;
            let t = serde_json::to_string_pretty(&r)
                .map_err(|e| Error::invalid(format!("serialising a row: {e}")))?;
            std::fs::write(&p, t + "\n")
                .map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
            eprintln!(
                "  ping {:.2} → {:.2} ms, α {:.1} Mbit/s, Jain {:.3}, UDP loss {:.1} %",
                r.ping_before_ms,
                r.ping_during_ms,
                r.alpha_mbps,
                r.jain_alpha,
                r.udp_loss_during * 100.0
            );
            rows.push(r);
        }
    }
    let md = qos_exp::table(&spec, &rows);
    let p = a.out.join("table.md");
    std::fs::write(&p, &md).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    print!("{md}");
    Ok(())
}

#[derive(Args)]
pub struct LabAccuracyArgs {
    /// Directory for the per-run results (`run-<k>.json`) and `table.md`.
    #[arg(long)]
    out: PathBuf,
    /// Runs (each transfers every size once under every exporter).
    #[arg(long, default_value_t = 3)]
    repeats: u32,
    /// An AccuracySpec JSON file (fields absent take the defaults: 100 MB
    /// and 1 GB, 1-in-100 and 1-in-1000, 250 Mbit/s, 1 ms RTT, τ = 60 s).
    #[arg(long)]
    spec: Option<PathBuf>,
}

/// `opsel flows lab-accuracy`: 003 Table 3.2 with softflowd on netlab
/// (`opsel_netlab::flows_exp`); resumable like `lab-qos`.
pub fn lab_accuracy(a: LabAccuracyArgs) -> Result<()> {
    let spec: AccuracySpec = match &a.spec {
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| Error::io(format!("reading spec {}", p.display()), e))?;
            serde_json::from_str(&t)
                .map_err(|e| Error::invalid(format!("spec {}: {e}", p.display())))?
        }
        None => AccuracySpec::default(),
    };
    if a.repeats == 0 {
        return Err(Error::invalid("--repeats 0: give at least 1 run"));
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("creating {}", a.out.display()), e))?;
    opsel_netlab::sys::install_interrupt_handler();
    let mut runs: Vec<AccuracyRun> = Vec::new();
    for k in 1..=a.repeats {
        let p = a.out.join(format!("run-{k}.json"));
        if let Ok(t) = std::fs::read_to_string(&p) {
            if let Ok(r) = serde_json::from_str::<AccuracyRun>(&t) {
                eprintln!(
                    "opsel flows lab-accuracy: run {k}: kept from {}",
                    p.display()
                );
                runs.push(r);
                continue;
            }
        }
        if opsel_netlab::sys::interrupted() {
            return Err(Error::invalid(
                "interrupted; rerun the same command to resume",
            ));
        }
        eprintln!("opsel flows lab-accuracy: run {k}");
        let r = flows_exp::run_one(&spec, k, &a.out)?;
        for t in &r.transfers {
            eprintln!(
                "  {} B at 1-in-{}: received {} B in {:.1} s, {} record(s), estimate {} B, ratio {:.4}{}",
                t.size_bytes,
                t.sampling,
                t.received_bytes,
                t.transfer_s,
                t.records,
                t.est_bytes,
                t.ratio,
                if t.alpha { ", α" } else { "" }
            );
        }
        let t = serde_json::to_string_pretty(&r)
            .map_err(|e| Error::invalid(format!("serialising a run: {e}")))?;
        std::fs::write(&p, t + "\n")
            .map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
        runs.push(r);
    }
    let md = flows_exp::table(&spec, &runs);
    let p = a.out.join("table.md");
    std::fs::write(&p, &md).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    print!("{md}");
    Ok(())
}
