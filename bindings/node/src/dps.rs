//! `DpsAgent` (core: `opsel::dps`) and `FairManager` (core: `opsel::fair`):
//! document 002's utility-based CCA learner and the per-host fairness
//! manager, sans-IO. Specs are plain objects (camelCase or snake_case keys)
//! or JSON text, converted into the core's serde types; outputs are the
//! core's one serialized form (`opsel::dps::schema`) with camelCase keys.

use crate::convert::{core_value, js_form, ns, whole};
use crate::error::{guard, to_js, Code};
use napi_derive::napi;
use opsel::dps::{Agent, DpsSpec, Feedback};
use opsel::fair::{Command, FairnessSpec, FlowId, FlowReport, Manager};

fn flow_id(v: f64) -> napi::Result<FlowId, Code> {
    whole(v, "flow", "ids")
}

/// One agent output: the core's serialized form (`opsel::dps::schema`) with
/// camelCase keys. `kind` is "setCca", "report", "decided", "periodClosed",
/// "learnt" or "markedViolating"; the other fields depend on it.
/// Declared for the TypeScript types; the object comes from `js_form`.
#[allow(dead_code)]
#[napi(object)]
pub struct DpsOutput {
    pub kind: String,
    pub cca: Option<String>,
    /// "report": "learnt" or "locked".
    pub report: Option<String>,
    pub cycle: Option<f64>,
    pub decision: Option<DpsDecision>,
    /// "periodClosed": samples counted, Eq 4.1 over the period, binary utility.
    pub samples: Option<f64>,
    pub u_net: Option<f64>,
    pub satisfied: Option<bool>,
    /// "learnt": when (ns) and after how many closed periods.
    pub at_ns: Option<f64>,
    pub cycles: Option<f64>,
}

/// One decision of Alg 3 (002).
#[allow(dead_code)]
#[napi(object)]
pub struct DpsDecision {
    pub index: u32,
    pub cca: String,
    /// "random" (short period t) or "selection" (long period T).
    pub mode: String,
    /// "randomTrigger", "exploreEmpty", "fallback" or "selected"; `by` says how Alg 1 chose.
    pub reason: String,
    pub by: Option<String>,
    pub period_ns: f64,
}

/// Counters over an agent's life.
#[allow(dead_code)]
#[napi(object)]
pub struct DpsStats {
    pub cycles: f64,
    pub random_triggers: f64,
    pub switches: f64,
    pub periods: f64,
    pub satisfied_periods: f64,
    pub learnt_at_ns: Option<f64>,
    pub learning_cycles: Option<f64>,
    pub guarded_samples: f64,
}

/// One feedback sample; a field the driver cannot measure is left out.
#[allow(dead_code)]
#[napi(object)]
pub struct DpsFeedback {
    pub at_ns: f64,
    pub rtt_ms: Option<f64>,
    pub delivery_rate_mbps: Option<f64>,
    pub goodput_mbps: Option<f64>,
    pub sending_rate_mbps: Option<f64>,
}

/// A fairness manager command.
#[allow(dead_code)]
#[napi(object)]
pub struct FairCommand {
    /// "unlock", "lock" or "violation".
    pub cmd: String,
    /// The CCAs the other managed flows are locked to (the State key).
    pub state: Option<Vec<String>>,
}

/// The DPS learner and selector of one flow (002 §4.4–4.6). Drive it like
/// the OPS `Controller`: `start(nowNs)`, `feedback(nowNs, rttMs,
/// deliveryRateMbps)` per sampling interval (from TCP_INFO), `handleTimeout`
/// at `pollTimeout()`, and drain `poll()`: `{kind: "setCca", cca}` (apply it
/// to the socket), `{kind: "report", ...}` (for the manager) or an event.
#[napi]
pub struct DpsAgent {
    inner: Agent,
}

#[napi]
impl DpsAgent {
    /// `spec`: a DPS spec object or JSON text; `managed`: wait for a
    /// `FairManager`'s unlock.
    #[napi(
        constructor,
        ts_args_type = "spec: Record<string, unknown> | string, managed?: boolean"
    )]
    pub fn new(spec: serde_json::Value, managed: Option<bool>) -> napi::Result<Self, Code> {
        guard(|| {
            let spec: serde_json::Value = core_value(spec, "spec")?;
            let spec = DpsSpec::from_json(&spec.to_string()).map_err(to_js)?;
            let inner = if managed.unwrap_or(false) {
                Agent::managed(&spec)
            } else {
                Agent::new(&spec)
            }
            .map_err(to_js)?;
            Ok(Self { inner })
        })
    }

    #[napi]
    pub fn start(&mut self, now_ns: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        guard(|| self.inner.start(t).map_err(to_js))
    }

    /// One sender-side sample: smoothed RTT (ms) and delivery rate (Mbit/s).
    #[napi]
    pub fn feedback(
        &mut self,
        now_ns: f64,
        rtt_ms: f64,
        delivery_rate_mbps: f64,
    ) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        let fb = Feedback::sender(t, rtt_ms, delivery_rate_mbps);
        guard(|| self.inner.handle_feedback(t, &fb).map_err(to_js))
    }

    /// One sample with every field (`atNs`, `rttMs`, `deliveryRateMbps`,
    /// `goodputMbps`, `sendingRateMbps`).
    #[napi(ts_args_type = "nowNs: number, feedback: DpsFeedback")]
    pub fn handle_feedback(
        &mut self,
        now_ns: f64,
        feedback: serde_json::Value,
    ) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        let fb: Feedback = core_value(feedback, "feedback")?;
        guard(|| self.inner.handle_feedback(t, &fb).map_err(to_js))
    }

    #[napi]
    pub fn handle_timeout(&mut self, now_ns: f64) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        guard(|| self.inner.handle_timeout(t).map_err(to_js))
    }

    /// A `FairManager` command (`{cmd: "unlock", state}`, `{cmd: "lock"}`, `{cmd: "violation", state}`).
    #[napi(ts_args_type = "nowNs: number, command: FairCommand")]
    pub fn handle_command(
        &mut self,
        now_ns: f64,
        command: serde_json::Value,
    ) -> napi::Result<(), Code> {
        let t = ns(now_ns, "nowNs")?;
        let c: Command = core_value(command, "command")?;
        guard(|| self.inner.handle_command(t, &c).map_err(to_js))
    }

    /// OPS's recognised background mix as DPS's network-state label.
    #[napi]
    pub fn set_network_state(&mut self, label: String) {
        self.inner.set_network_state(&label)
    }

    /// The next output, or null.
    #[napi(ts_return_type = "DpsOutput | null")]
    pub fn poll(&mut self) -> Option<serde_json::Value> {
        self.inner.poll().map(|o| js_form(&o))
    }

    /// When `handleTimeout` should next be called (ns), or null.
    #[napi]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|v| v as f64)
    }

    /// The CCA in use, or null before the first decision.
    #[napi(getter)]
    pub fn current(&self) -> Option<String> {
        self.inner.current().map(|c| c.as_str().to_owned())
    }

    /// `{phase: "idle" | "waiting" | "guard" | "monitor" | "locked", untilNs?}`.
    #[napi(getter, ts_return_type = "{ phase: string; untilNs?: number }")]
    pub fn phase(&self) -> serde_json::Value {
        js_form(&self.inner.phase())
    }

    /// True until every candidate has statistics in the current State.
    #[napi(getter)]
    pub fn learning(&self) -> bool {
        self.inner.learning()
    }

    #[napi(getter)]
    pub fn state_key(&self) -> String {
        self.inner.state_key().to_owned()
    }

    /// `{cycles, randomTriggers, switches, periods, satisfiedPeriods, learntAtNs, learningCycles, guardedSamples}`.
    #[napi(ts_return_type = "DpsStats")]
    pub fn stats(&self) -> serde_json::Value {
        js_form(&self.inner.stats())
    }
}

/// The per-host fairness manager (002 §4.6, Alg 4).
#[napi]
pub struct FairManager {
    inner: Manager,
}

#[napi]
impl FairManager {
    /// `spec`: `{fThresh: 0.8, vThresh: 3, dThresh: 2}`, each optional.
    #[napi(
        constructor,
        ts_args_type = "spec?: { fThresh?: number; vThresh?: number; dThresh?: number }"
    )]
    pub fn new(spec: Option<serde_json::Value>) -> napi::Result<Self, Code> {
        let spec: FairnessSpec = match spec {
            Some(v) => core_value(v, "fairness spec")?,
            None => FairnessSpec::default(),
        };
        guard(|| {
            Ok(Self {
                inner: Manager::new(spec).map_err(to_js)?,
            })
        })
    }

    #[napi]
    pub fn register(&mut self, flow: f64) -> napi::Result<(), Code> {
        let id = flow_id(flow)?;
        guard(|| self.inner.register(id).map_err(to_js))
    }

    #[napi]
    pub fn deregister(&mut self, flow: f64) -> napi::Result<(), Code> {
        let id = flow_id(flow)?;
        guard(|| self.inner.deregister(id).map_err(to_js))
    }

    /// A flow's report: its agent's `report` output as it is.
    #[napi(ts_args_type = "flow: number, report: { report: string; cca?: string }")]
    pub fn handle_report(
        &mut self,
        flow: f64,
        report: serde_json::Value,
    ) -> napi::Result<(), Code> {
        let id = flow_id(flow)?;
        let r = FlowReport::from_agent_output(core_value(report, "report")?).map_err(to_js)?;
        guard(|| self.inner.handle_report(id, &r).map_err(to_js))
    }

    /// A flow's sending rate over the last fairness interval (Mbit/s).
    #[napi]
    pub fn report_rate(&mut self, flow: f64, rate_mbps: f64) -> napi::Result<(), Code> {
        let id = flow_id(flow)?;
        guard(|| self.inner.report_rate(id, rate_mbps).map_err(to_js))
    }

    /// One fairness sample (Alg 4): Jain's index, or null with fewer than two admitted flows.
    #[napi]
    pub fn evaluate(&mut self) -> Option<f64> {
        self.inner.evaluate()
    }

    /// The next `{flow, command}` to deliver, or null.
    #[napi(ts_return_type = "{ flow: number; command: FairCommand } | null")]
    pub fn poll(&mut self) -> Option<serde_json::Value> {
        self.inner
            .poll()
            .map(|(id, c)| serde_json::json!({"flow": id, "command": js_form(&c)}))
    }

    #[napi(getter)]
    pub fn unlocked(&self) -> Option<f64> {
        self.inner.unlocked().map(|id| id as f64)
    }

    #[napi(getter)]
    pub fn last_jain(&self) -> Option<f64> {
        self.inner.last_jain()
    }

    /// `{unlocks, violations, fairnessSamples}`.
    #[napi]
    pub fn stats(&self) -> serde_json::Value {
        js_form(&self.inner.stats())
    }
}
