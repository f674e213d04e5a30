//! Stratified k-fold cross-validation (000 §3.5: 5 folds, 20% of each class
//! held out per fold, mean accuracy over folds).

use super::{KnnConfig, Model};
use crate::error::{Error, Result};
use crate::knn::metrics::Confusion;

/// Result of a cross-validation run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CvReport {
    /// Accuracy of each fold.
    pub fold_accuracy: Vec<f64>,
    /// Mean of `fold_accuracy` (the number 000 reports).
    pub mean_accuracy: f64,
    /// Confusion matrix summed over folds.
    pub confusion: Confusion,
}

/// Assign each window a fold in `0..folds` so every class is spread evenly:
/// each class's windows are shuffled (seeded) and dealt round-robin.
pub fn stratified_folds(labels: &[u32], folds: usize, seed: u64) -> Result<Vec<usize>> {
    if folds < 2 {
        return Err(Error::invalid(format!(
            "cross-validation needs at least 2 folds, got {folds}"
        )));
    }
    let n_classes = labels.iter().map(|&l| l as usize + 1).max().unwrap_or(0);
    let mut out = vec![0; labels.len()];
    let mut rng = SplitMix64(seed);
    for c in 0..n_classes {
        let mut idx: Vec<usize> = (0..labels.len())
            .filter(|&i| labels[i] as usize == c)
            .collect();
        if idx.is_empty() {
            continue;
        }
        if idx.len() < folds {
            return Err(Error::invalid(format!(
                "class {c} has {} windows, fewer than the {folds} folds; collect more or use fewer folds",
                idx.len()
            )));
        }
        for i in (1..idx.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            idx.swap(i, j);
        }
        for (pos, &i) in idx.iter().enumerate() {
            out[i] = pos % folds;
        }
    }
    Ok(out)
}

/// Stratified k-fold cross-validation of a DTW K-NN configuration. Each fold
/// is classified with all cores.
pub fn cross_validate(
    windows: &[f64],
    window: usize,
    labels: &[u32],
    classes: &[String],
    config: KnnConfig,
    folds: usize,
    seed: u64,
) -> Result<CvReport> {
    if window == 0 || windows.len() != labels.len() * window {
        return Err(Error::invalid(format!(
            "{} values do not make {} windows of length {window}",
            windows.len(),
            labels.len()
        )));
    }
    let assign = stratified_folds(labels, folds, seed)?;
    let mut confusion = Confusion::new(classes.len());
    let mut fold_accuracy = Vec::with_capacity(folds);
    for f in 0..folds {
        let (mut tr_x, mut tr_y, mut te_x, mut te_y) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, &a) in assign.iter().enumerate() {
            let w = &windows[i * window..(i + 1) * window];
            if a == f {
                te_x.extend_from_slice(w);
                te_y.push(labels[i]);
            } else {
                tr_x.extend_from_slice(w);
                tr_y.push(labels[i]);
            }
        }
        let model = Model::fit(&tr_x, window, &tr_y, classes.to_vec(), config)?;
        let preds = model.classify_batch(&te_x, 0)?;
        let mut fold = Confusion::new(classes.len());
        for (p, &t) in preds.iter().zip(&te_y) {
            fold.add(t as usize, p.class)?;
        }
        fold_accuracy.push(fold.accuracy());
        confusion.merge(&fold);
    }
    let mean_accuracy = fold_accuracy.iter().sum::<f64>() / folds as f64;
    Ok(CvReport {
        fold_accuracy,
        mean_accuracy,
        confusion,
    })
}

/// splitmix64: a tiny seeded generator so folds are reproducible bit for bit.
pub(crate) struct SplitMix64(pub u64);

impl SplitMix64 {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
