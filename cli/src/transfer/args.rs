//! Command-line front ends of `opsel send` and `opsel recv` (000 §5.4, the
//! iPerfOPS client/server options), with a progress bar.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use opsel::ops::Event;
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::DriverEvent;
use opsel::{Error, Result};

use super::proto::Key;
use super::recv::{Limits, Receiver, RecvOpts, Target};
use super::send::{self, SendOpts, Strategy};

/// Options `recv` and `serve` share: authentication and limits.
#[derive(Args, Clone)]
pub struct ServerArgs {
    /// Address to listen on (TCP for control and data, UDP for RTT echoes).
    #[arg(long)]
    listen: SocketAddr,
    /// Pre-shared key file: senders must prove they hold the same key
    /// (HMAC-SHA256 challenge-response). Default: the OPSEL_KEY environment
    /// variable. Never pass a key on the command line.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Accept senders without a key on a non-loopback address (anyone who can
    /// reach the port can then write files here).
    #[arg(long)]
    no_auth: bool,
    /// Replace an existing destination file (only ever by a verified transfer).
    #[arg(long)]
    force: bool,
    /// Largest file accepted, bytes (suffixes K, M, G, T: powers of 1024).
    #[arg(long, default_value = "1T")]
    max_size: String,
    /// Seconds a connection may take from connect to an authenticated request
    /// (and a transfer's data connection to arrive).
    #[arg(long, default_value_t = 10.0)]
    handshake_timeout: f64,
    /// Seconds a running transfer may stay silent before it is dropped (must
    /// exceed the longest silent segment of the sender's probing pattern).
    #[arg(long, default_value_t = 60.0)]
    idle_timeout: f64,
}

#[derive(Args)]
pub struct RecvArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Output file. The transfer goes to `.NAME.opsel-part` beside it and is
    /// renamed into place once verified; an existing file needs --force or --append.
    #[arg(long)]
    out: PathBuf,
    /// Resume: the existing --out is the first bytes of the sender's file
    /// (checked against it by BLAKE3 before anything is sent).
    #[arg(long)]
    append: bool,
    /// Give up if no sender connects for this many seconds while idle.
    #[arg(long)]
    timeout: Option<f64>,
}

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Directory that receives the files; each sender names its file
    /// (`opsel send --name`), one plain name that cannot leave the directory.
    #[arg(long)]
    dir: PathBuf,
}

#[derive(Args)]
pub struct SendArgs {
    /// Receiver address (`opsel recv --listen`).
    #[arg(long)]
    to: SocketAddr,
    /// File to send.
    #[arg(long)]
    file: PathBuf,
    /// Fixed congestion control for the whole transfer (default cubic).
    #[arg(long, conflicts_with = "ops")]
    cca: Option<String>,
    /// Let OPS choose the CCA: probe, classify, select, steady for Y s, repeat.
    #[arg(long)]
    ops: bool,
    /// Active probing pattern (000 §3.2), or `passive`.
    #[arg(long, default_value = "S5-C5-S5-B5")]
    pattern: String,
    /// Steady time Y in seconds; 0 probes once (iPerfOPS -S).
    #[arg(long, default_value_t = 100.0)]
    steady: f64,
    /// Model: a file or a shipped name. Default with `--pattern passive`:
    /// `auto`: the 5-Hz model (passive-200ms-two-stage, decides after 10 s) while
    /// every echo burst of its first two windows (20 s), the first (the base
    /// RTT) included, has a mean RTT of at most 170 ms and none is late (a
    /// burst without any reply where that means the path is too long; see
    /// docs/guide/ops-transfer.md),
    /// else the 1 Hz model (passive, 40 s) for the rest of the transfer; a
    /// gate, --early-exit or --cycles > 1 keep the 1 Hz model. The choice is
    /// printed and in the --json report (`auto_model`). Default with a
    /// pattern: the shipped active model.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Adaptive Y: grow while the decision holds, shrink when it changes.
    #[arg(long)]
    adaptive: bool,
    /// Progressive probing: end the probe early (5/10/15 s) when confident.
    #[arg(long)]
    early_exit: bool,
    /// RTT source: udp (echoes to the receiver's responder), icmp (ICMP or
    /// ICMPv6 echo; root or ping_group_range) or tcp-info (the data socket's
    /// own TCP_INFO RTT: nothing needed at the peer; passive probing only).
    #[arg(long, default_value = "udp")]
    rtt: String,
    /// Stop after T seconds (fixed-time transfer); resume later with --offset.
    #[arg(long)]
    time: Option<f64>,
    /// Start at this byte of --file (the receiver must hold exactly the
    /// first N bytes: a part file of an earlier attempt, or --out with --append).
    #[arg(long, conflicts_with = "resume")]
    offset: Option<u64>,
    /// Continue where the receiver's verified prefix ends (after a failed or
    /// stopped transfer); the prefix is checked against --file first.
    #[arg(long)]
    resume: bool,
    /// Name of the file at the receiver (`opsel serve`; default: --file's name).
    #[arg(long)]
    name: Option<String>,
    /// Pre-shared key file (default: the OPSEL_KEY environment variable).
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// JSON-lines log per interval: FILE[,label]. With --dps and no --ops,
    /// DPS's samples, decisions and manager commands go to FILE's stem + `.dps.jsonl`.
    #[arg(long)]
    log: Option<String>,
    /// Log interval in seconds.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Early exit: minimum 1-NN margin that ends a probe (default 0.8; see
    /// docs/results/ops.md for values calibrated on the shipped models).
    #[arg(long)]
    early_confidence: Option<f64>,
    /// Randomise each steady time by up to ±this fraction (0..=0.5; 0 = fixed Y as in 000).
    #[arg(long, default_value_t = 0.0)]
    jitter: f64,
    /// Seed of the steady-time jitter PRNG.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Do not run the pattern's last segment before each probe (see DriverConfig::lead_in).
    #[arg(long)]
    no_lead_in: bool,
    /// Windows (pattern cycles) per OPS decision: 1 = one window (000); N > 1
    /// probes N windows back to back and picks the class with the smallest
    /// sum of per-window nearest distances (min-sum; 3 cycles of S5-C5-S5-B5
    /// = 60 s, docs/results/ops-cycles.md). With --early-exit the probe may
    /// end after any window once the min-sum margin reaches --early-confidence.
    #[arg(long, default_value_t = 1)]
    cycles: usize,
    /// Margin-gated probing (needs --cycles N >= 2): decide after one window
    /// when the 1-NN margin is at least this (e.g. 0.1), otherwise keep
    /// probing, window by window, up to N windows, and decide by min-sum.
    /// Unsure probes get longer, confident ones do not (docs/results/ops.md §1c).
    #[arg(long)]
    extend_below: Option<f64>,
    /// With --ops: end each probe early with a learned probe gate (004 §8
    /// B.1): at each prefix check (5, 10, …, 35 s of the passive w = 40
    /// window) the gate scores the prefix's decision and the probe ends at
    /// the first one it accepts, else runs the full window. FILE is a gate
    /// file; `--gate` alone or `--gate default` is the gate.json shipped
    /// beside the chosen model (models/passive/gate.json for the passive
    /// model; the active model has none). docs/results/ops-gate.md.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "default", requires = "ops")]
    gate: Option<String>,
    /// With --gate: override the gate file's threshold (a probability in
    /// [0, 1]; higher = fewer, safer early exits).
    #[arg(long, requires = "gate")]
    gate_threshold: Option<f64>,
    /// CCA before the first OPS decision (passive probing sends with it while
    /// the first window fills).
    #[arg(long, default_value = "cubic")]
    initial_cca: String,
    /// Let DPS (002) choose the CCA from the application's QoS; SPEC is a
    /// DPS spec file or inline JSON (`{"ccas": ["cubic", "bbr"], "metrics":
    /// [...]}`). With --ops it replaces the stump: OPS's recognised
    /// background is DPS's network state and each steady phase a monitoring
    /// period. Without --ops DPS runs its own t/T cycles (002 Alg 3).
    #[arg(long)]
    dps: Option<String>,
    /// With --dps (no --ops): join the host's fairness manager at this
    /// socket (`opsel fair serve --socket PATH`); the flow sends once the
    /// manager admits it and then follows its lock/unlock and violation
    /// commands (002 §4.6).
    #[arg(long, requires = "dps", conflicts_with = "ops")]
    fair: Option<PathBuf>,
    /// With --fair: seconds to wait for admission.
    #[arg(long, default_value_t = 300.0)]
    fair_wait: f64,
    /// With --fair: seconds between sending-rate reports to the manager.
    #[arg(long, default_value_t = 1.0)]
    fair_rate_every: f64,
    /// With --dps (no --ops): stop sending once DPS has statistics for every
    /// CCA (the end of the learning phase, 002 §5.3), e.g. to measure
    /// learning time; the receiver keeps the verified prefix.
    #[arg(long, requires = "dps", conflicts_with = "ops")]
    dps_until_learnt: bool,
    /// With --ops: a decision cache file (created if missing). OPS starts
    /// with the CCA it chose last time toward the receiver's /24 (003: bulk
    /// transfers repeat between the same prefixes); with an active pattern
    /// the first probe ends at 5, 10 or 15 samples once its prefix agrees
    /// with the cached class (ops::PriorProbe). Then it records this
    /// transfer's decision. Entries older than 30 days are not used.
    #[arg(long, requires = "ops")]
    decision_cache: Option<PathBuf>,
    /// Data connections to stripe the file over (1 to 8): one contiguous
    /// segment each. One CCA decision for all: every CCA the first stream
    /// is switched to (--cca, or OPS's probe segments and decisions) is set
    /// on every stream, and an active pattern's silences pause every stream.
    /// Not with DPS alone. With --time every stream stops at T and the
    /// receiver keeps the contiguous prefix (segment 0 up to the first
    /// segment not sent whole); a failed stream fails the transfer; --resume
    /// continues after the contiguous prefix the receiver kept.
    #[arg(long, default_value_t = 1)]
    streams: u16,
    /// Whole-transfer check: xxh3 (XXH3-128: detects accidental corruption,
    /// not tampering) or blake3 (cryptographic). Default: xxh3, or keyed
    /// BLAKE3 when the receiver requires the pre-shared key (xxh3 is then
    /// refused). The receiver accepts either.
    #[arg(long, value_parser = ["xxh3", "blake3"])]
    hash: Option<String>,
    /// The first seconds of the transfer are a FastProb probe (004) on the
    /// data connection: TCP_INFO samples at the model's interval until the
    /// model says the converged throughput is predictable; then it prints the
    /// prediction, the probe time and the ETA of the rest of the file. The
    /// file's own bytes are the probe: it costs nothing extra. One stream,
    /// fixed --cca (not with --ops or --dps).
    #[arg(long)]
    fastprob: bool,
    /// FastProb model: a file or a shipped name (default fastprob-netlab;
    /// its interval and cap are the probe's).
    #[arg(long, value_name = "FILE")]
    fastprob_model: Option<PathBuf>,
    /// With --fastprob or --ab: stop on the model file's error budget for this
    /// network family (its family_budgets, e.g. wan). Default: the file's own
    /// budget, or the family its classifier infers from the probe's samples.
    #[arg(long, value_name = "NAME", conflicts_with = "fastprob_stop_error")]
    fastprob_family: Option<String>,
    /// With --fastprob or --ab: stop when the model's gate predicts an error
    /// below this many percent (error-gate models).
    #[arg(long, value_name = "PCT")]
    fastprob_stop_error: Option<f64>,
    /// CCA A/B on the data connection at the start of the transfer (e.g.
    /// cubic,bbr): switch to each candidate, probe it with FastProb, keep the
    /// best one the fairness rule allows, send the rest of the file with it.
    /// Not with --cca, --ops, --dps or --streams > 1.
    #[arg(long, value_delimiter = ',', conflicts_with = "cca")]
    ab: Vec<String>,
    /// With --ab: the background class (unknown; cubic = CUBIC only, then
    /// BBR is never switched on nor chosen; bbr = BBR present). OPS's class,
    /// e.g. from `opsel classify`.
    #[arg(long, requires = "ab")]
    background: Option<String>,
    /// Print the result as one JSON object on stdout (with the FastProb or
    /// A/B report under "fastprob"); progress and notices go to stderr.
    #[arg(long)]
    json: bool,
}

/// The FastProb options of `opsel send` as the transfer's probe options
/// (`None` without --fastprob or --ab); the checks are the A/B spec's.
fn probe_opts(a: &SendArgs) -> Result<Option<send::ProbeOpts>> {
    if !a.fastprob && a.ab.is_empty() {
        if a.fastprob_model.is_some() {
            return Err(Error::invalid("--fastprob-model needs --fastprob or --ab"));
        }
        if a.fastprob_family.is_some() || a.fastprob_stop_error.is_some() {
            return Err(Error::invalid(
                "--fastprob-family and --fastprob-stop-error need --fastprob or --ab",
            ));
        }
        return Ok(None);
    }
    let budget = opsel::fastprob::ProbeBudget {
        family: a.fastprob_family.clone(),
        stop_error_pct: a.fastprob_stop_error,
    };
    budget.validate()?;
    let ab = if a.ab.is_empty() {
        None
    } else {
        let spec = opsel::fastprob::AbSpec {
            candidates: a.ab.clone(),
            background: a.background.as_deref().unwrap_or("unknown").parse()?,
            settle_samples: 1,
            method: opsel::fastprob::AbMethod::Fastprob,
            budget: budget.clone(),
        };
        spec.validate()?;
        Some(spec)
    };
    Ok(Some(send::ProbeOpts {
        model: a.fastprob_model.clone(),
        ab,
        budget,
    }))
}

fn mbit(bps: f64) -> String {
    format!("{:.2} Mbit/s", bps / 1e6)
}

/// The line(s) printed when the start probe stops (or, at the end, that
/// the file ended first).
fn probe_lines(r: &opsel::fastprob::StartReport) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(ab) = &r.ab {
        for c in &ab.candidates {
            v.push(if c.probed {
                format!(
                    "A/B {}: {} after {:.1} s ({} samples{})",
                    c.cca,
                    mbit(c.estimate_bps),
                    c.probe_ns as f64 / 1e9,
                    c.samples,
                    if c.forced { ", at the cap" } else { "" }
                )
            } else if r.stop.is_some() {
                format!(
                    "A/B {}: not probed (the background is CUBIC only: BBR is never switched on there)",
                    c.cca
                )
            } else {
                format!("A/B {}: not probed (the file ended first)", c.cca)
            });
        }
    }
    match &r.stop {
        Some(s) => {
            let what = match &r.ab {
                Some(ab) => format!("A/B chose {}; ", ab.chosen),
                None => "FastProb: ".into(),
            };
            v.push(format!(
                "{what}converged throughput ≈ {} after {:.1} s of probing ({} samples{}); the rest of the file ({} bytes) in ≈ {}",
                mbit(s.predicted_bps),
                s.probe_ns as f64 / 1e9,
                s.samples,
                if s.forced { ", at the cap" } else { "" },
                s.remaining_bytes,
                s.eta_ns
                    .map_or("? s".into(), |e| format!("{:.1} s", e as f64 / 1e9)),
            ));
        }
        None => v.push(format!(
            "{}: the transfer ended after {} samples, before {} stopped: no prediction (the file is too short for the model)",
            if r.ab.is_some() { "A/B" } else { "FastProb" },
            r.samples_taken,
            if r.ab.is_some() { "the A/B" } else { "FastProb" },
        )),
    }
    v
}

fn bytes_bar(len: Option<u64>) -> ProgressBar {
    let pb = match len {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    pb.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ({eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb
}

/// The pre-shared key from --key-file, else OPSEL_KEY; `None` if neither.
pub fn load_key(file: Option<&Path>) -> Result<Option<Key>> {
    if let Some(p) = file {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(p)
            .map_err(|e| Error::io(format!("read key file {}", p.display()), e))?;
        if meta.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "opsel: warning: key file {} is readable by other users; chmod 600 it",
                p.display()
            );
        }
        let raw =
            std::fs::read(p).map_err(|e| Error::io(format!("read key file {}", p.display()), e))?;
        return Key::from_bytes(&raw, &p.display().to_string())
            .map(Some)
            .map_err(|e| Error::invalid(e.0));
    }
    match std::env::var_os("OPSEL_KEY") {
        Some(v) => {
            use std::os::unix::ffi::OsStrExt;
            Key::from_bytes(v.as_bytes(), "OPSEL_KEY")
                .map(Some)
                .map_err(|e| Error::invalid(e.0))
        }
        None => Ok(None),
    }
}

pub use opsel_transfer::ops::resolve_gate;

/// Bytes with an optional K/M/G/T suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => 0,
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .filter(|_| mult > 0)
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| {
            Error::invalid(format!(
                "size {s:?}: use a whole number of bytes, optionally with K, M, G or T (e.g. 20G)"
            ))
        })
}

fn secs(v: f64, flag: &str) -> Result<Duration> {
    if v.is_finite() && v > 0.0 && v < 1e7 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Error::invalid(format!(
            "{flag} {v}: use a number of seconds > 0"
        )))
    }
}

fn receiver(
    a: &ServerArgs,
    target: Target,
    keep_serving: bool,
    timeout: Option<f64>,
) -> Result<Receiver> {
    let key = load_key(a.key_file.as_deref())?;
    if key.is_none() && !a.listen.ip().is_loopback() && !a.no_auth {
        return Err(Error::invalid(format!(
            "{} is reachable from other hosts and no pre-shared key is set: pass --key-file FILE or set OPSEL_KEY (the senders need the same key), or --no-auth to let anyone who reaches the port write here",
            a.listen
        )));
    }
    if key.is_none() {
        eprintln!(
            "opsel: warning: no pre-shared key: anyone who can reach {} can send files here",
            a.listen
        );
    }
    Receiver::bind(RecvOpts {
        listen: a.listen,
        target,
        force: a.force,
        keep_serving,
        accept_timeout: timeout.map(|t| secs(t, "--timeout")).transpose()?,
        limits: Limits {
            max_size: parse_size(&a.max_size)?,
            handshake: secs(a.handshake_timeout, "--handshake-timeout")?,
            idle: secs(a.idle_timeout, "--idle-timeout")?,
            ..Limits::default()
        },
        key,
    })
}

fn log_line() -> Arc<dyn Fn(&str) + Send + Sync> {
    Arc::new(|m: &str| eprintln!("opsel recv: {m}"))
}

pub fn recv_main(a: RecvArgs) -> Result<()> {
    let rx = receiver(
        &a.server,
        Target::File {
            path: a.out.clone(),
            append: a.append,
        },
        false,
        a.timeout,
    )?;
    eprintln!(
        "opsel recv: listening on {} (TCP control + data, UDP echo), writing {}{}",
        rx.local_addr()?,
        a.out.display(),
        if a.append { " (append)" } else { "" }
    );
    let pb = bytes_bar(None);
    let pb2 = pb.clone();
    let r = rx.serve(Arc::new(move |n| pb2.inc(n)), log_line())?;
    pb.finish_and_clear();
    println!(
        "received {} bytes from {} in {:.1} s ({:.2} Mbit/s); {} {} {}; {} now {} bytes, {} {}{}",
        r.received,
        r.peer,
        r.elapsed.as_secs_f64(),
        r.received as f64 * 8.0 / r.elapsed.as_secs_f64().max(1e-9) / 1e6,
        r.hash,
        r.digest,
        if r.verified { "verified" } else { "MISMATCH" },
        r.path.display(),
        r.file_size,
        r.hash,
        r.file_digest,
        if r.complete {
            ""
        } else {
            " (a verified prefix: the sender stopped early; resume with `opsel send --resume`)"
        }
    );
    Ok(())
}

pub fn serve_main(a: ServeArgs) -> Result<()> {
    let rx = receiver(&a.server, Target::Dir(a.dir.clone()), true, None)?;
    eprintln!(
        "opsel serve: listening on {} (TCP control + data, UDP echo), receiving into {}",
        rx.local_addr()?,
        a.dir.display()
    );
    rx.serve(Arc::new(|_| {}), log_line())?;
    Ok(())
}

pub fn send_main(a: SendArgs) -> Result<()> {
    let strategy = if a.ops {
        // The library's OPS spec resolves and checks the options (the model
        // by name wherever it is installed, or built in; the gate; the RTT
        // source), as for the bindings' send_file.
        let spec = opsel_transfer::OpsSpec {
            model: a.model.as_ref().map(|m| m.display().to_string()),
            pattern: Some(a.pattern.clone()),
            steady_s: Some(a.steady),
            initial_cca: Some(a.initial_cca.clone()),
            gate: a.gate.clone(),
            gate_threshold: a.gate_threshold,
            rtt: Some(a.rtt.clone()),
            lead_in: Some(!a.no_lead_in),
            adaptive: a.adaptive,
            early_exit: a.early_exit,
            early_confidence: a.early_confidence,
            cycles: Some(a.cycles),
            extend_below: a.extend_below,
            jitter: Some(a.jitter),
            seed: Some(a.seed),
            policy: None,
            // Checked against this kernel's CCAs (crate::dps_send::load_spec).
            dps: a
                .dps
                .as_deref()
                .map(crate::dps_send::load_spec)
                .transpose()?,
        };
        Strategy::Ops(Box::new(spec.resolve()?))
    } else if let Some(d) = a.dps.as_deref() {
        if let Some(c) = &a.cca {
            return Err(Error::invalid(format!(
                "--cca {c} and --dps (without --ops) exclude each other: DPS chooses the CCA from the spec's list"
            )));
        }
        Strategy::Dps(crate::dps_send::DpsOpts {
            spec: crate::dps_send::load_spec(d)?,
            fair: a.fair.clone(),
            fair_wait_s: a.fair_wait,
            rate_every_s: a.fair_rate_every,
            until_learnt: a.dps_until_learnt,
        })
    } else {
        Strategy::Fixed(CcaName::new(a.cca.as_deref().unwrap_or("cubic"))?)
    };
    let log = a.log.as_deref().map(|s| match s.split_once(',') {
        Some((f, l)) => (PathBuf::from(f), l.to_string()),
        None => (PathBuf::from(s), String::new()),
    });
    let size = std::fs::metadata(&a.file)
        .map_err(|e| Error::io(format!("stat {}", a.file.display()), e))?
        .len();
    let opts = SendOpts {
        to: a.to,
        file: a.file.clone(),
        strategy,
        time_s: a.time,
        offset: a.offset,
        resume: a.resume,
        name: a.name.clone(),
        key: load_key(a.key_file.as_deref())?,
        log,
        interval_s: a.interval,
        decision_cache: a.decision_cache.clone(),
        streams: a.streams,
        hash: a
            .hash
            .as_deref()
            .map(super::proto::HashAlgo::parse)
            .transpose()
            .map_err(|e| Error::invalid(e.0))?,
        probe: probe_opts(&a)?,
    };
    // Ctrl-C raises the signal flag, which the driver reads as its stop flag.
    opsel_netlab::sys::install_interrupt_handler();
    let pb = bytes_bar(Some(size.saturating_sub(a.offset.unwrap_or(0))));
    if a.json {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    pb.set_message(match &opts.strategy {
        Strategy::Fixed(_) if !a.ab.is_empty() => "a/b".to_string(),
        Strategy::Fixed(c) => c.to_string(),
        Strategy::Ops(o) => o.initial_cca.to_string(),
        Strategy::Dps(_) => "dps".to_string(),
    });
    let mut on_event = |e: &DriverEvent| match e {
        DriverEvent::Interval {
            total_bytes,
            cca,
            phase,
            ..
        } => {
            pb.set_position(*total_bytes);
            pb.set_message(format!("{} {:?}", cca, phase).to_lowercase());
        }
        DriverEvent::Ops(Event::Classified {
            classified,
            samples,
            early,
            ..
        }) => pb.println(format!(
            "classified {} (confidence {:.2}) from {samples} samples{}",
            classified.mix,
            classified.confidence,
            if *early { ", early exit" } else { "" }
        )),
        DriverEvent::Ops(Event::CycleClassified {
            index,
            cycles,
            distance,
            margin,
            ..
        }) => pb.println(format!(
            "window {}/{cycles}: nearest distance {distance:.3}, min-sum margin {margin:.2}",
            index + 1
        )),
        DriverEvent::Ops(Event::Selected { cca, steady_ns, .. }) => pb.println(format!(
            "selected {cca} for {}",
            steady_ns.map_or("the rest of the transfer".into(), |s| format!(
                "{:.0} s",
                s as f64 / 1e9
            ))
        )),
        _ => {}
    };
    let json = a.json;
    let pb2 = pb.clone();
    let mut on_probe = |r: &opsel::fastprob::StartReport| {
        if r.stop.is_some() {
            for l in probe_lines(r) {
                if json {
                    eprintln!("{l}");
                } else {
                    pb2.println(l);
                }
            }
        }
    };
    let (r, probe) = send::run(
        &opts,
        opsel::sys::linux::signal::interrupt_flag(),
        &mut on_event,
        &mut on_probe,
    )?;
    pb.finish_and_clear();
    let secs = (r.driver.ended_ns - r.driver.started_ns) as f64 / 1e9;
    if json {
        let mut v = serde_json::to_value(&r).map_err(|e| Error::invalid(e.to_string()))?;
        v["elapsed_s"] = secs.into();
        v["rate_bps"] = (r.driver.bytes_sent as f64 * 8.0 / secs.max(1e-9)).into();
        v["fastprob"] = serde_json::to_value(&probe).unwrap_or_default();
        println!("{v}");
        return Ok(());
    }
    if let Some(p) = &probe {
        if p.start.stop.is_none() {
            for l in probe_lines(&p.start) {
                println!("{l}");
            }
        } else if let (Some(s), Some(bps), Some(t)) =
            (&p.start.stop, p.after_probe_bps, p.after_probe_s)
        {
            println!(
                "after the probe: {} measured over {t:.1} s (predicted {}, {:+.1} %)",
                mbit(bps),
                mbit(s.predicted_bps),
                (s.predicted_bps - bps) / bps.max(1e-9) * 100.0
            );
        }
    }
    println!(
        "sent {} bytes in {:.1} s ({:.2} Mbit/s), confirmed by the receiver, {} {}",
        r.driver.bytes_sent,
        secs,
        r.driver.bytes_sent as f64 * 8.0 / secs.max(1e-9) / 1e6,
        r.hash,
        r.digest
    );
    if a.ops {
        let s = r.driver.stats;
        println!(
            "OPS: {} decisions ({} early), {} CCA switches, probing {:.1} s, steady {:.1} s",
            s.decisions,
            s.early_exits,
            s.cca_switches,
            s.probe_ns as f64 / 1e9,
            s.steady_ns as f64 / 1e9
        );
    }
    let next = r.offset + r.driver.bytes_sent;
    if next < size {
        println!(
            "stopped at byte {next} of {size}; the receiver keeps the verified prefix: resume with `opsel send --resume ...`"
        );
    } else if r.complete && r.file_identical {
        println!(
            "the receiver's file is byte-identical to {} ({} bytes)",
            a.file.display(),
            r.file_size
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Send {
        #[command(flatten)]
        a: SendArgs,
    }

    fn parse(extra: &[&str]) -> std::result::Result<SendArgs, clap::Error> {
        let mut v = vec!["send", "--to", "127.0.0.1:5201", "--file", "f"];
        v.extend_from_slice(extra);
        Send::try_parse_from(v).map(|s| s.a)
    }

    fn models(p: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../models")
            .join(p)
    }

    #[test]
    fn gate_flag_alone_means_the_default_and_takes_a_file_or_threshold() {
        let a = parse(&["--ops", "--gate"]).unwrap();
        assert_eq!(a.gate.as_deref(), Some("default"));
        assert_eq!(a.gate_threshold, None);
        // A following flag is not taken as the gate's value.
        let a = parse(&["--ops", "--gate", "--steady", "5"]).unwrap();
        assert_eq!((a.gate.as_deref(), a.steady), (Some("default"), 5.0));
        let a = parse(&["--ops", "--gate", "g.json", "--gate-threshold", "0.9"]).unwrap();
        assert_eq!(a.gate.as_deref(), Some("g.json"));
        assert_eq!(a.gate_threshold, Some(0.9));
        assert!(parse(&["--ops"]).unwrap().gate.is_none());
        // The gate is an OPS option; the threshold needs a gate.
        assert!(parse(&["--gate"]).is_err());
        assert!(parse(&["--ops", "--gate-threshold", "0.9"]).is_err());
    }

    #[test]
    fn default_gate_is_the_one_beside_the_model() {
        let passive = models("passive/model.json");
        assert_eq!(
            resolve_gate(Some("default"), &passive).unwrap(),
            Some(models("passive/gate.json"))
        );
        assert!(models("passive/gate.json").is_file());
        // The active model ships no gate: a clear error, not a silent no-gate run.
        let e = resolve_gate(Some("default"), &models("active-s5c5s5b5/model.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no gate.json") && e.contains("gate file"), "{e}");
        assert_eq!(
            resolve_gate(Some("my/gate.json"), &passive).unwrap(),
            Some(PathBuf::from("my/gate.json"))
        );
        assert_eq!(resolve_gate(None, &passive).unwrap(), None);
    }

    /// `--fastprob-family` / `--fastprob-stop-error` become the probe's
    /// budget, for the estimate and for every A/B candidate, and reach the
    /// start probe: a family the file lacks fails before any transfer.
    #[test]
    fn fastprob_budget_flags_reach_the_probe() {
        let o = probe_opts(&parse(&["--fastprob", "--fastprob-family", "wan"]).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(o.budget.family.as_deref(), Some("wan"));
        let o = probe_opts(&parse(&["--ab", "cubic,bbr", "--fastprob-stop-error", "7"]).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(o.budget.stop_error_pct, Some(7.0));
        assert_eq!(o.ab.unwrap().budget.stop_error_pct, Some(7.0));
        // Without a probe the flags are an error, and the two exclude each other.
        let e = probe_opts(&parse(&["--fastprob-family", "wan"]).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("need --fastprob or --ab"), "{e}");
        assert!(parse(&[
            "--fastprob",
            "--fastprob-family",
            "wan",
            "--fastprob-stop-error",
            "4"
        ])
        .is_err());
        // The budget decides where the start probe stops (the version-4 pooled
        // fixture: lan 8 %, wan 4 %) and a family it lacks is refused.
        let m = std::sync::Arc::new(
            opsel::fastprob::FastProbModel::load(
                &Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../core/tests/fastprob_fixtures/model_v4_pooled_small.json"),
            )
            .unwrap(),
        );
        let fx: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../core/tests/fastprob_fixtures/sklearn_v4_pooled_small.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let stops = |fam: &str| -> Vec<usize> {
            let o = probe_opts(&parse(&["--fastprob", "--fastprob-family", fam]).unwrap())
                .unwrap()
                .unwrap();
            fx["logs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|log| {
                    let mut sp =
                        opsel::fastprob::StartProbe::estimate_with(m.clone(), &o.budget).unwrap();
                    let s = log["samples_bps"].as_array().unwrap();
                    (1..=s.len())
                        .find(|k| {
                            matches!(
                                sp.push(s[k - 1].as_f64().unwrap(), 1000).unwrap(),
                                opsel::fastprob::StartAction::Done { .. }
                            )
                        })
                        .unwrap()
                })
                .collect()
        };
        let (lan, wan) = (stops("lan"), stops("wan"));
        assert!(lan.iter().zip(&wan).all(|(a, b)| a <= b));
        assert!(lan.iter().sum::<usize>() < wan.iter().sum::<usize>());
        let o = probe_opts(&parse(&["--fastprob", "--fastprob-family", "dsl"]).unwrap())
            .unwrap()
            .unwrap();
        let e = opsel::fastprob::StartProbe::estimate_with(m, &o.budget)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown family \"dsl\""), "{e}");
    }

    /// `--gate` reaches the controller: the shipped gate builds with the
    /// passive model, and a bad threshold is the spec's error.
    #[test]
    fn the_gate_reaches_the_controller_spec() {
        let mut o = send::OpsOpts {
            pattern: None,
            steady_s: Some(60.0),
            model: models("passive/model.json"),
            adaptive: false,
            early_exit: false,
            rtt: send::RttVia::UdpEcho,
            seed: 0,
            lead_in: true,
            jitter: 0.0,
            early_confidence: None,
            cycles: 1,
            extend_below: None,
            initial_cca: CcaName::new("cubic").unwrap(),
            policy: None,
            dps: None,
            gate: Some(models("passive/gate.json")),
            gate_threshold: None,
            auto: None,
        };
        let s = opsel_transfer::ops::spec(&o);
        assert_eq!(s.gate, o.gate);
        assert!(s.probe_gate().unwrap().is_some());
        assert!(send::controller(&o).is_ok());
        o.gate_threshold = Some(2.0);
        let e = send::controller(&o).err().unwrap().to_string();
        assert!(e.contains("probability"), "{e}");
    }
}
