//! Probe payload header carried by every paced packet (001 §2: the receiver
//! needs the sequence number to detect loss and reordering and the send stamp
//! to pair send and receive gaps).
//!
//! Layout, big-endian (network order), 32 bytes, the rest of the payload is padding:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `b"OPSL"` |
//! | 4..8 | sequence number within the train (u32) |
//! | 8..12 | train id (u32) |
//! | 12..16 | reserved, 0 |
//! | 16..24 | scheduled offset from train start (u64 ns) |
//! | 24..32 | sender CLOCK_MONOTONIC just before the send call (u64 ns) |

use crate::{Error, Result};

/// Bytes of the header; payloads must be at least this long.
pub const HEADER_LEN: usize = 32;
/// First four bytes of every opsel probe payload.
pub const MAGIC: [u8; 4] = *b"OPSL";

/// Decoded probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeHeader {
    pub seq: u32,
    pub train_id: u32,
    pub sched_offset_ns: u64,
    pub send_mono_ns: u64,
}

impl ProbeHeader {
    /// Write the header into the start of `buf`.
    pub fn encode(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < HEADER_LEN {
            return Err(Error::invalid(format!(
                "probe payload of {} bytes is shorter than the {HEADER_LEN}-byte header; use at least {HEADER_LEN} bytes",
                buf.len()
            )));
        }
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&self.seq.to_be_bytes());
        buf[8..12].copy_from_slice(&self.train_id.to_be_bytes());
        buf[12..16].copy_from_slice(&[0; 4]);
        buf[16..24].copy_from_slice(&self.sched_offset_ns.to_be_bytes());
        buf[24..32].copy_from_slice(&self.send_mono_ns.to_be_bytes());
        Ok(())
    }

    /// Overwrite only the send stamp (done just before the send call).
    pub(crate) fn stamp(buf: &mut [u8], send_mono_ns: u64) {
        buf[24..32].copy_from_slice(&send_mono_ns.to_be_bytes());
    }

    /// Parse a payload; `None` when it is too short or not an opsel probe.
    pub fn decode(buf: &[u8]) -> Option<ProbeHeader> {
        if buf.len() < HEADER_LEN || buf[0..4] != MAGIC {
            return None;
        }
        let u32_at = |o: usize| u32::from_be_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&buf[o..o + 8]);
            u64::from_be_bytes(a)
        };
        Some(ProbeHeader {
            seq: u32_at(4),
            train_id: u32_at(8),
            sched_offset_ns: u64_at(16),
            send_mono_ns: u64_at(24),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        let h = ProbeHeader {
            seq: 1,
            train_id: 2,
            sched_offset_ns: 3,
            send_mono_ns: 0x0102_0304_0506_0708,
        };
        let mut b = [0xffu8; 40];
        h.encode(&mut b).unwrap();
        assert_eq!(&b[..8], b"OPSL\0\0\0\x01");
        assert_eq!(&b[24..32], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b[32], 0xff, "padding untouched");
        assert!(ProbeHeader { ..h }.encode(&mut [0u8; 31]).is_err());
        assert_eq!(ProbeHeader::decode(&b[..31]), None);
        assert_eq!(
            ProbeHeader::decode(b"XXXX0000000000000000000000000000"),
            None
        );
    }

    proptest! {
        #[test]
        fn roundtrip(seq in any::<u32>(), id in any::<u32>(), o in any::<u64>(), s in any::<u64>(), pad in 0usize..64) {
            let h = ProbeHeader { seq, train_id: id, sched_offset_ns: o, send_mono_ns: 0 };
            let mut b = vec![0u8; HEADER_LEN + pad];
            h.encode(&mut b).unwrap();
            ProbeHeader::stamp(&mut b, s);
            prop_assert_eq!(ProbeHeader::decode(&b), Some(ProbeHeader { send_mono_ns: s, ..h }));
        }

        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = ProbeHeader::decode(&b);
        }
    }
}
