//! Prepared classification time of a two-stage model file's classifier
//! (`knn::TwoStage`, e.g. a combined k-NN stage 2) on leave-one-out queries:
//! for every 23rd reference, the model refitted without it, prepared on the
//! reference's first w − 1 samples, then timed on the whole window (what the
//! OPS driver does at the last sample, without the driver and setsockopt).
//! Prints the median / p90 / p99 and where the combined stage 2 took stage
//! 1's distances from (`knn::D1Source`: exact prepared finish, or bounded
//! when the last sample is a new minimum under divide-min), stage 1 alone on
//! the same window, how many side references needed L in full, how many
//! stage-1 DTWs the bounded finish ran, and the preparation's time (off the
//! decision's path: between two samples).
//!
//! A second part times every reference whose last sample is a new minimum
//! of its window (under a min normalisation, stage 1's bounded finish), the
//! same way: the case that sets the tail.
//!
//! Also prints how many references stage 1 computed in full (with a stage-1
//! term: DTW and F).
//!
//! Run: `cargo run --release -p opsel --example two_stage_knn_latency -- MODEL.json [MODEL.json ...]`

use opsel::knn::{D1Source, TwoStage};
use std::collections::BTreeMap;
use std::time::Instant;

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    assert!(
        !paths.is_empty(),
        "usage: two_stage_knn_latency MODEL.json [MODEL.json ...]"
    );
    // Several files in one run (e.g. with and without a stage-1 term): the
    // same load on the machine for each.
    for path in &paths {
        println!("{path}");
        run(path);
    }
}

fn run(path: &str) {
    let file = opsel::model::load(path).unwrap();
    let s2 = file.stage2.expect("a two-stage model file");
    let m = file.model;
    let w = m.window();
    let mut by_source: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut all = Vec::new();
    let (mut stage1, mut l_full) = (Vec::new(), Vec::new());
    let (mut prep, mut dtws) = (Vec::new(), Vec::new());
    let mut s1_full = Vec::new();
    for i in (0..m.len()).step_by(23) {
        let q = m.raw_reference(i).to_vec();
        let t = TwoStage::new(&m.without_reference(i).unwrap(), s2).unwrap();
        let mut ws = t.workspace();
        let s = Instant::now();
        t.prepare(&q[..w - 1], &mut ws);
        prep.push(s.elapsed().as_secs_f64() * 1e3);
        let s = Instant::now();
        std::hint::black_box(t.classify_with_margin(&q, &mut ws).unwrap());
        let us = s.elapsed().as_secs_f64() * 1e6;
        let st = ws.combined_stats();
        let src = st.source;
        // Stage 1 alone on the same prepared window, for the breakdown.
        let s1 = t.stage1_model();
        let mut w1 = s1.workspace();
        s1.prepare(&q[..w - 1], &mut w1);
        let s = Instant::now();
        std::hint::black_box(s1.classify_with_margin(&q, &mut w1).unwrap());
        stage1.push(s.elapsed().as_secs_f64() * 1e6);
        s1_full.push(w1.stats().full_dtw as f64);
        l_full.push(st.l1 as f64);
        if src == D1Source::Bounded {
            dtws.push(st.stage1_dtw as f64);
        }
        let key = if src == D1Source::None {
            "1-NN stage 2".to_string()
        } else {
            format!("{src:?}")
        };
        by_source.entry(key).or_default().push(us);
        all.push(us);
    }
    let row = |name: &str, v: &mut Vec<f64>, unit: &str| {
        v.sort_by(f64::total_cmp);
        let p = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
        println!(
            "  {name:28} n {:4}  median {:7.1}{unit}  p90 {:7.1}{unit}  p99 {:7.1}{unit}",
            v.len(),
            p(0.5),
            p(0.9),
            p(0.99)
        );
    };
    println!("{} references, w = {w}, stage 2 {s2:?}", m.len());
    row("all", &mut all, " µs");
    for (k, v) in by_source.iter_mut() {
        row(k, v, " µs");
    }
    row("stage 1 alone", &mut stage1, " µs");
    row("references given L in full", &mut l_full, "");
    if !dtws.is_empty() {
        row("bounded: stage-1 DTWs", &mut dtws, "");
    }
    row("preparation (off the path)", &mut prep, " ms");
    row("stage 1 references in full", &mut s1_full, "");

    // Part 2: every reference whose last sample undercuts its prefix.
    let (mut two, mut one, mut dt) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..m.len() {
        let q = m.raw_reference(i);
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        if q[w - 1] >= min {
            continue;
        }
        let t = TwoStage::new(&m.without_reference(i).unwrap(), s2).unwrap();
        let mut ws = t.workspace();
        t.prepare(&q[..w - 1], &mut ws);
        let s = Instant::now();
        std::hint::black_box(t.classify_with_margin(q, &mut ws).unwrap());
        two.push(s.elapsed().as_secs_f64() * 1e6);
        dt.push(ws.combined_stats().stage1_dtw as f64);
        let s1 = t.stage1_model();
        let mut w1 = s1.workspace();
        s1.prepare(&q[..w - 1], &mut w1);
        let s = Instant::now();
        std::hint::black_box(s1.classify_with_margin(q, &mut w1).unwrap());
        one.push(s.elapsed().as_secs_f64() * 1e6);
    }
    if !two.is_empty() {
        println!("every reference whose last sample is a new minimum:");
        row("two-stage", &mut two, " µs");
        row("stage 1 alone", &mut one, " µs");
        row("stage-1 DTWs of stage 2", &mut dt, "");
    }
}
