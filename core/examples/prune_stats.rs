//! Prints how much of the reference set the K-NN cascade prunes on the
//! benchmark configurations (a tuning aid): `cargo run --release -p opsel --example prune_stats`.
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;

fn main() {
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    for (name, w, per_class) in [("A", 20usize, 180usize), ("B", 50, 72)] {
        let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 11).unwrap();
        let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 12).unwrap();
        let m = Model::fit(&x, w, &y, classes.clone(), KnnConfig::default()).unwrap();
        let mut ws = m.workspace();
        let (mut pr, mut ab, mut full, mut n) = (0, 0, 0, 0);
        for qw in q.chunks_exact(w).take(200) {
            m.classify(qw, &mut ws).unwrap();
            let s = ws.stats();
            pr += s.pruned_by_bounds;
            ab += s.abandoned;
            full += s.full_dtw;
            n += 1;
        }
        let refs = m.len() as f64;
        // Best of 7 rounds: the minimum is the least disturbed by other load.
        let time = |exh: bool, ws: &mut opsel::knn::Workspace| {
            (0..7)
                .map(|_| {
                    let t = std::time::Instant::now();
                    for qw in q.chunks_exact(w).take(200) {
                        if exh {
                            m.classify_exhaustive(qw, ws).unwrap();
                        } else {
                            m.classify(qw, ws).unwrap();
                        }
                    }
                    t.elapsed().as_secs_f64() / 200.0
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (tp, te) = (time(false, &mut ws), time(true, &mut ws));
        println!(
            "config {name}: pruned {:.1} us/query, exhaustive {:.1} us/query, speed-up {:.1}x",
            tp * 1e6,
            te * 1e6,
            te / tp
        );
        println!(
            "config {name}: {} refs; per query: pruned by bounds {:.1}%, DTW abandoned {:.1}%, DTW completed {:.1}%",
            m.len(),
            100.0 * pr as f64 / n as f64 / refs,
            100.0 * ab as f64 / n as f64 / refs,
            100.0 * full as f64 / n as f64 / refs
        );
    }
}
