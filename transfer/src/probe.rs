//! FastProb inside a transfer (004 §IV; the §VI analogue of notes 004 §8
//! B.2): a [`Drive`] whose first seconds are a FastProb probe, or a CCA
//! A/B, on the data connection itself. The file's own bytes are the probe,
//! so it costs no extra bytes or time; when it stops, the rest of the file
//! goes on with the transfer's CCA or the A/B's choice.
//!
//! The decisions are the sans-IO [`StartProbe`] (core `fastprob::start`);
//! the socket loop is core's pump with the `TCP_INFO` sampler of
//! `opsel probe --throughput` on the model's grid
//! ([`send_sampled_source`]); this module wires the two and measures the
//! rate after the probe for the report.

use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use opsel::fastprob::{AbSpec, FastProbModel, ProbeBudget, StartAction, StartProbe, StartReport};
use opsel::probe::CcaName;
use opsel::sys::linux::ops_driver::{
    send_sampled_source, DriverConfig, DriverEvent, DriverReport, EndReason, SampleAction,
    Sampling, Source,
};
use opsel::sys::linux::tcp_info;
use opsel::{Error, Result};
use serde::Serialize;

use crate::send::Drive;

/// The probe's report with what the transfer measured after it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    #[serde(flatten)]
    pub start: StartReport,
    /// The transfer's mean acknowledged rate from the probe's stop to the
    /// last byte acknowledged, bit/s (what the prediction predicts; `None`
    /// when the probe did not stop or the transfer did not reach its end).
    pub after_probe_bps: Option<f64>,
    /// Seconds from the probe's stop to the last byte acknowledged (the
    /// measured counterpart of the ETA).
    pub after_probe_s: Option<f64>,
    /// The file ended before FastProb stopped (too short to predict).
    pub ended_before_stop: bool,
}

/// A [`Drive`] that runs FastProb (or a CCA A/B) on the first seconds of
/// the transfer, then sends the rest with the resulting CCA.
pub struct ProbeDrive<'a> {
    probe: StartProbe,
    cca: CcaName,
    on_stop: Box<dyn FnMut(&StartReport) + 'a>,
    out: std::rc::Rc<std::cell::RefCell<Option<ProbeReport>>>,
}

impl<'a> ProbeDrive<'a> {
    /// FastProb with `model` on a transfer that uses `cca` throughout, under
    /// `budget` (a family of the file's `family_budgets`, an explicit E %, or
    /// the file's default). `on_stop` sees the report the moment the probe
    /// stops (the transfer goes on); `out` receives the final report when the
    /// drive returns.
    pub fn estimate(
        model: Arc<FastProbModel>,
        cca: CcaName,
        budget: &ProbeBudget,
        on_stop: Box<dyn FnMut(&StartReport) + 'a>,
        out: std::rc::Rc<std::cell::RefCell<Option<ProbeReport>>>,
    ) -> Result<ProbeDrive<'a>> {
        Ok(ProbeDrive {
            probe: StartProbe::estimate_with(model, budget)?,
            cca,
            on_stop,
            out,
        })
    }

    /// A CCA A/B per `spec` (candidates, fairness rule); the transfer starts
    /// on the first candidate the rule allows.
    pub fn ab(
        model: Arc<FastProbModel>,
        spec: AbSpec,
        on_stop: Box<dyn FnMut(&StartReport) + 'a>,
        out: std::rc::Rc<std::cell::RefCell<Option<ProbeReport>>>,
    ) -> Result<ProbeDrive<'a>> {
        // Every candidate must be a CCA name the socket layer takes.
        for c in &spec.candidates {
            CcaName::new(c)?;
        }
        let probe = StartProbe::ab(model, spec)?;
        let cca = CcaName::new(probe.first_cca().unwrap_or("cubic"))?;
        Ok(ProbeDrive {
            probe,
            cca,
            on_stop,
            out,
        })
    }
}

/// Bytes the peer has acknowledged on `data` (0 when the kernel does not say).
fn acked(data: &TcpStream) -> Result<u64> {
    Ok(tcp_info(data)?.bytes_acked.unwrap_or(0))
}

/// Longest wait for the last bytes to be acknowledged after the pump's EOF.
const DRAIN_LIMIT_NS: u64 = 60_000_000_000;

impl Drive for ProbeDrive<'_> {
    fn first_cca(&self) -> CcaName {
        self.cca
    }
    fn allows_streams(&self, _: u16) -> Result<()> {
        // The model predicts one connection's rate from its own samples
        // (004 §III: one transfer, one series), and an A/B switches and
        // measures one connection; with N streams sharing the path, stream
        // 0's samples would measure its share of a changing mix.
        Err(Error::invalid(
            "--fastprob and --ab probe one connection: use them with --streams 1 (the model predicts one connection's rate; with N streams stream 0 measures only its share)",
        ))
    }
    fn accepted(&mut self, offset: u64, size: u64) {
        self.probe.set_total(size.saturating_sub(offset));
    }
    fn drive(
        &mut self,
        data: &TcpStream,
        src: &mut Source<'_>,
        cfg: DriverConfig,
        stop: &AtomicBool,
        on_event: &mut dyn FnMut(&DriverEvent),
    ) -> Result<DriverReport> {
        // As FixedCca: no silences to start on time.
        let cfg = crate::send::without_silences(cfg);
        let base = acked(data)?;
        let interval_ns = self.probe.interval_ns();
        let probe = &mut self.probe;
        let on_stop = &mut self.on_stop;
        let mut stopped_at_ns: Option<u64> = None;
        let mut hook = |s: &opsel::sys::linux::tput::ThroughputSample, _sent: u64| {
            Ok(match probe.push(s.rate_bps, s.bytes)? {
                StartAction::Continue => SampleAction::Continue,
                StartAction::SetCca(c) => SampleAction::SetCca(CcaName::new(&c)?),
                StartAction::Done { set_cca } => {
                    stopped_at_ns = Some(s.at_ns);
                    on_stop(&probe.report());
                    SampleAction::Done(set_cca.as_deref().map(CcaName::new).transpose()?)
                }
            })
        };
        let r = send_sampled_source(
            data,
            src,
            self.cca,
            &cfg,
            stop,
            Sampling {
                interval_ns,
                on_sample: &mut hook,
            },
            on_event,
        )?;
        // The rate after the probe counts acknowledged bytes, so wait (at
        // most a minute) for the last bytes of the send buffer to be
        // acknowledged: the receiver needs them before it confirms anyway.
        let stop_acked = probe.stopped().map(|s| s.acked_bytes);
        let mut after = None;
        if let (Some(t_stop), Some(a_stop), EndReason::Eof) = (stopped_at_ns, stop_acked, r.end) {
            let want = base.saturating_add(r.bytes_sent);
            let t_limit = r.ended_ns.saturating_add(DRAIN_LIMIT_NS);
            loop {
                let now = opsel::sys::linux::clock::monotonic_ns();
                let a = acked(data)?;
                if a >= want || now >= t_limit {
                    let bytes = a.saturating_sub(base).saturating_sub(a_stop);
                    let dt = now.saturating_sub(t_stop);
                    if a >= want && dt > 0 {
                        after = Some((bytes as f64 * 8.0 * 1e9 / dt as f64, dt as f64 / 1e9));
                    }
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let start = probe.report();
        *self.out.borrow_mut() = Some(ProbeReport {
            ended_before_stop: start.stop.is_none() && r.end == EndReason::Eof,
            start,
            after_probe_bps: after.map(|a| a.0),
            after_probe_s: after.map(|a| a.1),
        });
        Ok(r)
    }
}
