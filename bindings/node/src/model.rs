//! Model files: `loadModel`, `modelFromJson` (wraps `opsel::model`:
//! versioned JSON, validated on load).

use crate::error::{guard, to_js, Code};
use crate::knn::Model;
use napi_derive::napi;
use opsel::model::KnnModelFile;
use std::sync::Arc;

/// Read and validate an opsel model file. Throws an `Error` whose `code` is
/// `"OPSEL_IO"` (cannot read), `"OPSEL_INVALID_MODEL"` (damaged or foreign
/// file) or `"OPSEL_UNSUPPORTED_VERSION"`.
#[napi]
pub fn load_model(path: String) -> napi::Result<Model, Code> {
    guard(|| {
        let f = KnnModelFile::load(&path).map_err(to_js)?;
        Model::new(Arc::new(f))
    })
}

/// Parse and validate model-file JSON text.
#[napi]
pub fn model_from_json(json: String) -> napi::Result<Model, Code> {
    guard(|| {
        let f = KnnModelFile::from_json(&json).map_err(to_js)?;
        Model::new(Arc::new(f))
    })
}
