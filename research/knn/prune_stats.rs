//! Prints how much of the reference set the K-NN cascade prunes, and the
//! per-query CPU time, on the benchmark configurations of `make bench-peers`
//! (same data, seeds and squared cost as `knn_bench_core`; a tuning aid):
//! `cargo run --release -p opsel --example prune_stats [abs|squared] [exhaustive]`.
use opsel::dtw::{Cost, DtwParams};
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cost = if args.iter().any(|a| a == "abs") {
        Cost::Abs
    } else {
        Cost::Squared
    };
    let with_exhaustive = args.iter().any(|a| a == "exhaustive");
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        dtw: DtwParams {
            radius: Some(10),
            cost,
        },
        ..KnnConfig::default()
    };
    for (name, w, per_class) in [("A", 20usize, 180usize), ("B", 50, 72)] {
        let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, 1).unwrap();
        let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 2).unwrap();
        let m = Model::fit(&x, w, &y, classes.clone(), cfg).unwrap();
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
        // Median and minimum of 15 rounds of this thread's CPU time: on a
        // shared machine the wall clock also counts time other processes ran.
        let time = |exh: bool, ws: &mut opsel::knn::Workspace| {
            let mut t_us: Vec<f64> = (0..15)
                .map(|_| {
                    let t = thread_cpu_s();
                    for qw in q.chunks_exact(w).take(200) {
                        if exh {
                            m.classify_exhaustive(qw, ws).unwrap();
                        } else {
                            m.classify(qw, ws).unwrap();
                        }
                    }
                    (thread_cpu_s() - t) / 200.0 * 1e6
                })
                .collect();
            t_us.sort_by(f64::total_cmp);
            (t_us[t_us.len() / 2], t_us[0])
        };
        let (med, min) = time(false, &mut ws);
        print!(
            "config {name} ({}): pruned {med:.1} us/query (min {min:.1})",
            cost.name()
        );
        if with_exhaustive {
            let (emed, _) = time(true, &mut ws);
            print!(
                ", exhaustive {emed:.1} us/query, speed-up {:.1}x",
                emed / med
            );
        }
        println!();
        println!(
            "config {name}: {} refs; per query: pruned by bounds {:.1}%, DTW abandoned {:.1}%, DTW completed {:.1}%",
            m.len(),
            100.0 * pr as f64 / n as f64 / refs,
            100.0 * ab as f64 / n as f64 / refs,
            100.0 * full as f64 / n as f64 / refs
        );
    }
}

/// CPU time consumed by the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
