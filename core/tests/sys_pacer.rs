//! Paced UDP sender + timestamping receiver between two test namespaces.
//! SO_TXTIME is detected as not enforced on this machine (no fq/etf), the
//! user-space pacer is chosen, and the SO_TXTIME path runs only where fq exists.
#![cfg(target_os = "linux")]

mod sys_common;

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use opsel::sys::linux::qdisc::detect_txtime;
use opsel::sys::linux::receiver::{receive_gap_errors_ns, GapStats, ProbeReceiver, RxRecord};
use opsel::sys::linux::sender::{
    constant_gap_schedule, Backend, BackendChoice, CatchUp, DepartureSource, PacedSender,
    SenderConfig, TrainReport,
};
use opsel::ErrorKind;
use sys_common::{can_run, Lab, ADDR_A, ADDR_B};

fn pair(lab: &Lab, port: u16, cfg: SenderConfig) -> opsel::Result<(PacedSender, ProbeReceiver)> {
    let rx = lab.run_in(&lab.b, move || UdpSocket::bind((ADDR_B, port)).unwrap());
    let tx = lab.run_in(&lab.a, || UdpSocket::bind((ADDR_A, 0)).unwrap());
    let dst: SocketAddr = format!("{ADDR_B}:{port}").parse().unwrap();
    Ok((
        PacedSender::new(tx, dst, 9000, cfg)?,
        ProbeReceiver::new(rx, 9100)?,
    ))
}

fn run_train(
    tx: &mut PacedSender,
    rx: ProbeReceiver,
    sched: Vec<u64>,
    len: usize,
) -> (TrainReport, Vec<RxRecord>, ProbeReceiver) {
    let n = sched.len();
    let h = std::thread::spawn(move || {
        let mut rx = rx;
        let mut out = Vec::new();
        rx.recv_train(n, Duration::from_millis(500), &mut out)
            .unwrap();
        (out, rx)
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut rep = TrainReport::default();
    tx.send_train(&sched, len, 7, &mut rep).unwrap();
    let (out, rx) = h.join().unwrap();
    (rep, out, rx)
}

#[test]
fn txtime_not_enforced_here_selects_user_space() {
    if !can_run("txtime_not_enforced_here_selects_user_space") {
        return;
    }
    let lab = Lab::new();
    // The kernel accepts SO_TXTIME on any UDP socket: the return code proves nothing.
    let probe = lab.run_in(&lab.a, || UdpSocket::bind((ADDR_A, 0)).unwrap());
    let st = libc::sock_txtime {
        clockid: libc::CLOCK_MONOTONIC,
        flags: 0,
    };
    // SAFETY: valid socket and option buffer.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&probe),
            libc::SOL_SOCKET,
            libc::SO_TXTIME,
            (&st as *const libc::sock_txtime).cast(),
            std::mem::size_of::<libc::sock_txtime>() as u32,
        )
    };
    assert_eq!(
        rc, 0,
        "setsockopt(SO_TXTIME) succeeds even though nothing enforces it"
    );
    let d = detect_txtime(probe.as_fd(), ADDR_B.parse().unwrap()).unwrap();
    assert!(!d.enforced, "{d:?}");
    assert_eq!(d.device, "veth-a");
    assert_eq!(d.root_qdisc, "noqueue");

    // Qdiscs this machine has do not enforce it either.
    for q in [
        &["tbf", "rate", "1gbit", "burst", "64k", "latency", "10ms"][..],
        &["pfifo"][..],
        &["htb"][..],
    ] {
        let mut args = vec!["tc", "qdisc", "replace", "dev", "veth-a", "root"];
        args.extend_from_slice(q);
        lab.exec(&lab.a, &args).unwrap();
        let d = detect_txtime(probe.as_fd(), ADDR_B.parse().unwrap()).unwrap();
        assert!(!d.enforced, "{d:?}");
        assert_eq!(d.root_qdisc, q[0]);
        assert!(d.reason.contains("only fq and etf"), "{}", d.reason);
    }
    lab.exec(&lab.a, &["tc", "qdisc", "del", "dev", "veth-a", "root"])
        .unwrap();

    let (mut tx, rx) = pair(&lab, 6001, SenderConfig::default()).unwrap();
    assert_eq!(tx.backend(), Backend::UserSpace);
    assert!(!tx.txtime_support().unwrap().enforced);
    // Forcing SO_TXTIME is refused with the reason.
    let tx2 = lab.run_in(&lab.a, || UdpSocket::bind((ADDR_A, 0)).unwrap());
    let cfg = SenderConfig {
        backend: BackendChoice::TxTime,
        ..Default::default()
    };
    let e = PacedSender::new(tx2, format!("{ADDR_B}:6001").parse().unwrap(), 1500, cfg)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.to_string().contains("noqueue"), "{e}");

    // The user-space pacer really spreads a 9.9 ms train (SO_TXTIME ignored
    // sent it in 0.44 ms): kernel RX stamps span at least the schedule.
    let sched = constant_gap_schedule(100, 100_000);
    let (rep, got, _rx) = run_train(&mut tx, rx, sched.clone(), 1500);
    assert_eq!(got.len(), 100, "all packets received on an idle veth");
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.seq, i as u32);
        assert_eq!(r.train_id, 7);
        assert_eq!(r.sched_offset_ns, sched[i]);
        assert_eq!(r.len, 1500);
        assert!(
            r.rx_kernel_realtime_ns.is_some(),
            "SO_TIMESTAMPNS stamp missing"
        );
        assert_eq!(r.send_mono_ns, rep.packets[i].stamped_mono_ns);
    }
    let span = got[99].rx_mono_ns() - got[0].rx_mono_ns();
    assert!(
        span >= 9_900_000 - 100_000,
        "train span {span} ns is shorter than its 9.9 ms schedule"
    );
    for p in &rep.packets {
        assert!(
            p.stamped_mono_ns >= p.scheduled_mono_ns,
            "packet {} left before its deadline",
            p.seq
        );
    }
    eprintln!(
        "tx stamps {}/{} (source of departure[0]: {:?}), max lateness {} ns, rebases {}",
        rep.tx_stamped,
        rep.packets.len(),
        rep.packets[0].departure().1,
        rep.max_lateness_ns,
        rep.rebases
    );
    drop(lab);
}

#[test]
fn catch_up_policies() {
    if !can_run("catch_up_policies") {
        return;
    }
    let lab = Lab::new();
    // stall_ns = 1 ns: every hand-off counts as a stall, which forces the policy to act.
    let cfg = SenderConfig {
        stall_ns: 1,
        catch_up: CatchUp::Rebase,
        ..Default::default()
    };
    let (mut tx, rx) = pair(&lab, 6002, cfg).unwrap();
    let sched = constant_gap_schedule(50, 200_000);
    let (rep, got, _) = run_train(&mut tx, rx, sched.clone(), 200);
    assert_eq!(got.len(), 50);
    assert!(rep.rebases > 0);
    // Rebase: every gap between (shifted) deadlines is at least the scheduled gap.
    for w in rep.packets.windows(2) {
        assert!(w[1].scheduled_mono_ns - w[0].scheduled_mono_ns >= 200_000);
    }
    assert!(
        rep.packets[49].scheduled_mono_ns - rep.start_mono_ns > sched[49],
        "re-basing moved the end"
    );

    let cfg = SenderConfig {
        stall_ns: 1,
        catch_up: CatchUp::Burst,
        ..Default::default()
    };
    let (mut tx, rx) = pair(&lab, 6003, cfg).unwrap();
    let (rep, got, _) = run_train(&mut tx, rx, sched.clone(), 200);
    assert_eq!(got.len(), 50);
    assert_eq!(rep.rebases, 0);
    for (p, s) in rep.packets.iter().zip(&sched) {
        assert_eq!(
            p.scheduled_mono_ns,
            rep.start_mono_ns + s,
            "burst keeps the absolute schedule"
        );
    }
    drop(lab);
}

#[test]
fn zero_gaps_are_batched_and_all_arrive() {
    if !can_run("zero_gaps_are_batched_and_all_arrive") {
        return;
    }
    let lab = Lab::new();
    let (mut tx, rx) = pair(&lab, 6004, SenderConfig::default()).unwrap();
    // Groups of 8 back-to-back packets, groups 500 µs apart.
    let sched: Vec<u64> = (0..64u64).map(|i| (i / 8) * 500_000).collect();
    let (rep, got, _) = run_train(&mut tx, rx, sched, 1000);
    assert_eq!(got.len(), 64);
    // A batch shares one pre-send stamp: 8 distinct stamps for 8 groups.
    let mut stamps: Vec<u64> = rep.packets.iter().map(|p| p.stamped_mono_ns).collect();
    stamps.dedup();
    assert_eq!(
        stamps.len(),
        8,
        "back-to-back packets go out in one sendmmsg per group"
    );
    let mut errs = Vec::new();
    receive_gap_errors_ns(&got, &mut errs);
    assert_eq!(errs.len(), 63);
    assert!(GapStats::of(&errs).is_some());
    drop(lab);
}

#[test]
fn bad_input_is_rejected() {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let e = PacedSender::new(s.try_clone().unwrap(), dst, 10, SenderConfig::default())
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    let mut tx = PacedSender::new(s, dst, 100, SenderConfig::default()).unwrap();
    // Loopback (noqueue) never enforces SO_TXTIME.
    assert_eq!(tx.backend(), Backend::UserSpace);
    let mut rep = TrainReport::default();
    assert_eq!(
        tx.send_train(&[5, 1], 100, 0, &mut rep).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        tx.send_train(&[0], 101, 0, &mut rep).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        tx.send_train(&[], 100, 0, &mut rep).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert!(ProbeReceiver::new(UdpSocket::bind("127.0.0.1:0").unwrap(), 8).is_err());
}

#[test]
fn txtime_path_when_fq_exists() {
    if !can_run("txtime_path_when_fq_exists") {
        return;
    }
    let lab = Lab::new();
    if let Err(e) = lab.exec(
        &lab.a,
        &["tc", "qdisc", "replace", "dev", "veth-a", "root", "fq"],
    ) {
        eprintln!("SKIPPED txtime_path_when_fq_exists: this kernel has no fq qdisc ({e}); SO_TXTIME cannot be enforced, the user-space pacer is used instead");
        return;
    }
    let cfg = SenderConfig {
        backend: BackendChoice::TxTime,
        ..Default::default()
    };
    let (mut tx, rx) = pair(&lab, 6005, cfg).unwrap();
    assert!(matches!(tx.backend(), Backend::TxTime { .. }));
    let sched = constant_gap_schedule(100, 100_000);
    let (rep, got, _) = run_train(&mut tx, rx, sched, 1500);
    assert_eq!(got.len(), 100);
    let span = got[99].rx_mono_ns() - got[0].rx_mono_ns();
    assert!(
        span >= 9_800_000,
        "fq did not enforce launch times: span {span} ns"
    );
    assert!(
        rep.packets
            .iter()
            .all(|p| p.departure().1 == DepartureSource::TxSoftwareStamp)
            || !tx.tx_timestamping()
    );
    drop(lab);
}

/// Why the detection exists: on a qdisc that ignores launch times, a train
/// sent with valid SO_TXTIME + SCM_TXTIME (every call succeeds) arrives as a
/// burst instead of spread over its 9.9 ms schedule.
#[test]
fn scm_txtime_is_silently_ignored_without_fq() {
    if !can_run("scm_txtime_is_silently_ignored_without_fq") {
        return;
    }
    let lab = Lab::new();
    let rxs = lab.run_in(&lab.b, || UdpSocket::bind((ADDR_B, 6006)).unwrap());
    let mut rx = ProbeReceiver::new(rxs, 2048).unwrap();
    let tx = lab.run_in(&lab.a, || UdpSocket::bind((ADDR_A, 0)).unwrap());
    tx.connect((ADDR_B, 6006)).unwrap();
    if detect_txtime(tx.as_fd(), ADDR_B.parse().unwrap())
        .unwrap()
        .enforced
    {
        eprintln!("SKIPPED: the egress qdisc enforces SO_TXTIME here");
        return;
    }
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tx);
    let st = libc::sock_txtime {
        clockid: libc::CLOCK_MONOTONIC,
        flags: 0,
    };
    // SAFETY: valid socket and option buffer.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TXTIME,
            (&st as *const libc::sock_txtime).cast(),
            std::mem::size_of::<libc::sock_txtime>() as u32,
        )
    };
    assert_eq!(rc, 0);
    // A preemption of the sending loop itself would spread the train too;
    // retry until the loop ran in well under half the schedule.
    for attempt in 0..3 {
        let t0 = opsel::sys::linux::clock::monotonic_ns();
        let start = t0 + 2_000_000;
        for i in 0..100u64 {
            let mut payload = [0u8; 200];
            opsel::sys::linux::wire::ProbeHeader {
                seq: i as u32,
                train_id: attempt,
                sched_offset_ns: i * 100_000,
                send_mono_ns: 0,
            }
            .encode(&mut payload)
            .unwrap();
            let mut ctrl = [0u64; 4];
            let mut iov = libc::iovec {
                iov_base: payload.as_mut_ptr().cast(),
                iov_len: payload.len(),
            };
            // SAFETY: msghdr with live iov and an 8-aligned control buffer of CMSG_SPACE(8) bytes.
            let rc = unsafe {
                let mut mh: libc::msghdr = std::mem::zeroed();
                mh.msg_iov = &mut iov;
                mh.msg_iovlen = 1;
                mh.msg_control = ctrl.as_mut_ptr().cast();
                mh.msg_controllen = libc::CMSG_SPACE(8) as _;
                let c = libc::CMSG_FIRSTHDR(&mh);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_TXTIME;
                (*c).cmsg_len = libc::CMSG_LEN(8) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u64>(), start + i * 100_000);
                libc::sendmsg(fd, &mh, 0)
            };
            assert_eq!(rc, 200, "sendmsg with SCM_TXTIME succeeds");
        }
        let loop_ns = opsel::sys::linux::clock::monotonic_ns() - t0;
        let mut got = Vec::new();
        rx.recv_train(100, Duration::from_millis(300), &mut got)
            .unwrap();
        assert_eq!(got.len(), 100);
        if loop_ns > 2_000_000 {
            eprintln!("send loop preempted ({loop_ns} ns), retrying");
            continue;
        }
        let span = got[99].rx_mono_ns() - got[0].rx_mono_ns();
        eprintln!("SO_TXTIME train scheduled over 9.9 ms arrived within {span} ns (send loop {loop_ns} ns)");
        assert!(
            span < 9_900_000 / 2,
            "launch times were honoured ({span} ns): is there an fq/etf qdisc?"
        );
        drop(lab);
        return;
    }
    panic!("send loop preempted in 3 attempts; machine too loaded to conclude");
}
