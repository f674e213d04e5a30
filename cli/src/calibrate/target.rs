//! What a calibration's new references are: the recorder's mode and window
//! for the sample period asked, whether they can join the base model's
//! references, and whether the path fits that period.

use opsel::model::{KnnModelFile, ProbingMode};
use opsel::sys::linux::ops_driver::auto_rtt_limit_ms;
use opsel::{Error, Result};
use opsel_netlab::collect::{Condition, Mode};

/// What the new references are: their series' mode and window, and whether
/// they can join the base model's references.
pub(super) struct Target {
    pub mode: Mode,
    /// Window in samples of `mode`'s series.
    pub w: usize,
    /// The same window in seconds (what the recorder counts).
    pub w_s: usize,
    pub sample_ms: f64,
    /// A period or window other than the base model's: the written model
    /// holds the new references alone (series at another rate cannot be
    /// compared by DTW with the base model's).
    pub own_only: bool,
}

/// The recorder's mode for passive probing every `ms` milliseconds.
fn passive_every(ms: f64) -> Result<Mode> {
    if ms == 1000.0 {
        Ok(Mode::Passive)
    } else {
        Mode::parse(&format!("passive-{ms}ms")).map_err(|_| {
            Error::invalid(format!(
                "a sample every {ms} ms: use a divisor of 1000 ms from 10 to 500 (e.g. --sample-ms 200), or 1000"
            ))
        })
    }
}

pub(super) fn target(
    base: &KnnModelFile,
    sample_ms: Option<u32>,
    window_s: Option<u32>,
) -> Result<Target> {
    let base_ms = base.meta.probing.sample_interval_ms;
    let base_w = base.model.window();
    let sample_ms = sample_ms.map_or(base_ms, f64::from);
    if sample_ms != base_ms {
        passive_every(sample_ms)?;
    }
    let window_ms = match window_s {
        Some(s) => f64::from(s) * 1e3,
        None => base_w as f64 * base_ms,
    };
    let w = (window_ms / sample_ms).round() as usize;
    if w == 0 || (w as f64 * sample_ms - window_ms).abs() > 1e-6 || window_ms % 1e3 != 0.0 {
        return Err(Error::invalid(format!(
            "a window of {} s is not whole seconds made of samples every {sample_ms} ms; choose --window-s accordingly",
            window_ms / 1e3
        )));
    }
    let own_only = sample_ms != base_ms || w != base_w;
    let mode = match base.meta.probing.mode {
        ProbingMode::Passive => passive_every(sample_ms)?,
        ProbingMode::Active if own_only => {
            return Err(Error::invalid(
                "--sample-ms and --window-s other than the base model's need a passive base model \
                 (active patterns are recorded at 1 Hz in the pattern's own windows)",
            ))
        }
        ProbingMode::Active => {
            Mode::parse(base.meta.probing.pattern.as_deref().ok_or_else(|| {
                Error::invalid(
                    "the base model is active but names no pattern; retrain it or pass a passive model",
                )
            })?)?
        }
    };
    Ok(Target {
        mode,
        w,
        w_s: (window_ms / 1e3) as usize,
        sample_ms,
        own_only,
    })
}

/// Whether OPS can use a model sampled every `period_ms` on a path whose
/// largest RTT (base RTT plus a full buffer) is `worst_ms`: the same limit
/// `--model auto` keeps the 5-Hz model under, 90 % of the driver's echo
/// timeout at that period (the recorder's wait, until 2 ms before the next
/// burst, at most the configured 400 ms;
/// `opsel::sys::linux::ops_driver::auto_rtt_limit_ms`), so a calibrated
/// model and auto agree on which paths a period serves. Below 400 ms of
/// period it is the recorder's own limit (`Mode::check_fits`).
fn ops_can_sample(period_ms: u32, worst_ms: f64) -> bool {
    worst_ms <= auto_rtt_limit_ms(&default_burst(), u64::from(period_ms) * 1_000_000)
}

fn default_burst() -> opsel::sys::linux::rtt::BurstConfig {
    opsel::sys::linux::ops_driver::DriverConfig::default().burst
}

#[cfg(test)]
mod ops_limit_tests {
    use super::ops_can_sample;

    #[test]
    fn two_hundred_ms_serves_paths_up_to_170_ms() {
        // 90 % of the 189-ms wait (200 ms less 9 ms of echoes and 2 ms).
        assert!(ops_can_sample(200, 170.0));
        assert!(!ops_can_sample(200, 170.5));
        // 90 % of 89 ms.
        assert!(ops_can_sample(100, 80.0));
        assert!(!ops_can_sample(100, 80.5));
        // At 1 s the configured 400-ms timeout is the cap: 360 ms.
        assert!(ops_can_sample(1000, 360.0));
        assert!(!ops_can_sample(1000, 361.0));
    }
}

/// `condition` must fit the sample period, for the recorder (Mode::check_fits)
/// and for OPS using the model afterwards; if it does not, name the shortest
/// period that does.
pub(super) fn check_fits(mode: &Mode, c: &Condition) -> Result<()> {
    let worst = c.rtt_ms * (1.0 + c.buffer_bdp);
    let fits = |m: &Mode| {
        let ms = (m.sample_ns() / 1_000_000) as u32;
        m.check_fits(c).is_ok() && (ms >= 1000 || ops_can_sample(ms, worst))
    };
    if fits(mode) {
        return Ok(());
    }
    let ms = (mode.sample_ns() / 1_000_000) as u32;
    let why = match mode.check_fits(c) {
        Err(e) => e.to_string(),
        Ok(()) => format!(
            "condition {}: its largest RTT ({worst:.0} ms) is more than 90 % of what OPS waits for a \
             burst's echoes when it samples every {ms} ms ({:.0} ms)",
            c.name,
            opsel::sys::linux::ops_driver::echo_timeout_ns(&default_burst(), mode.sample_ns()) as f64
                / 1e6
        ),
    };
    let hint = [200u32, 250, 500]
        .into_iter()
        .find(|&p| fits(&Mode::PassiveEvery { period_ms: p }))
        .map_or("--sample-ms 1000".to_string(), |p| {
            format!("--sample-ms {p} (or 1000)")
        });
    Err(Error::invalid(format!(
        "{why}\n(for opsel calibrate: {hint})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opsel::knn::Model;
    use opsel::mix::SIX_CLASSES;

    fn base(window: usize, radius: usize) -> KnnModelFile {
        let refs: Vec<f64> = (0..6 * window).map(|i| 10.0 + (i % 7) as f64).collect();
        let labels: Vec<u32> = (0..6).collect();
        let mut config = opsel::knn::KnnConfig::default();
        config.dtw.radius = Some(radius);
        let model = Model::fit(
            &refs,
            window,
            &labels,
            SIX_CLASSES.iter().map(|c| c.to_string()).collect(),
            config,
        )
        .unwrap();
        KnnModelFile {
            stage2: None,
            model,
            meta: Default::default(),
        }
    }

    #[test]
    fn the_base_models_period_and_window_extend_it() {
        let b = base(40, 20);
        let t = target(&b, None, None).unwrap();
        assert_eq!(
            (t.mode.clone(), t.w, t.w_s, t.own_only),
            (Mode::Passive, 40, 40, false)
        );
        let t = target(&b, Some(1000), Some(40)).unwrap();
        assert!(!t.own_only);
    }

    #[test]
    fn another_period_or_window_writes_the_paths_own_model() {
        let b = base(40, 20);
        let t = target(&b, Some(200), Some(10)).unwrap();
        assert_eq!(t.mode, Mode::PassiveEvery { period_ms: 200 });
        assert_eq!((t.w, t.w_s, t.sample_ms, t.own_only), (50, 10, 200.0, true));
        // Only the window changes: still the path's own model, at 1 Hz.
        let t = target(&b, None, Some(20)).unwrap();
        assert_eq!((t.mode.clone(), t.w, t.own_only), (Mode::Passive, 20, true));
        // The window defaults to the base model's seconds: 40 s = 200 samples.
        let t = target(&b, Some(200), None).unwrap();
        assert_eq!((t.w, t.w_s), (200, 40));
    }

    #[test]
    fn periods_the_recorder_cannot_keep_are_refused() {
        let b = base(40, 20);
        for ms in [0, 300, 700] {
            let e = target(&b, Some(ms), Some(10)).err().map(|e| e.to_string());
            assert!(
                e.as_deref().is_some_and(|e| e.contains("divisor of 1000")),
                "{ms}: {e:?}"
            );
        }
        assert!(target(&b, Some(200), Some(3)).is_ok());
        let mut active = base(20, 10);
        active.meta.probing.mode = ProbingMode::Active;
        active.meta.probing.pattern = Some("S5-C5-S5-B5".into());
        let e = target(&active, Some(200), Some(10))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("passive base model"), "{e}");
        assert!(target(&active, None, None).is_ok());
    }

    #[test]
    fn a_condition_too_slow_for_the_period_names_one_that_fits() {
        let c = |rtt_ms: f64, buffer_bdp: f64| Condition {
            name: format!("r20-d{rtt_ms}-b{buffer_bdp}"),
            rate_mbps: 20.0,
            rtt_ms,
            buffer_bdp,
            mtu: 1500,
        };
        let at = |ms| Mode::PassiveEvery { period_ms: ms };
        // 300 ms at most: too long for the recorder at 200 ms; at 500 ms
        // the recorder (440 ms) and OPS (90 % of 400 ms) both keep it.
        let e = check_fits(&at(200), &c(150.0, 1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not fit") && e.contains("--sample-ms 500 (or 1000)"),
            "{e}"
        );
        assert!(check_fits(&Mode::Passive, &c(150.0, 1.0)).is_ok());
        // 400 ms: the recorder keeps 500-ms samples, but OPS waits at most
        // the configured 400 ms.
        let e = check_fits(&at(500), &c(200.0, 1.0))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("more than 90 % of what OPS waits") && e.contains("(400 ms)"),
            "{e}"
        );
        assert!(e.contains("--sample-ms 1000"), "{e}");
        // At 200 ms OPS waits as long as the recorder: 170 ms fits (the
        // longest training condition is 127 ms), 172 ms does not.
        assert!(check_fits(&at(200), &c(60.0, 1.0)).is_ok());
        assert!(check_fits(&at(200), &c(100.0, 0.27)).is_ok());
        assert!(check_fits(&at(200), &c(85.0, 1.0)).is_ok());
        let e = check_fits(&at(200), &c(86.0, 1.0)).unwrap_err().to_string();
        assert!(e.contains("does not fit"), "{e}");
        // The external conditions the 200-ms models were run at fit (84 ms at most).
        assert!(check_fits(&at(200), &c(67.0, 0.26)).is_ok());
        assert!(check_fits(&at(200), &c(42.0, 1.0)).is_ok());
    }
}
