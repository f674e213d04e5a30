//! Property tests for DPS invariants: the utility of 002 Fig 4.3 stays in
//! [0, 1] and is monotone on its ramps; histograms conserve counts; Alg 2
//! statistics are distributions and merge associatively; Alg 4 never
//! signals while fair; the agent is deterministic and total on any
//! feedback.

use opsel::dps::{
    Agent, DpsSpec, Feedback, History, MetricStats, Output, PeriodStats, Qos, BAD, GOOD,
};
use opsel::fair::{FairnessSpec, ViolationDetector};
use proptest::prelude::*;

/// A valid `[A, B, C, D]` with optional unbounded ends, and a bin count.
fn qos() -> impl Strategy<Value = Qos> {
    (
        prop::array::uniform4(-1000.0f64..1000.0),
        any::<bool>(),
        any::<bool>(),
        1usize..=32,
    )
        .prop_map(|(mut v, low_unbounded, high_unbounded, bins)| {
            v.sort_by(f64::total_cmp);
            let [c, a, b, d] = v;
            let (a, c) = if low_unbounded {
                (f64::NEG_INFINITY, f64::NEG_INFINITY)
            } else {
                (a, c)
            };
            let (b, d) = if high_unbounded {
                (f64::INFINITY, f64::INFINITY)
            } else {
                (b, d)
            };
            Qos::new("prop", a, b, c, d, bins).unwrap()
        })
}

fn period(q: &Qos, xs: &[f64]) -> PeriodStats {
    let mut p = PeriodStats::new();
    for &x in xs {
        p.push(q, x);
    }
    p
}

fn stats_of(q: &Qos, periods: &[Vec<f64>]) -> MetricStats {
    let mut s = MetricStats::default();
    for xs in periods {
        s.merge(&period(q, xs), &History::default());
    }
    s
}

fn close(a: &MetricStats, b: &MetricStats) -> bool {
    (a.n() - b.n()).abs() < 1e-9
        && (a.mean() - b.mean()).abs() <= 1e-9 * (1.0 + a.mean().abs())
        && a.dist()
            .iter()
            .zip(b.dist())
            .all(|(x, y)| (x - y).abs() < 1e-9)
}

proptest! {
    #[test]
    fn utility_bounded_and_monotone(q in qos(), xs in prop::collection::vec(-3000.0f64..3000.0, 2..40)) {
        let [a, b, _, _] = q.range();
        let mut xs = xs;
        xs.sort_by(f64::total_cmp);
        for w in xs.windows(2) {
            let (u1, u2) = (q.utility(w[0]), q.utility(w[1]));
            prop_assert!((0.0..=1.0).contains(&u1));
            // Rising up to A, falling from B.
            if w[1] <= a { prop_assert!(u1 <= u2 + 1e-12, "{} {} → {} {}", w[0], w[1], u1, u2); }
            if w[0] >= b { prop_assert!(u1 + 1e-12 >= u2); }
            if w[0] >= a && w[1] <= b { prop_assert_eq!(u1, 1.0); }
        }
        prop_assert_eq!(q.utility(f64::NAN), 0.0);
        prop_assert!((0.0..=1.0).contains(&q.utility(f64::INFINITY)));
    }

    /// The bin-centre utility of a sample's slot is within half a bin of
    /// its exact utility; saturated slots are exact.
    #[test]
    fn slot_utility_tracks_utility(q in qos(), xs in prop::collection::vec(-3000.0f64..3000.0, 1..60)) {
        for x in xs {
            let s = q.slot(x);
            prop_assert!(s < q.slots());
            let (u, us) = (q.utility(x), q.slot_utility(s));
            match s {
                GOOD => prop_assert_eq!(u, 1.0),
                BAD => prop_assert_eq!(u, 0.0),
                _ => prop_assert!((u - us).abs() <= 0.5 / q.bins() as f64 + 1e-9, "x {} u {} slot u {}", x, u, us),
            }
        }
    }

    #[test]
    fn histogram_conserves_counts(q in qos(), xs in prop::collection::vec(prop_oneof![-3000.0f64..3000.0, Just(f64::NAN), Just(f64::INFINITY)], 0..200)) {
        let p = period(&q, &xs);
        let finite = xs.iter().filter(|x| x.is_finite()).count() as u64;
        prop_assert_eq!(p.n(), finite);
        prop_assert_eq!(p.counts().iter().sum::<u64>(), finite);
        prop_assert!(p.counts()[q.slots()..].iter().all(|&c| c == 0));
        let r = p.to_report(&q);
        let back = PeriodStats::from_report(&q, &r).unwrap();
        prop_assert_eq!(back.counts(), p.counts());
    }

    /// Alg 2 keeps D a distribution and M the mean of every value, and
    /// merging is associative: ((A ⊕ B) ⊕ C) = (A ⊕ (B ⊕ C)).
    #[test]
    fn alg2_distribution_and_associativity(
        q in qos(),
        a in prop::collection::vec(-2000.0f64..2000.0, 1..30),
        b in prop::collection::vec(-2000.0f64..2000.0, 1..30),
        c in prop::collection::vec(-2000.0f64..2000.0, 1..30),
    ) {
        let all = stats_of(&q, &[a.clone(), b.clone(), c.clone()]);
        let n = (a.len() + b.len() + c.len()) as f64;
        prop_assert_eq!(all.n(), n);
        let sum: f64 = a.iter().chain(&b).chain(&c).sum();
        prop_assert!((all.mean() - sum / n).abs() < 1e-9 * (1.0 + sum.abs() / n));
        prop_assert!((all.dist().iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let (sa, sb, sc) = (stats_of(&q, &[a]), stats_of(&q, &[b]), stats_of(&q, &[c]));
        let mut left = sa; left.merge_stats(&sb); left.merge_stats(&sc);
        let mut bc = sb; bc.merge_stats(&sc);
        let mut right = sa; right.merge_stats(&bc);
        prop_assert!(close(&left, &right));
        prop_assert!(close(&left, &all));
        let u = all.expected_utility(&q);
        prop_assert!((0.0..=1.0 + 1e-12).contains(&u));
    }

    /// With decay λ < 1 the stored weight stays below N_max / (1 − λ)
    /// (the thesis's unbounded N is the flaw this fixes).
    #[test]
    fn decay_bounds_the_weight(q in qos(), decay in 0.05f64..0.95, periods in 1usize..200) {
        let h = History { decay, max_weight: None };
        let mut s = MetricStats::default();
        let p = period(&q, &[1.0; 10]);
        for _ in 0..periods { s.merge(&p, &h); }
        prop_assert!(s.n() <= 10.0 / (1.0 - decay) + 1e-9);
        prop_assert!((s.dist().iter().sum::<f64>() - 1.0).abs() < 1e-9);
    }

    /// Alg 4: fair samples never signal; counters stay within bounds.
    #[test]
    fn alg4_invariants(fs in prop::collection::vec(0.5f64..1.0, 1..300), v in 0u32..6, d in 0u32..6) {
        let spec = FairnessSpec { f_thresh: 0.8, v_thresh: v, d_thresh: d };
        let mut det = ViolationDetector::new(spec).unwrap();
        let mut fair = ViolationDetector::new(spec).unwrap();
        for f in fs {
            det.update(f);
            let (vc, dc) = det.counters();
            prop_assert!(vc <= v && dc <= d, "counters ({}, {}) past thresholds ({}, {})", vc, dc, v, d);
            prop_assert!(!fair.update(0.8 + (f - 0.5) * 0.4));
        }
    }

    /// The agent is total on any finite feedback and bit-for-bit
    /// deterministic for a seed.
    #[test]
    fn agent_deterministic(seed in any::<u64>(), p in 0.0f64..=1.0, samples in prop::collection::vec((0.0f64..1000.0, 0.0f64..20.0), 1..400)) {
        let mut spec = DpsSpec::table_5_2(&["cubic", "bbr", "reno"], p);
        spec.seed = seed;
        spec.guard.ms = 2000;
        spec.selection_period_ms = 20_000;
        spec.random_period_ms = 10_000;
        let run = || {
            let mut a = Agent::new(&spec).unwrap();
            a.start(0).unwrap();
            let mut outs: Vec<Output> = Vec::new();
            for (t, (rtt, tput)) in samples.iter().enumerate() {
                let now = (t as u64 + 1) * 1_000_000_000;
                a.handle_feedback(now, &Feedback::sender(now, *rtt, *tput)).unwrap();
                outs.extend(std::iter::from_fn(|| a.poll()));
            }
            (outs, a.stats())
        };
        let (o1, s1) = run();
        let (o2, s2) = run();
        prop_assert_eq!(&o1, &o2);
        prop_assert_eq!(s1, s2);
        prop_assert!(s1.periods <= s1.cycles);
        prop_assert!(s1.satisfied_periods <= s1.periods);
    }

    /// Any spec that validates survives a JSON round trip unchanged.
    #[test]
    fn spec_json_round_trip(p1 in 0.0f64..=1.0, p2 in 0.0f64..=1.0, thres in 0.0f64..0.99, bins in 1usize..=32, seed in any::<u64>()) {
        let mut s = DpsSpec::table_5_3(&["cubic", "bbr"]);
        s.exploration.p_learning = p1;
        s.exploration.p_learnt = p2;
        s.thres_stat = thres;
        s.bins = bins;
        s.seed = seed;
        s.validate().unwrap();
        prop_assert_eq!(DpsSpec::from_json(&s.to_json().unwrap()).unwrap(), s);
    }
}
