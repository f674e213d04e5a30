//! TCP pacing cap via `SO_MAX_PACING_RATE` (bytes per second).
//!
//! Since Linux 4.13 TCP paces internally when the qdisc is not fq, so the cap
//! works on this project's machines without fq (000 note §2.3: "For TCP,
//! SO_MAX_PACING_RATE uses TCP internal pacing without fq"). The kernel value
//! is bytes/s; the API takes bit/s (`rate_bps`) like the rest of opsel.

use std::os::fd::AsFd;

use super::sockopt::{get_raw, set_val};
use crate::{Error, Result};

/// Kernel sentinel for "no cap" (`~0UL`).
pub const UNLIMITED: u64 = u64::MAX;

/// Cap the pacing rate of a socket at `rate_bps` bit/s (`None` removes the cap).
/// Rounds down to whole bytes per second; a rate below 8 bit/s is rejected.
pub fn set_max_pacing_rate(fd: impl AsFd, rate_bps: Option<u64>) -> Result<()> {
    let fd = fd.as_fd();
    let bytes_per_s = match rate_bps {
        None => UNLIMITED,
        Some(r) if r < 8 => {
            return Err(Error::invalid(format!(
                "pacing rate {r} bit/s is below 1 byte/s; use None to remove the cap"
            )))
        }
        Some(r) => r / 8,
    };
    // The option takes an unsigned long on 64-bit (u32 also accepted); pass u64.
    set_val(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        "setsockopt(SO_MAX_PACING_RATE)",
        bytes_per_s,
    )
}

/// Current cap in bit/s, `None` when uncapped.
pub fn get_max_pacing_rate(fd: impl AsFd) -> Result<Option<u64>> {
    let fd = fd.as_fd();
    let mut buf = [0u8; 8];
    let n = get_raw(
        fd,
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        "getsockopt(SO_MAX_PACING_RATE)",
        &mut buf,
    )?;
    let v = match n {
        8 => u64::from_ne_bytes(buf),
        4 => {
            let v = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if v == u32::MAX {
                UNLIMITED
            } else {
                u64::from(v)
            }
        }
        _ => {
            return Err(Error::Unsupported(format!(
                "getsockopt(SO_MAX_PACING_RATE) returned {n} bytes"
            )))
        }
    };
    Ok(if v == UNLIMITED {
        None
    } else {
        Some(v.saturating_mul(8))
    })
}
