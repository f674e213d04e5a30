//! Batch classification over many windows, split across threads (each with
//! its own workspace); results are identical to one-by-one classification.

use super::{Model, Prediction};
use crate::error::{Error, Result};

impl Model {
    /// Classify `windows` (flat, a multiple of `window()` values) using up to
    /// `threads` threads (0 = all available cores). Fails with the first bad
    /// window's error, naming its index.
    pub fn classify_batch(&self, windows: &[f64], threads: usize) -> Result<Vec<Prediction>> {
        run(
            windows,
            self.window,
            threads,
            || self.workspace(),
            |w, ws| self.classify(w, ws),
        )
    }
}

/// `classify` over every window of `w` samples in `windows`, on up to
/// `threads` threads (0 = all cores), each with a workspace from `workspace`.
pub(super) fn run<P, W>(
    windows: &[f64],
    w: usize,
    threads: usize,
    workspace: impl Fn() -> W + Sync,
    classify: impl Fn(&[f64], &mut W) -> Result<P> + Sync,
) -> Result<Vec<P>>
where
    P: Send,
{
    if w == 0 || windows.len() % w != 0 {
        return Err(Error::invalid(format!(
            "{} values are not a whole number of windows of length {w}",
            windows.len()
        )));
    }
    let n = windows.len() / w;
    if n == 0 {
        return Ok(Vec::new());
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
    let run = |chunk: usize| -> Result<Vec<P>> {
        let mut ws = workspace();
        let end = ((chunk + 1) * per).min(n);
        (chunk * per..end)
            .map(|idx| {
                classify(&windows[idx * w..(idx + 1) * w], &mut ws)
                    .map_err(|e| Error::invalid(format!("window {idx}: {e}")))
            })
            .collect()
    };
    if threads == 1 {
        return run(0);
    }
    let chunks = n.div_ceil(per);
    let results: Vec<Result<Vec<P>>> = std::thread::scope(|s| {
        let run = &run;
        let handles: Vec<_> = (0..chunks).map(|c| s.spawn(move || run(c))).collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::invalid("a classification thread panicked")))
            })
            .collect()
    });
    let mut out = Vec::with_capacity(n);
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}
