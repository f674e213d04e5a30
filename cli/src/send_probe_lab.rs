//! `opsel lab fastprob-send`: `opsel send --fastprob` and `--ab` on the
//! emulated WAN (the path and background of `opsel lab fastprob-ab`), beside
//! fixed-CCA transfers of the same file. Each evaluation runs, on fresh
//! connections and in this order: a fixed-CCA transfer with FastProb on its
//! first seconds, a transfer with the CCA A/B, and one fixed transfer per
//! candidate. Reported per transfer: the wall time from connect to the
//! receiver's confirmation, FastProb's prediction and probe time, and the
//! mean acknowledged rate after the probe (what the prediction predicts).

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use opsel::probe::CcaName;
use opsel::{Error, Result};
use serde_json::{json, Value};

use crate::transfer::send::{ProbeOpts, SendOpts, Strategy};

#[derive(Args)]
pub struct SendLabArgs {
    /// FastProb model (file or shipped name; default fastprob-netlab).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Congestion controls of the A/B, in order; each is also run fixed.
    #[arg(long, value_delimiter = ',', default_value = "cubic,bbr")]
    candidates: Vec<String>,
    /// The fixed CCA of the `--fastprob` transfer.
    #[arg(long, default_value = "cubic")]
    cca: String,
    /// Bottleneck rate (Mbit/s).
    #[arg(long, default_value_t = 50.0)]
    rate_mbps: f64,
    /// Round-trip time of the path (ms).
    #[arg(long, default_value_t = 30.0)]
    rtt_ms: f64,
    /// Drop-tail buffer in BDPs.
    #[arg(long, default_value_t = 1.0)]
    buffer_bdp: f64,
    /// Background flows: none, cubic, bbr, cubic+bbr, onoff-cubic, onoff-bbr.
    #[arg(long, default_value = "cubic")]
    background: String,
    /// The background class the A/B's fairness rule is given (unknown, cubic, bbr).
    #[arg(long, default_value = "unknown")]
    class: String,
    /// Evaluations (each: FastProb, A/B, then every candidate fixed).
    #[arg(long, default_value_t = 2)]
    evals: usize,
    /// File size (MB, 10^6 bytes).
    #[arg(long, default_value_t = 60.0)]
    size_mb: f64,
    /// Rotate the order: evaluation e starts with method e (mod the number of
    /// methods), so no method is always first after the background had the
    /// path to itself, and run order is separated from the method's effect.
    #[arg(long)]
    rotate: bool,
    /// Leave out the A/B (FastProb and the fixed controls only).
    #[arg(long)]
    no_ab: bool,
    /// Write every transfer as JSON here as well.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Deterministic incompressible content (splitmix64).
fn write_file(p: &std::path::Path, n: u64) -> Result<()> {
    use std::io::Write as _;
    let f =
        std::fs::File::create(p).map_err(|e| Error::io(format!("create {}", p.display()), e))?;
    let mut w = std::io::BufWriter::new(f);
    let mut s = 7u64;
    let mut left = n;
    while left > 0 {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let b = (z ^ (z >> 31)).to_le_bytes();
        let k = left.min(8) as usize;
        w.write_all(&b[..k])
            .map_err(|e| Error::io(format!("write {}", p.display()), e))?;
        left -= k as u64;
    }
    w.flush()
        .map_err(|e| Error::io(format!("write {}", p.display()), e))
}

/// Removes the work directory on drop.
struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn main(a: SendLabArgs) -> Result<()> {
    opsel_netlab::sys::require_root()?;
    let cca = CcaName::new(&a.cca)?;
    let fixed: Vec<CcaName> = a
        .candidates
        .iter()
        .map(|c| CcaName::new(c))
        .collect::<Result<_>>()?;
    let ab = opsel::fastprob::AbSpec {
        candidates: a.candidates.clone(),
        background: a.class.parse()?,
        settle_samples: 1,
        method: opsel::fastprob::AbMethod::Fastprob,
        budget: Default::default(),
    };
    ab.validate()?;
    // Load the model once up front so a bad one fails before the lab.
    crate::probe::fastprob_model(a.model.as_deref())?;
    if !(a.size_mb.is_finite() && a.size_mb > 0.0 && a.size_mb <= 10_000.0) {
        return Err(Error::invalid(format!(
            "--size-mb {}: give 0 < MB <= 10000",
            a.size_mb
        )));
    }
    let dir = Dir(std::env::temp_dir().join(format!("opsel-fastprob-send-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)
        .map_err(|e| Error::io(format!("create {}", dir.0.display()), e))?;
    let src = dir.0.join("src.bin");
    write_file(&src, (a.size_mb * 1e6) as u64)?;

    let mut methods: Vec<(String, Strategy, Option<ProbeOpts>)> = vec![(
        format!("fastprob ({cca})"),
        Strategy::Fixed(cca),
        Some(ProbeOpts {
            model: a.model.clone(),
            ab: None,
            budget: Default::default(),
        }),
    )];
    if !a.no_ab {
        methods.push((
            format!("ab ({})", a.candidates.join(",")),
            Strategy::Fixed(cca),
            Some(ProbeOpts {
                model: a.model.clone(),
                ab: Some(ab),
                budget: Default::default(),
            }),
        ));
    }
    for c in fixed {
        methods.push((format!("fixed {c}"), Strategy::Fixed(c), None));
    }
    let per = a.evals * methods.len();
    let total_ns = (per as u64 + 2) * 180_000_000_000;
    let bl =
        crate::tput_logs::bg_lab(a.rate_mbps, a.rtt_ms, a.buffer_bdp, &a.background, total_ns)?;
    // Let the background reach its steady state.
    std::thread::sleep(Duration::from_secs(3));
    let mut rows = Vec::new();
    for e in 0..a.evals {
        let first = if a.rotate { e % methods.len() } else { 0 };
        for j in 0..methods.len() {
            let i = (first + j) % methods.len();
            let (name, strategy, probe) = &methods[i];
            if opsel::sys::linux::signal::interrupt_flag()
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                return Err(Error::invalid("interrupted"));
            }
            let port = 5400 + (e * methods.len() + i) as u16;
            let row = one(
                &bl,
                port,
                &src,
                &dir.0,
                name,
                strategy.clone(),
                probe.clone(),
            )?;
            let mut row = row;
            if let Some(o) = row.as_object_mut() {
                o.insert("eval".into(), json!(e));
                o.insert("position".into(), json!(j));
            }
            eprintln!("eval {}/{}: {row}", e + 1, a.evals);
            rows.push(row);
        }
    }
    drop(bl);
    summary(
        &methods.iter().map(|m| m.0.clone()).collect::<Vec<_>>(),
        &rows,
    );
    if let Some(p) = &a.json {
        let v = json!({
            "conditions": {"rate_mbps": a.rate_mbps, "rtt_ms": a.rtt_ms, "buffer_bdp": a.buffer_bdp,
                           "background": a.background, "class": a.class, "size_mb": a.size_mb,
                           "candidates": a.candidates, "cca": a.cca, "rotate": a.rotate},
            "transfers": rows,
        });
        std::fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default())
            .map_err(|e| Error::io(format!("writing {}", p.display()), e))?;
    }
    Ok(())
}

/// One transfer of `src` from pair 0's sender to a receiver in pair 0's
/// receiver namespace.
fn one(
    bl: &crate::tput_logs::BgLab,
    port: u16,
    src: &std::path::Path,
    dir: &std::path::Path,
    name: &str,
    strategy: Strategy,
    probe: Option<ProbeOpts>,
) -> Result<Value> {
    use opsel_transfer::recv::{Limits, Receiver, RecvOpts, Target};
    let addr = SocketAddr::V4(SocketAddrV4::new(opsel_netlab::topo::receiver_ip(0), port));
    let dst = dir.join("dst.bin");
    let _ = std::fs::remove_file(&dst);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let dst2 = dst.clone();
    let rx = opsel_netlab::sys::spawn_in_netns(&bl.lab.receiver_ns[0], "send-lab-rx", move || {
        let r = Receiver::bind(RecvOpts {
            listen: addr,
            target: Target::File {
                path: dst2,
                append: false,
            },
            force: true,
            keep_serving: false,
            accept_timeout: Some(Duration::from_secs(60)),
            limits: Limits::default(),
            key: None,
        });
        let r = match r {
            Ok(r) => {
                let _ = ready_tx.send(Ok(()));
                r
            }
            Err(e) => {
                let _ = ready_tx.send(Err(Error::invalid(e.to_string())));
                return Err(e);
            }
        };
        let rep = r.serve(Arc::new(|_| {}), Arc::new(|_| {}))?;
        Ok(rep.received)
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(Error::invalid("the receiver did not start within 10 s")),
    }
    let opts = SendOpts {
        to: addr,
        file: src.to_path_buf(),
        strategy,
        time_s: None,
        offset: None,
        resume: false,
        name: None,
        key: None,
        log: None,
        interval_s: 1.0,
        decision_cache: None,
        streams: 1,
        hash: None,
        probe,
    };
    let sent = opsel_netlab::sys::in_netns(&bl.lab.sender_ns[0], move || {
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        let (r, p) = crate::transfer::send::run(&opts, &stop, &mut |_| {}, &mut |_| {})?;
        Ok((t.elapsed().as_secs_f64(), r, p))
    });
    let received = rx
        .join()
        .unwrap_or_else(|_| Err(Error::invalid("the receiver thread failed")));
    let (wall_s, r, p) = sent?;
    received?;
    Ok(json!({
        "method": name,
        "wall_s": wall_s,
        "bytes": r.driver.bytes_sent,
        "mean_mbps": r.driver.bytes_sent as f64 * 8.0 / wall_s / 1e6,
        "file_identical": r.file_identical,
        "fastprob": p,
    }))
}

fn summary(methods: &[String], rows: &[Value]) {
    println!("| method | transfers | mean transfer s (connect to confirmation) | mean Mbit/s | FastProb probe s | predicted Mbit/s | measured after the probe Mbit/s | mean abs. error % | chosen |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for m in methods {
        let rs: Vec<&Value> = rows.iter().filter(|r| r["method"] == m.as_str()).collect();
        let n = rs.len().max(1) as f64;
        let mean = |f: &dyn Fn(&Value) -> Option<f64>| {
            let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let fmt = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.2}"));
        let wall = rs
            .iter()
            .map(|r| r["wall_s"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / n;
        let mbps = rs
            .iter()
            .map(|r| r["mean_mbps"].as_f64().unwrap_or(0.0))
            .sum::<f64>()
            / n;
        let probe = mean(&|r| r["fastprob"]["stop"]["probe_ns"].as_f64().map(|x| x / 1e9));
        let pred = mean(&|r| {
            r["fastprob"]["stop"]["predicted_bps"]
                .as_f64()
                .map(|x| x / 1e6)
        });
        let after = mean(&|r| r["fastprob"]["after_probe_bps"].as_f64().map(|x| x / 1e6));
        let err = mean(&|r| {
            let p = r["fastprob"]["stop"]["predicted_bps"].as_f64()?;
            let a = r["fastprob"]["after_probe_bps"].as_f64()?;
            Some((p - a).abs() / a * 100.0)
        });
        let chosen: Vec<String> = rs
            .iter()
            .filter_map(|r| r["fastprob"]["ab"]["chosen"].as_str().map(str::to_string))
            .collect();
        println!(
            "| {m} | {} | {wall:.2} | {mbps:.2} | {} | {} | {} | {} | {} |",
            rs.len(),
            fmt(probe),
            fmt(pred),
            fmt(after),
            fmt(err),
            if chosen.is_empty() {
                "–".to_string()
            } else {
                chosen.join(", ")
            }
        );
    }
}
