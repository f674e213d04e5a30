//! `opsel fair`: the host-local DPS fairness manager (002 §4.6) and a
//! netlab harness for live DPS flows.
//!
//! * `opsel fair serve --socket PATH` runs core's `fair::ManagerService`;
//!   flows join it with `opsel send --dps SPEC --fair PATH`.
//! * `opsel fair lab` brings up a netlab dumbbell with one or two pairs
//!   (002 Fig 5.1: one bottleneck, an extra RTT per pair), runs `opsel recv`
//!   and `opsel send --dps` per pair (with `--managed`, under one `opsel fair
//!   serve`), and leaves every flow's JSON-lines log in `--out` for
//!   `research/dps/live_dps.py`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use opsel::fair::{FairnessSpec, ManagerService};
use opsel::{Error, Result};
use opsel_netlab::topo::{receiver_ip, Lab, PipeKind, PipeSpec, TopologySpec};
use serde_json::json;

#[derive(Args)]
pub struct FairArgs {
    #[command(subcommand)]
    cmd: FairCmd,
}

#[derive(Subcommand)]
enum FairCmd {
    /// Serve the host's fairness manager on a Unix socket (002 §4.6: one
    /// manager per sender host; flows join with `opsel send --dps SPEC --fair PATH`).
    Serve(ServeArgs),
    /// Live DPS flows on a netlab dumbbell, with or without the manager (root).
    Lab(LabArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Socket file; a stale one (no manager listening) is replaced.
    #[arg(long)]
    socket: PathBuf,
    /// Fairness sampling interval in ms: Jain's index and Alg 4 run this often.
    #[arg(long, default_value_t = 1000)]
    evaluate_ms: u64,
    /// Alg 4's F_thresh (002 Table 5.3: 0.80).
    #[arg(long, default_value_t = 0.8)]
    f_thresh: f64,
    /// Alg 4's V_thresh (unspecified in 002).
    #[arg(long, default_value_t = 3)]
    v_thresh: u32,
    /// Alg 4's D_thresh (unspecified in 002).
    #[arg(long, default_value_t = 2)]
    d_thresh: u32,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(long)]
    duration: Option<f64>,
}

#[derive(Args)]
struct LabArgs {
    /// DPS spec (file or inline JSON), before time scaling.
    #[arg(long)]
    spec: String,
    /// Divide the spec's T, t and guard by this (002 note §7: 10 turns
    /// 60/30/10 s into 6/3/1 s).
    #[arg(long, default_value_t = 10.0)]
    time_scale: f64,
    /// Extra RTT per pair, ms, comma separated; the number of entries is the
    /// number of flows (one flow per pair).
    #[arg(long, default_value = "0,0")]
    extra_rtt_ms: String,
    /// Coordinate the flows with one fairness manager.
    #[arg(long)]
    managed: bool,
    /// Bottleneck rate, Mbit/s (002 §5.1: 10).
    #[arg(long, default_value_t = 10.0)]
    rate_mbps: f64,
    /// Base RTT, ms (002 §5.1: 40).
    #[arg(long, default_value_t = 40.0)]
    rtt_ms: f64,
    /// Drop-tail buffer in BDPs of the base RTT (002 does not say).
    #[arg(long, default_value_t = 1.0)]
    buffer_bdp: f64,
    /// Seconds each flow sends (after its admission when managed).
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Sampling interval of each flow, s.
    #[arg(long, default_value_t = 0.1)]
    interval: f64,
    /// The manager's fairness sampling interval, ms; flows report their mean
    /// sending rate as often.
    #[arg(long, default_value_t = 500)]
    evaluate_ms: u64,
    /// Seed: flow k's DPS seed is seed + k; also the pipe's.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Each flow stops once DPS has learnt every CCA (learning-time runs).
    #[arg(long)]
    until_learnt: bool,
    /// Output directory (logs, summary.json).
    #[arg(long)]
    out: PathBuf,
}

pub fn main(a: FairArgs) -> Result<()> {
    match a.cmd {
        FairCmd::Serve(s) => serve(s),
        FairCmd::Lab(l) => lab(l),
    }
}

fn serve(a: ServeArgs) -> Result<()> {
    let spec = FairnessSpec {
        f_thresh: a.f_thresh,
        v_thresh: a.v_thresh,
        d_thresh: a.d_thresh,
    };
    spec.validate()?;
    let svc = ManagerService::bind_path_replacing_stale(
        &a.socket,
        spec,
        Duration::from_millis(a.evaluate_ms),
    )?;
    eprintln!(
        "opsel fair serve: fairness manager on {} (Jain every {} ms, F_thresh {})",
        a.socket.display(),
        a.evaluate_ms,
        a.f_thresh
    );
    opsel_netlab::sys::install_interrupt_handler();
    let t0 = Instant::now();
    let limit = a.duration.map(Duration::from_secs_f64);
    while !opsel_netlab::sys::interrupted() && limit.is_none_or(|l| t0.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = svc.stats()?;
    drop(svc);
    let _ = std::fs::remove_file(&a.socket);
    println!(
        "{}",
        serde_json::to_string(&stats)
            .map_err(|e| Error::invalid(format!("manager stats as JSON: {e}")))?
    );
    Ok(())
}

/// Kill a child we started (by its own handle) unless it has ended.
struct Reap(Vec<Child>);
impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

fn opsel_in(ns: &str, args: &[String], log: &Path) -> Result<Child> {
    let exe = std::env::current_exe().map_err(|e| Error::io("locate the opsel binary", e))?;
    let f = std::fs::File::create(log)
        .map_err(|e| Error::io(format!("create {}", log.display()), e))?;
    let f2 = f.try_clone().map_err(|e| Error::io("dup log", e))?;
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(args)
        .stdout(Stdio::from(f))
        .stderr(Stdio::from(f2))
        .spawn()
        .map_err(|e| Error::io(format!("start opsel in {ns}"), e))
}

fn lab(a: LabArgs) -> Result<()> {
    let extra: Vec<f64> = a
        .extra_rtt_ms
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    Error::invalid(format!("--extra-rtt-ms: {s:?} is not a number of ms >= 0"))
                })
        })
        .collect::<Result<_>>()?;
    let n = extra.len();
    if !(1..=4).contains(&n) {
        return Err(Error::invalid(format!(
            "--extra-rtt-ms gives {n} pairs; give 1 to 4 (one flow per pair)"
        )));
    }
    let spec = crate::dps_send::load_spec(&a.spec)?.time_scaled(a.time_scale)?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| Error::io(format!("create {}", a.out.display()), e))?;
    let out = a
        .out
        .canonicalize()
        .map_err(|e| Error::io("resolve --out", e))?;
    let rate_bps = (a.rate_mbps * 1e6) as u64;
    let bdp = a.rate_mbps * 1e6 / 8.0 * a.rtt_ms / 1e3;
    let pipe = PipeSpec {
        kind: PipeKind::Tun,
        rate_bps: Some(rate_bps),
        delay_ns: (a.rtt_ms / 2.0 * 1e6) as u64,
        buffer_bytes: (bdp * a.buffer_bdp).max(3000.0) as u64,
        loss: 0.0,
        seed: a.seed,
    };
    let _ = opsel_netlab::topo::down(false);
    let lab = Lab::up_with_extra_rtt(
        &TopologySpec::dumbbell(n),
        &pipe,
        &extra.iter().map(|ms| (ms * 1e6) as u64).collect::<Vec<_>>(),
    )?;
    // A sparse source: reads as zeros without disk traffic; big enough for
    // the run at the full bottleneck rate.
    let src = out.join("src.bin");
    let f = std::fs::File::create(&src).map_err(|e| Error::io("create the source file", e))?;
    f.set_len((a.rate_mbps * 1e6 / 8.0 * (a.duration + 5.0) * 1.2) as u64)
        .map_err(|e| Error::io("size the source file", e))?;
    let sock = out.join("fair.sock");
    let mut kids = Reap(Vec::new());
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let wait_s = 600.0f64;
    if a.managed {
        kids.0.push(opsel_in(
            &lab.sender_ns[0],
            &[
                "fair".into(),
                "serve".into(),
                "--socket".into(),
                s(&sock),
                "--evaluate-ms".into(),
                a.evaluate_ms.to_string(),
                "--duration".into(),
                (wait_s + a.duration * n as f64 + 30.0).to_string(),
            ],
            &out.join("fair.txt"),
        )?);
        let t = Instant::now();
        while !sock.exists() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut rx = Vec::new();
    for k in 0..n {
        let addr = format!("{}:{}", receiver_ip(k), 5400 + k);
        rx.push(opsel_in(
            &lab.receiver_ns[k],
            &[
                "recv".into(),
                "--listen".into(),
                addr,
                "--out".into(),
                s(&out.join(format!("rx{k}.bin"))),
                "--timeout".into(),
                (wait_s + 60.0).to_string(),
                // Namespaces this harness created; nothing else reaches them.
                "--no-auth".into(),
            ],
            &out.join(format!("recv{k}.txt")),
        )?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut tx = Vec::new();
    for k in 0..n {
        let mut sp = spec.clone();
        sp.seed = spec.seed.wrapping_add(a.seed).wrapping_add(k as u64);
        let spec_file = out.join(format!("spec{k}.json"));
        std::fs::write(&spec_file, sp.to_json()?).map_err(|e| Error::io("write spec", e))?;
        let log = out.join(format!("send{k}.jsonl"));
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(crate::dps_send::log_path(&log));
        let mut args: Vec<String> = vec![
            "send".into(),
            "--to".into(),
            format!("{}:{}", receiver_ip(k), 5400 + k),
            "--file".into(),
            s(&src),
            "--dps".into(),
            s(&spec_file),
            "--time".into(),
            a.duration.to_string(),
            "--interval".into(),
            a.interval.to_string(),
            "--log".into(),
            format!("{},flow{k}", s(&log)),
        ];
        if a.until_learnt {
            args.push("--dps-until-learnt".into());
        }
        if a.managed {
            args.extend([
                "--fair".into(),
                s(&sock),
                "--fair-wait".into(),
                wait_s.to_string(),
                "--fair-rate-every".into(),
                (a.evaluate_ms as f64 / 1e3).to_string(),
            ]);
        }
        tx.push(opsel_in(
            &lab.sender_ns[k],
            &args,
            &out.join(format!("send{k}.txt")),
        )?);
    }
    let mut ok = true;
    for mut c in tx.into_iter().chain(rx) {
        let st = c.wait().map_err(|e| Error::io("wait for opsel", e))?;
        ok &= st.success();
    }
    drop(kids);
    drop(lab);
    for k in 0..n {
        let _ = std::fs::remove_file(out.join(format!("rx{k}.bin")));
        let _ = std::fs::remove_file(out.join(format!(".rx{k}.bin.opsel-part")));
    }
    let _ = std::fs::remove_file(&src);
    let summary = json!({
        "flows": n, "extra_rtt_ms": extra, "managed": a.managed,
        "rate_mbps": a.rate_mbps, "rtt_ms": a.rtt_ms, "buffer_bdp": a.buffer_bdp,
        "buffer_bytes": pipe.buffer_bytes, "duration_s": a.duration, "interval_s": a.interval,
        "evaluate_ms": a.evaluate_ms, "time_scale": a.time_scale, "seed": a.seed,
        "spec": serde_json::to_value(&spec).unwrap_or_default(), "ok": ok,
    });
    std::fs::write(out.join("summary.json"), summary.to_string())
        .map_err(|e| Error::io("write summary.json", e))?;
    if !ok {
        return Err(Error::invalid(format!(
            "a sender or receiver failed; see the .txt files in {}",
            out.display()
        )));
    }
    println!("{}", out.display());
    Ok(())
}
