//! The RTT prober thread (000 §3.2: 10 echoes 1 ms apart, their mean one
//! 1 Hz sample) and the pipe that carries its samples to the sending loop.
//! The prober fires on the grid the controller sets
//! ([`Controller::sample_grid_origin_ns`](crate::ops::Controller::sample_grid_origin_ns));
//! what a sample means for the window is the controller's decision.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::ops::FIRST_SAMPLE_SLACK_NS;
use crate::sys::linux::clock::{monotonic_ns, sleep_until_monotonic};
use crate::sys::linux::rtt::{echo_burst, BurstConfig, EchoProbe};
use crate::{Error, Result};

/// How late the prober may notice a tick and still fire it: the controller
/// counts a burst begun that late as the probe's sample 0.
const LATE_NS: u64 = FIRST_SAMPLE_SLACK_NS;

pub(super) const WIRE: usize = 32;

/// One sample as written by the prober thread into the wake pipe: 32 bytes
/// (atomic for pipes, < PIPE_BUF).
#[derive(Debug, Clone, Copy)]
pub(super) struct WireSample {
    /// When the burst's last reply was in (or its timeout ran out).
    pub(super) at_ns: u64,
    /// When the burst's first echo left.
    pub(super) start_ns: u64,
    pub(super) rtt_ms: f64,
    pub(super) answered: u16,
}

impl WireSample {
    fn encode(&self) -> [u8; WIRE] {
        let mut b = [0u8; WIRE];
        b[..8].copy_from_slice(&self.at_ns.to_ne_bytes());
        b[8..16].copy_from_slice(&self.start_ns.to_ne_bytes());
        b[16..24].copy_from_slice(&self.rtt_ms.to_bits().to_ne_bytes());
        b[24..26].copy_from_slice(&self.answered.to_ne_bytes());
        b
    }
    pub(super) fn decode(b: &[u8; WIRE]) -> Self {
        let u = |r: &[u8]| u64::from_ne_bytes(r.try_into().unwrap_or([0; 8]));
        Self {
            at_ns: u(&b[..8]),
            start_ns: u(&b[8..16]),
            rtt_ms: f64::from_bits(u(&b[16..24])),
            answered: u16::from_ne_bytes([b[24], b[25]]),
        }
    }
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds has room for two descriptors.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(Error::io(
            "pipe2 for the RTT prober",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: both descriptors are fresh and owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `echo_burst` takes a sized prober; this forwards to a boxed one.
struct DynProbe<'a>(&'a mut (dyn EchoProbe + Send));

impl EchoProbe for DynProbe<'_> {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        self.0.send_echo(seq)
    }
    fn recv_reply(&mut self, timeout: std::time::Duration) -> Result<Option<(u16, u64)>> {
        self.0.recv_reply(timeout)
    }
}

/// The prober thread: one echo burst per period at `origin + k·period`, the
/// start of each second of the probe, as the netlab training collection
/// samples (the burst goes out as the pattern segment changes); `origin` is
/// moved to each probe's start. A tick noticed up to [`LATE_NS`] late still
/// fires, so a probe never loses its first sample to the prober's sleep; a
/// tick missed altogether (the burst before still awaiting replies) is
/// filled by the controller with the previous sample. One burst at a time,
/// so samples reach the controller in firing order.
pub(super) fn spawn_prober(
    mut probe: Box<dyn EchoProbe + Send>,
    burst: BurstConfig,
    period_ns: u64,
    origin: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tx: OwnedFd,
) -> Result<JoinHandle<Result<()>>> {
    std::thread::Builder::new()
        .name("opsel-rtt".into())
        .spawn(move || -> Result<()> {
            // 1 ns timer slack: the default 50 µs would blur the 1 ms echo spacing.
            // SAFETY: prctl on this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            let mut seq: u16 = 0;
            let mut fired: Option<u64> = None;
            loop {
                let tick = loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let now = monotonic_ns();
                    let o = origin.load(Ordering::Relaxed);
                    // The latest grid point at or before now, if still fresh
                    // and not fired yet; else the next one.
                    let tick = if now < o {
                        o
                    } else {
                        let last = o + (now - o) / period_ns * period_ns;
                        if now - last <= LATE_NS && fired != Some(last) {
                            last
                        } else {
                            last + period_ns
                        }
                    };
                    if tick <= now {
                        break tick;
                    }
                    // Sleep in short steps so a moved origin or stop is seen.
                    let step = tick.min(now + 10_000_000);
                    sleep_until_monotonic(step);
                    if step == tick {
                        break tick;
                    }
                };
                fired = Some(tick);
                let b = echo_burst(&mut DynProbe(probe.as_mut()), burst, seq)?;
                seq = seq.wrapping_add(burst.count);
                let s = WireSample {
                    at_ns: monotonic_ns(),
                    start_ns: b.start_mono_ns,
                    rtt_ms: b.mean_rtt_ms().unwrap_or(f64::NAN),
                    answered: (b.rtts_ns.len() - b.lost()) as u16,
                };
                let bytes = s.encode();
                // SAFETY: valid buffer; a full pipe (reader gone) drops the sample.
                unsafe { libc::write(tx.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
            }
        })
        .map_err(|e| Error::io("spawn the RTT prober thread", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_sample_roundtrip() {
        let s = WireSample {
            at_ns: 123_456_789_012,
            start_ns: 123_000_000_000,
            rtt_ms: 65.25,
            answered: 9,
        };
        let d = WireSample::decode(&s.encode());
        assert_eq!(
            (d.at_ns, d.start_ns, d.rtt_ms, d.answered),
            (123_456_789_012, 123_000_000_000, 65.25, 9)
        );
        let lost = WireSample {
            rtt_ms: f64::NAN,
            ..s
        };
        assert!(WireSample::decode(&lost.encode()).rtt_ms.is_nan());
    }

    proptest::proptest! {
        #[test]
        fn wire_sample_roundtrips(at in proptest::prelude::any::<u64>(), rtt in proptest::prelude::any::<f64>(), n in proptest::prelude::any::<u16>()) {
            let d = WireSample::decode(&WireSample { at_ns: at, start_ns: at ^ 1, rtt_ms: rtt, answered: n }.encode());
            proptest::prop_assert_eq!(d.at_ns, at);
            proptest::prop_assert_eq!(d.rtt_ms.to_bits(), rtt.to_bits());
            proptest::prop_assert_eq!(d.answered, n);
        }
    }
}
