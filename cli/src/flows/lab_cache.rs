//! `opsel flows lab-cache`: what the per-/24 decision cache saves on repeated
//! transfers (003 §7 item 5, hypothesis H2: bulk transfers repeat toward the
//! same /24; `opsel::flows::decision_cache`, `ops::PriorProbe`).
//!
//! On a netlab dumbbell (pair 1 carries one long-lived background TCP flow of
//! one CCA; pair 0 the foreground, always toward the same receiver /24), the
//! foreground runs repeated fixed-time `opsel send --ops` transfers (this
//! binary, as an operator would run it) alternately without and with
//! `--decision-cache`. The cache arm starts from a cache filled by one
//! warm-up transfer. Per transfer: every decision's probing seconds
//! (probe phase start → classification), class and CCA, whether the CCA is
//! the stump's choice for the true background (CUBIC → cubic, BBR → bbr),
//! foreground and background goodput over the transfer and their Jain index.
//! Resumable: each transfer's row is `<bg>-<arm>-<k>.json` in `--out`; rows
//! already there are kept, and `table.md` is rewritten from all rows.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use serde::{Deserialize, Serialize};

use opsel::{Error, Result};
use opsel_netlab::scenario::bdp_bytes;
use opsel_netlab::sys::now_ns;
use opsel_netlab::topo::{receiver_ip, Lab, PipeSpec, TopologySpec};
use opsel_netlab::traffic::{self, Bins, FlowPlan, Traffic};

#[derive(Args)]
pub struct LabCacheArgs {
    /// Directory for the per-transfer rows, the cache files, logs and `table.md`.
    #[arg(long)]
    out: PathBuf,
    /// Transfers per arm and background (the cache arm also runs one warm-up).
    #[arg(long, default_value_t = 5)]
    repeats: u32,
    /// Backgrounds, comma-separated CCAs (one long-lived flow each).
    #[arg(long, default_value = "cubic,bbr")]
    bg: String,
    /// Length of each foreground transfer (`opsel send --time`), s.
    #[arg(long, default_value_t = 70.0)]
    seconds: f64,
    /// OPS steady time Y (`opsel send --steady`), s.
    #[arg(long, default_value_t = 20.0)]
    steady: f64,
    /// Probing pattern (`opsel send --pattern`).
    #[arg(long, default_value = "S5-C5-S5-B5")]
    pattern: String,
    #[arg(long, default_value_t = 100.0)]
    rate_mbps: f64,
    #[arg(long, default_value_t = 65.0)]
    rtt_ms: f64,
    /// Drop-tail buffer in BDPs.
    #[arg(long, default_value_t = 0.5)]
    buffer_bdp: f64,
}

/// One OPS decision of a transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionRow {
    /// Seconds since the transfer's first CCA was set.
    pub t_s: f64,
    /// Probe phase start → classification.
    pub probe_s: f64,
    pub samples: u64,
    pub early: bool,
    pub label: String,
    pub cca: String,
    /// The stump's choice for the true background.
    pub right: bool,
}

/// One foreground transfer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CacheRun {
    pub bg: String,
    /// `none`, `cache` or `warm` (the cache arm's first transfer, empty cache).
    pub arm: String,
    pub repeat: u32,
    /// The CCA of the transfer's first `cca_set` (the cached CCA on a hit).
    pub first_cca: String,
    pub decisions: Vec<DecisionRow>,
    pub fg_mbps: f64,
    pub bg_mbps: f64,
    pub jain: f64,
    pub seconds: f64,
    /// Load average (1 min) when the transfer ended: the machine is shared.
    pub load1: f64,
}

const KEY: &str = "netlab decision cache experiment key";
const PORT: u16 = 5411;
const BG_PORT: u16 = 5412;

pub fn lab_cache(a: LabCacheArgs) -> Result<()> {
    if a.repeats == 0 {
        return Err(Error::invalid(
            "--repeats 0: give at least 1 transfer per arm",
        ));
    }
    if !(a.seconds >= 30.0 && a.steady > 0.0) {
        return Err(Error::invalid(format!(
            "--seconds {} must be >= 30 (a lead-in and a 20 s probe) and --steady {} > 0",
            a.seconds, a.steady
        )));
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("creating {}", a.out.display()), e))?;
    opsel_netlab::sys::install_interrupt_handler();
    let exe = std::env::current_exe().map_err(|e| Error::io("locating the opsel binary", e))?;
    let mut rows = Vec::new();
    for bg in a.bg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mut plan = vec![("warm".to_string(), 0)];
        for k in 1..=a.repeats {
            plan.push(("none".into(), k));
            plan.push(("cache".into(), k));
        }
        let row_path = |arm: &str, k: u32| a.out.join(format!("{bg}-{arm}-{k}.json"));
        let mut todo = Vec::new();
        for (arm, k) in &plan {
            match std::fs::read_to_string(row_path(arm, *k))
                .ok()
                .and_then(|t| serde_json::from_str::<CacheRun>(&t).ok())
            {
                Some(r) => rows.push(r),
                None => todo.push((arm.clone(), *k)),
            }
        }
        if todo.is_empty() {
            eprintln!(
                "opsel flows lab-cache: {bg}: every transfer kept from {}",
                a.out.display()
            );
            continue;
        }
        let new = run_background(&a, &exe, bg, &todo, &row_path)?;
        rows.extend(new);
    }
    let md = table(&a, &rows);
    let p = a.out.join("table.md");
    std::fs::write(&p, &md).map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    print!("{md}");
    Ok(())
}

struct Stopper(Arc<AtomicBool>);
impl Drop for Stopper {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One lab and one background flow for the transfers `todo` of `bg`.
fn run_background(
    a: &LabCacheArgs,
    exe: &Path,
    bg: &str,
    todo: &[(String, u32)],
    row_path: &dyn Fn(&str, u32) -> PathBuf,
) -> Result<Vec<CacheRun>> {
    let lab = Lab::up(
        &TopologySpec::dumbbell(2),
        &PipeSpec::tun(
            a.rate_mbps,
            a.rtt_ms,
            bdp_bytes(a.rate_mbps, a.rtt_ms, a.buffer_bdp),
            1,
        ),
    )?;
    // The background runs for every transfer plus slack.
    let per_run_s = a.seconds + 20.0;
    let dur_ns = ((15.0 + per_run_s * todo.len() as f64 + 60.0) * 1e9) as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let _stopper = Stopper(stop.clone());
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    let bg_plan = FlowPlan {
        name: "bg".into(),
        traffic: Traffic::Tcp {
            cca: bg.to_string(),
            on_off_s: None,
        },
        src_ns: lab.sender_ns[1].clone(),
        dst_ns: lab.receiver_ns[1].clone(),
        dst: SocketAddrV4::new(receiver_ip(1), BG_PORT),
        start_ns: 0,
        stop_ns: dur_ns,
    };
    let t0 = now_ns() + 300_000_000;
    let bins = Arc::new(Bins::new(t0, dur_ns));
    let rx_bg = traffic::spawn_receiver(&bg_plan, bins.clone(), stop.clone())?;
    let tx_bg = traffic::spawn_sender(bg_plan, t0, stop.clone(), events)?;
    eprintln!("opsel flows lab-cache: {bg} background started; 15 s warm-up");
    std::thread::sleep(Duration::from_secs(15));
    let src = lab_file(a)?;
    let mut out = Vec::new();
    for (arm, k) in todo {
        if opsel_netlab::sys::interrupted() {
            return Err(Error::invalid(
                "interrupted; rerun the same command to resume",
            ));
        }
        if tx_bg.is_finished() {
            return Err(Error::invalid(format!(
                "the {bg} background flow stopped early"
            )));
        }
        eprintln!("opsel flows lab-cache: {bg} {arm} {k}");
        let r = run_transfer(a, exe, &lab, bg, arm, *k, &src, &bins, t0)?;
        eprintln!(
            "  first CCA {}, decisions {}, FG {:.1} / BG {:.1} Mbit/s, Jain {:.3}",
            r.first_cca,
            r.decisions
                .iter()
                .map(|d| format!(
                    "{:.0} s: {} → {} ({} samples{}, {:.1} s probe)",
                    d.t_s,
                    d.label,
                    d.cca,
                    d.samples,
                    if d.early { ", early" } else { "" },
                    d.probe_s
                ))
                .collect::<Vec<_>>()
                .join("; "),
            r.fg_mbps,
            r.bg_mbps,
            r.jain
        );
        let p = row_path(arm, *k);
        let t = serde_json::to_string_pretty(&r)
            .map_err(|e| Error::invalid(format!("serialising a row: {e}")))?;
        std::fs::write(&p, t + "\n")
            .map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
        out.push(r);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = tx_bg.join();
    let _ = rx_bg.join();
    let _ = std::fs::remove_file(&src);
    drop(lab);
    Ok(out)
}

/// A sparse source file big enough for one transfer at the bottleneck rate.
fn lab_file(a: &LabCacheArgs) -> Result<PathBuf> {
    let p = a.out.join("src.bin");
    let size = (a.rate_mbps * 1e6 / 8.0 * (a.seconds + 10.0) * 1.2) as u64;
    let f =
        std::fs::File::create(&p).map_err(|e| Error::io(format!("creating {}", p.display()), e))?;
    f.set_len(size)
        .map_err(|e| Error::io(format!("sizing {}", p.display()), e))?;
    Ok(p)
}

fn netns_cmd(ns: &str, exe: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(exe).env("OPSEL_KEY", KEY);
    c
}

fn wait_for(c: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(s)) = c.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn run_transfer(
    a: &LabCacheArgs,
    exe: &Path,
    lab: &Lab,
    bg: &str,
    arm: &str,
    k: u32,
    src: &Path,
    bins: &Bins,
    t0: u64,
) -> Result<CacheRun> {
    let addr = format!("{}:{PORT}", receiver_ip(0));
    let dst = a.out.join(format!("dst-{bg}-{arm}-{k}.bin"));
    let log = a.out.join(format!("{bg}-{arm}-{k}.log.jsonl"));
    let _ = std::fs::remove_file(&log);
    let cache = a.out.join(format!("{bg}-cache.json"));
    let rx = netns_cmd(&lab.receiver_ns[0], exe)
        .args([
            "recv",
            "--listen",
            &addr,
            "--force",
            "--timeout",
            "30",
            "--out",
        ])
        .arg(&dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io("starting opsel recv", e))?;
    let mut rx = Kill(rx);
    std::thread::sleep(Duration::from_millis(500));
    let mut cmd = netns_cmd(&lab.sender_ns[0], exe);
    cmd.args(["send", "--to", &addr, "--ops", "--pattern", &a.pattern])
        .args([
            "--steady",
            &a.steady.to_string(),
            "--time",
            &a.seconds.to_string(),
        ])
        .arg("--file")
        .arg(src)
        .arg("--log")
        .arg(&log);
    if arm != "none" {
        cmd.arg("--decision-cache").arg(&cache);
    }
    let start = now_ns();
    let tx = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("starting opsel send", e))?;
    let mut tx = Kill(tx);
    let status = wait_for(&mut tx.0, Duration::from_secs_f64(a.seconds + 60.0));
    let end = now_ns();
    let _ = wait_for(&mut rx.0, Duration::from_secs(20));
    let _ = std::fs::remove_file(&dst);
    // A fixed-time transfer leaves the receiver's part file (`opsel send
    // --time`: resumable), up to a GB per run here.
    let _ = std::fs::remove_file(a.out.join(format!(".dst-{bg}-{arm}-{k}.bin.opsel-part")));
    if !status.is_some_and(|s| s.success()) {
        let mut err = String::new();
        if let Some(mut e) = tx.0.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        return Err(Error::invalid(format!(
            "opsel send ({bg} {arm} {k}) failed or hung: {}",
            err.trim()
        )));
    }
    let text = std::fs::read_to_string(&log)
        .map_err(|e| Error::io(format!("reading {}", log.display()), e))?;
    let mut r = parse_log(&text, bg)?;
    // The background over the transfer's wall-clock span (100 ms bins).
    let v = bins.values();
    let (i0, i1) = (
        (start.saturating_sub(t0) / 100_000_000) as usize + 10,
        (end.saturating_sub(t0) / 100_000_000) as usize,
    );
    let span = &v[i0.min(v.len())..i1.min(v.len())];
    r.bg_mbps = if span.is_empty() {
        0.0
    } else {
        span.iter().sum::<u64>() as f64 * 8.0 / (span.len() as f64 * 0.1) / 1e6
    };
    r.jain = opsel::fair::jain(&[r.fg_mbps, r.bg_mbps]).unwrap_or(0.0);
    r.arm = arm.to_string();
    r.repeat = k;
    r.load1 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0);
    Ok(r)
}

/// Decisions, first CCA and foreground goodput from `opsel send --log`.
fn parse_log(text: &str, bg: &str) -> Result<CacheRun> {
    let right_cca = if bg == "bbr" { "bbr" } else { "cubic" };
    let mut first_cca = String::new();
    let mut probe_at: Option<f64> = None;
    let mut pending: Option<(f64, f64, u64, bool, String)> = None;
    let mut decisions = Vec::new();
    let (mut first_ns, mut last_ns, mut total) = (None, 0u64, 0u64);
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let t = v["t_s"].as_f64().unwrap_or(0.0);
        match v["kind"].as_str().unwrap_or("") {
            "cca_set" if first_cca.is_empty() => {
                first_cca = v["cca"].as_str().unwrap_or("").to_string()
            }
            "phase" if v["phase"] == "probe" => probe_at = Some(t),
            "classified" => {
                pending = Some((
                    t,
                    t - probe_at.unwrap_or(t),
                    v["samples"].as_u64().unwrap_or(0),
                    v["early"].as_bool().unwrap_or(false),
                    v["label"].as_str().unwrap_or("").to_string(),
                ))
            }
            "selected" => {
                if let Some((t_s, probe_s, samples, early, label)) = pending.take() {
                    let cca = v["cca"].as_str().unwrap_or("").to_string();
                    decisions.push(DecisionRow {
                        t_s,
                        probe_s,
                        samples,
                        early,
                        label,
                        right: cca == right_cca,
                        cca,
                    });
                }
            }
            "interval" => {
                if first_ns.is_none() {
                    first_ns = v["start_ns"].as_u64();
                }
                last_ns = v["end_ns"].as_u64().unwrap_or(last_ns);
                total = v["total_bytes"].as_u64().unwrap_or(total);
            }
            _ => {}
        }
    }
    let secs = last_ns.saturating_sub(first_ns.unwrap_or(last_ns)) as f64 / 1e9;
    if secs <= 0.0 {
        return Err(Error::invalid("the transfer's log has no intervals"));
    }
    Ok(CacheRun {
        bg: bg.to_string(),
        arm: String::new(),
        repeat: 0,
        first_cca,
        decisions,
        fg_mbps: total as f64 * 8.0 / secs / 1e6,
        bg_mbps: 0.0,
        jain: 0.0,
        seconds: secs,
        load1: 0.0,
    })
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.1}–{hi:.1}")
}

/// The per-arm summary (medians and ranges) and one line per transfer.
pub fn table(a: &LabCacheArgs, rows: &[CacheRun]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "netlab {} Mbit/s, {} ms RTT, {} BDP buffer; `opsel send --ops --pattern {} --steady {} --time {}`\n",
        a.rate_mbps, a.rtt_ms, a.buffer_bdp, a.pattern, a.steady, a.seconds
    );
    let _ = writeln!(s, "| background | arm | transfers | first probe (s), median (range) | probe s per decision, median (range) | decisions | right CCA | right class | first decision right CCA | FG Mbit/s, median (range) | BG Mbit/s, median | Jain, median (range) |");
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut bgs: Vec<&str> = rows.iter().map(|r| r.bg.as_str()).collect();
    bgs.dedup();
    for bg in bgs {
        for arm in ["none", "cache"] {
            let rs: Vec<&CacheRun> = rows.iter().filter(|r| r.bg == bg && r.arm == arm).collect();
            if rs.is_empty() {
                continue;
            }
            let mut first: Vec<f64> = rs
                .iter()
                .filter_map(|r| r.decisions.first().map(|d| d.probe_s))
                .collect();
            let mut per: Vec<f64> = rs
                .iter()
                .filter(|r| !r.decisions.is_empty())
                .map(|r| {
                    r.decisions.iter().map(|d| d.probe_s).sum::<f64>() / r.decisions.len() as f64
                })
                .collect();
            let n_dec: usize = rs.iter().map(|r| r.decisions.len()).sum();
            let n_right: usize = rs
                .iter()
                .map(|r| r.decisions.iter().filter(|d| d.right).count())
                .sum();
            // The background alone is one flow: B0-C1 (CUBIC) or B1-C0 (BBR).
            let truth = if bg == "bbr" { "B1-C0" } else { "B0-C1" };
            let n_class: usize = rs
                .iter()
                .map(|r| r.decisions.iter().filter(|d| d.label == truth).count())
                .sum();
            let first_right = rs
                .iter()
                .filter(|r| r.decisions.first().is_some_and(|d| d.right))
                .count();
            let mut fg: Vec<f64> = rs.iter().map(|r| r.fg_mbps).collect();
            let mut bgm: Vec<f64> = rs.iter().map(|r| r.bg_mbps).collect();
            let mut j: Vec<f64> = rs.iter().map(|r| r.jain).collect();
            let (fs, ps, fgs, js) = (spread(&first), spread(&per), spread(&fg), {
                let lo = j.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = j.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{lo:.3}–{hi:.3}")
            });
            let _ = writeln!(
                s,
                "| {bg} | {} | {} | {:.1} ({fs}) | {:.1} ({ps}) | {n_dec} | {n_right} of {n_dec} | {n_class} of {n_dec} | {first_right} of {} | {:.1} ({fgs}) | {:.1} | {:.3} ({js}) |",
                if arm == "cache" { "--decision-cache (hit)" } else { "no cache" },
                rs.len(),
                median(&mut first),
                median(&mut per),
                rs.len(),
                median(&mut fg),
                median(&mut bgm),
                median(&mut j),
            );
        }
    }
    let _ = writeln!(s, "\n| background | arm | run | first CCA | decisions (t s: class → CCA, samples, probe s) | FG Mbit/s | BG Mbit/s | Jain | load (1 min) |");
    let _ = writeln!(s, "|---|---|---:|---|---|---:|---:|---:|---:|");
    for r in rows {
        let d: Vec<String> = r
            .decisions
            .iter()
            .map(|d| {
                format!(
                    "{:.0}: {} → {}, {}{}, {:.1}",
                    d.t_s,
                    d.label,
                    d.cca,
                    d.samples,
                    if d.early { " early" } else { "" },
                    d.probe_s
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.3} | {:.1} |",
            r.bg,
            r.arm,
            r.repeat,
            r.first_cca,
            d.join("; "),
            r.fg_mbps,
            r.bg_mbps,
            r.jain,
            r.load1
        );
    }
    s
}
