//! `opsel send`: send a file (from an offset) over one control and one data
//! connection, with a fixed CCA or with OPS choosing the CCA on the live data
//! connection (000 Ch. 7, iPerfOPS), then wait until the receiver confirms
//! every byte and its digest. The protocol, the hashing and the send loop are
//! `opsel_transfer::send::send_on`; this module adds what the command line
//! has on top: the OPS controller from a model file, DPS under the fairness
//! manager, FastProb or a CCA A/B on the first seconds of the transfer
//! (`opsel_transfer::probe`), the decision cache and the JSON-lines log.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use opsel::dps::DpsPolicy;
use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache};
use opsel::ops::{
    AdaptiveSpec, AnyPolicy, Classifier, Controller, ControllerSpec, Event, Labeled, ModeSpec,
    PolicySpec, ProgressiveSpec,
};
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::{
    DriverConfig, DriverEvent, DriverReport, OpsDriver, RttSource, Source,
};
use opsel::sys::linux::tcp_rtt::TcpInfoRttProbe;
use opsel::{Error, Result};
use serde_json::{json, Value};

use opsel_transfer::probe::ProbeDrive;
pub use opsel_transfer::probe::ProbeReport;
use opsel_transfer::proto::{HashAlgo, Key};
pub use opsel_transfer::send::SendReport;
use opsel_transfer::send::{self as xfer, Drive, FixedCca};

/// Shipped models (trained on netlab; owned by the training issue).
pub const ACTIVE_MODEL: &str = "models/active-s5c5s5b5/model.json";
pub const PASSIVE_MODEL: &str = "models/passive/model.json";

/// How the CCA is chosen.
#[derive(Debug, Clone)]
pub enum Strategy {
    Fixed(CcaName),
    Ops(OpsOpts),
    /// DPS on its own, optionally under the fairness manager (`--dps` without `--ops`).
    Dps(crate::dps_send::DpsOpts),
}

/// Where OPS's 1 Hz RTT samples come from (000 §3.2 probes with echoes
/// toward the peer; TCP_INFO reads the transfer's own socket instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RttVia {
    /// UDP echoes to the receiver's echo responder (its listen port).
    UdpEcho,
    /// ICMP echo, or ICMPv6 toward an IPv6 receiver.
    Icmp,
    /// The data socket's smoothed RTT from TCP_INFO (passive probing only).
    TcpInfo,
}

#[derive(Debug, Clone)]
pub struct OpsOpts {
    /// Active pattern, or `None` for passive probing.
    pub pattern: Option<Pattern>,
    /// Steady time Y in seconds (0 = probe once).
    pub steady_s: f64,
    pub model: PathBuf,
    /// Adaptive Y (000 §6 future work).
    pub adaptive: bool,
    /// Progressive probing with early exit (000 §6 future work).
    pub early_exit: bool,
    /// Where the RTT samples come from.
    pub rtt: RttVia,
    pub seed: u64,
    /// Run the pattern's last segment before each probe (DriverConfig::lead_in).
    pub lead_in: bool,
    /// Randomise each steady time by up to ±this fraction (ops::Config::steady_jitter).
    pub jitter: f64,
    /// Early exit: the minimum 1-NN margin that ends a probe
    /// (`Progressive::min_confidence`; `None` = its default, 0.8).
    pub early_confidence: Option<f64>,
    /// Windows (pattern cycles) per decision (`ops::Config::cycles`; 1 = one
    /// window as in 000, n > 1 = min-sum over n back-to-back windows).
    pub cycles: usize,
    /// Margin-gated probing: with `cycles` = N > 1, decide after the first
    /// window whose running min-sum margin reaches this value, else after N
    /// windows (`opsel.train gated`; docs/results/ops.md §1c).
    pub extend_below: Option<f64>,
    /// CCA before the first decision (`ops::Config::initial_cca`): passive
    /// probing sends with it while the first window fills.
    pub initial_cca: CcaName,
    /// DPS (002) as the decision policy instead of the stump (`--dps`).
    pub dps: Option<opsel::dps::DpsSpec>,
    /// A probe gate file (`ops::ProbeGate`, 004 §8 B.1; `--gate`): each probe
    /// ends at the first prefix check the gate accepts, else runs the window.
    pub gate: Option<PathBuf>,
    /// Override of the gate file's threshold (`--gate-threshold`).
    pub gate_threshold: Option<f64>,
}

/// FastProb at the start of the transfer (`--fastprob`, `--ab`, 004 §IV and
/// the §VI analogue): the first seconds of the file are the probe.
#[derive(Debug, Clone)]
pub struct ProbeOpts {
    /// FastProb model file or shipped name (`None`: fastprob-netlab).
    pub model: Option<PathBuf>,
    /// A CCA A/B instead of an estimate on the fixed CCA.
    pub ab: Option<opsel::fastprob::AbSpec>,
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

/// The CLI's options as the core's controller spec (field for field; the
/// defaults and checks are the spec's).
pub fn spec(o: &OpsOpts) -> ControllerSpec {
    ControllerSpec {
        mode: if o.pattern.is_some() {
            ModeSpec::Active
        } else {
            ModeSpec::Passive
        },
        pattern: o.pattern.as_ref().map(Pattern::to_string),
        steady_s: Some(o.steady_s),
        initial_cca: o.initial_cca.to_string(),
        adaptive: o.adaptive.then(AdaptiveSpec::default),
        progressive: o.early_exit.then(|| {
            let mut p = ProgressiveSpec::default();
            if let Some(c) = o.early_confidence {
                p.min_confidence = c;
            }
            p
        }),
        cycles: o.cycles,
        gate_margin: o.extend_below,
        gate: o.gate.clone(),
        gate_threshold: o.gate_threshold,
        steady_jitter: o.jitter,
        seed: o.seed,
        model: Some(o.model.clone()),
        // DPS is handed to `build` as the policy object.
        policy: if o.dps.is_some() {
            PolicySpec::Callback
        } else {
            PolicySpec::default()
        },
        ..ControllerSpec::default()
    }
}

/// The OPS controller the CLI runs: the spec of `o` over its model file
/// (checked against the pattern by the spec).
pub type CliController = Controller<Box<dyn Classifier + Send>, AnyPolicy<DpsPolicy>>;

/// Build the OPS controller from a model file (checked against the pattern).
pub fn controller(o: &OpsOpts) -> Result<CliController> {
    controller_with_classes(o, None).map(|(c, _)| c)
}

/// [`controller`] and the model's class names (the log names classes by them).
/// With `--dps` the policy is DPS; the driver hands it each interval's
/// TCP_INFO feedback (`Controller::handle_feedback`).
/// `prior`: a decision cache's class label for this destination; with it the
/// first probe may end early when a prefix agrees (`ops::PriorProbe`).
fn controller_with_classes(
    o: &OpsOpts,
    prior: Option<&str>,
) -> Result<(CliController, Vec<String>)> {
    let mut spec = spec(o);
    if prior.is_some() {
        spec.prior = Some(opsel::ops::PriorSpec::default());
    }
    let shipped = if o.pattern.is_some() {
        ACTIVE_MODEL
    } else {
        PASSIVE_MODEL
    };
    let mf = spec.load_model().map_err(|e| {
        Error::invalid(format!(
            "{e}; pass --model with a model trained for {} probing (shipped: {shipped})",
            o.pattern
                .as_ref()
                .map_or("passive".into(), |p| p.to_string()),
        ))
    })?;
    let dps = o.dps.as_ref().map(DpsPolicy::new).transpose()?;
    let c = spec
        .build(&mf, dps)
        .map_err(|e| Error::invalid(format!("{e} (model {})", o.model.display())))?;
    let classes = mf.model.classes().to_vec();
    let mut c = c;
    // A label the model does not know (another model wrote the cache) is no prior.
    if let Some(i) = prior.and_then(|l| classes.iter().position(|c| c == l)) {
        c.set_prior_class(i)?;
    }
    Ok((c, classes))
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

/// OPS on stream 0 (passive probing without TCP_NOTSENT_LOWAT). With an
/// active pattern and `--streams N` the driver mirrors its silences into
/// `gate`, and streams 1..N pause with it (`streams::spawn_senders`).
struct OpsDrive {
    ctl: Option<CliController>,
    opts: OpsOpts,
    to: SocketAddr,
    gate: Arc<AtomicBool>,
}

impl Drive for OpsDrive {
    fn first_cca(&self) -> CcaName {
        self.ctl
            .as_ref()
            .map_or(self.opts.initial_cca, |c| c.socket_cca())
    }
    fn allows_streams(&self, _: u16) -> Result<()> {
        // One prober, one controller: its CCA switches are set on every
        // stream (`streams::follow_cca`), its silences pause every stream.
        Ok(())
    }
    fn sending_gate(&self) -> Option<Arc<AtomicBool>> {
        self.opts.pattern.is_some().then(|| self.gate.clone())
    }
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        dcfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        let o = &self.opts;
        let ctl = self
            .ctl
            .take()
            .ok_or_else(|| Error::invalid("internal: the OPS controller runs once"))?;
        let rtt = match o.rtt {
            RttVia::Icmp => Ok(RttSource::Icmp(self.to.ip())),
            RttVia::UdpEcho => Ok(RttSource::UdpEcho(self.to)),
            RttVia::TcpInfo => {
                TcpInfoRttProbe::new(data).map(|p| RttSource::Custom(Box::new(p)) as RttSource)
            }
        };
        // Passive probing has no silent segments (only an active pattern's S
        // segments are silences, 000 §3.2), so it needs no TCP_NOTSENT_LOWAT
        // either: with 128 KiB unsent at most, a sender thread that the
        // scheduler delays by more than the time the socket takes to drain it
        // (1.3 ms at 800 Mbit/s) leaves the path idle
        // (docs/results/datapath.md, netlab). Active probing keeps it.
        let passive = o.pattern.is_none();
        let dcfg = DriverConfig {
            lead_in: o.lead_in,
            notsent_lowat_bytes: if passive {
                None
            } else {
                dcfg.notsent_lowat_bytes
            },
            chunk_bytes: if passive { 1 << 20 } else { dcfg.chunk_bytes },
            ..dcfg
        };
        let gate = (!passive).then(|| self.gate.clone());
        rtt.and_then(|rtt| OpsDriver::new(ctl, rtt, dcfg))
            .and_then(|mut drv| {
                if let Some(g) = gate {
                    drv.publish_sending(g);
                }
                drv.run_source(data, src, stop, on_event)
            })
    }
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
    let inner: Box<dyn Drive + '_> = match &opts.strategy {
        Strategy::Fixed(c) => match &opts.probe {
            None => Box::new(FixedCca(*c)),
            Some(p) => {
                let model = Arc::new(crate::probe::fastprob_model(p.model.as_deref())?);
                let notify: Box<dyn FnMut(&opsel::fastprob::StartReport) + '_> =
                    Box::new(|r| on_probe(r));
                let d = match &p.ab {
                    None => ProbeDrive::estimate(model, *c, notify, probe_out.clone()),
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
                    ..o.clone()
                },
                None => o.clone(),
            };
            let label = prior.as_ref().map(|p| p.decision.label.as_str());
            let (c, cl) = controller_with_classes(&o, label)?;
            classes = cl;
            Box::new(OpsDrive {
                ctl: Some(c),
                opts: o,
                to: opts.to,
                gate: Arc::new(AtomicBool::new(false)),
            })
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
    let mut cb = |e: &DriverEvent| {
        log.event(e);
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
    drop(cb);
    drop(drive);
    let r = r?;
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
            "end": r.driver.end, "stats": r.driver.stats, "fastprob": probe_report});
        let _ = writeln!(w, "{v}");
        let _ = w.flush();
    }
    Ok((r, probe_report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsel::ops::ProbeMode;

    fn shipped(rel: &str) -> PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(rel)
    }

    fn opts(pattern: Option<&str>, model: &str) -> OpsOpts {
        OpsOpts {
            pattern: pattern.map(|p| Pattern::parse(p).unwrap()),
            steady_s: 60.0,
            model: shipped(model),
            adaptive: false,
            early_exit: false,
            rtt: RttVia::UdpEcho,
            seed: 7,
            lead_in: true,
            jitter: 0.0,
            early_confidence: None,
            cycles: 1,
            extend_below: None,
            initial_cca: CcaName::CUBIC,
            dps: None,
            gate: None,
            gate_threshold: None,
        }
    }

    #[test]
    fn initial_cca_reaches_the_controller() {
        let mut o = opts(None, PASSIVE_MODEL);
        assert_eq!(controller(&o).unwrap().socket_cca(), CcaName::CUBIC);
        o.initial_cca = CcaName::BBR;
        let c = controller(&o).unwrap();
        assert_eq!(
            (c.config().initial_cca, c.socket_cca()),
            (CcaName::BBR, CcaName::BBR)
        );
    }

    #[test]
    fn cycles_reach_the_controller_and_are_validated() {
        let mut o = opts(Some("S5-C5-S5-B5"), ACTIVE_MODEL);
        assert_eq!(controller(&o).unwrap().config().cycles, 1);
        o.cycles = 3;
        let c = controller(&o).unwrap();
        assert_eq!(c.config().cycles, 3);
        o.early_exit = true; // min-sum checks at window boundaries
        assert_eq!(controller(&o).unwrap().config().cycles, 3);
        o.cycles = 0;
        let e = controller(&o).err().unwrap().to_string();
        assert!(e.contains("cycles = 0"), "{e}");
    }

    #[test]
    fn extend_below_gates_a_multi_window_probe_and_is_validated() {
        let mut o = opts(None, PASSIVE_MODEL);
        o.extend_below = Some(0.1);
        let e = controller(&o).err().unwrap().to_string();
        assert!(e.contains("needs cycles >= 2"), "{e}");
        o.cycles = 3;
        let c = controller(&o).unwrap();
        assert_eq!(c.config().cycles, 3);
        let p = c
            .config()
            .progressive
            .expect("the gate is progressive probing");
        assert_eq!((p.min_confidence, p.agree), (0.1, 1));
        o.extend_below = Some(1.5);
        let e = controller(&o).err().unwrap().to_string();
        assert!(e.contains("[0, 1]"), "{e}");
        o.extend_below = Some(f64::NAN);
        assert!(controller(&o).is_err());
        o.extend_below = Some(0.1);
        o.early_exit = true;
        let e = controller(&o).err().unwrap().to_string();
        assert!(e.contains("use one"), "{e}");
    }

    #[test]
    fn passive_ops_60_with_the_shipped_passive_model() {
        // 000 Table 6.2: passive probing, OPS-60, at the shipped model's w
        // (the pooled default has w = 40, the thesis w = 20).
        let o = opts(None, PASSIVE_MODEL);
        let c = controller(&o).unwrap();
        assert_eq!(c.config().mode, ProbeMode::Passive);
        assert_eq!(c.config().steady_ns, 60_000_000_000);
        let w = opsel::model::KnnModelFile::load(&o.model)
            .unwrap()
            .model
            .window();
        assert_eq!(c.window_len(), w);
        assert_eq!(c.config().steady_jitter, 0.0);
        assert!(c.config().adaptive.is_none() && c.config().progressive.is_none());
    }

    #[test]
    fn options_reach_the_controller_config() {
        let mut o = opts(Some("S5-C5-S5-B5"), ACTIVE_MODEL);
        o.adaptive = true;
        o.early_exit = true;
        o.jitter = 0.2;
        o.early_confidence = Some(0.3);
        let c = controller(&o).unwrap();
        assert_eq!(c.config().progressive.unwrap().min_confidence, 0.3);
        assert_eq!(c.config().steady_jitter, 0.2);
        assert_eq!(c.config().seed, 7);
        let a = c.config().adaptive.unwrap();
        assert_eq!((a.min_ns, a.max_ns), (30_000_000_000, 480_000_000_000));
        assert!(c.config().progressive.is_some());
        // A jitter outside [0, 0.5] is refused by the controller, naming the value.
        o.jitter = 0.9;
        let e = controller(&o).err().unwrap().to_string();
        assert!(e.contains("0.9"), "{e}");
    }

    #[test]
    fn probing_mode_must_match_the_model() {
        let e = controller(&opts(Some("S5-C5-S5-B5"), PASSIVE_MODEL))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("passive probing") && e.contains("active S5-C5-S5-B5"),
            "{e}"
        );
        let e = controller(&opts(None, ACTIVE_MODEL))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("active probing") && e.contains("passive"), "{e}");
    }
}
