//! Counting global allocator: BASS + ABest, single-rate decision, Pathload/IMR baselines
//! and the FFT features allocate nothing per call once the workspace exists.
use opsel::bwe::{self, AbestConfig, BassConfig, EstimatorWorkspace, PStreamSpec};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn hot_paths_do_not_allocate() {
    let spec = PStreamSpec::thesis_default(7e9);
    let n = spec.len();
    let mut gs = vec![0.0; n];
    spec.send_gaps_into(&mut gs).unwrap();
    let gr: Vec<f64> = (0..n)
        .map(|i| {
            if i % 9 == 0 {
                90_000.0
            } else {
                1_000.0 + i as f64 * 10.0
            }
        })
        .collect();
    let mut ws = EstimatorWorkspace::new(n);
    let (bc, ac) = (BassConfig::thesis(), AbestConfig::default());
    let _ = bwe::estimate_multi_rate(&gs, &gr, &spec, &bc, &ac, &mut ws).unwrap();
    let ((), n) = count(|| {
        for _ in 0..100 {
            let a = bwe::estimate_multi_rate(&gs, &gr, &spec, &bc, &ac, &mut ws).unwrap();
            std::hint::black_box(a);
            let d = bwe::decide_single_rate(&gs, &gr, &bc, 0.0, &mut ws).unwrap();
            std::hint::black_box(d);
        }
    });
    assert_eq!(n, 0, "BASS + ABest allocated");
}
