//! Traffic generators (000 §2.2): bulk TCP with a chosen CCA (constant or
//! square-wave ON x s / OFF y s), ALT-X (one live connection toggling its CCA
//! every X s, 000 §5.6 / §7.6), UDP at a constant rate, constant or ON/OFF;
//! and the passive RTT probe (000 §3.2: 10 echoes 1 ms apart → one 1 Hz
//! sample; core's UDP echo prober here instead of ICMP).
//!
//! Every generator is a thread that entered its namespace with setns; the
//! receiver side counts bytes into 100 ms bins (goodput as the receiver sees it).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opsel::sys::linux::rtt::{echo_burst, BurstConfig, BurstSample, UdpEchoProber};
use opsel::sys::linux::{set_cca, tcp_info};
use opsel::{Error, Result};

use crate::sys::{now_ns, sleep_until_ns};

/// Width of a throughput bin (the issue: 100 ms bins).
pub const BIN_NS: u64 = 100_000_000;

/// Bytes received per 100 ms bin since the run's time zero. Preallocated for
/// the whole run; the receive loop only does an atomic add.
#[derive(Debug)]
pub struct Bins {
    t0_ns: u64,
    bins: Vec<AtomicU64>,
}

impl Bins {
    pub fn new(t0_ns: u64, duration_ns: u64) -> Self {
        let n = (duration_ns / BIN_NS + 20) as usize;
        Self {
            t0_ns,
            bins: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    pub fn add(&self, now_ns: u64, bytes: u64) {
        let i = (now_ns.saturating_sub(self.t0_ns) / BIN_NS) as usize;
        if let Some(b) = self.bins.get(i).or(self.bins.last()) {
            b.fetch_add(bytes, Ordering::Relaxed);
        }
    }
    pub fn values(&self) -> Vec<u64> {
        self.bins
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }
}

/// SO_RCVBUFFORCE (root may exceed net.core.rmem_max); best effort.
fn force_rcvbuf(fd: i32, bytes: i32) {
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// What a flow sends.
#[derive(Debug, Clone, PartialEq)]
pub enum Traffic {
    /// Bulk TCP; `on_off_s = Some((x, y))` is a square wave with a new
    /// connection per ON period (like repeated iperf runs), else constant.
    Tcp {
        cca: String,
        on_off_s: Option<(f64, f64)>,
    },
    /// ALT-X: one connection whose CCA alternates between `ccas` every `period_s`.
    Alt { ccas: [String; 2], period_s: f64 },
    /// UDP at `rate_bps` in datagrams of `packet_bytes`; optional ON/OFF.
    Udp {
        rate_bps: u64,
        packet_bytes: usize,
        on_off_s: Option<(f64, f64)>,
    },
}

/// One flow of a run, resolved to addresses and times (ns since time zero).
#[derive(Debug, Clone)]
pub struct FlowPlan {
    pub name: String,
    pub traffic: Traffic,
    pub src_ns: String,
    pub dst_ns: String,
    pub dst: SocketAddrV4,
    pub start_ns: u64,
    pub stop_ns: u64,
}

/// A time-stamped event line (connects, CCA switches, errors).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Event {
    pub t_s: f64,
    pub flow: String,
    pub what: String,
}

pub type Events = Arc<Mutex<Vec<Event>>>;

fn log_event(events: &Events, t0: u64, flow: &str, what: String) {
    if let Ok(mut v) = events.lock() {
        v.push(Event {
            t_s: (now_ns().saturating_sub(t0)) as f64 / 1e9,
            flow: flow.to_string(),
            what,
        });
    }
}

/// A sink in namespace `ns` listening on `dst`: it accepts every connection
/// and reads each until EOF or `stop`, on a thread per connection. Returns
/// once it listens (or could not, within 5 s); the handle yields the bytes
/// it received. The foreground of a throughput log and of a CCA A/B run
/// sends into it.
pub fn spawn_sink(
    ns: &str,
    name: &str,
    dst: SocketAddrV4,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<u64>>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
    let handle = crate::sys::spawn_in_netns(ns, name, move || {
        let l = match TcpListener::bind(dst) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready_tx.send(Err(Error::io(format!("listen on {dst}"), e)));
                return Ok(0);
            }
        };
        let _ = ready_tx.send(Ok(()));
        l.set_nonblocking(true)
            .map_err(|e| Error::io("nonblocking listener", e))?;
        let received = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((s, _)) => {
                    let (stop, received) = (stop.clone(), received.clone());
                    readers.push(std::thread::spawn(move || drain(s, &stop, &received)));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        for r in readers {
            let _ = r.join();
        }
        Ok(received.load(Ordering::Relaxed))
    })?;
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::invalid(format!(
            "the sink {name} did not listen on {dst} within 5 s"
        ))),
    }
}

/// Reads `s` until EOF, an error or `stop` (checked every 50 ms), counting
/// the bytes into `received`.
fn drain(mut s: TcpStream, stop: &AtomicBool, received: &AtomicU64) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 1 << 17];
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
}

/// Receiver of one flow: counts every byte into `bins` until `stop`.
/// Binds before returning so the sender can connect.
pub fn spawn_receiver(
    plan: &FlowPlan,
    bins: Arc<Bins>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<u64>>> {
    let dst = plan.dst;
    let udp = matches!(plan.traffic, Traffic::Udp { .. });
    let (tx, rx) = std::sync::mpsc::channel::<Result<()>>();
    let h = crate::sys::spawn_in_netns(&plan.dst_ns, &format!("rx-{}", plan.name), move || {
        let mut buf = vec![0u8; 1 << 18];
        let mut total = 0u64;
        if udp {
            let s = match UdpSocket::bind(dst) {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(Error::io(format!("bind UDP {dst}"), e)));
                    return Ok(0);
                }
            };
            // A receiver thread delayed by a busy machine must not lose
            // datagrams in its own socket: 16 MB absorbs > 1 s at 100 Mbit/s.
            force_rcvbuf(s.as_raw_fd(), 16 << 20);
            let _ = tx.send(Ok(()));
            s.set_read_timeout(Some(Duration::from_millis(50)))
                .map_err(|e| Error::io("SO_RCVTIMEO", e))?;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(n) = s.recv(&mut buf) {
                    bins.add(now_ns(), n as u64);
                    total += n as u64;
                }
            }
            return Ok(total);
        }
        let l = match TcpListener::bind(dst) {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(Error::io(format!("listen on TCP {dst}"), e)));
                return Ok(0);
            }
        };
        let _ = tx.send(Ok(()));
        l.set_nonblocking(true)
            .map_err(|e| Error::io("nonblocking listener", e))?;
        while !stop.load(Ordering::Relaxed) {
            let mut c = match l.accept() {
                Ok((c, _)) => c,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            };
            let _ = c.set_nonblocking(false);
            let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
            while !stop.load(Ordering::Relaxed) {
                match c.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        bins.add(now_ns(), n as u64);
                        total += n as u64;
                    }
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut
                            || e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        Ok(total)
    })?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::invalid(format!(
            "receiver of flow {} did not start within 5 s",
            plan.name
        ))),
    }
}

/// The ON periods of a flow as (start, end) ns since time zero.
pub fn on_periods(start_ns: u64, stop_ns: u64, on_off_s: Option<(f64, f64)>) -> Vec<(u64, u64)> {
    match on_off_s {
        None => vec![(start_ns, stop_ns)],
        Some((on, off)) => {
            let on_ns = (on * 1e9) as u64;
            let off_ns = (off * 1e9) as u64;
            let mut v = Vec::new();
            let mut t = start_ns;
            while t < stop_ns && on_ns > 0 {
                v.push((t, (t + on_ns).min(stop_ns)));
                t += on_ns + off_ns;
            }
            v
        }
    }
}

fn connect_retry(dst: SocketAddrV4, deadline_ns: u64, stop: &AtomicBool) -> Result<TcpStream> {
    loop {
        match TcpStream::connect_timeout(&SocketAddr::V4(dst), Duration::from_millis(1000)) {
            Ok(s) => return Ok(s),
            Err(e) => {
                if now_ns() > deadline_ns || stop.load(Ordering::Relaxed) {
                    return Err(Error::io(format!("connect to {dst}"), e));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Sender of one flow; returns bytes handed to the socket.
pub fn spawn_sender(
    plan: FlowPlan,
    t0_ns: u64,
    stop: Arc<AtomicBool>,
    events: Events,
) -> Result<std::thread::JoinHandle<Result<u64>>> {
    let ns = plan.src_ns.clone();
    let name = format!("tx-{}", plan.name);
    crate::sys::spawn_in_netns(&ns, &name, move || {
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let r = match &plan.traffic {
            Traffic::Tcp { cca, on_off_s } => {
                let mut sent = 0;
                for (a, b) in on_periods(plan.start_ns, plan.stop_ns, *on_off_s) {
                    sent += tcp_period(
                        &plan,
                        t0_ns,
                        a,
                        b,
                        std::slice::from_ref(cca),
                        None,
                        &stop,
                        &events,
                    )?;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                Ok(sent)
            }
            Traffic::Alt { ccas, period_s } => tcp_period(
                &plan,
                t0_ns,
                plan.start_ns,
                plan.stop_ns,
                ccas,
                Some((*period_s * 1e9) as u64),
                &stop,
                &events,
            ),
            Traffic::Udp {
                rate_bps,
                packet_bytes,
                on_off_s,
            } => {
                let mut sent = 0;
                for (a, b) in on_periods(plan.start_ns, plan.stop_ns, *on_off_s) {
                    sent += udp_period(&plan, t0_ns, a, b, *rate_bps, *packet_bytes, &stop)?;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                Ok(sent)
            }
        };
        if let Err(e) = &r {
            log_event(&events, t0_ns, &plan.name, format!("error: {e}"));
        }
        r
    })
}

/// Sleeps until `t_ns` in 50 ms steps so `stop` is honoured; false if stopped.
fn wait_until(t_ns: u64, stop: &AtomicBool) -> bool {
    while now_ns() < t_ns {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        sleep_until_ns(t_ns.min(now_ns() + 50_000_000));
    }
    !stop.load(Ordering::Relaxed)
}

#[allow(clippy::too_many_arguments)]
fn tcp_period(
    plan: &FlowPlan,
    t0: u64,
    a: u64,
    b: u64,
    ccas: &[String],
    switch_ns: Option<u64>,
    stop: &AtomicBool,
    events: &Events,
) -> Result<u64> {
    if !wait_until(t0 + a, stop) {
        return Ok(0);
    }
    let mut s = connect_retry(plan.dst, t0 + a + 3_000_000_000, stop)?;
    let mut cur = 0usize;
    // set_cca reads the name back from the kernel, so the event logs what runs.
    let running = set_cca(&s, &ccas[cur])?;
    log_event(events, t0, &plan.name, format!("connect cca={running}"));
    s.set_write_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| Error::io("SO_SNDTIMEO", e))?;
    let _ = s.set_nodelay(true);
    // Pattern bytes: incompressible content is irrelevant here, zeros are fine.
    let buf = vec![0x5au8; 1 << 17];
    let mut sent = 0u64;
    let mut next_switch = switch_ns.map(|p| t0 + a + p);
    loop {
        let now = now_ns();
        if now >= t0 + b || stop.load(Ordering::Relaxed) {
            break;
        }
        if let (Some(t), Some(p)) = (next_switch, switch_ns) {
            if now >= t {
                // 000 §5.2: TCP_CONGESTION on the live socket switches the CCA.
                cur = (cur + 1) % ccas.len();
                set_cca(&s, &ccas[cur])?;
                log_event(events, t0, &plan.name, format!("switch cca={}", ccas[cur]));
                next_switch = Some(t + p);
            }
        }
        match s.write(&buf) {
            Ok(n) => sent += n as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut
                    || e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io(format!("send on flow {}", plan.name), e)),
        }
    }
    let retrans = tcp_info(&s).map(|i| i.total_retrans).unwrap_or(0);
    log_event(
        events,
        t0,
        &plan.name,
        format!("close sent={sent} retrans={retrans}"),
    );
    Ok(sent)
}

fn udp_period(
    plan: &FlowPlan,
    t0: u64,
    a: u64,
    b: u64,
    rate_bps: u64,
    packet_bytes: usize,
    stop: &AtomicBool,
) -> Result<u64> {
    if !wait_until(t0 + a, stop) {
        return Ok(0);
    }
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| Error::io("bind UDP", e))?;
    s.connect(plan.dst)
        .map_err(|e| Error::io(format!("connect UDP {}", plan.dst), e))?;
    let buf = vec![0x33u8; packet_bytes];
    let gap_ns = (packet_bytes as u128 * 8 * 1_000_000_000 / rate_bps.max(1) as u128) as u64;
    let mut next = now_ns();
    let end = t0 + b;
    let mut sent = 0u64;
    while next < end && !stop.load(Ordering::Relaxed) {
        sleep_until_ns(next);
        let now = now_ns();
        // Send every datagram that is due (catch up after a late wake-up, at
        // most 32 at once so a stall does not become a huge burst).
        let mut k = 0;
        while next <= now && k < 32 {
            if s.send(&buf).is_ok() {
                sent += packet_bytes as u64;
            }
            next += gap_ns;
            k += 1;
        }
        if next + 100 * gap_ns < now {
            next = now;
        }
    }
    Ok(sent)
}

/// UDP echo server for the RTT probe.
pub fn spawn_echo(
    ns: &str,
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    spawn_echo_with(ns, addr, stop, false)
}

/// [`spawn_echo`], optionally at real-time priority (the training collector
/// runs its echo server like its prober, so CPU load does not shift the RTT).
pub fn spawn_echo_with(
    ns: &str,
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    realtime: bool,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<()>>();
    let h = crate::sys::spawn_in_netns(ns, "echo", move || {
        if realtime {
            crate::sys::set_realtime_priority();
        }
        let s = match UdpSocket::bind(addr) {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(Err(Error::io(format!("bind echo {addr}"), e)));
                return Ok(());
            }
        };
        let _ = tx.send(Ok(()));
        s.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| Error::io("SO_RCVTIMEO", e))?;
        let mut buf = [0u8; 64];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
        Ok(())
    })?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::invalid("echo server did not start within 5 s")),
    }
}

/// One 1 Hz RTT sample: the mean of the echoes of one burst.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RttSample {
    pub t_s: f64,
    pub rtt_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    /// Echoes answered out of `ECHOES`.
    pub answered: u32,
}

/// 000 §3.2: each sample is the mean of 10 echoes sent 1 ms apart, one sample per second.
pub const ECHOES: u32 = 10;

const SAMPLE_NS: u64 = 1_000_000_000;
const ECHO_INTERVAL_NS: u64 = 1_000_000;

/// The 000 §3.2 burst of a 1 Hz series for core's [`echo_burst`]: replies
/// count until 2 ms before the next sample's burst, so no burst overlaps the
/// next one.
pub fn burst_config() -> BurstConfig {
    burst_config_every(SAMPLE_NS)
}

/// The burst of [`burst_config`] for a sample every `period_ns`: echoes are
/// awaited until 2 ms before the next burst is due, so a burst never delays
/// the next one (an echo later than that is lost, not late).
pub fn burst_config_every(period_ns: u64) -> BurstConfig {
    let b = BurstConfig {
        count: ECHOES as u16,
        interval_ns: ECHO_INTERVAL_NS,
        timeout_ns: 0,
    };
    // One rule with the live OPS driver's echo timeout (core's
    // `ops_driver::echo_timeout_ns`).
    BurstConfig {
        timeout_ns: b.timeout_within_ns(period_ns),
        ..b
    }
}

/// Mean, fastest and slowest echo (ms) and the number answered of one
/// burst. With no answer the mean is NaN, the fastest +inf and the slowest
/// -inf (the trace writer prints them as lost).
pub fn burst_stats_ms(b: &BurstSample) -> (f64, f64, f64, u32) {
    let mut n = 0u32;
    let (mut sum, mut lo, mut hi) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
    for r in b.rtts_ns.iter().flatten() {
        let ms = *r as f64 / 1e6;
        sum += ms;
        lo = lo.min(ms);
        hi = hi.max(ms);
        n += 1;
    }
    let mean = if n > 0 { sum / f64::from(n) } else { f64::NAN };
    (mean, lo, hi, n)
}

/// A UDP echo prober (core's [`UdpEchoProber`]) toward `dst`, for a thread
/// that already entered its namespace. 1 ns timer slack: the default 50 µs
/// would shift the echo schedule.
pub fn open_prober(dst: SocketAddrV4) -> Result<UdpEchoProber> {
    // SAFETY: prctl on the calling thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| Error::io("bind prober", e))?;
    UdpEchoProber::new(s, SocketAddr::V4(dst))
}

/// The first sequence number of sample `k` (10 per burst, wrapping), so a
/// late reply of an earlier burst is not taken for one of this burst.
pub fn burst_seq0(k: u64) -> u16 {
    (k.wrapping_mul(u64::from(ECHOES)) & 0xffff) as u16
}

/// The passive RTT prober: every second from `start_ns` sends 10 echoes 1 ms
/// apart (core's [`echo_burst`]) and averages the answers that arrive before
/// the next second.
pub fn spawn_prober(
    ns: &str,
    dst: SocketAddrV4,
    t0_ns: u64,
    start_ns: u64,
    stop_ns: u64,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<Result<Vec<RttSample>>>> {
    crate::sys::spawn_in_netns(ns, "prober", move || {
        let mut probe = open_prober(dst)?;
        let cfg = burst_config();
        let mut out = Vec::new();
        let mut k: u64 = 0;
        loop {
            let tick = t0_ns + start_ns + k * SAMPLE_NS;
            if tick >= t0_ns + stop_ns || !wait_until(tick, &stop) {
                break;
            }
            let b = echo_burst(&mut probe, cfg, burst_seq0(k))?;
            let (rtt_ms, min_ms, max_ms, answered) = burst_stats_ms(&b);
            if answered > 0 {
                out.push(RttSample {
                    t_s: (tick - t0_ns) as f64 / 1e9,
                    rtt_ms,
                    min_ms,
                    max_ms,
                    answered,
                });
            }
            k += 1;
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn square_wave_periods() {
        let s = 1_000_000_000u64;
        assert_eq!(
            on_periods(0, 30 * s, Some((10.0, 10.0))),
            vec![(0, 10 * s), (20 * s, 30 * s)]
        );
        assert_eq!(on_periods(2 * s, 5 * s, None), vec![(2 * s, 5 * s)]);
        assert_eq!(
            on_periods(0, 25 * s, Some((10.0, 10.0))).last(),
            Some(&(20 * s, 25 * s))
        );
    }

    #[test]
    fn bins_count_into_100ms_slots() {
        let b = Bins::new(1_000, 1_000_000_000);
        b.add(1_000, 5);
        b.add(1_000 + 150_000_000, 7);
        b.add(u64::MAX, 1); // beyond the end: last bin, never a panic
        let v = b.values();
        assert_eq!(v[0], 5);
        assert_eq!(v[1], 7);
        assert_eq!(*v.last().unwrap(), 1);
    }
}
