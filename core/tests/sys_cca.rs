//! CCA listing, errors, and live switching cubic -> bbr -> reno -> cubic
//! mid-transfer on a TCP connection between two test namespaces.
#![cfg(target_os = "linux")]

mod sys_common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use opsel::sys::linux::{allowed_ccas, available_ccas, get_cca, set_cca, tcp_info, TcpInfoSampler};
use opsel::ErrorKind;
use sys_common::{can_run, Fnv, Lab, Stream, ADDR_B};

#[test]
fn lists_available_and_allowed() {
    let avail = available_ccas().unwrap();
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    assert!(
        avail.contains(&default.trim().to_string()),
        "{avail:?} lacks default {default}"
    );
    for a in allowed_ccas().unwrap() {
        assert!(avail.contains(&a), "allowed {a} not in available {avail:?}");
    }
}

#[test]
fn unknown_cca_is_invalid_and_lists_available() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let e = set_cca(&s, "nosuchcca").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("nosuchcca") && msg.contains("available:"),
        "{msg}"
    );
    for a in available_ccas().unwrap() {
        assert!(msg.contains(&a), "{msg} should list {a}");
    }
    // Bad names never reach the kernel.
    for bad in ["", "a/b", "waytoolongccaname16"] {
        assert_eq!(
            set_cca(&s, bad).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
    }
}

#[test]
fn non_tcp_descriptors_are_rejected() {
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let e = set_cca(&u, "cubic").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("not TCP") && e.to_string().contains("SOCK_DGRAM"),
        "{e}"
    );
    assert_eq!(get_cca(&u).unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(tcp_info(&u).unwrap_err().kind(), ErrorKind::InvalidInput);
    let f = std::fs::File::open("/proc/self/stat").unwrap();
    let e = set_cca(&f, "cubic").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(e.to_string().contains("not a socket"), "{e}");
}

#[test]
fn not_allowed_cca_is_permission_error_naming_sysctl() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to drop privileges on one thread");
        return;
    }
    let avail = available_ccas().unwrap();
    let allowed = allowed_ccas().unwrap();
    let Some(target) = avail.iter().find(|a| !allowed.contains(a)).cloned() else {
        eprintln!("SKIPPED: every available CCA is allowed ({allowed:?}); EPERM cannot occur");
        return;
    };
    let other = avail.iter().find(|a| **a != target).cloned().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    // Move away from the target first: asking for the current CCA is a no-op in the kernel.
    set_cca(&s, &other).unwrap();
    let fd = s.as_raw_fd();
    let err = std::thread::spawn(move || {
        // Raw syscall: changes the credentials of this thread only (glibc's
        // setresuid would change every thread). Capabilities are dropped with uid 0.
        // SAFETY: plain syscall with integer arguments.
        let rc = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(rc, 0);
        // SAFETY: fd stays open: the stream outlives this joined thread.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        set_cca(bfd, &target).unwrap_err()
    })
    .join()
    .unwrap();
    assert_eq!(err.kind(), ErrorKind::Permission, "{err}");
    assert!(
        err.to_string()
            .contains("net.ipv4.tcp_allowed_congestion_control"),
        "{err}"
    );
}

#[test]
fn switch_cca_mid_transfer_loses_nothing() {
    if !can_run("switch_cca_mid_transfer_loses_nothing") {
        return;
    }
    let avail = available_ccas().unwrap();
    for need in ["cubic", "bbr", "reno"] {
        if !avail.iter().any(|a| a == need) {
            eprintln!("SKIPPED: {need} not available ({avail:?})");
            return;
        }
    }
    let lab = Lab::new();
    const TOTAL: usize = 24 << 20;
    const CHUNK: usize = 64 << 10;
    let listener = lab.run_in(&lab.b, || TcpListener::bind((ADDR_B, 5201)).unwrap());
    let receiver = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let mut h = Fnv::new();
        let mut buf = vec![0u8; CHUNK];
        let mut n = 0usize;
        loop {
            let k = c.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            n += k;
        }
        (n, h.0)
    });
    let mut s = lab.run_in(&lab.a, || TcpStream::connect((ADDR_B, 5201)).unwrap());
    s.set_write_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    assert_eq!(set_cca(&s, "cubic").unwrap(), "cubic");
    // A 200 Mbit/s pacing cap and a 4 MB send buffer keep ~160 ms of unsent
    // data queued in the socket, so every switch below happens with data in
    // flight even if this thread is preempted on a loaded machine (a bare veth
    // would drain instantly).
    opsel::sys::linux::set_max_pacing_rate(&s, Some(200_000_000)).unwrap();
    let sndbuf: libc::c_int = 4 << 20;
    // SAFETY: valid socket and int option.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (&sndbuf as *const libc::c_int).cast(),
            4,
        )
    };
    assert_eq!(rc, 0);
    let plan = [
        (TOTAL / 4, "bbr"),
        (TOTAL / 2, "reno"),
        (3 * TOTAL / 4, "cubic"),
    ];
    let mut sampler = TcpInfoSampler::new(s.try_clone().unwrap()).unwrap();
    let mut gen = Stream::new(42);
    let mut h = Fnv::new();
    let mut buf = vec![0u8; CHUNK];
    let mut sent = 0usize;
    let mut switched = Vec::new();
    let mut acked_total = 0u64;
    while sent < TOTAL {
        gen.fill(&mut buf);
        s.write_all(&buf).unwrap();
        h.update(&buf);
        sent += CHUNK;
        if let Some(&(_, cca)) = plan.iter().find(|(at, _)| *at == sent) {
            // Data is in flight (socket buffer full of unacked bytes) at each switch.
            let info = tcp_info(s.as_fd()).unwrap();
            assert!(
                info.unacked > 0 || info.notsent_bytes.unwrap_or(0) > 0,
                "nothing in flight at switch to {cca}"
            );
            let back = set_cca(&s, cca).unwrap();
            assert_eq!(back, cca);
            assert_eq!(get_cca(&s).unwrap(), cca);
            switched.push(back);
            if let Some(iv) = sampler.sample().unwrap() {
                acked_total += iv.acked_bytes.unwrap();
                assert!(iv.rtt_ns > 0);
            }
        }
    }
    s.flush().unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let (n, rh) = receiver.join().unwrap();
    assert_eq!(switched, ["bbr", "reno", "cubic"]);
    assert_eq!(n, TOTAL);
    assert_eq!(rh, h.0, "received bytes hash differs from sent bytes hash");
    assert!(acked_total > 0, "sampler saw no acked bytes");
    drop(lab);
}

#[test]
fn raw_fd_numbers() {
    use opsel::sys::linux::with_raw_fd;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let got = with_raw_fd(s.as_raw_fd(), |fd| set_cca(fd, "reno")).unwrap();
    assert_eq!(got, "reno");
    assert_eq!(
        with_raw_fd(-1, |fd| get_cca(fd)).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    // A number that is not open: EBADF, reported as bad input.
    let e = with_raw_fd(1_000_000, |fd| get_cca(fd)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("1000000"), "{e}");
}
