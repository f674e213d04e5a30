//! Flow records as a sampling exporter reports them (003 §2.4.2, §3.5.2).
//!
//! A record carries the *sampled* byte and packet counts exactly as exported,
//! plus the sampling denominator N of the exporter (1-in-N packet sampling).
//! Estimates of the true volume are `raw × N` (003 §3.4.3: "1000 × Σ reported
//! bytes"); the α threshold H is compared with the estimate (notes §1: only
//! the sampling-corrected reading is physically possible).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One NetFlow / IPFIX flow report. Times are UTC nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRecord {
    pub src_addr: IpAddr,
    pub dst_addr: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// IP protocol number (6 TCP, 17 UDP).
    pub proto: u8,
    /// Sampled bytes, as exported (not scaled).
    pub bytes: u64,
    /// Sampled packets, as exported (not scaled).
    pub packets: u64,
    /// First-packet timestamp s_ij (003 Table 3.4).
    pub first_ns: u64,
    /// Last-packet timestamp e_ij.
    pub last_ns: u64,
    /// Packet-sampling denominator N (1 = unsampled; ESnet 1000, Internet2 100; 003 §2.4.2).
    pub sampling_interval: u32,
}

/// The 5-tuple that names a flow (003 Table 3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FiveTuple {
    pub src_addr: IpAddr,
    pub dst_addr: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

impl FlowRecord {
    /// The record's 5-tuple.
    pub fn five_tuple(&self) -> FiveTuple {
        FiveTuple {
            src_addr: self.src_addr,
            dst_addr: self.dst_addr,
            src_port: self.src_port,
            dst_port: self.dst_port,
            proto: self.proto,
        }
    }

    /// Sampling-corrected byte estimate `bytes × N` (003 §3.4.3), saturating.
    pub fn est_bytes(&self, n: u32) -> u64 {
        self.bytes.saturating_mul(u64::from(n.max(1)))
    }

    /// Sampling-corrected packet estimate `packets × N`, saturating.
    pub fn est_packets(&self, n: u32) -> u64 {
        self.packets.saturating_mul(u64::from(n.max(1)))
    }

    /// Duration of the report (its α-interval when it is an α report), ns.
    pub fn duration_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.first_ns)
    }

    /// [`validate`](Self::validate) without the message (allocation-free).
    pub fn is_consistent(&self) -> bool {
        self.last_ns >= self.first_ns
            && self.sampling_interval > 0
            && !(self.packets == 0 && self.bytes > 0)
    }

    /// Reject records no exporter could produce: last before first, N = 0,
    /// bytes without packets. Allocates only on the error path.
    pub fn validate(&self) -> Result<()> {
        if self.last_ns < self.first_ns {
            return Err(Error::invalid(format!(
                "flow record {}:{} -> {}:{} ends at {} ns before it starts at {} ns; swap or drop the record",
                self.src_addr, self.src_port, self.dst_addr, self.dst_port, self.last_ns, self.first_ns
            )));
        }
        if self.sampling_interval == 0 {
            return Err(Error::invalid(
                "flow record has sampling_interval 0; use 1 for unsampled records (1-in-N sampling needs N >= 1)",
            ));
        }
        if self.packets == 0 && self.bytes > 0 {
            return Err(Error::invalid(format!(
                "flow record {}:{} -> {}:{} has {} bytes in 0 packets; a report counts at least one packet",
                self.src_addr, self.src_port, self.dst_addr, self.dst_port, self.bytes
            )));
        }
        Ok(())
    }
}
