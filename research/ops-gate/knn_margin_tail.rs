//! Where the tail of the OPS decision goes on a shipped 1-NN model: every
//! reference classified leave-one-out as the driver does it
//! (`Model::prepare` on the first w − 1 samples, then
//! `Model::classify_with_margin`), split by the path the decision took
//! (exact finish, or speculative: the last sample is a new minimum of a
//! divide-min window), with the work counters and the time per decision.
//!
//! `cargo run --release -p opsel --example knn_margin_tail -- MODEL.json [rounds]`
//!
//! Instruction counts (deterministic under load): `count-exact [stride]` or
//! `count-spec` run one pass over the queries of that path (every stride-th
//! for the exact one) without timing; under
//! `valgrind --tool=callgrind --toggle-collect='*classify_with_margin*'` the
//! total is the decisions' own instructions.

use std::time::Instant;

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn row(name: &str, v: &mut [f64]) {
    println!(
        "  {name:40} n {:5}  median {:8.1}  p90 {:8.1}  p99 {:8.1}  max {:8.1}",
        v.len(),
        pct(v, 0.5),
        pct(v, 0.9),
        pct(v, 0.99),
        pct(v, 1.0)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: knn_margin_tail MODEL.json [rounds]");
    let m = opsel::model::load(path).unwrap().model;
    let (w, n) = (m.window(), m.len());
    if let Some(mode) = args.get(2).filter(|a| a.starts_with("count-")) {
        let stride: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
        let mut queries = 0;
        let mut sink = 0.0;
        for i in (0..n).step_by(if mode == "count-exact" { stride } else { 1 }) {
            let q = m.raw_reference(i);
            let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
            let spec = q[w - 1] < min;
            if spec != (mode == "count-spec") {
                continue;
            }
            let sub = m.without_reference(i).unwrap();
            let mut ws = sub.workspace();
            sub.prepare(&q[..w - 1], &mut ws);
            let (p, _, margin) = sub.classify_with_margin(q, &mut ws).unwrap();
            sink += margin + p.distance;
            queries += 1;
        }
        println!("{mode}: {queries} queries ({sink:.6})");
        return;
    }
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let (mut t_all, mut t_exact, mut t_spec) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lanes_spec, mut pruned_spec) = (Vec::new(), Vec::new());
    let (mut min_exact, mut min_spec) = (Vec::new(), Vec::new());
    let mut sink = 0.0;
    for i in 0..n {
        let sub = m.without_reference(i).unwrap();
        let q = m.raw_reference(i);
        let mut ws = sub.workspace();
        let mut best = f64::INFINITY;
        let mut spec = false;
        for _ in 0..rounds {
            sub.prepare(&q[..w - 1], &mut ws);
            let t = Instant::now();
            let (p, _, margin) = sub.classify_with_margin(q, &mut ws).unwrap();
            let us = t.elapsed().as_secs_f64() * 1e6;
            sink += margin + p.distance;
            let st = ws.stats();
            best = best.min(us);
            spec = st.speculative;
            t_all.push(us);
            if st.speculative {
                t_spec.push(us);
                lanes_spec.push((st.abandoned + st.full_dtw) as f64);
                pruned_spec.push(st.pruned_by_bounds as f64);
            } else {
                t_exact.push(us);
            }
        }
        if spec {
            min_spec.push(best);
        } else {
            min_exact.push(best);
        }
    }
    println!("{path}: {n} references, w = {w}; leave-one-out, prepared, classify_with_margin, {rounds} rounds");
    row("all decisions (µs)", &mut t_all);
    row("exact finish (µs)", &mut t_exact);
    row("speculative: new minimum (µs)", &mut t_spec);
    row("exact, fastest of the rounds (µs)", &mut min_exact);
    row("speculative, fastest of the rounds (µs)", &mut min_spec);
    row("speculative: DTW lanes (margin search)", &mut lanes_spec);
    row("speculative: pruned (margin search)", &mut pruned_spec);
    println!("({sink:.3})");
}
