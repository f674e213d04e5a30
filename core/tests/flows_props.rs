//! Property tests of the α identifier's invariants (003 §3.5–3.6).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use opsel::flows::aging::evaluate;
use opsel::flows::export::{encode_ipfix, encode_v9, Decoder};
use opsel::flows::interval::{merge_into, union_length};
use opsel::flows::{aggregate, is_alpha_report, AlphaSpec, FlowRecord};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;
const DAY: u64 = 86_400;

fn arb_interval() -> impl Strategy<Value = (u64, u64)> {
    (0u64..10_000, 0u64..500).prop_map(|(s, l)| (s, s + l))
}

prop_compose! {
    /// Records over 40 days between a few /24s, some of them α.
    fn arb_record()(
        src in 0u8..6, host in 0u8..4, dst in 0u8..3,
        sport in 1000u16..1010, day in 0u64..40, off in 0u64..80_000, dur in 0u64..60,
        raw in prop_oneof![1u64..5_000, 900_000u64..3_000_000], n in prop_oneof![Just(1000u32), Just(100u32)]
    ) -> FlowRecord {
        FlowRecord {
            src_addr: IpAddr::V4(Ipv4Addr::new(10, src, 0, host)),
            dst_addr: IpAddr::V4(Ipv4Addr::new(10, 100 + dst, 0, 1)),
            src_port: sport,
            dst_port: 2811,
            proto: 6,
            bytes: raw,
            packets: raw / 1400 + 1,
            first_ns: (day * DAY + off) * S,
            last_ns: (day * DAY + off + dur) * S,
            sampling_interval: n,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn union_is_bounded_by_sum_and_max(mut v in proptest::collection::vec(arb_interval(), 0..40)) {
        let sum: u64 = v.iter().map(|(s, e)| e - s).sum();
        let max = v.iter().map(|(s, e)| e - s).max().unwrap_or(0);
        let span = match (v.iter().map(|x| x.0).min(), v.iter().map(|x| x.1).max()) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        };
        let u = union_length(&mut v);
        prop_assert!(u <= sum && u >= max && u <= span);
        let mut m = Vec::new();
        merge_into(&mut v, &mut m);
        prop_assert_eq!(m.iter().map(|(s, e)| e - s).sum::<u64>(), u);
        prop_assert!(m.windows(2).all(|w| w[0].1 < w[1].0));
    }

    #[test]
    fn union_ignores_order(v in proptest::collection::vec(arb_interval(), 0..30), rot in 0usize..30) {
        let mut a = v.clone();
        let mut b = v;
        if !b.is_empty() { let k = rot % b.len(); b.rotate_left(k); b.reverse(); }
        prop_assert_eq!(union_length(&mut a), union_length(&mut b));
    }

    #[test]
    fn aggregation_conserves_alpha_bytes(recs in proptest::collection::vec(arb_record(), 0..120)) {
        for len in [24u8, 32] {
            let spec = AlphaSpec { prefix_len_v4: len, ..AlphaSpec::default() };
            let days = aggregate(&spec, &recs).unwrap();
            let alpha: u64 = recs.iter().filter(|r| is_alpha_report(r, &spec))
                .map(|r| r.est_bytes(r.sampling_interval)).sum();
            let got: u64 = days.iter().map(|d| d.alpha_bytes()).sum();
            prop_assert_eq!(got, alpha);
            let all: u64 = recs.iter().map(|r| r.est_bytes(r.sampling_interval)).sum();
            prop_assert_eq!(days.iter().map(|d| d.est_bytes).sum::<u64>(), all);
            let reports: u64 = days.iter().flat_map(|d| &d.prefix_flows).map(|p| u64::from(p.alpha_reports)).sum();
            prop_assert_eq!(reports, days.iter().map(|d| d.alpha_reports).sum::<u64>());
            for d in &days {
                for p in &d.prefix_flows {
                    // α-time is within the day and at most the reports' summed durations.
                    prop_assert!(p.alpha_time_ns <= DAY * S);
                    prop_assert!(p.alpha_time_ns <= u64::from(p.alpha_reports) * 60 * S);
                }
            }
        }
    }

    #[test]
    fn coarser_prefixes_merge_ids(recs in proptest::collection::vec(arb_record(), 0..120)) {
        let d24 = aggregate(&AlphaSpec::default(), &recs).unwrap();
        let d32 = aggregate(&AlphaSpec { prefix_len_v4: 32, ..AlphaSpec::default() }, &recs).unwrap();
        for (a, b) in d24.iter().zip(&d32) {
            prop_assert!(a.prefix_flows.len() <= b.prefix_flows.len());
            // Union of a /24 flow covers each of its /32 flows' α-time.
            prop_assert!(a.alpha_time_ns() <= b.alpha_time_ns());
        }
    }

    #[test]
    fn longer_aging_never_lowers_effectiveness_or_shrinks_the_filter(
        recs in proptest::collection::vec(arb_record(), 0..150)
    ) {
        let days = aggregate(&AlphaSpec::default(), &recs).unwrap();
        let mut prev: Option<(f64, Vec<u32>)> = None;
        for a in [1u32, 3, 7, 14, 30, 214] {
            let ev = evaluate(&days, a).unwrap();
            prop_assert!((0.0..=1.0).contains(&ev.effectiveness));
            let sizes: Vec<u32> = ev.per_day.iter().map(|d| d.filter_rules).collect();
            if let Some((pe, ps)) = &prev {
                prop_assert!(ev.effectiveness >= *pe - 1e-12);
                prop_assert!(sizes.iter().zip(ps).all(|(x, y)| x >= y));
            }
            prev = Some((ev.effectiveness, sizes));
        }
    }

    #[test]
    fn export_round_trips(recs in proptest::collection::vec(arb_record(), 1..40), n in 1u32..5000) {
        let from: SocketAddr = "127.0.0.1:1".parse().unwrap();
        // Millisecond export resolution; times within a v9 router's uptime.
        let recs: Vec<FlowRecord> = recs.into_iter().map(|mut r| {
            r.first_ns = r.first_ns / 1_000_000 * 1_000_000 + 1_600_000_000 * S;
            r.last_ns = r.last_ns / 1_000_000 * 1_000_000 + 1_600_000_000 * S;
            r.sampling_interval = n;
            r
        }).collect();
        let export_s = 1_600_000_000 + 41 * DAY as u32;
        let mut p = Vec::new();
        encode_ipfix(&recs, export_s, 5, 1, true, Some(n), &mut p).unwrap();
        let mut got = Vec::new();
        Decoder::new().decode(from, &p, |r| got.push(*r)).unwrap();
        prop_assert_eq!(&got, &recs);
        encode_v9(&recs, export_s, 4_000_000_000, 5, 1, true, Some(n), &mut p).unwrap();
        got.clear();
        Decoder::new().decode(from, &p, |r| got.push(*r)).unwrap();
        prop_assert_eq!(&got, &recs);
    }

    #[test]
    fn decoder_never_panics_on_bytes(b in proptest::collection::vec(any::<u8>(), 0..300), v in 0usize..3) {
        let mut b = b;
        if b.len() >= 2 { b[0] = 0; b[1] = [5u8, 9, 10][v]; }
        let _ = Decoder::new().decode("127.0.0.1:1".parse().unwrap(), &b, |_| {});
    }
}
