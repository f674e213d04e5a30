//! FastProb online loop: one whole probe (push until Stop/ForcedStop) on the logs
//! of the scikit-learn fixture, with the fixture model or `OPSEL_FASTPROB_MODEL`.
//! `train_fastprob.py bench` times scikit-learn's loop on the same logs and model.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opsel::fastprob::{Decision, FastProbModel, Prober};

fn bench(c: &mut Criterion) {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = std::env::var("OPSEL_FASTPROB_MODEL")
        .unwrap_or_else(|_| format!("{root}/../tests/fixtures/fastprob/model_small.json"));
    let model = FastProbModel::load(std::path::Path::new(&path)).unwrap();
    let fx: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{root}/../tests/fixtures/fastprob/sklearn_small.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let logs: Vec<Vec<f64>> = fx["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l["samples_bps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    eprintln!("model {path}; {} logs", logs.len());
    let mut g = c.benchmark_group("fastprob");
    g.measurement_time(std::time::Duration::from_secs(3));
    g.bench_function("probe_all_fixture_logs", |b| {
        let mut p = Prober::new(&model);
        b.iter(|| {
            let mut pushes = 0usize;
            for s in &logs {
                p.reset();
                for x in s {
                    pushes += 1;
                    match p.push(black_box(*x)).unwrap() {
                        Decision::Continue => {}
                        Decision::Stop(r) | Decision::ForcedStop(r) => {
                            black_box(r);
                            break;
                        }
                    }
                }
            }
            pushes
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
