//! Hot paths allocate nothing (DESIGN.md): with its workspace made once, the
//! two-stage model (`knn::TwoStage`) and its OPS classifier classify, give
//! the margin and prepare without a single allocation, prepared or not, on
//! both sides of the split, for every stage-2 normalisation.

use opsel::dtw::{Cost, DtwParams};
use opsel::knn::{AnyModel, KnnConfig, Model, Split, Stage2, TwoStage};
use opsel::mix::SIX_CLASSES;
use opsel::ops::{Classifier, TwoStageClassifier};
use opsel::series::{synth, Normalization};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn two_stage_hot_paths_allocate_nothing() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 30, 20, 5).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 4, 20, 6).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        k: 1,
        dtw: DtwParams {
            radius: Some(10),
            cost: Cost::Abs,
        },
        normalization: Normalization::DivideMin,
    };
    let m = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    // Every 1-NN stage 2, then the combined k-NN stage 2 (z-sorted) with and
    // without the stage-1 term: every source of stage 1's distances (exact
    // and bounded finishes, no preparation).
    let knn = |k: usize, a: f64| Stage2 {
        k,
        stage1_weight: a,
        ..Stage2::new(Normalization::ZSorted, Split::BbrPresent)
    };
    for s2 in [
        Stage2::new(Normalization::ZScore, Split::BbrPresent),
        Stage2::new(Normalization::DivideMin, Split::BbrPresent),
        Stage2::new(Normalization::SubtractMin, Split::BbrPresent),
        Stage2::new(Normalization::None, Split::BbrPresent),
        Stage2::new(Normalization::ZSorted, Split::BbrPresent),
        knn(7, 0.25),
        knn(7, 0.0),
        knn(1, 1.0),
    ] {
        let n2 = (s2.normalization, s2.k, s2.stage1_weight);
        let t = TwoStage::new(&m, s2).unwrap();
        // The counter works: making a workspace does allocate.
        let (mut ws, n) = count(|| t.workspace());
        assert!(n > 0);
        let any = AnyModel::new(m.clone(), Some(s2)).unwrap();
        let mut aws = any.workspace();
        let mut probs = [0.0; 6];
        let mut clf = TwoStageClassifier::new(t.clone()).unwrap();
        let mut sides = [0usize; 2];
        for w in q.chunks_exact(20) {
            let min = w[..19].iter().copied().fold(f64::INFINITY, f64::min);
            // The last sample keeping the minimum (exact finish) or a new one
            // (bounded finish).
            for last in [w[19], min * 1.05, min * 0.97] {
                let mut win = w.to_vec();
                win[19] = last;
                let (p, n) = count(|| t.classify(&win, &mut ws).unwrap());
                sides[p.bbr_present as usize] += 1;
                assert_eq!(n, 0, "classify ({n2:?}) allocated {n} times");
                let (_, n) = count(|| t.classify_with_margin(&win, &mut ws).unwrap());
                assert_eq!(n, 0, "classify_with_margin ({n2:?}) allocated {n} times");
                let (ok, n) = count(|| t.prepare(&win[..19], &mut ws));
                assert!(ok);
                assert_eq!(n, 0, "prepare ({n2:?}) allocated {n} times");
                let (pp, n) = count(|| t.classify_with_margin(&win, &mut ws).unwrap());
                assert_eq!(pp.0, t.classify(&win, &mut t.workspace()).unwrap());
                assert_eq!(n, 0, "prepared margin ({n2:?}) allocated {n} times");
                t.prepare(&win[..19], &mut ws);
                let (_, n) = count(|| t.classify(&win, &mut ws).unwrap());
                assert_eq!(n, 0, "prepared classify ({n2:?}) allocated {n} times");
                let (_, n) = count(|| any.classify(&win, &mut aws).unwrap());
                assert_eq!(n, 0, "AnyModel::classify ({n2:?}) allocated {n} times");
                let (_, n) = count(|| any.class_probabilities(&win, &mut aws, &mut probs).unwrap());
                assert_eq!(
                    n, 0,
                    "AnyModel::class_probabilities ({n2:?}) allocated {n} times"
                );
                // The controller's calls: prepare, then the verdict.
                let (_, n) = count(|| clf.prepare(&win[..19]));
                assert_eq!(
                    n, 0,
                    "TwoStageClassifier::prepare ({n2:?}) allocated {n} times"
                );
                let (_, n) = count(|| clf.verdict(&win).unwrap());
                assert_eq!(
                    n, 0,
                    "TwoStageClassifier::verdict ({n2:?}) allocated {n} times"
                );
            }
        }
        assert!(
            sides[0] > 0 && sides[1] > 0,
            "both sides exercised: {sides:?}"
        );
    }
}
