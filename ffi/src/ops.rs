//! C wrappers for `opsel::ops` (the sans-IO OPS controller and its decision
//! policies, 000 Ch. 6–7) and `opsel::fair` (Jain's index, fair share).
//!
//! The controller never touches a socket or a clock: the caller feeds it
//! time (`now_ns`, any monotonic ns origin) and 1 Hz RTT samples and polls
//! outputs: actions for the socket (set CCA, send at full speed, be silent,
//! steady until t) and events (phase changes, classification, selection).
//! Driving loop:
//!
//! ```c
//! opsel_ops_controller_start(ctl, now);
//! for (;;) {
//!   opsel_ops_controller_handle_timeout(ctl, now);
//!   opsel_ops_controller_handle_sample(ctl, now, rtt_ms);  // once per second
//!   while (opsel_ops_controller_poll(ctl, &out, &has) == OPSEL_OK && has) { act(&out); }
//! }
//! ```

use crate::error::{f64_slice, guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use crate::model::{clear_out, opsel_model};
use opsel::ops::{
    Action, AdaptiveSpec, AnyPolicy, Classified, Classifier, Config, Controller, ControllerSpec,
    Event, ModeSpec, Output, Phase, Policy, Progressive, ProgressiveSpec, StabilityKeySpec, Stump,
    TablePolicy,
};
use opsel::probe::{CcaName, Pattern};
use std::ffi::{c_char, c_void, CString};

/// `opsel_ops_config.mode`: keep sending while the RTT window fills (000 §3.2).
pub const OPSEL_OPS_PASSIVE: u32 = 0;
/// `opsel_ops_config.mode`: follow the probing `pattern` (bursts and silences).
pub const OPSEL_OPS_ACTIVE: u32 = 1;
/// `opsel_ops_config.adaptive_key`: shrink Y when the selected CCA changes (default).
pub const OPSEL_OPS_KEY_DECISION: u32 = 0;
/// `opsel_ops_config.adaptive_key`: shrink Y when the recognised class changes.
pub const OPSEL_OPS_KEY_CLASS: u32 = 1;

/// Controller settings. Start from `opsel_ops_config_passive()` or
/// `opsel_ops_config_active()` and change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_ops_config {
    /// `OPSEL_OPS_PASSIVE` or `OPSEL_OPS_ACTIVE`.
    pub mode: u32,
    /// Active probing pattern, e.g. `"S5-C5-S5-B5"` or `"cubic:5-silence:5-bbr:5"`
    /// (NUL-terminated; read during `opsel_ops_controller_new()` only). Ignored when passive.
    pub pattern: *const c_char,
    /// RTT sample period, ns (000 §3.2: 1 s).
    pub sample_period_ns: u64,
    /// Steady time Y, ns; 0 = probe once, then steady to the end (iPerfOPS `-S 0`).
    pub steady_ns: u64,
    /// CCA of the socket before the first decision (NUL-terminated; "cubic").
    pub initial_cca: *const c_char,
    /// Adaptive Y (000 §6 future work): grow while stable, shrink on change.
    pub adaptive: bool,
    /// Adaptive bounds, ns; both 0 = [Y/2, 8·Y].
    pub adaptive_min_ns: u64,
    pub adaptive_max_ns: u64,
    /// Factors (>= 1 and in (0, 1]); both 0 = 2 and 0.5.
    pub adaptive_grow: f64,
    pub adaptive_shrink: f64,
    /// `OPSEL_OPS_KEY_DECISION` or `OPSEL_OPS_KEY_CLASS`.
    pub adaptive_key: u32,
    /// Progressive probing: end the probe once a prefix is classified confidently.
    pub progressive: bool,
    /// Prefix lengths that get a prefix model (the K-NN references truncated),
    /// e.g. {5, 10, 15} for w = 20; NULL/0 = every `progressive_step` from
    /// `progressive_min_samples` below w.
    pub prefix_lens: *const usize,
    pub prefix_lens_len: usize,
    /// First check after this many samples (5), then every `step` (5).
    pub progressive_min_samples: usize,
    pub progressive_step: usize,
    /// Confidence needed (0.8) by `agree` (1) consecutive checks.
    pub progressive_min_confidence: f64,
    pub progressive_agree: usize,
    /// Extra sample periods before a probe without samples is abandoned (5).
    pub grace_periods: u32,
    /// Randomise each steady time by ± this fraction (0 = off, at most 0.5).
    pub steady_jitter: f64,
    /// Seed of the jitter PRNG.
    pub seed: u64,
    /// Windows (pattern cycles) per decision: 1 (default) = one window, the
    /// thesis; n > 1 = n windows back to back, decided by the smallest sum of
    /// per-window nearest class distances (min-sum; progressive probing then
    /// checks after each window). 0 or more than 100 is rejected
    /// (`OPSEL_INVALID_INPUT`).
    pub cycles: usize,
    /// Reject a model trained for another probing mode or pattern (true in
    /// both presets).
    pub check_model: bool,
    /// A probe gate file, NUL-terminated UTF-8 (`models/passive/gate.json`
    /// for the shipped passive model; 004 §8 B.1): each probe ends at the
    /// first of the gate's check lengths whose prefix decision the gate
    /// accepts, else runs the full window (`opsel_ops_stats.gate_exits`
    /// counts those). NULL (both presets) = no gate.
    pub gate_path: *const c_char,
    /// Override of the gate file's threshold, a probability in (0, 1]
    /// (higher = later, safer exits); 0 (both presets) = the file's own.
    /// Non-zero without `gate_path`, or outside [0, 1], is rejected
    /// (`OPSEL_INVALID_INPUT`).
    pub gate_threshold: f64,
}

fn config_c(cfg: &Config, mode: u32, pattern: *const c_char) -> opsel_ops_config {
    let p = Progressive::default();
    opsel_ops_config {
        mode,
        pattern,
        sample_period_ns: cfg.sample_period_ns,
        steady_ns: cfg.steady_ns,
        initial_cca: c"cubic".as_ptr(),
        adaptive: false,
        adaptive_min_ns: 0,
        adaptive_max_ns: 0,
        adaptive_grow: 0.0,
        adaptive_shrink: 0.0,
        adaptive_key: OPSEL_OPS_KEY_DECISION,
        progressive: false,
        prefix_lens: std::ptr::null(),
        prefix_lens_len: 0,
        progressive_min_samples: p.min_samples,
        progressive_step: p.step,
        progressive_min_confidence: p.min_confidence,
        progressive_agree: p.agree,
        grace_periods: cfg.grace_periods,
        steady_jitter: cfg.steady_jitter,
        seed: cfg.seed,
        cycles: cfg.cycles,
        check_model: ControllerSpec::default().check_model,
        gate_path: std::ptr::null(),
        gate_threshold: 0.0,
    }
}

/// Passive probing, OPS-60 (000 Table 6.2): Y = 60 s, 1 s samples.
#[no_mangle]
pub extern "C" fn opsel_ops_config_passive() -> opsel_ops_config {
    config_c(&Config::passive(), OPSEL_OPS_PASSIVE, std::ptr::null())
}

/// Active probing with "S5-C5-S5-B5" (000 §5.6), Y = 100 s.
#[no_mangle]
pub extern "C" fn opsel_ops_config_active() -> opsel_ops_config {
    let cfg = Config::active(Pattern::parse(Pattern::S5_C5_S5_B5).expect("built-in pattern"));
    config_c(&cfg, OPSEL_OPS_ACTIVE, c"S5-C5-S5-B5".as_ptr())
}

/// The C config as the core's controller spec, field for field (zero and
/// NULL stand for "the spec's default" where the header says so).
unsafe fn spec_from_c(c: &opsel_ops_config) -> Result<ControllerSpec, Fail> {
    let s_of = |ns: u64| ns as f64 / 1e9;
    let mode = match c.mode {
        OPSEL_OPS_PASSIVE => ModeSpec::Passive,
        OPSEL_OPS_ACTIVE => ModeSpec::Active,
        m => {
            return Err(Fail::invalid(format!(
                "config.mode {m} is unknown; use OPSEL_OPS_PASSIVE (0) or OPSEL_OPS_ACTIVE (1)"
            )))
        }
    };
    let pattern = match mode {
        ModeSpec::Active if !c.pattern.is_null() => {
            Some(unsafe { utf8(c.pattern, "config.pattern") }?.to_string())
        }
        _ => None,
    };
    let mut spec = ControllerSpec {
        mode,
        pattern,
        steady_s: Some(s_of(c.steady_ns)),
        sample_period_s: s_of(c.sample_period_ns),
        grace_periods: c.grace_periods,
        steady_jitter: c.steady_jitter,
        seed: c.seed,
        cycles: c.cycles,
        check_model: c.check_model,
        ..ControllerSpec::default()
    };
    if !c.gate_path.is_null() {
        spec.gate = Some(unsafe { utf8(c.gate_path, "config.gate_path") }?.into());
    }
    // 0 stands for the file's own threshold, like the other zero defaults.
    spec.gate_threshold = (c.gate_threshold != 0.0).then_some(c.gate_threshold);
    if !c.initial_cca.is_null() {
        spec.initial_cca = unsafe { utf8(c.initial_cca, "config.initial_cca") }?.to_string();
    }
    if c.adaptive {
        let bounds = c.adaptive_min_ns != 0 || c.adaptive_max_ns != 0;
        let factors = c.adaptive_grow != 0.0 || c.adaptive_shrink != 0.0;
        spec.adaptive = Some(AdaptiveSpec {
            min_s: bounds.then(|| s_of(c.adaptive_min_ns)),
            max_s: bounds.then(|| s_of(c.adaptive_max_ns)),
            grow: factors.then_some(c.adaptive_grow),
            shrink: factors.then_some(c.adaptive_shrink),
            key: match c.adaptive_key {
                OPSEL_OPS_KEY_DECISION => StabilityKeySpec::Decision,
                OPSEL_OPS_KEY_CLASS => StabilityKeySpec::Class,
                k => {
                    return Err(Fail::invalid(format!(
                        "config.adaptive_key {k} is unknown; use OPSEL_OPS_KEY_DECISION (0) or OPSEL_OPS_KEY_CLASS (1)"
                    )))
                }
            },
        });
    }
    if c.progressive {
        spec.progressive = Some(ProgressiveSpec {
            min_samples: c.progressive_min_samples,
            step: c.progressive_step,
            min_confidence: c.progressive_min_confidence,
            agree: c.progressive_agree,
        });
        if !c.prefix_lens.is_null() && c.prefix_lens_len > 0 {
            if !c.prefix_lens.is_aligned() {
                return Err(Fail::invalid(
                    "config.prefix_lens is not aligned for size_t",
                ));
            }
            // SAFETY: non-null, aligned; the caller promises prefix_lens_len values.
            let lens = unsafe { std::slice::from_raw_parts(c.prefix_lens, c.prefix_lens_len) };
            spec.prefix_lens = Some(lens.to_vec());
        }
    }
    Ok(spec)
}

/// The classification handed to a callback policy.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_ops_classified {
    /// Class name (a 000 Table 6.1 label such as "B1-C1"), NUL-terminated;
    /// valid during the callback only.
    pub label: *const c_char,
    /// Index into the model's classes.
    pub class_index: usize,
    /// Classifier confidence in [0, 1].
    pub confidence: f64,
    /// Distance to the nearest reference.
    pub distance: f64,
    /// BBR flows in the background: the recognised mix, minus the transfer's
    /// own flow in passive mode (the transfer sends while the window fills,
    /// and `label` counts it; `opsel::ops::Classifier::counts_own_flow`).
    pub bbr_flows: u32,
    /// All flows in that background.
    pub total_flows: u32,
    /// At least one BBR flow in that background (000 §4.1 stump condition).
    pub bbr_present: bool,
}

/// A user policy: choose the CCA for the steady phase after `classified`.
/// Write its NUL-terminated name (at most 15 characters) into `out_cca`
/// (16 bytes) and return 0; any other return value fails the decision (the
/// controller emits `OPSEL_OPS_EVENT_DECISION_FAILED`, keeps the last CCA and
/// probes again next cycle). Called on the thread that feeds the controller,
/// from `opsel_ops_controller_handle_sample()` / `_handle_timeout()`; it must
/// not call back into the same controller.
pub type opsel_ops_policy_fn = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        classified: *const opsel_ops_classified,
        out_cca: *mut c_char,
    ) -> i32,
>;

/// A C function pointer policy (see `opsel_ops_policy_fn`).
#[derive(Clone)]
pub(crate) struct CallbackPolicy {
    f: unsafe extern "C" fn(*mut c_void, *const opsel_ops_classified, *mut c_char) -> i32,
    user_data: *mut c_void,
    names: Vec<CString>,
}

// SAFETY: the user data pointer is only passed back to the user's callback;
// the header documents that the callback runs on the feeding thread.
unsafe impl Send for CallbackPolicy {}

pub(crate) type PolicyKind = AnyPolicy<CallbackPolicy>;

impl Policy for CallbackPolicy {
    fn select(&mut self, c: &Classified) -> opsel::Result<CcaName> {
        let label = self
            .names
            .get(c.class_index)
            .map_or(c"?".as_ptr(), |n| n.as_ptr());
        let arg = opsel_ops_classified {
            label,
            class_index: c.class_index,
            confidence: c.confidence,
            distance: c.distance,
            bbr_flows: c.mix.count("bbr"),
            total_flows: c.mix.total(),
            bbr_present: c.mix.bbr_present(),
        };
        let mut buf = [0 as c_char; 16];
        // SAFETY: the user's callback with the contract documented on opsel_ops_policy_fn.
        let rc = unsafe { (self.f)(self.user_data, &arg, buf.as_mut_ptr()) };
        if rc != 0 {
            return Err(opsel::Error::invalid(format!(
                "policy callback returned {rc} for class {}; return 0 and write a CCA name",
                c.mix
            )));
        }
        buf[15] = 0;
        // SAFETY: NUL-terminated within the buffer (forced above).
        let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        let s = s.to_str().map_err(|_| {
            opsel::Error::invalid("policy callback wrote a CCA name that is not UTF-8")
        })?;
        CcaName::new(s)
    }
}

/// A decision policy. Opaque: `opsel_ops_policy_stump()`,
/// `opsel_ops_policy_table()` or `opsel_ops_policy_callback()`, released with
/// `opsel_ops_policy_free()`. `opsel_ops_controller_new()` copies it, so it
/// may be freed or reused right after.
pub struct opsel_ops_policy {
    kind: PolicyKind,
}

/// Clear `*out` first (a failed create leaves NULL), then build and store.
fn new_policy(
    out: *mut *mut opsel_ops_policy,
    build: impl FnOnce() -> Result<PolicyKind, Fail>,
) -> Result<(), Fail> {
    let o = clear_out(out)?;
    let kind = build()?;
    Handle::into_out(opsel_ops_policy { kind }, o);
    Ok(())
}

/// The thesis's decision stump (000 §4.1): BBR present → `bbr_present`
/// (NULL = "bbr"), otherwise `otherwise` (NULL = "cubic").
/// Errors: `OPSEL_NULL_POINTER` (out), `OPSEL_INVALID_INPUT` (bad CCA name).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_policy_stump(
    bbr_present: *const c_char,
    otherwise: *const c_char,
    out_policy: *mut *mut opsel_ops_policy,
) -> opsel_status {
    guard(|| {
        new_policy(out_policy, || {
            let mut s = Stump::default();
            if !bbr_present.is_null() {
                s.bbr_present = CcaName::new(unsafe { utf8(bbr_present, "bbr_present") }?)?;
            }
            if !otherwise.is_null() {
                s.otherwise = CcaName::new(unsafe { utf8(otherwise, "otherwise") }?)?;
            }
            Ok(PolicyKind::Stump(s))
        })
    })
}

/// A table policy from `label=cca` entries separated by `,` or `;`, `*=cca`
/// as the fallback, e.g. `"B1-C0=bbr, B1-C1=bbr, B1-B1=bbr, *=cubic"`.
/// `opsel_ops_controller_new()` fails if a class of the model has no entry
/// and there is no fallback.
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT` (syntax; the message
/// names the entry).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_policy_table(
    spec: *const c_char,
    out_policy: *mut *mut opsel_ops_policy,
) -> opsel_status {
    guard(|| {
        new_policy(out_policy, || {
            Ok(PolicyKind::Table(TablePolicy::parse(unsafe {
                utf8(spec, "spec")
            }?)?))
        })
    })
}

/// A user policy calling `callback(user_data, classified, out_cca)` for each
/// decision (see `opsel_ops_policy_fn`).
/// Ownership: `user_data` stays the caller's and must outlive every
/// controller created with this policy.
/// Errors: `OPSEL_NULL_POINTER` (NULL callback or out).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_policy_callback(
    callback: opsel_ops_policy_fn,
    user_data: *mut c_void,
    out_policy: *mut *mut opsel_ops_policy,
) -> opsel_status {
    guard(|| {
        new_policy(out_policy, || {
            Ok(PolicyKind::Callback(CallbackPolicy {
                f: callback.ok_or_else(|| Fail::null("callback"))?,
                user_data,
                names: Vec::new(),
            }))
        })
    })
}

/// Release a policy (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_policy_free(policy: *mut opsel_ops_policy) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(policy) }
}

/// An OPS controller. Opaque: `opsel_ops_controller_new()` /
/// `opsel_ops_controller_free()`. One thread at a time (it is a state
/// machine; feed it from the thread that drives the socket).
pub struct opsel_ops_controller {
    inner: CtlCore,
    names: Vec<CString>,
    /// Message of the last polled DecisionFailed event (kept for the pointer).
    message: CString,
}

/// Create a controller that classifies RTT windows with `model` (its window
/// length w sets the probe length; a copy is kept, so the model may be freed
/// afterwards), decides with `policy` (copied; NULL = the stump) and runs
/// with `config` (NULL = `opsel_ops_config_passive()`).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a bad pattern,
/// CCA name or setting (named in the message), a class name that is not a
/// mix label, prefix lengths not below w, or a table policy missing a class.
/// Ownership: the caller owns `*out_controller`.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_new(
    model: *const opsel_model,
    policy: *const opsel_ops_policy,
    config: *const opsel_ops_config,
    out_controller: *mut *mut opsel_ops_controller,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_controller)?;
        let (inner, names) = unsafe { build_controller(model, policy, config) }?;
        Handle::into_out(
            opsel_ops_controller {
                inner,
                names,
                message: CString::default(),
            },
            out,
        );
        Ok(())
    })
}

/// The controller type behind `opsel_ops_controller` and `opsel_ops_driver`.
pub(crate) type CtlCore = Controller<Box<dyn Classifier + Send>, PolicyKind>;

/// Build a controller from the C arguments of `opsel_ops_controller_new()`
/// (shared with `opsel_ops_driver_new()`): the one place that maps
/// `opsel_ops_config` + policy + model to the core; also returns the model's
/// class names as C strings.
pub(crate) unsafe fn build_controller(
    model: *const opsel_model,
    policy: *const opsel_ops_policy,
    config: *const opsel_ops_config,
) -> Result<(CtlCore, Vec<CString>), Fail> {
    let m = unsafe { Handle::borrow(model) }?;
    let spec = match unsafe { config.as_ref() } {
        None => ControllerSpec::default(),
        Some(c) => unsafe { spec_from_c(c) }?,
    };
    let mut kind = match unsafe { policy.as_ref() } {
        None => PolicyKind::Stump(Stump::default()),
        Some(p) => p.kind.clone(),
    };
    if let PolicyKind::Callback(CallbackPolicy { names, .. }) = &mut kind {
        names.clone_from(&m.names);
    }
    let inner = spec.build_with_policy(&m.file, kind)?;
    Ok((inner, m.names.clone()))
}

/// Release a controller (NULL ignored).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_free(controller: *mut opsel_ops_controller) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(controller) }
}

/// Begin the first probe at `now_ns`.
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` when already started.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_start(
    controller: *mut opsel_ops_controller,
    now_ns: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(controller) }?
            .inner
            .start(now_ns)?)
    })
}

/// Feed one aggregated RTT sample (mean `rtt_ms` over the period ending at
/// `now_ns`; e.g. `opsel_rtt_prober_burst()`'s mean).
/// Errors (no state change): `OPSEL_INVALID_INPUT` for a NaN/negative RTT,
/// a time earlier than a previous call, or before start.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_handle_sample(
    controller: *mut opsel_ops_controller,
    now_ns: u64,
    rtt_ms: f64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(controller) }?
            .inner
            .handle_sample(now_ns, rtt_ms)?)
    })
}

/// Let time pass: runs pattern segment changes, probe deadlines and the end
/// of a steady phase due at `now_ns`.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_handle_timeout(
    controller: *mut opsel_ops_controller,
    now_ns: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(controller) }?
            .inner
            .handle_timeout(now_ns)?)
    })
}

/// Account `bytes` sent (e.g. per 1 s interval) to the current phase.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_handle_bytes(
    controller: *mut opsel_ops_controller,
    now_ns: u64,
    bytes: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(controller) }?
            .inner
            .handle_bytes(now_ns, bytes)?)
    })
}

/// When `opsel_ops_controller_handle_timeout()` should next be called:
/// `*out_has` false when never (steady until the end of the transfer).
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_poll_timeout(
    controller: *const opsel_ops_controller,
    out_timeout_ns: *mut u64,
    out_has: *mut bool,
) -> opsel_status {
    guard(|| {
        let c = unsafe { Handle::borrow(controller) }?;
        let t = out_ptr(out_timeout_ns, "out_timeout_ns")?;
        let h = out_ptr(out_has, "out_has")?;
        let pt = c.inner.poll_timeout();
        *h = pt.is_some();
        *t = pt.unwrap_or(0);
        Ok(())
    })
}

/// `opsel_ops_output.kind`: `setsockopt(TCP_CONGESTION, cca)` on the live socket.
pub const OPSEL_OPS_SET_CCA: u32 = 0;
/// Probe burst: send payload at full speed with `cca` until `until_ns`.
pub const OPSEL_OPS_SEND_FULL_SPEED: u32 = 1;
/// Probe silence: send nothing until `until_ns`.
pub const OPSEL_OPS_SILENCE: u32 = 2;
/// Steady transfer with `cca` until `until_ns` (`has_until` false = to the end).
pub const OPSEL_OPS_STEADY: u32 = 3;
/// Event: entered `phase` of cycle `cycle` at `at_ns`.
pub const OPSEL_OPS_EVENT_PHASE: u32 = 4;
/// Event: the window (`samples` long; `early` = progressive) was classified as `label`.
pub const OPSEL_OPS_EVENT_CLASSIFIED: u32 = 5;
/// Event: the policy chose `cca` for `steady_ns` (`has_until` false = to the end).
pub const OPSEL_OPS_EVENT_SELECTED: u32 = 6;
/// Event: the classifier or policy failed (`message`); the last CCA is kept.
pub const OPSEL_OPS_EVENT_DECISION_FAILED: u32 = 7;
/// Event: only `samples` of `needed` RTT samples arrived; the probe was abandoned.
pub const OPSEL_OPS_EVENT_PROBE_INCOMPLETE: u32 = 8;
/// Event (config.cycles > 1): window `window` of `windows` was compared with
/// the references; `label`/`class_index`/`distance`: its own nearest class;
/// `leader`: the min-sum class so far, `confidence`: its margin.
pub const OPSEL_OPS_EVENT_CYCLE_CLASSIFIED: u32 = 13;

/// `opsel_ops_output.phase` values.
pub const OPSEL_OPS_PHASE_IDLE: u32 = 0;
pub const OPSEL_OPS_PHASE_PROBE: u32 = 1;
pub const OPSEL_OPS_PHASE_CLASSIFY: u32 = 2;
pub const OPSEL_OPS_PHASE_SELECT: u32 = 3;
pub const OPSEL_OPS_PHASE_STEADY: u32 = 4;

/// One controller output; which fields are meaningful depends on `kind`
/// (see the `OPSEL_OPS_*` kinds); the others are zero.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_ops_output {
    pub kind: u32,
    /// CCA name (SET_CCA, SEND_FULL_SPEED, STEADY, SELECTED), NUL-terminated.
    pub cca: [c_char; 16],
    /// End time, ns (SEND_FULL_SPEED, SILENCE, STEADY) or steady time Y (SELECTED).
    pub until_ns: u64,
    /// False for "until the end of the transfer" (STEADY / SELECTED with Y = 0).
    pub has_until: bool,
    /// Event time, ns.
    pub at_ns: u64,
    /// `OPSEL_OPS_PHASE_*` (EVENT_PHASE).
    pub phase: u32,
    pub cycle: u64,
    /// Class name (CLASSIFIED): a pointer into the model's names, valid while the controller lives.
    pub label: *const c_char,
    pub class_index: usize,
    pub confidence: f64,
    pub distance: f64,
    /// Samples in the classified window (CLASSIFIED) or that arrived (PROBE_INCOMPLETE).
    pub samples: usize,
    /// Samples the window needed (PROBE_INCOMPLETE).
    pub needed: usize,
    /// The probe ended early (CLASSIFIED, progressive probing).
    pub early: bool,
    /// Failure message (DECISION_FAILED), valid until the next poll; else "".
    pub message: *const c_char,
    /// CYCLE_CLASSIFIED: 0-based window index, windows per decision, and the
    /// running min-sum class index.
    pub window: usize,
    pub windows: usize,
    pub leader: usize,
}

pub(crate) fn phase_c(p: Phase) -> u32 {
    match p {
        Phase::Idle => OPSEL_OPS_PHASE_IDLE,
        Phase::Probe => OPSEL_OPS_PHASE_PROBE,
        Phase::Classify => OPSEL_OPS_PHASE_CLASSIFY,
        Phase::Select => OPSEL_OPS_PHASE_SELECT,
        Phase::Steady => OPSEL_OPS_PHASE_STEADY,
    }
}

pub(crate) fn cca_arr(c: &CcaName) -> [c_char; 16] {
    let mut a = [0 as c_char; 16];
    for (d, &b) in a.iter_mut().zip(c.as_str().as_bytes()) {
        *d = b as c_char;
    }
    a
}

/// Take the next output (oldest first) into `*out_output`; `*out_has` is
/// false when there is none. Drain after every handle_* call.
/// Errors: `OPSEL_NULL_POINTER`.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_poll(
    controller: *mut opsel_ops_controller,
    out_output: *mut opsel_ops_output,
    out_has: *mut bool,
) -> opsel_status {
    guard(|| {
        let c = unsafe { Handle::borrow_mut(controller) }?;
        let o = out_ptr(out_output, "out_output")?;
        let has = out_ptr(out_has, "out_has")?;
        *has = false;
        let Some(output) = c.inner.poll() else {
            return Ok(());
        };
        *has = true;
        let mut r = opsel_ops_output {
            kind: 0,
            cca: [0; 16],
            until_ns: 0,
            has_until: false,
            at_ns: 0,
            phase: 0,
            cycle: 0,
            label: c"".as_ptr(),
            class_index: 0,
            confidence: 0.0,
            distance: 0.0,
            samples: 0,
            needed: 0,
            early: false,
            message: c"".as_ptr(),
            window: 0,
            windows: 0,
            leader: 0,
        };
        match output {
            Output::Action(Action::SetCca(cca)) => {
                r.kind = OPSEL_OPS_SET_CCA;
                r.cca = cca_arr(&cca);
            }
            Output::Action(Action::SendFullSpeed { cca, until_ns }) => {
                r.kind = OPSEL_OPS_SEND_FULL_SPEED;
                r.cca = cca_arr(&cca);
                (r.until_ns, r.has_until) = (until_ns, true);
            }
            Output::Action(Action::Silence { until_ns }) => {
                r.kind = OPSEL_OPS_SILENCE;
                (r.until_ns, r.has_until) = (until_ns, true);
            }
            Output::Action(Action::Steady { cca, until_ns }) => {
                r.kind = OPSEL_OPS_STEADY;
                r.cca = cca_arr(&cca);
                (r.until_ns, r.has_until) = (until_ns.unwrap_or(0), until_ns.is_some());
            }
            Output::Event(Event::Phase {
                phase,
                cycle,
                at_ns,
            }) => {
                r.kind = OPSEL_OPS_EVENT_PHASE;
                r.phase = phase_c(phase);
                (r.cycle, r.at_ns) = (cycle, at_ns);
            }
            Output::Event(Event::Classified {
                classified,
                samples,
                early,
                at_ns,
            }) => {
                r.kind = OPSEL_OPS_EVENT_CLASSIFIED;
                r.label = c
                    .names
                    .get(classified.class_index)
                    .map_or(c"".as_ptr(), |n| n.as_ptr());
                r.class_index = classified.class_index;
                r.confidence = classified.confidence;
                r.distance = classified.distance;
                (r.samples, r.early, r.at_ns) = (samples, early, at_ns);
            }
            Output::Event(Event::Selected {
                cca,
                steady_ns,
                at_ns,
            }) => {
                r.kind = OPSEL_OPS_EVENT_SELECTED;
                r.cca = cca_arr(&cca);
                (r.until_ns, r.has_until) = (steady_ns.unwrap_or(0), steady_ns.is_some());
                r.at_ns = at_ns;
            }
            Output::Event(Event::DecisionFailed { message, at_ns }) => {
                r.kind = OPSEL_OPS_EVENT_DECISION_FAILED;
                c.message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
                r.message = c.message.as_ptr();
                r.at_ns = at_ns;
            }
            Output::Event(Event::ProbeIncomplete {
                samples,
                needed,
                at_ns,
            }) => {
                r.kind = OPSEL_OPS_EVENT_PROBE_INCOMPLETE;
                (r.samples, r.needed, r.at_ns) = (samples, needed, at_ns);
            }
            Output::Event(Event::CycleClassified {
                index,
                cycles,
                class_index,
                distance,
                leader,
                margin,
                at_ns,
            }) => {
                r.kind = OPSEL_OPS_EVENT_CYCLE_CLASSIFIED;
                r.label = c
                    .names
                    .get(class_index)
                    .map_or(c"".as_ptr(), |n| n.as_ptr());
                (r.class_index, r.distance, r.confidence) = (class_index, distance, margin);
                (r.window, r.windows, r.leader, r.at_ns) = (index, cycles, leader, at_ns);
            }
        }
        *o = r;
        Ok(())
    })
}

/// Cumulative counters of a controller.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct opsel_ops_stats {
    pub decisions: u64,
    pub early_exits: u64,
    pub failed_decisions: u64,
    pub incomplete_probes: u64,
    pub cca_switches: u64,
    pub probe_ns: u64,
    pub steady_ns: u64,
    pub probe_bytes: u64,
    pub steady_bytes: u64,
    /// Current phase (`OPSEL_OPS_PHASE_*`) and cycle.
    pub phase: u32,
    pub cycle: u64,
    /// Current base steady time Y after adaptation, ns.
    pub current_steady_ns: u64,
    /// Window length w of the classifier.
    pub window_len: usize,
    /// Probes the probe gate ended before the full window
    /// (`opsel_ops_config.gate_path`).
    pub gate_exits: u64,
}

/// Counters with the running phase accounted up to `now_ns`, plus the
/// current phase, cycle, Y and w.
#[no_mangle]
pub unsafe extern "C" fn opsel_ops_controller_stats(
    controller: *const opsel_ops_controller,
    now_ns: u64,
    out_stats: *mut opsel_ops_stats,
) -> opsel_status {
    guard(|| {
        let c = unsafe { Handle::borrow(controller) }?;
        let o = out_ptr(out_stats, "out_stats")?;
        *o = stats_c(&c.inner, c.inner.stats_at(now_ns));
        Ok(())
    })
}

/// `opsel_ops_stats` from the controller's counters `s` and its current state.
pub(crate) fn stats_c(ctl: &CtlCore, s: opsel::ops::Stats) -> opsel_ops_stats {
    opsel_ops_stats {
        decisions: s.decisions,
        early_exits: s.early_exits,
        failed_decisions: s.failed_decisions,
        incomplete_probes: s.incomplete_probes,
        cca_switches: s.cca_switches,
        probe_ns: s.probe_ns,
        steady_ns: s.steady_ns,
        probe_bytes: s.probe_bytes,
        steady_bytes: s.steady_bytes,
        phase: phase_c(ctl.phase()),
        cycle: ctl.cycle(),
        current_steady_ns: ctl.steady_ns(),
        window_len: ctl.window_len(),
        gate_exits: s.gate_exits,
    }
}

// ----------------------------------------------------------- fairness ---

/// Jain's fairness index of `rates_len` throughputs (000 Eq. 2.1), in
/// [1/n, 1]. Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (empty,
/// NaN/inf or negative rate, named by index).
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_jain(
    rates: *const f64,
    rates_len: usize,
    out_jain: *mut f64,
) -> opsel_status {
    guard(|| {
        let o = out_ptr(out_jain, "out_jain")?;
        *o = opsel::fair::jain(unsafe { f64_slice(rates, rates_len, "rates") }?)?;
        Ok(())
    })
}

/// Equal share of a bottleneck of `capacity` among `n_streams` (000 §4.2).
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` (capacity not > 0, 0 streams).
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_share(
    capacity: f64,
    n_streams: usize,
    out_share: *mut f64,
) -> opsel_status {
    guard(|| {
        let o = out_ptr(out_share, "out_share")?;
        *o = opsel::fair::fair_share(capacity, n_streams)?;
        Ok(())
    })
}
