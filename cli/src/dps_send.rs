//! `opsel send --dps SPEC [--fair SOCKET]` without `--ops`: 002's DPS on
//! its own (Alg 3 cycles of t/T monitoring periods, no OPS probing), alone
//! or admitted and coordinated by the host's fairness manager service
//! (002 §4.6). The flow logic is core's `dps::LiveFlow`, the same code a
//! library user runs for several flows in one process; this file only
//! feeds it each interval's `TCP_INFO` readings and applies its CCA
//! changes on the live socket.

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opsel::dps::{DpsSpec, Feedback, LiveFlow, LiveOutput};
use opsel::fair::ManagerClient;
use opsel::probe::CcaName;
use opsel::sys::linux::clock::monotonic_ns;
use opsel::sys::linux::ops_driver::{
    send_fixed_source, DriverConfig, DriverEvent, DriverReport, Source,
};
use opsel::{Error, Result};
use serde_json::json;

/// A DPS spec from a file or inline JSON, with every CCA checked against
/// the kernel before anything connects.
pub fn load_spec(s: &str) -> Result<DpsSpec> {
    let text = if s.trim_start().starts_with('{') {
        s.to_string()
    } else {
        std::fs::read_to_string(s).map_err(|e| Error::io(format!("read the DPS spec {s}"), e))?
    };
    let spec = DpsSpec::from_json(&text).map_err(|e| Error::invalid(format!("--dps {s}: {e}")))?;
    let avail = opsel::sys::linux::available_ccas()?;
    if let Some(c) = spec.ccas.iter().find(|c| !avail.contains(c)) {
        return Err(Error::invalid(format!(
            "--dps: this kernel has no congestion control {c:?} (it offers {}); load its module, e.g. `make bpf-vegas` for opsel_vegas",
            avail.join(", ")
        )));
    }
    Ok(spec)
}

/// The DPS log beside the transfer log `FILE.jsonl`: `FILE.dps.jsonl`
/// (each file has one writer, so lines never interleave).
pub fn log_path(log: &Path) -> PathBuf {
    let stem = log
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    log.with_file_name(format!("{stem}.dps.jsonl"))
}

/// DPS without OPS (`--dps` without `--ops`).
#[derive(Debug, Clone)]
pub struct DpsOpts {
    pub spec: DpsSpec,
    /// The fairness manager's socket (`--fair`).
    pub fair: Option<PathBuf>,
    /// How long to wait for the manager to admit the flow (`--fair-wait`).
    pub fair_wait_s: f64,
    /// Sending-rate report interval to the manager (`--fair-rate-every`).
    pub rate_every_s: f64,
    /// Stop once every CCA has statistics (`--dps-until-learnt`).
    pub until_learnt: bool,
}

/// The flow, joined to the manager and admitted when `--fair` is given.
/// Runs before the transfer connects: a managed flow sends only once
/// admitted (002 §4.6).
pub fn join(o: &DpsOpts) -> Result<LiveFlow> {
    let mut flow = match &o.fair {
        None => LiveFlow::unmanaged(&o.spec)?,
        Some(p) => {
            // The process id is unique among the host's flows.
            let client = ManagerClient::connect_path(p, u64::from(std::process::id()))?;
            let every = Duration::try_from_secs_f64(o.rate_every_s).map_err(|_| {
                Error::invalid(format!("--fair-rate-every {} must be > 0", o.rate_every_s))
            })?;
            LiveFlow::managed(&o.spec, client, every)?
        }
    };
    flow.start(monotonic_ns())?;
    let wait = Duration::try_from_secs_f64(o.fair_wait_s)
        .map_err(|_| Error::invalid(format!("--fair-wait {} must be >= 0", o.fair_wait_s)))?;
    flow.admit(wait, &mut monotonic_ns)?;
    Ok(flow)
}

/// Send `src` over `data` with DPS choosing the CCA: each interval's
/// sender-side RTT (`tcpi_rtt`), acknowledged rate and sending rate go to
/// the flow; its CCA changes are `setsockopt(TCP_CONGESTION)` calls on the
/// live socket. Each DPS output is one JSON line in `log` (kind `dps`).
#[allow(clippy::too_many_arguments)] // one call site; the options are the transfer's
pub fn send(
    data: &TcpStream,
    src: &mut Source<'_>,
    mut flow: LiveFlow,
    dcfg: &DriverConfig,
    stop: &AtomicBool,
    until_learnt: bool,
    log: Option<&Path>,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<(DriverReport, LiveFlow)> {
    let mut out = match log {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| Error::io(format!("open log {}", p.display()), e))?,
        )),
        None => None,
    };
    let first = flow.current().unwrap_or(CcaName::CUBIC);
    let mut cur = first;
    let mut err: Option<Error> = None;
    let apply = |flow: &mut LiveFlow,
                 cur: &mut CcaName,
                 out: &mut Option<std::io::BufWriter<std::fs::File>>|
     -> Result<()> {
        while let Some(o) = flow.poll() {
            let at_ns = monotonic_ns();
            if let LiveOutput::SetCca(c) = &o {
                opsel::sys::linux::set_cca(data, c.as_str())?;
                *cur = *c;
            }
            if let Some(w) = out.as_mut() {
                let _ = writeln!(w, "{}", output_json(&o, at_ns));
            }
        }
        Ok(())
    };
    apply(&mut flow, &mut cur, &mut out)?;
    // The driver's stop flag: the caller's (Ctrl-C), or the end of learning.
    let halt = AtomicBool::new(false);
    let report = send_fixed_source(data, src, cur, dcfg, &halt, &mut |e| {
        on_event(e);
        let learnt = until_learnt && flow.stats().learnt_at_ns.is_some();
        if stop.load(Ordering::Relaxed) || learnt {
            halt.store(true, Ordering::Relaxed);
        }
        let DriverEvent::Interval {
            start_ns,
            end_ns,
            bytes,
            acked_bytes,
            ..
        } = e
        else {
            return;
        };
        if err.is_some() {
            return;
        }
        let dt_s = end_ns.saturating_sub(*start_ns) as f64 / 1e9;
        let rtt_ms = opsel::sys::linux::tcp_info(data)
            .ok()
            .and_then(|i| (i.rtt_us > 0).then(|| f64::from(i.rtt_us) / 1e3));
        let mbps = |b: u64| (dt_s > 0.0).then(|| b as f64 * 8.0 / dt_s / 1e6);
        let fb = Feedback {
            at_ns: *end_ns,
            rtt_ms,
            // The interval's acknowledged bytes: the sender-side delivery
            // rate over the whole interval (the kernel's own delivery-rate
            // sample spans one round trip only).
            delivery_rate_mbps: acked_bytes.and_then(mbps),
            goodput_mbps: None,
            sending_rate_mbps: mbps(*bytes),
        };
        if let Some(w) = out.as_mut() {
            let _ = writeln!(
                w,
                "{}",
                json!({"kind": "dps_sample", "at_ns": end_ns, "cca": cur.as_str(),
                       "rtt_ms": fb.rtt_ms, "delivery_rate_mbps": fb.delivery_rate_mbps,
                       "sending_rate_mbps": fb.sending_rate_mbps})
            );
        }
        let r = flow
            .on_interval(&fb)
            .and_then(|()| apply(&mut flow, &mut cur, &mut out));
        if let Err(e) = r {
            err = Some(e);
        }
    })?;
    if let Some(w) = out.as_mut() {
        let _ = writeln!(
            w,
            "{}",
            json!({"kind": "dps_end", "at_ns": monotonic_ns(), "stats": flow.stats(),
                   "admitted": flow.admitted()})
        );
        let _ = w.flush();
    }
    match err {
        Some(e) => Err(Error::invalid(format!("DPS: {e}"))),
        None => Ok((report, flow)),
    }
}

/// One DPS output as a log line.
fn output_json(o: &LiveOutput, at_ns: u64) -> serde_json::Value {
    match o {
        LiveOutput::SetCca(c) => json!({"kind": "dps_set_cca", "at_ns": at_ns, "cca": c.as_str()}),
        LiveOutput::Command(c) => json!({"kind": "fair_command", "at_ns": at_ns, "command": c}),
        LiveOutput::Report(r) => json!({"kind": "fair_report", "at_ns": at_ns, "report": r}),
        LiveOutput::Event(e) => {
            json!({"kind": "dps_event", "at_ns": at_ns, "event": e})
        }
    }
}
