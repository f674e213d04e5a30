//! Hot paths allocate nothing (DESIGN.md): a counting global allocator shows
//! zero allocations per `dtw::distance_with` and per `knn::Model::classify`
//! once the workspace exists.

use opsel::dtw::{self, Cost, DtwParams};
use opsel::knn::{KnnConfig, Model, Stage1Term};
use opsel::mix::SIX_CLASSES;
use opsel::series::{synth, Normalization};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn hot_paths_allocate_nothing() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 30, 20, 5).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 5, 20, 6).unwrap();

    let mut dws = dtw::Workspace::with_capacity(20);
    for cost in [Cost::Abs, Cost::Squared] {
        let p = DtwParams {
            radius: Some(10),
            cost,
        };
        let (d, n) = count(|| dtw::distance_with(&x[..20], &x[20..40], &p, &mut dws).unwrap());
        assert!(d > 0.0);
        assert_eq!(n, 0, "dtw::distance_with allocated {n} times");
    }

    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    for (k, norm) in [(1, Normalization::None), (5, Normalization::ZScore)] {
        let cfg = KnnConfig {
            k,
            normalization: norm,
            ..Default::default()
        };
        let m = Model::fit(&x, 20, &y, classes.clone(), cfg).unwrap();
        // The counter works: making a workspace does allocate.
        let (mut ws, n) = count(|| m.workspace());
        assert!(n > 0);
        let mut probs = vec![0.0; 6];
        for w in q.chunks_exact(20) {
            let (p, n) = count(|| m.classify(w, &mut ws).unwrap());
            assert!(p.class < 6);
            assert_eq!(n, 0, "classify (k={k}) allocated {n} times");
            let (_, n) = count(|| m.class_probabilities(w, &mut ws, &mut probs).unwrap());
            assert_eq!(n, 0, "class_probabilities allocated {n} times");
            // The decision prepared on the first 19 samples (z-score: the
            // speculative preparation and the bounded finish) allocates nothing.
            let (ok, n) = count(|| m.prepare(&w[..19], &mut ws));
            assert!(ok);
            assert_eq!(n, 0, "prepare ({norm:?}) allocated {n} times");
            let (_, n) = count(|| m.classify(w, &mut ws).unwrap());
            assert_eq!(n, 0, "prepared classify ({norm:?}) allocated {n} times");
            assert_eq!(ws.stats().speculative, norm == Normalization::ZScore);
            m.prepare(&w[..19], &mut ws);
            let (_, n) = count(|| m.classify_with_margin(w, &mut ws).unwrap());
            assert_eq!(n, 0, "prepared margin ({norm:?}) allocated {n} times");
        }
    }

    // The passive models' configuration (divide-min, 1-NN, band of half the
    // window): the pruned exact finish (last sample above the prefix's
    // minimum), its per-class distances, and the pruned bounded finish (a new
    // minimum), with the margin.
    for k in [1, 3] {
        let cfg = KnnConfig {
            k,
            dtw: DtwParams {
                radius: Some(10),
                cost: Cost::Abs,
            },
            normalization: Normalization::DivideMin,
        };
        let m = Model::fit(&x, 20, &y, classes.clone(), cfg).unwrap();
        let mut ws = m.workspace();
        let mt = if k == 1 {
            m.clone()
                .with_stage1_term(Some(Stage1Term::sorted_steps(0.25)))
                .unwrap()
        } else {
            m.clone()
        };
        let mut wst = mt.workspace();
        let mut out = vec![0.0; 6];
        for w in q.chunks_exact(20) {
            let min = w[..19].iter().copied().fold(f64::INFINITY, f64::min);
            for last in [min * 1.05, min * 0.97] {
                let mut win = w.to_vec();
                win[19] = last;
                let (ok, n) = count(|| m.prepare(&win[..19], &mut ws));
                assert!(ok);
                assert_eq!(n, 0, "prepare (divide-min, k={k}) allocated {n} times");
                let (_, n) = count(|| m.classify_with_margin(&win, &mut ws).unwrap());
                assert_eq!(
                    n, 0,
                    "prepared margin (divide-min, k={k}) allocated {n} times"
                );
                assert_eq!(ws.stats().speculative, last < min);
                let (_, n) = count(|| m.classify(&win, &mut ws).unwrap());
                assert_eq!(
                    n, 0,
                    "prepared classify (divide-min, k={k}) allocated {n} times"
                );
                // With the stage-1 term (sorted steps, `knn/steps.rs`):
                // the prepared exact and bounded finishes and the margin.
                if k == 1 {
                    let (ok, n) = count(|| mt.prepare(&win[..19], &mut wst));
                    assert!(ok);
                    assert_eq!(n, 0, "prepare (term) allocated {n} times");
                    let (_, n) = count(|| mt.classify_with_margin(&win, &mut wst).unwrap());
                    assert_eq!(n, 0, "prepared margin (term) allocated {n} times");
                    assert_eq!(wst.stats().speculative, last < min);
                    mt.prepare(&win[..19], &mut wst);
                    let (_, n) = count(|| mt.classify(&win, &mut wst).unwrap());
                    assert_eq!(n, 0, "prepared classify (term) allocated {n} times");
                    // Another prefix: no preparation holds (LB_Enhanced bounds).
                    let mut other = win.clone();
                    other[0] += 1.0;
                    let (_, n) = count(|| mt.classify(&other, &mut wst).unwrap());
                    assert!(!wst.stats().prepared);
                    assert_eq!(n, 0, "unprepared classify (term) allocated {n} times");
                    let (_, n) = count(|| mt.classify_with_margin(&other, &mut wst).unwrap());
                    assert_eq!(n, 0, "unprepared margin (term) allocated {n} times");
                }
                let (applied, n) = count(|| {
                    m.nearest_per_class_prepared(&win, &mut ws, &mut out)
                        .unwrap()
                });
                assert_eq!(applied, last > min);
                assert_eq!(
                    n, 0,
                    "prepared per-class (divide-min, k={k}) allocated {n} times"
                );
            }
        }
    }
}
