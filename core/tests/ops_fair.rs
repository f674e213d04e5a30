//! Property tests for Jain's index (000 Eq. 2.1).

use opsel::fair::{jain, share_of_fair};
use proptest::prelude::*;

proptest! {
    /// 1/n <= J <= 1 for any non-negative rates.
    #[test]
    fn bounds(rates in prop::collection::vec(0.0f64..1e12, 1..40)) {
        let j = jain(&rates).unwrap();
        let n = rates.len() as f64;
        prop_assert!(j >= 1.0 / n - 1e-12 && j <= 1.0, "J = {j}, n = {n}");
    }

    /// J(c·x) = J(x) for c > 0.
    #[test]
    fn scale_invariant(rates in prop::collection::vec(0.0f64..1e6, 1..20), c in 1e-6f64..1e6) {
        let a = jain(&rates).unwrap();
        let scaled: Vec<f64> = rates.iter().map(|x| x * c).collect();
        let b = jain(&scaled).unwrap();
        prop_assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }

    /// Order of the streams does not matter; equal rates give exactly 1;
    /// one stream taking everything gives exactly 1/n.
    #[test]
    fn symmetric_and_extremes(mut rates in prop::collection::vec(0.0f64..1e6, 2..20), x in 1e-3f64..1e6) {
        let a = jain(&rates).unwrap();
        rates.reverse();
        prop_assert!((a - jain(&rates).unwrap()).abs() < 1e-12);
        let n = rates.len();
        prop_assert_eq!(jain(&vec![x; n]).unwrap(), 1.0);
        let mut one = vec![0.0; n];
        one[0] = x;
        prop_assert!((jain(&one).unwrap() - 1.0 / n as f64).abs() < 1e-15);
    }

    /// Share of fair share is linear in the foreground rate.
    #[test]
    fn share_linear(fg in 0.0f64..1e9, cap in 1.0f64..1e10, n in 1usize..100) {
        let s = share_of_fair(fg, cap, n).unwrap();
        prop_assert!((s - fg * n as f64 / cap).abs() <= 1e-9 * s.max(1.0));
    }
}
