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
use opsel::sys::linux::{set_cca, tcp_info};
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
    /// TCP sink that reads and discards (`HOST:PORT`, e.g. `opsel probe --sink`
    /// at the peer) for a short bulk CUBIC burst: the bottleneck rate (its
    /// goodput) and the buffer (its largest RTT above the base RTT).
    #[arg(long)]
    sink: Option<String>,
    /// Seconds of the measurement's TCP burst.
    #[arg(long, default_value_t = 5.0)]
    sink_s: f64,
    /// Bottleneck rate in Mbit/s instead of measuring it.
    #[arg(long)]
    rate_mbps: Option<f64>,
    /// Buffer sizes to record, as multiples of the BDP (comma-separated).
    /// Default: the buffer the --sink burst measured, else 1. At 5 samples a
    /// second the buffer decides what the mixes look like (references at
    /// 0.25 and 1 × BDP misread a 0.59 × BDP path), so measure it or give it.
    #[arg(long, value_delimiter = ',')]
    buffers: Option<Vec<f64>>,
    /// Windows to record per class and buffer.
    #[arg(long, default_value_t = 8)]
    windows: usize,
    /// Labs at once (each records one class).
    #[arg(long, default_value_t = 2)]
    jobs: usize,
    /// Background time before each recording (s).
    #[arg(long, default_value_t = 10.0)]
    warmup: f64,
    /// Time between the new references' RTT samples, ms (default: the base
    /// model's; 1000 for the shipped ones). 200 records the same 10-echo
    /// bursts five times a second (`opsel lab collect --mode passive-200ms`):
    /// at the path's own condition 10-s windows then separate the six mixes
    /// about as well as 40-s windows at 1 Hz (docs/results/generalisation.md,
    /// "A finer time resolution"). A period or window other than the base
    /// model's writes a model of the new references alone (passive only).
    #[arg(long, value_name = "MS")]
    sample_ms: Option<u32>,
    /// Window of the written model in whole seconds (default: the base model's).
    #[arg(long, value_name = "S")]
    window_s: Option<u32>,
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

/// What the new references are: their series' mode and window, and whether
/// they can join the base model's references.
struct Target {
    mode: Mode,
    /// Window in samples of `mode`'s series.
    w: usize,
    /// The same window in seconds (what the recorder counts).
    w_s: usize,
    sample_ms: f64,
    /// A period or window other than the base model's: the written model
    /// holds the new references alone (series at another rate cannot be
    /// compared by DTW with the base model's).
    own_only: bool,
}

/// The recorder's mode for passive probing every `ms` milliseconds.
fn passive_every(ms: f64) -> Result<Mode> {
    if ms == 1000.0 {
        Ok(Mode::Passive)
    } else {
        Mode::parse(&format!("passive-{ms}ms")).map_err(|_| {
            Error::invalid(format!(
                "a sample every {ms} ms: use a divisor of 1000 ms from 10 to 500 (e.g. --sample-ms 200), or 1000"
            ))
        })
    }
}

fn target(base: &KnnModelFile, sample_ms: Option<u32>, window_s: Option<u32>) -> Result<Target> {
    let base_ms = base.meta.probing.sample_interval_ms;
    let base_w = base.model.window();
    let sample_ms = sample_ms.map_or(base_ms, f64::from);
    if sample_ms != base_ms {
        passive_every(sample_ms)?;
    }
    let window_ms = match window_s {
        Some(s) => f64::from(s) * 1e3,
        None => base_w as f64 * base_ms,
    };
    let w = (window_ms / sample_ms).round() as usize;
    if w == 0 || (w as f64 * sample_ms - window_ms).abs() > 1e-6 || window_ms % 1e3 != 0.0 {
        return Err(Error::invalid(format!(
            "a window of {} s is not whole seconds made of samples every {sample_ms} ms; choose --window-s accordingly",
            window_ms / 1e3
        )));
    }
    let own_only = sample_ms != base_ms || w != base_w;
    let mode = match base.meta.probing.mode {
        ProbingMode::Passive => passive_every(sample_ms)?,
        ProbingMode::Active if own_only => {
            return Err(Error::invalid(
                "--sample-ms and --window-s other than the base model's need a passive base model \
                 (active patterns are recorded at 1 Hz in the pattern's own windows)",
            ))
        }
        ProbingMode::Active => {
            Mode::parse(base.meta.probing.pattern.as_deref().ok_or_else(|| {
                Error::invalid(
                    "the base model is active but names no pattern; retrain it or pass a passive model",
                )
            })?)?
        }
    };
    Ok(Target {
        mode,
        w,
        w_s: (window_ms / 1e3) as usize,
        sample_ms,
        own_only,
    })
}

/// Whether OPS can use a model sampled every `period_ms` on a path whose
/// largest RTT (base RTT plus a full buffer) is `worst_ms`: the OPS driver
/// waits half a sample period for a burst's echoes
/// (core/src/sys/linux/ops_driver/run_loop.rs), and the last of the 10 echoes
/// leaves 9 ms after the first, so 45 % of the period with a little margin.
/// At 1 s the driver's own 400 ms timeout is the limit.
fn ops_can_sample(period_ms: u32, worst_ms: f64) -> bool {
    worst_ms
        <= if period_ms >= 1000 {
            390.0
        } else {
            0.45 * f64::from(period_ms)
        }
}

/// `condition` must fit the sample period, for the recorder (Mode::check_fits)
/// and for OPS using the model afterwards; if it does not, name the shortest
/// period that does.
fn check_fits(mode: &Mode, c: &Condition) -> Result<()> {
    let worst = c.rtt_ms * (1.0 + c.buffer_bdp);
    let fits = |m: &Mode| {
        let ms = (m.sample_ns() / 1_000_000) as u32;
        m.check_fits(c).is_ok() && (ms >= 1000 || ops_can_sample(ms, worst))
    };
    if fits(mode) {
        return Ok(());
    }
    let ms = (mode.sample_ns() / 1_000_000) as u32;
    let why = match mode.check_fits(c) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "condition {}: its largest RTT ({worst:.0} ms) is more than OPS waits for a burst's echoes \
             when it samples every {ms} ms (half the period)",
            c.name
        ),
    };
    let hint = [200u32, 250, 500]
        .into_iter()
        .find(|&p| fits(&Mode::PassiveEvery { period_ms: p }))
        .map_or("--sample-ms 1000".to_string(), |p| {
            format!("--sample-ms {p} (or 1000)")
        });
    Err(Error::invalid(format!(
        "{why}\n(for opsel calibrate: {hint})"
    )))
}

pub fn main(a: CalibrateArgs) -> Result<()> {
    let base = KnnModelFile::load(&a.model)?;
    let t = target(&base, a.sample_ms, a.window_s)
        .map_err(|e| Error::invalid(format!("{}: {e}", a.model.display())))?;
    let (w, mode) = (t.w, &t.mode);
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
    let load = match &a.sink {
        Some(s) if a.rate_mbps.is_none() || a.buffers.is_none() => {
            let l = measure_load(s, a.sink_s)?;
            println!(
                "burst to {s}: {:.1} Mbit/s, largest smoothed RTT {:.1} ms (buffer about {:.2} × BDP)",
                l.rate_mbps,
                l.max_srtt_ms,
                l.buffer_bdp(rtt_ms)
            );
            Some(l)
        }
        _ => None,
    };
    let rate_mbps = match (a.rate_mbps, &load) {
        (Some(v), _) => v,
        (None, Some(l)) => l.rate_mbps,
        (None, None) => return Err(Error::invalid(
            "give --sink HOST:PORT (a TCP sink that discards) to measure the rate, or --rate-mbps",
        )),
    };
    let buffers = match (&a.buffers, &load) {
        (Some(b), _) => b.clone(),
        (None, Some(l)) => vec![sig2(l.buffer_bdp(rtt_ms).clamp(0.05, 8.0))],
        (None, None) => {
            eprintln!(
                "opsel calibrate: no --buffers and no --sink to measure the buffer: recording 1 × BDP"
            );
            vec![1.0]
        }
    };
    let conditions: Vec<Condition> = buffers
        .iter()
        .map(|&b| {
            let c = Condition {
                name: format!("cal-r{}-d{}-b{}", sig3(rate_mbps), sig3(rtt_ms), sig3(b)),
                rate_mbps: sig3(rate_mbps),
                rtt_ms: sig3(rtt_ms),
                buffer_bdp: b,
                mtu: 1500,
            };
            c.validate()?;
            check_fits(mode, &c).map(|_| c)
        })
        .collect::<Result<_>>()?;
    println!(
        "path: base RTT {rtt_ms:.2} ms, rate {rate_mbps:.1} Mbit/s; recording {} (windows of {} s) in netlab: {}",
        mode.dir_name(),
        t.w_s,
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
    record(&specs, &a, &t)?;

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
        for win in read_windows(&s.csv_path(&a.corpus), w, mode, 1)? {
            windows.extend_from_slice(&win);
            labels.push(class as u32);
        }
    }
    let before = if t.own_only {
        base_on_same_traffic(&base, &specs, &a.corpus, &t)?
    } else {
        accuracy(&base.model, &windows, &labels, w)?
    };
    let model = if t.own_only {
        // The base model's DTW band as the same share of the window (a
        // radius of 20 in 40 samples becomes 25 in 50).
        let mut config = *base.model.config();
        config.dtw.radius = config
            .dtw
            .radius
            .map(|r| ((r * w) as f64 / base.model.window() as f64).round() as usize);
        Model::fit(&windows, w, &labels, base.model.classes().to_vec(), config)?
    } else {
        let mut raw = base.model.raw_references().to_vec();
        raw.extend_from_slice(&windows);
        let mut all_labels = base.model.labels().to_vec();
        all_labels.extend_from_slice(&labels);
        Model::fit(
            &raw,
            w,
            &all_labels,
            base.model.classes().to_vec(),
            *base.model.config(),
        )?
    };
    let mut meta = base.meta.clone();
    meta.probing.sample_interval_ms = t.sample_ms;
    meta.training = serde_json::json!({
        "base_model": base.meta.training,
        "calibration": {
            "base_rtt_ms": rtt_ms,
            "rate_mbps": rate_mbps,
            "buffers_bdp": buffers,
            "measured": load.as_ref().map(|l| serde_json::json!({
                "rate_mbps": l.rate_mbps, "max_srtt_ms": l.max_srtt_ms,
            })),
            "conditions": conditions.iter().map(|c| &c.name).collect::<Vec<_>>(),
            "windows_added": labels.len(),
            "sample_interval_ms": t.sample_ms,
            "window_s": t.w_s,
            "references": if t.own_only { "the recorded path's alone" } else { "the base model's plus the recorded path's" },
        },
    });
    let file = KnnModelFile { model, meta };
    file.save(&a.out)?;
    if t.own_only {
        println!(
            "wrote {}: {} references of this path alone, windows of {} samples every {} ms; \
             the base model classified {:.1} % of the same traffic (read every {} ms) right",
            a.out.display(),
            labels.len(),
            w,
            t.sample_ms,
            100.0 * before,
            base.meta.probing.sample_interval_ms
        );
    } else {
        println!(
            "wrote {}: {} + {} references; the base model classified {:.1} % of the new windows right",
            a.out.display(),
            base.model.len(),
            labels.len(),
            100.0 * before
        );
    }
    Ok(())
}

/// Two significant digits (a measured buffer: 0.59, 1.3).
fn sig2(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(1 - v.log10().floor() as i32);
    (v * mag).round() / mag
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
fn record(specs: &[TraceSpec], a: &CalibrateArgs, t: &Target) -> Result<()> {
    let w = t.w;
    let cfg = CollectConfig {
        w: t.w_s,
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
/// pattern-cycle boundaries (stride = whole cycles covering w). `step` > 1
/// reads every `step`-th sample (k = 0, step, 2 step, …), the series a
/// slower prober would have recorded on the same traffic
/// (opsel.train.data.at_1hz for a 200-ms trace and step 5).
pub fn read_windows(path: &Path, w: usize, mode: &Mode, step: usize) -> Result<Vec<Vec<f64>>> {
    let step = step.max(1) as u64;
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
        let len = rows[i..j].iter().map(|r| r.k / step + 1).max().unwrap_or(0) as usize;
        let mut series = vec![f64::NAN; len];
        for r in &rows[i..j] {
            if r.valid() && r.k % step == 0 {
                series[(r.k / step) as usize] = r.rtt_ms;
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

/// The base model on the recorded traffic read at its own sample period
/// (every 5th sample of a 200-ms trace for a 1 Hz model) and window: how it
/// did on this path before the path's own references.
fn base_on_same_traffic(
    base: &KnnModelFile,
    specs: &[TraceSpec],
    corpus: &Path,
    t: &Target,
) -> Result<f64> {
    let ratio = base.meta.probing.sample_interval_ms / t.sample_ms;
    if ratio < 1.0 || ratio.fract() != 0.0 || base.meta.probing.mode != ProbingMode::Passive {
        return Ok(f64::NAN);
    }
    let bw = base.model.window();
    let (mut windows, mut labels) = (Vec::new(), Vec::new());
    for s in specs {
        let Some(class) = base.model.classes().iter().position(|c| c == &s.class) else {
            continue;
        };
        for win in read_windows(&s.csv_path(corpus), bw, &t.mode, ratio as usize)? {
            windows.extend_from_slice(&win);
            labels.push(class as u32);
        }
    }
    accuracy(&base.model, &windows, &labels, bw)
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

/// What one bulk CUBIC flow to a discard sink shows of the path.
#[derive(Debug, Clone, Copy)]
struct PathLoad {
    /// Goodput over the burst's second half (bytes acked, TCP_INFO), so
    /// slow start is left out.
    rate_mbps: f64,
    /// The largest smoothed RTT of the burst (TCP_INFO). A loss-based flow
    /// fills a drop-tail bottleneck's buffer before its first loss (slow
    /// start's overshoot, then each CUBIC epoch), so this is the base RTT
    /// plus the full buffer's queueing delay, buffer / rate.
    max_srtt_ms: f64,
}

impl PathLoad {
    /// The buffer as a multiple of the BDP (rate × base RTT): its queueing
    /// delay over the base RTT.
    fn buffer_bdp(&self, base_rtt_ms: f64) -> f64 {
        ((self.max_srtt_ms - base_rtt_ms) / base_rtt_ms).max(0.0)
    }
}

fn measure_load(sink: &str, secs: f64) -> Result<PathLoad> {
    if !(secs.is_finite() && (1.0..=60.0).contains(&secs)) {
        return Err(Error::invalid(format!("--sink-s {secs} is outside 1..=60")));
    }
    let addr: SocketAddr = sink
        .parse()
        .map_err(|_| Error::invalid(format!("--sink {sink:?} is not HOST:PORT")))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| Error::io(format!("connect to the rate sink {addr}"), e))?;
    // Loss-based, whatever the system default is: BBR would keep the queue
    // short and hide the buffer.
    set_cca(&s, "cubic")?;
    let buf = vec![0u8; 1 << 16];
    let start = Instant::now();
    let half = Duration::from_secs_f64(secs / 2.0);
    let mut mark: Option<(Instant, u64)> = None;
    let mut max_srtt_us = 0u32;
    s.set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| Error::io("set write timeout", e))?;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        s.write_all(&buf)
            .map_err(|e| Error::io(format!("send to the rate sink {addr}"), e))?;
        let info = tcp_info(&s)?;
        max_srtt_us = max_srtt_us.max(info.rtt_us);
        if mark.is_none() && start.elapsed() >= half {
            mark = Some((Instant::now(), info.bytes_acked.unwrap_or(0)));
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
    Ok(PathLoad {
        rate_mbps: (b1 - b0) as f64 * 8.0 / dt / 1e6,
        max_srtt_ms: f64::from(max_srtt_us) / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(window: usize, radius: usize) -> KnnModelFile {
        let refs: Vec<f64> = (0..6 * window).map(|i| 10.0 + (i % 7) as f64).collect();
        let labels: Vec<u32> = (0..6).collect();
        let mut config = opsel::knn::KnnConfig::default();
        config.dtw.radius = Some(radius);
        let model = Model::fit(
            &refs,
            window,
            &labels,
            SIX_CLASSES.iter().map(|c| c.to_string()).collect(),
            config,
        )
        .unwrap();
        KnnModelFile {
            model,
            meta: Default::default(),
        }
    }

    #[test]
    fn the_base_models_period_and_window_extend_it() {
        let b = base(40, 20);
        let t = target(&b, None, None).unwrap();
        assert_eq!(
            (t.mode.clone(), t.w, t.w_s, t.own_only),
            (Mode::Passive, 40, 40, false)
        );
        let t = target(&b, Some(1000), Some(40)).unwrap();
        assert!(!t.own_only);
    }

    #[test]
    fn another_period_or_window_writes_the_paths_own_model() {
        let b = base(40, 20);
        let t = target(&b, Some(200), Some(10)).unwrap();
        assert_eq!(t.mode, Mode::PassiveEvery { period_ms: 200 });
        assert_eq!((t.w, t.w_s, t.sample_ms, t.own_only), (50, 10, 200.0, true));
        // Only the window changes: still the path's own model, at 1 Hz.
        let t = target(&b, None, Some(20)).unwrap();
        assert_eq!((t.mode.clone(), t.w, t.own_only), (Mode::Passive, 20, true));
        // The window defaults to the base model's seconds: 40 s = 200 samples.
        let t = target(&b, Some(200), None).unwrap();
        assert_eq!((t.w, t.w_s), (200, 40));
    }

    #[test]
    fn periods_the_recorder_cannot_keep_are_refused() {
        let b = base(40, 20);
        for ms in [0, 300, 700] {
            let e = target(&b, Some(ms), Some(10)).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("divisor of 1000")),
                "{ms}: {e:?}"
            );
        }
        assert!(target(&b, Some(200), Some(3)).is_ok());
        let mut active = base(20, 10);
        active.meta.probing.mode = ProbingMode::Active;
        active.meta.probing.pattern = Some("S5-C5-S5-B5".into());
        let e = target(&active, Some(200), Some(10))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("passive base model"), "{e}");
        assert!(target(&active, None, None).is_ok());
    }

    #[test]
    fn a_condition_too_slow_for_the_period_names_one_that_fits() {
        let c = |rtt_ms: f64, buffer_bdp: f64| Condition {
            name: format!("r20-d{rtt_ms}-b{buffer_bdp}"),
            rate_mbps: 20.0,
            rtt_ms,
            buffer_bdp,
            mtu: 1500,
        };
        let at = |ms| Mode::PassiveEvery { period_ms: ms };
        // 300 ms at most: too long for the recorder at 200 ms, for OPS below 1 s.
        let e = check_fits(&at(200), &c(150.0, 1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not fit") && e.contains("--sample-ms 1000"),
            "{e}"
        );
        assert!(check_fits(&Mode::Passive, &c(150.0, 1.0)).is_ok());
        // 120 ms: the recorder keeps 200-ms samples, but OPS waits only 100 ms.
        let e = check_fits(&at(200), &c(60.0, 1.0)).unwrap_err().to_string();
        assert!(
            e.contains("half the period") && e.contains("--sample-ms 500"),
            "{e}"
        );
        // The external conditions the 200-ms models were run at fit (84 ms at most).
        assert!(check_fits(&at(200), &c(67.0, 0.26)).is_ok());
        assert!(check_fits(&at(200), &c(42.0, 1.0)).is_ok());
    }

    /// One bulk CUBIC burst per buffer on a 20 Mbit/s, 40 ms netlab dumbbell
    /// with a discard sink at the receiver: the goodput is the bottleneck's
    /// and the largest smoothed RTT above the base RTT is the buffer.
    #[test]
    #[ignore = "needs root (netlab namespaces, TUN); run with `make test-collect`"]
    fn a_cubic_burst_measures_the_rate_and_the_buffer_on_netlab() {
        use opsel_netlab::scenario::bdp_bytes;
        use opsel_netlab::sys::in_netns;
        use opsel_netlab::topo::{receiver_ip, Lab, PipeSpec, TopologySpec};
        use std::net::TcpListener;
        let mut seen = Vec::new();
        for buffer in [0.5, 1.5] {
            let lab = Lab::up(
                &TopologySpec::dumbbell(1),
                &PipeSpec::tun(20.0, 40.0, bdp_bytes(20.0, 40.0, buffer), 1),
            )
            .unwrap();
            let ip = receiver_ip(0);
            let listener = in_netns(&lab.receiver_ns[0], move || {
                TcpListener::bind((ip, 0)).map_err(|e| Error::io("bind the sink", e))
            })
            .unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let sink = std::thread::spawn(move || {
                if let Ok((mut c, _)) = listener.accept() {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                    let _ = std::io::copy(&mut c, &mut std::io::sink());
                }
            });
            let load = in_netns(&lab.sender_ns[0], move || measure_load(&addr, 4.0)).unwrap();
            let _ = sink.join();
            drop(lab);
            seen.push((buffer, load, load.buffer_bdp(40.0)));
        }
        eprintln!("(buffer × BDP, burst, measured buffer × BDP): {seen:?}");
        for &(buffer, load, est) in &seen {
            assert!(
                (15.0..=20.5).contains(&load.rate_mbps),
                "rate at {buffer} × BDP: {seen:?}"
            );
            assert!(
                (0.6 * buffer..=1.4 * buffer).contains(&est),
                "buffer {buffer} × BDP measured as {est:.2}: {seen:?}"
            );
        }
    }

    #[test]
    fn a_measured_buffer_is_its_queueing_delay_over_the_base_rtt() {
        let l = PathLoad {
            rate_mbps: 20.0,
            max_srtt_ms: 63.6,
        };
        assert!((l.buffer_bdp(40.0) - 0.59).abs() < 1e-9);
        // A burst that never queued (a path faster than the sender) reads as no buffer.
        assert_eq!(l.buffer_bdp(70.0), 0.0);
        assert_eq!(sig2(0.5912), 0.59);
        assert_eq!(sig2(1.349), 1.3);
    }

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
        let w = read_windows(&p, 2, &Mode::Passive, 1).unwrap();
        assert_eq!(
            w,
            vec![vec![10.0, 11.0], vec![12.0, 13.0], vec![22.0, 23.0]]
        );
        // Every 2nd sample: run 0 reads 10, 12, 14 (one whole window); run 1
        // reads 20, 22 (its lost k = 1 is not a sample of that series).
        let w = read_windows(&p, 2, &Mode::Passive, 2).unwrap();
        assert_eq!(w, vec![vec![10.0, 12.0], vec![20.0, 22.0]]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
