//! 003 Ch. 4 on netlab, scaled 1/100: a bulk α transfer beside β ping and
//! UDP, one queue vs the two-class configuration of `opsel::flows::qos`.
//!
//! Scaling (notes §10): 003's 10 Gb/s link with 3 Gb/s UDP and a 125 MB
//! buffer (≈ 100 ms, eq 4.1) becomes a 100 Mbit/s bottleneck with 30 Mbit/s
//! UDP and 1.25 MB (100 ms); the base RTT is 2 ms (003: 2.1–2.3 ms). H-TCP is
//! not in this kernel; CUBIC stands in (notes §10).
//!
//! Flows (one lab per run, 3 pairs): β UDP on pair 1 for the whole run; the
//! RTT probe (10 UDP echoes per second, netlab's ping) on pair 1, so it
//! shares β's path; α TCP flow 1 on pair 0 over [5, 25) s and α flow 2 on
//! pair 2 over [10, 20) s (003 Exp 5: a second α flow joins the first). The
//! α prefix IDs are pairs 0 and 2's sender /24 → receiver /24.
//!
//! Queue configurations on the forward bottleneck (the router's `pf`):
//! netlab's own single htb class + bfifo (1 queue), or the plan of
//! `opsel::flows::qos::plan` with a given β share, work-conserving or strict.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use opsel::flows::qos::{self, QosSpec, Sharing};
use opsel::flows::PrefixId;
use opsel::{Error, Result};

use crate::run::{jain, mean_mbps, run_in_lab};
use crate::scenario::Scenario;
use crate::sys::run_cmd;
use crate::topo::{receiver_ip, sender_ip, Lab};

/// The scaled setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QosExpSpec {
    pub rate_mbps: f64,
    /// One-way delay per direction (RTT = 2 ×).
    pub delay_ms: f64,
    /// Total bottleneck buffer (1 queue) or the sum of both classes' buffers.
    pub buffer_bytes: u64,
    pub udp_mbps: f64,
    pub cca: String,
    pub duration_s: f64,
    pub alpha1_s: (f64, f64),
    pub alpha2_s: (f64, f64),
}

impl Default for QosExpSpec {
    fn default() -> Self {
        QosExpSpec {
            rate_mbps: 100.0,
            delay_ms: 1.0,
            buffer_bytes: 1_250_000,
            udp_mbps: 30.0,
            cca: "cubic".into(),
            duration_s: 30.0,
            alpha1_s: (5.0, 25.0),
            alpha2_s: (10.0, 20.0),
        }
    }
}

/// One queue configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum QueueConfig {
    OneQueue,
    TwoClass { beta_share: f64, strict: bool },
}

impl QueueConfig {
    pub fn name(&self) -> String {
        match self {
            QueueConfig::OneQueue => "1-queue".into(),
            QueueConfig::TwoClass { beta_share, strict } => format!(
                "2-class-b{:.0}{}",
                beta_share * 100.0,
                if *strict { "-strict" } else { "" }
            ),
        }
    }
}

/// The configurations the table compares: 1 queue; β 40 % (003's 60/40);
/// β 30 % and 20 % (Exp 6: β too small for its UDP); 60/40 strict (Exp 1
/// scenario 3).
pub fn default_configs() -> Vec<QueueConfig> {
    vec![
        QueueConfig::OneQueue,
        QueueConfig::TwoClass {
            beta_share: 0.4,
            strict: false,
        },
        QueueConfig::TwoClass {
            beta_share: 0.3,
            strict: false,
        },
        QueueConfig::TwoClass {
            beta_share: 0.2,
            strict: false,
        },
        QueueConfig::TwoClass {
            beta_share: 0.4,
            strict: true,
        },
    ]
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QosRow {
    pub config: String,
    pub repeat: u32,
    /// Median of the per-second probe RTTs (each the mean of 10 echoes).
    pub ping_before_ms: f64,
    pub ping_during_ms: f64,
    pub ping_during_p90_ms: f64,
    pub ping_after_ms: f64,
    /// Probe echoes lost while α ran (of 10 per second).
    pub ping_loss_during: f64,
    /// Both α flows' goodput while flow 1 runs.
    pub alpha_mbps: f64,
    /// Jain's index (003 eq 4.3) of the two α flows while both run.
    pub jain_alpha: f64,
    pub udp_loss_before: f64,
    pub udp_loss_during: f64,
}

/// The scenario of one run (the queue configuration is installed separately).
pub fn scenario(spec: &QosExpSpec, name: &str) -> Result<Scenario> {
    Scenario::from_toml(&format!(
        r#"
name = "qos-{name}"
duration_s = {d}
measure_from_s = {a0}
measure_to_s = {a1}
[topology]
pairs = 3
[pipe]
kind = "htb"
rate_mbps = {rate}
delay_ms = {delay}
buffer_bytes = {buf}
[probe]
pair = 1
[[flows]]
name = "alpha1"
pair = 0
cca = "{cca}"
start_s = {a0}
stop_s = {a1}
[[flows]]
name = "beta-udp"
pair = 1
type = "udp"
rate_mbps = {udp}
[[flows]]
name = "alpha2"
pair = 2
cca = "{cca}"
start_s = {b0}
stop_s = {b1}
"#,
        d = spec.duration_s,
        a0 = spec.alpha1_s.0,
        a1 = spec.alpha1_s.1,
        b0 = spec.alpha2_s.0,
        b1 = spec.alpha2_s.1,
        rate = spec.rate_mbps,
        delay = spec.delay_ms,
        buf = spec.buffer_bytes,
        cca = spec.cca,
        udp = spec.udp_mbps,
    ))
}

/// The α prefix IDs of the experiment: pairs 0 and 2, sender /24 → receiver /24.
pub fn alpha_ids() -> Result<Vec<PrefixId>> {
    [0usize, 2]
        .iter()
        .map(|&i| {
            Ok(PrefixId {
                src: format!("{}/24", sender_ip(i)).parse()?,
                dst: format!("{}/24", receiver_ip(i)).parse()?,
            })
        })
        .collect()
}

/// Replace the forward bottleneck's qdisc with the two-class plan.
fn install(lab: &Lab, spec: &QosExpSpec, beta_share: f64, strict: bool) -> Result<()> {
    let q = QosSpec {
        link_rate_bps: (spec.rate_mbps * 1e6).round() as u64,
        alpha_share: 1.0 - beta_share,
        sharing: if strict {
            Sharing::Strict
        } else {
            Sharing::WorkConserving
        },
        buffer_bytes: spec.buffer_bytes,
        mtu_bytes: lab.topology.mtu as u32,
        ..QosSpec::default()
    };
    let plan = qos::plan(&alpha_ids()?, &q)?;
    let rm = qos::TcPlan::remove_command("pf", Some(&lab.router_ns))?;
    run_cmd("tc", &as_str(&rm))?;
    for c in plan.commands("pf", Some(&lab.router_ns))? {
        run_cmd("tc", &as_str(&c))?;
    }
    Ok(())
}

fn as_str(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Run one configuration in a fresh lab (removed on return, error or panic).
pub fn run_one(spec: &QosExpSpec, cfg: QueueConfig, repeat: u32) -> Result<QosRow> {
    let scn = scenario(spec, &cfg.name())?;
    let lab = Lab::up(&scn.topology_spec(), &scn.pipe_spec()?)?;
    if let QueueConfig::TwoClass { beta_share, strict } = cfg {
        install(&lab, spec, beta_share, strict)?;
    }
    let res = run_in_lab(&scn, &lab, &mut |_, _| {})?;
    drop(lab);
    let (a0, a1) = spec.alpha1_s;
    let (b0, b1) = spec.alpha2_s;
    // Phases skip the first second after a change (slow start, queue fill).
    let rtt_in = |x: f64, y: f64| -> Vec<f64> {
        res.rtt
            .iter()
            .filter(|r| r.t_s >= x && r.t_s < y && r.answered > 0)
            .map(|r| r.rtt_ms)
            .collect()
    };
    let during = rtt_in(a0 + 1.0, a1);
    let answered: Vec<u32> = res
        .rtt
        .iter()
        .filter(|r| r.t_s >= a0 + 1.0 && r.t_s < a1)
        .map(|r| r.answered)
        .collect();
    let asked = answered.len() as f64 * f64::from(crate::traffic::ECHOES);
    let ping_loss_during = if asked > 0.0 {
        1.0 - answered.iter().map(|&a| f64::from(a)).sum::<f64>() / asked
    } else {
        f64::NAN
    };
    let flows = &res.summary.flows;
    let flow = |n: &'static str| -> Result<&crate::run::FlowResult> {
        flows
            .iter()
            .find(|f| f.name == n)
            .ok_or_else(|| Error::invalid(format!("flow {n} missing from the run")))
    };
    let (f1, fu, f2) = (flow("alpha1")?, flow("beta-udp")?, flow("alpha2")?);
    let udp_loss = |x: f64, y: f64| (1.0 - mean_mbps(&fu.bins, x, y) / spec.udp_mbps).max(0.0);
    Ok(QosRow {
        config: cfg.name(),
        repeat,
        ping_before_ms: quantile(rtt_in(1.0, a0), 0.5),
        ping_during_ms: quantile(during.clone(), 0.5),
        ping_during_p90_ms: quantile(during, 0.9),
        ping_after_ms: quantile(rtt_in(a1 + 1.0, spec.duration_s), 0.5),
        ping_loss_during,
        alpha_mbps: mean_mbps(&f1.bins, a0 + 1.0, a1) + mean_mbps(&f2.bins, a0 + 1.0, a1),
        jain_alpha: jain(&[
            mean_mbps(&f1.bins, b0 + 1.0, b1),
            mean_mbps(&f2.bins, b0 + 1.0, b1),
        ]),
        udp_loss_before: udp_loss(1.0, a0),
        udp_loss_during: udp_loss(a0 + 1.0, a1),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    quantile(std::mem::take(&mut v), 0.5)
}

/// Markdown: one line per run, then the median per configuration.
pub fn table(spec: &QosExpSpec, rows: &[QosRow]) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} Mbit/s bottleneck, base RTT {} ms, buffer {} B ({:.0} ms), β UDP {} Mbit/s, α = 2 × {} (flow 1 over [{}, {}) s, flow 2 over [{}, {}) s); ping = netlab probe (10 UDP echoes/s) on β's path, median of per-second means.\n",
        spec.rate_mbps,
        2.0 * spec.delay_ms,
        spec.buffer_bytes,
        spec.buffer_bytes as f64 * 8.0 / (spec.rate_mbps * 1e6) * 1e3,
        spec.udp_mbps,
        spec.cca,
        spec.alpha1_s.0,
        spec.alpha1_s.1,
        spec.alpha2_s.0,
        spec.alpha2_s.1
    );
    let _ = writeln!(
        md,
        "| queues | run | ping before (ms) | ping during α, median / p90 (ms) | ping after (ms) | echo loss during α | α goodput (Mbit/s) | Jain α1/α2 | UDP loss before | UDP loss during α |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut names: Vec<String> = Vec::new();
    for r in rows {
        if !names.contains(&r.config) {
            names.push(r.config.clone());
        }
    }
    for n in &names {
        let rs: Vec<&QosRow> = rows.iter().filter(|r| &r.config == n).collect();
        for r in &rs {
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {:.2} / {:.2} | {:.2} | {:.1} % | {:.1} | {:.3} | {:.1} % | {:.1} % |",
                r.config,
                r.repeat,
                r.ping_before_ms,
                r.ping_during_ms,
                r.ping_during_p90_ms,
                r.ping_after_ms,
                r.ping_loss_during * 100.0,
                r.alpha_mbps,
                r.jain_alpha,
                r.udp_loss_before * 100.0,
                r.udp_loss_during * 100.0
            );
        }
        if rs.len() > 1 {
            let m = |f: fn(&QosRow) -> f64| median(rs.iter().map(|r| f(r)).collect());
            let _ = writeln!(
                md,
                "| {n} | median | {:.2} | {:.2} / {:.2} | {:.2} | {:.1} % | {:.1} | {:.3} | {:.1} % | {:.1} % |",
                m(|r| r.ping_before_ms),
                m(|r| r.ping_during_ms),
                m(|r| r.ping_during_p90_ms),
                m(|r| r.ping_after_ms),
                m(|r| r.ping_loss_during) * 100.0,
                m(|r| r.alpha_mbps),
                m(|r| r.jain_alpha),
                m(|r| r.udp_loss_before) * 100.0,
                m(|r| r.udp_loss_during) * 100.0
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_and_ids_match_the_topology() {
        let s = scenario(&QosExpSpec::default(), "x").unwrap();
        assert_eq!(s.flows.len(), 3);
        assert_eq!(s.pipe.buffer(), 1_250_000);
        let ids = alpha_ids().unwrap();
        assert_eq!(ids[0].to_string(), "10.71.0.0/24 -> 10.71.64.0/24");
        assert_eq!(ids[1].to_string(), "10.71.2.0/24 -> 10.71.66.0/24");
        let names: Vec<String> = default_configs().iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "1-queue",
                "2-class-b40",
                "2-class-b30",
                "2-class-b20",
                "2-class-b40-strict"
            ]
        );
    }
}
