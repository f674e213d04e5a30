//! Packets per second through the sans-IO pipe (no syscalls): the ceiling the
//! pipe logic puts on the TUN forwarder. `cargo bench -p opsel-netlab`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use opsel_netlab::pipe::{Pipe, PipeConfig};

fn bench_pipe(c: &mut Criterion) {
    let cfg = PipeConfig {
        rate_bps: Some(1_000_000_000),
        delay_ns: 32_500_000,
        queue_limit_bytes: 6_000_000,
        loss: 0.0,
        seed: 1,
        max_packet_bytes: 1500,
    };
    let mut p = Pipe::new(cfg, 0).unwrap();
    let mut now = 0u64;
    let mut g = c.benchmark_group("pipe");
    g.throughput(Throughput::Elements(1));
    // One 1500-byte packet in and the due packets out, offered at line rate (12 µs apart at 1 Gbit/s).
    g.bench_function("commit_and_deliver_1500B", |b| {
        b.iter(|| {
            now += 12_000;
            if p.reserve().is_some() {
                p.commit(1500, now);
            }
            while p.peek_due(now).is_some() {
                p.pop();
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench_pipe);
criterion_main!(benches);
