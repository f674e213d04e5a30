//! Offline evidence (docs/results/ops-cycles.md, not run by `make test`):
//! the OPS controller with `cycles = n` over the recorded traces, on exactly
//! the blocks and folds of `opsel.train cycles` (exported by
//! `python -m opsel.train ops-cycles ... --export-folds FILE`, numpy only), so
//! its accuracy can be read next to that command's min-sum column.
//!
//! ```sh
//! OPSEL_CYCLES_FOLDS=folds.json OPSEL_CYCLES_RADII=10,0 \
//!   cargo test --release -p opsel --test ops_cycles_traces -- --ignored --nocapture
//! ```

use opsel::dtw::DtwParams;
use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::ops::{Config, Controller, Event, KnnClassifier, Output, Stump};
use opsel::probe::Pattern;
use serde_json::Value;

const S: u64 = 1_000_000_000;

#[test]
#[ignore = "offline evidence: needs OPSEL_CYCLES_FOLDS (exported folds of opsel.train cycles)"]
fn controller_over_recorded_traces() {
    let path = std::env::var("OPSEL_CYCLES_FOLDS").expect("set OPSEL_CYCLES_FOLDS");
    let radii: Vec<usize> = std::env::var("OPSEL_CYCLES_RADII")
        .unwrap_or_else(|_| "10,0".into())
        .split(',')
        .map(|r| r.trim().parse().unwrap())
        .collect();
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let w = fx["window"].as_u64().unwrap() as usize;
    let pattern = Pattern::parse(fx["pattern"].as_str().unwrap()).unwrap();
    let cyc: Vec<f64> = fx["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let ints = |v: &Value| -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    };
    println!("| radius | folds | n cycles (s) | blocks/class | decisions | OPS controller (min-sum) | per-window 1-NN of the last window |");
    println!("|---|---|---|---|---|---|---|");
    for &radius in &radii {
        for run in fx["runs"].as_array().unwrap() {
            let n = run["n"].as_u64().unwrap() as usize;
            let nf = run["folds"].as_i64().unwrap();
            let labels = ints(&run["labels"]);
            let fold = ints(&run["fold"]);
            let blocks: Vec<Vec<i64>> =
                run["blocks"].as_array().unwrap().iter().map(ints).collect();
            let (mut hits, mut last_hits, mut total) = (0usize, 0usize, 0usize);
            for k in 0..nf {
                let train: Vec<usize> = (0..labels.len())
                    .filter(|&i| fold[i] >= 0 && fold[i] != k)
                    .collect();
                let mut x = Vec::new();
                let mut y = Vec::new();
                for &b in &train {
                    for &c in &blocks[b] {
                        x.extend_from_slice(&cyc[c as usize * w..(c as usize + 1) * w]);
                        y.push(labels[b] as u32);
                    }
                }
                let config = KnnConfig {
                    k: 1,
                    dtw: DtwParams {
                        radius: Some(radius),
                        ..DtwParams::default()
                    },
                    ..KnnConfig::default()
                };
                let model = Model::fit(&x, w, &y, classes.clone(), config).unwrap();
                for t in (0..labels.len()).filter(|&i| fold[i] == k) {
                    let mut cfg = Config::active(pattern.clone());
                    cfg.cycles = n;
                    let c = KnnClassifier::new(model.clone()).unwrap();
                    let mut ctl = Controller::new(cfg, c, Stump::default()).unwrap();
                    ctl.start(0).unwrap();
                    let mut decided = None;
                    let mut last_window = None;
                    let mut step = 0u64;
                    for &ci in &blocks[t] {
                        for &v in &cyc[ci as usize * w..(ci as usize + 1) * w] {
                            step += 1;
                            ctl.handle_timeout(step * S).unwrap();
                            ctl.handle_sample(step * S, v).unwrap();
                            while let Some(o) = ctl.poll() {
                                match o {
                                    Output::Event(Event::Classified { classified, .. }) => {
                                        decided = Some(classified.class_index)
                                    }
                                    Output::Event(Event::CycleClassified {
                                        class_index, ..
                                    }) => last_window = Some(class_index),
                                    _ => {}
                                }
                            }
                        }
                    }
                    let d = decided.expect("one decision per block");
                    hits += (d as i64 == labels[t]) as usize;
                    last_hits += (last_window.unwrap_or(d) as i64 == labels[t]) as usize;
                    total += 1;
                }
            }
            println!(
                "| {radius} | {} | {n} ({}) | {} | {total} | {:.1} % | {:.1} % |",
                run["folding"].as_str().unwrap(),
                n * w,
                run["per_class"],
                100.0 * hits as f64 / total as f64,
                100.0 * last_hits as f64 / total as f64
            );
        }
    }
}
