//! Where the driver's RTT echoes go, and the one parser of the probe spec
//! every front end takes (000 §3.2: 10 echoes toward the peer per 1 s sample).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use crate::sys::linux::rtt::{EchoProbe, IcmpProber, UdpEchoProber};
use crate::{Error, Result};

/// Where the RTT probe goes (000 §3.2: toward the peer).
pub enum RttSource {
    /// ICMP echo to the peer, ICMPv6 for an IPv6 peer (ping socket if
    /// `ping_group_range` admits the process, else a raw socket: root /
    /// CAP_NET_RAW).
    Icmp(IpAddr),
    /// UDP echo to a [`crate::sys::linux::rtt::UdpEchoResponder`], e.g. the one `opsel
    /// recv` runs on its listen port. Works without privileges.
    UdpEcho(SocketAddr),
    /// Any echo prober (tests, other transports).
    Custom(Box<dyn EchoProbe + Send>),
}

impl std::fmt::Debug for RttSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RttSource::Icmp(a) => write!(f, "Icmp({a})"),
            RttSource::UdpEcho(a) => write!(f, "UdpEcho({a})"),
            RttSource::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The probe spec the CLI and the bindings take: `icmp:IP` for ICMP echo
/// (ICMPv6 for an IPv6 address, bare or in brackets),
/// `HOST:PORT` or `udp:HOST:PORT` for UDP echo (e.g. toward `opsel recv`'s
/// listen port). One parser so every front end gives the same errors.
impl std::str::FromStr for RttSource {
    type Err = Error;

    fn from_str(probe: &str) -> Result<Self> {
        if let Some(ip) = probe.strip_prefix("icmp:") {
            let bare = ip
                .strip_prefix('[')
                .and_then(|s| s.strip_suffix(']'))
                .unwrap_or(ip);
            let a: IpAddr = bare.parse().map_err(|_| {
                Error::invalid(format!(
                    "probe {probe:?}: {ip:?} is not an IP address; write e.g. \"icmp:10.0.0.2\" or \"icmp:fd00::2\""
                ))
            })?;
            return Ok(RttSource::Icmp(a));
        }
        let addr = probe.strip_prefix("udp:").unwrap_or(probe);
        let a: SocketAddr = addr.parse().map_err(|_| {
            Error::invalid(format!(
                "probe {probe:?} is not an address with a port; write e.g. \"127.0.0.1:9000\" (UDP echo) or \"icmp:10.0.0.2\""
            ))
        })?;
        Ok(RttSource::UdpEcho(a))
    }
}

impl RttSource {
    /// Open the prober now, in the calling thread's network namespace.
    pub(super) fn open(self) -> Result<Box<dyn EchoProbe + Send>> {
        Ok(match self {
            RttSource::Icmp(a) => Box::new(IcmpProber::new_ip(a)?),
            RttSource::UdpEcho(a) => {
                let bind: SocketAddr = if a.is_ipv4() {
                    (Ipv4Addr::UNSPECIFIED, 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let sock = UdpSocket::bind(bind)
                    .map_err(|e| Error::io(format!("bind UDP echo prober toward {a}"), e))?;
                Box::new(UdpEchoProber::new(sock, a)?)
            }
            RttSource::Custom(p) => p,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_source_parses_the_probe_spec() {
        let icmp: RttSource = "icmp:10.0.0.2".parse().unwrap();
        assert!(matches!(icmp, RttSource::Icmp(a) if a == IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))));
        for spec in ["icmp:fd00::2", "icmp:[fd00::2]"] {
            let v6: RttSource = spec.parse().unwrap();
            assert!(
                matches!(v6, RttSource::Icmp(IpAddr::V6(a)) if a == "fd00::2".parse::<std::net::Ipv6Addr>().unwrap())
            );
        }
        assert!("icmp:10.0.0".parse::<RttSource>().is_err());
        for spec in ["127.0.0.1:9000", "udp:127.0.0.1:9000"] {
            let udp: RttSource = spec.parse().unwrap();
            assert!(matches!(udp, RttSource::UdpEcho(a) if a == "127.0.0.1:9000".parse().unwrap()));
        }
        let v6: RttSource = "[::1]:9000".parse().unwrap();
        assert!(matches!(v6, RttSource::UdpEcho(a) if a.is_ipv6()));
        let e = "icmp:host".parse::<RttSource>().unwrap_err().to_string();
        assert!(e.contains("\"host\" is not an IP address"), "{e}");
        for bad in ["10.0.0.2", "udp:", "", "icmp:10.0.0.2:5"] {
            let e = bad.parse::<RttSource>().unwrap_err().to_string();
            assert!(
                e.contains("probe") && e.contains("write e.g."),
                "{bad:?}: {e}"
            );
        }
    }
}
