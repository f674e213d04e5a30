//! `opsel probe`: the RTT series toward a host as OPS samples it (000 §3.2),
//! printed as CSV or JSON that `opsel classify --file` reads back.
//!
//! RTT only. A FastProb early-stopping throughput probe (004: `core::fastprob`
//! with `sys::linux::tput`) needs a trained FastProb model, and `models/`
//! ships none (the models trained on the recorded corpora and their errors
//! are in docs/results/fastprob.md), so `--throughput` is not offered.

use std::io::Write as _;
use std::time::Duration;

use clap::Args;
use opsel::{Error, Result};
use serde_json::json;

use crate::rtt_series::{self, SeriesSpec};

#[derive(Args)]
#[command(
    after_help = "RTT only: no FastProb throughput model is shipped (004; see \
docs/results/fastprob.md), so there is no --throughput probe.\n\n\
Example: opsel probe 192.0.2.1 --samples 40 > rtt.csv && opsel classify --file rtt.csv"
)]
pub struct ProbeArgs {
    /// HOST or icmp:HOST (ICMP echo: a ping socket, or raw as root) or
    /// udp:HOST:PORT (the UDP echo responder that `opsel recv` runs).
    host: String,
    /// Samples to take (the passive model's window is w = 40).
    #[arg(long, default_value_t = 20)]
    samples: usize,
    /// Seconds between samples (000 §3.2: 1).
    #[arg(long, default_value_t = 1.0)]
    period_s: f64,
    /// Echoes averaged into one sample, 1 ms apart (000 §3.2: 10).
    #[arg(long, default_value_t = 10)]
    echoes: u16,
    /// Print one JSON object ({"target", "period_s", "samples": [...]}) instead of CSV.
    #[arg(long)]
    json: bool,
}

pub fn main(a: ProbeArgs) -> Result<()> {
    if !(a.period_s.is_finite() && a.period_s > 0.0) {
        return Err(Error::invalid(format!(
            "--period-s {}: give seconds > 0",
            a.period_s
        )));
    }
    if a.echoes == 0 {
        return Err(Error::invalid("--echoes 0: give 1 or more (000 §3.2: 10)"));
    }
    let target = rtt_series::parse_target(&a.host)?;
    let mut spec = SeriesSpec::ops(a.samples);
    spec.period = Duration::from_secs_f64(a.period_s);
    spec.burst.count = a.echoes;
    let mut out = std::io::stdout().lock();
    if !a.json {
        let _ = writeln!(out, "t_s,rtt_ms,answered,sent");
    }
    let json = a.json;
    let samples = rtt_series::probe(&target, spec, &mut |s| {
        if !json {
            // CSV streams sample by sample, so a long probe can be watched.
            let _ = writeln!(
                out,
                "{:.3},{},{},{}",
                s.t_s,
                s.rtt_ms.map_or(String::new(), |v| format!("{v:.4}")),
                s.answered,
                s.sent
            );
            let _ = out.flush();
        }
    })?;
    if json {
        let v = json!({
            "target": target.to_string(),
            "period_s": a.period_s,
            "echoes_per_sample": a.echoes,
            "samples": samples,
        });
        let _ = writeln!(out, "{v}");
    }
    let lost = samples.iter().filter(|s| s.rtt_ms.is_none()).count();
    if lost > 0 {
        eprintln!(
            "({lost} of {} samples had no reply from {target})",
            samples.len()
        );
    }
    Ok(())
}
