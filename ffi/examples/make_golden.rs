//! Writes the shared golden fixture that the Rust, C, Node and Python tests
//! all assert against (issue 3: "the same golden vectors drive the Rust,
//! Python, C and Node tests"):
//!
//! - `tests/fixtures/knn_golden.model.json`: a DTW K-NN model (6 classes of
//!   000 Table 6.1 × 10 synthetic windows of w = 20, k = 3, radius 10, abs);
//! - `tests/fixtures/knn_golden.json`: query windows with the expected
//!   prediction of each, and DTW pairs with expected distances.
//!
//! Schema: tests/fixtures/README.md. Run from the repository root:
//! `cargo run -p opsel-ffi --example make_golden` (or `make golden-knn`).
//! The expected values come from the core as it is when this runs; the
//! tests then hold every binding to exactly these numbers.

use opsel::dtw::{self, Cost, DtwParams};
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, Metadata};
use opsel::series::{synth, Normalization};
use serde_json::json;
use std::path::PathBuf;

const W: usize = 20;
const PER_CLASS: usize = 10;
const MODEL_SEED: u64 = 3000;
const QUERY_SEED: u64 = 3001;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tests/fixtures"));
    std::fs::create_dir_all(&out_dir)?;

    let (x, y) = synth::dataset(&SIX_CLASSES, PER_CLASS, W, MODEL_SEED)?;
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let config = KnnConfig {
        k: 3,
        dtw: DtwParams {
            radius: Some(10),
            cost: Cost::Abs,
        },
        normalization: Normalization::None,
    };
    let model = Model::fit(&x, W, &y, classes.clone(), config)?;
    let file = KnnModelFile {
        model,
        meta: Metadata {
            training: json!({
                "source": "opsel::series::synth::dataset (synthetic, NOT measured)",
                "classes": SIX_CLASSES,
                "windows_per_class": PER_CLASS,
                "window": W,
                "seed": MODEL_SEED,
                "generator": "cargo run -p opsel-ffi --example make_golden"
            }),
            ..Metadata::default()
        },
    };
    let model_path = out_dir.join("knn_golden.model.json");
    file.save(&model_path)?;
    let model = &file.model;

    // Queries: 3 fresh windows per class, one window equal to reference 17
    // (distance exactly 0), and a flat empty-path window at base RTT.
    let (qx, qy) = synth::dataset(&SIX_CLASSES, 3, W, QUERY_SEED)?;
    let mut queries: Vec<(Vec<f64>, Option<String>)> = qx
        .chunks_exact(W)
        .zip(&qy)
        .map(|(w, &c)| (w.to_vec(), Some(SIX_CLASSES[c as usize].to_string())))
        .collect();
    queries.push((
        x[17 * W..18 * W].to_vec(),
        Some(classes[y[17] as usize].clone()),
    ));
    queries.push((vec![65.0; W], None));

    let mut ws = model.workspace();
    let mut probs = vec![0.0; classes.len()];
    let mut qjson = Vec::new();
    for (i, (w, truth)) in queries.iter().enumerate() {
        let p = model.class_probabilities(w, &mut ws, &mut probs)?;
        // The pruned search must agree with the exhaustive one, or the golden is wrong.
        assert_eq!(p, model.classify_exhaustive(w, &mut ws)?);
        qjson.push(json!({
            "id": i,
            "window": w,
            "truth": truth,
            "class": classes[p.class],
            "class_index": p.class,
            "neighbor": p.neighbor,
            "distance": p.distance,
            "votes": p.votes,
            "confidence": p.confidence,
            "probabilities": probs,
        }));
    }

    // DTW pairs: hand-checkable short series, then synthetic windows under
    // each band/cost variant, and one unequal-length pair.
    let mut pairs: Vec<(Vec<f64>, Vec<f64>)> = vec![
        (vec![1.0, 2.0, 3.0, 4.0, 5.0], vec![2.0, 3.0, 4.0, 5.0, 6.0]),
        (
            vec![0.0, 0.0, 1.0, 2.0, 1.0, 0.0],
            vec![0.0, 1.0, 2.0, 1.0, 0.0, 0.0],
        ),
        (qx[0..W].to_vec(), qx[3 * W..4 * W].to_vec()),
        (qx[6 * W..7 * W].to_vec(), qx[12 * W..13 * W].to_vec()),
    ];
    pairs.push((qx[W..2 * W].to_vec(), qx[9 * W..9 * W + 15].to_vec()));
    let variants: [(Option<usize>, Cost); 5] = [
        (Some(0), Cost::Abs),
        (Some(2), Cost::Abs),
        (Some(10), Cost::Abs),
        (None, Cost::Abs),
        (Some(2), Cost::Squared),
    ];
    let mut djson = Vec::new();
    for (a, b) in &pairs {
        for &(radius, cost) in &variants {
            let d = dtw::distance(a, b, &DtwParams { radius, cost })?;
            djson.push(json!({
                "a": a, "b": b, "radius": radius, "cost": cost.name(), "distance": d,
            }));
        }
    }
    let doc = json!({
        "schema": "opsel-golden-knn",
        "schema_version": 1,
        "readme": "Schema and usage: tests/fixtures/README.md. Regenerate: cargo run -p opsel-ffi --example make_golden",
        "model_file": "knn_golden.model.json",
        "model": {
            "window": W, "k": 3, "radius": 10, "cost": "abs", "normalization": "none",
            "classes": classes, "references": model.len(),
        },
        "tolerance": { "distance_relative": 1e-12 },
        "queries": qjson,
        "dtw": djson,
    });
    let golden_path = out_dir.join("knn_golden.json");
    std::fs::write(&golden_path, serde_json::to_string_pretty(&doc)? + "\n")?;
    let hits = queries
        .iter()
        .zip(&qjson)
        .filter(|((_, t), q)| t.as_deref() == q["class"].as_str())
        .count();
    println!(
        "wrote {} and {} ({} queries, {hits} match their generating class; {} DTW pairs)",
        model_path.display(),
        golden_path.display(),
        qjson.len(),
        djson.len()
    );
    Ok(())
}
