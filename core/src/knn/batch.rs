//! Batch classification over many windows, split across threads (each with
//! its own workspace); results are identical to one-by-one classification.

use super::{Model, Prediction};
use crate::error::{Error, Result};

impl Model {
    /// Classify `windows` (flat, a multiple of `window()` values) using up to
    /// `threads` threads (0 = all available cores). Fails with the first bad
    /// window's error, naming its index.
    pub fn classify_batch(&self, windows: &[f64], threads: usize) -> Result<Vec<Prediction>> {
        let w = self.window;
        if windows.len() % w != 0 {
            return Err(Error::invalid(format!(
                "{} values are not a whole number of windows of length {w}",
                windows.len()
            )));
        }
        let n = windows.len() / w;
        let mut out = vec![
            Prediction {
                class: 0,
                distance: f64::NAN,
                neighbor: 0,
                votes: 0,
                confidence: 0.0
            };
            n
        ];
        if n == 0 {
            return Ok(out);
        }
        let threads = match threads {
            0 => std::thread::available_parallelism()
                .map(|p| p.get())
                .unwrap_or(1),
            t => t,
        }
        .min(n)
        .max(1);
        let per = n.div_ceil(threads);
        let run = |chunk: usize, outs: &mut [Prediction]| -> Result<()> {
            let mut ws = self.workspace();
            for (j, o) in outs.iter_mut().enumerate() {
                let idx = chunk * per + j;
                *o = self
                    .classify(&windows[idx * w..(idx + 1) * w], &mut ws)
                    .map_err(|e| Error::invalid(format!("window {idx}: {e}")))?;
            }
            Ok(())
        };
        if threads == 1 {
            run(0, &mut out)?;
            return Ok(out);
        }
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = out
                .chunks_mut(per)
                .enumerate()
                .map(|(c, outs)| s.spawn(move || run(c, outs)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::invalid("a classification thread panicked")))
                })
                .collect()
        });
        results.into_iter().collect::<Result<()>>()?;
        Ok(out)
    }
}
