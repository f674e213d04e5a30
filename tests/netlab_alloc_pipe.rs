//! The pipe's per-packet path allocates nothing (DESIGN.md: zero allocation on
//! hot paths). A counting global allocator proves it; this file has its own
//! binary because it replaces the global allocator.

use opsel_netlab::pipe::{Pipe, PipeConfig, Verdict};

// The workspace's one counting allocator (counts this thread's allocations).
#[path = "../core/tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn pipe_hot_path_allocates_nothing() {
    let cfg = PipeConfig {
        rate_bps: Some(100_000_000),
        delay_ns: 32_500_000,
        queue_limit_bytes: 1_218_750,
        loss: 0.01,
        seed: 3,
        max_packet_bytes: 1500,
    };
    let mut p = Pipe::new(cfg, 0).unwrap();
    let (mut now, mut accepted, mut delivered, mut dropped) = (0u64, 0u64, 0u64, 0u64);
    let ((), allocs) = count(|| {
        // 200k packets offered at 150 Mbit/s: the queue fills, drops, wraps the ring many times.
        for i in 0..200_000u64 {
            now += 80_000;
            let len = if i % 3 == 0 { 52 } else { 1500 };
            match p.reserve() {
                Some(b) => {
                    b[0] = 0x45;
                    match p.commit(len, now) {
                        Verdict::Accepted => accepted += 1,
                        _ => dropped += 1,
                    }
                }
                None => p.drop_ring_full(len),
            }
            while let Some(pkt) = p.peek_due(now) {
                assert_eq!(pkt[0], 0x45);
                p.pop();
                delivered += 1;
            }
        }
    });
    assert_eq!(
        allocs, 0,
        "the pipe allocated {allocs} times on the packet path"
    );
    assert!(dropped > 0 && accepted > 0 && delivered > 0);
    assert_eq!(p.counters().drop_ring_pkts, 0, "ring sized too small");
}
