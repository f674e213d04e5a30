//! `opsel send`: send a file (from an offset) over one control and one data
//! connection, with a fixed CCA or with OPS choosing the CCA on the live data
//! connection (000 Ch. 7, iPerfOPS), then wait until the receiver confirms
//! every byte and its digest (`hashing.rs`: XXH3-128, BLAKE3, or keyed
//! BLAKE3 with a pre-shared key).

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use opsel::dps::DpsPolicy;
use opsel::flows::decision_cache::{CacheSpec, Decision, DecisionCache};
use opsel::ops::{
    AdaptiveSpec, AnyPolicy, Classifier, Controller, ControllerSpec, Event, Labeled, ModeSpec,
    PolicySpec, ProgressiveSpec,
};
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::{
    send_fixed_source, DriverConfig, DriverEvent, DriverReport, FileSource, OpsDriver, RttSource,
    Source,
};
use opsel::sys::linux::tcp_rtt::TcpInfoRttProbe;
use opsel::{Error, Result};
use serde_json::{json, Value};

use super::hashing::{hash_state, FollowHasher, HashSpec};
use super::proto::{self, HashAlgo, Key, LineReader};
use super::{random, write_line};

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
    /// The whole-transfer check; `None`: [`default_hash`].
    pub hash: Option<HashAlgo>,
}

/// The check used when none is asked for: keyed BLAKE3 when both sides hold
/// a pre-shared key (tamper-evident), else XXH3-128. Without a key the
/// control connection is not authenticated, so whoever can change the data
/// on the path can change the digest in the completion message too: BLAKE3
/// would then guard only against accidents, which XXH3-128 detects at a
/// fraction of the CPU (docs/results/datapath.md, "The integrity guarantee").
pub fn default_hash(authenticated: bool) -> HashAlgo {
    if authenticated {
        HashAlgo::Blake3
    } else {
        HashAlgo::Xxh3
    }
}

/// Outcome of a confirmed transfer.
#[derive(Debug, Clone)]
pub struct SendReport {
    pub driver: DriverReport,
    pub offset: u64,
    /// The receiver's whole file equals the source's first `file_size` bytes.
    pub file_identical: bool,
    /// The receiver holds the whole file now, renamed into place.
    pub complete: bool,
    pub file_size: u64,
    /// The check used ("xxh3", "blake3", "blake3-keyed").
    pub hash: &'static str,
    /// Its digest of the range sent (hex), as the receiver confirmed it.
    pub digest: String,
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
    offset: u64,
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
            m.insert("offset".into(), (self.offset + total_bytes).into());
            m.insert("rtt_ms".into(), self.last_rtt.into());
        }
        let _ = writeln!(w, "{}", Value::Object(m));
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

fn open_log(log: &Option<(PathBuf, String)>, offset: u64) -> Result<Log> {
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
        offset,
        last_rtt: None,
        classes: Vec::new(),
    })
}

/// Run one transfer. `on_event` sees every driver event (progress bars,
/// demo accounting); `stop` ends the sending early (then the transfer is
/// completed and confirmed up to the bytes sent, and the receiver keeps
/// them as a verified prefix for a resume).
pub fn run(
    opts: &SendOpts,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<SendReport> {
    let path: &Path = &opts.file;
    let file = std::fs::File::open(path)
        .map_err(|e| Error::io(format!("open {} to send it", path.display()), e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
        .len();
    if let Some(o) = opts.offset.filter(|&o| o > size) {
        return Err(Error::invalid(format!(
            "--offset {o} is past the end of {} ({size} bytes)",
            path.display()
        )));
    }
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let n_streams = opts.streams;
    if !(1..=proto::MAX_STREAMS).contains(&u64::from(n_streams)) {
        return Err(Error::invalid(format!(
            "--streams {n_streams}: use 1 to {}",
            proto::MAX_STREAMS
        )));
    }
    if n_streams > 1 {
        if let Strategy::Ops(o) = &opts.strategy {
            if o.pattern.is_some() {
                return Err(Error::invalid(
                    "--streams > 1 works with a fixed --cca or with --ops --pattern passive: an active pattern's silent segments would have to pause every stream",
                ));
            }
        }
        if opts.time_s.is_some() {
            return Err(Error::invalid(
                "--streams > 1 sends whole segments: --time would leave gaps; use one stream",
            ));
        }
        if let Strategy::Dps(_) = &opts.strategy {
            // DPS learns one connection's utility and sets its CCA directly.
            return Err(Error::invalid(
                "--streams > 1 works with a fixed --cca or with --ops: DPS (--dps without --ops) runs on one stream",
            ));
        }
    }
    // Build the controller before connecting, so a bad model fails fast.
    let mut cache = match (&opts.decision_cache, &opts.strategy) {
        (Some(p), Strategy::Ops(_)) => Some(DecisionCache::load_or_new(p, CacheSpec::default())?),
        _ => None,
    };
    let ctl = match &opts.strategy {
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
            Some(controller_with_classes(&o, label)?)
        }
        Strategy::Fixed(_) | Strategy::Dps(_) => None,
    };
    // A managed DPS flow is admitted by the fairness manager before it connects.
    let mut dps_flow = match &opts.strategy {
        Strategy::Dps(d) => Some(crate::dps_send::join(d)?),
        _ => None,
    };
    let connect = |what: &str| {
        TcpStream::connect_timeout(&opts.to, Duration::from_secs(10)).map_err(|e| {
            Error::io(
                format!(
                    "connect the {what} connection to {} (is `opsel recv` or `opsel serve` listening there?)",
                    opts.to
                ),
                e,
            )
        })
    };
    let ctl_sock = connect("control")?;
    // The handshake is bounded: a receiver that says nothing is not waited for.
    ctl_sock
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| Error::io("control read timeout", e))?;
    let mut ctl_w = ctl_sock
        .try_clone()
        .map_err(|e| Error::io("clone control socket", e))?;
    let mut ctl_r = LineReader::new(ctl_sock);
    let read = |r: &mut LineReader<TcpStream>, what: &str| -> Result<Vec<u8>> {
        match r.read_line(proto::MAX_LINE, |_| Ok(())) {
            Ok(Some(l)) => Ok(l),
            Ok(None) => Err(Error::invalid(format!(
                "the receiver closed the control connection before its {what}"
            ))),
            Err(e) => Err(Error::io(format!("read the receiver's {what}"), e)),
        }
    };
    let proto_err = |e: proto::ProtoError| Error::invalid(e.0);
    let nonce: [u8; proto::NONCE_LEN] = random();
    write_line(&mut ctl_w, &proto::hello_msg(&nonce))?;
    let ch = proto::parse_challenge(&read(&mut ctl_r, "challenge")?).map_err(|e| {
        if e.0.contains("version 1") {
            Error::invalid(format!(
                "{e}; the receiver runs an older opsel (protocol version 1): upgrade it"
            ))
        } else {
            proto_err(e)
        }
    })?;
    let mac = match (&opts.key, ch.auth) {
        (Some(k), _) => Some(k.sender_mac(&ch.challenge, &nonce)),
        (None, true) => {
            return Err(Error::invalid(
                "the receiver requires a pre-shared key: pass --key-file FILE or set OPSEL_KEY",
            ))
        }
        (None, false) => None,
    };
    // Keyed BLAKE3 whenever the receiver authenticates us (its key is ours);
    // xxh3 is not offered then, so a keyed transfer is always tamper-evident.
    let hash = match (opts.hash, &opts.key, ch.auth) {
        (Some(HashAlgo::Xxh3), Some(_), true) => {
            return Err(Error::invalid(
                "--hash xxh3 with a pre-shared key: keyed transfers are checked with keyed BLAKE3 (xxh3 is not tamper-evident); drop --hash or use --hash blake3",
            ))
        }
        (_, Some(k), true) => HashSpec {
            algo: HashAlgo::Blake3,
            key: Some(k.data_key(&ch.challenge, &nonce)),
        },
        (h, _, _) => HashSpec::plain(h.unwrap_or(default_hash(false))),
    };
    let req = proto::Request {
        mac,
        size,
        offset: if opts.resume {
            None
        } else {
            Some(opts.offset.unwrap_or(0))
        },
        name: Some(name),
        streams: n_streams,
        hash: hash.algo,
    };
    write_line(&mut ctl_w, &proto::request_msg(&req))?;
    let acc = proto::parse_accept(&read(&mut ctl_r, "answer")?, hash.algo).map_err(proto_err)?;
    if let Some(k) = &opts.key {
        // Mutual: the file goes only to a receiver that holds the key too.
        let ok = acc
            .proof
            .as_ref()
            .is_some_and(|p| k.check_receiver(&nonce, &ch.challenge, p));
        if !ok {
            return Err(Error::invalid(
                "the receiver did not prove it holds the pre-shared key; nothing was sent (is it the receiver you meant, started with the same key?)",
            ));
        }
    }
    let offset = acc.offset;
    if offset > size {
        return Err(Error::invalid(format!(
            "the receiver asks to resume at byte {offset}, past the end of {} ({size} bytes)",
            path.display()
        )));
    }
    // Resume only onto a prefix identical to ours.
    // (With this transfer's hash and key: the prefix may have been written
    // by a transfer that used another.)
    let (n, prefix_state) = hash_state(path, 0, Some(offset), &hash)?;
    if n != offset || prefix_state.finalize() != acc.prefix_digest {
        return Err(Error::invalid(format!(
            "the receiver's first {offset} bytes differ from {}'s; nothing was sent. Start over with --offset 0 (the receiver then replaces its partial file)",
            path.display()
        )));
    }
    if acc.streams != n_streams {
        return Err(Error::invalid(format!(
            "the receiver answered with {} data streams for the {n_streams} asked for",
            acc.streams
        )));
    }
    let mut data = connect("data")?;
    data.write_all(&proto::preamble(&acc.token, 0))
        .map_err(|e| Error::io("send the data connection's preamble", e))?;
    // Streams 1..N (streams.rs): stream 0 carries the first segment below.
    let extra = (1..n_streams)
        .map(|i| {
            let mut c = connect("data")?;
            c.write_all(&proto::preamble(&acc.token, i))
                .map_err(|e| Error::io("send a data connection's preamble", e))?;
            Ok(c)
        })
        .collect::<Result<Vec<TcpStream>>>()?;
    let (seg0_start, seg0_end) = proto::stripe(offset, size, n_streams, 0);

    let dcfg = DriverConfig {
        interval_ns: (opts.interval_s.max(0.01) * 1e9) as u64,
        time_limit_ns: opts.time_s.map(|t| (t.max(0.0) * 1e9) as u64),
        ..DriverConfig::default()
    };
    let mut log = open_log(&opts.log, offset)?;
    let ctl = ctl.map(|(c, classes)| {
        log.classes = classes;
        c
    });
    let classes = log.classes.clone();
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
    // The data goes out with sendfile(2) (no user-space copy); BLAKE3 runs
    // on a second thread over the same page-cache bytes, following the
    // position the pump has handed to the socket (docs/results/datapath.md).
    let progress = Arc::new(AtomicU64::new(offset));
    let (hasher, ahead) = if n_streams == 1 {
        let h = FollowHasher::start(
            path.to_path_buf(),
            offset,
            prefix_state,
            hash,
            progress.clone(),
        )?;
        (Some(h), None)
    } else {
        // Striped: the segments go out concurrently, so the hash reads the
        // whole range ahead of them; it is used only when every segment was
        // sent whole.
        let h = super::streams::hash_ahead(path.to_path_buf(), offset, size, prefix_state, hash);
        (None, Some(h))
    };
    let mut src =
        Source::File(FileSource::new(file.as_fd(), seg0_start, seg0_end)?.with_progress(&progress));
    // The CCA the other streams start with; every later one follows stream 0.
    let first_cca = match (&ctl, &opts.strategy) {
        (Some(c), _) => c.socket_cca(),
        (None, Strategy::Fixed(c)) => *c,
        (None, Strategy::Ops(o)) => o.initial_cca,
        // DPS runs on one stream (refused with --streams > 1).
        (None, Strategy::Dps(_)) => CcaName::CUBIC,
    };
    let extra_cfg = DriverConfig {
        notsent_lowat_bytes: None,
        chunk_bytes: 1 << 20,
        ..dcfg
    };
    let (driven, others) = std::thread::scope(|sc| {
        let senders = super::streams::spawn_senders(
            sc, &extra, path, offset, size, first_cca, extra_cfg, stop,
        );
        let mut cb = |e: &DriverEvent| {
            super::streams::follow_cca(&extra, e);
            cb(e)
        };
        let driven = match (ctl, &opts.strategy) {
            (Some(ctl), Strategy::Ops(o)) => {
                let rtt = match o.rtt {
                    RttVia::Icmp => Ok(RttSource::Icmp(opts.to.ip())),
                    RttVia::UdpEcho => Ok(RttSource::UdpEcho(opts.to)),
                    RttVia::TcpInfo => TcpInfoRttProbe::new(&data)
                        .map(|p| RttSource::Custom(Box::new(p)) as RttSource),
                };
                // Passive probing has no silent segments (only an active
                // pattern's S segments are silences, 000 §3.2), so it needs no
                // TCP_NOTSENT_LOWAT either: with 128 KiB unsent at most, a sender
                // thread that the scheduler delays by more than the time the
                // socket takes to drain it (1.3 ms at 800 Mbit/s) leaves the path
                // idle (docs/results/datapath.md, netlab). Active probing keeps it.
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
                rtt.and_then(|rtt| OpsDriver::new(ctl, rtt, dcfg))
                    .and_then(|mut drv| drv.run_source(&data, &mut src, stop, &mut cb))
            }
            (_, Strategy::Fixed(cca)) => {
                // A fixed CCA has no silent segments to start on time, so the
                // send buffer may stay full (no TCP_NOTSENT_LOWAT: fewer wake-ups)
                // and the file is read in larger pieces.
                let dcfg = DriverConfig {
                    notsent_lowat_bytes: None,
                    chunk_bytes: 1 << 20,
                    ..dcfg
                };
                send_fixed_source(&data, &mut src, *cca, &dcfg, stop, &mut cb)
            }
            (_, Strategy::Dps(d)) => {
                let dcfg = DriverConfig {
                    notsent_lowat_bytes: None,
                    ..dcfg
                };
                let flow = dps_flow.take().expect("joined before connecting");
                let log = opts.log.as_ref().map(|(p, _)| crate::dps_send::log_path(p));
                crate::dps_send::send(
                    &data,
                    &mut src,
                    flow,
                    &dcfg,
                    stop,
                    d.until_learnt,
                    log.as_deref(),
                    &mut cb,
                )
                .map(|(r, _)| r)
            }
            _ => unreachable!("controller built for OPS only"),
        };
        let others: Vec<Result<DriverReport>> = senders
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a data stream's thread failed")))
            })
            .collect();
        (driven, others)
    });
    // A striped transfer succeeds only with every segment sent whole.
    let driven = driven.and_then(|mut d| {
        let mut total = d.bytes_sent;
        for (i, r) in others.into_iter().enumerate() {
            let r = r.map_err(|e| Error::invalid(format!("data stream {}: {e}", i + 1)))?;
            total += r.bytes_sent;
        }
        if n_streams > 1 && total != size - offset {
            return Err(Error::invalid(format!(
                "stopped after {total} of {} bytes over {n_streams} streams",
                size - offset
            )));
        }
        d.bytes_sent = total;
        Ok(d)
    });
    let driver = match driven {
        Ok(d) => d,
        Err(e) => {
            // The receiver says why it dropped us (disk full, limit) on the control connection.
            let _ = ctl_r
                .get_ref()
                .set_read_timeout(Some(Duration::from_secs(2)));
            let reason = ctl_r
                .read_line(proto::MAX_LINE, |_| Ok(()))
                .ok()
                .flatten()
                .and_then(|l| proto::parse_line(&l).ok())
                .and_then(|m| proto::refusal(&m));
            return Err(match reason {
                Some(r) => Error::invalid(format!("the receiver dropped the transfer: {r}")),
                None => Error::invalid(format!(
                    "{e}; the receiver keeps what arrived: resume with `opsel send --resume`"
                )),
            });
        }
    };
    // What OPS decided toward this prefix, for the next transfer there.
    if let (Some(c), Some(path), Some(d)) = (cache.as_mut(), &opts.decision_cache, decided) {
        c.record(opts.to.ip(), d)?;
        c.save(path, unix_now_s())?;
    }
    if let Some(w) = log.out.as_mut() {
        let _ = w.flush();
    }
    // Last byte written: close our side so the receiver sees EOF after it.
    data.shutdown(Shutdown::Write)
        .map_err(|e| Error::io("shut down the data connection", e))?;
    let end = offset + driver.bytes_sent;
    let (hashed, range_sha, file_sha) = match (hasher, ahead) {
        (Some(h), _) => h.finish(end)?,
        (None, Some(h)) => h
            .join()
            .unwrap_or_else(|_| Err(Error::invalid("the hashing thread failed")))?,
        (None, None) => unreachable!("one of the two hashers runs"),
    };
    if hashed != end {
        return Err(Error::invalid(format!(
            "{} changed while it was sent: could re-read only {hashed} of {end} bytes",
            path.display(),
        )));
    }
    write_line(
        &mut ctl_w,
        &proto::end_msg(&proto::End {
            sent: driver.bytes_sent,
            digest: range_sha,
            file_digest: file_sha,
        }),
    )?;
    // The receiver answers once every byte is on its disk and hashed.
    ctl_r
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(600)))
        .map_err(|e| Error::io("control read timeout", e))?;
    let conf =
        proto::parse_confirm(&read(&mut ctl_r, "confirmation")?, hash.algo).map_err(proto_err)?;
    let sha = range_sha.hex();
    let confirmed = conf.ok && conf.received == driver.bytes_sent && conf.digest == range_sha;
    let file_identical = confirmed && conf.file_size == end && conf.file_digest == file_sha;
    if let Some(w) = log.out.as_mut() {
        let v = json!({"run": log.label, "kind": "done", "bytes": driver.bytes_sent,
            "next_offset": end, "confirmed": confirmed, "complete": conf.complete,
            "hash": hash.label(), "digest": sha, "file_identical": file_identical, "file_size": conf.file_size,
            "end": driver.end, "stats": driver.stats});
        let _ = writeln!(w, "{v}");
        let _ = w.flush();
    }
    if !confirmed {
        return Err(Error::invalid(format!(
            "the receiver did not confirm the transfer: it has {} of {} bytes, {} {} vs ours {sha}; it kept its verified prefix: resend with --resume",
            conf.received,
            driver.bytes_sent,
            hash.label(),
            conf.digest.hex(),
        )));
    }
    Ok(SendReport {
        driver,
        offset,
        file_identical,
        complete: conf.complete,
        file_size: conf.file_size,
        hash: hash.label(),
        digest: sha,
    })
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
