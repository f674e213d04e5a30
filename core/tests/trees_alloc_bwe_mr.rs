//! Counting global allocator: an estimate of the shipped `fft-reim` multi-rate model
//! (features + 1000+ trees) allocates nothing (DESIGN.md: hot paths allocate nothing).
use opsel::bwe::ml::MlEstimator;
use opsel::trees::Ensemble;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn shipped_reim_estimate_does_not_allocate() {
    let p = format!(
        "{}/../models/bwe-mr/mr_gbt_rx120.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut est =
        MlEstimator::for_model(Ensemble::load(std::path::Path::new(&p)).unwrap(), 64).unwrap();
    let gs: Vec<f64> = (0..64).map(|i| 10_000.0 + i as f64).collect();
    let gr: Vec<f64> = (0..64)
        .map(|i| if i % 8 == 0 { 80_000.0 } else { 500.0 })
        .collect();
    let mut sum = 0.0;
    let ((), n) = count(|| {
        for k in 0..50 {
            sum += est.estimate(&gs, &gr, 7e9 + k as f64).unwrap();
        }
    });
    assert!(sum > 0.0);
    assert_eq!(n, 0);
}
