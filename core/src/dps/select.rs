//! The Framework Database and Protocol Selection: Alg 1 with Eq 4.1 and the
//! Eq 4.2 tie-break (002 §4.4–§4.5).

use super::rng::SplitMix64;
use super::spec::Compiled;
use super::stats::MetricStats;
use super::utility::{Metric, Qos};
use crate::probe::CcaName;

/// Two utilities closer than this are a tie ("U_max occurs > 1 times",
/// 002 Alg 1). Exact float equality would make ties depend on summation
/// order; 1e-12 is far below any utility difference a histogram can show.
pub const TIE_EPS: f64 = 1e-12;

/// Everything known about one protocol in one State (002 Fig 4.2: Protocol
/// Statistics plus the fairness framework's "violating" mark).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProtocolStats {
    /// {D, M, N} per metric, indexed by [`Metric::index`].
    pub metrics: [MetricStats; 2],
    /// Marked by the fairness manager as causing a violation in this State
    /// (002 §4.6); excluded from greedy selection, still eligible for the
    /// random_trigger so a wrong mark can be corrected.
    pub violating: bool,
    /// Monitoring periods merged.
    pub periods: u32,
}

impl ProtocolStats {
    /// No statistics yet (Alg 1 cannot score it).
    pub fn is_empty(&self) -> bool {
        self.periods == 0
    }

    /// A member of P_empty in Alg 3: no statistics and not marked
    /// violating. 002 does not say how a mark without statistics counts; a
    /// CCA the manager caught violating in this State is explored (its
    /// answer is known to be bad), otherwise a violation that always
    /// strikes before the CCA's first period ends would keep the flow in
    /// its learning phase for ever.
    pub fn is_unexplored(&self) -> bool {
        self.periods == 0 && !self.violating
    }

    /// Statistics of one metric.
    pub fn metric(&self, m: Metric) -> &MetricStats {
        &self.metrics[m.index()]
    }
}

/// How Alg 1 reached its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectedBy {
    /// The single largest U_net among valid protocols (Eq 4.1).
    Utility,
    /// U_net tied; the largest Û_net (Eq 4.2) among the tied.
    MeanTieBreak,
    /// U_net and Û_net tied; uniform seeded random among the tied.
    RandomTieBreak,
    /// No protocol valid: Eq 4.2 over every candidate with statistics
    /// (002 §4.5: "a coarser metric is used: the mean").
    MeanFallback,
}

/// U_stat,j for every metric of the spec; `true` when all exceed
/// `thres_stat` (002 Alg 1: "constraint satisfied").
pub(crate) fn is_valid(cfg: &Compiled, s: &ProtocolStats) -> bool {
    !s.is_empty()
        && cfg
            .metrics
            .iter()
            .all(|(m, q, _)| s.metric(*m).expected_utility(q) > cfg.thres_stat)
}

/// Eq 4.1: U_net = Σⱼ Pⱼ · Σᵢ uᵢⱼ·dᵢⱼ.
pub(crate) fn u_net(metrics: &[(Metric, Qos, f64)], s: &ProtocolStats) -> f64 {
    metrics
        .iter()
        .map(|(m, q, p)| p * s.metric(*m).expected_utility(q))
        .sum()
}

/// Eq 4.2 for protocol `t` within the set `mask`: Û_net = Σⱼ Pⱼ·x_tj with
/// x_tj = Mean_tj / Σ_T Mean (higher is better) or 1 − Mean_tj / Σ_T Mean
/// (lower is better). When every mean of a metric is 0 the metric cannot
/// separate the protocols and each gets the equal share 1/T.
pub(crate) fn u_hat(
    metrics: &[(Metric, Qos, f64)],
    table: &[ProtocolStats],
    mask: u32,
    t: usize,
) -> f64 {
    let count = mask.count_ones() as f64;
    let mut total = 0.0;
    for (m, _, p) in metrics {
        let sum: f64 = bits(mask).map(|i| table[i].metric(*m).mean()).sum();
        let share = if sum > 0.0 {
            table[t].metric(*m).mean() / sum
        } else {
            1.0 / count
        };
        let x = if m.higher_is_better() {
            share
        } else {
            1.0 - share
        };
        total += p * x;
    }
    total
}

/// Indices of the set bits of `mask`, ascending.
pub(crate) fn bits(mask: u32) -> impl Iterator<Item = usize> {
    (0..32).filter(move |i| mask & (1 << i) != 0)
}

/// The bit mask of `table` entries for which `f` holds.
pub(crate) fn mask_of(table: &[ProtocolStats], f: impl Fn(&ProtocolStats) -> bool) -> u32 {
    table
        .iter()
        .enumerate()
        .filter(|(_, s)| f(s))
        .fold(0, |m, (i, _)| m | (1 << i))
}

/// Keep the members of `mask` whose `score` is within [`TIE_EPS`] of the
/// largest; returns (mask of the best, best score).
fn argmax_set(mask: u32, score: impl Fn(usize) -> f64) -> (u32, f64) {
    let best = bits(mask).map(&score).fold(f64::NEG_INFINITY, f64::max);
    let tied = bits(mask)
        .filter(|&i| score(i) >= best - TIE_EPS)
        .fold(0, |m, i| m | (1 << i));
    (tied, best)
}

/// 002 Alg 1 over the candidates in `mask` (bit i = `table[i]`): the valid
/// set (U_stat,j > thres_stat ∀j), argmax U_net, the Eq 4.2 tie-break, then a
/// seeded uniform choice; when no candidate is valid, Eq 4.2 over every
/// candidate with statistics. `None` when no candidate has statistics.
pub(crate) fn protocol_selection(
    cfg: &Compiled,
    table: &[ProtocolStats],
    mask: u32,
    rng: &mut SplitMix64,
) -> Option<(usize, SelectedBy)> {
    let known = mask & mask_of(table, |s| !s.is_empty());
    if known == 0 {
        return None;
    }
    let valid = known & mask_of(table, |s| is_valid(cfg, s));
    if valid == 0 {
        let (tied, _) = argmax_set(known, |i| u_hat(&cfg.metrics, table, known, i));
        return Some(if tied.count_ones() == 1 {
            (tied.trailing_zeros() as usize, SelectedBy::MeanFallback)
        } else {
            (rng.choose_bit(tied)?, SelectedBy::MeanFallback)
        });
    }
    let (tied, _) = argmax_set(valid, |i| u_net(&cfg.metrics, &table[i]));
    if tied.count_ones() == 1 {
        return Some((tied.trailing_zeros() as usize, SelectedBy::Utility));
    }
    // Eq 4.2 is computed over the T tied protocols only (002 §4.5).
    let (tied2, _) = argmax_set(tied, |i| u_hat(&cfg.metrics, table, tied, i));
    if tied2.count_ones() == 1 {
        return Some((tied2.trailing_zeros() as usize, SelectedBy::MeanTieBreak));
    }
    Some((rng.choose_bit(tied2)?, SelectedBy::RandomTieBreak))
}

/// One State's row of the Framework Database: the statistics of every
/// candidate protocol, in the spec's CCA order.
#[derive(Debug, Clone, PartialEq)]
pub struct StateStats {
    /// The State label (see [`Agent::state_key`](super::Agent::state_key)).
    pub key: String,
    /// Per candidate CCA.
    pub protocols: Vec<ProtocolStats>,
}

/// The per-flow Framework Database (002 Fig 4.2): candidate protocols and
/// their statistics per State label. A flow without a network-state
/// classifier or fairness manager uses the single State "".
#[derive(Debug, Clone, PartialEq)]
pub struct Database {
    ccas: Vec<CcaName>,
    states: Vec<StateStats>,
}

impl Database {
    pub(crate) fn new(ccas: Vec<CcaName>) -> Self {
        Self {
            ccas,
            states: Vec::new(),
        }
    }

    /// Candidate CCAs in spec order.
    pub fn ccas(&self) -> &[CcaName] {
        &self.ccas
    }

    /// Every State seen so far.
    pub fn states(&self) -> &[StateStats] {
        &self.states
    }

    /// The row of `key`, if seen.
    pub fn state(&self, key: &str) -> Option<&StateStats> {
        self.states.iter().find(|s| s.key == key)
    }

    /// The index of `key`'s row, created empty when new (allocates only for
    /// a new State).
    pub(crate) fn index_of(&mut self, key: &str) -> usize {
        if let Some(i) = self.states.iter().position(|s| s.key == key) {
            return i;
        }
        self.states.push(StateStats {
            key: key.to_string(),
            protocols: vec![ProtocolStats::default(); self.ccas.len()],
        });
        self.states.len() - 1
    }

    pub(crate) fn row(&self, i: usize) -> &[ProtocolStats] {
        &self.states[i].protocols
    }

    pub(crate) fn row_mut(&mut self, i: usize) -> &mut [ProtocolStats] {
        &mut self.states[i].protocols
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::DpsSpec;
    use super::super::stats::{History, PeriodStats};
    use super::*;

    fn cfg() -> Compiled {
        DpsSpec::table_5_2(&["cubic", "vegas", "illinois", "bbr"], 1.0)
            .compile()
            .unwrap()
    }

    /// A protocol whose every RTT and throughput sample is the given value.
    fn proto(cfg: &Compiled, rtt: &[f64], tput: &[f64]) -> ProtocolStats {
        let mut s = ProtocolStats::default();
        for (m, q, _) in &cfg.metrics {
            let xs = if *m == Metric::RttMs { rtt } else { tput };
            let mut p = PeriodStats::new();
            for &x in xs {
                p.push(q, x);
            }
            s.metrics[m.index()].merge(&p, &History::default());
        }
        s.periods = 1;
        s
    }

    /// Eq 4.1 by hand with the Table 5.2 spec (RTT [0,300,0,350] at 0.4,
    /// throughput [9.5,∞,8,∞] at 0.6; 10 bins per ramp):
    /// RTT {100, 325} and throughput {9.6, 8.8}, worked out below.
    #[test]
    fn golden_eq_4_1() {
        let c = cfg();
        // 325 ms falls in upper bin 5 ([325, 330)), centre 327.5, u = 0.45.
        // 8.8 Mbps falls in lower bin 5 ([8.75, 8.9)), centre 8.825, u = 0.55.
        let s = proto(&c, &[100.0, 325.0], &[9.6, 8.8]);
        let u_rtt = s.metric(Metric::RttMs).expected_utility(&c.metrics[0].1);
        let u_tp = s
            .metric(Metric::ThroughputMbps)
            .expected_utility(&c.metrics[1].1);
        assert!((u_rtt - 0.725).abs() < 1e-12, "{u_rtt}");
        assert!((u_tp - 0.775).abs() < 1e-12, "{u_tp}");
        assert!((u_net(&c.metrics, &s) - (0.4 * 0.725 + 0.6 * 0.775)).abs() < 1e-12);
        assert!(is_valid(&c, &s));
    }

    /// Eq 4.2 by hand: two tied protocols with mean RTT 50 and 150 ms and
    /// mean throughput 9.6 and 9.6 Mbps: x_rtt = 1 − 50/200 = 0.75 and
    /// 1 − 150/200 = 0.25; x_tp = 0.5 each; Û = 0.4·0.75 + 0.6·0.5 = 0.6 and
    /// 0.4·0.25 + 0.3 = 0.4.
    #[test]
    fn golden_eq_4_2_tie_break() {
        let c = cfg();
        let a = proto(&c, &[50.0], &[9.6]);
        let b = proto(&c, &[150.0], &[9.6]);
        let table = [a, b, ProtocolStats::default(), ProtocolStats::default()];
        assert!((u_hat(&c.metrics, &table, 0b11, 0) - 0.6).abs() < 1e-12);
        assert!((u_hat(&c.metrics, &table, 0b11, 1) - 0.4).abs() < 1e-12);
        // Both satisfy fully (U_net = 1.0 each): the tie goes to Eq 4.2.
        let mut rng = SplitMix64::new(1);
        assert_eq!(
            protocol_selection(&c, &table, 0b1111, &mut rng),
            Some((0, SelectedBy::MeanTieBreak))
        );
    }

    #[test]
    fn alg1_branches() {
        let c = cfg();
        let good = proto(&c, &[100.0], &[9.7]);
        let ok = proto(&c, &[320.0], &[9.7]); // RTT bin 4 → U_rtt 0.55 > 0.5, U_net 0.82
        let slow = proto(&c, &[40.0], &[8.3]); // U_tp = 0.15: invalid
        let slower = proto(&c, &[40.0], &[7.0]); // U_tp = 0
        let mut rng = SplitMix64::new(9);
        // Single best valid.
        let t = [good, ok, slow, slower];
        assert_eq!(
            protocol_selection(&c, &t, 0b1111, &mut rng),
            Some((0, SelectedBy::Utility))
        );
        assert_eq!(
            protocol_selection(&c, &t, 0b1110, &mut rng),
            Some((1, SelectedBy::Utility))
        );
        // Nothing valid: Eq 4.2 over the known ones: slow has the higher
        // throughput mean at equal RTT.
        assert_eq!(
            protocol_selection(&c, &t, 0b1100, &mut rng),
            Some((2, SelectedBy::MeanFallback))
        );
        // Nothing known.
        let empty = [ProtocolStats::default(); 4];
        assert_eq!(protocol_selection(&c, &empty, 0b1111, &mut rng), None);
        // Full tie in U_net and Eq 4.2: the seeded draw decides, and over
        // many seeds both appear.
        let t = [good, good, slow, slower];
        let mut seen = [0u32; 2];
        for seed in 0..200 {
            let mut r = SplitMix64::new(seed);
            let (i, how) = protocol_selection(&c, &t, 0b0011, &mut r).unwrap();
            assert_eq!(how, SelectedBy::RandomTieBreak);
            seen[i] += 1;
        }
        assert!(seen[0] > 60 && seen[1] > 60, "{seen:?}");
        // Same seed, same answer (bit-for-bit determinism).
        let a = protocol_selection(&c, &t, 0b0011, &mut SplitMix64::new(5));
        let b = protocol_selection(&c, &t, 0b0011, &mut SplitMix64::new(5));
        assert_eq!(a, b);
    }

    #[test]
    fn database_rows() {
        let mut db = Database::new(vec![CcaName::CUBIC, CcaName::BBR]);
        let i = db.index_of("");
        let j = db.index_of("cubic");
        assert_eq!((i, j, db.index_of("")), (0, 1, 0));
        db.row_mut(j)[1].violating = true;
        assert!(db.state("cubic").unwrap().protocols[1].violating);
        assert!(db.state("bbr").is_none());
        assert_eq!(db.row(i).len(), 2);
    }
}
