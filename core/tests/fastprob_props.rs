//! Invariants of the baselines and the prober on arbitrary logs.
use opsel::fastprob::{ArVariant, Baseline, Decision, Denominator, FastProbModel, Prober};
use proptest::prelude::*;

fn sample() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), 0.0..1e10f64, 1e6..2e6f64]
}

fn baseline() -> impl Strategy<Value = Baseline> {
    prop_oneof![
        (
            0.01..0.99f64,
            any::<bool>(),
            proptest::option::of(1usize..40)
        )
            .prop_map(|(theta, max, cap)| {
                Baseline::Closeness {
                    theta,
                    denominator: if max {
                        Denominator::Max
                    } else {
                        Denominator::Min
                    },
                    cap,
                }
            }),
        (any::<bool>(), 0.001..0.5f64, 1usize..40).prop_map(|(ar3, tolerance, cap)| Baseline::Ar {
            variant: if ar3 {
                ArVariant::Ar3
            } else {
                ArVariant::CubicTrend
            },
            tolerance,
            cap,
        }),
        (1usize..10, 1usize..40).prop_map(|(k, stop)| Baseline::LastK { k, stop }),
        (1u64..10_000_000_000).prop_map(|bytes| Baseline::FixedSize { bytes }),
        (1u64..40_000_000_000).prop_map(|duration_ns| Baseline::FixedDuration { duration_ns }),
    ]
}

/// Loaded once: parsing the model for each of proptest's cases dominated the test.
fn model() -> &'static FastProbModel {
    static M: std::sync::OnceLock<FastProbModel> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        FastProbModel::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/fastprob/model_small.json"
        )))
        .unwrap()
    })
}

proptest! {
    #[test]
    fn baselines_consume_a_prefix_and_predict_a_finite_rate(
        b in baseline(),
        s in proptest::collection::vec(sample(), 1..80),
    ) {
        let e = b.run(&s, 1_000_000_000).unwrap();
        prop_assert!(e.samples >= 1 && e.samples <= s.len());
        prop_assert!(e.prediction_bps.is_finite() && e.prediction_bps >= 0.0);
        if let Baseline::Closeness { cap: Some(c), .. } | Baseline::Ar { cap: c, .. } = b {
            prop_assert!(e.samples <= c);
        }
        // Mean-type estimates lie within the consumed samples' range.
        if !matches!(b, Baseline::Ar { .. }) {
            let seen = &s[..e.samples];
            let lo = seen.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = seen.iter().cloned().fold(0.0, f64::max);
            prop_assert!(e.prediction_bps >= lo * (1.0 - 1e-12) && e.prediction_bps <= hi * (1.0 + 1e-12));
        }
    }

    #[test]
    fn the_prober_stops_by_the_cap_and_agrees_with_replay(
        s in proptest::collection::vec(sample(), 15..30),
        thr in 0.0..0.99f64,
    ) {
        let m = model();
        let mut p = Prober::with_threshold(m, thr).unwrap();
        let mut stop = None;
        for (k, x) in s.iter().enumerate() {
            match p.push(*x).unwrap() {
                Decision::Continue => prop_assert!(k + 1 < m.spec().cap),
                Decision::Stop(r) => {
                    prop_assert!(!r.forced && r.p_predictable.unwrap() > thr);
                    stop = Some(r);
                    break;
                }
                Decision::ForcedStop(r) => {
                    prop_assert!(r.forced && r.samples == m.spec().cap);
                    stop = Some(r);
                    break;
                }
            }
        }
        let r = stop.unwrap();
        prop_assert_eq!(r.samples, p.len());
        prop_assert!(r.throughput_bps.is_finite());
        prop_assert_eq!(r.probe_ns, r.samples as u64 * m.spec().interval_ns);
        if thr == m.spec().stop_threshold {
            let e = m.replay(&s).unwrap();
            prop_assert_eq!((e.samples, e.prediction_bps), (r.samples, r.throughput_bps));
        }
        // The fixed-n regressor at the stop length is the prediction.
        prop_assert_eq!(m.predict_fixed(&s[..r.samples]).unwrap(), r.throughput_bps);
    }
}

fn v2_model() -> FastProbModel {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/fastprob/model_v2_small.json"
    );
    FastProbModel::load(std::path::Path::new(p)).unwrap()
}

proptest! {
    /// Ratio inputs make the model scale-free (our extension to 004 §IV): scaling every
    /// sample by a power of two (exact in floating point) scales each fixed-n prediction
    /// and the probe's prediction by the same factor and leaves the stop length alone,
    /// as long as every prefix maximum stays at or above the 1 Mbit/s floor in both
    /// (below it the floor, not the data, sets the scale).
    #[test]
    fn ratio_model_is_scale_free(
        xs in proptest::collection::vec(2e6..1e10f64, 15..20),
        j in -1i32..6,
    ) {
        let m = v2_model();
        let k = 2f64.powi(j);
        let a = xs;
        let b: Vec<f64> = a.iter().map(|x| x * k).collect();
        for n in m.regressor_lengths() {
            if n > a.len() {
                break;
            }
            let (pa, pb) = (m.predict_fixed(&a[..n]).unwrap(), m.predict_fixed(&b[..n]).unwrap());
            prop_assert_eq!(pa * k, pb, "n = {}", n);
        }
        let (ea, eb) = (m.replay(&a).unwrap(), m.replay(&b).unwrap());
        prop_assert_eq!(ea.samples, eb.samples);
        prop_assert_eq!(ea.prediction_bps * k, eb.prediction_bps);
    }
}
