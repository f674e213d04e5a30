use super::*;
use crate::dtw::{Cost, DtwParams};
use crate::knn::combined::median;
use crate::knn::{KnnConfig, Split, Stage2, TwoStage};
use crate::mix::SIX_CLASSES;
use crate::series::{synth, Normalization};
use proptest::prelude::*;

/// The brute force written out independently of the search: C1 of every
/// reference, the argmin (ties to the lower index) and each class's smallest.
fn brute(m: &Model, q: &[f64]) -> ((f64, usize), Vec<(f64, usize)>) {
    let t = m.stage1_term().unwrap();
    let w = m.window();
    let cfg = *m.config();
    let mut qn = q.to_vec();
    cfg.normalization.apply(&mut qn).unwrap();
    let mut fq = vec![0.0; w - 1];
    sorted_steps(q, &mut fq);
    let mut dws = dtw::Workspace::with_capacity(w);
    let mut best = (f64::INFINITY, usize::MAX);
    let mut per = vec![(f64::INFINITY, usize::MAX); m.classes().len()];
    for j in 0..m.len() {
        let acc = dtw::accumulated(
            &qn,
            m.reference(j),
            cfg.dtw.radius_or_max(),
            cfg.dtw.cost,
            f64::INFINITY,
            None,
            &mut dws,
        );
        let f: f64 = fq
            .iter()
            .zip(m.steps_row(j))
            .fold(0.0, |s, (a, b)| s + (a - b).abs());
        let c = t.combine(cfg.dtw.cost.finish(acc), f);
        if c < best.0 {
            best = (c, j);
        }
        let p = &mut per[m.labels()[j] as usize];
        if c < p.0 {
            *p = (c, j);
        }
    }
    (best, per)
}

fn check(m: &Model, q: &[f64], ws: &mut Workspace) -> Result<()> {
    let ((c, j), per) = brute(m, q);
    let class = m.labels()[j] as usize;
    let p = m.classify(q, ws)?;
    assert_eq!((p.neighbor, p.class), (j, class));
    assert_eq!(p.distance.to_bits(), c.to_bits());
    let e = m.classify_exhaustive(q, ws)?;
    assert_eq!(e, p);
    let (pm, other, margin) = m.classify_with_margin(q, ws)?;
    assert_eq!(pm, p);
    let want = per
        .iter()
        .enumerate()
        .filter(|&(k, b)| k != class && b.1 != usize::MAX)
        .map(|(_, b)| b.0)
        .fold(f64::INFINITY, f64::min);
    if m.labels().iter().any(|&l| l as usize != class) {
        assert_eq!(other.to_bits(), want.to_bits());
        let want_m = if want > 0.0 && want.is_finite() {
            (1.0 - c / want).clamp(0.0, 1.0)
        } else {
            0.0
        };
        assert_eq!(margin.to_bits(), want_m.to_bits());
    }
    Ok(())
}

/// A query near reference `i`: scaled noise, last sample at `last` times
/// the prefix minimum (a new minimum below 1: the bounded finish), or
/// unchanged with `last` 0.
fn near(m: &Model, i: usize, seed: u64, noise: f64, last: f64) -> Vec<f64> {
    let mut s = seed | 1;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 1_000_000) as f64 / 1_000_000.0
    };
    let w = m.window();
    let mut q: Vec<f64> = m
        .raw_reference(i)
        .iter()
        .map(|v| v * (1.0 + noise * (rnd() - 0.5)))
        .collect();
    if last > 0.0 && w > 1 {
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        q[w - 1] = min * last;
    }
    q
}

#[test]
fn sorted_steps_are_numpy_s() {
    // np.sort(np.diff(x) / max(x.std(), 1e-9)) for x = [1, 3, 2, 6].
    let x = [1.0, 3.0, 2.0, 6.0];
    let mut out = [0.0; 3];
    sorted_steps(&x, &mut out);
    let sd = (((1.0f64 - 3.0).powi(2) + 0.0 + 1.0 + 9.0) / 4.0).sqrt();
    assert_eq!(out, [-1.0 / sd, 2.0 / sd, 4.0 / sd]);
    // A flat window: steps of 0 over the 1e-9 floor, no NaN.
    let mut out = [1.0; 2];
    sorted_steps(&[5.0, 5.0, 5.0], &mut out);
    assert_eq!(out, [0.0, 0.0]);
}

#[test]
fn weight_zero_is_the_plain_model_and_bad_terms_are_refused() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 6, 12, 3).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let m = Model::fit(&x, 12, &y, classes.clone(), cfg).unwrap();
    let z = m
        .clone()
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.0)))
        .unwrap();
    assert!(z.stage1_term().is_none());
    let (mut a, mut b) = (m.workspace(), z.workspace());
    for q in x.chunks_exact(12).skip(1).step_by(5) {
        let q: Vec<f64> = q.iter().map(|v| v * 1.01 + 0.3).collect();
        assert_eq!(
            m.classify_with_margin(&q, &mut a).unwrap(),
            z.classify_with_margin(&q, &mut b).unwrap()
        );
    }
    for b in [-0.1, f64::NAN, f64::INFINITY] {
        let e = m
            .clone()
            .with_stage1_term(Some(Stage1Term::sorted_steps(b)))
            .unwrap_err();
        assert!(e.to_string().contains("stage1_term.weight"), "{e}");
    }
    let bad = Stage1Term {
        scales: Some([1.0, 0.0]),
        ..Stage1Term::sorted_steps(0.25)
    };
    assert!(m
        .clone()
        .with_stage1_term(Some(bad))
        .unwrap_err()
        .to_string()
        .contains("scales"));
    let k3 = Model::fit(&x, 12, &y, classes, KnnConfig { k: 3, ..cfg }).unwrap();
    assert!(k3
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.25)))
        .unwrap_err()
        .to_string()
        .contains("k = 3"));
    // Per-class DTW distances are refused with the term.
    let t = m
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.25)))
        .unwrap();
    let mut cws = t.class_workspace();
    let mut out = vec![0.0; 6];
    assert!(t.nearest_per_class(&x[..12], &mut cws, &mut out).is_err());
}

#[test]
fn scales_are_the_pairwise_medians() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 3, 10, 9).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let m = Model::fit(&x, 10, &y, classes, KnnConfig::default())
        .unwrap()
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.25)))
        .unwrap();
    let [s1, sf] = m.stage1_term().unwrap().scales.unwrap();
    let n = m.len();
    let (mut ds, mut fs) = (vec![], vec![]);
    let mut dws = dtw::Workspace::with_capacity(10);
    for a in 0..n {
        for b in a + 1..n {
            ds.push(dtw::accumulated(
                m.reference(a),
                m.reference(b),
                10,
                Cost::Abs,
                f64::INFINITY,
                None,
                &mut dws,
            ));
            fs.push(l1(m.steps_row(a), m.steps_row(b)));
        }
    }
    assert_eq!(s1, median(&mut ds));
    assert_eq!(sf, median(&mut fs));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Every path (unprepared, the exact and the bounded prepared finishes,
    /// the margin) returns the brute force's argmin of C1 bit for bit, for
    /// random windows, normalisations, bands, costs and weights (a large
    /// weight makes F decide, the bounds of D1 then prune little).
    #[test]
    fn term_search_equals_brute_force(seed in any::<u64>(), w in 2usize..24, r in prop::option::of(0usize..10),
                                      sq in any::<bool>(), norm in 0usize..4, b in prop::sample::select(vec![0.05, 0.25, 1.0, 8.0]),
                                      dup in any::<bool>()) {
        let normalization = [Normalization::None, Normalization::SubtractMin, Normalization::DivideMin, Normalization::ZScore][norm];
        let (mut x, mut y) = synth::dataset(&SIX_CLASSES, 5, w, seed).unwrap();
        if dup {
            // Duplicates under other labels: exact ties across classes.
            for i in [0usize, 7, 13] {
                let r = x[i * w..(i + 1) * w].to_vec();
                x.extend_from_slice(&r);
                y.push((y[i] + 1) % 6);
            }
        }
        let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
        let cfg = KnnConfig { k: 1, dtw: DtwParams { radius: r, cost: if sq { Cost::Squared } else { Cost::Abs } }, normalization };
        let m = Model::fit(&x, w, &y, classes, cfg).unwrap();
        // Short windows can have a median F of 0 (the fit refuses it): then given scales.
        let m = match m.clone().with_stage1_term(Some(Stage1Term::sorted_steps(b))) {
            Ok(m) => m,
            Err(_) => m.with_stage1_term(Some(Stage1Term { scales: Some([1.5, 0.5]), ..Stage1Term::sorted_steps(b) })).unwrap(),
        };
        let mut ws = m.workspace();
        for (t, i) in (0..m.len()).step_by(3).enumerate() {
            let last = [0.0, 1.05, 1.0, 0.97][t % 4];
            let q = if t % 5 == 4 { m.raw_reference(i).to_vec() } else { near(&m, i, seed ^ t as u64, 0.05, last) };
            check(&m, &q, &mut ws).unwrap();
            if m.prepare(&q[..w - 1], &mut ws) {
                check(&m, &q, &mut ws).unwrap();
            }
        }
    }
}

/// The shipped 5-Hz model's references (w = 50, band 25, divide-min) with
/// the term at the picked weight, a third of them with duplicates under
/// other labels, queried near other references through every path.
#[test]
fn term_equals_brute_force_on_the_shipped_5hz_references() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/passive-200ms/model.json");
    let full = crate::model::load(&path).unwrap().model;
    let w = full.window();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in (0..full.len()).step_by(3) {
        x.extend_from_slice(full.raw_reference(i));
        y.push(full.labels()[i]);
    }
    for i in (0..full.len()).step_by(97) {
        x.extend_from_slice(full.raw_reference(i));
        y.push((full.labels()[i] + 1) % full.classes().len() as u32);
    }
    let cfg = KnnConfig {
        k: 1,
        ..*full.config()
    };
    let m = Model::fit(&x, w, &y, full.classes().to_vec(), cfg)
        .unwrap()
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.25)))
        .unwrap();
    let mut ws = m.workspace();
    let mut seen = [0usize; 3];
    for (t, i) in (1..full.len()).step_by(29).enumerate() {
        let mut q = full.raw_reference(i).to_vec();
        let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
        q[w - 1] = match t % 4 {
            0 => min * 1.03,
            1 => min,
            2 => min * 0.98,
            _ => q[w - 1],
        };
        check(&m, &q, &mut ws).unwrap();
        assert!(m.prepare(&q[..w - 1], &mut ws));
        check(&m, &q, &mut ws).unwrap();
        m.prepare(&q[..w - 1], &mut ws);
        m.classify(&q, &mut ws).unwrap();
        let s = ws.stats();
        seen[if !s.prepared {
            0
        } else if s.speculative {
            2
        } else {
            1
        }] += 1;
        // The bounds prune: far fewer DTWs than references.
        assert!(s.full_dtw + s.abandoned < m.len() / 2, "{s:?}");
    }
    let q = m.raw_reference(m.len() - 1).to_vec(); // a duplicate: ties across classes
    check(&m, &q, &mut ws).unwrap();
    assert!(seen[1] > 0 && seen[2] > 0, "{seen:?}");
}

/// Stage 1 of a two-stage model with the term: its side, neighbour and
/// margin are the term's argmin, prepared or not; stage 2 is unchanged.
#[test]
fn two_stage_stage1_reads_the_term() {
    let (x, y) = synth::dataset(&SIX_CLASSES, 8, 16, 21).unwrap();
    let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
    let cfg = KnnConfig {
        normalization: Normalization::DivideMin,
        ..KnnConfig::default()
    };
    let one = Model::fit(&x, 16, &y, classes, cfg)
        .unwrap()
        .with_stage1_term(Some(Stage1Term::sorted_steps(0.5)))
        .unwrap();
    let plain = TwoStage::new(
        &Model::fit(&x, 16, &y, one.classes().to_vec(), cfg).unwrap(),
        Stage2::default(),
    )
    .unwrap();
    for st in [
        Stage2::default(),
        Stage2 {
            k: 5,
            stage1_weight: 0.25,
            ..Stage2::new(Normalization::ZSorted, Split::BbrPresent)
        },
    ] {
        let two = TwoStage::new(&one, st).unwrap();
        assert_eq!(
            two.stage1_term().unwrap().scales,
            one.stage1_term().unwrap().scales
        );
        let s1 = two.stage1_model();
        let mut ws = two.workspace();
        let mut pws = plain.workspace();
        for i in (0..one.len()).step_by(4) {
            let q = near(&one, i, i as u64 + 5, 0.1, [0.0, 1.02, 0.97][i % 3]);
            let ((c, j), _) = brute(s1, &q);
            let e = two.classify_exhaustive(&q, &mut ws).unwrap();
            for prepared in [false, true] {
                if prepared {
                    two.prepare(&q[..15], &mut ws);
                }
                let p = two.classify(&q, &mut ws).unwrap();
                assert_eq!(p, e);
                assert_eq!(
                    (p.stage1_neighbor, p.stage1_distance.to_bits()),
                    (j, c.to_bits())
                );
                assert_eq!(
                    p.bbr_present,
                    two.class_bbr_present(one.labels()[j] as usize)
                );
                if prepared {
                    two.prepare(&q[..15], &mut ws);
                }
                let (pm, _, _) = two.classify_with_margin(&q, &mut ws).unwrap();
                assert_eq!(pm, e);
            }
            // Stage 2 given the same side is the plain model's stage 2.
            let pp = plain.classify(&q, &mut pws).unwrap();
            if pp.bbr_present == e.bbr_present && st == Stage2::default() {
                assert_eq!(pp.class, e.class);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// The bound of C1 the pruned searches skip on never exceeds the C1 the
    /// search computes: for every reference, with the block sums as stored
    /// (single precision) and F and D1 as computed, across window lengths
    /// (blocks of one step up to several), weights, query scales (a near-
    /// constant window has huge steps) and D1 from 0 up.
    #[test]
    fn c1_bound_never_exceeds_c1(seed in any::<u64>(), w in 2usize..64, b in prop::sample::select(vec![0.05, 0.25, 1.0, 8.0]),
                                 scale in prop::sample::select(vec![1e-6, 1.0, 1e6]), d1 in prop::sample::select(vec![0.0, 1e-3, 1.0, 40.0])) {
        let (x, y) = synth::dataset(&SIX_CLASSES, 3, w, seed).unwrap();
        let classes: Vec<String> = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
        let cfg = KnnConfig { k: 1, dtw: DtwParams { radius: None, cost: Cost::Abs }, normalization: Normalization::None };
        let m = Model::fit(&x, w, &y, classes, cfg).unwrap()
            .with_stage1_term(Some(Stage1Term { scales: Some([1.7, 0.6]), ..Stage1Term::sorted_steps(b) })).unwrap();
        let t = m.stage1_term().unwrap();
        let f = w - 1;
        let nb = n_blocks(f);
        let bound = C1Lower::new(&t, f, m.steps_blocks_err);
        // A query: another reference's window, rescaled and perturbed.
        let mut q: Vec<f64> = m.raw_reference((seed as usize) % m.len()).iter().map(|v| v * scale).collect();
        q[w / 2] += scale * 0.3;
        let mut sq = vec![0.0; f];
        sorted_steps(&q, &mut sq);
        let mut qb = vec![0.0; nb];
        block_sums(&sq, &mut qb);
        for j in 0..m.len() {
            let fj = l1(&sq, m.steps_row(j));
            let rows = &m.steps_blocks[(j / LANES) * nb..(j / LANES + 1) * nb];
            let a: f64 = qb.iter().zip(rows).map(|(q, r)| (q - r[j % LANES] as f64).abs()).sum();
            // F's own bound (weight 1, unit scales) and C1's.
            let unit = C1Lower::new(&Stage1Term { scales: Some([1.0, 1.0]), ..Stage1Term::sorted_steps(1.0) }, f, m.steps_blocks_err);
            prop_assert!(unit.lower(0.0, a) <= fj, "F bound {} > F {} (j {})", unit.lower(0.0, a), fj, j);
            let lo = bound.lower(d1, a);
            let c1 = t.combine(d1, fj);
            prop_assert!(lo <= c1, "C1 bound {} > C1 {} (j {})", lo, c1, j);
        }
    }
}
