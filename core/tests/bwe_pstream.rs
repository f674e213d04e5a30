//! P-stream generator: golden rates from 001 §4.6.2 and schedule invariants.
use opsel::bwe::PStreamSpec;
use proptest::prelude::*;

#[test]
fn golden_rates_7gbps() {
    // 001 §4.6.2 example p-stream; notes §1.3: 5.746 / 6.608 / 7.599 / 8.738 Gbps.
    let spec = PStreamSpec::thesis_default(7e9);
    let mut r = [0.0; 4];
    spec.rates_into(&mut r).unwrap();
    let want = [5.746e9, 6.608e9, 7.599e9, 8.738e9];
    // The note rounds to the Mbps (6.6075 → 6.608), so allow 0.6 Mbps.
    for (got, want) in r.iter().zip(want) {
        assert!((got - want).abs() < 0.6e6, "rate {got} vs {want}");
    }
    // Harmonic mean equals R_avg.
    let hm = 4.0 / r.iter().map(|x| 1.0 / x).sum::<f64>();
    assert!((hm - 7e9).abs() < 1.0);
    assert_eq!(spec.len(), 64);
}

#[test]
fn range_to_spread() {
    let s = PStreamSpec::with_range(7e9, 4, 16, 0.5, 9038).unwrap();
    assert!((s.spread - 1.5f64.powf(1.0 / 3.0)).abs() < 1e-12);
    assert!((s.range() - 0.5).abs() < 1e-12);
    let s5 = PStreamSpec::with_range(7e9, 5, 64, 0.3, 9038).unwrap();
    assert!((s5.spread - 1.0678).abs() < 1e-4, "{}", s5.spread);
}

#[test]
fn schedule_golden_first_gaps() {
    let spec = PStreamSpec::thesis_default(7e9);
    let mut t = [0u64; 64];
    spec.schedule_ns_into(&mut t).unwrap();
    assert_eq!(t[0], 0);
    // Gap at 5.746 Gbps for 9038 B = 12 583 ns.
    let g1 = 9038.0 * 8.0 / spec.rate_bps(0).unwrap() * 1e9;
    assert!((g1 - 12583.0).abs() < 2.0, "{g1}");
    assert_eq!(t[1], g1.round() as u64);
    // Last packet at sum of gaps 1..63.
    let mut gaps = [0.0; 64];
    spec.send_gaps_into(&mut gaps).unwrap();
    let total: f64 = gaps[1..].iter().sum();
    assert_eq!(t[63], total.round() as u64);
    assert!((gaps.iter().sum::<f64>() - spec.duration_ns()).abs() < 1e-6);
}

#[test]
fn bad_specs_are_rejected_with_the_value() {
    let mut s = PStreamSpec::thesis_default(f64::NAN);
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("NaN"), "{e}");
    s.r_avg_bps = 1e9;
    s.spread = 0.5;
    assert!(s.validate().unwrap_err().to_string().contains("0.5"));
    assert!(PStreamSpec::with_range(1e9, 0, 16, 0.5, 9000).is_err());
    let mut buf = [0.0; 3];
    assert!(PStreamSpec::thesis_default(1e9)
        .send_gaps_into(&mut buf)
        .is_err());
}

proptest! {
    #[test]
    fn schedule_is_monotone_and_average_rate_holds(
        r_avg in 1e5f64..1e11, n_r in 1usize..9, n_p in 1usize..40, range in 0.0f64..1.0
    ) {
        let spec = PStreamSpec::with_range(r_avg, n_r, n_p, range, 1500).unwrap();
        let mut t = vec![0u64; spec.len()];
        spec.schedule_ns_into(&mut t).unwrap();
        prop_assert!(t.windows(2).all(|w| w[0] <= w[1]));
        let mut g = vec![0.0; spec.len()];
        spec.send_gaps_into(&mut g).unwrap();
        // bytes / duration == R_avg (harmonic-mean definition, notes §1.3)
        let rate = spec.len() as f64 * 1500.0 * 8.0 * 1e9 / g.iter().sum::<f64>();
        prop_assert!((rate - r_avg).abs() / r_avg < 1e-9);
        // rates increase by the spread
        prop_assert!(g.windows(2).all(|w| w[1] <= w[0] * (1.0 + 1e-12)));
    }
}
