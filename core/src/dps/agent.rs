//! The DPS framework cycle as a sans-IO state machine (002 §4.4–§4.6):
//! select (Alg 3 → Alg 1) → switch → guard → monitor for t or T → knowledge
//! update (Alg 2) → select …, optionally under a fairness manager's
//! lock/unlock commands.
//!
//! Like [`crate::ops::Controller`], the agent never touches a socket or a
//! clock: the driver feeds time (`u64` ns), [`Feedback`] and manager
//! [`Command`]s, and drains [`Output`]s: CCA switches to apply, events to log
//! and reports for the manager. `poll_timeout` says when to call
//! `handle_timeout` next.

use super::feedback::Feedback;
use super::rng::SplitMix64;
use super::select::{
    is_valid, mask_of, protocol_selection, u_net, Database, ProtocolStats, SelectedBy,
};
use super::spec::{Compiled, DpsSpec};
use super::stats::{MetricStats, PeriodReport, PeriodStats};
use super::utility::Metric;
use crate::error::{Error, Result};
use crate::fair::{state_key, Command, FlowReport};
use crate::probe::CcaName;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Which monitoring period a decision runs for (002 Alg 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A random pick, monitored for the short period t.
    Random,
    /// A utility-based pick, monitored for the long period T.
    Selection,
}

/// Why Alg 3 chose what it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "by")]
pub enum Reason {
    /// random_trigger fired (Bernoulli(p)); an untried protocol if any.
    RandomTrigger,
    /// No protocol satisfies the application yet and some are untried.
    ExploreEmpty,
    /// No protocol satisfies and all are tried: Alg 1 over all (its mean
    /// fallback, or a valid protocol that is marked violating).
    Fallback(SelectedBy),
    /// Alg 1 over the satisfying protocols.
    Selected(SelectedBy),
}

/// One decision of Alg 3.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Decision {
    /// Index in the spec's CCA list.
    pub index: usize,
    pub cca: CcaName,
    pub mode: Mode,
    #[serde(flatten)]
    pub reason: Reason,
    /// Monitoring period that follows (t or T), ns.
    pub period_ns: u64,
}

/// What the driver must do or may log.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Set this CCA on the socket (`setsockopt(TCP_CONGESTION)`).
    SetCca(CcaName),
    /// Send this report to the fairness manager.
    Report(FlowReport),
    /// Something happened (for logs, tests and the simulator).
    Event(Event),
}

/// Events of the cycle (serialized tagged by `kind`, see [`super::schema`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A framework cycle began with this decision.
    Decided { cycle: u64, decision: Decision },
    /// A monitoring period ended and was merged (Alg 2). `u_net` is Eq 4.1
    /// over this period alone; `satisfied` is the thesis's binary utility
    /// (1 if the period's U_stat exceeds thres_stat for every metric,
    /// 002 §5.3).
    PeriodClosed {
        cycle: u64,
        cca: CcaName,
        samples: u64,
        u_net: f64,
        satisfied: bool,
    },
    /// Every candidate now has statistics in the current State (the end of
    /// the learning phase, 002 §4.5).
    Learnt { at_ns: u64, cycles: u64 },
    /// The manager reported a fairness violation; `cca` is now marked
    /// violating in the current State.
    MarkedViolating { cca: CcaName },
}

/// Where the agent is in its cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Not started.
    Idle,
    /// Managed and waiting to be unlocked.
    Waiting,
    /// Samples discarded until `until_ns` after a switch.
    Guard { until_ns: u64 },
    /// Samples counted until `until_ns`.
    Monitor { until_ns: u64 },
    /// Locked to its CCA by the manager.
    Locked,
}

/// Counters over the agent's life.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct AgentStats {
    /// Framework cycles begun.
    pub cycles: u64,
    /// Cycles chosen by the random_trigger.
    pub random_triggers: u64,
    /// CCA changes requested.
    pub switches: u64,
    /// Monitoring periods closed.
    pub periods: u64,
    /// Periods whose binary utility was 1.
    pub satisfied_periods: u64,
    /// When (ns) and after how many closed periods the first State became
    /// fully known: the learning time t_p and learning cycles of 002 Fig 5.4.
    pub learnt_at_ns: Option<u64>,
    pub learning_cycles: Option<u64>,
    /// Samples rejected because they arrived during a guard.
    pub guarded_samples: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Managed {
    No,
    Waiting,
    Unlocked {
        learnt_on_entry: bool,
        reported: bool,
    },
    Locked,
}

/// The DPS learner and selector of one flow.
#[derive(Debug, Clone)]
pub struct Agent {
    cfg: Compiled,
    db: Database,
    row: usize,
    net_label: String,
    ff_state: String,
    rng: SplitMix64,
    phase: Phase,
    monitor_until: u64,
    current: Option<usize>,
    period: [PeriodStats; 2],
    latest_rtt_ms: Option<f64>,
    out: VecDeque<Output>,
    managed: Managed,
    stats: AgentStats,
    started_ns: u64,
    /// Monitoring periods end only by [`Agent::end_period`] (cycle clocked
    /// by an outside controller).
    external: bool,
    /// Externally clocked: the guard's length, to start at the next sample.
    guard_pending: Option<u64>,
    /// (State row, CCA) of the last monitoring period closed, for a
    /// receiver's late report.
    last_closed: Option<(usize, usize)>,
}

impl Agent {
    /// An unmanaged agent: it learns and selects on its own.
    pub fn new(spec: &DpsSpec) -> Result<Self> {
        let cfg = spec.compile()?;
        let mut db = Database::new(cfg.ccas.clone());
        let row = db.index_of("");
        Ok(Self {
            rng: SplitMix64::new(cfg.seed),
            cfg,
            db,
            row,
            net_label: String::new(),
            ff_state: String::new(),
            phase: Phase::Idle,
            monitor_until: 0,
            current: None,
            period: [PeriodStats::new(); 2],
            latest_rtt_ms: None,
            // Room for a burst of outputs without reallocation.
            out: VecDeque::with_capacity(16),
            managed: Managed::No,
            stats: AgentStats::default(),
            started_ns: 0,
            external: false,
            guard_pending: None,
            last_closed: None,
        })
    }

    /// An agent under a fairness manager: after `start` it waits for
    /// [`Command::Unlock`] (002 §4.6: a flow goes through the manager first).
    pub fn managed(spec: &DpsSpec) -> Result<Self> {
        let mut a = Self::new(spec)?;
        a.managed = Managed::Waiting;
        Ok(a)
    }

    /// Begin: an unmanaged agent makes its first decision; a managed one
    /// sets the first candidate CCA and waits to be unlocked.
    pub fn start(&mut self, now_ns: u64) -> Result<()> {
        if self.phase != Phase::Idle {
            return Err(Error::invalid("DPS agent already started; call start once"));
        }
        self.started_ns = now_ns;
        if self.managed == Managed::Waiting {
            self.current = Some(0);
            self.out.push_back(Output::SetCca(self.cfg.ccas[0]));
            self.phase = Phase::Waiting;
            return Ok(());
        }
        self.decide(now_ns, 0);
        Ok(())
    }

    /// Let an outside controller clock the cycle: monitoring periods no
    /// longer end after t or T but only when [`Agent::end_period`] is
    /// called (the OPS controller's steady phase is the monitoring period,
    /// see [`super::DpsPolicy`]). Guards still end by time.
    pub fn set_externally_clocked(&mut self, on: bool) {
        self.external = on;
    }

    /// End the current monitoring period at `now_ns` (Alg 2), optionally
    /// move to another network-state label, and decide the next CCA
    /// (Alg 3). A period still in its guard closes with no samples.
    pub fn end_period(&mut self, now_ns: u64, network_state: Option<&str>) -> Result<Decision> {
        if matches!(self.phase, Phase::Idle) && self.stats.cycles == 0 {
            return Err(Error::invalid("DPS agent not started; call start first"));
        }
        if !matches!(self.managed, Managed::No) {
            return Err(Error::invalid(
                "a managed DPS agent is cycled by its fairness manager, not by end_period",
            ));
        }
        self.close_period(now_ns);
        if let Some(label) = network_state {
            self.set_network_state(label);
        }
        Ok(self.decide(now_ns, 0))
    }

    /// Set the network-state label (e.g. the background mix OPS recognised,
    /// 002 Fig 4.2 "State Label", unused by the thesis). Statistics are kept
    /// per label; the current monitoring period is attributed to the new
    /// label. Allocates only for a label not seen before.
    pub fn set_network_state(&mut self, label: &str) {
        if label != self.net_label {
            self.net_label.clear();
            self.net_label.push_str(label);
            self.rekey();
        }
    }

    fn rekey(&mut self) {
        // "label|state" with both, else whichever is set; mix labels hold
        // ':' and CCA names never do, so the forms cannot collide.
        let key = match (self.net_label.is_empty(), self.ff_state.is_empty()) {
            (true, _) => self.ff_state.clone(),
            (false, true) => self.net_label.clone(),
            (false, false) => format!("{}|{}", self.net_label, self.ff_state),
        };
        self.row = self.db.index_of(&key);
    }

    /// One interval of measurements, summarising the interval that ends at
    /// `now_ns` (the convention of [`crate::ops::Controller`]): it belongs to
    /// the phase whose span (start, end] holds `now_ns`, so a sample at the
    /// exact end of a monitoring period still counts in it. Counted while
    /// monitoring, discarded during a guard, ignored while waiting or
    /// locked. Never allocates.
    pub fn handle_feedback(&mut self, now_ns: u64, fb: &Feedback) -> Result<()> {
        fb.validate()?;
        if let Some(r) = fb.rtt_ms {
            self.latest_rtt_ms = Some(r);
        }
        if let Some(len) = self.guard_pending.take() {
            // Externally clocked: the decision's time is not when the new
            // CCA starts carrying the transfer (the OPS probe runs in
            // between), so the guard starts with the first sample after it.
            self.phase = Phase::Guard {
                until_ns: now_ns.saturating_add(len),
            };
        }
        // Phases that ended strictly before this sample's end.
        self.advance(now_ns, true);
        match self.phase {
            Phase::Monitor { .. } => {
                for (m, q, _) in &self.cfg.metrics {
                    let v = match m {
                        Metric::RttMs => fb.rtt_ms,
                        Metric::ThroughputMbps => fb.throughput_mbps(),
                    };
                    if let Some(x) = v {
                        self.period[m.index()].push(q, x);
                    }
                }
            }
            Phase::Guard { .. } => self.stats.guarded_samples += 1,
            _ => {}
        }
        self.advance(now_ns, false);
        Ok(())
    }

    /// Advance timers: guard → monitor, monitor end → Alg 2 → next decision.
    pub fn handle_timeout(&mut self, now_ns: u64) -> Result<()> {
        self.advance(now_ns, false);
        Ok(())
    }

    /// End the phases whose end is before `now_ns` (`strict`) or at or
    /// before it.
    fn advance(&mut self, now_ns: u64, strict: bool) {
        let due = |until: u64| {
            if strict {
                now_ns > until
            } else {
                now_ns >= until
            }
        };
        if let Phase::Guard { until_ns } = self.phase {
            if due(until_ns) {
                self.phase = Phase::Monitor {
                    until_ns: self.monitor_until,
                };
            }
        }
        if let Phase::Monitor { until_ns } = self.phase {
            if due(until_ns) {
                // Act at the planned end so a late driver does not stretch
                // the schedule.
                self.close_period(until_ns);
                if matches!(self.managed, Managed::No | Managed::Unlocked { .. }) {
                    self.decide(until_ns, 0);
                }
            }
        }
    }

    /// A command from the fairness manager (002 §4.6, Fig 4.4).
    pub fn handle_command(&mut self, now_ns: u64, cmd: &Command) -> Result<()> {
        if self.managed == Managed::No {
            return Err(Error::invalid(
                "this DPS agent is not managed; create it with Agent::managed to take fairness-manager commands",
            ));
        }
        if self.phase == Phase::Idle {
            return Err(Error::invalid(
                "DPS agent not started; call start before handing it commands",
            ));
        }
        match cmd {
            Command::Unlock { state } => {
                self.ff_state = state_key(state);
                self.rekey();
                let learnt = mask_of(self.db.row(self.row), ProtocolStats::is_unexplored) == 0;
                self.managed = Managed::Unlocked {
                    learnt_on_entry: learnt,
                    reported: false,
                };
                self.clear_period();
                self.decide(now_ns, 0);
            }
            Command::Lock => {
                if !matches!(self.managed, Managed::Unlocked { .. }) {
                    return Ok(());
                }
                // Alg 1 over the non-violating protocols (greedy: the
                // random_trigger plays no part in locking).
                let row = self.db.row(self.row);
                let all = full_mask(row.len());
                let ok = all & !mask_of(row, |s| s.violating);
                let pool = if ok & mask_of(row, |s| !s.is_empty()) != 0 {
                    ok
                } else {
                    all
                };
                let pick = protocol_selection(&self.cfg, row, pool, &mut self.rng)
                    .map(|(i, _)| i)
                    .or(self.current)
                    .unwrap_or(0);
                if self.current != Some(pick) {
                    self.stats.switches += 1;
                    self.out.push_back(Output::SetCca(self.cfg.ccas[pick]));
                }
                self.current = Some(pick);
                self.clear_period();
                self.managed = Managed::Locked;
                self.phase = Phase::Locked;
                self.out.push_back(Output::Report(FlowReport::Locked {
                    cca: self.cfg.ccas[pick].as_str().to_string(),
                }));
            }
            Command::Violation { state } => {
                if !matches!(self.managed, Managed::Unlocked { .. })
                    || state_key(state) != self.ff_state
                {
                    // Stale: the flow was locked or moved on since.
                    return Ok(());
                }
                if let Some(cur) = self.current {
                    self.db.row_mut(self.row)[cur].violating = true;
                    self.out.push_back(Output::Event(Event::MarkedViolating {
                        cca: self.cfg.ccas[cur],
                    }));
                    // The unlocked flow assumes its CCA caused the violation
                    // and switches at once (002 §4.6 step 6). What the
                    // partial period saw is real knowledge of this CCA in
                    // this State, so it is merged (Alg 2) before switching.
                    self.close_period(now_ns);
                    if matches!(self.managed, Managed::Unlocked { .. }) {
                        self.decide(now_ns, 1 << cur);
                    }
                }
            }
        }
        Ok(())
    }

    /// A receiver's statistics {H, M, N} of one metric for the monitoring
    /// period that closed last, merged by Alg 2 into the CCA that ran in it
    /// (002 §4.4: throughput is measured at the receiver, which "computes H,
    /// M and N and sends them back" when the period ends; here over a framed
    /// control message, not the thesis's in-band magic string).
    ///
    /// Use either this or per-interval `Feedback::goodput_mbps` for a
    /// metric, not both (the values would count twice). Histogram layout
    /// and metric must match this agent's spec.
    ///
    /// The agent decides the next cycle when a period closes and does not
    /// wait for the report, so the reported values inform decisions from
    /// the following cycle on, and the period's `Event::PeriodClosed`
    /// (binary utility) reflects the sender-side metrics only. The thesis
    /// pauses for the report's round trip instead (part of its 51–64 s per
    /// cycle, 002 note §1.8).
    pub fn handle_receiver_report(&mut self, metric: Metric, report: &PeriodReport) -> Result<()> {
        let Some((_, q, _)) = self.cfg.metrics.iter().find(|(m, _, _)| *m == metric) else {
            return Err(Error::invalid(format!(
                "receiver report for metric {metric}, which this DPS spec does not score"
            )));
        };
        let period = PeriodStats::from_report(q, report)?;
        let Some((row, cca)) = self.last_closed else {
            return Err(Error::invalid(
                "receiver report before any monitoring period closed; send it after the period it describes",
            ));
        };
        if period.n() == 0 {
            return Ok(());
        }
        let history = self.cfg.history;
        let entry = &mut self.db.row_mut(row)[cca];
        entry.metrics[metric.index()].merge(&period, &history);
        // A period the sender saw nothing of is still a period of knowledge.
        entry.periods = entry.periods.max(1);
        Ok(())
    }

    /// Next output, if any.
    pub fn poll(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When `handle_timeout` must be called next.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.phase {
            Phase::Guard { until_ns } | Phase::Monitor { until_ns } if until_ns != u64::MAX => {
                Some(until_ns)
            }
            _ => None,
        }
    }

    /// Current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The CCA in use, if decided.
    pub fn current(&self) -> Option<CcaName> {
        self.current.map(|i| self.cfg.ccas[i])
    }

    /// The Framework Database.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Whether the current State still has untried candidates (the
    /// learning phase of 002 §4.5; false = learnt phase).
    pub fn learning(&self) -> bool {
        mask_of(self.db.row(self.row), ProtocolStats::is_unexplored) != 0
    }

    /// The key of the current State row.
    pub fn state_key(&self) -> &str {
        &self.db.states()[self.row].key
    }

    /// Counters.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    fn clear_period(&mut self) {
        for p in &mut self.period {
            p.clear();
        }
    }

    /// 002 Alg 2 for the protocol just monitored, the binary utility of
    /// the period, and the end of the learning phase.
    fn close_period(&mut self, now_ns: u64) {
        self.phase = Phase::Idle;
        let Some(cur) = self.current else { return };
        let mut alone = ProtocolStats::default();
        let mut samples = 0;
        let history = self.cfg.history;
        let row = self.row;
        self.last_closed = Some((row, cur));
        let entry = &mut self.db.row_mut(row)[cur];
        for (m, _, _) in &self.cfg.metrics {
            let p = &self.period[m.index()];
            samples = samples.max(p.n());
            entry.metrics[m.index()].merge(p, &history);
            let mut only = MetricStats::default();
            only.merge(p, &history);
            alone.metrics[m.index()] = only;
        }
        if samples > 0 {
            entry.periods += 1;
        }
        self.clear_period();
        if samples == 0 {
            // Nothing observed (no feedback arrived): no knowledge to add,
            // the protocol stays untried.
            return;
        }
        alone.periods = 1;
        let satisfied = is_valid(&self.cfg, &alone);
        self.stats.periods += 1;
        self.stats.satisfied_periods += satisfied as u64;
        self.out.push_back(Output::Event(Event::PeriodClosed {
            cycle: self.stats.cycles,
            cca: self.cfg.ccas[cur],
            samples,
            u_net: u_net(&self.cfg.metrics, &alone),
            satisfied,
        }));
        let learnt = mask_of(self.db.row(self.row), ProtocolStats::is_unexplored) == 0;
        if learnt && self.stats.learnt_at_ns.is_none() {
            self.stats.learnt_at_ns = Some(now_ns.saturating_sub(self.started_ns));
            self.stats.learning_cycles = Some(self.stats.periods);
            self.out.push_back(Output::Event(Event::Learnt {
                at_ns: now_ns.saturating_sub(self.started_ns),
                cycles: self.stats.periods,
            }));
        }
        if let Managed::Unlocked {
            learnt_on_entry,
            reported: false,
        } = self.managed
        {
            // 002 §4.6: a new State is reported once learnt; a known State
            // after one more selection and monitoring period.
            if learnt || learnt_on_entry {
                self.managed = Managed::Unlocked {
                    learnt_on_entry,
                    reported: true,
                };
                self.out.push_back(Output::Report(FlowReport::Learnt));
            }
        }
    }

    /// 002 Alg 3 as the corrected else-if chain (note §2.2 defects a–c):
    /// ```text
    /// if random_trigger (Bernoulli p):   random(P_empty if ≠ ∅ else P),  t
    /// else if P_satisfy = ∅, P_empty ≠ ∅: random(P_empty),                t
    /// else if P_satisfy = ∅, P_empty = ∅: Alg 1 over P,                   T
    /// else:                               Alg 1 over P_satisfy,           T
    /// ```
    /// The last branch covers both `P_empty ≠ ∅` (the thesis's line 18) and
    /// the case the thesis omits, `P_empty = ∅` (the ordinary learnt phase).
    /// Violating protocols are left out of P_satisfy and of the greedy
    /// branches, not of the random ones. `exclude` removes protocols from
    /// this one decision (the CCA that just caused a violation) unless
    /// nothing would remain.
    fn decide(&mut self, now_ns: u64, exclude: u32) -> Decision {
        let d = next_action(&self.cfg, self.db.row(self.row), &mut self.rng, exclude);
        self.stats.cycles += 1;
        if d.reason == Reason::RandomTrigger {
            self.stats.random_triggers += 1;
        }
        self.out.push_back(Output::Event(Event::Decided {
            cycle: self.stats.cycles,
            decision: d,
        }));
        if self.current != Some(d.index) {
            self.stats.switches += 1;
            self.out.push_back(Output::SetCca(d.cca));
            let guard = self.cfg.guard.duration_ns(self.latest_rtt_ms);
            self.monitor_until = self.period_end(now_ns.saturating_add(guard), d.period_ns);
            self.guard_pending = None;
            self.phase = if guard == 0 {
                Phase::Monitor {
                    until_ns: self.monitor_until,
                }
            } else if self.external {
                self.guard_pending = Some(guard);
                Phase::Guard { until_ns: u64::MAX }
            } else {
                Phase::Guard {
                    until_ns: now_ns.saturating_add(guard),
                }
            };
        } else {
            // Same CCA again: nothing switches, so nothing to guard
            // (002 §4.4: "no new socket when the same CCA is selected").
            self.guard_pending = None;
            self.monitor_until = self.period_end(now_ns, d.period_ns);
            self.phase = Phase::Monitor {
                until_ns: self.monitor_until,
            };
        }
        self.current = Some(d.index);
        d
    }

    fn period_end(&self, from_ns: u64, period_ns: u64) -> u64 {
        if self.external {
            u64::MAX
        } else {
            from_ns.saturating_add(period_ns)
        }
    }
}

fn full_mask(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// 002 Alg 3 (corrected, see [`Agent`]'s `decide`) on one State row.
pub(crate) fn next_action(
    cfg: &Compiled,
    row: &[ProtocolStats],
    rng: &mut SplitMix64,
    exclude: u32,
) -> Decision {
    let all = full_mask(row.len());
    let allowed = if all & !exclude != 0 {
        all & !exclude
    } else {
        all
    };
    let empty = mask_of(row, ProtocolStats::is_unexplored) & allowed;
    let violating = mask_of(row, |s| s.violating);
    let satisfy = mask_of(row, |s| is_valid(cfg, s)) & !violating & allowed;
    let learning = mask_of(row, ProtocolStats::is_unexplored) != 0;
    let p = cfg.exploration.p(learning);
    let (index, mode, reason) = if rng.bernoulli(p) {
        let pool = if empty != 0 { empty } else { allowed };
        (
            rng.choose_bit(pool).unwrap_or(0),
            Mode::Random,
            Reason::RandomTrigger,
        )
    } else if satisfy == 0 && empty != 0 {
        (
            rng.choose_bit(empty).unwrap_or(0),
            Mode::Random,
            Reason::ExploreEmpty,
        )
    } else if satisfy == 0 {
        let greedy = if allowed & !violating != 0 {
            allowed & !violating
        } else {
            allowed
        };
        let (i, by) = protocol_selection(cfg, row, greedy, rng)
            // Unreachable with P_empty = ∅ (every candidate has statistics),
            // kept total: the first allowed candidate.
            .unwrap_or((allowed.trailing_zeros() as usize, SelectedBy::MeanFallback));
        (i, Mode::Selection, Reason::Fallback(by))
    } else {
        let (i, by) = protocol_selection(cfg, row, satisfy, rng)
            .unwrap_or((satisfy.trailing_zeros() as usize, SelectedBy::Utility));
        (i, Mode::Selection, Reason::Selected(by))
    };
    Decision {
        index,
        cca: cfg.ccas[index],
        mode,
        reason,
        period_ns: match mode {
            Mode::Random => cfg.random_ns,
            Mode::Selection => cfg.selection_ns,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::stats::History;
    use super::*;

    fn spec(p: f64) -> DpsSpec {
        DpsSpec::table_5_2(&["cubic", "vegas"], p)
    }

    fn proto(cfg: &Compiled, rtt: f64, tput: f64) -> ProtocolStats {
        let mut s = ProtocolStats::default();
        for (m, q, _) in &cfg.metrics {
            let mut p = PeriodStats::new();
            p.push(q, if *m == Metric::RttMs { rtt } else { tput });
            s.metrics[m.index()].merge(&p, &History::default());
        }
        s.periods = 1;
        s
    }

    /// Every branch of the corrected Alg 3, including the one the thesis
    /// omits (P_satisfy ≠ ∅ ∧ P_empty = ∅).
    #[test]
    fn alg3_branches() {
        let c0 = spec(0.0).compile().unwrap();
        let c1 = spec(1.0).compile().unwrap();
        let good = proto(&c0, 100.0, 9.8);
        let bad = proto(&c0, 100.0, 7.0);
        let empty = ProtocolStats::default();
        let mut rng = SplitMix64::new(3);
        // random_trigger with an untried protocol: picks it, period t.
        let d = next_action(&c1, &[good, empty], &mut rng, 0);
        assert_eq!(
            (d.index, d.mode, d.reason),
            (1, Mode::Random, Reason::RandomTrigger)
        );
        assert_eq!(d.period_ns, 30_000_000_000);
        // P_satisfy = ∅, P_empty ≠ ∅ (no trigger): untried, period t.
        let d = next_action(&c0, &[bad, empty], &mut rng, 0);
        assert_eq!((d.index, d.reason), (1, Reason::ExploreEmpty));
        // P_satisfy = ∅, P_empty = ∅: Alg 1 over all → mean fallback, T.
        let d = next_action(&c0, &[bad, proto(&c0, 50.0, 7.5)], &mut rng, 0);
        assert_eq!(
            (d.index, d.mode, d.reason),
            (
                1,
                Mode::Selection,
                Reason::Fallback(SelectedBy::MeanFallback)
            )
        );
        assert_eq!(d.period_ns, 60_000_000_000);
        // P_satisfy ≠ ∅, P_empty ≠ ∅ (thesis line 18): Alg 1 over P_satisfy.
        let d = next_action(&c0, &[good, empty], &mut rng, 0);
        assert_eq!(
            (d.index, d.reason),
            (0, Reason::Selected(SelectedBy::Utility))
        );
        // P_satisfy ≠ ∅, P_empty = ∅ (missing in the thesis): exploit.
        let d = next_action(&c0, &[bad, good], &mut rng, 0);
        assert_eq!((d.index, d.mode), (1, Mode::Selection));
        // random_trigger in the learnt phase: any protocol (both appear).
        let mut seen = [false; 2];
        for s in 0..50 {
            let d = next_action(&c1, &[bad, good], &mut SplitMix64::new(s), 0);
            assert_eq!(d.reason, Reason::RandomTrigger);
            seen[d.index] = true;
        }
        assert_eq!(seen, [true, true]);
        // A violating protocol is not satisfying: greedy falls back to the
        // other one even though it is worse; exclusion removes the current.
        let mut v = good;
        v.violating = true;
        let d = next_action(&c0, &[v, bad], &mut rng, 0);
        assert_eq!(
            (d.index, d.reason),
            (1, Reason::Fallback(SelectedBy::MeanFallback))
        );
        let d = next_action(&c0, &[good, bad], &mut rng, 0b01);
        assert_eq!(d.index, 1);
        // Excluding everything leaves the full set.
        let d = next_action(&c0, &[good], &mut rng, 0b1);
        assert_eq!(d.index, 0);
    }

    const S: u64 = 1_000_000_000;

    /// Drive an agent at 1 Hz where cubic satisfies and vegas does not.
    fn run(agent: &mut Agent, until_s: u64) -> Vec<Output> {
        let mut outs = Vec::new();
        for t in 1..=until_s {
            let cca = agent.current().unwrap();
            let tput = if cca == "cubic" { 9.7 } else { 7.5 };
            agent
                .handle_feedback(t * S, &Feedback::sender(t * S, 80.0, tput))
                .unwrap();
            while let Some(o) = agent.poll() {
                outs.push(o);
            }
        }
        outs
    }

    #[test]
    fn cycle_timing_guard_and_learning() {
        let mut a = Agent::new(&spec(1.0)).unwrap();
        a.start(0).unwrap();
        let first = a.current().unwrap();
        assert_eq!(a.phase(), Phase::Guard { until_ns: 10 * S });
        assert_eq!(a.poll_timeout(), Some(10 * S));
        let outs = run(&mut a, 80);
        // p = 1 with 2 CCAs: two random cycles of guard 10 s + t 30 s, each
        // CCA once, learnt after exactly 2 periods at 80 s (002 Fig 5.4:
        // learning cycles = |P| at p = 1).
        let st = a.stats();
        assert_eq!(st.learning_cycles, Some(2));
        assert_eq!(st.learnt_at_ns, Some(80 * S));
        assert_eq!(st.switches, 2);
        assert_ne!(a.database().ccas()[0], a.database().ccas()[1]);
        assert!(first == "cubic" || first == "vegas");
        // Samples ending at 1..=10 s and 41..=50 s fall in the guards.
        assert_eq!(st.guarded_samples, 20);
        let closed: Vec<_> = outs
            .iter()
            .filter_map(|o| match o {
                Output::Event(Event::PeriodClosed {
                    cca,
                    samples,
                    satisfied,
                    ..
                }) => Some((*cca, *samples, *satisfied)),
                _ => None,
            })
            .collect();
        assert_eq!(closed.len(), 2);
        for (cca, n, sat) in closed {
            assert_eq!(n, 30);
            assert_eq!(sat, cca == "cubic");
        }
        assert!(outs
            .iter()
            .any(|o| matches!(o, Output::Event(Event::Learnt { cycles: 2, .. }))));
    }

    #[test]
    fn exploits_after_learning_with_p0() {
        let mut a = Agent::new(&spec(0.0)).unwrap();
        a.start(0).unwrap();
        run(&mut a, 1000);
        // With p = 0, once cubic is found satisfying only cubic is selected;
        // vegas may be tried only if it came first.
        assert_eq!(a.current().unwrap(), "cubic");
        let row = &a.database().state("").unwrap().protocols;
        assert!(row[0].periods >= 10, "{:?}", row[0].periods);
        assert!(row[1].periods <= 1);
        assert_eq!(a.stats().random_triggers, 0);
    }

    /// The dynamic p of 002 Table 5.3: p_learning = 1 until every CCA has
    /// statistics, then p_learnt = 0: exploration stops once learnt.
    #[test]
    fn p_schedule_follows_the_phase() {
        let mut s = spec(1.0);
        s.exploration = crate::dps::Exploration {
            p_learning: 1.0,
            p_learnt: 0.0,
        };
        let mut a = Agent::new(&s).unwrap();
        a.start(0).unwrap();
        run(&mut a, 2000);
        let st = a.stats();
        assert_eq!(st.learning_cycles, Some(2));
        // Both learning cycles were random triggers; none after.
        assert_eq!(st.random_triggers, 2);
        assert!(st.cycles > 20);
        assert_eq!(a.current().unwrap(), "cubic");
    }

    /// The thesis's receiver path: throughput comes only from the
    /// receiver's {H, M, N} report after each period (sender feedback
    /// carries RTT only).
    #[test]
    fn receiver_reports_feed_alg2() {
        let mut a = Agent::new(&spec(0.0)).unwrap();
        let c = spec(0.0).compile().unwrap();
        let tq = c.metrics[1].1;
        let report = |x: f64| {
            let mut p = PeriodStats::new();
            for _ in 0..30 {
                p.push(&tq, x);
            }
            p.to_report(&tq)
        };
        assert!(a
            .handle_receiver_report(Metric::ThroughputMbps, &report(9.7))
            .unwrap_err()
            .to_string()
            .contains("before any monitoring period"));
        a.start(0).unwrap();
        for t in 1..=400u64 {
            let rtt_only = Feedback {
                at_ns: t * S,
                rtt_ms: Some(80.0),
                ..Feedback::default()
            };
            let before = a.stats().periods;
            let cca = a.current().unwrap();
            a.handle_feedback(t * S, &rtt_only).unwrap();
            while a.poll().is_some() {}
            if a.stats().periods > before {
                let x = if cca == "cubic" { 9.7 } else { 7.0 };
                a.handle_receiver_report(Metric::ThroughputMbps, &report(x))
                    .unwrap();
            }
        }
        // The receiver's throughput made cubic the satisfying choice.
        assert_eq!(a.current().unwrap(), "cubic");
        let row = &a.database().state("").unwrap().protocols;
        assert!(row[0].metric(Metric::ThroughputMbps).n() >= 60.0);
        assert!((row[1].metric(Metric::ThroughputMbps).mean() - 7.0).abs() < 1e-9);
        let mut wrong = report(9.7);
        wrong.counts.pop();
        assert!(a
            .handle_receiver_report(Metric::ThroughputMbps, &wrong)
            .is_err());
        let rtt_spec_only = {
            let mut s = spec(0.0);
            s.metrics.truncate(1);
            s
        };
        let mut b = Agent::new(&rtt_spec_only).unwrap();
        assert!(b
            .handle_receiver_report(Metric::ThroughputMbps, &report(9.7))
            .unwrap_err()
            .to_string()
            .contains("does not score"));
    }

    /// Time running backwards or commands out of place never panic.
    #[test]
    fn odd_inputs_do_not_panic() {
        let mut a = Agent::new(&spec(0.5)).unwrap();
        assert!(a
            .end_period(0, None)
            .unwrap_err()
            .to_string()
            .contains("not started"));
        a.start(1000 * S).unwrap();
        a.handle_feedback(5 * S, &Feedback::sender(5 * S, 50.0, 9.0))
            .unwrap();
        a.handle_timeout(0).unwrap();
        a.end_period(3 * S, Some("B1-C0")).unwrap();
        assert_eq!(a.state_key(), "B1-C0");
        let mut m = Agent::managed(&spec(0.5)).unwrap();
        assert!(m
            .handle_command(0, &Command::Lock)
            .unwrap_err()
            .to_string()
            .contains("not started"));
        m.start(0).unwrap();
        // Lock and violation before any unlock are ignored.
        m.handle_command(0, &Command::Lock).unwrap();
        m.handle_command(0, &Command::Violation { state: vec![] })
            .unwrap();
        assert_eq!(m.phase(), Phase::Waiting);
        assert!(m
            .end_period(S, None)
            .unwrap_err()
            .to_string()
            .contains("managed"));
    }

    #[test]
    fn determinism_and_errors() {
        let mut s = spec(0.5);
        s.seed = 42;
        let mut a = Agent::new(&s).unwrap();
        let mut b = Agent::new(&s).unwrap();
        a.start(0).unwrap();
        b.start(0).unwrap();
        assert_eq!(run(&mut a, 2000), run(&mut b, 2000));
        assert!(a
            .start(0)
            .unwrap_err()
            .to_string()
            .contains("already started"));
        let bad = Feedback {
            rtt_ms: Some(f64::NAN),
            ..Feedback::default()
        };
        assert!(a
            .handle_feedback(1, &bad)
            .unwrap_err()
            .to_string()
            .contains("rtt_ms = NaN"));
        assert!(a
            .handle_command(1, &Command::Lock)
            .unwrap_err()
            .to_string()
            .contains("not managed"));
    }
}
