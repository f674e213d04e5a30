//! `opsel lab collect`: record RTT training traces for the 6-class
//! background-mix classifier (000 Ch 5) in netlab; see
//! `opsel_netlab::collect` for the trace format and resume rules.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use opsel::mix::SIX_CLASSES;
use opsel::{Error, Result};
use opsel_netlab::collect::{self, CollectConfig, Condition, Mode, PlanItem, TraceSpec};

#[derive(Args)]
pub struct CollectArgs {
    /// Network condition: default (100 Mbit/s, 65 ms, 0.5 BDP), c50 (50 Mbit/s,
    /// 40 ms, 1 BDP), thesis (100 Mbit/s, 65 ms, 1.5 BDP), or a new name with
    /// --rate-mbps, --rtt-ms and --buffer-bdp.
    #[arg(long, default_value = "default")]
    condition: String,
    /// `passive` (1 sample/s), `passive-<ms>ms` (e.g. passive-200ms: a sample every 200 ms) or an active pattern such as S5-C5-S5-B5.
    #[arg(long, default_value = "passive")]
    mode: String,
    /// Override or define the condition's bottleneck rate.
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Override or define the condition's RTT.
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// Override or define the condition's drop-tail buffer (× BDP).
    #[arg(long)]
    buffer_bdp: Option<f64>,
    /// Several (condition, mode) at once instead of --condition/--mode:
    /// `default/passive@1,default/S5-C5-S5-B5@1,c50/passive@0.4` (weight =
    /// relative growth speed); `grid/<mode>` and `dense/<mode>` stand for every
    /// grid or dense-grid condition (with passive-200ms, a condition whose
    /// largest RTT does not fit in 200 ms is recorded at 1 Hz).
    #[arg(long)]
    plan: Option<String>,
    /// Classes to record (default: all six).
    #[arg(long, value_delimiter = ',')]
    classes: Vec<String>,
    /// Windows wanted per trace.
    #[arg(long, default_value_t = 300)]
    windows: usize,
    /// Window length in seconds (= samples at 1 Hz; passive-200ms windows hold 5 w samples); resume counts windows of this length.
    #[arg(long, default_value_t = 20)]
    w: usize,
    /// Windows per lab session before moving to the next trace (plans).
    #[arg(long, default_value_t = 15)]
    chunk: usize,
    /// Labs running at once (plans).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Background time before recording (s).
    #[arg(long, default_value_t = 10.0)]
    warmup: f64,
    /// Output folder: <out>/<condition>/<mode>/<class>.csv + .json.
    #[arg(long, default_value = "collect-out")]
    out: PathBuf,
    /// Print how many windows each trace has and exit.
    #[arg(long)]
    status: bool,
}

fn stamp() -> String {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{:02}:{:02}:{:02}Z", (s / 3600) % 24, (s / 60) % 60, s % 60)
}

pub fn main(a: CollectArgs) -> Result<()> {
    let classes: Vec<String> = if a.classes.is_empty() {
        SIX_CLASSES.iter().map(|s| s.to_string()).collect()
    } else {
        a.classes.clone()
    };
    let items: Vec<PlanItem> = match &a.plan {
        Some(p) => collect::parse_plan(p, &classes)?,
        None => {
            let mut c = match Condition::preset(&a.condition) {
                Ok(c) => c,
                Err(_) if a.rate_mbps.is_some() && a.rtt_ms.is_some() && a.buffer_bdp.is_some() => {
                    Condition {
                        name: a.condition.clone(),
                        rate_mbps: 0.0,
                        rtt_ms: 0.0,
                        buffer_bdp: 0.0,
                        mtu: 1500,
                    }
                }
                Err(e) => return Err(e),
            };
            if let Some(v) = a.rate_mbps {
                c.rate_mbps = v;
            }
            if let Some(v) = a.rtt_ms {
                c.rtt_ms = v;
            }
            if let Some(v) = a.buffer_bdp {
                c.buffer_bdp = v;
            }
            let mode = Mode::parse(&a.mode)?;
            classes
                .iter()
                .map(|cl| {
                    Ok(PlanItem {
                        spec: TraceSpec::new(c.clone(), mode.clone(), cl)?,
                        weight: 1.0,
                    })
                })
                .collect::<Result<_>>()?
        }
    };
    if a.status {
        print!("{}", collect::status(&items, &a.out, a.w));
        return Ok(());
    }
    let cfg = CollectConfig {
        w: a.w,
        target_windows: a.windows,
        chunk_windows: if a.chunk == 0 { usize::MAX } else { a.chunk },
        warmup_s: a.warmup,
        seed: 1,
    };
    if items.len() == 1 && a.jobs <= 1 {
        // One trace: sessions back to back with a progress bar.
        let spec = &items[0].spec;
        let cancel = AtomicBool::new(false);
        loop {
            let st = collect::trace_state(&spec.csv_path(&a.out), cfg.w_samples(&spec.mode))?;
            if st.windows >= cfg.target_windows {
                println!(
                    "{}: complete ({} windows of {} s)",
                    spec.key(),
                    st.windows,
                    cfg.w
                );
                return Ok(());
            }
            let pb = ProgressBar::new(0);
            pb.set_style(
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} samples ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb.set_message(format!("{} ({} windows)", spec.key(), st.windows));
            let r = collect::collect_session(spec, &cfg, &a.out, &cancel, &mut |d, t| {
                pb.set_length(t);
                pb.set_position(d);
            })?;
            pb.finish_and_clear();
            println!(
                "{}: run {:?} wrote {} samples, {} -> {} windows",
                spec.key(),
                r.run,
                r.written,
                r.windows_before,
                r.windows_after
            );
            if r.interrupted {
                return Err(Error::invalid(
                    "interrupted; the trace keeps every complete window, rerun the same command to continue",
                ));
            }
        }
    }
    eprintln!(
        "{} collecting {} traces with {} labs at a time into {}",
        stamp(),
        items.len(),
        a.jobs,
        a.out.display()
    );
    collect::collect_plan(&items, &cfg, &a.out, a.jobs, &|m| {
        eprintln!("{} {m}", stamp())
    })?;
    eprint!("{}", collect::status(&items, &a.out, a.w));
    Ok(())
}
