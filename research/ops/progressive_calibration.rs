//! Calibrates progressive probing (000 §6 future work, `ops::Progressive`) on
//! a model file: grouped cross-validation of the early-exit rule.
//!
//! `cargo run --release -p opsel --example progressive_calibration -- MODEL [MODEL ...]`
//!
//! For 1-NN the controller's confidence is the margin `1 − d_nearest /
//! d_nearest_other_class` (`KnnClassifier`). Its scale depends on the data: on
//! netlab RTT windows it is typically 0.05–0.2, so `Progressive::default()`'s
//! 0.8 (a vote-share scale) never fires. This prints, per threshold, what the
//! rule would do: the mean probe length, the share of probes that exit early,
//! and the accuracy of the stump's decision (BBR present → bbr) against the
//! truth, beside the full-window decision.
//!
//! Folds are the contiguous fifths of each class's references (the shipped
//! models hold their windows in collection order, so a fifth is about one
//! collection run); a test window never has a neighbour from its own stretch
//! of trace, which a random split would give.
use opsel::knn::Model;
use opsel::model::KnnModelFile;

const FOLDS: usize = 5;
const CUTS: [usize; 3] = [5, 10, 15];
const THRESHOLDS: [f64; 10] = [0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.8];

fn main() -> opsel::Result<()> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        return Err(opsel::Error::invalid(
            "pass one or more model files, e.g. models/passive/model.json",
        ));
    }
    for path in paths {
        calibrate(&path)?;
    }
    Ok(())
}

/// Per test window: for each cut (and the full window), the stump decision
/// (true = bbr) and the margin.
struct Verdicts {
    truth_bbr: bool,
    at: Vec<(bool, f64)>,
}

fn calibrate(path: &str) -> opsel::Result<()> {
    let mf = KnnModelFile::load(path)?;
    let m = &mf.model;
    let w = m.window();
    let labels = m.labels();
    let raw = m.raw_references();
    let bbr: Vec<bool> = (0..m.classes().len())
        .map(|c| m.class_mix(c).map(|x| x.bbr_present()))
        .collect::<opsel::Result<_>>()?;
    // Fold of each reference: contiguous fifths within its class.
    let mut count = vec![0usize; m.classes().len()];
    for &l in labels {
        count[l as usize] += 1;
    }
    let mut seen = vec![0usize; m.classes().len()];
    let fold: Vec<usize> = labels
        .iter()
        .map(|&l| {
            let c = l as usize;
            let f = seen[c] * FOLDS / count[c].max(1);
            seen[c] += 1;
            f
        })
        .collect();
    let lens: Vec<usize> = CUTS.iter().copied().filter(|&l| l < w).chain([w]).collect();
    let mut verdicts: Vec<Verdicts> = Vec::new();
    for f in 0..FOLDS {
        let train: Vec<usize> = (0..labels.len()).filter(|&i| fold[i] != f).collect();
        let test: Vec<usize> = (0..labels.len()).filter(|&i| fold[i] == f).collect();
        if train.is_empty() || test.is_empty() {
            continue;
        }
        let x: Vec<f64> = train
            .iter()
            .flat_map(|&i| raw[i * w..(i + 1) * w].iter().copied())
            .collect();
        let y: Vec<u32> = train.iter().map(|&i| labels[i]).collect();
        let full = Model::fit(&x, w, &y, m.classes().to_vec(), *m.config())?;
        let models: Vec<Model> = lens
            .iter()
            .map(|&l| {
                if l == w {
                    Ok(full.clone())
                } else {
                    full.truncated(l)
                }
            })
            .collect::<opsel::Result<_>>()?;
        let mut wss: Vec<_> = models.iter().map(|m| m.workspace()).collect();
        for &i in &test {
            let q = &raw[i * w..(i + 1) * w];
            let mut at = Vec::with_capacity(lens.len());
            for (k, &l) in lens.iter().enumerate() {
                let (p, _, margin) = models[k].classify_with_margin(&q[..l], &mut wss[k])?;
                at.push((bbr[p.class], margin));
            }
            verdicts.push(Verdicts {
                truth_bbr: bbr[labels[i] as usize],
                at,
            });
        }
    }
    let n = verdicts.len() as f64;
    println!(
        "\n{path}: w = {w}, {} windows, {FOLDS} grouped folds, cuts {lens:?}",
        verdicts.len()
    );
    for (k, &l) in lens.iter().enumerate() {
        let acc = verdicts.iter().filter(|v| v.at[k].0 == v.truth_bbr).count() as f64 / n;
        let mut margins: Vec<f64> = verdicts.iter().map(|v| v.at[k].1).collect();
        margins.sort_by(f64::total_cmp);
        println!(
            "  prefix {l:>2}: decision accuracy {:.1} %, margin median {:.3}, p90 {:.3}",
            100.0 * acc,
            margins[margins.len() / 2],
            margins[margins.len() * 9 / 10]
        );
    }
    println!("  | min margin | mean probe (samples) | early exits | decision accuracy |");
    println!("  |---|---|---|---|");
    for t in THRESHOLDS {
        let (mut len_sum, mut early, mut right) = (0usize, 0usize, 0usize);
        for v in &verdicts {
            // Progressive { min_samples: 5, step: 5, agree: 1 }: the first cut
            // whose margin reaches t decides; otherwise the full window.
            let k = (0..lens.len() - 1)
                .find(|&k| v.at[k].1 >= t)
                .unwrap_or(lens.len() - 1);
            len_sum += lens[k];
            early += usize::from(k + 1 < lens.len());
            right += usize::from(v.at[k].0 == v.truth_bbr);
        }
        println!(
            "  | {t:.2} | {:.1} | {:.0} % | {:.1} % |",
            len_sum as f64 / n,
            100.0 * early as f64 / n,
            100.0 * right as f64 / n
        );
    }
    Ok(())
}
