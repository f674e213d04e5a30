//! `opsel probe`: the RTT series toward a host as OPS samples it (000 §3.2),
//! printed as CSV or JSON that `opsel classify --file` reads back; or, with
//! `--throughput`, a FastProb early-stopping throughput probe (004 §IV): send
//! at full speed to a TCP sink, feed each interval's acknowledged rate
//! (`TCP_INFO`, `sys::linux::tput`) to the model, and stop as soon as it says
//! the converged throughput is predictable. `--sink` runs such a sink. With
//! `--ab cubic,bbr`, a fast CCA A/B evaluation on the live socket (004 §VI
//! analogue, `opsel::fastprob::ab`): switch the congestion control, probe each
//! candidate with FastProb, keep the best one the fairness rule allows.

use std::io::Write as _;
use std::time::Duration;

use clap::Args;
use opsel::{Error, Result};
use serde_json::json;

use crate::rtt_series::{self, SeriesSpec};

#[derive(Args)]
#[command(after_help = "Examples:\n  \
opsel probe 192.0.2.1 --samples 40 > rtt.csv && opsel classify --file rtt.csv\n  \
opsel probe --sink 0.0.0.0:5202            # on the far host: a TCP sink that discards\n  \
opsel probe --throughput 192.0.2.1:5202              # FastProb (004), shipped model\n  \
opsel probe --throughput 192.0.2.1:5202 --model m.json --family wan   # the file's wan budget\n  \
opsel probe --throughput 192.0.2.1:5202 --ab cubic,bbr --json   # CCA A/B")]
pub struct ProbeArgs {
    /// HOST or icmp:HOST (ICMP echo: a ping socket, or raw as root) or
    /// udp:HOST:PORT (the UDP echo responder that `opsel recv` runs).
    #[arg(required_unless_present_any = ["throughput", "sink"])]
    host: Option<String>,
    /// FastProb throughput probe toward this TCP sink (HOST:PORT): send at
    /// full speed and stop when the model says the throughput is predictable.
    #[arg(long, conflicts_with = "sink")]
    throughput: Option<std::net::SocketAddr>,
    /// FastProb model: a file (kind "fastprob", trained by opsel.train_fastprob;
    /// its sampling interval and cap are the probe's) or a shipped name
    /// (default: fastprob-netlab, models/fastprob-netlab/MODEL_CARD.md).
    #[arg(long)]
    model: Option<std::path::PathBuf>,
    /// With --throughput: A/B the congestion controls listed (e.g. cubic,bbr)
    /// on the live socket and keep the best (004 §VI analogue).
    #[arg(long, value_delimiter = ',', requires = "throughput")]
    ab: Vec<String>,
    /// With --ab: the background class OPS gave (unknown, cubic = CUBIC only,
    /// bbr = BBR present). CUBIC only: BBR is never probed or chosen.
    #[arg(long, default_value = "unknown", requires = "throughput")]
    background: String,
    /// With --ab: evaluate each candidate for this many samples (mean) instead
    /// of FastProb's early stop: the fixed-length comparison.
    #[arg(long, requires = "throughput")]
    fixed_samples: Option<usize>,
    /// With --throughput: stop on the model file's error budget for this
    /// network family (its family_budgets, e.g. wan). Default: the file's own
    /// budget, or the family its classifier infers from the probe's samples.
    #[arg(
        long,
        value_name = "NAME",
        requires = "throughput",
        conflicts_with = "stop_error"
    )]
    family: Option<String>,
    /// With --throughput: stop when the model's gate predicts an error below
    /// this many percent (error-gate models).
    #[arg(long, value_name = "PCT", requires = "throughput")]
    stop_error: Option<f64>,
    /// With --ab: samples discarded after each switch.
    #[arg(long, default_value_t = 1, requires = "throughput")]
    settle_samples: usize,
    /// Run a TCP sink on this address that reads and discards (for --throughput).
    #[arg(long)]
    sink: Option<std::net::SocketAddr>,
    /// With --sink: stop after this many seconds (0 = run until interrupted).
    #[arg(long, default_value_t = 0.0)]
    timeout: f64,
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
    if let Some(addr) = a.sink {
        return sink(addr, a.timeout);
    }
    if let Some(to) = a.throughput {
        let model = fastprob_model(a.model.as_deref())?;
        let budget = opsel::fastprob::ProbeBudget {
            family: a.family.clone(),
            stop_error_pct: a.stop_error,
        };
        // A bad budget fails here, before any connection.
        opsel::fastprob::Prober::new(&model).budget(&budget)?;
        if a.ab.is_empty() {
            return throughput(to, &model, &budget, a.json);
        }
        let spec = opsel::fastprob::AbSpec {
            candidates: a.ab.clone(),
            background: a.background.parse()?,
            settle_samples: a.settle_samples,
            method: match a.fixed_samples {
                Some(samples) => opsel::fastprob::AbMethod::Fixed { samples },
                None => opsel::fastprob::AbMethod::Fastprob,
            },
            budget,
        };
        let sock = connect(to)?;
        let o = ab_on_socket(&sock, std::sync::Arc::new(model), spec, None)?;
        print_ab(&to.to_string(), &o.outcome, a.json);
        return Ok(());
    }
    let host = a.host.as_deref().unwrap_or_default();
    if !(a.period_s.is_finite() && a.period_s > 0.0) {
        return Err(Error::invalid(format!(
            "--period-s {}: give seconds > 0",
            a.period_s
        )));
    }
    if a.echoes == 0 {
        return Err(Error::invalid("--echoes 0: give 1 or more (000 §3.2: 10)"));
    }
    let target = rtt_series::parse_target(host)?;
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

/// A TCP sink: accept connections one at a time and discard what they send.
fn sink(addr: std::net::SocketAddr, timeout_s: f64) -> Result<()> {
    use std::io::Read as _;
    let l =
        std::net::TcpListener::bind(addr).map_err(|e| Error::io(format!("listen on {addr}"), e))?;
    eprintln!("opsel probe: sink on {addr}, discarding");
    let until =
        (timeout_s > 0.0).then(|| std::time::Instant::now() + Duration::from_secs_f64(timeout_s));
    l.set_nonblocking(true)
        .map_err(|e| Error::io("make the sink non-blocking", e))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        if until.is_some_and(|u| std::time::Instant::now() >= u) {
            return Ok(());
        }
        match l.accept() {
            Ok((mut c, peer)) => {
                let _ = c.set_nonblocking(false);
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut n = 0u64;
                while let Ok(k) = c.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                }
                eprintln!("opsel probe: {peer} sent {n} bytes");
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(Error::io("accept", e)),
        }
    }
}

/// The FastProb model `arg` names, or the shipped default.
pub fn fastprob_model(arg: Option<&std::path::Path>) -> Result<opsel::fastprob::FastProbModel> {
    match crate::models::locate(arg, crate::models::FASTPROB)? {
        crate::models::Source::File(p) => opsel::fastprob::FastProbModel::load(&p),
        crate::models::Source::Embedded(n) => Err(Error::invalid(format!(
            "{n:?} is not a FastProb model; pass --model PATH to one"
        ))),
    }
}

fn connect(to: std::net::SocketAddr) -> Result<std::net::TcpStream> {
    std::net::TcpStream::connect_timeout(&to, Duration::from_secs(10))
        .map_err(|e| Error::io(format!("connect to the sink {to}"), e))
}

/// Writes zeros at full speed on a clone of a socket until dropped (a
/// shutdown of the socket ends a blocked write).
pub struct FullSpeed {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FullSpeed {
    pub fn start(sock: &std::net::TcpStream) -> Result<FullSpeed> {
        use std::io::Write as _;
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut w = sock
            .try_clone()
            .map_err(|e| Error::io("clone the probe socket", e))?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let buf = vec![0u8; 1 << 20];
            while !stop2.load(Ordering::Relaxed) {
                match w.write(&buf) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
        Ok(FullSpeed {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for FullSpeed {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An A/B evaluation's outcome and the samples behind it.
pub struct AbRun {
    pub outcome: opsel::fastprob::AbOutcome,
    /// After the choice: the mean rate of `steady_samples` samples with the
    /// chosen control (bit/s), when asked for.
    pub steady_bps: Option<f64>,
}

/// Drive [`opsel::fastprob::AbEvaluator`] on a connected socket that is
/// already sending at full speed (a [`FullSpeed`] writer) or not: this starts
/// its own writer, switches `TCP_CONGESTION` as told, feeds one acknowledged
/// rate sample per model interval, and leaves the socket on the chosen
/// control. With `steady_samples`, it then measures that many more samples.
pub fn ab_on_socket(
    sock: &std::net::TcpStream,
    model: std::sync::Arc<opsel::fastprob::FastProbModel>,
    spec: opsel::fastprob::AbSpec,
    steady_samples: Option<usize>,
) -> Result<AbRun> {
    use opsel::fastprob::{AbAction, AbEvaluator};
    use opsel::sys::linux::tput::{Side, ThroughputSampler};
    let mut ev = AbEvaluator::new(model, spec)?;
    let interval = Duration::from_nanos(ev.interval_ns());
    let writer = FullSpeed::start(sock)?;
    let mut sampler = ThroughputSampler::new(sock, Side::Sender, interval)?;
    let mut act = ev.start()?;
    let outcome = loop {
        match act {
            AbAction::Done(o) => break o,
            AbAction::Switch(cca) => {
                opsel::sys::linux::set_cca(sock, &cca)?;
            }
            AbAction::Continue => {}
        }
        let s = sampler.wait_next()?;
        act = ev.push(s.rate_bps)?;
    };
    if !outcome.chosen.is_empty() {
        opsel::sys::linux::set_cca(sock, &outcome.chosen)?;
    }
    let steady_bps = match steady_samples {
        Some(n) if n > 0 => {
            // One settle sample, as in the probe, then the mean of n.
            sampler.wait_next()?;
            let mut sum = 0.0;
            for _ in 0..n {
                sum += sampler.wait_next()?.rate_bps;
            }
            Some(sum / n as f64)
        }
        _ => None,
    };
    drop(writer);
    Ok(AbRun {
        outcome,
        steady_bps,
    })
}

fn print_ab(target: &str, o: &opsel::fastprob::AbOutcome, json: bool) {
    if json {
        let mut v = serde_json::to_value(o).unwrap_or_default();
        v["target"] = json!(target);
        println!("{v}");
        return;
    }
    for c in &o.candidates {
        if c.probed {
            println!(
                "{target} {:>8}: {:>10.2} Mbit/s after {:.1} s ({} samples{})",
                c.cca,
                c.estimate_bps / 1e6,
                c.probe_ns as f64 / 1e9,
                c.samples,
                if c.forced { ", at the cap" } else { "" }
            );
        } else {
            println!(
                "{target} {:>8}: not probed (the background is CUBIC only: BBR is never chosen there)",
                c.cca
            );
        }
    }
    println!(
        "{target}: chose {} after {:.1} s of probing",
        o.chosen,
        o.total_probe_ns as f64 / 1e9
    );
}

/// FastProb (004 §IV Fig. 6b): one sample of the acknowledged rate per model
/// interval into the early-stopping prober; the sending stops at its decision.
fn throughput(
    to: std::net::SocketAddr,
    model: &opsel::fastprob::FastProbModel,
    budget: &opsel::fastprob::ProbeBudget,
    json: bool,
) -> Result<()> {
    use opsel::fastprob::{Decision, Prober};
    use opsel::sys::linux::tput::{Side, ThroughputSampler};
    let interval = Duration::from_nanos(model.spec().interval_ns);
    let sock = connect(to)?;
    let sender = FullSpeed::start(&sock)?;
    let mut sampler = ThroughputSampler::new(&sock, Side::Sender, interval)?;
    let mut probe = Prober::new(model).budget(budget)?;
    let result = loop {
        let s = match sampler.wait_next() {
            Ok(s) => s,
            Err(e) => break Err(e),
        };
        match probe.push(s.rate_bps) {
            Ok(Decision::Continue) => {
                if !json {
                    eprint!(
                        "\rsample {:>3}: {:>10.2} Mbit/s",
                        probe.len(),
                        s.rate_bps / 1e6
                    );
                }
            }
            Ok(d) => break Ok(d),
            Err(e) => break Err(e),
        }
    };
    let _ = sock.shutdown(std::net::Shutdown::Both);
    drop(sender);
    let d = result?;
    if json {
        let mut v = serde_json::to_value(d).unwrap_or_default();
        v["target"] = json!(to.to_string());
        println!("{v}");
    } else if let Decision::Stop(p) | Decision::ForcedStop(p) = d {
        eprintln!();
        println!(
            "{to}: converged throughput ≈ {:.2} Mbit/s after {} samples ({:.1} s{})",
            p.throughput_bps / 1e6,
            p.samples,
            p.probe_ns as f64 / 1e9,
            if p.forced { ", at the cap" } else { "" }
        );
    }
    Ok(())
}
