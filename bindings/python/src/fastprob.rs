//! `opsel.FastProbModel` and `opsel.FastProbe` (core: `opsel::fastprob`):
//! document 004's early-stopping throughput probe. The model comes from a
//! model file (`"kind": "fastprob"`, trained by `opsel.train_fastprob`); a
//! probe takes one throughput sample per interval and says when to stop, in
//! the core's serialized form (`{"decision": "continue" | "stop" |
//! "forced_stop", "throughput_bps", "samples", "probe_ns", ...}`).

use crate::convert::to_dict;
use crate::errors::IntoPy;
use opsel::fastprob::{FastProbModel as Core, ProbeBudget, Prober};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;

/// A trained FastProb model (per-length gate + regressor pairs, 004 §IV).
#[pyclass(module = "opsel._opsel", name = "FastProbModel", frozen)]
pub struct FastProbModel {
    inner: Arc<Core>,
}

#[pymethods]
impl FastProbModel {
    /// Read and validate a model file.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = py.detach(|| Core::load(&path)).py_err()?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Parse model-file JSON text.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        Ok(Self {
            inner: Arc::new(Core::from_json(text).py_err()?),
        })
    }

    /// The model's settings: interval_ns, cap, first_gate_n, last_gate_n,
    /// stop_threshold, label_error_pct.
    #[getter]
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict(py, self.inner.spec())
    }

    /// The fixed-length regressor's prediction (bit/s) for a prefix of
    /// samples whose length has a regressor (the fixed-n RF baseline).
    fn predict_fixed(&self, prefix: Vec<f64>) -> PyResult<f64> {
        self.inner.predict_fixed(&prefix).py_err()
    }

    /// The file's optional per-family error budgets ({family: E %}; empty
    /// when it has none).
    #[getter]
    fn family_budgets(&self) -> std::collections::BTreeMap<String, f64> {
        self.inner.family_budgets().iter().cloned().collect()
    }

    /// A new probe over this model. `threshold` overrides a classifier gate's
    /// stop threshold; for error gates, `family` selects the file's budget for
    /// that network family (`family_budgets`) and `stop_error_pct` sets a
    /// budget E % (give at most one of the two).
    #[pyo3(signature = (threshold = None, *, family = None, stop_error_pct = None))]
    fn probe(
        &self,
        threshold: Option<f64>,
        family: Option<String>,
        stop_error_pct: Option<f64>,
    ) -> PyResult<FastProbe> {
        FastProbe::make(
            Arc::clone(&self.inner),
            threshold,
            ProbeBudget {
                family,
                stop_error_pct,
            },
        )
    }
}

/// One early-stopping probe in progress (004 §IV Fig. 6b).
#[pyclass(module = "opsel._opsel", name = "FastProbe")]
pub struct FastProbe {
    inner: Prober<'static>,
}

impl FastProbe {
    fn make(model: Arc<Core>, threshold: Option<f64>, budget: ProbeBudget) -> PyResult<Self> {
        let p = Prober::shared(model);
        let p = match threshold {
            Some(t) => p.threshold(t).py_err()?,
            None => p,
        };
        Ok(Self {
            inner: p.budget(&budget).py_err()?,
        })
    }
}

#[pymethods]
impl FastProbe {
    #[new]
    #[pyo3(signature = (model, threshold = None, *, family = None, stop_error_pct = None))]
    fn new(
        model: &FastProbModel,
        threshold: Option<f64>,
        family: Option<String>,
        stop_error_pct: Option<f64>,
    ) -> PyResult<Self> {
        Self::make(
            Arc::clone(&model.inner),
            threshold,
            ProbeBudget {
                family,
                stop_error_pct,
            },
        )
    }

    /// Feed the throughput of the interval that just ended (bit/s); returns
    /// the decision dict. After a stop, push raises until reset().
    fn push<'py>(&mut self, py: Python<'py>, sample_bps: f64) -> PyResult<Bound<'py, PyDict>> {
        let d = self.inner.push(sample_bps).py_err()?;
        to_dict(py, &d)
    }

    /// Forget the samples and start over.
    fn reset(&mut self) {
        self.inner.reset()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FastProbModel>()?;
    m.add_class::<FastProbe>()?;
    Ok(())
}
