//! Per-query 1-NN latency of the core on the two benchmark configurations of
//! the foundation issue, single thread, printed as JSON for
//! `benches/peers/knn_peers.py` (which times the peers on the same data:
//! `opsel::series::synth::dataset` with the same seeds as `opsel.synthetic_dataset`).
//!
//! Usage: knn_bench_core <w> <per_class> <queries> [rounds]
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;
use std::time::Instant;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse().expect("numeric argument"))
        .collect();
    let (w, per_class, queries) = (a[0], a[1], a[2]);
    let rounds = a.get(3).copied().unwrap_or(15);
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 1).expect("dataset");
    let per_q = queries.div_ceil(6);
    let (q, _) = synth::dataset(&SIX_CLASSES, per_q, w, 2).expect("queries");
    // Squared local cost: the peers' native cost, so all solve the same problem.
    let cfg = KnnConfig {
        dtw: opsel::dtw::DtwParams {
            radius: Some(10),
            cost: opsel::dtw::Cost::Squared,
        },
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, w, &y, classes, cfg).expect("fit");
    let mut ws = m.workspace();
    let qs: Vec<&[f64]> = q.chunks_exact(w).take(queries).collect();
    let mut labels = Vec::new();
    let mut rounds_us = Vec::new();
    for r in 0..rounds {
        let t = Instant::now();
        for qw in &qs {
            let p = m.classify(qw, &mut ws).expect("classify");
            if r == 0 {
                labels.push(p.class);
            }
        }
        rounds_us.push(t.elapsed().as_secs_f64() * 1e6 / qs.len() as f64);
    }
    rounds_us.sort_by(f64::total_cmp);
    let median = rounds_us[rounds_us.len() / 2];
    println!(
        "{{\"w\": {w}, \"references\": {}, \"queries\": {}, \"rounds\": {rounds}, \"median_us_per_query\": {median:.3}, \"min_us_per_query\": {:.3}, \"labels\": {:?}}}",
        m.len(),
        qs.len(),
        rounds_us[0],
        labels
    );
}
