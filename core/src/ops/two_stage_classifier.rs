//! The two-stage DTW 1-NN model ([`TwoStage`]: 000 §3.5's 1-NN decides the
//! side of BBR present, a second 1-NN with another normalisation picks the
//! mix on that side; our extension) as the controller's [`Classifier`].

use super::{Classified, Classifier, PrefixEnsemble, Verdict};
use crate::error::Result;
use crate::knn::{TwoStage, TwoStageWorkspace};
use crate::mix::Mix;

/// A two-stage model with its workspace and its class labels parsed as mixes.
///
/// Class: stage 2's (its 1-NN, or the vote of its combined k-NN). Confidence:
/// stage 1's side margin `1 − d_nearest / d_nearest_on_the_other_side`
/// ([`TwoStage::classify_with_margin`] says why the side and not the class),
/// whatever stage 2's vote share. Distance: stage 2's, to the reference whose
/// class is reported (the combined distance of the nearest voter of the
/// winning class for a k-NN stage 2; [`crate::knn::TwoStagePrediction::distance`]).
///
/// Per-class distances (`Config::cycles` > 1) are not supported: the
/// controller's min-sum adds one distance per class over the windows, and a
/// two-stage decision has no such distance (stage 2's distances exist only
/// on the side stage 1 chose, in another normalisation). The controller
/// refuses `cycles` > 1 with this classifier at creation.
pub struct TwoStageClassifier {
    model: TwoStage,
    ws: TwoStageWorkspace,
    mixes: Vec<Mix>,
}

impl TwoStageClassifier {
    /// Wrap a model; every class name must parse as a mix (the split already
    /// requires it).
    pub fn new(model: TwoStage) -> Result<Self> {
        let mixes = model
            .classes()
            .iter()
            .map(|c| Mix::parse(c))
            .collect::<Result<Vec<_>>>()?;
        let ws = model.workspace();
        Ok(Self { model, ws, mixes })
    }

    /// A classifier that can also judge prefixes of `lens` samples
    /// (progressive probing, 000 §6): the same references truncated to each
    /// length, in both stages.
    pub fn progressive(
        model: TwoStage,
        lens: &[usize],
    ) -> Result<PrefixEnsemble<TwoStageClassifier>> {
        let prefixes = lens
            .iter()
            .map(|&l| TwoStageClassifier::new(model.truncated(l)?))
            .collect::<Result<Vec<_>>>()?;
        PrefixEnsemble::new(TwoStageClassifier::new(model)?, prefixes)
    }

    /// The wrapped model.
    pub fn model(&self) -> &TwoStage {
        &self.model
    }
}

impl Classifier for TwoStageClassifier {
    fn window_len(&self) -> usize {
        self.model.window()
    }

    fn classes(&self) -> &[Mix] {
        &self.mixes
    }

    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        Ok(self.verdict(window)?.classified(&self.mixes))
    }

    /// Allocation-free (the probe gate's checks).
    fn verdict(&mut self, window: &[f64]) -> Result<Verdict> {
        let (p, _, margin) = self.model.classify_with_margin(window, &mut self.ws)?;
        Ok(Verdict {
            class_index: p.class,
            confidence: margin,
            distance: p.distance,
        })
    }

    /// Prepares stage 1 and both stage-2 models ([`TwoStage::prepare`]).
    fn prepare(&mut self, partial: &[f64]) {
        self.model.prepare(partial, &mut self.ws);
    }

    // `class_distances` and `supports_class_distances` keep the trait's
    // defaults (`None`, `false`): not supported (type docs).
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn::{KnnConfig, Model, Split, Stage2};
    use crate::mix::SIX_CLASSES;
    use crate::ops::{Config, Controller, Event, Output, Stump};
    use crate::series::{synth, Normalization};

    fn model() -> TwoStage {
        let (x, y) = synth::dataset(&SIX_CLASSES, 30, 20, 3).unwrap();
        let m = Model::fit(
            &x,
            20,
            &y,
            SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
            KnnConfig {
                normalization: Normalization::DivideMin,
                ..KnnConfig::default()
            },
        )
        .unwrap();
        TwoStage::new(&m, Stage2::new(Normalization::ZScore, Split::BbrPresent)).unwrap()
    }

    #[test]
    fn classifies_with_stage_two_and_the_side_margin() {
        let t = model();
        let mut c = TwoStageClassifier::new(t.clone()).unwrap();
        let mut ws = t.workspace();
        let (q, _) = synth::dataset(&SIX_CLASSES, 3, 20, 77).unwrap();
        for w in q.chunks_exact(20) {
            let r = c.classify(w).unwrap();
            let (p, _, margin) = t.classify_with_margin(w, &mut ws).unwrap();
            assert_eq!(
                (r.class_index, r.confidence, r.distance),
                (p.class, margin, p.distance)
            );
            assert_eq!(r.mix.bbr_present(), p.bbr_present);
            assert_eq!(c.verdict(w).unwrap(), Verdict::from(r));
        }
    }

    /// A combined k-NN stage 2 (z-sorted, k = 7, a = 0.25): class and
    /// distance from it, confidence still stage 1's side margin, prepared or
    /// not; its prefix models keep the fitted scales.
    #[test]
    fn a_knn_stage_two_keeps_the_side_margin() {
        let base = model();
        let s2 = Stage2 {
            k: 7,
            stage1_weight: 0.25,
            ..Stage2::new(Normalization::ZSorted, Split::BbrPresent)
        };
        let one = Model::fit(
            base.raw_references(),
            20,
            base.labels(),
            base.classes().to_vec(),
            *base.config(),
        )
        .unwrap();
        let t = TwoStage::new(&one, s2).unwrap();
        let scales = t.stage2().scales;
        assert!(scales.is_some());
        let mut c = TwoStageClassifier::new(t.clone()).unwrap();
        let mut ws = t.workspace();
        let (q, _) = synth::dataset(&SIX_CLASSES, 3, 20, 78).unwrap();
        let mut votes_below_k = 0;
        for w in q.chunks_exact(20) {
            let (p, _, margin) = t.classify_with_margin(w, &mut ws).unwrap();
            // The 1-NN two-stage model over the same references has the same
            // stage 1, hence the same side margin.
            let (_, _, side_margin) = base.classify_with_margin(w, &mut base.workspace()).unwrap();
            assert_eq!(margin, side_margin, "stage 1's margin, not stage 2's vote");
            c.prepare(&w[..19]);
            let r = c.classify(w).unwrap();
            assert_eq!(
                (r.class_index, r.confidence, r.distance),
                (p.class, margin, p.distance)
            );
            votes_below_k += (p.votes < 7) as usize;
        }
        assert!(
            votes_below_k > 0,
            "some votes split, so the vote is exercised"
        );
        assert_eq!(t.truncated(10).unwrap().stage2().scales, scales);
    }

    #[test]
    fn the_controller_refuses_cycles_and_runs_one() {
        let c = TwoStageClassifier::new(model()).unwrap();
        let cfg = Config {
            cycles: 2,
            ..Config::passive()
        };
        let mut c2 = TwoStageClassifier::new(model()).unwrap();
        assert!(!c2.supports_class_distances());
        assert!(c2.class_distances(&[1.0; 20], &mut [0.0; 6]).is_none());
        let e = Controller::new(cfg, c, Stump::default()).err().unwrap();
        assert!(e.to_string().contains("cycles = 2"), "{e}");
        let c = TwoStageClassifier::new(model()).unwrap();
        let mut ops = Controller::new(Config::passive(), c, Stump::default()).unwrap();
        ops.start(0).unwrap();
        let series = synth::rtt_series(&Mix::parse("B1-C0").unwrap(), 20, 5);
        let mut chosen = None;
        for (t, rtt) in series.iter().enumerate() {
            let now = (t as u64 + 1) * 1_000_000_000;
            ops.handle_timeout(now).unwrap();
            ops.handle_sample(now, *rtt).unwrap();
            while let Some(o) = ops.poll() {
                if let Output::Event(Event::Selected { cca, .. }) = o {
                    chosen = Some(cca.as_str().to_string());
                }
            }
        }
        assert_eq!(chosen.as_deref(), Some("bbr"));
    }

    #[test]
    fn progressive_prefix_models() {
        let mut p = TwoStageClassifier::progressive(model(), &[5, 10, 15]).unwrap();
        assert_eq!(p.prefix_lens().collect::<Vec<_>>(), [5, 10, 15]);
        let w = synth::rtt_series(&Mix::parse("B1-B1").unwrap(), 20, 9);
        let full = model().truncated(10).unwrap();
        let mut ws = full.workspace();
        let want = full.classify_with_margin(&w[..10], &mut ws).unwrap();
        let got = p.classify_prefix(&w[..10]).unwrap().unwrap();
        assert_eq!((got.class_index, got.confidence), (want.0.class, want.2));
        assert!(p.classify_prefix(&w[..7]).is_none());
        assert!(TwoStageClassifier::progressive(model(), &[25]).is_err());
    }
}
