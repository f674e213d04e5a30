//! `OpsDriver` and `sendFixed` (core: `opsel::sys::linux::ops_driver`): the
//! OPS controller run on the application's own connected TCP socket (000
//! Ch. 6–7, Table 7.2). The driver switches the CCA on the live socket, sends
//! the data at full speed in bursts and steady phases (constructive probing,
//! 000 §1.2), stays silent in silences, runs the 1 Hz echo-burst RTT probe
//! toward the peer (000 §3.2) and reports phases, classifications, CCA
//! switches, decision latency, RTT samples and bytes per interval.
//!
//! `run()` works off the event loop (a libuv worker thread) and returns a
//! Promise of the report; events reach the `onEvent` listener through a
//! threadsafe function as they happen (and the report's `events` array).
//! A listener that throws is reported like a throwing EventEmitter listener
//! (an uncaught exception). `stop()` ends a run.
//!
//! The decision policy is "stump", a table spec, or a JS function. A JS
//! function runs on the JS thread: at each decision (once per probe, every
//! Y s) the worker hands the classification to it through a threadsafe
//! function (`PolicyCall`) and waits for the answer on a channel, for at most
//! `policyTimeoutS`. The argument is the `Controller`'s (`ops::call_policy`).
//! A policy that throws, returns a non-string or a CCA this socket cannot use
//! (checked on a throwaway TCP socket, so the live one is never left
//! half-switched), or does not answer in time makes the decision fail (the
//! controller keeps the last CCA) and stops the driver: `run()` rejects with
//! an error naming the policy and the cause, whose `bytesSent` and `report`
//! say what was sent. Deadlock trap: if the JS thread is blocked
//! synchronously while the driver runs (`Atomics.wait`, a busy loop, a
//! synchronous child process), it cannot run the policy; only the timeout
//! ends the wait.

use crate::convert::js_form;
use crate::error::{coded_error_object, coded_error_value, guard, invalid, to_js, Code};
use crate::ops::{call_policy, js, parts, secs, Called, OpsStats, Parts};
use crate::sys::off_loop;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ErrorStrategy, ThreadSafeCallContext, ThreadsafeFunction, ThreadsafeFunctionCallMode,
};
use napi::{sys, JsBuffer, JsFunction, JsObject, JsUnknown, Ref};
use napi_derive::napi;
use opsel::ops::{Classified, Classifier, Event, Labeled, Policy};
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_fixed as core_send_fixed, DriverConfig, DriverEvent, DriverReport, EndReason,
    OpsDriver as Core, RttSource,
};
use opsel::sys::linux::with_raw_fd;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

type R<T> = napi::Result<T, Code>;

/// The policies a driver runs: the stump and tables on the worker thread, a
/// JS function on the JS thread through a threadsafe function.
type SendPolicy = opsel::ops::AnyPolicy<ThreadPolicy>;

/// Default `policyTimeoutS`: a policy is a quick JS function, so an answer
/// later than this means the JS thread is blocked or swamped.
const POLICY_TIMEOUT_NS: u64 = 5_000_000_000;

/// How often a waiting worker checks that the threadsafe function is still
/// open (Node closes it at env teardown without calling it).
const POLICY_POLL: Duration = Duration::from_millis(50);

/// A policy function's answer, sent from the JS thread to the worker.
enum Answer {
    Name(String),
    /// Not a string: its JS type and `String(value)`.
    NotString(String),
    /// The exception's text and a reference to it (the error's `cause`).
    Threw(String, Option<Ref<()>>),
}

/// One decision handed to the JS thread.
struct PolicyCall {
    classified: Classified,
    reply: mpsc::SyncSender<Answer>,
}

/// The first failure of a run's policy function; it stops the driver and
/// becomes the rejected error (`cause`: the thrown value, if any).
pub struct PolicyFailure {
    message: String,
    cause: Option<Ref<()>>,
}

type FailureSlot = Arc<Mutex<Option<PolicyFailure>>>;

/// The policy function, held by the threadsafe function's JS-thread
/// callback. The callback is dropped when Node finalizes the threadsafe
/// function, on the JS thread, where the reference may be deleted.
struct FuncRef {
    env: sys::napi_env,
    func: Ref<()>,
}

// SAFETY: `env` and `func` are used only on the JS thread: in the
// threadsafe function's call_js callback and in its finalizer (Drop).
unsafe impl Send for FuncRef {}

impl Drop for FuncRef {
    fn drop(&mut self) {
        // SAFETY: see `unsafe impl Send`: this runs in the finalizer, on the JS thread.
        let _ = self.func.unref(unsafe { Env::from_raw(self.env) });
    }
}

/// Unref a reference taken on the JS thread (an answer nobody reads).
fn drop_answer(env: &Env, a: Answer) {
    if let Answer::Threw(_, Some(mut r)) = a {
        let _ = r.unref(*env);
    }
}

/// A JS policy function called from the driver's worker thread.
struct ThreadPolicy {
    tsfn: ThreadsafeFunction<PolicyCall, ErrorStrategy::Fatal>,
    timeout: Duration,
    classes: Vec<String>,
    failure: FailureSlot,
}

impl ThreadPolicy {
    /// Wrap `func`. The threadsafe function is unref'd: an idle driver does
    /// not keep Node alive (a running `run()` does, as an async task).
    fn new(env: Env, func: JsFunction, classes: Vec<String>, timeout_ns: u64) -> R<Self> {
        let held = FuncRef {
            env: env.raw(),
            func: env.create_reference(&func).map_err(js)?,
        };
        let names = classes.clone();
        // The threadsafe function's own target is a no-op: the callback
        // below calls the policy itself, so that a throw is caught and
        // answered instead of becoming an uncaught exception.
        let noop = env
            .create_function("opselPolicyCall", noop_call)
            .map_err(js)?;
        let mut tsfn = noop
            .create_threadsafe_function(0, move |ctx: ThreadSafeCallContext<PolicyCall>| {
                let PolicyCall { classified, reply } = ctx.value;
                let answer = answer(&ctx.env, &held, &names, &classified);
                if let Err(mpsc::SendError(a)) = reply.send(answer) {
                    // The worker gave up (timeout): release what it would have kept.
                    drop_answer(&ctx.env, a);
                }
                Ok(Vec::<JsUnknown>::new())
            })
            .map_err(js)?;
        tsfn.unref(&env).map_err(js)?;
        Ok(Self {
            tsfn,
            timeout: Duration::from_nanos(timeout_ns),
            classes,
            failure: Arc::new(Mutex::new(None)),
        })
    }

    fn label(&self, c: &Classified) -> &str {
        self.classes.get(c.class_index).map_or("?", String::as_str)
    }

    /// Record the first failure and turn it into the decision's error.
    fn fail(&self, message: String, cause: Option<Ref<()>>) -> opsel::Error {
        let mut g = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        // Only the first failure is reported (the driver stops at it, so a
        // second one would need a decision within the few ms of stopping;
        // its reference, if any, could not be released off the JS thread).
        if g.is_none() {
            *g = Some(PolicyFailure {
                message: message.clone(),
                cause,
            });
        }
        opsel::Error::invalid(message)
    }

    fn ask(&mut self, c: &Classified) -> opsel::Result<CcaName> {
        let label = self.label(c).to_string();
        let (tx, rx) = mpsc::sync_channel(1);
        let call = PolicyCall {
            classified: c.clone(),
            reply: tx,
        };
        // Unbounded queue: Blocking never waits here; the wait is below.
        let st = self.tsfn.call(call, ThreadsafeFunctionCallMode::Blocking);
        if st != Status::Ok {
            return Err(self.fail(
                format!("OpsDriver could not call the policy function for class {label} ({st:?}): the Node environment is shutting down"),
                None,
            ));
        }
        let t0 = Instant::now();
        let answer = loop {
            let left = self.timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(self.fail(
                    format!(
                        "OpsDriver policy function did not answer within {} s (policyTimeoutS) for class {label}: the JS thread is blocked or busy (a synchronous wait on the main thread while the driver runs cannot be interrupted)",
                        self.timeout.as_secs_f64()
                    ),
                    None,
                ));
            }
            match rx.recv_timeout(left.min(POLICY_POLL)) {
                Ok(a) => break a,
                Err(mpsc::RecvTimeoutError::Timeout) if !self.tsfn.aborted() => continue,
                Err(_) => {
                    return Err(self.fail(
                        format!("OpsDriver policy function was not called for class {label}: the Node environment is shutting down"),
                        None,
                    ))
                }
            }
        };
        match answer {
            Answer::Name(name) => checked_cca(&name).map_err(|e| {
                self.fail(
                    format!("OpsDriver policy function returned {name:?} for class {label}, which this socket cannot use: {e}"),
                    None,
                )
            }),
            Answer::NotString(what) => Err(self.fail(
                format!("OpsDriver policy function returned {what} for class {label}; it must return a CCA name such as \"bbr\" or \"cubic\""),
                None,
            )),
            Answer::Threw(text, cause) => Err(self.fail(
                format!("OpsDriver policy function threw {text} for class {label}"),
                cause,
            )),
        }
    }
}

impl Policy for ThreadPolicy {
    fn select(&mut self, c: &Classified) -> opsel::Result<CcaName> {
        self.ask(c)
    }
}

/// The policy threadsafe function's JS target: returns undefined.
unsafe extern "C" fn noop_call(
    _env: sys::napi_env,
    _info: sys::napi_callback_info,
) -> sys::napi_value {
    // Node-API: a NULL return value is `undefined`.
    std::ptr::null_mut()
}

/// On the JS thread: call the policy and describe its answer.
fn answer(env: &Env, held: &FuncRef, classes: &[String], c: &Classified) -> Answer {
    let func: JsFunction = match env.get_reference_value(&held.func) {
        Ok(f) => f,
        Err(e) => return Answer::Threw(e.reason, None),
    };
    match call_policy(env, &func, classes, c) {
        Called::Returned(v) => match v.get_type() {
            Ok(ValueType::String) => v
                .coerce_to_string()
                .and_then(|s| s.into_utf8())
                .and_then(|s| s.into_owned())
                .map_or_else(|e| Answer::Threw(e.reason, None), Answer::Name),
            Ok(t) => Answer::NotString(describe(v, t)),
            Err(e) => Answer::Threw(e.reason, None),
        },
        Called::Threw(text, exc) => {
            let cause = exc.and_then(|v| env.create_reference(v).ok());
            Answer::Threw(text, cause)
        }
    }
}

/// What a policy returned instead of a string, for the error message.
fn describe(v: JsUnknown, t: ValueType) -> String {
    let what = match t {
        ValueType::Undefined => return "undefined (no return value)".into(),
        ValueType::Null => return "null".into(),
        ValueType::Object if is_promise(&v) => {
            return "a Promise (an async function? the policy must return the CCA name synchronously)".into()
        }
        ValueType::Boolean => "a boolean",
        ValueType::Number => "a number",
        ValueType::Symbol => return "a symbol".into(),
        ValueType::Object => "an object",
        ValueType::Function => "a function",
        _ => "a value",
    };
    let text = v
        .coerce_to_string()
        .and_then(|s| s.into_utf8())
        .and_then(|s| s.into_owned())
        .unwrap_or_else(|_| "?".into());
    format!("{what} ({text})")
}

/// True for a Promise (what an async function returns).
fn is_promise(v: &JsUnknown) -> bool {
    v.is_promise().unwrap_or(false)
}

/// A CCA name the live socket will accept: valid and offered by the kernel,
/// so a bad answer fails the decision instead of the live socket's setsockopt.
fn checked_cca(name: &str) -> opsel::Result<CcaName> {
    let cca = CcaName::new(name)?;
    opsel::sys::linux::ops_driver::check_ccas_available(&[cca])?;
    Ok(cca)
}

type Drv = Core<Box<dyn Classifier + Send>, SendPolicy>;

/// Driver options. `probe` is required by `OpsDriver` (ignored by
/// `sendFixed`); the rest default to the Rust `DriverConfig` (000 §3.2).
#[napi(object)]
pub struct DriverOptions {
    /// RTT probe target: "HOST:PORT" / "udp:HOST:PORT" (a UDP echo responder,
    /// e.g. `opsel recv`'s port) or "icmp:IP" (ICMPv6 for an IPv6 address; needs privilege).
    pub probe: Option<String>,
    /// Stop after this many seconds (default: until the data ends).
    pub time_limit_s: Option<f64>,
    /// Length of the "interval" byte-count events, s (default 1).
    pub interval_s: Option<f64>,
    /// Run the pattern's last segment before every probe (default true).
    pub lead_in: Option<bool>,
    /// Set TCP_NOTSENT_LOWAT while running (default true, 131072 bytes).
    pub set_notsent_lowat: Option<bool>,
    pub notsent_lowat_bytes: Option<u32>,
    /// Bytes read from the data source per read (default 262144).
    pub chunk_bytes: Option<u32>,
    /// Echoes per RTT sample (10), their spacing (0.001 s) and reply timeout (0.4 s).
    pub echo_count: Option<u32>,
    pub echo_interval_s: Option<f64>,
    pub echo_timeout_s: Option<f64>,
    /// With a policy function: how long a decision waits for the JS thread
    /// to run it (default 5 s) before the driver stops with an error.
    pub policy_timeout_s: Option<f64>,
}

/// The one place that maps `DriverOptions` to `DriverConfig`.
fn driver_config(o: &DriverOptions) -> R<DriverConfig> {
    let mut c = DriverConfig::default();
    if let Some(v) = o.time_limit_s {
        c.time_limit_ns = Some(secs(v, "timeLimitS")?);
    }
    if let Some(v) = o.interval_s {
        c.interval_ns = secs(v, "intervalS")?;
    }
    c.lead_in = o.lead_in.unwrap_or(c.lead_in);
    if o.set_notsent_lowat == Some(false) {
        c.notsent_lowat_bytes = None;
    } else if let Some(b) = o.notsent_lowat_bytes {
        c.notsent_lowat_bytes = Some(b);
    }
    if let Some(v) = o.chunk_bytes {
        c.chunk_bytes = v as usize;
    }
    if let Some(v) = o.echo_count {
        c.burst.count = u16::try_from(v)
            .map_err(|_| invalid(format!("echoCount = {v} must be at most 65535")))?;
    }
    if let Some(v) = o.echo_interval_s {
        c.burst.interval_ns = secs(v, "echoIntervalS")?;
    }
    if let Some(v) = o.echo_timeout_s {
        c.burst.timeout_ns = secs(v, "echoTimeoutS")?;
    }
    Ok(c)
}

fn rtt_source(probe: Option<&str>) -> R<RttSource> {
    let probe = probe.ok_or_else(|| {
        invalid("driver option probe is missing; pass e.g. \"10.0.0.2:5001\" (UDP echo) or \"icmp:10.0.0.2\"")
    })?;
    probe.parse().map_err(to_js)
}

/// One driver event: the core's serialized `DriverEvent` in its Node form
/// (keys and `kind` in camelCase, as `OpsOutput`). `kind` is a controller
/// event ("phase", "classified", "cycleClassified", "selected",
/// "decisionFailed", "probeIncomplete"; fields as in `OpsOutput`), "ccaSet"
/// (cca, atNs, latencyNs), "decision" (cca, latencyNs, switched), "rtt"
/// (atNs, rttMs: null when every echo was lost, answered) or "interval"
/// (startNs, endNs, bytes, ackedBytes, totalBytes, cca, phase). Times are
/// CLOCK_MONOTONIC ns. Declared for the TypeScript types.
#[allow(dead_code)]
#[napi(object)]
pub struct DriverEventJs {
    pub kind: String,
    pub cca: Option<String>,
    pub at_ns: Option<f64>,
    pub phase: Option<String>,
    pub cycle: Option<f64>,
    pub label: Option<String>,
    pub mix: Option<String>,
    pub class_index: Option<u32>,
    pub confidence: Option<f64>,
    pub distance: Option<f64>,
    pub samples: Option<u32>,
    pub needed: Option<u32>,
    pub early: Option<bool>,
    pub steady_ns: Option<f64>,
    pub message: Option<String>,
    pub index: Option<u32>,
    pub cycles: Option<u32>,
    pub leader: Option<String>,
    pub leader_index: Option<u32>,
    pub margin: Option<f64>,
    pub latency_ns: Option<f64>,
    pub switched: Option<bool>,
    pub rtt_ms: Option<f64>,
    pub answered: Option<u32>,
    pub start_ns: Option<f64>,
    pub end_ns: Option<f64>,
    pub bytes: Option<f64>,
    pub acked_bytes: Option<f64>,
    pub total_bytes: Option<f64>,
}

fn event_js(e: &DriverEvent, classes: &[String]) -> serde_json::Value {
    js_form(&Labeled::new(e, classes))
}

/// Summary of a run. `bytesSent` is also the offset to resume the data at.
#[napi(object)]
pub struct DriverReportJs {
    pub bytes_sent: f64,
    pub started_ns: f64,
    pub ended_ns: f64,
    /// "eof", "timeLimit" or "stopped".
    pub end: String,
    pub cca_sets: f64,
    pub lost_samples: f64,
    pub stats: OpsStats,
    /// Every event of the run, in order (empty when `collectEvents` is false).
    #[napi(ts_type = "Array<DriverEventJs>")]
    pub events: Vec<serde_json::Value>,
}

/// The data to send, read on the worker thread.
enum Source {
    Bytes(io::Cursor<Vec<u8>>),
    File(std::fs::File),
    /// A caller-owned descriptor, borrowed (never closed).
    Fd(i32),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::Bytes(c) => c.read(buf),
            Source::File(f) => f.read(buf),
            Source::Fd(fd) => {
                // SAFETY: valid buffer; a bad descriptor yields EBADF.
                let n = unsafe { libc::read(*fd, buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }
        }
    }
}

fn source(data: JsUnknown) -> R<Source> {
    match data.get_type().map_err(js)? {
        ValueType::String => {
            let p = data
                .coerce_to_string()
                .and_then(|s| s.into_utf8())
                .and_then(|s| s.into_owned())
                .map_err(js)?;
            let f = std::fs::File::open(&p)
                .map_err(|e| to_js(opsel::Error::io(format!("open the data file {p:?}"), e)))?;
            Ok(Source::File(f))
        }
        ValueType::Number => {
            let v = data
                .coerce_to_number()
                .and_then(|n| n.get_double())
                .map_err(js)?;
            if !(v.fract() == 0.0 && (0.0..=i32::MAX as f64).contains(&v)) {
                return Err(invalid(format!(
                    "data descriptor {v} is not a valid file descriptor"
                )));
            }
            Ok(Source::Fd(v as i32))
        }
        ValueType::Object if data.is_buffer().map_err(js)? => {
            let b = JsBuffer::try_from(data).map_err(js)?;
            Ok(Source::Bytes(io::Cursor::new(
                b.into_value().map_err(js)?.to_vec(),
            )))
        }
        t => Err(invalid(format!(
            "data must be a Buffer, a file path or a file descriptor, got {t:?}"
        ))),
    }
}

type Tsfn = ThreadsafeFunction<serde_json::Value, ErrorStrategy::Fatal>;

fn listener(on_event: Option<JsFunction>) -> R<Option<Tsfn>> {
    on_event
        .map(|f| {
            f.create_threadsafe_function(0, |ctx: ThreadSafeCallContext<serde_json::Value>| {
                Ok(vec![ctx.value])
            })
            .map_err(js)
        })
        .transpose()
}

enum Mode {
    Ops(Box<Drv>),
    Fixed(CcaName, DriverConfig),
}

/// The work of `OpsDriver.run` / `sendFixed`, on a libuv worker thread.
pub struct DriverRun {
    mode: Option<Mode>,
    fd: i32,
    source: Source,
    tsfn: Option<Tsfn>,
    classes: Vec<String>,
    collect: bool,
    /// With a policy function: its first failure, and the flag that stops
    /// the driver when a decision failed because of it.
    failure: Option<(FailureSlot, Arc<AtomicBool>)>,
    /// The run's stop flag (`OpsDriver.stop()`; never raised for `sendFixed`).
    stop: Arc<AtomicBool>,
}

pub struct RunOut {
    report: DriverReport,
    events: Vec<serde_json::Value>,
    /// The socket's CCA after a policy failure stopped the run.
    socket_cca: Option<String>,
}

fn report_js(r: DriverReport, events: Vec<serde_json::Value>) -> DriverReportJs {
    let s = r.stats;
    DriverReportJs {
        bytes_sent: r.bytes_sent as f64,
        started_ns: r.started_ns as f64,
        ended_ns: r.ended_ns as f64,
        end: match r.end {
            EndReason::Eof => "eof",
            EndReason::TimeLimit => "timeLimit",
            EndReason::Stopped => "stopped",
        }
        .into(),
        cca_sets: r.cca_sets as f64,
        lost_samples: r.lost_samples as f64,
        stats: OpsStats::from(s),
        events,
    }
}

/// The rejection of a run stopped by its policy function: a coded `Error`
/// with `bytesSent` and `report` (when the driver ended cleanly) and
/// `cause` (the value the policy threw, if it threw).
fn policy_error(
    env: Env,
    message: String,
    report: Option<DriverReportJs>,
    cause: Option<Ref<()>>,
) -> napi::Result<napi::Error> {
    let mut obj = coded_error_object(env, invalid(message))?;
    if let Some(rep) = report {
        obj.set("bytesSent", rep.bytes_sent)?;
        obj.set("report", rep)?;
    }
    if let Some(mut c) = cause {
        let v: napi::Result<JsUnknown> = env.get_reference_value(&c);
        c.unref(env)?;
        obj.set("cause", v?)?;
    }
    // napi keeps the object as the rejection value.
    Ok(napi::Error::from(obj.into_unknown()))
}

impl Task for DriverRun {
    type Output = R<RunOut>;
    type JsValue = DriverReportJs;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        off_loop("OpsDriver.run", || {
            let mode = self
                .mode
                .take()
                .ok_or_else(|| invalid("this run was already carried out"))?;
            let mut events = Vec::new();
            let (collect, classes, tsfn) = (self.collect, &self.classes, &self.tsfn);
            let failure = &self.failure;
            let mut sink = |e: &DriverEvent| {
                // A decision that failed because of the policy function
                // stops the driver (the controller kept the last CCA); run()
                // then rejects with the failure.
                if let (DriverEvent::Ops(Event::DecisionFailed { .. }), Some((slot, stop))) =
                    (e, failure)
                {
                    if slot.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                let js = event_js(e, classes);
                if let Some(t) = tsfn {
                    t.call(js.clone(), ThreadsafeFunctionCallMode::NonBlocking);
                }
                if collect {
                    events.push(js);
                }
            };
            let (source, stop) = (&mut self.source, &self.stop);
            let report = with_raw_fd(self.fd, |fd| match mode {
                // The driver (and a policy's threadsafe function) is
                // dropped here, on the worker, when the run ends.
                Mode::Ops(mut drv) => drv.run(fd, source, stop, &mut sink),
                Mode::Fixed(cca, cfg) => core_send_fixed(fd, source, cca, &cfg, stop, &mut sink),
            });
            // Release the listener now so the process may exit once the
            // queued events are delivered.
            self.tsfn = None;
            let failed = self
                .failure
                .as_ref()
                .is_some_and(|(slot, _)| slot.lock().unwrap_or_else(|p| p.into_inner()).is_some());
            let socket_cca = failed
                .then(|| with_raw_fd(self.fd, |fd| opsel::sys::linux::get_cca(fd)).ok())
                .flatten();
            Ok(RunOut {
                report: report.map_err(to_js)?,
                events,
                socket_cca,
            })
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        let failure = self
            .failure
            .as_ref()
            .and_then(|(slot, _)| slot.lock().unwrap_or_else(|p| p.into_inner()).take());
        match (output, failure) {
            (Ok(RunOut { report, events, .. }), None) => Ok(report_js(report, events)),
            (Err(e), None) => Err(coded_error_value(env, e)),
            (Ok(out), Some(f)) => {
                let rep = report_js(out.report, out.events);
                let held = out
                    .socket_cca
                    .map_or_else(String::new, |c| format!(", holds {c}"));
                let msg = format!(
                    "{}; the driver stopped after {} bytes (the socket is open{held}; resume the data at that offset)",
                    f.message, rep.bytes_sent
                );
                Err(policy_error(env, msg, Some(rep), f.cause)?)
            }
            (Err(e), Some(f)) => {
                let msg = format!(
                    "{}; the driver then stopped with an error: {}",
                    f.message, e.reason
                );
                Err(policy_error(env, msg, None, f.cause)?)
            }
        }
    }
}

/// Run OPS on your own connected TCP socket (000 Ch. 6–7).
///
/// ```js
/// const drv = new OpsDriver('model.json',
///   { mode: 'active', pattern: 'S5-C5-S5-B5', policy: (c) => (c.bbrPresent ? 'bbr' : 'cubic') },
///   { probe: '10.0.0.2:5001' })
/// const report = await drv.run(socket._handle.fd, 'data.bin', (e) => console.log(e))
/// ```
#[napi]
pub struct OpsDriver {
    inner: Arc<Mutex<Option<Drv>>>,
    stop: Arc<AtomicBool>,
    classes: Vec<String>,
    /// Where a policy function's failure lands (function policies only).
    failure: Option<FailureSlot>,
}

#[napi]
impl OpsDriver {
    /// `model` is a `Model` or a model-file path; `options` are the
    /// `Controller` options (policy "stump", a table spec, or a function
    /// `(classified) => ccaName`, called on the JS thread at each decision);
    /// `driver` needs `probe`.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        #[napi(ts_arg_type = "Model | string")] model: JsUnknown,
        #[napi(ts_arg_type = "ControllerOptions | undefined | null")] options: Option<JsObject>,
        driver: DriverOptions,
    ) -> napi::Result<Self, Code> {
        guard(|| {
            let cfg = driver_config(&driver)?;
            let rtt = rtt_source(driver.probe.as_deref())?;
            let Parts {
                spec,
                file,
                classes,
                func,
            } = parts(env, model, options)?;
            let timeout_ns = match driver.policy_timeout_s {
                Some(v) if v > 0.0 => secs(v, "policyTimeoutS")?,
                Some(v) => {
                    return Err(invalid(format!(
                        "policyTimeoutS = {v} s must be a finite number of seconds > 0"
                    )))
                }
                None => POLICY_TIMEOUT_NS,
            };
            let mut failure = None;
            let callback = match func {
                Some(f) => {
                    let p = ThreadPolicy::new(env, f, classes.clone(), timeout_ns)?;
                    failure = Some(Arc::clone(&p.failure));
                    Some(p)
                }
                None => None,
            };
            let ctl = spec.build(&file, callback).map_err(to_js)?;
            let drv = Core::new(ctl, rtt, cfg).map_err(to_js)?;
            Ok(Self {
                stop: Arc::new(AtomicBool::new(false)),
                inner: Arc::new(Mutex::new(Some(drv))),
                classes,
                failure,
            })
        })
    }

    /// Run the OPS cycle on the connected TCP socket `fd` (e.g.
    /// `socket._handle.fd`; left open) sending `data` (a Buffer, a file
    /// path, or a file descriptor read to EOF) until it ends, the time limit
    /// passes or `stop()` is called. Off the event loop; resolves to the
    /// report. `onEvent` receives every event as it happens. One run per driver.
    /// With a policy function that throws, returns anything but a usable CCA
    /// name, or does not answer within `policyTimeoutS`, the driver stops
    /// and the promise rejects with an `Error` (code "OPSEL_INVALID_INPUT")
    /// naming the cause, with `bytesSent`, `report` and, for a throw, `cause`.
    #[napi(ts_return_type = "Promise<DriverReportJs>")]
    pub fn run(
        &self,
        fd: i32,
        #[napi(ts_arg_type = "Buffer | string | number")] data: JsUnknown,
        #[napi(ts_arg_type = "(event: DriverEventJs) => void")] on_event: Option<JsFunction>,
        collect_events: Option<bool>,
    ) -> napi::Result<AsyncTask<DriverRun>, Code> {
        guard(|| {
            if fd < 0 {
                return Err(invalid(format!(
                    "socket descriptor {fd} is negative; pass the connected TCP socket's descriptor"
                )));
            }
            let source = source(data)?;
            let drv = self
                .inner
                .lock()
                .map_err(|_| invalid("driver is poisoned by an earlier panic"))?
                .take()
                .ok_or_else(|| {
                    invalid("this OpsDriver has already run; create a new driver per transfer")
                })?;
            Ok(AsyncTask::new(DriverRun {
                mode: Some(Mode::Ops(Box::new(drv))),
                fd,
                source,
                tsfn: listener(on_event)?,
                classes: self.classes.clone(),
                collect: collect_events.unwrap_or(true),
                failure: self
                    .failure
                    .as_ref()
                    .map(|f| (Arc::clone(f), Arc::clone(&self.stop))),
                stop: Arc::clone(&self.stop),
            }))
        })
    }

    /// End a running `run()` within a few ms (its report's end is "stopped").
    #[napi]
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// The model's class names (labels of "classified" events).
    #[napi(getter)]
    pub fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }
}

/// The fixed-CCA baseline (000 Table 6.3 "fixed CUBIC" / "fixed BBR"): set
/// `cca` on `fd` once and send `data` with the driver's loop and "interval"
/// events (no RTT probe) until it ends or `options.timeLimitS` passes. Off
/// the event loop; resolves to the report.
#[napi(ts_return_type = "Promise<DriverReportJs>")]
pub fn send_fixed(
    fd: i32,
    #[napi(ts_arg_type = "Buffer | string | number")] data: JsUnknown,
    cca: String,
    options: Option<DriverOptions>,
    #[napi(ts_arg_type = "(event: DriverEventJs) => void")] on_event: Option<JsFunction>,
    collect_events: Option<bool>,
) -> napi::Result<AsyncTask<DriverRun>, Code> {
    guard(|| {
        let cfg = match &options {
            Some(o) => driver_config(o)?,
            None => DriverConfig::default(),
        };
        let cca = CcaName::new(&cca).map_err(to_js)?;
        if fd < 0 {
            return Err(invalid(format!(
                "socket descriptor {fd} is negative; pass the connected TCP socket's descriptor"
            )));
        }
        Ok(AsyncTask::new(DriverRun {
            mode: Some(Mode::Fixed(cca, cfg)),
            fd,
            source: source(data)?,
            tsfn: listener(on_event)?,
            classes: Vec::new(),
            collect: collect_events.unwrap_or(true),
            failure: None,
            stop: Arc::new(AtomicBool::new(false)),
        }))
    })
}
