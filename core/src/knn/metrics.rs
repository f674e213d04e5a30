//! Confusion matrix and per-class precision, recall and F1 (000 Figs 5.6,
//! 6.3), with grouping into derived views such as "BBR present".

use crate::error::{Error, Result};

/// Square confusion matrix: `count(truth, predicted)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Confusion {
    n: usize,
    counts: Vec<u64>,
}

impl Confusion {
    /// An empty matrix over `n` classes.
    pub fn new(n: usize) -> Self {
        Self {
            n,
            counts: vec![0; n * n],
        }
    }

    /// Count one decision.
    pub fn add(&mut self, truth: usize, predicted: usize) -> Result<()> {
        if truth >= self.n || predicted >= self.n {
            return Err(Error::invalid(format!(
                "class pair ({truth}, {predicted}) out of range for {} classes",
                self.n
            )));
        }
        self.counts[truth * self.n + predicted] += 1;
        Ok(())
    }

    /// Add another matrix of the same size.
    pub fn merge(&mut self, other: &Confusion) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Number of classes.
    pub fn classes(&self) -> usize {
        self.n
    }
    /// Decisions with this truth and prediction.
    pub fn count(&self, truth: usize, predicted: usize) -> u64 {
        self.counts[truth * self.n + predicted]
    }
    /// Row-major counts.
    pub fn as_slice(&self) -> &[u64] {
        &self.counts
    }
    /// All decisions.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Fraction of decisions on the diagonal (0 when empty).
    pub fn accuracy(&self) -> f64 {
        let t = self.total();
        if t == 0 {
            return 0.0;
        }
        (0..self.n).map(|c| self.count(c, c)).sum::<u64>() as f64 / t as f64
    }
    /// True windows of class `c`.
    pub fn support(&self, c: usize) -> u64 {
        (0..self.n).map(|p| self.count(c, p)).sum()
    }
    /// Precision of class `c` (0 when never predicted).
    pub fn precision(&self, c: usize) -> f64 {
        let predicted: u64 = (0..self.n).map(|t| self.count(t, c)).sum();
        ratio(self.count(c, c), predicted)
    }
    /// Recall of class `c` (0 when absent).
    pub fn recall(&self, c: usize) -> f64 {
        ratio(self.count(c, c), self.support(c))
    }
    /// F1 of class `c`.
    pub fn f1(&self, c: usize) -> f64 {
        let (p, r) = (self.precision(c), self.recall(c));
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
    /// Unweighted mean F1 over classes.
    pub fn macro_f1(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        (0..self.n).map(|c| self.f1(c)).sum::<f64>() / self.n as f64
    }

    /// Collapse classes into groups: `group_of[c]` is class c's group, of
    /// `groups` in all (e.g. 6 mixes → {no BBR, BBR present}).
    pub fn grouped(&self, group_of: &[usize], groups: usize) -> Result<Confusion> {
        if group_of.len() != self.n {
            return Err(Error::invalid(format!(
                "group map has {} entries for {} classes",
                group_of.len(),
                self.n
            )));
        }
        if let Some(&g) = group_of.iter().find(|&&g| g >= groups) {
            return Err(Error::invalid(format!(
                "group {g} out of range for {groups} groups"
            )));
        }
        let mut out = Confusion::new(groups);
        for t in 0..self.n {
            for p in 0..self.n {
                out.counts[group_of[t] * groups + group_of[p]] += self.count(t, p);
            }
        }
        Ok(out)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
