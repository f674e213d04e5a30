//! [`OpsDriver`]: a controller bound to the caller's socket, and the one
//! place where the controller's actions meet the socket (000 §1.2, Fig 6.1):
//! `SetCca` and the CCA of `SendFullSpeed`/`Steady` become
//! `setsockopt(TCP_CONGESTION)` on the live connection (000 Table 7.2), and
//! sending starts or pauses. The decisions (phases, lead-in, which sample
//! joins the window) are the controller's; the sending loop is in
//! `run_loop.rs`.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::ccas::switch_cca;
use super::{DriverConfig, DriverEvent, RttSource};
use crate::ops::{Action, Classifier, Controller, Event, Output, Policy};
use crate::probe::CcaName;
use crate::sys::linux::cca::set_cca;
use crate::sys::linux::clock::monotonic_ns;
use crate::sys::linux::sockopt::require_tcp;
use crate::{Error, Result};

/// Runs an OPS [`Controller`] on a connected TCP socket (see the module docs).
///
/// ```no_run
/// # fn main() -> opsel::Result<()> {
/// use opsel::ops::{Config, Controller, KnnClassifier, Stump};
/// use opsel::probe::Pattern;
/// use opsel::sys::linux::ops_driver::{DriverConfig, OpsDriver, RttSource};
///
/// let model = opsel::model::load("models/active-s5c5s5b5/model.json")?.model;
/// let ctl = Controller::new(
///     Config::active(Pattern::parse("S5-C5-S5-B5")?),
///     KnnClassifier::new(model)?,
///     Stump::default(),
/// )?;
/// let conn = std::net::TcpStream::connect("10.0.0.2:5001").map_err(|e| opsel::Error::io("connect", e))?;
/// let rtt = RttSource::UdpEcho("10.0.0.2:5001".parse().unwrap());
/// let mut drv = OpsDriver::new(ctl, rtt, DriverConfig::default())?;
/// let mut file = std::fs::File::open("data.bin").map_err(|e| opsel::Error::io("open", e))?;
/// // Raised from another thread or a signal handler, it ends the run.
/// let stop = std::sync::atomic::AtomicBool::new(false);
/// let report = drv.run(&conn, &mut file, &stop, &mut |ev| println!("{ev:?}"))?;
/// println!("sent {} bytes", report.bytes_sent);
/// # Ok(()) }
/// ```
pub struct OpsDriver<C, P> {
    pub(super) ctl: Controller<C, P>,
    pub(super) cfg: DriverConfig,
    pub(super) rtt: Option<RttSource>,
    pub(super) sending: bool,
    pub(super) cca_sets: u64,
    /// The CCA the driver last set on the socket.
    pub(super) actual: Option<CcaName>,
    pub(super) origin: Arc<AtomicU64>,
    /// Latest time passed to the controller.
    pub(super) t_in: u64,
    /// Events of the current step, reported once its actions are carried
    /// out: a slow callback (a log line, a progress bar) must not stand
    /// between a decision and its `setsockopt` (decision latency).
    /// Keeps its capacity, so reporting allocates nothing.
    pub(super) pending: Vec<DriverEvent>,
    /// Where [`OpsDriver::publish_sending`] mirrors `sending` (striped
    /// transfers: the other streams pause during the pattern's silences).
    pub(super) sending_flag: Option<Arc<AtomicBool>>,
}

impl<C: Classifier, P: Policy> OpsDriver<C, P> {
    /// A driver for a controller that has not been started.
    pub fn new(mut ctl: Controller<C, P>, rtt: RttSource, cfg: DriverConfig) -> Result<Self> {
        cfg.validate(ctl.config().sample_period_ns)?;
        ctl.set_lead_in(cfg.lead_in).map_err(|_| {
            Error::invalid(
                "the OPS controller was already started; give the driver a fresh controller",
            )
        })?;
        Ok(Self {
            ctl,
            cfg,
            rtt: Some(rtt),
            sending: false,
            actual: None,
            cca_sets: 0,
            origin: Arc::new(AtomicU64::new(0)),
            t_in: 0,
            pending: Vec::with_capacity(32),
            sending_flag: None,
        })
    }

    /// Mirror whether the controller lets the socket send (false during an
    /// active pattern's silent segments, 000 §3.2) into `flag` after every
    /// step, so that other connections of the same transfer can pause with
    /// this one ([`send_follower_source`](super::send_follower_source)).
    pub fn publish_sending(&mut self, flag: Arc<AtomicBool>) {
        flag.store(self.sending, Ordering::Release);
        self.sending_flag = Some(flag);
    }

    /// The controller (phase, stats, configuration).
    pub fn controller(&self) -> &Controller<C, P> {
        &self.ctl
    }

    /// Start the controller at `now_ns` and carry out its first actions on
    /// `sock` (for custom loops and benches; [`OpsDriver::run`] calls it).
    /// The socket is first set to the controller's initial CCA. With
    /// [`DriverConfig::lead_in`] the controller begins with the lead-in and
    /// its first probe starts one segment later.
    pub fn start(
        &mut self,
        sock: impl AsFd,
        now_ns: u64,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let fd = sock.as_fd();
        require_tcp(fd, "run OPS")?;
        let initial = self.ctl.config().initial_cca;
        set_cca(fd, initial.as_str())?;
        self.actual = Some(initial);
        self.cca_sets += 1;
        on_event(&DriverEvent::CcaSet {
            cca: initial,
            at_ns: monotonic_ns(),
            latency_ns: None,
        });
        self.ctl.start(now_ns)?;
        self.t_in = now_ns;
        self.apply(fd, None, on_event)
    }

    /// Report the events of the current step, in order.
    pub(super) fn flush(&mut self, on_event: &mut dyn FnMut(&DriverEvent)) {
        for e in self.pending.drain(..) {
            on_event(&e);
        }
    }

    /// Feed one RTT sample taken at `sample_ns` and carry out the resulting
    /// actions on `sock` at once, then report the events: this is the path
    /// from the last sample of a window to the `setsockopt` call that
    /// [`DriverEvent::CcaSet`]'s latency measures (public for benches and
    /// custom loops). The sample before the last one also makes the
    /// classifier prepare the decision ([`Classifier::prepare`]).
    pub fn feed_sample(
        &mut self,
        sock: impl AsFd,
        sample_ns: u64,
        rtt_ms: f64,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let fd = sock.as_fd();
        self.ctl.handle_sample(sample_ns, rtt_ms)?;
        self.t_in = self.t_in.max(sample_ns);
        self.apply(fd, Some(sample_ns), on_event)
    }

    /// Switch the socket to `cca` unless the driver already set it; true if it switched.
    /// The [`DriverEvent::CcaSet`] waits in `pending` for the next `flush`.
    fn ensure_cca(
        &mut self,
        fd: BorrowedFd<'_>,
        cca: CcaName,
        sample_ns: Option<u64>,
    ) -> Result<bool> {
        if self.actual == Some(cca) {
            return Ok(false);
        }
        // 000 Table 7.2: TCP_CONGESTION on the live connection, read back.
        switch_cca(fd, cca)?;
        self.actual = Some(cca);
        let at_ns = monotonic_ns();
        self.cca_sets += 1;
        self.pending.push(DriverEvent::CcaSet {
            cca,
            at_ns,
            latency_ns: sample_ns.map(|s| at_ns.saturating_sub(s)),
        });
        Ok(true)
    }

    /// Drain the controller's outputs: switch the CCA, start/stop sending;
    /// then report every event of the step (also when an action failed).
    pub(super) fn apply(
        &mut self,
        fd: BorrowedFd<'_>,
        sample_ns: Option<u64>,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<()> {
        let r = self.act(fd, sample_ns);
        self.flush(on_event);
        r
    }

    /// The actions of [`OpsDriver::apply`]; events go to `pending`.
    fn act(&mut self, fd: BorrowedFd<'_>, sample_ns: Option<u64>) -> Result<()> {
        let mut decided: Option<CcaName> = None;
        let mut switched = false;
        while let Some(out) = self.ctl.poll() {
            match out {
                Output::Action(Action::SetCca(cca)) => {
                    if self.ensure_cca(fd, cca, sample_ns)? {
                        switched |= decided == Some(cca);
                    }
                }
                Output::Action(Action::SendFullSpeed { cca, .. } | Action::Steady { cca, .. }) => {
                    // The socket must hold the action's CCA whatever the
                    // controller assumes (e.g. `start` on a socket set elsewhere).
                    if self.ensure_cca(fd, cca, sample_ns)? {
                        switched |= decided == Some(cca);
                    }
                    self.sending = true;
                }
                Output::Action(Action::Silence { .. }) => self.sending = false,
                Output::Event(ev) => {
                    if let Event::Selected { cca, .. } = ev {
                        decided = Some(cca);
                    }
                    self.pending.push(DriverEvent::Ops(ev));
                }
            }
        }
        if let Some(f) = &self.sending_flag {
            f.store(self.sending, Ordering::Release);
        }
        // The prober fires at the controller's grid (sample k ↔ second k of a probe).
        self.origin
            .store(self.ctl.sample_grid_origin_ns(), Ordering::Relaxed);
        if let (Some(cca), Some(s)) = (decided, sample_ns) {
            // Taken before any event is reported: the decision's own span.
            self.pending.push(DriverEvent::Decision {
                cca,
                latency_ns: monotonic_ns().saturating_sub(s),
                switched,
            });
        }
        Ok(())
    }
}
