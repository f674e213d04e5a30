//! The fairness framework of DPS (002 §4.6, Fig 4.4, Alg 4): a per-host
//! manager that lets one flow at a time change CCA (round-robin lock/unlock),
//! tells it the State (the CCAs the others are locked to) and watches Jain's
//! index over the flows' sending rates for violations.
//!
//! Sans-IO: the host feeds flow registrations, [`FlowReport`]s and sending
//! rates, and drains `(flow, Command)` pairs. Inside one process the commands
//! go straight to each flow's [`crate::dps::Agent`]; between processes the
//! serde [`Envelope`](super::Envelope) carries them.

use super::messages::{Command, FlowId, FlowReport};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Alg 4's thresholds (002 §4.6). The thesis gives only F_thresh = 0.80
/// (Table 5.3); V_thresh and D_thresh are unspecified (note §3.3 gap) and
/// default here to 3 and 2 fairness samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FairnessSpec {
    /// Jain's index below which a sample counts as a violation.
    pub f_thresh: f64,
    /// Violations tolerated: more than this many (net of recoveries) signal.
    pub v_thresh: u32,
    /// Consecutive decreases tolerated below F_thresh.
    pub d_thresh: u32,
}

impl Default for FairnessSpec {
    fn default() -> Self {
        Self {
            f_thresh: 0.80,
            v_thresh: 3,
            d_thresh: 2,
        }
    }
}

impl FairnessSpec {
    /// Check `0 < f_thresh <= 1`.
    pub fn validate(&self) -> Result<()> {
        if !(self.f_thresh > 0.0 && self.f_thresh <= 1.0) {
            return Err(Error::invalid(format!(
                "fairness f_thresh {} must be in (0, 1]; Jain's index of n flows lies in [1/n, 1] (002 uses 0.80)",
                self.f_thresh
            )));
        }
        Ok(())
    }
}

/// 002 Alg 4, violation detection, verbatim:
/// ```text
/// if F < F_thresh:
///     violation_count += 1
///     if F < F_prev: decrease_count += 1
///     if decrease_count > D_thresh or violation_count > V_thresh:
///         violating ← True; reset both counters
/// else: decrement both counters by 1 (floor 0)
/// ```
/// The first sample has no F_prev and so cannot count as a decrease.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViolationDetector {
    spec: FairnessSpec,
    violations: u32,
    decreases: u32,
    prev: Option<f64>,
}

impl ViolationDetector {
    pub fn new(spec: FairnessSpec) -> Result<Self> {
        spec.validate()?;
        Ok(Self {
            spec,
            violations: 0,
            decreases: 0,
            prev: None,
        })
    }

    /// Feed one fairness estimate F; `true` when a violation is signalled.
    pub fn update(&mut self, f: f64) -> bool {
        let prev = self.prev.replace(f);
        if f < self.spec.f_thresh {
            self.violations += 1;
            if prev.is_some_and(|p| f < p) {
                self.decreases += 1;
            }
            if self.decreases > self.spec.d_thresh || self.violations > self.spec.v_thresh {
                self.violations = 0;
                self.decreases = 0;
                return true;
            }
        } else {
            self.violations = self.violations.saturating_sub(1);
            self.decreases = self.decreases.saturating_sub(1);
        }
        false
    }

    /// (violation_count, decrease_count).
    pub fn counters(&self) -> (u32, u32) {
        (self.violations, self.decreases)
    }

    /// Forget counters and F_prev (e.g. when the set of flows changes).
    pub fn reset(&mut self) {
        self.violations = 0;
        self.decreases = 0;
        self.prev = None;
    }
}

/// A managed flow's lock state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowState {
    /// Registered, waiting for its round-robin turn.
    Waiting,
    /// The one flow that may change CCA.
    Unlocked,
    /// Told to lock, answer pending.
    Locking,
    /// Locked to a CCA.
    Locked,
}

#[derive(Debug, Clone)]
struct Flow {
    id: FlowId,
    state: FlowState,
    cca: Option<String>,
    rate_mbps: f64,
    /// Unlocked at least once: admitted to send (002 §4.6: "an application
    /// must go through the FF before it is admitted").
    admitted: bool,
}

/// Counters over the manager's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ManagerStats {
    pub unlocks: u64,
    pub violations: u64,
    pub fairness_samples: u64,
}

/// The per-host fairness manager (002 §4.6).
#[derive(Debug, Clone)]
pub struct Manager {
    flows: Vec<Flow>,
    detector: ViolationDetector,
    out: VecDeque<(FlowId, Command)>,
    /// Position in `flows` of the last flow unlocked (round-robin cursor).
    cursor: usize,
    stats: ManagerStats,
    last_jain: Option<f64>,
}

impl Manager {
    pub fn new(spec: FairnessSpec) -> Result<Self> {
        Ok(Self {
            flows: Vec::new(),
            detector: ViolationDetector::new(spec)?,
            out: VecDeque::with_capacity(16),
            cursor: 0,
            stats: ManagerStats::default(),
            last_jain: None,
        })
    }

    /// Admit a flow. If no flow is unlocked it is unlocked at once;
    /// otherwise it waits for its round-robin turn (002 §4.6: flows are
    /// served one at a time even if they arrive together).
    pub fn register(&mut self, id: FlowId) -> Result<()> {
        if self.flows.iter().any(|f| f.id == id) {
            return Err(Error::invalid(format!(
                "flow {id} is already registered with the fairness manager; ids must be unique"
            )));
        }
        self.flows.push(Flow {
            id,
            state: FlowState::Waiting,
            cca: None,
            rate_mbps: 0.0,
            admitted: false,
        });
        self.detector.reset();
        if !self.any_active() {
            let i = self.flows.len() - 1;
            self.unlock(i);
        }
        Ok(())
    }

    /// Remove a flow (its transfer ended). If it held the unlock, the next
    /// flow in turn gets it.
    pub fn deregister(&mut self, id: FlowId) -> Result<()> {
        let i = self.index(id)?;
        let was_active = matches!(
            self.flows[i].state,
            FlowState::Unlocked | FlowState::Locking
        );
        self.flows.remove(i);
        self.out.retain(|(f, _)| *f != id);
        self.detector.reset();
        if self.cursor > i {
            self.cursor -= 1;
        }
        if was_active && !self.flows.is_empty() {
            // The flow after the removed one slid into its position.
            let next = i % self.flows.len();
            self.unlock(next);
        }
        Ok(())
    }

    /// A report from a flow (002 Fig 4.4): "learnt" → tell it to lock;
    /// "locked(cca)" → record the CCA and unlock the next flow in turn
    /// (itself again when it is alone). A report from a flow that does not
    /// hold the turn only records its CCA (a "learnt" is ignored): the turn
    /// moves on the unlocked flow's reports alone.
    pub fn handle_report(&mut self, id: FlowId, report: &FlowReport) -> Result<()> {
        let i = self.index(id)?;
        match report {
            FlowReport::Learnt => {
                if self.flows[i].state == FlowState::Unlocked {
                    self.flows[i].state = FlowState::Locking;
                    self.out.push_back((id, Command::Lock));
                }
            }
            FlowReport::Locked { cca } => {
                self.flows[i].cca = Some(cca.clone());
                if matches!(
                    self.flows[i].state,
                    FlowState::Unlocked | FlowState::Locking
                ) {
                    self.flows[i].state = FlowState::Locked;
                    let next = (i + 1) % self.flows.len();
                    self.unlock(next);
                } else {
                    self.flows[i].state = FlowState::Locked;
                }
            }
        }
        Ok(())
    }

    /// The latest sending rate of a flow, Mbps (002 §4.6: measured at the
    /// sender).
    pub fn report_rate(&mut self, id: FlowId, rate_mbps: f64) -> Result<()> {
        if !rate_mbps.is_finite() || rate_mbps < 0.0 {
            return Err(Error::invalid(format!(
                "sending rate {rate_mbps} Mbps of flow {id} must be finite and >= 0"
            )));
        }
        let i = self.index(id)?;
        self.flows[i].rate_mbps = rate_mbps;
        Ok(())
    }

    /// One fairness sample: Jain's index over the latest sending rates of
    /// the admitted flows, then Alg 4. With fewer than two admitted flows
    /// there is nothing to compare (002
    /// §4.6: detection runs "for as long as two or more flows exist"). On a
    /// violation the unlocked flow is told (a [`Command::Violation`] with
    /// its State). Returns the index computed, if any. Never allocates.
    pub fn evaluate(&mut self) -> Option<f64> {
        // Only admitted flows share the link; a flow waiting for its first
        // turn is not sending yet.
        if self.flows.iter().filter(|f| f.admitted).count() < 2 {
            return None;
        }
        let j = jain_of(
            self.flows
                .iter()
                .filter(|f| f.admitted)
                .map(|f| f.rate_mbps),
        );
        self.last_jain = Some(j);
        self.stats.fairness_samples += 1;
        if self.detector.update(j) {
            if let Some(i) = self
                .flows
                .iter()
                .position(|f| f.state == FlowState::Unlocked)
            {
                self.stats.violations += 1;
                let state = self.state_for(i);
                self.out
                    .push_back((self.flows[i].id, Command::Violation { state }));
            }
        }
        Some(j)
    }

    /// Next command to deliver.
    pub fn poll(&mut self) -> Option<(FlowId, Command)> {
        self.out.pop_front()
    }

    /// The flow currently unlocked, if any.
    pub fn unlocked(&self) -> Option<FlowId> {
        self.flows
            .iter()
            .find(|f| matches!(f.state, FlowState::Unlocked | FlowState::Locking))
            .map(|f| f.id)
    }

    /// Whether a flow has been admitted (unlocked at least once).
    pub fn admitted(&self, id: FlowId) -> bool {
        self.flows.iter().any(|f| f.id == id && f.admitted)
    }

    /// A flow's lock state and locked CCA.
    pub fn flow(&self, id: FlowId) -> Option<(FlowState, Option<&str>)> {
        self.flows
            .iter()
            .find(|f| f.id == id)
            .map(|f| (f.state, f.cca.as_deref()))
    }

    /// The last Jain's index computed.
    pub fn last_jain(&self) -> Option<f64> {
        self.last_jain
    }

    pub fn stats(&self) -> ManagerStats {
        self.stats
    }

    fn any_active(&self) -> bool {
        self.unlocked().is_some()
    }

    fn index(&self, id: FlowId) -> Result<usize> {
        self.flows.iter().position(|f| f.id == id).ok_or_else(|| {
            Error::invalid(format!(
                "flow {id} is not registered with the fairness manager; register it first"
            ))
        })
    }

    /// The State for flow `i`: the sorted CCAs of the other locked flows.
    fn state_for(&self, i: usize) -> Vec<String> {
        let mut v: Vec<String> = self
            .flows
            .iter()
            .enumerate()
            .filter(|(k, f)| *k != i && f.state == FlowState::Locked)
            .filter_map(|(_, f)| f.cca.clone())
            .collect();
        v.sort();
        v
    }

    fn unlock(&mut self, i: usize) {
        self.cursor = i;
        self.flows[i].state = FlowState::Unlocked;
        self.flows[i].admitted = true;
        self.stats.unlocks += 1;
        let state = self.state_for(i);
        self.detector.reset();
        self.out
            .push_back((self.flows[i].id, Command::Unlock { state }));
    }
}

/// Jain's index J = (Σx)² / (n·Σx²) over an iterator without allocating
/// (the same formula and scaling as [`super::jain`]); all-zero rates give 1.
fn jain_of(rates: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = rates.clone().fold(0.0f64, f64::max);
    if max == 0.0 {
        return 1.0;
    }
    let (mut n, mut s, mut s2) = (0.0f64, 0.0f64, 0.0f64);
    for x in rates {
        let y = x / max;
        n += 1.0;
        s += y;
        s2 += y * y;
    }
    (s * s / (n * s2)).clamp(1.0 / n, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Alg 4 step by step with F_thresh 0.8, V_thresh 3, D_thresh 2.
    #[test]
    fn golden_alg4() {
        let mut d = ViolationDetector::new(FairnessSpec::default()).unwrap();
        // F:        0.7   0.75  0.7   0.9   0.6   0.5
        // viol:     1     2     3     2     3     4 → signal, reset
        // decr:     0     0     1     0     1     2 (signal resets)
        let want = [
            (0.7, false, (1, 0)),
            (0.75, false, (2, 0)),
            (0.7, false, (3, 1)),
            (0.9, false, (2, 0)),
            (0.6, false, (3, 1)),
            (0.5, true, (0, 0)),
        ];
        for (f, sig, counters) in want {
            assert_eq!(d.update(f), sig, "F = {f}");
            assert_eq!(d.counters(), counters, "F = {f}");
        }
        // Three strict decreases trip D_thresh = 2 before V_thresh = 3.
        let mut d = ViolationDetector::new(FairnessSpec::default()).unwrap();
        assert!(!d.update(0.79));
        assert!(!d.update(0.78));
        assert!(!d.update(0.77));
        assert!(d.update(0.76));
        // Recoveries decrement to zero, never below.
        let mut d = ViolationDetector::new(FairnessSpec::default()).unwrap();
        d.update(0.5);
        for _ in 0..5 {
            assert!(!d.update(0.95));
        }
        assert_eq!(d.counters(), (0, 0));
        for bad in [0.0, 1.5, f64::NAN] {
            let spec = FairnessSpec {
                f_thresh: bad,
                ..FairnessSpec::default()
            };
            assert!(Manager::new(spec)
                .unwrap_err()
                .to_string()
                .contains("f_thresh"));
        }
    }

    fn drain(m: &mut Manager) -> Vec<(FlowId, Command)> {
        std::iter::from_fn(|| m.poll()).collect()
    }

    /// 002 Fig 4.4, the two-flow sequence.
    #[test]
    fn fig_4_4_sequence() {
        let mut m = Manager::new(FairnessSpec::default()).unwrap();
        m.register(1).unwrap();
        assert_eq!(drain(&mut m), vec![(1, Command::Unlock { state: vec![] })]);
        m.register(2).unwrap();
        assert!(drain(&mut m).is_empty(), "flow 2 waits its turn");
        m.report_rate(1, 9.0).unwrap();
        assert_eq!(m.evaluate(), None, "flow 2 is not admitted yet");
        assert!(m.admitted(1) && !m.admitted(2));
        assert_eq!(m.flow(2), Some((FlowState::Waiting, None)));
        m.handle_report(1, &FlowReport::Learnt).unwrap();
        assert_eq!(drain(&mut m), vec![(1, Command::Lock)]);
        m.handle_report(
            1,
            &FlowReport::Locked {
                cca: "cubic".into(),
            },
        )
        .unwrap();
        assert_eq!(
            drain(&mut m),
            vec![(
                2,
                Command::Unlock {
                    state: vec!["cubic".into()]
                }
            )]
        );
        // Violation detection now runs; the unlocked flow 2 is told.
        m.report_rate(1, 9.0).unwrap();
        m.report_rate(2, 1.0).unwrap();
        let mut signalled = Vec::new();
        for _ in 0..5 {
            let j = m.evaluate().unwrap();
            assert!((j - 0.6097560975609756).abs() < 1e-12, "{j}");
            signalled.extend(drain(&mut m));
        }
        assert_eq!(
            signalled,
            vec![(
                2,
                Command::Violation {
                    state: vec!["cubic".into()]
                }
            )]
        );
        m.handle_report(2, &FlowReport::Learnt).unwrap();
        m.handle_report(2, &FlowReport::Locked { cca: "bbr".into() })
            .unwrap();
        assert_eq!(
            drain(&mut m),
            vec![
                (2, Command::Lock),
                (
                    1,
                    Command::Unlock {
                        state: vec!["bbr".into()]
                    }
                )
            ]
        );
        assert_eq!(m.unlocked(), Some(1));
        // Flow 1 leaves while unlocked: flow 2 gets the turn, alone.
        m.deregister(1).unwrap();
        assert_eq!(drain(&mut m), vec![(2, Command::Unlock { state: vec![] })]);
        assert_eq!(m.evaluate(), None, "one flow: nothing to compare");
        assert_eq!(m.stats().violations, 1);
    }

    #[test]
    fn round_robin_survives_departures() {
        let mut m = Manager::new(FairnessSpec::default()).unwrap();
        for id in [1, 2, 3] {
            m.register(id).unwrap();
        }
        drain(&mut m);
        let lock = |m: &mut Manager, id, cca: &str| {
            m.handle_report(id, &FlowReport::Learnt).unwrap();
            m.handle_report(id, &FlowReport::Locked { cca: cca.into() })
                .unwrap();
        };
        lock(&mut m, 1, "cubic");
        assert_eq!(m.unlocked(), Some(2));
        // Flow 2 leaves while unlocked: flow 3 is next in turn, not flow 1.
        m.deregister(2).unwrap();
        let cmds = drain(&mut m);
        assert_eq!(
            cmds.last(),
            Some(&(
                3,
                Command::Unlock {
                    state: vec!["cubic".into()]
                }
            ))
        );
        lock(&mut m, 3, "bbr");
        assert_eq!(
            drain(&mut m).last(),
            Some(&(
                1,
                Command::Unlock {
                    state: vec!["bbr".into()]
                }
            ))
        );
        // A locked flow leaving does not move the turn.
        m.deregister(3).unwrap();
        assert_eq!(m.unlocked(), Some(1));
        assert!(drain(&mut m).is_empty());
    }

    #[test]
    fn bad_input() {
        let mut m = Manager::new(FairnessSpec::default()).unwrap();
        m.register(7).unwrap();
        assert!(m
            .register(7)
            .unwrap_err()
            .to_string()
            .contains("flow 7 is already"));
        assert!(m
            .report_rate(8, 1.0)
            .unwrap_err()
            .to_string()
            .contains("flow 8 is not"));
        assert!(m
            .report_rate(7, -1.0)
            .unwrap_err()
            .to_string()
            .contains("-1"));
        assert!(m.report_rate(7, f64::NAN).is_err());
        assert!(m.deregister(9).is_err());
        assert!(m.handle_report(9, &FlowReport::Learnt).is_err());
    }

    #[test]
    fn jain_matches_fair_jain() {
        for rates in [
            [1.0, 1.0, 1.0],
            [3.0, 1.0, 0.0],
            [0.0, 0.0, 0.0],
            [1e300, 1e-300, 5.0],
        ] {
            let a = jain_of(rates.iter().copied());
            let b = super::super::jain(&rates).unwrap();
            assert!((a - b).abs() < 1e-15, "{rates:?}: {a} vs {b}");
        }
    }
}
