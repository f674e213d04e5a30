//! A deterministic trace-driven simulator for the OPS controller: synthetic
//! 1 Hz RTT series per background mix, a coarse throughput-share model, and a
//! loop that plays the driver's part (1 s ticks).
//!
//! This is a *model*, for exercising the controller's logic (action sequence,
//! adaptive Y, early exit) without sockets; it is not evidence about real
//! networks. Real evidence comes from netlab runs (docs/results/ops.md).
//!
//! RTT model (qualitative content of 000 Fig 5.3 and §3.2: each mix has its own
//! RTT level and shape, and "the absolute RTT level is informative"): RTT =
//! base + queue, queue = buffer × occupancy, defaults from the thesis testbed
//! (65 ms RTT, 6 MB buffer at 500 Mb/s = 96 ms of queue, 000 §2.1):
//! * no flow: empty queue;
//! * loss-based flows only (CUBIC/Reno): a sawtooth filling the buffer and
//!   dropping to ~half after each loss (β = 0.7 on a 2.5-BDP window), period
//!   ≈ 10 s for one flow, shorter and noisier for two;
//! * BBR only: one flow keeps a small queue; two or more flows overestimate
//!   the bottleneck and keep a standing queue of about half the buffer; a
//!   ProbeRTT dip every 10 s;
//! * BBR with loss-based flows: the buffer stays near full (BBR's 2·BDP cap
//!   plus CUBIC filling the rest) with a small CUBIC ripple.
//!
//! Throughput model (000 Table 6.3, anchors A6/A7): flows of one family
//! (loss-based or BBR) share equally; when both are present, BBR flows take
//! 90% and loss-based flows 10% (474/536 ≈ 0.88 and 465/514 ≈ 0.90).

use super::classifier::Classifier;
use super::controller::{Action, Controller, Event, Output, ProbeMode};
use super::doubles::CentroidClassifier;
use super::policy::{Policy, Stump};
use crate::error::{Error, Result};
use crate::fair::jain;
use crate::mix::Mix;
use crate::probe::{CcaName, SegmentKind};

const NS_PER_S: u64 = 1_000_000_000;

/// What the foreground does during one second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FgActivity {
    Silent,
    Sending(CcaName),
}

/// splitmix64 (Steele, Lea, Flood 2014): tiny, seedable, good enough here.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Approximately standard normal (Irwin–Hall, 12 uniforms).
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.unit()).sum::<f64>() - 6.0
    }
}

/// Synthetic 1 Hz RTT generator (see the module docs for the model).
#[derive(Debug, Clone)]
pub struct RttSynth {
    /// Propagation RTT (000 §2.1: 65 ms).
    pub base_rtt_ms: f64,
    /// Queueing delay of a full buffer (6 MB at 500 Mb/s = 96 ms).
    pub buffer_ms: f64,
    /// Standard deviation of the per-sample noise (mean of 10 pings).
    pub noise_ms: f64,
    rng: SplitMix64,
    t_s: u64,
    /// Random phase offsets so different seeds give different windows.
    saw_phase: f64,
    probe_rtt_phase: u64,
}

impl RttSynth {
    /// Thesis testbed defaults: 65 ms base, 96 ms buffer, 0.8 ms noise.
    pub fn new(seed: u64) -> Self {
        let mut rng = SplitMix64(seed);
        let saw_phase = rng.unit();
        let probe_rtt_phase = rng.next_u64() % 10;
        Self {
            base_rtt_ms: 65.0,
            buffer_ms: 96.0,
            noise_ms: 0.8,
            rng,
            t_s: 0,
            saw_phase,
            probe_rtt_phase,
        }
    }

    /// Seconds generated so far.
    pub fn t_s(&self) -> u64 {
        self.t_s
    }

    /// The next 1 Hz sample (mean RTT in ms over the next second) with
    /// background `bg` and foreground activity `fg`.
    pub fn sample(&mut self, bg: &Mix, fg: FgActivity) -> f64 {
        let (loss_based, bbr) = families(bg, fg);
        let t = self.t_s as f64;
        // CUBIC-like shape over one loss period: concave rise, plateau near
        // the old maximum, convex probe (000 Fig 2.x CUBIC window), in [0, 1].
        let shape = |period: f64, phase: f64| {
            let x = ((t / period) + phase).fract();
            0.5 + 4.0 * (x - 0.5).powi(3)
        };
        let occupancy = match (loss_based, bbr) {
            (0, 0) => 0.0,
            (0, b) => {
                let level = if b == 1 {
                    0.06
                } else {
                    (0.45 + 0.05 * (b as f64 - 2.0)).min(0.9)
                };
                // ProbeRTT: all BBR flows drain their queue about every 10 s.
                if (self.t_s + self.probe_rtt_phase) % 10 == 0 {
                    level * 0.4
                } else {
                    level
                }
            }
            (l, 0) => {
                let period = 10.0 / (l as f64).sqrt();
                let jitter = if l > 1 { 0.06 * self.rng.normal() } else { 0.0 };
                (0.55 + 0.45 * shape(period, self.saw_phase) + jitter).clamp(0.0, 1.0)
            }
            (_, _) => (0.86 + 0.12 * shape(6.0, self.saw_phase)).min(1.0),
        };
        self.t_s += 1;
        (self.base_rtt_ms + self.buffer_ms * occupancy + self.noise_ms * self.rng.normal()).max(0.0)
    }
}

/// (loss-based flows, BBR flows) including the foreground if it sends.
fn families(bg: &Mix, fg: FgActivity) -> (u32, u32) {
    let mut bbr = bg.count("bbr");
    let mut loss = bg.total() - bbr;
    if let FgActivity::Sending(c) = fg {
        if c == CcaName::BBR {
            bbr += 1;
        } else {
            loss += 1;
        }
    }
    (loss, bbr)
}

/// Share of the bottleneck the foreground gets and each background flow gets
/// (background flows listed as in [`Mix::iter`], one entry per flow).
pub fn shares(bg: &Mix, fg: FgActivity, bg_out: &mut Vec<f64>) -> f64 {
    let (loss, bbr) = families(bg, fg);
    let (loss_part, bbr_part) = match (loss, bbr) {
        (0, 0) => (0.0, 0.0),
        (_, 0) => (1.0, 0.0),
        (0, _) => (0.0, 1.0),
        _ => (0.1, 0.9),
    };
    let per = |is_bbr: bool| {
        if is_bbr {
            bbr_part / bbr as f64
        } else {
            loss_part / loss as f64
        }
    };
    bg_out.clear();
    for (cca, n) in bg.iter() {
        for _ in 0..n {
            bg_out.push(per(cca == "bbr"));
        }
    }
    match fg {
        FgActivity::Silent => 0.0,
        FgActivity::Sending(c) => per(c == CcaName::BBR),
    }
}

/// The background over time.
#[derive(Debug, Clone, PartialEq)]
pub enum Background {
    /// One mix for the whole run (000 §1.4: static 30-min background).
    Static(Mix),
    /// ALT-X (000 §5.6): `first` for `period_s`, then `second`, alternating;
    /// the schedule is shifted by `offset_s` (the background's phase relative
    /// to the foreground's start is arbitrary in practice).
    Alternating {
        first: Mix,
        second: Mix,
        period_s: u64,
        offset_s: u64,
    },
}

impl Background {
    /// ALT-X with one CUBIC and one BBR flow, starting with CUBIC.
    pub fn alt(period_s: u64) -> Self {
        Background::Alternating {
            first: Mix::from_counts([("cubic", 1)]),
            second: Mix::from_counts([("bbr", 1)]),
            period_s: period_s.max(1),
            offset_s: 0,
        }
    }

    /// The same background shifted by `offset_s` seconds (ALT-X only).
    pub fn shifted(mut self, offset_s: u64) -> Self {
        if let Background::Alternating { offset_s: o, .. } = &mut self {
            *o = offset_s;
        }
        self
    }

    /// The mix at second `t_s`.
    pub fn at(&self, t_s: u64) -> &Mix {
        match self {
            Background::Static(m) => m,
            Background::Alternating {
                first,
                second,
                period_s,
                offset_s,
            } => {
                if (t_s.saturating_add(*offset_s) / period_s) % 2 == 0 {
                    first
                } else {
                    second
                }
            }
        }
    }

    /// Background flows (constant across ALT phases: one).
    fn flows(&self) -> usize {
        match self {
            Background::Static(m) => m.total() as usize,
            Background::Alternating { first, second, .. } => {
                first.total().max(second.total()) as usize
            }
        }
    }
}

/// One timed output of a simulated run.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    pub t_s: u64,
    pub output: Output,
}

/// Result of a simulated transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct SimReport {
    pub duration_s: u64,
    /// Foreground average throughput in Mb/s.
    pub fg_mbps: f64,
    /// Average throughput per background stream in Mb/s.
    pub bg_mbps: Vec<f64>,
    /// Jain over the foreground and each background stream (000 Eq. 2.1).
    pub jain: f64,
    /// Foreground / fair share (capacity / streams).
    pub share_of_fair: f64,
    /// Fraction of the run spent probing.
    pub probe_fraction: f64,
    pub decisions: u64,
    pub early_exits: u64,
    pub cca_switches: u64,
    /// Decisions equal to the stump's choice for the true mix at that time.
    pub correct_decisions: u64,
    /// Steady times chosen, in seconds (adaptive Y shows here).
    pub steady_s: Vec<u64>,
    pub trace: Vec<TraceEntry>,
}

/// Simulation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    pub duration_s: u64,
    /// Bottleneck capacity (000 §2.1: 500 Mb/s).
    pub capacity_mbps: f64,
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            duration_s: 1800,
            capacity_mbps: 500.0,
            seed: 1,
        }
    }
}

struct Acc {
    fg: f64,
    bg: Vec<f64>,
    scratch: Vec<f64>,
}

impl Acc {
    fn add(&mut self, bg: &Mix, fg: FgActivity, cap: f64) {
        self.fg += cap * shares(bg, fg, &mut self.scratch);
        for (a, s) in self.bg.iter_mut().zip(&self.scratch) {
            *a += cap * s;
        }
    }

    fn finish(self, duration_s: u64, cap: f64) -> Result<(f64, Vec<f64>, f64, f64)> {
        let d = duration_s.max(1) as f64;
        let fg = self.fg / d;
        let bg: Vec<f64> = self.bg.iter().map(|x| x / d).collect();
        let mut all = vec![fg];
        all.extend_from_slice(&bg);
        let j = jain(&all)?;
        let share = fg / (cap / all.len() as f64);
        Ok((fg, bg, j, share))
    }
}

/// Run `ctl` (not yet started) against `bg` for `cfg.duration_s` seconds,
/// playing the driver: at each whole second, time passes, outputs are applied
/// to the foreground activity, one RTT sample for the past second is fed.
/// Pattern segments shorter than 1 s are not resolved (1 s ticks).
pub fn simulate<C: Classifier, P: Policy>(
    ctl: &mut Controller<C, P>,
    bg: &Background,
    cfg: SimConfig,
) -> Result<SimReport> {
    let mut synth = RttSynth::new(cfg.seed);
    let mut acc = Acc {
        fg: 0.0,
        bg: vec![0.0; bg.flows()],
        scratch: Vec::new(),
    };
    let mut activity = FgActivity::Sending(ctl.socket_cca());
    let mut trace = Vec::new();
    let (mut correct, mut steady_s) = (0u64, Vec::new());
    let mut stump = Stump::default();
    ctl.start(0)?;
    for t in 0..=cfg.duration_s {
        let now = t * NS_PER_S;
        ctl.handle_timeout(now)?;
        if t > 0 {
            let rtt = synth.sample(bg.at(t - 1), activity);
            // Throughput of the past second with the activity that ran in it.
            acc.add(bg.at(t - 1), activity, cfg.capacity_mbps);
            ctl.handle_sample(now, rtt)?;
        }
        while let Some(o) = ctl.poll() {
            match &o {
                Output::Action(Action::SendFullSpeed { cca, .. })
                | Output::Action(Action::Steady { cca, .. }) => {
                    activity = FgActivity::Sending(*cca)
                }
                Output::Action(Action::Silence { .. }) => activity = FgActivity::Silent,
                Output::Event(Event::Selected { cca, steady_ns, .. }) => {
                    let truth = super::classifier::Classified {
                        mix: bg.at(t.saturating_sub(1)).clone(),
                        class_index: 0,
                        confidence: 1.0,
                        distance: 0.0,
                    };
                    if stump.select(&truth)? == *cca {
                        correct += 1;
                    }
                    steady_s.push(steady_ns.map_or(0, |y| y / NS_PER_S));
                }
                _ => {}
            }
            trace.push(TraceEntry { t_s: t, output: o });
        }
    }
    let st = ctl.stats_at(cfg.duration_s * NS_PER_S);
    let (fg_mbps, bg_mbps, j, share) = acc.finish(cfg.duration_s, cfg.capacity_mbps)?;
    Ok(SimReport {
        duration_s: cfg.duration_s,
        fg_mbps,
        bg_mbps,
        jain: j,
        share_of_fair: share,
        probe_fraction: st.probe_ns as f64 / (cfg.duration_s.max(1) * NS_PER_S) as f64,
        decisions: st.decisions,
        early_exits: st.early_exits,
        cca_switches: st.cca_switches,
        correct_decisions: correct,
        steady_s,
        trace,
    })
}

/// Baseline: the foreground sends with one fixed CCA for the whole run.
pub fn simulate_fixed(cca: CcaName, bg: &Background, cfg: SimConfig) -> Result<SimReport> {
    let mut acc = Acc {
        fg: 0.0,
        bg: vec![0.0; bg.flows()],
        scratch: Vec::new(),
    };
    for t in 0..cfg.duration_s {
        acc.add(bg.at(t), FgActivity::Sending(cca), cfg.capacity_mbps);
    }
    let (fg_mbps, bg_mbps, j, share) = acc.finish(cfg.duration_s, cfg.capacity_mbps)?;
    Ok(SimReport {
        duration_s: cfg.duration_s,
        fg_mbps,
        bg_mbps,
        jain: j,
        share_of_fair: share,
        probe_fraction: 0.0,
        decisions: 0,
        early_exits: 0,
        cca_switches: 0,
        correct_decisions: 0,
        steady_s: Vec::new(),
        trace: Vec::new(),
    })
}

/// Synthetic training windows for `classes` under probing `mode`, `per_class`
/// windows each (phase-aligned to the pattern, 000 §10 gap 2), and a
/// nearest-prototype classifier trained on them. Passive probes run while the
/// foreground keeps sending with whatever CCA it has, so passive training
/// uses one prototype set per foreground CCA (cubic, bbr).
pub fn train_centroids(
    mode: &ProbeMode,
    w: usize,
    classes: &[&str],
    per_class: usize,
    seed: u64,
) -> Result<CentroidClassifier> {
    if w == 0 || per_class == 0 || classes.is_empty() {
        return Err(Error::invalid(
            "training needs w >= 1, per_class >= 1 and at least one class",
        ));
    }
    let mixes: Vec<Mix> = classes
        .iter()
        .map(|l| Mix::parse(l))
        .collect::<Result<_>>()?;
    let activities: Vec<Box<dyn Fn(usize) -> Result<FgActivity>>> = match mode {
        ProbeMode::Passive => vec![
            Box::new(|_| Ok(FgActivity::Sending(CcaName::CUBIC))),
            Box::new(|_| Ok(FgActivity::Sending(CcaName::BBR))),
        ],
        ProbeMode::Active(p) => {
            let p = p.clone();
            vec![Box::new(move |k: usize| {
                let i = p.segment_of_sample(k as u64, NS_PER_S)?;
                Ok(match p.segments()[i].kind {
                    SegmentKind::Silence => FgActivity::Silent,
                    SegmentKind::Burst(c) => FgActivity::Sending(c),
                })
            })]
        }
    };
    let mut model: Option<CentroidClassifier> = None;
    for (a, act) in activities.iter().enumerate() {
        let mut examples = Vec::with_capacity(per_class * mixes.len());
        for (c, mix) in mixes.iter().enumerate() {
            for n in 0..per_class {
                let s = seed ^ ((a as u64) << 48) ^ ((c as u64) << 32) ^ n as u64;
                let mut synth = RttSynth::new(s.wrapping_mul(0x2545_F491_4F6C_DD1D));
                let x = (0..w)
                    .map(|k| Ok(synth.sample(mix, act(k)?)))
                    .collect::<Result<Vec<f64>>>()?;
                examples.push((c, x));
            }
        }
        let m = CentroidClassifier::train(mixes.clone(), &examples)?;
        model = Some(match model {
            None => m,
            Some(prev) => prev.merge(m)?,
        });
    }
    model.ok_or_else(|| Error::invalid("no training data generated"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean(bg: &str, fg: FgActivity, seed: u64) -> f64 {
        let mut s = RttSynth::new(seed);
        let m = Mix::parse(bg).unwrap();
        (0..60).map(|_| s.sample(&m, fg)).sum::<f64>() / 60.0
    }

    #[test]
    fn rtt_levels_follow_the_mix() {
        // Empty < 1 BBR < 2 BBR < 1 CUBIC < BBR+CUBIC (000 Fig 5.3: levels differ).
        let q = FgActivity::Silent;
        let levels: Vec<f64> = ["B0-C0", "B1-C0", "B1-B1", "B0-C1", "B1-C1"]
            .iter()
            .map(|l| mean(l, q, 7))
            .collect();
        assert!(levels.windows(2).all(|p| p[0] < p[1]), "{levels:?}");
        assert!((levels[0] - 65.0).abs() < 1.0);
        // Determinism: same seed, same series.
        assert_eq!(mean("C1-C1", q, 3), mean("C1-C1", q, 3));
        assert_ne!(mean("C1-C1", q, 3), mean("C1-C1", q, 4));
    }

    #[test]
    fn share_model_matches_table_6_3_ratios() {
        let mut bg = Vec::new();
        let cubic = Mix::parse("B0-C1").unwrap();
        let bbr = Mix::parse("B1-C0").unwrap();
        assert_eq!(
            shares(&cubic, FgActivity::Sending(CcaName::CUBIC), &mut bg),
            0.5
        );
        assert_eq!(
            shares(&cubic, FgActivity::Sending(CcaName::BBR), &mut bg),
            0.9
        );
        assert_eq!(bg, [0.1]);
        assert_eq!(
            shares(&bbr, FgActivity::Sending(CcaName::CUBIC), &mut bg),
            0.1
        );
        assert_eq!(shares(&bbr, FgActivity::Silent, &mut bg), 0.0);
        assert_eq!(bg, [1.0]);
        // Fixed wrong choice ≈ 0.6 Jain (anchor A9).
        let r = simulate_fixed(
            CcaName::CUBIC,
            &Background::Static(bbr),
            SimConfig::default(),
        )
        .unwrap();
        assert!((r.jain - 0.61).abs() < 0.01, "{}", r.jain);
    }
}
