//! The classification step of the OPS cycle (000 §1.2 step 2, §3.5) behind a
//! trait, so the DTW K-NN model, a test double or a user model can plug in.

use crate::error::Result;
use crate::mix::Mix;

/// One classification of an RTT window. Serialized (in events) as `mix`,
/// `class_index`, `confidence`, `distance`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Classified {
    /// The recognised background mix (000 Table 6.1 label, parsed).
    pub mix: Mix,
    /// Index of the class in [`Classifier::classes`].
    pub class_index: usize,
    /// How sure the classifier is, in [0, 1] (for 1-NN e.g. a distance-ratio
    /// margin; the meaning is the classifier's, the controller only compares
    /// it with thresholds).
    pub confidence: f64,
    /// Distance to the nearest reference (or any model score; informational).
    pub distance: f64,
}

/// A classification without the mix: what the controller's early-exit checks
/// read (class, confidence, distance). Copy, so a check allocates nothing
/// ([`Classifier::verdict`], [`Classifier::prefix_verdict`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub class_index: usize,
    pub confidence: f64,
    pub distance: f64,
}

impl Verdict {
    /// The full classification, with the mix of `class_index` in `mixes`
    /// (the classifier's [`Classifier::classes`]).
    pub fn classified(self, mixes: &[Mix]) -> Classified {
        Classified {
            mix: mixes[self.class_index].clone(),
            class_index: self.class_index,
            confidence: self.confidence,
            distance: self.distance,
        }
    }
}

impl From<Classified> for Verdict {
    fn from(c: Classified) -> Self {
        Self {
            class_index: c.class_index,
            confidence: c.confidence,
            distance: c.distance,
        }
    }
}

/// A background-mix classifier over fixed-length RTT windows (000 §3.4: raw
/// rtt_ms at 1 Hz, non-overlapping windows of w samples).
///
/// Adapting the DTW K-NN model is a few lines: `window_len` = the model's w,
/// `classes` = its labels parsed once with [`Mix::parse`], `classify` calls
/// `Model::classify(window, &mut workspace)` and copies class / distance /
/// confidence.
pub trait Classifier {
    /// The window length w in samples the model was trained on.
    fn window_len(&self) -> usize;

    /// The class labels, indexed like [`Classified::class_index`]. Used to
    /// check a policy covers every class before the transfer starts.
    fn classes(&self) -> &[Mix];

    /// Classify a full window (`window.len() == window_len()`).
    fn classify(&mut self, window: &[f64]) -> Result<Classified>;

    /// Whether a passive window's class counts the transfer's own flow.
    ///
    /// Passive probing keeps the transfer sending on its current CCA while
    /// the window fills (`ProbeMode::Passive`), but the references of a
    /// trained model were recorded by a prober that only pings (000 §3.2 passive probing,
    /// `opsel lab collect`): a transfer sending CUBIC next to one CUBIC flow
    /// looks like two CUBIC flows, C1-C1. When this is `true` (the default)
    /// the controller gives the policy the background, the class minus one
    /// flow of the socket's CCA, so "BBR present in the background" (000
    /// §4.1) is asked of the background. Without it, a transfer on BBR next
    /// to a CUBIC background reads B1-C1 and the stump keeps BBR forever.
    /// Classifiers whose classes already are the background (the simulator's
    /// prototypes, trained per foreground CCA) return `false`.
    fn counts_own_flow(&self) -> bool {
        true
    }

    /// The window holds `partial.len() == window_len() − 1` samples: the next
    /// [`Classifier::classify`] will very likely be `partial` plus one sample,
    /// a whole sample period from now (with several windows per decision, the
    /// next [`Classifier::class_distances`]). A classifier may spend this idle
    /// time on the work that does not depend on the last sample, so the
    /// decision that follows the last sample is fast (last sample to
    /// `setsockopt` < 100 µs). It must not change what `classify` or
    /// `class_distances` return. Default: nothing.
    fn prepare(&mut self, partial: &[f64]) {
        let _ = partial;
    }

    /// Progressive probing (000 §6 future work: end the probe early once
    /// confident). Classify the first `prefix.len() < window_len()` samples of
    /// a probe, or return `None` if this classifier cannot judge prefixes (the
    /// default; the controller then always waits for the full window).
    ///
    /// A K-NN trained on full windows cannot be applied to a prefix as is; the
    /// intended implementation is an ensemble of per-prefix-length models
    /// (the FastProb design, 004: one model per probe length), see
    /// [`PrefixEnsemble`].
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        let _ = prefix;
        None
    }

    /// [`Classifier::classify`] without building the mix (allocation-free for
    /// classifiers that override it, as `KnnClassifier` does). Must agree
    /// with `classify`. Default: `classify`, mix dropped.
    fn verdict(&mut self, window: &[f64]) -> Result<Verdict> {
        self.classify(window).map(Verdict::from)
    }

    /// [`Classifier::classify_prefix`] without building the mix: what the
    /// probe gate (`ops::ProbeGate`) reads at each check, so a check that
    /// does not end the probe allocates nothing. Must agree with
    /// `classify_prefix`. Default: `classify_prefix`, mix dropped.
    fn prefix_verdict(&mut self, prefix: &[f64]) -> Option<Result<Verdict>> {
        self.classify_prefix(prefix).map(|r| r.map(Verdict::from))
    }

    /// Several cycles per decision (`Config::cycles` > 1): write into
    /// `out[c]` (one slot per [`Classifier::classes`]) the distance of
    /// `window` (`window_len()` samples) to class `c`, smaller = nearer, `∞`
    /// for a class with no reference. The controller sums these over the
    /// probe's windows and picks the smallest sum (min-sum). For DTW K-NN it
    /// is the distance to the class's nearest reference
    /// (`Model::nearest_per_class`). `None` (default): unsupported.
    fn class_distances(&mut self, window: &[f64], out: &mut [f64]) -> Option<Result<()>> {
        let _ = (window, out);
        None
    }

    /// Whether [`Classifier::class_distances`] is implemented (checked when
    /// a controller with `cycles` > 1 is created). Default: false.
    fn supports_class_distances(&self) -> bool {
        false
    }
}

impl<C: Classifier + ?Sized> Classifier for Box<C> {
    fn window_len(&self) -> usize {
        (**self).window_len()
    }
    fn classes(&self) -> &[Mix] {
        (**self).classes()
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        (**self).classify(window)
    }
    fn prepare(&mut self, partial: &[f64]) {
        (**self).prepare(partial)
    }
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        (**self).classify_prefix(prefix)
    }
    fn verdict(&mut self, window: &[f64]) -> Result<Verdict> {
        (**self).verdict(window)
    }
    fn prefix_verdict(&mut self, prefix: &[f64]) -> Option<Result<Verdict>> {
        (**self).prefix_verdict(prefix)
    }
    fn class_distances(&mut self, window: &[f64], out: &mut [f64]) -> Option<Result<()>> {
        (**self).class_distances(window, out)
    }
    fn supports_class_distances(&self) -> bool {
        (**self).supports_class_distances()
    }
}

/// Progressive probing by an ensemble of per-prefix-length classifiers: a
/// full-window model plus models trained on the first L samples of each
/// training window (e.g. L = 5, 10, 15 for w = 20, the cut points 000 §6
/// suggests). For DTW K-NN a prefix model is simply the same reference set
/// truncated to L samples, so no new data is needed. A prefix whose length has
/// no model returns `None`.
pub struct PrefixEnsemble<C> {
    full: C,
    prefixes: Vec<C>,
}

impl<C: Classifier> PrefixEnsemble<C> {
    /// `prefixes` must be shorter than `full`, distinct in length, and have
    /// the same classes as `full`.
    pub fn new(full: C, mut prefixes: Vec<C>) -> Result<Self> {
        let w = full.window_len();
        prefixes.sort_by_key(|c| c.window_len());
        for (i, p) in prefixes.iter().enumerate() {
            let l = p.window_len();
            if l == 0 || l >= w {
                return Err(crate::Error::invalid(format!(
                    "prefix model length {l} must be between 1 and {} (the full window w = {w} minus 1)",
                    w.saturating_sub(1)
                )));
            }
            if i > 0 && prefixes[i - 1].window_len() == l {
                return Err(crate::Error::invalid(format!(
                    "two prefix models have the same length {l}; keep one"
                )));
            }
            if p.classes() != full.classes() {
                return Err(crate::Error::invalid(format!(
                    "prefix model of length {l} has different classes than the full model; train all on the same labels"
                )));
            }
        }
        Ok(Self { full, prefixes })
    }

    /// The prefix lengths that have a model, ascending.
    pub fn prefix_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.prefixes.iter().map(|c| c.window_len())
    }
}

impl<C: Classifier> Classifier for PrefixEnsemble<C> {
    fn window_len(&self) -> usize {
        self.full.window_len()
    }
    fn classes(&self) -> &[Mix] {
        self.full.classes()
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        self.full.classify(window)
    }
    fn prepare(&mut self, partial: &[f64]) {
        self.full.prepare(partial)
    }
    fn class_distances(&mut self, window: &[f64], out: &mut [f64]) -> Option<Result<()>> {
        self.full.class_distances(window, out)
    }
    fn supports_class_distances(&self) -> bool {
        self.full.supports_class_distances()
    }
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        let l = prefix.len();
        let i = self
            .prefixes
            .binary_search_by_key(&l, |c| c.window_len())
            .ok()?;
        Some(self.prefixes[i].classify(prefix))
    }
    fn verdict(&mut self, window: &[f64]) -> Result<Verdict> {
        self.full.verdict(window)
    }
    fn prefix_verdict(&mut self, prefix: &[f64]) -> Option<Result<Verdict>> {
        let l = prefix.len();
        let i = self
            .prefixes
            .binary_search_by_key(&l, |c| c.window_len())
            .ok()?;
        Some(self.prefixes[i].verdict(prefix))
    }
}
