//! Counting global allocator: tree inference and FFT features allocate nothing.
use opsel::bwe::features::{feature_len, features, FeatureKind, FeatureWorkspace};
use opsel::bwe::pathload::{imr_avg, imr_wavelet, ImrWorkspace};
use opsel::trees::Ensemble;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn inference_features_and_imr_do_not_allocate() {
    let p = format!(
        "{}/tests/fixtures/trees_gbt_regressor.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fx: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let model = Ensemble::from_json(&fx["model"].to_string()).unwrap();
    // Histogram GBT export (f64 thresholds, the earlier multi-rate model class).
    let p = format!(
        "{}/tests/fixtures/trees_hgbt_regressor.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fx: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let hgbt = Ensemble::from_json(&fx["model"].to_string()).unwrap();
    let gs: Vec<f64> = (0..64).map(|i| 10_000.0 + i as f64).collect();
    let gr: Vec<f64> = (0..64)
        .map(|i| if i % 8 == 0 { 80_000.0 } else { 500.0 })
        .collect();
    let mut fw = FeatureWorkspace::new(64);
    let mut x = vec![0.0; feature_len(FeatureKind::Magnitude, 64)];
    let mut iw = ImrWorkspace::new(320);
    let (gs3, gr3): (Vec<f64>, Vec<f64>) = (
        (0..320).map(|_| 10_000.0).collect(),
        (0..320).map(|i| 9_000.0 + (i % 7) as f64 * 400.0).collect(),
    );
    let ((), n) = count(|| {
        for _ in 0..50 {
            features(&gs, &gr, FeatureKind::Magnitude, &mut fw, &mut x).unwrap();
            std::hint::black_box(model.predict(&x).unwrap());
            std::hint::black_box(hgbt.predict(&x).unwrap());
            std::hint::black_box(imr_avg(&gs3, &gr3, &mut iw).unwrap());
            std::hint::black_box(imr_wavelet(&gs3, &gr3, 3, &mut iw).unwrap());
        }
    });
    assert_eq!(n, 0);
}
