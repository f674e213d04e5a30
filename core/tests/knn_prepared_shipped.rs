//! The prepared decision (`Model::prepare`, decision latency) gives
//! bit for bit the unprepared result on the shipped models: every reference
//! of `models/passive` and `models/active-s5c5s5b5` classified leave-one-out
//! (the model refitted without it), prepared on its first w − 1 samples.
//! The z-score default active model prepares speculatively (guessed last
//! samples, a bounded finish): its leave-one-out decisions equal the
//! exhaustive ones too, neighbours and distances bit for bit.

use std::path::PathBuf;

use opsel::knn::Model;
use opsel::series::Normalization;

fn check(rel: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    let m = opsel::model::load(&path).unwrap().model;
    let (w, n) = (m.window(), m.len());
    if m.config().normalization == Normalization::ZScore {
        check_speculative(rel, &m);
        return;
    }
    let mut used = 0;
    for i in 0..n {
        let sub = m.without_reference(i).unwrap();
        let q = m.raw_reference(i);
        let mut a_ws = sub.workspace();
        assert!(sub.prepare(&q[..w - 1], &mut a_ws));
        let (pa, oa, ma) = sub.classify_with_margin(q, &mut a_ws).unwrap();
        // The exact prepared finish taken (not the speculative one).
        used += !a_ws.stats().speculative as usize;
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

/// z-score: every reference left out, prepared on its first w − 1 samples;
/// the speculative decision equals the unprepared and the exhaustive one
/// (class, votes, confidence, the k neighbours and their distances bit for
/// bit), and the bound leaves little to compute.
fn check_speculative(rel: &str, m: &Model) {
    let (w, n) = (m.window(), m.len());
    let (mut work, mut speculative) = (Vec::with_capacity(n), 0);
    for i in 0..n {
        let sub = m.without_reference(i).unwrap();
        let q = m.raw_reference(i);
        let mut a_ws = sub.workspace();
        assert!(
            sub.prepare(&q[..w - 1], &mut a_ws),
            "{rel}: {i} not prepared"
        );
        let pa = sub.classify(q, &mut a_ws).unwrap();
        let st = a_ws.stats();
        speculative += st.speculative as usize;
        work.push(st.full_dtw + st.abandoned);
        let mut b_ws = sub.workspace();
        let pb = sub.classify(q, &mut b_ws).unwrap();
        assert_eq!(pa, pb, "{rel}: reference {i}, prepared vs unprepared");
        assert_eq!(a_ws.neighbors(), b_ws.neighbors(), "{rel}: reference {i}");
        let pc = sub.classify_exhaustive(q, &mut b_ws).unwrap();
        assert_eq!(pa, pc, "{rel}: reference {i}, prepared vs exhaustive");
        assert_eq!(
            pa.confidence.to_bits(),
            pc.confidence.to_bits(),
            "{rel}: reference {i}"
        );
        let bits = |ws: &opsel::knn::Workspace| {
            ws.neighbors()
                .iter()
                .map(|&(d, j)| (d.to_bits(), j))
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&a_ws), bits(&b_ws), "{rel}: reference {i}");
    }
    assert_eq!(speculative, n, "{rel}: every decision speculative");
    // The search without preparation computes a median of 425 DTWs of 1181
    // (docs/results/ops-latency.md); the bound leaves a few.
    work.sort_unstable();
    let median = work[n / 2];
    assert!(median <= 40, "{rel}: median {median} DTWs per decision");
}

#[test]
fn prepared_equals_unprepared_on_the_shipped_models() {
    check("models/passive/model.json");
    check("models/active-s5c5s5b5/model.json");
    check("models/active-s5c5s5b5-netlab/model.json");
}
