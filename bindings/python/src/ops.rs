//! `opsel.Controller` (core: `opsel::ops`), the sans-IO OPS controller of 000
//! Ch. 6–7 with its policies (the stump, a table, or a Python callable), and
//! `opsel.jain` / `opsel.fair_share` (core: `opsel::fair`).
//!
//! The controller never touches a socket or a clock: feed it `now_ns` and
//! 1 Hz RTT samples, drain its outputs (dicts) and act on them. A policy
//! callable receives a dict describing the classification and returns a CCA
//! name; if it raises, the controller records a failed decision (keeps the
//! last CCA, probes again next cycle) and the call that triggered it raises
//! `OpselError` chained to the callable's exception.

use crate::convert::{invalid, to_dict};
use crate::errors::IntoPy;
use crate::knn::Model;
use opsel::model::KnnModelFile;
use opsel::ops::{
    Classified, Classifier, Controller as Core, ControllerSpec, Labeled, Output, Phase, Policy,
    PolicyInput,
};
use opsel::probe::CcaName;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex};

const NS_PER_S: f64 = 1e9;

/// The Python callable behind a user policy, and the exception it raised.
pub(crate) struct PyPolicy {
    func: Py<PyAny>,
    classes: Vec<String>,
    raised: Arc<Mutex<Option<PyErr>>>,
}

impl Policy for PyPolicy {
    fn select(&mut self, c: &Classified) -> opsel::Result<CcaName> {
        let p = self;
        let label = p.classes.get(c.class_index).cloned().unwrap_or_default();
        let r = Python::attach(|py| -> PyResult<String> {
            let d = to_dict(py, &PolicyInput::new(c, &p.classes))?;
            p.func.bind(py).call1((d,))?.extract::<String>()
        });
        match r {
            Ok(name) => CcaName::new(&name),
            Err(e) => {
                let msg = Python::attach(|py| {
                    e.value(py)
                        .repr()
                        .map(|r| r.to_string())
                        .unwrap_or_else(|_| "an exception".into())
                });
                *p.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Err(opsel::Error::invalid(format!(
                    "policy callback raised {msg} for class {label}"
                )))
            }
        }
    }
}

pub(crate) type AnyPolicy = opsel::ops::AnyPolicy<PyPolicy>;

pub(crate) type Ctl = Core<Box<dyn Classifier + Send>, AnyPolicy>;

/// A locked controller that is known to be present.
struct CtlGuard<'a>(std::sync::MutexGuard<'a, Option<Ctl>>);

impl std::ops::Deref for CtlGuard<'_> {
    type Target = Ctl;
    fn deref(&self) -> &Ctl {
        self.0.as_ref().expect("checked by Controller::lock")
    }
}

impl std::ops::DerefMut for CtlGuard<'_> {
    fn deref_mut(&mut self) -> &mut Ctl {
        self.0.as_mut().expect("checked by Controller::lock")
    }
}

/// The OPS controller (000 Ch. 6–7): probe (passive, or active following
/// `pattern`) → classify the RTT window with `model` → select a CCA with
/// `policy` → steady for `steady_s` seconds → repeat.
///
/// `Controller(model, spec=None, **kwargs)`: `model` is an `opsel.Model` or a
/// model-file path (its window w sets the probe length); `spec` (a dict) and
/// the keyword arguments are the fields of the core's `ControllerSpec`, which
/// holds every default and check (unknown keys are errors):
///
/// - `mode`: "passive" (default; Y = 60 s) or "active" (`pattern`, default
///   "S5-C5-S5-B5"; Y = 100 s). `steady_s` overrides Y; 0 = probe once.
/// - `policy`: "stump" (BBR present → bbr, else cubic; 000 §4.1), a table
///   spec such as "B1-C1=bbr, *=cubic", or a callable(dict) -> CCA name.
///   In passive mode the transfer keeps sending while the window fills, so
///   the recognised class counts its own flow: policies decide on the
///   background, the class minus one flow of the socket's CCA (the dict's
///   `label` is the class; `bbr_present`, `bbr_flows`, `total_flows` and
///   `heterogeneous` describe the background).
/// - `adaptive`: grow Y while the decision is stable, shrink it on change
///   (000 §6 future work); True for the defaults or a dict with min_s, max_s,
///   grow, shrink, key ("decision" or "class").
/// - `progressive`: end the probe once a prefix is classified confidently;
///   True or a dict with min_samples, step, min_confidence, agree;
///   `prefix_lens` (default every `step` from `min_samples` below w).
/// - `cycles`: windows per decision, decided by the smallest sum of per-window
///   nearest class distances (default 1). `gate_margin` (with cycles >= 2):
///   the probe ends after the first window whose running min-sum margin
///   reaches it (margin-gated probing; `PYTHONPATH=research/ops python -m opsel_eval gated`
///   calibrates the margin). `progressive` with cycles > 1 does the same
///   with its `min_confidence`.
/// - `gate`: a probe gate file (`models/passive/gate.json` for the shipped
///   passive model; 004 §8 B.1): each probe ends at the first of the gate's
///   check lengths (5, 10, …, 35 samples of w = 40) whose prefix decision
///   the gate accepts, else runs the full window; `stats()["gate_exits"]`
///   counts those. `gate_threshold` overrides the file's threshold (a
///   probability in [0, 1]; higher = later, safer exits). Excludes
///   `progressive` (docs/results/ops-gate.md).
/// - `check_model` (True): reject a model trained for another probing mode
///   or pattern.
/// - `initial_cca`, `sample_period_s`, `grace_periods`, `steady_jitter`, `seed`.
#[pyclass(module = "opsel")]
pub struct Controller {
    /// `None` once handed to an `opsel.OpsDriver`.
    inner: Mutex<Option<Ctl>>,
    classes: Vec<String>,
    raised: Arc<Mutex<Option<PyErr>>>,
}

pub(crate) fn secs_to_ns(s: f64, what: &str) -> PyResult<u64> {
    if !(s.is_finite() && (0.0..1.8e10).contains(&s)) {
        return Err(invalid(format!(
            "{what} = {s} s must be a finite number of seconds >= 0"
        )));
    }
    Ok((s * NS_PER_S).round() as u64)
}

/// Keyword arguments (or a dict) as an `opsel::ops::ControllerSpec`: the
/// spec's serde names are the keyword names, so the dict goes through JSON
/// unchanged and the spec reports unknown or mistyped keys.
pub(crate) fn spec_from_dict(d: &Bound<'_, PyDict>) -> PyResult<ControllerSpec> {
    let json = d.py().import("json")?;
    let text: String = json
        .call_method1("dumps", (d,))
        .map_err(|e| {
            invalid(format!(
                "controller options must be plain values (str, number, bool, list, dict, None): {e}"
            ))
        })?
        .extract()?;
    ControllerSpec::from_json(&text).py_err()
}

impl Controller {
    /// The controller, or an error when it is already in use: the GIL is held
    /// throughout every method, so a busy lock means a policy callback called
    /// back into its own controller (which would deadlock).
    fn lock(&self) -> PyResult<CtlGuard<'_>> {
        let g = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Err(invalid(
                "the controller is busy: a policy callback must not call back into its own controller",
            )),
        };
        if g.is_none() {
            return Err(invalid(
                "this controller was handed to an opsel.OpsDriver; use the driver's events and report",
            ));
        }
        Ok(CtlGuard(g))
    }

    /// Hand the (not yet started) core to an `opsel.OpsDriver`, with the
    /// class names and the slot where a policy callable's exception lands.
    #[allow(clippy::type_complexity)]
    pub(crate) fn take_core(&self) -> PyResult<(Ctl, Vec<String>, Arc<Mutex<Option<PyErr>>>)> {
        let mut g = self.lock()?;
        if g.phase() != Phase::Idle {
            return Err(invalid(
                "the controller was already started; give the OpsDriver a fresh controller",
            ));
        }
        let core =
            g.0.take()
                .ok_or_else(|| invalid("the controller was already handed to a driver"))?;
        Ok((core, self.classes.clone(), Arc::clone(&self.raised)))
    }

    fn call<T>(&self, f: impl FnOnce(&mut Ctl) -> opsel::Result<T>) -> PyResult<T> {
        let r = f(&mut *self.lock()?);
        let raised = self.raised.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(e) = raised {
            // The controller already treated it as a failed decision; tell the caller why.
            return Python::attach(|py| {
                let err = PyErr::from_type(
                    py.import("opsel._errors")?
                        .getattr("OpselError")?
                        .cast_into()
                        .expect("exception class"),
                    format!(
                        "policy callback raised {}; the controller kept the last CCA and will probe again next cycle",
                        e.value(py).repr()?
                    ),
                );
                err.set_cause(py, Some(e));
                Err(err)
            });
        }
        r.py_err()
    }
}

/// One controller output as a dict, with the class names (`label`, `leader`).
pub(crate) fn output_dict<'py>(
    py: Python<'py>,
    o: &Output,
    classes: &[String],
) -> PyResult<Bound<'py, PyDict>> {
    to_dict(py, &Labeled::new(o, classes))
}

#[pymethods]
impl Controller {
    #[new]
    #[pyo3(signature = (model, spec = None, **kwargs))]
    fn new(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        spec: Option<&Bound<'_, PyDict>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let file = if let Ok(m) = model.cast::<Model>() {
            m.get().file.clone()
        } else if let Ok(path) = model.extract::<std::path::PathBuf>() {
            py.detach(|| KnnModelFile::load(&path)).py_err()?
        } else {
            return Err(invalid(format!(
                "model must be an opsel.Model or a model-file path, got {}",
                model.get_type().name()?
            )));
        };
        let classes = file.model.classes().to_vec();
        let fields = PyDict::new(py);
        for d in [spec, kwargs].into_iter().flatten() {
            fields.update(d.as_mapping())?;
        }
        // A callable policy is the spec's "callback"; the spec holds only data.
        let func = match fields.get_item("policy")? {
            Some(p) if p.is_callable() => {
                fields.set_item("policy", "callback")?;
                Some(p.unbind())
            }
            _ => None,
        };
        let spec = spec_from_dict(&fields)?;
        let raised = Arc::new(Mutex::new(None));
        let callback = func.map(|func| PyPolicy {
            func,
            classes: classes.clone(),
            raised: Arc::clone(&raised),
        });
        let inner = spec.build(&file, callback).py_err()?;
        Ok(Self {
            inner: Mutex::new(Some(inner)),
            classes,
            raised,
        })
    }

    /// Begin the first probe at `now_ns`.
    fn start(&self, now_ns: u64) -> PyResult<()> {
        self.call(|c| c.start(now_ns))
    }

    /// Feed one aggregated RTT sample (mean rtt_ms over the period ending at
    /// now_ns, e.g. `UdpEchoProber.burst()["mean_rtt_ms"]`).
    fn handle_sample(&self, now_ns: u64, rtt_ms: f64) -> PyResult<()> {
        self.call(|c| c.handle_sample(now_ns, rtt_ms))
    }

    /// Let time pass: pattern segment changes, probe deadlines, end of steady.
    fn handle_timeout(&self, now_ns: u64) -> PyResult<()> {
        self.call(|c| c.handle_timeout(now_ns))
    }

    /// Account bytes sent to the current phase.
    fn handle_bytes(&self, now_ns: u64, bytes: u64) -> PyResult<()> {
        self.call(|c| c.handle_bytes(now_ns, bytes))
    }

    /// When handle_timeout should next be called (ns), or None.
    fn poll_timeout(&self) -> PyResult<Option<u64>> {
        Ok(self.lock()?.poll_timeout())
    }

    /// The next output as a dict (oldest first), or None. `kind` is one of
    /// set_cca, send_full_speed, silence, steady (actions) or phase,
    /// classified, selected, decision_failed, probe_incomplete,
    /// cycle_classified (events; cycles > 1: one per window, with its own
    /// `label` and the running min-sum `leader` and `margin`).
    fn poll<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let o = self.lock()?.poll();
        o.map(|o| output_dict(py, &o, &self.classes)).transpose()
    }

    /// Every pending output, oldest first.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut v = Vec::new();
        let mut g = self.lock()?;
        while let Some(o) = g.poll() {
            v.push(output_dict(py, &o, &self.classes)?);
        }
        Ok(v)
    }

    /// "idle", "probe", "classify", "select" or "steady".
    #[getter]
    fn phase(&self) -> PyResult<&'static str> {
        Ok(self.lock()?.phase().name())
    }
    /// Current OPS cycle (0-based).
    #[getter]
    fn cycle(&self) -> PyResult<u64> {
        Ok(self.lock()?.cycle())
    }
    /// The CCA the socket is (to be) set to.
    #[getter]
    fn socket_cca(&self) -> PyResult<String> {
        Ok(self.lock()?.socket_cca().as_str().to_string())
    }
    /// Current base steady time Y (ns) after adaptation.
    #[getter]
    fn steady_ns(&self) -> PyResult<u64> {
        Ok(self.lock()?.steady_ns())
    }
    /// Window length w in samples.
    #[getter]
    fn window_len(&self) -> PyResult<usize> {
        Ok(self.lock()?.window_len())
    }
    /// Windows (pattern cycles) per decision (1 = one window; > 1 = min-sum).
    #[getter]
    fn cycles(&self) -> PyResult<usize> {
        Ok(self.lock()?.config().cycles)
    }
    /// The model's class names.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.classes.clone()
    }

    /// Counters (decisions, early_exits, gate_exits, failed_decisions,
    /// incomplete_probes, cca_switches, probe_ns, steady_ns, probe_bytes, steady_bytes), with the
    /// running phase accounted up to `now_ns` when given.
    #[pyo3(signature = (now_ns = None))]
    fn stats<'py>(&self, py: Python<'py>, now_ns: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.lock()?;
        let s = match now_ns {
            Some(t) => g.stats_at(t),
            None => g.stats(),
        };
        to_dict(py, &s)
    }
}

/// Jain's fairness index of per-stream throughputs (000 Eq. 2.1), in [1/n, 1].
#[pyfunction]
fn jain(rates: Vec<f64>) -> PyResult<f64> {
    opsel::fair::jain(&rates).py_err()
}

/// Equal share of a bottleneck of `capacity` among `n_streams` (000 §4.2).
#[pyfunction]
fn fair_share(capacity: f64, n_streams: usize) -> PyResult<f64> {
    opsel::fair::fair_share(capacity, n_streams).py_err()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Controller>()?;
    m.add_function(wrap_pyfunction!(jain, m)?)?;
    m.add_function(wrap_pyfunction!(fair_share, m)?)?;
    Ok(())
}
