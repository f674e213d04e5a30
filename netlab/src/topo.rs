//! The dumbbell (000 §2.1, Figs 3.1–3.3): N sender namespaces and N receiver
//! namespaces, each joined by a veth pair to one router namespace that holds
//! the bottleneck. A rate limiter on the sender's own interface would hide
//! CUBIC's queue (TCP small queues keep the local qdisc short), so the
//! bottleneck lives in the router.
//!
//! Names: every namespace of a lab starts with `onl` + the creating pid in
//! base 36 (5 chars) + a 2-char per-process sequence number, so several labs
//! (even in one test process) never collide and `opsel lab down` can tell a
//! crashed run's leftovers (dead pid) from a live lab.
//!
//! Addressing (inside the lab's own namespaces only): sender i has
//! 10.71.i.2/24 (router side 10.71.i.1), receiver i has 10.71.(64+i).2/24
//! (router side 10.71.(64+i).1). Senders are 10.71.0.0/18, receivers
//! 10.71.64.0/18.
//!
//! Routing through the pipe: in the router, `to 10.71.64.0/18` uses table 200
//! whose default route is the TUN `pf` (forward pipe) and `to 10.71.0.0/18`
//! uses table 201 → TUN `pr` (reverse pipe). The pipe thread reads a packet
//! from the TUN and, when it is due, writes it back into the same TUN; rules
//! `iif pf|pr lookup main` (higher priority) then route it to the veth of its
//! destination.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use opsel::{Error, Result};

use crate::pipe::{run_tun_pipe, Pipe, PipeConfig, PipeStats};
use crate::sys::{self, run_cmd};

/// Prefix of every namespace netlab creates.
pub const PREFIX: &str = "onl";
/// Most sender/receiver pairs a lab supports (address plan: /18 per side).
pub const MAX_PAIRS: usize = 64;

/// How long a veth may take to get its qdisc after `up` (milliseconds when
/// quiet; seconds only on a machine that is badly overloaded).
const LINK_READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the bottleneck rate and queue come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PipeKind {
    /// User-space pipe on TUN devices: rate → drop-tail queue → delay.
    Tun,
    /// Kernel htb class with a bfifo child on the TUN egress; the user-space
    /// pipe adds only the delay.
    Htb,
    /// Kernel tbf with a bfifo child on the TUN egress; delay as for htb.
    Tbf,
    /// Plain routing, no pipe (veth speed, µs RTT).
    None,
}

/// The bottleneck, applied to each direction.
#[derive(Debug, Clone, PartialEq)]
pub struct PipeSpec {
    pub kind: PipeKind,
    pub rate_bps: Option<u64>,
    /// One-way delay per direction (RTT = 2 × this).
    pub delay_ns: u64,
    pub buffer_bytes: u64,
    pub loss: f64,
    pub seed: u64,
}

/// Topology parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologySpec {
    pub pairs: usize,
    /// MTU of every veth and TUN on the path.
    pub mtu: usize,
    /// Turn TSO/GSO/GRO off on every veth (per-packet behaviour in qdiscs).
    pub offloads_off: bool,
}

impl TopologySpec {
    /// `pairs` sender/receiver pairs behind one bottleneck, MTU 1500, offloads
    /// off: the dumbbell every lab experiment uses.
    pub fn dumbbell(pairs: usize) -> TopologySpec {
        TopologySpec {
            pairs,
            mtu: 1500,
            offloads_off: true,
        }
    }
}

impl PipeSpec {
    /// The user-space TUN bottleneck at `rate_mbps`, a round-trip time of
    /// `rtt_ms` (half of it each way), a drop-tail buffer of `buffer_bytes`
    /// and no random loss.
    pub fn tun(rate_mbps: f64, rtt_ms: f64, buffer_bytes: u64, seed: u64) -> PipeSpec {
        PipeSpec {
            kind: PipeKind::Tun,
            rate_bps: Some((rate_mbps * 1e6).round() as u64),
            delay_ns: (rtt_ms * 1e6 / 2.0).round() as u64,
            buffer_bytes,
            loss: 0.0,
            seed,
        }
    }
}

pub fn sender_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 71, i as u8, 2)
}
pub fn receiver_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 71, 64 + i as u8, 2)
}

fn base36(mut v: u64, width: usize) -> String {
    const D: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = vec![b'0'; width];
    for c in s.iter_mut().rev() {
        *c = D[(v % 36) as usize];
        v /= 36;
    }
    String::from_utf8(s).unwrap_or_default()
}

fn parse_base36(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 36).ok()
}

static LAB_SEQ: AtomicU32 = AtomicU32::new(0);

/// A running lab. Dropping it stops the pipe threads and deletes every
/// namespace it created (RAII teardown on success, error or panic).
pub struct Lab {
    pub id: String,
    pub router_ns: String,
    pub sender_ns: Vec<String>,
    pub receiver_ns: Vec<String>,
    pub topology: TopologySpec,
    pub pipe: PipeSpec,
    /// Forward (sender → receiver) and reverse pipe counters.
    pub fwd_stats: Arc<PipeStats>,
    pub rev_stats: Arc<PipeStats>,
    /// Extra RTT per pair (ns) on the ACK path; empty when none.
    pub extra_rtt_ns: Vec<u64>,
    created: Vec<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    fds: Vec<i32>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab").field("id", &self.id).finish()
    }
}

impl Lab {
    /// Builds the dumbbell and starts the pipe. On any failure everything
    /// created so far is removed again.
    pub fn up(topo: &TopologySpec, pipe: &PipeSpec) -> Result<Lab> {
        Self::up_with_extra_rtt(topo, pipe, &[])
    }

    /// As [`Lab::up`], with an extra RTT per pair (ns; empty or one entry per
    /// pair, 0 for none). Each pair with a non-zero entry gets its own
    /// delay-only TUN pipe `pd<i>` on its ACK path behind the reverse
    /// bottleneck pipe, so the pairs still share one bottleneck queue but see
    /// different RTTs (002 §5.4, ΔRTT = 100 ms).
    pub fn up_with_extra_rtt(
        topo: &TopologySpec,
        pipe: &PipeSpec,
        extra_rtt_ns: &[u64],
    ) -> Result<Lab> {
        sys::require_root()?;
        if !extra_rtt_ns.is_empty() && extra_rtt_ns.len() != topo.pairs {
            return Err(Error::invalid(format!(
                "{} extra RTTs for {} pairs; give one per pair",
                extra_rtt_ns.len(),
                topo.pairs
            )));
        }
        if pipe.kind == PipeKind::None && extra_rtt_ns.iter().any(|&d| d > 0) {
            return Err(Error::invalid(
                "an extra RTT per pair needs a pipe (kind none has no delay line)",
            ));
        }
        if topo.pairs == 0 || topo.pairs > MAX_PAIRS {
            return Err(Error::invalid(format!(
                "topology pairs = {} is outside 1..={MAX_PAIRS}",
                topo.pairs
            )));
        }
        if !(576..=65_000).contains(&topo.mtu) {
            return Err(Error::invalid(format!(
                "topology mtu = {} is outside 576..=65000",
                topo.mtu
            )));
        }
        let pid = std::process::id() as u64;
        let mut lab = Lab {
            id: String::new(),
            router_ns: String::new(),
            sender_ns: Vec::new(),
            receiver_ns: Vec::new(),
            topology: topo.clone(),
            pipe: pipe.clone(),
            fwd_stats: Arc::new(PipeStats::default()),
            rev_stats: Arc::new(PipeStats::default()),
            extra_rtt_ns: extra_rtt_ns.to_vec(),
            created: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            fds: Vec::new(),
        };
        // Find a free id: the router namespace is created first and claims it.
        for _ in 0..64 {
            let seq = LAB_SEQ.fetch_add(1, Ordering::Relaxed) as u64;
            let id = format!("{PREFIX}{}{}", base36(pid, 5), base36(seq % 1296, 2));
            let rt = format!("{id}rt");
            if run_cmd("ip", &["netns", "add", &rt]).is_ok() {
                lab.created.push(rt.clone());
                lab.id = id;
                lab.router_ns = rt;
                break;
            }
        }
        if lab.id.is_empty() {
            return Err(Error::Unsupported(
                "could not create a router namespace (ip netns add failed 64 times); run `opsel lab down` and check `ip netns list`".into(),
            ));
        }
        lab.build()?;
        Ok(lab)
    }

    fn build(&mut self) -> Result<()> {
        let rt = self.router_ns.clone();
        let mtu = self.topology.mtu.to_string();
        for i in 0..self.topology.pairs {
            for (side, list) in [("s", &mut self.sender_ns), ("r", &mut self.receiver_ns)] {
                let ns = format!("{}{side}{i}", self.id);
                run_cmd("ip", &["netns", "add", &ns])?;
                self.created.push(ns.clone());
                list.push(ns);
            }
        }
        // Router sysctls before the interfaces exist, so `default` applies to them.
        sys::in_netns(&rt, || {
            sys::write_sysctl("net.ipv4.ip_forward", "1")?;
            for scope in ["all", "default"] {
                sys::write_sysctl(&format!("net.ipv4.conf.{scope}.rp_filter"), "0")?;
                // As the thesis routers did (Fig 3.3): no ICMP redirects.
                sys::write_sysctl(&format!("net.ipv4.conf.{scope}.send_redirects"), "0")?;
            }
            Ok(())
        })?;
        for ns in self.sender_ns.iter().chain(&self.receiver_ns) {
            sys::in_netns(ns, || {
                // Room for cwnd ≈ BDP + buffer at hundreds of Mbit/s and 65 ms.
                sys::write_sysctl("net.ipv4.tcp_rmem", "4096 131072 67108864")?;
                sys::write_sysctl("net.ipv4.tcp_wmem", "4096 65536 67108864")?;
                // Each flow starts fresh (no cached ssthresh from a previous run).
                sys::write_sysctl("net.ipv4.tcp_no_metrics_save", "1")?;
                Ok(())
            })?;
        }
        for i in 0..self.topology.pairs {
            for (side, ns, net) in [
                ("s", &self.sender_ns[i], i),
                ("r", &self.receiver_ns[i], 64 + i),
            ] {
                let rif = format!("{side}{i}");
                run_cmd(
                    "ip",
                    &[
                        "link", "add", "name", &rif, "netns", &rt, "type", "veth", "peer", "name",
                        "eth0", "netns", ns,
                    ],
                )?;
                let host = format!("10.71.{net}.2/24");
                let gw = format!("10.71.{net}.1");
                let rtaddr = format!("{gw}/24");
                run_cmd("ip", &["-n", ns, "addr", "add", &host, "dev", "eth0"])?;
                run_cmd("ip", &["-n", ns, "link", "set", "eth0", "mtu", &mtu, "up"])?;
                run_cmd("ip", &["-n", ns, "link", "set", "lo", "up"])?;
                run_cmd("ip", &["-n", ns, "route", "add", "default", "via", &gw])?;
                run_cmd("ip", &["-n", &rt, "addr", "add", &rtaddr, "dev", &rif])?;
                run_cmd("ip", &["-n", &rt, "link", "set", &rif, "mtu", &mtu, "up"])?;
                if self.topology.offloads_off {
                    sys::in_netns(ns, || sys::disable_offloads("eth0"))?;
                    let r = rif.clone();
                    sys::in_netns(&rt, move || sys::disable_offloads(&r))?;
                }
            }
        }
        run_cmd("ip", &["-n", &rt, "link", "set", "lo", "up"])?;
        for i in 0..self.topology.pairs {
            for (side, ns) in [("s", &self.sender_ns[i]), ("r", &self.receiver_ns[i])] {
                sys::wait_link_ready(ns, "eth0", LINK_READY_TIMEOUT)?;
                sys::wait_link_ready(&rt, &format!("{side}{i}"), LINK_READY_TIMEOUT)?;
            }
        }
        if self.pipe.kind != PipeKind::None {
            self.start_pipe()?;
        }
        self.warm_up()
    }

    /// Resolves every neighbour (ARP) on both hops of every pair before any
    /// measurement: otherwise the first probe echoes of a run also wait for
    /// address resolution and read a few ms above the base RTT.
    fn warm_up(&self) -> Result<()> {
        for i in 0..self.topology.pairs {
            for (ns, to) in [
                (&self.sender_ns[i], receiver_ip(i)),
                (&self.receiver_ns[i], sender_ip(i)),
            ] {
                sys::in_netns(ns, move || {
                    let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
                        .map_err(|e| Error::io("bind warm-up socket", e))?;
                    // Port 9 (discard): nobody listens; only the path matters.
                    let _ = s.send_to(b"warm-up", (to, 9));
                    Ok(())
                })?;
            }
        }
        // Wait one RTT plus margin so the datagrams have crossed the pipe.
        std::thread::sleep(std::time::Duration::from_nanos(
            2 * self.pipe.delay_ns
                + self.extra_rtt_ns.iter().copied().max().unwrap_or(0)
                + 100_000_000,
        ));
        Ok(())
    }

    fn start_pipe(&mut self) -> Result<()> {
        let rt = self.router_ns.clone();
        let (fwd_fd, rev_fd) =
            sys::in_netns(&rt, || Ok((sys::open_tun("pf")?, sys::open_tun("pr")?)))?;
        self.fds.push(fwd_fd);
        self.fds.push(rev_fd);
        let mtu = self.topology.mtu.to_string();
        for dev in ["pf", "pr"] {
            // A long TUN ring: the tun driver drops when it is full, and that
            // hidden drop point must never be the bottleneck.
            run_cmd(
                "ip",
                &[
                    "-n",
                    &rt,
                    "link",
                    "set",
                    dev,
                    "mtu",
                    &mtu,
                    "txqueuelen",
                    "10000",
                    "up",
                ],
            )?;
        }
        for (pref, rule) in [
            ("100", vec!["iif", "pf", "lookup", "main"]),
            ("101", vec!["iif", "pr", "lookup", "main"]),
            ("200", vec!["to", "10.71.64.0/18", "lookup", "200"]),
            ("201", vec!["to", "10.71.0.0/18", "lookup", "201"]),
        ] {
            let mut args = vec!["-n", rt.as_str(), "rule", "add", "pref", pref];
            args.extend(rule);
            run_cmd("ip", &args)?;
        }
        run_cmd(
            "ip",
            &[
                "-n", &rt, "route", "add", "default", "dev", "pf", "table", "200",
            ],
        )?;
        run_cmd(
            "ip",
            &[
                "-n", &rt, "route", "add", "default", "dev", "pr", "table", "201",
            ],
        )?;

        let p = &self.pipe;
        let kernel_rate = matches!(p.kind, PipeKind::Htb | PipeKind::Tbf);
        if kernel_rate {
            let rate = p
                .rate_bps
                .ok_or_else(|| Error::invalid(format!("pipe kind {:?} needs rate_mbps", p.kind)))?;
            for dev in ["pf", "pr"] {
                self.kernel_bottleneck(dev, rate)?;
            }
        }
        let user_cfg = PipeConfig {
            rate_bps: if kernel_rate { None } else { p.rate_bps },
            delay_ns: p.delay_ns,
            queue_limit_bytes: if kernel_rate {
                // Delay only: the kernel qdisc is the queue; never drop here.
                4_000_000_000
            } else {
                p.buffer_bytes
            },
            loss: p.loss,
            seed: p.seed,
            max_packet_bytes: self.topology.mtu,
        };
        // Without a user-space rate the delay line must hold rate × delay of
        // whatever arrives: bound it by the kernel rate (or 10 Gbit/s).
        let unlimited = p.rate_bps.map(|r| r * 2).unwrap_or(10_000_000_000);
        let mut rev_cfg = user_cfg.clone();
        rev_cfg.seed = user_cfg.seed ^ 0x5eed_0000_0000_0001;
        for (fd, cfg, stats, name) in [
            (fwd_fd, user_cfg, self.fwd_stats.clone(), "pipe-fwd"),
            (rev_fd, rev_cfg, self.rev_stats.clone(), "pipe-rev"),
        ] {
            let pipe = if kernel_rate {
                // Huge limit: the ring must not be sized for 4 GB.
                let mut c = cfg.clone();
                c.queue_limit_bytes =
                    (unlimited as u128 * (c.delay_ns as u128 + 1_000_000_000) / 8 / 1_000_000_000)
                        .max(c.max_packet_bytes as u128 * 4) as u64;
                Pipe::new(c, unlimited)?
            } else {
                Pipe::new(cfg, unlimited)?
            };
            let stop = self.stop.clone();
            let h = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || run_tun_pipe(fd, pipe, stats, stop))
                .map_err(|e| Error::io("spawn pipe thread", e))?;
            self.threads.push(h);
        }
        self.start_extra_rtt_pipes()
    }

    /// One delay-only pipe per pair with an extra RTT. Packets leaving the
    /// reverse pipe `pr` toward sender i are routed into `pd<i>` (rule 50+i,
    /// before rule 101 sends them to their veth), delayed there, and written
    /// back; rule 40+i then routes them out. The delay is fixed, so each of
    /// these delay lines stays FIFO.
    fn start_extra_rtt_pipes(&mut self) -> Result<()> {
        let rt = self.router_ns.clone();
        let mtu = self.topology.mtu.to_string();
        let bound = self.pipe.rate_bps.map(|r| r * 2).unwrap_or(10_000_000_000);
        for i in 0..self.extra_rtt_ns.len() {
            let extra = self.extra_rtt_ns[i];
            if extra == 0 {
                continue;
            }
            let dev = format!("pd{i}");
            let d = dev.clone();
            let fd = sys::in_netns(&rt, move || sys::open_tun(&d))?;
            self.fds.push(fd);
            run_cmd(
                "ip",
                &[
                    "-n",
                    &rt,
                    "link",
                    "set",
                    &dev,
                    "mtu",
                    &mtu,
                    "txqueuelen",
                    "10000",
                    "up",
                ],
            )?;
            let table = (300 + i).to_string();
            let to = format!("10.71.{i}.0/24");
            let out_pref = (40 + i).to_string();
            let in_pref = (50 + i).to_string();
            run_cmd(
                "ip",
                &[
                    "-n", &rt, "rule", "add", "pref", &out_pref, "iif", &dev, "lookup", "main",
                ],
            )?;
            run_cmd(
                "ip",
                &[
                    "-n", &rt, "rule", "add", "pref", &in_pref, "iif", "pr", "to", &to, "lookup",
                    &table,
                ],
            )?;
            run_cmd(
                "ip",
                &[
                    "-n", &rt, "route", "add", "default", "dev", &dev, "table", &table,
                ],
            )?;
            let cfg = PipeConfig {
                rate_bps: None,
                delay_ns: extra,
                // Delay only: the bottleneck queue is upstream; never drop here.
                queue_limit_bytes: (bound as u128 * (extra as u128 + 1_000_000_000)
                    / 8
                    / 1_000_000_000)
                    .max(self.topology.mtu as u128 * 4) as u64,
                loss: 0.0,
                seed: self.pipe.seed ^ (0xd1a7_0000 + i as u64),
                max_packet_bytes: self.topology.mtu,
            };
            let pipe = Pipe::new(cfg, bound)?;
            let stats = Arc::new(PipeStats::default());
            let stop = self.stop.clone();
            let h = std::thread::Builder::new()
                .name(format!("pipe-extra-{i}"))
                .spawn(move || run_tun_pipe(fd, pipe, stats, stop))
                .map_err(|e| Error::io("spawn extra-delay pipe thread", e))?;
            self.threads.push(h);
        }
        Ok(())
    }

    /// htb or tbf with a bfifo child of `buffer_bytes` on the TUN egress.
    fn kernel_bottleneck(&self, dev: &str, rate_bps: u64) -> Result<()> {
        let rt = self.router_ns.as_str();
        let rate = format!("{rate_bps}bit");
        let burst = (rate_bps / 8 / 1000)
            .max(2 * self.topology.mtu as u64)
            .to_string();
        let limit = self.pipe.buffer_bytes.to_string();
        match self.pipe.kind {
            PipeKind::Htb => {
                run_cmd(
                    "tc",
                    &[
                        "-n", rt, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
                        "default", "1",
                    ],
                )?;
                run_cmd(
                    "tc",
                    &[
                        "-n", rt, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
                        "htb", "rate", &rate, "ceil", &rate, "burst", &burst, "cburst", &burst,
                    ],
                )?;
            }
            _ => {
                run_cmd(
                    "tc",
                    &[
                        "-n", rt, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                        "rate", &rate, "burst", &burst, "limit", &limit,
                    ],
                )?;
            }
        }
        run_cmd(
            "tc",
            &[
                "-n", rt, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo",
                "limit", &limit,
            ],
        )
    }

    /// Backlog bytes and drops of the kernel bfifo on `dev` (htb/tbf kinds).
    pub fn kernel_queue(&self, dev: &str) -> Result<(u64, u64)> {
        let out = sys::cmd_output(
            "tc",
            &["-n", &self.router_ns, "-s", "qdisc", "show", "dev", dev],
        )?;
        parse_bfifo_stats(&out).ok_or_else(|| {
            Error::invalid(format!(
                "no bfifo statistics in `tc -s qdisc show dev {dev}` output"
            ))
        })
    }

    fn teardown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        for fd in self.fds.drain(..) {
            unsafe { libc::close(fd) };
        }
        for ns in self.created.drain(..).rev() {
            let _ = run_cmd("ip", &["netns", "del", &ns]);
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Parses `tc -s qdisc show` output: backlog bytes and dropped packets of the bfifo.
pub fn parse_bfifo_stats(out: &str) -> Option<(u64, u64)> {
    let pos = out.find("qdisc bfifo")?;
    let s = &out[pos..];
    let dropped = s
        .split("dropped ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let backlog_tok = s.split("backlog ").nth(1)?.split_whitespace().next()?;
    let backlog = parse_tc_size(backlog_tok)?;
    Some((backlog, dropped))
}

fn parse_tc_size(t: &str) -> Option<u64> {
    let t = t.trim_end_matches('b');
    let (num, mul) = if let Some(n) = t.strip_suffix('K') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('M') {
        (n, 1_000_000.0)
    } else {
        (t, 1.0)
    };
    num.parse::<f64>().ok().map(|v| (v * mul) as u64)
}

/// Whether process `pid` is alive (a lab named after it is in use).
fn pid_alive(pid: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u64 {
        return false;
    }
    // A killed process is a zombie until reaped; kill(pid, 0) still succeeds then.
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        if let Some(state) = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
        {
            if state == "Z" || state == "X" {
                return false;
            }
        }
    }
    let r = unsafe { libc::kill(pid as i32, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The owning pid encoded in a netlab namespace name, if it is one.
pub fn owner_pid(ns: &str) -> Option<u64> {
    let rest = ns.strip_prefix(PREFIX)?;
    parse_base36(rest.get(..5)?)
}

/// Lists netlab namespaces: (name, owner pid alive).
pub fn list_namespaces() -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX))
        .map(|n| {
            let alive = owner_pid(&n).map(pid_alive).unwrap_or(false);
            (n, alive)
        })
        .collect();
    v.sort();
    v
}

/// Removes leftover netlab namespaces: those of dead processes, or with
/// `all`, every `onl*` namespace. Returns the names removed.
pub fn down(all: bool) -> Result<Vec<String>> {
    sys::require_root()?;
    let mut removed = Vec::new();
    for (ns, alive) in list_namespaces() {
        if all || !alive {
            run_cmd("ip", &["netns", "del", &ns])?;
            removed.push(ns);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip_pid() {
        let id = format!("{PREFIX}{}{}", base36(4_194_304, 5), base36(1295, 2));
        assert_eq!(id.len(), 10);
        assert_eq!(owner_pid(&format!("{id}s63")), Some(4_194_304));
        assert_eq!(owner_pid("other"), None);
    }

    #[test]
    fn parses_tc_bfifo_stats() {
        let out = "qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0\n Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)\n backlog 0b 0p requeues 0\nqdisc bfifo 10: parent 1:1 limit 1218750b\n Sent 123 bytes 4 pkt (dropped 17, overlimits 0 requeues 0)\n backlog 1180Kb 790p requeues 0\n";
        assert_eq!(parse_bfifo_stats(out), Some((1_180_000, 17)));
    }
}
