//! `opsel demo`: OPS against fixed CCAs on the emulated WAN (000 Table 6.3,
//! §7.6 ALT-X), printed as a table of background / foreground Mbit/s and
//! Jain's index.
//!
//! The lab is netlab's dumbbell (100 Mbit/s, RTT 65 ms, buffer 0.5 × BDP by
//! default: docs/results/netlab-table63-halfbdp.md shows the mismatched
//! CUBIC/BBR pairs are unfair only at that buffer on this machine). Pair 0
//! carries the background (a static CUBIC or BBR flow, or ALT-X toggling its
//! CCA every X s) from t = 0; pair 1 carries the foreground from t = 10 s
//! (000 §2.2: the FG starts after the BG). The foreground runs in process in
//! the sender namespace: [`OpsDriver`] (or [`send_fixed`] for the fixed-CCA
//! baselines) on one TCP connection to a netlab byte-counting receiver, with
//! the RTT probe as UDP echoes to a responder in the receiver namespace.
//! Throughput is what the receivers count, averaged over
//! [measure_from_s, duration].
//!
//! `--report DIR` also records every run (the receivers' throughput over
//! time, the foreground's events in the core's schema) and draws them as a
//! self-contained HTML page (`crate::report`); `--replay FILE` redraws a
//! recorded page without the lab.

use std::fmt::Write as _;
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use opsel::fair;
use opsel::ops::Event;
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::{
    send_fixed, DriverConfig, DriverEvent, DriverReport, OpsDriver, RttSource,
};
use opsel::sys::linux::rtt::UdpEchoResponder;
use opsel::sys::linux::tcp_rtt::TcpInfoRttProbe;
use opsel::{Error, Result};
use opsel_netlab::run::mean_mbps;
use opsel_netlab::scenario::bdp_bytes;
use opsel_netlab::sys::{in_netns, now_ns, sleep_until_ns, spawn_in_netns};
use opsel_netlab::topo::{self, receiver_ip, Lab, PipeSpec, TopologySpec};
use opsel_netlab::traffic::{self, Bins, FlowPlan, Traffic};
use serde_json::json;

use super::send::{OpsOpts, ACTIVE_MODEL, PASSIVE_MODEL};
use crate::models;
use crate::report::{self, DemoRecord, RunRecord, Setup};
use opsel::sys::linux::ops_driver::{run_auto, AutoChoice, AutoModel, Source};
use opsel_transfer::ops::AutoPlan;

/// Throughput bins of the report's charts (the receivers count per 100 ms).
const REPORT_BIN_S: f64 = 1.0;

#[derive(Args)]
pub struct DemoArgs {
    /// The short variant: OPS only, against a CUBIC and a BBR background, 50 s each.
    #[arg(long)]
    quick: bool,
    /// Model for OPS: a path or a shipped name. Default with `--pattern
    /// passive`: `auto`: the 5-Hz model (passive-200ms-two-stage, decides after 10 s)
    /// while every echo burst of its first two windows (20 s), the first
    /// (the base RTT) included, has a mean RTT of at most 170 ms and none is
    /// late (see `opsel send --help`), else the 1 Hz model (passive, 40 s) for the rest of the run; a
    /// gate, early exit or several windows per decision keep the 1 Hz model.
    /// Default with a pattern: the shipped active model.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Backgrounds: cubic, bbr, altX (ALT-X: toggle CUBIC/BBR every X s).
    #[arg(long, value_delimiter = ',')]
    bg: Option<Vec<String>>,
    /// Foreground strategies: cubic, bbr, ops, ops-adaptive, ops-early, ops-adaptive-early.
    #[arg(long, value_delimiter = ',')]
    fg: Option<Vec<String>>,
    /// Length of each run (s).
    #[arg(long)]
    seconds: Option<f64>,
    /// Throughput is averaged from this time (s) to the end.
    #[arg(long, default_value_t = 20.0)]
    measure_from: f64,
    /// Foreground start (s).
    #[arg(long, default_value_t = 10.0)]
    fg_start: f64,
    /// Runs per cell. Run r (0-based) uses seed + r (see --seed) and, with
    /// --phase-spread, a shifted foreground timeline.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Spread the repeats over this many seconds of the background's clock
    /// (e.g. one ALT-X cycle, 2X): run r of N shifts the FG start, the
    /// measurement window and the run's end by r × SPREAD / N s, so every run
    /// measures the same FG time span at another phase of the ALT clock.
    /// 0 (default) = every run at --fg-start.
    #[arg(long, default_value_t = 0.0)]
    phase_spread: f64,
    /// Active probing pattern (000 §3.2), or `passive` (000 Table 6.2: the
    /// FG keeps sending with its current CCA while the 20 s window fills).
    #[arg(long, default_value = "S5-C5-S5-B5")]
    pattern: String,
    /// OPS steady time Y (s); default 60 with passive probing (OPS-60, 000
    /// Table 6.2), 100 with active probing (000 §7.6).
    #[arg(long)]
    steady: Option<f64>,
    /// Early exit (ops-early*): minimum 1-NN margin that ends a probe (default 0.8).
    #[arg(long)]
    early_confidence: Option<f64>,
    /// Randomise each steady time by up to ±this fraction (0..=0.5; 0 = fixed Y as in 000).
    #[arg(long, default_value_t = 0.0)]
    jitter: f64,
    #[arg(long, default_value_t = 100.0)]
    rate_mbps: f64,
    #[arg(long, default_value_t = 65.0)]
    rtt_ms: f64,
    /// Drop-tail buffer in BDPs.
    #[arg(long, default_value_t = 0.5)]
    buffer_bdp: f64,
    /// Also write the table (markdown) here.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Append one JSON line per run here (decisions, switches, latencies).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write DIR/report.html (one self-contained page: the 000 Table 6.3
    /// summary, throughput over time with probe phases and decisions, RTT
    /// windows with their classes) and DIR/record.json (the data it is drawn from).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// With --report: draw the page from this record.json instead of running the lab.
    #[arg(long, value_name = "FILE", requires = "report")]
    replay: Option<PathBuf>,
    /// Seed of the steady-time jitter and of the pipe; run r of --runs uses
    /// seed + r for the jitter (the pipe is set up once, with this seed).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not run the pattern's last segment before each probe (see DriverConfig::lead_in).
    #[arg(long)]
    no_lead_in: bool,
    /// Windows (pattern cycles) per OPS decision (min-sum when > 1, see
    /// `opsel send --cycles`). Without --seconds, the run and --measure-from
    /// grow by (N − 1) windows so the first decision still falls early.
    #[arg(long, default_value_t = 1)]
    cycles: usize,
    /// Margin-gated probing for every OPS foreground (see `opsel send
    /// --extend-below`; needs --cycles N >= 2). The run is not lengthened:
    /// confident probes decide after one window, as without --cycles.
    #[arg(long)]
    extend_below: Option<f64>,
    /// Probe gate for every OPS foreground (see `opsel send --gate`): FILE,
    /// or `--gate` alone / `--gate default` for the gate.json beside the
    /// chosen model (models/passive/gate.json: passive probing).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "default")]
    gate: Option<String>,
    /// With --gate: override the gate file's threshold (a probability in [0, 1]).
    #[arg(long, requires = "gate")]
    gate_threshold: Option<f64>,
    /// CCA of the OPS foreground before its first decision (see `opsel send
    /// --initial-cca`).
    #[arg(long, default_value = "cubic")]
    initial_cca: String,
    /// RTT source of every OPS foreground: `udp` (echoes to a responder in the
    /// receiver's namespace, 000 §3.2) or `tcp-info` (the foreground's own data
    /// socket's TCP_INFO srtt: no probe packets, nothing needed at the peer;
    /// passive probing only, as the socket must keep sending).
    #[arg(long, default_value = "udp")]
    rtt: String,
}

#[derive(Debug, Clone)]
enum Bg {
    Static(String),
    Alt(f64),
}

impl Bg {
    fn parse(s: &str) -> Result<Bg> {
        let l = s.trim().to_ascii_lowercase();
        if let Some(x) = l.strip_prefix("alt") {
            let x: f64 = x.parse().map_err(|_| {
                Error::invalid(format!(
                    "background {s:?}: write altX with X in seconds, e.g. alt30"
                ))
            })?;
            if !(x.is_finite() && x > 0.0) {
                return Err(Error::invalid(format!("background {s:?}: X must be > 0")));
            }
            return Ok(Bg::Alt(x));
        }
        CcaName::new(&l)?;
        Ok(Bg::Static(l))
    }
    fn name(&self) -> String {
        match self {
            Bg::Static(c) => c.clone(),
            Bg::Alt(x) => format!("ALT-{x}"),
        }
    }
}

#[derive(Debug, Clone)]
enum Fg {
    Fixed(CcaName),
    Ops { adaptive: bool, early: bool },
}

impl Fg {
    fn parse(s: &str) -> Result<Fg> {
        let l = s.trim().to_ascii_lowercase();
        Ok(match l.as_str() {
            "ops" => Fg::Ops {
                adaptive: false,
                early: false,
            },
            "ops-adaptive" => Fg::Ops {
                adaptive: true,
                early: false,
            },
            "ops-early" => Fg::Ops {
                adaptive: false,
                early: true,
            },
            "ops-adaptive-early" => Fg::Ops {
                adaptive: true,
                early: true,
            },
            other => Fg::Fixed(CcaName::new(other).map_err(|_| {
                Error::invalid(format!(
                    "foreground {s:?}: use cubic, bbr, ops, ops-adaptive, ops-early or ops-adaptive-early"
                ))
            })?),
        })
    }
    fn name(&self) -> String {
        match self {
            Fg::Fixed(c) => format!("fixed {c}"),
            Fg::Ops { adaptive, early } => format!(
                "OPS{}{}",
                if *adaptive { " adaptive-Y" } else { "" },
                if *early { " early-exit" } else { "" }
            ),
        }
    }
}

/// Timeline and seed of one repeat (run r of N, 0-based) of a cell.
///
/// The repeats of `--runs N` must sample the phase between OPS's probe
/// windows and the background's ALT clock (000 §7.6 ran ALT-X with no
/// deliberate alignment): with one fixed FG start every repeat decides at
/// the same instants of the ALT cycle. Run r shifts the whole FG timeline
/// (start, measurement window, end) by r × spread / N s and takes seed + r
/// for the steady-time jitter; run 0 is the unshifted run with the given
/// seed, so `--runs 1` behaves as before.
#[derive(Debug, Clone, Copy, PartialEq)]
struct RunPlan {
    seed: u64,
    offset_s: f64,
    fg_start_s: f64,
    measure_from_s: f64,
    seconds: f64,
}

fn run_plan(
    run: usize,
    runs: usize,
    seed: u64,
    phase_spread_s: f64,
    fg_start_s: f64,
    measure_from_s: f64,
    seconds: f64,
) -> RunPlan {
    let offset_s = if runs > 1 {
        phase_spread_s * run as f64 / runs as f64
    } else {
        0.0
    };
    RunPlan {
        seed: seed.wrapping_add(run as u64),
        offset_s,
        fg_start_s: fg_start_s + offset_s,
        measure_from_s: measure_from_s + offset_s,
        seconds: seconds + offset_s,
    }
}

/// One run of one cell.
#[derive(Debug, Clone)]
struct Cell {
    bg_mbps: f64,
    fg_mbps: f64,
    jain: f64,
    report: Option<DriverReport>,
    decisions: Vec<(f64, String, f64, String, usize)>,
    /// Several windows per decision: (t s, window index, its nearest class,
    /// its nearest distance, running min-sum leader, running margin); class
    /// indices are into the model's classes. Live margins calibrate the gate.
    windows: Vec<(f64, usize, usize, f64, usize, f64)>,
    latencies_us: Vec<f64>,
    /// Receiver bins (bytes per 100 ms from the run's t0), for the report.
    bg_bins: Vec<u64>,
    fg_bins: Vec<u64>,
    /// The foreground's events in the core's schema with `t_s` (report).
    events: Vec<serde_json::Value>,
    /// With `--model auto`: the model the foreground ran and why.
    auto: Option<AutoChoice>,
}

const BG_PORT: u16 = 5001;
const FG_PORT: u16 = 5002;
const ECHO_PORT: u16 = 7008;

#[allow(clippy::too_many_arguments)]
fn run_cell(
    lab: &Lab,
    bg: &Bg,
    fg: &Fg,
    ops: &OpsOpts,
    seconds: f64,
    fg_start: f64,
    measure_from: f64,
    rtt_tcp_info: bool,
    classes: &[String],
    progress: &mut dyn FnMut(f64),
) -> Result<Cell> {
    let dur_ns = (seconds * 1e9) as u64;
    let fg_start_ns = (fg_start * 1e9) as u64;
    let stop = Arc::new(AtomicBool::new(false));
    let events: traffic::Events = Arc::new(Mutex::new(Vec::new()));
    let bg_plan = FlowPlan {
        name: "bg".into(),
        traffic: match bg {
            Bg::Static(c) => Traffic::Tcp {
                cca: c.clone(),
                on_off_s: None,
            },
            Bg::Alt(x) => Traffic::Alt {
                ccas: ["cubic".into(), "bbr".into()],
                period_s: *x,
            },
        },
        src_ns: lab.sender_ns[0].clone(),
        dst_ns: lab.receiver_ns[0].clone(),
        dst: SocketAddrV4::new(receiver_ip(0), BG_PORT),
        start_ns: 0,
        stop_ns: dur_ns,
    };
    // The FG receiver only counts bytes; its plan's traffic is not used to send.
    let fg_plan = FlowPlan {
        name: "fg".into(),
        traffic: Traffic::Tcp {
            cca: "cubic".into(),
            on_off_s: None,
        },
        src_ns: lab.sender_ns[1].clone(),
        dst_ns: lab.receiver_ns[1].clone(),
        dst: SocketAddrV4::new(receiver_ip(1), FG_PORT),
        start_ns: fg_start_ns,
        stop_ns: dur_ns,
    };
    let t0 = now_ns() + 300_000_000;
    let bg_bins = Arc::new(Bins::new(t0, dur_ns));
    let fg_bins = Arc::new(Bins::new(t0, dur_ns));

    struct Stopper(Arc<AtomicBool>);
    impl Drop for Stopper {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stopper = Stopper(stop.clone());
    let echo_addr = SocketAddr::from((receiver_ip(1), ECHO_PORT));
    let echo = in_netns(&lab.receiver_ns[1], move || {
        let s = std::net::UdpSocket::bind(echo_addr)
            .map_err(|e| Error::io(format!("bind echo {echo_addr}"), e))?;
        UdpEchoResponder::spawn(s, Duration::ZERO)
    })?;
    let rx_bg = traffic::spawn_receiver(&bg_plan, bg_bins.clone(), stop.clone())?;
    let rx_fg = traffic::spawn_receiver(&fg_plan, fg_bins.clone(), stop.clone())?;
    let tx_bg = traffic::spawn_sender(bg_plan, t0, stop.clone(), events.clone())?;

    let fg2 = fg.clone();
    let ops2 = ops.clone();
    let stop2 = stop.clone();
    let dst = SocketAddr::from((receiver_ip(1), FG_PORT));
    let tx_fg = spawn_in_netns(&lab.sender_ns[1], "tx-fg-ops", move || {
        sleep_until_ns(t0 + fg_start_ns);
        let sock = TcpStream::connect_timeout(&dst, Duration::from_secs(3))
            .map_err(|e| Error::io(format!("connect the foreground to {dst}"), e))?;
        let _ = sock.set_nodelay(true);
        let cfg = DriverConfig {
            time_limit_ns: Some(dur_ns.saturating_sub(fg_start_ns)),
            lead_in: ops2.lead_in,
            ..DriverConfig::default()
        };
        let mut evs: Vec<DriverEvent> = Vec::new();
        let mut choice: Option<AutoChoice> = None;
        let mut zeros = std::io::repeat(0x5a);
        let rep = match &fg2 {
            Fg::Fixed(c) => send_fixed(&sock, &mut zeros, *c, &cfg, &stop2, &mut |e| {
                evs.push(e.clone())
            })?,
            Fg::Ops { adaptive, early } => {
                let mut o = OpsOpts {
                    adaptive: *adaptive,
                    early_exit: *early,
                    ..ops2
                };
                if *early && matches!(o.auto, Some(AutoPlan::Try5Hz(_))) {
                    o.auto = Some(opsel_transfer::ops::auto_plan(false, true, false));
                }
                let ctl = super::send::controller(&o)?;
                let rtt = || -> Result<RttSource> {
                    Ok(if rtt_tcp_info {
                        RttSource::Custom(Box::new(TcpInfoRttProbe::new(&sock)?))
                    } else {
                        RttSource::UdpEcho(echo_addr)
                    })
                };
                match &o.auto {
                    Some(AutoPlan::Try5Hz(m)) => {
                        let fast = super::send::controller(&OpsOpts {
                            model: m.clone(),
                            ..o.clone()
                        })?;
                        let (rep, c) = run_auto(
                            OpsDriver::new(fast, rtt()?, cfg)?,
                            OpsDriver::new(ctl, rtt()?, cfg)?,
                            &sock,
                            &mut Source::Reader(&mut zeros),
                            &stop2,
                            &mut |e| evs.push(e.clone()),
                            &mut |_| {},
                        )?;
                        choice = Some(c);
                        rep
                    }
                    plan => {
                        if let Some(AutoPlan::Only1Hz(why)) = plan {
                            choice = Some(AutoChoice {
                                model: AutoModel::Slow,
                                reason: format!("1 Hz model: {why}"),
                                switched_after_ns: None,
                                base_rtt_ms: None,
                            });
                        }
                        let mut drv = OpsDriver::new(ctl, rtt()?, cfg)?;
                        drv.run(&sock, &mut zeros, &stop2, &mut |e| evs.push(e.clone()))?
                    }
                }
            }
        };
        Ok((rep, evs, choice))
    })?;

    let mut k = 1u64;
    while k * 100_000_000 <= dur_ns {
        sleep_until_ns(t0 + k * 100_000_000);
        progress(k as f64 / 10.0);
        if opsel_netlab::sys::interrupted() {
            stop.store(true, Ordering::SeqCst);
            return Err(Error::invalid("interrupted (Ctrl-C); the lab is torn down"));
        }
        k += 1;
    }
    // Both senders end on their own at the run's end; the receivers are
    // stopped only after them, so no sender writes into a closed connection.
    let fg_res = tx_fg
        .join()
        .map_err(|_| Error::invalid("foreground thread panicked"))?;
    let bg_res = tx_bg
        .join()
        .map_err(|_| Error::invalid("background thread panicked"))?;
    stop.store(true, Ordering::SeqCst);
    let _ = rx_bg.join();
    let _ = rx_fg.join();
    let _ = echo.stop();
    if let Err(e) = bg_res {
        // The background's bytes were counted by its receiver; a late send
        // error does not change the measurement window.
        eprintln!("(background sender: {e})");
    }
    let (report, evs, auto) = fg_res?;
    let (bg_bins, fg_bins) = (bg_bins.values(), fg_bins.values());
    let bg_mbps = mean_mbps(&bg_bins, measure_from, seconds);
    let fg_mbps = mean_mbps(&fg_bins, measure_from, seconds);
    let mut decisions = Vec::new();
    let mut windows = Vec::new();
    let mut latencies_us = Vec::new();
    let mut pending: Option<(String, f64, usize)> = None;
    for e in &evs {
        match e {
            DriverEvent::Ops(Event::Classified {
                classified,
                samples,
                ..
            }) => pending = Some((classified.mix.to_string(), classified.confidence, *samples)),
            DriverEvent::Ops(Event::Selected { cca, at_ns, .. }) => {
                if let Some((mix, conf, n)) = pending.take() {
                    let t = at_ns.saturating_sub(t0) as f64 / 1e9;
                    decisions.push((t, mix, conf, cca.to_string(), n));
                }
            }
            DriverEvent::Ops(Event::CycleClassified {
                index,
                class_index,
                distance,
                leader,
                margin,
                at_ns,
                ..
            }) => windows.push((
                at_ns.saturating_sub(t0) as f64 / 1e9,
                *index,
                *class_index,
                *distance,
                *leader,
                *margin,
            )),
            DriverEvent::Decision { latency_ns, .. } => latencies_us.push(*latency_ns as f64 / 1e3),
            _ => {}
        }
    }
    Ok(Cell {
        bg_mbps,
        fg_mbps,
        jain: fair::jain(&[bg_mbps, fg_mbps]).unwrap_or(1.0),
        report: matches!(fg, Fg::Ops { .. }).then_some(report),
        decisions,
        windows,
        latencies_us,
        bg_bins,
        fg_bins,
        events: evs
            .iter()
            .filter_map(|e| report::record::event_value(e, classes, t0))
            .collect(),
        auto,
    })
}

pub fn main(a: DemoArgs) -> Result<()> {
    if let (Some(file), Some(dir)) = (&a.replay, &a.report) {
        let page = report::write(dir, &report::read(file)?)?;
        eprintln!("report: {}", page.display());
        return Ok(());
    }
    opsel_netlab::sys::install_interrupt_handler();
    opsel_netlab::sys::require_root()?;
    let bgs: Vec<Bg> =
        a.bg.clone()
            .unwrap_or_else(|| vec!["cubic".into(), "bbr".into()])
            .iter()
            .map(|s| Bg::parse(s))
            .collect::<Result<_>>()?;
    let fgs: Vec<Fg> =
        a.fg.clone()
            .unwrap_or_else(|| {
                if a.quick {
                    vec!["ops".into()]
                } else {
                    vec!["cubic".into(), "bbr".into(), "ops".into()]
                }
            })
            .iter()
            .map(|s| Fg::parse(s))
            .collect::<Result<_>>()?;
    let seconds = a.seconds.unwrap_or(if a.quick { 50.0 } else { 75.0 });
    if !(a.phase_spread.is_finite() && (0.0..=3600.0).contains(&a.phase_spread)) {
        return Err(Error::invalid(format!(
            "--phase-spread {}: give seconds in 0..=3600 (e.g. 60 = one ALT-30 cycle)",
            a.phase_spread
        )));
    }
    if !(seconds > a.measure_from && a.measure_from >= 0.0 && a.fg_start < seconds) {
        return Err(Error::invalid(format!(
            "--seconds {seconds} must exceed --measure-from {} and --fg-start {}",
            a.measure_from, a.fg_start
        )));
    }
    let passive = a.pattern.eq_ignore_ascii_case("passive");
    let rtt_tcp_info = match a.rtt.as_str() {
        "udp" => false,
        // TCP_INFO readings need ACKs: an active pattern's silences would be lost samples.
        "tcp-info" if passive => true,
        "tcp-info" => {
            return Err(Error::invalid(
                "--rtt tcp-info needs --pattern passive: the data socket's RTT is only fresh while it sends, and an active pattern has silences",
            ))
        }
        other => {
            return Err(Error::invalid(format!(
                "--rtt {other:?}: use udp (echoes to a responder) or tcp-info (the foreground socket's TCP_INFO)"
            )))
        }
    };
    let pattern = if passive {
        None
    } else {
        Some(Pattern::parse(&a.pattern)?)
    };
    // --model PATH or NAME, else the shipped default, found outside a
    // checkout too (crate::models: $OPSEL_MODELS, the install prefix, the
    // built-in copy).
    let auto = passive
        && a.model
            .as_deref()
            .is_none_or(|m| m == Path::new(models::AUTO));
    let model_src = models::locate(
        a.model.as_deref().filter(|_| !auto),
        if passive {
            models::PASSIVE
        } else {
            models::ACTIVE
        },
    )?;
    let model = models::as_path(&model_src)?;
    // Tables and records name the model as given (or by its shipped name),
    // not by where this machine keeps it: they end up in docs/results.
    let model_label = match &a.model {
        _ if auto => models::AUTO.to_string(),
        Some(p) => p.display().to_string(),
        None => (if passive {
            models::PASSIVE
        } else {
            models::ACTIVE
        })
        .to_string(),
    };
    let steady = a.steady.unwrap_or(if passive { 60.0 } else { 100.0 });
    let ops = OpsOpts {
        pattern: pattern.clone(),
        steady_s: Some(steady),
        model: model.clone(),
        adaptive: false,
        early_exit: false,
        rtt: super::send::RttVia::UdpEcho,
        seed: a.seed,
        lead_in: !a.no_lead_in,
        jitter: a.jitter,
        early_confidence: a.early_confidence,
        cycles: a.cycles,
        extend_below: a.extend_below,
        initial_cca: CcaName::new(&a.initial_cca)?,
        policy: None,
        dps: None,
        gate: super::args::resolve_gate(a.gate.as_deref(), &model)?,
        gate_threshold: a.gate_threshold,
        auto: auto.then(|| {
            opsel_transfer::ops::auto_plan(
                a.gate.is_some(),
                false,
                a.cycles > 1 || a.extend_below.is_some(),
            )
        }),
    };
    // Several windows per decision lengthen the first probe by (N − 1) windows.
    let mut extra_s = 0.0;
    let mut classes: Vec<String> = Vec::new();
    let mut window = 0;
    // Seconds per RTT sample of the model (1 at 000's 1 Hz, 0.2 for a model
    // of `opsel calibrate --sample-ms 200`).
    let mut period_s = 1.0;
    // With --model auto: the 5-Hz model's (decisions made before a fallback).
    let mut fast_period_s = 1.0;
    let mut fast_window = 0;
    if fgs.iter().any(|f| matches!(f, Fg::Ops { .. })) {
        // Fail before the lab comes up if the model is missing or mismatched.
        let c = super::send::controller(&ops).map_err(|e| {
            Error::invalid(format!(
                "{e}\n(the shipped models are {ACTIVE_MODEL} and {PASSIVE_MODEL}; pass --model PATH to use another)"
            ))
        })?;
        period_s = c.config().sample_period_ns as f64 / 1e9;
        if let Some(AutoPlan::Try5Hz(m)) = &ops.auto {
            let f = super::send::controller(&OpsOpts {
                model: m.clone(),
                ..ops.clone()
            })?;
            fast_period_s = f.config().sample_period_ns as f64 / 1e9;
            fast_window = f.window_len();
        }
        let window_s = c.window_len() as f64 * period_s;
        if a.seconds.is_none() && a.extend_below.is_none() {
            extra_s = a.cycles.saturating_sub(1) as f64 * window_s;
        }
        window = c.window_len();
        classes = models::load(&model_src)?.model.classes().to_vec();
        // The default run lengths are laid out for the thesis's w = 20 (first
        // decision 20 s after the FG starts); a longer window (the default
        // passive model's w = 40) moves the first decision, the measurement
        // window and the run's end by the difference.
        if a.seconds.is_none() {
            extra_s += (window_s - 20.0).max(0.0);
        }
    }
    let (seconds, measure_from) = (seconds + extra_s, a.measure_from + extra_s);
    let _ = topo::down(false);
    let lab = Lab::up(
        &TopologySpec::dumbbell(2),
        &PipeSpec::tun(
            a.rate_mbps,
            a.rtt_ms,
            bdp_bytes(a.rate_mbps, a.rtt_ms, a.buffer_bdp),
            a.seed,
        ),
    )?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} Mbit/s, RTT {} ms, buffer {} × BDP; BG from 0 s, FG from {} s, means over [{}, {seconds}] s{}; OPS: {} probing{}, steady Y = {steady} s{}{}{}, model {}.\n",
        a.rate_mbps,
        a.rtt_ms,
        a.buffer_bdp,
        a.fg_start,
        measure_from,
        if a.phase_spread > 0.0 && a.runs > 1 {
            format!(
                " (run r = 1..{} shifted by (r − 1) × {} s: FG start, window and end; seed {} + r − 1)",
                a.runs,
                a.phase_spread / a.runs as f64,
                a.seed
            )
        } else {
            String::new()
        },
        pattern.as_ref().map_or("passive".into(), |p| format!("{p} active")),
        if a.no_lead_in || passive { "" } else { " with lead-in" },
        if a.jitter > 0.0 { format!(" ± {:.0}%", a.jitter * 100.0) } else { String::new() },
        match (a.cycles, a.extend_below) {
            (n, Some(t)) if n > 1 => format!(", more windows (up to {n}, min-sum) while the margin is below {t}"),
            (n, _) if n > 1 => format!(", {n} windows per decision (min-sum)"),
            _ => String::new(),
        },
        match &ops.gate {
            Some(g) => format!(
                ", probe gate {}{}",
                g.file_name().map_or(g.display().to_string(), |f| f.to_string_lossy().into_owned()),
                a.gate_threshold.map_or(String::new(), |t| format!(" (threshold {t})"))
            ),
            None => String::new(),
        },
        model_label
    );
    let _ = writeln!(
        md,
        "| BG | FG strategy | run | FG start (s) | BG (Mbit/s) | FG (Mbit/s) | Jain | FG / fair share | probing (s) | CCA switches | decisions (t s: mix → CCA) |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    println!("{}", md.trim_end());
    let fair_share = a.rate_mbps / 2.0;
    let mut json_out = match &a.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| Error::io(format!("open {}", p.display()), e))?,
        ),
        None => None,
    };
    let mut runs: Vec<RunRecord> = Vec::new();
    for bg in &bgs {
        for fg in &fgs {
            for run in 1..=a.runs.max(1) {
                let plan = run_plan(
                    run - 1,
                    a.runs.max(1),
                    a.seed,
                    a.phase_spread,
                    a.fg_start,
                    measure_from,
                    seconds,
                );
                let run_ops = OpsOpts {
                    seed: plan.seed,
                    ..ops.clone()
                };
                let label = format!("{} vs {}", fg.name(), bg.name());
                eprint!(
                    "running {label} ({} s, FG from {} s, seed {}) ...",
                    plan.seconds, plan.fg_start_s, plan.seed
                );
                let mut last = -1i64;
                let cell = run_cell(
                    &lab,
                    bg,
                    fg,
                    &run_ops,
                    plan.seconds,
                    plan.fg_start_s,
                    plan.measure_from_s,
                    rtt_tcp_info,
                    &classes,
                    &mut |t| {
                        let s = t as i64;
                        if s % 10 == 0 && s != last {
                            last = s;
                            eprint!(" {s}");
                        }
                    },
                )?;
                eprintln!();
                if a.report.is_some() {
                    let bin_ns = opsel_netlab::traffic::BIN_NS;
                    runs.push(RunRecord {
                        bg: bg.name(),
                        fg: fg.name(),
                        run,
                        seconds: plan.seconds,
                        fg_start_s: plan.fg_start_s,
                        measure_from_s: plan.measure_from_s,
                        bg_mbps: cell.bg_mbps,
                        fg_mbps: cell.fg_mbps,
                        jain: cell.jain,
                        bin_s: REPORT_BIN_S,
                        bg_series_mbps: report::record::series_mbps(
                            &cell.bg_bins,
                            bin_ns,
                            REPORT_BIN_S,
                            plan.seconds,
                        ),
                        fg_series_mbps: report::record::series_mbps(
                            &cell.fg_bins,
                            bin_ns,
                            REPORT_BIN_S,
                            plan.seconds,
                        ),
                        events: cell.events.clone(),
                        model_used: cell.auto.as_ref().map(|c| report::record::ModelUsed {
                            fallback_after_s: c.switched_after_ns.map(|ns| ns as f64 / 1e9),
                            reason: c.reason.clone(),
                        }),
                    });
                }
                let (probe_s, switches) = cell.report.map_or((String::new(), String::new()), |r| {
                    (
                        format!("{:.0}", r.stats.probe_ns as f64 / 1e9),
                        r.stats.cca_switches.to_string(),
                    )
                });
                // Which model made a decision: the 5-Hz one until auto fell back.
                let fast_until_s = match &cell.auto {
                    Some(c) if c.model == AutoModel::Fast => f64::INFINITY,
                    Some(AutoChoice {
                        switched_after_ns: Some(ns),
                        ..
                    }) => plan.fg_start_s + *ns as f64 / 1e9,
                    _ => f64::NEG_INFINITY,
                };
                let per = |t: f64| {
                    if t < fast_until_s {
                        fast_period_s
                    } else {
                        period_s
                    }
                };
                if let Some(c) = &cell.auto {
                    eprintln!("  model auto: {}", c.reason);
                }
                let dec = cell
                    .decisions
                    .iter()
                    .map(|(t, mix, _, cca, n)| {
                        format!(
                            "{t:.0}: {mix} → {cca}{}",
                            if (*n as f64) * per(*t) < 20.0 {
                                format!(" ({:.1} s probed)", *n as f64 * per(*t))
                            } else {
                                String::new()
                            }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                let line = format!(
                    "| {} | {} | {run} | {} | {:.1} | {:.1} | {:.3} | {:.2} | {probe_s} | {switches} | {dec} |",
                    bg.name(),
                    fg.name(),
                    plan.fg_start_s,
                    cell.bg_mbps,
                    cell.fg_mbps,
                    cell.jain,
                    cell.fg_mbps / fair_share
                );
                println!("{line}");
                let _ = writeln!(md, "{line}");
                if let Some(f) = json_out.as_mut() {
                    use std::io::Write;
                    let v = json!({"bg": bg.name(), "fg": fg.name(), "run": run, "seconds": plan.seconds,
                        "measure_from_s": plan.measure_from_s, "fg_start_s": plan.fg_start_s,
                        "phase_offset_s": plan.offset_s, "phase_spread_s": a.phase_spread, "seed": plan.seed, "bg_mbps": cell.bg_mbps, "fg_mbps": cell.fg_mbps,
                        "jain": cell.jain, "buffer_bdp": a.buffer_bdp, "steady_s": steady, "jitter": a.jitter, "early_confidence": a.early_confidence,
                        "pattern": pattern.as_ref().map_or("passive".into(), |p| p.to_string()), "cycles": a.cycles, "extend_below": a.extend_below, "initial_cca": a.initial_cca,
                        "probe_s": cell.report.map(|r| r.stats.probe_ns as f64 / 1e9),
                        "steady_total_s": cell.report.map(|r| r.stats.steady_ns as f64 / 1e9),
                        "cca_switches": cell.report.map(|r| r.stats.cca_switches),
                        "early_exits": cell.report.map(|r| r.stats.early_exits),
                        "gate": ops.gate.as_ref().map(|g| g.display().to_string()), "gate_threshold": a.gate_threshold,
                        "gate_exits": cell.report.map(|r| r.stats.gate_exits),
                        "decisions": cell.decisions.iter().map(|(t, m, c, cca, n)| json!({"t_s": t, "mix": m, "confidence": c, "cca": cca, "samples": n, "probe_s": *n as f64 * per(*t)})).collect::<Vec<_>>(),
                        "windows": cell.windows.iter().map(|(t, i, c, d, l, m)| json!({"t_s": t, "window": i, "class_index": c, "distance": d, "leader": l, "margin": m})).collect::<Vec<_>>(),
                        "decision_latency_us": cell.latencies_us,
                        "model": model_label, "auto_model": cell.auto, "rtt_source": a.rtt,
                        "loadavg": std::fs::read_to_string("/proc/loadavg").ok().map(|l| l.trim().to_string())});
                    let _ = writeln!(f, "{v}");
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }
    drop(lab);
    if let Some(p) = &a.markdown {
        std::fs::write(p, &md).map_err(|e| Error::io(format!("write {}", p.display()), e))?;
    }
    if let Some(dir) = &a.report {
        let rec = DemoRecord {
            format: report::record::FORMAT.into(),
            setup: Setup {
                rate_mbps: a.rate_mbps,
                rtt_ms: a.rtt_ms,
                buffer_bdp: a.buffer_bdp,
                pattern: pattern.as_ref().map_or("passive".into(), |p| p.to_string()),
                steady_s: steady,
                model: model_label.clone(),
                classes,
                // With auto, the setup names the 5-Hz model the runs start
                // with; each run says whether it fell back (`model_used`).
                window: if fast_window > 0 { fast_window } else { window },
                sample_interval_ms: if fast_window > 0 {
                    fast_period_s * 1e3
                } else {
                    period_s * 1e3
                },
            },
            runs,
        };
        let page = report::write(dir, &rec)?;
        eprintln!("report: {}", page.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_run_is_the_unshifted_run_with_the_given_seed() {
        let p = run_plan(0, 1, 7, 60.0, 10.0, 20.0, 180.0);
        assert_eq!(
            p,
            RunPlan {
                seed: 7,
                offset_s: 0.0,
                fg_start_s: 10.0,
                measure_from_s: 20.0,
                seconds: 180.0
            }
        );
    }

    #[test]
    fn repeats_spread_evenly_over_one_alt30_cycle() {
        // ALT-30 cycle = 60 s; 6 runs -> FG starts 10, 20, ..., 60 s.
        let plans: Vec<RunPlan> = (0..6)
            .map(|r| run_plan(r, 6, 1, 60.0, 10.0, 20.0, 180.0))
            .collect();
        let starts: Vec<f64> = plans.iter().map(|p| p.fg_start_s).collect();
        assert_eq!(starts, vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
        let seeds: Vec<u64> = plans.iter().map(|p| p.seed).collect();
        assert_eq!(seeds, vec![1, 2, 3, 4, 5, 6]);
        for p in &plans {
            // Same FG-relative timeline in every run: 10 s after its start
            // to 170 s after it.
            assert_eq!(p.measure_from_s - p.fg_start_s, 10.0);
            assert_eq!(p.seconds - p.fg_start_s, 170.0);
            assert_eq!(p.measure_from_s, 20.0 + p.offset_s);
        }
    }

    #[test]
    fn alt60_four_phases_and_no_spread() {
        let starts: Vec<f64> = (0..4)
            .map(|r| run_plan(r, 4, 1, 120.0, 10.0, 20.0, 180.0).fg_start_s)
            .collect();
        assert_eq!(starts, vec![10.0, 40.0, 70.0, 100.0]);
        // Without a spread the repeats keep the timeline; only the seed moves.
        for r in 0..3 {
            let p = run_plan(r, 3, u64::MAX, 0.0, 10.0, 20.0, 180.0);
            assert_eq!(
                (p.fg_start_s, p.measure_from_s, p.seconds),
                (10.0, 20.0, 180.0)
            );
            assert_eq!(p.seed, u64::MAX.wrapping_add(r as u64));
        }
    }
}
