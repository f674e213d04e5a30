//! Tree-ensemble inference equals scikit-learn to 1e-9 on shipped fixtures (model +
//! features + scikit-learn predictions written by `opsel/train/bwe.py train --fixtures`),
//! the Rust FFT features reproduce the fixture's features, and bad model files are
//! rejected with clear errors.
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::trees::{Ensemble, Kind};
use opsel::ErrorKind;
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn rows(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

fn check(name: &str, kind: Kind) {
    let fx = fixture(name);
    let model = Ensemble::from_json(&fx["model"].to_string()).unwrap();
    assert_eq!(model.kind(), kind);
    let x = rows(&fx["X"]);
    let want: Vec<f64> = fx["expected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(x.len(), want.len());
    let mut max = 0.0f64;
    for (row, w) in x.iter().zip(&want) {
        let got = model.predict(row).unwrap();
        max = max.max((got - w).abs());
    }
    eprintln!(
        "{name}: max |rust - sklearn| = {max:e} over {} rows",
        want.len()
    );
    assert!(max <= 1e-9, "{name}: max |rust - sklearn| = {max:e}");
    // Batch API agrees with per-row calls.
    let flat: Vec<f64> = x.iter().flatten().copied().collect();
    let mut out = vec![0.0; x.len()];
    model.predict_batch(&flat, &mut out).unwrap();
    for (o, row) in out.iter().zip(&x) {
        assert_eq!(*o, model.predict(row).unwrap());
    }
}

#[test]
fn gbt_regressor_matches_sklearn() {
    check("trees_gbt_regressor.json", Kind::GbtRegressor);
}

#[test]
fn gbt_classifier_matches_sklearn() {
    check("trees_gbt_classifier.json", Kind::GbtClassifier);
    let fx = fixture("trees_gbt_classifier.json");
    let m = Ensemble::from_json(&fx["model"].to_string()).unwrap();
    let x = &rows(&fx["X"])[0];
    let mut p = [0.0; 2];
    m.predict_proba(x, &mut p).unwrap();
    assert!((p[0] + p[1] - 1.0).abs() < 1e-12);
}

#[test]
fn rf_regressor_matches_sklearn() {
    check("trees_rf_regressor.json", Kind::RfRegressor);
}

#[test]
fn rf_classifier_matches_sklearn() {
    check("trees_rf_classifier.json", Kind::RfClassifier);
}

#[test]
fn rust_features_reproduce_the_training_features() {
    // The fixture rows were written by the bwe_dataset exporter from these gaps.
    for (name, n, extra) in [
        ("trees_gbt_regressor.json", 64, 0),
        ("trees_gbt_classifier.json", 32, 1),
    ] {
        let fx = fixture(name);
        let x = rows(&fx["X"]);
        let mut ws = FeatureWorkspace::new(n);
        let mut f = vec![0.0; feature_len(FeatureKind::Magnitude, n)];
        for (i, g) in fx["gaps"].as_array().unwrap().iter().enumerate() {
            let gs: Vec<f64> = g["gs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let gr: Vec<f64> = g["gr"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            features(&gs, &gr, FeatureKind::Magnitude, &mut ws, &mut f).unwrap();
            assert_eq!(&x[i][..x[i].len() - extra], &f[..], "{name} row {i}");
        }
    }
}

#[test]
fn features_golden_and_dft_fallback() {
    // Constant gaps: only the DC bin is non-zero, |X_0|/2N = 1 after normalisation.
    let mut ws = FeatureWorkspace::new(4);
    let mut f = vec![0.0; feature_len(FeatureKind::Magnitude, 4)];
    features(
        &[2.0; 4],
        &[2.0; 4],
        FeatureKind::Magnitude,
        &mut ws,
        &mut f,
    )
    .unwrap();
    assert!((f[0] - 1.0).abs() < 1e-15 && f[1..5].iter().all(|v| v.abs() < 1e-15));
    assert_eq!(f[5], 2f64.ln());
    // Non-power-of-two length (2N = 10) uses the direct DFT; compare with a naive one.
    let gs = [1.0, 2.0, 3.0, 4.0, 5.0];
    let gr = [5.0, 1.0, 4.0, 2.0, 3.0];
    let mut ws = FeatureWorkspace::new(5);
    let mut f = vec![0.0; feature_len(FeatureKind::ReIm, 5)];
    features(&gs, &gr, FeatureKind::ReIm, &mut ws, &mut f).unwrap();
    let x: Vec<f64> = gs.iter().chain(&gr).map(|v| v / 3.0).collect();
    let k = 2;
    let re: f64 = x
        .iter()
        .enumerate()
        .map(|(j, v)| v * (-2.0 * std::f64::consts::PI * (j * k) as f64 / 10.0).cos())
        .sum();
    let im: f64 = x
        .iter()
        .enumerate()
        .map(|(j, v)| v * (-2.0 * std::f64::consts::PI * (j * k) as f64 / 10.0).sin())
        .sum();
    assert!((f[k] - re / 10.0).abs() < 1e-12 && (f[5 + k] - im / 10.0).abs() < 1e-12);
    // Power of two: FFT equals the same naive DFT.
    let mut ws = FeatureWorkspace::new(4);
    let mut f = vec![0.0; feature_len(FeatureKind::ReIm, 4)];
    let (gs, gr) = ([1.0, 3.0, 2.0, 2.0], [4.0, 0.5, 0.5, 1.0]);
    features(&gs, &gr, FeatureKind::ReIm, &mut ws, &mut f).unwrap();
    let x: Vec<f64> = gs.iter().chain(&gr).map(|v| v / 2.0).collect();
    #[allow(clippy::needless_range_loop)]
    for k in 0..=4 {
        let re: f64 = x
            .iter()
            .enumerate()
            .map(|(j, v)| v * (-2.0 * std::f64::consts::PI * (j * k) as f64 / 8.0).cos())
            .sum();
        assert!((f[k] - re / 8.0).abs() < 1e-12, "bin {k}");
    }
    assert!(features(&gs, &gr[..3], FeatureKind::ReIm, &mut ws, &mut f).is_err());
    assert!(features(&[0.0; 4], &gr, FeatureKind::ReIm, &mut ws, &mut f).is_err());
    assert_eq!(
        FeatureKind::parse("fft-magnitude").unwrap(),
        FeatureKind::Magnitude
    );
    assert!(FeatureKind::parse("wavelet").is_err());
}

fn tiny() -> Value {
    serde_json::json!({
        "format": "opsel-model", "version": 1, "kind": "gbt-regressor", "n_features": 2,
        "base_score": [1.0], "learning_rate": 0.5,
        "trees": [{"feature": [1, -1, -1], "threshold": [0.5, -2, -2], "left": [1, -1, -1],
                   "right": [2, -1, -1], "value": [0.0, -2.0, 4.0]}]
    })
}

#[test]
fn hand_built_model_golden() {
    let m = Ensemble::from_json(&tiny().to_string()).unwrap();
    assert_eq!(m.predict(&[9.0, 0.5]).unwrap(), 1.0 - 1.0); // x1 <= 0.5 → left leaf -2
    assert_eq!(m.predict(&[9.0, 0.6]).unwrap(), 1.0 + 2.0);
    // float32 rounding as scikit-learn: 0.50000001 rounds to 0.5f32 → left.
    assert_eq!(m.predict(&[0.0, 0.500_000_01]).unwrap(), 0.0);
    // Threshold 0.1 (f64): float32(0.1) = 0.10000000149 > 0.1, so scikit-learn goes right.
    let mut v = tiny();
    v["trees"][0]["threshold"][0] = 0.1.into();
    let m01 = Ensemble::from_json(&v.to_string()).unwrap();
    assert_eq!(m01.predict(&[0.0, 0.1]).unwrap(), 3.0);
    assert_eq!(m01.predict(&[0.0, 0.099_999_99]).unwrap(), 0.0);
    assert!(m.predict(&[0.0]).is_err());
    assert!(m.predict(&[0.0, f64::NAN]).is_err());
    assert!(m.predict_proba(&[0.0, 0.0], &mut [0.0; 2]).is_err());
}

#[test]
fn bad_model_files_are_rejected() {
    let err = |v: Value| Ensemble::from_json(&v.to_string()).unwrap_err();
    let mut v = tiny();
    v["version"] = 2.into();
    assert_eq!(err(v).kind(), ErrorKind::UnsupportedVersion);
    let mut v = tiny();
    v["format"] = "onnx".into();
    assert!(err(v).to_string().contains("onnx"));
    let mut v = tiny();
    v["kind"] = "xgboost".into();
    assert!(err(v).to_string().contains("xgboost"));
    let mut v = tiny();
    v["trees"][0]["left"][0] = 0.into(); // cycle
    assert_eq!(err(v).kind(), ErrorKind::InvalidModel);
    let mut v = tiny();
    v["trees"][0]["feature"][0] = 7.into();
    assert!(err(v).to_string().contains("feature 7"));
    let mut v = tiny();
    v["trees"][0]["value"] = serde_json::json!([0.0, 1.0]);
    assert_eq!(err(v).kind(), ErrorKind::InvalidModel);
    let mut v = tiny();
    v["base_score"] = serde_json::json!([]);
    assert_eq!(err(v).kind(), ErrorKind::InvalidModel);
    assert_eq!(
        Ensemble::from_json("{").unwrap_err().kind(),
        ErrorKind::InvalidModel
    );
    assert_eq!(
        Ensemble::from_json("[]").unwrap_err().kind(),
        ErrorKind::InvalidModel
    );
    assert_eq!(
        Ensemble::load(std::path::Path::new("/nonexistent/model.json"))
            .unwrap_err()
            .kind(),
        ErrorKind::Io
    );
}

#[test]
fn hgbt_regressor_matches_sklearn() {
    // HistGradientBoostingRegressor (multi-rate model class): f64 thresholds.
    check("trees_hgbt_regressor.json", Kind::GbtRegressor);
    let fx = fixture("trees_hgbt_regressor.json");
    assert_eq!(fx["model"]["threshold_dtype"], "float64");
    assert_eq!(fx["model"]["learning_rate"], 1.0);
}

#[test]
fn float64_thresholds_are_compared_unrounded() {
    // 0.500_000_01 rounds to 0.5f32: the float32 rule goes left, the float64 rule right.
    let mut v = tiny();
    v["threshold_dtype"] = "float64".into();
    let m = Ensemble::from_json(&v.to_string()).unwrap();
    assert_eq!(m.predict(&[0.0, 0.5]).unwrap(), 0.0);
    assert_eq!(m.predict(&[0.0, 0.500_000_01]).unwrap(), 3.0);
    let m32 = Ensemble::from_json(&tiny().to_string()).unwrap();
    assert_eq!(m32.predict(&[0.0, 0.500_000_01]).unwrap(), 0.0);
    // Threshold 0.1: exact in f64, so 0.1 goes left (float32 rule: right, see above).
    v["trees"][0]["threshold"][0] = 0.1.into();
    let m01 = Ensemble::from_json(&v.to_string()).unwrap();
    assert_eq!(m01.predict(&[0.0, 0.1]).unwrap(), 0.0);
    assert!(m.predict(&[0.0, f64::NAN]).is_err());
    // Explicit float32 is the default rule.
    let mut v32 = tiny();
    v32["threshold_dtype"] = "float32".into();
    assert_eq!(Ensemble::from_json(&v32.to_string()).unwrap(), m32);
    // Unknown dtype and forests with float64 are rejected with the offending value.
    let mut bad = tiny();
    bad["threshold_dtype"] = "bfloat16".into();
    let e = Ensemble::from_json(&bad.to_string()).unwrap_err();
    assert!(e.to_string().contains("bfloat16"), "{e}");
    let mut rf = tiny();
    rf["kind"] = "rf-regressor".into();
    rf["threshold_dtype"] = "float64".into();
    let e = Ensemble::from_json(&rf.to_string()).unwrap_err();
    assert!(e.to_string().contains("rf-regressor"), "{e}");
}
