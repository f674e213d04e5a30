//! Majority vote over the k nearest neighbours (000 §3.5) with a deterministic
//! tie-break: among classes with equal votes, the one owning the nearest
//! neighbour wins.

use super::{Model, Prediction, Workspace};

impl Model {
    pub(super) fn vote(&self, ws: &mut Workspace) -> Prediction {
        ws.votes.iter_mut().for_each(|v| *v = 0);
        for &(_, i) in &ws.neighbors {
            ws.votes[self.labels[i] as usize] += 1;
        }
        let top = ws.votes.iter().copied().max().unwrap_or(0);
        // Neighbours are sorted by (distance, index): the first one whose class
        // has the top vote count decides ties.
        let class = ws
            .neighbors
            .iter()
            .map(|&(_, i)| self.labels[i] as usize)
            .find(|&c| ws.votes[c] == top)
            .unwrap_or(0);
        let (distance, neighbor) = ws.neighbors.first().copied().unwrap_or((f64::INFINITY, 0));
        Prediction {
            class,
            distance,
            neighbor,
            votes: top,
            confidence: top as f64 / ws.neighbors.len().max(1) as f64,
        }
    }
}
