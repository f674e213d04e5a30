use opsel::dtw::{self, Cost};
use opsel::mix::SIX_CLASSES;
use opsel::series::synth;
fn main() {
    let w = 20;
    let (x, _) = synth::dataset(&SIX_CLASSES, 180, w, 11).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 34, w, 12).unwrap();
    let n = x.len() / w;
    let (mut u, mut l) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    for i in 0..n {
        dtw::envelope(
            &x[i * w..(i + 1) * w],
            10,
            &mut u[i * w..(i + 1) * w],
            &mut l[i * w..(i + 1) * w],
        );
    }
    let mut best = f64::INFINITY;
    let mut s = 0.0;
    for _ in 0..7 {
        let t = std::time::Instant::now();
        for qw in q.chunks_exact(w).take(200) {
            for i in 0..n {
                s += dtw::lb_keogh(
                    qw,
                    &u[i * w..(i + 1) * w],
                    &l[i * w..(i + 1) * w],
                    Cost::Abs,
                    f64::INFINITY,
                    None,
                );
            }
        }
        best = best.min(t.elapsed().as_secs_f64() / 200.0);
    }
    println!(
        "LB_Keogh pass over {n} refs: {:.1} us/query ({s:.0})",
        best * 1e6
    );
    let mut ws = dtw::Workspace::with_capacity(w);
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = std::time::Instant::now();
        for qw in q.chunks_exact(w).take(200) {
            for i in 0..50 {
                s += dtw::accumulated(
                    qw,
                    &x[i * w..(i + 1) * w],
                    10,
                    Cost::Abs,
                    f64::INFINITY,
                    None,
                    &mut ws,
                );
            }
        }
        best = best.min(t.elapsed().as_secs_f64() / 200.0 / 50.0);
    }
    println!("full DTW w=20 r=10: {:.3} us ({s:.0})", best * 1e6);
}
