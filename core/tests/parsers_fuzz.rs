//! Stable-Rust fuzz harnesses for the core parsers that read files or text a
//! user (or someone else) supplies: DTW K-NN model files, tree-ensemble model
//! files (the bandwidth estimators' ML models, FastProb's stages), FastProb
//! model files and probing patterns. Seeded mutation (fuzz/common.rs): nothing
//! may panic, and every accepted input must be usable.
//!
//! Bounded in `cargo test`. On demand, one target for as long as asked:
//! `OPSEL_FUZZ_SECS=600 OPSEL_FUZZ_SEED=7 cargo test -p opsel --release --test
//! parsers_fuzz knn_model -- --nocapture`. Crashing inputs go to
//! `fuzz/<target>/regressions/` and are replayed first by every run.

#[path = "../../fuzz/common.rs"]
mod fuzzing;

use opsel::bwe::ml::MlEstimator;
use opsel::fastprob::FastProbModel;
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, Metadata, Probing, ProbingMode};
use opsel::probe::Pattern;
use opsel::series::synth;
use opsel::trees::Ensemble;
use serde_json::json;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn knn_seed(w: usize, per_class: usize, pattern: Option<&str>) -> Vec<u8> {
    let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 5).unwrap();
    let model = Model::fit(
        &x,
        w,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        KnnConfig::default(),
    )
    .unwrap();
    KnnModelFile {
        stage2: None,
        model,
        meta: Metadata {
            probing: Probing {
                mode: if pattern.is_some() {
                    ProbingMode::Active
                } else {
                    ProbingMode::Passive
                },
                pattern: pattern.map(str::to_string),
                ..Probing::default()
            },
            training: serde_json::Value::Null,
        },
    }
    .to_json()
    .unwrap()
    .into_bytes()
}

#[test]
fn knn_model_files() {
    let seeds = vec![
        knn_seed(4, 2, Some("C1-B1-C1-B1")),
        knn_seed(6, 1, None),
        knn_seed(3, 3, Some("S1-C1")),
    ];
    let mut window = vec![0.0f64; 64];
    fuzzing::fuzz(ROOT, "knn-model", seeds, true, 3_000, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        if let Ok(m) = KnnModelFile::from_json(text) {
            // An accepted model must classify a window of its length.
            let w = m.model.window();
            if w <= window.len() {
                for (i, x) in window.iter_mut().enumerate() {
                    *x = (i % 7) as f64;
                }
                let mut ws = m.model.workspace();
                let _ = m.model.classify(&window[..w], &mut ws);
            }
        }
    });
}

fn tree_seeds() -> Vec<Vec<u8>> {
    let reg = json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
        "n_features": 4, "trees": [{"feature": [0, -1, -1], "threshold": [0.5, 0.0, 0.0],
        "left": [1, -1, -1], "right": [2, -1, -1], "value": [0.0, 1.0, 2.0]}]});
    let clf = json!({"format": "opsel-model", "version": 1, "kind": "rf-classifier",
        "n_features": 3, "n_outputs": 2,
        "trees": [{"feature": [2, -1, -1], "threshold": [500.0, 0.0, 0.0],
                   "left": [1, -1, -1], "right": [2, -1, -1],
                   "value": [0.5, 0.5, 1.0, 0.0, 0.0, 1.0]}]});
    let mut out = vec![reg.to_string().into_bytes(), clf.to_string().into_bytes()];
    // The gradient-boosting fixtures hold every other kind; keep them small
    // enough to parse quickly by cutting their tree lists.
    for f in [
        "trees_gbt_regressor.json",
        "trees_hgbt_regressor.json",
        "trees_gbt_classifier.json",
    ] {
        let p = format!("{ROOT}/core/tests/fixtures/{f}");
        if let Ok(t) = std::fs::read_to_string(&p) {
            if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&t) {
                if let Some(a) = v.get_mut("trees").and_then(|t| t.as_array_mut()) {
                    a.truncate(3);
                }
                out.push(v.to_string().into_bytes());
            }
        }
    }
    out
}

#[test]
fn tree_model_files() {
    let x = [0.3f64; 64];
    fuzzing::fuzz(ROOT, "tree-model", tree_seeds(), true, 3_000, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        if let Ok(e) = Ensemble::from_json(text) {
            let n = e.n_features();
            if n <= x.len() {
                let _ = e.predict(&x[..n]);
            }
            // The bandwidth estimator wraps an ensemble read off its feature count.
            for packets in [2usize, 10, 31] {
                if let Ok(mut m) = MlEstimator::for_model(e.clone(), packets) {
                    let gs = vec![1000.0; packets];
                    let _ = m.estimate(&gs, &gs, 10e6);
                }
            }
        }
    });
}

fn fastprob_seed(cap: usize) -> Vec<u8> {
    let reg = |n: usize| {
        json!({"format": "opsel-model", "version": 1, "kind": "rf-regressor",
        "n_features": n, "trees": [{"feature": [-1], "threshold": [0.0],
        "left": [-1], "right": [-1], "value": [1000.0 * n as f64]}]})
    };
    let gate = |n: usize| {
        json!({"format": "opsel-model", "version": 1, "kind": "rf-classifier",
        "n_features": n, "n_outputs": 2,
        "trees": [{"feature": [n as i64 - 1, -1, -1], "threshold": [500.0, 0.0, 0.0],
                   "left": [1, -1, -1], "right": [2, -1, -1],
                   "value": [0.5, 0.5, 1.0, 0.0, 0.0, 1.0]}]})
    };
    let spec = opsel::fastprob::FastProbSpec {
        cap,
        ..Default::default()
    };
    let stages: Vec<serde_json::Value> = (1..=cap)
        .filter(|n| *n >= spec.first_gate_n || *n == cap)
        .map(|n| {
            let mut s = json!({"n": n, "regressor": reg(n)});
            if (spec.first_gate_n..=spec.last_gate_n).contains(&n) {
                s["gate"] = gate(n);
            }
            s
        })
        .collect();
    json!({"format": "opsel-model", "version": 1, "kind": "fastprob",
           "spec": spec, "stages": stages, "training": {"source": "fuzz seed"}})
    .to_string()
    .into_bytes()
}

#[test]
fn fastprob_model_files() {
    let d = opsel::fastprob::FastProbSpec::default();
    let seeds = vec![fastprob_seed(d.cap), fastprob_seed(d.cap + 2)];
    fuzzing::fuzz(ROOT, "fastprob-model", seeds, true, 2_000, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        if let Ok(m) = FastProbModel::from_json(text) {
            let mut p = opsel::fastprob::Prober::new(&m);
            for k in 0..64 {
                if !matches!(
                    p.push(100.0 * k as f64),
                    Ok(opsel::fastprob::Decision::Continue)
                ) {
                    break;
                }
            }
        }
    });
}

#[test]
fn probing_patterns() {
    let seeds: Vec<Vec<u8>> = [
        "S5-C5-S5-B5",
        "C1-B1-C1-B1",
        "s5-c5",
        "B10",
        "S1-C1-S1-B1-S1-C1-S1-B1",
        "C0.5-B2",
        "passive",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzzing::fuzz(ROOT, "probe-pattern", seeds, false, 50_000, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        if let Ok(p) = Pattern::parse(text) {
            // An accepted pattern has a usable schedule and prints back to itself.
            let total = p.total_ns();
            let _ = p.segment_index_at_cyclic(total.wrapping_mul(3) / 2 + 1);
            let _ = p.samples_per_run(1_000_000_000);
            let mut out = Vec::new();
            let _ = p.sample_segments(40, 1_000_000_000, &mut out);
            let again = Pattern::parse(&p.to_string()).expect("a printed pattern parses");
            assert_eq!(again, p, "{text:?} does not round-trip");
        }
    });
}

#[test]
fn bwe_datagrams() {
    // Everything the reflector and the prober read off UDP: requests, ready
    // messages, reports and p-stream packet headers.
    use opsel::bwe::wire::{
        decode_ready, decode_report, decode_request, encode_ready, encode_report, encode_request,
    };
    use opsel::sys::linux::wire::ProbeHeader;
    let mut report = Vec::new();
    encode_report(7, &[(0, 10), (1, 25), (3, 40)], &mut report).unwrap();
    let seeds = vec![
        encode_request(7, 101).to_vec(),
        encode_ready(7).to_vec(),
        report,
        vec![0u8; 64],
    ];
    let mut out = Vec::new();
    fuzzing::fuzz(ROOT, "bwe-wire", seeds, false, 100_000, |b| {
        if let Some((id, n)) = decode_request(b) {
            assert_eq!(decode_request(&encode_request(id, n)), Some((id, n)));
        }
        let _ = decode_ready(b);
        out.clear();
        if decode_report(b, &mut out).is_some() {
            assert!(out.len() <= b.len() / 12 + 1);
        }
        let _ = ProbeHeader::decode(b);
    });
}
