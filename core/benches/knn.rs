//! Criterion benches for the DTW K-NN hot paths: one DTW distance, and one
//! 1-NN classification in the two configurations of the foundation issue
//! (A: w=20, 1080 references; B: w=50, 432 references). Synthetic RTT
//! signatures (series::synth) stand in for measured traces.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opsel::dtw::{self, Cost, DtwParams};
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;

fn bench_dtw(c: &mut Criterion) {
    let (x, _) = synth::dataset(&SIX_CLASSES, 2, 50, 1).unwrap();
    for (w, r) in [(20usize, 10usize), (50, 10)] {
        let (a, b) = (&x[..w], &x[w * 3..w * 4]);
        let mut ws = dtw::Workspace::with_capacity(w);
        for cost in [Cost::Abs, Cost::Squared] {
            let p = DtwParams {
                radius: Some(r),
                cost,
            };
            c.bench_function(&format!("dtw/w{w}_r{r}_{}", cost.name()), |bch| {
                bch.iter(|| dtw::distance_with(black_box(a), black_box(b), &p, &mut ws).unwrap())
            });
        }
    }
}

fn bench_classify(c: &mut Criterion) {
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    for (name, w, per_class) in [("A_w20_n1080", 20usize, 180usize), ("B_w50_n432", 50, 72)] {
        let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 11).unwrap();
        let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 12).unwrap();
        let m = Model::fit(&x, w, &y, classes.clone(), KnnConfig::default()).unwrap();
        let mut ws = m.workspace();
        let queries: Vec<&[f64]> = q.chunks_exact(w).take(200).collect();
        let mut i = 0;
        c.bench_function(&format!("classify/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                m.classify(black_box(queries[i]), &mut ws).unwrap()
            })
        });
        c.bench_function(&format!("classify_exhaustive/{name}"), |b| {
            b.iter(|| {
                i = (i + 1) % queries.len();
                m.classify_exhaustive(black_box(queries[i]), &mut ws)
                    .unwrap()
            })
        });
    }
}

criterion_group!(benches, bench_dtw, bench_classify);
criterion_main!(benches);
