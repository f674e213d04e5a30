//! 003 Table 3.2 on netlab: does a sampled NetFlow exporter estimate the size
//! of real transfers (§3.4.3, hypothesis H1)?
//!
//! One sender/receiver pair through the router namespace, an htb bottleneck
//! (so packet capture keeps up on a small machine), and one Debian
//! `softflowd` per sampling denominator N capturing on the router's
//! sender-side veth (`s0`) — the router's view, as 003's routers exported
//! NetFlow. Each exports NetFlow v9 with its sampling interval to a collector
//! thread in the router namespace that decodes with `opsel::flows::export`.
//! TCP transfers of fixed sizes run one after another; afterwards every
//! exporter is told to expire all flows, and each transfer's estimate is
//! N × the bytes of its data connection's records (the 5-tuple is known, as
//! 003 took it from GridFTP logs). The α identification (`flows::aggregate`
//! with H = 1 GB) runs over the same records.
//!
//! Differences from 003: softflowd samples **periodically** (every N-th
//! packet), not at random, and one exporter sees the whole path; the
//! document's routers were 2–8 hops into a shared 10 Gb/s path.

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use opsel::flows::export::Decoder;
use opsel::flows::{AlphaSpec, FlowRecord};
use opsel::{Error, Result};

use crate::sys::{self, spawn_in_netns};
use crate::topo::{receiver_ip, sender_ip, Lab, PipeKind, PipeSpec, TopologySpec};

/// The setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccuracySpec {
    /// Transfer sizes in bytes (003: 100 MB, 1 GB, 10 GB).
    pub sizes_bytes: Vec<u64>,
    /// Sampling denominators, one exporter each (003: 1000 at ESnet).
    pub sampling: Vec<u32>,
    pub rate_mbps: f64,
    pub delay_ms: f64,
    /// softflowd's active timeout (003: τ = 60 s).
    pub active_timeout_s: u32,
}

impl Default for AccuracySpec {
    fn default() -> Self {
        AccuracySpec {
            sizes_bytes: vec![100_000_000, 1_000_000_000],
            sampling: vec![100, 1000],
            rate_mbps: 250.0,
            delay_ms: 0.5,
            active_timeout_s: 60,
        }
    }
}

/// One transfer as one exporter saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferEstimate {
    pub size_bytes: u64,
    pub sampling: u32,
    /// Bytes the receiver read (must equal size_bytes).
    pub received_bytes: u64,
    pub transfer_s: f64,
    /// Records of the data direction's 5-tuple, and their raw (sampled) bytes.
    pub records: u32,
    pub sampled_bytes: u64,
    /// N × sampled bytes.
    pub est_bytes: u64,
    /// est_bytes / size_bytes: 003's size-accuracy ratio (Table 3.2).
    pub ratio: f64,
    /// IP bytes the sender put on the wire for this connection (TCP_INFO
    /// bytes_sent, retransmissions included, + 52 B of IP/TCP headers per
    /// segment): what a perfect unsampled exporter would count.
    pub wire_bytes: Option<u64>,
    /// TCP_INFO bytes_retrans.
    pub retrans_bytes: Option<u64>,
    /// Whether one of its records is an α report (≥ H = 1 GB corrected).
    pub alpha: bool,
}

/// One repeat: every size under every exporter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccuracyRun {
    pub repeat: u32,
    pub transfers: Vec<TransferEstimate>,
    /// Malformed datagrams per exporter (must be 0).
    pub malformed: Vec<u64>,
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The collector thread's result: decoded records and malformed datagrams.
type Collected = Result<(Vec<FlowRecord>, u64)>;

struct Collector {
    handle: Option<std::thread::JoinHandle<Collected>>,
    addr: SocketAddr,
}

fn spawn_collector(ns: &str, stop: Arc<AtomicBool>) -> Result<Collector> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = spawn_in_netns(ns, "flow-collector", move || {
        let s = UdpSocket::bind("127.0.0.1:0").map_err(|e| Error::io("bind collector", e))?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| Error::io("collector timeout", e))?;
        let _ = tx.send(s.local_addr().map_err(|e| Error::io("collector addr", e))?);
        let mut dec = Decoder::new();
        let mut recs = Vec::new();
        let mut bad = 0u64;
        let mut buf = vec![0u8; 65_535];
        while !stop.load(Ordering::Relaxed) {
            match s.recv_from(&mut buf) {
                Ok((n, from)) => {
                    if dec.decode(from, &buf[..n], |r| recs.push(*r)).is_err() {
                        bad += 1;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(Error::io("collector recv", e)),
            }
        }
        Ok((recs, bad))
    })?;
    let addr = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| Error::invalid("the collector thread did not start"))?;
    Ok(Collector {
        handle: Some(h),
        addr,
    })
}

/// IP + TCP header bytes per segment (20 + 20 + 12 of timestamps).
const HEADER_BYTES: u64 = 52;

/// What one transfer did.
#[derive(Debug, Clone, Copy)]
struct Done {
    size: u64,
    sport: u16,
    got: u64,
    secs: f64,
    wire: Option<u64>,
    retrans: Option<u64>,
}

/// One TCP transfer of `size` bytes from pair 0's sender to its receiver.
fn transfer(lab: &Lab, size: u64, port: u16) -> Result<Done> {
    let dst = SocketAddrV4::new(receiver_ip(0), port);
    let (tx, rx) = std::sync::mpsc::channel();
    let rx_h = spawn_in_netns(&lab.receiver_ns[0], "acc-recv", move || {
        let l = TcpListener::bind(dst).map_err(|e| Error::io(format!("listen {dst}"), e))?;
        let _ = tx.send(());
        let (mut c, _) = l.accept().map_err(|e| Error::io("accept", e))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut got = 0u64;
        loop {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("receive", e)),
            }
        }
        Ok(got)
    })?;
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| Error::invalid("the receiver did not start"))?;
    let t0 = Instant::now();
    let sport = sys::in_netns(&lab.sender_ns[0], move || {
        let mut c = TcpStream::connect(dst).map_err(|e| Error::io(format!("connect {dst}"), e))?;
        let sport = c
            .local_addr()
            .map_err(|e| Error::io("local addr", e))?
            .port();
        let buf = vec![0x5au8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            c.write_all(&buf[..n]).map_err(|e| Error::io("send", e))?;
            left -= n as u64;
        }
        c.shutdown(std::net::Shutdown::Write)
            .map_err(|e| Error::io("shutdown", e))?;
        Ok((sport, c))
    })?;
    let (sport, sock) = sport;
    let got = rx_h
        .join()
        .map_err(|_| Error::invalid("the receiver panicked"))??;
    let secs = t0.elapsed().as_secs_f64();
    // The receiver saw EOF, so every byte is acknowledged: the counters are final.
    let info = opsel::sys::linux::tcp_info(&sock).ok();
    let wire = info
        .as_ref()
        .and_then(|i| Some(i.bytes_sent? + u64::from(i.segs_out?) * HEADER_BYTES));
    Ok(Done {
        size,
        sport,
        got,
        secs,
        wire,
        retrans: info.as_ref().and_then(|i| i.bytes_retrans),
    })
}

/// One repeat in a fresh lab (removed on return, error or panic).
pub fn run_one(spec: &AccuracySpec, repeat: u32, work: &std::path::Path) -> Result<AccuracyRun> {
    if spec.sizes_bytes.is_empty() || spec.sampling.is_empty() {
        return Err(Error::invalid(
            "give at least one size and one sampling denominator",
        ));
    }
    if let Some(n) = spec.sampling.iter().find(|&&n| n == 0) {
        return Err(Error::invalid(format!(
            "sampling denominator {n}: use >= 1"
        )));
    }
    let topo = TopologySpec {
        pairs: 1,
        mtu: 1500,
        offloads_off: true,
    };
    let rate = (spec.rate_mbps * 1e6).round() as u64;
    let pipe = PipeSpec {
        kind: PipeKind::Htb,
        rate_bps: Some(rate),
        delay_ns: (spec.delay_ms * 1e6).round() as u64,
        // 2 BDP at 10 ms, enough that the bottleneck stays busy.
        buffer_bytes: (rate / 8 / 50).max(200_000),
        loss: 0.0,
        seed: 1,
    };
    let lab = Lab::up(&topo, &pipe)?;
    let stop = Arc::new(AtomicBool::new(false));
    // Stops the collector threads on every exit path (they poll the flag).
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());
    let mut collectors = Vec::new();
    let mut exporters = Vec::new();
    let mut ctls = Vec::new();
    for &n in &spec.sampling {
        let c = spawn_collector(&lab.router_ns, stop.clone())?;
        let ctl = work.join(format!("sf-{}-{n}.ctl", std::process::id()));
        let pid = work.join(format!("sf-{}-{n}.pid", std::process::id()));
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.router_ns,
                "softflowd",
                "-i",
                "s0",
                "-d",
            ])
            .args(["-v", "9", "-s", &n.to_string()])
            .args(["-t", &format!("maxlife={}", spec.active_timeout_s)])
            .args(["-t", "expint=1", "-n", &c.addr.to_string()])
            .arg("-p")
            .arg(&pid)
            .arg("-c")
            .arg(&ctl)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::io("starting softflowd (apt-get install softflowd)", e))?;
        exporters.push(Kill(child));
        collectors.push(c);
        ctls.push(ctl);
    }
    // softflowd opens its capture asynchronously.
    std::thread::sleep(Duration::from_millis(1500));
    for e in exporters.iter_mut() {
        if let Ok(Some(st)) = e.0.try_wait() {
            return Err(Error::invalid(format!(
                "softflowd exited at start ({st}); is it installed (apt-get install softflowd)?"
            )));
        }
    }
    let mut done = Vec::new();
    for (k, &size) in spec.sizes_bytes.iter().enumerate() {
        done.push(transfer(&lab, size, 6001 + k as u16)?);
    }
    // A FIN ends a TCP flow in softflowd only after its timeout: expire all.
    std::thread::sleep(Duration::from_millis(500));
    for ctl in &ctls {
        let _ = Command::new("softflowctl")
            .arg("-c")
            .arg(ctl)
            .arg("expire-all")
            .stdout(Stdio::null())
            .status();
    }
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    drop(exporters);
    let alpha = AlphaSpec::default();
    let mut transfers = Vec::new();
    let mut malformed = Vec::new();
    for (c, &n) in collectors.iter_mut().zip(&spec.sampling) {
        let (recs, bad) = c
            .handle
            .take()
            .map(|h| h.join())
            .transpose()
            .map_err(|_| Error::invalid("the collector panicked"))?
            .transpose()?
            .unwrap_or_default();
        malformed.push(bad);
        for d in &done {
            let (size, sport) = (d.size, d.sport);
            let ours: Vec<&FlowRecord> = recs
                .iter()
                .filter(|r| {
                    r.src_addr == std::net::IpAddr::V4(sender_ip(0))
                        && r.dst_addr == std::net::IpAddr::V4(receiver_ip(0))
                        && r.src_port == sport
                        && r.proto == 6
                })
                .collect();
            let sampled: u64 = ours.iter().map(|r| r.bytes).sum();
            let est: u64 = ours
                .iter()
                .map(|r| r.est_bytes(alpha.sampling_n(r.sampling_interval)))
                .sum();
            if let Some(r) = ours.iter().find(|r| r.sampling_interval != n) {
                return Err(Error::invalid(format!(
                    "exporter 1-in-{n} reported sampling_interval {} for {}",
                    r.sampling_interval, r.src_port
                )));
            }
            transfers.push(TransferEstimate {
                size_bytes: size,
                sampling: n,
                received_bytes: d.got,
                transfer_s: d.secs,
                records: ours.len() as u32,
                sampled_bytes: sampled,
                est_bytes: est,
                ratio: est as f64 / size as f64,
                alpha: ours
                    .iter()
                    .any(|r| opsel::flows::is_alpha_report(r, &alpha)),
                wire_bytes: d.wire,
                retrans_bytes: d.retrans,
            });
        }
    }
    drop(lab);
    Ok(AccuracyRun {
        repeat,
        transfers,
        malformed,
    })
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let k = v.len() as f64;
    let m = v.iter().sum::<f64>() / k;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1.0)).sqrt()
    } else {
        f64::NAN
    };
    (m, sd)
}

/// Markdown: mean and sd of the ratio per (size, N) over the repeats, beside
/// 003's Table 3.2 and the Bernoulli sd √((N−1)/packets).
pub fn table(spec: &AccuracySpec, runs: &[AccuracyRun]) -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} Mbit/s htb bottleneck, RTT {} ms, CUBIC, MTU 1500 (1448-B segments), softflowd NetFlow v9 on the router's sender-side veth, active timeout {} s; {} run(s).\n",
        spec.rate_mbps,
        2.0 * spec.delay_ms,
        spec.active_timeout_s,
        runs.len()
    );
    let _ = writeln!(
        md,
        "| size | 1-in-N | runs | ratio mean | ratio sd | estimate ÷ wire bytes, mean (sd) | retransmitted | Bernoulli sd | records/transfer | flagged α (H = 1 GB) | mean transfer (s) | 003 mean (Chicago / Sunnyvale) | 003 sd |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    );
    for &size in &spec.sizes_bytes {
        for &n in &spec.sampling {
            let t: Vec<&TransferEstimate> = runs
                .iter()
                .flat_map(|r| r.transfers.iter())
                .filter(|t| t.size_bytes == size && t.sampling == n)
                .collect();
            if t.is_empty() {
                continue;
            }
            let k = t.len() as f64;
            let mean = t.iter().map(|x| x.ratio).sum::<f64>() / k;
            let sd = if t.len() > 1 {
                (t.iter().map(|x| (x.ratio - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt()
            } else {
                f64::NAN
            };
            let pkts = (size as f64 / 1448.0).ceil() as u64;
            let w: Vec<f64> = t
                .iter()
                .filter_map(|x| x.wire_bytes.map(|b| x.est_bytes as f64 / b as f64))
                .collect();
            let (wm, wsd) = mean_sd(&w);
            let retr: Vec<f64> = t
                .iter()
                .filter_map(|x| x.retrans_bytes.map(|b| b as f64 / x.size_bytes as f64))
                .collect();
            let (rm, _) = mean_sd(&retr);
            let bern = opsel::flows::accuracy::bernoulli_ratio_sd(pkts, n);
            let recs = t.iter().map(|x| f64::from(x.records)).sum::<f64>() / k;
            let alpha = t.iter().filter(|x| x.alpha).count();
            let secs = t.iter().map(|x| x.transfer_s).sum::<f64>() / k;
            let doc = match size {
                100_000_000 => ("0.949 / 1.081", "0.278 / 0.307"),
                1_000_000_000 => ("0.996 / 1.032", "0.171 / 0.165"),
                10_000_000_000 => ("0.990 / 0.999", "0.037 / 0.025"),
                _ => ("–", "–"),
            };
            let _ = writeln!(
                md,
                "| {} MB | {n} | {} | {mean:.4} | {sd:.4} | {wm:.4} ({wsd:.4}) | {:.2} % | {bern:.4} | {recs:.1} | {alpha} of {} | {secs:.1} | {} | {} |",
                size / 1_000_000,
                t.len(),
                rm * 100.0,
                t.len(),
                doc.0,
                doc.1
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aggregates_per_size_and_n() {
        let t = |size, n, ratio, alpha| TransferEstimate {
            size_bytes: size,
            sampling: n,
            received_bytes: size,
            transfer_s: 1.0,
            records: 1,
            sampled_bytes: 0,
            est_bytes: 0,
            ratio,
            alpha,
            wire_bytes: Some(size),
            retrans_bytes: Some(0),
        };
        let spec = AccuracySpec {
            sampling: vec![1000],
            ..AccuracySpec::default()
        };
        let runs = [
            AccuracyRun {
                repeat: 1,
                transfers: vec![
                    t(100_000_000, 1000, 1.0, false),
                    t(1_000_000_000, 1000, 1.04, true),
                ],
                malformed: vec![0],
            },
            AccuracyRun {
                repeat: 2,
                transfers: vec![
                    t(100_000_000, 1000, 1.1, false),
                    t(1_000_000_000, 1000, 1.02, true),
                ],
                malformed: vec![0],
            },
        ];
        let md = table(&spec, &runs);
        assert!(
            md.contains("| 100 MB | 1000 | 2 | 1.0500 | 0.0707 |"),
            "{md}"
        );
        assert!(
            md.contains("| 1000 MB | 1000 | 2 | 1.0300 | 0.0141 |"),
            "{md}"
        );
        assert!(md.contains("2 of 2"), "{md}");
    }
}
