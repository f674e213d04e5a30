//! Criterion benches for the per-packet hot paths of the socket adapter:
//! probe header codec, TCP_INFO parsing, gap-error computation.
use criterion::{black_box, criterion_group, criterion_main, Criterion};

#[cfg(target_os = "linux")]
fn benches(c: &mut Criterion) {
    use opsel::sys::linux::receiver::{receive_gap_errors_ns, GapStats, RxRecord};
    use opsel::sys::linux::tcp_info::{TcpInfo, TCP_INFO_LEN};
    use opsel::sys::linux::wire::ProbeHeader;

    let mut buf = [0u8; 1472];
    c.bench_function("probe_header_encode_decode", |b| {
        b.iter(|| {
            let h = ProbeHeader {
                seq: black_box(9),
                train_id: 1,
                sched_offset_ns: 20_000,
                send_mono_ns: 123,
            };
            h.encode(&mut buf).unwrap();
            black_box(ProbeHeader::decode(black_box(&buf)))
        })
    });
    let raw = [3u8; TCP_INFO_LEN];
    c.bench_function("tcp_info_parse", |b| {
        b.iter(|| black_box(TcpInfo::parse(black_box(&raw))))
    });
    let recs: Vec<RxRecord> = (0..1000u32)
        .map(|i| RxRecord {
            seq: i,
            sched_offset_ns: u64::from(i) * 20_000,
            rx_kernel_mono_ns: Some(u64::from(i) * 20_000 + u64::from(i % 7) * 100),
            ..Default::default()
        })
        .collect();
    let mut errs = Vec::with_capacity(1000);
    c.bench_function("gap_errors_1000", |b| {
        b.iter(|| {
            errs.clear();
            receive_gap_errors_ns(black_box(&recs), &mut errs);
            black_box(errs.len())
        })
    });
    c.bench_function("gap_stats_1000", |b| {
        b.iter(|| black_box(GapStats::of(black_box(&errs))))
    });
}

#[cfg(not(target_os = "linux"))]
fn benches(_c: &mut Criterion) {}

criterion_group!(g, benches);
criterion_main!(g);
