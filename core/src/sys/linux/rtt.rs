//! RTT probes for the passive OPS signal (000 §3.2: "each sample is the mean
//! of 10 ICMP echo requests sent 1 ms apart", one sample per second).
//!
//! * [`IcmpProber`]: ICMP echo. Uses an unprivileged ping socket
//!   (`SOCK_DGRAM`/`IPPROTO_ICMP`) when `net.ipv4.ping_group_range` admits
//!   the process's group, else a raw socket (needs CAP_NET_RAW, e.g. root).
//! * [`UdpEchoProber`] + [`UdpEchoResponder`]: the same over UDP with a tiny
//!   responder, for paths that filter ICMP or hosts without privileges.
//! * [`echo_burst`]: the 000 burst on top of either (pipelined: the next
//!   echo leaves 1 ms after the previous one whether or not it was answered).
//!   It yields raw RTTs and their mean; the 1 Hz series itself is built by
//!   `opsel::series` (the lead's `Aggregator`) from these raw RTTs.
//! * [`tcp_rtt_ns`]: the smoothed RTT of a live TCP connection (`TCP_INFO`).
//!
//! RTT = kernel RX timestamp of the reply (`SO_TIMESTAMPNS`) − CLOCK_MONOTONIC
//! read just before the request's send call, the same method as iputils
//! `ping` (kernel RX stamp minus the send time written into the payload), so
//! user-space wake-up delay on the reply path is not counted.

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::clock::{monotonic_ns, realtime_minus_monotonic_ns, sleep_until_monotonic, timespec_ns};
use super::sockopt::{os_error, set_val};
use super::tcp_info::tcp_info;
use crate::{Error, Result};

const ECHO_MAGIC: [u8; 4] = *b"OPSE";
const PING_GROUP_RANGE: &str = "net.ipv4.ping_group_range";

/// Anything that can send echo requests and receive their replies.
pub trait EchoProbe {
    /// Send echo `seq`; returns the CLOCK_MONOTONIC send time (ns).
    fn send_echo(&mut self, seq: u16) -> Result<u64>;
    /// Wait up to `timeout` for one reply: `(seq, receive time CLOCK_MONOTONIC ns)`.
    fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>>;
}

/// A boxed prober is a prober: the probe a caller picks at run time
/// (`Box<dyn EchoProbe + Send>`) goes straight into [`echo_burst`].
impl<P: EchoProbe + ?Sized> EchoProbe for Box<P> {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        (**self).send_echo(seq)
    }
    fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>> {
        (**self).recv_reply(timeout)
    }
}

/// Which ICMP socket kind an [`IcmpProber`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpSocketKind {
    /// Unprivileged ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP`).
    Ping,
    /// Raw ICMP socket (CAP_NET_RAW).
    Raw,
}

crate::names::named!(IcmpSocketKind { "ping" => IcmpSocketKind::Ping, "raw" => IcmpSocketKind::Raw });

/// Internet checksum (RFC 1071).
pub fn inet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn new_socket(domain: i32, ty: i32, proto: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh fd owned here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Receive one datagram with its kernel RX stamp (CLOCK_REALTIME ns).
fn recv_stamped(
    fd: &OwnedFd,
    buf: &mut [u8],
    timeout: Duration,
) -> Result<Option<(usize, Option<u64>)>> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // ppoll, not poll: poll(2) takes whole ms, so the sub-ms waits between
    // the echoes of a 000 §3.2 burst (1 ms apart) would become a busy loop.
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if rc <= 0 {
        return Ok(None);
    }
    let mut ctrl = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: zeroed msghdr, then pointers to live locals.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctrl.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&ctrl) as _;
    // SAFETY: mh describes live buffers.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut mh, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
            return Ok(None);
        }
        // ICMP errors (e.g. port unreachable) are reported here on UDP; not a reply.
        if e.raw_os_error() == Some(libc::ECONNREFUSED) {
            return Ok(None);
        }
        return Err(os_error("recvmsg (echo reply)", fd.as_fd(), e));
    }
    let mut rt = None;
    // SAFETY: walking cmsgs the kernel wrote.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                rt = Some(timespec_ns(&ts));
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Ok(Some((n as usize, rt)))
}

fn to_mono(rt: Option<u64>, rt_off: i128) -> u64 {
    match rt {
        Some(r) => (r as i128 - rt_off).max(0) as u64,
        None => monotonic_ns(),
    }
}

/// ICMP echo prober toward one IPv4 address (ICMP) or IPv6 address (ICMPv6).
/// The socket is created in the network namespace of the calling thread.
pub struct IcmpProber {
    fd: OwnedFd,
    kind: IcmpSocketKind,
    dst: IpAddr,
    ident: u16,
    rt_off: i128,
    buf: Vec<u8>,
}

static NEXT_IDENT: AtomicU16 = AtomicU16::new(0);

impl IcmpProber {
    /// Open a ping socket if allowed, else a raw socket; error naming
    /// `net.ipv4.ping_group_range` when neither is permitted.
    pub fn new(dst: Ipv4Addr) -> Result<IcmpProber> {
        Self::new_ip(IpAddr::V4(dst))
    }

    /// Like [`IcmpProber::new`] for either family: ICMPv6 echo (RFC 4443 §4)
    /// toward an IPv6 address. Linux ping sockets serve both families under
    /// the one sysctl `net.ipv4.ping_group_range`.
    pub fn new_ip(dst: IpAddr) -> Result<IcmpProber> {
        let (domain, proto) = family(dst);
        let (fd, kind) = match new_socket(domain, libc::SOCK_DGRAM, proto) {
            Ok(fd) => (fd, IcmpSocketKind::Ping),
            Err(e1) => match new_socket(domain, libc::SOCK_RAW, proto) {
                Ok(fd) => (fd, IcmpSocketKind::Raw),
                Err(e2) => {
                    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
                        .unwrap_or_default();
                    return Err(Error::Permission(format!(
                        "cannot open an ICMP socket: ping socket: {e1}; raw socket: {e2}. \
                         Add this process's group to the sysctl {PING_GROUP_RANGE} (now {:?}), \
                         run with CAP_NET_RAW, or use the UDP echo prober",
                        range.trim()
                    )));
                }
            },
        };
        Self::with_socket(fd, kind, dst)
    }

    /// Force the socket kind (tests, or to avoid the raw socket's extra filtering).
    pub fn with_kind(dst: Ipv4Addr, kind: IcmpSocketKind) -> Result<IcmpProber> {
        Self::with_kind_ip(IpAddr::V4(dst), kind)
    }

    /// [`IcmpProber::with_kind`] for either family.
    pub fn with_kind_ip(dst: IpAddr, kind: IcmpSocketKind) -> Result<IcmpProber> {
        let ty = match kind {
            IcmpSocketKind::Ping => libc::SOCK_DGRAM,
            IcmpSocketKind::Raw => libc::SOCK_RAW,
        };
        let (domain, proto) = family(dst);
        let fd = new_socket(domain, ty, proto).map_err(|e| match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => Error::Permission(format!(
                "cannot open a {kind:?} ICMP socket: {e}; for Ping add the group to {PING_GROUP_RANGE}, for Raw run with CAP_NET_RAW"
            )),
            _ => Error::io(format!("open {kind:?} ICMP socket"), e),
        })?;
        Self::with_socket(fd, kind, dst)
    }

    fn with_socket(fd: OwnedFd, kind: IcmpSocketKind, dst: IpAddr) -> Result<IcmpProber> {
        set_val(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            "setsockopt(SO_TIMESTAMPNS)",
            1 as libc::c_int,
        )?;
        let rc = match dst {
            IpAddr::V4(a) => {
                let sa = sockaddr_in(SocketAddrV4::new(a, 0));
                // SAFETY: valid sockaddr_in.
                unsafe {
                    libc::connect(
                        fd.as_raw_fd(),
                        (&sa as *const libc::sockaddr_in).cast(),
                        std::mem::size_of_val(&sa) as u32,
                    )
                }
            }
            IpAddr::V6(a) => {
                let sa = sockaddr_in6(SocketAddrV6::new(a, 0, 0, 0));
                // SAFETY: valid sockaddr_in6.
                unsafe {
                    libc::connect(
                        fd.as_raw_fd(),
                        (&sa as *const libc::sockaddr_in6).cast(),
                        std::mem::size_of_val(&sa) as u32,
                    )
                }
            }
        };
        if rc != 0 {
            return Err(os_error(
                &format!("connect ICMP socket to {dst}"),
                fd.as_fd(),
                io::Error::last_os_error(),
            ));
        }
        let ident = match kind {
            // The kernel owns the identifier of a ping socket (its "port").
            IcmpSocketKind::Ping => {
                // sockaddr_in and sockaddr_in6 both keep the port (here the
                // echo identifier) right after the family.
                // SAFETY: zeroed sockaddr_in6 out-buffer, large enough for either family.
                let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of_val(&sa) as u32;
                // SAFETY: valid out-buffers.
                unsafe {
                    libc::getsockname(
                        fd.as_raw_fd(),
                        (&mut sa as *mut libc::sockaddr_in6).cast(),
                        &mut len,
                    )
                };
                u16::from_be(sa.sin6_port)
            }
            IcmpSocketKind::Raw => (std::process::id() as u16)
                .wrapping_mul(31)
                .wrapping_add(NEXT_IDENT.fetch_add(1, Ordering::Relaxed)),
        };
        Ok(IcmpProber {
            fd,
            kind,
            dst,
            ident,
            rt_off: realtime_minus_monotonic_ns(),
            buf: vec![0u8; 2048],
        })
    }

    /// Socket kind in use.
    pub fn kind(&self) -> IcmpSocketKind {
        self.kind
    }

    /// Destination address.
    pub fn destination(&self) -> IpAddr {
        self.dst
    }
}

/// Socket domain and protocol of ICMP echo toward `dst`.
fn family(dst: IpAddr) -> (i32, i32) {
    match dst {
        IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP),
        IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
    }
}

/// ICMP / ICMPv6 echo request and reply types (RFC 792, RFC 4443 §4).
const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;

fn sockaddr_in6(a: SocketAddrV6) -> libc::sockaddr_in6 {
    // SAFETY: zeroed sockaddr_in6 is valid.
    let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as u16;
    sa.sin6_port = a.port().to_be();
    sa.sin6_addr.s6_addr = a.ip().octets();
    sa.sin6_scope_id = a.scope_id();
    sa
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: zeroed sockaddr_in is valid.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as u16;
    sa.sin_port = a.port().to_be();
    sa.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
    sa
}

impl EchoProbe for IcmpProber {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        // type 8, code 0, checksum, id, seq, then magic + send stamp (like ping's timeval).
        let v6 = self.dst.is_ipv6();
        let mut pkt = [0u8; 24];
        pkt[0] = if v6 { ECHO_REQUEST_V6 } else { ECHO_REQUEST_V4 };
        pkt[4..6].copy_from_slice(&self.ident.to_be_bytes());
        pkt[6..8].copy_from_slice(&seq.to_be_bytes());
        pkt[8..12].copy_from_slice(&ECHO_MAGIC);
        let t = monotonic_ns();
        pkt[12..20].copy_from_slice(&t.to_be_bytes());
        // ICMPv6's checksum covers a pseudo-header the kernel fills in; it
        // computes the checksum itself on ping and raw ICMPv6 sockets (RFC 3542 §3.1).
        if !v6 {
            let ck = inet_checksum(&pkt);
            pkt[2..4].copy_from_slice(&ck.to_be_bytes());
        }
        // SAFETY: pkt is valid for its length; the socket is connected.
        let rc = unsafe { libc::send(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len(), 0) };
        if rc < 0 {
            return Err(os_error(
                &format!("send ICMP echo to {}", self.dst),
                self.fd.as_fd(),
                io::Error::last_os_error(),
            ));
        }
        Ok(t)
    }

    fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>> {
        let end = monotonic_ns() + timeout.as_nanos() as u64;
        loop {
            let left = end.saturating_sub(monotonic_ns());
            let Some((n, rt)) = recv_stamped(&self.fd, &mut self.buf, Duration::from_nanos(left))?
            else {
                return Ok(None);
            };
            let mut p = &self.buf[..n];
            let v6 = self.dst.is_ipv6();
            // Raw ICMPv6 sockets deliver no IP header (RFC 3542 §3); raw ICMP does.
            if self.kind == IcmpSocketKind::Raw && !v6 {
                // Raw sockets deliver the IP header; skip it (IHL words).
                let ihl = usize::from(p.first().copied().unwrap_or(0) & 0x0f) * 4;
                if ihl < 20 || p.len() < ihl + 8 {
                    continue;
                }
                p = &p[ihl..];
            }
            let reply = if v6 { ECHO_REPLY_V6 } else { ECHO_REPLY_V4 };
            if p.len() < 20 || p[0] != reply || p[8..12] != ECHO_MAGIC {
                continue; // not an echo reply of ours (raw sockets see all ICMP)
            }
            let id = u16::from_be_bytes([p[4], p[5]]);
            if self.kind == IcmpSocketKind::Raw && id != self.ident {
                continue;
            }
            let seq = u16::from_be_bytes([p[6], p[7]]);
            return Ok(Some((seq, to_mono(rt, self.rt_off))));
        }
        // Unreachable: the loop returns.
    }
}

/// Length of an opsel UDP echo datagram (magic, seq, padding, send time).
pub const ECHO_LEN: usize = 16;
/// Most echoes a [`UdpEchoResponder`] answers per second, all peers together
/// (a prober sends 10 per second: 000 §3.2 bursts), and its burst allowance.
pub const ECHO_MAX_PER_S: u64 = 2_000;
const ECHO_BURST: u64 = 200;
/// Most delayed echoes a responder holds at once (2 KiB each).
pub const ECHO_QUEUE_MAX: usize = 1024;

/// An opsel echo request: exactly [`ECHO_LEN`] bytes starting with the magic.
pub fn is_echo_request(b: &[u8]) -> bool {
    b.len() == ECHO_LEN && b[..4] == ECHO_MAGIC
}

/// Token bucket for the responder's replies.
struct EchoLimiter {
    tokens: u64,
    last_ns: u64,
}

impl EchoLimiter {
    fn new(now_ns: u64) -> Self {
        EchoLimiter {
            tokens: ECHO_BURST,
            last_ns: now_ns,
        }
    }

    fn admit(&mut self, now_ns: u64) -> bool {
        let per_token_ns = 1_000_000_000 / ECHO_MAX_PER_S;
        let earned = now_ns.saturating_sub(self.last_ns) / per_token_ns;
        if earned > 0 {
            self.tokens = (self.tokens + earned).min(ECHO_BURST);
            self.last_ns += earned * per_token_ns;
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

/// UDP echo prober: sends opsel echo datagrams to a [`UdpEchoResponder`].
pub struct UdpEchoProber {
    fd: OwnedFd,
    rt_off: i128,
    buf: Vec<u8>,
}

impl UdpEchoProber {
    /// Connect `sock` to the responder at `dst`.
    pub fn new(sock: UdpSocket, dst: SocketAddr) -> Result<UdpEchoProber> {
        sock.connect(dst)
            .map_err(|e| Error::io(format!("connect UDP echo prober to {dst}"), e))?;
        let fd: OwnedFd = sock.into();
        set_val(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            "setsockopt(SO_TIMESTAMPNS)",
            1 as libc::c_int,
        )?;
        Ok(UdpEchoProber {
            fd,
            rt_off: realtime_minus_monotonic_ns(),
            buf: vec![0u8; 2048],
        })
    }
}

impl EchoProbe for UdpEchoProber {
    fn send_echo(&mut self, seq: u16) -> Result<u64> {
        let mut pkt = [0u8; ECHO_LEN];
        pkt[0..4].copy_from_slice(&ECHO_MAGIC);
        pkt[4..6].copy_from_slice(&seq.to_be_bytes());
        let t = monotonic_ns();
        pkt[8..16].copy_from_slice(&t.to_be_bytes());
        // SAFETY: valid buffer, connected socket.
        let rc = unsafe { libc::send(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len(), 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ECONNREFUSED) {
                // An earlier echo drew a port unreachable; this one was not sent: count it lost.
                return Ok(t);
            }
            return Err(os_error("send UDP echo", self.fd.as_fd(), e));
        }
        Ok(t)
    }

    fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>> {
        let end = monotonic_ns() + timeout.as_nanos() as u64;
        loop {
            let left = end.saturating_sub(monotonic_ns());
            let Some((n, rt)) = recv_stamped(&self.fd, &mut self.buf, Duration::from_nanos(left))?
            else {
                return Ok(None);
            };
            let p = &self.buf[..n];
            if p.len() < 16 || p[0..4] != ECHO_MAGIC {
                continue;
            }
            return Ok(Some((
                u16::from_be_bytes([p[4], p[5]]),
                to_mono(rt, self.rt_off),
            )));
        }
    }
}

/// Echoes opsel echo datagrams ([`is_echo_request`]) back to their sender
/// from a background thread, optionally after a fixed `delay` (a user-space
/// delay line for tests on veth, where the bare RTT is tens of µs). Stops
/// when dropped. It faces whatever reaches its port: other datagrams are
/// dropped, replies are never larger than requests (no amplification), at
/// most [`ECHO_MAX_PER_S`] per second are answered and at most
/// [`ECHO_QUEUE_MAX`] delayed replies are held.
pub struct UdpEchoResponder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<u64>>>,
    local: SocketAddr,
}

impl UdpEchoResponder {
    /// Start echoing on `sock` (already bound).
    pub fn spawn(sock: UdpSocket, delay: Duration) -> Result<UdpEchoResponder> {
        let local = sock
            .local_addr()
            .map_err(|e| Error::io("UDP echo responder local_addr", e))?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))
            .map_err(|e| Error::io("UDP echo responder set_read_timeout", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let delay_ns = delay.as_nanos() as u64;
        let thread = std::thread::spawn(move || -> Result<u64> {
            // 1 ns timer slack: the default 50 µs would add to the configured delay.
            // SAFETY: prctl on this thread only.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            let mut queue: VecDeque<(u64, usize, SocketAddr, [u8; 2048])> = VecDeque::new();
            let mut echoed = 0u64;
            let mut buf = [0u8; 2048];
            let mut limiter = EchoLimiter::new(monotonic_ns());
            while !stop2.load(Ordering::Relaxed) {
                // Send what is due; then wait for the next packet at most until the next due time.
                while let Some(&(due, n, from, ref data)) = queue.front() {
                    if monotonic_ns() < due {
                        break;
                    }
                    let _ = sock.send_to(&data[..n], from);
                    echoed += 1;
                    queue.pop_front();
                }
                if let Some(&(due, ..)) = queue.front() {
                    let wait = due.saturating_sub(monotonic_ns());
                    if wait < 100_000 {
                        sleep_until_monotonic(due);
                        continue;
                    }
                    let _ = sock.set_read_timeout(Some(Duration::from_nanos(wait.max(1000))));
                } else {
                    let _ = sock.set_read_timeout(Some(Duration::from_millis(20)));
                }
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        // Anyone can reach this port: answer only opsel echoes
                        // (so a reply is never larger than its request), at a
                        // bounded rate, with a bounded queue.
                        if !is_echo_request(&buf[..n])
                            || from.port() == 0
                            || !limiter.admit(monotonic_ns())
                        {
                            continue;
                        }
                        if delay_ns == 0 {
                            let _ = sock.send_to(&buf[..n], from);
                            echoed += 1;
                        } else if queue.len() < ECHO_QUEUE_MAX {
                            queue.push_back((monotonic_ns() + delay_ns, n, from, buf));
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
                    Err(e) => return Err(Error::io("UDP echo responder recv_from", e)),
                }
            }
            Ok(echoed)
        });
        Ok(UdpEchoResponder {
            stop,
            thread: Some(thread),
            local,
        })
    }

    /// Address the responder listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stop and return how many datagrams were echoed.
    pub fn stop(mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(Error::Unsupported(
                "UDP echo responder thread panicked".into(),
            )),
        }
    }
}

impl Drop for UdpEchoResponder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Settings of an echo burst. `Default` is 000 §3.2: 10 echoes 1 ms apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BurstConfig {
    pub count: u16,
    pub interval_ns: u64,
    /// How long to wait for replies after the last echo.
    pub timeout_ns: u64,
}

impl Default for BurstConfig {
    fn default() -> Self {
        BurstConfig {
            count: 10,
            interval_ns: 1_000_000,
            timeout_ns: 1_000_000_000,
        }
    }
}

/// What a burst fired every period leaves free before the next one is due
/// ([`BurstConfig::timeout_within_ns`]).
pub const NEXT_BURST_GUARD_NS: u64 = 2_000_000;

impl BurstConfig {
    /// From the first echo to the last one sent.
    pub fn span_ns(&self) -> u64 {
        u64::from(self.count.saturating_sub(1)).saturating_mul(self.interval_ns)
    }

    /// The longest reply wait for bursts fired every `period_ns`: replies
    /// are awaited until [`NEXT_BURST_GUARD_NS`] before the next burst is
    /// due, so a burst never delays the next one (an echo later than that is
    /// lost, not late): 89, 189 and 989 ms at 100 ms, 200 ms and 1 s with
    /// 10 echoes 1 ms apart. The netlab recorder (`opsel lab collect`) waits
    /// this long and the live OPS driver at most this long.
    pub fn timeout_within_ns(&self, period_ns: u64) -> u64 {
        period_ns.saturating_sub(self.span_ns().saturating_add(NEXT_BURST_GUARD_NS))
    }
}

/// One burst: raw echo RTTs (None = no reply) and their mean.
#[derive(Debug, Clone, PartialEq)]
pub struct BurstSample {
    /// CLOCK_MONOTONIC of the first echo (ns).
    pub start_mono_ns: u64,
    pub rtts_ns: Vec<Option<u64>>,
}

impl BurstSample {
    /// Mean RTT over answered echoes (ns); `None` if none was answered.
    /// 000 §3.2 averages the 10 echoes; lost echoes are left out, not counted as 0.
    pub fn mean_rtt_ns(&self) -> Option<f64> {
        let got: Vec<u64> = self.rtts_ns.iter().flatten().copied().collect();
        (!got.is_empty()).then(|| got.iter().map(|&r| r as f64).sum::<f64>() / got.len() as f64)
    }

    /// Mean RTT in ms (the unit of 000's series).
    pub fn mean_rtt_ms(&self) -> Option<f64> {
        self.mean_rtt_ns().map(|ns| ns / 1e6)
    }

    /// Echoes without a reply.
    pub fn lost(&self) -> usize {
        self.rtts_ns.iter().filter(|r| r.is_none()).count()
    }

    /// Each echo's RTT in ms, NaN for no reply (the bindings' array form).
    pub fn rtts_ms(&self) -> impl Iterator<Item = f64> + '_ {
        self.rtts_ns
            .iter()
            .map(|r| r.map_or(f64::NAN, |ns| ns as f64 / 1e6))
    }
}

/// An ICMP or UDP echo prober with its next sequence number: what the Python,
/// Node and C probers hold, so that consecutive bursts never reuse a number.
pub struct EchoProber {
    probe: AnyEchoProbe,
    next_seq: u16,
}

enum AnyEchoProbe {
    Icmp(IcmpProber),
    Udp(UdpEchoProber),
}

impl EchoProber {
    /// ICMP echo toward `dst` (see [`IcmpProber::new`]).
    pub fn icmp(dst: Ipv4Addr) -> Result<Self> {
        Ok(Self::with(AnyEchoProbe::Icmp(IcmpProber::new(dst)?)))
    }

    /// UDP echo toward `dst` from a socket bound for its family.
    pub fn udp(dst: SocketAddr) -> Result<Self> {
        let sock = super::addr::bind_udp(None, Some(dst.ip()))?;
        Ok(Self::with(AnyEchoProbe::Udp(UdpEchoProber::new(
            sock, dst,
        )?)))
    }

    fn with(probe: AnyEchoProbe) -> Self {
        EchoProber { probe, next_seq: 0 }
    }

    /// The ICMP socket kind, `None` for UDP.
    pub fn icmp_kind(&self) -> Option<IcmpSocketKind> {
        match &self.probe {
            AnyEchoProbe::Icmp(p) => Some(p.kind()),
            AnyEchoProbe::Udp(_) => None,
        }
    }

    /// One burst ([`echo_burst`]) with the next `cfg.count` sequence numbers.
    pub fn burst(&mut self, cfg: BurstConfig) -> Result<BurstSample> {
        let seq0 = self.next_seq;
        self.next_seq = seq0.wrapping_add(cfg.count);
        match &mut self.probe {
            AnyEchoProbe::Icmp(p) => echo_burst(p, cfg, seq0),
            AnyEchoProbe::Udp(p) => echo_burst(p, cfg, seq0),
        }
    }
}

/// Send `cfg.count` echoes `cfg.interval_ns` apart (absolute schedule, not
/// waiting for replies) and collect replies until all arrived or
/// `cfg.timeout_ns` after the last send. Sequence numbers start at `seq0`.
pub fn echo_burst(probe: &mut impl EchoProbe, cfg: BurstConfig, seq0: u16) -> Result<BurstSample> {
    if cfg.count == 0 {
        return Err(Error::invalid("echo burst count 0; 000 §3.2 uses 10"));
    }
    if cfg.interval_ns > 10_000_000_000 || cfg.timeout_ns > 60_000_000_000 {
        return Err(Error::invalid(format!(
            "echo burst interval {} ns (max 10 s) or timeout {} ns (max 60 s) out of range",
            cfg.interval_ns, cfg.timeout_ns
        )));
    }
    let n = usize::from(cfg.count);
    let mut sent = vec![0u64; n];
    let mut rtts = vec![None; n];
    let mut answered = 0usize;
    let start = monotonic_ns();
    let record = |reply: Option<(u16, u64)>,
                  sent: &[u64],
                  rtts: &mut [Option<u64>],
                  answered: &mut usize| {
        if let Some((seq, rx)) = reply {
            let i = seq.wrapping_sub(seq0) as usize;
            if i < n && sent[i] != 0 && rtts[i].is_none() {
                rtts[i] = Some(rx.saturating_sub(sent[i]));
                *answered += 1;
            }
        }
    };
    for i in 0..n {
        let due = start + i as u64 * cfg.interval_ns;
        // Collect replies while waiting for the next send slot.
        loop {
            let now = monotonic_ns();
            if now >= due {
                break;
            }
            let left = due - now;
            if left < 200_000 {
                sleep_until_monotonic(due);
                break;
            }
            let r = probe.recv_reply(Duration::from_nanos(left - 100_000))?;
            record(r, &sent, &mut rtts, &mut answered);
        }
        sent[i] = probe.send_echo(seq0.wrapping_add(i as u16))?;
    }
    let end = monotonic_ns() + cfg.timeout_ns;
    while answered < n {
        let now = monotonic_ns();
        if now >= end {
            break;
        }
        let r = probe.recv_reply(Duration::from_nanos(end - now))?;
        if r.is_none() {
            continue;
        }
        record(r, &sent, &mut rtts, &mut answered);
    }
    Ok(BurstSample {
        start_mono_ns: start,
        rtts_ns: rtts,
    })
}

/// Smoothed RTT of a live TCP connection from `TCP_INFO` (ns).
pub fn tcp_rtt_ns(fd: impl AsFd) -> Result<u64> {
    Ok(tcp_info(fd)?.rtt_ns())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_golden() {
        // RFC 1071 §3 example words 0001 f203 f4f5 f6f7 sum to ddf2, checksum 220d.
        assert_eq!(
            inet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
        // A packet with its checksum in place sums to 0.
        let mut p = [8u8, 0, 0, 0, 0x12, 0x34, 0, 1, 1, 2, 3];
        let c = inet_checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(inet_checksum(&p), 0);
    }

    #[test]
    fn burst_mean_skips_lost() {
        let b = BurstSample {
            start_mono_ns: 0,
            rtts_ns: vec![Some(1_000_000), None, Some(3_000_000)],
        };
        assert_eq!(b.mean_rtt_ns(), Some(2_000_000.0));
        assert_eq!(b.mean_rtt_ms(), Some(2.0));
        assert_eq!(b.lost(), 1);
        assert_eq!(
            BurstSample {
                start_mono_ns: 0,
                rtts_ns: vec![None]
            }
            .mean_rtt_ns(),
            None
        );
    }

    /// A fake echo path with a fixed RTT, to test the burst logic without a network.
    struct Fake {
        rtt_ns: u64,
        pending: VecDeque<(u16, u64)>,
        drop_seq: Option<u16>,
    }

    impl EchoProbe for Fake {
        fn send_echo(&mut self, seq: u16) -> Result<u64> {
            let t = monotonic_ns();
            if Some(seq) != self.drop_seq {
                self.pending.push_back((seq, t + self.rtt_ns));
            }
            Ok(t)
        }
        fn recv_reply(&mut self, timeout: Duration) -> Result<Option<(u16, u64)>> {
            match self.pending.front().copied() {
                Some((s, at)) => {
                    if at > monotonic_ns() + timeout.as_nanos() as u64 {
                        sleep_until_monotonic(monotonic_ns() + timeout.as_nanos() as u64);
                        return Ok(None);
                    }
                    sleep_until_monotonic(at);
                    self.pending.pop_front();
                    Ok(Some((s, at)))
                }
                None => {
                    sleep_until_monotonic(monotonic_ns() + timeout.as_nanos() as u64);
                    Ok(None)
                }
            }
        }
    }

    #[test]
    fn burst_pipelines_longer_than_interval_rtts() {
        // RTT 3 ms > 1 ms interval: echoes must not wait for replies.
        let mut f = Fake {
            rtt_ns: 3_000_000,
            pending: VecDeque::new(),
            drop_seq: Some(104),
        };
        let cfg = BurstConfig {
            timeout_ns: 50_000_000,
            ..Default::default()
        };
        let b = echo_burst(&mut f, cfg, 100).unwrap();
        assert_eq!(b.rtts_ns.len(), 10);
        assert_eq!(b.lost(), 1);
        assert_eq!(b.rtts_ns[4], None);
        for r in b.rtts_ns.iter().flatten() {
            assert_eq!(*r, 3_000_000);
        }
        assert_eq!(b.mean_rtt_ns(), Some(3_000_000.0));
        let e = echo_burst(
            &mut f,
            BurstConfig {
                count: 0,
                ..Default::default()
            },
            0,
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
    }
}
