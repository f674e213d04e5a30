//! FastProb online loop: one whole probe (push until Stop/ForcedStop) on each log,
//! with the fixture model or `OPSEL_FASTPROB_MODEL`, on the logs of the scikit-learn
//! fixture or those of `OPSEL_FASTPROB_LOGS` (a JSON-lines file of recorded transfers,
//! each with `samples_bps`). Criterion's throughput is pushes per second.
//! `train_fastprob.py bench` times scikit-learn's loop on the fixture's logs and model;
//! `research/fastprob/speed.py` runs this bench on the shipped model and recorded
//! transfers beside scikit-learn's loop on the same model and transfers.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use opsel::fastprob::{Decision, FastProbModel, Prober};

fn bench(c: &mut Criterion) {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = std::env::var("OPSEL_FASTPROB_MODEL")
        .unwrap_or_else(|_| format!("{root}/../tests/fixtures/fastprob/model_small.json"));
    let model = FastProbModel::load(std::path::Path::new(&path)).unwrap();
    let samples = |l: &serde_json::Value| -> Vec<f64> {
        l["samples_bps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let logs: Vec<Vec<f64>> = match std::env::var("OPSEL_FASTPROB_LOGS") {
        Ok(p) => std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| samples(&serde_json::from_str(l).unwrap()))
            .collect(),
        Err(_) => {
            let fx: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(format!(
                    "{root}/../tests/fixtures/fastprob/sklearn_small.json"
                ))
                .unwrap(),
            )
            .unwrap();
            fx["logs"].as_array().unwrap().iter().map(samples).collect()
        }
    };
    let probe_all = |p: &mut Prober| {
        let mut pushes = 0u64;
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
    };
    let pushes = probe_all(&mut Prober::new(&model));
    eprintln!(
        "model {path}; {} logs; {pushes} pushes per iteration",
        logs.len()
    );
    let mut g = c.benchmark_group("fastprob");
    let secs = std::env::var("OPSEL_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    g.measurement_time(std::time::Duration::from_secs(secs));
    g.throughput(Throughput::Elements(pushes));
    g.bench_function("probe_all_logs", |b| {
        let mut p = Prober::new(&model);
        b.iter(|| probe_all(&mut p))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
