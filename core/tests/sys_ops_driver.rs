//! `OpsDriver` on a real connection between two network namespaces this test
//! creates (sys_common's lab: names `osy-<pid>-<n>-{a,b}`, removed by an RAII guard even on
//! failure; leftovers of dead processes are removed first). The sender's veth
//! is shaped to 50 Mbit/s with tbf; the receiver runs a UDP echo responder
//! with a 20 ms user-space delay as the RTT target. Bounded: ~13 s.
#![cfg(target_os = "linux")]

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opsel::mix::SIX_CLASSES;
use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{Config, Controller, Event, Phase, Stump};
use opsel::probe::{CcaName, Pattern};
use opsel::sys::linux::ops_driver::{
    DriverConfig, DriverEvent, EndReason, FileSource, OpsDriver, RttSource, Source,
};
use opsel::sys::linux::rtt::UdpEchoResponder;

mod sys_common;
use sys_common::{can_run, Lab, ADDR_B};

/// The driver test's lab: sys_common's veth pair with a tbf bottleneck on a's side.
fn lab(rate: &str) -> Lab {
    let lab = Lab::new();
    lab.exec(
        &lab.a,
        &[
            "tc", "qdisc", "add", "dev", "veth-a", "root", "tbf", "rate", rate, "burst", "32kb",
            "latency", "100ms",
        ],
    )
    .unwrap_or_else(|e| panic!("lab setup: {e}"));
    lab
}

/// Byte i of the deterministic test stream.
fn byte_at(i: u64) -> u8 {
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z ^= z >> 29;
    (z.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 56) as u8
}

/// An endless source of `byte_at` bytes.
struct Stream(u64);
impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        for b in buf.iter_mut() {
            *b = byte_at(self.0);
            self.0 += 1;
        }
        Ok(buf.len())
    }
}

#[test]
#[ignore = "root: creates network namespaces; run by `make test-ops`"]
fn switches_cca_live_keeps_silence_and_delivers_every_byte() {
    if !can_run("switches_cca_live_keeps_silence_and_delivers_every_byte") {
        return;
    }
    live_switching(false);
}

/// The same run with the payload sent from a file by `sendfile(2)`
/// (`FileSource`): silences stay silent and every byte arrives in order.
#[test]
#[ignore = "root: creates network namespaces; run by `make test-ops`"]
fn sendfile_switches_cca_live_keeps_silence_and_delivers_every_byte() {
    if !can_run("sendfile_switches_cca_live_keeps_silence_and_delivers_every_byte") {
        return;
    }
    live_switching(true);
}

fn live_switching(from_file: bool) {
    let lab = lab("50mbit");
    let addr: SocketAddr = format!("{ADDR_B}:5301").parse().unwrap();
    // Receiver: one accepted connection, every byte checked against the stream.
    let rx = lab.spawn_in(&lab.b, move || {
        let echo =
            UdpEchoResponder::spawn(UdpSocket::bind(addr).unwrap(), Duration::from_millis(20))
                .unwrap();
        let l = TcpListener::bind(addr).unwrap();
        let (mut c, _) = l.accept().unwrap();
        l.set_nonblocking(true).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let (mut pos, mut bad) = (0u64, 0u64);
        loop {
            let n = c.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                bad += (b != byte_at(pos)) as u64;
                pos += 1;
            }
        }
        let second_conn = l.accept().is_ok();
        let echoed = echo.stop().unwrap();
        (pos, bad, second_conn, echoed)
    });
    std::thread::sleep(Duration::from_millis(200));

    let tx = lab.spawn_in(&lab.a, move || {
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).unwrap();
        // 4-sample window, pattern S1-C1-S1-B1, Y = 2 s; decisions alternate
        // bbr (B1-C0) / cubic (B0-C1) so the socket switches several times.
        let classifier =
            ScriptedClassifier::new(4, &SIX_CLASSES, &[("B1-C0", 0.9), ("B0-C1", 0.9)]).unwrap();
        let mut cfg = Config::active(Pattern::parse("S1-C1-S1-B1").unwrap());
        cfg.steady_ns = 2_000_000_000;
        let ctl = Controller::new(cfg, classifier, Stump::default()).unwrap();
        let dcfg = DriverConfig {
            interval_ns: 250_000_000,
            time_limit_ns: Some(11_000_000_000),
            lead_in: false,
            ..DriverConfig::default()
        };
        let mut drv = OpsDriver::new(ctl, RttSource::UdpEcho(addr), dcfg).unwrap();
        let mut events = Vec::new();
        let mut on_event = |e: &DriverEvent| events.push(e.clone());
        let report = if from_file {
            // More than 11 s at 50 Mbit/s: the time limit ends the run.
            let path = std::env::temp_dir().join(format!("opsel-sendfile-{}", std::process::id()));
            let mut data = vec![0u8; 80 << 20];
            Stream(0).read_exact(&mut data).unwrap();
            std::fs::write(&path, &data).unwrap();
            drop(data);
            let f = std::fs::File::open(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let src = FileSource::new(f.as_fd(), 0, 80 << 20).unwrap();
            drv.run_source(
                &sock,
                &mut Source::File(src),
                &AtomicBool::new(false),
                &mut on_event,
            )
            .unwrap()
        } else {
            drv.run(
                &sock,
                &mut Stream(0),
                &AtomicBool::new(false),
                &mut on_event,
            )
            .unwrap()
        };
        let final_cca = opsel::sys::linux::get_cca(&sock).unwrap();
        drop(sock);
        (report, events, final_cca)
    });
    let (report, events, final_cca) = tx.join().unwrap();
    let (received, bad, second_conn, echoed) = rx.join().unwrap();

    assert_eq!(report.end, EndReason::TimeLimit);
    // Every byte handed to the socket arrived, in order, on one connection.
    assert_eq!(received, report.bytes_sent);
    assert_eq!(bad, 0);
    assert!(
        !second_conn,
        "the driver must never open a second connection"
    );
    assert!(report.bytes_sent > 5_000_000, "{}", report.bytes_sent);

    // CCA switches on the live socket: initial cubic, bbr burst, cubic/bbr
    // bursts of probe 2, then the cubic decision (000 Table 7.2).
    let sets: Vec<(CcaName, Option<u64>)> = events
        .iter()
        .filter_map(|e| match e {
            DriverEvent::CcaSet {
                cca, latency_ns, ..
            } => Some((*cca, *latency_ns)),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = sets.iter().map(|(c, _)| c.as_str()).collect();
    assert!(
        names.starts_with(&["cubic", "bbr", "cubic", "bbr", "cubic"]),
        "{names:?}"
    );
    assert!(
        sets.iter().any(|(_, l)| l.is_some()),
        "a decision-driven switch carries its latency"
    );
    assert_eq!(final_cca, "cubic");
    let decisions: Vec<(CcaName, bool)> = events
        .iter()
        .filter_map(|e| match e {
            DriverEvent::Decision { cca, switched, .. } => Some((*cca, *switched)),
            _ => None,
        })
        .collect();
    // Probe 1 ends on the bbr burst and decides bbr (no switch); probe 2
    // decides cubic (a switch).
    assert_eq!(decisions[0], (CcaName::BBR, false), "{decisions:?}");
    assert_eq!(decisions[1], (CcaName::CUBIC, true), "{decisions:?}");
    assert!(report.stats.decisions >= 2, "{:?}", report.stats);
    assert!(report.stats.cca_switches >= 4);

    // RTT samples at ~1 Hz, above the responder's 20 ms delay.
    let rtts: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            DriverEvent::Rtt { rtt_ms, .. } => *rtt_ms,
            _ => None,
        })
        .collect();
    assert!((8..=13).contains(&rtts.len()), "{} samples", rtts.len());
    assert!(rtts.iter().all(|&r| r >= 20.0), "{rtts:?}");
    assert!(echoed >= 80);

    // Silence is silent: in the second half of each silence segment of the
    // first probe ([0.5, 1) s and [2.5, 3) s) nothing is written and nothing
    // more is acknowledged; bursts do send.
    let t0 = report.started_ns;
    let in_range = |a: f64, b: f64| {
        events.iter().filter_map(move |e| match e {
            DriverEvent::Interval {
                start_ns,
                end_ns,
                bytes,
                acked_bytes,
                ..
            } if (*start_ns - t0) as f64 / 1e9 >= a - 1e-3
                && (*end_ns - t0) as f64 / 1e9 <= b + 1e-3 =>
            {
                Some((*bytes, acked_bytes.unwrap_or(0)))
            }
            _ => None,
        })
    };
    for (a, b) in [(0.5, 1.0), (2.5, 3.0)] {
        let v: Vec<_> = in_range(a, b).collect();
        assert!(!v.is_empty());
        assert!(
            v.iter().all(|&(w, k)| w == 0 && k == 0),
            "silence [{a}, {b}) s: {v:?}"
        );
    }
    let burst: u64 = in_range(1.0, 2.0).map(|(w, _)| w).sum();
    assert!(burst > 2_000_000, "C1 burst wrote {burst} bytes");
    // The phases the controller went through were reported.
    let probes = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                DriverEvent::Ops(Event::Phase {
                    phase: Phase::Probe,
                    ..
                })
            )
        })
        .count();
    assert!(probes >= 2);
}

#[test]
fn rejects_a_socket_that_is_not_tcp() {
    let classifier = ScriptedClassifier::new(4, &SIX_CLASSES, &[("B1-C0", 0.9)]).unwrap();
    let ctl = Controller::new(Config::passive(), classifier, Stump::default()).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = udp.local_addr().unwrap();
    let mut drv = OpsDriver::new(ctl, RttSource::UdpEcho(target), DriverConfig::default()).unwrap();
    let e = drv
        .run(&udp, &mut Stream(0), &AtomicBool::new(false), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("TCP") || e.contains("tcp"), "{e}");
}

#[test]
fn an_unavailable_cca_in_the_pattern_fails_with_the_kernel_list() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let _peer = l.accept().unwrap();
    let classifier = ScriptedClassifier::new(2, &SIX_CLASSES, &[("B1-C0", 0.9)]).unwrap();
    let cfg = Config::active(Pattern::parse("nosuchcca:1-S1").unwrap());
    let ctl = Controller::new(cfg, classifier, Stump::default()).unwrap();
    let mut drv = OpsDriver::new(
        ctl,
        RttSource::UdpEcho("127.0.0.1:9".parse().unwrap()),
        // No lead-in: the probe, and its first segment, begin at `start`.
        DriverConfig {
            lead_in: false,
            ..DriverConfig::default()
        },
    )
    .unwrap();
    let e = drv.start(&sock, 0, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("nosuchcca") && e.contains("available"), "{e}");
    // The socket keeps its last good CCA.
    assert_eq!(opsel::sys::linux::get_cca(&sock).unwrap(), "cubic");
}

/// On loopback: the controller's lead-in (the B1 burst of S1-C1-S1-B1)
/// runs before the first probe, which starts exactly one segment after the
/// run; the caller's stop flag, raised from another thread, ends the run.
#[test]
fn lead_in_runs_first_and_the_callers_flag_stops_the_run() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut peer, _) = l.accept().unwrap();
    let sink = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while matches!(peer.read(&mut buf), Ok(n) if n > 0) {}
    });
    let echo_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let echo_addr = echo_sock.local_addr().unwrap();
    let echo = UdpEchoResponder::spawn(echo_sock, Duration::ZERO).unwrap();
    let classifier = ScriptedClassifier::new(4, &SIX_CLASSES, &[("B0-C1", 0.9)]).unwrap();
    let mut cfg = Config::active(Pattern::parse("S1-C1-S1-B1").unwrap());
    cfg.steady_ns = 60_000_000_000;
    let ctl = Controller::new(cfg, classifier, Stump::default()).unwrap();
    let dcfg = DriverConfig {
        interval_ns: 250_000_000,
        ..DriverConfig::default()
    };
    let mut drv = OpsDriver::new(ctl, RttSource::UdpEcho(echo_addr), dcfg).unwrap();
    let stop = AtomicBool::new(false);
    let mut events = Vec::new();
    let report = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(2500));
            stop.store(true, Ordering::Relaxed);
        });
        drv.run(&sock, &mut Stream(0), &stop, &mut |e| {
            events.push(e.clone())
        })
        .unwrap()
    });
    drop(sock);
    sink.join().unwrap();
    echo.stop().unwrap();
    assert_eq!(report.end, EndReason::Stopped);
    let secs = (report.ended_ns - report.started_ns) as f64 / 1e9;
    assert!((2.4..3.5).contains(&secs), "stopped after {secs} s");
    // Initial cubic, then bbr for the lead-in, before the first probe.
    let first_probe = events
        .iter()
        .position(|e| {
            matches!(
                e,
                DriverEvent::Ops(Event::Phase {
                    phase: Phase::Probe,
                    ..
                })
            )
        })
        .expect("a probe began");
    let sets: Vec<&str> = events[..first_probe]
        .iter()
        .filter_map(|e| match e {
            DriverEvent::CcaSet { cca, .. } => Some(cca.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(sets, ["cubic", "bbr"]);
    let DriverEvent::Ops(Event::Phase { at_ns, .. }) = &events[first_probe] else {
        unreachable!()
    };
    assert_eq!(*at_ns - report.started_ns, 1_000_000_000);
    // The lead-in sent: its intervals carry bytes, with phase idle.
    let lead: u64 = events
        .iter()
        .filter_map(|e| match e {
            DriverEvent::Interval {
                end_ns,
                bytes,
                phase: Phase::Idle,
                ..
            } if *end_ns <= *at_ns => Some(*bytes),
            _ => None,
        })
        .sum();
    assert!(lead > 0, "the lead-in burst sent nothing");
}
