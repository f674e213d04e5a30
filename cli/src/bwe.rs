//! `opsel bwe …`: live available-bandwidth probing (001 §2.3 closed loop).
//!
//! * `opsel bwe reflect --listen ADDR` stamps p-stream packets in the kernel and echoes
//!   the stamps (control on ADDR, data on ADDR's port + 1);
//! * `opsel bwe probe --to ADDR` sends paced p-streams, prints the BASS and ML estimate
//!   of each and the rate adapter's smoothed R_avg;
//! * `opsel bwe lab SCENARIO` runs both inside a netlab dumbbell next to the scenario's
//!   cross traffic and scores the estimates against the true available bandwidth
//!   (bottleneck rate − measured cross-traffic rate).

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};

use opsel::bwe::abest::AbestConfig;
use opsel::bwe::adapter::{RateAdapter, RateAdapterConfig};
use opsel::bwe::bass::BassConfig;
use opsel::bwe::ml::MlEstimator;
use opsel::sys::linux::bwe_driver::{data_addr, run_reflector, ProbeConfig, Prober, StreamResult};
use opsel::sys::linux::sender::{Backend, SenderConfig};
use opsel::{Error, Result};

/// Mean send gap the thesis thresholds were tuned at: 7 Gbps jumbo frames
/// (9038·8/7e9 s ≈ 10.33 µs; 001 §5.4). BASS thresholds and GAP_NS_EPSILON are
/// rescaled to the probe's own mean send gap by this reference [Ours: the thesis gives
/// no scaling rule, notes §9.1].
pub const THESIS_REFERENCE_GAP_NS: f64 = 9038.0 * 8.0 / 7.0;

#[derive(Args)]
pub struct BweArgs {
    #[command(subcommand)]
    cmd: BweCmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Thresholds {
    /// Thesis thresholds rescaled to the probe's mean send gap (default off the thesis testbed).
    Relative,
    /// Thesis thresholds in absolute ns (20/10, 5/4, 2/1 µs; ε = 100 ns), tuned for 10 Gbps.
    Thesis,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Window {
    Trailing,
    Centred,
}

#[derive(Args, Clone)]
struct ProbeOpts {
    /// Rates per p-stream (N_r).
    #[arg(long, default_value_t = 4)]
    rates: usize,
    /// Packets per rate (N_p).
    #[arg(long, default_value_t = 16)]
    per_rate: usize,
    /// Probing range R_max/R_min − 1.
    #[arg(long, default_value_t = 0.5)]
    range: f64,
    /// IP packet size in bytes (UDP payload is 28 bytes less).
    #[arg(long, default_value_t = 1500)]
    packet_bytes: u32,
    /// First average probing rate (Mbit/s); the rate adapter takes over from there.
    #[arg(long, default_value_t = 20.0)]
    start_mbps: f64,
    /// Upper bound of the average probing rate (Mbit/s).
    #[arg(long, default_value_t = 1000.0)]
    max_mbps: f64,
    /// Threshold interpretation for BASS and ABest.
    #[arg(long, value_enum, default_value_t = Thresholds::Relative)]
    thresholds: Thresholds,
    /// GAP_NS_EPSILON as a multiple of the mean send gap (relative thresholds only;
    /// default: the thesis' 100 ns at its 10.33 µs reference gap = 0.0097).
    #[arg(long)]
    epsilon_rel: Option<f64>,
    /// AVG_WINDOW (default: N_p, as the thesis adopts).
    #[arg(long)]
    avg_window: Option<usize>,
    /// Alignment of AVG_WINDOW (the thesis is silent).
    #[arg(long, value_enum, default_value_t = Window::Trailing)]
    window: Window,
    /// ML model file: a gbt-regressor exported by `opsel.train` for N_r·N_p packets
    /// (its `features` field names the feature kind, e.g. `models/bwe-mr/mr_gbt_rx120.json`).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Feed the ML estimate (instead of BASS) to the rate adapter.
    #[arg(long)]
    adapt_on_ml: bool,
    /// Pause between p-streams (ms).
    #[arg(long, default_value_t = 0.0)]
    interval_ms: f64,
    /// Use SCHED_FIFO while sending (root).
    #[arg(long)]
    fifo: bool,
    /// Sleep until this long before each departure, then spin (µs; the
    /// sender's `spin_ns`). Raise it where timer wake-ups are late, e.g. in a
    /// VM: every wake-up later than this becomes a gap error.
    #[arg(long, default_value_t = 50.0)]
    spin_us: f64,
}

#[derive(Subcommand)]
enum BweCmd {
    /// Echo kernel RX timestamps of p-streams back to the prober.
    Reflect {
        /// Control address; data arrives on its port + 1.
        #[arg(long, default_value = "0.0.0.0:7301")]
        listen: SocketAddr,
        /// Stop after this many seconds (default: run until killed).
        #[arg(long)]
        seconds: Option<f64>,
    },
    /// Send p-streams to a reflector and print estimates.
    Probe {
        /// Reflector control address.
        #[arg(long)]
        to: SocketAddr,
        /// Number of p-streams.
        #[arg(long, default_value_t = 50)]
        count: usize,
        #[command(flatten)]
        opts: ProbeOpts,
    },
    /// Run probe and reflector in a netlab dumbbell beside a scenario's cross traffic
    /// and score the estimates (needs root).
    Lab {
        /// Scenario with UDP cross traffic and one free pair for the probe.
        scenario: PathBuf,
        /// Pair used by the probe (default: the last one; no scenario flow may use it).
        #[arg(long)]
        pair: Option<usize>,
        /// Probing stops this long before the scenario ends (s).
        #[arg(long, default_value_t = 1.0)]
        tail_s: f64,
        /// Streams sent in the first seconds while the adapter converges are not scored.
        #[arg(long, default_value_t = 3.0)]
        warmup_s: f64,
        /// Override the scenario's duration (s).
        #[arg(long)]
        duration: Option<f64>,
        /// Write every stream and the summary as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Include each stream's raw send/receive gaps in the JSON.
        #[arg(long)]
        with_gaps: bool,
        #[command(flatten)]
        opts: ProbeOpts,
    },
}

fn probe_config(o: &ProbeOpts) -> Result<ProbeConfig> {
    let (bass, epsilon_rel) = match o.thresholds {
        Thresholds::Relative => {
            let mut b = BassConfig::thesis_relative(THESIS_REFERENCE_GAP_NS)?;
            b.avg_window = o.avg_window.unwrap_or(o.per_rate);
            let eps = o
                .epsilon_rel
                .unwrap_or(opsel::bwe::GAP_NS_EPSILON / THESIS_REFERENCE_GAP_NS);
            (b, Some(eps))
        }
        Thresholds::Thesis => {
            let mut b = BassConfig::thesis();
            b.avg_window = o.avg_window.unwrap_or(o.per_rate);
            (b, None)
        }
    };
    let mut bass = bass;
    bass.window_align = match o.window {
        Window::Trailing => opsel::bwe::WindowAlign::Trailing,
        Window::Centred => opsel::bwe::WindowAlign::Centred,
    };
    Ok(ProbeConfig {
        n_rates: o.rates,
        packets_per_rate: o.per_rate,
        range: o.range,
        packet_bytes: o.packet_bytes,
        bass,
        epsilon_rel,
        abest: AbestConfig::default(),
        reply_timeout: Duration::from_millis(300),
    })
}

fn make_prober(to: SocketAddr, o: &ProbeOpts) -> Result<Prober> {
    let cfg = probe_config(o)?;
    let ml = match &o.model {
        Some(p) => Some(MlEstimator::for_model(
            opsel::trees::Ensemble::load(p)?,
            o.rates * o.per_rate,
        )?),
        None => None,
    };
    let adapter = RateAdapter::new(RateAdapterConfig {
        init_bps: o.start_mbps * 1e6,
        min_bps: 100e3,
        max_bps: o.max_mbps * 1e6,
        ..RateAdapterConfig::default()
    })?;
    if !(o.spin_us.is_finite() && (0.0..=1e6).contains(&o.spin_us)) {
        return Err(Error::invalid(format!(
            "--spin-us {} must be between 0 and 1000000",
            o.spin_us
        )));
    }
    let sender = SenderConfig {
        sched_fifo: o.fifo,
        spin_ns: (o.spin_us * 1e3) as u64,
        ..SenderConfig::default()
    };
    Prober::new(to, cfg, sender, adapter, ml)
}

fn mbps(v: f64) -> String {
    format!("{:7.2}", v / 1e6)
}

fn line(r: &StreamResult, t_s: f64) -> String {
    let bass = match &r.bass {
        Some(b) => {
            let flag = if b.above_range {
                ">"
            } else if b.below_range {
                "<"
            } else {
                " "
            };
            format!("{flag}{}", mbps(b.abest_bps))
        }
        None => format!(" lost {}/{}", r.received, r.expected),
    };
    let ml = r.ml_bps.map(mbps).unwrap_or_else(|| "      -".into());
    let adapted = r.adapted_bps.map(mbps).unwrap_or_else(|| "      -".into());
    format!(
        "{t_s:7.2} s  #{:<4} R_avg {} [{}..{}]  BASS {bass}  ML {ml}  R_avg' {adapted}  send-gap err {:5.1} us",
        r.train_id,
        mbps(r.r_avg_bps),
        mbps(r.lowest_rate_bps).trim(),
        mbps(r.highest_rate_bps).trim(),
        r.send_gap_err_ns / 1e3
    )
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::TxTime { .. } => "SO_TXTIME",
        Backend::UserSpace => "user-space sleep+spin",
    }
}

fn reflect(listen: SocketAddr, seconds: Option<f64>, stop: Arc<AtomicBool>) -> Result<u64> {
    let ctrl =
        UdpSocket::bind(listen).map_err(|e| Error::io(format!("bind control {listen}"), e))?;
    let d = data_addr(listen);
    let data = UdpSocket::bind(d).map_err(|e| Error::io(format!("bind data {d}"), e))?;
    if let Some(s) = seconds {
        let st = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(s.max(0.0)));
            st.store(true, Ordering::SeqCst);
        });
    }
    run_reflector(ctrl, data, &stop, Duration::from_millis(50))
}

/// Relative errors summary in the thesis' form (median, 10–90 %, 5–95 %, within x %).
fn summary(err: &[f64]) -> serde_json::Value {
    if err.is_empty() {
        return serde_json::json!({"n": 0});
    }
    let mut s = err.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize];
    let within = |x: f64| err.iter().filter(|e| e.abs() <= x).count() as f64 / err.len() as f64;
    serde_json::json!({
        "n": err.len(), "median": q(0.5), "p10": q(0.1), "p90": q(0.9), "p5": q(0.05),
        "p95": q(0.95), "within10": within(0.10), "within20": within(0.20),
    })
}

fn fmt_summary(v: &serde_json::Value) -> String {
    let g = |k: &str| v.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN) * 100.0;
    format!(
        "n={} median={:+.1}% 10–90%=[{:+.1}%, {:+.1}%] 5–95%=[{:+.1}%, {:+.1}%] within10%={:.1}% within20%={:.1}%",
        v.get("n").and_then(|x| x.as_u64()).unwrap_or(0),
        g("median"),
        g("p10"),
        g("p90"),
        g("p5"),
        g("p95"),
        g("within10"),
        g("within20")
    )
}

pub fn main(a: BweArgs) -> Result<()> {
    match a.cmd {
        BweCmd::Reflect { listen, seconds } => {
            let stop = Arc::new(AtomicBool::new(false));
            eprintln!("reflecting on {listen} (data on {})", data_addr(listen));
            let n = reflect(listen, seconds, stop)?;
            eprintln!("{n} p-streams reported");
            Ok(())
        }
        BweCmd::Probe { to, count, opts } => {
            let mut p = make_prober(to, &opts)?;
            println!(
                "probing {to}: N_r={} N_p={} range {:.0}% {} B, sender backend {}",
                opts.rates,
                opts.per_rate,
                opts.range * 100.0,
                opts.packet_bytes,
                backend_name(p.backend())
            );
            let t0 = Instant::now();
            for _ in 0..count {
                let r = p.probe_once(opts.adapt_on_ml)?;
                println!("{}", line(&r, t0.elapsed().as_secs_f64()));
                if opts.interval_ms > 0.0 {
                    std::thread::sleep(Duration::from_secs_f64(opts.interval_ms / 1e3));
                }
            }
            println!("smoothed R_avg {} Mbit/s", mbps(p.r_avg_bps()).trim());
            Ok(())
        }
        BweCmd::Lab {
            scenario,
            pair,
            tail_s,
            warmup_s,
            duration,
            json,
            with_gaps,
            opts,
        } => lab(
            &scenario, pair, tail_s, warmup_s, duration, json, with_gaps, &opts,
        ),
    }
}

#[allow(clippy::too_many_arguments)]
fn lab(
    path: &std::path::Path,
    pair: Option<usize>,
    tail_s: f64,
    warmup_s: f64,
    duration: Option<f64>,
    json: Option<PathBuf>,
    with_gaps: bool,
    opts: &ProbeOpts,
) -> Result<()> {
    use opsel::sys::linux::signal;
    use opsel_netlab::{scenario::Scenario, sys, topo};
    signal::install_interrupt_handler();
    let mut scn = Scenario::load(path)?;
    if let Some(d) = duration {
        scn.duration_s = d;
    }
    scn.probe.enabled = false;
    scn.validate()?;
    let pair = pair.unwrap_or(scn.topology.pairs - 1);
    if pair >= scn.topology.pairs || scn.flows.iter().any(|f| f.pair == pair) {
        return Err(Error::invalid(format!(
            "probe pair {pair} must exist and carry no scenario flow (scenario {} has {} pairs); add a free pair to [topology]",
            scn.name, scn.topology.pairs
        )));
    }
    let rate_bps = scn.pipe.rate_mbps * 1e6;
    if rate_bps <= 0.0 {
        return Err(Error::invalid(
            "the scenario's pipe needs a finite rate_mbps (the bottleneck)",
        ));
    }
    sys::require_root()?;
    let _ = topo::down(false);
    let lab = topo::Lab::up(&scn.topology_spec(), &scn.pipe_spec()?)?;
    let ctrl = SocketAddr::V4(SocketAddrV4::new(topo::receiver_ip(pair), 7301));
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let refl = sys::spawn_in_netns(&lab.receiver_ns[pair], "bwe-reflect", move || {
        reflect(ctrl, None, st)
    })?;
    // Cross traffic and probe run side by side; the probe starts 0.5 s after the
    // scenario's time zero (which run_in_lab puts 0.3 s ahead) and stops tail_s early.
    let probe_s = (scn.duration_s - tail_s - 0.5).max(0.5);
    let o = opts.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let prober = sys::spawn_in_netns(&lab.sender_ns[pair], "bwe-probe", move || {
        std::thread::sleep(Duration::from_millis(800));
        let mut p = make_prober(ctrl, &o)?;
        let _ = tx.send(backend_name(p.backend()));
        let t0 = Instant::now();
        let mut out = Vec::new();
        while t0.elapsed().as_secs_f64() < probe_s && !signal::interrupted() {
            let r = p.probe_once(o.adapt_on_ml)?;
            let (gs, gr) = p.last_gaps();
            let gaps = (with_gaps && r.bass.is_some()).then(|| (gs.to_vec(), gr.to_vec()));
            out.push((t0.elapsed().as_secs_f64(), r, gaps));
            if o.interval_ms > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(o.interval_ms / 1e3));
            }
        }
        Ok(out)
    })?;
    let run = opsel_netlab::run_in_lab(&scn, &lab, &mut |_, _| {});
    let streams = prober
        .join()
        .unwrap_or_else(|_| Err(Error::invalid("prober thread panicked")));
    stop.store(true, Ordering::SeqCst);
    let _ = refl.join();
    let backend = rx.try_recv().unwrap_or("unknown");
    drop(lab);
    let run = run?;
    let streams = streams?;
    // Ground truth: bottleneck rate minus the cross traffic measured at the receivers
    // over the scenario's measurement window (001 notes §9.2 item 5, here after the
    // bottleneck like the thesis' DAG trace).
    let cross_bps: f64 = run.summary.flows.iter().map(|f| f.mean_mbps * 1e6).sum();
    let truth = rate_bps - cross_bps;
    println!(
        "{}: bottleneck {:.0} Mbit/s, cross {:.2} Mbit/s measured → available {:.2} Mbit/s; sender backend {backend}",
        scn.name,
        rate_bps / 1e6,
        cross_bps / 1e6,
        truth / 1e6
    );
    let (mut e_bass, mut e_ml, mut e_bass_cov, mut e_ml_cov, mut e_adapt) =
        (vec![], vec![], vec![], vec![], vec![]);
    let (mut lost, mut scored) = (0, 0);
    let mut rows = Vec::new();
    for (t, r, gaps) in &streams {
        println!("{}", line(r, *t));
        let covered = r.lowest_rate_bps <= truth && truth <= r.highest_rate_bps;
        rows.push(serde_json::json!({
            "t_s": t, "train_id": r.train_id, "r_avg_bps": r.r_avg_bps,
            "lowest_rate_bps": r.lowest_rate_bps, "highest_rate_bps": r.highest_rate_bps,
            "bass_bps": r.bass.map(|b| b.abest_bps), "bass_above_range": r.bass.map(|b| b.above_range),
            "bass_below_range": r.bass.map(|b| b.below_range), "ml_bps": r.ml_bps,
            "received": r.received, "expected": r.expected, "send_gap_err_ns": r.send_gap_err_ns,
            "adapted_bps": r.adapted_bps, "covered": covered,
            "gs_ns": gaps.as_ref().map(|g| &g.0), "gr_ns": gaps.as_ref().map(|g| &g.1),
        }));
        if *t < warmup_s {
            continue;
        }
        let Some(b) = r.bass else {
            lost += 1;
            continue;
        };
        scored += 1;
        let rel = |v: f64| (v - truth) / truth;
        e_bass.push(rel(b.abest_bps));
        if let Some(m) = r.ml_bps {
            e_ml.push(rel(m));
        }
        if covered {
            e_bass_cov.push(rel(b.abest_bps));
            if let Some(m) = r.ml_bps {
                e_ml_cov.push(rel(m));
            }
        }
        if let Some(a) = r.adapted_bps {
            e_adapt.push(rel(a));
        }
    }
    let sums = serde_json::json!({
        "bass": summary(&e_bass), "ml": summary(&e_ml),
        "bass_covered": summary(&e_bass_cov), "ml_covered": summary(&e_ml_cov),
        "adapted_r_avg": summary(&e_adapt),
    });
    println!("p-streams after {warmup_s} s warm-up: {scored} scored, {lost} lost/incomplete");
    for (k, name) in [
        ("bass", "BASS (multi-pass + ABest), all"),
        ("ml", "ML (GBT), all"),
        ("bass_covered", "BASS, range covers truth"),
        ("ml_covered", "ML, range covers truth"),
        ("adapted_r_avg", "adapter R_avg (γ = 3)"),
    ] {
        println!("  {name:<32}: {}", fmt_summary(&sums[k]));
    }
    if let Some(p) = json {
        let doc = serde_json::json!({
            "scenario": scn.name, "bottleneck_bps": rate_bps, "cross_bps": cross_bps,
            "avail_bw_bps": truth, "backend": backend, "warmup_s": warmup_s,
            "n_rates": opts.rates, "packets_per_rate": opts.per_rate, "range": opts.range,
            "packet_bytes": opts.packet_bytes, "epsilon_rel": opts.epsilon_rel, "avg_window": opts.avg_window, "fifo": opts.fifo,
            "window": match opts.window { Window::Trailing => "trailing", Window::Centred => "centred" },
            "thresholds": match opts.thresholds { Thresholds::Relative => "relative", Thresholds::Thesis => "thesis" },
            "model": opts.model.as_ref().map(|m| m.display().to_string()),
            "scored": scored, "lost": lost, "summary": sums, "streams": rows,
        });
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::invalid(format!("serialise results: {e}")))?;
        std::fs::write(&p, text).map_err(|e| Error::io(format!("write {}", p.display()), e))?;
    }
    Ok(())
}
