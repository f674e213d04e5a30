//! `FastProbModel` and `FastProbe` (core: `opsel::fastprob`): document 004's
//! early-stopping throughput probe. `push(sampleBps)` returns the core's
//! decision form with camelCase keys (`{decision: "continue" | "stop" |
//! "forcedStop", throughputBps, samples, probeNs, pPredictable, forced}`).

use crate::convert::{camel, js_form};
use crate::error::{guard, to_js, Code};
use napi_derive::napi;
use opsel::fastprob::{FastProbModel as Core, ProbeBudget, Prober};
use std::sync::Arc;

/// A probe decision. Declared for the TypeScript types; the object comes from `js_form`.
#[allow(dead_code)]
#[napi(object)]
pub struct FastProbDecision {
    /// "continue", "stop" (the gate fired) or "forcedStop" (the cap).
    pub decision: String,
    /// Predicted converged throughput t_avg, bit/s.
    pub throughput_bps: Option<f64>,
    pub samples: Option<u32>,
    pub probe_ns: Option<f64>,
    /// The gate's P(predictable) at the stop.
    pub p_predictable: Option<f64>,
    pub forced: Option<bool>,
}

/// A probe's error budget (error gates): `family` selects the model file's
/// budget for that network family (`familyBudgets`), `stopErrorPct` sets a
/// budget E %; give at most one.
#[napi(object)]
pub struct FastProbeOptions {
    pub family: Option<String>,
    pub stop_error_pct: Option<f64>,
}

/// A trained FastProb model (per-length gate + regressor pairs, 004 §IV).
#[napi]
pub struct FastProbModel {
    inner: Arc<Core>,
}

#[napi]
impl FastProbModel {
    /// Read and validate a model file (`"kind": "fastprob"`).
    #[napi(factory)]
    pub fn load(path: String) -> napi::Result<FastProbModel, Code> {
        guard(|| {
            let inner = Core::load(std::path::Path::new(&path)).map_err(to_js)?;
            Ok(Self {
                inner: Arc::new(inner),
            })
        })
    }

    /// Parse model-file JSON text.
    #[napi(factory)]
    pub fn from_json(text: String) -> napi::Result<FastProbModel, Code> {
        guard(|| {
            let inner = Core::from_json(&text).map_err(to_js)?;
            Ok(Self {
                inner: Arc::new(inner),
            })
        })
    }

    /// `{intervalNs, cap, firstGateN, lastGateN, stopThreshold, labelErrorPct}`.
    #[napi(getter, ts_return_type = "Record<string, number>")]
    pub fn spec(&self) -> serde_json::Value {
        js_form(self.inner.spec())
    }

    /// The fixed-length regressor's prediction (bit/s) for a prefix of samples.
    #[napi]
    pub fn predict_fixed(&self, prefix: Vec<f64>) -> napi::Result<f64, Code> {
        guard(|| self.inner.predict_fixed(&prefix).map_err(to_js))
    }

    /// The file's optional per-family error budgets (`{family: E %}`; empty
    /// when it has none).
    #[napi(getter, ts_return_type = "Record<string, number>")]
    pub fn family_budgets(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.inner
                .family_budgets()
                .iter()
                .map(|(f, e)| (f.clone(), serde_json::json!(e)))
                .collect(),
        )
    }

    /// A new probe; `threshold` overrides a classifier gate's stop threshold
    /// (in [0, 1)); `options` sets an error gate's budget.
    #[napi]
    pub fn probe(
        &self,
        threshold: Option<f64>,
        options: Option<FastProbeOptions>,
    ) -> napi::Result<FastProbe, Code> {
        FastProbe::make(Arc::clone(&self.inner), threshold, options)
    }
}

/// One early-stopping probe in progress (004 §IV Fig. 6b).
#[napi]
pub struct FastProbe {
    inner: Prober<'static>,
}

impl FastProbe {
    fn make(
        model: Arc<Core>,
        threshold: Option<f64>,
        options: Option<FastProbeOptions>,
    ) -> napi::Result<FastProbe, Code> {
        guard(|| {
            let p = Prober::shared(model);
            let p = match threshold {
                Some(t) => p.threshold(t).map_err(to_js)?,
                None => p,
            };
            let budget = options.map_or_else(ProbeBudget::default, |o| ProbeBudget {
                family: o.family,
                stop_error_pct: o.stop_error_pct,
            });
            Ok(FastProbe {
                inner: p.budget(&budget).map_err(to_js)?,
            })
        })
    }
}

#[napi]
impl FastProbe {
    /// Feed the throughput of the interval that just ended (bit/s). After a
    /// stop, `push` throws until `reset()`.
    #[napi(ts_return_type = "FastProbDecision")]
    pub fn push(&mut self, sample_bps: f64) -> napi::Result<serde_json::Value, Code> {
        guard(|| {
            let mut v = js_form(&self.inner.push(sample_bps).map_err(to_js)?);
            // The tag's value in camelCase too, as `kind` is everywhere in Node.
            if let Some(serde_json::Value::String(d)) = v.get_mut("decision") {
                *d = camel(d);
            }
            Ok(v)
        })
    }

    /// Forget the samples and start over.
    #[napi]
    pub fn reset(&mut self) {
        self.inner.reset()
    }

    /// Samples pushed so far.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.inner.len() as u32
    }
}
