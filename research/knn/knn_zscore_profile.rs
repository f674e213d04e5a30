//! Where the decision time of a shipped K-NN model goes (decision
//! latency, docs/results/ops-latency.md): every reference
//! classified leave-one-out (the model refitted without it), with the work
//! counters of the search ([`opsel::knn::SearchStats`]) and the time per
//! decision, unprepared (the search after the last sample) and prepared
//! ([`Model::prepare`] on the first w − 1 samples, then the decision).
//!
//! `cargo run --release -p opsel --example knn_zscore_profile -- MODEL.json [rounds] [stride]`
//! prints the distribution (median / p10 / p90 / max / mean) of each counter
//! and time. Under callgrind pass `count-setup`, `count-classify`,
//! `count-prepare` or `count-prepared` instead of rounds: one pass, no timing;
//! the instructions of a mode less those of `count-setup`, divided by the
//! queries, are its cost per decision.

use std::time::Instant;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn dist(name: &str, v: &mut [f64]) {
    println!(
        "  {name:34} median {:8.1}  p10 {:8.1}  p90 {:8.1}  max {:8.1}  mean {:8.1}",
        pct(v, 0.5),
        pct(v, 0.1),
        pct(v, 0.9),
        pct(v, 1.0),
        v.iter().sum::<f64>() / v.len() as f64
    );
}

#[derive(Default)]
struct Counters {
    pruned: Vec<f64>,
    abandoned: Vec<f64>,
    full: Vec<f64>,
    time_us: Vec<f64>,
}

impl Counters {
    fn push(&mut self, st: opsel::knn::SearchStats, t: f64) {
        self.pruned.push(st.pruned_by_bounds as f64);
        self.abandoned.push(st.abandoned as f64);
        self.full.push(st.full_dtw as f64);
        self.time_us.push(t);
    }
    fn print(&mut self, what: &str) {
        println!("{what}:");
        dist("pruned by a bound", &mut self.pruned);
        dist("DTW lanes abandoned", &mut self.abandoned);
        dist("DTW lanes run to the end", &mut self.full);
        dist("time (µs)", &mut self.time_us);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect(
        "usage: knn_zscore_profile MODEL.json [rounds|count-setup|count-classify|count-prepare|count-prepared] [stride]",
    );
    let mode = args.get(2).map(|s| s.as_str()).unwrap_or("");
    let count = mode.starts_with("count");
    let rounds: usize = if count {
        1
    } else {
        args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5)
    };
    let stride: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let m = opsel::model::load(path).unwrap().model;
    let (w, n) = (m.window(), m.len());
    let c = m.config();
    if !count {
        println!(
            "{path}: {n} references, w = {w}, k = {}, radius {:?}, {:?}, {:?}; {rounds} rounds, every {stride}th reference left out",
            c.k, c.dtw.radius, c.dtw.cost, c.normalization
        );
    }
    let (mut plain, mut prep, mut prepared) =
        (Counters::default(), Vec::new(), Counters::default());
    let mut sink = 0usize;
    let mut queries = 0;
    for i in (0..n).step_by(stride) {
        let sub = m.without_reference(i).unwrap();
        let q = m.raw_reference(i);
        let mut ws = sub.workspace();
        queries += 1;
        if count {
            match mode {
                "count-classify" => sink += sub.classify(q, &mut ws).unwrap().class,
                "count-prepare" => sink += sub.prepare(&q[..w - 1], &mut ws) as usize,
                "count-prepared" => {
                    sub.prepare(&q[..w - 1], &mut ws);
                    sink += sub.classify(q, &mut ws).unwrap().class
                }
                _ => {}
            }
            continue;
        }
        for _ in 0..rounds {
            let t = Instant::now();
            let a = sub.classify(q, &mut ws).unwrap();
            plain.push(ws.stats(), t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let ok = sub.prepare(&q[..w - 1], &mut ws);
            prep.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let b = sub.classify(q, &mut ws).unwrap();
            prepared.push(ws.stats(), t.elapsed().as_secs_f64() * 1e6);
            assert!(ok);
            assert_eq!(a, b, "reference {i}: prepared decision differs");
            sink += b.class;
        }
    }
    if count {
        println!("{mode}: {queries} queries ({sink})");
        return;
    }
    println!(
        "per leave-one-out query ({queries} queries × {rounds}, {} references each):",
        n - 1
    );
    plain.print("unprepared decision (search after the last sample)");
    dist("prepare on the w-1th sample (µs)", &mut prep);
    prepared.print("prepared decision (after Model::prepare)");
    println!("({sink})");
}
