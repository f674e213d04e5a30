//! The prepared decision (`Model::prepare`, issue #7 decision latency) gives
//! bit for bit the unprepared result on the shipped models: every reference
//! of `models/passive` and `models/active-s5c5s5b5` classified leave-one-out
//! (the model refitted without it), prepared on its first w − 1 samples.

use std::path::PathBuf;

use opsel::knn::Model;
use opsel::series::Normalization;

fn check(rel: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    let m = opsel::model::load(&path).unwrap().model;
    let (w, n) = (m.window(), m.len());
    let raw = m.raw_references();
    if m.config().normalization == Normalization::ZScore {
        // A z-scored window's mean and sd depend on its last sample, so `prepare`
        // declines (docs of `Model::prepare`): check that it does, and that the
        // unprepared decision is the exhaustive one (the shipped active models use
        // z-score when it generalises best across conditions, docs/results/classifier.md).
        let mut ws = m.workspace();
        for i in 0..n {
            let q = &raw[i * w..(i + 1) * w];
            assert!(!m.prepare(&q[..w - 1], &mut ws), "{rel}: z-score prepared");
            let p = m.classify(q, &mut ws).unwrap();
            let c = m.classify_exhaustive(q, &mut ws).unwrap();
            assert_eq!(
                (p.class, p.distance.to_bits()),
                (c.class, c.distance.to_bits()),
                "{rel}: reference {i}"
            );
        }
        return;
    }
    let mut used = 0;
    for i in 0..n {
        let mut x = Vec::with_capacity((n - 1) * w);
        let mut y = Vec::with_capacity(n - 1);
        for j in (0..n).filter(|&j| j != i) {
            x.extend_from_slice(&raw[j * w..(j + 1) * w]);
            y.push(m.labels()[j]);
        }
        let sub = Model::fit(&x, w, &y, m.classes().to_vec(), *m.config()).unwrap();
        let q = &raw[i * w..(i + 1) * w];
        let mut a_ws = sub.workspace();
        assert!(sub.prepare(&q[..w - 1], &mut a_ws));
        let (pa, oa, ma) = sub.classify_with_margin(q, &mut a_ws).unwrap();
        // Prepared path taken: every distance exact, nothing pruned.
        used += (a_ws.stats().pruned_by_bounds == 0) as usize;
        let mut b_ws = sub.workspace();
        let (pb, ob, mb) = sub.classify_with_margin(q, &mut b_ws).unwrap();
        assert_eq!(
            (
                pa.class,
                pa.neighbor,
                pa.distance.to_bits(),
                oa.to_bits(),
                ma.to_bits()
            ),
            (
                pb.class,
                pb.neighbor,
                pb.distance.to_bits(),
                ob.to_bits(),
                mb.to_bits()
            ),
            "{rel}: reference {i}"
        );
        let c = sub.classify_exhaustive(q, &mut b_ws).unwrap();
        assert_eq!(
            (pa.class, pa.distance.to_bits()),
            (c.class, c.distance.to_bits())
        );
    }
    // Most windows keep their minimum in the first w − 1 samples.
    assert!(used * 2 > n, "{rel}: prepared path used for {used} of {n}");
}

#[test]
fn prepared_equals_unprepared_on_the_shipped_models() {
    check("models/passive/model.json");
    check("models/active-s5c5s5b5/model.json");
    check("models/active-s5c5s5b5-netlab/model.json");
}
