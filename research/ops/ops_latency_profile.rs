//! Where an OPS decision's time goes, per step, on the shipped models
//! (docs/results/ops-latency.md). Each query is a leave-one-out window: the
//! model is refitted without reference i and classifies reference i, so the
//! query is a real window the model has not seen.
//!
//! `cargo run --release -p opsel --example ops_latency_profile -- MODEL.json [rounds]`
//! prints per step the median / p90 / p99 in µs over every query × rounds.
//! Under callgrind pass `count` as the second argument: one round, no timing.

use std::time::Instant;

use opsel::ops::{Classifier, KnnClassifier, Policy, Stump};

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: ops_latency_profile MODEL.json [rounds|count]");
    // Under callgrind: `count-setup` (leave-one-out fits only), `count-classify`
    // (+ one Model::classify per query), `count-margin` (+ one unprepared
    // KnnClassifier::classify, the classifier the controller runs),
    // `count-prepare` (+ KnnClassifier::prepare on the first w - 1 samples),
    // `count-prepared` (+ prepare, then the prepared classify).
    let mode = args.get(2).map(|s| s.as_str()).unwrap_or("");
    let count = mode.starts_with("count");
    let rounds: usize = if count {
        1
    } else {
        args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20)
    };
    let m = opsel::model::load(path).unwrap().model;
    let w = m.window();
    let n = m.len();
    // Leave-one-out models and their queries.
    let mut cases = Vec::with_capacity(n);
    for i in 0..n {
        let sub = m.without_reference(i).unwrap();
        let q = m.raw_reference(i).to_vec();
        cases.push((KnnClassifier::new(sub.clone()).unwrap(), sub, q));
    }
    if count {
        let mut sink = 0usize;
        for (kc, sub, q) in cases.iter_mut() {
            let mut ws = sub.workspace();
            match mode {
                "count-classify" => sink += sub.classify(q, &mut ws).unwrap().class,
                "count-margin" => sink += kc.classify(q).unwrap().class_index,
                "count-prepare" => kc.prepare(&q[..w - 1]),
                "count-prepared" => {
                    kc.prepare(&q[..w - 1]);
                    sink += kc.classify(q).unwrap().class_index
                }
                _ => {}
            }
        }
        println!("{mode} {n} queries ({sink})");
        // Pruning statistics of both searches, summed over the queries.
        let (mut a, mut b) = ([0usize; 3], [0usize; 3]);
        for (_, sub, q) in cases.iter() {
            let mut ws = sub.workspace();
            sub.classify(q, &mut ws).unwrap();
            let s = ws.stats();
            for (x, v) in a
                .iter_mut()
                .zip([s.pruned_by_bounds, s.abandoned, s.full_dtw])
            {
                *x += v;
            }
            sub.classify_with_margin(q, &mut ws).unwrap();
            let s = ws.stats();
            for (x, v) in b
                .iter_mut()
                .zip([s.pruned_by_bounds, s.abandoned, s.full_dtw])
            {
                *x += v;
            }
        }
        let per = |v: [usize; 3]| v.map(|x| x as f64 / n as f64);
        println!("per query [pruned by bound, abandoned, full DTW]: classify {:?}, other-class search {:?}", per(a), per(b));
        return;
    }
    let mut t_classify = Vec::new();
    let mut t_margin = Vec::new();
    let mut t_ctl = Vec::new();
    let mut t_policy = Vec::new();
    let mut t_prepare = Vec::new();
    let mut t_prepared = Vec::new();
    let mut full = Vec::new();
    let mut full_margin = Vec::new();
    let mut policy = Stump::default();
    let mut sink = 0usize;
    for _ in 0..rounds {
        for (kc, sub, q) in cases.iter_mut() {
            let mut ws = sub.workspace();
            let t = Instant::now();
            let p = sub.classify(q, &mut ws).unwrap();
            t_classify.push(t.elapsed().as_secs_f64() * 1e6);
            full.push(ws.stats().full_dtw as f64);
            sink += p.class;
            let t = Instant::now();
            let (p, _, _) = sub.classify_with_margin(q, &mut ws).unwrap();
            t_margin.push(t.elapsed().as_secs_f64() * 1e6);
            full_margin.push(ws.stats().full_dtw as f64);
            sink += p.class;
            let t = Instant::now();
            let c = kc.classify(q).unwrap();
            t_ctl.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            kc.prepare(&q[..w - 1]);
            t_prepare.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let c2 = kc.classify(q).unwrap();
            t_prepared.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(c, c2);
            let t = Instant::now();
            let cca = policy.select(&c).unwrap();
            t_policy.push(t.elapsed().as_secs_f64() * 1e6);
            sink += cca.as_str().len();
        }
    }
    println!("model {path}: {n} refs, w = {w}, {rounds} rounds x {n} leave-one-out queries");
    for (name, v) in [
        ("Model::classify", &mut t_classify),
        ("Model::classify_with_margin", &mut t_margin),
        ("KnnClassifier::classify", &mut t_ctl),
        ("KnnClassifier::prepare (w-1)", &mut t_prepare),
        ("KnnClassifier::classify prepared", &mut t_prepared),
        ("Stump::select", &mut t_policy),
        ("full DTWs (classify)", &mut full),
        ("full DTWs (2nd search)", &mut full_margin),
    ] {
        let (a, b, c) = (pct(v, 0.5), pct(v, 0.9), pct(v, 0.99));
        println!("{name:32} median {a:9.2}  p90 {b:9.2}  p99 {c:9.2}");
    }
    println!("({sink})");
}
