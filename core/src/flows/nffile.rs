//! Reading nfdump's capture files (`nfcapd.YYYYMMDDhhmm`, file layout 2 of
//! nfdump 1.7) into [`FlowRecord`]s, so an operator's existing capture
//! directory feeds the α study (003 §3.5: the document's records came from a
//! collector's files, flow-tools there, nfdump here).
//!
//! Layout (nfdump `nffileV2.h`, `nfxV3.h`; little-endian on the machines
//! nfcapd runs on, which the magic checks):
//! * file header, 40 bytes: magic `0xA50C`, layout version 2, nfdump version,
//!   creation time, compression (0 none, 1 LZO, 2 BZ2, 3 LZ4, 4 ZSTD),
//!   encryption, appendix count, creator, appendix offset, block size, block
//!   count;
//! * data blocks, each a 12-byte header (record count, payload size, block
//!   type, flags; flag bit 0 = this block is stored uncompressed) and a
//!   payload, compressed as the file says;
//! * in a type-3 block, records with a 4-byte header (type, size including
//!   the header). Flow records are type 11 (V3): a 12-byte header with the
//!   element count, then elements (type, length including the 4-byte
//!   element header). Element 1 (generic flow) holds first/last ms,
//!   packets, bytes, ports and protocol; 2 and 3 the IPv4 / IPv6 addresses,
//!   stored in host order. Every other record and element is skipped.
//!
//! nfcapd writes uncompressed files by default and LZ4 with `-y`; both are
//! read here (the LZ4 block format is small enough to decode in place).
//! LZO, BZ2 and ZSTD files get an error that says how to convert them.
//! Counts are taken as stored: nfdump prints the same numbers (`nfdump -o
//! csv`), and nfcapd has already applied the exporter's sampling rate to them,
//! so the records carry `sampling_interval` 1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::FlowRecord;
use crate::error::{Error, Result};

const MAGIC: u16 = 0xA50C;
const FILE_HEADER: usize = 40;
const BLOCK_HEADER: usize = 12;
const V3_RECORD: u16 = 11;
const V3_HEADER: usize = 12;
const EX_GENERIC: u16 = 1;
const EX_IPV4: u16 = 2;
const EX_IPV6: u16 = 3;
/// The largest decompressed block accepted (nfdump's blocks are ≤ 5 MB).
const MAX_BLOCK: usize = 64 << 20;

/// Whether `head` (the first bytes of a file) starts like an nfdump file.
pub fn is_nffile(head: &[u8]) -> bool {
    head.len() >= 4 && u16::from_le_bytes([head[0], head[1]]) == MAGIC
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Every flow record of the nfdump file at `path`, in file order: the file
/// read whole, then [`read`]. What the bindings' `read_nfcapd` and `opsel
/// flows read` call.
pub fn read_path(path: &std::path::Path) -> Result<Vec<FlowRecord>> {
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    read(&bytes, &path.display().to_string())
}

/// Every flow record of one nfdump file's bytes, in file order. `name` is
/// used in error messages.
pub fn read(bytes: &[u8], name: &str) -> Result<Vec<FlowRecord>> {
    let bad = |what: String| Error::invalid(format!("{name}: {what}"));
    if bytes.len() < FILE_HEADER || !is_nffile(bytes) {
        return Err(bad(
            "not an nfdump file (no 0xA50C magic in a 40-byte header)".into(),
        ));
    }
    let version = u16_at(bytes, 2).unwrap_or(0);
    if version != 2 {
        return Err(bad(format!(
            "nfdump file layout {version}; only layout 2 (nfdump 1.7) is read: convert with `nfdump -r FILE -w NEW` using nfdump 1.7"
        )));
    }
    let compression = bytes[16];
    let encryption = bytes[17];
    if encryption != 0 {
        return Err(bad(format!(
            "encrypted nfdump file (encryption {encryption})"
        )));
    }
    if !matches!(compression, 0 | 3) {
        let kind = match compression {
            1 => "LZO",
            2 => "BZ2",
            4 => "ZSTD",
            _ => "unknown",
        };
        return Err(bad(format!(
            "{kind}-compressed nfdump file (compression {compression}); uncompressed and LZ4 are read: convert with `nfdump -J 0 -r FILE` (uncompressed) or `-J 3` (LZ4)"
        )));
    }
    let mut out = Vec::new();
    let mut at = FILE_HEADER;
    let mut scratch = Vec::new();
    let mut block = 0usize;
    while at < bytes.len() {
        let (Some(n_records), Some(size), Some(btype), Some(flags)) = (
            u32_at(bytes, at),
            u32_at(bytes, at + 4),
            u16_at(bytes, at + 8),
            u16_at(bytes, at + 10),
        ) else {
            return Err(bad(format!(
                "block {block} at byte {at}: truncated block header"
            )));
        };
        let start = at + BLOCK_HEADER;
        let end = start
            .checked_add(size as usize)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| {
                bad(format!(
                    "block {block} at byte {at}: payload of {size} bytes runs past the end of the file ({} bytes)",
                    bytes.len()
                ))
            })?;
        let payload = &bytes[start..end];
        let data: &[u8] = if compression == 3 && flags & 1 == 0 {
            scratch.clear();
            lz4_block(payload, &mut scratch, MAX_BLOCK)
                .map_err(|e| bad(format!("block {block}: LZ4: {e}")))?;
            &scratch
        } else {
            payload
        };
        if btype == 3 {
            records(data, n_records, &mut out).map_err(|e| bad(format!("block {block}: {e}")))?;
        }
        at = end;
        block += 1;
    }
    Ok(out)
}

/// The V3 flow records among the records of one type-3 block.
fn records(
    data: &[u8],
    n_records: u32,
    out: &mut Vec<FlowRecord>,
) -> std::result::Result<(), String> {
    let mut at = 0usize;
    for i in 0..n_records {
        if at >= data.len() {
            return Err(format!(
                "record {i} of {n_records} is missing (block ends at {} bytes)",
                data.len()
            ));
        }
        let (Some(rtype), Some(size)) = (u16_at(data, at), u16_at(data, at + 2)) else {
            return Err(format!("record {i}: truncated header"));
        };
        let size = size as usize;
        if size < 4 || at + size > data.len() {
            return Err(format!(
                "record {i}: size {size} is below 4 or runs past the block"
            ));
        }
        if rtype == V3_RECORD {
            if let Some(r) = v3(&data[at..at + size]) {
                out.push(r);
            }
        }
        at += size;
    }
    Ok(())
}

/// One V3 record: `None` when it has no generic-flow or address element
/// (nfdump's non-flow V3 records, e.g. of other collectors).
fn v3(rec: &[u8]) -> Option<FlowRecord> {
    let n = u16_at(rec, 4)? as usize;
    let mut at = V3_HEADER;
    let (mut generic, mut addrs) = (None, None);
    for _ in 0..n {
        let t = u16_at(rec, at)?;
        let len = u16_at(rec, at + 2)? as usize;
        if len < 4 || at + len > rec.len() {
            return None;
        }
        let e = &rec[at + 4..at + len];
        match t {
            EX_GENERIC if e.len() >= 48 => generic = Some(e),
            EX_IPV4 if e.len() >= 8 => {
                let s = Ipv4Addr::from(u32_at(e, 0)?);
                let d = Ipv4Addr::from(u32_at(e, 4)?);
                addrs = Some((IpAddr::V4(s), IpAddr::V4(d)));
            }
            EX_IPV6 if e.len() >= 32 => {
                let v6 = |o: usize| -> Option<Ipv6Addr> {
                    let hi = u64_at(e, o)? as u128;
                    let lo = u64_at(e, o + 8)? as u128;
                    Some(Ipv6Addr::from((hi << 64) | lo))
                };
                addrs = Some((IpAddr::V6(v6(0)?), IpAddr::V6(v6(16)?)));
            }
            _ => {}
        }
        at += len;
    }
    let g = generic?;
    let (src_addr, dst_addr) = addrs?;
    let ms = |o| u64_at(g, o).map(|v| v.saturating_mul(1_000_000));
    Some(FlowRecord {
        src_addr,
        dst_addr,
        src_port: u16_at(g, 40)?,
        dst_port: u16_at(g, 42)?,
        proto: g[44],
        bytes: u64_at(g, 32)?,
        packets: u64_at(g, 24)?,
        first_ns: ms(0)?,
        last_ns: ms(8)?,
        sampling_interval: 1,
    })
}

/// Decode one LZ4 block (the raw block format, as `LZ4_compress_default`
/// writes it) appending to `out`, at most `max` bytes.
fn lz4_block(src: &[u8], out: &mut Vec<u8>, max: usize) -> std::result::Result<(), String> {
    let mut i = 0usize;
    let len_ext = |i: &mut usize, mut n: usize| -> std::result::Result<usize, String> {
        loop {
            let b = *src.get(*i).ok_or("length runs past the input")?;
            *i += 1;
            n = n.checked_add(b as usize).ok_or("length overflows")?;
            if b != 255 {
                return Ok(n);
            }
        }
    };
    while i < src.len() {
        let token = src[i];
        i += 1;
        let mut lit = (token >> 4) as usize;
        if lit == 15 {
            lit = len_ext(&mut i, lit)?;
        }
        let lit_end = i
            .checked_add(lit)
            .filter(|&e| e <= src.len())
            .ok_or("literals run past the input")?;
        if out.len() + lit > max {
            return Err(format!("block decompresses to more than {max} bytes"));
        }
        out.extend_from_slice(&src[i..lit_end]);
        i = lit_end;
        if i == src.len() {
            return Ok(()); // the last sequence has literals only
        }
        let off = u16_at(src, i).ok_or("match offset runs past the input")? as usize;
        i += 2;
        if off == 0 || off > out.len() {
            return Err(format!(
                "match offset {off} outside the {} bytes decoded",
                out.len()
            ));
        }
        let mut m = (token & 15) as usize;
        if m == 15 {
            m = len_ext(&mut i, m)?;
        }
        m += 4;
        if out.len() + m > max {
            return Err(format!("block decompresses to more than {max} bytes"));
        }
        let from = out.len() - off;
        // Byte by byte: a match may overlap what it is copying (runs).
        for k in 0..m {
            let b = out[from + k];
            out.push(b);
        }
    }
    Err("empty LZ4 block".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one uncompressed type-3 block holding `recs` (record bytes).
    fn file(compression: u8, blocks: &[(Vec<u8>, u32, u16)]) -> Vec<u8> {
        let mut f = vec![0u8; FILE_HEADER];
        f[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        f[2..4].copy_from_slice(&2u16.to_le_bytes());
        f[16] = compression;
        for (payload, n, flags) in blocks {
            f.extend_from_slice(&n.to_le_bytes());
            f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            f.extend_from_slice(&3u16.to_le_bytes());
            f.extend_from_slice(&flags.to_le_bytes());
            f.extend_from_slice(payload);
        }
        f
    }

    fn v3_record(src: [u8; 4], dst: [u8; 4], sport: u16, bytes: u64, pkts: u64) -> Vec<u8> {
        let mut g = Vec::new();
        g.extend_from_slice(&1_700_000_000_000u64.to_le_bytes()); // first ms
        g.extend_from_slice(&1_700_000_060_000u64.to_le_bytes()); // last ms
        g.extend_from_slice(&0u64.to_le_bytes()); // received
        g.extend_from_slice(&pkts.to_le_bytes());
        g.extend_from_slice(&bytes.to_le_bytes());
        g.extend_from_slice(&sport.to_le_bytes());
        g.extend_from_slice(&2811u16.to_le_bytes());
        g.extend_from_slice(&[6, 0, 0, 0]);
        let mut r = vec![0u8; V3_HEADER];
        r[0..2].copy_from_slice(&V3_RECORD.to_le_bytes());
        r[4..6].copy_from_slice(&2u16.to_le_bytes());
        r.extend_from_slice(&EX_GENERIC.to_le_bytes());
        r.extend_from_slice(&((g.len() + 4) as u16).to_le_bytes());
        r.extend_from_slice(&g);
        r.extend_from_slice(&EX_IPV4.to_le_bytes());
        r.extend_from_slice(&12u16.to_le_bytes());
        r.extend_from_slice(&u32::from(Ipv4Addr::from(src)).to_le_bytes());
        r.extend_from_slice(&u32::from(Ipv4Addr::from(dst)).to_le_bytes());
        let size = r.len() as u16;
        r[2..4].copy_from_slice(&size.to_le_bytes());
        r
    }

    #[test]
    fn reads_a_v3_flow_and_skips_other_records() {
        let mut payload = vec![7, 0, 8, 0, 1, 2, 3, 4]; // a type-7 record of 8 bytes
        payload.extend(v3_record(
            [10, 1, 2, 3],
            [10, 9, 0, 1],
            40_000,
            3_500_000_000,
            2_417_000,
        ));
        let f = file(0, &[(payload, 2, 0)]);
        let r = read(&f, "t").unwrap();
        assert_eq!(r.len(), 1);
        let r = r[0];
        assert_eq!(r.src_addr, "10.1.2.3".parse::<IpAddr>().unwrap());
        assert_eq!(r.dst_addr, "10.9.0.1".parse::<IpAddr>().unwrap());
        assert_eq!((r.src_port, r.dst_port, r.proto), (40_000, 2811, 6));
        assert_eq!((r.bytes, r.packets), (3_500_000_000, 2_417_000));
        assert_eq!(r.last_ns - r.first_ns, 60_000_000_000);
        assert_eq!(r.sampling_interval, 1);
    }

    /// LZ4 with literals only (a valid block: one sequence, no match).
    fn lz4_literals(data: &[u8]) -> Vec<u8> {
        let mut o = Vec::new();
        let n = data.len();
        if n < 15 {
            o.push((n as u8) << 4);
        } else {
            o.push(0xF0);
            let mut rest = n - 15;
            while rest >= 255 {
                o.push(255);
                rest -= 255;
            }
            o.push(rest as u8);
        }
        o.extend_from_slice(data);
        o
    }

    #[test]
    fn lz4_blocks_literals_and_overlapping_matches() {
        let rec = v3_record([192, 0, 2, 1], [198, 51, 100, 7], 1, 10, 1);
        let f = file(3, &[(lz4_literals(&rec), 1, 0), (rec.clone(), 1, 1)]);
        let r = read(&f, "t").unwrap();
        assert_eq!(r.len(), 2, "one LZ4 block and one stored uncompressed");
        assert_eq!(r[0], r[1]);
        // "abcabcabca": 3 literals, then a match of 7 at offset 3 (overlap).
        let mut out = Vec::new();
        // An offset beyond what is decoded is refused.
        assert!(lz4_block(&[0x33, b'a', b'b', b'c', 9, 0], &mut out, 1 << 20).is_err());
        out.clear();
        lz4_block(
            &[0x33, b'a', b'b', b'c', 3, 0, 0x10, b'!'],
            &mut out,
            1 << 20,
        )
        .unwrap();
        assert_eq!(out, b"abcabcabca!");
    }

    #[test]
    fn damaged_files_get_clear_errors_and_never_panic() {
        let rec = v3_record([10, 0, 0, 1], [10, 0, 1, 1], 5, 100, 1);
        let good = file(0, &[(rec.clone(), 1, 0)]);
        assert!(read(&good[..30], "x")
            .unwrap_err()
            .to_string()
            .contains("not an nfdump file"));
        let mut lzo = good.clone();
        lzo[16] = 1;
        assert!(read(&lzo, "x").unwrap_err().to_string().contains("-J 0"));
        let mut v1 = good.clone();
        v1[2] = 1;
        assert!(read(&v1, "x").unwrap_err().to_string().contains("layout 1"));
        let e = read(&good[..good.len() - 3], "x").unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
        // Every truncation and every single-byte change: an answer, no panic.
        for n in 0..good.len() {
            let _ = read(&good[..n], "x");
        }
        let lz = file(3, &[(lz4_literals(&rec), 1, 0)]);
        for f in [good, lz] {
            for i in 0..f.len() {
                for v in [0u8, 1, 0x7f, 0xff] {
                    let mut m = f.clone();
                    m[i] = v;
                    let _ = read(&m, "x");
                }
            }
        }
    }
}
