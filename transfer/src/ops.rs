//! OPS on a transfer's data connection (000 Ch. 7, iPerfOPS): the RTT
//! prober, the controller over a model file, live CCA switching and the
//! probe gate, as a [`Drive`] for [`crate::send::send_on`]. What `opsel send
//! --ops` and the bindings' `send_file` with an `ops` section both run.
//!
//! * [`OpsSpec`]: the `ops` section of a [`crate::SendSpec`] (JSON, a Python
//!   dict, a Node object), every field optional, validated here with the
//!   defaults inside ([`OpsSpec::resolve`]);
//! * [`OpsOpts`]: the same resolved (a model file path, a parsed pattern,
//!   the gate file), what the CLI builds from its flags too;
//! * [`OpsDrive`]: the drive; [`OpsLog`] turns its events into the report's
//!   [`OpsReport`] (decisions made, CCAs used).
//!
//! Models are found by [`crate::models`]' rule: a path, else a shipped name
//! (`"default"`: the passive model, or the active one with a pattern) in
//! `$OPSEL_MODELS`, a checkout's `models/`, then the copies built into the
//! library.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use opsel::dps::{DpsPolicy, DpsSpec};
use opsel::ops::{
    AdaptiveSpec, AnyPolicy, Classifier, Controller, ControllerSpec, Event, ModeSpec, PolicySpec,
    ProgressiveSpec,
};
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::{
    run_auto, AutoChoice, AutoModel, DriverConfig, DriverEvent, DriverReport, OpsDriver, RttSource,
    Source,
};
use opsel::sys::linux::tcp_rtt::TcpInfoRttProbe;
use opsel::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::send::Drive;

/// The shipped models, as a checkout names them (for error messages).
pub const ACTIVE_MODEL: &str = "models/active-s5c5s5b5/model.json";
pub const PASSIVE_MODEL: &str = "models/passive/model.json";

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

impl RttVia {
    /// `"udp"`, `"icmp"` or `"tcp-info"` (`"tcp_info"` too); TCP_INFO only
    /// with passive probing.
    pub fn parse(s: &str, passive: bool) -> Result<RttVia> {
        match s {
            "udp" => Ok(RttVia::UdpEcho),
            "icmp" => Ok(RttVia::Icmp),
            // TCP_INFO readings need ACKs: an active pattern's silences would be lost samples.
            "tcp-info" | "tcp_info" if passive => Ok(RttVia::TcpInfo),
            "tcp-info" | "tcp_info" => Err(Error::invalid(
                "rtt tcp-info needs passive probing (`--pattern passive`; no pattern in a send spec): the data socket's RTT is only fresh while it sends, and an active pattern has silences",
            )),
            other => Err(Error::invalid(format!(
                "rtt {other:?}: use udp (the receiver's echo responder), icmp or tcp-info (the data socket's own RTT)"
            ))),
        }
    }
}

/// The `ops` section of a send spec: OPS chooses the CCA on the live data
/// connection. Every field may be left out (`{}`: passive probing with the
/// shipped passive model, its default steady time, CUBIC before the first
/// decision, RTT by UDP echo).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpsSpec {
    /// A model file (or a folder with `model.json`), or a shipped name
    /// (`"passive"`, `"passive-200ms"`, `"active-s5c5s5b5"`); `"default"`:
    /// the shipped model for the probing mode (`crate::models` says where it
    /// is looked for). `"auto"` or left out with passive probing: the 5-Hz
    /// model (`passive-200ms-two-stage`) while the path's RTTs fit it, else the 1 Hz
    /// `passive` (`ops_driver::AutoWatch` states the rule; the report's
    /// `auto_model` says which ran and why). Left out with a pattern: the
    /// shipped active model.
    pub model: Option<String>,
    /// An active probing pattern (000 §3.2, e.g. `"S5-C5-S5-B5"`), or
    /// `"passive"` / left out for passive probing.
    pub pattern: Option<String>,
    /// Steady time Y, s; 0 = probe once (default: 60 passive, 100 active).
    pub steady_s: Option<f64>,
    /// CCA before the first decision (default "cubic").
    pub initial_cca: Option<String>,
    /// A probe gate file, or `"default"`: the `gate.json` shipped beside the
    /// model (the passive model has one), 004 §8 B.1.
    pub gate: Option<String>,
    /// Override of the gate's threshold, a probability in [0, 1].
    pub gate_threshold: Option<f64>,
    /// RTT source: "udp" (default; the receiver answers on its listen
    /// port), "icmp" or "tcp-info" (passive probing only).
    pub rtt: Option<String>,
    /// Run the pattern's last segment before each probe (default true).
    pub lead_in: Option<bool>,
    /// Adaptive steady time (000 §6 future work).
    pub adaptive: bool,
    /// Progressive probing: end a probe early when confident.
    pub early_exit: bool,
    /// With `early_exit`: the 1-NN margin that ends a probe (default 0.8).
    pub early_confidence: Option<f64>,
    /// Windows per decision (default 1).
    pub cycles: Option<usize>,
    /// Margin-gated probing over `cycles` >= 2 windows.
    pub extend_below: Option<f64>,
    /// Randomise each steady time by up to ± this fraction, [0, 0.5].
    pub jitter: Option<f64>,
    /// Seed of the jitter PRNG (default 0).
    pub seed: Option<u64>,
    /// The decision policy: "stump" (default: BBR present → bbr, else
    /// cubic, 000 §4.1) or a table such as "B1-C1=bbr, *=cubic".
    pub policy: Option<String>,
    /// DPS (002) as the decision policy instead of the stump: a DPS spec.
    pub dps: Option<DpsSpec>,
}

/// OPS options resolved: what [`controller`] and [`OpsDrive`] take.
#[derive(Debug, Clone)]
pub struct OpsOpts {
    /// Active pattern, or `None` for passive probing.
    pub pattern: Option<Pattern>,
    /// Steady time Y in seconds (0 = probe once); `None`: the controller
    /// spec's default for the mode.
    pub steady_s: Option<f64>,
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
    /// The decision policy without DPS: "stump" or a table
    /// (`ops::PolicySpec`); `None`: the stump.
    pub policy: Option<String>,
    /// DPS (002) as the decision policy instead of the stump.
    pub dps: Option<DpsSpec>,
    /// A probe gate file (`ops::ProbeGate`, 004 §8 B.1): each probe ends at
    /// the first prefix check the gate accepts, else runs the window.
    pub gate: Option<PathBuf>,
    /// Override of the gate file's threshold.
    pub gate_threshold: Option<f64>,
    /// `model: "auto"`: `model` is the 1 Hz model and this says whether the
    /// 5-Hz model is tried first. `None`: the model was named.
    pub auto: Option<AutoPlan>,
}

/// What `model: "auto"` resolved to before the transfer.
#[derive(Debug, Clone, PartialEq)]
pub enum AutoPlan {
    /// Try this 5-Hz model first; `OpsOpts::model` is the fallback.
    Try5Hz(PathBuf),
    /// Only the 1 Hz model, for this reason (an option the 5-Hz model does
    /// not have, or the model is not installed).
    Only1Hz(String),
}

impl OpsSpec {
    /// The options, with the model and gate found and every value checked
    /// that can be checked without building the controller
    /// ([`OpsDrive::new`] checks the rest against the model).
    pub fn resolve(&self) -> Result<OpsOpts> {
        let pattern = match self.pattern.as_deref() {
            None => None,
            Some(p) if p.eq_ignore_ascii_case("passive") => None,
            Some(p) => Some(Pattern::parse(p)?),
        };
        let passive = pattern.is_none();
        match (self.policy.as_deref().map(str::trim), &self.dps) {
            (Some("callback"), _) => {
                return Err(Error::invalid(
                    "policy \"callback\" needs a function, which a send spec cannot carry; use \"stump\", a table such as \"B1-C1=bbr, *=cubic\", or dps",
                ))
            }
            (Some(p), Some(_)) => {
                return Err(Error::invalid(format!(
                    "policy {p:?} and dps exclude each other (DPS is the policy); drop one"
                )))
            }
            _ => {}
        }
        let default = if passive {
            crate::models::PASSIVE
        } else {
            crate::models::ACTIVE
        };
        let auto = self
            .model
            .as_deref()
            .is_none_or(|m| m == crate::models::AUTO);
        if auto && !passive && self.model.is_some() {
            return Err(Error::invalid(
                "model \"auto\" chooses between the passive models; with an active pattern name a model or leave it out",
            ));
        }
        let arg = self
            .model
            .as_deref()
            .filter(|m| *m != "default" && *m != crate::models::AUTO)
            .map(Path::new);
        let model = crate::models::as_path(&crate::models::locate(arg, default)?)?;
        let auto = (auto && passive).then(|| self.auto_plan());
        Ok(OpsOpts {
            rtt: RttVia::parse(self.rtt.as_deref().unwrap_or("udp"), passive)?,
            steady_s: self.steady_s,
            adaptive: self.adaptive,
            early_exit: self.early_exit,
            seed: self.seed.unwrap_or(0),
            lead_in: self.lead_in.unwrap_or(true),
            jitter: self.jitter.unwrap_or(0.0),
            early_confidence: self.early_confidence,
            cycles: self.cycles.unwrap_or(1),
            extend_below: self.extend_below,
            initial_cca: CcaName::new(self.initial_cca.as_deref().unwrap_or("cubic"))?,
            policy: self.policy.clone(),
            dps: self.dps.clone(),
            gate: resolve_gate(self.gate.as_deref(), &model)?,
            gate_threshold: self.gate_threshold,
            pattern,
            model,
            auto,
        })
    }

    /// `model: "auto"` with passive probing ([`auto_plan`]).
    fn auto_plan(&self) -> AutoPlan {
        auto_plan(
            self.gate.is_some(),
            self.early_exit,
            self.cycles.is_some_and(|c| c > 1) || self.extend_below.is_some(),
        )
    }
}

/// What `model: "auto"` does with passive probing: try the 5-Hz model
/// (`passive-200ms-two-stage`) unless an option is set that is trained or calibrated
/// on the 1 Hz model only (a probe gate, early exit, several windows per
/// decision) or the 5-Hz model is not installed.
pub fn auto_plan(gate: bool, early_exit: bool, multi_window: bool) -> AutoPlan {
    auto_plan_in(
        gate,
        early_exit,
        multi_window,
        &crate::models::search_roots(),
    )
}

fn auto_plan_in(
    gate: bool,
    early_exit: bool,
    multi_window: bool,
    roots: &[(PathBuf, &str)],
) -> AutoPlan {
    let only = if gate {
        Some("a probe gate is trained for the 1 Hz model")
    } else if early_exit {
        Some("early exit is calibrated on the 1 Hz model")
    } else if multi_window {
        Some("several windows per decision are calibrated on the 1 Hz model")
    } else {
        None
    };
    if let Some(why) = only {
        return AutoPlan::Only1Hz(why.to_string());
    }
    match crate::models::locate_in(None, crate::models::PASSIVE_5HZ, roots)
        .and_then(|s| crate::models::as_path(&s))
    {
        Ok(p) => AutoPlan::Try5Hz(p),
        Err(_) => AutoPlan::Only1Hz(format!(
            "the 5-Hz model {} is not installed (it is not built into the binary)",
            crate::models::PASSIVE_5HZ
        )),
    }
}

/// The probe gate `arg` names for the OPS model at `model`: `None` without
/// one; `default` is the `gate.json` shipped beside the model (the gate is
/// trained for that model's window and classes, 004 §8 B.1); anything else
/// is a gate file's path (checked when the controller is built).
pub fn resolve_gate(arg: Option<&str>, model: &Path) -> Result<Option<PathBuf>> {
    match arg {
        None => Ok(None),
        Some("default") => {
            let g = model.parent().map(|d| d.join("gate.json"));
            match g {
                Some(g) if g.is_file() => Ok(Some(g)),
                _ => Err(Error::invalid(format!(
                    "gate default: no gate.json beside the model {} (a gate ships with the passive model only, models/passive/gate.json); name a gate file",
                    model.display()
                ))),
            }
        }
        Some(p) => Ok(Some(PathBuf::from(p))),
    }
}

/// The options as the core's controller spec (field for field; the
/// defaults and checks are the spec's).
pub fn spec(o: &OpsOpts) -> ControllerSpec {
    ControllerSpec {
        mode: if o.pattern.is_some() {
            ModeSpec::Active
        } else {
            ModeSpec::Passive
        },
        pattern: o.pattern.as_ref().map(Pattern::to_string),
        steady_s: o.steady_s,
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
        policy: match (&o.dps, &o.policy) {
            (Some(_), _) => PolicySpec::Callback,
            (None, Some(p)) => PolicySpec::from(p.clone()),
            (None, None) => PolicySpec::default(),
        },
        ..ControllerSpec::default()
    }
}

/// The OPS controller a transfer runs: the spec of [`OpsOpts`] over its
/// model file, the stump or DPS as the policy.
pub type OpsController = Controller<Box<dyn Classifier + Send>, AnyPolicy<DpsPolicy>>;

/// Build the OPS controller from a model file (checked against the pattern).
pub fn controller(o: &OpsOpts) -> Result<OpsController> {
    controller_with_classes(o, None).map(|(c, _)| c)
}

/// [`controller`] and the model's class names. With DPS the driver hands the
/// policy each interval's TCP_INFO feedback (`Controller::handle_feedback`).
/// `prior`: a decision cache's class label for this destination; with it the
/// first probe may end early when a prefix agrees (`ops::PriorProbe`).
pub fn controller_with_classes(
    o: &OpsOpts,
    prior: Option<&str>,
) -> Result<(OpsController, Vec<String>)> {
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
            "{e}; pass a model trained for {} probing (shipped: {shipped})",
            o.pattern
                .as_ref()
                .map_or("passive".into(), |p| p.to_string()),
        ))
    })?;
    // Probe at the rate the model's references were sampled at (1 s for the
    // shipped models; a model trained on `passive-200ms` traces takes five
    // samples a second).
    spec.sample_period_s = mf.meta.probing.sample_interval_ms / 1e3;
    let dps = o.dps.as_ref().map(DpsPolicy::new).transpose()?;
    let mut c = spec
        .build(&mf, dps)
        .map_err(|e| Error::invalid(format!("{e} (model {})", o.model.display())))?;
    let classes = mf.model.classes().to_vec();
    // A label the model does not know (another model wrote the cache) is no prior.
    if let Some(i) = prior.and_then(|l| classes.iter().position(|c| c == l)) {
        c.set_prior_class(i)?;
    }
    Ok((c, classes))
}

/// Hears `model: "auto"`'s choice ([`OpsDrive::on_auto_choice`]).
pub type OnChoice = Box<dyn FnMut(&AutoChoice) + Send>;

/// OPS on stream 0 (passive probing without TCP_NOTSENT_LOWAT). With an
/// active pattern and more than one stream the driver mirrors its silences
/// into `gate`, and streams 1..N pause with it (`streams::spawn_senders`).
/// RTT samples go to the data connection's peer (the receiver answers UDP
/// echoes on its listen port).
pub struct OpsDrive {
    ctl: Option<OpsController>,
    /// `model: "auto"` trying the 5-Hz model: its controller (`ctl` is the
    /// 1 Hz fallback's).
    fast: Option<OpsController>,
    opts: OpsOpts,
    classes: Vec<String>,
    gate: Arc<AtomicBool>,
    choice: Option<AutoChoice>,
    on_choice: Option<OnChoice>,
}

impl OpsDrive {
    /// The drive with its controller built (a bad model, pattern or gate
    /// fails here, before any connection). `prior`: a decision cache's class
    /// label for this destination (see [`controller_with_classes`]). With
    /// `model: "auto"` both passive models' controllers are built.
    pub fn new(opts: OpsOpts, prior: Option<&str>) -> Result<OpsDrive> {
        let (c, classes) = controller_with_classes(&opts, prior)?;
        let fast = match &opts.auto {
            Some(AutoPlan::Try5Hz(m)) => {
                let o = OpsOpts {
                    model: m.clone(),
                    ..opts.clone()
                };
                let (f, fc) = controller_with_classes(&o, prior)?;
                if fc != classes {
                    return Err(Error::invalid(format!(
                        "model auto: {} and {} name different classes; name one with --model",
                        m.display(),
                        opts.model.display()
                    )));
                }
                Some(f)
            }
            _ => None,
        };
        Ok(OpsDrive {
            ctl: Some(c),
            fast,
            opts,
            classes,
            gate: Arc::new(AtomicBool::new(false)),
            choice: None,
            on_choice: None,
        })
    }

    /// The model's class names (events carry class indices).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Hear `model: "auto"`'s choice as it is made (a progress line).
    pub fn on_auto_choice(&mut self, f: OnChoice) {
        self.on_choice = Some(f);
    }

    /// Which model `model: "auto"` ran with and why (after the transfer).
    pub fn auto_choice(&self) -> Option<&AutoChoice> {
        self.choice.as_ref()
    }

    fn rtt_source(&self, data: &TcpStream) -> Result<RttSource> {
        let to = data
            .peer_addr()
            .map_err(|e| Error::io("the data connection's peer address", e))?;
        match self.opts.rtt {
            RttVia::Icmp => Ok(RttSource::Icmp(to.ip())),
            RttVia::UdpEcho => Ok(RttSource::UdpEcho(to)),
            RttVia::TcpInfo => {
                TcpInfoRttProbe::new(data).map(|p| RttSource::Custom(Box::new(p)) as RttSource)
            }
        }
    }
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
        let ctl = self
            .ctl
            .take()
            .ok_or_else(|| Error::invalid("internal: the OPS controller runs once"))?;
        // Passive probing has no silent segments (only an active pattern's S
        // segments are silences, 000 §3.2), so it needs no TCP_NOTSENT_LOWAT
        // either: with 128 KiB unsent at most, a sender thread that the
        // scheduler delays by more than the time the socket takes to drain it
        // (1.3 ms at 800 Mbit/s) leaves the path idle
        // (docs/results/datapath.md, netlab). Active probing keeps it.
        let passive = self.opts.pattern.is_none();
        let dcfg = DriverConfig {
            lead_in: self.opts.lead_in,
            ..dcfg
        };
        let dcfg = if passive {
            crate::send::without_silences(dcfg)
        } else {
            dcfg
        };
        if let Some(fast) = self.fast.take() {
            let fast = OpsDriver::new(fast, self.rtt_source(data)?, dcfg)?;
            let slow = OpsDriver::new(ctl, self.rtt_source(data)?, dcfg)?;
            let on_choice = &mut self.on_choice;
            let mut made: Option<AutoChoice> = None;
            let r = run_auto(fast, slow, data, src, stop, on_event, &mut |c| {
                made = Some(c.clone());
                if let Some(f) = on_choice.as_mut() {
                    f(c)
                }
            });
            self.choice = made;
            return r.map(|(r, _)| r);
        }
        if let Some(AutoPlan::Only1Hz(why)) = &self.opts.auto {
            let c = AutoChoice {
                model: AutoModel::Slow,
                reason: format!("1 Hz model: {why}"),
                switched_after_ns: None,
                base_rtt_ms: None,
            };
            if let Some(f) = self.on_choice.as_mut() {
                f(&c)
            }
            self.choice = Some(c);
        }
        let gate = (!passive).then(|| self.gate.clone());
        self.rtt_source(data)
            .and_then(|rtt| OpsDriver::new(ctl, rtt, dcfg))
            .and_then(|mut drv| {
                if let Some(g) = gate {
                    drv.publish_sending(g);
                }
                drv.run_source(data, src, stop, on_event)
            })
    }
}

/// One OPS decision as the report lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpsDecision {
    /// The background mix recognised (the model's class name).
    pub class: String,
    /// Its 1-NN confidence, [0, 1].
    pub confidence: f64,
    /// RTT samples the probe took.
    pub samples: usize,
    /// The probe ended early (progressive probing, prior or gate).
    pub early: bool,
    /// The CCA the policy chose for it.
    pub cca: String,
    /// Seconds since the transfer's first CCA was set.
    pub at_s: f64,
}

/// What OPS did during a transfer: the decisions and the CCAs used.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OpsReport {
    /// Every decision, in order.
    pub decisions: Vec<OpsDecision>,
    /// The CCAs set on the data connection, in order (the first is the
    /// initial CCA; repeats are kept: a probe's segments switch too).
    pub ccas: Vec<String>,
    /// Probes that ended without a decision (too few samples, a failed policy).
    pub failed_decisions: u64,
    /// With `model: "auto"`: which passive model ran and why.
    pub auto_model: Option<AutoChoice>,
}

/// Builds an [`OpsReport`] from a drive's events (one event per second at
/// most, not a hot path).
#[derive(Debug, Default)]
pub struct OpsLog {
    classes: Vec<String>,
    t0: Option<u64>,
    pending: Option<(String, f64, usize, bool)>,
    report: OpsReport,
}

impl OpsLog {
    /// A log naming classes by `classes` (the model's).
    pub fn new(classes: Vec<String>) -> OpsLog {
        OpsLog {
            classes,
            ..OpsLog::default()
        }
    }

    /// Take one event in.
    pub fn event(&mut self, e: &DriverEvent) {
        match e {
            DriverEvent::CcaSet { cca, at_ns, .. } => {
                self.t0.get_or_insert(*at_ns);
                self.report.ccas.push(cca.to_string());
            }
            DriverEvent::Ops(Event::Classified {
                classified,
                samples,
                early,
                ..
            }) => {
                let class = self
                    .classes
                    .get(classified.class_index)
                    .cloned()
                    .unwrap_or_else(|| classified.mix.to_string());
                self.pending = Some((
                    class,
                    classified.confidence.clamp(0.0, 1.0),
                    *samples,
                    *early,
                ));
            }
            DriverEvent::Ops(Event::Selected { cca, at_ns, .. }) => {
                if let Some((class, confidence, samples, early)) = self.pending.take() {
                    let at_s = at_ns.saturating_sub(self.t0.unwrap_or(*at_ns)) as f64 / 1e9;
                    self.report.decisions.push(OpsDecision {
                        class,
                        confidence,
                        samples,
                        early,
                        cca: cca.to_string(),
                        at_s,
                    });
                }
            }
            DriverEvent::Ops(Event::DecisionFailed { .. } | Event::ProbeIncomplete { .. }) => {
                self.pending = None;
                self.report.failed_decisions += 1;
            }
            _ => {}
        }
    }

    /// The report so far.
    pub fn report(&self) -> &OpsReport {
        &self.report
    }

    /// The report.
    pub fn into_report(self) -> OpsReport {
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsel::ops::ProbeMode;

    fn shipped(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
    }

    fn opts(pattern: Option<&str>, model: &str) -> OpsOpts {
        OpsOpts {
            pattern: pattern.map(|p| Pattern::parse(p).unwrap()),
            steady_s: Some(60.0),
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
            policy: None,
            dps: None,
            gate: None,
            gate_threshold: None,
            auto: None,
        }
    }

    fn ops(json: &str) -> Result<OpsOpts> {
        serde_json::from_str::<OpsSpec>(json)
            .map_err(|e| Error::invalid(e.to_string()))?
            .resolve()
    }

    #[test]
    fn an_empty_spec_is_passive_with_the_shipped_model_and_the_core_defaults() {
        let o = ops("{}").unwrap();
        assert!(o.pattern.is_none());
        assert_eq!(o.rtt, RttVia::UdpEcho);
        assert!(o.lead_in && o.gate.is_none() && o.steady_s.is_none());
        let d = OpsDrive::new(o, None).unwrap();
        let c = d.ctl.as_ref().unwrap();
        assert_eq!(c.config().mode, ProbeMode::Passive);
        // The core's default Y for passive probing (000 Table 6.2, OPS-60).
        assert_eq!(c.config().steady_ns, 60_000_000_000);
        assert_eq!(d.first_cca(), CcaName::CUBIC);
        assert!(!d.classes().is_empty());
        // "default" names the same model, and a pattern picks the active one.
        assert_eq!(
            ops(r#"{"model":"default"}"#).unwrap().model,
            ops("{}").unwrap().model
        );
        let a = ops(r#"{"pattern":"S5-C5-S5-B5"}"#).unwrap();
        assert!(a.pattern.is_some() && a.model.ends_with("active-s5c5s5b5/model.json"));
        let d = OpsDrive::new(a, None).unwrap();
        assert_eq!(d.ctl.as_ref().unwrap().config().steady_ns, 100_000_000_000);
    }

    #[test]
    fn passive_ops_defaults_to_auto_and_a_named_model_does_not() {
        // Left out or "auto": the 1 Hz model as `model`, and a plan.
        for j in ["{}", r#"{"model":"auto"}"#] {
            let o = ops(j).unwrap();
            assert!(o.model.ends_with("passive/model.json"), "{j}");
            assert!(o.auto.is_some(), "{j}");
        }
        // The plan tries the 5-Hz model where it is installed (here: the
        // checkout's models/), else keeps the 1 Hz one and says why.
        let checkout = [(shipped("models"), "the checkout")];
        let plan = auto_plan_in(false, false, false, &checkout);
        let AutoPlan::Try5Hz(m) = &plan else {
            panic!("no 5-Hz model in the checkout: {plan:?}")
        };
        assert!(m.ends_with("passive-200ms-two-stage/model.json"), "{m:?}");
        match auto_plan_in(false, false, false, &[]) {
            AutoPlan::Only1Hz(why) => assert!(why.contains("not installed"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Both controllers are built, at their models' periods.
        let o = OpsOpts {
            auto: Some(plan),
            ..ops("{}").unwrap()
        };
        let d = OpsDrive::new(o, None).unwrap();
        let fast = d.fast.as_ref().unwrap().config().sample_period_ns;
        let slow = d.ctl.as_ref().unwrap().config().sample_period_ns;
        assert_eq!((fast, slow), (200_000_000, 1_000_000_000));
        // Named models run as before.
        for j in [r#"{"model":"default"}"#, r#"{"model":"passive"}"#] {
            let o = ops(j).unwrap();
            assert_eq!(o.auto, None, "{j}");
            assert!(OpsDrive::new(o, None).unwrap().fast.is_none());
        }
        // Options calibrated on the 1 Hz model keep it, and say why.
        for (j, why) in [
            (r#"{"gate":"default"}"#, "probe gate"),
            (r#"{"early_exit":true}"#, "early exit"),
            (r#"{"cycles":3}"#, "several windows"),
        ] {
            match ops(j).unwrap().auto {
                Some(AutoPlan::Only1Hz(m)) => assert!(m.contains(why), "{j}: {m}"),
                other => panic!("{j}: {other:?}"),
            }
        }
        // An active pattern has no auto; left out it is the active model.
        let e = ops(r#"{"model":"auto","pattern":"S5-C5-S5-B5"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("passive models"), "{e}");
        assert_eq!(ops(r#"{"pattern":"S5-C5-S5-B5"}"#).unwrap().auto, None);
    }

    #[test]
    fn the_default_gate_is_the_shipped_one_beside_the_model() {
        let o = ops(r#"{"gate":"default","gate_threshold":0.9,"initial_cca":"bbr"}"#).unwrap();
        assert!(o.gate.as_ref().unwrap().ends_with("passive/gate.json"));
        let d = OpsDrive::new(o, None).unwrap();
        assert!(d.ctl.as_ref().unwrap().config().gate.is_some());
        assert_eq!(d.first_cca(), CcaName::BBR);
    }

    #[test]
    fn bad_ops_specs_are_clear_errors() {
        let e = |j: &str| match ops(j).and_then(|o| OpsDrive::new(o, None)) {
            Ok(_) => panic!("{j} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e(r#"{"model":"nope"}"#).contains("\"nope\" not found"));
        assert!(e(r#"{"pattern":"X9"}"#).contains("X9"));
        assert!(e(r#"{"rtt":"carrier-pigeon"}"#).contains("carrier-pigeon"));
        assert!(e(r#"{"rtt":"tcp-info","pattern":"S5-C5-S5-B5"}"#).contains("passive"));
        assert!(e(r#"{"initial_cca":"warp drive"}"#).contains("warp drive"));
        assert!(e(r#"{"pattern":"S5-C5-S5-B5","gate":"default"}"#).contains("no gate.json"));
        assert!(e(r#"{"gate":"default","gate_threshold":2}"#).contains("probability"));
        assert!(e(r#"{"jitter":0.9}"#).contains("0.9"));
        assert!(e(r#"{"policy":"callback"}"#).contains("function"));
        assert!(
            e(r#"{"policy":"B1-C1 bbr"}"#).contains("B1-C1 bbr"),
            "{}",
            e(r#"{"policy":"B1-C1 bbr"}"#)
        );
        assert!(e(r#"{"steady_s":-1}"#).contains("steady_s"));
        // The passive model refuses an active pattern (000 §10 gap 2).
        assert!(e(r#"{"pattern":"S5-C5-S5-B5","model":"passive"}"#).contains("passive probing"));
        assert!(serde_json::from_str::<OpsSpec>(r#"{"modle":"x"}"#)
            .unwrap_err()
            .to_string()
            .contains("modle"));
    }

    #[test]
    fn the_log_pairs_classifications_with_selections() {
        use opsel::ops::{Classified, Phase};
        let mut log = OpsLog::new(vec!["a".into(), "b".into()]);
        let set = |cca, at_ns| DriverEvent::CcaSet {
            cca,
            at_ns,
            latency_ns: None,
        };
        log.event(&set(CcaName::CUBIC, 1_000_000_000));
        log.event(&DriverEvent::Ops(Event::Phase {
            phase: Phase::Steady,
            cycle: 0,
            at_ns: 2,
        }));
        let classified = DriverEvent::Ops(Event::Classified {
            classified: Classified {
                mix: opsel::mix::Mix::parse("B1").unwrap(),
                class_index: 1,
                confidence: 0.7,
                distance: 1.0,
            },
            samples: 40,
            early: false,
            at_ns: 41_000_000_000,
        });
        log.event(&classified);
        log.event(&DriverEvent::Ops(Event::Selected {
            cca: CcaName::BBR,
            steady_ns: None,
            at_ns: 41_000_000_000,
        }));
        log.event(&set(CcaName::BBR, 41_000_000_000));
        // A selection without a classification (none pending) is no decision.
        log.event(&DriverEvent::Ops(Event::Selected {
            cca: CcaName::BBR,
            steady_ns: None,
            at_ns: 50,
        }));
        let r = log.into_report();
        assert_eq!(r.ccas, vec!["cubic", "bbr"]);
        assert_eq!(r.decisions.len(), 1);
        let d = &r.decisions[0];
        assert_eq!((d.class.as_str(), d.cca.as_str()), ("b", "bbr"));
        assert_eq!((d.samples, d.at_s), (40, 40.0));
    }

    #[test]
    fn passive_ops_60_with_the_shipped_passive_model() {
        // 000 Table 6.2: passive probing, OPS-60, at the shipped model's w.
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
