//! Seeded, deterministic p-stream trace simulator with the noise models of 001
//! (notes §9.2): sender gap errors per mechanism (Ch 4), a FIFO bottleneck shared with
//! cross traffic matched to Table 3.1 burstiness, receiver interrupt coalescing (timer
//! and frame modes, 2–300 µs), timestamp pathologies and delayed ACKs; each trace
//! carries the ground-truth available bandwidth while the p-stream was in flight.
//!
//! Not a hot path: traces allocate. Same `(config, seed, index)` ⇒ same trace, bit for
//! bit, on every platform (integer PRNG, no parallel reductions).

use super::delack::{self, AckedPacket, DelAckVariant};
use super::pstream::PStreamSpec;
use crate::error::{Error, Result};

/// xoshiro256** seeded through splitmix64 (small, fast, no dependency).
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// Generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    /// Standard normal (Box–Muller, one value per call).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.uniform()).ln()
    }
    /// Geometric number of trials ≥ 1 with the given mean.
    pub fn geometric(&mut self, mean: f64) -> u32 {
        if mean <= 1.0 {
            return 1;
        }
        let p = 1.0 / mean;
        let u = 1.0 - self.uniform();
        (u.ln() / (1.0 - p).ln()).floor() as u32 + 1
    }
}

/// Cross-traffic types of 001 Table 3.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrossKind {
    /// No cross traffic.
    None,
    /// Bursty replayed web traffic: 2.51 Gbps, 5–95 % per-ms 1.15–3.94 (burstiness 2.79).
    Bct,
    /// BCT smoothed by tbf: 2.49 Gbps, 1.78–3.31 (1.53).
    Sct,
    /// 9 × 289 Mbps UDP CBR: 2.47 Gbps, 2.21–2.72 (0.51).
    Cbr,
    /// UNC campus trace 1: 3.10 Gbps, 2.23–4.05 (1.82).
    Unc1,
    /// UNC 2: 2.75 Gbps, 1.84–3.77 (1.93).
    Unc2,
    /// UNC 3: 3.28 Gbps, 2.31–4.29 (1.98).
    Unc3,
}

/// Cross-traffic model [Ours, notes §9.2 item 4]: a per-1 ms rate drawn from a normal
/// distribution whose 5–95 % spread equals the Table 3.1 burstiness (sd = spread/3.29),
/// AR(1)-correlated across ms and clipped to [0, link]; within each ms, packets come in
/// trains (geometric length, Poisson train starts) paced at `source_bps` (the 1 Gbps
/// NICs of the thesis' cross-traffic hosts), or evenly spaced for CBR. The per-ms normal
/// is narrowed by the variance the train process adds, so the total matches the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossTraffic {
    /// Long-run mean rate, bit/s.
    pub mean_bps: f64,
    /// Target 5–95 % spread of per-ms throughput, bit/s (Table 3.1 "burstiness").
    pub burstiness_bps: f64,
    /// AR(1) coefficient of the per-ms rate (0 = independent ms).
    pub ar1: f64,
    /// Cross packet size, bytes.
    pub packet_bytes: u32,
    /// Mean train length in packets (1 = Poisson packets).
    pub train_mean_packets: f64,
    /// Rate at which packets of one train arrive, bit/s.
    pub source_bps: f64,
    /// Evenly spaced packets (CBR) instead of trains.
    pub constant_spacing: bool,
}

impl CrossTraffic {
    /// The Table 3.1 calibration of `kind`; train lengths are our choice \[Ours\] (BCT
    /// burstiest, SCT tbf-smoothed, UNC in between).
    pub fn table_3_1(kind: CrossKind) -> Self {
        let (mean, spread, train, cbr) = match kind {
            CrossKind::None => (0.0, 0.0, 1.0, false),
            CrossKind::Bct => (2.51e9, 2.79e9, 8.0, false),
            CrossKind::Sct => (2.49e9, 1.53e9, 2.0, false),
            CrossKind::Cbr => (2.47e9, 0.51e9, 1.0, true),
            CrossKind::Unc1 => (3.10e9, 1.82e9, 4.0, false),
            CrossKind::Unc2 => (2.75e9, 1.93e9, 4.0, false),
            CrossKind::Unc3 => (3.28e9, 1.98e9, 4.0, false),
        };
        CrossTraffic {
            mean_bps: mean,
            burstiness_bps: spread,
            ar1: 0.5,
            packet_bytes: 1500,
            train_mean_packets: train,
            source_bps: 1e9,
            constant_spacing: cbr,
        }
    }
}

/// Sender gap-creation error models (001 Ch 4, notes §9.2 item 2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SendNoise {
    /// Perfect gaps.
    None,
    /// Dummy-packet byte clock: per-gap error ≈ N(0, `gap_std_ns`), clipped at 3σ
    /// (thesis: mean < 0.4 µs, std < 0.5 µs).
    Dummy { gap_std_ns: f64 },
    /// Busy-waiting on a µs clock: every gap floored to whole µs (negative mean, error
    /// within 1 µs here), plus with probability `preempt_prob` per packet a preemption
    /// delay uniform in [preempt_ns, 2·preempt_ns] (≥ 100 µs under load).
    BusyWait { preempt_prob: f64, preempt_ns: f64 },
    /// Hrtimer in softirq: mean-accurate jitter N(0, `jitter_ns`) plus, with probability
    /// `defer_prob` per packet, a deferral of U[defer_ns, 2·defer_ns] after which the
    /// overdue packets leave back-to-back at line rate.
    Hrtimer {
        jitter_ns: f64,
        defer_prob: f64,
        defer_ns: f64,
    },
}

/// Receiver interrupt coalescing (notes §9.2 item 6).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Coalescing {
    /// Every packet stamped at arrival.
    None,
    /// Timer mode (NIC1): the first packet at an idle NIC starts a `rx_usecs_ns` timer;
    /// at expiry all packets arrived so far are stamped `t_int + j·per_packet_ns`.
    Timer {
        rx_usecs_ns: f64,
        per_packet_ns: f64,
    },
    /// Frame mode: deliver when `rx_frames` packets are pending or the timer expires.
    Frames {
        rx_frames: u32,
        rx_usecs_ns: f64,
        per_packet_ns: f64,
    },
}

impl Coalescing {
    /// NIC1 default of the thesis: ≈ 120 µs timer (001 §6.3.2), 0.5 µs per packet \[Ours\].
    pub fn nic1_default() -> Self {
        Coalescing::Timer {
            rx_usecs_ns: 120_000.0,
            per_packet_ns: 500.0,
        }
    }
}

/// Receiver timestamp pathologies (notes §9.2 item 7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimestampNoise {
    /// Stamps as delivered by the NIC.
    None,
    /// Truncated to whole ms (Linux TCP timestamps, V2 in 001 §8.6).
    MsTruncation,
    /// Stamped at ACK generation: + U[0, `max_ns`] processing delay, kept monotone
    /// (up to 60–70 µs, V3 in 001 §8.6).
    AckProcessing { max_ns: f64 },
}

/// How the ground-truth available bandwidth `B_g` of a p-stream is measured.
///
/// 001 §5.3.3 (Fig 5.8 set-up): "The actual available bandwidth on the path while each
/// p-stream is in flight is computed from the DAG trace taken after the bottleneck";
/// §8.1 likewise analyses `B_g` "from the trace taken after the bottleneck link" at the
/// probing timescale, and §5.3.1 (Fig 5.4) derives the expected noise-free gap from the
/// same trace. So the thesis' `B_g` is one number per p-stream (not per excursion or per
/// rate), over the whole interval the p-stream occupies, measured on the link *after*
/// the bottleneck queue. The DAG sees every packet on that link; we read "in flight" as
/// the span of the p-stream on that link, from the departure of the packet that opens
/// gap 1 to the departure of its last packet [Interp.; the thesis names no tighter
/// window].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroundTruth {
    /// Thesis (001 §5.3.3): `C − (cross bits leaving the bottleneck while the p-stream
    /// leaves it) / (that interval)`, the DAG-after-the-bottleneck reading.
    #[default]
    BottleneckDepartures,
    /// Session-2 definition, kept for comparison: `C − (cross bits arriving at the
    /// bottleneck while the p-stream is sent) / (send duration)`. It counts the cross
    /// traffic *offered* during the send window, which the DAG after the bottleneck
    /// cannot see when the probe's own overload delays cross packets past the window.
    SenderArrivals,
}

/// Everything the simulator needs besides the p-stream shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimConfig {
    /// Bottleneck (and sender NIC) capacity, bit/s.
    pub link_bps: f64,
    /// Bottleneck FIFO buffer, bytes.
    pub buffer_bytes: f64,
    /// Cross traffic.
    pub cross: CrossTraffic,
    /// Sender gap errors.
    pub sender: SendNoise,
    /// Receiver coalescing.
    pub coalescing: Coalescing,
    /// Timestamp pathology.
    pub timestamps: TimestampNoise,
    /// One ACK per two packets, normalised with Alg. 6 (corrected).
    pub delayed_ack: bool,
    /// Master seed; trace `k` uses an independent stream derived from `(seed, k)`.
    pub seed: u64,
    /// Definition of the ground-truth available bandwidth (default: the thesis').
    pub ground_truth: GroundTruth,
}

impl SimConfig {
    /// 001's main condition: 10 Gbps, BCT, Dummy-packet sender, NIC1 default coalescing,
    /// per-packet ACKs, 8 MB switch buffer [Ours; not given in the thesis].
    pub fn thesis_bct(seed: u64) -> Self {
        SimConfig {
            link_bps: 10e9,
            buffer_bytes: 8e6,
            cross: CrossTraffic::table_3_1(CrossKind::Bct),
            sender: SendNoise::Dummy { gap_std_ns: 300.0 },
            coalescing: Coalescing::nic1_default(),
            timestamps: TimestampNoise::None,
            delayed_ack: false,
            seed,
            ground_truth: GroundTruth::BottleneckDepartures,
        }
    }

    fn validate(&self) -> Result<()> {
        let pos = |name: &str, v: f64| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(format!("{name} {v} must be finite and > 0")))
            }
        };
        pos("link_bps", self.link_bps)?;
        pos("buffer_bytes", self.buffer_bytes)?;
        let c = &self.cross;
        if !(c.mean_bps.is_finite()
            && c.mean_bps >= 0.0
            && c.burstiness_bps.is_finite()
            && c.burstiness_bps >= 0.0)
        {
            return Err(Error::invalid(format!(
                "cross traffic mean {} / burstiness {} bit/s must be finite and >= 0",
                c.mean_bps, c.burstiness_bps
            )));
        }
        if !(c.ar1.is_finite() && (0.0..1.0).contains(&c.ar1)) {
            return Err(Error::invalid(format!(
                "cross-traffic ar1 {} must be in [0, 1)",
                c.ar1
            )));
        }
        if c.packet_bytes == 0 {
            return Err(Error::invalid("cross packet_bytes 0 must be >= 1"));
        }
        pos("cross source_bps", c.source_bps)?;
        Ok(())
    }
}

/// One simulated p-stream as the sender-side estimator sees it, plus ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Intended send gaps (what the sender's schedule says), ns; length N.
    pub send_gap_ns: Vec<f64>,
    /// Gaps actually produced on the wire, ns; length N.
    pub actual_send_gap_ns: Vec<f64>,
    /// Receive gaps from the receiver's stamps (normalised per Alg. 6 with delayed
    /// ACKs), ns; length N unless packets were lost or not covered by an ACK.
    pub recv_gap_ns: Vec<f64>,
    /// Ground truth `B_g`, bit/s, as defined by `SimConfig::ground_truth` (default: link
    /// rate minus the cross traffic leaving the bottleneck while the p-stream leaves it,
    /// 001 §5.3.3).
    pub avail_bw_bps: f64,
    /// The same ground truth over the first and the second half of that interval: how
    /// much the available bandwidth itself moves while one p-stream is in flight.
    pub avail_bw_halves_bps: (f64, f64),
    /// The same ground truth over each rate segment `k` (gaps `k·N_p + 1 ..= (k+1)·N_p`,
    /// window from the departure of packet `k·N_p` to that of packet `(k+1)·N_p`), one
    /// entry per probing rate. A diagnostic only \[Ours\]: 001 scores against the
    /// whole-stream `B_g` (§5.3.3); this says whether a cross-traffic burst made a
    /// segment's rate exceed the bandwidth left *during that segment*.
    pub avail_bw_segments_bps: Vec<f64>,
    /// Probe packets dropped at the bottleneck.
    pub lost: usize,
}

impl Trace {
    /// The estimator can use this trace (no loss, one receive gap per packet).
    pub fn complete(&self) -> bool {
        self.lost == 0 && self.recv_gap_ns.len() == self.send_gap_ns.len()
    }
}

/// Per-ms throughput samples of the cross-traffic generator over `ms` milliseconds
/// (for calibrating against Table 3.1), bit/s.
pub fn cross_traffic_per_ms(cross: &CrossTraffic, ms: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let mut pk = Vec::new();
    gen_cross(cross, 1e12, 0.0, ms as f64 * 1e6, &mut rng, &mut pk);
    let mut out = vec![0.0; ms];
    for &(t, b) in &pk {
        let k = (t / 1e6) as usize;
        if k < ms {
            out[k] += b as f64 * 8.0 * 1e3;
        }
    }
    out
}

/// Cross-traffic arrivals `(time_ns, bytes)` over `[0, duration_ns)`, sorted, as the
/// simulator offers them to a bottleneck of `link_bps` (per-ms rates are clipped to it).
/// For measuring the model the way 001 Table 3.1 measures BCT (per-ms throughput at
/// any bin phase, or after a FIFO); `simulate` draws the same process per trace.
pub fn cross_traffic_arrivals(
    cross: &CrossTraffic,
    link_bps: f64,
    duration_ns: f64,
    seed: u64,
) -> Vec<(f64, u32)> {
    let mut rng = Rng::new(seed);
    let mut pk = Vec::new();
    if duration_ns.is_finite() && duration_ns > 0.0 && link_bps.is_finite() && link_bps > 0.0 {
        gen_cross(cross, link_bps, 0.0, duration_ns, &mut rng, &mut pk);
    }
    pk
}

/// Cross-traffic arrivals `(time_ns, bytes)` in `[t0, t1)`, sorted.
fn gen_cross(
    c: &CrossTraffic,
    link_bps: f64,
    t0: f64,
    t1: f64,
    rng: &mut Rng,
    out: &mut Vec<(f64, u32)>,
) {
    out.clear();
    if c.mean_bps <= 0.0 {
        return;
    }
    let pkt_bits = c.packet_bytes as f64 * 8.0;
    // The train process itself adds per-ms variance (compound Poisson: λ·E[K²]·B² per
    // ms, E[K²] = m(2m−1) for geometric K of mean m); subtract it so the *total* per-ms
    // spread matches the Table 3.1 target.
    let m = c.train_mean_packets.max(1.0);
    let lambda_per_ms = c.mean_bps * 1e-3 / (m * pkt_bits);
    let train_var = if c.constant_spacing {
        0.0
    } else {
        1e6 * lambda_per_ms * m * (2.0 * m - 1.0) * pkt_bits * pkt_bits
    };
    let sd = ((c.burstiness_bps / 3.29).powi(2) - train_var)
        .max(0.0)
        .sqrt();
    let spacing = pkt_bits * 1e9 / c.source_bps;
    let mut z = rng.normal(); // stationary AR(1) start
    let mut ms_start = t0;
    while ms_start < t1 {
        let rate = (c.mean_bps + sd * z).clamp(0.0, link_bps);
        let ms_end = ms_start + 1e6;
        if c.constant_spacing {
            let dt = pkt_bits * 1e9 / rate.max(1.0);
            let mut t = ms_start + rng.uniform() * dt;
            while t < ms_end {
                out.push((t, c.packet_bytes));
                t += dt;
            }
        } else {
            let train_bits = pkt_bits * c.train_mean_packets.max(1.0);
            let mean_interval = train_bits * 1e9 / rate.max(1.0);
            let mut t = ms_start + rng.exp(mean_interval);
            while t < ms_end {
                let k = rng.geometric(c.train_mean_packets);
                for j in 0..k {
                    out.push((t + j as f64 * spacing, c.packet_bytes));
                }
                t += rng.exp(mean_interval);
            }
        }
        z = c.ar1 * z + (1.0 - c.ar1 * c.ar1).sqrt() * rng.normal();
        ms_start = ms_end;
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
}

/// Simulate p-stream number `index` of a run. The stream is preceded by one lead-in
/// packet (Rapid sends continuously), so gap 0 is defined.
pub fn simulate(spec: &PStreamSpec, cfg: &SimConfig, index: u64) -> Result<Trace> {
    spec.validate()?;
    cfg.validate()?;
    let mut rng = Rng::new(cfg.seed ^ index.wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(17));
    let n = spec.len();
    let wire_ns = spec.packet_bytes as f64 * 8.0 * 1e9 / cfg.link_bps;
    let mut gs = vec![0.0; n];
    spec.send_gaps_into(&mut gs)?;

    // Intended departure times of lead-in (index 0) and the N packets.
    let warm_ns = 2e6; // cross traffic starts 2 ms earlier so the queue is in steady state
    let mut ideal = vec![0.0; n + 1];
    ideal[0] = warm_ns;
    for i in 0..n {
        ideal[i + 1] = ideal[i] + gs[i];
    }
    // Sender noise (001 Ch 4).
    let mut sent = vec![0.0; n + 1];
    match cfg.sender {
        SendNoise::None => sent.copy_from_slice(&ideal),
        SendNoise::Dummy { gap_std_ns } => {
            let s = gap_std_ns.max(0.0) / std::f64::consts::SQRT_2;
            for i in 0..=n {
                sent[i] = ideal[i] + (rng.normal() * s).clamp(-3.0 * s, 3.0 * s);
            }
        }
        SendNoise::BusyWait {
            preempt_prob,
            preempt_ns,
        } => {
            sent[0] = ideal[0];
            for i in 1..=n {
                let mut g = ((ideal[i] - ideal[i - 1]) / 1000.0).floor() * 1000.0;
                if rng.uniform() < preempt_prob {
                    g += rng.range(preempt_ns, 2.0 * preempt_ns);
                }
                sent[i] = sent[i - 1] + g;
            }
        }
        SendNoise::Hrtimer {
            jitter_ns,
            defer_prob,
            defer_ns,
        } => {
            let mut release = f64::NEG_INFINITY;
            for i in 0..=n {
                if rng.uniform() < defer_prob {
                    release = release.max(ideal[i] + rng.range(defer_ns, 2.0 * defer_ns));
                }
                let t = ideal[i] + rng.normal() * jitter_ns;
                sent[i] = if ideal[i] < release { release } else { t };
            }
        }
    }
    for i in 1..=n {
        // The sender NIC serialises: never closer than one packet time.
        sent[i] = sent[i].max(sent[i - 1] + wire_ns);
    }

    // FIFO bottleneck shared with cross traffic (notes §9.2 item 3).
    let t_end = sent[n] + 1e6;
    let mut cross = Vec::new();
    gen_cross(&cfg.cross, cfg.link_bps, 0.0, t_end, &mut rng, &mut cross);
    let mut dep = vec![f64::NAN; n + 1];
    let mut busy_until = 0.0f64;
    let mut ci = 0;
    let mut lost = 0;
    let byte_ns = 8.0 * 1e9 / cfg.link_bps;
    let enqueue = |a: f64, bytes: u32, busy: &mut f64| -> Option<f64> {
        let backlog_bytes = (*busy - a).max(0.0) / byte_ns;
        if backlog_bytes + bytes as f64 > cfg.buffer_bytes {
            return None;
        }
        *busy = busy.max(a) + bytes as f64 * byte_ns;
        Some(*busy)
    };
    // Departure time of every cross packet that entered the queue before the last probe
    // packet (later ones leave after it, FIFO); NaN when dropped.
    let mut cross_dep = vec![f64::NAN; cross.len()];
    for i in 0..=n {
        while ci < cross.len() && cross[ci].0 <= sent[i] {
            if let Some(d) = enqueue(cross[ci].0, cross[ci].1, &mut busy_until) {
                cross_dep[ci] = d;
            }
            ci += 1;
        }
        match enqueue(sent[i], spec.packet_bytes, &mut busy_until) {
            Some(d) => dep[i] = d,
            None => lost += 1,
        }
    }

    // Ground truth (see `GroundTruth`): cross bits observed in a window, as a rate.
    let (w0, w1, times): (f64, f64, Vec<(f64, u32)>) = match cfg.ground_truth {
        GroundTruth::SenderArrivals => (sent[0], sent[n], cross.clone()),
        GroundTruth::BottleneckDepartures => {
            // Departures are those of the packets' last bits; a cross packet counts when
            // it finishes inside (w0, w1], as a DAG on the outgoing link would time it.
            let t: Vec<(f64, u32)> = cross
                .iter()
                .zip(&cross_dep)
                .filter(|(_, d)| d.is_finite())
                .map(|(&(_, b), &d)| (d, b))
                .collect();
            if dep[0].is_finite() && dep[n].is_finite() {
                (dep[0], dep[n], t)
            } else {
                // A lost end packet: fall back to the send window, still after the queue.
                (sent[0], sent[n], t)
            }
        }
    };
    let after = cfg.ground_truth == GroundTruth::BottleneckDepartures;
    let rate_in = |a: f64, b: f64| {
        let bits: f64 = times
            .iter()
            .filter(|(t, _)| {
                if after {
                    *t > a && *t <= b
                } else {
                    *t >= a && *t < b
                }
            })
            .map(|(_, b)| *b as f64 * 8.0)
            .sum();
        (cfg.link_bps - bits * 1e9 / (b - a)).max(0.0)
    };
    let avail_bw_bps = rate_in(w0, w1);
    let mid = 0.5 * (w0 + w1);
    let avail_bw_halves_bps = (rate_in(w0, mid), rate_in(mid, w1));
    // Per rate segment, on the same clock as (w0, w1]: departures when both segment ends
    // left the bottleneck, else the send times.
    let np = spec.packets_per_rate;
    let avail_bw_segments_bps = (0..spec.n_rates)
        .map(|k| {
            let (i0, i1) = (k * np, (k + 1) * np);
            if after && dep[i0].is_finite() && dep[i1].is_finite() {
                rate_in(dep[i0], dep[i1])
            } else {
                rate_in(sent[i0], sent[i1])
            }
        })
        .collect();

    // Receiver: coalescing over the probe flow only.
    let arrivals: Vec<(usize, f64)> = (0..=n)
        .filter(|&i| dep[i].is_finite())
        .map(|i| (i, dep[i]))
        .collect();
    let mut stamp = vec![f64::NAN; n + 1];
    match cfg.coalescing {
        Coalescing::None => arrivals.iter().for_each(|&(i, t)| stamp[i] = t),
        Coalescing::Timer {
            rx_usecs_ns,
            per_packet_ns,
        } => {
            let mut k = 0;
            while k < arrivals.len() {
                let t_int = arrivals[k].1 + rx_usecs_ns;
                let mut j = k;
                while j < arrivals.len() && arrivals[j].1 <= t_int {
                    stamp[arrivals[j].0] = t_int + (j - k) as f64 * per_packet_ns;
                    j += 1;
                }
                k = j;
            }
        }
        Coalescing::Frames {
            rx_frames,
            rx_usecs_ns,
            per_packet_ns,
        } => {
            let frames = rx_frames.max(1) as usize;
            let mut k = 0;
            while k < arrivals.len() {
                let t_timer = arrivals[k].1 + rx_usecs_ns;
                let mut j = k;
                while j < arrivals.len() && arrivals[j].1 <= t_timer && j - k < frames {
                    j += 1;
                }
                // Interrupt at the timer, or when the rx_frames-th packet arrived.
                let t_int = if j - k >= frames {
                    arrivals[j - 1].1
                } else {
                    t_timer
                };
                for (m, a) in arrivals[k..j].iter().enumerate() {
                    stamp[a.0] = t_int + m as f64 * per_packet_ns;
                }
                k = j;
            }
        }
    }
    // Timestamp pathologies.
    match cfg.timestamps {
        TimestampNoise::None => {}
        TimestampNoise::MsTruncation => {
            stamp.iter_mut().for_each(|s| *s = (*s / 1e6).floor() * 1e6)
        }
        TimestampNoise::AckProcessing { max_ns } => {
            let mut prev = f64::NEG_INFINITY;
            for s in stamp.iter_mut().filter(|s| s.is_finite()) {
                *s = (*s + rng.range(0.0, max_ns.max(0.0))).max(prev);
                prev = *s;
            }
        }
    }

    let actual_send_gap_ns: Vec<f64> = (1..=n).map(|i| sent[i] - sent[i - 1]).collect();
    let mut send_gap_ns = gs.clone();
    let recv_gap_ns = if lost > 0 {
        Vec::new()
    } else if cfg.delayed_ack {
        // One ACK per two packets (packets 2, 4, … of the stream), Alg. 6 corrected.
        let pk: Vec<AckedPacket> = (1..=n)
            .map(|i| AckedPacket {
                seqno: i as u64,
                send_gap_ns: gs[i - 1],
                ack_rx_ns: (i % 2 == 0).then(|| stamp[i].round() as u64),
            })
            .collect();
        let (mut a, mut b) = (vec![0.0; n], vec![0.0; n]);
        let w = delack::normalize(
            &pk,
            stamp[0].round() as u64,
            0,
            DelAckVariant::Corrected,
            &mut a,
            &mut b,
        )?;
        b.truncate(w);
        a.truncate(w);
        send_gap_ns = a;
        b
    } else {
        (1..=n).map(|i| stamp[i] - stamp[i - 1]).collect()
    };
    Ok(Trace {
        send_gap_ns,
        actual_send_gap_ns,
        recv_gap_ns,
        avail_bw_bps,
        avail_bw_halves_bps,
        avail_bw_segments_bps,
        lost,
    })
}
