//! Scenario files (TOML): topology, pipe, probe and flows with start/stop
//! times and CCAs. Every field is checked and errors name the field and value.
//!
//! Default values are the thesis testbed scaled to this machine (000 §2.3
//! scale-down rule): 100 Mbit/s, RTT 65 ms (32.5 ms each way), drop-tail
//! buffer 1.5 × BDP = 1.5 × 100e6/8 × 0.065 = 1 218 750 bytes.

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use opsel::{Error, Result};

use crate::topo::{self, PipeKind, PipeSpec, TopologySpec};
use crate::traffic::{FlowPlan, Traffic};

/// Default bottleneck (000 §2.3: 500 Mbit/s scaled to 100 Mbit/s).
pub const DEFAULT_RATE_MBPS: f64 = 100.0;
/// One-way delay per direction: 65 ms RTT split evenly (000 §2.1 [gap] assumption).
pub const DEFAULT_DELAY_MS: f64 = 32.5;
/// Buffer as a multiple of the BDP (000 §2.1: 6 MB ≈ 1.5 × BDP at 500 Mbit/s, 65 ms).
pub const DEFAULT_BUFFER_BDP: f64 = 1.5;

/// Bytes of `bdp_multiple` × rate × RTT.
pub fn bdp_bytes(rate_mbps: f64, rtt_ms: f64, bdp_multiple: f64) -> u64 {
    (rate_mbps * 1e6 / 8.0 * rtt_ms / 1e3 * bdp_multiple).round() as u64
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    pub duration_s: f64,
    /// Throughput means and Jain's index use [measure_from_s, measure_to_s].
    #[serde(default)]
    pub measure_from_s: f64,
    #[serde(default)]
    pub measure_to_s: Option<f64>,
    #[serde(default)]
    pub topology: Topology,
    #[serde(default)]
    pub pipe: Pipe,
    #[serde(default)]
    pub probe: Probe,
    #[serde(default)]
    pub flows: Vec<Flow>,
}

fn default_name() -> String {
    "unnamed".into()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    #[serde(default = "default_pairs")]
    pub pairs: usize,
    #[serde(default = "default_mtu")]
    pub mtu: usize,
    #[serde(default = "yes")]
    pub offloads_off: bool,
    /// Extra round-trip time per pair, in ms (empty: none). Pairs with
    /// different RTTs sharing one bottleneck are 002's ΔRTT = 100 ms case
    /// (§5.4, Fig 5.7); the extra delay is added on the pair's ACK path, after
    /// the bottleneck, so it changes that pair's RTT and nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_rtt_ms: Vec<f64>,
}
fn default_pairs() -> usize {
    2
}
fn default_mtu() -> usize {
    1500
}
fn yes() -> bool {
    true
}
impl Default for Topology {
    fn default() -> Self {
        Self {
            pairs: default_pairs(),
            mtu: default_mtu(),
            offloads_off: true,
            extra_rtt_ms: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Pipe {
    #[serde(default = "default_kind")]
    pub kind: PipeKind,
    /// Bottleneck rate; 0 or absent with kind = "tun" means no rate limit.
    #[serde(default = "default_rate")]
    pub rate_mbps: f64,
    /// One-way delay added in each direction.
    #[serde(default = "default_delay")]
    pub delay_ms: f64,
    /// Drop-tail buffer in bytes; if absent, `buffer_bdp` × BDP.
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    #[serde(default = "default_bdp")]
    pub buffer_bdp: f64,
    #[serde(default)]
    pub loss: f64,
    #[serde(default = "default_seed")]
    pub seed: u64,
}
fn default_kind() -> PipeKind {
    PipeKind::Tun
}
fn default_rate() -> f64 {
    DEFAULT_RATE_MBPS
}
fn default_delay() -> f64 {
    DEFAULT_DELAY_MS
}
fn default_bdp() -> f64 {
    DEFAULT_BUFFER_BDP
}
fn default_seed() -> u64 {
    1
}
impl Default for Pipe {
    fn default() -> Self {
        Self {
            kind: default_kind(),
            rate_mbps: DEFAULT_RATE_MBPS,
            delay_ms: DEFAULT_DELAY_MS,
            buffer_bytes: None,
            buffer_bdp: DEFAULT_BUFFER_BDP,
            loss: 0.0,
            seed: 1,
        }
    }
}

impl Pipe {
    pub fn rtt_ms(&self) -> f64 {
        2.0 * self.delay_ms
    }
    pub fn buffer(&self) -> u64 {
        self.buffer_bytes
            .unwrap_or_else(|| bdp_bytes(self.rate_mbps, self.rtt_ms(), self.buffer_bdp))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub pair: usize,
    #[serde(default)]
    pub start_s: f64,
}
impl Default for Probe {
    fn default() -> Self {
        Self {
            enabled: true,
            pair: 0,
            start_s: 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FlowType {
    Tcp,
    Alt,
    Udp,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    pub name: String,
    #[serde(default)]
    pub pair: usize,
    #[serde(rename = "type", default = "default_flow_type")]
    pub kind: FlowType,
    /// CCA of a tcp flow (cubic, bbr, reno).
    #[serde(default)]
    pub cca: Option<String>,
    /// The two CCAs an alt flow toggles between (default cubic, bbr).
    #[serde(default)]
    pub ccas: Option<[String; 2]>,
    /// ALT-X period X in seconds.
    #[serde(default)]
    pub alt_s: Option<f64>,
    #[serde(default)]
    pub start_s: f64,
    /// Default: the end of the run.
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// Square wave: ON for on_s, OFF for off_s (both or neither).
    #[serde(default)]
    pub on_s: Option<f64>,
    #[serde(default)]
    pub off_s: Option<f64>,
    /// UDP sending rate.
    #[serde(default)]
    pub rate_mbps: Option<f64>,
    /// UDP datagram payload bytes (default MTU − 28).
    #[serde(default)]
    pub packet_bytes: Option<usize>,
}
fn default_flow_type() -> FlowType {
    FlowType::Tcp
}

/// Base port of the flows' receivers (flow k listens on BASE_PORT + k).
pub const BASE_PORT: u16 = 5001;
/// Port of the probe's echo server.
pub const ECHO_PORT: u16 = 7007;

fn finite_nonneg(what: &str, v: f64) -> Result<()> {
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(format!(
            "{what} = {v} must be a finite number >= 0"
        )));
    }
    Ok(())
}

/// CCAs the kernel offers to sockets.
pub fn available_ccas() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

fn check_cca(flow: &str, cca: &str, avail: &[String]) -> Result<()> {
    if !avail.is_empty() && !avail.iter().any(|a| a == cca) {
        return Err(Error::invalid(format!(
            "flow {flow}: congestion control {cca:?} is not available (kernel offers: {}); load its module or pick one of those",
            avail.join(", ")
        )));
    }
    Ok(())
}

impl Scenario {
    /// Parses and validates a scenario from TOML text.
    pub fn from_toml(text: &str) -> Result<Scenario> {
        let s: Scenario =
            toml::from_str(text).map_err(|e| Error::invalid(format!("scenario TOML: {e}")))?;
        s.validate()?;
        Ok(s)
    }

    pub fn load(path: &std::path::Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read scenario {}", path.display()), e))?;
        Self::from_toml(&text).map_err(|e| match e {
            Error::InvalidInput(m) => Error::InvalidInput(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// The built-in default: the thesis testbed scaled (100 Mbit/s, 65 ms,
    /// 1.5 × BDP), one CUBIC background flow and one BBR foreground flow.
    pub fn default_testbed() -> Scenario {
        Self::from_toml(include_str!("../scenarios/default.toml"))
            .expect("shipped default scenario is valid")
    }

    pub fn measure_window(&self) -> (f64, f64) {
        (
            self.measure_from_s,
            self.measure_to_s
                .unwrap_or(self.duration_s)
                .min(self.duration_s),
        )
    }

    pub fn validate(&self) -> Result<()> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= 86_400.0) {
            return Err(Error::invalid(format!(
                "duration_s = {} must be in (0, 86400]",
                self.duration_s
            )));
        }
        let (a, b) = self.measure_window();
        finite_nonneg("measure_from_s", a)?;
        if a >= b {
            return Err(Error::invalid(format!(
                "measure window [{a}, {b}] s is empty; measure_from_s must be below measure_to_s and duration_s"
            )));
        }
        let t = &self.topology;
        if t.pairs == 0 || t.pairs > topo::MAX_PAIRS {
            return Err(Error::invalid(format!(
                "topology.pairs = {} must be in 1..={}",
                t.pairs,
                topo::MAX_PAIRS
            )));
        }
        if !(576..=65_000).contains(&t.mtu) {
            return Err(Error::invalid(format!(
                "topology.mtu = {} must be in 576..=65000",
                t.mtu
            )));
        }
        if !t.extra_rtt_ms.is_empty() {
            if t.extra_rtt_ms.len() != t.pairs {
                return Err(Error::invalid(format!(
                    "topology.extra_rtt_ms has {} entries but the topology has {} pairs; give one per pair (0 for none)",
                    t.extra_rtt_ms.len(),
                    t.pairs
                )));
            }
            for (i, &ms) in t.extra_rtt_ms.iter().enumerate() {
                finite_nonneg(&format!("topology.extra_rtt_ms[{i}]"), ms)?;
                if ms > 10_000.0 {
                    return Err(Error::invalid(format!(
                        "topology.extra_rtt_ms[{i}] = {ms} exceeds 10000 ms"
                    )));
                }
            }
            if self.pipe.kind == topo::PipeKind::None && t.extra_rtt_ms.iter().any(|&ms| ms > 0.0) {
                return Err(Error::invalid(
                    "topology.extra_rtt_ms needs a pipe (pipe.kind = \"none\" has no delay line to add to)",
                ));
            }
        }
        let p = &self.pipe;
        finite_nonneg("pipe.rate_mbps", p.rate_mbps)?;
        finite_nonneg("pipe.delay_ms", p.delay_ms)?;
        finite_nonneg("pipe.buffer_bdp", p.buffer_bdp)?;
        if !(p.loss.is_finite() && (0.0..=1.0).contains(&p.loss)) {
            return Err(Error::invalid(format!(
                "pipe.loss = {} must be in [0, 1]",
                p.loss
            )));
        }
        if matches!(p.kind, PipeKind::Htb | PipeKind::Tbf) && p.rate_mbps <= 0.0 {
            return Err(Error::invalid(format!(
                "pipe.kind = {:?} needs pipe.rate_mbps > 0",
                p.kind
            )));
        }
        if p.kind != PipeKind::None {
            self.pipe_spec().and_then(|s| {
                crate::pipe::PipeConfig {
                    rate_bps: s.rate_bps,
                    delay_ns: s.delay_ns,
                    queue_limit_bytes: s.buffer_bytes,
                    loss: s.loss,
                    seed: s.seed,
                    max_packet_bytes: t.mtu,
                }
                .validate()
            })?;
        }
        if self.probe.enabled && self.probe.pair >= t.pairs {
            return Err(Error::invalid(format!(
                "probe.pair = {} but the topology has {} pairs (0..{})",
                self.probe.pair, t.pairs, t.pairs
            )));
        }
        finite_nonneg("probe.start_s", self.probe.start_s)?;
        let avail = available_ccas();
        let mut names = std::collections::HashSet::new();
        if self.flows.len() > 1000 {
            return Err(Error::invalid(format!(
                "{} flows; at most 1000",
                self.flows.len()
            )));
        }
        for f in &self.flows {
            if f.name.is_empty() || f.name.contains([',', '\n', '"']) {
                return Err(Error::invalid(format!(
                    "flow name {:?} must be non-empty without commas, quotes or newlines",
                    f.name
                )));
            }
            if !names.insert(f.name.clone()) {
                return Err(Error::invalid(format!(
                    "flow name {:?} is used twice",
                    f.name
                )));
            }
            if f.pair >= t.pairs {
                return Err(Error::invalid(format!(
                    "flow {}: pair = {} but the topology has {} pairs",
                    f.name, f.pair, t.pairs
                )));
            }
            finite_nonneg(&format!("flow {} start_s", f.name), f.start_s)?;
            let stop = f.stop_s.unwrap_or(self.duration_s);
            finite_nonneg(&format!("flow {} stop_s", f.name), stop)?;
            if stop <= f.start_s || f.start_s >= self.duration_s {
                return Err(Error::invalid(format!(
                    "flow {}: start_s = {} must be before stop_s = {stop} and duration_s = {}",
                    f.name, f.start_s, self.duration_s
                )));
            }
            match (f.on_s, f.off_s) {
                (None, None) => {}
                (Some(on), Some(off)) => {
                    if !(on.is_finite() && on > 0.0) {
                        return Err(Error::invalid(format!(
                            "flow {}: on_s = {on} must be > 0",
                            f.name
                        )));
                    }
                    finite_nonneg(&format!("flow {} off_s", f.name), off)?;
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "flow {}: give both on_s and off_s for a square wave, or neither",
                        f.name
                    )))
                }
            }
            match f.kind {
                FlowType::Tcp => {
                    let cca = f.cca.as_deref().ok_or_else(|| {
                        Error::invalid(format!(
                            "flow {}: type = \"tcp\" needs cca (cubic, bbr, reno)",
                            f.name
                        ))
                    })?;
                    check_cca(&f.name, cca, &avail)?;
                }
                FlowType::Alt => {
                    let x = f.alt_s.ok_or_else(|| {
                        Error::invalid(format!(
                            "flow {}: type = \"alt\" needs alt_s (the X of ALT-X)",
                            f.name
                        ))
                    })?;
                    if !(x.is_finite() && x > 0.0) {
                        return Err(Error::invalid(format!(
                            "flow {}: alt_s = {x} must be > 0",
                            f.name
                        )));
                    }
                    if f.on_s.is_some() {
                        return Err(Error::invalid(format!(
                            "flow {}: an alt flow is one live connection; on_s/off_s do not apply",
                            f.name
                        )));
                    }
                    for c in self.alt_ccas(f).iter() {
                        check_cca(&f.name, c, &avail)?;
                    }
                }
                FlowType::Udp => {
                    let r = f.rate_mbps.ok_or_else(|| {
                        Error::invalid(format!("flow {}: type = \"udp\" needs rate_mbps", f.name))
                    })?;
                    if !(r.is_finite() && r > 0.0 && r <= 100_000.0) {
                        return Err(Error::invalid(format!(
                            "flow {}: rate_mbps = {r} must be in (0, 100000]",
                            f.name
                        )));
                    }
                    let pb = f.packet_bytes.unwrap_or(t.mtu - 28);
                    if !(16..=t.mtu - 28).contains(&pb) {
                        return Err(Error::invalid(format!(
                            "flow {}: packet_bytes = {pb} must be in 16..={} (MTU − 28)",
                            f.name,
                            t.mtu - 28
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn alt_ccas(&self, f: &Flow) -> [String; 2] {
        f.ccas
            .clone()
            .unwrap_or_else(|| ["cubic".into(), "bbr".into()])
    }

    pub fn topology_spec(&self) -> TopologySpec {
        TopologySpec {
            pairs: self.topology.pairs,
            mtu: self.topology.mtu,
            offloads_off: self.topology.offloads_off,
        }
    }

    /// Extra RTT per pair in ns, one entry per pair (zeros when not given).
    pub fn extra_rtt_ns(&self) -> Vec<u64> {
        let t = &self.topology;
        (0..t.pairs)
            .map(|i| {
                t.extra_rtt_ms
                    .get(i)
                    .map_or(0, |ms| (ms * 1e6).round() as u64)
            })
            .collect()
    }

    pub fn pipe_spec(&self) -> Result<PipeSpec> {
        let p = &self.pipe;
        Ok(PipeSpec {
            kind: p.kind,
            rate_bps: (p.rate_mbps > 0.0).then(|| (p.rate_mbps * 1e6).round() as u64),
            delay_ns: (p.delay_ms * 1e6).round() as u64,
            buffer_bytes: p.buffer(),
            loss: p.loss,
            seed: p.seed,
        })
    }

    /// Resolves flows to namespaces, addresses and ns times.
    pub fn flow_plans(&self, sender_ns: &[String], receiver_ns: &[String]) -> Vec<FlowPlan> {
        self.flows
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let traffic = match f.kind {
                    FlowType::Tcp => Traffic::Tcp {
                        cca: f.cca.clone().unwrap_or_else(|| "cubic".into()),
                        on_off_s: f.on_s.zip(f.off_s),
                    },
                    FlowType::Alt => Traffic::Alt {
                        ccas: self.alt_ccas(f),
                        period_s: f.alt_s.unwrap_or(30.0),
                    },
                    FlowType::Udp => Traffic::Udp {
                        rate_bps: (f.rate_mbps.unwrap_or(1.0) * 1e6) as u64,
                        packet_bytes: f.packet_bytes.unwrap_or(self.topology.mtu - 28),
                        on_off_s: f.on_s.zip(f.off_s),
                    },
                };
                FlowPlan {
                    name: f.name.clone(),
                    traffic,
                    src_ns: sender_ns[f.pair].clone(),
                    dst_ns: receiver_ns[f.pair].clone(),
                    dst: SocketAddrV4::new(topo::receiver_ip(f.pair), BASE_PORT + k as u16),
                    start_ns: (f.start_s * 1e9) as u64,
                    stop_ns: (f.stop_s.unwrap_or(self.duration_s).min(self.duration_s) * 1e9)
                        as u64,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_testbed_matches_scaled_thesis() {
        let s = Scenario::default_testbed();
        assert_eq!(s.pipe.rate_mbps, 100.0);
        assert_eq!(s.pipe.rtt_ms(), 65.0);
        // 1.5 × 100 Mbit/s × 65 ms = 1 218 750 bytes (000 §2.3 [derived] ≈ 1.22 MB).
        assert_eq!(s.pipe.buffer(), 1_218_750);
    }

    #[test]
    fn thesis_buffer_is_1_5_bdp() {
        // 000 §2.1: 6 MB ≈ 1.5 × BDP at 500 Mbit/s and 65 ms (4.06 MB BDP).
        assert_eq!(bdp_bytes(500.0, 65.0, 1.0), 4_062_500);
    }

    #[test]
    fn shipped_scenarios_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                Scenario::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 3);
    }

    #[test]
    fn errors_name_the_bad_value() {
        let bad = |t: &str, want: &str| {
            let e = Scenario::from_toml(t).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        };
        bad("duration_s = -1", "duration_s = -1");
        bad("duration_s = 10\n[pipe]\nloss = 2.0", "pipe.loss = 2");
        bad(
            "duration_s = 10\n[[flows]]\nname = \"a\"\ncca = \"vegas9\"",
            "vegas9",
        );
        bad(
            "duration_s = 10\n[[flows]]\nname = \"a\"\npair = 5\ncca = \"cubic\"",
            "pair = 5",
        );
        bad(
            "duration_s = 10\n[[flows]]\nname = \"a\"\ntype = \"udp\"",
            "needs rate_mbps",
        );
        bad(
            "duration_s = 10\n[[flows]]\nname = \"a\"\ncca = \"cubic\"\non_s = 1",
            "both on_s and off_s",
        );
        bad("duration_s = 10\nbogus = 1", "bogus");
        bad(
            "duration_s = 10\n[topology]\npairs = 2\nextra_rtt_ms = [100.0]",
            "has 1 entries but the topology has 2 pairs",
        );
        bad(
            "duration_s = 10\n[topology]\npairs = 2\nextra_rtt_ms = [0.0, -5.0]",
            "topology.extra_rtt_ms[1] = -5",
        );
        bad(
            "duration_s = 10\n[topology]\npairs = 1\nextra_rtt_ms = [20000.0]",
            "exceeds 10000 ms",
        );
        bad(
            "duration_s = 10\n[topology]\npairs = 1\nextra_rtt_ms = [10.0]\n[pipe]\nkind = \"none\"",
            "needs a pipe",
        );
        bad(
            "duration_s = 10\n[topology]\nmtu = 100",
            "topology.mtu = 100",
        );
        bad(
            "duration_s = 10\n[pipe]\nbuffer_bytes = 10",
            "smaller than one packet",
        );
    }

    proptest::proptest! {
        /// No input string makes the parser panic.
        #[test]
        fn parser_never_panics(s in ".{0,200}") {
            let _ = Scenario::from_toml(&s);
        }
    }
}
