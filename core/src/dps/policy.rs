//! DPS as an OPS decision policy: the OPS controller's classification is
//! DPS's network-state label and its steady phase is DPS's monitoring period.

use super::agent::{Agent, AgentStats, Decision};
use super::feedback::Feedback;
use super::select::Database;
use super::spec::DpsSpec;
use crate::error::{Error, Result};
use crate::ops::{Classified, Policy};
use crate::probe::CcaName;
use std::sync::{Arc, Mutex, MutexGuard};

/// A learning [`Policy`] for the OPS controller (002 DPS on top of 000 OPS).
///
/// How the two fit together:
/// * **OPS's classification is a DPS input.** 002 keeps statistics per
///   "network state label" but never fills the label in (002 Fig 4.2; the
///   note §0 names OPS's background-mix recognition as the natural source).
///   Here every [`Policy::select`] gives the recognised background mix
///   (`Classified::mix`, canonical form) as the label, so DPS learns which
///   CCA meets the application's QoS *in each background*, where OPS's stump
///   applies a fixed rule.
/// * **The steady phase is the monitoring period.** Each `select` closes the
///   period that began at the previous one (Alg 2 for the CCA that ran) and
///   runs Alg 3 for the next. The OPS controller fixes the steady time Y, so
///   the t/T distinction of Alg 3 is reported in the decision but not
///   applied; with [`Agent`] driven directly, it is.
/// * **Feedback** arrives through [`Policy::observe`] (RTT and delivery
///   rate per interval, see [`Feedback`]), during steady phases only. The
///   policy is a cheap handle (`Clone` shares the learner), so a driver can
///   keep a clone and call `observe` while the controller owns the other.
///   Time comes from `Feedback::at_ns`; the guard after a switch starts
///   with the first sample after the decision (the OPS probe runs between
///   the last steady sample and the new CCA's first).
#[derive(Debug, Clone)]
pub struct DpsPolicy {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    agent: Agent,
    now_ns: u64,
    last: Option<Decision>,
}

impl DpsPolicy {
    /// A policy learning with `spec`.
    pub fn new(spec: &DpsSpec) -> Result<Self> {
        let mut agent = Agent::new(spec)?;
        agent.set_externally_clocked(true);
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                agent,
                now_ns: 0,
                last: None,
            })),
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        self.inner.lock().map_err(|_| {
            Error::invalid("DPS policy state is unusable: a thread panicked while holding it")
        })
    }

    /// The last decision (CCA, Alg 3 reason, t/T).
    pub fn last_decision(&self) -> Result<Option<Decision>> {
        Ok(self.lock()?.last)
    }

    /// Counters of the learner.
    pub fn stats(&self) -> Result<AgentStats> {
        Ok(self.lock()?.agent.stats())
    }

    /// A copy of the Framework Database (statistics per background mix).
    pub fn database(&self) -> Result<Database> {
        Ok(self.lock()?.agent.database().clone())
    }
}

impl Policy for DpsPolicy {
    fn select(&mut self, c: &Classified) -> Result<CcaName> {
        let mut g = self.lock()?;
        let label = c.mix.canonical();
        let now = g.now_ns;
        let d = if g.agent.stats().cycles == 0 {
            g.agent.set_network_state(&label);
            g.agent.start(now)?;
            // `start` queued the decision as an event; recover it.
            let mut dec = None;
            while let Some(o) = g.agent.poll() {
                if let super::Output::Event(super::Event::Decided { decision, .. }) = o {
                    dec = Some(decision);
                }
            }
            dec.ok_or_else(|| Error::invalid("DPS agent made no first decision"))?
        } else {
            let d = g.agent.end_period(now, Some(&label))?;
            while g.agent.poll().is_some() {}
            d
        };
        g.last = Some(d);
        Ok(d.cca)
    }

    fn observe(&mut self, fb: &Feedback) -> Result<()> {
        let mut g = self.lock()?;
        g.now_ns = g.now_ns.max(fb.at_ns);
        let now = g.now_ns;
        g.agent.handle_feedback(now, fb)?;
        // Only events are queued here (no switches: the cycle is external).
        while g.agent.poll().is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Mix;

    fn classified(label: &str) -> Classified {
        Classified {
            mix: Mix::parse(label).unwrap(),
            class_index: 0,
            confidence: 1.0,
            distance: 0.0,
        }
    }

    const S: u64 = 1_000_000_000;

    /// Two backgrounds where a different CCA meets the QoS: DPS learns one
    /// answer per recognised mix.
    #[test]
    fn learns_per_background() {
        let mut spec = DpsSpec::table_5_2(&["cubic", "bbr"], 0.0);
        spec.guard = super::super::Guard { ms: 2000, rtts: 0 };
        let mut p = DpsPolicy::new(&spec).unwrap();
        let feeder = p.clone();
        let mut t = 0u64;
        let mut picks = Vec::new();
        for cycle in 0..40 {
            let bg = if cycle % 2 == 0 { "B0-C1" } else { "B1-C0" };
            let cca = p.select(&classified(bg)).unwrap();
            picks.push((bg, cca));
            // Against CUBIC, cubic gets its share; against BBR only bbr does.
            let good = (bg == "B0-C1") == (cca == "cubic");
            for _ in 0..20 {
                t += S;
                let tput = if good { 9.8 } else { 6.0 };
                let mut f = feeder.clone();
                f.observe(&Feedback::sender(t, 60.0, tput)).unwrap();
            }
        }
        let db = p.database().unwrap();
        assert!(
            db.state("cubic:1").is_some() && db.state("bbr:1").is_some(),
            "{:?}",
            db.states().iter().map(|s| &s.key).collect::<Vec<_>>()
        );
        // After learning, every pick is the right one.
        for (bg, cca) in &picks[10..] {
            let want = if *bg == "B0-C1" { "cubic" } else { "bbr" };
            assert_eq!(cca.as_str(), want, "{bg}");
        }
        assert!(p.stats().unwrap().periods >= 38);
        assert!(p.last_decision().unwrap().is_some());
    }

    /// The guard starts with the first sample after a switch, not at the
    /// decision: samples seconds later are still discarded.
    #[test]
    fn guard_starts_with_the_first_sample_after_a_switch() {
        let mut spec = DpsSpec::table_5_2(&["cubic", "bbr"], 1.0);
        spec.guard = super::super::Guard { ms: 5000, rtts: 0 };
        let mut p = DpsPolicy::new(&spec).unwrap();
        p.observe(&Feedback::sender(S, 50.0, 9.6)).unwrap();
        p.select(&classified("B0-C1")).unwrap();
        // The next sample arrives 20 s later (after an OPS probe). Its
        // interval may hold probe time, so it is guarded, and so are the
        // 5 s after it (samples at 22..=26 s); the one at 27 s counts.
        for k in 0..7u64 {
            p.observe(&Feedback::sender((21 + k) * S, 50.0, 9.6))
                .unwrap();
        }
        assert_eq!(p.stats().unwrap().guarded_samples, 6);
    }

    #[test]
    fn bad_feedback_is_an_error() {
        let mut p = DpsPolicy::new(&DpsSpec::table_5_2(&["cubic"], 0.5)).unwrap();
        let bad = Feedback {
            goodput_mbps: Some(-1.0),
            ..Feedback::default()
        };
        assert!(p
            .observe(&bad)
            .unwrap_err()
            .to_string()
            .contains("goodput_mbps = -1"));
        assert!(DpsPolicy::new(&DpsSpec::table_5_2(&[], 0.5)).is_err());
    }
}
