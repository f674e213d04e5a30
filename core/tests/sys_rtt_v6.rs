//! RTT probes over IPv6: ICMPv6 echo (ping socket and raw socket) and the UDP
//! echo prober/responder, inside a test namespace's loopback (`::1`).
#![cfg(target_os = "linux")]

mod sys_common;

use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use opsel::sys::linux::rtt::{
    echo_burst, BurstConfig, IcmpProber, IcmpSocketKind, UdpEchoProber, UdpEchoResponder,
};
use sys_common::{can_run, Lab};

const LO6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

#[test]
fn icmpv6_echo_on_ping_and_raw_sockets_and_udp_echo_over_ipv6() {
    if !can_run("icmpv6_echo_on_ping_and_raw_sockets_and_udp_echo_over_ipv6") {
        return;
    }
    let lab = Lab::new();
    // One sysctl governs ping sockets of both families.
    lab.exec(
        &lab.a,
        &["sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647"],
    )
    .unwrap();
    let (ping, raw, udp) = lab.run_in(&lab.a, || {
        let burst = |kind| {
            let mut p = IcmpProber::with_kind_ip(LO6, kind).unwrap();
            assert_eq!(p.destination(), LO6);
            echo_burst(&mut p, BurstConfig::default(), 100).unwrap()
        };
        let ping = burst(IcmpSocketKind::Ping);
        let raw = burst(IcmpSocketKind::Raw);
        let responder =
            UdpEchoResponder::spawn(UdpSocket::bind("[::1]:0").unwrap(), Duration::ZERO).unwrap();
        let dst: SocketAddr = responder.local_addr();
        assert!(dst.is_ipv6(), "{dst}");
        let mut u = UdpEchoProber::new(UdpSocket::bind("[::1]:0").unwrap(), dst).unwrap();
        let udp = echo_burst(&mut u, BurstConfig::default(), 0).unwrap();
        drop(responder);
        (ping, raw, udp)
    });
    for (name, s) in [
        ("ICMPv6 ping socket", &ping),
        ("ICMPv6 raw socket", &raw),
        ("UDP echo over IPv6", &udp),
    ] {
        assert_eq!(s.lost(), 0, "{name}: {s:?}");
        // Loopback: well under a millisecond; 5 ms leaves room for a loaded machine.
        let ms = s.mean_rtt_ms().unwrap();
        assert!(ms > 0.0 && ms < 5.0, "{name}: mean {ms} ms");
    }
    drop(lab);
}

#[test]
fn icmpv6_prober_prefers_the_ping_socket_and_explains_a_closed_range() {
    if !can_run("icmpv6_prober_prefers_the_ping_socket_and_explains_a_closed_range") {
        return;
    }
    let lab = Lab::new();
    lab.exec(&lab.a, &["sysctl", "-qw", "net.ipv4.ping_group_range=1 0"])
        .unwrap();
    let (kind, err) = lab.run_in(&lab.a, || {
        (
            IcmpProber::new_ip(LO6).unwrap().kind(),
            IcmpProber::with_kind_ip(LO6, IcmpSocketKind::Ping).err(),
        )
    });
    assert_eq!(kind, IcmpSocketKind::Raw, "closed range + root: raw socket");
    let e = err.expect("a ping socket must be refused when the range is closed");
    assert_eq!(e.kind(), opsel::ErrorKind::Permission);
    assert!(e.to_string().contains("net.ipv4.ping_group_range"), "{e}");
    drop(lab);
}
