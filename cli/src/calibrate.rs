//! `opsel calibrate`: extend a background-mix model with references recorded
//! at the user's own network condition.
//!
//! The shipped models are trained on netlab's condition grid
//! (docs/results/generalisation.md). A path far from the grid (a much lower
//! rate, a much longer RTT) can fall outside what they have seen. This
//! command (1) measures the path the user names — base RTT from echo bursts
//! toward the peer, bottleneck rate from a short TCP burst to a discard sink
//! (or both given on the command line) — (2) records a small labelled corpus
//! of the six background mixes in netlab at that condition, for each buffer
//! size asked (the buffer cannot be measured from one end), and (3) writes a
//! model with the base model's references plus the new ones, same DTW and
//! normalisation configuration, so `opsel send --ops --model FILE` uses it.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use opsel::knn::Model;
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, ProbingMode};
use opsel::sys::linux::rtt::{echo_burst, BurstConfig, EchoProbe, IcmpProber, UdpEchoProber};
use opsel::sys::linux::tcp_info;
use opsel::{Error, Result};
use opsel_netlab::collect::{self, CollectConfig, Condition, Mode, TraceSpec};

#[derive(Args)]
pub struct CalibrateArgs {
    /// Echo target for the base RTT: `icmp:ADDR` (IPv4 or IPv6) or `HOST:PORT`
    /// of a UDP echo responder (e.g. `opsel recv`'s listen port).
    #[arg(long)]
    probe: Option<String>,
    /// Base RTT in ms instead of measuring it.
    #[arg(long)]
    rtt_ms: Option<f64>,
    /// TCP sink that reads and discards (`HOST:PORT`) for a short rate measurement.
    #[arg(long)]
    sink: Option<String>,
    /// Seconds of the rate measurement's TCP burst.
    #[arg(long, default_value_t = 5.0)]
    sink_s: f64,
    /// Bottleneck rate in Mbit/s instead of measuring it.
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Buffer sizes to record, as multiples of the BDP (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    buffers: Vec<f64>,
    /// Windows to record per class and buffer.
    #[arg(long, default_value_t = 8)]
    windows: usize,
    /// Labs at once (each records one class).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Background time before each recording (s).
    #[arg(long, default_value_t = 10.0)]
    warmup: f64,
    /// The model to extend.
    #[arg(long, default_value = "models/passive/model.json")]
    model: PathBuf,
    /// Folder for the recorded corpus (kept; a rerun resumes it).
    #[arg(long, default_value = "opsel-calibration")]
    corpus: PathBuf,
    /// Where to write the extended model.
    #[arg(long)]
    out: PathBuf,
    /// Measure and print the condition, record nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn main(a: CalibrateArgs) -> Result<()> {
    let base = KnnModelFile::load(&a.model)?;
    let w = base.model.window();
    let mode = match base.meta.probing.mode {
        ProbingMode::Passive => Mode::Passive,
        ProbingMode::Active => {
            Mode::parse(base.meta.probing.pattern.as_deref().ok_or_else(|| {
                Error::invalid(format!(
                    "{}: an active model without a pattern; retrain it or pass a passive model",
                    a.model.display()
                ))
            })?)?
        }
    };
    if a.windows == 0 || a.jobs == 0 || a.jobs > 8 {
        return Err(Error::invalid(format!(
            "--windows {} and --jobs {} must be at least 1 (jobs at most 8)",
            a.windows, a.jobs
        )));
    }
    let rtt_ms = match (a.rtt_ms, &a.probe) {
        (Some(v), _) => v,
        (None, Some(p)) => measure_base_rtt_ms(p)?,
        (None, None) => {
            return Err(Error::invalid(
                "give --probe icmp:ADDR | HOST:PORT to measure the base RTT, or --rtt-ms",
            ))
        }
    };
    let rate_mbps = match (a.rate_mbps, &a.sink) {
        (Some(v), _) => v,
        (None, Some(s)) => measure_rate_mbps(s, a.sink_s)?,
        (None, None) => return Err(Error::invalid(
            "give --sink HOST:PORT (a TCP sink that discards) to measure the rate, or --rate-mbps",
        )),
    };
    let conditions: Vec<Condition> = a
        .buffers
        .iter()
        .map(|&b| {
            let c = Condition {
                name: format!("cal-r{}-d{}-b{}", sig3(rate_mbps), sig3(rtt_ms), sig3(b)),
                rate_mbps: sig3(rate_mbps),
                rtt_ms: sig3(rtt_ms),
                buffer_bdp: b,
                mtu: 1500,
            };
            c.validate().map(|_| c)
        })
        .collect::<Result<_>>()?;
    println!(
        "path: base RTT {rtt_ms:.2} ms, rate {rate_mbps:.1} Mbit/s; recording {} in netlab: {}",
        mode.dir_name(),
        conditions
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if a.dry_run {
        return Ok(());
    }
    opsel_netlab::sys::require_root()?;
    let specs: Vec<TraceSpec> = conditions
        .iter()
        .flat_map(|c| SIX_CLASSES.iter().map(move |cl| (c, cl)))
        .map(|(c, cl)| TraceSpec::new(c.clone(), mode.clone(), cl))
        .collect::<Result<_>>()?;
    record(&specs, &a, w)?;

    // The new references, in the base model's class order.
    let mut windows = Vec::new();
    let mut labels = Vec::new();
    for s in &specs {
        let class = base
            .model
            .classes()
            .iter()
            .position(|c| c == &s.class)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{}: class {} is not among the model's classes {:?}",
                    a.model.display(),
                    s.class,
                    base.model.classes()
                ))
            })?;
        for win in read_windows(&s.csv_path(&a.corpus), w, &mode)? {
            windows.extend_from_slice(&win);
            labels.push(class as u32);
        }
    }
    let before = accuracy(&base.model, &windows, &labels, w)?;
    let mut raw = base.model.raw_references().to_vec();
    raw.extend_from_slice(&windows);
    let mut all_labels = base.model.labels().to_vec();
    all_labels.extend_from_slice(&labels);
    let model = Model::fit(
        &raw,
        w,
        &all_labels,
        base.model.classes().to_vec(),
        *base.model.config(),
    )?;
    let mut meta = base.meta.clone();
    meta.training = serde_json::json!({
        "base_model": base.meta.training,
        "calibration": {
            "base_rtt_ms": rtt_ms,
            "rate_mbps": rate_mbps,
            "buffers_bdp": a.buffers,
            "conditions": conditions.iter().map(|c| &c.name).collect::<Vec<_>>(),
            "windows_added": labels.len(),
        },
    });
    let file = KnnModelFile { model, meta };
    file.save(&a.out)?;
    println!(
        "wrote {}: {} + {} references; the base model classified {:.1} % of the new windows right",
        a.out.display(),
        base.model.len(),
        labels.len(),
        100.0 * before
    );
    Ok(())
}

/// Three significant digits: names and conditions stay readable.
fn sig3(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(2 - v.log10().floor() as i32);
    (v * mag).round() / mag
}

/// Runs the traces with `a.jobs` labs at a time, one overall progress bar.
fn record(specs: &[TraceSpec], a: &CalibrateArgs, w: usize) -> Result<()> {
    let cfg = CollectConfig {
        w,
        target_windows: a.windows,
        chunk_windows: usize::MAX,
        warmup_s: a.warmup,
        seed: 1,
    };
    let per_trace = (a.windows * w) as u64;
    let pb = ProgressBar::new(per_trace * specs.len() as u64);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} samples, {elapsed} elapsed, ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message("recording");
    // Traces already recorded (a resumed run) count as done.
    for s in specs {
        let have = collect::trace_state(&s.csv_path(&a.corpus), w)?.windows;
        pb.inc((have.min(a.windows) * w) as u64);
    }
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..a.jobs.min(specs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { return };
                let mut last = 0u64;
                let r = collect::collect_session(spec, &cfg, &a.corpus, &cancel, &mut |d, _| {
                    pb.inc(d.saturating_sub(last));
                    last = d;
                });
                match r {
                    Ok(r) if r.interrupted => {
                        cancel.store(true, Ordering::Relaxed);
                        return;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        cancel.store(true, Ordering::Relaxed);
                        if let Ok(mut f) = failed.lock() {
                            f.get_or_insert_with(|| format!("{}: {e}", spec.key()));
                        }
                        return;
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failed.into_inner().ok().flatten() {
        return Err(Error::invalid(format!(
            "recording failed ({e}); rerun the same command to resume"
        )));
    }
    for s in specs {
        let have = collect::trace_state(&s.csv_path(&a.corpus), w)?.windows;
        if have < a.windows {
            return Err(Error::invalid(format!(
                "{} has {have} of {} windows (interrupted?); rerun the same command to resume",
                s.key(),
                a.windows
            )));
        }
    }
    Ok(())
}

/// Complete windows of `w` samples of a trace, as the training code cuts them
/// (opsel.train.data): passive non-overlapping within each run; active at
/// pattern-cycle boundaries (stride = whole cycles covering w).
pub fn read_windows(path: &Path, w: usize, mode: &Mode) -> Result<Vec<Vec<f64>>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("read trace {}", path.display()), e))?;
    let rows = collect::parse_trace(&text)?;
    let stride = match mode {
        Mode::Passive | Mode::PassiveEvery { .. } => w,
        Mode::Active { pattern, .. } => {
            let p = (pattern.total_ns() / 1_000_000_000).max(1) as usize;
            w.div_ceil(p) * p
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let run = rows[i].run;
        let j = rows[i..]
            .iter()
            .position(|r| r.run != run)
            .map_or(rows.len(), |n| i + n);
        let len = rows[i..j].iter().map(|r| r.k + 1).max().unwrap_or(0) as usize;
        let mut series = vec![f64::NAN; len];
        for r in &rows[i..j] {
            if r.valid() {
                series[r.k as usize] = r.rtt_ms;
            }
        }
        let mut start = 0;
        while start + w <= len {
            let win = &series[start..start + w];
            if win.iter().all(|v| v.is_finite()) {
                out.push(win.to_vec());
            }
            start += stride;
        }
        i = j;
    }
    Ok(out)
}

fn accuracy(model: &Model, windows: &[f64], labels: &[u32], w: usize) -> Result<f64> {
    if labels.is_empty() {
        return Ok(f64::NAN);
    }
    let mut ws = model.workspace();
    let mut right = 0usize;
    for (win, &l) in windows.chunks_exact(w).zip(labels) {
        if model.classify(win, &mut ws)?.class as u32 == l {
            right += 1;
        }
    }
    Ok(right as f64 / labels.len() as f64)
}

/// Fastest of 5 echo bursts (000 §3.2: 10 echoes 1 ms apart), 200 ms apart.
fn measure_base_rtt_ms(spec: &str) -> Result<f64> {
    let mut probe: Box<dyn EchoProbe + Send> = if let Some(ip) = spec.strip_prefix("icmp:") {
        let ip: IpAddr = ip.parse().map_err(|_| {
            Error::invalid(format!(
                "--probe {spec:?}: {ip:?} is not an IP address; write e.g. icmp:192.0.2.1 or icmp:2001:db8::1"
            ))
        })?;
        Box::new(IcmpProber::new_ip(ip)?)
    } else {
        let dst: SocketAddr = spec
            .strip_prefix("udp:")
            .unwrap_or(spec)
            .parse()
            .map_err(|_| {
                Error::invalid(format!(
                    "--probe {spec:?} is neither icmp:ADDR nor HOST:PORT of a UDP echo responder"
                ))
            })?;
        let bind: SocketAddr = if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .unwrap_or(dst);
        let sock = UdpSocket::bind(bind).map_err(|e| Error::io("bind UDP echo prober", e))?;
        Box::new(UdpEchoProber::new(sock, dst)?)
    };
    let mut best = f64::INFINITY;
    for i in 0..5u16 {
        let cfg = BurstConfig {
            timeout_ns: 2_000_000_000,
            ..BurstConfig::default()
        };
        if let Some(ms) = echo_burst(&mut probe, cfg, i * 16)?.mean_rtt_ms() {
            best = best.min(ms);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !best.is_finite() {
        return Err(Error::invalid(format!(
            "no echo came back from {spec} in 5 bursts; check the address, or give --rtt-ms"
        )));
    }
    Ok(best)
}

/// Goodput of a bulk TCP burst to a discard sink over its second half
/// (bytes acked, TCP_INFO), so slow start is left out.
fn measure_rate_mbps(sink: &str, secs: f64) -> Result<f64> {
    if !(secs.is_finite() && (1.0..=60.0).contains(&secs)) {
        return Err(Error::invalid(format!("--sink-s {secs} is outside 1..=60")));
    }
    let addr: SocketAddr = sink
        .parse()
        .map_err(|_| Error::invalid(format!("--sink {sink:?} is not HOST:PORT")))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| Error::io(format!("connect to the rate sink {addr}"), e))?;
    let buf = vec![0u8; 1 << 16];
    let start = Instant::now();
    let half = Duration::from_secs_f64(secs / 2.0);
    let mut mark: Option<(Instant, u64)> = None;
    s.set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| Error::io("set write timeout", e))?;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        s.write_all(&buf)
            .map_err(|e| Error::io(format!("send to the rate sink {addr}"), e))?;
        if mark.is_none() && start.elapsed() >= half {
            mark = Some((Instant::now(), tcp_info(&s)?.bytes_acked.unwrap_or(0)));
        }
    }
    let (t0, b0) = mark.unwrap_or((start, 0));
    let b1 = tcp_info(&s)?.bytes_acked.unwrap_or(0);
    let dt = t0.elapsed().as_secs_f64();
    if b1 <= b0 || dt <= 0.0 {
        return Err(Error::invalid(format!(
            "the rate sink {addr} acknowledged nothing in {secs} s; give --rate-mbps"
        )));
    }
    Ok((b1 - b0) as f64 * 8.0 / dt / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sig3_rounds_to_three_significant_digits() {
        assert_eq!(sig3(19.87), 19.9);
        assert_eq!(sig3(151.26), 151.0);
        assert_eq!(sig3(0.5), 0.5);
        assert_eq!(sig3(1234.0), 1230.0);
    }

    #[test]
    fn windows_are_cut_per_run_and_skip_gaps() {
        let dir = std::env::temp_dir().join(format!("opsel-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        let mut text = String::from(collect::CSV_HEADER);
        text.push('\n');
        // Run 0: 5 samples (one window of 2, then 2 more, then a lone one);
        // run 1: a lost sample at k = 1 spoils its first window.
        for (run, k, rtt) in [
            (0, 0, 10.0),
            (0, 1, 11.0),
            (0, 2, 12.0),
            (0, 3, 13.0),
            (0, 4, 14.0),
            (1, 0, 20.0),
            (1, 1, f64::NAN),
            (1, 2, 22.0),
            (1, 3, 23.0),
        ] {
            let (v, ans) = if rtt.is_nan() {
                (String::new(), 0)
            } else {
                (format!("{rtt}"), 10)
            };
            text.push_str(&format!("{run},{k},0,{v},{v},{v},{ans},,,-\n"));
        }
        std::fs::write(&p, text).unwrap();
        let w = read_windows(&p, 2, &Mode::Passive).unwrap();
        assert_eq!(
            w,
            vec![vec![10.0, 11.0], vec![12.0, 13.0], vec![22.0, 23.0]]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
