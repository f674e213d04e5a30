//! Delayed-ACK normalisation (001 Alg. 6, §5.4.6, notes §3.8).
//!
//! With delayed ACKs the sender learns one arrival timestamp per ACK (typically every
//! second packet). Alg. 6 spreads each ACK's receive interval evenly over the `cnt`
//! packets it covers so the estimator again sees one observation per packet.
//! As printed, line 8 sets `sum_rcvgap = seqno − last_acked` (a sequence-number
//! difference) and the `else` branch lacks `cnt++`; the corrected reading uses the
//! difference of echoed arrival timestamps and counts every packet (notes §3.8).

use crate::error::{Error, Result};

/// Which reading of Alg. 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelAckVariant {
    /// Receive interval = difference of echoed arrival stamps; `cnt` counts every packet.
    Corrected,
    /// As printed: interval = `seqno − last_acked`; un-ACKed packets add their send gap
    /// but are not counted.
    Literal,
}

/// One data packet of a p-stream as the sender sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckedPacket {
    /// Sequence number (Literal variant only; bytes or packets, as the caller keeps them).
    pub seqno: u64,
    /// Send gap before this packet, ns.
    pub send_gap_ns: f64,
    /// Arrival timestamp echoed by the ACK this packet triggered, ns; `None` if this
    /// packet did not trigger an ACK.
    pub ack_rx_ns: Option<u64>,
}

/// Normalise `pkts` into per-packet gaps. `last_acked_rx_ns` / `last_acked_seq` describe
/// the ACK preceding the p-stream. Writes into `out_gs`/`out_gr` (each at least
/// `pkts.len()` long) and returns the number of observations written; packets after
/// the last ACK are not covered. Allocation-free.
pub fn normalize(
    pkts: &[AckedPacket],
    last_acked_rx_ns: u64,
    last_acked_seq: u64,
    variant: DelAckVariant,
    out_gs: &mut [f64],
    out_gr: &mut [f64],
) -> Result<usize> {
    if out_gs.len() < pkts.len() || out_gr.len() < pkts.len() {
        return Err(Error::invalid(format!(
            "output buffers ({} / {}) are shorter than the {} packets to normalise",
            out_gs.len(),
            out_gr.len(),
            pkts.len()
        )));
    }
    let (mut last_rx, mut last_seq) = (last_acked_rx_ns, last_acked_seq);
    let mut sum_s = 0.0;
    let mut cnt = 0usize;
    let mut w = 0usize;
    for (i, p) in pkts.iter().enumerate() {
        if !p.send_gap_ns.is_finite() || p.send_gap_ns < 0.0 {
            return Err(Error::invalid(format!(
                "packet {i} has send gap {} ns; gaps must be finite and >= 0",
                p.send_gap_ns
            )));
        }
        match p.ack_rx_ns {
            Some(rx) => {
                cnt += 1;
                sum_s += p.send_gap_ns;
                let sum_r = match variant {
                    DelAckVariant::Corrected => {
                        if rx < last_rx {
                            return Err(Error::invalid(format!(
                                "ACK of packet {i} echoes arrival {rx} ns, earlier than the previous ACK's {last_rx} ns; pass ACKs in arrival order"
                            )));
                        }
                        (rx - last_rx) as f64
                    }
                    DelAckVariant::Literal => p.seqno.wrapping_sub(last_seq) as f64,
                };
                for _ in 0..cnt {
                    if w >= out_gs.len() {
                        break;
                    }
                    out_gs[w] = sum_s / cnt as f64;
                    out_gr[w] = sum_r / cnt as f64;
                    w += 1;
                }
                sum_s = 0.0;
                cnt = 0;
                last_rx = rx;
                last_seq = p.seqno;
            }
            None => {
                if variant == DelAckVariant::Corrected {
                    cnt += 1;
                }
                sum_s += p.send_gap_ns;
            }
        }
    }
    Ok(w)
}
