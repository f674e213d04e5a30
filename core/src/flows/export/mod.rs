//! NetFlow v5, NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) decoding into
//! [`FlowRecord`]s, with the exporter's packet-sampling interval attached
//! (003 §2.4.2: estimates are raw × N).
//!
//! Zero-copy and allocation-free per record: a datagram is read in place and
//! each record is handed to a callback. Only templates (v9/IPFIX) allocate,
//! when they arrive. Every malformed datagram is an [`Error::InvalidInput`]
//! naming the version, the offset and what was wrong; nothing panics. Records
//! decoded before the fault in the same datagram have already been delivered.
//!
//! Sampling, in order of precedence for a data record:
//! 1. a sampling field in the record itself (v9/IPFIX IE 34 samplingInterval,
//!    50 samplerRandomInterval, 305/306 samplingPacketInterval/Space,
//!    309/310 samplingSize/Population, 311 samplingProbability);
//! 2. the sampler its sampler/selector ID (IE 48 / 302) names in an options record;
//! 3. the last sampling options record of its exporter and observation domain
//!    (v9 source ID); v5: the header's sampling field (low 14 bits);
//! 4. otherwise 1 (unsampled).
//!
//! No parser crate is used: the maintained one (`netflow_parser`) allocates
//! per packet and record and needs a newer Rust than this workspace's MSRV.

mod encode;
mod template;
mod v5;

pub use encode::{encode_ipfix, encode_v5, encode_v9};
pub use template::DecoderLimits;

use std::collections::HashMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::record::FlowRecord;
use crate::error::{Error, Result};

/// What one datagram held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodeSummary {
    /// 5, 9 or 10 (IPFIX).
    pub version: u16,
    /// Flow records delivered to the callback.
    pub records: u32,
    /// Templates and options templates learnt (or withdrawn).
    pub templates: u32,
    /// Options data records read (sampling, system init time).
    pub options_records: u32,
    /// Data sets skipped because their template is not known yet (normal
    /// right after a collector starts; v9/IPFIX resend templates periodically).
    pub sets_without_template: u32,
    /// Data records without source/destination addresses, or with impossible
    /// values (last before first, bytes in 0 packets): skipped.
    pub records_skipped: u32,
}

/// A stateful decoder: templates and sampling per exporter and domain.
#[derive(Debug, Default)]
pub struct Decoder {
    pub(crate) t: template::TemplateState,
}

impl Decoder {
    /// A decoder with the default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// A decoder with explicit limits on template state.
    pub fn with_limits(limits: DecoderLimits) -> Self {
        Decoder {
            t: template::TemplateState::new(limits),
        }
    }

    /// Number of templates currently known.
    pub fn template_count(&self) -> usize {
        self.t.template_count()
    }

    /// Decode one export datagram from `exporter`, calling `sink` for each flow
    /// record in order.
    pub fn decode(
        &mut self,
        exporter: SocketAddr,
        pkt: &[u8],
        mut sink: impl FnMut(&FlowRecord),
    ) -> Result<DecodeSummary> {
        if pkt.len() < 2 {
            return Err(Error::invalid(format!(
                "flow export datagram of {} byte(s) from {exporter} is too short to hold a version",
                pkt.len()
            )));
        }
        match u16::from_be_bytes([pkt[0], pkt[1]]) {
            5 => v5::decode(pkt, &mut sink),
            9 => self.t.decode_v9(exporter, pkt, &mut sink),
            10 => self.t.decode_ipfix(exporter, pkt, &mut sink),
            v => Err(Error::invalid(format!(
                "flow export datagram from {exporter} has version {v}; opsel reads NetFlow 5, 9 and IPFIX (10)"
            ))),
        }
    }
}

/// Big-endian reads that return a clear error instead of panicking.
#[derive(Clone, Copy)]
pub(crate) struct Rd<'a> {
    pub b: &'a [u8],
    pub pos: usize,
    pub what: &'static str,
}

impl<'a> Rd<'a> {
    pub fn new(b: &'a [u8], what: &'static str) -> Self {
        Rd { b, pos: 0, what }
    }

    pub fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::invalid(format!(
                "{}: needs {n} byte(s) at offset {} but only {} remain (truncated datagram?)",
                self.what,
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        let s = self.bytes(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }

    pub fn u32(&mut self) -> Result<u32> {
        let s = self.bytes(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
}

/// Unsigned big-endian integer of 1..=8 bytes (reduced-size encoding, RFC 7011 §6.2).
pub(crate) fn be_uint(b: &[u8]) -> u64 {
    b.iter().take(8).fold(0u64, |a, &x| (a << 8) | u64::from(x))
}

#[allow(dead_code)]
pub(crate) type ExporterMap<V> = HashMap<SocketAddr, V>;
