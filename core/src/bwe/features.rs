//! Feature vectors for the ML estimator (001 Ch 6, notes §4.1): the Fourier transform of
//! the concatenated send and receive gaps `x = FFT(g_s ‖ g_r)`. The thesis does not say
//! whether magnitudes or complex parts are used; [`FeatureKind`] offers both.
//!
//! This function is the *reference*: the dataset exporter writes its output, and the
//! Python trainer (`opsel.train.bwe`) learns from those numbers, so training and Rust
//! inference see identical features.
//!
//! Layout (2N = `2·len` real inputs, gaps first divided by the mean send gap so the
//! features are dimensionless [Ours: the thesis probes one link speed]):
//! - `Magnitude`: `|X_k| / 2N` for k = 0..=N (N+1 values), then `ln(mean g_s in ns)`;
//! - `ReIm`: `Re X_k / 2N`, k = 0..=N, then `Im X_k / 2N`, k = 1..N−1 (2N values), then
//!   `ln(mean g_s)`.

use crate::error::{Error, Result};

/// Which parts of the spectrum to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureKind {
    /// Magnitudes (shift-tolerant).
    Magnitude,
    /// Real and imaginary parts (keeps phase).
    ReIm,
}

impl FeatureKind {
    /// Name used in model files and datasets.
    pub fn name(self) -> &'static str {
        match self {
            FeatureKind::Magnitude => "fft-magnitude",
            FeatureKind::ReIm => "fft-reim",
        }
    }

    /// Parse [`FeatureKind::name`].
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "fft-magnitude" => Ok(FeatureKind::Magnitude),
            "fft-reim" => Ok(FeatureKind::ReIm),
            _ => Err(Error::invalid(format!(
                "unknown feature kind {s:?}; expected \"fft-magnitude\" or \"fft-reim\""
            ))),
        }
    }
}

/// Number of features for p-streams of `n` packets.
pub fn feature_len(kind: FeatureKind, n: usize) -> usize {
    match kind {
        FeatureKind::Magnitude => n + 2,
        FeatureKind::ReIm => 2 * n + 1,
    }
}

/// Twiddle tables and buffers for one p-stream length (zero allocation per call).
#[derive(Debug, Clone)]
pub struct FeatureWorkspace {
    n: usize,
    re: Vec<f64>,
    im: Vec<f64>,
    cos: Vec<f64>,
    sin: Vec<f64>,
}

impl FeatureWorkspace {
    /// Workspace for p-streams of exactly `n_packets` packets (transform length 2N).
    pub fn new(n_packets: usize) -> Self {
        let m = 2 * n_packets;
        let (mut cos, mut sin) = (vec![0.0; m], vec![0.0; m]);
        for k in 0..m {
            let a = -2.0 * std::f64::consts::PI * k as f64 / m as f64;
            cos[k] = a.cos();
            sin[k] = a.sin();
        }
        FeatureWorkspace {
            n: n_packets,
            re: vec![0.0; m],
            im: vec![0.0; m],
            cos,
            sin,
        }
    }

    /// The p-stream length this workspace serves.
    pub fn packets(&self) -> usize {
        self.n
    }
}

/// In-place iterative radix-2 FFT (length a power of two) using the `m`-point twiddles.
fn fft_pow2(re: &mut [f64], im: &mut [f64], cos: &[f64], sin: &[f64]) {
    let m = re.len();
    let bits = m.trailing_zeros();
    for i in 0..m {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if j > i {
            re.swap(i, j);
            im.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= m {
        let step = m / len;
        for start in (0..m).step_by(len) {
            for k in 0..len / 2 {
                let (wr, wi) = (cos[k * step], sin[k * step]);
                let (a, b) = (start + k, start + k + len / 2);
                let tr = re[b] * wr - im[b] * wi;
                let ti = re[b] * wi + im[b] * wr;
                re[b] = re[a] - tr;
                im[b] = im[a] - ti;
                re[a] += tr;
                im[a] += ti;
            }
        }
        len <<= 1;
    }
}

/// Compute the features of one p-stream into `out` (length [`feature_len`]).
pub fn features(
    send_gap_ns: &[f64],
    recv_gap_ns: &[f64],
    kind: FeatureKind,
    ws: &mut FeatureWorkspace,
    out: &mut [f64],
) -> Result<()> {
    let n = ws.n;
    if send_gap_ns.len() != n || recv_gap_ns.len() != n {
        return Err(Error::invalid(format!(
            "gap arrays of lengths {} / {} do not match the feature workspace for {n} packets",
            send_gap_ns.len(),
            recv_gap_ns.len()
        )));
    }
    if out.len() != feature_len(kind, n) {
        return Err(Error::invalid(format!(
            "feature buffer has length {} but {} features are produced for {n} packets",
            out.len(),
            feature_len(kind, n)
        )));
    }
    crate::error::check_finite("send gaps (ns)", send_gap_ns)?;
    crate::error::check_finite("receive gaps (ns)", recv_gap_ns)?;
    let mean_gs = send_gap_ns.iter().sum::<f64>() / n as f64;
    if mean_gs.is_nan() || mean_gs <= 0.0 {
        return Err(Error::invalid(format!(
            "mean send gap {mean_gs} ns must be > 0 to normalise the features"
        )));
    }
    let m = 2 * n;
    for i in 0..n {
        ws.re[i] = send_gap_ns[i] / mean_gs;
        ws.re[n + i] = recv_gap_ns[i] / mean_gs;
    }
    ws.im[..m].iter_mut().for_each(|v| *v = 0.0);
    if m.is_power_of_two() {
        fft_pow2(&mut ws.re[..m], &mut ws.im[..m], &ws.cos, &ws.sin);
    } else {
        // Direct DFT for other lengths, only the N+1 bins used. It reads the caller's
        // arrays, so writing bin k over ws.re[k] is safe.
        for k in 0..=n {
            let (mut sr, mut si) = (0.0, 0.0);
            for j in 0..m {
                let t = (j * k) % m;
                let x = if j < n {
                    send_gap_ns[j]
                } else {
                    recv_gap_ns[j - n]
                } / mean_gs;
                sr += x * ws.cos[t];
                si += x * ws.sin[t];
            }
            ws.re[k] = sr;
            ws.im[k] = si;
        }
    }
    let scale = 1.0 / m as f64;
    #[allow(clippy::needless_range_loop)] // bins index three arrays in lock-step
    match kind {
        FeatureKind::Magnitude => {
            for k in 0..=n {
                out[k] = (ws.re[k] * ws.re[k] + ws.im[k] * ws.im[k]).sqrt() * scale;
            }
            out[n + 1] = mean_gs.ln();
        }
        FeatureKind::ReIm => {
            for k in 0..=n {
                out[k] = ws.re[k] * scale;
            }
            for k in 1..n {
                out[n + k] = ws.im[k] * scale;
            }
            out[2 * n] = mean_gs.ln();
        }
    }
    Ok(())
}
