//! `--model auto` for passive OPS: the 5-Hz model (a sample every 200 ms,
//! 10-s windows) when the path's RTTs fit its echo timeout, the 1 Hz model
//! otherwise (docs/results/generalisation.md "Five samples a second...").
//!
//! The rule is a pure function of what the sender measures with the 5-Hz
//! prober itself ([`AutoWatch`]):
//!
//! * the first burst goes out as the transfer starts, before the transfer's
//!   own queue builds: it measures the base RTT (plus whatever queue a
//!   background already keeps);
//! * the queue the transfer and the background build shows up within the
//!   first seconds. So during the first two 5-Hz windows (20 s) every
//!   burst, the first included, must have a mean RTT at most the limit and
//!   must not look late; the first that fails switches to the 1 Hz model
//!   for the rest of the transfer. A path too long for 5 Hz (a base RTT over
//!   the limit) thus falls back at its first burst, 0.1–0.2 s in; one whose
//!   queue pushes the RTT over the limit falls back when it does.
//!
//! An echo can go unanswered for two reasons: its RTT passed the timeout
//! (the path is too long for 5 Hz), or the bottleneck dropped it (a full
//! drop-tail queue drops echoes as it drops the flows' packets). The burst's
//! mean skips lost echoes (`rtt::Burst::mean_rtt_ns`), so a drop costs the
//! model nothing; falling back on every drop would send most shallow-buffer
//! paths with a CUBIC background to the 40-s model. Within one 10-ms burst
//! the RTT moves by a few ms at most (a queue fed at twice its drain rate
//! grows 1 ms per ms), so an echo late past the 189-ms timeout leaves its
//! answered neighbours above the 170-ms limit, which the mean rule catches.
//! A partly answered burst is therefore judged by its mean alone. A burst
//! with no reply at all is late when it is the first (no base RTT), when the
//! burst before it was above 75 % of the limit (the queue may have grown
//! past the timeout within a period), or when it is the third within the
//! watch.
//!
//! The limit is 90 % of the 5-Hz driver's echo timeout ([`echo_timeout_ns`]:
//! the recorder's wait, 189 ms at a 200-ms period, so 170.1 ms), the same
//! limit as the recorder's rule for what a 5-Hz condition may reach (netlab
//! `Mode::check_fits`; the model was trained on conditions up to 127 ms).
//! [`run_auto`] runs the two drivers back to back on one socket and one
//! source.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{DriverEvent, DriverReport, EndReason, OpsDriver, Source};
use crate::ops::{Classifier, Policy, Stats};
use crate::sys::linux::rtt::BurstConfig;
use crate::{Error, Result};

/// 5-Hz windows during which a lost echo or a too-large RTT still switches
/// to the 1 Hz model.
pub const AUTO_WATCH_WINDOWS: u64 = 2;

/// The reply timeout of the driver's echo bursts at `period_ns`: the
/// configured timeout, capped at the netlab recorder's wait, until 2 ms
/// before the next burst is due ([`BurstConfig::timeout_within_ns`]: 189 ms
/// at 200 ms with 10 echoes 1 ms apart). One function so the driver, the
/// auto rule and `opsel calibrate` agree; the controller places a reply
/// that late by its burst's start (`run_loop.rs`).
pub fn echo_timeout_ns(burst: &BurstConfig, period_ns: u64) -> u64 {
    burst.timeout_ns.min(burst.timeout_within_ns(period_ns))
}

/// Largest burst mean RTT (ms) the auto rule accepts at `period_ns`: 90 % of
/// [`echo_timeout_ns`].
pub fn auto_rtt_limit_ms(burst: &BurstConfig, period_ns: u64) -> f64 {
    0.9 * echo_timeout_ns(burst, period_ns) as f64 / 1e6
}

/// Which model `--model auto` ran with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AutoModel {
    /// The 5-Hz model for the whole transfer.
    Fast,
    /// The 1 Hz model (from the start, or after a fallback).
    Slow,
}

/// The model `--model auto` used and why (for the events output and the
/// JSON report).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AutoChoice {
    pub model: AutoModel,
    /// The rule that chose it, with the measured values.
    pub reason: String,
    /// When the 5-Hz model gave way, from the start of the run (ns).
    pub switched_after_ns: Option<u64>,
    /// The first burst's mean RTT, if it was answered: the base RTT, plus
    /// whatever queue a background already keeps (it goes out before the
    /// transfer's own queue builds).
    pub base_rtt_ms: Option<f64>,
}

/// The auto rule over the 5-Hz prober's samples (see the module docs).
#[derive(Debug, Clone)]
pub struct AutoWatch {
    limit_ms: f64,
    echoes: u16,
    watch_ns: u64,
    samples: u64,
    /// Bursts with no reply so far (read as drops).
    silent_bursts: u32,
    /// The previous burst's mean RTT.
    last_rtt_ms: Option<f64>,
    /// The first burst's mean RTT.
    pub base_rtt_ms: Option<f64>,
}

/// Share of the limit above which a burst without any reply, after one
/// answered burst, reads as late.
const LATE_SHARE: f64 = 0.75;
/// Bursts without any reply the watch reads as drops before it falls back.
const SILENT_BURSTS_TOLERATED: u32 = 2;

impl AutoWatch {
    /// The rule for a 5-Hz driver with `burst` at `period_ns` whose windows
    /// hold `window` samples.
    pub fn new(burst: &BurstConfig, period_ns: u64, window: usize) -> AutoWatch {
        AutoWatch {
            limit_ms: auto_rtt_limit_ms(burst, period_ns),
            echoes: burst.count,
            watch_ns: AUTO_WATCH_WINDOWS
                .saturating_mul(window as u64)
                .saturating_mul(period_ns),
            samples: 0,
            silent_bursts: 0,
            last_rtt_ms: None,
            base_rtt_ms: None,
        }
    }

    /// The RTT limit (ms).
    pub fn limit_ms(&self) -> f64 {
        self.limit_ms
    }

    /// One 5-Hz sample, `since_ns` after the run began: `Some(reason)` when
    /// the transfer must go on with the 1 Hz model.
    pub fn observe(&mut self, since_ns: u64, rtt_ms: Option<f64>, answered: u16) -> Option<String> {
        let first = self.samples == 0;
        self.samples += 1;
        if first {
            self.base_rtt_ms = rtt_ms;
        } else if since_ns > self.watch_ns {
            return None;
        }
        let lim = self.limit_ms;
        let what = if first {
            "the first burst (the base RTT)".to_string()
        } else {
            format!("a burst after {:.1} s", since_ns as f64 / 1e9)
        };
        let prev = self.last_rtt_ms;
        self.last_rtt_ms = rtt_ms.or(prev);
        if answered == 0 {
            let late_at = LATE_SHARE * lim;
            let late = if first {
                true
            } else {
                self.silent_bursts += 1;
                prev.is_none_or(|p| p > late_at) || self.silent_bursts > SILENT_BURSTS_TOLERATED
            };
            if late {
                return Some(format!(
                    "{} of {} echoes of {what} unanswered within the 5-Hz timeout ({:.0} ms){}",
                    self.echoes,
                    self.echoes,
                    lim / 0.9,
                    match prev {
                        _ if first => String::new(),
                        Some(p) if p > late_at => format!(", the burst before at {p:.1} ms"),
                        _ => format!(", {} bursts without a reply", self.silent_bursts),
                    }
                ));
            }
        }
        match rtt_ms {
            Some(r) if r > lim => Some(format!(
                "RTT {r:.1} ms of {what} is above the 5-Hz limit ({lim:.0} ms)"
            )),
            _ => None,
        }
    }
}

/// Run passive OPS with the auto rule: `fast` (the 5-Hz model's driver)
/// first, watched by [`AutoWatch`]; when the rule says so it is stopped and
/// `slow` (the 1 Hz model's driver, fresh) carries on on the same socket
/// from where `fast` left the source, for what remains of the time limit.
/// `on_choice` hears the choice as it is made (at the fallback, or when the
/// watch ends with the 5-Hz model kept). The caller's `stop` is seen at
/// each event (within one 200-ms sample). The merged report sums both
/// runs' bytes, CCA sets, lost samples and controller counters.
///
/// With a [`Source::File`] sent by `sendfile` the second driver starts at
/// the first byte not sent; a [`Source::Reader`] loses the bytes the first
/// driver had read but not yet sent (fine for a generated stream).
pub fn run_auto<C1, P1, C2, P2>(
    mut fast: OpsDriver<C1, P1>,
    mut slow: OpsDriver<C2, P2>,
    sock: impl AsFd,
    source: &mut Source<'_>,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
    on_choice: &mut dyn FnMut(&AutoChoice),
) -> Result<(DriverReport, AutoChoice)>
where
    C1: Classifier,
    P1: Policy,
    C2: Classifier,
    P2: Policy,
{
    let period = fast.ctl.config().sample_period_ns;
    if slow.ctl.config().sample_period_ns <= period {
        return Err(Error::invalid(
            "auto model: the fallback model must sample more slowly than the first one",
        ));
    }
    let mut watch = AutoWatch::new(&fast.cfg.burst, period, fast.ctl.window_len());
    let fd = sock.as_fd();
    let halt = AtomicBool::new(false);
    let mut fell_back: Option<(String, u64)> = None;
    let mut kept_told = false;
    // The run's start: the grid origin when the first sample comes in (it
    // moves only at the next probe's start, a window or more later).
    let origin = fast.origin.clone();
    let mut t0: Option<u64> = None;
    let r1 = fast.run_source(fd, source, &halt, &mut |e| {
        on_event(e);
        if stop.load(Ordering::Relaxed) {
            halt.store(true, Ordering::Relaxed);
        }
        if let DriverEvent::Rtt {
            at_ns,
            rtt_ms,
            answered,
        } = e
        {
            if fell_back.is_some() || kept_told {
                return;
            }
            let t0 = *t0.get_or_insert_with(|| origin.load(Ordering::Relaxed));
            let since = at_ns.saturating_sub(t0);
            if let Some(why) = watch.observe(since, *rtt_ms, *answered) {
                fell_back = Some((why, since));
                halt.store(true, Ordering::Relaxed);
            } else if since > watch.watch_ns {
                kept_told = true;
                on_choice(&kept(&watch));
            }
        }
    })?;
    let Some((why, since)) = fell_back else {
        let c = kept(&watch);
        if !kept_told {
            on_choice(&c);
        }
        return Ok((r1, c));
    };
    let choice = AutoChoice {
        model: AutoModel::Slow,
        reason: format!("1 Hz model: {why}"),
        switched_after_ns: Some(since),
        base_rtt_ms: watch.base_rtt_ms,
    };
    on_choice(&choice);
    if stop.load(Ordering::Relaxed) || r1.end != EndReason::Stopped {
        return Ok((r1, choice));
    }
    let used = r1.ended_ns.saturating_sub(r1.started_ns);
    if let Some(l) = slow.cfg.time_limit_ns.as_mut() {
        *l = l.saturating_sub(used).max(1);
    }
    let r2 = slow.run_source(fd, source, stop, on_event)?;
    Ok((
        DriverReport {
            bytes_sent: r1.bytes_sent + r2.bytes_sent,
            started_ns: r1.started_ns,
            ended_ns: r2.ended_ns,
            end: r2.end,
            stats: sum_stats(&r1.stats, &r2.stats),
            cca_sets: r1.cca_sets + r2.cca_sets,
            lost_samples: r1.lost_samples + r2.lost_samples,
        },
        choice,
    ))
}

/// Both runs' controller counters (a probe the 5-Hz model left unfinished
/// at the fallback counts as probing time, not as a decision).
fn sum_stats(a: &Stats, b: &Stats) -> Stats {
    Stats {
        decisions: a.decisions + b.decisions,
        early_exits: a.early_exits + b.early_exits,
        prior_exits: a.prior_exits + b.prior_exits,
        prior_overruled: a.prior_overruled + b.prior_overruled,
        failed_decisions: a.failed_decisions + b.failed_decisions,
        gate_exits: a.gate_exits + b.gate_exits,
        incomplete_probes: a.incomplete_probes + b.incomplete_probes,
        cca_switches: a.cca_switches + b.cca_switches,
        probe_ns: a.probe_ns + b.probe_ns,
        steady_ns: a.steady_ns + b.steady_ns,
        probe_bytes: a.probe_bytes + b.probe_bytes,
        steady_bytes: a.steady_bytes + b.steady_bytes,
    }
}

fn kept(w: &AutoWatch) -> AutoChoice {
    AutoChoice {
        model: AutoModel::Fast,
        reason: format!(
            "5-Hz model: first burst {}; every burst of the first {:.0} s (or until the end) with a mean RTT at most {:.0} ms, none late",
            w.base_rtt_ms
                .map_or("-".to_string(), |r| format!("{r:.1} ms")),
            w.watch_ns as f64 / 1e9,
            w.limit_ms
        ),
        switched_after_ns: None,
        base_rtt_ms: w.base_rtt_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P5: u64 = 200_000_000;
    const S: u64 = 1_000_000_000;

    fn burst() -> BurstConfig {
        super::super::DriverConfig::default().burst
    }

    /// The 5-Hz model's watch: 50 samples a window, two windows watched.
    fn watch() -> AutoWatch {
        AutoWatch::new(&burst(), P5, 50)
    }

    #[test]
    fn the_limit_is_ninety_percent_of_the_recorders_timeout() {
        // 400 ms configured, capped at the recorder's wait at 200 ms: until
        // 2 ms before the next burst, after the 9 ms of echoes.
        assert_eq!(echo_timeout_ns(&burst(), P5), 189_000_000);
        assert!((auto_rtt_limit_ms(&burst(), P5) - 170.1).abs() < 1e-9);
        assert_eq!(watch().limit_ms(), auto_rtt_limit_ms(&burst(), P5));
        // At 100 ms: 89 ms, limit 80.1 ms.
        assert_eq!(echo_timeout_ns(&burst(), P5 / 2), 89_000_000);
        // At 1 Hz the configured 400 ms is below the recorder's 989 ms.
        assert_eq!(echo_timeout_ns(&burst(), S), 400_000_000);
        let long = BurstConfig {
            timeout_ns: 2 * S,
            ..burst()
        };
        assert_eq!(echo_timeout_ns(&long, S), 989_000_000);
        assert_eq!(watch().watch_ns, 20 * S);
    }

    #[test]
    fn a_short_path_keeps_the_5hz_model() {
        let mut w = watch();
        assert_eq!(w.observe(9_000_000, Some(20.4), 10), None);
        // The queue builds to 170 ms: still under 170.1 ms, every echo
        // answered.
        for k in 1..100u64 {
            let r = 20.0 + 2.0 * (k as f64).min(75.0);
            assert_eq!(w.observe(k * P5, Some(r), 10), None, "sample {k}");
        }
        assert_eq!(w.base_rtt_ms, Some(20.4));
        let c = kept(&w);
        assert_eq!(c.model, AutoModel::Fast);
        assert!(c.reason.contains("first burst 20.4 ms"), "{}", c.reason);
    }

    #[test]
    fn a_long_base_rtt_falls_back_at_the_first_burst() {
        // 200 ms base: every echo is late at 5 Hz.
        let mut w = watch();
        let why = w.observe(198_000_000, None, 0).unwrap();
        assert!(
            why.contains("10 of 10 echoes of the first burst (the base RTT) unanswered within the 5-Hz timeout (189 ms)"),
            "{why}"
        );
        // 175 ms base: answered, but above 170.1 ms.
        let mut w = watch();
        let why = w.observe(185_000_000, Some(175.0), 10).unwrap();
        assert!(
            why.contains(
                "RTT 175.0 ms of the first burst (the base RTT) is above the 5-Hz limit (170 ms)"
            ),
            "{why}"
        );
        assert_eq!(w.base_rtt_ms, Some(175.0));
        // 67 ms with a small buffer (an external condition the 5-Hz model
        // decided right live) is kept, and so is a 127-ms path (the longest
        // condition the model was trained on: 100 ms base, 0.27 × BDP).
        let mut w = watch();
        assert_eq!(w.observe(76_000_000, Some(67.0), 10), None);
        assert_eq!(w.observe(P5, Some(84.0), 10), None);
        let mut w = watch();
        assert_eq!(w.observe(110_000_000, Some(100.5), 10), None);
        assert_eq!(w.observe(P5, Some(127.0), 10), None);
        assert_eq!(w.observe(2 * P5, Some(170.0), 10), None);
    }

    #[test]
    fn a_growing_queue_falls_back_within_the_watch_only() {
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        assert_eq!(w.observe(P5, Some(60.0), 10), None);
        // A dropped echo at 80 ms: the answered ones are under the limit.
        assert_eq!(w.observe(2 * P5, Some(80.0), 9), None);
        // Answered ones above the limit: late.
        let why = w.observe(3 * P5, Some(172.0), 6).unwrap();
        assert!(why.contains("RTT 172.0 ms of a burst after 0.6 s"), "{why}");
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        let why = w.observe(19 * S, Some(175.0), 10).unwrap();
        assert!(
            why.contains("RTT 175.0 ms of a burst after 19.0 s is above the 5-Hz limit (170 ms)"),
            "{why}"
        );
        // A burst with no reply right after one above 75 % of the limit
        // (127.6 ms) is late; after one at 120 ms it reads as a drop.
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        assert_eq!(w.observe(P5, Some(140.0), 10), None);
        let why = w.observe(2 * P5, None, 0).unwrap();
        assert!(why.contains("the burst before at 140.0 ms"), "{why}");
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        assert_eq!(w.observe(P5, Some(120.0), 10), None);
        assert_eq!(w.observe(2 * P5, None, 0), None);
        // After two windows the model is kept whatever comes.
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        assert_eq!(w.observe(21 * S, Some(150.0), 3), None);
        assert_eq!(w.observe(22 * S, None, 0), None);
    }

    #[test]
    fn drops_at_a_short_rtt_are_not_read_as_late() {
        // A drop-tail bottleneck drops an echo or a whole burst now and then;
        // the burst's mean skips lost echoes, so the 5-Hz model is kept.
        let mut w = watch();
        assert_eq!(w.observe(0, Some(30.0), 10), None);
        assert_eq!(w.observe(P5, Some(45.0), 7), None);
        assert_eq!(w.observe(2 * P5, None, 0), None);
        assert_eq!(w.observe(3 * P5, Some(50.0), 10), None);
        assert_eq!(w.observe(4 * P5, None, 0), None);
        // A third burst without a reply within the watch is read as late.
        let why = w.observe(5 * P5, None, 0).unwrap();
        assert!(why.contains("3 bursts without a reply"), "{why}");
        // A path whose base RTT is near the limit keeps the 5-Hz model
        // through drops: the mean decides.
        let mut w = watch();
        assert_eq!(w.observe(0, Some(140.0), 10), None);
        assert_eq!(w.observe(P5, Some(165.0), 7), None);
        assert_eq!(w.observe(2 * P5, Some(169.5), 9), None);
    }
}
