//! How tight the lower bounds are on the `make bench-peers` data (seeds 1/2,
//! squared cost, radius 10): per query, how many references have a DTW, an
//! LB_Kim/LB_Keogh bound, or an LB_Enhanced^4 bound within t times the
//! nearest neighbour's DTW. References whose bound is below the final cut-off
//! (t = 1) must be DTW'd by any exact search using that bound.
//! `cargo run --release -p opsel --example bound_tightness`
use opsel::dtw::{self, Cost, DtwParams};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;
fn main() {
    let p = DtwParams {
        radius: Some(10),
        cost: Cost::Squared,
    };
    for (name, w, per_class) in [("A", 20usize, 180usize), ("B", 50, 72)] {
        let (x, _y) = synth::dataset(&SIX_CLASSES, per_class, w, 1).unwrap();
        let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 2).unwrap();
        let n = x.len() / w;
        let mut env_u = vec![0.0; x.len()];
        let mut env_l = vec![0.0; x.len()];
        for i in 0..n {
            dtw::envelope(
                &x[i * w..(i + 1) * w],
                10,
                &mut env_u[i * w..(i + 1) * w],
                &mut env_l[i * w..(i + 1) * w],
            );
        }
        let mut cnt = [0usize; 6];
        let mut lbk = [0usize; 6];
        let mut lbe = [0usize; 6];
        let th = [1.0, 1.1, 1.25, 1.5, 2.0, 3.0];
        for qw in q.chunks_exact(w).take(200) {
            let d: Vec<f64> = (0..n)
                .map(|i| {
                    let v = dtw::distance(qw, &x[i * w..(i + 1) * w], &p).unwrap();
                    v * v
                })
                .collect();
            let nn = d.iter().cloned().fold(f64::INFINITY, f64::min);
            for i in 0..n {
                let s = &x[i * w..(i + 1) * w];
                let (u, l) = (&env_u[i * w..(i + 1) * w], &env_l[i * w..(i + 1) * w]);
                let k = dtw::lb_keogh(qw, u, l, Cost::Squared, f64::INFINITY, None)
                    .max(dtw::lb_kim(qw, s, Cost::Squared));
                let e = dtw::lb_enhanced(qw, s, 10, 4, u, l, Cost::Squared, f64::INFINITY);
                for t in 0..6 {
                    if d[i] <= nn * th[t] {
                        cnt[t] += 1;
                    }
                    if k <= nn * th[t] {
                        lbk[t] += 1;
                    }
                    if e <= nn * th[t] {
                        lbe[t] += 1;
                    }
                }
            }
        }
        let f = |a: [usize; 6]| {
            a.iter()
                .map(|&c| format!("{:.1}", c as f64 / 200.0))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "{name} thresholds {:?}\n  dtw<=t*nn: {}\n  keogh/kim<=t*nn: {}\n  enh4<=t*nn: {}",
            th,
            f(cnt),
            f(lbk),
            f(lbe)
        );
    }
}
