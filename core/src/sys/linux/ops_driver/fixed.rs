//! The fixed-CCA baseline of 000 Table 6.3 (foreground "fixed CUBIC" /
//! "fixed BBR"): the same pump, interval meter and end conditions as
//! [`OpsDriver::run`](super::OpsDriver::run), with one CCA and no controller.

use std::io::Read;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

use super::lowat::LowatGuard;
use super::meter::IntervalMeter;
use super::prober::pipe;
use super::pump::{wait, NonBlockGuard, Pump, Source, MAX_WAIT_NS};
use super::{DriverConfig, DriverEvent, DriverReport, NS_PER_S};
use crate::ops::{Phase, Stats};
use crate::probe::CcaName;
use crate::sys::linux::cca::set_cca;
use crate::sys::linux::clock::monotonic_ns;
use crate::sys::linux::sockopt::require_tcp;
use crate::sys::linux::tput::{Side, ThroughputSample, ThroughputSampler};
use crate::Result;

/// Set `cca` once, then send from `source` until EOF, the time limit or
/// `stop`, reporting [`DriverEvent::Interval`]s as [`OpsDriver::run`](super::OpsDriver::run)
/// does (phase `steady`). No RTT probe runs.
pub fn send_fixed(
    sock: impl AsFd,
    source: &mut dyn Read,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    send_fixed_source(sock, &mut Source::Reader(source), cca, cfg, stop, on_event)
}

/// [`send_fixed`] from any [`Source`], e.g. a [`FileSource`](super::FileSource)
/// sent with `sendfile(2)`.
pub fn send_fixed_source(
    sock: impl AsFd,
    source: &mut Source<'_>,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    send_gated(sock.as_fd(), source, cca, cfg, stop, None, None, on_event)
}

/// What the sampling hook of [`send_sampled_source`] asks for after a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleAction {
    /// Keep sampling.
    Continue,
    /// Set this congestion control on the socket (reported as
    /// [`DriverEvent::CcaSet`]), then keep sampling.
    SetCca(CcaName),
    /// Stop sampling; set this CCA first when given (an A/B's choice). The
    /// rest of the source goes with the CCA then set.
    Done(Option<CcaName>),
}

/// The throughput sampling of [`send_sampled_source`]: the interval of the
/// sampler's grid and the hook that sees each sample.
pub struct Sampling<'a> {
    /// Grid of the samples (ns), e.g. a FastProb model's interval.
    pub interval_ns: u64,
    /// Called with each interval's acknowledged rate (the same
    /// [`ThroughputSampler`] as `opsel probe --throughput`, sender side) and
    /// the bytes handed to the socket so far. Runs on the sending thread:
    /// it must be quick and should not allocate.
    #[allow(clippy::type_complexity)]
    pub on_sample: &'a mut dyn FnMut(&ThroughputSample, u64) -> Result<SampleAction>,
}

/// [`send_fixed_source`] that also samples the socket's acknowledged rate
/// from `TCP_INFO` on a fixed grid while it sends (the sampler's deadline is
/// one of the loop's), and lets the hook switch the CCA on the live socket:
/// the start of a transfer is then a FastProb probe or a CCA A/B (004 §IV,
/// §VI; notes 004 §8 B.2) that costs no bytes of its own. Sampling starts
/// when `cca` is set and ends when the hook returns [`SampleAction::Done`].
pub fn send_sampled_source(
    sock: impl AsFd,
    source: &mut Source<'_>,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    sampling: Sampling<'_>,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    send_gated(
        sock.as_fd(),
        source,
        cca,
        cfg,
        stop,
        None,
        Some(sampling),
        on_event,
    )
}

/// [`send_fixed_source`] that sends only while `sending` is true: another
/// connection of the same transfer runs the [`OpsDriver`](super::OpsDriver),
/// which mirrors its pattern's silences into `sending`
/// ([`OpsDriver::publish_sending`](super::OpsDriver::publish_sending)); the
/// CCA switches are the caller's (set on this socket as the driver sets its
/// own). With `cfg.notsent_lowat_bytes` the queue drains during a silence
/// as on the driver's socket. A paused loop looks at `sending` every
/// millisecond.
pub fn send_follower_source(
    sock: impl AsFd,
    source: &mut Source<'_>,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    sending: &AtomicBool,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    send_gated(
        sock.as_fd(),
        source,
        cca,
        cfg,
        stop,
        Some(sending),
        None,
        on_event,
    )
}

/// How often a paused follower looks at its `sending` flag.
const PAUSED_POLL_NS: u64 = 1_000_000;

#[allow(clippy::too_many_arguments)]
fn send_gated(
    fd: std::os::fd::BorrowedFd<'_>,
    source: &mut Source<'_>,
    cca: CcaName,
    cfg: &DriverConfig,
    stop: &AtomicBool,
    sending: Option<&AtomicBool>,
    mut sampling: Option<Sampling<'_>>,
    on_event: &mut dyn FnMut(&DriverEvent),
) -> Result<DriverReport> {
    cfg.validate(NS_PER_S)?;
    require_tcp(fd, "send")?;
    set_cca(fd, cca.as_str())?;
    let t0 = monotonic_ns();
    on_event(&DriverEvent::CcaSet {
        cca,
        at_ns: t0,
        latency_ns: None,
    });
    let mut cur = cca;
    let mut cca_sets = 1;
    let mut sampler = match &sampling {
        Some(s) => Some(ThroughputSampler::new(
            fd,
            Side::Sender,
            std::time::Duration::from_nanos(s.interval_ns),
        )?),
        None => None,
    };
    let _lowat = LowatGuard::set(fd, cfg.notsent_lowat_bytes)?;
    let _nonblock = NonBlockGuard::set(fd, source)?;
    // Nothing writes to this pipe: `wait` then waits for the socket alone.
    let (rx, _tx) = pipe()?;
    let mut pump = Pump::new(fd, cfg.chunk_bytes, source);
    let limit = cfg.time_limit_ns.map(|l| t0.saturating_add(l));
    let mut meter = IntervalMeter::new(fd, t0, cfg.interval_ns);
    let end = loop {
        let now = monotonic_ns();
        if let Some(iv) = meter.close(fd, now, pump.total) {
            on_event(&iv.event(pump.total, cur, Phase::Steady));
        }
        if let (Some(sm), Some(hook)) = (sampler.as_mut(), sampling.as_mut()) {
            if let Some(s) = sm.poll(now)? {
                let action = (hook.on_sample)(&s, pump.total)?;
                match action {
                    SampleAction::Continue => {}
                    SampleAction::SetCca(c) | SampleAction::Done(Some(c)) => {
                        set_cca(fd, c.as_str())?;
                        cur = c;
                        cca_sets += 1;
                        on_event(&DriverEvent::CcaSet {
                            cca: c,
                            at_ns: monotonic_ns(),
                            latency_ns: None,
                        });
                    }
                    SampleAction::Done(None) => {}
                }
                if matches!(action, SampleAction::Done(_)) {
                    sampler = None;
                    sampling = None;
                }
            }
        }
        if let Some(end) = pump.end(stop, now, limit) {
            break end;
        }
        if sending.is_some_and(|s| !s.load(Ordering::Acquire)) {
            // A silence of the driving connection: send nothing.
            wait(fd, false, &rx, (now + PAUSED_POLL_NS).min(meter.due_ns()));
            continue;
        }
        if pump.try_send(source)? || pump.drained() {
            continue;
        }
        let mut deadline = meter.due_ns().min(now + MAX_WAIT_NS);
        if let Some(sm) = &sampler {
            deadline = deadline.min(sm.due_ns());
        }
        if let Some(l) = limit {
            deadline = deadline.min(l);
        }
        wait(fd, true, &rx, deadline);
    };
    let ended = monotonic_ns();
    Ok(DriverReport {
        bytes_sent: pump.total,
        started_ns: t0,
        ended_ns: ended,
        end,
        stats: Stats::default(),
        cca_sets,
        lost_samples: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{DriverConfig, EndReason, FileSource};
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// A follower sends nothing while the gate is closed (it ends on the stop
    /// flag, raised after three of its intervals), then the whole range once
    /// the gate is open (the striped half of an active pattern's silences).
    #[test]
    fn a_follower_sends_only_while_the_gate_is_open() {
        let path = std::env::temp_dir().join(format!("opsel-follower-{}", std::process::id()));
        let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 13 + i / 97) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            rx.read_to_end(&mut got).unwrap();
            got
        });
        let cfg = DriverConfig {
            interval_ns: 5_000_000,
            ..DriverConfig::default()
        };
        let (stop, gate) = (AtomicBool::new(false), AtomicBool::new(false));
        let mut src = Source::File(FileSource::new(file.as_fd(), 0, data.len() as u64).unwrap());
        let (mut intervals, mut sent_while_closed) = (0, 0);
        let r = send_follower_source(
            &tx,
            &mut src,
            CcaName::CUBIC,
            &cfg,
            &stop,
            &gate,
            &mut |e| {
                if let DriverEvent::Interval { bytes, .. } = e {
                    sent_while_closed += bytes;
                    intervals += 1;
                    if intervals == 3 {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            },
        )
        .unwrap();
        assert_eq!(
            (r.end, r.bytes_sent, sent_while_closed),
            (EndReason::Stopped, 0, 0)
        );
        stop.store(false, Ordering::Relaxed);
        gate.store(true, Ordering::Release);
        let r = send_follower_source(
            &tx,
            &mut src,
            CcaName::CUBIC,
            &cfg,
            &stop,
            &gate,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!((r.end, r.bytes_sent), (EndReason::Eof, data.len() as u64));
        drop(tx);
        assert!(reader.join().unwrap() == data);
        let _ = std::fs::remove_file(&path);
    }
    /// The sampling hook sees samples on its grid while the file goes out,
    /// a `SetCca` reaches the socket and the event stream, `Done` sets its
    /// CCA and ends the sampling, and every byte arrives in order.
    #[test]
    fn sampled_send_switches_on_the_hook_and_delivers_every_byte() {
        let path = std::env::temp_dir().join(format!("opsel-sampled-{}", std::process::id()));
        let data: Vec<u8> = (0..40_000_000u32)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        std::fs::write(&path, &data).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let tx = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut rx, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            // A slow reader, so the transfer spans several sample intervals.
            let mut got = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                match rx.read(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            got
        });
        let cfg = DriverConfig::default();
        let stop = AtomicBool::new(false);
        let mut src = Source::File(FileSource::new(file.as_fd(), 0, data.len() as u64).unwrap());
        let (mut samples, mut last_total) = (0u32, 0u64);
        let mut hook = |s: &ThroughputSample, total: u64| {
            samples += 1;
            assert!(s.interval_ns > 0 && total >= last_total);
            last_total = total;
            Ok(match samples {
                2 => SampleAction::SetCca(CcaName::RENO),
                4 => SampleAction::Done(Some(CcaName::CUBIC)),
                n if n > 4 => panic!("a sample after Done"),
                _ => SampleAction::Continue,
            })
        };
        let mut sets = Vec::new();
        let r = send_sampled_source(
            &tx,
            &mut src,
            CcaName::CUBIC,
            &cfg,
            &stop,
            Sampling {
                interval_ns: 5_000_000,
                on_sample: &mut hook,
            },
            &mut |e| {
                if let DriverEvent::CcaSet { cca, .. } = e {
                    sets.push(*cca);
                }
            },
        )
        .unwrap();
        assert_eq!(crate::sys::linux::get_cca(&tx).unwrap(), "cubic");
        drop(tx);
        assert_eq!((r.end, r.bytes_sent), (EndReason::Eof, data.len() as u64));
        assert_eq!(r.cca_sets, 3);
        assert_eq!(sets, vec![CcaName::CUBIC, CcaName::RENO, CcaName::CUBIC]);
        assert_eq!(samples, 4);
        assert!(reader.join().unwrap() == data);
        let _ = std::fs::remove_file(&path);
    }
}
