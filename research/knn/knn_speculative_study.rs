//! Study for the speculative z-score decision (decision latency,
//! docs/results/ops-latency.md): for every reference of a shipped
//! model, left out in turn, how many references a bound from a guessed last
//! sample leaves to compute exactly.
//!
//! The bound: with `h` the query whose first w − 1 samples are normalised with
//! a guessed last sample and whose last sample is the true one, and `q` the
//! true normalised query, |DTW(q, s) − DTW(h, s)| ≤ B for every reference s,
//! B = the largest sum of |q_i − h_i| over the cells of any band path.
//!
//! `cargo run --release -p opsel --example knn_speculative_study -- MODEL.json [stride]`

use opsel::dtw::{self, Cost};

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn dist(name: &str, v: &mut [f64]) {
    println!(
        "  {name:34} median {:8.2}  p10 {:8.2}  p90 {:8.2}  max {:8.2}",
        pct(v, 0.5),
        pct(v, 0.1),
        pct(v, 0.9),
        pct(v, 1.0),
    );
}

/// Largest sum of `c[i]` over the cells of a band path (cell (i, j) costs c[i]).
fn max_path(c: &[f64], r: usize) -> f64 {
    let w = c.len();
    let mut prev = vec![f64::NEG_INFINITY; w + 1];
    let mut curr = vec![f64::NEG_INFINITY; w + 1];
    prev[0] = 0.0;
    for (i, &ci) in c.iter().enumerate() {
        curr.fill(f64::NEG_INFINITY);
        let lo = i.saturating_sub(r);
        let hi = (i + r).min(w - 1);
        for j in lo..=hi {
            let m = prev[j].max(prev[j + 1]).max(curr[j]);
            curr[j + 1] = ci + m;
        }
        std::mem::swap(&mut prev, &mut curr);
        if i == 0 {
            prev[0] = f64::NEG_INFINITY;
        }
    }
    prev[w]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: knn_speculative_study MODEL.json [stride]");
    let stride: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let m = opsel::model::load(path).unwrap().model;
    let (w, n, k) = (m.window(), m.len(), m.config().k);
    let r = m.config().dtw.radius_or_max();
    let cost = m.config().dtw.cost;
    assert_eq!(cost, Cost::Abs, "study written for the abs cost");
    let norm = m.config().normalization;
    let raw = m.raw_references();
    let mut refs = raw.to_vec();
    for s in refs.chunks_exact_mut(w) {
        norm.apply(s).unwrap();
    }
    let mut up = vec![0.0; refs.len()];
    let mut lo = vec![0.0; refs.len()];
    for ((s, u), l) in refs
        .chunks_exact(w)
        .zip(up.chunks_exact_mut(w))
        .zip(lo.chunks_exact_mut(w))
    {
        dtw::envelope(s, r, u, l);
    }
    let mut ws = dtw::Workspace::with_capacity(w);
    // Guess sets: offsets, in standard deviations of the prefix, from the
    // previous sample; at the decision the guess with the smallest B is used.
    let guesses: Vec<(&str, Vec<f64>)> = vec![
        ("previous sample", vec![0.0]),
        ("prefix mean", vec![f64::NAN]),
        ("previous, +-0.5 sd (3)", vec![0.0, -0.5, 0.5]),
        (
            "previous, +-0.3, +-0.8 sd (5)",
            vec![0.0, -0.3, 0.3, -0.8, 0.8],
        ),
        (
            "previous, +-0.25..1.5 sd (9)",
            vec![0.0, -0.25, 0.25, -0.6, 0.6, -1.0, 1.0, -1.5, 1.5],
        ),
    ];
    let mut lbe_alone = Vec::new();
    for (gname, offsets) in guesses {
        let (mut bs, mut surv, mut surv_lb, mut gaps, mut dev) =
            (vec![], vec![], vec![], vec![], vec![]);
        for i in (0..n).step_by(stride) {
            let x = &raw[i * w..(i + 1) * w];
            let mut q = x.to_vec();
            norm.apply(&mut q).unwrap();
            let p = &x[..w - 1];
            let mu = p.iter().sum::<f64>() / p.len() as f64;
            let sd = (p.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / p.len() as f64).sqrt();
            let mut best: Option<(f64, Vec<f64>, f64)> = None;
            for &o in &offsets {
                let gv = if o.is_nan() { mu } else { p[w - 2] + o * sd };
                let mut g = x.to_vec();
                g[w - 1] = gv;
                norm.apply(&mut g).unwrap();
                let mut h = g.clone();
                h[w - 1] = q[w - 1];
                let c: Vec<f64> = (0..w)
                    .map(|t| if t + 1 < w { (q[t] - h[t]).abs() } else { 0.0 })
                    .collect();
                let b = max_path(&c, r);
                if best.as_ref().is_none_or(|bb| b < bb.0) {
                    best = Some((b, h, gv));
                }
            }
            let (b, h, gv) = best.unwrap();
            dev.push((x[w - 1] - gv).abs() / sd.max(1e-12));
            let mut dh = Vec::with_capacity(n);
            let mut dq = Vec::with_capacity(n);
            for j in (0..n).filter(|&j| j != i) {
                let s = &refs[j * w..(j + 1) * w];
                dh.push((
                    dtw::accumulated(&h, s, r, cost, f64::INFINITY, None, &mut ws),
                    j,
                ));
                dq.push(dtw::accumulated(
                    &q,
                    s,
                    r,
                    cost,
                    f64::INFINITY,
                    None,
                    &mut ws,
                ));
            }
            let mut sorted: Vec<f64> = dh.iter().map(|d| d.0).collect();
            sorted.sort_by(f64::total_cmp);
            let kth_u = sorted[k - 1] + b;
            let mut sq = dq.clone();
            sq.sort_by(f64::total_cmp);
            gaps.push(sq[k] - sq[k - 1]);
            let mut s1 = 0;
            let mut s2 = 0;
            let mut s3 = 0;
            for (t, &(d, j)) in dh.iter().enumerate() {
                let _ = t;
                let lbe = dtw::lb_enhanced(
                    &q,
                    &refs[j * w..(j + 1) * w],
                    r,
                    4,
                    &up[j * w..(j + 1) * w],
                    &lo[j * w..(j + 1) * w],
                    cost,
                    f64::INFINITY,
                );
                if d - b <= kth_u {
                    s1 += 1;
                    if lbe <= kth_u {
                        s2 += 1;
                    }
                }
                if lbe <= sq[k - 1] {
                    s3 += 1;
                }
            }
            bs.push(b);
            surv.push(s1 as f64);
            surv_lb.push(s2 as f64);
            if gname.starts_with("previous") {
                lbe_alone.push(s3 as f64);
            }
        }
        println!("guess: {gname} ({} queries)", bs.len());
        dist("|x_last - guess| / sd(prefix)", &mut dev);
        dist("B (max path sum of |q - h|)", &mut bs);
        dist("survivors of the bound", &mut surv);
        dist("  and of LB_Enhanced <= kth upper", &mut surv_lb);
        dist("true gap d(k+1) - d(k)", &mut gaps);
    }
    dist("LB_Enhanced <= true kth (ideal cut-off)", &mut lbe_alone);
}
