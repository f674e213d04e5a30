//! C API of document 004's early-stopping throughput probe
//! (`opsel::fastprob`): load a model file, start a probe, push one
//! throughput sample per interval, stop when the decision says so.

use crate::error::{guard, opsel_status, out_ptr, utf8};
use crate::handle::Handle;
use crate::json;
use crate::model::clear_out;
use opsel::fastprob::{Decision, FastProbModel, ProbeBudget, Prober};
use std::ffi::c_char;
use std::sync::Arc;

/// `opsel_fastprob_decision.decision`: not predictable yet, keep probing.
pub const OPSEL_FASTPROB_CONTINUE: u32 = 0;
/// The gate fired: stop, the prediction is valid.
pub const OPSEL_FASTPROB_STOP: u32 = 1;
/// The cap was reached: stop with the cap regressor's prediction.
pub const OPSEL_FASTPROB_FORCED_STOP: u32 = 2;

/// A FastProb model. Opaque: `opsel_fastprob_model_load()` /
/// `opsel_fastprob_model_free()`. Read-only: any number of threads.
pub struct opsel_fastprob_model {
    inner: Arc<FastProbModel>,
}

/// One probe in progress. Opaque: `opsel_fastprob_probe_new()` /
/// `opsel_fastprob_probe_free()`. It shares the model, so the model handle
/// may be freed first. One thread at a time.
pub struct opsel_fastprob_probe {
    inner: Prober<'static>,
}

/// What to do after a sample (004 §IV Fig. 6b).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct opsel_fastprob_decision {
    /// `OPSEL_FASTPROB_CONTINUE`, `OPSEL_FASTPROB_STOP` or `OPSEL_FASTPROB_FORCED_STOP`.
    pub decision: u32,
    /// Predicted converged throughput t_avg, bit/s (0 while continuing).
    pub throughput_bps: f64,
    /// Samples consumed.
    pub samples: u32,
    /// Probe time, samples × the model's interval, ns.
    pub probe_ns: u64,
    /// The gate's P(predictable) at the stop; valid when `has_p_predictable`.
    pub p_predictable: f64,
    pub has_p_predictable: bool,
}

/// Read and validate a FastProb model file (`"kind": "fastprob"`).
/// Errors: `OPSEL_NULL_POINTER`, `OPSEL_IO`, `OPSEL_INVALID_MODEL`,
/// `OPSEL_UNSUPPORTED_VERSION`. Ownership: release with `opsel_fastprob_model_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_model_load(
    path: *const c_char,
    out_model: *mut *mut opsel_fastprob_model,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_model)?;
        let p = unsafe { utf8(path, "path") }?;
        let inner = FastProbModel::load(std::path::Path::new(p))?;
        opsel_fastprob_model {
            inner: Arc::new(inner),
        }
        .into_out(out);
        Ok(())
    })
}

/// Release a model. NULL is ignored. Probes made from it stay valid.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_model_free(model: *mut opsel_fastprob_model) {
    unsafe { Handle::free(model) }
}

/// The model's longest probe in samples (`*out_cap`) and its sampling
/// interval in ns (`*out_interval_ns`).
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_model_spec(
    model: *const opsel_fastprob_model,
    out_cap: *mut u32,
    out_interval_ns: *mut u64,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow(model) }?;
        *out_ptr(out_cap, "out_cap")? = m.inner.spec().cap as u32;
        *out_ptr(out_interval_ns, "out_interval_ns")? = m.inner.spec().interval_ns;
        Ok(())
    })
}

/// Start a probe over `model`. `threshold` is the stop threshold on
/// P(predictable), in [0, 1); pass a negative value for the model's own.
/// Ownership: release `*out_probe` with `opsel_fastprob_probe_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_probe_new(
    model: *const opsel_fastprob_model,
    threshold: f64,
    out_probe: *mut *mut opsel_fastprob_probe,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_probe)?;
        let m = unsafe { Handle::borrow(model) }?;
        let p = Prober::shared(Arc::clone(&m.inner));
        let inner = if threshold < 0.0 {
            p
        } else {
            p.threshold(threshold)?
        };
        opsel_fastprob_probe { inner }.into_out(out);
        Ok(())
    })
}

/// Start a probe over `model` with an error budget (error gates).
/// `budget_json` is the core's `ProbeBudget`: `{"family": "wan"}` selects
/// the model file's budget for that network family (`family_budgets`),
/// `{"stop_error_pct": 4}` sets a budget E %; NULL or `{}` keeps the file's
/// default. `threshold` is as in `opsel_fastprob_probe_new()`. Errors:
/// `OPSEL_INVALID_INPUT` for bad JSON, both keys, a family the file has no
/// budget for (the message lists the ones it has) or a file without
/// `family_budgets`. Ownership: release `*out_probe` with `opsel_fastprob_probe_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_probe_new_budget(
    model: *const opsel_fastprob_model,
    threshold: f64,
    budget_json: *const c_char,
    out_probe: *mut *mut opsel_fastprob_probe,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_probe)?;
        let m = unsafe { Handle::borrow(model) }?;
        let budget: ProbeBudget = json::arg_or_default(budget_json, "budget_json")?;
        let p = Prober::shared(Arc::clone(&m.inner));
        let p = if threshold < 0.0 {
            p
        } else {
            p.threshold(threshold)?
        };
        opsel_fastprob_probe {
            inner: p.budget(&budget)?,
        }
        .into_out(out);
        Ok(())
    })
}

/// The model file's per-family error budgets as a JSON object
/// (`{"lan": 12, "wan": 4}`; `{}` when it has none) in `*out_json`.
/// Ownership: release `*out_json` with `opsel_string_free()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_model_family_budgets(
    model: *const opsel_fastprob_model,
    out_json: *mut *mut c_char,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_json)?;
        let m = unsafe { Handle::borrow(model) }?;
        let v: std::collections::BTreeMap<&str, f64> = m
            .inner
            .family_budgets()
            .iter()
            .map(|(f, e)| (f.as_str(), *e))
            .collect();
        json::out(&v, out)
    })
}

/// Release a probe. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_probe_free(probe: *mut opsel_fastprob_probe) {
    unsafe { Handle::free(probe) }
}

/// Feed the throughput of the interval that just ended (bit/s) and write
/// what to do into `*out_decision`. After a stop, further pushes fail with
/// `OPSEL_INVALID_INPUT` until `opsel_fastprob_probe_reset()`; NaN, infinite
/// or negative samples are refused and not recorded. Allocates nothing.
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_probe_push(
    probe: *mut opsel_fastprob_probe,
    sample_bps: f64,
    out_decision: *mut opsel_fastprob_decision,
) -> opsel_status {
    guard(|| {
        let p = unsafe { Handle::borrow_mut(probe) }?;
        let out = out_ptr(out_decision, "out_decision")?;
        let (decision, pred) = match p.inner.push(sample_bps)? {
            Decision::Continue => (OPSEL_FASTPROB_CONTINUE, None),
            Decision::Stop(pr) => (OPSEL_FASTPROB_STOP, Some(pr)),
            Decision::ForcedStop(pr) => (OPSEL_FASTPROB_FORCED_STOP, Some(pr)),
        };
        *out = opsel_fastprob_decision {
            decision,
            throughput_bps: pred.map_or(0.0, |p| p.throughput_bps),
            samples: p.inner.len() as u32,
            probe_ns: pred.map_or(0, |p| p.probe_ns),
            p_predictable: pred.and_then(|p| p.p_predictable).unwrap_or(0.0),
            has_p_predictable: pred.is_some_and(|p| p.p_predictable.is_some()),
        };
        Ok(())
    })
}

/// Forget the samples and start over (same model and threshold).
#[no_mangle]
pub unsafe extern "C" fn opsel_fastprob_probe_reset(
    probe: *mut opsel_fastprob_probe,
) -> opsel_status {
    guard(|| {
        unsafe { Handle::borrow_mut(probe) }?.inner.reset();
        Ok(())
    })
}
