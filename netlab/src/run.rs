//! Runs a scenario: builds the lab, starts receivers, the probe and the
//! generators, samples the pipe every 100 ms, tears everything down, and
//! returns the series (per-flow 100 ms throughput, 1 Hz RTT, queue and drops).

use std::io::Write;
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use opsel::{Error, Result};

use crate::pipe::PipeSnapshot;
use crate::scenario::{Scenario, ECHO_PORT};
use crate::sys::{self, now_ns, sleep_until_ns};
use crate::topo::{self, Lab, PipeKind};
use crate::traffic::{self, Bins, Event, RttSample, BIN_NS};

/// Jain's fairness index (000 Eq. 2.1), `opsel::fair::jain` made total for
/// netlab's tables: 1 for an empty input (nothing is unfairly shared) or any
/// input the core rejects.
pub fn jain(x: &[f64]) -> f64 {
    opsel::fair::jain(x).unwrap_or(1.0)
}

/// One sample of the pipe (both directions) every 100 ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct QueueSample {
    pub t_s: f64,
    pub fwd: PipeSnapshot,
    pub rev: PipeSnapshot,
}

/// Per-flow results.
#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    pub name: String,
    pub kind: String,
    /// Bytes received per 100 ms bin from time zero.
    #[serde(skip)]
    pub bins: Vec<u64>,
    pub received_bytes: u64,
    pub sent_bytes: u64,
    /// Mean goodput over the measurement window.
    pub mean_mbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub lab_id: String,
    pub duration_s: f64,
    pub measure_window_s: (f64, f64),
    pub rate_mbps: f64,
    pub rtt_ms: f64,
    pub buffer_bytes: u64,
    pub pipe_kind: PipeKind,
    pub mtu: usize,
    pub flows: Vec<FlowResult>,
    /// Jain's index over the flows' mean goodput in the window.
    pub jain: f64,
    pub total_mbps: f64,
    pub rtt_mean_ms: Option<f64>,
    pub rtt_min_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    pub queue_mean_bytes: f64,
    pub queue_max_bytes: u64,
    pub fwd_final: PipeSnapshot,
    pub rev_final: PipeSnapshot,
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub summary: Summary,
    pub rtt: Vec<RttSample>,
    pub queue: Vec<QueueSample>,
    pub events: Vec<Event>,
}

/// Mean Mbit/s of a bin series over [a, b] seconds.
pub fn mean_mbps(bins: &[u64], a_s: f64, b_s: f64) -> f64 {
    let bin_s = BIN_NS as f64 / 1e9;
    let i0 = (a_s / bin_s).round() as usize;
    let i1 = ((b_s / bin_s).round() as usize).min(bins.len());
    if i1 <= i0 {
        return 0.0;
    }
    let bytes: u64 = bins[i0..i1].iter().sum();
    bytes as f64 * 8.0 / ((i1 - i0) as f64 * bin_s) / 1e6
}

/// Runs `scn` to completion (or Ctrl-C). `progress(elapsed_s, total_s)` is
/// called every 100 ms.
pub fn run(scn: &Scenario, progress: &mut dyn FnMut(f64, f64)) -> Result<RunResult> {
    scn.validate()?;
    sys::require_root()?;
    // Leftovers of crashed runs (dead owner pid) go first; live labs stay.
    let _ = topo::down(false);
    let lab = Lab::up_with_extra_rtt(&scn.topology_spec(), &scn.pipe_spec()?, &scn.extra_rtt_ns())?;
    run_in_lab(scn, &lab, progress)
}

/// Runs `scn`'s probe and flows in an existing lab (which must match its
/// topology); several runs can share one lab.
pub fn run_in_lab(
    scn: &Scenario,
    lab: &Lab,
    progress: &mut dyn FnMut(f64, f64),
) -> Result<RunResult> {
    scn.validate()?;
    if lab.sender_ns.len() < scn.topology.pairs {
        return Err(Error::invalid(format!(
            "scenario {} needs {} pairs but the lab has {}",
            scn.name,
            scn.topology.pairs,
            lab.sender_ns.len()
        )));
    }
    let lab_extra = |i: usize| lab.extra_rtt_ns.get(i).copied().unwrap_or(0);
    let want = scn.extra_rtt_ns();
    if let Some(i) = (0..want.len()).find(|&i| want[i] != lab_extra(i)) {
        return Err(Error::invalid(format!(
            "scenario {} wants an extra RTT of {} ns on pair {i} but the lab has {} ns; build the lab with Lab::up_with_extra_rtt",
            scn.name,
            want[i],
            lab_extra(i)
        )));
    }
    let duration_ns = (scn.duration_s * 1e9) as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    let plans = scn.flow_plans(&lab.sender_ns, &lab.receiver_ns);
    // Time zero a little ahead so every thread is ready.
    let t0 = now_ns() + 300_000_000;
    let bins: Vec<Arc<Bins>> = plans
        .iter()
        .map(|_| Arc::new(Bins::new(t0, duration_ns)))
        .collect();

    // Stop and join every thread on every exit path.
    type Finished = (
        Vec<Result<u64>>,
        Vec<Result<u64>>,
        Option<Result<Vec<RttSample>>>,
    );
    struct Joiner {
        stop: Arc<AtomicBool>,
        rx: Vec<std::thread::JoinHandle<Result<u64>>>,
        tx: Vec<std::thread::JoinHandle<Result<u64>>>,
        echo: Option<std::thread::JoinHandle<Result<()>>>,
        prober: Option<std::thread::JoinHandle<Result<Vec<RttSample>>>>,
    }
    impl Joiner {
        fn finish(&mut self) -> Finished {
            self.stop.store(true, Ordering::SeqCst);
            let j = |h: std::thread::JoinHandle<Result<u64>>| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("generator thread panicked")))
            };
            let tx = self.tx.drain(..).map(j).collect();
            let rx = self.rx.drain(..).map(j).collect();
            let pr = self.prober.take().map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("prober panicked")))
            });
            if let Some(h) = self.echo.take() {
                let _ = h.join();
            }
            (tx, rx, pr)
        }
    }
    impl Drop for Joiner {
        fn drop(&mut self) {
            let _ = self.finish();
        }
    }
    let mut j = Joiner {
        stop: stop.clone(),
        rx: Vec::new(),
        tx: Vec::new(),
        echo: None,
        prober: None,
    };
    for (p, b) in plans.iter().zip(&bins) {
        j.rx.push(traffic::spawn_receiver(p, b.clone(), stop.clone())?);
    }
    if scn.probe.enabled {
        let pair = scn.probe.pair;
        let echo = SocketAddrV4::new(topo::receiver_ip(pair), ECHO_PORT);
        j.echo = Some(traffic::spawn_echo(
            &lab.receiver_ns[pair],
            echo,
            stop.clone(),
        )?);
        j.prober = Some(traffic::spawn_prober(
            &lab.sender_ns[pair],
            echo,
            t0,
            (scn.probe.start_s * 1e9) as u64,
            duration_ns,
            stop.clone(),
        )?);
    }
    for p in &plans {
        j.tx.push(traffic::spawn_sender(
            p.clone(),
            t0,
            stop.clone(),
            events.clone(),
        )?);
    }

    // Sample the pipe every 100 ms on the bin grid until the end.
    let kernel = matches!(lab.pipe.kind, PipeKind::Htb | PipeKind::Tbf);
    let mut queue = Vec::with_capacity((duration_ns / BIN_NS + 2) as usize);
    let mut k = 1u64;
    let mut interrupted = false;
    lab.fwd_stats.snapshot(true);
    lab.rev_stats.snapshot(true);
    loop {
        let t = t0 + k * BIN_NS;
        if t > t0 + duration_ns {
            break;
        }
        sleep_until_ns(t);
        let mut fwd = lab.fwd_stats.snapshot(true);
        let mut rev = lab.rev_stats.snapshot(true);
        if kernel {
            // The queue is the kernel bfifo: read backlog and drops from tc.
            if let Ok((b, d)) = lab.kernel_queue("pf") {
                fwd.queue_bytes = b;
                fwd.max_queue_bytes = b;
                fwd.drop_queue_pkts = d;
            }
            if let Ok((b, d)) = lab.kernel_queue("pr") {
                rev.queue_bytes = b;
                rev.max_queue_bytes = b;
                rev.drop_queue_pkts = d;
            }
        }
        queue.push(QueueSample {
            t_s: (k * BIN_NS) as f64 / 1e9,
            fwd,
            rev,
        });
        progress((k * BIN_NS) as f64 / 1e9, scn.duration_s);
        if sys::interrupted() {
            interrupted = true;
            break;
        }
        k += 1;
    }
    let (tx, _rx, pr) = j.finish();
    if interrupted {
        return Err(Error::invalid(
            "interrupted (Ctrl-C); the lab was torn down",
        ));
    }
    let rtt = match pr {
        Some(r) => r?,
        None => Vec::new(),
    };
    let events = events.lock().map(|e| e.clone()).unwrap_or_default();
    let (a, b) = scn.measure_window();
    let mut flows = Vec::new();
    for ((p, bins), sent) in plans.iter().zip(&bins).zip(tx) {
        let v = bins.values();
        flows.push(FlowResult {
            name: p.name.clone(),
            kind: match &p.traffic {
                traffic::Traffic::Tcp {
                    cca,
                    on_off_s: None,
                } => format!("tcp-{cca}"),
                traffic::Traffic::Tcp {
                    cca,
                    on_off_s: Some((x, y)),
                } => format!("tcp-{cca}-sq{x}/{y}"),
                traffic::Traffic::Alt { ccas, period_s } => {
                    format!("alt{period_s}-{}-{}", ccas[0], ccas[1])
                }
                traffic::Traffic::Udp { rate_bps, .. } => {
                    format!("udp-{}mbps", *rate_bps as f64 / 1e6)
                }
            },
            received_bytes: v.iter().sum(),
            sent_bytes: sent.unwrap_or(0),
            mean_mbps: mean_mbps(&v, a, b),
            bins: v,
        });
    }
    let means: Vec<f64> = flows.iter().map(|f| f.mean_mbps).collect();
    let in_window: Vec<&QueueSample> = queue.iter().filter(|q| q.t_s > a && q.t_s <= b).collect();
    let rtt_w: Vec<f64> = rtt
        .iter()
        .filter(|r| r.t_s >= a && r.t_s < b)
        .map(|r| r.rtt_ms)
        .collect();
    let summary = Summary {
        scenario: scn.name.clone(),
        lab_id: lab.id.clone(),
        duration_s: scn.duration_s,
        measure_window_s: (a, b),
        rate_mbps: scn.pipe.rate_mbps,
        rtt_ms: scn.pipe.rtt_ms(),
        buffer_bytes: scn.pipe.buffer(),
        pipe_kind: scn.pipe.kind,
        mtu: scn.topology.mtu,
        jain: jain(&means),
        total_mbps: means.iter().sum(),
        rtt_mean_ms: (!rtt_w.is_empty()).then(|| rtt_w.iter().sum::<f64>() / rtt_w.len() as f64),
        rtt_min_ms: rtt_w.iter().cloned().reduce(f64::min),
        rtt_max_ms: rtt_w.iter().cloned().reduce(f64::max),
        queue_mean_bytes: if in_window.is_empty() {
            0.0
        } else {
            in_window
                .iter()
                .map(|q| q.fwd.queue_bytes as f64)
                .sum::<f64>()
                / in_window.len() as f64
        },
        queue_max_bytes: in_window
            .iter()
            .map(|q| q.fwd.max_queue_bytes)
            .max()
            .unwrap_or(0),
        fwd_final: queue.last().map(|q| q.fwd).unwrap_or_default(),
        rev_final: queue.last().map(|q| q.rev).unwrap_or_default(),
        flows,
    };
    Ok(RunResult {
        summary,
        rtt,
        queue,
        events,
    })
}

/// Writes flows.csv, rtt.csv, queue.csv, events.jsonl and summary.json into `dir`.
pub fn write_outputs(res: &RunResult, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let file = |name: &str| -> Result<std::io::BufWriter<std::fs::File>> {
        let p = dir.join(name);
        std::fs::File::create(&p)
            .map(std::io::BufWriter::new)
            .map_err(|e| Error::io(format!("create {}", p.display()), e))
    };
    let io = |e| Error::io(format!("write into {}", dir.display()), e);
    let mut f = file("flows.csv")?;
    writeln!(f, "t_s,flow,bytes,mbps").map_err(io)?;
    let bin_s = BIN_NS as f64 / 1e9;
    let nbins = (res.summary.duration_s / bin_s).round() as usize;
    for fl in &res.summary.flows {
        for (i, b) in fl.bins.iter().take(nbins).enumerate() {
            writeln!(
                f,
                "{:.1},{},{},{:.3}",
                i as f64 * bin_s,
                fl.name,
                b,
                *b as f64 * 8.0 / bin_s / 1e6
            )
            .map_err(io)?;
        }
    }
    let mut f = file("rtt.csv")?;
    writeln!(f, "t_s,rtt_ms,min_ms,max_ms,answered").map_err(io)?;
    for r in &res.rtt {
        writeln!(
            f,
            "{:.1},{:.3},{:.3},{:.3},{}",
            r.t_s, r.rtt_ms, r.min_ms, r.max_ms, r.answered
        )
        .map_err(io)?;
    }
    let mut f = file("queue.csv")?;
    writeln!(
        f,
        "t_s,dir,queue_bytes,max_queue_bytes,queue_pkts,drop_queue_pkts,drop_loss_pkts,drop_ring_pkts,tx_pkts,tx_bytes"
    )
    .map_err(io)?;
    for q in &res.queue {
        for (d, s) in [("fwd", &q.fwd), ("rev", &q.rev)] {
            writeln!(
                f,
                "{:.1},{d},{},{},{},{},{},{},{},{}",
                q.t_s,
                s.queue_bytes,
                s.max_queue_bytes,
                s.queue_pkts,
                s.drop_queue_pkts,
                s.drop_loss_pkts,
                s.drop_ring_pkts,
                s.tx_pkts,
                s.tx_bytes
            )
            .map_err(io)?;
        }
    }
    let mut f = file("events.jsonl")?;
    for e in &res.events {
        writeln!(f, "{}", serde_json::to_string(e).unwrap_or_default()).map_err(io)?;
    }
    let mut f = file("summary.json")?;
    writeln!(
        f,
        "{}",
        serde_json::to_string_pretty(&res.summary).unwrap_or_default()
    )
    .map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_golden_vectors() {
        // 000 notes A15 (Eq. 2.1, recomputed from Table 6.3 / 4.2 means).
        for (x, want) in [
            ([238.0, 253.0], 0.9991),
            ([415.0, 75.6], 0.676),
            ([62.0, 474.0], 0.629),
            ([465.0, 49.0], 0.604),
            ([328.0, 221.0], 0.963),
        ] {
            assert!((jain(&x) - want).abs() < 5e-4, "{x:?}: {}", jain(&x));
        }
        assert_eq!(jain(&[]), 1.0);
        assert_eq!(jain(&[5.0, 0.0]), 0.5);
    }

    #[test]
    fn mean_over_window() {
        // 125 000 bytes per 100 ms = 10 Mbit/s.
        let bins = vec![125_000u64; 50];
        assert!((mean_mbps(&bins, 1.0, 3.0) - 10.0).abs() < 1e-9);
        assert_eq!(mean_mbps(&bins, 3.0, 1.0), 0.0);
    }
}
