//! The two-stage 1-NN (`knn::TwoStage`) equals a brute force written here:
//! every DTW in full with `dtw::distance` in both stages, ties to the lower
//! reference index, and the side margin against the nearest reference on the
//! other side. On windows from the shipped 5-Hz model's references and on
//! synthetic data, through the plain, exhaustive, margin, prepared and batch
//! paths, for every stage-2 normalisation.

use opsel::dtw;
use opsel::knn::{AnyModel, KnnConfig, Model, Split, Stage2, TwoStage, TwoStagePrediction};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::series::{synth, Normalization};

const NORMS: [Normalization; 4] = [
    Normalization::None,
    Normalization::SubtractMin,
    Normalization::DivideMin,
    Normalization::ZScore,
];

/// (distance, index) of the nearest reference among `keep`, `norm` applied
/// to query and reference; ties to the lower index.
fn nearest(
    m: &Model,
    q: &[f64],
    norm: Normalization,
    keep: impl Fn(usize) -> bool,
) -> (f64, usize) {
    let mut qn = q.to_vec();
    norm.apply(&mut qn).unwrap();
    let mut best = (f64::INFINITY, usize::MAX);
    for i in (0..m.len()).filter(|&i| keep(i)) {
        let mut r = m.raw_reference(i).to_vec();
        norm.apply(&mut r).unwrap();
        let d = dtw::distance(&qn, &r, &m.config().dtw).unwrap();
        if d < best.0 {
            best = (d, i);
        }
    }
    best
}

struct Brute {
    class: usize,
    distance: f64,
    neighbor: usize,
    bbr: bool,
    stage1: (f64, usize),
    other_side: f64,
    margin: f64,
}

/// The rule of `research/generalisation/two_stage.py`, from scratch.
fn brute(m: &Model, q: &[f64], s2: Normalization) -> Brute {
    let side = |i: usize| {
        Mix::parse(&m.classes()[m.labels()[i] as usize])
            .unwrap()
            .bbr_present()
    };
    let n1 = m.config().normalization;
    let stage1 = nearest(m, q, n1, |_| true);
    let bbr = side(stage1.1);
    let (distance, neighbor) = nearest(m, q, s2, |i| side(i) == bbr);
    let other_side = nearest(m, q, n1, |i| side(i) != bbr).0;
    let margin = if other_side > 0.0 && other_side.is_finite() {
        (1.0 - stage1.0 / other_side).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Brute {
        class: m.labels()[neighbor] as usize,
        distance,
        neighbor,
        bbr,
        stage1,
        other_side,
        margin,
    }
}

fn check(m: &Model, t: &TwoStage, p: &TwoStagePrediction, b: &Brute, what: &str) {
    assert_eq!(
        (p.class, p.neighbor, p.bbr_present),
        (b.class, b.neighbor, b.bbr),
        "{what}"
    );
    assert_eq!(p.distance.to_bits(), b.distance.to_bits(), "{what}");
    assert_eq!(
        (p.stage1_distance.to_bits(), p.stage1_neighbor),
        (b.stage1.0.to_bits(), b.stage1.1),
        "{what}"
    );
    assert_eq!(p.stage1_class, m.labels()[b.stage1.1] as usize, "{what}");
    assert_eq!(t.class_bbr_present(p.class), p.bbr_present, "{what}");
}

/// Every path of `t` on `q` against the brute force.
fn all_paths(m: &Model, t: &TwoStage, q: &[f64], s2: Normalization, what: &str) -> Brute {
    let b = brute(m, q, s2);
    let mut ws = t.workspace();
    let p = t.classify(q, &mut ws).unwrap();
    check(m, t, &p, &b, &format!("{what} classify"));
    let p = t.classify_exhaustive(q, &mut ws).unwrap();
    check(m, t, &p, &b, &format!("{what} exhaustive"));
    let (p, other, margin) = t.classify_with_margin(q, &mut ws).unwrap();
    check(m, t, &p, &b, &format!("{what} margin"));
    assert_eq!(other.to_bits(), b.other_side.to_bits(), "{what} other side");
    assert!(
        (margin - b.margin).abs() < 1e-15,
        "{what}: {margin} vs {}",
        b.margin
    );
    // Prepared on the first w − 1 samples (exact or speculative finish per
    // normalisation), then the same answers.
    let w = q.len();
    if w > 1 {
        t.prepare(&q[..w - 1], &mut ws);
        let p = t.classify(q, &mut ws).unwrap();
        check(m, t, &p, &b, &format!("{what} prepared classify"));
        t.prepare(&q[..w - 1], &mut ws);
        let (p, other, margin) = t.classify_with_margin(q, &mut ws).unwrap();
        check(m, t, &p, &b, &format!("{what} prepared margin"));
        assert_eq!(
            other.to_bits(),
            b.other_side.to_bits(),
            "{what} prepared other side"
        );
        assert!((margin - b.margin).abs() < 1e-15, "{what} prepared margin");
    }
    b
}

fn stage2(n: Normalization) -> Stage2 {
    Stage2::new(n, Split::BbrPresent)
}

/// The shipped two-stage 5-Hz model (`models/passive-200ms-two-stage`: w = 50, radius 25,
/// divide-min, 1-NN) on a subset of its references, with a few duplicated
/// under a class of the other side (exact cross-side ties at distance 0) and
/// of the same side; queried with other references perturbed (the last sample
/// keeping the prefix's minimum, equal to it, or a new minimum) and with
/// references themselves.
#[test]
fn equals_brute_force_on_the_shipped_5hz_model() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/passive-200ms-two-stage/model.json");
    let file = opsel::model::load(&path).unwrap();
    // The shipped file is two-stage (a z-sorted k-NN stage 2, tested against
    // its brute force in knn_two_stage_combined.rs); this test rebuilds the
    // z-score 1-NN two-stage models from its stage-1 references on a subset.
    assert_eq!(
        file.stage2.map(|s| (s.normalization, s.k)),
        Some((Normalization::ZSorted, 7)),
        "the shipped model's stage 2"
    );
    let full = file.model;
    let w = full.window();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in (0..full.len()).step_by(9) {
        x.extend_from_slice(full.raw_reference(i));
        y.push(full.labels()[i]);
    }
    // Duplicates: B0-C0 (no BBR) copied as B1-C0 (BBR), B1-B1 copied as B1-C1.
    let class = |c: &str| full.classes().iter().position(|n| n == c).unwrap() as u32;
    let dup_from = y.len();
    for (i, &l) in y.clone().iter().enumerate().take(400) {
        if l == class("B0-C0") {
            x.extend_from_slice(&x[i * w..(i + 1) * w].to_vec());
            y.push(class("B1-C0"));
        } else if l == class("B1-B1") {
            x.extend_from_slice(&x[i * w..(i + 1) * w].to_vec());
            y.push(class("B1-C1"));
        }
    }
    assert!(y.len() > dup_from + 10);
    let m = Model::fit(&x, w, &y, full.classes().to_vec(), *full.config()).unwrap();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 1_000_000) as f64 / 1_000_000.0
    };
    let mut queries: Vec<Vec<f64>> = Vec::new();
    for (t, i) in (4..full.len()).step_by(151).enumerate() {
        let mut q: Vec<f64> = full
            .raw_reference(i)
            .iter()
            .map(|v| v * (1.0 + 0.02 * (rnd() - 0.5)))
            .collect();
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        q[w - 1] = match t % 3 {
            0 => min * (1.0 + 0.1 * rnd()),
            1 => min,
            _ => min * (1.0 - 0.05 * rnd()),
        };
        queries.push(q);
    }
    // References themselves: distance 0, and for the duplicated ones a tie
    // across sides (stage 1 takes the lower index, the original's side).
    queries.push(m.raw_reference(0).to_vec());
    for i in (0..dup_from)
        .filter(|&i| y[i] == class("B0-C0") || y[i] == class("B1-B1"))
        .take(3)
    {
        queries.push(m.raw_reference(i).to_vec());
    }
    let mut sides = [0usize; 2];
    for n2 in [Normalization::ZScore, Normalization::DivideMin] {
        let t = TwoStage::new(&m, stage2(n2)).unwrap();
        let mut batch = Vec::new();
        for (j, q) in queries.iter().enumerate() {
            let b = all_paths(&m, &t, q, n2, &format!("{n2:?} query {j}"));
            sides[b.bbr as usize] += 1;
            batch.push(b);
        }
        let flat: Vec<f64> = queries.concat();
        let got = t.classify_batch(&flat, 2).unwrap();
        for (p, b) in got.iter().zip(&batch) {
            assert_eq!((p.class, p.neighbor), (b.class, b.neighbor));
        }
    }
    assert!(
        sides[0] > 0 && sides[1] > 0,
        "both sides reached: {sides:?}"
    );
    // The tied duplicates: stage 1 answers the original (lower index), not
    // its copy on the other side.
    let t = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap();
    let mut ws = t.workspace();
    let i = (0..dup_from).find(|&i| y[i] == class("B0-C0")).unwrap();
    let p = t.classify(m.raw_reference(i), &mut ws).unwrap();
    assert_eq!((p.stage1_neighbor, p.stage1_distance), (i, 0.0));
    assert!(!p.bbr_present);
}

/// Synthetic data (`series::synth`), every stage-2 normalisation, several
/// bands and both costs; with duplicated references across sides and within
/// a side (ties), and a stage-2 distance that ties between two classes.
#[test]
fn equals_brute_force_on_synthetic_data() {
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    for (seed, w, radius, cost) in [
        (1u64, 20, Some(10), dtw::Cost::Abs),
        (2, 12, Some(3), dtw::Cost::Squared),
        (3, 15, None, dtw::Cost::Abs),
        (4, 7, Some(0), dtw::Cost::Abs),
    ] {
        let (mut x, mut y) = synth::dataset(&SIX_CLASSES, 12, w, seed).unwrap();
        // Reference 0 again under every other class: ties on both sides.
        let r0 = x[..w].to_vec();
        for c in 0..6 {
            if c != y[0] {
                x.extend_from_slice(&r0);
                y.push(c);
            }
        }
        let (q, _) = synth::dataset(&SIX_CLASSES, 3, w, seed + 100).unwrap();
        for n1 in [Normalization::DivideMin, Normalization::None] {
            let cfg = KnnConfig {
                k: 1,
                dtw: dtw::DtwParams { radius, cost },
                normalization: n1,
            };
            let m = Model::fit(&x, w, &y, classes.clone(), cfg).unwrap();
            for n2 in NORMS {
                let t = TwoStage::new(&m, stage2(n2)).unwrap();
                for (j, qw) in q.chunks_exact(w).chain([&r0[..]]).enumerate() {
                    all_paths(
                        &m,
                        &t,
                        qw,
                        n2,
                        &format!("seed {seed} {n1:?}/{n2:?} query {j}"),
                    );
                }
                // A window equal to the tied reference: stage 1 and stage 2
                // both take the lowest index on their side.
                let mut ws = t.workspace();
                let p = t.classify(&r0, &mut ws).unwrap();
                assert_eq!(p.stage1_neighbor, 0);
                let own_side = t.class_bbr_present(y[0] as usize);
                assert_eq!(p.bbr_present, own_side);
                assert_eq!((p.neighbor, p.class), (0, y[0] as usize));
            }
        }
    }
}

/// The prefix models of progressive probing are the two-stage model of the
/// truncated references.
#[test]
fn truncated_equals_brute_force_on_truncated_references() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 10, 20, 8).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    let t = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 2, 20, 9).unwrap();
    for len in [5, 12] {
        let tt = t.truncated(len).unwrap();
        let mt = m.truncated(len).unwrap();
        assert_eq!(tt.window(), len);
        for qw in q.chunks_exact(20) {
            all_paths(
                &mt,
                &tt,
                &qw[..len],
                Normalization::ZScore,
                &format!("prefix {len}"),
            );
        }
    }
    assert!(t.truncated(0).is_err() && t.truncated(21).is_err());
}

#[test]
fn bad_models_get_clear_errors() {
    let classes = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let x: Vec<f64> = (0..15).map(|i| 10.0 + (i % 4) as f64).collect();
    // A side with no references.
    let m = Model::fit(
        &x,
        5,
        &[0, 1, 0],
        classes(&["B0-C0", "C1-C1"]),
        KnnConfig::default(),
    )
    .unwrap();
    let e = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap_err();
    assert!(
        e.to_string()
            .contains("no reference on the side bbr-present"),
        "{e}"
    );
    let m = Model::fit(
        &x,
        5,
        &[0, 1, 0],
        classes(&["B1-C0", "B1-B1"]),
        KnnConfig::default(),
    )
    .unwrap();
    let e = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap_err();
    assert!(e.to_string().contains("bbr-absent"), "{e}");
    // A class without references is fine as long as each side has one.
    let m = Model::fit(
        &x,
        5,
        &[0, 1, 0],
        classes(&["B0-C0", "B1-C0", "B1-B1"]),
        KnnConfig::default(),
    )
    .unwrap();
    let t = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap();
    assert_eq!(t.stage2_model(1).classes(), ["B1-C0", "B1-B1"]);
    // Class names that are not mixes.
    let m = Model::fit(
        &x,
        5,
        &[0, 1, 0],
        classes(&["idle", "busy"]),
        KnnConfig::default(),
    )
    .unwrap();
    let e = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap_err();
    assert!(e.to_string().contains("\"idle\""), "{e}");
    // k > 1.
    let cfg = KnnConfig {
        k: 2,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 5, &[0, 1, 0], classes(&["B0-C0", "B1-C0"]), cfg).unwrap();
    let e = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap_err();
    assert!(e.to_string().contains("k = 2"), "{e}");
    // Bad queries.
    let m = Model::fit(
        &x,
        5,
        &[0, 1, 0],
        classes(&["B0-C0", "B1-C0"]),
        KnnConfig::default(),
    )
    .unwrap();
    let t = TwoStage::new(&m, stage2(Normalization::DivideMin)).unwrap();
    let mut ws = t.workspace();
    assert!(t
        .classify(&[1.0; 4], &mut ws)
        .unwrap_err()
        .to_string()
        .contains("4 samples"));
    let e = t
        .classify(&[1.0, f64::NAN, 1.0, 1.0, 1.0], &mut ws)
        .unwrap_err();
    assert!(e.to_string().contains("NaN"), "{e}");
    // Stage 2's normalisation fails on its own terms (divide-min of a window
    // whose minimum is 0; stage 1 has none and accepts it).
    let e = t.classify(&[0.0, 1.0, 2.0, 3.0, 4.0], &mut ws).unwrap_err();
    assert!(e.to_string().contains("divide-min"), "{e}");
    let e = TwoStage::fit(
        &x,
        5,
        &[0, 7, 0],
        classes(&["B0-C0", "B1-C0"]),
        KnnConfig::default(),
        stage2(Normalization::ZScore),
    )
    .unwrap_err();
    assert!(e.to_string().contains("label 7"), "{e}");
    let e = TwoStage::fit(
        &x,
        5,
        &[],
        classes(&["B0-C0", "B1-C0"]),
        KnnConfig::default(),
        stage2(Normalization::ZScore),
    )
    .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
}

/// `AnyModel` (what loaders classify through) answers with stage 2 for a
/// two-stage model and with the model itself otherwise.
#[test]
fn any_model_dispatches() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 10, 20, 11).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 20, &y, classes, cfg).unwrap();
    let t = TwoStage::new(&m, stage2(Normalization::ZScore)).unwrap();
    let one = AnyModel::new(m.clone(), None).unwrap();
    let two = AnyModel::new(m.clone(), Some(stage2(Normalization::ZScore))).unwrap();
    let (q, _) = synth::dataset(&SIX_CLASSES, 4, 20, 12).unwrap();
    let (mut w1, mut w2, mut wm, mut wt) = (
        one.workspace(),
        two.workspace(),
        m.workspace(),
        t.workspace(),
    );
    let mut probs = [0.0; 6];
    let mut differ = 0;
    for qw in q.chunks_exact(20) {
        assert_eq!(
            one.classify(qw, &mut w1).unwrap(),
            m.classify(qw, &mut wm).unwrap()
        );
        let p = t.classify(qw, &mut wt).unwrap();
        assert_eq!(two.classify(qw, &mut w2).unwrap(), p.prediction());
        let pp = two.class_probabilities(qw, &mut w2, &mut probs).unwrap();
        assert_eq!(pp.class, p.class);
        assert_eq!(probs.iter().sum::<f64>(), 1.0);
        assert_eq!(probs[p.class], 1.0);
        differ += (p.class != p.stage1_class) as usize;
    }
    let flat = q.clone();
    let b = two.classify_batch(&flat, 3).unwrap();
    let want: Vec<_> = t
        .classify_batch(&flat, 1)
        .unwrap()
        .iter()
        .map(|p| p.prediction())
        .collect();
    assert_eq!(b, want);
    assert!(two.classify_batch(&flat[..25], 1).is_err());
    assert!(differ > 0, "stage 2 changed no answer");
}
