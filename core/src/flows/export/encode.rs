//! Minimal NetFlow v5 / v9 / IPFIX encoders: the collector's loopback tests,
//! the fuzz seeds and the synthetic exporter build real datagrams with them.
//! Records carry addresses, ports, protocol, byte/packet counts and times;
//! v9/IPFIX can add a sampling options template and record.

use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::flows::record::FlowRecord;

use super::v5::{HEADER_LEN, MAX_RECORDS};

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn addr_bytes(out: &mut Vec<u8>, a: IpAddr) {
    match a {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
}
fn set_len(out: &mut [u8], at: usize) {
    let l = (out.len() - at) as u16;
    out[at + 2..at + 4].copy_from_slice(&l.to_be_bytes());
}

/// NetFlow v5 datagram of 1..=30 IPv4 records exported at `export_ns` by a
/// router up for `uptime_ms`; `sampling` goes in the header's low 14 bits.
/// Record times must lie within the router's uptime (v5 stores uptime ms).
pub fn encode_v5(
    recs: &[FlowRecord],
    export_ns: u64,
    uptime_ms: u32,
    sampling: u16,
    seq: u32,
    out: &mut Vec<u8>,
) -> Result<()> {
    if recs.is_empty() || recs.len() > MAX_RECORDS {
        return Err(Error::invalid(format!(
            "a NetFlow v5 datagram holds 1..=30 records, not {}",
            recs.len()
        )));
    }
    if sampling > 0x3FFF {
        return Err(Error::invalid(format!(
            "NetFlow v5 sampling interval {sampling} does not fit its 14 bits (max 16383)"
        )));
    }
    let boot_ms = i128::from(export_ns / 1_000_000) - i128::from(uptime_ms);
    let up = |t_ns: u64| -> Result<u32> {
        let ms = i128::from(t_ns / 1_000_000) - boot_ms;
        u32::try_from(ms).map_err(|_| {
            Error::invalid(format!(
                "record time {t_ns} ns is outside the v5 router's uptime window"
            ))
        })
    };
    out.clear();
    put16(out, 5);
    put16(out, recs.len() as u16);
    put32(out, uptime_ms);
    put32(out, (export_ns / 1_000_000_000) as u32);
    put32(
        out,
        ((export_ns % 1_000_000_000) / 1_000_000 * 1_000_000) as u32,
    );
    put32(out, seq);
    put16(out, 0);
    put16(out, sampling);
    debug_assert_eq!(out.len(), HEADER_LEN);
    for r in recs {
        let (IpAddr::V4(s), IpAddr::V4(d)) = (r.src_addr, r.dst_addr) else {
            return Err(Error::invalid(
                "NetFlow v5 carries IPv4 addresses only; use v9 or IPFIX for IPv6",
            ));
        };
        out.extend_from_slice(&s.octets());
        out.extend_from_slice(&d.octets());
        put32(out, 0); // next hop
        put32(out, 0); // input/output ifindex
        put32(out, u32::try_from(r.packets).unwrap_or(u32::MAX));
        put32(out, u32::try_from(r.bytes).unwrap_or(u32::MAX));
        put32(out, up(r.first_ns)?);
        put32(out, up(r.last_ns)?);
        put16(out, r.src_port);
        put16(out, r.dst_port);
        out.extend_from_slice(&[0, 0, r.proto, 0]); // pad, tcp flags, proto, tos
        put32(out, 0); // src/dst AS
        out.extend_from_slice(&[0, 0, 0, 0]); // masks, pad
    }
    Ok(())
}

const T4: u16 = 256;
const T6: u16 = 257;
const TOPT: u16 = 258;

/// NetFlow v9 datagram: optionally the templates (IPv4 256, IPv6 257) and a
/// sampling options template (258: scope System, SAMPLING_INTERVAL 34,
/// SAMPLING_ALGORITHM 35) with its record, then the data records. Times are
/// FIRST/LAST_SWITCHED uptime ms against `uptime_ms` at `export_s`.
// The arguments are the v9 header fields plus what to include; a struct would
// only rename them at every call site.
#[allow(clippy::too_many_arguments)]
pub fn encode_v9(
    recs: &[FlowRecord],
    export_s: u32,
    uptime_ms: u32,
    source_id: u32,
    seq: u32,
    templates: bool,
    sampling: Option<u32>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let boot_ms = i128::from(export_s) * 1000 - i128::from(uptime_ms);
    let up = |t_ns: u64| -> Result<u32> {
        u32::try_from(i128::from(t_ns / 1_000_000) - boot_ms).map_err(|_| {
            Error::invalid(format!(
                "record time {t_ns} ns is outside the v9 router's uptime window"
            ))
        })
    };
    out.clear();
    put16(out, 9);
    put16(out, 0); // count, patched below
    put32(out, uptime_ms);
    put32(out, export_s);
    put32(out, seq);
    put32(out, source_id);
    let mut count = 0usize;
    if templates {
        flow_templates(out, 0, [(22, 4), (21, 4)]);
        count += 2;
        if sampling.is_some() {
            let at = out.len();
            put16(out, 1);
            put16(out, 0);
            put16(out, TOPT);
            put16(out, 4); // scope: one field
            put16(out, 8); // options: two fields
            put16(out, 1); // scope System
            put16(out, 4);
            put16(out, 34);
            put16(out, 4);
            put16(out, 35);
            put16(out, 1);
            put16(out, 0); // padding to 4
            set_len(out, at);
            count += 1;
        }
    }
    if let Some(n) = sampling {
        let at = out.len();
        put16(out, TOPT);
        put16(out, 0);
        put32(out, source_id);
        put32(out, n);
        out.push(2); // random sampling
        out.extend_from_slice(&[0, 0, 0]);
        set_len(out, at);
        count += 1;
    }
    count += flow_data_sets(out, recs, true, |out, r| {
        put32(out, up(r.first_ns)?);
        put32(out, up(r.last_ns)?);
        Ok(())
    })?;
    if out.len() > usize::from(u16::MAX) {
        return Err(Error::invalid("too many records for one datagram"));
    }
    // Each record takes more than 40 bytes, so a datagram under 64 KiB holds
    // fewer than 2^16 of them.
    out[2..4].copy_from_slice(&(count as u16).to_be_bytes());
    Ok(())
}

/// IPFIX message: optionally the templates (IPv4 256, IPv6 257; times as
/// flowStart/EndMilliseconds 152/153) and a sampling options template (258:
/// scope observationDomainId 149, samplingPacketInterval 305 = 1,
/// samplingPacketSpace 306 = N − 1) with its record, then the data records.
pub fn encode_ipfix(
    recs: &[FlowRecord],
    export_s: u32,
    domain: u32,
    seq: u32,
    templates: bool,
    sampling: Option<u32>,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    put16(out, 10);
    put16(out, 0);
    put32(out, export_s);
    put32(out, seq);
    put32(out, domain);
    if templates {
        flow_templates(out, 2, [(152, 8), (153, 8)]);
        if sampling.is_some() {
            let at = out.len();
            put16(out, 3);
            put16(out, 0);
            put16(out, TOPT);
            put16(out, 3); // fields
            put16(out, 1); // scope fields
            for (ie, l) in [(149u16, 4u16), (305, 4), (306, 4)] {
                put16(out, ie);
                put16(out, l);
            }
            set_len(out, at);
        }
    }
    if let Some(n) = sampling {
        let at = out.len();
        put16(out, TOPT);
        put16(out, 0);
        put32(out, domain);
        put32(out, 1);
        put32(out, n.max(1) - 1);
        set_len(out, at);
    }
    flow_data_sets(out, recs, false, |out, r| {
        put64(out, r.first_ns / 1_000_000);
        put64(out, r.last_ns / 1_000_000);
        Ok(())
    })?;
    if out.len() > usize::from(u16::MAX) {
        return Err(Error::invalid("too many records for one IPFIX message"));
    }
    let l = out.len() as u16;
    out[2..4].copy_from_slice(&l.to_be_bytes());
    Ok(())
}

/// A template set (`set_id` 0 in v9, 2 in IPFIX) holding the two flow
/// templates, IPv4 (256) and IPv6 (257): addresses, ports, protocol, octets,
/// packets and the two time fields `times` (information element, length).
fn flow_templates(out: &mut Vec<u8>, set_id: u16, times: [(u16, u16); 2]) {
    let at = out.len();
    put16(out, set_id);
    put16(out, 0);
    for (tid, (src, dst), alen) in [(T4, (8, 12), 4), (T6, (27, 28), 16)] {
        let fields = [
            (src, alen),
            (dst, alen),
            (7, 2),
            (11, 2),
            (4, 1),
            (1, 8),
            (2, 8),
            times[0],
            times[1],
        ];
        put16(out, tid);
        put16(out, fields.len() as u16);
        for (ie, l) in fields {
            put16(out, ie);
            put16(out, l);
        }
    }
    set_len(out, at);
}

/// The data sets of [`flow_templates`]' layout: IPv4 records under 256, then
/// IPv6 under 257, each record's two times written by `times`; v9 pads each
/// set to a multiple of 4 bytes (`pad4`). Returns the records written.
fn flow_data_sets(
    out: &mut Vec<u8>,
    recs: &[FlowRecord],
    pad4: bool,
    mut times: impl FnMut(&mut Vec<u8>, &FlowRecord) -> Result<()>,
) -> Result<usize> {
    let mut n = 0;
    for v6 in [false, true] {
        if !recs.iter().any(|r| r.src_addr.is_ipv6() == v6) {
            continue;
        }
        let at = out.len();
        put16(out, if v6 { T6 } else { T4 });
        put16(out, 0);
        for r in recs.iter().filter(|r| r.src_addr.is_ipv6() == v6) {
            if r.dst_addr.is_ipv6() != v6 {
                return Err(Error::invalid("a record mixes IPv4 and IPv6 addresses"));
            }
            addr_bytes(out, r.src_addr);
            addr_bytes(out, r.dst_addr);
            put16(out, r.src_port);
            put16(out, r.dst_port);
            out.push(r.proto);
            put64(out, r.bytes);
            put64(out, r.packets);
            times(out, r)?;
            n += 1;
        }
        while pad4 && (out.len() - at) % 4 != 0 {
            out.push(0);
        }
        set_len(out, at);
    }
    Ok(n)
}
