//! The DTW K-NN model (000 §3.5) as the controller's [`Classifier`].

use super::{Classified, Classifier, PrefixEnsemble, Verdict};
use crate::error::Result;
use crate::knn::{ClassWorkspace, Model, Workspace};
use crate::mix::Mix;

/// A K-NN model with its workspace and its class labels parsed as mixes.
///
/// Confidence: with k = 1 the vote share is always 1, so the confidence is the
/// margin `1 − d_nearest / d_nearest_other_class` ([`Model::classify_with_margin`]);
/// with k > 1 it is the vote share of the winning class.
///
/// Per-class distances (several cycles per decision, `Config::cycles`): the
/// DTW distance to each class's nearest reference, whatever k is
/// ([`Model::nearest_per_class`]; `opsel.train cycles`' min-sum).
pub struct KnnClassifier {
    model: Model,
    ws: Workspace,
    class_ws: ClassWorkspace,
    mixes: Vec<Mix>,
}

impl KnnClassifier {
    /// Wrap a model; every class name must parse as a mix (`B1-C1`, `bbr:1-cubic:1`).
    pub fn new(model: Model) -> Result<Self> {
        let mixes = (0..model.classes().len())
            .map(|c| model.class_mix(c))
            .collect::<Result<Vec<_>>>()?;
        let ws = model.workspace();
        let class_ws = model.class_workspace();
        Ok(Self {
            model,
            ws,
            class_ws,
            mixes,
        })
    }

    /// A classifier that can also judge prefixes of `lens` samples (progressive
    /// probing, 000 §6): the same references truncated to each length.
    pub fn progressive(model: Model, lens: &[usize]) -> Result<PrefixEnsemble<KnnClassifier>> {
        let prefixes = lens
            .iter()
            .map(|&l| KnnClassifier::new(model.truncated(l)?))
            .collect::<Result<Vec<_>>>()?;
        PrefixEnsemble::new(KnnClassifier::new(model)?, prefixes)
    }

    /// The wrapped model.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl Classifier for KnnClassifier {
    fn window_len(&self) -> usize {
        self.model.window()
    }

    fn classes(&self) -> &[Mix] {
        &self.mixes
    }

    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        Ok(self.verdict(window)?.classified(&self.mixes))
    }

    /// The classification without the mix clone: allocation-free (the
    /// probe gate's checks, `ops::ProbeGate`).
    fn verdict(&mut self, window: &[f64]) -> Result<Verdict> {
        let (p, confidence) = if self.model.config().k == 1 {
            let (p, _, margin) = self.model.classify_with_margin(window, &mut self.ws)?;
            (p, margin)
        } else {
            let p = self.model.classify(window, &mut self.ws)?;
            (p, p.confidence)
        };
        Ok(Verdict {
            class_index: p.class,
            confidence,
            distance: p.distance,
        })
    }

    /// Rows 0..w−1 of every reference's DTW against the partial window
    /// ([`Model::prepare`]), so the last sample costs one row per reference.
    fn prepare(&mut self, partial: &[f64]) {
        self.model.prepare(partial, &mut self.ws);
    }

    /// Through the preparation of the window's prefix when it applies (one
    /// programme row per reference, [`Model::nearest_per_class_prepared`]),
    /// else the pruned per-class search; the same distances either way.
    fn class_distances(&mut self, window: &[f64], out: &mut [f64]) -> Option<Result<()>> {
        Some(
            match self
                .model
                .nearest_per_class_prepared(window, &mut self.ws, out)
            {
                Ok(true) => Ok(()),
                Ok(false) => self
                    .model
                    .nearest_per_class(window, &mut self.class_ws, out),
                Err(e) => Err(e),
            },
        )
    }

    fn supports_class_distances(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knn::KnnConfig;
    use crate::mix::SIX_CLASSES;
    use crate::ops::{Config, Controller, Event, Output, Stump};
    use crate::series::synth;

    fn model() -> Model {
        let (x, y) = synth::dataset(&SIX_CLASSES, 30, 20, 3).unwrap();
        Model::fit(
            &x,
            20,
            &y,
            SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
            KnnConfig::default(),
        )
        .unwrap()
    }

    #[test]
    fn classifies_and_reports_a_margin() {
        let mut c = KnnClassifier::new(model()).unwrap();
        let (q, y) = synth::dataset(&SIX_CLASSES, 2, 20, 77).unwrap();
        let mut correct = 0;
        for (w, &t) in q.chunks_exact(20).zip(&y) {
            let r = c.classify(w).unwrap();
            assert!((0.0..=1.0).contains(&r.confidence));
            assert_eq!(r.mix, Mix::parse(SIX_CLASSES[r.class_index]).unwrap());
            correct += (r.class_index == t as usize) as usize;
        }
        assert!(correct >= 8, "{correct}/12");
        // A window equal to a reference has distance 0 and full margin.
        let m = model();
        let first = m.raw_references()[..20].to_vec();
        let r = c.classify(&first).unwrap();
        assert_eq!((r.distance, r.confidence), (0.0, 1.0));
    }

    #[test]
    fn drives_the_controller_to_the_stump_decision() {
        let c = KnnClassifier::new(model()).unwrap();
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
        let mut p = KnnClassifier::progressive(model(), &[5, 10, 15]).unwrap();
        assert_eq!(p.prefix_lens().collect::<Vec<_>>(), [5, 10, 15]);
        let w = synth::rtt_series(&Mix::parse("B1-B1").unwrap(), 20, 9);
        assert!(p.classify_prefix(&w[..10]).unwrap().is_ok());
        assert!(p.classify_prefix(&w[..7]).is_none());
        assert!(KnnClassifier::progressive(model(), &[25]).is_err());
    }
}
