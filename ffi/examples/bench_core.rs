//! Binding-overhead bench, core side ("a single classify call from
//! Python, Node and C compared to the core call"). Config A of the
//! foundation issue: w = 20, 1080 references (6 classes × 180 windows from
//! `synth::dataset`), 200 queries, default classifier (1-NN, radius 10, abs).
//!
//! `cargo run --release -p opsel-ffi --example bench_core -- DIR [ROUNDS]`
//! writes DIR/model.json and DIR/queries.f64 (200 × 20 little-endian f64)
//! for the C, Node and Python benches, then times the core call the same way
//! they do: per round, 200 `classify` calls back to back; per-call time =
//! round time / 200; the median over ROUNDS (default 30) is printed with a
//! checksum of the predictions (equal in every language or the run is void).
//! The same is then done on DIR/tiny.json (one reference, 50 × 200 calls per
//! round) to measure the fixed cost of a call.
//! Driven by benches/bindings/run.sh (`make bench-bindings`).

use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, Metadata};
use opsel::series::synth;
use std::path::PathBuf;
use std::time::Instant;

const W: usize = 20;
const REFS_PER_CLASS: usize = 180;
const QUERIES: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: bench_core DIR [ROUNDS]")?);
    let rounds: usize = args.next().map_or(Ok(30), |s| s.parse())?;
    std::fs::create_dir_all(&dir)?;

    let (x, y) = synth::dataset(&SIX_CLASSES, REFS_PER_CLASS, W, 11)?;
    let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let model = Model::fit(&x, W, &y, classes, KnnConfig::default())?;
    // 34 per class = 204 windows; the first 200 are the queries.
    let (qx, _) = synth::dataset(&SIX_CLASSES, 34, W, 12)?;
    let queries = &qx[..QUERIES * W];
    let file = KnnModelFile {
        stage2: None,
        model,
        meta: Metadata::default(),
    };
    file.save(dir.join("model.json"))?;
    let bytes: Vec<u8> = queries.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("queries.f64"), bytes)?;

    // A one-reference model: the search is nearly free, so the time per call
    // is the fixed cost of a call (argument checks, copies, result object):
    // the binding overhead in absolute terms.
    let tiny = KnnModelFile {
        stage2: None,
        model: Model::fit(
            &x[..W],
            W,
            &[0],
            vec![SIX_CLASSES[0].to_string()],
            KnnConfig::default(),
        )?,
        meta: Metadata::default(),
    };
    tiny.save(dir.join("tiny.json"))?;

    let m = &file.model;
    let mut ws = m.workspace();
    let mut checksum = 0u64;
    for (i, q) in queries.chunks_exact(W).enumerate() {
        let p = m.classify(q, &mut ws)?;
        checksum += (i as u64 + 1) * (p.class as u64 * 100_000 + p.neighbor as u64);
    }
    for (config, model, reps) in [("A", m, 1), ("tiny", &tiny.model, 50)] {
        let mut ws = model.workspace();
        let mut per_call_ns = Vec::with_capacity(rounds);
        for _ in 0..rounds + 1 {
            let t = Instant::now();
            for _ in 0..reps {
                for q in queries.chunks_exact(W) {
                    std::hint::black_box(model.classify(std::hint::black_box(q), &mut ws)?);
                }
            }
            per_call_ns.push(t.elapsed().as_nanos() as f64 / (reps * QUERIES) as f64);
        }
        per_call_ns.remove(0); // warm-up round
        per_call_ns.sort_by(f64::total_cmp);
        println!(
            "RESULT lang=core config={config} median_ns={:.1} rounds={rounds} checksum={}",
            per_call_ns[rounds / 2],
            if config == "A" { checksum } else { 0 }
        );
    }
    Ok(())
}
