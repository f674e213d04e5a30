//! Pathload PCT/PDT, IMR-avg, IMR-wavelet and the rate adapter.
use opsel::bwe::adapter::{EtaParam, RateAdapter, RateAdapterConfig};
use opsel::bwe::pathload::{self, imr_avg, imr_wavelet, pct, pdt, trend, ImrWorkspace, Trend};
use opsel::bwe::sim::{simulate, Coalescing, CrossKind, CrossTraffic, SendNoise, SimConfig};
use opsel::bwe::PStreamSpec;
use proptest::prelude::*;

#[test]
fn pct_pdt_golden() {
    let up = [1.0, 2.0, 3.0, 4.0, 5.0];
    assert_eq!(pct(&up).unwrap(), 1.0);
    assert_eq!(pdt(&up).unwrap(), 1.0);
    assert_eq!(trend(&up).unwrap(), Trend::Increasing);
    let flat = [0.0, 1.0, 0.0, 1.0, 0.0];
    assert_eq!(pct(&flat).unwrap(), 0.5);
    assert_eq!(pdt(&flat).unwrap(), 0.0);
    assert_eq!(trend(&flat).unwrap(), Trend::NoTrend);
    // PCT high but PDT low ⇒ disagreement ⇒ ambiguous (001 §9.1 footnote).
    let saw = [0.0, 1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 0.0];
    assert_eq!(pct(&saw).unwrap(), 0.75);
    assert_eq!(trend(&saw).unwrap(), Trend::Ambiguous);
    assert!(pct(&[1.0]).is_err());
    assert!(trend(&[1.0, f64::NAN]).is_err());
}

#[test]
fn imr_on_clean_streams() {
    let mut ws = ImrWorkspace::new(320);
    let gs = vec![10_000.0; 320];
    let gr_slow: Vec<f64> = vec![10_300.0; 320];
    for f in [imr_avg, |a: &[f64], b: &[f64], w: &mut ImrWorkspace| {
        imr_wavelet(a, b, 3, w)
    }] {
        assert_eq!(f(&gs, &gr_slow, &mut ws).unwrap(), Trend::Increasing);
        assert_eq!(f(&gs, &gs, &mut ws).unwrap(), Trend::NoTrend);
    }
    assert!(imr_wavelet(&gs[..32], &gr_slow[..32], 3, &mut ws)
        .unwrap_err()
        .to_string()
        .contains("need >= 8"));
    assert!(imr_avg(&gs[..9], &gs[..9], &mut ws).is_err());
    assert!(pathload::pathload(&gs, &gr_slow, &mut ImrWorkspace::new(10)).is_err());
}

#[test]
fn imr_under_coalescing_detects_heavy_overload() {
    // 9 Gbps single-rate over BCT (avail-bw ≈ 7.5 Gbps) with NIC1 coalescing.
    let spec = PStreamSpec::single_rate(9.5e9, 320, 9038);
    let c = SimConfig {
        cross: CrossTraffic::table_3_1(CrossKind::Cbr),
        ..SimConfig::thesis_bct(5)
    };
    let t = simulate(&spec, &c, 0).unwrap();
    let mut ws = ImrWorkspace::new(320);
    assert_eq!(
        imr_avg(&t.send_gap_ns, &t.recv_gap_ns, &mut ws).unwrap(),
        Trend::Increasing
    );
    let quiet = SimConfig {
        cross: CrossTraffic::table_3_1(CrossKind::None),
        sender: SendNoise::None,
        coalescing: Coalescing::None,
        ..c
    };
    let t = simulate(&PStreamSpec::single_rate(5e9, 320, 9038), &quiet, 0).unwrap();
    assert_eq!(
        imr_wavelet(&t.send_gap_ns, &t.recv_gap_ns, 3, &mut ws).unwrap(),
        Trend::NoTrend
    );
}

proptest! {
    #[test]
    fn pct_pdt_are_bounded(v in prop::collection::vec(-1e6f64..1e6, 2..100)) {
        let c = pct(&v).unwrap();
        let d = pdt(&v).unwrap();
        prop_assert!((0.0..=1.0).contains(&c));
        prop_assert!((-1.0 - 1e-12..=1.0 + 1e-12).contains(&d));
    }
}

#[test]
fn adapter_golden_steps() {
    let mut a = RateAdapter::new(RateAdapterConfig::default()).unwrap();
    assert_eq!(a.r_avg_bps(), 100e3);
    // γ = 3: nothing until the third estimate.
    assert_eq!(a.on_estimate(1e9, 1e6).unwrap(), None);
    assert_eq!(a.on_estimate(1e9, 1e6).unwrap(), None);
    // Tabulated τ = 50 ms, η = 1/4: g_up = 3 ms / 12.5 ms = 0.24.
    let r = a.on_estimate(1e9, 1e6).unwrap().unwrap();
    assert!((r - (100e3 + 0.24 * (1e9 - 100e3))).abs() < 1e-3, "{r}");
    // Decrease by η = 1/4 of the gap.
    for _ in 0..2 {
        a.on_estimate(0.0, 1e6).unwrap();
    }
    let r2 = a.on_estimate(0.0, 1e6).unwrap().unwrap();
    assert!((r2 - 0.75 * r).abs() < 1e-3);
    // Loss: −25 %.
    assert!((a.on_loss_recovery() - 0.75 * r2).abs() < 1e-3);
    // Formula reading, (τ, η) = (50 ms, 4): g_up = 3 ms/50 ms, g_down = 1/4.
    let mut f = RateAdapter::new(RateAdapterConfig {
        eta: 4.0,
        param: EtaParam::Formula,
        ..Default::default()
    })
    .unwrap();
    for _ in 0..2 {
        f.on_estimate(1e9, 1e6).unwrap();
    }
    let r = f.on_estimate(1e9, 1e6).unwrap().unwrap();
    assert!((r - (100e3 + 0.06 * (1e9 - 100e3))).abs() < 1e-3);
}

#[test]
fn adapter_converges_and_rejects_bad_config() {
    let mut a = RateAdapter::new(RateAdapterConfig::default()).unwrap();
    for _ in 0..600 {
        a.on_estimate(7e9, 0.66e6).unwrap();
    }
    assert!((a.r_avg_bps() - 7e9).abs() < 1e6, "{}", a.r_avg_bps());
    let bad = |c: RateAdapterConfig| RateAdapter::new(c).is_err();
    assert!(bad(RateAdapterConfig {
        eta: 4.0,
        ..Default::default()
    }));
    assert!(bad(RateAdapterConfig {
        gamma: 0,
        ..Default::default()
    }));
    assert!(bad(RateAdapterConfig {
        tau_ns: f64::NAN,
        ..Default::default()
    }));
    assert!(bad(RateAdapterConfig {
        loss_cut: 1.0,
        ..Default::default()
    }));
    assert!(a.on_estimate(f64::INFINITY, 1.0).is_err());
}
