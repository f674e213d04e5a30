//! The nearest DTW distance to every class for one query window: what the
//! several-cycles decision of OPS (`ops::Config::cycles`, issues #6/#7) sums
//! over the cycles of a probe (`opsel.train cycles`' "min-sum":
//! `argmin_c Σ_i min_{r ∈ R_c} DTW(q_i, r)`).
//!
//! Exact, and pruned with the same bounds the k-NN search uses (UCR Suite
//! cascade, 000 §3.5 is 1-NN DTW): LB_Enhanced of the query against every
//! reference, references visited in ascending bound order, and a cut-off per
//! class (the best distance of that class so far). A reference is skipped only
//! when its bound proves it cannot beat its own class's best; DTW abandons at
//! that cut-off with the cumulative LB_Keogh bound. The search stops once the
//! next bound exceeds every class's cut-off. Scalar code on purpose: it is
//! called once per cycle (every 20 s), and it depends only on the public DTW
//! primitives, not on the k-NN search's lane layout.

use super::prepared::Finished;
use super::{Model, Workspace};
use crate::dtw;
use crate::error::{check_finite, Error, Result};

/// Relative slack on cut-offs so rounding in a bound never prunes a reference
/// whose true distance ties the class's best (same rule as the k-NN search).
const CUTOFF_SLACK: f64 = 1e-12;

/// V of LB_Enhanced^V (Tan, Petitjean & Webb 2019), as in the k-NN search.
const ENHANCED_BANDS: usize = 4;

/// Scratch memory for [`Model::nearest_per_class`]. Create with
/// [`Model::class_workspace`]; no allocation afterwards.
#[derive(Debug, Clone, Default)]
pub struct ClassWorkspace {
    query: Vec<f64>,
    cb: Vec<f64>,
    /// (lower bound, reference index) of every reference, sorted per query.
    order: Vec<(f64, usize)>,
    /// Best accumulated (unfinished) distance per class.
    best: Vec<f64>,
    dtw: dtw::Workspace,
    stats: ClassSearchStats,
}

/// How much work the last [`Model::nearest_per_class`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassSearchStats {
    /// References in the model.
    pub references: usize,
    /// References whose DTW was started (the rest were pruned by a bound or
    /// never reached).
    pub dtw: usize,
    /// Of those, abandoned at the class cut-off.
    pub abandoned: usize,
}

impl ClassWorkspace {
    fn fit_to(&mut self, window: usize, n_refs: usize, n_classes: usize) {
        if self.query.len() != window {
            self.query.resize(window, 0.0);
            self.cb.resize(window + 1, 0.0);
        }
        if self.order.len() != n_refs {
            self.order.resize(n_refs, (0.0, 0));
        }
        if self.best.len() != n_classes {
            self.best.resize(n_classes, 0.0);
        }
        self.dtw.ensure(window);
    }

    /// Work counters of the last query.
    pub fn stats(&self) -> ClassSearchStats {
        self.stats
    }
}

impl Model {
    /// A workspace for [`Model::nearest_per_class`] sized for this model.
    pub fn class_workspace(&self) -> ClassWorkspace {
        let mut ws = ClassWorkspace::default();
        ws.fit_to(self.window, self.labels.len(), self.classes.len());
        ws
    }

    /// For one window of `window()` samples, `out[c]` = the DTW distance (in
    /// [`dtw::Cost::finish`] form, like [`super::Prediction::distance`]) to the
    /// nearest reference of class `c`, or `f64::INFINITY` for a class without
    /// references. Exact (equal to [`Model::nearest_per_class_exhaustive`]);
    /// allocation-free once `ws` came from [`Model::class_workspace`]. `k` is
    /// ignored: this is the 1-NN distance per class.
    pub fn nearest_per_class(
        &self,
        window: &[f64],
        ws: &mut ClassWorkspace,
        out: &mut [f64],
    ) -> Result<()> {
        self.per_class_query(window, ws, out)?;
        let w = self.window;
        let r = self.config.dtw.radius_or_max();
        let cost = self.config.dtw.cost;
        let n = self.labels.len();
        let q = &ws.query[..w];
        for i in 0..n {
            let (u, l) = (
                &self.upper[i * w..(i + 1) * w],
                &self.lower[i * w..(i + 1) * w],
            );
            let b = dtw::lb_enhanced(
                q,
                &self.refs[i * w..(i + 1) * w],
                r,
                ENHANCED_BANDS,
                u,
                l,
                cost,
                f64::INFINITY,
            );
            ws.order[i] = (b, i);
        }
        // In place (no allocation): ascending bound, then index.
        ws.order
            .sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        ws.best.iter_mut().for_each(|b| *b = f64::INFINITY);
        let cutoff = |best: f64| best * (1.0 + CUTOFF_SLACK) + f64::MIN_POSITIVE;
        // The largest class cut-off: once a bound exceeds it, no later
        // reference (larger bounds) can improve any class.
        let mut worst = f64::INFINITY;
        let mut stats = ClassSearchStats {
            references: n,
            ..Default::default()
        };
        for o in 0..n {
            let (b, i) = ws.order[o];
            if b > worst {
                break;
            }
            let c = self.labels[i] as usize;
            let cut = cutoff(ws.best[c]);
            if b > cut {
                continue;
            }
            let s = &self.refs[i * w..(i + 1) * w];
            let (u, l) = (
                &self.upper[i * w..(i + 1) * w],
                &self.lower[i * w..(i + 1) * w],
            );
            // UCR Suite cumulative LB_Keogh: cb[j] bounds the cost of rows j..w.
            ws.cb[w] = 0.0;
            for j in (0..w).rev() {
                ws.cb[j] = ws.cb[j + 1] + dtw::gap(q[j], u[j], l[j], cost);
            }
            stats.dtw += 1;
            let d = dtw::accumulated(q, s, r, cost, cut, Some(&ws.cb[..=w]), &mut ws.dtw);
            if d.is_infinite() {
                stats.abandoned += 1;
                continue;
            }
            if d < ws.best[c] {
                ws.best[c] = d;
                if ws.best.iter().all(|v| v.is_finite()) {
                    worst = ws.best.iter().copied().map(cutoff).fold(0.0, f64::max);
                }
            }
        }
        ws.stats = stats;
        for (o, &b) in out.iter_mut().zip(&ws.best) {
            *o = if b.is_finite() { cost.finish(b) } else { b };
        }
        Ok(())
    }

    /// [`Model::nearest_per_class`] without any pruning: every DTW in full.
    /// The reference answer (tests).
    pub fn nearest_per_class_exhaustive(
        &self,
        window: &[f64],
        ws: &mut ClassWorkspace,
        out: &mut [f64],
    ) -> Result<()> {
        self.per_class_query(window, ws, out)?;
        let w = self.window;
        let r = self.config.dtw.radius_or_max();
        let cost = self.config.dtw.cost;
        ws.best.iter_mut().for_each(|b| *b = f64::INFINITY);
        for i in 0..self.labels.len() {
            let d = dtw::accumulated(
                &ws.query[..w],
                &self.refs[i * w..(i + 1) * w],
                r,
                cost,
                f64::INFINITY,
                None,
                &mut ws.dtw,
            );
            let c = self.labels[i] as usize;
            if d < ws.best[c] {
                ws.best[c] = d;
            }
        }
        ws.stats = ClassSearchStats {
            references: self.labels.len(),
            dtw: self.labels.len(),
            abandoned: 0,
        };
        for (o, &b) in out.iter_mut().zip(&ws.best) {
            *o = if b.is_finite() { cost.finish(b) } else { b };
        }
        Ok(())
    }

    /// [`Model::nearest_per_class`] through a preparation made on `ws` by
    /// [`Model::prepare`] for this window's first w − 1 samples: when its
    /// finish is exact (`none` normalisation, or a last sample that is not a
    /// new minimum under the min norms), every reference's distance costs one
    /// programme row and the per-class minimum is a scan: the same distances,
    /// bit for bit (`prepared_per_class_equals_the_search`). Returns
    /// `Ok(false)`, leaving `out` untouched, when the preparation does not
    /// apply (none, another prefix, z-score, a new minimum): run
    /// [`Model::nearest_per_class`] then. This is what keeps the
    /// several-windows decision of OPS (`ops::Config::cycles`, margin-gated
    /// probing) on the fast path of the one-window decision.
    pub fn nearest_per_class_prepared(
        &self,
        window: &[f64],
        ws: &mut Workspace,
        out: &mut [f64],
    ) -> Result<bool> {
        if out.len() != self.classes.len() {
            return Err(Error::invalid(format!(
                "per-class distance buffer has {} slots, the model has {} classes",
                out.len(),
                self.classes.len()
            )));
        }
        if self.term.is_some() {
            return Err(Error::invalid(
                "per-class distances are DTW distances; this model ranks its 1-NN by a stage-1 term (C1), so use classify or classify_with_margin",
            ));
        }
        if !self.prepared_exactly_for(window, ws) {
            return Ok(false);
        }
        self.prepare_query(window, ws)?;
        if self.finish_prepared(window, ws, true) != Finished::Exact {
            return Ok(false);
        }
        // The pruned finish's per-class nearest (`Model::finish_class_best`).
        for (o, &(d, _)) in out.iter_mut().zip(&ws.class_best) {
            *o = d;
        }
        let cost = self.config.dtw.cost;
        out.iter_mut()
            .filter(|o| o.is_finite())
            .for_each(|o| *o = cost.finish(*o));
        Ok(true)
    }

    /// Validate, size the workspace, normalise the query into it.
    fn per_class_query(&self, window: &[f64], ws: &mut ClassWorkspace, out: &[f64]) -> Result<()> {
        if self.term.is_some() {
            // The several-cycles min-sum adds DTW distances per class; C1 is
            // not one, and a sum of C1 would be a rule nobody measured.
            return Err(Error::invalid(
                "per-class distances are DTW distances; this model ranks its 1-NN by a stage-1 term (C1), so use classify or classify_with_margin",
            ));
        }
        if window.len() != self.window {
            return Err(Error::invalid(format!(
                "window has {} samples but the model was trained on windows of {}",
                window.len(),
                self.window
            )));
        }
        if out.len() != self.classes.len() {
            return Err(Error::invalid(format!(
                "per-class distance buffer has {} slots, the model has {} classes",
                out.len(),
                self.classes.len()
            )));
        }
        check_finite("window", window)?;
        ws.fit_to(self.window, self.labels.len(), self.classes.len());
        ws.query[..self.window].copy_from_slice(window);
        self.config
            .normalization
            .apply(&mut ws.query[..self.window])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtw::{Cost, DtwParams};
    use crate::knn::KnnConfig;
    use crate::mix::SIX_CLASSES;
    use crate::series::{synth, Normalization};
    use proptest::prelude::*;

    fn brute(m: &Model, q: &[f64]) -> Vec<f64> {
        // Independent of the workspace code: normalise and run dtw::distance.
        let mut qn = q.to_vec();
        m.config.normalization.apply(&mut qn).unwrap();
        let mut best = vec![f64::INFINITY; m.classes().len()];
        for i in 0..m.len() {
            let d = dtw::distance(&qn, m.reference(i), &m.config.dtw).unwrap();
            let c = m.labels()[i] as usize;
            best[c] = best[c].min(d);
        }
        best
    }

    #[test]
    fn hand_example() {
        // Class a: [0,0,0]; class b: [10,10,10] and [9,9,9]; class c: none.
        let x = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 9.0, 9.0, 9.0];
        let m = Model::fit(
            &x,
            3,
            &[0, 1, 1],
            vec!["a".into(), "b".into(), "c".into()],
            KnnConfig::default(),
        )
        .unwrap();
        let mut ws = m.class_workspace();
        let mut out = [0.0; 3];
        m.nearest_per_class(&[9.0, 10.0, 11.0], &mut ws, &mut out)
            .unwrap();
        assert_eq!(out[0], 30.0);
        assert_eq!(out[1], 2.0); // [10,10,10]: 1 + 0 + 1
        assert_eq!(out[2], f64::INFINITY);
        assert!(m.nearest_per_class(&[1.0, 2.0], &mut ws, &mut out).is_err());
        assert!(m
            .nearest_per_class(&[1.0, f64::NAN, 2.0], &mut ws, &mut out)
            .is_err());
        assert!(m
            .nearest_per_class(&[1.0, 2.0, 3.0], &mut ws, &mut out[..2])
            .is_err());
    }

    #[test]
    fn prunes_on_separated_classes() {
        let (x, y) = synth::dataset(&SIX_CLASSES, 40, 20, 5).unwrap();
        let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
        let m = Model::fit(&x, 20, &y, classes, KnnConfig::default()).unwrap();
        let mut ws = m.class_workspace();
        let mut out = [0.0; 6];
        let q = synth::rtt_series(&crate::mix::Mix::parse("B1-C1").unwrap(), 20, 99);
        m.nearest_per_class(&q, &mut ws, &mut out).unwrap();
        let s = ws.stats();
        assert_eq!(s.references, 240);
        assert!(s.dtw < 240, "no pruning at all: {s:?}");
        assert_eq!(out.to_vec(), brute(&m, &q));
    }

    const NORMS: [Normalization; 4] = [
        Normalization::None,
        Normalization::SubtractMin,
        Normalization::DivideMin,
        Normalization::ZScore,
    ];

    /// Uniform [0, 1) draws from splitmix64 (reproducible from the proptest seed).
    fn splitmix(mut s: u64) -> impl FnMut() -> f64 {
        move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// A 1-NN model on positive RTT-like values with repeated levels (ties happen).
    fn random_model(
        next: &mut impl FnMut() -> f64,
        w: usize,
        n: usize,
        n_classes: usize,
        radius: Option<usize>,
        sq: bool,
        normalization: Normalization,
    ) -> Model {
        let x: Vec<f64> = (0..n * w)
            .map(|_| 50.0 + (next() * 8.0).floor() * 2.5)
            .collect();
        let labels: Vec<u32> = (0..n).map(|_| (next() * n_classes as f64) as u32).collect();
        let classes = (0..n_classes).map(|c| format!("c{c}")).collect();
        let config = KnnConfig {
            k: 1,
            dtw: DtwParams {
                radius,
                cost: if sq { Cost::Squared } else { Cost::Abs },
            },
            normalization,
        };
        Model::fit(&x, w, &labels, classes, config).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
        /// Pruned == exhaustive == brute force (bit for bit: live DTW cells
        /// are computed by the same operations), for every normalisation,
        /// radius, cost, class layout.
        #[test]
        fn equals_brute_force(
            seed in any::<u64>(),
            w in 1usize..24,
            n in 1usize..40,
            n_classes in 1usize..5,
            radius in prop::option::of(0usize..12),
            sq in any::<bool>(),
            norm in 0usize..4,
        ) {
            let mut next = splitmix(seed);
            let m = random_model(&mut next, w, n, n_classes, radius, sq, NORMS[norm]);
            let mut ws = m.class_workspace();
            let mut a = vec![0.0; n_classes];
            let mut b = vec![0.0; n_classes];
            for _ in 0..3 {
                let q: Vec<f64> = (0..w).map(|_| 50.0 + (next() * 8.0).floor() * 2.5).collect();
                m.nearest_per_class(&q, &mut ws, &mut a).unwrap();
                m.nearest_per_class_exhaustive(&q, &mut ws, &mut b).unwrap();
                prop_assert_eq!(&a, &b);
                prop_assert_eq!(&a, &brute(&m, &q));
                // The k-NN search agrees on the overall nearest distance.
                let mut kws = m.workspace();
                let p = m.classify_exhaustive(&q, &mut kws).unwrap();
                let min = a.iter().copied().fold(f64::INFINITY, f64::min);
                prop_assert_eq!(p.distance, min);
            }
        }

        /// Through a preparation: bit-identical to the search whenever it
        /// applies (always for `none`; not for z-score, a new minimum or a
        /// prefix other than the prepared one, which must return false and
        /// leave the caller's buffer as it was).
        #[test]
        fn prepared_per_class_equals_the_search(
            seed in any::<u64>(),
            w in 2usize..24,
            n in 1usize..40,
            n_classes in 1usize..5,
            radius in prop::option::of(0usize..12),
            sq in any::<bool>(),
            norm in 0usize..4,
        ) {
            let mut next = splitmix(seed);
            let normalization = NORMS[norm];
            let m = random_model(&mut next, w, n, n_classes, radius, sq, normalization);
            let mut cws = m.class_workspace();
            let mut kws = m.workspace();
            let mut want = vec![0.0; n_classes];
            let mut got = vec![0.0; n_classes];
            for _ in 0..4 {
                // Last samples below the prefix's levels sometimes: new minimums.
                let mut q: Vec<f64> = (0..w).map(|_| 50.0 + (next() * 8.0).floor() * 2.5).collect();
                q[w - 1] = 45.0 + (next() * 12.0).floor() * 2.5;
                m.nearest_per_class(&q, &mut cws, &mut want).unwrap();
                prop_assert!(m.prepare(&q[..w - 1], &mut kws));
                got.iter_mut().for_each(|g| *g = -1.0);
                let used = m.nearest_per_class_prepared(&q, &mut kws, &mut got).unwrap();
                let min = q[..w - 1].iter().copied().fold(f64::INFINITY, f64::min);
                let exact = match normalization {
                    Normalization::None => true,
                    Normalization::ZScore => false,
                    _ => q[w - 1] >= min,
                };
                prop_assert_eq!(used, exact);
                if used {
                    prop_assert_eq!(&got, &want);
                } else {
                    prop_assert!(got.iter().all(|&g| g == -1.0));
                }
                // Another window than the prepared one never uses it.
                let mut other = q.clone();
                other[0] += 2.5;
                prop_assert!(!m.nearest_per_class_prepared(&other, &mut kws, &mut got).unwrap());
            }
        }
    }

    #[test]
    fn prepared_per_class_checks_its_buffer() {
        let (x, y) = synth::dataset(&SIX_CLASSES, 5, 20, 5).unwrap();
        let classes = SIX_CLASSES.iter().map(|s| s.to_string()).collect();
        let m = Model::fit(&x, 20, &y, classes, KnnConfig::default()).unwrap();
        let mut ws = m.workspace();
        let q = synth::rtt_series(&crate::mix::Mix::parse("B1-C1").unwrap(), 20, 99);
        assert!(m.prepare(&q[..19], &mut ws));
        assert!(m
            .nearest_per_class_prepared(&q, &mut ws, &mut [0.0; 5])
            .is_err());
        let mut out = [0.0; 6];
        assert!(m.nearest_per_class_prepared(&q, &mut ws, &mut out).unwrap());
        let mut want = [0.0; 6];
        m.nearest_per_class(&q, &mut m.class_workspace(), &mut want)
            .unwrap();
        assert_eq!(out, want);
    }
}
