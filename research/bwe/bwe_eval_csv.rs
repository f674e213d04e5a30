//! Score a multi-rate ML model on the feature rows of a `bwe_dataset` test file with the
//! Rust inference (`opsel::trees`), without re-simulating the streams.
//!
//! `cargo run --release --example bwe_eval_csv -- MODEL.json TEST.csv [SKLEARN_PRED.txt]`
//!
//! `TEST.csv` is `mr_test.csv` of `bwe_dataset` (columns `y, r_avg_bps, avail_bw_bps,
//! rx_usecs, f0…`; the features are the Rust ones, so this is the same computation as
//! `bwe_eval` on the same streams). Prints the thesis' summaries (001 §6.1: relative error
//! `(B_e − B_g)/B_g`) over all rows and over the rows whose probing range covers `B_g`.
//! With `SKLEARN_PRED.txt` (one scikit-learn prediction of `y` per row, `%.17g`), also
//! prints the largest |Rust − scikit-learn| difference.

mod bwe_common;
use bwe_common::*;
use opsel::trees::Ensemble;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: bwe_eval_csv MODEL.json TEST.csv [SKLEARN_PRED.txt]");
        std::process::exit(2);
    }
    let model_text = std::fs::read_to_string(&args[1]).unwrap_or_else(|e| {
        eprintln!("cannot read model {}: {e}", args[1]);
        std::process::exit(2)
    });
    let model = Ensemble::from_json(&model_text).unwrap_or_else(|e| {
        eprintln!("cannot load model {}: {e}", args[1]);
        std::process::exit(2)
    });
    let csv = std::fs::read_to_string(&args[2]).unwrap_or_else(|e| {
        eprintln!("cannot read {}: {e}", args[2]);
        std::process::exit(2)
    });
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let fcols: Vec<usize> = (0..header.len())
        .filter(|&i| header[i].starts_with('f'))
        .collect();
    if header.len() < 4 || header[1] != "r_avg_bps" || header[2] != "avail_bw_bps" {
        eprintln!("{} is not a bwe_dataset multi-rate file", args[2]);
        std::process::exit(2);
    }
    let sk: Option<Vec<f64>> = args.get(3).map(|p| {
        std::fs::read_to_string(p)
            .unwrap_or_else(|e| {
                eprintln!("cannot read {p}: {e}");
                std::process::exit(2)
            })
            .split_whitespace()
            .map(|v| v.parse().expect("scikit-learn prediction is not a number"))
            .collect()
    });
    let (mut all, mut cov) = (vec![], vec![]);
    let mut x = vec![0.0; fcols.len()];
    let mut max_diff: f64 = 0.0;
    for (row, line) in lines.enumerate() {
        let v: Vec<f64> = line
            .split(',')
            .map(|s| s.parse().expect("CSV value is not a number"))
            .collect();
        for (j, &c) in fcols.iter().enumerate() {
            x[j] = v[c];
        }
        let (r_avg, bg) = (v[1], v[2]);
        let y = model.predict(&x).unwrap_or_else(|e| {
            eprintln!("row {row}: {e}");
            std::process::exit(2)
        });
        if let Some(s) = &sk {
            max_diff = max_diff.max((y - s[row]).abs());
        }
        let e = (y * r_avg - bg) / bg;
        all.push(e);
        let spec = mr_spec(r_avg);
        if bg >= spec.rate_bps(0).unwrap() && bg <= spec.rate_bps(spec.n_rates - 1).unwrap() {
            cov.push(e);
        }
    }
    println!("model {} on {}", args[1], args[2]);
    println!("all test streams        : {}", summary(&all));
    println!("streams covering B_g    : {}", summary(&cov));
    if sk.is_some() {
        println!("max |Rust - scikit-learn| prediction: {max_diff:.3e}");
    }
}
