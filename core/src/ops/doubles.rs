//! Test doubles for the [`Classifier`] trait: a scripted classifier for exact
//! action-sequence tests, and a nearest-prototype classifier that really
//! classifies windows (used by the trace-driven simulator and the decision-
//! latency bench; the DTW K-NN is benchmarked on its own).

use super::classifier::{Classified, Classifier};
use crate::error::{check_finite, Error, Result};
use crate::mix::Mix;

/// Returns scripted labels in order (cycling), and records every call.
#[derive(Debug, Clone)]
pub struct ScriptedClassifier {
    w: usize,
    classes: Vec<Mix>,
    script: Vec<(usize, f64)>,
    probe: Option<usize>,
    last_len: usize,
    prefix_confidence: Option<f64>,
    /// Length of every window passed to `classify` / `classify_prefix`.
    pub calls: Vec<usize>,
    counts_own_flow: bool,
}

impl ScriptedClassifier {
    /// `classes` are labels (`B1-C0` …); `script` lists (label, confidence)
    /// answers, each label one of `classes`.
    pub fn new(w: usize, classes: &[&str], script: &[(&str, f64)]) -> Result<Self> {
        let mixes: Vec<Mix> = classes
            .iter()
            .map(|l| Mix::parse(l))
            .collect::<Result<_>>()?;
        let mut s = Vec::with_capacity(script.len());
        for (label, conf) in script {
            let m = Mix::parse(label)?;
            let i = mixes.iter().position(|x| *x == m).ok_or_else(|| {
                Error::invalid(format!(
                    "scripted label {label:?} is not one of the classes {classes:?}"
                ))
            })?;
            s.push((i, *conf));
        }
        if s.is_empty() {
            return Err(Error::invalid(
                "script is empty; give at least one (label, confidence)",
            ));
        }
        Ok(Self {
            w,
            classes: mixes,
            script: s,
            probe: None,
            last_len: 0,
            prefix_confidence: None,
            calls: Vec::new(),
            counts_own_flow: true,
        })
    }

    /// Script classes that name the background, not counting the transfer's
    /// own flow in passive windows ([`Classifier::counts_own_flow`]).
    pub fn background_classes(mut self) -> Self {
        self.counts_own_flow = false;
        self
    }

    /// Also answer prefixes, with the current probe's scripted label and
    /// this confidence.
    pub fn with_prefix_confidence(mut self, confidence: f64) -> Self {
        self.prefix_confidence = Some(confidence);
        self
    }

    /// One script entry per probe: a call with a window no longer than the
    /// previous call's starts a new probe (prefixes grow within a probe).
    fn entry(&mut self, len: usize) -> (usize, f64) {
        if self.probe.is_none() || len <= self.last_len {
            self.probe = Some(self.probe.map_or(0, |p| p + 1));
        }
        self.last_len = len;
        self.calls.push(len);
        self.script[self.probe.unwrap_or(0) % self.script.len()]
    }
}

impl Classifier for ScriptedClassifier {
    fn window_len(&self) -> usize {
        self.w
    }
    fn counts_own_flow(&self) -> bool {
        self.counts_own_flow
    }
    fn classes(&self) -> &[Mix] {
        &self.classes
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        let (i, confidence) = self.entry(window.len());
        Ok(Classified {
            mix: self.classes[i].clone(),
            class_index: i,
            confidence,
            distance: 0.0,
        })
    }
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        let confidence = self.prefix_confidence?;
        let (i, _) = self.entry(prefix.len());
        Some(Ok(Classified {
            mix: self.classes[i].clone(),
            class_index: i,
            confidence,
            distance: 0.0,
        }))
    }
}

/// Nearest-prototype classifier: each prototype is the per-position mean of
/// training windows of one class (several prototypes per class allowed);
/// distance is the RMS difference; confidence is the margin
/// `1 − d_best / d_best_other_class` in [0, 1]. Prefixes are classified
/// against prototype prefixes, so progressive probing works without extra
/// models.
#[derive(Debug, Clone)]
pub struct CentroidClassifier {
    w: usize,
    classes: Vec<Mix>,
    prototypes: Vec<(usize, Vec<f64>)>,
}

impl CentroidClassifier {
    /// Train from (class index, window) examples; `classes` are the labels.
    pub fn train(classes: Vec<Mix>, examples: &[(usize, Vec<f64>)]) -> Result<Self> {
        let w = examples.first().map(|(_, x)| x.len()).unwrap_or(0);
        if w == 0 {
            return Err(Error::invalid(
                "no training windows; give at least one non-empty window per class",
            ));
        }
        let mut sums: Vec<(Vec<f64>, usize)> = vec![(vec![0.0; w], 0); classes.len()];
        for (i, (c, x)) in examples.iter().enumerate() {
            if x.len() != w {
                return Err(Error::invalid(format!(
                    "training window {i} has {} samples, expected {w}",
                    x.len()
                )));
            }
            check_finite(&format!("training window {i}"), x)?;
            let slot = sums.get_mut(*c).ok_or_else(|| {
                Error::invalid(format!(
                    "training window {i} has class {c}, but there are {} classes",
                    classes.len()
                ))
            })?;
            slot.0.iter_mut().zip(x).for_each(|(s, v)| *s += v);
            slot.1 += 1;
        }
        let prototypes = sums
            .into_iter()
            .enumerate()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(c, (s, n))| (c, s.into_iter().map(|v| v / n as f64).collect()))
            .collect();
        Ok(Self {
            w,
            classes,
            prototypes,
        })
    }

    /// Several prototypes per class: train one classifier per group of
    /// examples (e.g. per foreground CCA during a passive probe) and merge.
    pub fn merge(mut self, other: CentroidClassifier) -> Result<Self> {
        if other.w != self.w || other.classes != self.classes {
            return Err(Error::invalid(
                "merged prototype sets must share the window length and classes",
            ));
        }
        self.prototypes.extend(other.prototypes);
        Ok(self)
    }

    fn nearest(&self, x: &[f64]) -> Result<Classified> {
        check_finite("window", x)?;
        let (mut best, mut best_d) = (usize::MAX, f64::INFINITY);
        for (c, p) in &self.prototypes {
            let d = rms(x, &p[..x.len()]);
            if d < best_d {
                (best, best_d) = (*c, d);
            }
        }
        let other = self
            .prototypes
            .iter()
            .filter(|(c, _)| *c != best)
            .map(|(_, p)| rms(x, &p[..x.len()]))
            .fold(f64::INFINITY, f64::min);
        let confidence = if other.is_finite() && other > 0.0 {
            (1.0 - best_d / other).clamp(0.0, 1.0)
        } else {
            1.0
        };
        Ok(Classified {
            mix: self.classes[best].clone(),
            class_index: best,
            confidence,
            distance: best_d,
        })
    }
}

fn rms(a: &[f64], b: &[f64]) -> f64 {
    let s: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    (s / a.len().max(1) as f64).sqrt()
}

impl Classifier for CentroidClassifier {
    fn window_len(&self) -> usize {
        self.w
    }
    /// Its passive prototypes are trained per foreground CCA and labelled
    /// with the background (`sim::train_centroids`).
    fn counts_own_flow(&self) -> bool {
        false
    }
    fn classes(&self) -> &[Mix] {
        &self.classes
    }
    fn classify(&mut self, window: &[f64]) -> Result<Classified> {
        if window.len() != self.w {
            return Err(Error::invalid(format!(
                "window has {} samples, the model expects w = {}",
                window.len(),
                self.w
            )));
        }
        self.nearest(window)
    }
    fn classify_prefix(&mut self, prefix: &[f64]) -> Option<Result<Classified>> {
        if prefix.is_empty() || prefix.len() >= self.w {
            return None;
        }
        Some(self.nearest(prefix))
    }
}
