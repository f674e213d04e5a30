//! Property tests for the probing-pattern language (000 §3.2).

use opsel::probe::{CcaName, Pattern, Segment, SegmentKind};
use proptest::prelude::*;

fn segment() -> impl Strategy<Value = Segment> {
    let kind = prop_oneof![
        Just(SegmentKind::Silence),
        Just(SegmentKind::Burst(CcaName::CUBIC)),
        Just(SegmentKind::Burst(CcaName::BBR)),
        Just(SegmentKind::Burst(CcaName::RENO)),
        "[a-z][a-z0-9_]{0,14}"
            .prop_filter("reserved for silence", |n| n != "s" && n != "silence")
            .prop_map(|n| SegmentKind::Burst(CcaName::new(&n).unwrap())),
    ];
    // Whole seconds, and fractions down to 1 ns.
    let dur = prop_oneof![
        (1u64..120).prop_map(|s| s * 1_000_000_000),
        1u64..200_000_000_000
    ];
    (kind, dur).prop_map(|(kind, duration_ns)| Segment { kind, duration_ns })
}

proptest! {
    /// Display is canonical and parses back to the same pattern.
    #[test]
    fn display_round_trips(segs in prop::collection::vec(segment(), 1..12)) {
        let p = Pattern::from_segments(segs).unwrap();
        let text = p.to_string();
        let q = Pattern::parse(&text).unwrap();
        prop_assert_eq!(&q, &p);
        prop_assert_eq!(q.to_string(), text.clone());
        // Case-insensitive.
        prop_assert_eq!(Pattern::parse(&text.to_lowercase()).unwrap(), p);
    }

    /// The schedule tiles [0, total): every instant maps to the segment whose
    /// [start, start + duration) contains it.
    #[test]
    fn schedule_tiles_time(segs in prop::collection::vec(segment(), 1..12), frac in 0.0f64..1.0) {
        let p = Pattern::from_segments(segs).unwrap();
        let t = ((p.total_ns() as f64) * frac) as u64;
        let t = t.min(p.total_ns() - 1);
        let i = p.segment_index_at(t).unwrap();
        let start = p.segment_start_ns(i).unwrap();
        prop_assert!(start <= t && t < start + p.segments()[i].duration_ns);
        prop_assert_eq!(p.segment_index_at(p.total_ns()), None);
        prop_assert_eq!(p.segment_index_at_cyclic(t + p.total_ns()), i);
    }

    /// Sample attribution is cyclic with the pattern period and never panics.
    #[test]
    fn sample_attribution(segs in prop::collection::vec(segment(), 1..6), k in 0u64..10_000, period in 1u64..5_000_000_000) {
        let p = Pattern::from_segments(segs).unwrap();
        let i = p.segment_of_sample(k, period).unwrap();
        prop_assert!(i < p.segments().len());
    }

    /// Arbitrary text never panics: either a pattern or an error naming the input.
    #[test]
    fn parse_never_panics(s in "\\PC{0,40}") {
        match Pattern::parse(&s) {
            Ok(p) => prop_assert!(p.total_ns() > 0),
            Err(e) => prop_assert!(e.to_string().contains("pattern")),
        }
    }
}
