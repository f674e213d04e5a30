//! Driver settings: echo bursts (000 §3.2), byte-accounting interval,
//! time limit, `TCP_NOTSENT_LOWAT`, read size, lead-in. Checked once in
//! [`DriverConfig::validate`].

use super::NS_PER_S;
use crate::sys::linux::rtt::BurstConfig;
use crate::{Error, Result};

/// Driver settings. `Default` follows 000 §3.2 (10 echoes 1 ms apart, one
/// sample per second) and logs bytes per 1 s interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverConfig {
    /// Echoes per sample and their spacing; the reply timeout is capped at
    /// the netlab recorder's wait, until 2 ms before the next burst is due
    /// ([`echo_timeout_ns`](super::echo_timeout_ns): 189 ms at 200 ms; the
    /// default 400 ms applies at 1 s).
    pub burst: BurstConfig,
    /// Length of the byte-accounting interval of [`DriverEvent::Interval`](super::DriverEvent::Interval).
    pub interval_ns: u64,
    /// Stop after this long (fixed-time transfer, iPerfOPS `-t`); `None` = until EOF.
    pub time_limit_ns: Option<u64>,
    /// `TCP_NOTSENT_LOWAT` while the driver runs (`None` leaves the socket
    /// alone; then silences start only after the send buffer has drained).
    pub notsent_lowat_bytes: Option<u32>,
    /// Bytes read from the source per read call.
    pub chunk_bytes: usize,
    /// Active probing only: run the pattern's last segment (e.g. the B5 burst
    /// of S5-C5-S5-B5) right before every probe, at the end of the steady
    /// phase and before the first probe. [`OpsDriver::new`](super::OpsDriver::new) sets the
    /// controller's [`Config::lead_in`](crate::ops::Config::lead_in) from it;
    /// the controller schedules the segment as actions.
    pub lead_in: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            burst: BurstConfig {
                timeout_ns: 400_000_000,
                ..BurstConfig::default()
            },
            interval_ns: NS_PER_S,
            time_limit_ns: None,
            // 128 KiB: what the netlab training collection used.
            notsent_lowat_bytes: Some(128 * 1024),
            chunk_bytes: 256 * 1024,
            lead_in: true,
        }
    }
}

impl DriverConfig {
    pub(super) fn validate(&self, sample_period_ns: u64) -> Result<()> {
        if self.interval_ns == 0 {
            return Err(Error::invalid(
                "driver interval_ns is 0; use e.g. 1e9 (bytes per second)",
            ));
        }
        if self.chunk_bytes == 0 || self.chunk_bytes > 64 << 20 {
            return Err(Error::invalid(format!(
                "driver chunk_bytes = {} must be in 1..=64 MiB",
                self.chunk_bytes
            )));
        }
        // The echoes take at most half the period, so their replies have at
        // least the other half, less the recorder's 2-ms guard
        // (`BurstConfig::timeout_within_ns`).
        let echoes_ns = u64::from(self.burst.count).saturating_mul(self.burst.interval_ns);
        if self.burst.count == 0 || echoes_ns >= sample_period_ns / 2 {
            return Err(Error::invalid(format!(
                "{} echoes {} ns apart do not fit in half a sample period ({} ns), which leaves their replies too little time before the next burst; 000 §3.2 uses 10 echoes 1 ms apart per 1 s sample",
                self.burst.count, self.burst.interval_ns, sample_period_ns
            )));
        }
        if self.burst.timeout_ns == 0 {
            return Err(Error::invalid(
                "driver burst.timeout_ns is 0: no echo reply would be awaited; use e.g. 400e6 (it is capped at 2 ms before the next burst)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_rejects_bad_values() {
        let mut c = DriverConfig::default();
        c.validate(NS_PER_S).unwrap();
        c.interval_ns = 0;
        assert!(c
            .validate(NS_PER_S)
            .unwrap_err()
            .to_string()
            .contains("interval_ns"));
        let mut c = DriverConfig::default();
        c.burst.count = 600; // 600 ms of echoes in a 1 s period
        assert!(c
            .validate(NS_PER_S)
            .unwrap_err()
            .to_string()
            .contains("600 echoes"));
        let c = DriverConfig {
            chunk_bytes: 0,
            ..DriverConfig::default()
        };
        assert!(c.validate(NS_PER_S).is_err());
        // 10 echoes 1 ms apart fit a 200-ms period, not a 20-ms one.
        let mut c = DriverConfig::default();
        c.validate(200_000_000).unwrap();
        let e = c.validate(20_000_000).unwrap_err().to_string();
        assert!(e.contains("half a sample period (20000000 ns)"), "{e}");
        c.burst.timeout_ns = 0;
        let e = c.validate(NS_PER_S).unwrap_err().to_string();
        assert!(e.contains("burst.timeout_ns is 0"), "{e}");
    }
}
