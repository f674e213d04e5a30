//! Cutting recorded traces into the windows a model compares.

use std::path::Path;

use opsel::{Error, Result};
use opsel_netlab::collect::{self, Mode};

/// Complete windows of `w` samples of a trace, as the training code cuts them
/// (opsel.train.data): passive non-overlapping within each run; active at
/// pattern-cycle boundaries (stride = whole cycles covering w). `step` > 1
/// reads every `step`-th sample (k = 0, step, 2 step, …), the series a
/// slower prober would have recorded on the same traffic
/// (opsel.train.data.at_1hz for a 200-ms trace and step 5).
pub fn read_windows(path: &Path, w: usize, mode: &Mode, step: usize) -> Result<Vec<Vec<f64>>> {
    let step = step.max(1) as u64;
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("read trace {}", path.display()), e))?;
    let rows = collect::parse_trace(&text)?;
    let stride = match mode {
        Mode::Passive | Mode::PassiveEvery { .. } => w,
        Mode::Active { pattern, .. } => {
            let p = (pattern.total_ns() / 1_000_000_000).max(1) as usize;
            w.div_ceil(p) * p
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let run = rows[i].run;
        let j = rows[i..]
            .iter()
            .position(|r| r.run != run)
            .map_or(rows.len(), |n| i + n);
        let len = rows[i..j].iter().map(|r| r.k / step + 1).max().unwrap_or(0) as usize;
        let mut series = vec![f64::NAN; len];
        for r in &rows[i..j] {
            if r.valid() && r.k % step == 0 {
                series[(r.k / step) as usize] = r.rtt_ms;
            }
        }
        let mut start = 0;
        while start + w <= len {
            let win = &series[start..start + w];
            if win.iter().all(|v| v.is_finite()) {
                out.push(win.to_vec());
            }
            start += stride;
        }
        i = j;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_cut_per_run_and_skip_gaps() {
        let dir = std::env::temp_dir().join(format!("opsel-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.csv");
        let mut text = String::from(collect::CSV_HEADER);
        text.push('\n');
        // Run 0: 5 samples (one window of 2, then 2 more, then a lone one);
        // run 1: a lost sample at k = 1 spoils its first window.
        for (run, k, rtt) in [
            (0, 0, 10.0),
            (0, 1, 11.0),
            (0, 2, 12.0),
            (0, 3, 13.0),
            (0, 4, 14.0),
            (1, 0, 20.0),
            (1, 1, f64::NAN),
            (1, 2, 22.0),
            (1, 3, 23.0),
        ] {
            let (v, ans) = if rtt.is_nan() {
                (String::new(), 0)
            } else {
                (format!("{rtt}"), 10)
            };
            text.push_str(&format!("{run},{k},0,{v},{v},{v},{ans},,,-\n"));
        }
        std::fs::write(&p, text).unwrap();
        let w = read_windows(&p, 2, &Mode::Passive, 1).unwrap();
        assert_eq!(
            w,
            vec![vec![10.0, 11.0], vec![12.0, 13.0], vec![22.0, 23.0]]
        );
        // Every 2nd sample: run 0 reads 10, 12, 14 (one whole window); run 1
        // reads 20, 22 (its lost k = 1 is not a sample of that series).
        let w = read_windows(&p, 2, &Mode::Passive, 2).unwrap();
        assert_eq!(w, vec![vec![10.0, 12.0], vec![20.0, 22.0]]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
