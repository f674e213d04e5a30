//! Command-line front ends of `opsel send` and `opsel recv` (000 §5.4, the
//! iPerfOPS client/server options), with a progress bar.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use opsel::ops::Event;
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::DriverEvent;
use opsel::{Error, Result};

use super::recv::{Receiver, RecvOpts};
use super::send::{self, OpsOpts, SendOpts, Strategy, ACTIVE_MODEL, PASSIVE_MODEL};

#[derive(Args)]
pub struct RecvArgs {
    /// Address to listen on (TCP for control and data, UDP for RTT echoes).
    #[arg(long)]
    listen: SocketAddr,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
    /// Append to --out (resume); the sender's --offset must equal its size.
    #[arg(long)]
    append: bool,
    /// Give up if no sender connects within this many seconds.
    #[arg(long)]
    timeout: Option<f64>,
}

#[derive(Args)]
pub struct SendArgs {
    /// Receiver address (`opsel recv --listen`).
    #[arg(long)]
    to: SocketAddr,
    /// File to send.
    #[arg(long)]
    file: PathBuf,
    /// Fixed congestion control for the whole transfer (default cubic).
    #[arg(long, conflicts_with = "ops")]
    cca: Option<String>,
    /// Let OPS choose the CCA: probe, classify, select, steady for Y s, repeat.
    #[arg(long)]
    ops: bool,
    /// Active probing pattern (000 §3.2), or `passive`.
    #[arg(long, default_value = "S5-C5-S5-B5")]
    pattern: String,
    /// Steady time Y in seconds; 0 probes once (iPerfOPS -S).
    #[arg(long, default_value_t = 100.0)]
    steady: f64,
    /// Model file (default: the shipped model for the pattern).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Adaptive Y: grow while the decision holds, shrink when it changes.
    #[arg(long)]
    adaptive: bool,
    /// Progressive probing: end the probe early (5/10/15 s) when confident.
    #[arg(long)]
    early_exit: bool,
    /// RTT probe toward the receiver: udp (its echo responder) or icmp (root or ping_group_range).
    #[arg(long, default_value = "udp")]
    rtt: String,
    /// Stop after T seconds (fixed-time transfer); resume later with --offset.
    #[arg(long)]
    time: Option<f64>,
    /// Start at this byte of --file (the receiver appends with --append).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// JSON-lines log per interval: FILE[,label].
    #[arg(long)]
    log: Option<String>,
    /// Log interval in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Early exit: minimum 1-NN margin that ends a probe (default 0.8; see
    /// docs/results/ops.md for values calibrated on the shipped models).
    #[arg(long)]
    early_confidence: Option<f64>,
    /// Randomise each steady time by up to ±this fraction (0..=0.5; 0 = fixed Y as in 000).
    #[arg(long, default_value_t = 0.0)]
    jitter: f64,
    /// Seed of the steady-time jitter PRNG.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not run the pattern's last segment before each probe (see DriverConfig::lead_in).
    #[arg(long)]
    no_lead_in: bool,
    /// Windows (pattern cycles) per OPS decision: 1 = one window (000); N > 1
    /// probes N windows back to back and picks the class with the smallest
    /// sum of per-window nearest distances (min-sum; 3 cycles of S5-C5-S5-B5
    /// = 60 s, docs/results/ops-cycles.md). With --early-exit the probe may
    /// end after any window once the min-sum margin reaches --early-confidence.
    #[arg(long, default_value_t = 1)]
    cycles: usize,
    /// Margin-gated probing (needs --cycles N >= 2): decide after one window
    /// when the 1-NN margin is at least this (e.g. 0.1), otherwise keep
    /// probing, window by window, up to N windows, and decide by min-sum.
    /// Unsure probes get longer, confident ones do not (docs/results/ops.md §1c).
    #[arg(long)]
    extend_below: Option<f64>,
    /// CCA before the first OPS decision (passive probing sends with it while
    /// the first window fills).
    #[arg(long, default_value = "cubic")]
    initial_cca: String,
}

fn bytes_bar(len: Option<u64>) -> ProgressBar {
    let pb = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb
}

pub fn recv_main(a: RecvArgs) -> Result<()> {
    let rx = Receiver::bind(RecvOpts {
        listen: a.listen,
        out: a.out.clone(),
        append: a.append,
        accept_timeout: a.timeout.map(Duration::from_secs_f64),
    })?;
    eprintln!(
        "opsel recv: listening on {} (TCP control + data, UDP echo), writing {}{}",
        rx.local_addr()?,
        a.out.display(),
        if a.append { " (append)" } else { "" }
    );
    let pb = bytes_bar(None);
    let r = rx.serve(&mut |n| pb.inc(n))?;
    pb.finish_and_clear();
    println!(
        "received {} bytes in {:.1} s ({:.2} Mbit/s); sha256 {} {}; {} now {} bytes, sha256 {}",
        r.received,
        r.elapsed.as_secs_f64(),
        r.received as f64 * 8.0 / r.elapsed.as_secs_f64().max(1e-9) / 1e6,
        r.sha256,
        if r.verified { "verified" } else { "MISMATCH" },
        a.out.display(),
        r.file_size,
        r.file_sha256
    );
    if !r.verified {
        return Err(Error::invalid(
            "the received bytes do not match the sender's count or SHA-256; resend",
        ));
    }
    Ok(())
}

pub fn send_main(a: SendArgs) -> Result<()> {
    let strategy = if a.ops {
        let passive = a.pattern.eq_ignore_ascii_case("passive");
        let pattern = if passive {
            None
        } else {
            Some(Pattern::parse(&a.pattern)?)
        };
        let model = a
            .model
            .clone()
            .unwrap_or_else(|| PathBuf::from(if passive { PASSIVE_MODEL } else { ACTIVE_MODEL }));
        let icmp = match a.rtt.as_str() {
            "udp" => false,
            "icmp" => true,
            other => {
                return Err(Error::invalid(format!(
                    "--rtt {other:?}: use udp (the receiver's echo responder) or icmp"
                )))
            }
        };
        Strategy::Ops(OpsOpts {
            pattern,
            steady_s: a.steady,
            model,
            adaptive: a.adaptive,
            early_exit: a.early_exit,
            icmp,
            seed: a.seed,
            lead_in: !a.no_lead_in,
            jitter: a.jitter,
            early_confidence: a.early_confidence,
            cycles: a.cycles,
            extend_below: a.extend_below,
            initial_cca: CcaName::new(&a.initial_cca)?,
        })
    } else {
        Strategy::Fixed(CcaName::new(a.cca.as_deref().unwrap_or("cubic"))?)
    };
    let log = a.log.as_deref().map(|s| match s.split_once(',') {
        Some((f, l)) => (PathBuf::from(f), l.to_string()),
        None => (PathBuf::from(s), String::new()),
    });
    let size = std::fs::metadata(&a.file)
        .map_err(|e| Error::io(format!("stat {}", a.file.display()), e))?
        .len();
    let opts = SendOpts {
        to: a.to,
        file: a.file.clone(),
        strategy,
        time_s: a.time,
        offset: a.offset,
        log,
        interval_s: a.interval,
    };
    let stop = Arc::new(AtomicBool::new(false));
    opsel_netlab::sys::install_interrupt_handler();
    {
        let stop = stop.clone();
        std::thread::spawn(move || loop {
            if opsel_netlab::sys::interrupted() {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        });
    }
    let pb = bytes_bar(Some(size.saturating_sub(a.offset)));
    pb.set_message(match &opts.strategy {
        Strategy::Fixed(c) => c.to_string(),
        Strategy::Ops(o) => o.initial_cca.to_string(),
    });
    let mut on_event = |e: &DriverEvent| match e {
        DriverEvent::Interval {
            total_bytes,
            cca,
            phase,
            ..
        } => {
            pb.set_position(*total_bytes);
            pb.set_message(format!("{} {:?}", cca, phase).to_lowercase());
        }
        DriverEvent::Ops(Event::Classified {
            classified,
            samples,
            early,
            ..
        }) => pb.println(format!(
            "classified {} (confidence {:.2}) from {samples} samples{}",
            classified.mix,
            classified.confidence,
            if *early { ", early exit" } else { "" }
        )),
        DriverEvent::Ops(Event::CycleClassified {
            index,
            cycles,
            distance,
            margin,
            ..
        }) => pb.println(format!(
            "window {}/{cycles}: nearest distance {distance:.3}, min-sum margin {margin:.2}",
            index + 1
        )),
        DriverEvent::Ops(Event::Selected { cca, steady_ns, .. }) => pb.println(format!(
            "selected {cca} for {}",
            steady_ns.map_or("the rest of the transfer".into(), |s| format!(
                "{:.0} s",
                s as f64 / 1e9
            ))
        )),
        _ => {}
    };
    let r = send::run(&opts, Some(stop), &mut on_event)?;
    pb.finish_and_clear();
    let secs = (r.driver.ended_ns - r.driver.started_ns) as f64 / 1e9;
    println!(
        "sent {} bytes in {:.1} s ({:.2} Mbit/s), confirmed by the receiver, sha256 {}",
        r.driver.bytes_sent,
        secs,
        r.driver.bytes_sent as f64 * 8.0 / secs.max(1e-9) / 1e6,
        r.sha256
    );
    if a.ops {
        let s = r.driver.stats;
        println!(
            "OPS: {} decisions ({} early), {} CCA switches, probing {:.1} s, steady {:.1} s",
            s.decisions,
            s.early_exits,
            s.cca_switches,
            s.probe_ns as f64 / 1e9,
            s.steady_ns as f64 / 1e9
        );
    }
    let next = r.offset + r.driver.bytes_sent;
    if next < size {
        println!(
            "stopped at byte {next} of {size}; resume with `opsel send --offset {next} ...` and `opsel recv --append ...`"
        );
    } else if r.file_identical {
        println!(
            "the receiver's file is byte-identical to {} ({} bytes)",
            a.file.display(),
            r.file_size
        );
    }
    Ok(())
}
