//! `opsel.DpsAgent` (core: `opsel::dps`) and `opsel.FairManager` (core:
//! `opsel::fair`): document 002's utility-based CCA learner and the per-host
//! fairness manager, sans-IO. Specs come in as dicts (or JSON text) and go
//! through the core's serde types; outputs come back as dicts in the core's
//! one serialized form (`opsel::dps::schema`).

use crate::convert::{from_any, json_text, to_dict};
use crate::errors::IntoPy;
use opsel::dps::{Agent, DpsSpec, Feedback};
use opsel::fair::{Command, FairnessSpec, FlowId, FlowReport, Manager};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The DPS learner and selector of one flow (002 §4.4–4.6).
///
/// `spec` is a DPS spec (dict or JSON text, `opsel::dps::DpsSpec`). With
/// `managed=True` the agent waits for a `FairManager`'s unlock command.
/// Drive it like the OPS controller: `start(now_ns)`, then per sampling
/// interval `feedback(now_ns, rtt_ms, delivery_rate_mbps)` (from TCP_INFO),
/// `handle_timeout` at `poll_timeout()`, and drain `poll()`: a dict with
/// `kind` = `set_cca` (apply `cca` to the socket), `report` (send to the
/// manager) or an event.
#[pyclass(module = "opsel._opsel", name = "DpsAgent")]
pub struct DpsAgent {
    inner: Agent,
}

#[pymethods]
impl DpsAgent {
    #[new]
    #[pyo3(signature = (spec, managed = false))]
    fn new(spec: &Bound<'_, PyAny>, managed: bool) -> PyResult<Self> {
        let spec = DpsSpec::from_json(&json_text(spec, "spec")?).py_err()?;
        let inner = if managed {
            Agent::managed(&spec)
        } else {
            Agent::new(&spec)
        }
        .py_err()?;
        Ok(Self { inner })
    }

    /// Begin at `now_ns` (an unmanaged agent makes its first decision).
    fn start(&mut self, now_ns: u64) -> PyResult<()> {
        self.inner.start(now_ns).py_err()
    }

    /// One sender-side sample: smoothed RTT (ms) and delivery rate (Mbit/s).
    fn feedback(&mut self, now_ns: u64, rtt_ms: f64, delivery_rate_mbps: f64) -> PyResult<()> {
        let fb = Feedback::sender(now_ns, rtt_ms, delivery_rate_mbps);
        self.inner.handle_feedback(now_ns, &fb).py_err()
    }

    /// One sample with every field (`at_ns`, `rtt_ms`, `delivery_rate_mbps`,
    /// `goodput_mbps`, `sending_rate_mbps`; missing ones are not counted).
    fn handle_feedback(&mut self, now_ns: u64, feedback: &Bound<'_, PyAny>) -> PyResult<()> {
        let fb: Feedback = from_any(feedback, "feedback")?;
        self.inner.handle_feedback(now_ns, &fb).py_err()
    }

    /// Let time pass (end of a guard or a monitoring period).
    fn handle_timeout(&mut self, now_ns: u64) -> PyResult<()> {
        self.inner.handle_timeout(now_ns).py_err()
    }

    /// A fairness manager's command (`{"cmd": "unlock", "state": [...]}`,
    /// `{"cmd": "lock"}`, `{"cmd": "violation", "state": [...]}`).
    fn handle_command(&mut self, now_ns: u64, command: &Bound<'_, PyAny>) -> PyResult<()> {
        let cmd: Command = from_any(command, "command")?;
        self.inner.handle_command(now_ns, &cmd).py_err()
    }

    /// OPS's recognised background mix as DPS's network-state label.
    fn set_network_state(&mut self, label: &str) {
        self.inner.set_network_state(label)
    }

    /// The next output as a dict, or None.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.inner.poll().map(|o| to_dict(py, &o)).transpose()
    }

    /// When handle_timeout should next be called (ns), or None.
    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }

    /// The CCA the agent runs now, or None before its first decision.
    #[getter]
    fn current(&self) -> Option<String> {
        self.inner.current().map(|c| c.as_str().to_owned())
    }

    /// `{"phase": "idle" | "waiting" | "guard" | "monitor" | "locked", "until_ns"?}`.
    #[getter]
    fn phase<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, &self.inner.phase())
    }

    /// True until every candidate has statistics in the current State.
    #[getter]
    fn learning(&self) -> bool {
        self.inner.learning()
    }

    /// The State key of the database row in use.
    #[getter]
    fn state_key(&self) -> String {
        self.inner.state_key().to_owned()
    }

    /// Counters: cycles, random_triggers, switches, periods, satisfied_periods,
    /// learnt_at_ns, learning_cycles, guarded_samples.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, &self.inner.stats())
    }
}

/// The per-host fairness manager (002 §4.6, Alg 4): one flow unlocked at a
/// time, round robin; Jain's index over the admitted flows' rates; a flow
/// whose CCA choice drove fairness below `f_thresh` gets a violation.
///
/// `spec`: `{"f_thresh": 0.8, "v_thresh": 3, "d_thresh": 2}` (each optional).
#[pyclass(module = "opsel._opsel", name = "FairManager")]
pub struct FairManager {
    inner: Manager,
}

#[pymethods]
impl FairManager {
    #[new]
    #[pyo3(signature = (spec = None))]
    fn new(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let spec: FairnessSpec = match spec {
            Some(s) => from_any(s, "fairness spec")?,
            None => FairnessSpec::default(),
        };
        Ok(Self {
            inner: Manager::new(spec).py_err()?,
        })
    }

    fn register(&mut self, flow: FlowId) -> PyResult<()> {
        self.inner.register(flow).py_err()
    }

    fn deregister(&mut self, flow: FlowId) -> PyResult<()> {
        self.inner.deregister(flow).py_err()
    }

    /// A flow's report, as its agent's `report` output gives it
    /// (`{"report": "learnt"}` or `{"report": "locked", "cca": "bbr"}`; a
    /// `kind` key is ignored).
    fn handle_report(&mut self, flow: FlowId, report: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = FlowReport::from_agent_output(from_any(report, "report")?).py_err()?;
        self.inner.handle_report(flow, &r).py_err()
    }

    /// A flow's sending rate over the last fairness interval (Mbit/s).
    fn report_rate(&mut self, flow: FlowId, rate_mbps: f64) -> PyResult<()> {
        self.inner.report_rate(flow, rate_mbps).py_err()
    }

    /// One fairness sample over the admitted flows' last rates (Alg 4); the
    /// Jain index, or None with fewer than two admitted flows.
    fn evaluate(&mut self) -> Option<f64> {
        self.inner.evaluate()
    }

    /// The next (flow, command dict) to deliver, or None.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(FlowId, Bound<'py, PyDict>)>> {
        self.inner
            .poll()
            .map(|(id, c)| Ok((id, to_dict(py, &c)?)))
            .transpose()
    }

    /// The flow that may change CCA now, if any.
    #[getter]
    fn unlocked(&self) -> Option<FlowId> {
        self.inner.unlocked()
    }

    /// The Jain index of the last fairness sample.
    #[getter]
    fn last_jain(&self) -> Option<f64> {
        self.inner.last_jain()
    }

    /// Counters: unlocks, violations, fairness_samples.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, &self.inner.stats())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DpsAgent>()?;
    m.add_class::<FairManager>()?;
    Ok(())
}
