//! Flow-export decoding and α aggregation per datagram / record (003 AFTES
//! hot paths). Criterion reports time per datagram of 30 records; records/s
//! follow by dividing. The one-day study bench times the whole offline
//! analysis (two passes) over one synthetic day.
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::net::SocketAddr;

use opsel::flows::export::{encode_ipfix, encode_v5, encode_v9, Decoder};
use opsel::flows::study::{analyze_slice, StudySpec};
use opsel::flows::synth::{Synth, SynthSpec};
use opsel::flows::{AlphaAggregator, AlphaSpec, FlowRecord};

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000;

fn recs() -> Vec<FlowRecord> {
    (0..30u16)
        .map(|i| FlowRecord {
            src_addr: format!("10.0.{i}.1").parse().unwrap(),
            dst_addr: "10.1.0.1".parse().unwrap(),
            src_port: 40000 + i,
            dst_port: 2811,
            proto: 6,
            bytes: 1000 + u64::from(i) * 100_000,
            packets: 1 + u64::from(i) * 70,
            first_ns: (T0 - 50) * S,
            last_ns: (T0 - 1) * S,
            sampling_interval: 1,
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let from: SocketAddr = "127.0.0.1:2055".parse().unwrap();
    let rs = recs();
    let (mut v5, mut v9t, mut v9, mut ipt, mut ip) = (vec![], vec![], vec![], vec![], vec![]);
    encode_v5(&rs, T0 * S, 3_600_000, 1000, 1, &mut v5).unwrap();
    encode_v9(&rs, T0 as u32, 3_600_000, 1, 1, true, Some(1000), &mut v9t).unwrap();
    encode_v9(&rs, T0 as u32, 3_600_000, 1, 2, false, None, &mut v9).unwrap();
    encode_ipfix(&rs, T0 as u32, 1, 1, true, Some(1000), &mut ipt).unwrap();
    encode_ipfix(&rs, T0 as u32, 1, 2, false, None, &mut ip).unwrap();
    let mut d = Decoder::new();
    d.decode(from, &v9t, |_| {}).unwrap();
    d.decode(from, &ipt, |_| {}).unwrap();

    let mut g = c.benchmark_group("flows_decode");
    g.throughput(Throughput::Elements(rs.len() as u64));
    for (name, pkt) in [("v5", &v5), ("v9", &v9), ("ipfix", &ip)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0u64;
                d.decode(from, black_box(pkt), |r| n += r.bytes).unwrap();
                black_box(n)
            })
        });
    }
    g.finish();

    let mut agg = AlphaAggregator::new(AlphaSpec::default()).unwrap();
    let mut g = c.benchmark_group("flows_alpha");
    g.throughput(Throughput::Elements(rs.len() as u64));
    g.bench_function("push_30_records", |b| {
        b.iter(|| {
            for r in &rs {
                black_box(agg.push(black_box(r)).unwrap());
            }
        })
    });
    g.finish();

    let day: Vec<FlowRecord> = Synth::new(SynthSpec {
        days: 1,
        ..SynthSpec::default()
    })
    .unwrap()
    .flatten()
    .collect();
    eprintln!("one synthetic day: {} records", day.len());
    let spec = StudySpec::default();
    let mut g = c.benchmark_group("flows_study");
    g.throughput(Throughput::Elements(day.len() as u64));
    g.sample_size(20);
    g.bench_function("one_synthetic_day", |b| {
        b.iter(|| black_box(analyze_slice(&spec, &day).unwrap().records))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
