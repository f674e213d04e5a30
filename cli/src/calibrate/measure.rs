//! Measuring the path from one end: base RTT from echo bursts, bottleneck
//! rate and buffer from a short bulk CUBIC burst to a discard sink.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use opsel::sys::linux::rtt::{echo_burst, BurstConfig, EchoProbe, IcmpProber, UdpEchoProber};
use opsel::sys::linux::{set_cca, tcp_info};
use opsel::{Error, Result};

/// Fastest of 5 echo bursts (000 §3.2: 10 echoes 1 ms apart), 200 ms apart.
pub(super) fn measure_base_rtt_ms(spec: &str) -> Result<f64> {
    let mut probe: Box<dyn EchoProbe + Send> = if let Some(ip) = spec.strip_prefix("icmp:") {
        let ip: IpAddr = ip.parse().map_err(|_| {
            Error::invalid(format!(
                "--probe {spec:?}: {ip:?} is not an IP address; write e.g. icmp:192.0.2.1 or icmp:2001:db8::1"
            ))
        })?;
        Box::new(IcmpProber::new_ip(ip)?)
    } else {
        let dst: SocketAddr = spec
            .strip_prefix("udp:")
            .unwrap_or(spec)
            .parse()
            .map_err(|_| {
                Error::invalid(format!(
                    "--probe {spec:?} is neither icmp:ADDR nor HOST:PORT of a UDP echo responder"
                ))
            })?;
        let bind: SocketAddr = if dst.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }
            .parse()
            .unwrap_or(dst);
        let sock = UdpSocket::bind(bind).map_err(|e| Error::io("bind UDP echo prober", e))?;
        Box::new(UdpEchoProber::new(sock, dst)?)
    };
    let mut best = f64::INFINITY;
    for i in 0..5u16 {
        let cfg = BurstConfig {
            timeout_ns: 2_000_000_000,
            ..BurstConfig::default()
        };
        if let Some(ms) = echo_burst(&mut probe, cfg, i * 16)?.mean_rtt_ms() {
            best = best.min(ms);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if !best.is_finite() {
        return Err(Error::invalid(format!(
            "no echo came back from {spec} in 5 bursts; check the address, or give --rtt-ms"
        )));
    }
    Ok(best)
}

/// What one bulk CUBIC flow to a discard sink shows of the path.
#[derive(Debug, Clone, Copy)]
pub(super) struct PathLoad {
    /// Goodput over the burst's second half (bytes acked, TCP_INFO), so
    /// slow start is left out.
    pub rate_mbps: f64,
    /// The largest smoothed RTT of the burst (TCP_INFO). A loss-based flow
    /// fills a drop-tail bottleneck's buffer before its first loss (slow
    /// start's overshoot, then each CUBIC epoch), so this is the base RTT
    /// plus the full buffer's queueing delay, buffer / rate.
    pub max_srtt_ms: f64,
}

impl PathLoad {
    /// The buffer as a multiple of the BDP (rate × base RTT): its queueing
    /// delay over the base RTT.
    pub fn buffer_bdp(&self, base_rtt_ms: f64) -> f64 {
        ((self.max_srtt_ms - base_rtt_ms) / base_rtt_ms).max(0.0)
    }
}

pub(super) fn measure_load(sink: &str, secs: f64) -> Result<PathLoad> {
    if !(secs.is_finite() && (1.0..=60.0).contains(&secs)) {
        return Err(Error::invalid(format!("--sink-s {secs} is outside 1..=60")));
    }
    let addr: SocketAddr = sink
        .parse()
        .map_err(|_| Error::invalid(format!("--sink {sink:?} is not HOST:PORT")))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| Error::io(format!("connect to the rate sink {addr}"), e))?;
    // Loss-based, whatever the system default is: BBR would keep the queue
    // short and hide the buffer.
    set_cca(&s, "cubic")?;
    let buf = vec![0u8; 1 << 16];
    let start = Instant::now();
    let half = Duration::from_secs_f64(secs / 2.0);
    let mut mark: Option<(Instant, u64)> = None;
    let mut max_srtt_us = 0u32;
    s.set_write_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| Error::io("set write timeout", e))?;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        s.write_all(&buf)
            .map_err(|e| Error::io(format!("send to the rate sink {addr}"), e))?;
        let info = tcp_info(&s)?;
        max_srtt_us = max_srtt_us.max(info.rtt_us);
        if mark.is_none() && start.elapsed() >= half {
            mark = Some((Instant::now(), info.bytes_acked.unwrap_or(0)));
        }
    }
    let (t0, b0) = mark.unwrap_or((start, 0));
    let b1 = tcp_info(&s)?.bytes_acked.unwrap_or(0);
    let dt = t0.elapsed().as_secs_f64();
    if b1 <= b0 || dt <= 0.0 {
        return Err(Error::invalid(format!(
            "the rate sink {addr} acknowledged nothing in {secs} s; give --rate-mbps"
        )));
    }
    Ok(PathLoad {
        rate_mbps: (b1 - b0) as f64 * 8.0 / dt / 1e6,
        max_srtt_ms: f64::from(max_srtt_us) / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One bulk CUBIC burst per buffer on a 20 Mbit/s, 40 ms netlab dumbbell
    /// with a discard sink at the receiver: the goodput is the bottleneck's
    /// and the largest smoothed RTT above the base RTT is the buffer.
    #[test]
    #[ignore = "needs root (netlab namespaces, TUN); run with `make test-collect`"]
    fn a_cubic_burst_measures_the_rate_and_the_buffer_on_netlab() {
        use opsel_netlab::scenario::bdp_bytes;
        use opsel_netlab::sys::in_netns;
        use opsel_netlab::topo::{receiver_ip, Lab, PipeSpec, TopologySpec};
        use std::net::TcpListener;
        let mut seen = Vec::new();
        for buffer in [0.5, 1.5] {
            let lab = Lab::up(
                &TopologySpec::dumbbell(1),
                &PipeSpec::tun(20.0, 40.0, bdp_bytes(20.0, 40.0, buffer), 1),
            )
            .unwrap();
            let ip = receiver_ip(0);
            let listener = in_netns(&lab.receiver_ns[0], move || {
                TcpListener::bind((ip, 0)).map_err(|e| Error::io("bind the sink", e))
            })
            .unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let sink = std::thread::spawn(move || {
                if let Ok((mut c, _)) = listener.accept() {
                    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                    let _ = std::io::copy(&mut c, &mut std::io::sink());
                }
            });
            let load = in_netns(&lab.sender_ns[0], move || measure_load(&addr, 4.0)).unwrap();
            let _ = sink.join();
            drop(lab);
            seen.push((buffer, load, load.buffer_bdp(40.0)));
        }
        eprintln!("(buffer × BDP, burst, measured buffer × BDP): {seen:?}");
        for &(buffer, load, est) in &seen {
            assert!(
                (15.0..=20.5).contains(&load.rate_mbps),
                "rate at {buffer} × BDP: {seen:?}"
            );
            assert!(
                (0.6 * buffer..=1.4 * buffer).contains(&est),
                "buffer {buffer} × BDP measured as {est:.2}: {seen:?}"
            );
        }
    }

    #[test]
    fn a_measured_buffer_is_its_queueing_delay_over_the_base_rtt() {
        let l = PathLoad {
            rate_mbps: 20.0,
            max_srtt_ms: 63.6,
        };
        assert!((l.buffer_bdp(40.0) - 0.59).abs() < 1e-9);
        // A burst that never queued (a path faster than the sender) reads as no buffer.
        assert_eq!(l.buffer_bdp(70.0), 0.0);
    }
}
