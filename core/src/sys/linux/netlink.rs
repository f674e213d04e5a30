//! Minimal rtnetlink client: route lookup (RTM_GETROUTE -> output interface)
//! and qdisc dump (RTM_GETQDISC). Used to decide whether SO_TXTIME is
//! enforced on the egress device; we never trust the setsockopt return code
//! (001 §2.4: SO_TXTIME "can be set" on pfifo/tbf/htb but is ignored there).
//!
//! Netlink answers for the network namespace of the calling thread.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::{Error, Result};

const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const TCMSG_LEN: usize = 20;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_ETF_PARMS: u16 = 1;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One qdisc as reported by the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQdisc {
    pub ifindex: i32,
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
    /// For etf: the `clockid` from `TCA_ETF_PARMS`.
    pub etf_clockid: Option<i32>,
}

struct Nl {
    fd: OwnedFd,
    seq: u32,
}

impl Nl {
    fn open() -> Result<Nl> {
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(Error::io(
                "open NETLINK_ROUTE socket",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: fd was just returned by socket(2) and is owned here.
        Ok(Nl {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            seq: 1,
        })
    }

    /// Send one request and collect every reply message body (type, payload)
    /// until NLMSG_DONE (dumps) or the first reply (non-dump).
    fn request(
        &mut self,
        msg_type: u16,
        flags: u16,
        body: &[u8],
        what: &str,
    ) -> Result<Vec<(u16, Vec<u8>)>> {
        self.seq += 1;
        let len = NLMSG_HDRLEN + body.len();
        let mut req = Vec::with_capacity(len);
        req.extend_from_slice(&(len as u32).to_ne_bytes());
        req.extend_from_slice(&msg_type.to_ne_bytes());
        req.extend_from_slice(&(flags | libc::NLM_F_REQUEST as u16).to_ne_bytes());
        req.extend_from_slice(&self.seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        req.extend_from_slice(body);
        // SAFETY: zeroed sockaddr_nl is the kernel address (pid 0).
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: req and sa are valid for the given lengths.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            return Err(Error::io(
                format!("netlink {what}: sendto"),
                io::Error::last_os_error(),
            ));
        }
        let dump = flags & (libc::NLM_F_DUMP as u16) != 0;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buf is valid for its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io(format!("netlink {what}: recv"), e));
            }
            let mut off = 0usize;
            let n = n as usize;
            while off + NLMSG_HDRLEN <= n {
                let mlen =
                    u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap_or([0; 4])) as usize;
                let mtype = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
                let mseq = u32::from_ne_bytes(buf[off + 8..off + 12].try_into().unwrap_or([0; 4]));
                if mlen < NLMSG_HDRLEN || off + mlen > n {
                    return Err(Error::Unsupported(format!(
                        "netlink {what}: malformed reply (len {mlen})"
                    )));
                }
                let payload = &buf[off + NLMSG_HDRLEN..off + mlen];
                off += align4(mlen);
                if mseq != self.seq {
                    continue;
                }
                match i32::from(mtype) {
                    libc::NLMSG_DONE => return Ok(out),
                    libc::NLMSG_ERROR => {
                        let errno = payload
                            .get(0..4)
                            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                            .unwrap_or(0);
                        if errno == 0 {
                            return Ok(out); // ACK
                        }
                        return Err(Error::io(
                            format!("netlink {what}"),
                            io::Error::from_raw_os_error(-errno),
                        ));
                    }
                    _ => out.push((mtype, payload.to_vec())),
                }
                if !dump {
                    return Ok(out);
                }
            }
        }
    }
}

/// Iterate `(type, value)` attributes in `buf`.
fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        if off + 4 > buf.len() {
            return None;
        }
        let len = u16::from_ne_bytes([buf[off], buf[off + 1]]) as usize;
        let ty = u16::from_ne_bytes([buf[off + 2], buf[off + 3]]) & 0x3fff;
        if len < 4 || off + len > buf.len() {
            return None;
        }
        let v = &buf[off + 4..off + len];
        off += align4(len);
        Some((ty, v))
    })
}

/// Output interface index the kernel would use to reach `dst`.
pub fn route_oif(dst: IpAddr) -> Result<u32> {
    let mut nl = Nl::open()?;
    let (family, addr): (u8, Vec<u8>) = match dst {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let mut body = vec![0u8; RTMSG_LEN];
    body[0] = family;
    body[1] = (addr.len() * 8) as u8; // rtm_dst_len
    let alen = 4 + addr.len();
    body.extend_from_slice(&(alen as u16).to_ne_bytes());
    body.extend_from_slice(&RTA_DST.to_ne_bytes());
    body.extend_from_slice(&addr);
    body.resize(align4(body.len()), 0);
    let replies = nl.request(
        libc::RTM_GETROUTE,
        0,
        &body,
        &format!("route lookup for {dst}"),
    )?;
    for (ty, p) in replies {
        if ty != libc::RTM_NEWROUTE || p.len() < RTMSG_LEN {
            continue;
        }
        for (aty, v) in attrs(&p[RTMSG_LEN..]) {
            if aty == RTA_OIF && v.len() >= 4 {
                return Ok(u32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
            }
        }
    }
    Err(Error::Unsupported(format!(
        "no route with an output interface to {dst}"
    )))
}

/// Every qdisc on interface `ifindex`.
pub fn qdiscs(ifindex: u32) -> Result<Vec<RawQdisc>> {
    let mut nl = Nl::open()?;
    let mut body = vec![0u8; TCMSG_LEN];
    body[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    let replies = nl.request(
        libc::RTM_GETQDISC,
        libc::NLM_F_DUMP as u16,
        &body,
        "qdisc dump",
    )?;
    let mut out = Vec::new();
    for (ty, p) in replies {
        if ty != libc::RTM_NEWQDISC || p.len() < TCMSG_LEN {
            continue;
        }
        let ifi = i32::from_ne_bytes([p[4], p[5], p[6], p[7]]);
        if ifi as u32 != ifindex {
            continue;
        }
        let handle = u32::from_ne_bytes([p[8], p[9], p[10], p[11]]);
        let parent = u32::from_ne_bytes([p[12], p[13], p[14], p[15]]);
        let mut kind = String::new();
        let mut opts: &[u8] = &[];
        for (aty, v) in attrs(&p[TCMSG_LEN..]) {
            match aty {
                TCA_KIND => {
                    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
                    kind = String::from_utf8_lossy(&v[..end]).into_owned();
                }
                TCA_OPTIONS => opts = v,
                _ => {}
            }
        }
        let etf_clockid = if kind == "etf" {
            attrs(opts)
                .find(|(t, v)| *t == TCA_ETF_PARMS && v.len() >= 8)
                .map(|(_, v)| i32::from_ne_bytes([v[4], v[5], v[6], v[7]]))
        } else {
            None
        };
        out.push(RawQdisc {
            ifindex: ifi,
            kind,
            handle,
            parent,
            etf_clockid,
        });
    }
    Ok(out)
}

/// Interface name for an index (in the calling thread's namespace).
pub fn ifname(ifindex: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buf has IF_NAMESIZE bytes as required.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("ifindex {ifindex}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated string into buf.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn attrs_golden() {
        // TCA_KIND "fq\0" (len 7, padded to 8) then a 4-byte u32 attribute of type 4.
        let mut b = vec![7, 0, 1, 0, b'f', b'q', 0, 0];
        b.extend_from_slice(&[8, 0, 4, 0, 1, 0, 0, 0]);
        let v: Vec<(u16, Vec<u8>)> = attrs(&b).map(|(t, v)| (t, v.to_vec())).collect();
        assert_eq!(v, vec![(1, b"fq\0".to_vec()), (4, vec![1, 0, 0, 0])]);
    }

    proptest! {
        #[test]
        fn attrs_never_read_out_of_bounds(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut total = 0usize;
            for (_, v) in attrs(&b) {
                total += v.len() + 4;
                prop_assert!(total <= b.len() + 3 * 64);
            }
        }
    }
}
