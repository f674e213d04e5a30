//! One live DPS flow: an [`Agent`] and, when the flow is managed, its
//! connection to the host's fairness manager service (002 §4.6). This is
//! the glue every driver shares (the CLI's `opsel send --dps --fair`, or
//! several flows of one process, each with its own [`LiveFlow`] on one
//! [`ManagerService`](crate::fair::ManagerService)): commands from the
//! manager go to the agent, the agent's reports go to the manager, the
//! flow's sending rate goes to the manager's Jain/Alg 4 evaluation, and
//! the driver gets back only what it must apply (a CCA) or may log.
//!
//! The driver does the I/O on its transfer socket: it calls
//! [`LiveFlow::on_interval`] once per sampling interval with that
//! interval's feedback and applies every [`LiveOutput::SetCca`] with
//! `setsockopt(TCP_CONGESTION)` on the live socket (no connection
//! replacement, unlike 002 §4.3).

use super::agent::{Agent, AgentStats, Event, Output};
use super::feedback::Feedback;
use super::spec::DpsSpec;
use crate::error::{Error, Result};
use crate::fair::{Command, FlowReport, ManagerClient};
use crate::probe::CcaName;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What a live flow tells its driver.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveOutput {
    /// Set this CCA on the transfer socket now.
    SetCca(CcaName),
    /// The manager sent this command (logged; already handed to the agent).
    Command(Command),
    /// The agent sent this report to the manager (logged).
    Report(FlowReport),
    /// An agent event: decisions, closed periods, learnt, violating marks.
    Event(Event),
}

/// A DPS flow on a live transfer, managed or not.
#[derive(Debug)]
pub struct LiveFlow {
    agent: Agent,
    client: Option<ManagerClient>,
    out: VecDeque<LiveOutput>,
    admitted: bool,
    /// Sending-rate report to the manager: one mean per `rate_every_ns`,
    /// so Jain compares rates over the same span for every flow (002 §4.6
    /// leaves the averaging window open, note §3.3).
    rate_every_ns: u64,
    rate_sum: f64,
    rate_ns: u64,
    last_at_ns: Option<u64>,
}

impl LiveFlow {
    /// A flow learning on its own (no manager).
    pub fn unmanaged(spec: &DpsSpec) -> Result<Self> {
        Self::with(Agent::new(spec)?, None, 0)
    }

    /// A flow under the manager behind `client` (already registered),
    /// reporting its mean sending rate every `rate_every`.
    pub fn managed(spec: &DpsSpec, client: ManagerClient, rate_every: Duration) -> Result<Self> {
        if rate_every.is_zero() {
            return Err(Error::invalid(
                "sending-rate report interval must be > 0 (e.g. the manager's fairness sampling interval)",
            ));
        }
        Self::with(
            Agent::managed(spec)?,
            Some(client),
            rate_every.as_nanos().min(u128::from(u64::MAX)) as u64,
        )
    }

    fn with(agent: Agent, client: Option<ManagerClient>, rate_every_ns: u64) -> Result<Self> {
        Ok(Self {
            agent,
            admitted: client.is_none(),
            client,
            out: VecDeque::with_capacity(16),
            rate_every_ns,
            rate_sum: 0.0,
            rate_ns: 0,
            last_at_ns: None,
        })
    }

    /// Start the agent at `now_ns`. An unmanaged flow decides its first CCA
    /// now; a managed one sets its first candidate and waits for the
    /// manager's unlock (see [`LiveFlow::admit`]).
    pub fn start(&mut self, now_ns: u64) -> Result<()> {
        self.agent.start(now_ns)?;
        self.drain()
    }

    /// Managed flows: block until the manager's first `Unlock` (at most
    /// `timeout`), so the flow starts sending once admitted. Unmanaged
    /// flows return at once. `now` reads the driver's clock, in ns.
    pub fn admit(&mut self, timeout: Duration, now: &mut dyn FnMut() -> u64) -> Result<()> {
        let t0 = Instant::now();
        while !self.admitted {
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(Error::invalid(format!(
                    "the fairness manager did not admit this flow within {:.0} s: another flow is still learning (002 §4.6 admits flows one at a time); wait longer (--fair-wait) or check that `opsel fair serve` is running",
                    timeout.as_secs_f64()
                )));
            }
            self.receive(left.min(Duration::from_millis(200)), now)?;
        }
        Ok(())
    }

    /// Whether the manager has unlocked this flow at least once (always
    /// true unmanaged).
    pub fn admitted(&self) -> bool {
        self.admitted
    }

    /// Hand the manager's pending commands to the agent, waiting at most
    /// `wait` for the first (zero: only what has arrived).
    fn receive(&mut self, wait: Duration, now: &mut dyn FnMut() -> u64) -> Result<()> {
        let mut wait = wait;
        loop {
            let Some(c) = self.client.as_mut() else {
                return Ok(());
            };
            let got = if wait.is_zero() {
                c.try_recv()?
            } else {
                c.recv(wait)?
            };
            let Some(cmd) = got else {
                return Ok(());
            };
            if matches!(cmd, Command::Unlock { .. }) {
                self.admitted = true;
            }
            self.agent.handle_command(now(), &cmd)?;
            self.out.push_back(LiveOutput::Command(cmd));
            self.drain()?;
            // More may be queued right behind it; do not wait for them.
            wait = Duration::ZERO;
        }
    }

    /// One sampling interval ending at `fb.at_ns`: the manager's commands,
    /// then the feedback (002 Alg 2's samples), the agent's timers, and
    /// (managed) the sending rate for Jain's index. Applies nothing itself:
    /// poll the outputs afterwards.
    pub fn on_interval(&mut self, fb: &Feedback) -> Result<()> {
        let at = fb.at_ns;
        self.receive(Duration::ZERO, &mut || at)?;
        self.agent.handle_feedback(at, fb)?;
        self.agent.handle_timeout(at)?;
        self.drain()?;
        if self.client.is_some() && self.admitted {
            let dt = self.last_at_ns.map_or(0, |l| at.saturating_sub(l));
            if let Some(r) = fb.sending_rate_mbps.or(fb.delivery_rate_mbps) {
                self.rate_sum += r * dt as f64;
                self.rate_ns += dt;
            }
            if self.rate_ns >= self.rate_every_ns {
                let mean = self.rate_sum / self.rate_ns as f64;
                (self.rate_sum, self.rate_ns) = (0.0, 0);
                if let Some(c) = self.client.as_mut() {
                    c.rate(mean)?;
                }
            }
        }
        self.last_at_ns = Some(at);
        Ok(())
    }

    /// Move the agent's outputs to the driver's queue; reports also go to
    /// the manager.
    fn drain(&mut self) -> Result<()> {
        while let Some(o) = self.agent.poll() {
            match o {
                Output::SetCca(c) => self.out.push_back(LiveOutput::SetCca(c)),
                Output::Report(r) => {
                    if let Some(c) = self.client.as_mut() {
                        c.report(r.clone())?;
                    }
                    self.out.push_back(LiveOutput::Report(r));
                }
                Output::Event(e) => self.out.push_back(LiveOutput::Event(e)),
            }
        }
        Ok(())
    }

    /// Next output for the driver.
    pub fn poll(&mut self) -> Option<LiveOutput> {
        self.out.pop_front()
    }

    /// The CCA the agent runs.
    pub fn current(&self) -> Option<CcaName> {
        self.agent.current()
    }

    /// The agent's counters (learning time and cycles, switches, periods).
    pub fn stats(&self) -> AgentStats {
        self.agent.stats()
    }

    /// The agent (database, phase, State key).
    pub fn agent(&self) -> &Agent {
        &self.agent
    }
}
