//! The compute of the bounded finish alone: for every reference whose last
//! sample is a new minimum of its window by at most 2 % (stage 1's bounded
//! finish under divide-min, the drops most such windows have), the model
//! refitted without it, prepared on its first w − 1 samples, then the same
//! window classified 300 times in a row (warm caches: what is left is
//! arithmetic, not memory). Prints the mean per call of the two-stage
//! decision and of stage 1 alone, and stage 1's DTWs per window (run to the
//! end or abandoned in lockstep).
//!
//! Run: `cargo run --release -p opsel --example two_stage_bounded_warm -- MODEL.json`

use opsel::knn::TwoStage;
use std::time::Instant;

const CALLS: usize = 300;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: two_stage_bounded_warm MODEL.json");
    let file = opsel::model::load(&path).unwrap();
    let s2 = file.stage2.expect("a two-stage model file");
    let m = file.model;
    let w = m.window();
    let (mut two, mut one, mut n, mut dtws) = (0.0, 0.0, 0usize, 0usize);
    for i in 0..m.len() {
        let q = m.raw_reference(i);
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        if q[w - 1] >= min || 1.0 - q[w - 1] / min > 0.02 {
            continue;
        }
        let t = TwoStage::new(&m.without_reference(i).unwrap(), s2).unwrap();
        let mut ws = t.workspace();
        t.prepare(&q[..w - 1], &mut ws);
        let s = Instant::now();
        for _ in 0..CALLS {
            std::hint::black_box(t.classify_with_margin(q, &mut ws).unwrap());
        }
        two += s.elapsed().as_secs_f64();
        let s1 = t.stage1_model();
        let mut w1 = s1.workspace();
        s1.prepare(&q[..w - 1], &mut w1);
        let s = Instant::now();
        for _ in 0..CALLS {
            std::hint::black_box(s1.classify_with_margin(q, &mut w1).unwrap());
        }
        one += s.elapsed().as_secs_f64();
        let st = w1.stats();
        dtws += st.full_dtw + st.abandoned;
        n += 1;
    }
    let per = |t: f64| t * 1e6 / (n * CALLS) as f64;
    println!("{n} windows ending on a new minimum (drop <= 2 %), {CALLS} warm calls each:");
    println!("  two-stage      {:7.1} µs per call", per(two));
    println!("  stage 1 alone  {:7.1} µs per call", per(one));
    println!("  stage 1's DTWs {:7.1} per window", dtws as f64 / n as f64);
}
