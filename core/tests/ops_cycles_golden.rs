//! Cross-check: the OPS controller's several-cycles decision
//! (`Config::cycles`, min-sum) equals `opsel.train cycles`' min-sum on
//! recorded traces. The fixtures were written by
//! `python -m opsel.train ops-cycles models/active-s5c5s5b5/traces -c default -m . --golden FILE`
//! (`opsel.train.ops_cycles.write_golden`; distances from `opsel.train.cycles.pairwise_dtw`,
//! the decision from `opsel.train.cycles.min_sum`): references are the first
//! one-cycle windows of each class, queries are blocks of 3 cycles from each
//! class's last recording run.

use opsel::dtw::DtwParams;
use opsel::knn::{KnnConfig, Model};
use opsel::ops::{Config, Controller, Event, KnnClassifier, Output, Stump};
use opsel::probe::Pattern;
use opsel::series::Normalization;
use serde_json::Value;

const S: u64 = 1_000_000_000;

fn check(fixture: &str) {
    let fx: Value = serde_json::from_str(fixture).unwrap();
    let w = fx["window"].as_u64().unwrap() as usize;
    let n = fx["cycles"].as_u64().unwrap() as usize;
    let f64s = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let refs = f64s(&fx["references"]);
    let labels: Vec<u32> = fx["reference_labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    let classes: Vec<String> = fx["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    let config = KnnConfig {
        k: 1,
        dtw: DtwParams {
            radius: fx["radius"].as_u64().map(|r| r as usize),
            ..DtwParams::default()
        },
        normalization: Normalization::parse(fx["normalization"].as_str().unwrap()).unwrap(),
    };
    let model = Model::fit(&refs, w, &labels, classes, config).unwrap();
    let pattern = Pattern::parse(fx["pattern"].as_str().unwrap()).unwrap();
    let queries = fx["queries"].as_array().unwrap();
    assert!(queries.len() >= 6);
    let mut correct = 0;
    for (qi, q) in queries.iter().enumerate() {
        let samples = f64s(&q["samples"]);
        assert_eq!(samples.len(), n * w);
        let mut cfg = Config::active(pattern.clone());
        cfg.cycles = n;
        let mut ctl = Controller::new(
            cfg,
            KnnClassifier::new(model.clone()).unwrap(),
            Stump::default(),
        )
        .unwrap();
        ctl.start(0).unwrap();
        let mut decided = None;
        let mut per_window = Vec::new();
        for (t, v) in samples.iter().enumerate() {
            let now = (t as u64 + 1) * S;
            ctl.handle_timeout(now).unwrap();
            ctl.handle_sample(now, *v).unwrap();
            while let Some(o) = ctl.poll() {
                match o {
                    Output::Event(Event::Classified {
                        classified,
                        samples,
                        ..
                    }) => decided = Some((classified, samples)),
                    Output::Event(Event::CycleClassified { class_index, .. }) => {
                        per_window.push(class_index as u64)
                    }
                    _ => {}
                }
            }
        }
        let (c, used) = decided.expect("one decision per query");
        assert_eq!(used, n * w);
        let expected = q["expected"].as_u64().unwrap() as usize;
        assert_eq!(
            c.class_index, expected,
            "query {qi}: controller vs Python min-sum"
        );
        let want_pw: Vec<u64> = q["per_window"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(per_window, want_pw, "query {qi}: per-window nearest class");
        // The winning sum equals Python's (same DTW, summed in window order).
        let sums = f64s(&q["sums"]);
        let py = sums[expected];
        assert!(
            (c.distance - py).abs() <= 1e-9 * py.abs().max(1.0),
            "query {qi}: sum {} vs Python {py}",
            c.distance
        );
        correct += (c.class_index as u64 == q["label"].as_u64().unwrap()) as usize;
    }
    // Not a target, a sanity check that the fixture is real data the
    // decision mostly gets right.
    assert!(correct * 2 > queries.len(), "{correct}/{}", queries.len());
}

#[test]
fn matches_python_min_sum_no_normalisation_radius_10() {
    check(include_str!("fixtures/ops_cycles_none_r10.json"));
}

#[test]
fn matches_python_min_sum_z_score_radius_0() {
    check(include_str!("fixtures/ops_cycles_zscore_r0.json"));
}
