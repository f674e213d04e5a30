//! `opsel probe`: the RTT series toward a host as OPS samples it (000 §3.2),
//! printed as CSV or JSON that `opsel classify --file` reads back; or, with
//! `--throughput`, a FastProb early-stopping throughput probe (004 §IV): send
//! at full speed to a TCP sink, feed each interval's acknowledged rate
//! (`TCP_INFO`, `sys::linux::tput`) to the model, and stop as soon as it says
//! the converged throughput is predictable. `--sink` runs such a sink.

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
opsel probe --throughput 192.0.2.1:5202 --model fastprob.json   # FastProb (004)")]
pub struct ProbeArgs {
    /// HOST or icmp:HOST (ICMP echo: a ping socket, or raw as root) or
    /// udp:HOST:PORT (the UDP echo responder that `opsel recv` runs).
    #[arg(required_unless_present_any = ["throughput", "sink"])]
    host: Option<String>,
    /// FastProb throughput probe toward this TCP sink (HOST:PORT): send at
    /// full speed and stop when the model says the throughput is predictable.
    #[arg(long, requires = "model", conflicts_with = "sink")]
    throughput: Option<std::net::SocketAddr>,
    /// FastProb model file (kind "fastprob", trained by opsel.train_fastprob;
    /// its sampling interval and cap are the probe's).
    #[arg(long)]
    model: Option<std::path::PathBuf>,
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
    if let (Some(to), Some(model)) = (a.throughput, a.model.as_deref()) {
        return throughput(to, model, a.json);
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

/// FastProb (004 §IV Fig. 6b): one sample of the acknowledged rate per model
/// interval into the early-stopping prober; the sending stops at its decision.
fn throughput(to: std::net::SocketAddr, model: &std::path::Path, json: bool) -> Result<()> {
    use opsel::fastprob::{Decision, FastProbModel, Prober};
    use opsel::sys::linux::tput::{Side, ThroughputSampler};
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    let model = FastProbModel::load(model)?;
    let interval = Duration::from_nanos(model.spec().interval_ns);
    let sock = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(10))
        .map_err(|e| Error::io(format!("connect to the sink {to}"), e))?;
    let mut w = sock
        .try_clone()
        .map_err(|e| Error::io("clone the probe socket", e))?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    // The sender: zeros at full speed until the decision (a shutdown ends a blocked write).
    let sender = std::thread::spawn(move || {
        let buf = vec![0u8; 1 << 20];
        while !stop2.load(Ordering::Relaxed) {
            match w.write(&buf) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    let mut sampler = ThroughputSampler::new(&sock, Side::Sender, interval)?;
    let mut probe = Prober::new(&model);
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
    stop.store(true, Ordering::Relaxed);
    let _ = sock.shutdown(std::net::Shutdown::Both);
    let _ = sender.join();
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
