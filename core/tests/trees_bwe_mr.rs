//! The shipped multi-rate model (`models/bwe-mr/mr_gbt_rx120.json`: 001 Ch 6
//! Fig 6.5 condition, `fft-reim` features) equals scikit-learn to 1e-9 through the flat
//! export, and the whole estimator (Rust features of the raw gaps → trees → `y · R_avg`)
//! reproduces scikit-learn's estimate of the same p-streams. Fixture
//! `core/tests/fixtures/bwe_mr_rx120.json` from `opsel/train/bwe.py fixture-mr`
//! (`make bwe-ml-reim`).
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::ml::MlEstimator;
use opsel::trees::{Ensemble, Kind};
use serde_json::Value;

const MODEL: &str = "models/bwe-mr/mr_gbt_rx120.json";

fn root() -> String {
    format!("{}/..", env!("CARGO_MANIFEST_DIR"))
}

fn model() -> Ensemble {
    Ensemble::load(std::path::Path::new(&format!("{}/{MODEL}", root()))).unwrap()
}

fn fixture() -> Value {
    let p = format!(
        "{}/tests/fixtures/bwe_mr_rx120.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn shipped_model_matches_sklearn() {
    let (m, fx) = (model(), fixture());
    assert_eq!(m.kind(), Kind::GbtRegressor);
    assert_eq!(m.n_features(), feature_len(FeatureKind::ReIm, 64));
    assert_eq!(m.n_trees() as u64, fx["n_trees"].as_u64().unwrap());
    let x: Vec<Vec<f64>> = fx["X"].as_array().unwrap().iter().map(f64s).collect();
    let want = f64s(&fx["expected"]);
    assert!(x.len() >= 20 && x.len() == want.len());
    let mut max = 0.0f64;
    for (row, w) in x.iter().zip(&want) {
        max = max.max((m.predict(row).unwrap() - w).abs());
    }
    eprintln!(
        "{MODEL}: max |rust - sklearn| = {max:e} over {} rows",
        x.len()
    );
    assert!(max <= 1e-9, "max |rust - sklearn| = {max:e}");
    // The predictions are not all alike (a constant model would pass the bound above
    // only if scikit-learn's were constant too; this guards the fixture itself).
    let spread = want.iter().cloned().fold(f64::MIN, f64::max)
        - want.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread > 0.05, "fixture predictions spread only {spread}");
    let flat: Vec<f64> = x.iter().flatten().copied().collect();
    let mut out = vec![0.0; x.len()];
    m.predict_batch(&flat, &mut out).unwrap();
    for (o, row) in out.iter().zip(&x) {
        assert_eq!(*o, m.predict(row).unwrap());
    }
}

#[test]
fn estimator_on_raw_gaps_reproduces_sklearn() {
    let fx = fixture();
    let mut est = MlEstimator::for_model(model(), 64).unwrap();
    assert_eq!(est.kind(), FeatureKind::ReIm);
    let x: Vec<Vec<f64>> = fx["X"].as_array().unwrap().iter().map(f64s).collect();
    let want = f64s(&fx["expected"]);
    let streams = fx["streams"].as_array().unwrap();
    assert!(streams.len() >= 4);
    let mut fw = FeatureWorkspace::new(64);
    let mut f = vec![0.0; feature_len(FeatureKind::ReIm, 64)];
    for (i, s) in streams.iter().enumerate() {
        let (gs, gr) = (f64s(&s["gs"]), f64s(&s["gr"]));
        let r_avg = s["r_avg_bps"].as_f64().unwrap();
        // The training features were written by the same Rust function (bwe_dataset).
        features(&gs, &gr, FeatureKind::ReIm, &mut fw, &mut f).unwrap();
        assert_eq!(
            f, x[i],
            "row {i}: Rust features differ from the training file"
        );
        let b_e = est.estimate(&gs, &gr, r_avg).unwrap();
        let want_bps = want[i] * r_avg;
        assert!(
            (b_e - want_bps).abs() <= 1e-9 * want_bps,
            "row {i}: estimate {b_e} bit/s, scikit-learn {want_bps} bit/s"
        );
    }
}

#[test]
fn feature_kind_is_read_off_the_model() {
    let est = MlEstimator::for_model(model(), 64).unwrap();
    assert_eq!(est.kind(), FeatureKind::ReIm);
    // A magnitude model (66 features) is recognised as such.
    let p = format!(
        "{}/tests/fixtures/trees_hgbt_regressor.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let mag = Ensemble::from_json(&fx["model"].to_string()).unwrap();
    let est = MlEstimator::for_model(mag.clone(), 64).unwrap();
    assert_eq!(est.kind(), FeatureKind::Magnitude);
    // Neither kind: the error names the counts.
    let e = MlEstimator::for_model(mag, 32).unwrap_err().to_string();
    assert!(
        e.contains("66") && e.contains("34") && e.contains("65"),
        "{e}"
    );
    // Too short a p-stream.
    assert!(MlEstimator::for_model(model(), 1).is_err());
}
