//! Replay FastProb and the baselines over recorded logs and summarise each method
//! with the metrics of 004 §9 (MAPE, mean probe time, share of errors > 50 %).

use super::baselines::{ArVariant, Baseline, Denominator};
use super::metrics::{summarise, Estimate, Summary, TransferLog, MIN_LABEL_SAMPLES};
use super::model::FastProbModel;
use crate::error::{Error, Result};
use serde::Serialize;

/// One method's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MethodResult {
    pub method: String,
    pub summary: Summary,
}

/// The baselines of 004 §III/§V at the log's interval: closeness θ ∈ {5, 10, 20,
/// 30} %, AR(3) and cubic-trend AR (5 %, cap `cap`), last-4 mean after 5 and `cap`
/// samples, fixed duration of 5 and 8 intervals (the paper's 5 s / 8 s at i = 1 s),
/// fixed size of `fixed_size_bytes`.
pub fn default_baselines(
    interval_ns: u64,
    cap: usize,
    fixed_size_bytes: u64,
) -> Vec<(String, Baseline)> {
    let mut v = Vec::new();
    for theta in [0.05, 0.1, 0.2, 0.3] {
        v.push((
            format!("closeness θ={:.0}%", theta * 100.0),
            Baseline::Closeness {
                theta,
                denominator: Denominator::Max,
                cap: None,
            },
        ));
    }
    for (name, variant) in [
        ("AR(3)", ArVariant::Ar3),
        ("AR cubic trend", ArVariant::CubicTrend),
    ] {
        v.push((
            format!("{name} 5% cap {cap}"),
            Baseline::Ar {
                variant,
                tolerance: 0.05,
                cap,
            },
        ));
    }
    for stop in [5, cap] {
        v.push((
            format!("last-4 mean at {stop}"),
            Baseline::LastK { k: 4, stop },
        ));
    }
    for n in [5u64, 8] {
        v.push((
            format!("fixed duration {n} intervals"),
            Baseline::FixedDuration {
                duration_ns: n * interval_ns,
            },
        ));
    }
    if fixed_size_bytes > 0 {
        v.push((
            format!("fixed size {fixed_size_bytes} B"),
            Baseline::FixedSize {
                bytes: fixed_size_bytes,
            },
        ));
    }
    v
}

/// Evaluate `model` (if any: FastProb and its fixed-n regressors for `fixed_n`) and
/// `baselines` on `logs`. Every log must have one interval and ≥ 60 samples.
pub fn evaluate(
    model: Option<&FastProbModel>,
    fixed_n: &[usize],
    baselines: &[(String, Baseline)],
    logs: &[TransferLog],
) -> Result<Vec<MethodResult>> {
    let Some(first) = logs.first() else {
        return Err(Error::invalid("no transfer logs to evaluate"));
    };
    let iv = first.interval_ns;
    for (i, l) in logs.iter().enumerate() {
        l.validate(MIN_LABEL_SAMPLES)
            .map_err(|e| Error::invalid(format!("log {i}: {e}")))?;
        if l.interval_ns != iv {
            return Err(Error::invalid(format!(
                "log {i} has interval {} ns, log 0 has {iv} ns; evaluate one interval at a time",
                l.interval_ns
            )));
        }
    }
    if let Some(m) = model {
        if m.spec().interval_ns != iv {
            return Err(Error::invalid(format!(
                "the model was trained at interval {} ns but the logs are sampled every {iv} ns",
                m.spec().interval_ns
            )));
        }
    }
    let labels: Vec<f64> = logs.iter().map(|l| l.t_avg_bps()).collect::<Result<_>>()?;
    let mut out = Vec::new();
    let mut run = |name: String, f: &dyn Fn(&[f64]) -> Result<Estimate>| -> Result<()> {
        let mut r = Vec::with_capacity(logs.len());
        for (l, y) in logs.iter().zip(&labels) {
            r.push((f(&l.samples_bps)?, *y));
        }
        out.push(MethodResult {
            method: name,
            summary: summarise(&r, iv)?,
        });
        Ok(())
    };
    if let Some(m) = model {
        run("FastProb".into(), &|s| m.replay(s))?;
        for &n in fixed_n {
            run(format!("fixed-n RF n={n}"), &|s| {
                Ok(Estimate {
                    samples: n,
                    prediction_bps: m.predict_fixed(&s[..n])?,
                    forced: false,
                })
            })?;
        }
    }
    for (name, b) in baselines {
        run(name.clone(), &|s| b.run(s, iv))?;
    }
    Ok(out)
}

/// The results as a markdown table.
pub fn markdown(results: &[MethodResult]) -> String {
    let mut s = String::from(
        "| method | transfers | MAPE % | median error % | mean probe s | error > 50 % (share %) | forced % |\n|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let m = &r.summary;
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} |\n",
            r.method,
            m.transfers,
            m.mape_pct,
            m.median_error_pct,
            m.mean_probe_s,
            m.over_50_pct,
            m.forced_pct
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_on_flat_logs_are_exact() {
        let logs: Vec<TransferLog> = (1..=4)
            .map(|k| TransferLog::new(1_000_000_000, vec![k as f64 * 1e8; 60], 60).unwrap())
            .collect();
        let b = default_baselines(1_000_000_000, 15, 1_000_000);
        let r = evaluate(None, &[], &b, &logs).unwrap();
        assert_eq!(r.len(), b.len());
        for m in &r {
            // A flat log is its own mean: every method is exact.
            assert!(
                m.summary.mape_pct < 1e-6,
                "{}: {}",
                m.method,
                m.summary.mape_pct
            );
        }
        let close = r
            .iter()
            .find(|m| m.method.starts_with("closeness θ=5"))
            .unwrap();
        assert_eq!(close.summary.mean_probe_s, 2.0);
        assert!(markdown(&r).contains("| closeness θ=5% | 4 |"));
    }

    #[test]
    fn mixed_intervals_and_empty_sets_are_errors() {
        let a = TransferLog::new(1, vec![1.0; 60], 60).unwrap();
        let b = TransferLog::new(2, vec![1.0; 60], 60).unwrap();
        assert!(evaluate(None, &[], &[], &[a, b]).is_err());
        assert!(evaluate(None, &[], &[], &[]).is_err());
        let short = TransferLog {
            interval_ns: 1,
            samples_bps: vec![1.0; 10],
        };
        assert!(evaluate(None, &[], &[], &[short]).is_err());
    }
}
