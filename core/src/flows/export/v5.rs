//! NetFlow v5: a 24-byte header and up to 30 fixed 48-byte records. The
//! header's last two bytes carry the sampling mode (2 bits) and interval
//! (14 bits) (003 §2.4.2: ESnet 1-in-1000).

use std::net::{IpAddr, Ipv4Addr};

use super::{DecodeSummary, Rd};
use crate::error::{Error, Result};
use crate::flows::record::FlowRecord;

pub(crate) const HEADER_LEN: usize = 24;
pub(crate) const RECORD_LEN: usize = 48;
/// Cisco's maximum records per v5 datagram.
pub(crate) const MAX_RECORDS: usize = 30;

pub(crate) fn decode(pkt: &[u8], sink: &mut impl FnMut(&FlowRecord)) -> Result<DecodeSummary> {
    let mut h = Rd::new(pkt, "NetFlow v5 header");
    let _version = h.u16()?;
    let count = usize::from(h.u16()?);
    let uptime_ms = h.u32()?;
    let unix_s = h.u32()?;
    let unix_ns = h.u32()?;
    let _seq = h.u32()?;
    let _engine = h.u16()?;
    let sampling = h.u16()?;
    if count == 0 || count > MAX_RECORDS {
        return Err(Error::invalid(format!(
            "NetFlow v5 header counts {count} records; a v5 datagram holds 1..=30"
        )));
    }
    let need = HEADER_LEN + count * RECORD_LEN;
    if pkt.len() < need {
        return Err(Error::invalid(format!(
            "NetFlow v5 datagram of {} bytes is shorter than its {count} records need ({need} bytes)",
            pkt.len()
        )));
    }
    // Low 14 bits: the interval; 0 means unsampled.
    let n = u32::from(sampling & 0x3FFF).max(1);
    // Router time of "uptime" in ns since the epoch; first/last are uptime ms.
    let now_ns = i128::from(unix_s) * 1_000_000_000 + i128::from(unix_ns.min(999_999_999));
    let at = |ms: u32| -> u64 {
        let t = now_ns - (i128::from(uptime_ms) - i128::from(ms)) * 1_000_000;
        t.clamp(0, i128::from(u64::MAX)) as u64
    };
    let mut s = DecodeSummary {
        version: 5,
        ..DecodeSummary::default()
    };
    for i in 0..count {
        let b = &pkt[HEADER_LEN + i * RECORD_LEN..HEADER_LEN + (i + 1) * RECORD_LEN];
        let u32at = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u16at = |o: usize| u16::from_be_bytes([b[o], b[o + 1]]);
        let rec = FlowRecord {
            src_addr: IpAddr::V4(Ipv4Addr::from(u32at(0))),
            dst_addr: IpAddr::V4(Ipv4Addr::from(u32at(4))),
            packets: u64::from(u32at(16)),
            bytes: u64::from(u32at(20)),
            first_ns: at(u32at(24)),
            last_ns: at(u32at(28)),
            src_port: u16at(32),
            dst_port: u16at(34),
            proto: b[38],
            sampling_interval: n,
        };
        if !rec.is_consistent() {
            s.records_skipped += 1;
            continue;
        }
        sink(&rec);
        s.records += 1;
    }
    Ok(s)
}
