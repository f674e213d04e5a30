//! Runs 200 classifications of one benchmark configuration, for counting
//! instructions under callgrind (timing is unreliable on a shared machine):
//! `valgrind --tool=callgrind target/release/examples/knn_work A pruned`.
//! Same data, seeds and squared cost as `knn_bench_core` (`make bench-peers`).
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (w, per_class) = if args.get(1).map(|s| s.as_str()) == Some("B") {
        (50, 72)
    } else {
        (20, 180)
    };
    let exhaustive = args.get(2).map(|s| s.as_str()) == Some("exhaustive");
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 1).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 2).unwrap();
    let cfg = KnnConfig {
        dtw: opsel::dtw::DtwParams {
            radius: Some(10),
            cost: opsel::dtw::Cost::Squared,
        },
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
    let mut ws = m.workspace();
    let mut s = 0;
    let n_q = if args.get(2).map(|s| s.as_str()) == Some("setup") {
        0
    } else {
        200
    };
    for qw in q.chunks_exact(w).take(n_q) {
        s += if exhaustive {
            m.classify_exhaustive(qw, &mut ws)
        } else {
            m.classify(qw, &mut ws)
        }
        .unwrap()
        .class;
    }
    println!("{s}");
}
