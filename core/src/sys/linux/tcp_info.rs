//! `TCP_INFO` snapshots and a sampler that turns consecutive snapshots into
//! per-interval throughput and RTT (the passive RTT source of 000 §3.2 and
//! the throughput signal the OPS steady phase reports).
//!
//! The kernel copies `min(optlen, sizeof(struct tcp_info))` bytes and returns
//! the length, so an older kernel returns a shorter struct. We parse by byte
//! offset (`include/uapi/linux/tcp.h`, Linux 6.x layout) and give `None` for
//! every field that lies beyond the returned length, never garbage.

use std::os::fd::AsFd;

use super::clock::monotonic_ns;
use super::sockopt::{get_raw, require_tcp};
use crate::Result;

/// Size of `struct tcp_info` in the Linux 6.x layout parsed here (up to `tcpi_total_rto_time`).
pub const TCP_INFO_LEN: usize = 248;

/// `tcpi_ca_state` values (`enum tcp_ca_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaState {
    Open,
    Disorder,
    Cwr,
    Recovery,
    Loss,
    Other(u8),
}

impl CaState {
    /// `"open"`, `"disorder"`, `"cwr"`, `"recovery"`, `"loss"` or `"other"`.
    pub fn name(self) -> &'static str {
        match self {
            CaState::Open => "open",
            CaState::Disorder => "disorder",
            CaState::Cwr => "cwr",
            CaState::Recovery => "recovery",
            CaState::Loss => "loss",
            CaState::Other(_) => "other",
        }
    }

    fn from_u8(v: u8) -> CaState {
        match v {
            0 => CaState::Open,
            1 => CaState::Disorder,
            2 => CaState::Cwr,
            3 => CaState::Recovery,
            4 => CaState::Loss,
            x => CaState::Other(x),
        }
    }
}

/// One `TCP_INFO` snapshot. Fields present in every Linux since 2.6 are plain
/// values; later additions are `Option`, `None` when the kernel's struct is
/// shorter than the field's end. Times are µs as the kernel reports them
/// (suffix `_us`); rates are bytes per second (`_bytes_per_s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct TcpInfo {
    /// Number of bytes the kernel returned.
    pub len: usize,
    pub state: u8,
    pub ca_state_raw: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub snd_wscale: u8,
    pub rcv_wscale: u8,
    pub delivery_rate_app_limited: bool,
    pub rto_us: u32,
    pub ato_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub last_data_sent_ms: u32,
    pub last_ack_sent_ms: u32,
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    /// Smoothed RTT (srtt) in µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_ssthresh: u32,
    /// Congestion window in segments.
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt_us: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate_bytes_per_s: Option<u64>,
    pub max_pacing_rate_bytes_per_s: Option<u64>,
    pub bytes_acked: Option<u64>,
    pub bytes_received: Option<u64>,
    pub segs_out: Option<u32>,
    pub segs_in: Option<u32>,
    pub notsent_bytes: Option<u32>,
    pub min_rtt_us: Option<u32>,
    pub data_segs_in: Option<u32>,
    pub data_segs_out: Option<u32>,
    pub delivery_rate_bytes_per_s: Option<u64>,
    pub busy_time_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    pub delivered: Option<u32>,
    pub delivered_ce: Option<u32>,
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    pub dsack_dups: Option<u32>,
    pub reord_seen: Option<u32>,
    pub rcv_ooopack: Option<u32>,
    pub snd_wnd: Option<u32>,
    pub rcv_wnd: Option<u32>,
    pub rehash: Option<u32>,
    pub total_rto: Option<u16>,
    pub total_rto_recoveries: Option<u16>,
    pub total_rto_time_ms: Option<u32>,
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8(&self, off: usize) -> u8 {
        self.0.get(off).copied().unwrap_or(0)
    }
    fn u16o(&self, off: usize) -> Option<u16> {
        let b = self.0.get(off..off + 2)?;
        Some(u16::from_ne_bytes([b[0], b[1]]))
    }
    fn u32o(&self, off: usize) -> Option<u32> {
        let b = self.0.get(off..off + 4)?;
        Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u32(&self, off: usize) -> u32 {
        self.u32o(off).unwrap_or(0)
    }
    fn u64o(&self, off: usize) -> Option<u64> {
        let b = self.0.get(off..off + 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_ne_bytes(a))
    }
}

impl TcpInfo {
    /// Parse the bytes the kernel returned (any length, including 0 or more
    /// than [`TCP_INFO_LEN`]). Fields beyond the end are 0 / `None`.
    pub fn parse(bytes: &[u8]) -> TcpInfo {
        let r = Reader(bytes);
        let wscale = r.u8(6);
        TcpInfo {
            len: bytes.len(),
            state: r.u8(0),
            ca_state_raw: r.u8(1),
            retransmits: r.u8(2),
            probes: r.u8(3),
            backoff: r.u8(4),
            options: r.u8(5),
            // Bitfields on little/big endian differ; Linux x86/arm64 are
            // little-endian where snd_wscale is the low nibble.
            snd_wscale: wscale & 0x0f,
            rcv_wscale: wscale >> 4,
            delivery_rate_app_limited: r.u8(7) & 1 == 1,
            rto_us: r.u32(8),
            ato_us: r.u32(12),
            snd_mss: r.u32(16),
            rcv_mss: r.u32(20),
            unacked: r.u32(24),
            sacked: r.u32(28),
            lost: r.u32(32),
            retrans: r.u32(36),
            last_data_sent_ms: r.u32(44),
            last_ack_sent_ms: r.u32(48),
            last_data_recv_ms: r.u32(52),
            last_ack_recv_ms: r.u32(56),
            pmtu: r.u32(60),
            rcv_ssthresh: r.u32(64),
            rtt_us: r.u32(68),
            rttvar_us: r.u32(72),
            snd_ssthresh: r.u32(76),
            snd_cwnd: r.u32(80),
            advmss: r.u32(84),
            reordering: r.u32(88),
            rcv_rtt_us: r.u32(92),
            rcv_space: r.u32(96),
            total_retrans: r.u32(100),
            pacing_rate_bytes_per_s: r.u64o(104),
            max_pacing_rate_bytes_per_s: r.u64o(112),
            bytes_acked: r.u64o(120),
            bytes_received: r.u64o(128),
            segs_out: r.u32o(136),
            segs_in: r.u32o(140),
            notsent_bytes: r.u32o(144),
            min_rtt_us: r.u32o(148),
            data_segs_in: r.u32o(152),
            data_segs_out: r.u32o(156),
            delivery_rate_bytes_per_s: r.u64o(160),
            busy_time_us: r.u64o(168),
            rwnd_limited_us: r.u64o(176),
            sndbuf_limited_us: r.u64o(184),
            delivered: r.u32o(192),
            delivered_ce: r.u32o(196),
            bytes_sent: r.u64o(200),
            bytes_retrans: r.u64o(208),
            dsack_dups: r.u32o(216),
            reord_seen: r.u32o(220),
            rcv_ooopack: r.u32o(224),
            snd_wnd: r.u32o(228),
            rcv_wnd: r.u32o(232),
            rehash: r.u32o(236),
            total_rto: r.u16o(240),
            total_rto_recoveries: r.u16o(242),
            total_rto_time_ms: r.u32o(244),
        }
    }

    /// Congestion-avoidance state.
    pub fn ca_state(&self) -> CaState {
        CaState::from_u8(self.ca_state_raw)
    }

    /// Smoothed RTT in ns (the unit used inside opsel).
    pub fn rtt_ns(&self) -> u64 {
        u64::from(self.rtt_us) * 1000
    }
}

/// Read `TCP_INFO` from a TCP socket.
pub fn tcp_info(fd: impl AsFd) -> Result<TcpInfo> {
    let fd = fd.as_fd();
    require_tcp(fd, "read TCP_INFO")?;
    let mut buf = [0u8; TCP_INFO_LEN];
    let n = get_raw(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_INFO,
        "getsockopt(TCP_INFO)",
        &mut buf,
    )?;
    Ok(TcpInfo::parse(&buf[..n.min(TCP_INFO_LEN)]))
}

/// What happened on a connection between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct TcpInterval {
    /// Monotonic time of the later snapshot (ns).
    pub at_ns: u64,
    /// Length of the interval (ns), > 0.
    pub interval_ns: u64,
    /// Bytes acknowledged by the peer in the interval (sender view), if the kernel reports it.
    pub acked_bytes: Option<u64>,
    /// Bytes received in the interval (receiver view), if reported.
    pub received_bytes: Option<u64>,
    /// Goodput from `bytes_acked` in bit/s.
    pub acked_rate_bps: Option<f64>,
    /// Receive rate from `bytes_received` in bit/s.
    pub received_rate_bps: Option<f64>,
    /// Smoothed RTT at the end of the interval (ns).
    pub rtt_ns: u64,
    /// RTT variance at the end of the interval (ns).
    pub rttvar_ns: u64,
    /// Minimum RTT seen by the connection (ns), if reported.
    pub min_rtt_ns: Option<u64>,
    /// Retransmitted segments in the interval.
    pub retrans_segs: u32,
    /// Congestion window at the end (segments).
    pub cwnd: u32,
}

impl TcpInterval {
    /// Pure difference of two snapshots; `None` when `cur_ns <= prev_ns`.
    /// Counters that went backwards (a different socket) give `None` fields.
    pub fn between(
        prev: &TcpInfo,
        prev_ns: u64,
        cur: &TcpInfo,
        cur_ns: u64,
    ) -> Option<TcpInterval> {
        let interval_ns = cur_ns.checked_sub(prev_ns).filter(|&d| d > 0)?;
        let delta = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        let rate = |d: Option<u64>| d.map(|d| d as f64 * 8.0 * 1e9 / interval_ns as f64);
        let acked = delta(prev.bytes_acked, cur.bytes_acked);
        let received = delta(prev.bytes_received, cur.bytes_received);
        Some(TcpInterval {
            at_ns: cur_ns,
            interval_ns,
            acked_bytes: acked,
            received_bytes: received,
            acked_rate_bps: rate(acked),
            received_rate_bps: rate(received),
            rtt_ns: cur.rtt_ns(),
            rttvar_ns: u64::from(cur.rttvar_us) * 1000,
            min_rtt_ns: cur.min_rtt_us.map(|v| u64::from(v) * 1000),
            retrans_segs: cur.total_retrans.saturating_sub(prev.total_retrans),
            cwnd: cur.snd_cwnd,
        })
    }
}

/// Polls `TCP_INFO` of one socket and yields [`TcpInterval`]s. It does not
/// own a clock thread: call [`TcpInfoSampler::sample`] at the cadence you want
/// (000 §3.2 uses 1 Hz).
pub struct TcpInfoSampler<F: AsFd> {
    fd: F,
    prev: TcpInfo,
    prev_ns: u64,
}

impl<F: AsFd> TcpInfoSampler<F> {
    /// Take the first snapshot now.
    pub fn new(fd: F) -> Result<Self> {
        let prev = tcp_info(fd.as_fd())?;
        Ok(TcpInfoSampler {
            fd,
            prev,
            prev_ns: monotonic_ns(),
        })
    }

    /// Take a snapshot and return the interval since the previous one
    /// (`None` if no time elapsed on the monotonic clock).
    pub fn sample(&mut self) -> Result<Option<TcpInterval>> {
        let cur = tcp_info(self.fd.as_fd())?;
        let now = monotonic_ns();
        let iv = TcpInterval::between(&self.prev, self.prev_ns, &cur, now);
        if iv.is_some() {
            self.prev = cur;
            self.prev_ns = now;
        }
        Ok(iv)
    }

    /// The last snapshot taken.
    pub fn last(&self) -> &TcpInfo {
        &self.prev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn golden() -> Vec<u8> {
        let mut b = vec![0u8; TCP_INFO_LEN];
        b[0] = 1; // TCP_ESTABLISHED
        b[1] = 3; // Recovery
        b[6] = 0x7a; // rcv 7, snd 10
        b[68..72].copy_from_slice(&1234u32.to_ne_bytes());
        b[80..84].copy_from_slice(&10u32.to_ne_bytes());
        b[104..112].copy_from_slice(&6_250_000u64.to_ne_bytes());
        b[120..128].copy_from_slice(&1_000_000u64.to_ne_bytes());
        b[148..152].copy_from_slice(&900u32.to_ne_bytes());
        b[200..208].copy_from_slice(&1_500_000u64.to_ne_bytes());
        b[244..248].copy_from_slice(&77u32.to_ne_bytes());
        b
    }

    #[test]
    fn parses_golden_layout() {
        let t = TcpInfo::parse(&golden());
        assert_eq!(t.state, 1);
        assert_eq!(t.ca_state(), CaState::Recovery);
        assert_eq!((t.snd_wscale, t.rcv_wscale), (10, 7));
        assert_eq!(t.rtt_us, 1234);
        assert_eq!(t.rtt_ns(), 1_234_000);
        assert_eq!(t.snd_cwnd, 10);
        assert_eq!(t.pacing_rate_bytes_per_s, Some(6_250_000));
        assert_eq!(t.bytes_acked, Some(1_000_000));
        assert_eq!(t.min_rtt_us, Some(900));
        assert_eq!(t.bytes_sent, Some(1_500_000));
        assert_eq!(t.total_rto_time_ms, Some(77));
    }

    #[test]
    fn short_struct_gives_none() {
        // Linux 3.x returned 104 bytes (up to total_retrans).
        let t = TcpInfo::parse(&golden()[..104]);
        assert_eq!(t.rtt_us, 1234);
        assert_eq!(t.pacing_rate_bytes_per_s, None);
        assert_eq!(t.bytes_acked, None);
        assert_eq!(t.min_rtt_us, None);
        // Cut in the middle of bytes_acked (u64 at 120..128).
        let t = TcpInfo::parse(&golden()[..124]);
        assert_eq!(t.max_pacing_rate_bytes_per_s, Some(0));
        assert_eq!(t.bytes_acked, None);
    }

    #[test]
    fn interval_rates() {
        let a = TcpInfo {
            bytes_acked: Some(0),
            bytes_received: None,
            ..Default::default()
        };
        let b = TcpInfo {
            bytes_acked: Some(1_250_000),
            rtt_us: 500,
            ..Default::default()
        };
        let iv = TcpInterval::between(&a, 1_000_000_000, &b, 2_000_000_000).unwrap();
        assert_eq!(iv.acked_bytes, Some(1_250_000));
        assert_eq!(iv.acked_rate_bps, Some(10_000_000.0));
        assert_eq!(iv.received_rate_bps, None);
        assert_eq!(iv.rtt_ns, 500_000);
        assert!(TcpInterval::between(&a, 5, &b, 5).is_none());
    }

    proptest! {
        #[test]
        fn any_length_parses_and_respects_length(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let t = TcpInfo::parse(&bytes);
            prop_assert_eq!(t.len, bytes.len());
            prop_assert_eq!(t.pacing_rate_bytes_per_s.is_some(), bytes.len() >= 112);
            prop_assert_eq!(t.bytes_sent.is_some(), bytes.len() >= 208);
            prop_assert_eq!(t.total_rto_time_ms.is_some(), bytes.len() >= 248);
            prop_assert_eq!(t.min_rtt_us.is_some(), bytes.len() >= 152);
        }

        #[test]
        fn interval_never_negative(a in any::<u64>(), b in any::<u64>(), t0 in any::<u64>(), dt in 0u64..u64::MAX/2) {
            let p = TcpInfo { bytes_acked: Some(a), ..Default::default() };
            let c = TcpInfo { bytes_acked: Some(b), ..Default::default() };
            if let Some(iv) = TcpInterval::between(&p, t0, &c, t0.saturating_add(dt)) {
                prop_assert!(iv.interval_ns > 0);
                prop_assert_eq!(iv.acked_bytes, b.checked_sub(a));
                if let Some(r) = iv.acked_rate_bps { prop_assert!(r >= 0.0 && r.is_finite()); }
            }
        }
    }
}
