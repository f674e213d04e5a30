//! A deterministic simulator for DPS: synthetic per-CCA metric distributions
//! on the thesis's 10 Mbps / 40 ms bottleneck, driving the real [`Agent`]
//! and [`Manager`] at 1 Hz. It reproduces the *shape* of 002 Fig 5.4/5.5
//! (learning time against p) and Fig 5.8 (fairness with and without the
//! manager) in seconds of CPU, with every run reproducible from its seed.
//!
//! What comes from 002 and what is ours:
//! * Pair fairness: Jain's index of every static CCA pair is 002 Fig 5.7
//!   (ΔRTT = 0 and 100 ms). 002 does not say which flow of a mixed pair got
//!   more; the simulator gives the larger share to the more aggressive CCA in
//!   the order vegas < cubic < bbr < illinois (delay-based yields to
//!   loss-based, 002 §5.2: "Vegas is the least aggressive"; Illinois's
//!   concave growth injects the most data).
//! * Single-flow distributions: 002 shows them only as figures (Appendix A,
//!   no numbers). [`SINGLE_FLOW`] picks Gaussians that make the Table 5.2
//!   constraints behave as the thesis reports: exactly one of {cubic, vegas}
//!   satisfies (so p matters, footnote 8), vegas under-uses the link, the
//!   loss-based CCAs fill the buffer.

use super::agent::{Agent, Event, Output};
use super::feedback::Feedback;
use super::rng::SplitMix64;
use super::spec::DpsSpec;
use crate::error::{Error, Result};
use crate::fair::{FairnessSpec, Manager};

const S: u64 = 1_000_000_000;

/// Bottleneck rate of the thesis's topology (002 §5.1), Mbps.
pub const BOTTLENECK_MBPS: f64 = 10.0;
/// Base RTT of the thesis's topology (002 §5.1), ms.
pub const BASE_RTT_MS: f64 = 40.0;

/// A normal distribution, truncated at 0 when sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gaussian {
    pub mean: f64,
    pub sd: f64,
}

impl Gaussian {
    fn sample(&self, rng: &mut SplitMix64) -> f64 {
        (self.mean + self.sd * standard_normal(rng)).max(0.0)
    }
}

/// One CCA alone on the 10 Mbps / 40 ms bottleneck.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcaProfile {
    pub name: &'static str,
    /// Per-second RTT samples, ms.
    pub rtt_ms: Gaussian,
    /// Per-second throughput samples, Mbps.
    pub throughput_mbps: Gaussian,
    /// Rank in the aggressiveness order used to split mixed pairs.
    pub aggressiveness: u8,
    /// Queueing delay this CCA adds when sharing the link, ms.
    pub queue_ms: f64,
}

const fn g(mean: f64, sd: f64) -> Gaussian {
    Gaussian { mean, sd }
}

/// Single-flow profiles (see the module doc for their basis).
pub const SINGLE_FLOW: [CcaProfile; 5] = [
    CcaProfile {
        name: "cubic",
        rtt_ms: g(120.0, 40.0),
        throughput_mbps: g(9.7, 0.15),
        aggressiveness: 1,
        queue_ms: 80.0,
    },
    CcaProfile {
        name: "vegas",
        rtt_ms: g(45.0, 3.0),
        throughput_mbps: g(8.6, 0.5),
        aggressiveness: 0,
        queue_ms: 5.0,
    },
    CcaProfile {
        name: "illinois",
        rtt_ms: g(260.0, 60.0),
        throughput_mbps: g(9.6, 0.2),
        aggressiveness: 3,
        queue_ms: 200.0,
    },
    CcaProfile {
        name: "bbr",
        rtt_ms: g(60.0, 10.0),
        throughput_mbps: g(9.3, 0.3),
        aggressiveness: 2,
        queue_ms: 20.0,
    },
    CcaProfile {
        name: "reno",
        rtt_ms: g(130.0, 40.0),
        throughput_mbps: g(9.4, 0.3),
        aggressiveness: 1,
        queue_ms: 90.0,
    },
];

/// The profile of a CCA, or an error listing the known ones.
pub fn profile(name: &str) -> Result<&'static CcaProfile> {
    SINGLE_FLOW.iter().find(|p| p.name == name).ok_or_else(|| {
        Error::invalid(format!(
            "the DPS simulator has no profile for CCA {name:?}; known: cubic, vegas, illinois, bbr, reno"
        ))
    })
}

/// 002 Fig 5.7: Jain's index of static pairs, order vegas, cubic,
/// illinois, bbr; `[0]` at ΔRTT = 0 ms, `[1]` at ΔRTT = 100 ms.
pub const PAIR_JAIN: [[[f64; 4]; 4]; 2] = [
    [
        [0.96, 0.60, 0.64, 0.72],
        [0.60, 0.99, 0.65, 0.89],
        [0.64, 0.65, 0.95, 0.95],
        [0.72, 0.89, 0.95, 0.98],
    ],
    [
        [0.89, 0.56, 0.56, 0.71],
        [0.56, 0.99, 0.64, 0.81],
        [0.56, 0.64, 0.86, 0.88],
        [0.71, 0.81, 0.88, 0.74],
    ],
];

fn pair_index(name: &str) -> Result<usize> {
    ["vegas", "cubic", "illinois", "bbr"]
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| {
            Error::invalid(format!(
                "002 Fig 5.7 has no pair fairness for CCA {name:?}; the fairness simulator knows vegas, cubic, illinois, bbr"
            ))
        })
}

/// The small/large rate ratio r of two flows whose Jain's index is `j`:
/// J = (1 + r)² / (2(1 + r²)) solved for r ≤ 1.
pub fn ratio_for_jain(j: f64) -> f64 {
    let a = 2.0 * j - 1.0;
    if a <= 0.0 {
        return 0.0;
    }
    ((1.0 - (1.0 - a * a).max(0.0).sqrt()) / a).clamp(0.0, 1.0)
}

/// Draw one second of a single flow on the bottleneck.
pub fn single_flow_sample(p: &CcaProfile, rng: &mut SplitMix64) -> (f64, f64) {
    (
        p.rtt_ms.sample(rng),
        p.throughput_mbps.sample(rng).min(BOTTLENECK_MBPS),
    )
}

/// One learning run (002 Fig 5.4): a single DPS flow from an empty
/// database until every CCA has statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearningRun {
    /// Learning time t_p, seconds.
    pub learning_s: f64,
    /// Monitoring periods until learnt.
    pub learning_cycles: u64,
    /// Net utility: binary utilities summed over the periods closed by the
    /// end of learning (002 Fig 5.4 "net utility").
    pub net_utility: u64,
}

/// Drive one agent at 1 Hz with single-flow samples. `stop` is asked after
/// every closed period with (time s, agent) and ends the run when true.
fn drive_single(
    spec: &DpsSpec,
    sample_seed: u64,
    max_s: u64,
    mut on_event: impl FnMut(u64, &Event),
    stop: impl Fn(u64, &Agent) -> bool,
) -> Result<Agent> {
    let profiles: Vec<&CcaProfile> = spec
        .ccas
        .iter()
        .map(|c| profile(c))
        .collect::<Result<_>>()?;
    let mut agent = Agent::new(spec)?;
    let mut rng = SplitMix64::new(sample_seed);
    agent.start(0)?;
    let mut current = 0usize;
    let names: Vec<String> = spec.ccas.iter().map(|c| c.to_ascii_lowercase()).collect();
    for t in 1..=max_s {
        while let Some(o) = agent.poll() {
            match o {
                Output::SetCca(c) => {
                    current = names.iter().position(|n| n == c.as_str()).unwrap_or(0);
                }
                Output::Event(e) => on_event(t - 1, &e),
                Output::Report(_) => {}
            }
        }
        let (rtt, tput) = single_flow_sample(profiles[current], &mut rng);
        agent.handle_feedback(t * S, &Feedback::sender(t * S, rtt, tput))?;
        if stop(t, &agent) {
            while let Some(o) = agent.poll() {
                if let Output::Event(e) = o {
                    on_event(t, &e);
                }
            }
            return Ok(agent);
        }
    }
    // Periods that closed with the last sample.
    while let Some(o) = agent.poll() {
        if let Output::Event(e) = o {
            on_event(max_s, &e);
        }
    }
    Ok(agent)
}

/// One learning run with the Table 5.2 setup for `ccas` and exploration
/// probability `p`; `seed` drives both the agent and the samples.
pub fn learning_run(ccas: &[&str], p: f64, seed: u64) -> Result<LearningRun> {
    let mut spec = DpsSpec::table_5_2(ccas, p);
    spec.seed = seed;
    let mut utility = 0u64;
    let agent = drive_single(
        &spec,
        seed ^ 0xD1B5_4A32_D192_ED03,
        1_000_000,
        |_, e| {
            if let Event::PeriodClosed {
                satisfied: true, ..
            } = e
            {
                utility += 1;
            }
        },
        |_, a| a.stats().learnt_at_ns.is_some(),
    )?;
    let st = agent.stats();
    let at = st
        .learnt_at_ns
        .ok_or_else(|| Error::invalid("simulated flow did not finish learning within 10^6 s"))?;
    Ok(LearningRun {
        learning_s: at as f64 / S as f64,
        learning_cycles: st.learning_cycles.unwrap_or(0),
        net_utility: utility,
    })
}

/// Utility collected within a fixed window (002 Fig 5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowUtility {
    /// The thesis's net utility: binary utilities of the periods closed
    /// within the window.
    pub satisfied_periods: u64,
    /// Monitored seconds spent in satisfied periods. Counting periods
    /// favours many short random periods (t = 30 s) over long selection
    /// periods (T = 60 s) of the same CCA; seconds do not.
    pub satisfied_s: u64,
}

/// 002 Fig 5.5's comparison over a fixed window with the Table 5.2 setup.
pub fn utility_in_window(ccas: &[&str], p: f64, window_s: u64, seed: u64) -> Result<WindowUtility> {
    let mut spec = DpsSpec::table_5_2(ccas, p);
    spec.seed = seed;
    let mut u = WindowUtility {
        satisfied_periods: 0,
        satisfied_s: 0,
    };
    drive_single(
        &spec,
        seed ^ 0xD1B5_4A32_D192_ED03,
        window_s,
        |_, e| {
            if let Event::PeriodClosed {
                satisfied: true,
                samples,
                ..
            } = e
            {
                u.satisfied_periods += 1;
                // One sample per second.
                u.satisfied_s += samples;
            }
        },
        |_, _| false,
    )?;
    Ok(u)
}

/// Means over `runs` learning runs (seeds `seed..seed + runs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearningSummary {
    pub p: f64,
    pub runs: u64,
    pub mean_learning_s: f64,
    pub mean_cycles: f64,
    pub mean_net_utility: f64,
}

/// 002 Fig 5.4 for one CCA set and p.
pub fn learning_summary(ccas: &[&str], p: f64, runs: u64, seed: u64) -> Result<LearningSummary> {
    if runs == 0 {
        return Err(Error::invalid("learning_summary needs at least one run"));
    }
    let (mut t, mut c, mut u) = (0.0, 0.0, 0.0);
    for k in 0..runs {
        let r = learning_run(ccas, p, seed.wrapping_add(k))?;
        t += r.learning_s;
        c += r.learning_cycles as f64;
        u += r.net_utility as f64;
    }
    let n = runs as f64;
    Ok(LearningSummary {
        p,
        runs,
        mean_learning_s: t / n,
        mean_cycles: c / n,
        mean_net_utility: u / n,
    })
}

/// How two DPS flows are coordinated (002 §5.4 scenarios).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coordination {
    /// No fairness manager: two independent DPS flows.
    None,
    /// One manager for both flows (same sender).
    SameSender,
    /// One manager per flow (different senders, unaware of each other).
    SeparateSenders,
}

/// One fairness run (002 Fig 5.8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FairnessRun {
    /// Mean Jain's index of the two flows' rates over the observed seconds.
    pub net_jain: f64,
    /// Seconds observed: those in which both flows send (002 §5.4:
    /// "observations start once both flows coexist"; with a manager the
    /// second flow is admitted after the first one locks).
    pub observed_s: u64,
    /// Mean Jain's index over the observed seconds in which both flows
    /// were in their learnt phase (002 Fig 5.8 "Learnt"), and over the
    /// others ("Learning"); NaN when there were none.
    pub learnt_jain: f64,
    pub learning_jain: f64,
    /// Violations the manager signalled.
    pub violations: u64,
    /// CCA switches of both flows.
    pub switches: u64,
}

/// Two DPS flows (Table 5.3 setup) sharing the 10 Mbps bottleneck for
/// `duration_s`, their rates split by the pair's Jain's index of 002 Fig 5.7
/// (`delta_rtt_100` picks the ΔRTT = 100 ms table), with a 3 % per-second
/// rate noise. Fairness is sampled every second from the flows' sending rates.
pub fn fairness_run(
    ccas: &[&str],
    coordination: Coordination,
    delta_rtt_100: bool,
    duration_s: u64,
    seed: u64,
) -> Result<FairnessRun> {
    let idx: Vec<usize> = ccas.iter().map(|c| pair_index(c)).collect::<Result<_>>()?;
    let prof: Vec<&CcaProfile> = ccas.iter().map(|c| profile(c)).collect::<Result<_>>()?;
    let table = &PAIR_JAIN[delta_rtt_100 as usize];
    let managed = coordination != Coordination::None;
    let mut agents = Vec::with_capacity(2);
    for k in 0..2u64 {
        let mut spec = DpsSpec::table_5_3(ccas);
        spec.seed = seed.wrapping_mul(2).wrapping_add(k);
        agents.push(if managed {
            Agent::managed(&spec)?
        } else {
            Agent::new(&spec)?
        });
    }
    // Same sender: one manager for both; separate senders: one each.
    let mut managers: Vec<Manager> = match coordination {
        Coordination::None => Vec::new(),
        Coordination::SameSender => vec![Manager::new(FairnessSpec::default())?],
        Coordination::SeparateSenders => vec![
            Manager::new(FairnessSpec::default())?,
            Manager::new(FairnessSpec::default())?,
        ],
    };
    let manager_of = |flow: usize| {
        if managers_len(coordination) == 1 {
            0
        } else {
            flow
        }
    };
    for (k, a) in agents.iter_mut().enumerate() {
        a.start(0)?;
        if managed {
            managers[manager_of(k)].register(k as u64)?;
        }
    }
    let mut rng = SplitMix64::new(seed ^ 0x5851_F42D_4C95_7F2D);
    let mut current = [0usize; 2];
    // A managed flow sends once its manager first unlocks it.
    let mut active = [!managed, !managed];
    let (mut sum_j, mut observed) = (0.0, 0u64);
    let (mut sum_learnt, mut n_learnt) = (0.0, 0u64);
    let extra_rtt = [0.0, if delta_rtt_100 { 100.0 } else { 0.0 }];
    for t in 1..=duration_s {
        let now = t * S;
        // Deliver manager commands and agent outputs until quiet.
        loop {
            let mut moved = false;
            for mgr in managers.iter_mut() {
                while let Some((flow, cmd)) = mgr.poll() {
                    active[flow as usize] = true;
                    agents[flow as usize].handle_command(now - S, &cmd)?;
                    moved = true;
                }
            }
            for k in 0..2 {
                while let Some(o) = agents[k].poll() {
                    moved = true;
                    match o {
                        Output::SetCca(c) => {
                            current[k] = ccas.iter().position(|n| *n == c.as_str()).unwrap_or(0)
                        }
                        Output::Report(r) => managers[manager_of(k)].handle_report(k as u64, &r)?,
                        Output::Event(_) => {}
                    }
                }
            }
            if !moved {
                break;
            }
        }
        let mut rate = [0.0f64; 2];
        let mut rtt = [0.0f64; 2];
        if active[0] && active[1] {
            // The pair's split (002 Fig 5.7), the larger share to the more
            // aggressive CCA; equal CCAs: flow 0 gets the larger share.
            let r = ratio_for_jain(table[idx[current[0]]][idx[current[1]]]);
            let first_large = prof[current[0]].aggressiveness >= prof[current[1]].aggressiveness;
            let (large, small) = (BOTTLENECK_MBPS / (1.0 + r), BOTTLENECK_MBPS * r / (1.0 + r));
            rate = if first_large {
                [large, small]
            } else {
                [small, large]
            };
            for x in &mut rate {
                *x = (*x * (1.0 + 0.03 * standard_normal(&mut rng))).max(0.0);
            }
            let queue = prof[current[0]].queue_ms.max(prof[current[1]].queue_ms);
            for k in 0..2 {
                rtt[k] = BASE_RTT_MS + extra_rtt[k] + queue * (0.8 + 0.4 * rng.next_f64());
            }
        } else {
            for k in 0..2 {
                if active[k] {
                    let (r, x) = single_flow_sample(prof[current[k]], &mut rng);
                    rtt[k] = r + extra_rtt[k];
                    rate[k] = x;
                }
            }
        }
        for k in 0..2 {
            if !active[k] {
                continue;
            }
            let fb = Feedback {
                at_ns: now,
                rtt_ms: Some(rtt[k]),
                delivery_rate_mbps: Some(rate[k]),
                goodput_mbps: None,
                sending_rate_mbps: Some(rate[k]),
            };
            agents[k].handle_feedback(now, &fb)?;
            if managed {
                managers[manager_of(k)].report_rate(k as u64, rate[k])?;
            }
        }
        for m in &mut managers {
            m.evaluate();
        }
        // 002 §5.4: "observations start once both flows coexist".
        if active[0] && active[1] {
            let j = crate::fair::jain(&rate)?;
            sum_j += j;
            observed += 1;
            if !agents[0].learning() && !agents[1].learning() {
                sum_learnt += j;
                n_learnt += 1;
            }
        }
    }
    Ok(FairnessRun {
        net_jain: if observed > 0 {
            sum_j / observed as f64
        } else {
            f64::NAN
        },
        learnt_jain: if n_learnt > 0 {
            sum_learnt / n_learnt as f64
        } else {
            f64::NAN
        },
        learning_jain: if observed > n_learnt {
            (sum_j - sum_learnt) / (observed - n_learnt) as f64
        } else {
            f64::NAN
        },
        observed_s: observed,
        violations: managers.iter().map(|m| m.stats().violations).sum(),
        switches: agents.iter().map(|a| a.stats().switches).sum(),
    })
}

fn managers_len(c: Coordination) -> usize {
    match c {
        Coordination::None => 0,
        Coordination::SameSender => 1,
        Coordination::SeparateSenders => 2,
    }
}

/// A standard normal draw (Box–Muller), for multiplicative noise.
fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_inverts_jain() {
        for j in [0.5, 0.6, 0.74, 0.8, 0.89, 0.99, 1.0] {
            let r = ratio_for_jain(j);
            let back = crate::fair::jain(&[1.0, r]).unwrap();
            assert!((back - j).abs() < 1e-9, "J {j}: r {r} → {back}");
        }
        // 002 note §3.1: J = 0.80 is a 1 : 3 split.
        assert!((ratio_for_jain(0.8) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn profiles_and_errors() {
        assert!(profile("cubic").is_ok());
        assert!(profile("westwood")
            .unwrap_err()
            .to_string()
            .contains("westwood"));
        assert!(
            fairness_run(&["cubic", "reno"], Coordination::None, false, 10, 1)
                .unwrap_err()
                .to_string()
                .contains("reno")
        );
        assert!(learning_summary(&["cubic"], 1.0, 0, 1).is_err());
    }
}
