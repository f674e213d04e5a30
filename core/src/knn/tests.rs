use super::*;
use crate::dtw::Cost;
use crate::mix::SIX_CLASSES;
use crate::series::synth;
use proptest::prelude::*;

fn six(per_class: usize, w: usize, seed: u64) -> (Vec<f64>, Vec<u32>, Vec<String>) {
    let (x, y) = synth::dataset(&SIX_CLASSES, per_class, w, seed).unwrap();
    (x, y, SIX_CLASSES.iter().map(|s| s.to_string()).collect())
}

#[test]
fn recognises_the_nearest_class() {
    let x = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0];
    let m = Model::fit(
        &x,
        3,
        &[0, 1],
        vec!["a".into(), "b".into()],
        KnnConfig::default(),
    )
    .unwrap();
    let mut ws = m.workspace();
    let p = m.classify(&[9.0, 10.0, 11.0], &mut ws).unwrap();
    assert_eq!((p.class, p.neighbor, p.votes), (1, 1, 1));
    assert_eq!(p.distance, 2.0);
    assert_eq!(p.confidence, 1.0);
}

#[test]
fn vote_majority_and_tie_break() {
    // Three references: class 0 at distance 1, class 1 at distances 2 and 3.
    let x = [1.0, 2.0, 3.0];
    let cfg = |k| KnnConfig {
        k,
        ..Default::default()
    };
    let m = Model::fit(&x, 1, &[0, 1, 1], vec!["a".into(), "b".into()], cfg(3)).unwrap();
    let mut ws = m.workspace();
    let p = m.classify(&[0.0], &mut ws).unwrap();
    assert_eq!((p.class, p.votes), (1, 2));
    assert!((p.confidence - 2.0 / 3.0).abs() < 1e-15);
    // k = 2: one vote each; the class of the nearest neighbour wins.
    let m = Model::fit(&x, 1, &[0, 1, 1], vec!["a".into(), "b".into()], cfg(2)).unwrap();
    let p = m.classify(&[0.0], &mut m.workspace()).unwrap();
    assert_eq!(p.class, 0);
    // Equal distances: the lower reference index is the nearer neighbour.
    let m = Model::fit(
        &[5.0, 5.0],
        1,
        &[1, 0],
        vec!["a".into(), "b".into()],
        cfg(1),
    )
    .unwrap();
    let p = m.classify(&[4.0], &mut m.workspace()).unwrap();
    assert_eq!((p.neighbor, p.class), (0, 1));
}

#[test]
fn bad_input_is_reported() {
    let cls = || vec!["a".to_string(), "b".to_string()];
    let e = |r: crate::Result<Model>| r.unwrap_err().to_string();
    assert!(e(Model::fit(&[], 3, &[], cls(), KnnConfig::default())).contains("empty"));
    assert!(e(Model::fit(
        &[1.0; 6],
        3,
        &[0, 1],
        cls(),
        KnnConfig {
            k: 3,
            ..Default::default()
        }
    ))
    .contains("k = 3"));
    assert!(e(Model::fit(
        &[1.0; 6],
        3,
        &[0, 2],
        cls(),
        KnnConfig::default()
    ))
    .contains("label 2"));
    assert!(e(Model::fit(
        &[1.0; 5],
        3,
        &[0, 1],
        cls(),
        KnnConfig::default()
    ))
    .contains("5 values"));
    assert!(e(Model::fit(
        &[1.0, f64::NAN, 1.0],
        3,
        &[0],
        cls(),
        KnnConfig::default()
    ))
    .contains("NaN"));
    let m = Model::fit(&[1.0; 6], 3, &[0, 1], cls(), KnnConfig::default()).unwrap();
    let mut ws = m.workspace();
    let err = m.classify(&[1.0; 4], &mut ws).unwrap_err();
    assert!(
        err.to_string().contains("4 samples") && err.to_string().contains("of 3"),
        "{err}"
    );
    let err = m.classify(&[1.0, f64::INFINITY, 1.0], &mut ws).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("inf"), "{err}");
}

#[test]
fn fit_labels_sorts_classes_like_sklearn() {
    let m = Model::fit_labels(&[1.0, 2.0, 3.0], 1, &["z", "a", "z"], KnnConfig::default()).unwrap();
    assert_eq!(m.classes(), ["a", "z"]);
    assert_eq!(m.labels(), [1, 0, 1]);
}

#[test]
fn synthetic_six_class_accuracy_and_batch() {
    let (x, y, classes) = six(60, 20, 1);
    let m = Model::fit(&x, 20, &y, classes.clone(), KnnConfig::default()).unwrap();
    let (qx, qy) = synth::dataset(&SIX_CLASSES, 20, 20, 99).unwrap();
    let preds = m.classify_batch(&qx, 2).unwrap();
    let mut ws = m.workspace();
    let mut correct = 0;
    for (i, p) in preds.iter().enumerate() {
        let one = m.classify(&qx[i * 20..(i + 1) * 20], &mut ws).unwrap();
        assert_eq!(*p, one, "batch differs from single at {i}");
        correct += (p.class == qy[i] as usize) as usize;
    }
    // The synthetic classes are separable by level and shape; a broken search would not reach this.
    assert!(
        correct as f64 / preds.len() as f64 > 0.7,
        "accuracy {correct}/{}",
        preds.len()
    );
    let err = m.classify_batch(&qx[..30], 2).unwrap_err();
    assert!(err.to_string().contains("30 values"));
}

#[test]
fn cross_validation_is_stratified_and_reproducible() {
    let (x, y, classes) = six(25, 10, 4);
    let folds = stratified_folds(&y, 5, 7).unwrap();
    for f in 0..5 {
        for c in 0..6u32 {
            let n = folds
                .iter()
                .zip(&y)
                .filter(|(&a, &l)| a == f && l == c)
                .count();
            assert_eq!(n, 5, "fold {f} class {c}");
        }
    }
    let a = cross_validate(&x, 10, &y, &classes, KnnConfig::default(), 5, 7).unwrap();
    let b = cross_validate(&x, 10, &y, &classes, KnnConfig::default(), 5, 7).unwrap();
    assert_eq!(a.fold_accuracy, b.fold_accuracy);
    assert_eq!(a.confusion.total(), 150);
    assert!(a.mean_accuracy > 0.6, "{}", a.mean_accuracy);
    assert!(stratified_folds(&[0, 0, 1], 5, 1)
        .unwrap_err()
        .to_string()
        .contains("fewer than the 5 folds"));
}

#[test]
fn confusion_metrics_and_grouping() {
    let mut c = Confusion::new(3);
    for (t, p) in [(0, 0), (0, 0), (0, 1), (1, 1), (2, 2), (2, 1)] {
        c.add(t, p).unwrap();
    }
    assert!((c.accuracy() - 4.0 / 6.0).abs() < 1e-15);
    assert!((c.precision(1) - 1.0 / 3.0).abs() < 1e-15);
    assert!((c.recall(0) - 2.0 / 3.0).abs() < 1e-15);
    assert!((c.f1(2) - 2.0 / 3.0).abs() < 1e-15);
    let g = c.grouped(&[0, 1, 1], 2).unwrap();
    assert_eq!(g.as_slice(), &[2, 1, 0, 3]);
    assert!(c.add(3, 0).is_err());
}

proptest! {
    /// The lane version of LB_Enhanced is the scalar bound, bit for bit, in every lane.
    #[test]
    fn enhanced_lanes_equal_scalar(seed in any::<u64>(), w in 1usize..40, r in 0usize..12, v in 1usize..6, sq in any::<bool>()) {
        use crate::dtw::lanes::{Lanes, LANES};
        let mut st = seed | 1;
        let mut rnd = || { st ^= st << 13; st ^= st >> 7; st ^= st << 17; (st % 10_000) as f64 / 37.0 };
        let q: Vec<f64> = (0..w).map(|_| rnd()).collect();
        let refs: Vec<Vec<f64>> = (0..LANES).map(|_| (0..w).map(|_| rnd()).collect()).collect();
        let envs: Vec<(Vec<f64>, Vec<f64>)> = refs.iter().map(|s| {
            let (mut u, mut l) = (vec![0.0; w], vec![0.0; w]);
            crate::dtw::envelope(s, r, &mut u, &mut l);
            (u, l)
        }).collect();
        let lanes = |f: &dyn Fn(usize, usize) -> f64| -> Vec<Lanes> { (0..w).map(|j| std::array::from_fn(|l| f(l, j))).collect() };
        let (s_l, u_l, l_l) = (lanes(&|l, j| refs[l][j]), lanes(&|l, j| envs[l].0[j]), lanes(&|l, j| envs[l].1[j]));
        let cost = if sq { Cost::Squared } else { Cost::Abs };
        let got = if sq {
            search::enhanced_lanes::<true>(&q, &s_l, &u_l, &l_l, r, v)
        } else {
            search::enhanced_lanes::<false>(&q, &s_l, &u_l, &l_l, r, v)
        };
        for l in 0..LANES {
            let want = crate::dtw::lb_enhanced(&q, &refs[l], r, v, &envs[l].0, &envs[l].1, cost, f64::INFINITY);
            prop_assert_eq!(got[l].to_bits(), want.to_bits());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Pruning never changes a result: same neighbours, same distances, same vote.
    #[test]
    fn pruned_equals_exhaustive(seed in any::<u64>(), w in 3usize..30, r in prop::option::of(0usize..12),
                                k in 1usize..6, sq in any::<bool>(), norm in 0usize..4, per in 2usize..12) {
        let (x, y, classes) = six(per, w, seed);
        let normalization = [crate::series::Normalization::None, crate::series::Normalization::SubtractMin,
            crate::series::Normalization::DivideMin, crate::series::Normalization::ZScore][norm];
        let cfg = KnnConfig { k, dtw: crate::dtw::DtwParams { radius: r, cost: if sq { Cost::Squared } else { Cost::Abs } }, normalization };
        let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
        let (qx, _) = synth::dataset(&SIX_CLASSES, 2, w, seed ^ 0xABCD).unwrap();
        let (mut a, mut b) = (m.workspace(), m.workspace());
        for q in qx.chunks_exact(w) {
            let p = m.classify(q, &mut a).unwrap();
            let e = m.classify_exhaustive(q, &mut b).unwrap();
            prop_assert_eq!(p, e);
            prop_assert_eq!(a.neighbors(), b.neighbors());
        }
    }
}

#[test]
fn margin_uses_the_nearest_other_class() {
    let (x, y, classes) = six(10, 12, 21);
    let m = Model::fit(&x, 12, &y, classes, KnnConfig::default()).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 2, 12, 22).unwrap();
    let mut ws = m.workspace();
    for w in q.chunks_exact(12) {
        let (p, other, margin) = m.classify_with_margin(w, &mut ws).unwrap();
        let want = x
            .chunks_exact(12)
            .zip(&y)
            .filter(|(_, &l)| l as usize != p.class)
            .map(|(r, _)| crate::dtw::distance(w, r, &m.config().dtw).unwrap())
            .fold(f64::INFINITY, f64::min);
        assert_eq!(other, want);
        assert!((margin - (1.0 - p.distance / other)).abs() < 1e-15);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// `Model::prepare` then classify gives bit for bit what the search gives,
    /// for every normalisation, cost, band and k, whether the last sample
    /// keeps the window's minimum (prepared path) or is a new minimum (the
    /// search runs).
    #[test]
    fn prepared_equals_unprepared(seed in any::<u64>(), w in 1usize..30, r in prop::option::of(0usize..12),
                                  sq in any::<bool>(), k in 1usize..4, norm in 0usize..4, per_class in 1usize..12,
                                  last_scale in prop::sample::select(vec![0.5, 1.0, 1.3, 3.0])) {
        let (x, y, classes) = six(per_class, w, seed);
        let normalization = [Normalization::None, Normalization::SubtractMin, Normalization::DivideMin, Normalization::ZScore][norm];
        let cfg = KnnConfig {
            k: k.min(y.len()),
            dtw: crate::dtw::DtwParams { radius: r, cost: if sq { Cost::Squared } else { Cost::Abs } },
            normalization,
        };
        let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
        let (q, _) = synth::dataset(&SIX_CLASSES, 1, w, seed ^ 0x5eed).unwrap();
        let mut prep_ws = m.workspace();
        for qw in q.chunks_exact(w) {
            let mut qw = qw.to_vec();
            let min = qw[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
            if w > 1 { qw[w - 1] = min * last_scale; }
            let prepared = m.prepare(&qw[..w.saturating_sub(1)], &mut prep_ws);
            prop_assert_eq!(prepared, w > 1 && normalization != Normalization::ZScore);
            let a = m.classify(&qw, &mut prep_ws).unwrap();
            let a_nb = prep_ws.neighbors().to_vec();
            let mut ws = m.workspace();
            let b = m.classify(&qw, &mut ws).unwrap();
            let c = m.classify_exhaustive(&qw, &mut ws).unwrap();
            prop_assert_eq!((a.class, a.neighbor, a.votes, a.distance.to_bits()), (b.class, b.neighbor, b.votes, b.distance.to_bits()));
            prop_assert_eq!((a.class, a.distance.to_bits()), (c.class, c.distance.to_bits()));
            prop_assert_eq!(&a_nb, ws.neighbors());
            // The margin: the preparation is still valid for the same window.
            m.prepare(&qw[..w.saturating_sub(1)], &mut prep_ws);
            let (pa, oa, ma) = m.classify_with_margin(&qw, &mut prep_ws).unwrap();
            let (pb, ob, mb) = m.classify_with_margin(&qw, &mut ws).unwrap();
            prop_assert_eq!((pa.class, pa.neighbor, pa.distance.to_bits()), (pb.class, pb.neighbor, pb.distance.to_bits()));
            prop_assert_eq!((oa.to_bits(), ma.to_bits()), (ob.to_bits(), mb.to_bits()));
            prop_assert_eq!(prep_ws.neighbors(), ws.neighbors());
        }
    }
}

#[test]
fn preparation_is_used_only_when_it_holds() {
    let (x, y, classes) = six(10, 20, 3);
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 20, &y, classes.clone(), cfg).unwrap();
    let mut ws = m.workspace();
    let q: Vec<f64> = x[..20].iter().map(|v| v * 1.01).collect();
    assert!(m.prepare(&q[..19], &mut ws));
    m.classify(&q, &mut ws).unwrap();
    // Prepared: every reference's exact distance, no pruning.
    assert_eq!(ws.stats().full_dtw, m.len());
    // Another prefix: the search runs (some references pruned or abandoned).
    let mut other = q.clone();
    other[3] += 1.0;
    m.classify(&other, &mut ws).unwrap();
    assert!(ws.stats().full_dtw < m.len());
    // Another model of the same shape does not use this workspace's preparation.
    let m2 = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    assert!(m.prepare(&q[..19], &mut ws));
    m2.classify(&q, &mut ws).unwrap();
    assert!(ws.stats().full_dtw < m2.len());
    // Bad prefixes prepare nothing.
    assert!(!m.prepare(&q[..18], &mut ws));
    assert!(!m.prepare(&[f64::NAN; 19], &mut ws));
    assert!(!m.prepare(&[-1.0; 19], &mut ws));
}
