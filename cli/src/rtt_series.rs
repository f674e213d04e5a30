//! A live RTT series toward a host, as OPS samples it (000 §3.2: every
//! sample is the mean of an echo burst, 10 echoes 1 ms apart, one sample per
//! second): `opsel probe` prints it, `opsel classify --host` classifies it.
//! The echoes are the core's probers (`sys::linux::rtt`); this module only
//! schedules the bursts and names the target.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use opsel::sys::linux::rtt::{echo_burst, BurstConfig, EchoProbe, IcmpProber, UdpEchoProber};
use opsel::{Error, Result};
use serde::Serialize;

/// What the echoes go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// ICMP echo (a ping socket, or a raw socket as root).
    Icmp(IpAddr),
    /// UDP echoes to an `opsel` echo responder (`opsel recv` runs one).
    Udp(SocketAddr),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Icmp(ip) => write!(f, "icmp:{ip}"),
            Target::Udp(a) => write!(f, "udp:{a}"),
        }
    }
}

/// `HOST` or `icmp:HOST` (ICMP echo), `udp:HOST:PORT` (UDP echo responder).
/// A host name is resolved; its first address is used.
pub fn parse_target(s: &str) -> Result<Target> {
    let s = s.trim();
    if let Some(hp) = s.strip_prefix("udp:") {
        let addr = hp
            .to_socket_addrs()
            .map_err(|e| {
                Error::invalid(format!(
                    "{s:?}: {e}; write udp:HOST:PORT of a UDP echo responder"
                ))
            })?
            .next()
            .ok_or_else(|| Error::invalid(format!("{s:?}: the host has no address")))?;
        return Ok(Target::Udp(addr));
    }
    let host = s.strip_prefix("icmp:").unwrap_or(s);
    if host.is_empty() {
        return Err(Error::invalid(
            "no host given; write HOST, icmp:HOST or udp:HOST:PORT",
        ));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Target::Icmp(ip));
    }
    let ip = (host, 0)
        .to_socket_addrs()
        .map_err(|e| Error::invalid(format!("cannot resolve {host:?}: {e}")))?
        .next()
        .ok_or_else(|| Error::invalid(format!("{host:?} has no address")))?
        .ip();
    Ok(Target::Icmp(ip))
}

/// How to sample: `samples` bursts `period` apart, each `burst`.
#[derive(Debug, Clone, Copy)]
pub struct SeriesSpec {
    pub samples: usize,
    pub period: Duration,
    pub burst: BurstConfig,
}

impl SeriesSpec {
    /// 000 §3.2: one sample per second, 10 echoes 1 ms apart.
    pub fn ops(samples: usize) -> Self {
        Self {
            samples,
            period: Duration::from_secs(1),
            burst: BurstConfig::default(),
        }
    }

    fn check(&self) -> Result<()> {
        if self.samples == 0 || self.samples > 86_400 {
            return Err(Error::invalid(format!(
                "{} samples: give 1..=86400",
                self.samples
            )));
        }
        if self.period < Duration::from_millis(20) || self.period > Duration::from_secs(60) {
            return Err(Error::invalid(format!(
                "sample period {:?}: give 0.02..=60 s (000 §3.2 uses 1 s)",
                self.period
            )));
        }
        Ok(())
    }
}

/// One sample of the series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the first burst started.
    pub t_s: f64,
    /// Mean RTT of the answered echoes; `None` when every echo was lost.
    pub rtt_ms: Option<f64>,
    pub answered: u16,
    pub sent: u16,
}

fn prober(t: &Target) -> Result<Box<dyn EchoProbe + Send>> {
    Ok(match t {
        Target::Icmp(ip) => Box::new(IcmpProber::new_ip(*ip)?),
        Target::Udp(dst) => {
            let bind: SocketAddr = if dst.is_ipv4() {
                SocketAddr::from(([0, 0, 0, 0], 0))
            } else {
                SocketAddr::from(([0u16; 8], 0))
            };
            let sock = UdpSocket::bind(bind).map_err(|e| Error::io("bind the UDP prober", e))?;
            Box::new(UdpEchoProber::new(sock, *dst)?)
        }
    })
}

/// Probe `spec.samples` samples toward `target`, calling `each` as each
/// arrives. The bursts keep an absolute 1/period schedule, as the driver's
/// sampler does, so a slow reply does not stretch the series.
pub fn probe(
    target: &Target,
    spec: SeriesSpec,
    each: &mut dyn FnMut(&Sample),
) -> Result<Vec<Sample>> {
    spec.check()?;
    let mut p = prober(target)?;
    // A reply may come up to one period late; later ones belong to no burst.
    let burst = BurstConfig {
        timeout_ns: spec.burst.timeout_ns.min(spec.period.as_nanos() as u64 / 2),
        ..spec.burst
    };
    let start = Instant::now();
    let mut out = Vec::with_capacity(spec.samples);
    for k in 0..spec.samples {
        let due = start + spec.period * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let seq0 = (k as u16).wrapping_mul(burst.count);
        let b = echo_burst(&mut p, burst, seq0)?;
        let s = Sample {
            t_s: due.duration_since(start).as_secs_f64(),
            rtt_ms: b.mean_rtt_ms(),
            answered: (b.rtts_ns.len() - b.lost()) as u16,
            sent: b.rtts_ns.len() as u16,
        };
        each(&s);
        out.push(s);
    }
    Ok(out)
}

/// The series as a classifier window: a lost sample holds the previous one
/// (as the OPS driver does); more than a quarter lost, or a lost first
/// sample with nothing to hold, is an error naming the target.
pub fn window(target: &Target, samples: &[Sample]) -> Result<Vec<f64>> {
    let lost = samples.iter().filter(|s| s.rtt_ms.is_none()).count();
    if lost * 4 > samples.len() {
        return Err(Error::invalid(format!(
            "{lost} of {} samples from {target} had no reply; check the host answers echoes \
             (ICMP may be filtered: run `opsel recv` there and use udp:HOST:PORT)",
            samples.len()
        )));
    }
    let mut w = Vec::with_capacity(samples.len());
    let mut last: Option<f64> = None;
    for s in samples {
        match s.rtt_ms.or(last) {
            Some(v) => {
                w.push(v);
                last = Some(v);
            }
            None => {
                return Err(Error::invalid(format!(
                    "the first sample from {target} had no reply; nothing to hold in its place, probe again"
                )))
            }
        }
    }
    // Leading losses were rejected above; the window is complete.
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(
            parse_target("10.0.0.1").unwrap(),
            Target::Icmp("10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            parse_target("icmp:::1").unwrap(),
            Target::Icmp("::1".parse().unwrap())
        );
        assert_eq!(
            parse_target("udp:127.0.0.1:7008").unwrap(),
            Target::Udp("127.0.0.1:7008".parse().unwrap())
        );
        assert!(parse_target("udp:127.0.0.1").is_err());
        assert!(parse_target("").is_err());
        assert!(parse_target("localhost")
            .unwrap()
            .to_string()
            .starts_with("icmp:"));
    }

    fn s(v: Option<f64>) -> Sample {
        Sample {
            t_s: 0.0,
            rtt_ms: v,
            answered: v.map_or(0, |_| 10),
            sent: 10,
        }
    }

    #[test]
    fn lost_samples_hold_the_previous_one_up_to_a_quarter() {
        let t = Target::Icmp("10.0.0.1".parse().unwrap());
        let w = window(&t, &[s(Some(1.0)), s(None), s(Some(3.0)), s(Some(4.0))]).unwrap();
        assert_eq!(w, vec![1.0, 1.0, 3.0, 4.0]);
        let e = window(&t, &[s(Some(1.0)), s(None), s(None), s(Some(4.0))]).unwrap_err();
        assert!(e.to_string().contains("2 of 4 samples"), "{e}");
        let e = window(&t, &[s(None), s(Some(2.0)), s(Some(3.0)), s(Some(4.0))]).unwrap_err();
        assert!(e.to_string().contains("first sample"), "{e}");
    }
}
