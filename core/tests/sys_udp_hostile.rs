//! The two UDP services that face the network, on loopback (no privilege):
//! the UDP echo responder (`opsel recv`'s RTT probe target) and the p-stream
//! reflector (`opsel bwe reflect`). Malformed, oversized, spoofed-looking and
//! flooding datagrams neither stop them nor draw replies larger than the
//! request, and a legitimate peer is served afterwards.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opsel::bwe::wire::{decode_ready, decode_report, encode_request};
use opsel::sys::linux::bwe_driver::run_reflector;
use opsel::sys::linux::rtt::{UdpEchoResponder, ECHO_LEN, ECHO_MAX_PER_S};
use opsel::sys::linux::wire::ProbeHeader;

fn drain(s: &UdpSocket, quiet: Duration) -> Vec<Vec<u8>> {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 70_000];
    while let Ok(n) = s.recv(&mut b) {
        out.push(b[..n].to_vec());
    }
    out
}

#[test]
fn echo_responder_answers_only_echoes_at_a_bounded_rate() {
    let r =
        UdpEchoResponder::spawn(UdpSocket::bind("127.0.0.1:0").unwrap(), Duration::ZERO).unwrap();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.connect(r.local_addr()).unwrap();
    // Garbage: empty, large, wrong magic, right magic but wrong length.
    let mut echo = [0u8; ECHO_LEN];
    echo[..4].copy_from_slice(b"OPSE");
    let bad: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xAB; 1400],
        b"GET / HTTP/1.0\r\n\r\n".to_vec(),
        [&echo[..], &[0u8; 100][..]].concat(),
        echo[..8].to_vec(),
    ];
    for b in &bad {
        c.send(b).unwrap();
    }
    assert!(
        drain(&c, Duration::from_millis(100)).is_empty(),
        "garbage was answered"
    );
    // A flood of well-formed echoes: no more than the burst plus the rate.
    let t = Instant::now();
    let mut sent = 0;
    while t.elapsed() < Duration::from_millis(500) {
        let _ = c.send(&echo);
        sent += 1;
    }
    let got = drain(&c, Duration::from_millis(200));
    let cap = 200 + (ECHO_MAX_PER_S as f64 * t.elapsed().as_secs_f64()) as usize + 50;
    assert!(
        got.len() <= cap,
        "{} replies to {sent} echoes (cap {cap})",
        got.len()
    );
    assert!(got.iter().all(|g| g.len() == ECHO_LEN));
    // Still serving afterwards, once the bucket refills.
    std::thread::sleep(Duration::from_millis(200));
    c.send(&echo).unwrap();
    assert_eq!(drain(&c, Duration::from_millis(200)).len(), 1);
    assert!(r.stop().unwrap() > 0);
}

#[test]
fn reflector_survives_hostile_datagrams_and_serves_the_next_prober() {
    let ctrl = UdpSocket::bind("127.0.0.1:0").unwrap();
    let data = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (ctrl_addr, data_addr) = (ctrl.local_addr().unwrap(), data.local_addr().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let refl =
        std::thread::spawn(move || run_reflector(ctrl, data, &st, Duration::from_millis(10)));

    // 1. Garbage of every size on both ports.
    let g = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..2000usize {
        let len = [0, 1, 11, 12, 13, 31, 32, 1400, 9000][i % 9];
        let b: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
        let to: SocketAddr = if i % 2 == 0 { ctrl_addr } else { data_addr };
        let _ = g.send_to(&b, to);
    }
    // 2. A request for u32::MAX packets that never sends any: an empty
    //    report (12 bytes for 12 asked), then that host is ignored for a while.
    g.connect(ctrl_addr).unwrap();
    let _ = drain(&g, Duration::from_millis(50));
    g.send(&encode_request(9, u32::MAX)).unwrap();
    let replies = drain(&g, Duration::from_millis(250));
    let total: usize = replies.iter().map(Vec::len).sum();
    assert!(total <= 8 + 12, "{replies:?}");
    g.send(&encode_request(10, 10)).unwrap();
    assert!(
        drain(&g, Duration::from_millis(150)).is_empty(),
        "bogus peer not held off"
    );

    // 3. A real prober from another host address (127.0.0.2) is served.
    let p = UdpSocket::bind("127.0.0.2:0").unwrap();
    p.connect(ctrl_addr).unwrap();
    p.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    p.send(&encode_request(5, 10)).unwrap();
    let mut b = [0u8; 70_000];
    let n = p.recv(&mut b).unwrap();
    assert_eq!(decode_ready(&b[..n]), Some(5));
    let d = UdpSocket::bind("127.0.0.2:0").unwrap();
    let mut pkt = [0u8; 200];
    for seq in 0..10u32 {
        ProbeHeader {
            seq,
            train_id: 5,
            sched_offset_ns: u64::from(seq) * 1000,
            send_mono_ns: 0,
        }
        .encode(&mut pkt)
        .unwrap();
        d.send_to(&pkt, data_addr).unwrap();
        // A stray packet of another train in between must not count.
        ProbeHeader {
            seq,
            train_id: 77,
            ..Default::default()
        }
        .encode(&mut pkt)
        .unwrap();
        d.send_to(&pkt, data_addr).unwrap();
    }
    let n = p.recv(&mut b).unwrap();
    let mut arr = Vec::new();
    assert_eq!(decode_report(&b[..n], &mut arr), Some(5));
    assert_eq!(arr.len(), 10, "{arr:?}");
    assert!(arr.iter().enumerate().all(|(i, (s, _))| *s == i as u32));

    stop.store(true, Ordering::SeqCst);
    let trains = refl
        .join()
        .unwrap()
        .expect("the reflector never fails on bad input");
    assert_eq!(trains, 2);
}
