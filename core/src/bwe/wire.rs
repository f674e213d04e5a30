//! The live p-stream probe/reflector exchange (001 §2.3 Fig 2.1 closed loop, notes §9.1),
//! sans-IO: the messages, the pairing of departures with arrivals ([`pair_gaps`]) and the
//! send schedule with its lead-in. The socket loops that use them (the prober sending
//! paced p-streams, the reflector stamping every arrival in the kernel and echoing the
//! stamps back) are `crate::sys::linux::bwe_driver` (Linux).
//!
//! Rapid carries the receiver stamps in TCP timestamps (001 §7.2); a UDP probe has no
//! such field, so a small control exchange on a second port replaces it \[Ours\]:
//!
//! | message | bytes (big-endian) |
//! |---|---|
//! | request (prober → reflector) | `OPSQ`, train id u32, packets u32 |
//! | ready (reflector → prober) | `OPSR`, train id u32 |
//! | report (reflector → prober) | `OPSE`, train id u32, count u32, count × (seq u32, rx ns u64) |
//!
//! The reflector's data port is its control port + 1. Stamps are the reflector's
//! CLOCK_MONOTONIC: only their differences (receive gaps) are used, so the two hosts
//! need no clock synchronisation.

use crate::error::{Error, Result};

/// Request magic.
pub const REQ_MAGIC: [u8; 4] = *b"OPSQ";
/// Ready magic.
pub const READY_MAGIC: [u8; 4] = *b"OPSR";
/// Report magic.
pub const REPORT_MAGIC: [u8; 4] = *b"OPSE";
/// Largest p-stream (packets, lead-in included) whose report fits one UDP datagram.
pub const MAX_REPORT_PACKETS: usize = (65_507 - 12) / 12;

/// Encode a request for a train of `packets` packets.
pub fn encode_request(train_id: u32, packets: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&REQ_MAGIC);
    b[4..8].copy_from_slice(&train_id.to_be_bytes());
    b[8..12].copy_from_slice(&packets.to_be_bytes());
    b
}

/// Decode a request; `None` if it is not one.
pub fn decode_request(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() != 12 || b[..4] != REQ_MAGIC {
        return None;
    }
    Some((be32(&b[4..8]), be32(&b[8..12])))
}

/// Encode a ready message.
pub fn encode_ready(train_id: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&READY_MAGIC);
    b[4..8].copy_from_slice(&train_id.to_be_bytes());
    b
}

/// Decode a ready message.
pub fn decode_ready(b: &[u8]) -> Option<u32> {
    if b.len() != 8 || b[..4] != READY_MAGIC {
        return None;
    }
    Some(be32(&b[4..8]))
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Encode a report of `(seq, rx_ns)` arrivals into `out` (cleared first).
pub fn encode_report(train_id: u32, arrivals: &[(u32, u64)], out: &mut Vec<u8>) -> Result<()> {
    if arrivals.len() > MAX_REPORT_PACKETS {
        return Err(Error::invalid(format!(
            "report of {} arrivals exceeds {MAX_REPORT_PACKETS} (one UDP datagram); use shorter p-streams",
            arrivals.len()
        )));
    }
    out.clear();
    out.extend_from_slice(&REPORT_MAGIC);
    out.extend_from_slice(&train_id.to_be_bytes());
    out.extend_from_slice(&(arrivals.len() as u32).to_be_bytes());
    for &(s, t) in arrivals {
        out.extend_from_slice(&s.to_be_bytes());
        out.extend_from_slice(&t.to_be_bytes());
    }
    Ok(())
}

/// Decode a report into `out` (cleared first); returns the train id, or `None` if
/// `b` is not a well-formed report.
pub fn decode_report(b: &[u8], out: &mut Vec<(u32, u64)>) -> Option<u32> {
    if b.len() < 12 || b[..4] != REPORT_MAGIC {
        return None;
    }
    let id = be32(&b[4..8]);
    let n = be32(&b[8..12]) as usize;
    if b.len() != 12 + 12 * n {
        return None;
    }
    out.clear();
    for k in 0..n {
        let o = 12 + 12 * k;
        out.push((be32(&b[o..o + 4]), be64(&b[o + 4..o + 12])));
    }
    Some(id)
}

/// Why a p-stream gave no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairOutcome {
    /// `N` gaps were written.
    Complete,
    /// Some packets were lost: no estimate (001 §8.2.1: p-streams with losses are
    /// skipped).
    Lost { received: usize },
    /// Arrivals out of order (reordering in the path): gaps would be negative.
    Reordered,
}

/// Turn the departures of `packets = N + 1` packets (lead-in first, ns, any clock)
/// and their echoed arrivals (`(seq, rx_ns)`, reflector clock, any order) into `N`
/// send gaps and `N` receive gaps. `out_gs`/`out_gr` must hold `N` values.
/// Allocation-free.
pub fn pair_gaps(
    departures_ns: &[u64],
    arrivals: &[(u32, u64)],
    out_gs: &mut [f64],
    out_gr: &mut [f64],
    rx_by_seq: &mut [u64],
) -> Result<PairOutcome> {
    let m = departures_ns.len();
    if m < 2 || out_gs.len() != m - 1 || out_gr.len() != m - 1 || rx_by_seq.len() != m {
        return Err(Error::invalid(format!(
            "pair_gaps: {m} departures need gap buffers of {} and a seq buffer of {m} (got {} / {} / {})",
            m.saturating_sub(1),
            out_gs.len(),
            out_gr.len(),
            rx_by_seq.len()
        )));
    }
    rx_by_seq.fill(u64::MAX);
    let mut received = 0;
    for &(s, t) in arrivals {
        let s = s as usize;
        if s < m && rx_by_seq[s] == u64::MAX {
            rx_by_seq[s] = t;
            received += 1;
        }
    }
    if received < m {
        return Ok(PairOutcome::Lost { received });
    }
    for i in 1..m {
        if rx_by_seq[i] < rx_by_seq[i - 1] || departures_ns[i] < departures_ns[i - 1] {
            return Ok(PairOutcome::Reordered);
        }
        out_gs[i - 1] = (departures_ns[i] - departures_ns[i - 1]) as f64;
        out_gr[i - 1] = (rx_by_seq[i] - rx_by_seq[i - 1]) as f64;
    }
    Ok(PairOutcome::Complete)
}

/// Send schedule of a p-stream plus its lead-in packet (Rapid sends continuously, so
/// the first gap is measured from the previous packet; notes §9.2 item 1): offsets in
/// ns, `N + 1` values, `out[0] = 0`.
pub fn schedule_with_lead_in(spec: &super::PStreamSpec, out: &mut [u64]) -> Result<()> {
    spec.validate()?;
    if out.len() != spec.len() + 1 {
        return Err(Error::invalid(format!(
            "schedule buffer has length {} but a p-stream of {} packets plus its lead-in needs {}",
            out.len(),
            spec.len(),
            spec.len() + 1
        )));
    }
    let mut t = 0.0f64;
    out[0] = 0;
    for i in 0..spec.len() {
        t += spec.send_gap_ns(i);
        out[i + 1] = t.round() as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bwe::PStreamSpec;

    #[test]
    fn messages_roundtrip_and_reject_foreign() {
        assert_eq!(decode_request(&encode_request(7, 65)), Some((7, 65)));
        assert_eq!(decode_ready(&encode_ready(9)), Some(9));
        assert_eq!(decode_request(&encode_ready(9)), None);
        let mut b = Vec::new();
        encode_report(3, &[(0, 10), (2, 30), (1, 20)], &mut b).unwrap();
        let mut out = Vec::new();
        assert_eq!(decode_report(&b, &mut out), Some(3));
        assert_eq!(out, vec![(0, 10), (2, 30), (1, 20)]);
        assert_eq!(decode_report(&b[..b.len() - 1], &mut out), None);
        let big = vec![(0u32, 0u64); MAX_REPORT_PACKETS + 1];
        assert!(encode_report(1, &big, &mut b).is_err());
    }

    #[test]
    fn pairing_orders_by_seq_and_detects_loss_and_reordering() {
        let dep = [100, 200, 350, 500];
        let arr = [(2u32, 1_400u64), (0, 1_000), (3, 1_600), (1, 1_150)];
        let (mut gs, mut gr, mut seq) = ([0.0; 3], [0.0; 3], [0u64; 4]);
        assert_eq!(
            pair_gaps(&dep, &arr, &mut gs, &mut gr, &mut seq).unwrap(),
            PairOutcome::Complete
        );
        assert_eq!(gs, [100.0, 150.0, 150.0]);
        assert_eq!(gr, [150.0, 250.0, 200.0]);
        assert_eq!(
            pair_gaps(&dep, &arr[..3], &mut gs, &mut gr, &mut seq).unwrap(),
            PairOutcome::Lost { received: 3 }
        );
        let bad = [(0u32, 1_000u64), (1, 900), (2, 1_400), (3, 1_600)];
        assert_eq!(
            pair_gaps(&dep, &bad, &mut gs, &mut gr, &mut seq).unwrap(),
            PairOutcome::Reordered
        );
        assert!(pair_gaps(&dep, &arr, &mut gs[..2], &mut gr, &mut seq).is_err());
    }

    #[test]
    fn lead_in_schedule_matches_send_gaps() {
        let spec = PStreamSpec::with_range(50e6, 4, 16, 0.5, 1500).unwrap();
        let mut s = vec![0u64; 65];
        schedule_with_lead_in(&spec, &mut s).unwrap();
        assert_eq!(s[0], 0);
        // Total = P·N/R_avg (harmonic-mean property of the rates, 001 §1.3).
        let total = spec.duration_ns();
        assert!((s[64] as f64 - total).abs() < 1.0, "{} vs {total}", s[64]);
        assert!(schedule_with_lead_in(&spec, &mut s[..64]).is_err());
    }
}
