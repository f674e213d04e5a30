//! The transfer's own RTT as a probe (`sys::linux::tcp_rtt::TcpInfoRttProbe`):
//! agreement with UDP echo bursts on the same queued path, stale readings
//! while the socket is silent, and errors on sockets that are not TCP.
//!
//! The path: a veth pair whose sending side has a `tbf` bottleneck (20 Mbit/s,
//! 150 kB queue, so up to 60 ms of queueing), filled by one bulk CUBIC flow.
//! The data, and the UDP echoes toward a responder on the far side, wait in
//! the same queue; ACKs and echo replies come back on the unqueued reverse
//! direction. So both probes measure the same standing queue plus a base RTT
//! of tens of µs, and their medians must agree.
#![cfg(target_os = "linux")]

mod sys_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opsel::sys::linux::rtt::{echo_burst, BurstConfig, UdpEchoProber, UdpEchoResponder};
use opsel::sys::linux::tcp_rtt::TcpInfoRttProbe;
use opsel::ErrorKind;
use sys_common::{can_run, Lab, ADDR_A, ADDR_B};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[test]
fn tcp_info_probe_agrees_with_udp_echo_on_a_queued_path_and_goes_stale_when_silent() {
    if !can_run("tcp_info_probe_agrees_with_udp_echo_on_a_queued_path") {
        return;
    }
    let lab = Lab::new();
    lab.exec(
        &lab.a,
        &[
            "tc", "qdisc", "replace", "dev", "veth-a", "root", "tbf", "rate", "20mbit", "burst",
            "16kb", "limit", "150000",
        ],
    )
    .expect("tbf on veth-a");

    let l = lab.run_in(&lab.b, || TcpListener::bind((ADDR_B, 7108)).unwrap());
    let sink = std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut b = vec![0u8; 1 << 16];
        while c.read(&mut b).map(|n| n > 0).unwrap_or(false) {}
    });
    let responder = lab.run_in(&lab.b, || {
        UdpEchoResponder::spawn(UdpSocket::bind((ADDR_B, 7109)).unwrap(), Duration::ZERO).unwrap()
    });
    let echo_sock = lab.run_in(&lab.a, || UdpSocket::bind((ADDR_A, 0)).unwrap());
    let dst: SocketAddr = format!("{ADDR_B}:7109").parse().unwrap();
    let mut udp = UdpEchoProber::new(echo_sock, dst).unwrap();

    let data = lab.run_in(&lab.a, || TcpStream::connect((ADDR_B, 7108)).unwrap());
    opsel::sys::linux::set_cca(&data, "cubic").unwrap();
    let mut tcp = TcpInfoRttProbe::new(&data).unwrap();
    let sending = Arc::new(AtomicBool::new(true));
    let writer = {
        let sending = sending.clone();
        let mut data = data.try_clone().unwrap();
        std::thread::spawn(move || {
            let buf = vec![7u8; 1 << 16];
            while sending.load(Ordering::Relaxed) {
                if data.write_all(&buf).is_err() {
                    break;
                }
            }
        })
    };
    // Let CUBIC leave slow start and the queue stand.
    std::thread::sleep(Duration::from_secs(2));

    // Alternate the two probes so both see the same phases of CUBIC's sawtooth.
    let cfg = BurstConfig {
        timeout_ns: 200_000_000,
        ..BurstConfig::default()
    };
    // Only pairs taken while the queue stands (UDP echo above 10 ms) are compared: on a
    // loaded machine the sender can stall and the queue drain for a while, and a
    // comparison at the base RTT says nothing about agreement on a queued path.
    let (mut via_tcp, mut via_udp) = (Vec::new(), Vec::new());
    let (mut all_tcp, mut all_udp) = (Vec::new(), Vec::new());
    for i in 0..30u16 {
        if via_udp.len() >= 12 {
            break;
        }
        let t = echo_burst(&mut tcp, cfg, i * 20).unwrap();
        assert_eq!(t.rtts_ns.iter().flatten().count(), 10, "burst {i}: {t:?}");
        let tm = t.mean_rtt_ms().unwrap();
        all_tcp.push(tm);
        let u = echo_burst(&mut udp, cfg, i * 20).unwrap();
        if let Some(ms) = u.mean_rtt_ms() {
            all_udp.push(ms);
            if ms > 10.0 {
                via_tcp.push(tm);
                via_udp.push(ms);
            }
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    eprintln!("TCP_INFO srtt bursts (ms): {all_tcp:.1?}\nUDP echo bursts (ms): {all_udp:.1?}");
    // The queue must be there, or the comparison says nothing (60 ms at most).
    assert!(
        via_udp.len() >= 6,
        "{} of {} UDP echo bursts above 10 ms: no standing queue?",
        via_udp.len(),
        all_udp.len()
    );
    let (mt, mu) = (median(via_tcp.clone()), median(via_udp.clone()));
    eprintln!("queued pairs {}: medians {mt:.2} / {mu:.2}", via_udp.len());
    assert!(
        mu < 90.0,
        "UDP echo median {mu} ms: more than the queue holds"
    );
    let ratio = mt / mu;
    assert!(
        (0.75..=1.33).contains(&ratio),
        "TCP_INFO median {mt:.2} ms vs UDP echo {mu:.2} ms (ratio {ratio:.3})"
    );

    // Silence: no ACK for longer than the probe's max age → unanswered readings.
    sending.store(false, Ordering::Relaxed);
    writer.join().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let s = echo_burst(&mut tcp, cfg, 999).unwrap();
    assert_eq!(
        s.rtts_ns.iter().flatten().count(),
        0,
        "readings of a silent socket must not count: {s:?}"
    );

    // The probe holds a duplicate of the descriptor: the connection closes
    // (and the sink sees EOF) only once both are gone.
    drop(tcp);
    data.shutdown(std::net::Shutdown::Both).unwrap();
    drop(data);
    sink.join().unwrap();
    drop(responder);
    drop(lab);
}

#[test]
fn tcp_info_probe_rejects_sockets_that_are_not_tcp() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let e = TcpInfoRttProbe::new(&udp).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
}
