//! One recording session of a trace: the lab, the background flows, the
//! passive prober (core's 000 §3.2 echo burst), the active-probing sender,
//! and the rows and side-car it appends.

use std::io::Write;
use std::net::SocketAddrV4;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use opsel::probe::{Pattern, SegmentKind};
use opsel::sys::linux::rtt::echo_burst;
use opsel::{Error, Result};

use crate::scenario::{BASE_PORT, ECHO_PORT};
use crate::sys::{self, now_ns, sleep_until_ns};
use crate::topo::{self, Lab, PipeKind, PipeSpec, TopologySpec};
use crate::traffic::{self, Bins, FlowPlan, Traffic, ECHOES};

use super::plan::plan_samples;
use super::spec::{Mode, TraceSpec};
use super::trace::{
    check_sidecar_matches, open_append, read_sidecar, trace_state, write_sidecar, Row, CSV_HEADER,
    SIDECAR_FORMAT,
};
use super::NS;

/// Port of the active-probing flow on the probing pair's receiver.
const ACTIVE_PORT: u16 = BASE_PORT + 40;
/// Unsent bytes the kernel may hold for the active flow (TCP_NOTSENT_LOWAT):
/// small, so a silence segment starts silent once in-flight data drains.
const ACTIVE_NOTSENT_LOWAT: i32 = 128 * 1024;
/// Seconds of base-RTT samples taken before the background starts.
const BASE_RTT_SAMPLES: u64 = 2;

/// Settings of a collection session.
#[derive(Debug, Clone)]
pub struct CollectConfig {
    /// Window length in seconds (samples at 1 Hz; `w_samples` gives them for
    /// a finer mode); resume counts windows of this length.
    pub w: usize,
    /// Windows wanted in the whole trace.
    pub target_windows: usize,
    /// At most this many windows per session (lab life); `usize::MAX` = all.
    pub chunk_windows: usize,
    /// Background time before recording starts.
    pub warmup_s: f64,
    /// Seed of the pipe's (unused, loss = 0) PRNG, recorded for completeness.
    pub seed: u64,
}

impl Default for CollectConfig {
    fn default() -> Self {
        Self {
            w: 20,
            target_windows: 300,
            chunk_windows: usize::MAX,
            warmup_s: 10.0,
            seed: 1,
        }
    }
}

impl CollectConfig {
    /// Window length in samples of `mode` (`w` counts seconds).
    pub fn w_samples(&self, mode: &Mode) -> usize {
        mode.window_samples(self.w)
    }

    pub fn validate(&self, mode: &Mode) -> Result<()> {
        if self.w == 0 || self.w > 3600 {
            return Err(Error::invalid(format!(
                "window length w = {} is outside 1..=3600",
                self.w
            )));
        }
        if !(self.warmup_s.is_finite() && (0.0..=600.0).contains(&self.warmup_s)) {
            return Err(Error::invalid(format!(
                "warm-up {} s is outside 0..=600",
                self.warmup_s
            )));
        }
        if let Mode::Active { pattern, text } = mode {
            let per = pattern.samples_per_run(NS)?;
            if pattern.total_ns() % NS != 0 || per == 0 || self.w as u64 % per != 0 {
                return Err(Error::invalid(format!(
                    "w = {} is not a multiple of pattern {text}'s length ({} s); windows must align to the pattern",
                    self.w,
                    pattern.total_ns() as f64 / 1e9
                )));
            }
        }
        Ok(())
    }
}

/// Outcome of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionResult {
    pub run: Option<u32>,
    pub written: u64,
    pub windows_before: usize,
    pub windows_after: usize,
    pub interrupted: bool,
}

pub(super) fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub(super) fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The side-car's fixed part (conditions); resumes must match it.
pub(super) fn sidecar_conditions(spec: &TraceSpec, cfg: &CollectConfig) -> serde_json::Value {
    let bg = spec.background();
    serde_json::json!({
        "condition": spec.condition.name,
        "rate_mbps": spec.condition.rate_mbps,
        "rtt_ms": spec.condition.rtt_ms,
        "buffer_bdp": spec.condition.buffer_bdp,
        "buffer_bytes": spec.condition.buffer_bytes(),
        "mtu": spec.condition.mtu,
        "pipe": "tun",
        "mode": if spec.mode.is_active() { "active" } else { "passive" },
        "pattern": spec.mode.pattern_text(),
        "active_transport": spec.mode.pattern_text().map(|_| "one persistent TCP connection, CCA switched live (TCP_CONGESTION) at each burst, TCP_NOTSENT_LOWAT 128 KiB, nothing sent in silences"),
        "class": spec.class,
        "background": {
            "bbr": bg.iter().filter(|c| **c == "bbr").count(),
            "cubic": bg.iter().filter(|c| **c == "cubic").count(),
            "flows": "bulk TCP, one sender/receiver pair each, constant for the whole run",
        },
        "probe": {
            "transport": "udp-echo",
            "echoes_per_sample": ECHOES,
            "echo_interval_ms": 1.0,
            "sample_interval_ms": spec.mode.sample_ns() as f64 / 1e6,
        },
        "window": cfg.w_samples(&spec.mode),
        "warmup_s": cfg.warmup_s,
    })
}

/// A probe sample as the streaming prober reports it.
#[derive(Debug, Clone, Copy)]
struct Tick {
    tick_ns: u64,
    rtt_ms: f64,
    min_ms: f64,
    max_ms: f64,
    answered: u32,
}

/// The passive prober of [`traffic::spawn_prober`] (000 §3.2: 10 echoes 1 ms
/// apart, one sample per second), streaming each sample as it completes so a
/// long collection is written to disk as it goes.
fn spawn_stream_prober(
    ns: &str,
    dst: SocketAddrV4,
    first_tick_ns: u64,
    period_ns: u64,
    out: mpsc::Sender<Tick>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    sys::spawn_in_netns(ns, "collect-prober", move || {
        // Like the pipe threads (docs/results/netlab.md): on a loaded machine
        // a late wake-up of the prober reads as RTT. It sleeps between echoes,
        // so real-time priority costs the machine nothing.
        sys::set_realtime_priority();
        let mut probe = traffic::open_prober(dst)?;
        let cfg = traffic::burst_config_every(period_ns);
        let mut k: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let tick = first_tick_ns + k * period_ns;
            while now_ns() < tick {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                sleep_until_ns(tick.min(now_ns() + 50_000_000));
            }
            let b = echo_burst(&mut probe, cfg, traffic::burst_seq0(k))?;
            let (rtt_ms, min_ms, max_ms, answered) = traffic::burst_stats_ms(&b);
            let t = Tick {
                tick_ns: tick,
                rtt_ms,
                min_ms,
                max_ms,
                answered,
            };
            if out.send(t).is_err() {
                return Ok(());
            }
            k += 1;
        }
        Ok(())
    })
}

/// The active-probing sender: one persistent TCP connection from the probing
/// host, following `pattern` cyclically from `pattern_start_ns` until `stop`.
fn spawn_active_sender(
    ns: &str,
    dst: SocketAddrV4,
    connect_at_ns: u64,
    pattern_start_ns: u64,
    pattern: Pattern,
    stop: Arc<AtomicBool>,
    switches: Arc<AtomicU64>,
) -> Result<std::thread::JoinHandle<Result<u64>>> {
    sys::spawn_in_netns(ns, "collect-active", move || {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let wait = |t: u64| -> bool {
            while now_ns() < t {
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                sleep_until_ns(t.min(now_ns() + 50_000_000));
            }
            !stop.load(Ordering::Relaxed)
        };
        if !wait(connect_at_ns) {
            return Ok(0);
        }
        let mut s = loop {
            match std::net::TcpStream::connect_timeout(&dst.into(), Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(e) => {
                    if now_ns() > pattern_start_ns || stop.load(Ordering::Relaxed) {
                        return Err(Error::io(format!("connect active probe to {dst}"), e));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        let lowat = ACTIVE_NOTSENT_LOWAT;
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&lowat as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
        let _ = s.set_nodelay(true);
        s.set_write_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| Error::io("SO_SNDTIMEO", e))?;
        let buf = vec![0x5au8; 1 << 16];
        let mut sent = 0u64;
        let mut cycle_start = pattern_start_ns;
        loop {
            for (i, seg) in pattern.segments().iter().enumerate() {
                let a = cycle_start + pattern.segment_start_ns(i).unwrap_or(0);
                let b = a + seg.duration_ns;
                if !wait(a) {
                    return Ok(sent);
                }
                if let SegmentKind::Burst(cca) = seg.kind {
                    // 000 §5.2: switch the live socket, no reconnect.
                    opsel::sys::linux::set_cca(&s, cca.as_str())?;
                    switches.fetch_add(1, Ordering::Relaxed);
                    while now_ns() < b && !stop.load(Ordering::Relaxed) {
                        match s.write(&buf) {
                            Ok(n) => sent += n as u64,
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut
                                    || e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(Error::io("send active probe burst", e)),
                        }
                    }
                }
            }
            cycle_start += pattern.total_ns();
        }
    })
}

/// Records one session of a trace: builds the lab, runs the background,
/// waits `warmup_s`, and appends `plan_samples` samples to the CSV.
/// `progress(done, total)` is called after each sample; `cancel` (or
/// Ctrl-C) ends the session early, keeping what was written.
pub fn collect_session(
    spec: &TraceSpec,
    cfg: &CollectConfig,
    out: &Path,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SessionResult> {
    cfg.validate(&spec.mode)?;
    let csv = spec.csv_path(out);
    let side = spec.sidecar_path(out);
    let w = cfg.w_samples(&spec.mode);
    let state = trace_state(&csv, w)?;
    let conditions = sidecar_conditions(spec, cfg);
    let mut sidecar = read_sidecar(&side)?;
    if let Some(existing) = &sidecar {
        check_sidecar_matches(existing, &conditions)?;
    }
    let samples = plan_samples(state.windows, cfg.target_windows, cfg.chunk_windows, w);
    if samples == 0 {
        return Ok(SessionResult {
            run: None,
            written: 0,
            windows_before: state.windows,
            windows_after: state.windows,
            interrupted: false,
        });
    }
    sys::require_root()?;
    let run = state.next_run;
    let c = &spec.condition;
    let bg = spec.background();
    let lab = Lab::up(
        &TopologySpec {
            pairs: 3,
            mtu: c.mtu,
            offloads_off: true,
        },
        &PipeSpec {
            kind: PipeKind::Tun,
            rate_bps: Some((c.rate_mbps * 1e6).round() as u64),
            delay_ns: (c.rtt_ms * 1e6 / 2.0).round() as u64,
            buffer_bytes: c.buffer_bytes(),
            loss: 0.0,
            seed: cfg.seed,
        },
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    let switches = Arc::new(AtomicU64::new(0));
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    // Timeline: base-RTT samples, then the background starts, warm-up, then recording.
    let first_tick = now_ns() + 300_000_000;
    let bg_start = first_tick + BASE_RTT_SAMPLES * NS;
    let rec_start = bg_start + (cfg.warmup_s * 1e9) as u64;
    let period = spec.mode.sample_ns();
    let total_ns = rec_start - bg_start + samples * period + 2 * NS;

    struct Threads {
        stop: Arc<AtomicBool>,
        handles: Vec<std::thread::JoinHandle<Result<u64>>>,
        units: Vec<std::thread::JoinHandle<Result<()>>>,
    }
    impl Drop for Threads {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
            for h in self.units.drain(..) {
                let _ = h.join();
            }
        }
    }
    let mut th = Threads {
        stop: stop.clone(),
        handles: Vec::new(),
        units: Vec::new(),
    };
    let mut bins = Vec::new();
    for (i, cca) in bg.iter().enumerate() {
        let pair = 1 + i;
        let plan = FlowPlan {
            name: format!("bg{i}-{cca}"),
            traffic: Traffic::Tcp {
                cca: cca.to_string(),
                on_off_s: None,
            },
            src_ns: lab.sender_ns[pair].clone(),
            dst_ns: lab.receiver_ns[pair].clone(),
            dst: SocketAddrV4::new(topo::receiver_ip(pair), BASE_PORT + i as u16),
            start_ns: 0,
            stop_ns: total_ns,
        };
        let b = Arc::new(Bins::new(bg_start, total_ns));
        th.handles
            .push(traffic::spawn_receiver(&plan, b.clone(), stop.clone())?);
        th.handles.push(traffic::spawn_sender(
            plan,
            bg_start,
            stop.clone(),
            events.clone(),
        )?);
        bins.push(b);
    }
    let echo = SocketAddrV4::new(topo::receiver_ip(0), ECHO_PORT);
    th.units.push(crate::traffic::spawn_echo_with(
        &lab.receiver_ns[0],
        echo,
        stop.clone(),
        true,
    )?);
    let active_bins = Arc::new(Bins::new(bg_start, total_ns));
    if let Mode::Active { pattern, .. } = &spec.mode {
        let dst = SocketAddrV4::new(topo::receiver_ip(0), ACTIVE_PORT);
        let plan = FlowPlan {
            name: "active".into(),
            traffic: Traffic::Tcp {
                cca: "cubic".into(),
                on_off_s: None,
            },
            src_ns: lab.sender_ns[0].clone(),
            dst_ns: lab.receiver_ns[0].clone(),
            dst,
            start_ns: 0,
            stop_ns: total_ns,
        };
        th.handles.push(traffic::spawn_receiver(
            &plan,
            active_bins.clone(),
            stop.clone(),
        )?);
        th.handles.push(spawn_active_sender(
            &lab.sender_ns[0],
            dst,
            bg_start,
            rec_start,
            pattern.clone(),
            stop.clone(),
            switches.clone(),
        )?);
    }
    let (tx, rx) = mpsc::channel();
    th.units.push(spawn_stream_prober(
        &lab.sender_ns[0],
        echo,
        first_tick,
        period,
        tx,
        stop.clone(),
    )?);

    // The side-car gets this run's entry before any row is written.
    // Monotonic tick → wall clock: one offset for the whole run.
    let unix_offset_s = unix_now_s() - now_ns() as f64 / 1e9;
    let mut entry = serde_json::json!({
        "run": run,
        "start_unix_s": unix_offset_s + rec_start as f64 / 1e9,
        "kernel": read_trim("/proc/sys/kernel/osrelease"),
        "loadavg_at_start": read_trim("/proc/loadavg"),
        "lab": lab.id,
        "samples_planned": samples,
    });
    let mut sc = sidecar.take().unwrap_or_else(|| {
        serde_json::json!({
            "format": SIDECAR_FORMAT,
            "version": 1,
            "conditions": conditions,
            "columns": CSV_HEADER,
            "runs": [],
        })
    });
    let push_run = |sc: &mut serde_json::Value, entry: &serde_json::Value, replace: bool| {
        if let Some(runs) = sc.get_mut("runs").and_then(|r| r.as_array_mut()) {
            if replace {
                runs.pop();
            }
            runs.push(entry.clone());
        }
    };
    push_run(&mut sc, &entry, false);
    if let Some(dir) = side.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    }
    write_sidecar(&side, &sc)?;

    let mut f = open_append(&csv)?;
    let per_run = match &spec.mode {
        Mode::Active { pattern, .. } => Some((pattern.clone(), pattern.samples_per_run(NS)?)),
        Mode::Passive | Mode::PassiveEvery { .. } => None,
    };
    let mut base = Vec::new();
    let mut written = 0u64;
    let mut lost = 0u64;
    let mut rtt_sum = 0.0;
    let mut interrupted = false;
    let deadline = rec_start + samples * period + 5 * NS;
    while written < samples {
        if cancel.load(Ordering::Relaxed) || sys::interrupted() {
            interrupted = true;
            break;
        }
        let t = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(t) => t,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if now_ns() > deadline + 5 * NS {
                    return Err(Error::invalid(format!(
                        "prober of {} stopped delivering samples ({written} of {samples} written)",
                        spec.key()
                    )));
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::invalid(format!(
                    "prober of {} ended after {written} of {samples} samples",
                    spec.key()
                )))
            }
        };
        if t.tick_ns < bg_start {
            if t.answered > 0 {
                base.push(t.rtt_ms);
            }
            continue;
        }
        if t.tick_ns < rec_start {
            continue;
        }
        let k = (t.tick_ns - rec_start + period / 2) / period;
        let (cycle, phase, segment) = match &per_run {
            Some((p, per)) => {
                let seg = p.segment_of_sample(k, NS)?;
                let name = match p.segments()[seg].kind {
                    SegmentKind::Silence => "silence".to_string(),
                    SegmentKind::Burst(c) => c.as_str().to_string(),
                };
                (Some(k / per), Some(k % per), name)
            }
            None => (None, None, "-".to_string()),
        };
        let row = Row {
            run,
            k,
            t_unix_s: unix_offset_s + t.tick_ns as f64 / 1e9,
            rtt_ms: t.rtt_ms,
            min_ms: if t.answered > 0 { t.min_ms } else { f64::NAN },
            max_ms: if t.answered > 0 { t.max_ms } else { f64::NAN },
            answered: t.answered,
            cycle,
            phase,
            segment,
        };
        if row.valid() {
            rtt_sum += row.rtt_ms;
        } else {
            lost += 1;
        }
        writeln!(f, "{}", row.to_csv())
            .map_err(|e| Error::io(format!("append to {}", csv.display()), e))?;
        f.flush()
            .map_err(|e| Error::io(format!("flush {}", csv.display()), e))?;
        written += 1;
        progress(written, samples);
    }
    let rec_end = now_ns();
    drop(th);
    let mean_mbps = |b: &Bins| {
        let v = b.values();
        let a = ((rec_start - bg_start) / traffic::BIN_NS) as usize;
        let e = (((rec_end.max(rec_start + 1)) - bg_start) / traffic::BIN_NS) as usize;
        let e = e.min(v.len());
        if e <= a {
            return 0.0;
        }
        v[a..e].iter().sum::<u64>() as f64 * 8.0 / ((e - a) as f64 * 0.1) / 1e6
    };
    let fwd = lab.fwd_stats.snapshot(false);
    drop(lab);
    let after = trace_state(&csv, w)?;
    let mut bgm = serde_json::Map::new();
    for (i, (cca, b)) in bg.iter().zip(&bins).enumerate() {
        bgm.insert(format!("bg{i}-{cca}"), serde_json::json!(mean_mbps(b)));
    }
    if let Some(o) = entry.as_object_mut() {
        o.insert("end_unix_s".into(), serde_json::json!(unix_now_s()));
        o.insert("samples_written".into(), serde_json::json!(written));
        o.insert("samples_lost".into(), serde_json::json!(lost));
        o.insert(
            "rtt_mean_ms".into(),
            serde_json::json!(if written > lost {
                rtt_sum / (written - lost) as f64
            } else {
                f64::NAN
            }),
        );
        o.insert("base_rtt_ms".into(), serde_json::json!(base));
        o.insert("background_mbps".into(), serde_json::Value::Object(bgm));
        if spec.mode.is_active() {
            o.insert(
                "active_mbps_mean".into(),
                serde_json::json!(mean_mbps(&active_bins)),
            );
            o.insert(
                "active_cca_switches".into(),
                serde_json::json!(switches.load(Ordering::Relaxed)),
            );
        }
        o.insert(
            "bottleneck_drops".into(),
            serde_json::json!(fwd.drop_queue_pkts),
        );
        let errs: Vec<String> = events
            .lock()
            .map(|v| {
                v.iter()
                    .filter(|e| e.what.starts_with("error"))
                    .map(|e| format!("{}: {}", e.flow, e.what))
                    .collect()
            })
            .unwrap_or_default();
        o.insert("errors".into(), serde_json::json!(errs));
        o.insert("interrupted".into(), serde_json::json!(interrupted));
    }
    push_run(&mut sc, &entry, true);
    write_sidecar(&side, &sc)?;
    Ok(SessionResult {
        run: Some(run),
        written,
        windows_before: state.windows,
        windows_after: after.windows,
        interrupted,
    })
}
