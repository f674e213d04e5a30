//! Counting global allocator: the per-record paths allocate nothing — decoding
//! v5 / v9 / IPFIX datagrams once templates are known, pushing β records into
//! the α aggregator, and the α-time interval union.

use std::net::SocketAddr;

use opsel::flows::export::{encode_ipfix, encode_v5, encode_v9, Decoder};
use opsel::flows::interval::union_length;
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000;

fn recs() -> Vec<FlowRecord> {
    (0..20)
        .map(|i| FlowRecord {
            src_addr: format!("10.0.{i}.1").parse().unwrap(),
            dst_addr: "10.1.0.1".parse().unwrap(),
            src_port: 40000 + i,
            dst_port: 2811,
            proto: 6,
            bytes: 1000 + u64::from(i),
            packets: 1,
            first_ns: (T0 - 50) * S,
            last_ns: (T0 - 1) * S,
            sampling_interval: 1,
        })
        .collect()
}

#[test]
fn decoding_and_beta_records_do_not_allocate() {
    let from: SocketAddr = "127.0.0.1:2055".parse().unwrap();
    let rs = recs();
    let (mut v5, mut v9t, mut v9, mut ipt, mut ip) = (vec![], vec![], vec![], vec![], vec![]);
    encode_v5(&rs, T0 * S, 3_600_000, 1000, 1, &mut v5).unwrap();
    encode_v9(&rs, T0 as u32, 3_600_000, 1, 1, true, Some(1000), &mut v9t).unwrap();
    encode_v9(&rs, T0 as u32, 3_600_000, 1, 2, false, None, &mut v9).unwrap();
    encode_ipfix(&rs, T0 as u32, 1, 1, true, Some(1000), &mut ipt).unwrap();
    encode_ipfix(&rs, T0 as u32, 1, 2, false, None, &mut ip).unwrap();

    let mut d = Decoder::new();
    let mut agg = AlphaAggregator::new(AlphaSpec::default()).unwrap();
    // Learn templates and open the day (these allocate, once).
    d.decode(from, &v9t, |_| {}).unwrap();
    d.decode(from, &ipt, |_| {}).unwrap();
    agg.push(&rs[0]).unwrap();

    let mut seen = 0usize;
    let ((), n) = count(|| {
        for _ in 0..50 {
            for p in [&v5, &v9, &ip] {
                d.decode(from, p, |r| {
                    seen += 1;
                    // β records (1 MB corrected < H): counters only.
                    let alpha = agg.push(r).unwrap();
                    std::hint::black_box(alpha);
                })
                .unwrap();
            }
        }
    });
    assert_eq!(seen, 50 * 3 * 20, "every record decoded");
    assert_eq!(n, 0, "allocations on the per-record path");

    let mut iv: Vec<(u64, u64)> = (0..256)
        .map(|i| ((i * 37) % 1000, (i * 37) % 1000 + 50))
        .collect();
    let (len, n) = count(|| union_length(&mut iv));
    assert!(len > 0);
    assert_eq!(n, 0);
}
