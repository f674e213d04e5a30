use super::*;
use proptest::prelude::*;

/// Textbook full-matrix DTW with the same band rule, as an oracle.
fn naive(a: &[f64], b: &[f64], r: Option<usize>, cost: Cost) -> f64 {
    let (n, m) = (a.len(), b.len());
    let r = r.unwrap_or(usize::MAX / 4);
    let below = r + n.saturating_sub(m);
    let above = r + m.saturating_sub(n);
    let mut d = vec![vec![f64::INFINITY; m + 1]; n + 1];
    d[0][0] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            let (ii, jj) = (i - 1, j - 1);
            if jj + below < ii || jj > ii + above {
                continue;
            }
            let c = cost.local(a[ii], b[jj]);
            d[i][j] = c + d[i - 1][j - 1].min(d[i - 1][j]).min(d[i][j - 1]);
        }
    }
    cost.finish(d[n][m])
}

#[test]
fn known_values() {
    // Identical series: 0. Shifted step: warping absorbs the shift.
    let a = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(distance(&a, &a, &DtwParams::default()).unwrap(), 0.0);
    let x = [0.0, 0.0, 1.0, 1.0, 1.0];
    let y = [0.0, 1.0, 1.0, 1.0, 1.0];
    let p = DtwParams {
        radius: Some(1),
        cost: Cost::Abs,
    };
    assert_eq!(distance(&x, &y, &p).unwrap(), 0.0);
    // Radius 0 is the Euclidean/Manhattan alignment.
    let p0 = DtwParams {
        radius: Some(0),
        cost: Cost::Abs,
    };
    assert_eq!(distance(&x, &y, &p0).unwrap(), 1.0);
    let p0sq = DtwParams {
        radius: Some(0),
        cost: Cost::Squared,
    };
    assert_eq!(distance(&[0.0, 0.0], &[3.0, 4.0], &p0sq).unwrap(), 5.0);
}

#[test]
fn errors_name_the_problem() {
    let p = DtwParams::default();
    assert!(distance(&[], &[1.0], &p)
        .unwrap_err()
        .to_string()
        .contains("non-empty"));
    let e = distance(&[1.0, f64::NAN], &[1.0], &p).unwrap_err();
    assert!(
        e.to_string().contains("NaN") && e.to_string().contains("index 1"),
        "{e}"
    );
    assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
}

#[test]
fn early_abandon_is_conservative() {
    let a = [0.0, 10.0, 0.0, 10.0];
    let b = [10.0, 0.0, 10.0, 0.0];
    let mut ws = Workspace::default();
    let full = accumulated(&a, &b, 1, Cost::Abs, f64::INFINITY, None, &mut ws);
    assert_eq!(accumulated(&a, &b, 1, Cost::Abs, full, None, &mut ws), full);
    assert_eq!(
        accumulated(&a, &b, 1, Cost::Abs, full * 0.4, None, &mut ws),
        f64::INFINITY
    );
}

fn series(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-100.0f64..100.0, len)
}

proptest! {
    #[test]
    fn matches_naive_oracle(a in series(1..30), b in series(1..30), r in prop::option::of(0usize..12), sq in any::<bool>()) {
        let cost = if sq { Cost::Squared } else { Cost::Abs };
        let got = distance(&a, &b, &DtwParams { radius: r, cost }).unwrap();
        let want = naive(&a, &b, r, cost);
        prop_assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{got} vs {want}");
    }

    #[test]
    fn symmetric_and_nonnegative(a in series(1..25), b in series(1..25), r in 0usize..12) {
        let p = DtwParams { radius: Some(r), cost: Cost::Abs };
        let ab = distance(&a, &b, &p).unwrap();
        let ba = distance(&b, &a, &p).unwrap();
        prop_assert!(ab >= 0.0);
        prop_assert!((ab - ba).abs() <= 1e-9 * ab.max(1.0));
    }

    #[test]
    fn lower_bounds_hold(pair in (1usize..40).prop_flat_map(|n| (series(n..n + 1), series(n..n + 1))), r in 0usize..12, sq in any::<bool>()) {
        let (a, b) = pair;
        let cost = if sq { Cost::Squared } else { Cost::Abs };
        let n = a.len();
        let mut ws = Workspace::default();
        let acc = accumulated(&a, &b, r, cost, f64::INFINITY, None, &mut ws);
        let (mut u, mut l) = (vec![0.0; n], vec![0.0; n]);
        envelope(&b, r, &mut u, &mut l);
        let mut cb = vec![0.0; n + 1];
        let lbk = lb_keogh(&a, &u, &l, cost, f64::INFINITY, Some(&mut cb));
        let tol = 1e-9 * acc.max(1.0);
        prop_assert!(lb_kim(&a, &b, cost) <= acc + tol);
        prop_assert!(lbk <= acc + tol, "keogh {lbk} > dtw {acc}");
        for v in [1, 2, 5, 10, 40] {
            let lbe = lb_enhanced(&a, &b, r, v, &u, &l, cost, f64::INFINITY);
            prop_assert!(lbe <= acc + tol, "enhanced^{v} {lbe} > dtw {acc}");
        }
        prop_assert!((cb[0] - lbk).abs() <= tol);
        // Cumulative-bound abandoning never cuts a path at or below the cut-off.
        let again = accumulated(&a, &b, r, cost, acc * (1.0 + 1e-12) + 1e-12, Some(&cb), &mut ws);
        prop_assert_eq!(again, acc);
    }
}
