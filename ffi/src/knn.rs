//! C wrappers for `opsel::knn`: fitting, per-thread workspaces, single and
//! batch classification (000 §3.5: k-NN with DTW, majority vote).

use crate::dtw::{cost_from_u32, cost_to_u32, radius_from_usize, radius_to_usize};
use crate::error::{f64_slice_any, guard, opsel_status, out_ptr, utf8, Fail};
use crate::handle::Handle;
use crate::model::{clear_out, opsel_model};
use opsel::dtw::DtwParams;
use opsel::knn::{self, KnnConfig, Prediction};
use opsel::model::{KnnModelFile, Metadata};
use opsel::series::Normalization;
use std::ffi::c_char;

/// Raw RTT in ms (the default: absolute RTT carries the load, 000 §3.4).
pub const OPSEL_NORMALIZATION_NONE: u32 = 0;
/// Subtract the window's minimum (queueing delay above the window's base RTT).
pub const OPSEL_NORMALIZATION_SUBTRACT_MIN: u32 = 1;
/// Divide by the window's minimum (RTT inflation; needs a positive minimum).
pub const OPSEL_NORMALIZATION_DIVIDE_MIN: u32 = 2;
/// Zero mean, unit standard deviation.
pub const OPSEL_NORMALIZATION_Z_SCORE: u32 = 3;
/// Z-score, then the samples sorted ascending (the window's value
/// distribution; the two-stage model's second stage).
pub const OPSEL_NORMALIZATION_Z_SORTED: u32 = 4;

/// Classifier settings for `opsel_model_fit()`. Start from
/// `opsel_knn_config_default()` and change fields.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct opsel_knn_config {
    /// Neighbours that vote, 1 ≤ k ≤ number of references (000 §3.5: 1).
    pub k: usize,
    /// Sakoe–Chiba band radius, or `OPSEL_RADIUS_UNCONSTRAINED` (000: 10).
    pub radius: usize,
    /// `OPSEL_COST_ABS` or `OPSEL_COST_SQUARED`.
    pub cost: u32,
    /// One of the `OPSEL_NORMALIZATION_*` values.
    pub normalization: u32,
}

/// The outcome of classifying one window.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct opsel_prediction {
    /// Index of the predicted class; `opsel_model_class_name()` gives its name.
    pub class_index: usize,
    /// DTW distance to the nearest reference (of any class).
    pub distance: f64,
    /// Index of that nearest reference in the model's reference set.
    pub neighbor: usize,
    /// Votes the predicted class received among the k nearest.
    pub votes: u32,
    /// Share of the k votes won by the predicted class, in (0, 1].
    pub confidence: f64,
}

impl From<Prediction> for opsel_prediction {
    fn from(p: Prediction) -> Self {
        Self {
            class_index: p.class,
            distance: p.distance,
            neighbor: p.neighbor,
            votes: p.votes,
            confidence: p.confidence,
        }
    }
}

fn norm_from_u32(n: u32) -> Result<Normalization, Fail> {
    Ok(match n {
        OPSEL_NORMALIZATION_NONE => Normalization::None,
        OPSEL_NORMALIZATION_SUBTRACT_MIN => Normalization::SubtractMin,
        OPSEL_NORMALIZATION_DIVIDE_MIN => Normalization::DivideMin,
        OPSEL_NORMALIZATION_Z_SCORE => Normalization::ZScore,
        OPSEL_NORMALIZATION_Z_SORTED => Normalization::ZSorted,
        other => {
            return Err(Fail::invalid(format!(
                "normalization {other} is unknown; use one of OPSEL_NORMALIZATION_NONE (0), _SUBTRACT_MIN (1), _DIVIDE_MIN (2), _Z_SCORE (3), _Z_SORTED (4)"
            )))
        }
    })
}

fn norm_to_u32(n: Normalization) -> u32 {
    match n {
        Normalization::None => OPSEL_NORMALIZATION_NONE,
        Normalization::SubtractMin => OPSEL_NORMALIZATION_SUBTRACT_MIN,
        Normalization::DivideMin => OPSEL_NORMALIZATION_DIVIDE_MIN,
        Normalization::ZScore => OPSEL_NORMALIZATION_Z_SCORE,
        Normalization::ZSorted => OPSEL_NORMALIZATION_Z_SORTED,
    }
}

impl From<&KnnConfig> for opsel_knn_config {
    fn from(c: &KnnConfig) -> Self {
        Self {
            k: c.k,
            radius: radius_to_usize(c.dtw.radius),
            cost: cost_to_u32(c.dtw.cost),
            normalization: norm_to_u32(c.normalization),
        }
    }
}

fn config_from_c(c: &opsel_knn_config) -> Result<KnnConfig, Fail> {
    {
        Ok(KnnConfig {
            k: c.k,
            dtw: DtwParams {
                radius: radius_from_usize(c.radius),
                cost: cost_from_u32(c.cost)?,
            },
            normalization: norm_from_u32(c.normalization)?,
        })
    }
}

/// The default settings: k = 1, radius 10, `OPSEL_COST_ABS`,
/// `OPSEL_NORMALIZATION_NONE` (000 Table 6.2).
/// Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn opsel_knn_config_default() -> opsel_knn_config {
    (&KnnConfig::default()).into()
}

/// Store the settings `model` was fitted with in `*out_config`.
/// Errors: `OPSEL_NULL_POINTER`. Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_config(
    model: *const opsel_model,
    out_config: *mut opsel_knn_config,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_config, "out_config")?;
        let m = unsafe { Handle::borrow(model) }?;
        *out = m.file.model.config().into();
        Ok(())
    })
}

/// Fit a classifier on labelled reference windows and store a new model
/// handle in `*out_model`.
///
/// - `windows`: `windows_len` doubles, `labels_len` windows of `window_len`
///   samples each, one after the other (row-major); `windows_len` must equal
///   `labels_len * window_len`.
/// - `labels`: `labels_len` class indices into `class_names`.
/// - `class_names`: `class_count` NUL-terminated UTF-8 names, distinct; every
///   class should have at least one window (a saved model requires it).
/// - `config`: settings, or NULL for `opsel_knn_config_default()`.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for zero lengths,
/// mismatched lengths, NaN/inf samples (named by window), labels out of range,
/// duplicate or non-UTF-8 class names, k out of range, unknown cost or
/// normalisation. On error `*out_model` is NULL.
///
/// Ownership: copies everything it needs; the caller owns `*out_model` (free
/// with `opsel_model_free()`). Thread-safety: any thread, concurrently.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_fit(
    windows: *const f64,
    windows_len: usize,
    window_len: usize,
    labels: *const u32,
    labels_len: usize,
    class_names: *const *const c_char,
    class_count: usize,
    config: *const opsel_knn_config,
    out_model: *mut *mut opsel_model,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_model)?;
        // The core names NaN samples by window index, so skip the generic check here.
        let x = unsafe { f64_slice_any(windows, windows_len, "windows") }?;
        if labels.is_null() {
            return Err(Fail::null("labels"));
        }
        if labels_len == 0 {
            return Err(Fail::invalid(
                "labels_len is 0; fit needs at least one labelled window",
            ));
        }
        if !labels.is_aligned() {
            return Err(Fail::invalid("labels pointer is not aligned for uint32_t"));
        }
        // SAFETY: non-null, aligned; the caller promises labels_len values.
        let y = unsafe { std::slice::from_raw_parts(labels, labels_len) };
        if class_names.is_null() {
            return Err(Fail::null("class_names"));
        }
        if class_count == 0 {
            return Err(Fail::invalid(
                "class_count is 0; pass the names of the classes the labels index",
            ));
        }
        // SAFETY: non-null; the caller promises class_count string pointers.
        let names_raw = unsafe { std::slice::from_raw_parts(class_names, class_count) };
        let mut names = Vec::with_capacity(class_count);
        for (i, &p) in names_raw.iter().enumerate() {
            names.push(unsafe { utf8(p, &format!("class_names[{i}]")) }?.to_string());
        }
        let cfg = match unsafe { config.as_ref() } {
            None => KnnConfig::default(),
            Some(c) => config_from_c(c)?,
        };
        let model = knn::Model::fit(x, window_len, y, names, cfg)?;
        let m = opsel_model::new(KnnModelFile {
            stage2: None,
            model,
            meta: Metadata::default(),
        })?;
        Handle::into_out(m, out);
        Ok(())
    })
}

/// Per-thread scratch memory for classification (query buffers, bounds,
/// neighbour list). Opaque: create with `opsel_workspace_new()`, release with
/// `opsel_workspace_free()`. Use one workspace per thread: it must never be
/// used by two calls at the same time.
pub struct opsel_workspace {
    ws: knn::TwoStageWorkspace,
}

/// Create a workspace sized for `model` and store it in `*out_workspace`.
/// With it, `opsel_model_classify()` on that model allocates nothing.
/// (It also works with another model, but then the first call re-sizes it.)
///
/// Errors: `OPSEL_NULL_POINTER`. On error `*out_workspace` is NULL.
/// Ownership: the caller owns `*out_workspace` (free with
/// `opsel_workspace_free()`); it does not keep a reference to `model`.
/// Thread-safety: any thread.
#[no_mangle]
pub unsafe extern "C" fn opsel_workspace_new(
    model: *const opsel_model,
    out_workspace: *mut *mut opsel_workspace,
) -> opsel_status {
    guard(|| {
        let out = clear_out(out_workspace)?;
        let m = unsafe { Handle::borrow(model) }?;
        Handle::into_out(
            opsel_workspace {
                ws: m.clf.workspace(),
            },
            out,
        );
        Ok(())
    })
}

/// Release a workspace. NULL is ignored. It must not be in use.
#[no_mangle]
pub unsafe extern "C" fn opsel_workspace_free(workspace: *mut opsel_workspace) {
    // SAFETY: the caller promises NULL or a handle of this type not freed before.
    unsafe { Handle::free(workspace) }
}

/// Classify one window of `window_len` RTT samples (ms, 1 Hz, as the model
/// was trained; `window_len` must equal `opsel_model_window(model)`) and
/// write the result to `*out_prediction`. No allocation.
/// A two-stage model file (a `"stage2"` object, version 2) is classified by
/// both stages: the class, distance and neighbour are stage 2's (the
/// nearest reference on the side of BBR present that stage 1 chose).
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a zero or wrong
/// length or a NaN/inf sample (named by index). `*out_prediction` is
/// untouched on error.
///
/// Ownership: borrows everything for the call only.
/// Thread-safety: `model` may be shared by many threads at once; `workspace`
/// must be used by one call at a time (one workspace per thread).
#[no_mangle]
pub unsafe extern "C" fn opsel_model_classify(
    model: *const opsel_model,
    workspace: *mut opsel_workspace,
    window: *const f64,
    window_len: usize,
    out_prediction: *mut opsel_prediction,
) -> opsel_status {
    guard(|| {
        let out = out_ptr(out_prediction, "out_prediction")?;
        let m = unsafe { Handle::borrow(model) }?;
        let ws = unsafe { Handle::borrow_mut(workspace) }?;
        let w = unsafe { f64_slice_any(window, window_len, "window") }?;
        *out = m.clf.classify(w, &mut ws.ws)?.into();
        Ok(())
    })
}

/// As `opsel_model_classify()`, and also write each class's share of the k
/// votes to `out_probabilities` (`probabilities_len` must equal
/// `opsel_model_class_count(model)`; index = class index; scikit-learn's
/// `predict_proba`). `out_prediction` may be NULL.
///
/// Errors: as `opsel_model_classify()`, plus `OPSEL_INVALID_INPUT` for a
/// wrong `probabilities_len`. Thread-safety: as `opsel_model_classify()`.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_class_probabilities(
    model: *const opsel_model,
    workspace: *mut opsel_workspace,
    window: *const f64,
    window_len: usize,
    out_probabilities: *mut f64,
    probabilities_len: usize,
    out_prediction: *mut opsel_prediction,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow(model) }?;
        let ws = unsafe { Handle::borrow_mut(workspace) }?;
        let w = unsafe { f64_slice_any(window, window_len, "window") }?;
        if out_probabilities.is_null() {
            return Err(Fail::null("out_probabilities"));
        }
        if !out_probabilities.is_aligned() {
            return Err(Fail::invalid("out_probabilities is not aligned for double"));
        }
        // SAFETY: non-null, aligned; the caller promises probabilities_len writable doubles.
        let probs = unsafe { std::slice::from_raw_parts_mut(out_probabilities, probabilities_len) };
        let p = m.clf.class_probabilities(w, &mut ws.ws, probs)?;
        if let Some(o) = unsafe { out_prediction.as_mut() } {
            *o = p.into();
        }
        Ok(())
    })
}

/// Classify `windows_len / opsel_model_window(model)` windows stored one
/// after the other in `windows`, using up to `threads` threads (0 = one per
/// available core), and write one prediction per window to
/// `out_predictions` (`predictions_len` must equal the number of windows).
/// Results equal one-by-one `opsel_model_classify()` calls.
///
/// Errors: `OPSEL_NULL_POINTER`; `OPSEL_INVALID_INPUT` for a zero length, a
/// length that is not a whole number of windows, a wrong `predictions_len`,
/// or a NaN/inf sample (the message names the window). On error the contents
/// of `out_predictions` are unspecified.
///
/// Ownership: borrows everything for the call only; allocates its own
/// workspaces. Thread-safety: any thread, concurrently with other reads of
/// `model`; blocks until all windows are classified.
#[no_mangle]
pub unsafe extern "C" fn opsel_model_classify_batch(
    model: *const opsel_model,
    windows: *const f64,
    windows_len: usize,
    threads: usize,
    out_predictions: *mut opsel_prediction,
    predictions_len: usize,
) -> opsel_status {
    guard(|| {
        let m = unsafe { Handle::borrow(model) }?;
        let x = unsafe { f64_slice_any(windows, windows_len, "windows") }?;
        let w = m.file.model.window();
        if windows_len % w != 0 {
            return Err(Fail::invalid(format!(
                "windows_len {windows_len} is not a whole number of windows of {w} samples"
            )));
        }
        let n = windows_len / w;
        if predictions_len != n {
            return Err(Fail::invalid(format!(
                "predictions_len is {predictions_len} but windows holds {n} windows of {w} samples; pass a buffer of {n} predictions"
            )));
        }
        if out_predictions.is_null() {
            return Err(Fail::null("out_predictions"));
        }
        if !out_predictions.is_aligned() {
            return Err(Fail::invalid("out_predictions is not aligned"));
        }
        let preds = m.clf.classify_batch(x, threads)?;
        // SAFETY: non-null, aligned; the caller promises predictions_len writable slots.
        let out = unsafe { std::slice::from_raw_parts_mut(out_predictions, n) };
        for (o, p) in out.iter_mut().zip(preds) {
            *o = p.into();
        }
        Ok(())
    })
}
