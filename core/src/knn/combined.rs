//! The combined k-NN of a two-stage model's second stage (our extension;
//! 000 §3.5 classifies with one 1-NN DTW): among the references on the side
//! stage 1 chose, the k nearest by
//!
//! `c(r) = L(r) / s2 + a · D1(r) / s1`
//!
//! where L is the L1 distance between z-sorted windows (each window z-scored,
//! then sorted: its value distribution, [`Normalization::ZSorted`]), D1 stage
//! 1's DTW distance (its normalisation, band and cost), `a` the stage-1
//! weight and `(s2, s1)` the medians of the pairwise L and D1 among the
//! training references ([`fit_scales`]). Majority vote; ties go to the class
//! of the nearest voter (order by (c, reference index)).
//!
//! The search is exact: it returns the k references a brute-force evaluation
//! of c over every side reference ranks first, bit for bit
//! ([`TwoStage::classify_exhaustive`] is that brute force). Every c that
//! enters the ranking is computed by [`Stage2::combine`] from the same L
//! (summed in sample order: the bits of a band-0 DTW) and D1 bits as the
//! brute force; bounds only decide which references get them, and every
//! cut-off carries the relative slack of the speculative bounds
//! ([`SPECULATIVE_SLACK`]), so rounding never prunes a reference that ties
//! the k-th.
//!
//! **Prepared** ([`TwoStage::prepare`], one sample ahead, off the
//! decision's path). Stage 2's query moves with the last sample (its
//! z-score and its sort), so, as stage 1 does for z-score, the preparation
//! guesses it: x_g = the previous sample ± multiples of the prefix's
//! deviation ([`ZSCORE_GUESSES_SD`]) and new minimums below the prefix's
//! ([`MIN_GUESSES_REL`]). For each guess it z-sorts the guessed window h_g
//! and computes L(h_g, r) for every reference of both sides. L is a metric
//! (L1 between sorted windows), so at the decision `L(q, r) ≥ L(h_g, r) − δ`
//! with `δ = L(q, h_g)`, one L1 per guess. With stage 1 prepared under a
//! min normalisation (or a = 0), it also orders each side's references per
//! guess by `cb_g = combine(L(h_g, r), finish(M + λ_g))`: M stage 1's
//! prepared bound of the exact finish ([`Model::exact_lower_bound`]), λ_g
//! the last local cost at the guess's normalised last value (absolute cost;
//! 0 otherwise). At the decision after stage 1's exact finish,
//! `c(r) ≥ cb_g(r) − Δ_g` with `Δ_g = δ_g / s2 + a·|last − last_g| / s1`
//! for every reference, so the search walks the order of the guess with the
//! smallest Δ and stops at the first reference whose bound is above the
//! k-th smallest c so far (τ); in between, L in full, then D1 from the last
//! row of stage 1's prepared programme ([`Model::exact_distance`], no DTW)
//! unless `fl(M + l)` already puts c above τ. The first [`WALK_HEAD`]
//! references of each order have their operands (z-sorted window, stage 1's
//! last-row operands, M and last value) copied into one record at prepare
//! time: the walk reads a few contiguous lines instead of four places per
//! reference, which is what the decision waits on when the preparation has
//! left everything cold. On the 5-Hz corpus (4909 references) the walk gives
//! a median of 10 references L in full (p90 23), against a pass over every
//! side reference's bound before (the median decision under load went from
//! 58.6 to 14.1 µs in one state, `docs/results/ops-latency.md`). The
//! preparation costs L for 17 guesses of 4909 references and the sorts:
//! the two-stage preparation took 21–29 ms median under load (17–37 ms
//! before).
//!
//! After stage 1's bounded finish (the last sample is a new minimum under
//! divide-min: the whole stage-1 query moves), D1 is bounded by the
//! larger of stage 1's `D − B` and LB_Keogh of the true query, L by the
//! guess's `L(h_g, r) − δ`. One pass computes that bound of c for every side
//! reference; they are taken in ascending order (selected and sorted in
//! growing chunks), and the ones not ruled out get their stage-1 DTW eight
//! at a time in lockstep ([`dtw::lanes`], bit-identical to the scalar
//! programme), each lane dropped once its row minimum plus its remaining
//! LB_Keogh exceeds the cut-off.
//!
//! **Unprepared** (or a preparation for another prefix): the block sums of
//! the z-sorted windows (ten blocks, stored at fit) give
//! `Σ_b |S_b(q) − S_b(r)| ≤ L` for every side reference, eight per SIMD
//! operation. D1's lower bound: after stage 1's exact prepared finish
//! `fl(M + l)`, after a bounded finish `D − B`, without preparation
//! LB_Keogh. The k smallest bounds of L are seeded with their exact L and
//! D1, and a reference gets its D1 only when its bound is not above τ:
//! after an exact finish the last row of its prepared programme, otherwise a
//! DTW abandoned once D1 exceeds `(τ − L / s2) · s1 / a`.

use super::prepared::{MIN_GUESSES_REL, SPECULATIVE_SLACK, ZSCORE_GUESSES_SD};
use super::search::insert;
use super::two_stage::{Stage2, TwoStage, TwoStagePrediction, TwoStageWorkspace, SCALE_SAMPLE};
use super::{Model, Prediction};
use crate::dtw::{
    self,
    lanes::{LaneWorkspace, Lanes, LANES},
};
use crate::error::{Error, Result};
use crate::series::Normalization;

/// Where the combined search took stage 1's distances from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum D1Source {
    /// No combined search ran (1-NN stage 2).
    #[default]
    None,
    /// `stage1_weight` = 0: c = L, no D1 needed.
    Unused,
    /// Stage 1 finished its preparation exactly: every D1 known.
    Exact,
    /// Stage 1 took a bounded finish (the last sample changed its
    /// normalisation, e.g. a new minimum under divide-min): bounds D − B,
    /// DTW for the references they do not rule out.
    Bounded,
    /// No preparation: LB_Keogh bounds, DTW for the references they do not
    /// rule out.
    Keogh,
    /// The brute force ([`TwoStage::classify_exhaustive`]).
    Exhaustive,
}

/// What the combined stage 2 did in one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CombinedStats {
    pub source: D1Source,
    /// References on stage 1's side (each got its L).
    pub side_references: usize,
    /// References whose L was computed in full (the others were ruled out
    /// by the bound from their block sums).
    pub l1: usize,
    /// Stage-1 DTWs run for D1 (completed or abandoned).
    pub stage1_dtw: usize,
    /// Of those, abandoned above the cut-off.
    pub abandoned: usize,
}

/// Scratch memory of the combined search ([`TwoStageWorkspace`]).
#[derive(Debug, Clone, Default)]
pub(super) struct CombinedWorkspace {
    /// The query, z-sorted, and its block sums.
    zq: Vec<f64>,
    qs: Vec<f64>,
    /// L of every side reference (the brute force), or its lower bound.
    l: Vec<f64>,
    /// Seeded references (D1 already computed).
    done: Vec<bool>,
    seeds: Vec<usize>,
    /// The k nearest so far: (c, side reference index), ascending.
    near: Vec<(f64, usize)>,
    /// Votes per class (full class indices) of the last call.
    pub(super) votes: Vec<u32>,
    dtw: dtw::Workspace,
    pub(super) stats: CombinedStats,
    /// The preparation one sample ahead ([`TwoStage::prepare_combined`]).
    prep: Prep,
    /// Bounded finish: (lower bound of c, side reference index), selected
    /// and sorted in growing chunks; the lockstep DTW's operands.
    cand: Vec<(f64, u32)>,
    lanes_ref: Vec<Lanes>,
    /// Per lane, LB_Keogh of rows i.. (`[i][lane]`, i up to w): the
    /// lockstep DTW drops a lane once its row minimum plus this exceeds the
    /// cut-off (the UCR Suite's cumulative bound).
    lanes_cb: Vec<Lanes>,
    /// One candidate's LB_Keogh terms per row.
    gaps: Vec<f64>,
    lanes_ws: LaneWorkspace,
}

/// References per side and guess whose operands the preparation copies
/// next to each other (`Prep::rec`): on the 5-Hz corpus the walk reaches a
/// median of 10 references (p90 23).
const WALK_HEAD: usize = 16;

/// Guessed last samples of stage 2's preparation: the z-score guesses
/// around the previous sample, then new minimums below the prefix's.
const GUESSES: usize = ZSCORE_GUESSES_SD.len() + MIN_GUESSES_REL.len();

/// Stage 2's preparation one sample ahead (module docs, "Prepared"): for
/// guessed last samples x_g, the guessed window z-sorted (h_g), L(h_g, r) of
/// every reference of both sides, and per side and guess the references in
/// ascending order of a lower bound of c on h_g.
#[derive(Debug, Clone, Default)]
struct Prep {
    /// Stage 1's model id, 0 when nothing is prepared.
    model: u64,
    /// The raw prefix (w − 1 samples) it was prepared for.
    prefix: Vec<f64>,
    guesses: usize,
    /// `[guess][sample]`: the guessed windows, z-sorted.
    h: Vec<f64>,
    /// Stage 1's normalised last value of an exact finish on each guess
    /// (NaN: a new minimum, or no exact finish): the D1 bound's last term.
    last1: [f64; GUESSES],
    /// `[side][guess][side reference]` (side 0 first): L(h_g, r).
    lg: Vec<f64>,
    /// Same layout, each (side, guess) in ascending order of `cb`: the
    /// side reference indices and `cb = combine(L(h_g, r), finish(M + λ))`
    /// (M stage 1's prepared bound, λ the last local cost at `last1`, 0
    /// when unknown or squared).
    ord_cb: Vec<f64>,
    ord_i: Vec<u32>,
    /// Whether `ord_*` hold (weight 0, or stage 1 prepared with an exact
    /// finish possible).
    ordered: bool,
    /// Per side and guess, the first [`WALK_HEAD`] references of the order,
    /// each `[z-sorted window; w][stage 1's exact-finish operands; 2c][M,
    /// last value]` (c = the last row's band): what the walk reads of a
    /// reference, contiguous instead of in four places (`[side][guess][pos]`).
    rec: Vec<f64>,
    rec_len: usize,
    /// Scratch for the sort.
    pairs: Vec<(f64, u32)>,
}

/// The scales `(s2, s1)` of [`Stage2::scales`]: the medians (the mean of the
/// two middle values for an even count, as numpy's) of L (the L1 distance
/// between windows under `norm2`) and of D1 (stage 1's DTW distance) over
/// every pair of up to [`SCALE_SAMPLE`] references, evenly spaced: with n
/// references and m = min(n, 600), references `⌊i · n / m⌋` for i in 0..m.
/// Deterministic; about 180 000 DTWs at m = 600.
pub(super) fn fit_scales(stage1: &Model, norm2: Normalization) -> Result<[f64; 2]> {
    let (n, w) = (stage1.len(), stage1.window());
    let m = n.min(SCALE_SAMPLE);
    if m < 2 {
        return Err(Error::invalid(format!(
            "stage2.stage1_weight > 0 needs scales from pairs of references, but the model has {n}; add references or give stage2.scales"
        )));
    }
    let idx: Vec<usize> = (0..m).map(|i| i * n / m).collect();
    let mut z = Vec::with_capacity(m * w);
    for &i in &idx {
        let at = z.len();
        z.extend_from_slice(stage1.raw_reference(i));
        norm2.apply(&mut z[at..])?;
    }
    let cost = stage1.config().dtw.cost;
    let r = stage1.config().dtw.radius_or_max();
    let pairs = m * (m - 1) / 2;
    let (mut ls, mut ds) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    let mut dws = dtw::Workspace::with_capacity(w);
    for a in 0..m {
        for b in a + 1..m {
            ls.push(l1(&z[a * w..(a + 1) * w], &z[b * w..(b + 1) * w]));
            let acc = dtw::accumulated(
                stage1.reference(idx[a]),
                stage1.reference(idx[b]),
                r,
                cost,
                f64::INFINITY,
                None,
                &mut dws,
            );
            ds.push(cost.finish(acc));
        }
    }
    median_scales(
        "the scale",
        [("s2 (stage 2)", &mut ls), ("s1 (stage 1)", &mut ds)],
    )
}

/// The medians of two sampled distance lists, the scales of a combined
/// distance (stage 2's here, stage 1's term in `steps.rs`); an error when
/// one is not positive, since the two distances could not be weighed.
pub(super) fn median_scales(what: &str, lists: [(&str, &mut [f64]); 2]) -> Result<[f64; 2]> {
    let mut scales = [0.0; 2];
    for (s, (name, v)) in scales.iter_mut().zip(lists) {
        *s = median(v);
        if !(s.is_finite() && *s > 0.0) {
            return Err(Error::invalid(format!(
                "{what} {name} came out {s}: at least half the sampled reference pairs are at distance 0; the references are too alike to weigh the two distances"
            )));
        }
    }
    Ok(scales)
}

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_unstable_by(f64::total_cmp);
    let h = v.len() / 2;
    if v.len() % 2 == 1 {
        v[h]
    } else {
        (v[h - 1] + v[h]) / 2.0
    }
}

/// Σ |a_i − b_i| in sample order (the bits of a band-0 DTW under |a − b|:
/// its cell (i, i) is |a_i − b_i| plus cell (i − 1, i − 1)).
#[inline(always)]
fn l1(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = 0.0;
    for (x, y) in a.iter().zip(b) {
        acc += (x - y).abs();
    }
    acc
}

/// Σ |a_i − b_i| in any order (a bound's operand: the slack covers the
/// rounding), four partial sums.
#[inline(always)]
fn l1_bound_operand(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for t in 0..4 {
            acc[t] += (x[t] - y[t]).abs();
        }
    }
    let mut tail = 0.0;
    for (x, y) in ra.iter().zip(rb) {
        tail += (x - y).abs();
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Blocks of a z-sorted window whose sums bound L from below.
pub(super) fn n_blocks(w: usize) -> usize {
    w.min(BLOCKS)
}

/// Blocks per window of the bound on L: 10 (five samples each at w = 50):
/// 80 bytes per reference instead of the window's 400, and on the 5-Hz
/// corpus a bound close enough to L that few references need L itself.
const BLOCKS: usize = 10;

/// Sums of the blocks `[b·w/B, (b+1)·w/B)` of `v`, each in sample order.
#[inline(always)]
fn sums_of(v: &[f64], out: &mut [f64]) {
    let (w, nb) = (v.len(), out.len());
    for (b, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0;
        for &x in &v[b * w / nb..(b + 1) * w / nb] {
            acc += x;
        }
        *o = acc;
    }
}

/// Every reference's block sums of `m` (its normalised references),
/// interleaved `[group][block][lane]`.
pub(super) fn block_sums(m: &Model) -> Vec<Lanes> {
    let (w, n) = (m.window(), m.len());
    let nb = n_blocks(w);
    let mut out = vec![[0.0; LANES]; n.div_ceil(LANES) * nb];
    let mut s = vec![0.0; nb];
    for i in 0..n {
        sums_of(m.reference(i), &mut s);
        for (b, &v) in s.iter().enumerate() {
            out[(i / LANES) * nb + b][i % LANES] = v;
        }
    }
    out
}

/// A lower bound of L for every reference: Σ_b |S_b(q) − S_b(r)| ≤ Σ_i |q_i −
/// r_i| (the triangle inequality within each block), lowered by a slack far
/// above the rounding of the sums (z-scored values are at most √w in size).
#[inline(always)]
fn l1_bounds(blocks: &[Lanes], qs: &[f64], n: usize, out: &mut [f64]) {
    let nb = qs.len();
    for (g, rows) in blocks.chunks_exact(nb).enumerate() {
        let mut acc: Lanes = [0.0; LANES];
        for (&qb, s) in qs.iter().zip(rows) {
            for t in 0..LANES {
                acc[t] += (qb - s[t]).abs();
            }
        }
        let used = LANES.min(n - g * LANES);
        for (o, &a) in out[g * LANES..g * LANES + used].iter_mut().zip(&acc) {
            let lo = a - SPECULATIVE_SLACK * (1.0 + a);
            *o = if lo > 0.0 { lo } else { 0.0 };
        }
    }
}

fn run_l1_bounds(blocks: &[Lanes], qs: &[f64], n: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { l1_bounds_avx2(blocks, qs, n, out) };
        }
    }
    l1_bounds(blocks, qs, n, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn l1_bounds_avx2(blocks: &[Lanes], qs: &[f64], n: usize, out: &mut [f64]) {
    l1_bounds(blocks, qs, n, out)
}

impl TwoStage {
    /// Size the combined search's buffers (allocates only when a size
    /// changes; nothing for a 1-NN stage 2).
    pub(super) fn fit_combined(&self, ws: &mut TwoStageWorkspace) {
        if !self.stage2().is_combined() {
            return;
        }
        let cw = &mut ws.combined;
        let w = self.window();
        let n = self.side_len(0).max(self.side_len(1));
        let k = self.stage2().k;
        if cw.zq.len() != w {
            cw.zq.resize(w, 0.0);
            cw.qs.resize(n_blocks(w), 0.0);
            cw.dtw.ensure(w);
        }
        if cw.l.len() < n {
            cw.l.resize(n, 0.0);
            cw.done.resize(n, false);
        }
        if cw.near.capacity() < k {
            cw.near.reserve(k);
            cw.seeds.reserve(k);
        }
        if cw.votes.len() != self.classes().len() {
            cw.votes.resize(self.classes().len(), 0);
        }
        let both = self.side_len(0) + self.side_len(1);
        let pr = &mut cw.prep;
        if pr.prefix.len() != w - 1 || pr.h.len() != GUESSES * w || pr.lg.len() != GUESSES * both {
            pr.model = 0;
            pr.prefix.resize(w - 1, 0.0);
            pr.h.resize(GUESSES * w, 0.0);
            pr.lg.resize(GUESSES * both, 0.0);
            pr.ord_cb.resize(GUESSES * both, 0.0);
            pr.ord_i.resize(GUESSES * both, 0);
        }
        if pr.pairs.capacity() < n {
            pr.pairs.reserve(n);
        }
        let rec_len = w + 2 * self.stage1_model().last_row_cells() + 2;
        if pr.rec_len != rec_len || pr.rec.len() != 2 * GUESSES * WALK_HEAD * rec_len {
            pr.model = 0;
            pr.rec_len = rec_len;
            pr.rec.resize(2 * GUESSES * WALK_HEAD * rec_len, 0.0);
        }
        if cw.cand.capacity() < n {
            cw.cand.reserve(n);
        }
        if cw.lanes_ref.len() != w {
            cw.lanes_ref.resize(w, [0.0; LANES]);
            cw.lanes_cb.resize(w + 1, [0.0; LANES]);
            cw.gaps.resize(w, 0.0);
            cw.lanes_ws.ensure(w);
        }
    }

    /// Offset of side `side`'s block in `Prep::lg` and `Prep::ord_*`.
    fn prep_offset(&self, side: usize) -> usize {
        if side == 0 {
            0
        } else {
            GUESSES * self.side_len(0)
        }
    }

    /// Stage 2's preparation for a window whose first w − 1 samples are
    /// `prefix`, after stage 1's ([`TwoStage::prepare`]; module docs,
    /// "Prepared"). Off the decision's path. No allocation once `ws` came
    /// from [`TwoStage::workspace`].
    pub(super) fn prepare_combined(&self, prefix: &[f64], ws: &mut TwoStageWorkspace) {
        self.fit_combined(ws);
        let w = self.window();
        let st = self.stage2();
        let a = st.stage1_weight;
        let stage1 = self.stage1_model();
        let cost = stage1.config().dtw.cost;
        let TwoStageWorkspace {
            stage1: ws1,
            combined: cw,
            ..
        } = ws;
        let pr = &mut cw.prep;
        pr.model = 0;
        if w < 2 || prefix.len() != w - 1 || prefix.iter().any(|v| !v.is_finite()) {
            return;
        }
        let plan = stage1.exact_finish_plan(ws1);
        let n = (w - 1) as f64;
        let mean = prefix.iter().sum::<f64>() / n;
        let sd = (prefix.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
        let prev = prefix[w - 2];
        let base = prefix.iter().copied().fold(f64::INFINITY, f64::min);
        let xs = ZSCORE_GUESSES_SD
            .iter()
            .map(|o| prev + o * sd)
            .chain(MIN_GUESSES_REL.iter().map(|f| base - f * base.abs()));
        pr.guesses = 0;
        for x in xs {
            let g = pr.guesses;
            let h = &mut pr.h[g * w..(g + 1) * w];
            h[..w - 1].copy_from_slice(prefix);
            h[w - 1] = x;
            if !x.is_finite() || st.normalization.apply(h).is_err() {
                continue;
            }
            pr.last1[g] = plan.and_then(|(_, e)| e.of(x)).unwrap_or(f64::NAN);
            pr.guesses += 1;
        }
        pr.ordered = a == 0.0 || plan.is_some();
        for side in 0..2 {
            let m2 = self.stage2_model(side);
            let refs = self.side_references(side);
            let ns = refs.len();
            let off = self.prep_offset(side);
            for g in 0..pr.guesses {
                let h = &pr.h[g * w..(g + 1) * w];
                let lg = &mut pr.lg[off + g * ns..off + (g + 1) * ns];
                for (i, o) in lg.iter_mut().enumerate() {
                    *o = l1_bound_operand(h, m2.reference(i));
                }
                if !pr.ordered {
                    continue;
                }
                let pairs = &mut pr.pairs;
                pairs.clear();
                let lam = pr.last1[g];
                for (i, &l) in lg.iter().enumerate() {
                    let cb = match plan {
                        Some((mins, _)) if a > 0.0 => {
                            let j = refs[i];
                            let local = if lam.is_finite() && cost == dtw::Cost::Abs {
                                (lam - stage1.refs_last[j]).abs()
                            } else {
                                0.0
                            };
                            st.combine(l, cost.finish(mins[j] + local))
                        }
                        _ => st.combine(l, 0.0),
                    };
                    pairs.push((cb, i as u32));
                }
                pairs.sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                for (t, &(cb, i)) in pairs.iter().enumerate() {
                    pr.ord_cb[off + g * ns + t] = cb;
                    pr.ord_i[off + g * ns + t] = i;
                }
                let rl = pr.rec_len;
                for (t, &(_, i)) in pairs.iter().take(WALK_HEAD).enumerate() {
                    let (i, at) = (i as usize, ((side * GUESSES + g) * WALK_HEAD + t) * rl);
                    let rec = &mut pr.rec[at..at + rl];
                    rec[..w].copy_from_slice(m2.reference(i));
                    if let (Some((mins, _)), true) = (plan, a > 0.0) {
                        let j = refs[i];
                        stage1.exact_operands(ws1, j, &mut rec[w..rl - 2]);
                        rec[rl - 2] = mins[j];
                        rec[rl - 1] = stage1.refs_last[j];
                    }
                }
            }
        }
        pr.prefix.copy_from_slice(prefix);
        pr.model = stage1.id;
        // Stage 1's exact finish comes first at the decision: read its data
        // back in after the passes above evicted it.
        std::hint::black_box(stage1.warm_exact_finish(ws1));
    }

    /// Whether the preparation in `cw` was made for `window`'s prefix, bit
    /// for bit, by this model.
    fn prepared_for(&self, window: &[f64], cw: &CombinedWorkspace) -> bool {
        let pr = &cw.prep;
        pr.model != 0
            && pr.model == self.stage1_model().id
            && pr.guesses > 0
            && pr.prefix.len() + 1 == window.len()
            && pr
                .prefix
                .iter()
                .zip(window)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }

    fn side_len(&self, side: usize) -> usize {
        self.side_references(side).len()
    }

    /// The combined stage 2 after stage 1 chose `side` (module docs); the
    /// brute force with `exhaustive`. `ws.stage1` holds stage 1's
    /// normalised query and its preparation's state.
    pub(super) fn classify_combined(
        &self,
        window: &[f64],
        p1: Prediction,
        side: usize,
        exhaustive: bool,
        ws: &mut TwoStageWorkspace,
    ) -> Result<TwoStagePrediction> {
        self.fit_combined(ws);
        let st: Stage2 = self.stage2();
        let (k, a) = (st.k, st.stage1_weight);
        let [s2, s1] = st.scales.unwrap_or([1.0, 1.0]);
        let w = self.window();
        let m2 = self.stage2_model(side);
        let refs = self.side_references(side);
        let ns = refs.len();
        let stage1 = self.stage1_model();
        let cost = stage1.config().dtw.cost;
        let r = stage1.config().dtw.radius_or_max();
        let TwoStageWorkspace {
            stage1: ws1,
            combined: cw,
            ..
        } = ws;
        let prepared = !exhaustive && self.prepared_for(window, cw);
        let zq = &mut cw.zq[..w];
        zq.copy_from_slice(window);
        st.normalization.apply(zq)?;
        let l = &mut cw.l[..ns];
        let mut stats = CombinedStats {
            side_references: ns,
            ..CombinedStats::default()
        };
        let near = &mut cw.near;
        near.clear();
        if exhaustive {
            // The brute force: L and D1 of every side reference.
            stats.source = if a == 0.0 {
                D1Source::Unused
            } else {
                D1Source::Exhaustive
            };
            let q1 = &ws1.query[..w];
            for (i, li) in l.iter_mut().enumerate() {
                *li = l1(zq, m2.reference(i));
                let d1 = if a == 0.0 {
                    0.0
                } else {
                    stats.stage1_dtw += 1;
                    cost.finish(dtw::accumulated(
                        q1,
                        stage1.reference(refs[i]),
                        r,
                        cost,
                        f64::INFINITY,
                        None,
                        &mut cw.dtw,
                    ))
                };
                insert(near, k, st.combine(*li, d1), i);
            }
        } else if prepared && (a == 0.0 || stage1.exact_finish_holds(ws1)) && cw.prep.ordered {
            // Exact D1 (or none): walk the prepared order (module docs).
            stats.source = if a == 0.0 {
                D1Source::Unused
            } else {
                D1Source::Exact
            };
            let pr = &cw.prep;
            let last1 = ws1.query[w - 1];
            // The guess whose bound moves least: c(r) >= cb_g(r) − Δ_g.
            let (mut delta, mut g) = (f64::INFINITY, 0);
            for t in 0..pr.guesses {
                let d = l1_bound_operand(zq, &pr.h[t * w..(t + 1) * w]);
                let dd = if a == 0.0 {
                    d
                } else {
                    let lam = pr.last1[t];
                    let adj = if lam.is_finite() && cost == dtw::Cost::Abs {
                        (last1 - lam).abs()
                    } else {
                        0.0
                    };
                    d / s2 + a * adj / s1
                };
                if dd < delta {
                    (delta, g) = (dd, t);
                }
            }
            let at = self.prep_offset(side) + g * ns;
            let slack = |t: f64| t + SPECULATIVE_SLACK * t + f64::MIN_POSITIVE;
            let mut cut = f64::INFINITY;
            let rl = pr.rec_len;
            let recs = &pr.rec[(side * GUESSES + g) * WALK_HEAD * rl..];
            for (t, (&cb, &i)) in pr.ord_cb[at..at + ns]
                .iter()
                .zip(&pr.ord_i[at..at + ns])
                .enumerate()
            {
                if cb - delta - SPECULATIVE_SLACK * (cb + delta + 1.0) > cut {
                    break;
                }
                let i = i as usize;
                // The head's operands are in one record; the same values
                // (so the same bits) as where they live.
                let rec = (t < WALK_HEAD).then(|| &recs[t * rl..(t + 1) * rl]);
                let li = l1(zq, rec.map_or(m2.reference(i), |r| &r[..w]));
                stats.l1 += 1;
                let d1 = if a == 0.0 {
                    0.0
                } else {
                    let j = refs[i];
                    let lb = match rec {
                        Some(r) => {
                            let d = last1 - r[rl - 1];
                            r[rl - 2]
                                + if cost == dtw::Cost::Abs {
                                    d.abs()
                                } else {
                                    d * d
                                }
                        }
                        None => stage1.exact_lower_bound(ws1, j),
                    };
                    if st.combine(li, cost.finish(lb)) > cut {
                        continue;
                    }
                    cost.finish(match rec {
                        Some(r) => stage1.exact_distance_of(ws1, &r[w..rl - 2]),
                        None => stage1.exact_distance(ws1, j),
                    })
                };
                if insert(near, k, st.combine(li, d1), i) && near.len() == k {
                    cut = slack(near[k - 1].0);
                }
            }
        } else if let (true, Some((dist, b))) = (prepared && a > 0.0, stage1.bounded_distances(ws1))
        {
            // Stage 1 took a bounded finish: D − B bounds D1, the prepared
            // L(h_g, r) − δ bounds L; exact DTWs eight at a time, nearest
            // bound first (module docs).
            stats.source = D1Source::Bounded;
            let pr = &cw.prep;
            let (mut delta, mut g) = (f64::INFINITY, 0);
            for t in 0..pr.guesses {
                let d = l1_bound_operand(zq, &pr.h[t * w..(t + 1) * w]);
                if d < delta {
                    (delta, g) = (d, t);
                }
            }
            let at = self.prep_offset(side) + g * ns;
            let lg = &pr.lg[at..at + ns];
            let lb1_of = |j: usize| {
                let f = cost.finish(dist[j]);
                ((f - b) - SPECULATIVE_SLACK * (f + b)).max(0.0)
            };
            let cand = &mut cw.cand;
            cand.clear();
            // Products instead of `combine`'s two divisions per reference
            // (they were most of this pass): a bound, lowered by the slack.
            let (inv_s2, a_s1) = (1.0 / s2, a / s1);
            for (i, &lgi) in lg.iter().enumerate() {
                let lo = lgi - delta - SPECULATIVE_SLACK * (lgi + delta + 1.0);
                let lb_l = lo.max(0.0);
                let c = lb_l * inv_s2 + lb1_of(refs[i]) * a_s1;
                cand.push((c - SPECULATIVE_SLACK * c, i as u32));
            }
            let by = |x: &(f64, u32), y: &(f64, u32)| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1));
            let slack = |t: f64| t + SPECULATIVE_SLACK * t + f64::MIN_POSITIVE;
            let mut cut = f64::INFINITY;
            // cand[..end] is sorted; every later entry is at least cand[end − 1].
            let (mut pos, mut end, mut chunk) = (0usize, 0usize, 2 * LANES);
            let q1 = &ws1.query[..w];
            let mut batch = [(0usize, 0.0f64, 0.0f64); LANES];
            let mut stop = false;
            while !stop {
                let mut used = 0;
                while used < LANES {
                    if pos == end {
                        if end == ns {
                            stop = true;
                            break;
                        }
                        let m = (ns - end).min(chunk);
                        let rest = &mut cand[end..];
                        if m < rest.len() {
                            rest.select_nth_unstable_by(m - 1, by);
                        }
                        rest[..m].sort_unstable_by(by);
                        end += m;
                        chunk *= 2;
                    }
                    let (lb, i) = cand[pos];
                    if lb > cut {
                        stop = true;
                        break;
                    }
                    pos += 1;
                    let i = i as usize;
                    let li = l1(zq, m2.reference(i));
                    stats.l1 += 1;
                    let j = refs[i];
                    if st.combine(li, lb1_of(j)) > cut {
                        continue;
                    }
                    // LB_Keogh of the true query: its terms per row, summed
                    // from the last row up into the lane's column.
                    let (u, lw) = stage1.envelope(j);
                    let mut acc = 0.0;
                    for t in (0..w).rev() {
                        acc += dtw::gap(q1[t], u[t], lw[t], cost);
                        cw.gaps[t] = acc;
                    }
                    let lo = acc - SPECULATIVE_SLACK * acc;
                    if st.combine(li, cost.finish(lo)) > cut {
                        continue;
                    }
                    for (c, &g) in cw.lanes_cb.iter_mut().zip(&cw.gaps) {
                        c[used] = g;
                    }
                    // D1 above (cut − L / s2) · s1 / a puts c above the cut.
                    let d_max = slack((cut - li / s2) * s1 / a);
                    batch[used] = (i, li, slack(cost.unfinish(d_max)));
                    used += 1;
                }
                if used == 0 {
                    break;
                }
                // Lanes past `used` repeat the first candidate (ignored).
                let mut top = 0.0f64;
                for (t, &(i, _, acc_max)) in batch[..used].iter().enumerate() {
                    let s = stage1.reference(refs[i]);
                    for (v, &x) in cw.lanes_ref.iter_mut().zip(s) {
                        v[t] = x;
                    }
                    top = if acc_max > top { acc_max } else { top };
                }
                for t in used..LANES {
                    for v in cw.lanes_ref.iter_mut() {
                        v[t] = v[0];
                    }
                    for c in cw.lanes_cb[..w].iter_mut() {
                        c[t] = c[0];
                    }
                }
                // Lane bounds are suffix sums of non-negative terms: slack
                // keeps rounding from dropping a lane at the cut-off.
                let accs = dtw::lanes::accumulated_lanes(
                    q1,
                    &cw.lanes_ref,
                    r,
                    cost,
                    slack(top),
                    &cw.lanes_cb,
                    &mut cw.lanes_ws,
                );
                stats.stage1_dtw += used;
                for (&(i, li, acc_max), &acc) in batch[..used].iter().zip(&accs) {
                    // At or below the cut-off the lane's value is the scalar
                    // programme's, bit for bit.
                    if acc > acc_max {
                        stats.abandoned += 1;
                        continue;
                    }
                    if insert(near, k, st.combine(li, cost.finish(acc)), i) && near.len() == k {
                        cut = slack(near[k - 1].0);
                    }
                }
            }
        } else {
            // A lower bound of L for every side reference from its block sums.
            let qs = &mut cw.qs[..];
            sums_of(zq, qs);
            run_l1_bounds(&self.blocks[side], qs, ns, l);
            // Where D1 comes from, and a lower bound of it for any reference.
            let exact = a > 0.0 && stage1.exact_finish_holds(ws1);
            let bounded = if a > 0.0 && !exact {
                stage1.bounded_distances(ws1)
            } else {
                None
            };
            stats.source = if a == 0.0 {
                D1Source::Unused
            } else if exact {
                D1Source::Exact
            } else if bounded.is_some() {
                D1Source::Bounded
            } else {
                D1Source::Keogh
            };
            let q1 = &ws1.query[..w];
            // D1 of reference j (accumulated), or above `acc_max`.
            let mut d1 = |j: usize, acc_max: f64, stats: &mut CombinedStats| -> f64 {
                if a == 0.0 {
                    return 0.0;
                }
                if exact {
                    // Cheap (one last row from the preparation): never abandoned.
                    return stage1.exact_distance(ws1, j);
                }
                stats.stage1_dtw += 1;
                dtw::accumulated(q1, stage1.reference(j), r, cost, acc_max, None, &mut cw.dtw)
            };
            // Seeds: the k smallest bounds of L, with their exact L and D1.
            for (i, &li) in l.iter().enumerate() {
                insert(near, k, li, i);
            }
            cw.seeds.clear();
            cw.seeds.extend(near.iter().map(|x| x.1));
            near.clear();
            let done = &mut cw.done[..ns];
            done.fill(false);
            for &i in &cw.seeds {
                let li = l1(zq, m2.reference(i));
                stats.l1 += 1;
                let acc = d1(refs[i], f64::INFINITY, &mut stats);
                insert(near, k, st.combine(li, cost.finish(acc)), i);
                done[i] = true;
            }
            let slack = |t: f64| t + SPECULATIVE_SLACK * t + f64::MIN_POSITIVE;
            // c <= τ is needed to enter (a tie on c enters by index).
            let mut cut = if near.len() == k {
                slack(near[k - 1].0)
            } else {
                f64::INFINITY
            };
            for (i, &lb_l) in l.iter().enumerate() {
                if done[i] || st.combine(lb_l, 0.0) > cut {
                    continue;
                }
                let j = refs[i];
                let lb1 = if a == 0.0 {
                    0.0
                } else if exact {
                    // fl(M + l) bounds the programme's own value from below.
                    cost.finish(stage1.exact_lower_bound(ws1, j))
                } else if let Some((dist, b)) = bounded {
                    let f = cost.finish(dist[j]);
                    let lo = (f - b) - SPECULATIVE_SLACK * (f + b);
                    if lo > 0.0 {
                        lo
                    } else {
                        0.0
                    }
                } else {
                    let (u, lw) = stage1.envelope(j);
                    cost.finish(dtw::lb_keogh(q1, u, lw, cost, f64::INFINITY, None))
                };
                if a > 0.0 && st.combine(lb_l, lb1) > cut {
                    continue;
                }
                let li = l1(zq, m2.reference(i));
                stats.l1 += 1;
                if st.combine(li, lb1) > cut {
                    continue;
                }
                let acc = if a == 0.0 {
                    0.0
                } else {
                    // D1 above (cut − L / s2) · s1 / a puts c above the cut.
                    let room = cut - li / s2;
                    let d_max = slack(room * s1 / a);
                    let acc_max = slack(cost.unfinish(d_max));
                    let acc = d1(j, acc_max, &mut stats);
                    // At or below the cut-off the programme's value is exact.
                    if acc > acc_max {
                        stats.abandoned += !exact as usize;
                        continue;
                    }
                    acc
                };
                if insert(near, k, st.combine(li, cost.finish(acc)), i) && near.len() == k {
                    cut = slack(near[k - 1].0);
                }
            }
        }
        // Majority vote over the k; ties to the class of the nearest voter.
        let classes = self.side_classes(side);
        let labels = m2.labels();
        let votes = &mut cw.votes;
        votes.fill(0);
        for &(_, i) in near.iter() {
            votes[classes[labels[i] as usize]] += 1;
        }
        let top = votes.iter().copied().max().unwrap_or(0);
        let (distance, nearest) = near
            .iter()
            .copied()
            .find(|&(_, i)| votes[classes[labels[i] as usize]] == top)
            .unwrap_or((f64::INFINITY, 0));
        cw.stats = stats;
        Ok(TwoStagePrediction {
            class: classes[labels[nearest] as usize],
            distance,
            neighbor: refs[nearest],
            votes: top,
            vote_share: top as f64 / near.len().max(1) as f64,
            bbr_present: side == 1,
            stage1_class: self.labels()[p1.neighbor] as usize,
            stage1_distance: p1.distance,
            stage1_neighbor: p1.neighbor,
        })
    }
}
