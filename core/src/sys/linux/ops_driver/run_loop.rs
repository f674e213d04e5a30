//! [`OpsDriver::run`]: the blocking sending loop. Each turn it reads the
//! prober's samples and hands them to the controller with their timestamps,
//! lets controller time pass (`handle_timeout`), closes byte intervals,
//! applies the resulting actions and sends or waits until the next deadline.
//! Every decision (phases, lead-in, which sample is window sample 0) is the
//! controller's (DESIGN.md "Drivers are dumb"; 000 §1.2, §3.2).

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::lowat::LowatGuard;
use super::meter::IntervalMeter;
use super::prober::{pipe, spawn_prober, WireSample, WIRE};
use super::pump::{wait, NonBlockGuard, Pump, Source, MAX_WAIT_NS};
use super::{DriverEvent, DriverReport, OpsDriver};
use crate::ops::{Classifier, Policy};
use crate::sys::linux::clock::monotonic_ns;
use crate::sys::linux::rtt::BurstConfig;
use crate::sys::linux::sockopt::require_tcp;
use crate::{Error, Result};

/// Stops and joins the prober thread on every exit path.
struct Join(Arc<AtomicBool>, Option<JoinHandle<Result<()>>>);

impl Drop for Join {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

impl<C: Classifier, P: Policy> OpsDriver<C, P> {
    /// Run the OPS cycle on `sock`, sending from `source`, until EOF, the time
    /// limit or `stop` (raised from another thread or a signal handler, e.g.
    /// [`signal::interrupt_flag`](crate::sys::linux::signal::interrupt_flag);
    /// the run then ends within a few ms with [`EndReason::Stopped`](super::EndReason::Stopped)).
    /// The socket stays open and owned by the caller (the next byte offset
    /// is `report.bytes_sent` past where `source` started). Errors: the
    /// socket is not TCP, a CCA is unavailable or not allowed, the prober
    /// cannot be opened, a send fails.
    pub fn run(
        &mut self,
        sock: impl AsFd,
        source: &mut dyn Read,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        self.run_source(sock, &mut Source::Reader(source), stop, on_event)
    }

    /// [`run`](Self::run) from any [`Source`], e.g. a
    /// [`FileSource`](super::FileSource) sent with `sendfile(2)` (the socket
    /// is non-blocking during the run; its flags are restored after).
    pub fn run_source(
        &mut self,
        sock: impl AsFd,
        source: &mut Source<'_>,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        let fd = sock.as_fd();
        require_tcp(fd, "run OPS")?;
        let rtt = self.rtt.take().ok_or_else(|| {
            Error::invalid(
                "this OpsDriver has already run; create a new driver (and controller) per transfer",
            )
        })?;
        let probe = rtt.open()?;
        let lowat_guard = LowatGuard::set(fd, self.cfg.notsent_lowat_bytes)?;
        let nonblock_guard = NonBlockGuard::set(fd, source)?;
        let (rx, tx) = pipe()?;
        let period = self.ctl.config().sample_period_ns;
        let t0 = monotonic_ns();
        self.origin.store(t0, Ordering::Relaxed);
        let prober_stop = Arc::new(AtomicBool::new(false));
        // The echo timeout is the recorder's (netlab `burst_config_every`):
        // replies are awaited until 2 ms before the next burst is due (189 ms
        // at 200 ms; the configured 400 ms at 1 s), at most the configured
        // timeout (`echo_timeout_ns`). A reply that late is still placed
        // right: the controller reads a sample's place in the window from
        // when its burst began, not from when its replies came in
        // (`Controller::handle_echo_sample`). The case that needs it: a probe
        // starts between two ticks of the old grid, so a burst begun up to
        // FIRST_SAMPLE_SLACK_NS before the start may be taken as sample 0
        // half a period in, before the burst the prober fires at the start
        // (after that one) has its replies; the later one then replaces
        // sample 0 instead of becoming sample 1. Each burst has its own
        // sequence numbers (`echo_burst` drops the others), and the prober
        // fires one burst at a time, so samples come in in firing order; a
        // burst fired late delays the next tick by at most its own lateness
        // less the 2-ms guard, so the lateness shrinks from tick to tick.
        let prober = spawn_prober(
            probe,
            BurstConfig {
                timeout_ns: super::echo_timeout_ns(&self.cfg.burst, period),
                ..self.cfg.burst
            },
            period,
            self.origin.clone(),
            prober_stop.clone(),
            tx,
        )?;
        let join = Join(prober_stop, Some(prober));
        let r = self.run_loop(fd, source, stop, on_event, &rx, t0);
        drop(join);
        drop(nonblock_guard);
        drop(lowat_guard);
        r
    }

    fn run_loop(
        &mut self,
        fd: BorrowedFd<'_>,
        source: &mut Source<'_>,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
        rx: &OwnedFd,
        t0: u64,
    ) -> Result<DriverReport> {
        // With a lead-in the controller starts by running it (its actions).
        self.start(fd, t0, on_event)?;
        let mut pump = Pump::new(fd, self.cfg.chunk_bytes, source);
        let limit = self.cfg.time_limit_ns.map(|l| t0.saturating_add(l));
        let mut meter = IntervalMeter::new(fd, t0, self.cfg.interval_ns);
        let mut lost_samples = 0u64;
        let mut sbuf = [0u8; WIRE];
        let end = loop {
            let now = monotonic_ns();
            // Samples from the prober.
            loop {
                // SAFETY: valid buffer; non-blocking pipe.
                let n = unsafe { libc::read(rx.as_raw_fd(), sbuf.as_mut_ptr().cast(), WIRE) };
                if n != WIRE as isize {
                    break;
                }
                let s = WireSample::decode(&sbuf);
                let rtt = s.rtt_ms.is_finite().then_some(s.rtt_ms);
                if rtt.is_none() {
                    lost_samples += 1;
                }
                // Reported with the events of the step this sample causes,
                // after its actions (see `pending`).
                self.pending.push(DriverEvent::Rtt {
                    at_ns: s.at_ns,
                    rtt_ms: rtt,
                    answered: s.answered,
                });
                // Inputs must not go back in time: the main loop may have
                // passed a later `now` before it read this sample.
                let at = s.at_ns.max(self.t_in);
                self.t_in = at;
                if let Err(e) = self.ctl.handle_echo_sample(at, s.start_ns, rtt) {
                    self.flush(on_event);
                    return Err(e);
                }
                self.apply(fd, Some(s.at_ns), on_event)?;
            }
            let now = now.max(self.t_in);
            self.t_in = now;
            if self.ctl.poll_timeout().is_some_and(|t| t <= now) {
                self.ctl.handle_timeout(now)?;
                self.apply(fd, None, on_event)?;
            }
            if let Some(iv) = meter.close(fd, now, pump.total) {
                self.ctl.handle_bytes(now, iv.bytes)?;
                // The policy's feedback hook (a DPS policy learns from it).
                self.ctl.handle_feedback(now, &iv.feedback())?;
                self.apply(fd, None, on_event)?;
                let cca = self.actual.unwrap_or(self.ctl.socket_cca());
                on_event(&iv.event(pump.total, cca, self.ctl.phase()));
            }
            if let Some(end) = pump.end(stop, now, limit) {
                break end;
            }
            let mut deadline = meter.due_ns().min(now + MAX_WAIT_NS);
            if let Some(t) = self.ctl.poll_timeout() {
                deadline = deadline.min(t);
            }
            if let Some(l) = limit {
                deadline = deadline.min(l);
            }
            if self.sending {
                if pump.try_send(source)? || pump.drained() {
                    continue;
                }
                wait(fd, true, rx, deadline);
            } else {
                wait(fd, false, rx, deadline);
            }
        };
        let ended = monotonic_ns();
        Ok(DriverReport {
            bytes_sent: pump.total,
            started_ns: t0,
            ended_ns: ended,
            end,
            stats: self.ctl.stats_at(ended.max(self.t_in)),
            cca_sets: self.cca_sets,
            lost_samples,
        })
    }
}
