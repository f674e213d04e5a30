//! Live p-stream probing over UDP (001 §2.3 Fig 2.1 closed loop, notes §9.1): the
//! socket loops. The [`Prober`] sends paced p-streams ([`super::sender::PacedSender`]),
//! the reflector ([`run_reflector`]) stamps every arrival in the kernel
//! ([`super::receiver::ProbeReceiver`]) and echoes the stamps back; the prober turns
//! achieved departures and echoed arrivals into `g_s`/`g_r` and runs the same estimators
//! as the simulator. The messages, the pairing and the schedule are sans-IO in
//! [`crate::bwe::wire`], where they are tested without sockets.

use crate::bwe::abest::{abest, Abest, AbestConfig};
use crate::bwe::adapter::RateAdapter;
use crate::bwe::bass::{multi_pass, BassConfig, BassWorkspace};
use crate::bwe::ml::MlEstimator;
use crate::bwe::wire::*;
use crate::bwe::PStreamSpec;
use crate::error::{Error, Result};
use crate::sys::linux::receiver::{ProbeReceiver, RxRecord};
use crate::sys::linux::sender::{Backend, PacedSender, SenderConfig, TrainReport};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// IP + UDP header bytes: `packet_bytes` in a [`PStreamSpec`] are IP bytes (what a
/// bottleneck serialises), the UDP payload is 28 bytes shorter.
pub const IP_UDP_HEADER: u32 = 28;

/// Data port of a reflector listening (control) on `ctrl`.
pub fn data_addr(ctrl: SocketAddr) -> SocketAddr {
    SocketAddr::new(ctrl.ip(), ctrl.port().wrapping_add(1))
}

/// Reflector: answer requests on `ctrl_sock` and stamp packets on `data_sock` until
/// `stop` is set. Returns the number of trains reported.
pub fn run_reflector(
    ctrl_sock: UdpSocket,
    data_sock: UdpSocket,
    stop: &AtomicBool,
    idle: Duration,
) -> Result<u64> {
    ctrl_sock
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| Error::io("set control socket timeout", e))?;
    let mut rx = ProbeReceiver::new(data_sock, 65_536)?;
    let mut buf = vec![0u8; 2048];
    let mut recs: Vec<RxRecord> = Vec::with_capacity(MAX_REPORT_PACKETS);
    let mut arr: Vec<(u32, u64)> = Vec::with_capacity(MAX_REPORT_PACKETS);
    let mut out = Vec::with_capacity(12 + 12 * MAX_REPORT_PACKETS);
    let mut trains = 0;
    // Peers whose last request brought no packet: ignored for a while, so one
    // host repeating bogus requests cannot keep the reflector waiting.
    let mut penalty: Vec<(std::net::IpAddr, Instant)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (len, peer) = match ctrl_sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(Error::io("receive on the reflector control socket", e)),
        };
        let Some((id, n)) = decode_request(&buf[..len]) else {
            continue;
        };
        let now = Instant::now();
        penalty.retain(|(_, until)| *until > now);
        if peer.port() == 0 || penalty.iter().any(|(ip, _)| *ip == peer.ip()) {
            continue;
        }
        let n = (n as usize).min(MAX_REPORT_PACKETS);
        // Stale packets of an abandoned train must not count for this one.
        recs.clear();
        while rx.recv_batch(Duration::ZERO, &mut recs)? > 0 {}
        recs.clear();
        // A peer that cannot be answered (spoofed, gone) is not the
        // reflector's failure: skip it and keep serving.
        if ctrl_sock.send_to(&encode_ready(id), peer).is_err() {
            continue;
        }
        let deadline = Instant::now() + idle * 20;
        let mut got = 0;
        while got < n && Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
            let before = recs.len();
            if rx.recv_batch(idle, &mut recs)? == 0 && got > 0 {
                break;
            }
            got += recs[before..].iter().filter(|r| r.train_id == id).count();
        }
        arr.clear();
        arr.extend(
            recs.iter()
                .filter(|r| r.train_id == id)
                .map(|r| (r.seq, r.rx_mono_ns())),
        );
        if arr.is_empty() && penalty.len() < 4096 {
            penalty.push((peer.ip(), Instant::now() + idle * 100));
        }
        // The report holds only packets of this train that arrived here, so
        // it is never larger than the data that provoked it (12 bytes per
        // packet of at least 28): a spoofed request gains no amplification.
        encode_report(id, &arr, &mut out)?;
        if ctrl_sock.send_to(&out, peer).is_err() {
            continue;
        }
        trains += 1;
    }
    Ok(trains)
}

/// Prober settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeConfig {
    /// p-stream shape; `r_avg_bps` is replaced by the adapter's rate each stream.
    pub n_rates: usize,
    pub packets_per_rate: usize,
    pub range: f64,
    /// IP packet size, bytes.
    pub packet_bytes: u32,
    /// BASS thresholds (relative scale recommended off the thesis testbed).
    pub bass: BassConfig,
    /// GAP_NS_EPSILON as a multiple of the p-stream's mean send gap (None: use
    /// `abest.epsilon_ns` as given).
    pub epsilon_rel: Option<f64>,
    pub abest: AbestConfig,
    /// How long to wait for the reflector's ready / report.
    pub reply_timeout: Duration,
}

/// One probed p-stream.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    pub train_id: u32,
    /// CLOCK_MONOTONIC of the first departure, ns.
    pub start_mono_ns: u64,
    pub r_avg_bps: f64,
    pub lowest_rate_bps: f64,
    pub highest_rate_bps: f64,
    /// Multi-pass BASS + ABest (None when lost / reordered).
    pub bass: Option<Abest>,
    /// ML estimate, if a model is loaded and the stream is complete.
    pub ml_bps: Option<f64>,
    /// Packets echoed back (N + 1 when complete).
    pub received: usize,
    pub expected: usize,
    /// Mean |achieved − intended| send gap, ns.
    pub send_gap_err_ns: f64,
    pub backend: Backend,
    /// R_avg after this stream when it completed a γ-group.
    pub adapted_bps: Option<f64>,
}

/// The probing side: paced sender, control socket, estimators and rate adapter.
pub struct Prober {
    tx: PacedSender,
    ctrl: UdpSocket,
    cfg: ProbeConfig,
    adapter: RateAdapter,
    ml: Option<MlEstimator>,
    report: TrainReport,
    sched: Vec<u64>,
    dep: Vec<u64>,
    arr: Vec<(u32, u64)>,
    rx_seq: Vec<u64>,
    gs: Vec<f64>,
    gr: Vec<f64>,
    gs_d: Vec<f64>,
    gr_d: Vec<f64>,
    bass_ws: BassWorkspace,
    buf: Vec<u8>,
    next_id: u32,
}

impl Prober {
    /// Connect to a reflector whose control port is `to`.
    pub fn new(
        to: SocketAddr,
        cfg: ProbeConfig,
        sender: SenderConfig,
        adapter: RateAdapter,
        ml: Option<MlEstimator>,
    ) -> Result<Self> {
        let n = cfg.n_rates.saturating_mul(cfg.packets_per_rate);
        PStreamSpec::with_range(
            1e6,
            cfg.n_rates,
            cfg.packets_per_rate,
            cfg.range,
            cfg.packet_bytes,
        )?;
        if n + 1 > MAX_REPORT_PACKETS {
            return Err(Error::invalid(format!(
                "p-stream of {n} packets exceeds {} (one report datagram)",
                MAX_REPORT_PACKETS - 1
            )));
        }
        if cfg.packet_bytes < IP_UDP_HEADER + crate::sys::linux::wire::HEADER_LEN as u32 {
            return Err(Error::invalid(format!(
                "packet_bytes {} is below the {} bytes of IP/UDP and probe headers",
                cfg.packet_bytes,
                IP_UDP_HEADER + crate::sys::linux::wire::HEADER_LEN as u32
            )));
        }
        if let Some(m) = &ml {
            if m.n_packets() != n {
                return Err(Error::invalid(format!(
                    "the ML model is for {}-packet p-streams but the probe sends {n}",
                    m.n_packets()
                )));
            }
        }
        let bind: SocketAddr = if to.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        };
        let data = UdpSocket::bind(bind).map_err(|e| Error::io("bind probe socket", e))?;
        let payload = (cfg.packet_bytes - IP_UDP_HEADER) as usize;
        let tx = PacedSender::new(data, data_addr(to), payload, sender)?;
        let ctrl = UdpSocket::bind(bind).map_err(|e| Error::io("bind control socket", e))?;
        ctrl.connect(to)
            .map_err(|e| Error::io(format!("connect control socket to {to}"), e))?;
        ctrl.set_read_timeout(Some(cfg.reply_timeout))
            .map_err(|e| Error::io("set control timeout", e))?;
        Ok(Prober {
            tx,
            ctrl,
            cfg,
            adapter,
            ml,
            report: TrainReport::default(),
            sched: vec![0; n + 1],
            dep: vec![0; n + 1],
            arr: Vec::with_capacity(n + 1),
            rx_seq: vec![0; n + 1],
            gs: vec![0.0; n],
            gr: vec![0.0; n],
            gs_d: vec![0.0; n],
            gr_d: vec![0.0; n],
            bass_ws: BassWorkspace::new(n),
            buf: vec![0u8; 12 + 12 * (n + 1) + 64],
            next_id: 1,
        })
    }

    /// Current average probing rate (adapter state), bit/s.
    pub fn r_avg_bps(&self) -> f64 {
        self.adapter.r_avg_bps()
    }

    /// Raw (achieved send, echoed receive) gaps of the last complete p-stream, ns.
    pub fn last_gaps(&self) -> (&[f64], &[f64]) {
        (&self.gs, &self.gr)
    }

    /// The sender backend (SO_TXTIME or user space).
    pub fn backend(&self) -> Backend {
        self.tx.backend()
    }

    fn recv_ctrl(&mut self, deadline: Instant) -> Result<Option<usize>> {
        loop {
            if Instant::now() >= deadline {
                return Ok(None);
            }
            match self.ctrl.recv(&mut self.buf) {
                Ok(n) => return Ok(Some(n)),
                // A signal interrupted the blocking receive: retry until the deadline.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(Error::io(
                        "reflector control port refused (is `opsel bwe reflect` running?)",
                        e,
                    ))
                }
                Err(e) => return Err(Error::io("receive from reflector", e)),
            }
        }
    }

    /// Probe one p-stream at the adapter's current rate; feed the estimate
    /// (`adapt_on_ml` picks ML over BASS when both exist) to the adapter.
    pub fn probe_once(&mut self, adapt_on_ml: bool) -> Result<StreamResult> {
        let r_avg = self.adapter.r_avg_bps();
        let c = self.cfg;
        let spec = PStreamSpec::with_range(
            r_avg,
            c.n_rates,
            c.packets_per_rate,
            c.range,
            c.packet_bytes,
        )?;
        let n = spec.len();
        schedule_with_lead_in(&spec, &mut self.sched)?;
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        // Request / ready handshake (3 tries).
        let mut ready = false;
        for _ in 0..3 {
            self.ctrl
                .send(&encode_request(id, (n + 1) as u32))
                .map_err(|e| Error::io("send request to reflector", e))?;
            let deadline = Instant::now() + c.reply_timeout;
            while let Some(len) = self.recv_ctrl(deadline)? {
                if decode_ready(&self.buf[..len]) == Some(id) {
                    ready = true;
                    break;
                }
            }
            if ready {
                break;
            }
        }
        if !ready {
            return Err(Error::Unsupported(format!(
                "no answer from the reflector at {} within 3 x {:?}; start `opsel bwe reflect` there and check the path",
                self.ctrl.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                c.reply_timeout
            )));
        }
        let payload = (c.packet_bytes - IP_UDP_HEADER) as usize;
        self.tx
            .send_train(&self.sched, payload, id, &mut self.report)?;
        let mut got_report = false;
        let deadline = Instant::now() + c.reply_timeout * 4;
        while let Some(len) = self.recv_ctrl(deadline)? {
            if decode_report(&self.buf[..len], &mut self.arr) == Some(id) {
                got_report = true;
                break;
            }
        }
        if !got_report {
            self.arr.clear();
        }
        let mut err_sum = 0.0;
        for (k, p) in self.report.packets.iter().enumerate().take(n + 1) {
            self.dep[k] = p.departure().0;
        }
        for k in 1..=n.min(self.report.packets.len().saturating_sub(1)) {
            let a = self.dep[k] as f64 - self.dep[k - 1] as f64;
            let i = (self.sched[k] - self.sched[k - 1]) as f64;
            err_sum += (a - i).abs();
        }
        let outcome = if self.report.packets.len() == n + 1 {
            pair_gaps(
                &self.dep,
                &self.arr,
                &mut self.gs,
                &mut self.gr,
                &mut self.rx_seq,
            )?
        } else {
            PairOutcome::Lost { received: 0 }
        };
        let mut res = StreamResult {
            train_id: id,
            start_mono_ns: self.report.start_mono_ns,
            r_avg_bps: r_avg,
            lowest_rate_bps: spec.packet_rate_bps(0),
            highest_rate_bps: spec.packet_rate_bps(n - 1),
            bass: None,
            ml_bps: None,
            received: self.arr.len().min(n + 1),
            expected: n + 1,
            send_gap_err_ns: err_sum / n as f64,
            backend: self.tx.backend(),
            adapted_bps: None,
        };
        match outcome {
            PairOutcome::Complete => {
                // The estimators see the *achieved* send gaps (notes §2.4 [Ours]).
                self.gs_d.copy_from_slice(&self.gs);
                self.gr_d.copy_from_slice(&self.gr);
                multi_pass(&mut self.gs_d, &mut self.gr_d, &c.bass, &mut self.bass_ws)?;
                let mut acfg = c.abest;
                if let Some(rel) = c.epsilon_rel {
                    acfg.epsilon_ns = rel * self.gs.iter().sum::<f64>() / n as f64;
                }
                let b = abest(&self.gs_d, &self.gr_d, &spec, &acfg)?;
                res.bass = Some(b);
                if let Some(m) = self.ml.as_mut() {
                    res.ml_bps = Some(m.estimate(&self.gs, &self.gr, r_avg)?);
                }
                let est = match (adapt_on_ml, res.ml_bps) {
                    (true, Some(v)) => v,
                    _ => b.abest_bps,
                };
                let dur = self.gs.iter().sum::<f64>();
                res.adapted_bps = self.adapter.on_estimate(est, dur)?;
            }
            PairOutcome::Lost { .. } => {
                // 001 §8.2.1: losses → no estimate, R_avg cut by 25 %.
                res.adapted_bps = Some(self.adapter.on_loss_recovery());
            }
            PairOutcome::Reordered => {}
        }
        Ok(res)
    }
}
