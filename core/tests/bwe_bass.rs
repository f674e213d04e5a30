//! BASS, ABest, single-rate decision and delayed-ACK normalisation.
use opsel::bwe::bass::{self, spike_exists, BassConfig, BassVariant, BassWorkspace, HeadSegment};
use opsel::bwe::delack::{normalize, AckedPacket, DelAckVariant};
use opsel::bwe::{
    abest, estimate_multi_rate, rate_exceeds_avail_bw, AbestConfig, AbestVariant,
    EstimatorWorkspace, PStreamSpec,
};
use proptest::prelude::*;

fn cfg() -> BassConfig {
    BassConfig::thesis()
}

#[test]
fn single_pass_golden_events() {
    // Hand-traced Fig 5.5 on spike-dips: head, event [2,5], event [6,9] closed at the end.
    let mut gs = vec![10_000.0; 10];
    let mut gr = vec![
        10_000.0, 10_000.0, 50_000.0, 2_000.0, 2_000.0, 2_000.0, 44_000.0, 2_000.0, 2_000.0,
        2_000.0,
    ];
    let mut ws = BassWorkspace::new(64);
    let rep = bass::single_pass(&mut gs, &mut gr, &cfg(), &mut ws).unwrap();
    assert_eq!(ws.last_events(), &[(0, 1), (2, 5), (6, 9)]);
    assert_eq!(
        rep.complete_span,
        Some((2, 5)),
        "[6, 9] is closed by the stream end, not complete"
    );
    assert_eq!(&gr[2..6], &[14_000.0; 4]);
    assert_eq!(&gr[6..10], &[12_500.0; 4]);
    assert_eq!(&gs[..], &[10_000.0; 10]);
}

#[test]
fn literal_variant_and_head_option_differ_where_documented() {
    let base = vec![
        10_000.0, 12_000.0, 50_000.0, 2_000.0, 2_000.0, 2_000.0, 44_000.0, 2_000.0, 2_000.0,
        2_000.0,
    ];
    let mut ws = BassWorkspace::new(64);
    // Head Keep: the segment before the first spike stays raw.
    let mut c = cfg();
    c.head = HeadSegment::Keep;
    let (mut gs, mut gr) = (vec![10_000.0; 10], base.clone());
    bass::single_pass(&mut gs, &mut gr, &c, &mut ws).unwrap();
    assert_eq!(&gr[..2], &[10_000.0, 12_000.0]);
    // Literal: line 39 value comparison with back() = 2000 closes the last event at 9.
    let mut c = cfg();
    c.variant = BassVariant::Literal;
    let (mut gs, mut gr) = (vec![10_000.0; 10], base.clone());
    bass::single_pass(&mut gs, &mut gr, &c, &mut ws).unwrap();
    assert_eq!(&gr[..2], &[11_000.0, 11_000.0]);
    assert_eq!(&gr[6..10], &[12_500.0; 4]);
    // Tail Keep: the event [6, 9] closed only by the stream end stays raw.
    let mut c = cfg();
    c.tail = opsel::bwe::TailSegment::Keep;
    let (mut gs, mut gr) = (vec![10_000.0; 10], base.clone());
    bass::single_pass(&mut gs, &mut gr, &c, &mut ws).unwrap();
    assert_eq!(&gr[6..10], &base[6..10]);
    assert_eq!(&gr[2..6], &[14_000.0; 4]);
    // A trailing spike without dip stays raw in both variants.
    let mut gr = vec![10_000.0, 10_000.0, 10_000.0, 50_000.0];
    let mut gs = vec![10_000.0; 4];
    bass::single_pass(&mut gs, &mut gr, &cfg(), &mut ws).unwrap();
    assert_eq!(gr[3], 50_000.0);
}

#[test]
fn multi_pass_removes_coalescing_and_recovers_rate() {
    // Noise-free congestion from packet 32 on (Fig 1.1) hidden under 120 µs coalescing
    // batches: multi-pass BASS + AVG_WINDOW must still find the 2nd rate.
    let spec = PStreamSpec::thesis_default(7e9);
    let n = spec.len();
    let mut gs = vec![0.0; n];
    spec.send_gaps_into(&mut gs).unwrap();
    // True arrival times: at the send rate until 31, then at 6.9 Gbps.
    let out_gap = 9038.0 * 8.0 / 6.9e9 * 1e9;
    let mut arr = vec![0.0; n];
    let mut t = 0.0;
    for i in 0..n {
        t += if i >= 32 { gs[i].max(out_gap) } else { gs[i] };
        arr[i] = t;
    }
    // Timer-mode coalescing with 120 µs, 0.5 µs per packet.
    let mut stamp = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let t_int = arr[i] + 120_000.0;
        let mut j = i;
        while j < n && arr[j] <= t_int {
            stamp[j] = t_int + (j - i) as f64 * 500.0;
            j += 1;
        }
        i = j;
    }
    let mut gr = vec![0.0; n];
    gr[0] = gs[0];
    for i in 1..n {
        gr[i] = stamp[i] - stamp[i - 1];
    }
    // Raw: over-estimates (no terminal excursion) — the spike-dips pattern of 001 §5.1.
    let raw = abest(&gs, &gr, &spec, &AbestConfig::default()).unwrap();
    let mut ws = EstimatorWorkspace::new(n);
    let est =
        estimate_multi_rate(&gs, &gr, &spec, &cfg(), &AbestConfig::default(), &mut ws).unwrap();
    let r2 = spec.rate_bps(1).unwrap();
    assert!(
        est.abest_bps <= r2 + 1.0,
        "BASS estimate {} > 2nd rate {}",
        est.abest_bps,
        r2
    );
    assert!(est.abest_bps >= spec.rate_bps(0).unwrap() - 1.0);
    assert!(raw.abest_bps >= est.abest_bps);
}

#[test]
fn abest_golden_fig_1_1() {
    // Fig 1.1: g_r > g_s consistently from the 33rd packet ⇒ ABest = rate of packet 32.
    let spec = PStreamSpec::thesis_default(7e9);
    let mut gs = vec![0.0; 64];
    spec.send_gaps_into(&mut gs).unwrap();
    let gr: Vec<f64> = gs
        .iter()
        .enumerate()
        .map(|(i, g)| if i >= 32 { g + 500.0 } else { *g })
        .collect();
    let a = abest(&gs, &gr, &spec, &AbestConfig::default()).unwrap();
    assert_eq!(a.excursion_start, Some(32));
    assert!((a.abest_bps - spec.rate_bps(1).unwrap()).abs() < 1e-6);
    // No congestion ⇒ highest rate; everything congested ⇒ lowest rate, below_range.
    let a = abest(&gs, &gs, &spec, &AbestConfig::default()).unwrap();
    assert!(a.above_range && (a.abest_bps - spec.rate_bps(3).unwrap()).abs() < 1e-6);
    let all: Vec<f64> = gs.iter().map(|g| g + 1000.0).collect();
    let a = abest(&gs, &all, &spec, &AbestConfig::default()).unwrap();
    assert!(a.below_range && (a.abest_bps - spec.rate_bps(0).unwrap()).abs() < 1e-6);
    // ε matters: +50 ns excess is noise at ε = 100 ns.
    let small: Vec<f64> = gs
        .iter()
        .enumerate()
        .map(|(i, g)| if i >= 32 { g + 50.0 } else { *g })
        .collect();
    assert!(
        abest(&gs, &small, &spec, &AbestConfig::default())
            .unwrap()
            .above_range
    );
}

#[test]
fn abest_literal_reading_is_kept_for_comparison() {
    // Alg. 1 as printed on a flat, uncongested stream marks everything with R[0]
    // (the garbled inner loop runs to the end) — the opposite of the corrected answer.
    let spec = PStreamSpec::thesis_default(7e9);
    let mut gs = vec![0.0; 64];
    spec.send_gaps_into(&mut gs).unwrap();
    let lit = AbestConfig {
        variant: AbestVariant::Literal,
        ..AbestConfig::default()
    };
    let a = abest(&gs, &gs, &spec, &lit).unwrap();
    assert!(
        (a.abest_bps - spec.rate_bps(0).unwrap()).abs() < 1e-3,
        "{}",
        a.abest_bps
    );
}

#[test]
fn single_rate_decision() {
    let gs = vec![10_000.0; 8];
    let gr_slow = vec![10_500.0; 8];
    assert!(rate_exceeds_avail_bw(&gs, &gr_slow, None, 0.0).unwrap());
    assert!(!rate_exceeds_avail_bw(&gs, &gs, None, 0.0).unwrap());
    assert!(rate_exceeds_avail_bw(&gs, &gr_slow, Some((3, 8)), 0.0).is_err());
    assert!(rate_exceeds_avail_bw(&gs, &gr_slow[..3], None, 0.0).is_err());
    // 5 % slower exit: over the rate at tolerance 2 %, not at 10 %.
    assert!(rate_exceeds_avail_bw(&gs, &gr_slow, None, 0.02).unwrap());
    assert!(!rate_exceeds_avail_bw(&gs, &gr_slow, None, 0.10).unwrap());
    assert!(rate_exceeds_avail_bw(&gs, &gr_slow, None, f64::NAN).is_err());
}

#[test]
fn delayed_ack_normalisation_golden() {
    let p = |seq, rx| AckedPacket {
        seqno: seq,
        send_gap_ns: 10.0,
        ack_rx_ns: rx,
    };
    let pkts = [
        p(1, None),
        p(2, Some(130)),
        p(3, None),
        p(4, Some(150)),
        p(5, None),
    ];
    let (mut gs, mut gr) = ([0.0; 5], [0.0; 5]);
    let n = normalize(&pkts, 100, 0, DelAckVariant::Corrected, &mut gs, &mut gr).unwrap();
    assert_eq!(n, 4);
    assert_eq!(&gs[..4], &[10.0; 4]);
    assert_eq!(&gr[..4], &[15.0, 15.0, 10.0, 10.0]);
    // Literal Alg. 6: seqno differences, one observation per ACK, send gaps accumulated.
    let n = normalize(&pkts, 100, 0, DelAckVariant::Literal, &mut gs, &mut gr).unwrap();
    assert_eq!(n, 2);
    assert_eq!(&gs[..2], &[20.0, 20.0]);
    assert_eq!(&gr[..2], &[2.0, 2.0]);
    // Out-of-order stamps are rejected with the values.
    let bad = [p(1, Some(90))];
    let e = normalize(&bad, 100, 0, DelAckVariant::Corrected, &mut gs, &mut gr).unwrap_err();
    assert!(e.to_string().contains("90"));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut ws = BassWorkspace::new(4);
    let (mut a, mut b) = (vec![1.0; 5], vec![1.0; 5]);
    assert!(bass::single_pass(&mut a, &mut b, &cfg(), &mut ws).is_err());
    let (mut a, mut b) = (vec![1.0; 3], vec![f64::NAN; 3]);
    assert!(bass::multi_pass(&mut a, &mut b, &cfg(), &mut ws).is_err());
    let (mut a, mut b) = (vec![1.0; 3], vec![1.0; 2]);
    assert!(bass::multi_pass(&mut a, &mut b, &cfg(), &mut ws).is_err());
    let (mut a, mut b) = (vec![], vec![]);
    assert!(bass::multi_pass(&mut a, &mut b, &cfg(), &mut ws).is_ok());
    let mut c = cfg();
    c.avg_window = 0;
    let (mut a, mut b) = (vec![1.0; 3], vec![1.0; 3]);
    assert!(bass::multi_pass(&mut a, &mut b, &c, &mut ws).is_err());
    assert!(BassConfig::thesis_relative(0.0).is_err());
}

#[test]
fn relative_thresholds_scale_with_the_send_gap() {
    // Same pattern at 10x longer gaps: absolute thresholds see a spike, relative ones
    // tuned at a 10 µs reference scale with the gap.
    let rel = BassConfig::thesis_relative(10_000.0).unwrap();
    let mut ws = BassWorkspace::new(16);
    let mk = |k: f64| {
        (
            vec![10_000.0 * k; 6],
            vec![
                10_000.0 * k,
                10_000.0 * k,
                30_000.0 * k,
                1_000.0 * k,
                1_000.0 * k,
                1_000.0 * k,
            ],
        )
    };
    let (mut gs, mut gr) = mk(1.0);
    bass::single_pass(&mut gs, &mut gr, &rel, &mut ws).unwrap();
    assert_eq!(
        ws.last_events().len(),
        0,
        "1x: 20 µs jump is not a spike under up=20 µs"
    );
    let (mut gs, mut gr) = mk(3.0);
    bass::single_pass(&mut gs, &mut gr, &cfg(), &mut ws).unwrap();
    assert!(!ws.last_events().is_empty());
    let (mut gs, mut gr) = mk(3.0);
    bass::single_pass(&mut gs, &mut gr, &rel, &mut ws).unwrap();
    assert_eq!(
        ws.last_events().len(),
        0,
        "relative thresholds scale with the 3x gap"
    );
}

fn gaps() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    (2usize..200).prop_flat_map(|n| {
        (
            prop::collection::vec(1_000.0f64..20_000.0, n),
            prop::collection::vec(prop_oneof![3 => 0.0f64..3_000.0, 2 => 5_000.0f64..15_000.0, 1 => 20_000.0f64..300_000.0], n),
        )
    })
}

proptest! {
    #[test]
    fn averaging_preserves_sums_per_event((gs0, gr0) in gaps(), pass in 0usize..3, literal in any::<bool>(), keep in any::<bool>()) {
        let mut c = cfg();
        c.passes[0] = c.passes[pass];
        if literal { c.variant = BassVariant::Literal; }
        if keep { c.head = HeadSegment::Keep; }
        let (mut gs, mut gr) = (gs0.clone(), gr0.clone());
        let mut ws = BassWorkspace::new(256);
        bass::single_pass(&mut gs, &mut gr, &c, &mut ws).unwrap();
        let mut covered = vec![false; gs.len()];
        for &(b, e) in ws.last_events() {
            prop_assert!(b < e && e < gs.len());
            let (s0, s1): (f64, f64) = (gs0[b..=e].iter().sum(), gs[b..=e].iter().sum());
            let (r0, r1): (f64, f64) = (gr0[b..=e].iter().sum(), gr[b..=e].iter().sum());
            prop_assert!((s0 - s1).abs() <= 1e-9 * s0.abs().max(1.0));
            prop_assert!((r0 - r1).abs() <= 1e-9 * r0.abs().max(1.0));
            for c in &mut covered[b..=e] { prop_assert!(!*c); *c = true; }
        }
        for i in 0..gs.len() {
            if !covered[i] { prop_assert_eq!(gs[i], gs0[i]); prop_assert_eq!(gr[i], gr0[i]); }
        }
    }

    #[test]
    fn multi_pass_preserves_totals_and_terminates((gs0, gr0) in gaps()) {
        let mut c = cfg();
        c.avg_window = 1;
        let (mut gs, mut gr) = (gs0.clone(), gr0.clone());
        let mut ws = BassWorkspace::new(256);
        let rep = bass::multi_pass(&mut gs, &mut gr, &c, &mut ws).unwrap();
        prop_assert!(rep.passes <= 2 + c.max_repeats);
        let (a, b): (f64, f64) = (gs0.iter().sum(), gs.iter().sum());
        let (x, y): (f64, f64) = (gr0.iter().sum(), gr.iter().sum());
        prop_assert!((a - b).abs() <= 1e-9 * a);
        prop_assert!((x - y).abs() <= 1e-9 * x.max(1.0));
        // Pass 1 leaves no spike that it could have closed followed by a dip... and the
        // repeat loop stops as soon as no 2 µs spike is left (or at the cap).
        // Stopping early means no 2 µs spike is left or the last pass was a no-op; a
        // further pass then changes nothing.
        if rep.passes < 2 + c.max_repeats && spike_exists(&gr, 2_000.0) {
            let before = gr.clone();
            bass::single_pass(&mut gs.clone(), &mut gr, &BassConfig { passes: [c.passes[2]; 3], ..c }, &mut ws).unwrap();
            for (a, b) in before.iter().zip(&gr) { prop_assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0)); }
        }
    }

    #[test]
    fn abest_is_one_of_the_rates((gs0, gr0) in gaps()) {
        let n = gs0.len();
        let spec = PStreamSpec { r_avg_bps: 5e9, n_rates: 1, packets_per_rate: n, spread: 1.0, packet_bytes: 9038 };
        let mut ws = EstimatorWorkspace::new(n);
        let a = estimate_multi_rate(&gs0, &gr0, &spec, &cfg(), &AbestConfig::default(), &mut ws).unwrap();
        prop_assert!((a.abest_bps - 5e9).abs() < 1.0);
    }
}
