//! Available-bandwidth estimation from p-stream gap arrays (document 001, TCP Rapid).
//!
//! Sans-IO: everything here works on arrays of send gaps `g_s` and receive gaps `g_r`
//! in nanoseconds (f64, because BASS averaging makes gaps fractional); timestamps and
//! schedules are u64 ns. The live path (`sys::linux::bwe_driver` sends paced UDP p-streams
//! and collects RX timestamps) feeds the same functions.
//!
//! - [`pstream`]: p-stream rates and send schedule (001 §1.3)
//! - [`bass`]: BASS single/multi-pass + AVG_WINDOW (001 §5.3)
//! - [`abest`](mod@abest): excursion estimator and single-rate decision (001 Alg. 1, §5.3.2)
//! - [`delack`]: delayed-ACK normalisation (001 Alg. 6)
//! - [`pathload`]: Pathload PCT/PDT, IMR-avg, IMR-wavelet baselines (001 §2.2.1.2, §5.1)
//! - [`adapter`]: Rapid's rate adapter (001 §2.3, §8.1)
//! - [`features`]: FFT-magnitude features for the ML estimator (001 Ch 6)
//! - [`sim`]: seeded trace simulator with the noise models of 001 (notes §9.2)
//! - [`ml`]: the ML multi-rate estimator (features + tree regressor, 001 Ch 6)
//! - [`wire`]: the live probe/reflector messages and the pairing of departures with
//!   arrivals (001 §2.3, §7.2); the socket loops are `sys::linux::bwe_driver`
//!
//! ABest of one p-stream: the thesis's stream (4 rates × 16 packets, harmonic
//! mean 7 Gbit/s, 001 §5.5) crosses a bottleneck with 7 Gbit/s available, so
//! the packets sent faster leave it 7 Gbit/s apart and their receive gaps
//! exceed their send gaps; ABest is the rate just below that terminal
//! excursion (001 Alg. 1). Measured gaps go through [`estimate_multi_rate`],
//! which denoises them with BASS (coalescing, 001 §5.3) before the same step.
//!
//! ```
//! use opsel::bwe::{abest, AbestConfig, PStreamSpec};
//!
//! let spec = PStreamSpec::thesis_default(7e9);
//! let rates: Vec<f64> = (0..spec.n_rates).map(|k| spec.rate_bps(k).unwrap()).collect();
//! assert!(rates[1] < 7e9 && 7e9 < rates[2]); // 5.7, 6.6, 7.6, 8.7 Gbit/s
//! let mut send_gap_ns = vec![0.0; spec.len()];
//! spec.send_gaps_into(&mut send_gap_ns)?;
//! let out_gap_ns = spec.packet_bytes as f64 * 8.0 / 7e9 * 1e9; // 7 Gbit/s departures
//! let recv_gap_ns: Vec<f64> = send_gap_ns.iter().map(|&g| g.max(out_gap_ns)).collect();
//!
//! let est = abest(&send_gap_ns, &recv_gap_ns, &spec, &AbestConfig::default())?;
//! assert_eq!(est.excursion_start, Some(2 * spec.packets_per_rate)); // first 7.6 Gbit/s packet
//! assert_eq!(est.abest_bps, rates[1]);
//! assert!(!est.below_range && !est.above_range);
//! # Ok::<(), opsel::Error>(())
//! ```

pub mod abest;
pub mod adapter;
pub mod bass;
pub mod delack;
pub mod features;
pub mod ml;
pub mod pathload;
pub mod pstream;
pub mod sim;
pub mod wire;

pub use abest::{abest, rate_exceeds_avail_bw, Abest, AbestConfig, AbestVariant, GAP_NS_EPSILON};
pub use bass::{
    BassConfig, BassReport, BassVariant, BassWorkspace, HeadSegment, TailSegment, ThresholdScale,
    WindowAlign,
};
pub use pstream::PStreamSpec;

use crate::error::Result;

/// Reusable buffers for [`estimate_multi_rate`]: copies of the input gaps (so the
/// caller's arrays stay untouched) and the BASS workspace.
#[derive(Debug, Clone)]
pub struct EstimatorWorkspace {
    gs: Vec<f64>,
    gr: Vec<f64>,
    bass: BassWorkspace,
}

impl EstimatorWorkspace {
    /// Workspace for p-streams of up to `max_packets` packets.
    pub fn new(max_packets: usize) -> Self {
        EstimatorWorkspace {
            gs: vec![0.0; max_packets],
            gr: vec![0.0; max_packets],
            bass: BassWorkspace::new(max_packets),
        }
    }

    /// The denoised send and receive gaps of the last call.
    pub fn denoised(&self, n: usize) -> (&[f64], &[f64]) {
        let n = n.min(self.gs.len());
        (&self.gs[..n], &self.gr[..n])
    }
}

/// Rapid's multi-rate estimator: multi-pass BASS + AVG_WINDOW, then ABest
/// (001 Alg. 5). Zero allocation with a preallocated workspace.
pub fn estimate_multi_rate(
    send_gap_ns: &[f64],
    recv_gap_ns: &[f64],
    spec: &PStreamSpec,
    bass_cfg: &BassConfig,
    abest_cfg: &AbestConfig,
    ws: &mut EstimatorWorkspace,
) -> Result<Abest> {
    let n = send_gap_ns.len();
    if n > ws.gs.len() || recv_gap_ns.len() != n {
        return Err(crate::Error::invalid(format!(
            "gap arrays of lengths {} / {} do not fit the estimator workspace of {} packets (or differ); create EstimatorWorkspace::new({n})",
            n,
            recv_gap_ns.len(),
            ws.gs.len()
        )));
    }
    let (gs, gr) = (&mut ws.gs[..n], &mut ws.gr[..n]);
    gs.copy_from_slice(send_gap_ns);
    gr.copy_from_slice(recv_gap_ns);
    bass::multi_pass(gs, gr, bass_cfg, &mut ws.bass)?;
    abest(gs, gr, spec, abest_cfg)
}

/// Single-rate decision with single-pass BASS (001 §5.3.2): true when the probing rate
/// exceeds the available bandwidth. Uses only complete buffering events when BASS
/// found any, else the whole stream. `rel_tol`: see [`rate_exceeds_avail_bw`] (0 = thesis).
pub fn decide_single_rate(
    send_gap_ns: &[f64],
    recv_gap_ns: &[f64],
    bass_cfg: &BassConfig,
    rel_tol: f64,
    ws: &mut EstimatorWorkspace,
) -> Result<bool> {
    let n = send_gap_ns.len();
    if n > ws.gs.len() || recv_gap_ns.len() != n {
        return Err(crate::Error::invalid(format!(
            "gap arrays of lengths {} / {} do not fit the estimator workspace of {} packets (or differ)",
            n,
            recv_gap_ns.len(),
            ws.gs.len()
        )));
    }
    let (gs, gr) = (&mut ws.gs[..n], &mut ws.gr[..n]);
    gs.copy_from_slice(send_gap_ns);
    gr.copy_from_slice(recv_gap_ns);
    let rep = bass::single_pass(gs, gr, bass_cfg, &mut ws.bass)?;
    rate_exceeds_avail_bw(gs, gr, rep.complete_span, rel_tol)
}
