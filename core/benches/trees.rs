//! Tree-ensemble inference per sample. Uses the trained multi-rate model
//! (`target/bwe/mr_gbt.json` from `make bwe-train`) when present, else the fixture
//! model. `opsel/train/bwe.py bench` prints the ratio to scikit-learn's predict.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use opsel::trees::Ensemble;

fn bench(c: &mut Criterion) {
    let root = env!("CARGO_MANIFEST_DIR");
    let trained = std::env::var("OPSEL_BWE_MODEL")
        .unwrap_or_else(|_| format!("{root}/../target/bwe/mr_gbt.json"));
    let fx: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{root}/tests/fixtures/trees_gbt_regressor.json"))
            .unwrap(),
    )
    .unwrap();
    let model = match std::fs::read_to_string(&trained) {
        Ok(s) => Ensemble::from_json(&s).unwrap(),
        Err(_) => {
            eprintln!("{trained} not found; benchmarking the fixture model");
            Ensemble::from_json(&fx["model"].to_string()).unwrap()
        }
    };
    eprintln!(
        "model: {} trees, {} features",
        model.n_trees(),
        model.n_features()
    );
    // Rows of the model's width: the earlier `fft-reim` model (129 features) is
    // benchmarked on the rows of its own equality fixture.
    let fx = if model.n_features() == fx["model"]["n_features"].as_u64().unwrap() as usize {
        fx
    } else {
        serde_json::from_str(
            &std::fs::read_to_string(format!("{root}/tests/fixtures/bwe_mr_rx120.json")).unwrap(),
        )
        .unwrap()
    };
    let rows: Vec<Vec<f64>> = fx["X"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        })
        .collect();
    let mut i = 0;
    let mut g = c.benchmark_group("trees_predict");
    g.bench_function("gbt_regressor_mr64", |b| {
        b.iter(|| {
            i = (i + 1) % rows.len();
            model.predict(black_box(&rows[i])).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
