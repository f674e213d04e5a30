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
                                  last_scale in prop::sample::select(vec![0.5, 1.0, 1.3, 3.0]),
                                  head_cap in 0usize..6) {
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
        // A short ordered head (0: the default) sends the pruned finish into
        // the unordered tail.
        prep_ws.prepared.head_cap = head_cap;
        for qw in q.chunks_exact(w) {
            let mut qw = qw.to_vec();
            let min = qw[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
            if w > 1 { qw[w - 1] = min * last_scale; }
            let prepared = m.prepare(&qw[..w.saturating_sub(1)], &mut prep_ws);
            // Every normalisation prepares (z-score speculatively).
            prop_assert_eq!(prepared, w > 1);
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

/// A window of `w` samples: a random walk (`seed`), or (`kind` 1) with long
/// runs of repeated values so that many DTW distances tie, or (`kind` 2) a
/// flat prefix.
fn walk(w: usize, seed: u64, kind: u8) -> Vec<f64> {
    let mut s = seed | 1;
    let mut rnd = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 10_000) as f64 / 10_000.0
    };
    let mut v = 200.0;
    (0..w)
        .map(|_| {
            match kind {
                1 => v = 40.0 + (rnd() * 4.0).floor() * 5.0,
                2 => {}
                _ => v += rnd() * 6.0 - 3.0,
            }
            v
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    /// The speculative preparation (z-score always; the min normalisations on
    /// a new minimum) gives the exhaustive answer bit for bit: the same k
    /// neighbours with the same distances, votes, confidence and margin,
    /// whatever the last sample: one of the guesses exactly, near one, far
    /// from all of them, a new minimum, or (tied references) equal distances.
    #[test]
    fn speculative_preparation_equals_exhaustive(seed in any::<u64>(), w in 2usize..30,
            r in prop::option::of(0usize..12), sq in any::<bool>(), k in 1usize..6,
            norm in 0usize..4, n_refs in 1usize..60, kind in 0u8..3,
            last in prop::sample::select(vec![0.0, 0.25, -0.6, 1.5, 0.1, -0.37, 3.0, -8.0, 40.0, -1e3]),
            head_cap in 0usize..6) {
        let normalization = [Normalization::None, Normalization::SubtractMin, Normalization::DivideMin, Normalization::ZScore][norm];
        let mut x = Vec::with_capacity(n_refs * w);
        let mut y = Vec::with_capacity(n_refs);
        for i in 0..n_refs {
            x.extend(walk(w, seed.wrapping_add(i as u64 * 7919), kind));
            y.push((i % 3) as u32);
        }
        // Duplicated references: exact ties that only the index breaks.
        if n_refs > 4 {
            let dup = x[..w].to_vec();
            x[2 * w..3 * w].copy_from_slice(&dup);
        }
        let cfg = KnnConfig {
            k: k.min(n_refs),
            dtw: crate::dtw::DtwParams { radius: r, cost: if sq { Cost::Squared } else { Cost::Abs } },
            normalization,
        };
        let classes = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
        let mut qw = walk(w, seed ^ 0x5eed, kind);
        if kind == 0 && n_refs > 3 {
            // Near a reference, so that a few distances are small and close.
            qw.copy_from_slice(&x[3 * w..4 * w]);
            qw[w / 2] += 0.01;
        }
        let p = qw[..w - 1].to_vec();
        let mu = p.iter().sum::<f64>() / p.len() as f64;
        let sd = (p.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / p.len() as f64).sqrt();
        qw[w - 1] = p[w - 2] + last * sd.max(1.0);
        if normalization == Normalization::DivideMin && qw[w - 1] <= 0.0 {
            qw[w - 1] = 0.5;
        }
        let mut ws = m.workspace();
        let mut prep_ws = m.workspace();
        // A short ordered head (0: the default): the bounded finish's tail.
        prep_ws.prepared.head_cap = head_cap;
        prop_assert!(m.prepare(&qw[..w - 1], &mut prep_ws));
        let a = m.classify(&qw, &mut prep_ws).unwrap();
        let a_nb = prep_ws.neighbors().to_vec();
        let st = prep_ws.stats();
        let c = m.classify_exhaustive(&qw, &mut ws).unwrap();
        let c_nb = ws.neighbors().to_vec();
        prop_assert_eq!(a, c);
        prop_assert_eq!(a.confidence.to_bits(), c.confidence.to_bits());
        prop_assert_eq!(&a_nb, &c_nb);
        prop_assert_eq!(a_nb.iter().map(|n| n.0.to_bits()).collect::<Vec<_>>(),
                        c_nb.iter().map(|n| n.0.to_bits()).collect::<Vec<_>>());
        // Which path ran: z-score and a new minimum speculate, the rest is exact.
        let new_min = qw[w - 1] < p.iter().copied().fold(f64::INFINITY, f64::min);
        let speculative = match normalization {
            Normalization::ZScore => true,
            Normalization::SubtractMin | Normalization::DivideMin => new_min,
            Normalization::None | Normalization::ZSorted => false,
        };
        prop_assert_eq!(st.speculative, speculative);
        prop_assert_eq!(st.pruned_by_bounds + st.abandoned + st.full_dtw, m.len());
        // The margin (both searches bounded) equals the unprepared one.
        m.prepare(&qw[..w - 1], &mut prep_ws);
        let (pa, oa, ma) = m.classify_with_margin(&qw, &mut prep_ws).unwrap();
        let (pb, ob, mb) = m.classify_with_margin(&qw, &mut ws).unwrap();
        prop_assert_eq!(pa, pb);
        prop_assert_eq!((oa.to_bits(), ma.to_bits()), (ob.to_bits(), mb.to_bits()));
        prop_assert_eq!(prep_ws.neighbors(), ws.neighbors());
    }
}

/// The bound does prune: a z-score query whose last sample is one of the
/// guesses computes only the references near it, and finds the exhaustive
/// answer.
#[test]
fn speculative_zscore_prunes() {
    let (x, y, classes) = six(40, 20, 21);
    let cfg = KnnConfig {
        k: 3,
        normalization: Normalization::ZScore,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    let mut ws = m.workspace();
    let mut q = x[5 * 20..6 * 20].to_vec();
    q[7] += 0.5;
    q[19] = q[18]; // the first guess, exactly
    assert!(m.prepare(&q[..19], &mut ws));
    let a = m.classify(&q, &mut ws).unwrap();
    let st = ws.stats();
    assert!(st.speculative);
    assert!(
        st.full_dtw + st.abandoned < 24,
        "{st:?}: the bound left too much work"
    );
    let mut ws2 = m.workspace();
    let b = m.classify_exhaustive(&q, &mut ws2).unwrap();
    assert_eq!(a, b);
    assert_eq!(ws.neighbors(), ws2.neighbors());
    // Another window (different prefix): the normal search, not speculative.
    let mut other = q.clone();
    other[3] += 1.0;
    m.classify(&other, &mut ws).unwrap();
    assert!(!ws.stats().speculative);
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
    // Prepared, exact: the last row of the references the prepared bound
    // does not rule out (pruned finish), fewer than all of them.
    let st = ws.stats();
    assert!(st.prepared && !st.speculative);
    assert_eq!(st.full_dtw + st.pruned_by_bounds, m.len());
    assert!(st.full_dtw < m.len(), "{st:?}");
    // Another prefix: the search runs (some references pruned or abandoned).
    let mut other = q.clone();
    other[3] += 1.0;
    m.classify(&other, &mut ws).unwrap();
    assert!(!ws.stats().prepared);
    assert!(ws.stats().full_dtw < m.len());
    // Another model of the same shape does not use this workspace's preparation.
    let m2 = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    assert!(m.prepare(&q[..19], &mut ws));
    m2.classify(&q, &mut ws).unwrap();
    assert!(!ws.stats().prepared);
    assert!(ws.stats().full_dtw < m2.len());
    // Bad prefixes prepare nothing.
    assert!(!m.prepare(&q[..18], &mut ws));
    assert!(!m.prepare(&[f64::NAN; 19], &mut ws));
    assert!(!m.prepare(&[-1.0; 19], &mut ws));
}

#[test]
fn without_reference_is_the_fit_on_the_others() {
    let x = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 1.0, 1.0, 1.0];
    let classes: Vec<String> = vec!["a".into(), "b".into()];
    let m = Model::fit(&x, 3, &[0, 1, 0], classes.clone(), KnnConfig::default()).unwrap();
    assert_eq!(m.raw_reference(1), &[10.0, 10.0, 10.0]);
    let sub = m.without_reference(0).unwrap();
    assert_eq!(sub.len(), 2);
    assert_eq!(sub.labels(), &[1, 0]);
    assert_eq!(sub.raw_references(), &x[3..]);
    assert_eq!(sub.classes(), &classes[..]);
    // The query that was reference 0 now finds reference 2 (class a, distance 3).
    let p = sub
        .classify(&[0.0, 0.0, 0.0], &mut sub.workspace())
        .unwrap();
    assert_eq!((p.class, p.distance), (0, 3.0));
    let e = m.without_reference(3).unwrap_err().to_string();
    assert!(
        e.contains("reference index 3 out of range (the model has 3)"),
        "{e}"
    );
}

/// Brute force, independent of the search and of the preparation: normalise,
/// full `dtw::distance` to every normalised reference, every reference sorted
/// by (distance, index). Returns (the k nearest, each class's nearest
/// (distance, index)).
#[allow(clippy::type_complexity)]
fn brute_knn(m: &Model, q: &[f64]) -> (Vec<(f64, usize)>, Vec<(f64, usize)>) {
    let w = m.window();
    let norm = m.config().normalization;
    let mut qn = q.to_vec();
    norm.apply(&mut qn).unwrap();
    let mut all: Vec<(f64, usize)> = (0..m.len())
        .map(|i| {
            let mut r = m.raw_reference(i).to_vec();
            norm.apply(&mut r).unwrap();
            (dtw::distance(&qn, &r, &m.config().dtw).unwrap(), i)
        })
        .collect();
    assert_eq!(all.len() * w, m.raw_references().len());
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut per_class = vec![(f64::INFINITY, usize::MAX); m.classes().len()];
    for &(d, i) in &all {
        let b = &mut per_class[m.labels()[i] as usize];
        if b.1 == usize::MAX {
            *b = (d, i);
        }
    }
    all.truncate(m.config().k);
    (all, per_class)
}

/// The vote of `vote.rs` on a brute-force neighbour list: most votes, ties to
/// the class of the nearest neighbour among the tied classes.
fn brute_vote(m: &Model, nb: &[(f64, usize)]) -> usize {
    let mut votes = vec![0u32; m.classes().len()];
    for &(_, i) in nb {
        votes[m.labels()[i] as usize] += 1;
    }
    let top = *votes.iter().max().unwrap();
    nb.iter()
        .map(|&(_, i)| m.labels()[i] as usize)
        .find(|&c| votes[c] == top)
        .unwrap()
}

/// The shipped 5-Hz model (`models/passive-200ms`: w = 50, radius 25,
/// divide-min, 1-NN) on a quarter of its references, with duplicates under
/// other labels (exact ties across classes), queried with the other
/// references perturbed: the last sample a little above the prefix's minimum
/// (the exact pruned finish), equal to it, or a new minimum (the bounded
/// finish), and with a reference itself (distance 0, tied with its
/// duplicate). Prepared classification, margin and per-class distances equal
/// the brute force bit for bit, for k = 1 and k = 3.
#[test]
fn prepared_equals_brute_force_on_the_shipped_5hz_model() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/passive-200ms/model.json");
    let full = crate::model::load(&path).unwrap().model;
    let w = full.window();
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in (0..full.len()).step_by(4) {
        x.extend_from_slice(full.raw_reference(i));
        y.push(full.labels()[i]);
    }
    let n_classes = full.classes().len() as u32;
    for i in (0..full.len()).step_by(97) {
        x.extend_from_slice(full.raw_reference(i));
        y.push((full.labels()[i] + 1) % n_classes);
    }
    let mut checked = [0usize; 2];
    let mut tail_used = false;
    // The default ordered head, and a short one whose unordered tail the
    // pruned finishes must then search.
    for (k, head_cap) in [(1, 0), (3, 0), (1, 7), (3, 7)] {
        let cfg = KnnConfig {
            k,
            ..*full.config()
        };
        let m = Model::fit(&x, w, &y, full.classes().to_vec(), cfg).unwrap();
        let mut ws = m.workspace();
        ws.prepared.head_cap = head_cap;
        let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ k as u64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 1_000_000) as f64 / 1_000_000.0
        };
        let mut queries: Vec<Vec<f64>> = Vec::new();
        for (t, i) in (1..full.len()).step_by(61).enumerate() {
            let mut q: Vec<f64> = full
                .raw_reference(i)
                .iter()
                .map(|v| v * (1.0 + 0.02 * (rnd() - 0.5)))
                .collect();
            let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
            q[w - 1] = match t % 4 {
                0 => min * (1.0 + 0.1 * rnd()),
                1 => min,
                2 => min * (1.0 - 0.05 * rnd()),
                _ => q[w - 1],
            };
            queries.push(q);
        }
        // A reference that has a duplicate under another label.
        queries.push(full.raw_reference(0).to_vec());
        for q in &queries {
            let (nb, per_class) = brute_knn(&m, q);
            let want_class = brute_vote(&m, &nb);
            assert!(m.prepare(&q[..w - 1], &mut ws));
            let p = m.classify(q, &mut ws).unwrap();
            checked[ws.stats().speculative as usize] += 1;
            // More computed than the short head holds: the tail was searched.
            tail_used |= head_cap > 0 && !ws.stats().speculative && ws.stats().full_dtw > head_cap;
            assert_eq!(ws.neighbors(), &nb[..], "k = {k}");
            assert_eq!((p.class, p.neighbor), (want_class, nb[0].1));
            assert_eq!(p.distance.to_bits(), nb[0].0.to_bits());
            // The margin: the nearest reference of any other class.
            let (pm, other, _) = m.classify_with_margin(q, &mut ws).unwrap();
            assert_eq!(pm, p);
            let want_other = per_class
                .iter()
                .enumerate()
                .filter(|&(c, b)| c != p.class && b.1 != usize::MAX)
                .map(|(_, b)| b.0)
                .fold(f64::INFINITY, f64::min);
            assert_eq!(other.to_bits(), want_other.to_bits(), "k = {k}");
            // Per-class distances through the preparation when it applies.
            let mut out = vec![0.0; m.classes().len()];
            if m.nearest_per_class_prepared(q, &mut ws, &mut out).unwrap() {
                for (o, b) in out.iter().zip(&per_class) {
                    assert_eq!(o.to_bits(), b.0.to_bits());
                }
            }
        }
    }
    // Both finishes ran: the exact one and the bounded one.
    assert!(checked[0] > 0 && checked[1] > 0, "{checked:?}");
    assert!(tail_used);
}
