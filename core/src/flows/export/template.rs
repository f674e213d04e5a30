//! NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) template state and decoding.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{be_uint, DecodeSummary, Rd};
use crate::error::{Error, Result};
use crate::flows::record::FlowRecord;

/// Bounds on the state a (possibly hostile) exporter can make the decoder keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecoderLimits {
    /// Templates kept over all exporters.
    pub max_templates: usize,
    /// Fields per template.
    pub max_fields: usize,
    /// Sampler IDs remembered over all exporters.
    pub max_samplers: usize,
}

impl Default for DecoderLimits {
    fn default() -> Self {
        DecoderLimits {
            max_templates: 4096,
            max_fields: 512,
            max_samplers: 4096,
        }
    }
}

// Information elements (IANA IPFIX registry; v9 uses the same numbers for these).
const IE_OCTETS: u16 = 1;
const IE_PACKETS: u16 = 2;
const IE_PROTO: u16 = 4;
const IE_SPORT: u16 = 7;
const IE_SRC4: u16 = 8;
const IE_DPORT: u16 = 11;
const IE_DST4: u16 = 12;
const IE_END_UPTIME: u16 = 21;
const IE_START_UPTIME: u16 = 22;
const IE_OUT_OCTETS: u16 = 23;
const IE_OUT_PACKETS: u16 = 24;
const IE_SRC6: u16 = 27;
const IE_DST6: u16 = 28;
const IE_SAMPLING_INTERVAL: u16 = 34;
const IE_SAMPLER_ID: u16 = 48;
const IE_SAMPLER_RANDOM_INTERVAL: u16 = 50;
const IE_OCTETS_TOTAL: u16 = 85;
const IE_PACKETS_TOTAL: u16 = 86;
const IE_START_S: u16 = 150;
const IE_END_S: u16 = 151;
const IE_START_MS: u16 = 152;
const IE_END_MS: u16 = 153;
const IE_START_US: u16 = 154;
const IE_END_US: u16 = 155;
const IE_START_NS: u16 = 156;
const IE_END_NS: u16 = 157;
const IE_START_DELTA_US: u16 = 158;
const IE_END_DELTA_US: u16 = 159;
const IE_SYS_INIT_MS: u16 = 160;
const IE_SELECTOR_ID: u16 = 302;
const IE_PKT_INTERVAL: u16 = 305;
const IE_PKT_SPACE: u16 = 306;
const IE_SAMPLING_SIZE: u16 = 309;
const IE_SAMPLING_POPULATION: u16 = 310;
const IE_SAMPLING_PROBABILITY: u16 = 311;

const VARLEN: u16 = 65535;
/// Seconds from the NTP era (1900) to the Unix epoch.
const NTP_UNIX_OFFSET_S: i128 = 2_208_988_800;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    ie: u16,
    enterprise: u32,
    len: u16,
}

#[derive(Debug, Clone)]
struct Template {
    fields: Vec<Field>,
    options: bool,
    /// Smallest encoded record (variable-length fields count 1 byte).
    min_len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DomainKey {
    exporter: SocketAddr,
    version: u16,
    domain: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct DomainInfo {
    sampling: Option<u32>,
    sys_init_ms: Option<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct TemplateState {
    limits: DecoderLimits,
    templates: HashMap<(DomainKey, u16), Template>,
    domains: HashMap<DomainKey, DomainInfo>,
    samplers: HashMap<(DomainKey, u64), u32>,
}

/// The flowset (v9) or set (IPFIX) whose 4-byte header starts at `pos`
/// (the caller checked that 4 bytes remain): its id, its length and its body.
/// A length below the header's own or past the packet is an error naming
/// `kind` and both lengths.
fn set_at<'p>(pkt: &'p [u8], pos: usize, w: &str, kind: &str) -> Result<(u16, usize, &'p [u8])> {
    let id = u16::from_be_bytes([pkt[pos], pkt[pos + 1]]);
    let len = usize::from(u16::from_be_bytes([pkt[pos + 2], pkt[pos + 3]]));
    if len < 4 || pos + len > pkt.len() {
        return Err(bad(
            w,
            pos,
            format!(
                "{kind} {id} declares length {len}, but 4..={} bytes are available",
                pkt.len() - pos
            ),
        ));
    }
    Ok((id, len, &pkt[pos + 4..pos + len]))
}

fn bad(what: &str, off: usize, msg: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{what} at offset {off}: {msg}"))
}

/// Check a known field's length when the template arrives, so record decoding
/// never meets an impossible one.
fn check_field(f: &Field, what: &str, off: usize) -> Result<()> {
    if f.enterprise != 0 {
        return Ok(());
    }
    let ok = |lo: u16, hi: u16| f.len != VARLEN && (lo..=hi).contains(&f.len);
    let fine = match f.ie {
        IE_SRC4 | IE_DST4 => f.len == 4,
        IE_SRC6 | IE_DST6 => f.len == 16,
        IE_SPORT | IE_DPORT => ok(1, 2),
        IE_PROTO => f.len == 1,
        IE_START_US | IE_END_US | IE_START_NS | IE_END_NS => f.len == 8,
        IE_START_DELTA_US | IE_END_DELTA_US => ok(1, 4),
        IE_SAMPLING_PROBABILITY => f.len == 4 || f.len == 8,
        IE_OCTETS
        | IE_PACKETS
        | IE_OUT_OCTETS
        | IE_OUT_PACKETS
        | IE_OCTETS_TOTAL
        | IE_PACKETS_TOTAL
        | IE_SAMPLING_INTERVAL
        | IE_SAMPLER_ID
        | IE_SAMPLER_RANDOM_INTERVAL
        | IE_START_S
        | IE_END_S
        | IE_START_MS
        | IE_END_MS
        | IE_START_UPTIME
        | IE_END_UPTIME
        | IE_SYS_INIT_MS
        | IE_SELECTOR_ID
        | IE_PKT_INTERVAL
        | IE_PKT_SPACE
        | IE_SAMPLING_SIZE
        | IE_SAMPLING_POPULATION => ok(1, 8),
        _ => true,
    };
    if fine {
        Ok(())
    } else {
        Err(bad(
            what,
            off,
            format!(
                "template field {} has length {}, which that element cannot have",
                f.ie, f.len
            ),
        ))
    }
}

/// Values collected from one data record; everything optional.
#[derive(Default)]
struct Vals {
    src: Option<IpAddr>,
    dst: Option<IpAddr>,
    sport: u16,
    dport: u16,
    proto: u8,
    octets: Option<u64>,
    packets: Option<u64>,
    out_octets: Option<u64>,
    out_packets: Option<u64>,
    octets_total: Option<u64>,
    packets_total: Option<u64>,
    start_ns: Option<i128>,
    end_ns: Option<i128>,
    start_uptime_ms: Option<u64>,
    end_uptime_ms: Option<u64>,
    sys_init_ms: Option<u64>,
    sampling: Option<u32>,
    pkt_interval: Option<u64>,
    pkt_space: Option<u64>,
    samp_size: Option<u64>,
    samp_pop: Option<u64>,
    sampler_id: Option<u64>,
}

fn ntp_ns(v: &[u8]) -> i128 {
    let s = i128::from(u32::from_be_bytes([v[0], v[1], v[2], v[3]]));
    let f = i128::from(u32::from_be_bytes([v[4], v[5], v[6], v[7]]));
    (s - NTP_UNIX_OFFSET_S) * 1_000_000_000 + ((f * 1_000_000_000) >> 32)
}

fn sat_u32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

impl Vals {
    fn take(&mut self, f: &Field, v: &[u8], export_ns: i128) {
        if f.enterprise != 0 {
            return;
        }
        let u = || be_uint(v);
        match f.ie {
            IE_SRC4 => self.src = Some(IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3]))),
            IE_DST4 => self.dst = Some(IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3]))),
            IE_SRC6 | IE_DST6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(v);
                let ip = Some(IpAddr::V6(Ipv6Addr::from(a)));
                if f.ie == IE_SRC6 {
                    self.src = ip;
                } else {
                    self.dst = ip;
                }
            }
            IE_SPORT => self.sport = u() as u16,
            IE_DPORT => self.dport = u() as u16,
            IE_PROTO => self.proto = v[0],
            IE_OCTETS => self.octets = Some(u()),
            IE_PACKETS => self.packets = Some(u()),
            IE_OUT_OCTETS => self.out_octets = Some(u()),
            IE_OUT_PACKETS => self.out_packets = Some(u()),
            IE_OCTETS_TOTAL => self.octets_total = Some(u()),
            IE_PACKETS_TOTAL => self.packets_total = Some(u()),
            IE_START_S => self.start_ns = Some(i128::from(u()) * 1_000_000_000),
            IE_END_S => self.end_ns = Some(i128::from(u()) * 1_000_000_000),
            IE_START_MS => self.start_ns = Some(i128::from(u()) * 1_000_000),
            IE_END_MS => self.end_ns = Some(i128::from(u()) * 1_000_000),
            IE_START_US | IE_START_NS => self.start_ns = Some(ntp_ns(v)),
            IE_END_US | IE_END_NS => self.end_ns = Some(ntp_ns(v)),
            IE_START_DELTA_US => self.start_ns = Some(export_ns - i128::from(u()) * 1000),
            IE_END_DELTA_US => self.end_ns = Some(export_ns - i128::from(u()) * 1000),
            IE_START_UPTIME => self.start_uptime_ms = Some(u()),
            IE_END_UPTIME => self.end_uptime_ms = Some(u()),
            IE_SYS_INIT_MS => self.sys_init_ms = Some(u()),
            IE_SAMPLING_INTERVAL | IE_SAMPLER_RANDOM_INTERVAL if u() > 0 => {
                self.sampling = Some(sat_u32(u()));
            }
            IE_PKT_INTERVAL => self.pkt_interval = Some(u()),
            IE_PKT_SPACE => self.pkt_space = Some(u()),
            IE_SAMPLING_SIZE => self.samp_size = Some(u()),
            IE_SAMPLING_POPULATION => self.samp_pop = Some(u()),
            IE_SAMPLING_PROBABILITY => {
                let p = if v.len() == 8 {
                    f64::from_bits(u())
                } else {
                    f64::from(f32::from_bits(u() as u32))
                };
                if p.is_finite() && p > 0.0 && p <= 1.0 {
                    self.sampling = Some((1.0 / p).round().min(f64::from(u32::MAX)) as u32);
                }
            }
            IE_SAMPLER_ID | IE_SELECTOR_ID => self.sampler_id = Some(u()),
            _ => {}
        }
    }

    /// The 1-in-N interval the record states, if any.
    fn sampling_n(&self) -> Option<u32> {
        if let Some(n) = self.sampling {
            return Some(n);
        }
        // RFC 5476: select `interval` packets, then skip `space`.
        if let (Some(i), Some(s)) = (self.pkt_interval, self.pkt_space) {
            if let Some(n) = (i.saturating_add(s).saturating_add(i / 2)).checked_div(i) {
                return Some(sat_u32(n.max(1)));
            }
        }
        if let (Some(size), Some(pop)) = (self.samp_size, self.samp_pop) {
            if size > 0 && pop >= size {
                return Some(sat_u32((pop + size / 2) / size));
            }
        }
        None
    }
}

impl TemplateState {
    pub(crate) fn new(limits: DecoderLimits) -> Self {
        TemplateState {
            limits,
            ..TemplateState::default()
        }
    }

    pub(crate) fn template_count(&self) -> usize {
        self.templates.len()
    }

    fn limits(&self) -> DecoderLimits {
        if self.limits.max_templates == 0 {
            DecoderLimits::default()
        } else {
            self.limits
        }
    }

    fn store(&mut self, key: (DomainKey, u16), t: Template, what: &str, off: usize) -> Result<()> {
        let lim = self.limits();
        if !self.templates.contains_key(&key) && self.templates.len() >= lim.max_templates {
            return Err(bad(
                what,
                off,
                format!(
                    "template table is full ({} templates); raise DecoderLimits::max_templates if the exporters really use that many",
                    lim.max_templates
                ),
            ));
        }
        self.templates.insert(key, t);
        Ok(())
    }

    fn read_fields(
        &self,
        r: &mut Rd<'_>,
        count: usize,
        ipfix: bool,
        v9_scope: bool,
        what: &str,
    ) -> Result<(Vec<Field>, usize)> {
        let lim = self.limits();
        if count > lim.max_fields {
            return Err(bad(
                what,
                r.pos,
                format!(
                    "template has {count} fields; the limit is {}",
                    lim.max_fields
                ),
            ));
        }
        let mut fields = Vec::with_capacity(count);
        let mut min_len = 0usize;
        for _ in 0..count {
            let off = r.pos;
            let raw = r.u16()?;
            let len = r.u16()?;
            let (ie, enterprise) = if ipfix && raw & 0x8000 != 0 {
                (raw & 0x7FFF, r.u32()?)
            } else {
                (raw, 0)
            };
            if len == VARLEN && !ipfix {
                return Err(bad(
                    what,
                    off,
                    "NetFlow v9 has no variable-length fields (length 65535)",
                ));
            }
            // v9 scope field types are their own namespace (1 system, 2 interface,
            // 3 line card, 4 cache, 5 template): marked so they never read as flow
            // fields nor get checked as information elements.
            let enterprise = if v9_scope { u32::MAX } else { enterprise };
            let f = Field {
                ie,
                enterprise,
                len,
            };
            check_field(&f, what, off)?;
            min_len += if len == VARLEN { 1 } else { usize::from(len) };
            fields.push(f);
        }
        Ok((fields, min_len))
    }

    pub(crate) fn decode_v9(
        &mut self,
        exporter: SocketAddr,
        pkt: &[u8],
        sink: &mut impl FnMut(&FlowRecord),
    ) -> Result<DecodeSummary> {
        const W: &str = "NetFlow v9";
        let mut h = Rd::new(pkt, "NetFlow v9 header");
        let _version = h.u16()?;
        let _count = h.u16()?;
        let uptime_ms = h.u32()?;
        let unix_s = h.u32()?;
        let _seq = h.u32()?;
        let source_id = h.u32()?;
        let dk = DomainKey {
            exporter,
            version: 9,
            domain: source_id,
        };
        let export_ns = i128::from(unix_s) * 1_000_000_000;
        // v9 times are router uptime ms; the header ties uptime to UTC.
        let boot_ms = i128::from(unix_s) * 1000 - i128::from(uptime_ms);
        let mut s = DecodeSummary {
            version: 9,
            ..DecodeSummary::default()
        };
        let mut pos = h.pos;
        while pos < pkt.len() {
            if pkt.len() - pos < 4 {
                // Trailing bytes shorter than a flowset header: padding.
                break;
            }
            let (id, len, body) = set_at(pkt, pos, W, "flowset")?;
            match id {
                0 => {
                    let mut r = Rd::new(body, "NetFlow v9 template flowset");
                    while r.remaining() >= 4 {
                        let off = pos + 4 + r.pos;
                        let tid = r.u16()?;
                        let count = usize::from(r.u16()?);
                        if tid < 256 {
                            return Err(bad(
                                W,
                                off,
                                format!("template ID {tid} is reserved (data templates use 256..)"),
                            ));
                        }
                        let (fields, min_len) = self.read_fields(&mut r, count, false, false, W)?;
                        if min_len == 0 {
                            return Err(bad(
                                W,
                                off,
                                format!("template {tid} describes zero-length records"),
                            ));
                        }
                        self.store(
                            (dk, tid),
                            Template {
                                fields,
                                options: false,
                                min_len,
                            },
                            W,
                            off,
                        )?;
                        s.templates += 1;
                    }
                }
                1 => {
                    let mut r = Rd::new(body, "NetFlow v9 options template flowset");
                    // Padding may follow; an options template needs ≥ 6 bytes.
                    while r.remaining() >= 6 {
                        let off = pos + 4 + r.pos;
                        let tid = r.u16()?;
                        let scope_len = usize::from(r.u16()?);
                        let opt_len = usize::from(r.u16()?);
                        if tid < 256 {
                            return Err(bad(
                                W,
                                off,
                                format!("options template ID {tid} is reserved"),
                            ));
                        }
                        if scope_len % 4 != 0 || opt_len % 4 != 0 {
                            return Err(bad(W, off, format!("options template {tid}: scope length {scope_len} and option length {opt_len} must be multiples of 4")));
                        }
                        let (mut fields, l1) =
                            self.read_fields(&mut r, scope_len / 4, false, true, W)?;
                        let (more, l2) = self.read_fields(&mut r, opt_len / 4, false, false, W)?;
                        fields.extend(more);
                        if l1 + l2 == 0 {
                            return Err(bad(
                                W,
                                off,
                                format!("options template {tid} describes zero-length records"),
                            ));
                        }
                        self.store(
                            (dk, tid),
                            Template {
                                fields,
                                options: true,
                                min_len: l1 + l2,
                            },
                            W,
                            off,
                        )?;
                        s.templates += 1;
                    }
                }
                2..=255 => {}
                tid => self.data_set(
                    dk,
                    tid,
                    body,
                    pos + 4,
                    export_ns,
                    Some(boot_ms),
                    unix_s,
                    &mut s,
                    sink,
                )?,
            }
            pos += len;
        }
        Ok(s)
    }

    pub(crate) fn decode_ipfix(
        &mut self,
        exporter: SocketAddr,
        pkt: &[u8],
        sink: &mut impl FnMut(&FlowRecord),
    ) -> Result<DecodeSummary> {
        const W: &str = "IPFIX";
        let mut h = Rd::new(pkt, "IPFIX message header");
        let _version = h.u16()?;
        let msg_len = usize::from(h.u16()?);
        let export_s = h.u32()?;
        let _seq = h.u32()?;
        let domain = h.u32()?;
        if msg_len < 16 || msg_len > pkt.len() {
            return Err(bad(
                W,
                2,
                format!(
                    "message length {msg_len} is outside 16..={} (the datagram's size)",
                    pkt.len()
                ),
            ));
        }
        let pkt = &pkt[..msg_len];
        let dk = DomainKey {
            exporter,
            version: 10,
            domain,
        };
        let export_ns = i128::from(export_s) * 1_000_000_000;
        let mut s = DecodeSummary {
            version: 10,
            ..DecodeSummary::default()
        };
        let mut pos = 16;
        while pos < pkt.len() {
            if pkt.len() - pos < 4 {
                return Err(bad(W, pos, "set header truncated"));
            }
            let (id, len, body) = set_at(pkt, pos, W, "set")?;
            match id {
                2 | 3 => {
                    let options = id == 3;
                    let mut r = Rd::new(body, "IPFIX template set");
                    while r.remaining() >= 4 {
                        let off = pos + 4 + r.pos;
                        let tid = r.u16()?;
                        let count = usize::from(r.u16()?);
                        if tid < 256 {
                            return Err(bad(
                                W,
                                off,
                                format!("template ID {tid} is reserved (data templates use 256..)"),
                            ));
                        }
                        if count == 0 {
                            // RFC 7011 §8.1: a withdrawal.
                            self.templates.remove(&(dk, tid));
                            s.templates += 1;
                            continue;
                        }
                        let scope = if options {
                            let sc = usize::from(r.u16()?);
                            if sc == 0 || sc > count {
                                return Err(bad(W, off, format!("options template {tid} has scope count {sc} of {count} fields (needs 1..={count})")));
                            }
                            sc
                        } else {
                            0
                        };
                        let (fields, min_len) = self.read_fields(&mut r, count, true, false, W)?;
                        let _ = scope; // scope fields are ordinary IEs in IPFIX (e.g. 149 observationDomainId)
                        if min_len == 0 {
                            return Err(bad(
                                W,
                                off,
                                format!("template {tid} describes zero-length records"),
                            ));
                        }
                        self.store(
                            (dk, tid),
                            Template {
                                fields,
                                options,
                                min_len,
                            },
                            W,
                            off,
                        )?;
                        s.templates += 1;
                    }
                }
                4..=255 => {}
                0 | 1 => {
                    return Err(bad(W, pos, format!("set ID {id} is not used by IPFIX (NetFlow v9 template IDs in an IPFIX message?)")));
                }
                tid => self.data_set(
                    dk,
                    tid,
                    body,
                    pos + 4,
                    export_ns,
                    None,
                    export_s,
                    &mut s,
                    sink,
                )?,
            }
            pos += len;
        }
        Ok(s)
    }

    #[allow(clippy::too_many_arguments)]
    fn data_set(
        &mut self,
        dk: DomainKey,
        tid: u16,
        body: &[u8],
        base: usize,
        export_ns: i128,
        v9_boot_ms: Option<i128>,
        export_s: u32,
        s: &mut DecodeSummary,
        sink: &mut impl FnMut(&FlowRecord),
    ) -> Result<()> {
        let what = if v9_boot_ms.is_some() {
            "NetFlow v9"
        } else {
            "IPFIX"
        };
        let lim = self.limits();
        let Some(t) = self.templates.get(&(dk, tid)) else {
            s.sets_without_template += 1;
            return Ok(());
        };
        let mut r = Rd::new(body, "flow data record");
        // Records follow until fewer bytes than the smallest record remain (padding).
        while r.remaining() >= t.min_len {
            let mut v = Vals::default();
            for f in &t.fields {
                let len = if f.len == VARLEN {
                    let l = r
                        .u8()
                        .map_err(|_| bad(what, base + r.pos, "variable-length field truncated"))?;
                    if l == 255 {
                        usize::from(r.u16().map_err(|_| {
                            bad(what, base + r.pos, "variable-length field truncated")
                        })?)
                    } else {
                        usize::from(l)
                    }
                } else {
                    usize::from(f.len)
                };
                let off = base + r.pos;
                let val = r.bytes(len).map_err(|_| {
                    bad(
                        what,
                        off,
                        format!("record of template {tid} is cut short in field {}", f.ie),
                    )
                })?;
                v.take(f, val, export_ns);
            }
            if t.options {
                s.options_records += 1;
                let n = v.sampling_n();
                let info = self.domains.entry(dk).or_default();
                if let Some(n) = n {
                    info.sampling = Some(n);
                }
                if let Some(i) = v.sys_init_ms {
                    info.sys_init_ms = Some(i);
                }
                if let (Some(id), Some(n)) = (v.sampler_id, n) {
                    if self.samplers.len() < lim.max_samplers
                        || self.samplers.contains_key(&(dk, id))
                    {
                        self.samplers.insert((dk, id), n);
                    }
                }
                continue;
            }
            let (Some(src), Some(dst)) = (v.src, v.dst) else {
                s.records_skipped += 1;
                continue;
            };
            let info = self.domains.get(&dk).copied().unwrap_or_default();
            let n = v
                .sampling_n()
                .or_else(|| {
                    v.sampler_id
                        .and_then(|id| self.samplers.get(&(dk, id)).copied())
                })
                .or(info.sampling)
                .unwrap_or(1)
                .max(1);
            // Uptime-based times: v9 from the header; IPFIX from systemInitTime.
            let boot_ms = v9_boot_ms.or_else(|| v.sys_init_ms.or(info.sys_init_ms).map(i128::from));
            let up = |ms: Option<u64>| -> Option<i128> {
                match (ms, boot_ms) {
                    (Some(m), Some(b)) => Some((b + i128::from(m)) * 1_000_000),
                    _ => None,
                }
            };
            let fallback = i128::from(export_s) * 1_000_000_000;
            // A record with only one end time is a point in time; with neither,
            // the export time stands in.
            let start = v.start_ns.or_else(|| up(v.start_uptime_ms));
            let end = v.end_ns.or_else(|| up(v.end_uptime_ms));
            let first = start.or(end).unwrap_or(fallback);
            let last = end.unwrap_or(first.max(fallback));
            let clamp = |x: i128| x.clamp(0, i128::from(u64::MAX)) as u64;
            let rec = FlowRecord {
                src_addr: src,
                dst_addr: dst,
                src_port: v.sport,
                dst_port: v.dport,
                proto: v.proto,
                bytes: v.octets.or(v.octets_total).or(v.out_octets).unwrap_or(0),
                packets: v.packets.or(v.packets_total).or(v.out_packets).unwrap_or(0),
                first_ns: clamp(first),
                last_ns: clamp(last),
                sampling_interval: n,
            };
            if !rec.is_consistent() {
                s.records_skipped += 1;
                continue;
            }
            sink(&rec);
            s.records += 1;
        }
        Ok(())
    }
}
