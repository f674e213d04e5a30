//! `Controller` (core: `opsel::ops`), the sans-IO OPS controller of 000
//! Ch. 6–7 with its policies (the stump, a table, or a JS function), and
//! `jain` / `fairShare` (core: `opsel::fair`).
//!
//! The controller never touches a socket or a clock and each call takes
//! microseconds, so its methods are synchronous. A policy function is called
//! synchronously on the JS thread, from inside `handleSample` /
//! `handleTimeout`, with an object describing the classification; it returns
//! a CCA name. If it throws, the controller records a failed decision (keeps
//! the last CCA, probes again next cycle) and the calling method throws an
//! `Error` with `code` `"OPSEL_INVALID_INPUT"` whose message quotes the
//! exception.

use crate::convert::{js_form, ns, snake, snake_keys, whole};
use crate::error::{guard, invalid, to_js, Code};
use crate::knn::Model;
use napi::bindgen_prelude::*;
use napi::{sys, JsFunction, JsObject, JsString, JsUnknown, NapiRaw, NapiValue, Ref};
use napi_derive::napi;
use opsel::model::KnnModelFile;
use opsel::ops::{
    Classified, Classifier, Controller as Core, ControllerSpec, Labeled, Output, Policy,
    PolicyInput,
};
use opsel::probe::CcaName;
use std::cell::{Cell, RefCell};

/// The controller core borrowed for one call.
type CoreRef<'a> = std::cell::RefMut<'a, Core<Box<dyn Classifier + Send>, AnyPolicy>>;
use std::rc::Rc;
use std::sync::Arc;

/// The JS function behind a user policy. `env` is set only while a
/// controller method runs on the JS thread (the only time `select` is called).
struct JsPolicy {
    env: Rc<Cell<sys::napi_env>>,
    func: Rc<RefCell<Option<Ref<()>>>>,
    classes: Vec<String>,
    thrown: Rc<RefCell<Option<String>>>,
}

type AnyPolicy = opsel::ops::AnyPolicy<JsPolicy>;

/// The argument of a policy function, the core's `PolicyInput` in its Node
/// form: one shape for `Controller` and `OpsDriver` (the TypeScript
/// `Classified`).
pub(crate) fn classified_object(
    env: &Env,
    classes: &[String],
    c: &Classified,
) -> napi::Result<JsUnknown> {
    env.to_js_value(&js_form(&PolicyInput::new(c, classes)))
}

/// What calling a policy function gave: its return value, or what it threw.
pub(crate) enum Called {
    Returned(JsUnknown),
    /// The exception's text and the exception itself (None when the call
    /// failed without one, e.g. while Node shuts down).
    Threw(String, Option<JsUnknown>),
}

/// Call `func(classified)` on the JS thread. napi-rs takes a thrown
/// exception off the env (so it cannot escape from an unrelated place) into
/// the error, with its text (`String(exc)`); the value is taken back here.
pub(crate) fn call_policy(
    env: &Env,
    func: &JsFunction,
    classes: &[String],
    c: &Classified,
) -> Called {
    match classified_object(env, classes, c).and_then(|o| func.call(None, &[o])) {
        Ok(v) => Called::Returned(v),
        Err(e) => {
            let text = if e.reason.is_empty() {
                "an exception that cannot be converted to a string".to_string()
            } else {
                e.reason.clone()
            };
            // SAFETY: the live env of this JS-thread call. For a thrown
            // exception this returns it and deletes napi-rs's reference to it.
            let v = unsafe { ToNapiValue::to_napi_value(env.raw(), e) }
                .ok()
                .filter(|v| !v.is_null())
                // SAFETY: a live value of this env.
                .map(|v| unsafe { JsUnknown::from_raw_unchecked(env.raw(), v) });
            Called::Threw(text, v)
        }
    }
}

impl JsPolicy {
    fn call(&self, c: &Classified) -> std::result::Result<String, String> {
        let raw = self.env.get();
        if raw.is_null() {
            return Err("policy function called outside a controller method".into());
        }
        // SAFETY: `raw` is the live env of the controller method running now.
        let env = unsafe { Env::from_raw(raw) };
        let f = self.func.borrow();
        let func: napi::Result<JsFunction> = f
            .as_ref()
            .ok_or_else(|| napi::Error::from_reason("policy function released"))
            .and_then(|f| env.get_reference_value(f));
        let called = match func {
            Ok(func) => call_policy(&env, &func, &self.classes, c),
            Err(e) => Called::Threw(e.reason, None),
        };
        match called {
            Called::Returned(v) => v
                .coerce_to_string()
                .and_then(|s| s.into_utf8())
                .and_then(|s| s.into_owned())
                .map_err(|e| e.reason),
            Called::Threw(text, _) => {
                *self.thrown.borrow_mut() = Some(text.clone());
                Err(text)
            }
        }
    }
}

impl Policy for JsPolicy {
    fn select(&mut self, c: &Classified) -> opsel::Result<CcaName> {
        match self.call(c) {
            Ok(name) => CcaName::new(&name),
            Err(text) => Err(opsel::Error::invalid(format!(
                "policy function threw {text} for class {}",
                self.classes.get(c.class_index).map_or("?", String::as_str)
            ))),
        }
    }
}

// The option types below are declared for the TypeScript types only: the
// options object is read with serde into `opsel::ops::ControllerSpec`
// (camelCase keys become the spec's snake_case fields), which holds the
// defaults and the checks.
/// Adaptive steady time (000 §6 future work): grow Y while the decision is
/// stable, shrink it when it changes. All optional; defaults [Y/2, 8·Y], ×2, ×0.5.
#[allow(dead_code)]
#[napi(object)]
pub struct AdaptiveOptions {
    pub min_s: Option<f64>,
    pub max_s: Option<f64>,
    pub grow: Option<f64>,
    pub shrink: Option<f64>,
    /// "decision" (default) or "class".
    pub key: Option<String>,
}

/// Progressive probing: end the probe once a prefix is classified with
/// `minConfidence` (0.8) by `agree` (1) consecutive checks, checking at
/// `minSamples` (5) then every `step` (5) samples.
#[allow(dead_code)]
#[napi(object)]
pub struct ProgressiveOptions {
    pub min_samples: Option<u32>,
    pub step: Option<u32>,
    pub min_confidence: Option<f64>,
    pub agree: Option<u32>,
}

/// Controller options (all optional): the fields of the core's
/// `ControllerSpec` in camelCase.
#[allow(dead_code)]
#[napi(object)]
pub struct ControllerOptions {
    /// "passive" (default; Y = 60 s) or "active" (Y = 100 s).
    pub mode: Option<String>,
    /// Active probing pattern (default "S5-C5-S5-B5").
    pub pattern: Option<String>,
    /// Steady time Y in seconds; 0 = probe once.
    pub steady_s: Option<f64>,
    /// "stump" (default), a table spec ("B1-C1=bbr, *=cubic") or a function
    /// `(classified) => ccaName`.
    #[napi(ts_type = "string | ((classified: Classified) => string)")]
    pub policy: Option<JsUnknown>,
    /// CCA of the socket before the first decision (default "cubic").
    pub initial_cca: Option<String>,
    #[napi(ts_type = "boolean | AdaptiveOptions")]
    pub adaptive: Option<JsUnknown>,
    #[napi(ts_type = "boolean | ProgressiveOptions")]
    pub progressive: Option<JsUnknown>,
    /// Prefix lengths that get a prefix model (default every `step` below w).
    pub prefix_lens: Option<Vec<u32>>,
    /// RTT sample period in seconds (default 1).
    pub sample_period_s: Option<f64>,
    pub grace_periods: Option<u32>,
    /// Randomise each steady time by ± this fraction (0..0.5).
    pub steady_jitter: Option<f64>,
    pub seed: Option<u32>,
    /// Windows (pattern cycles) per decision: 1 (default) = one window;
    /// n > 1 = min-sum over n back-to-back windows (1..=100).
    pub cycles: Option<u32>,
    /// Margin-gated probing (needs cycles >= 2): decide after the first
    /// window whose min-sum margin reaches this value.
    pub gate_margin: Option<f64>,
    /// A probe gate file (`models/passive/gate.json` for the shipped passive
    /// model; 004 §8 B.1): each probe ends at the first of the gate's check
    /// lengths whose prefix decision the gate accepts, else runs the full
    /// window (`stats().gateExits` counts those).
    pub gate: Option<String>,
    /// Override of the gate file's threshold, a probability in [0, 1].
    pub gate_threshold: Option<f64>,
    /// Reject a model trained for another probing mode or pattern (default true).
    pub check_model: Option<bool>,
}

/// The classification passed to a policy function. `label` is the
/// recognised class; `bbrPresent`, `heterogeneous`, `bbrFlows` and
/// `totalFlows` describe the background, which in passive mode is the class
/// minus the transfer's own flow (it sends while the window fills).
#[allow(dead_code)]
#[napi(object, js_name = "Classified")]
pub struct Classified_ {
    pub label: String,
    pub class_index: u32,
    pub confidence: f64,
    pub distance: f64,
    pub bbr_present: bool,
    pub heterogeneous: bool,
    pub bbr_flows: u32,
    pub total_flows: u32,
}

/// One controller output: the core's serialized output (the one schema of
/// the CLI log, Python and Node) with its keys and `kind` in camelCase.
/// `kind` is an action ("setCca", "sendFullSpeed", "silence", "steady") or
/// an event ("phase", "classified", "cycleClassified", "selected",
/// "decisionFailed", "probeIncomplete"); the other fields depend on it.
/// Declared for the TypeScript types; the object comes from `js_form`.
#[allow(dead_code)]
#[napi(object)]
pub struct OpsOutput {
    pub kind: String,
    pub cca: Option<String>,
    /// End of the action (ns); null for "steady until the end of the transfer".
    pub until_ns: Option<f64>,
    pub at_ns: Option<f64>,
    pub phase: Option<String>,
    pub cycle: Option<f64>,
    /// The class's name in the model ("classified", "cycleClassified").
    pub label: Option<String>,
    /// The mix the policy decided on, canonical ("bbr:1-cubic:1"): in
    /// passive mode the class minus the transfer's own flow.
    pub mix: Option<String>,
    pub class_index: Option<u32>,
    pub confidence: Option<f64>,
    pub distance: Option<f64>,
    pub samples: Option<u32>,
    pub needed: Option<u32>,
    pub early: Option<bool>,
    /// Steady time Y chosen ("selected"), ns; null = until the end.
    pub steady_ns: Option<f64>,
    pub message: Option<String>,
    /// "cycleClassified" (cycles > 1): 0-based window index, windows per
    /// decision, the running min-sum class (`leader`, `leaderIndex`) and its
    /// margin (`label`, `classIndex`, `distance`: this window's own nearest
    /// class).
    pub index: Option<u32>,
    pub cycles: Option<u32>,
    pub leader: Option<String>,
    pub leader_index: Option<u32>,
    pub margin: Option<f64>,
}

/// One controller output with the class names (`label`, `leader`).
pub(crate) fn output(o: &Output, classes: &[String]) -> serde_json::Value {
    js_form(&Labeled::new(o, classes))
}

/// Cumulative counters (ns and bytes as numbers).
#[napi(object)]
pub struct OpsStats {
    pub decisions: f64,
    pub early_exits: f64,
    /// Probes the probe gate ended before the full window.
    pub gate_exits: f64,
    pub failed_decisions: f64,
    pub incomplete_probes: f64,
    pub cca_switches: f64,
    pub probe_ns: f64,
    pub steady_ns: f64,
    pub probe_bytes: f64,
    pub steady_bytes: f64,
}

impl From<opsel::ops::Stats> for OpsStats {
    fn from(s: opsel::ops::Stats) -> Self {
        OpsStats {
            decisions: s.decisions as f64,
            early_exits: s.early_exits as f64,
            gate_exits: s.gate_exits as f64,
            failed_decisions: s.failed_decisions as f64,
            incomplete_probes: s.incomplete_probes as f64,
            cca_switches: s.cca_switches as f64,
            probe_ns: s.probe_ns as f64,
            steady_ns: s.steady_ns as f64,
            probe_bytes: s.probe_bytes as f64,
            steady_bytes: s.steady_bytes as f64,
        }
    }
}

pub(crate) fn secs(v: f64, what: &str) -> napi::Result<u64, Code> {
    if !(v.is_finite() && (0.0..1.8e10).contains(&v)) {
        return Err(invalid(format!(
            "{what} = {v} s must be a finite number of seconds >= 0"
        )));
    }
    Ok((v * 1e9).round() as u64)
}

/// The OPS controller (000 Ch. 6–7): probe → classify the RTT window with the
/// model → select a CCA with the policy → steady for Y → repeat.
///
/// ```js
/// const ctl = new Controller(loadModel('model.json'), { mode: 'active', steadyS: 100 })
/// ctl.start(0)
/// ctl.handleTimeout(t); ctl.handleSample(t, rttMs)
/// for (const o of ctl.drain()) if (o.kind === 'setCca') setCca(fd, o.cca)
/// ```
#[napi(custom_finalize)]
pub struct Controller {
    /// Borrowed per call: a policy function that calls back into its own
    /// controller gets an error instead of aliasing the state.
    inner: RefCell<Core<Box<dyn Classifier + Send>, AnyPolicy>>,
    classes: Vec<String>,
    env: Rc<Cell<sys::napi_env>>,
    func: Rc<RefCell<Option<Ref<()>>>>,
    thrown: Rc<RefCell<Option<String>>>,
}

impl ObjectFinalize for Controller {
    fn finalize(self, env: Env) -> napi::Result<()> {
        if let Some(mut r) = self.func.borrow_mut().take() {
            r.unref(env)?;
        }
        Ok(())
    }
}

pub(crate) fn js(e: napi::Error) -> napi::Error<Code> {
    invalid(e.reason)
}

/// What the model and the options give: the spec (defaults and checks are
/// the core's), the model file, and a policy function if one was passed.
pub(crate) struct Parts {
    pub spec: ControllerSpec,
    pub file: Arc<KnnModelFile>,
    pub classes: Vec<String>,
    pub func: Option<JsFunction>,
}

/// A `Model` or a model-file path.
fn model_file(env: Env, model: JsUnknown) -> napi::Result<Arc<KnnModelFile>, Code> {
    match model.get_type().map_err(js)? {
        ValueType::String => {
            let p = model
                .coerce_to_string()
                .and_then(|s| s.into_utf8())
                .and_then(|s| s.into_owned())
                .map_err(js)?;
            KnnModelFile::load(&p).map(Arc::new).map_err(to_js)
        }
        ValueType::Object => {
            // SAFETY: a live value of this env; unwrap checks it is a Model.
            let m = unsafe { <&Model as FromNapiValue>::from_napi_value(env.raw(), model.raw()) }
                .map_err(|_| {
                invalid("model must be a Model (from loadModel()) or a model-file path")
            })?;
            Ok(Arc::clone(&m.file))
        }
        t => Err(invalid(format!(
            "model must be a Model or a model-file path, got {t:?}"
        ))),
    }
}

pub(crate) fn parts(
    env: Env,
    model: JsUnknown,
    options: Option<JsObject>,
) -> napi::Result<Parts, Code> {
    let file = model_file(env, model)?;
    let classes = file.model.classes().to_vec();
    let mut fields = serde_json::Map::new();
    let mut func = None;
    if let Some(o) = options {
        let names = o.get_property_names().map_err(js)?;
        for i in 0..names.get_array_length().map_err(js)? {
            let key: String = names
                .get_element::<JsString>(i)
                .and_then(|k| k.into_utf8())
                .and_then(|k| k.into_owned())
                .map_err(js)?;
            let v: JsUnknown = o.get_named_property(&key).map_err(js)?;
            match v.get_type().map_err(js)? {
                ValueType::Undefined => continue,
                // A function policy is the spec's "callback".
                ValueType::Function if key == "policy" => {
                    func = Some(JsFunction::try_from(v).map_err(js)?);
                    fields.insert(key, "callback".into());
                }
                _ => {
                    let v: serde_json::Value = env
                        .from_js_value(v)
                        .map_err(|e| invalid(format!("option {key}: {}", e.reason)))?;
                    fields.insert(snake(&key), snake_keys(v));
                }
            }
        }
    }
    let spec = ControllerSpec::from_value(serde_json::Value::Object(fields)).map_err(to_js)?;
    Ok(Parts {
        spec,
        file,
        classes,
        func,
    })
}

#[napi]
impl Controller {
    /// `model` is a `Model` (from `loadModel()`) or a model-file path.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        #[napi(ts_arg_type = "Model | string")] model: JsUnknown,
        #[napi(ts_arg_type = "ControllerOptions | undefined | null")] options: Option<JsObject>,
    ) -> napi::Result<Self, Code> {
        guard(|| {
            let Parts {
                spec,
                file,
                classes,
                func: f,
            } = parts(env, model, options)?;
            let env_cell = Rc::new(Cell::new(std::ptr::null_mut()));
            let func = Rc::new(RefCell::new(None));
            let thrown = Rc::new(RefCell::new(None));
            let callback = match f {
                Some(f) => {
                    *func.borrow_mut() = Some(env.create_reference(f).map_err(js)?);
                    Some(JsPolicy {
                        env: Rc::clone(&env_cell),
                        func: Rc::clone(&func),
                        classes: classes.clone(),
                        thrown: Rc::clone(&thrown),
                    })
                }
                None => None,
            };
            let inner = match spec.build(&file, callback) {
                Ok(c) => c,
                Err(e) => {
                    if let Some(mut r) = func.borrow_mut().take() {
                        let _ = r.unref(env);
                    }
                    return Err(to_js(e));
                }
            };
            Ok(Self {
                inner: RefCell::new(inner),
                classes,
                env: env_cell,
                func,
                thrown,
            })
        })
    }

    fn core(&self) -> napi::Result<CoreRef<'_>, Code> {
        self.inner.try_borrow_mut().map_err(|_| {
            invalid("the controller is busy: a policy function must not call back into its own controller")
        })
    }

    /// Run a core call with the env published for a policy function, then
    /// turn a thrown policy exception into a coded error.
    fn call<T>(
        &self,
        env: Env,
        f: impl FnOnce(&mut Core<Box<dyn Classifier + Send>, AnyPolicy>) -> opsel::Result<T>,
    ) -> napi::Result<T, Code> {
        guard(|| {
            let mut core = self.core()?;
            self.env.set(env.raw());
            let r = f(&mut core);
            self.env.set(std::ptr::null_mut());
            if let Some(text) = self.thrown.borrow_mut().take() {
                return Err(invalid(format!(
                    "policy function threw {text}; the controller kept the last CCA and will probe again next cycle"
                )));
            }
            r.map_err(to_js)
        })
    }

    /// Begin the first probe at `nowNs`.
    #[napi]
    pub fn start(&self, env: Env, now_ns: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        self.call(env, |c| c.start(t))
    }

    /// Feed one aggregated RTT sample (mean `rttMs` over the period ending at `nowNs`).
    #[napi]
    pub fn handle_sample(&self, env: Env, now_ns: f64, rtt_ms: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        self.call(env, |c| c.handle_sample(t, rtt_ms))
    }

    /// Let time pass: pattern segment changes, probe deadlines, end of steady.
    #[napi]
    pub fn handle_timeout(&self, env: Env, now_ns: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        self.call(env, |c| c.handle_timeout(t))
    }

    /// Account bytes sent to the current phase.
    #[napi]
    pub fn handle_bytes(&self, env: Env, now_ns: f64, bytes: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        let b = whole(bytes, "bytes", "bytes")?;
        self.call(env, |c| c.handle_bytes(t, b))
    }

    /// When `handleTimeout` should next be called (ns), or null.
    #[napi]
    pub fn poll_timeout(&self) -> napi::Result<Option<f64>, Code> {
        Ok(self.core()?.poll_timeout().map(|v| v as f64))
    }

    /// The next output (oldest first), or null.
    #[napi(ts_return_type = "OpsOutput | null")]
    pub fn poll(&self) -> napi::Result<Option<serde_json::Value>, Code> {
        Ok(self.core()?.poll().map(|o| output(&o, &self.classes)))
    }

    /// Every pending output, oldest first.
    #[napi(ts_return_type = "Array<OpsOutput>")]
    pub fn drain(&self) -> napi::Result<Vec<serde_json::Value>, Code> {
        let mut core = self.core()?;
        let mut v = Vec::new();
        while let Some(o) = core.poll() {
            v.push(output(&o, &self.classes));
        }
        Ok(v)
    }

    /// "idle", "probe", "classify", "select" or "steady".
    #[napi(getter)]
    pub fn phase(&self) -> napi::Result<String, Code> {
        Ok(self.core()?.phase().name().into())
    }
    /// Current OPS cycle (0-based).
    #[napi(getter)]
    pub fn cycle(&self) -> napi::Result<f64, Code> {
        Ok(self.core()?.cycle() as f64)
    }
    /// The CCA the socket is (to be) set to.
    #[napi(getter)]
    pub fn socket_cca(&self) -> napi::Result<String, Code> {
        Ok(self.core()?.socket_cca().as_str().into())
    }
    /// Current base steady time Y (ns) after adaptation.
    #[napi(getter)]
    pub fn steady_ns(&self) -> napi::Result<f64, Code> {
        Ok(self.core()?.steady_ns() as f64)
    }
    /// Window length w in samples.
    #[napi(getter)]
    pub fn window_len(&self) -> napi::Result<u32, Code> {
        Ok(self.core()?.window_len() as u32)
    }
    /// Windows (pattern cycles) per decision (1 = one window; > 1 = min-sum).
    #[napi(getter)]
    pub fn cycles(&self) -> napi::Result<u32, Code> {
        Ok(self.core()?.config().cycles as u32)
    }
    /// The model's class names.
    #[napi(getter)]
    pub fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }

    /// Counters, with the running phase accounted up to `nowNs` when given.
    #[napi]
    pub fn stats(&self, now_ns: Option<f64>) -> napi::Result<OpsStats, Code> {
        let core = self.core()?;
        let s = match now_ns {
            Some(t) => core.stats_at(ns(t, "nowNs")?),
            None => core.stats(),
        };
        Ok(OpsStats::from(s))
    }
}

/// Jain's fairness index of per-stream throughputs (000 Eq. 2.1), in [1/n, 1].
#[napi]
pub fn jain(rates: Vec<f64>) -> napi::Result<f64, Code> {
    guard(|| opsel::fair::jain(&rates).map_err(to_js))
}

/// Equal share of a bottleneck of `capacity` among `nStreams` (000 §4.2).
#[napi]
pub fn fair_share(capacity: f64, n_streams: u32) -> napi::Result<f64, Code> {
    guard(|| opsel::fair::fair_share(capacity, n_streams as usize).map_err(to_js))
}
