//! The pacing hot paths allocate nothing once buffers exist: a counting global
//! allocator proves 0 allocations per `send_train` (report reused) and per
//! `recv_batch` (output with capacity), on loopback.
#![cfg(target_os = "linux")]

use std::net::UdpSocket;
use std::time::Duration;

use opsel::sys::linux::receiver::{ProbeReceiver, RxRecord};
use opsel::sys::linux::sender::{constant_gap_schedule, PacedSender, SenderConfig, TrainReport};
use opsel::sys::linux::tcp_info::TcpInfo;
use opsel::sys::linux::wire::ProbeHeader;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

#[test]
fn hot_paths_do_not_allocate() {
    let rxs = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst = rxs.local_addr().unwrap();
    let mut rx = ProbeReceiver::new(rxs, 2048).unwrap();
    let mut tx = PacedSender::new(
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        dst,
        1400,
        SenderConfig::default(),
    )
    .unwrap();
    let sched = constant_gap_schedule(200, 20_000);
    let mut rep = TrainReport::default();
    // Warm-up train sizes the report.
    tx.send_train(&sched, 1400, 0, &mut rep).unwrap();
    let mut out: Vec<RxRecord> = Vec::with_capacity(1024);
    rx.recv_train(200, Duration::from_millis(200), &mut out)
        .unwrap();
    out.clear();

    let (r, n) = count(|| tx.send_train(&sched, 1400, 1, &mut rep));
    r.unwrap();
    assert_eq!(n, 0, "send_train allocated {n} times");
    assert_eq!(rep.packets.len(), 200);

    let (r, n) = count(|| rx.recv_batch(Duration::from_millis(100), &mut out));
    assert!(r.unwrap() > 0);
    assert_eq!(n, 0, "recv_batch allocated {n} times");

    let bytes = [7u8; 248];
    let mut buf = [0u8; 64];
    let (t, n) = count(|| {
        let h = ProbeHeader {
            seq: 1,
            train_id: 2,
            sched_offset_ns: 3,
            send_mono_ns: 4,
        };
        h.encode(&mut buf).unwrap();
        (TcpInfo::parse(&bytes), ProbeHeader::decode(&buf))
    });
    assert_eq!(
        n, 0,
        "TcpInfo::parse / ProbeHeader codec allocated {n} times"
    );
    assert_eq!(t.1.unwrap().seq, 1);
}
