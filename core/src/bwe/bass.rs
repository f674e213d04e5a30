//! BASS: Buffering-Aware Spike Smoothing (001 §5.3, notes §3.4–3.6).
//!
//! Receive gaps `g_r` of a p-stream show "spike-dips" whenever packets are buffered
//! (receiver interrupt coalescing, bursty cross traffic): one large gap (the spike)
//! followed by near-zero gaps (the dips). Within one complete buffering event the
//! average send and receive rates are preserved (001 §5.3.1), so BASS averages both
//! `g_s` and `g_r` strictly *within* event boundaries. Gaps are f64 nanoseconds
//! because averaging makes them fractional.
//!
//! Ambiguities of the Fig 5.5 pseudo-code (notes §3.5) are explicit options:
//! [`HeadSegment`] (the pseudo-code averages the segment before the first spike, the
//! prose says incomplete events are eliminated) and [`BassVariant`] (line 39 compares
//! *values* with `rcv_gap.back()` and the loop reads `rcv_gap[i+1]` past the end; the
//! corrected reading closes a valid event at the last index).

use crate::error::{Error, Result};

/// How thresholds are interpreted. The thesis tunes SPIKE_UP/DOWN for 10 Gbps NIC
/// coalescing and gives no scaling rule for other link speeds (notes §9.1), so the
/// thresholds may also be given as multiples of the p-stream's mean send gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdScale {
    /// Thresholds are nanoseconds.
    Ns,
    /// Thresholds are multiples of the mean send gap of the p-stream being smoothed.
    RelativeToMeanSendGap,
}

/// What to do with the segment before the first detected spike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadSegment {
    /// Average it like an event (Fig 5.5 line 22, the pseudo-code as printed).
    Average,
    /// Leave it raw (the prose: incomplete events at the ends are not smoothed).
    Keep,
}

/// What to do with a valid event still open at the end of the stream (Corrected only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailSegment {
    /// Close it at the last index and average it (notes §3.5 proposal).
    Average,
    /// Leave it raw: it is incomplete (the prose: incomplete events are not smoothed).
    Keep,
}

/// Which reading of the pseudo-code's end conditions to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BassVariant {
    /// A valid event still open at the end is closed at the last index and averaged.
    Corrected,
    /// Fig 5.5 as printed: the loop runs to the last index (reads past the end are
    /// treated as "no spike"), line 39 sets `spike_end` wherever `g_r[i]` *equals* the
    /// last value, line 44 averages `[spike_begin, spike_end]` if non-empty.
    Literal,
}

/// Alignment of the AVG_WINDOW sliding average. 001 §5.3.3 names only the width; the
/// thesis never says whether the window trails or is centred [notes §3.6].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowAlign {
    /// `x'[i] = mean(x[i−w+1..=i])` (causal; shorter at the head).
    Trailing,
    /// `x'[i] = mean(x[i−⌊(w−1)/2⌋ ..= i+⌈(w−1)/2⌉])`, clipped at both ends. No lag: a
    /// trailing window delays a congestion onset by up to w−1 packets and carries
    /// pre-onset noise forward.
    Centred,
}

/// One SPIKE_UP / SPIKE_DOWN pair (units per [`ThresholdScale`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpikeThresholds {
    /// An event starts at i+1 when `g_r[i] + up < g_r[i+1]`.
    pub up: f64,
    /// The event becomes valid once a dip `g_r + down < spike_max` is seen.
    pub down: f64,
}

/// Full BASS configuration: the three multi-pass threshold pairs of Alg. 5, the
/// repeat cap of the last pass, AVG_WINDOW and the ambiguity options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BassConfig {
    /// Pass 1 (interrupt coalescing; also the single-pass thresholds), pass 2 (bursty
    /// cross traffic), pass 3 (smoother traffic, repeated while a spike exists).
    pub passes: [SpikeThresholds; 3],
    /// How many times pass 3 may repeat [Ours: the thesis loops "while spike exists"].
    pub max_repeats: usize,
    /// Sliding-average width applied after multi-pass (1 disables; thesis: N_p = 16).
    pub avg_window: usize,
    /// Alignment of that window (the thesis is silent; default trailing).
    pub window_align: WindowAlign,
    /// Unit of `passes`.
    pub scale: ThresholdScale,
    /// Head-segment policy.
    pub head: HeadSegment,
    /// Tail-segment policy (Corrected variant).
    pub tail: TailSegment,
    /// End-condition reading.
    pub variant: BassVariant,
}

impl BassConfig {
    /// The thesis parameters in ns: 20/10 µs, 5/4 µs, 2/1 µs, AVG_WINDOW = 16
    /// (001 §5.3.3, §5.5), pseudo-code head averaging, corrected end condition.
    pub fn thesis() -> Self {
        BassConfig {
            passes: [
                SpikeThresholds {
                    up: 20_000.0,
                    down: 10_000.0,
                },
                SpikeThresholds {
                    up: 5_000.0,
                    down: 4_000.0,
                },
                SpikeThresholds {
                    up: 2_000.0,
                    down: 1_000.0,
                },
            ],
            max_repeats: 16,
            avg_window: 16,
            window_align: WindowAlign::Trailing,
            scale: ThresholdScale::Ns,
            head: HeadSegment::Average,
            tail: TailSegment::Average,
            variant: BassVariant::Corrected,
        }
    }

    /// The thesis thresholds re-expressed relative to a reference send gap, so they
    /// scale with the probing rate \[Ours\]. `reference_gap_ns` is the mean send gap the
    /// thesis values were tuned at (7 Gbps jumbo frames: 9038·8/7e9 s ≈ 10 329 ns).
    pub fn thesis_relative(reference_gap_ns: f64) -> Result<Self> {
        if !(reference_gap_ns.is_finite() && reference_gap_ns > 0.0) {
            return Err(Error::invalid(format!(
                "reference_gap_ns {reference_gap_ns} must be a finite gap > 0 ns"
            )));
        }
        let mut c = Self::thesis();
        for p in &mut c.passes {
            p.up /= reference_gap_ns;
            p.down /= reference_gap_ns;
        }
        c.scale = ThresholdScale::RelativeToMeanSendGap;
        Ok(c)
    }

    /// Reject non-finite or negative thresholds and a zero window.
    pub fn validate(&self) -> Result<()> {
        for (k, p) in self.passes.iter().enumerate() {
            if !(p.up.is_finite() && p.up >= 0.0 && p.down.is_finite() && p.down >= 0.0) {
                return Err(Error::invalid(format!(
                    "BASS pass {} thresholds up={} down={} must be finite and >= 0",
                    k + 1,
                    p.up,
                    p.down
                )));
            }
        }
        if self.avg_window == 0 {
            return Err(Error::invalid(
                "avg_window 0: use 1 to disable the sliding average",
            ));
        }
        Ok(())
    }
}

impl Default for BassConfig {
    fn default() -> Self {
        Self::thesis()
    }
}

/// What one BASS run did; the span of complete events is what the single-rate
/// decision uses (001 §5.3.1: only complete buffering events count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BassReport {
    /// Events averaged in the last spike-removal pass (all kinds).
    pub events: usize,
    /// Spike-removal passes run (single-pass: 1).
    pub passes: usize,
    /// First index and last index (inclusive) covered by complete events of the first
    /// pass (a spike, its dips, closed by the next spike), if any.
    pub complete_span: Option<(usize, usize)>,
}

/// Preallocated buffers so BASS never allocates on the hot path (DESIGN.md).
#[derive(Debug, Clone)]
pub struct BassWorkspace {
    capacity: usize,
    events: Vec<(usize, usize)>,
    scratch_s: Vec<f64>,
    scratch_r: Vec<f64>,
}

impl BassWorkspace {
    /// Workspace for p-streams of up to `max_packets` packets.
    pub fn new(max_packets: usize) -> Self {
        BassWorkspace {
            capacity: max_packets,
            events: Vec::with_capacity(max_packets),
            scratch_s: vec![0.0; max_packets],
            scratch_r: vec![0.0; max_packets],
        }
    }

    /// Largest p-stream this workspace accepts.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Events `(begin, end)` (inclusive) averaged by the most recent spike-removal pass.
    pub fn last_events(&self) -> &[(usize, usize)] {
        &self.events
    }
}

fn check_pair(gs: &[f64], gr: &[f64], ws: &BassWorkspace) -> Result<()> {
    if gs.len() != gr.len() {
        return Err(Error::invalid(format!(
            "send gaps have length {} but receive gaps have length {}; pass one gap of each per packet",
            gs.len(),
            gr.len()
        )));
    }
    if gs.len() > ws.capacity {
        return Err(Error::invalid(format!(
            "p-stream of {} gaps exceeds the workspace capacity {}; create BassWorkspace::new({})",
            gs.len(),
            ws.capacity,
            gs.len()
        )));
    }
    crate::error::check_finite("send gaps (ns)", gs)?;
    crate::error::check_finite("receive gaps (ns)", gr)?;
    Ok(())
}

/// AVERAGEPROBESTREAM (Fig 5.5 lines 1–9): replace gaps in `[b, e]` by their mean.
/// Returns false for an empty range; sets `*changed` when some value moved.
#[inline]
fn average_tracked(gs: &mut [f64], gr: &mut [f64], b: usize, e: usize, changed: &mut bool) -> bool {
    if b >= e {
        return false;
    }
    let (mut ss, mut sr) = (0.0, 0.0);
    for i in b..=e {
        ss += gs[i];
        sr += gr[i];
    }
    let k = (e - b + 1) as f64;
    let (ms, mr) = (ss / k, sr / k);
    for i in b..=e {
        // "Moved" beyond rounding: re-averaging an already flat event only jitters ulps.
        if (gr[i] - mr).abs() > 1e-9 * mr.abs().max(1.0)
            || (gs[i] - ms).abs() > 1e-9 * ms.abs().max(1.0)
        {
            *changed = true;
        }
        gs[i] = ms;
        gr[i] = mr;
    }
    true
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    None,
    Pending,
    Valid,
}

/// SPIKEREMOVAL (Fig 5.5 lines 10–44) with absolute thresholds in ns.
/// Records averaged events in `events` (cleared first); returns the span of the
/// complete (spike + dips, closed by the next spike or the stream end) events.
#[allow(clippy::too_many_arguments)]
fn spike_removal(
    gs: &mut [f64],
    gr: &mut [f64],
    up: f64,
    down: f64,
    head: HeadSegment,
    tail: TailSegment,
    variant: BassVariant,
    events: &mut Vec<(usize, usize)>,
    changed: &mut bool,
) -> Option<(usize, usize)> {
    events.clear();
    let mut average =
        |gs: &mut [f64], gr: &mut [f64], b: usize, e: usize| average_tracked(gs, gr, b, e, changed);
    let n = gr.len();
    if n < 2 {
        return None;
    }
    let mut span: Option<(usize, usize)> = None;
    let note = |b: usize, e: usize, span: &mut Option<(usize, usize)>| {
        *span = Some(match *span {
            None => (b, e),
            Some((sb, se)) => (sb.min(b), se.max(e)),
        });
    };
    let mut state = State::None;
    let (mut begin, mut end) = (0usize, 0usize);
    let mut spike_max = 0.0f64;
    let mut i0 = 0;
    // Lines 12–16: the stream starts inside a spike that is already followed by a dip.
    if gr[0] > gr[1] + down {
        begin = 0;
        spike_max = gr[0];
        state = State::Valid;
        i0 = 1;
    }
    let upper = match variant {
        BassVariant::Corrected => n - 1,
        BassVariant::Literal => n,
    };
    let last_value = gr[n - 1];
    for i in i0..upper {
        // "spike at i+1": reads past the end count as no spike (Literal guard).
        let spike_next = i + 1 < n && gr[i] + up < gr[i + 1];
        let mut run_valid = false;
        match state {
            State::None => {
                if spike_next {
                    end = i;
                    if head == HeadSegment::Average && average(gs, gr, begin, end) {
                        events.push((begin, end));
                    }
                    state = State::Pending;
                    begin = i + 1;
                    spike_max = gr[begin];
                }
            }
            State::Pending => {
                spike_max = spike_max.max(gr[i]);
                if gr[i] + down < spike_max {
                    state = State::Valid;
                    run_valid = true; // C switch fall-through into SPIKE_VALID
                }
            }
            State::Valid => run_valid = true,
        }
        if run_valid {
            if spike_next {
                end = i;
                state = State::Pending;
                let new_max = gr[i + 1];
                if average(gs, gr, begin, end) {
                    events.push((begin, end));
                    note(begin, end, &mut span);
                }
                begin = i + 1;
                spike_max = new_max;
            } else if variant == BassVariant::Literal && gr[i] == last_value {
                end = i; // line 39–40 as printed (value comparison)
            }
        }
    }
    match variant {
        BassVariant::Corrected => {
            // Closed by the stream end, not by a next spike: averaged (notes §3.5
            // proposal) but not *complete*, so it stays out of the span (its spike
            // carries a whole interrupt interval for only part of the batch).
            if state == State::Valid
                && tail == TailSegment::Average
                && average(gs, gr, begin, n - 1)
            {
                events.push((begin, n - 1));
            }
        }
        BassVariant::Literal => {
            // Line 44: average whatever [spike_begin, spike_end] is, if non-empty.
            if average(gs, gr, begin, end) {
                events.push((begin, end));
            }
        }
    }
    span
}

fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

fn scaled(cfg: &BassConfig, p: SpikeThresholds, gs: &[f64]) -> (f64, f64) {
    match cfg.scale {
        ThresholdScale::Ns => (p.up, p.down),
        ThresholdScale::RelativeToMeanSendGap => {
            let m = mean(gs);
            (p.up * m, p.down * m)
        }
    }
}

/// True when some `g_r[i] + up < g_r[i+1]` ("spike exists", Alg. 5).
pub fn spike_exists(gr: &[f64], up_ns: f64) -> bool {
    gr.windows(2).any(|w| w[0] + up_ns < w[1])
}

/// Single-pass BASS (001 §5.3.1) with the pass-1 thresholds, in place on both arrays.
pub fn single_pass(
    gs: &mut [f64],
    gr: &mut [f64],
    cfg: &BassConfig,
    ws: &mut BassWorkspace,
) -> Result<BassReport> {
    cfg.validate()?;
    check_pair(gs, gr, ws)?;
    let (up, down) = scaled(cfg, cfg.passes[0], gs);
    let span = spike_removal(
        gs,
        gr,
        up,
        down,
        cfg.head,
        cfg.tail,
        cfg.variant,
        &mut ws.events,
        &mut false,
    );
    Ok(BassReport {
        events: ws.events.len(),
        passes: 1,
        complete_span: span,
    })
}

/// Multi-pass BASS (Alg. 5): pass 1, pass 2, pass 3 repeated while a spike above its
/// SPIKE_UP exists (at most `max_repeats` times, and only while a pass still changes
/// something), then the AVG_WINDOW sliding average.
/// Thresholds in relative mode are fixed from the *raw* mean send gap (averaging
/// preserves it anyway).
pub fn multi_pass(
    gs: &mut [f64],
    gr: &mut [f64],
    cfg: &BassConfig,
    ws: &mut BassWorkspace,
) -> Result<BassReport> {
    cfg.validate()?;
    check_pair(gs, gr, ws)?;
    let t: [(f64, f64); 3] = [
        scaled(cfg, cfg.passes[0], gs),
        scaled(cfg, cfg.passes[1], gs),
        scaled(cfg, cfg.passes[2], gs),
    ];
    let (h, tl, v) = (cfg.head, cfg.tail, cfg.variant);
    let span = spike_removal(gs, gr, t[0].0, t[0].1, h, tl, v, &mut ws.events, &mut false);
    spike_removal(gs, gr, t[1].0, t[1].1, h, tl, v, &mut ws.events, &mut false);
    let mut passes = 2;
    for _ in 0..cfg.max_repeats.max(1) {
        let mut changed = false;
        spike_removal(
            gs,
            gr,
            t[2].0,
            t[2].1,
            h,
            tl,
            v,
            &mut ws.events,
            &mut changed,
        );
        passes += 1;
        // Stop when no spike is left (Alg. 5) — or when the pass changed nothing, since
        // a spike that cannot be closed (no dip after it) would otherwise loop forever.
        if !changed || !spike_exists(gr, t[2].0) {
            break;
        }
    }
    let events = ws.events.len();
    match cfg.window_align {
        WindowAlign::Trailing => sliding_average(gs, gr, cfg.avg_window, ws)?,
        WindowAlign::Centred => centred_average(gs, gr, cfg.avg_window, ws)?,
    }
    Ok(BassReport {
        events,
        passes,
        complete_span: span,
    })
}

/// The common start of both averages: checks `w` and the pair, and copies
/// both arrays into the workspace's scratch (the averages read the originals
/// while they overwrite `gs` and `gr`). `false`: averaging changes nothing
/// (`w` = 1 or empty arrays).
fn prepare_average(gs: &[f64], gr: &[f64], w: usize, ws: &mut BassWorkspace) -> Result<bool> {
    if w == 0 {
        return Err(Error::invalid(
            "avg_window 0: use 1 to disable the sliding average",
        ));
    }
    check_pair(gs, gr, ws)?;
    let n = gs.len();
    if w == 1 || n == 0 {
        return Ok(false);
    }
    ws.scratch_s[..n].copy_from_slice(gs);
    ws.scratch_r[..n].copy_from_slice(gr);
    Ok(true)
}

/// Trailing sliding average of width `w` on both arrays: `x'[i] = mean(x[i−w+1..=i])`,
/// shorter at the head (001 §5.3.3 AVG_WINDOW; the thesis does not say trailing or
/// centred — trailing keeps causality, like a moving average over arrivals).
pub fn sliding_average(
    gs: &mut [f64],
    gr: &mut [f64],
    w: usize,
    ws: &mut BassWorkspace,
) -> Result<()> {
    if !prepare_average(gs, gr, w, ws)? {
        return Ok(());
    }
    let n = gs.len();
    let (ss, sr) = (&ws.scratch_s[..n], &ws.scratch_r[..n]);
    let (mut acc_s, mut acc_r) = (0.0, 0.0);
    for i in 0..n {
        acc_s += ss[i];
        acc_r += sr[i];
        if i >= w {
            acc_s -= ss[i - w];
            acc_r -= sr[i - w];
        }
        let k = (i + 1).min(w) as f64;
        gs[i] = acc_s / k;
        gr[i] = acc_r / k;
    }
    Ok(())
}

/// Centred sliding average of width `w` on both arrays (see [`WindowAlign::Centred`]),
/// clipped at the ends. Allocation-free with a workspace.
pub fn centred_average(
    gs: &mut [f64],
    gr: &mut [f64],
    w: usize,
    ws: &mut BassWorkspace,
) -> Result<()> {
    if !prepare_average(gs, gr, w, ws)? {
        return Ok(());
    }
    let n = gs.len();
    let (ss, sr) = (&ws.scratch_s[..n], &ws.scratch_r[..n]);
    let back = (w - 1) / 2;
    let fwd = w - 1 - back;
    // Prefix sums would need a buffer; a running window over [lo, hi] does not.
    let (mut acc_s, mut acc_r) = (0.0, 0.0);
    let (mut lo, mut hi) = (0usize, 0usize); // window is [lo, hi)
    for i in 0..n {
        let want_hi = (i + fwd + 1).min(n);
        let want_lo = i.saturating_sub(back);
        while hi < want_hi {
            acc_s += ss[hi];
            acc_r += sr[hi];
            hi += 1;
        }
        while lo < want_lo {
            acc_s -= ss[lo];
            acc_r -= sr[lo];
            lo += 1;
        }
        let k = (hi - lo) as f64;
        gs[i] = acc_s / k;
        gr[i] = acc_r / k;
    }
    Ok(())
}

crate::names::named!(ThresholdScale {
    "ns" => ThresholdScale::Ns,
    "relative" => ThresholdScale::RelativeToMeanSendGap,
});
crate::names::named!(WindowAlign { "trailing" => WindowAlign::Trailing, "centred" => WindowAlign::Centred });
crate::names::named!(HeadSegment { "average" => HeadSegment::Average, "keep" => HeadSegment::Keep });
crate::names::named!(TailSegment { "average" => TailSegment::Average, "keep" => TailSegment::Keep });
crate::names::named!(BassVariant { "corrected" => BassVariant::Corrected, "literal" => BassVariant::Literal });

/// BASS settings as the Python and Node bindings name them (keyword or
/// option strings); `Default` is the thesis configuration with the 9038-byte,
/// 7 Gbit/s reference gap of 001 §5.5.
#[derive(Debug, Clone, Copy)]
pub struct BassNames<'a> {
    /// `"thesis"` (thresholds in ns) or `"relative"` (rescaled to `reference_gap_ns`).
    pub thresholds: &'a str,
    pub reference_gap_ns: f64,
    pub avg_window: usize,
    /// `"trailing"` or `"centred"`.
    pub window: &'a str,
    /// `"average"` or `"keep"`.
    pub head: &'a str,
    /// `"average"` or `"keep"`.
    pub tail: &'a str,
    /// `"corrected"` or `"literal"`.
    pub variant: &'a str,
}

impl Default for BassNames<'_> {
    fn default() -> Self {
        BassNames {
            thresholds: "thesis",
            reference_gap_ns: 9038.0 * 8.0 / 7.0,
            avg_window: 16,
            window: "trailing",
            head: "average",
            tail: "average",
            variant: "corrected",
        }
    }
}

impl BassNames<'_> {
    /// The checked configuration; an unknown name or a bad value is an
    /// invalid-input error naming the option.
    pub fn config(&self) -> Result<BassConfig> {
        use crate::names::Named;
        let mut c = match self.thresholds {
            "thesis" => BassConfig::thesis(),
            "relative" => BassConfig::thesis_relative(self.reference_gap_ns)?,
            t => {
                return Err(Error::invalid(format!(
                    "thresholds {t:?} is unknown; use \"thesis\" (ns) or \"relative\""
                )))
            }
        };
        c.avg_window = self.avg_window;
        c.window_align = WindowAlign::parse("window", self.window)?;
        c.head = HeadSegment::parse("head", self.head)?;
        c.tail = TailSegment::parse("tail", self.tail)?;
        c.variant = BassVariant::parse("variant", self.variant)?;
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod names_tests {
    use super::*;

    #[test]
    fn named_settings_build_the_thesis_config_and_reject_unknown_names() {
        let c = BassNames::default().config().unwrap();
        assert_eq!(c, BassConfig::thesis());
        let c = BassNames {
            window: "centred",
            head: "keep",
            ..Default::default()
        }
        .config()
        .unwrap();
        assert_eq!(
            (c.window_align, c.head),
            (WindowAlign::Centred, HeadSegment::Keep)
        );
        let e = BassNames {
            tail: "drop",
            ..Default::default()
        }
        .config()
        .unwrap_err();
        assert!(e.to_string().contains("tail \"drop\" is unknown"), "{e}");
        assert!(BassNames {
            thresholds: "x",
            ..Default::default()
        }
        .config()
        .is_err());
    }
}
