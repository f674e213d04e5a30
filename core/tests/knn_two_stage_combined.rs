//! The combined k-NN stage 2 (`knn::Stage2` with k > 1 or a stage-1 weight;
//! `core/src/knn/combined.rs`) equals a brute force written here, bit for
//! bit: stage 1 by `dtw::distance` over every reference, then for every
//! reference on stage 1's side L (the L1 distance of the z-sorted windows,
//! summed in sample order) and D1 (stage 1's DTW distance), c from
//! `Stage2::combine`, the k smallest (c, index), a majority vote with ties to
//! the nearest voter. Through the plain, exhaustive, margin, prepared (exact
//! and bounded finishes) and batch paths, on random data and on windows of
//! the shipped 5-Hz model's references.

use opsel::dtw;
use opsel::knn::{
    AnyModel, D1Source, KnnConfig, Model, Split, Stage2, TwoStage, TwoStagePrediction,
};
use opsel::mix::{Mix, SIX_CLASSES};
use opsel::series::{synth, Normalization};
use proptest::prelude::*;

struct Brute {
    class: usize,
    distance: f64,
    neighbor: usize,
    votes: u32,
    bbr: bool,
    stage1: (f64, usize),
}

fn norm(v: &[f64], n: Normalization) -> Vec<f64> {
    let mut v = v.to_vec();
    n.apply(&mut v).unwrap();
    v
}

fn brute(m: &Model, q: &[f64], s2: Stage2) -> Brute {
    let side = |i: usize| {
        Mix::parse(&m.classes()[m.labels()[i] as usize])
            .unwrap()
            .bbr_present()
    };
    let n1 = m.config().normalization;
    let q1 = norm(q, n1);
    let d1 = |i: usize| dtw::distance(&q1, &norm(m.raw_reference(i), n1), &m.config().dtw).unwrap();
    // Stage 1's nearest by the path sum (the search's order: under the
    // squared cost two sums can share a square root), ties to the lower index.
    let p = m.config().dtw;
    let mut dws = dtw::Workspace::with_capacity(q.len());
    let mut stage1 = (f64::INFINITY, usize::MAX);
    for i in 0..m.len() {
        let r1 = norm(m.raw_reference(i), n1);
        let acc = dtw::accumulated(
            &q1,
            &r1,
            p.radius_or_max(),
            p.cost,
            f64::INFINITY,
            None,
            &mut dws,
        );
        if acc < stage1.0 {
            stage1 = (acc, i);
        }
    }
    let stage1 = (p.cost.finish(stage1.0), stage1.1);
    let bbr = side(stage1.1);
    let zq = norm(q, Normalization::ZSorted);
    let mut all: Vec<(f64, usize)> = (0..m.len())
        .filter(|&i| side(i) == bbr)
        .map(|i| {
            let zr = norm(m.raw_reference(i), Normalization::ZSorted);
            let mut l = 0.0;
            for (a, b) in zq.iter().zip(&zr) {
                l += (a - b).abs();
            }
            (s2.combine(l, d1(i)), i)
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let near = &all[..s2.k];
    let mut votes = vec![0u32; m.classes().len()];
    for &(_, i) in near {
        votes[m.labels()[i] as usize] += 1;
    }
    let top = *votes.iter().max().unwrap();
    let &(distance, neighbor) = near
        .iter()
        .find(|&&(_, i)| votes[m.labels()[i] as usize] == top)
        .unwrap();
    Brute {
        class: m.labels()[neighbor] as usize,
        distance,
        neighbor,
        votes: top,
        bbr,
        stage1,
    }
}

fn check(p: &TwoStagePrediction, b: &Brute, what: &str) {
    assert_eq!(
        (p.class, p.neighbor, p.bbr_present, p.votes),
        (b.class, b.neighbor, b.bbr, b.votes),
        "{what}"
    );
    assert_eq!(p.distance.to_bits(), b.distance.to_bits(), "{what}");
    assert_eq!(
        (p.stage1_distance.to_bits(), p.stage1_neighbor),
        (b.stage1.0.to_bits(), b.stage1.1),
        "{what}"
    );
}

/// Every path against the brute force; returns the D1 sources the prepared
/// paths took.
fn all_paths(m: &Model, t: &TwoStage, q: &[f64], what: &str) -> Vec<D1Source> {
    let b = brute(m, q, t.stage2());
    let mut ws = t.workspace();
    let mut sources = Vec::new();
    let p = t.classify(q, &mut ws).unwrap();
    check(&p, &b, &format!("{what} classify"));
    sources.push(ws.combined_stats().source);
    let p = t.classify_exhaustive(q, &mut ws).unwrap();
    check(&p, &b, &format!("{what} exhaustive"));
    let (p, _, _) = t.classify_with_margin(q, &mut ws).unwrap();
    check(&p, &b, &format!("{what} margin"));
    let w = q.len();
    t.prepare(&q[..w - 1], &mut ws);
    let p = t.classify(q, &mut ws).unwrap();
    check(&p, &b, &format!("{what} prepared classify"));
    sources.push(ws.combined_stats().source);
    t.prepare(&q[..w - 1], &mut ws);
    let (p, _, _) = t.classify_with_margin(q, &mut ws).unwrap();
    check(&p, &b, &format!("{what} prepared margin"));
    sources.push(ws.combined_stats().source);
    sources
}

fn combined(k: usize, a: f64) -> Stage2 {
    Stage2 {
        k,
        stage1_weight: a,
        ..Stage2::new(Normalization::ZSorted, Split::BbrPresent)
    }
}

/// Positive RTT-like windows with repeated levels (ties in both distances),
/// and reference 0 copied under other classes (exact ties in c).
fn random_model(
    seed: u64,
    n: usize,
    w: usize,
    radius: Option<usize>,
    cost: dtw::Cost,
) -> (Model, Vec<Vec<f64>>) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 1_000_000) as f64 / 1_000_000.0
    };
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..n {
        let base = 20.0 + (rnd() * 4.0).floor() * 5.0;
        for _ in 0..w {
            x.push(base + (rnd() * 6.0).floor() * 1.5);
        }
        y.push((i % 6) as u32);
    }
    let r0 = x[..w].to_vec();
    for c in [1u32, 4] {
        x.extend_from_slice(&r0);
        y.push(c);
    }
    let cfg = KnnConfig {
        k: 1,
        dtw: dtw::DtwParams { radius, cost },
        normalization: Normalization::DivideMin,
    };
    let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
    let mut queries = vec![r0];
    for t in 0..4 {
        let mut q: Vec<f64> = (0..w)
            .map(|_| 20.0 + (rnd() * 4.0).floor() * 5.0 + (rnd() * 6.0).floor() * 1.5)
            .collect();
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        // Exact finish (last >= min), equal minimum, new minimum (bounded).
        q[w - 1] = match t % 3 {
            0 => min + 3.0,
            1 => min,
            _ => min * 0.9,
        };
        queries.push(q);
    }
    (m, queries)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn combined_equals_brute_force_on_random_data(
        seed in 1u64..u64::MAX,
        k in prop::sample::select(vec![1usize, 2, 3, 5, 7]),
        a in prop::sample::select(vec![0.0f64, 0.25, 0.5, 1.0, 3.0]),
        shape in 0usize..3,
    ) {
        let (w, radius, cost) = [(12, Some(4), dtw::Cost::Abs), (9, None, dtw::Cost::Squared), (15, Some(7), dtw::Cost::Abs)][shape];
        let (m, queries) = random_model(seed, 48, w, radius, cost);
        let t = TwoStage::new(&m, combined(k, a)).unwrap();
        // Scales: fitted when the weight needs them, never otherwise.
        prop_assert_eq!(t.stage2().scales.is_some(), a > 0.0);
        for (j, q) in queries.iter().enumerate() {
            all_paths(&m, &t, q, &format!("seed {seed} k {k} a {a} shape {shape} query {j}"));
        }
        let flat = queries.concat();
        let got = t.classify_batch(&flat, 2).unwrap();
        for (p, q) in got.iter().zip(&queries) {
            let b = brute(&m, q, t.stage2());
            prop_assert_eq!((p.class, p.neighbor, p.distance.to_bits()), (b.class, b.neighbor, b.distance.to_bits()));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// The prepared paths (stage 2's walk of its prepared order after an
    /// exact finish or with weight 0; the bounded finish's lockstep DTWs)
    /// against the brute force, with the last sample forced everywhere
    /// around the prefix: a new minimum by any factor (on and between
    /// stage 1's and stage 2's guesses), the minimum itself, the previous
    /// sample, far above. k up to the side's size makes the bounded search
    /// sort past its first chunk. A window whose prefix differs from the
    /// prepared one must not use the preparation.
    #[test]
    fn prepared_paths_equal_brute_force_for_any_last_sample(
        seed in 1u64..u64::MAX,
        k in prop::sample::select(vec![1usize, 7, 13]),
        a in prop::sample::select(vec![0.0f64, 0.25, 2.0]),
        shape in 0usize..3,
        drop in prop::sample::select(vec![0.0005f64, 0.001, 0.006, 0.04, 0.2, 0.5]),
    ) {
        let (w, radius, cost) = [(12, Some(4), dtw::Cost::Abs), (9, None, dtw::Cost::Squared), (15, Some(7), dtw::Cost::Abs)][shape];
        let (m, queries) = random_model(seed, 48, w, radius, cost);
        let t = TwoStage::new(&m, combined(k, a)).unwrap();
        let mut ws = t.workspace();
        let q0 = &queries[1];
        let min = q0[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        let lasts = [min * (1.0 - drop), min, q0[w - 2], min + 40.0 * drop, min * 3.0];
        let mut sources = std::collections::HashSet::new();
        for (j, &x) in lasts.iter().enumerate() {
            let mut q = q0.clone();
            q[w - 1] = x;
            let b = brute(&m, &q, t.stage2());
            let what = format!("seed {seed} k {k} a {a} shape {shape} drop {drop} last {j}");
            t.prepare(&q[..w - 1], &mut ws);
            let (p, _, _) = t.classify_with_margin(&q, &mut ws).unwrap();
            check(&p, &b, &what);
            let st = ws.combined_stats();
            sources.insert(st.source);
            prop_assert!(st.l1 <= st.side_references, "{what}");
            // Prepared for another prefix: the preparation is not used.
            let mut other = q.clone();
            other[0] += 1.5;
            let b = brute(&m, &other, t.stage2());
            let p = t.classify(&other, &mut ws).unwrap();
            check(&p, &b, &format!("{what} other prefix"));
        }
        if a == 0.0 {
            // k = 1 with no weight is the 1-NN stage 2, no combined search.
            let want = if k == 1 { D1Source::None } else { D1Source::Unused };
            prop_assert_eq!(sources.len(), 1);
            prop_assert!(sources.contains(&want), "{sources:?}");
        } else {
            // The new minimum takes the bounded finish, the others the exact.
            prop_assert!(sources.contains(&D1Source::Bounded) && sources.contains(&D1Source::Exact), "{sources:?}");
        }
    }
}

/// Given scales (as a file stores them) are used as given, and the stats say
/// which source of D1 each path took.
#[test]
fn sources_of_stage_one_distances() {
    let (m, queries) = random_model(7, 60, 12, Some(4), dtw::Cost::Abs);
    let s2 = Stage2 {
        scales: Some([3.0, 0.7]),
        ..combined(5, 0.25)
    };
    let t = TwoStage::new(&m, s2).unwrap();
    assert_eq!(t.stage2().scales, Some([3.0, 0.7]));
    let mut seen = std::collections::HashSet::new();
    for (j, q) in queries.iter().enumerate() {
        let s = all_paths(&m, &t, q, &format!("query {j}"));
        assert_eq!(s[0], D1Source::Keogh, "unprepared");
        seen.extend(s);
    }
    for s in [D1Source::Keogh, D1Source::Exact, D1Source::Bounded] {
        assert!(seen.contains(&s), "{s:?} not exercised: {seen:?}");
    }
    // a = 0: no stage-1 distance at all, c = L.
    let t0 = TwoStage::new(&m, combined(5, 0.0)).unwrap();
    let mut ws = t0.workspace();
    let p = t0.classify(&queries[1], &mut ws).unwrap();
    assert_eq!(ws.combined_stats().source, D1Source::Unused);
    assert_eq!(ws.combined_stats().stage1_dtw, 0);
    let b = brute(&m, &queries[1], t0.stage2());
    check(&p, &b, "a = 0");
}

/// On the shipped 5-Hz model's references (`models/passive-200ms-two-stage`:
/// w = 50, radius 25, divide-min): the configuration nested
/// leave-one-condition-out picked (z-sorted, k = 7, a = 0.25) and a = 0,
/// on a subset, queried with perturbed references whose last sample keeps,
/// equals or undercuts the prefix's minimum. The bounded and unprepared
/// searches must prune: fewer stage-1 DTWs than side references.
#[test]
fn combined_equals_brute_force_on_the_shipped_5hz_references() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/passive-200ms-two-stage/model.json");
    let full = opsel::model::load(&path).unwrap().model;
    let w = full.window();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in (0..full.len()).step_by(7) {
        x.extend_from_slice(full.raw_reference(i));
        y.push(full.labels()[i]);
    }
    let m = Model::fit(&x, w, &y, full.classes().to_vec(), *full.config()).unwrap();
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 1_000_000) as f64 / 1_000_000.0
    };
    let mut queries: Vec<Vec<f64>> = Vec::new();
    for (t, i) in (3..full.len()).step_by(97).enumerate() {
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
    queries.push(m.raw_reference(0).to_vec());
    for a in [0.25, 0.0] {
        let t = TwoStage::new(&m, combined(7, a)).unwrap();
        let (mut pruned, mut searched) = (0usize, 0usize);
        let (mut walked, mut few) = (0usize, 0usize);
        let mut ws = t.workspace();
        for (j, q) in queries.iter().enumerate() {
            all_paths(&m, &t, q, &format!("a {a} query {j}"));
            // Prepared: the walk of the prepared order (exact finish or
            // weight 0) gives few references their L in full.
            t.prepare(&q[..w - 1], &mut ws);
            t.classify(q, &mut ws).unwrap();
            let st = ws.combined_stats();
            if matches!(st.source, D1Source::Exact | D1Source::Unused) {
                walked += 1;
                few += (st.l1 * 4 < st.side_references) as usize;
            }
            if a > 0.0 {
                t.classify(q, &mut ws).unwrap();
                let st = ws.combined_stats();
                searched += 1;
                pruned += (st.stage1_dtw < st.side_references) as usize;
            }
        }
        assert!(
            pruned * 2 >= searched,
            "the bounds pruned in {pruned} of {searched}"
        );
        assert!(
            walked > 0 && few * 4 >= walked * 3,
            "the prepared walk computed L for under a quarter of the side in {few} of {walked}"
        );
        let flat = queries.concat();
        let any = AnyModel::new(m.clone(), Some(t.stage2())).unwrap();
        let got = any.classify_batch(&flat, 2).unwrap();
        for (p, q) in got.iter().zip(&queries) {
            let b = brute(&m, q, t.stage2());
            assert_eq!(
                (p.class, p.neighbor, p.votes),
                (b.class, b.neighbor, b.votes)
            );
        }
    }
}

#[test]
fn bad_stage_two_fields_get_clear_errors() {
    let (m, _) = random_model(3, 24, 10, Some(3), dtw::Cost::Abs);
    let err = |s: Stage2| TwoStage::new(&m, s).expect_err("an error").to_string();
    assert!(err(combined(0, 0.0)).contains("k is 0"));
    // 13 references on each side (24 in turn over six classes, two copies).
    let e = err(combined(14, 0.0));
    assert!(e.contains("k = 14") && e.contains("13 references"), "{e}");
    assert!(TwoStage::new(&m, combined(13, 0.0)).is_ok());
    assert!(err(combined(3, -0.5)).contains("-0.5"));
    assert!(err(combined(3, f64::NAN)).contains("NaN"));
    let e = err(Stage2 {
        scales: Some([1.0, 0.0]),
        ..combined(3, 0.25)
    });
    assert!(e.contains("scales") && e.contains('0'), "{e}");
    let e = err(Stage2 {
        scales: Some([f64::INFINITY, 1.0]),
        ..combined(3, 0.25)
    });
    assert!(e.contains("inf"), "{e}");
    let e = err(Stage2 {
        k: 3,
        ..Stage2::new(Normalization::ZScore, Split::BbrPresent)
    });
    assert!(e.contains("z-sorted"), "{e}");
    // A model file must carry the scales with the weight.
    let e = TwoStage::validate(&m, combined(3, 0.25))
        .unwrap_err()
        .to_string();
    assert!(e.contains("scales is missing"), "{e}");
    assert!(TwoStage::validate(&m, TwoStage::new(&m, combined(3, 0.25)).unwrap().stage2()).is_ok());
    // Scales need references that differ: one window on both sides has
    // both medians 0.
    let r0 = m.raw_reference(0).repeat(2);
    let same = Model::fit(
        &r0,
        10,
        &[0, 1],
        vec!["B0-C0".into(), "B1-C0".into()],
        *m.config(),
    )
    .unwrap();
    let e = TwoStage::new(&same, combined(1, 0.25))
        .expect_err("an error")
        .to_string();
    assert!(e.contains("too alike"), "{e}");
}

/// The scales are the medians of the pairwise distances among evenly spaced
/// references, computed here from scratch (numpy's median).
#[test]
fn scales_are_the_pairwise_medians() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 4, 16, 21).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        dtw: dtw::DtwParams {
            radius: Some(5),
            cost: dtw::Cost::Abs,
        },
        k: 1,
    };
    let m = Model::fit(&x, 16, &y, classes, cfg).unwrap();
    let t = TwoStage::new(&m, combined(3, 0.5)).unwrap();
    let n = m.len();
    assert!(n <= opsel::knn::SCALE_SAMPLE);
    let (mut ls, mut ds) = (Vec::new(), Vec::new());
    for a in 0..n {
        for b in a + 1..n {
            let (za, zb) = (
                norm(m.raw_reference(a), Normalization::ZSorted),
                norm(m.raw_reference(b), Normalization::ZSorted),
            );
            ls.push(
                za.iter()
                    .zip(&zb)
                    .map(|(p, q)| (p - q).abs())
                    .fold(0.0, |s, v| s + v),
            );
            let (na, nb) = (
                norm(m.raw_reference(a), Normalization::DivideMin),
                norm(m.raw_reference(b), Normalization::DivideMin),
            );
            ds.push(dtw::distance(&na, &nb, &m.config().dtw).unwrap());
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let h = v.len() / 2;
        if v.len() % 2 == 1 {
            v[h]
        } else {
            (v[h - 1] + v[h]) / 2.0
        }
    };
    assert_eq!(t.stage2().scales, Some([med(&mut ls), med(&mut ds)]));
}

/// The version-3 fixture (`research/fixtures/make_two_stage_knn.py`: the
/// rule written in numpy, scales included) loads, classifies every fixture
/// window to the class numpy gave it, and equals the brute force here.
#[test]
fn the_version_3_fixture_answers_as_numpy_does() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let file = opsel::model::load(dir.join("knn_two_stage_knn.model.json")).unwrap();
    let s2 = file.stage2.unwrap();
    assert_eq!(
        (s2.normalization, s2.k, s2.stage1_weight),
        (Normalization::ZSorted, 7, 0.25)
    );
    let any = file.any_model().unwrap();
    let t = any.two_stage().unwrap();
    assert_eq!(
        t.stage2().scales,
        s2.scales,
        "the stored scales, never refitted"
    );
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("knn_two_stage_knn.json")).unwrap())
            .unwrap();
    let mut ws = t.workspace();
    for (j, c) in cases["cases"].as_array().unwrap().iter().enumerate() {
        let w: Vec<f64> = c["window"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let p = t.classify(&w, &mut ws).unwrap();
        assert_eq!(
            t.classes()[p.class],
            c["class"].as_str().unwrap(),
            "case {j}"
        );
        assert_eq!(
            t.classes()[p.stage1_class],
            c["stage1_class"].as_str().unwrap(),
            "case {j}"
        );
        all_paths(&file.model, t, &w, &format!("fixture case {j}"));
    }
}
