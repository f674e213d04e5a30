//! `opsel send`: send a file (from an offset) over one control and one data
//! connection, with a fixed CCA or with OPS choosing the CCA on the live data
//! connection (000 Ch. 7, iPerfOPS), then wait until the receiver confirms
//! every byte and its digest. The protocol, the hashing, the send loop and
//! the OPS drive are the `opsel-transfer` crate's (`send::send_on`,
//! `ops::OpsDrive`, what the bindings' `send_file` runs too); this module
//! adds what the command line has on top: DPS under the fairness manager,
//! FastProb or a CCA A/B on the first seconds of the transfer
//! (`opsel_transfer::probe`), the decision cache and the JSON-lines log.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache};
use opsel::ops::{Event, Labeled};
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{DriverConfig, DriverEvent, DriverReport, Source};
use opsel::{Error, Result};
use serde_json::{json, Value};

use opsel_transfer::probe::ProbeDrive;
pub use opsel_transfer::probe::ProbeReport;
use opsel_transfer::proto::{HashAlgo, Key};
pub use opsel_transfer::send::SendReport;
use opsel_transfer::send::{self as xfer, Drive, FixedCca};

use opsel_transfer::ops::OpsDrive;
pub use opsel_transfer::ops::{controller, OpsOpts, RttVia, ACTIVE_MODEL, PASSIVE_MODEL};

/// How the CCA is chosen.
#[derive(Debug, Clone)]
pub enum Strategy {
    Fixed(CcaName),
    Ops(Box<OpsOpts>),
    /// DPS on its own, optionally under the fairness manager (`--dps` without `--ops`).
    Dps(crate::dps_send::DpsOpts),
}

/// FastProb at the start of the transfer (`--fastprob`, `--ab`, 004 §IV and
/// the §VI analogue): the first seconds of the file are the probe.
#[derive(Debug, Clone)]
pub struct ProbeOpts {
    /// FastProb model file or shipped name (`None`: fastprob-netlab).
    pub model: Option<PathBuf>,
    /// A CCA A/B instead of an estimate on the fixed CCA (its spec carries
    /// the budget too).
    pub ab: Option<opsel::fastprob::AbSpec>,
    /// The estimate's error budget (default: the file's own).
    pub budget: opsel::fastprob::ProbeBudget,
}

#[derive(Debug, Clone)]
pub struct SendOpts {
    pub to: SocketAddr,
    pub file: PathBuf,
    pub strategy: Strategy,
    pub time_s: Option<f64>,
    /// First byte to send (`None` = 0, unless `resume`).
    pub offset: Option<u64>,
    /// Let the receiver say where to start: after its verified prefix.
    pub resume: bool,
    /// File name for the receiver (serve mode; default: the file's own name).
    pub name: Option<String>,
    /// Pre-shared key (both sides prove they hold it).
    pub key: Option<Key>,
    /// JSON-lines log file and run label.
    pub log: Option<(PathBuf, String)>,
    pub interval_s: f64,
    /// The per-destination-prefix decision cache (003 H2, `flows::decision_cache`):
    /// OPS starts with the CCA last chosen toward this /24 and records its decision.
    pub decision_cache: Option<PathBuf>,
    /// Data connections the file is striped over (1 to 8, `streams.rs`).
    pub streams: u16,
    /// The whole-transfer check; `None`: `opsel_transfer::send::default_hash`.
    pub hash: Option<HashAlgo>,
    /// FastProb or a CCA A/B on the first seconds (fixed-CCA strategy only).
    pub probe: Option<ProbeOpts>,
}

/// Why a start probe cannot run with the strategy: OPS and DPS switch the
/// CCA themselves.
fn probe_conflict(strategy: &Strategy) -> Option<&'static str> {
    match strategy {
        Strategy::Fixed(_) => None,
        // OPS's probing pattern (silences, forced CCA segments) is not one
        // CCA's convergence, which is what the FastProb model was trained
        // on, and OPS's first decision would override an A/B's choice.
        Strategy::Ops(_) => Some(
            "--fastprob and --ab exclude --ops: OPS probes with its own pattern and switches the CCA at each decision, so the first seconds are not one CCA converging (what FastProb predicts) and OPS would override an A/B's choice. Run the A/B with OPS's class instead: --ab cubic,bbr --background cubic|bbr (the class `opsel classify` or an earlier OPS run gave)",
        ),
        Strategy::Dps(_) => Some(
            "--fastprob and --ab exclude --dps: DPS switches the CCA itself from its own measurements",
        ),
    }
}

/// Wall-clock seconds since the Unix epoch: the decision cache's time base,
/// shared between runs (a monotonic clock restarts with each process).
fn unix_now_s() -> f64 {
    opsel::sys::linux::clock::realtime_ns() as f64 / 1e9
}

/// JSON-lines logger: one line per interval and per OPS event, each the
/// core's serialized `DriverEvent` with the class names (`opsel::ops::Labeled`:
/// `kind`, units in field names, as Python's dicts and Node's objects), plus
/// `run` (the log label), `t_s` (seconds since the first CCA was set) and, on
/// intervals, the file `offset` reached and the last `rtt_ms` sample.
struct Log {
    out: Option<std::io::BufWriter<std::fs::File>>,
    label: String,
    t0: Option<u64>,
    /// The file offset the transfer started at (set when the receiver accepted).
    offset: std::rc::Rc<std::cell::Cell<u64>>,
    last_rtt: Option<f64>,
    /// The model's class names.
    classes: Vec<String>,
}

impl Log {
    fn event(&mut self, e: &DriverEvent) {
        let at_ns = match e {
            DriverEvent::CcaSet { at_ns, .. } => {
                self.t0.get_or_insert(*at_ns);
                Some(*at_ns)
            }
            DriverEvent::Rtt { rtt_ms, .. } => {
                // Samples come every second; the intervals carry the last one.
                self.last_rtt = *rtt_ms;
                return;
            }
            DriverEvent::Decision { .. } => None,
            DriverEvent::Interval { end_ns, .. } => Some(*end_ns),
            DriverEvent::Ops(ev) => ev_at_ns(ev),
        };
        let Some(w) = self.out.as_mut() else { return };
        let Ok(Value::Object(mut m)) = serde_json::to_value(Labeled::new(e, &self.classes)) else {
            return;
        };
        m.insert("run".into(), self.label.clone().into());
        if let Some(t) = at_ns {
            let t_s = t.saturating_sub(self.t0.unwrap_or(t)) as f64 / 1e9;
            m.insert("t_s".into(), t_s.into());
        }
        if let DriverEvent::Interval { total_bytes, .. } = e {
            m.insert("offset".into(), (self.offset.get() + total_bytes).into());
            m.insert("rtt_ms".into(), self.last_rtt.into());
        }
        let _ = writeln!(w, "{}", Value::Object(m));
    }
}

impl Log {
    /// Streams 1..N's byte intervals (after the transfer: they ran on their
    /// own threads), each with its `stream` index and `t_s` on stream 0's clock.
    fn streams(&mut self, streams: &[opsel_transfer::streams::StreamReport]) {
        let Some(w) = self.out.as_mut() else { return };
        for s in streams {
            for e in &s.intervals {
                let Ok(Value::Object(mut m)) = serde_json::to_value(e) else {
                    continue;
                };
                // The follower's loop knows neither the CCA stream 0's
                // driver set on it nor the OPS phase: those are stream 0's.
                m.remove("cca");
                m.remove("phase");
                m.insert("run".into(), self.label.clone().into());
                m.insert("stream".into(), s.stream.into());
                if let DriverEvent::Interval { end_ns, .. } = e {
                    let t_s = end_ns.saturating_sub(self.t0.unwrap_or(*end_ns)) as f64 / 1e9;
                    m.insert("t_s".into(), t_s.into());
                }
                let _ = writeln!(w, "{}", Value::Object(m));
            }
        }
    }
}

/// When a controller event happened.
fn ev_at_ns(e: &Event) -> Option<u64> {
    match e {
        Event::Phase { at_ns, .. }
        | Event::Classified { at_ns, .. }
        | Event::CycleClassified { at_ns, .. }
        | Event::Selected { at_ns, .. }
        | Event::DecisionFailed { at_ns, .. }
        | Event::ProbeIncomplete { at_ns, .. } => Some(*at_ns),
    }
}

fn open_log(log: &Option<(PathBuf, String)>) -> Result<Log> {
    let (out, label) = match log {
        Some((p, l)) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| Error::io(format!("open log {}", p.display()), e))?;
            (Some(std::io::BufWriter::new(f)), l.clone())
        }
        None => (None, String::new()),
    };
    Ok(Log {
        out,
        label,
        t0: None,
        offset: Default::default(),
        last_rtt: None,
        classes: Vec::new(),
    })
}

/// DPS on its own (`--dps` without `--ops`), one stream.
struct DpsDrive<'a> {
    flow: Option<opsel::dps::LiveFlow>,
    opts: &'a crate::dps_send::DpsOpts,
    log: Option<PathBuf>,
}

impl Drive for DpsDrive<'_> {
    fn first_cca(&self) -> CcaName {
        CcaName::CUBIC
    }
    fn allows_streams(&self, _: u16) -> Result<()> {
        // DPS learns one connection's utility and sets its CCA directly.
        Err(Error::invalid(
            "--streams > 1 works with a fixed --cca or with --ops: DPS (--dps without --ops) runs on one stream",
        ))
    }
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        dcfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        let dcfg = DriverConfig {
            notsent_lowat_bytes: None,
            ..dcfg
        };
        let flow = self
            .flow
            .take()
            .ok_or_else(|| Error::invalid("internal: the DPS flow runs once"))?;
        crate::dps_send::send(
            data,
            src,
            flow,
            &dcfg,
            stop,
            self.opts.until_learnt,
            self.log.as_deref(),
            on_event,
        )
        .map(|(r, _)| r)
    }
}

/// Any driver, telling the log where the transfer started.
struct Logged<'a> {
    inner: Box<dyn Drive + 'a>,
    offset: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Drive for Logged<'_> {
    fn first_cca(&self) -> CcaName {
        self.inner.first_cca()
    }
    fn allows_streams(&self, n: u16) -> Result<()> {
        self.inner.allows_streams(n)
    }
    fn sending_gate(&self) -> Option<Arc<AtomicBool>> {
        self.inner.sending_gate()
    }
    fn accepted(&mut self, offset: u64, size: u64) {
        self.offset.set(offset);
        self.inner.accepted(offset, size);
    }
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        cfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        self.inner.drive(data, src, cfg, stop, on_event)
    }
}

/// Run one transfer. `on_event` sees every driver event (progress bars,
/// demo accounting); `stop` ends the sending early (then the transfer is
/// completed and confirmed up to the bytes sent, and the receiver keeps
/// them as a verified prefix for a resume).
/// With `opts.probe`, `on_probe` sees the probe's report the moment it
/// stops (the transfer goes on) and the second value is the final one.
pub fn run(
    opts: &SendOpts,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
    on_probe: &mut dyn FnMut(&opsel::fastprob::StartReport),
) -> Result<(SendReport, Option<ProbeReport>)> {
    if let (Some(_), Some(why)) = (&opts.probe, probe_conflict(&opts.strategy)) {
        return Err(Error::invalid(why));
    }
    let probe_out = std::rc::Rc::new(std::cell::RefCell::new(None::<ProbeReport>));
    let xopts = xfer::SendOpts {
        file: opts.file.clone(),
        time_s: opts.time_s,
        offset: opts.offset,
        resume: opts.resume,
        name: opts.name.clone(),
        key: opts.key.clone(),
        interval_s: opts.interval_s,
        streams: opts.streams,
        hash: opts.hash,
    };
    // Build the controller before connecting, so a bad model fails fast.
    let mut cache = match (&opts.decision_cache, &opts.strategy) {
        (Some(p), Strategy::Ops(_)) => Some(DecisionCache::load_or_new(p, CacheSpec::default())?),
        _ => None,
    };
    let mut classes = Vec::new();
    // With --model auto: the passive model OPS ran and why (the report's
    // `ops.auto_model`).
    let auto_choice = Arc::new(std::sync::Mutex::new(None));
    let inner: Box<dyn Drive + '_> = match &opts.strategy {
        Strategy::Fixed(c) => match &opts.probe {
            None => Box::new(FixedCca(*c)),
            Some(p) => {
                let model = Arc::new(crate::probe::fastprob_model(p.model.as_deref())?);
                let notify: Box<dyn FnMut(&opsel::fastprob::StartReport) + '_> =
                    Box::new(|r| on_probe(r));
                let d = match &p.ab {
                    None => ProbeDrive::estimate(model, *c, &p.budget, notify, probe_out.clone())?,
                    Some(spec) => ProbeDrive::ab(model, spec.clone(), notify, probe_out.clone())?,
                };
                // A candidate the kernel lacks would fail mid-transfer: refuse now.
                let ccas = match &p.ab {
                    Some(spec) => spec
                        .candidates
                        .iter()
                        .map(|c| CcaName::new(c))
                        .collect::<Result<Vec<_>>>()?,
                    None => vec![*c],
                };
                opsel::sys::linux::ops_driver::check_ccas_available(&ccas)?;
                Box::new(d)
            }
        },
        Strategy::Ops(o) => {
            // A prior from the cache: start with the CCA OPS chose toward this
            // prefix last time, and let the first probe end early when it
            // agrees with the cached class (`ops::PriorProbe`).
            let prior = cache
                .as_ref()
                .and_then(|c| c.lookup(opts.to.ip(), unix_now_s()));
            let o = match &prior {
                Some(p) => OpsOpts {
                    initial_cca: CcaName::new(&p.decision.cca)?,
                    ..(**o).clone()
                },
                None => (**o).clone(),
            };
            let label = prior.as_ref().map(|p| p.decision.label.as_str());
            let mut d = OpsDrive::new(o, label)?;
            classes = d.classes().to_vec();
            let sink = auto_choice.clone();
            d.on_auto_choice(Box::new(move |c| {
                eprintln!("OPS model auto: {}", c.reason);
                *sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(c.clone());
            }));
            Box::new(d)
        }
        Strategy::Dps(d) => {
            // Refuse a bad stream count before joining the fairness manager.
            xfer::check(
                &xopts,
                &DpsDrive {
                    flow: None,
                    opts: d,
                    log: None,
                },
            )?;
            // A managed DPS flow is admitted by the fairness manager before it connects.
            Box::new(DpsDrive {
                flow: Some(crate::dps_send::join(d)?),
                opts: d,
                log: opts.log.as_ref().map(|(p, _)| crate::dps_send::log_path(p)),
            })
        }
    };
    xfer::check(&xopts, &*inner)?;
    let ctl_sock = xfer::connect(opts.to, "control")?;
    let mut log = open_log(&opts.log)?;
    log.classes = classes.clone();
    let mut drive = Logged {
        inner,
        offset: log.offset.clone(),
    };
    let mut decided: Option<Decision> = None;
    let mut classified: Option<(String, f64)> = None;
    // With OPS the report's `ops`: decisions, CCAs used, the auto model.
    let mut ops_log = matches!(opts.strategy, Strategy::Ops(_))
        .then(|| opsel_transfer::ops::OpsLog::new(classes.clone()));
    let mut cb = |e: &DriverEvent| {
        log.event(e);
        if let Some(l) = ops_log.as_mut() {
            l.event(e);
        }
        on_event(e);
        // The last decision, for the decision cache: the class and its
        // confidence, then the CCA the policy chose for it.
        match e {
            DriverEvent::Ops(Event::Classified { classified: c, .. }) => {
                let label = classes.get(c.class_index).cloned().unwrap_or_default();
                classified = Some((label, c.confidence.clamp(0.0, 1.0)));
            }
            DriverEvent::Ops(Event::Selected { cca, .. }) => {
                if let Some((label, confidence)) = classified.take() {
                    decided = Some(Decision {
                        label,
                        cca: cca.to_string(),
                        confidence,
                        at_s: unix_now_s(),
                    });
                }
            }
            _ => {}
        }
    };
    let r = xfer::send_on(ctl_sock, &xopts, &mut drive, stop, &mut cb);
    drop(drive);
    let mut r = r?;
    if let Some(l) = ops_log {
        let mut rep = l.into_report();
        rep.auto_model = auto_choice.lock().unwrap_or_else(|p| p.into_inner()).take();
        r.ops = Some(rep);
    }
    let probe_report = probe_out.borrow_mut().take();
    // What OPS decided toward this prefix, for the next transfer there.
    if let (Some(c), Some(path), Some(d)) = (cache.as_mut(), &opts.decision_cache, decided) {
        c.record(opts.to.ip(), d)?;
        c.save(path, unix_now_s())?;
    }
    log.streams(&r.streams);
    if let Some(w) = log.out.as_mut() {
        let streams: Vec<Value> = r
            .streams
            .iter()
            .map(|s| json!({"stream": s.stream, "bytes": s.bytes_sent, "cca_sets": s.cca_sets}))
            .collect();
        let v = json!({"run": log.label, "kind": "done", "streams": streams,
            "cca_sets": r.driver.cca_sets, "bytes": r.driver.bytes_sent,
            "next_offset": r.offset + r.driver.bytes_sent, "confirmed": true,
            "complete": r.complete, "hash": r.hash, "digest": r.digest,
            "file_identical": r.file_identical, "file_size": r.file_size,
            "end": r.driver.end, "stats": r.driver.stats, "fastprob": probe_report,
            "auto_model": r.ops.as_ref().and_then(|o| o.auto_model.as_ref())});
        let _ = writeln!(w, "{v}");
        let _ = w.flush();
    }
    Ok((r, probe_report))
}
