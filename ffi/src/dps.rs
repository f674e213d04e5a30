//! C API of document 002's DPS learner (`opsel::dps::Agent`) and the per-host
//! fairness manager (`opsel::fair::Manager`). Specs, commands and reports go
//! in as JSON text and outputs come out as JSON text in the core's one
//! serialized form (`opsel::dps::schema`, tagged by `kind`): the same objects
//! Python and Node see, so a C program parses one documented shape.

use crate::error::{guard, opsel_status, out_ptr, utf8};
use crate::handle::Handle;
use crate::json;
use crate::model::clear_out;
use crate::ops::cca_arr;
use opsel::dps::{Agent, DpsSpec, Feedback};
use opsel::fair::{Command, FairnessSpec, FlowReport, Manager};
use std::ffi::c_char;

/// A DPS agent. Opaque: `opsel_dps_agent_new()` / `opsel_dps_agent_free()`.
/// One thread at a time (a state machine fed by the socket's thread).
pub struct opsel_dps_agent {
    inner: Agent,
}

/// A fairness manager. Opaque: `opsel_fair_manager_new()` /
/// `opsel_fair_manager_free()`. One thread at a time.
pub struct opsel_fair_manager {
    inner: Manager,
}

/// Create an agent from a DPS spec (JSON text, `opsel::dps::DpsSpec`: `ccas`,
/// `metrics` with `[A, B, C, D]` ranges and priorities, periods, exploration,
/// guard, seed). With `managed`, the agent waits for a fairness manager's
/// unlock command before its first decision.
///
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_INVALID_INPUT` (a bad spec: the
/// message names the field and value, e.g. A > B or p outside [0, 1]).
/// Ownership: `*out_agent` is the caller's; release it with `opsel_dps_agent_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_new(
    spec_json: *const c_char,
    managed: bool,
    out_agent: *mut *mut opsel_dps_agent,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_agent)?;
        let spec = DpsSpec::from_json(unsafe { utf8(spec_json, "spec_json") }?)?;
        let inner = if managed {
            Agent::managed(&spec)?
        } else {
            Agent::new(&spec)?
        };
        opsel_dps_agent { inner }.into_out(out);
        Ok(())
    })
}

/// Release an agent. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_free(agent: *mut opsel_dps_agent) {
    unsafe { Handle::free(agent) }
}

/// Begin at `now_ns` (monotonic ns); an unmanaged agent decides at once.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_start(
    agent: *mut opsel_dps_agent,
    now_ns: u64,
) -> opsel_status {
    guard(|| Ok(unsafe { Handle::borrow_mut(agent) }?.inner.start(now_ns)?))
}

/// One sender-side sample at `now_ns`: smoothed RTT in ms (`tcpi_rtt` /
/// 1000) and delivery rate in Mbit/s (`tcpi_delivery_rate` · 8 / 1e6).
/// Errors: `OPSEL_INVALID_INPUT` for NaN or negative values.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_feedback(
    agent: *mut opsel_dps_agent,
    now_ns: u64,
    rtt_ms: f64,
    delivery_rate_mbps: f64,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(agent) }?;
        let fb = Feedback::sender(now_ns, rtt_ms, delivery_rate_mbps);
        Ok(a.inner.handle_feedback(now_ns, &fb)?)
    })
}

/// Let time pass; call at the time `opsel_dps_agent_poll_timeout()` gives.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_handle_timeout(
    agent: *mut opsel_dps_agent,
    now_ns: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(agent) }?
            .inner
            .handle_timeout(now_ns)?)
    })
}

/// A fairness manager's command as JSON (`{"cmd":"unlock","state":[...]}`,
/// `{"cmd":"lock"}`, `{"cmd":"violation","state":[...]}`), as
/// `opsel_fair_manager_poll()` gives it.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_handle_command(
    agent: *mut opsel_dps_agent,
    now_ns: u64,
    command_json: *const c_char,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(agent) }?;
        let cmd: Command = json::arg(command_json, "command_json")?;
        Ok(a.inner.handle_command(now_ns, &cmd)?)
    })
}

/// Take the next output as JSON into `*out_json` (NULL when there is none).
/// `kind` is `set_cca` (apply `cca` to the socket), `report` (hand it to the
/// manager with `opsel_fair_manager_handle_report()`), or an event
/// (`decided`, `period_closed`, `learnt`, `marked_violating`).
/// Ownership: release `*out_json` with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_poll(
    agent: *mut opsel_dps_agent,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let a = unsafe { Handle::borrow_mut(agent) }?;
        match a.inner.poll() {
            Some(o) => json::out(&o, out),
            None => Ok(()),
        }
    })
}

/// When `opsel_dps_agent_handle_timeout()` should next be called:
/// `*out_has` is false when nothing is pending.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_poll_timeout(
    agent: *const opsel_dps_agent,
    out_ns: *mut u64,
    out_has: *mut bool,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow(agent) }?;
        let t = a.inner.poll_timeout();
        *out_ptr(out_has, "out_has")? = t.is_some();
        *out_ptr(out_ns, "out_ns")? = t.unwrap_or(0);
        Ok(())
    })
}

/// The CCA in use (NUL-terminated in `out_cca`); `*out_has` is false before
/// the first decision.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_current(
    agent: *const opsel_dps_agent,
    out_cca: *mut [c_char; 16],
    out_has: *mut bool,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow(agent) }?;
        let c = a.inner.current();
        *out_ptr(out_has, "out_has")? = c.is_some();
        *out_ptr(out_cca, "out_cca")? = c.map(|c| cca_arr(&c)).unwrap_or([0; 16]);
        Ok(())
    })
}

/// OPS's recognised background mix (a class label) as DPS's network state.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_set_network_state(
    agent: *mut opsel_dps_agent,
    label: *const c_char,
) -> opsel_status {
    guard(|| {
        let a = unsafe { Handle::borrow_mut(agent) }?;
        a.inner.set_network_state(unsafe { utf8(label, "label") }?);
        Ok(())
    })
}

/// The agent's counters as JSON (`cycles`, `random_triggers`, `switches`,
/// `periods`, `satisfied_periods`, `learnt_at_ns`, `learning_cycles`,
/// `guarded_samples`). Ownership: release with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_dps_agent_stats_json(
    agent: *const opsel_dps_agent,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        json::out(&unsafe { Handle::borrow(agent) }?.inner.stats(), out)
    })
}

/// Create a fairness manager (002 §4.6, Alg 4). `spec_json` is NULL for the
/// defaults or JSON such as `{"f_thresh":0.8,"v_thresh":3,"d_thresh":2}`.
/// Ownership: release `*out_manager` with `opsel_fair_manager_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_new(
    spec_json: *const c_char,
    out_manager: *mut *mut opsel_fair_manager,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_manager)?;
        let spec: FairnessSpec = json::arg_or_default(spec_json, "spec_json")?;
        opsel_fair_manager {
            inner: Manager::new(spec)?,
        }
        .into_out(out);
        Ok(())
    })
}

/// Release a manager. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_free(manager: *mut opsel_fair_manager) {
    unsafe { Handle::free(manager) }
}

/// Add a flow (its agent must be created with `managed` = true).
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_register(
    manager: *mut opsel_fair_manager,
    flow: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(manager) }?
            .inner
            .register(flow)?)
    })
}

/// Remove a flow.
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_deregister(
    manager: *mut opsel_fair_manager,
    flow: u64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(manager) }?
            .inner
            .deregister(flow)?)
    })
}

/// A flow's report: the JSON of its agent's `report` output, as polled (the
/// `kind` key is allowed).
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_handle_report(
    manager: *mut opsel_fair_manager,
    flow: u64,
    report_json: *const c_char,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow_mut(manager) }?;
        let r = FlowReport::from_agent_output(json::arg(report_json, "report_json")?)?;
        Ok(m.inner.handle_report(flow, &r)?)
    })
}

/// A flow's sending rate over the last fairness interval (Mbit/s).
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_report_rate(
    manager: *mut opsel_fair_manager,
    flow: u64,
    rate_mbps: f64,
) -> opsel_status {
    guard(|| {
        Ok(unsafe { Handle::borrow_mut(manager) }?
            .inner
            .report_rate(flow, rate_mbps)?)
    })
}

/// One fairness sample (Alg 4) over the admitted flows' last rates; Jain's
/// index in `*out_jain`, `*out_has` false with fewer than two admitted flows.
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_evaluate(
    manager: *mut opsel_fair_manager,
    out_jain: *mut f64,
    out_has: *mut bool,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow_mut(manager) }?;
        let has = out_ptr(out_has, "out_has")?;
        let jain = out_ptr(out_jain, "out_jain")?;
        let j = m.inner.evaluate();
        *has = j.is_some();
        *jain = j.unwrap_or(0.0);
        Ok(())
    })
}

/// Take the next command to deliver: its flow in `*out_flow` and its JSON in
/// `*out_command_json` (NULL when there is none). Hand the JSON to that
/// flow's `opsel_dps_agent_handle_command()`.
/// Ownership: release `*out_command_json` with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fair_manager_poll(
    manager: *mut opsel_fair_manager,
    out_flow: *mut u64,
    out_command_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_command_json)?;
        let flow = out_ptr(out_flow, "out_flow")?;
        *flow = 0;
        let m = unsafe { Handle::borrow_mut(manager) }?;
        match m.inner.poll() {
            Some((id, c)) => {
                *flow = id;
                json::out(&c, out)
            }
            None => Ok(()),
        }
    })
}
