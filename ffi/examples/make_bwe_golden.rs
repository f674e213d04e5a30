//! Writes the bandwidth-estimation golden fixture shared by the Rust, C, Python and
//! Node tests:
//!
//! - `tests/fixtures/bwe_golden.model.json`: a small gbt-regressor (120 trees) for
//!   64-packet p-streams on FFT-magnitude features (the model of
//!   core/tests/fixtures/trees_gbt_regressor.json, trained on simulated traces);
//! - `tests/fixtures/bwe_golden.json`: simulated p-streams (001 BCT condition,
//!   `opsel::bwe::sim`, NOT measured) with the expected BASS/ABest, single-rate
//!   decision and ML estimate of each, p-stream rates, a rate-adapter sequence, and
//!   single-rate N = 320 p-streams with the Pathload / IMR-avg / IMR-wavelet trends
//!   (001 Ch 5 baselines) and the PCT/PDT of their one-way delays.
//!
//! Schema: tests/fixtures/README.md. Run from the repository root:
//! `cargo run -p opsel-ffi --example make_bwe_golden` (or `make golden-bwe`).

use opsel::bwe::adapter::{RateAdapter, RateAdapterConfig};
use opsel::bwe::features::FeatureKind;
use opsel::bwe::ml::MlEstimator;
use opsel::bwe::pathload::{self, ImrWorkspace, Trend};
use opsel::bwe::sim::{simulate, Coalescing, CrossKind, CrossTraffic, SimConfig};
use opsel::bwe::{
    decide_single_rate, estimate_multi_rate, AbestConfig, BassConfig, EstimatorWorkspace,
    PStreamSpec, WindowAlign,
};
use serde_json::json;
use std::path::PathBuf;

/// Reference gap of the relative thresholds: 9038 B at 7 Gbps.
const REF_GAP_NS: f64 = 9038.0 * 8.0 / 7.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let src = std::fs::read_to_string(root.join("core/tests/fixtures/trees_gbt_regressor.json"))?;
    let v: serde_json::Value = serde_json::from_str(&src)?;
    let model_text = serde_json::to_string(&v["model"])?;
    std::fs::write(
        root.join("tests/fixtures/bwe_golden.model.json"),
        &model_text,
    )?;
    let mut ml = MlEstimator::from_json(&model_text, FeatureKind::Magnitude, 64)?;

    let thesis = BassConfig::thesis();
    let relative = BassConfig::thesis_relative(REF_GAP_NS)?;
    let centred = BassConfig {
        window_align: WindowAlign::Centred,
        ..thesis
    };
    let ab = AbestConfig::default();
    let res = |a: opsel::bwe::Abest| {
        json!({"abest_bps": a.abest_bps, "excursion_start": a.excursion_start,
               "below_range": a.below_range, "above_range": a.above_range})
    };
    let mut ws = EstimatorWorkspace::new(64);
    let mut streams = Vec::new();
    let cfg = SimConfig::thesis_bct(0x601D);
    for (k, r) in [6.0e9, 6.8e9, 7.5e9, 8.2e9, 9.0e9, 5.2e9]
        .into_iter()
        .enumerate()
    {
        let spec = PStreamSpec::with_range(r, 4, 16, 0.5, 9038)?;
        let mut idx = k as u64;
        let t = loop {
            let t = simulate(&spec, &cfg, idx)?;
            if t.complete() {
                break t;
            }
            idx += 100;
        };
        let (gs, gr) = (&t.send_gap_ns, &t.recv_gap_ns);
        streams.push(json!({
            "spec": {"r_avg_bps": spec.r_avg_bps, "n_rates": 4, "packets_per_rate": 16,
                     "range": 0.5, "spread": spec.spread, "packet_bytes": 9038},
            "send_gaps_ns": gs, "recv_gaps_ns": gr, "avail_bw_bps": t.avail_bw_bps,
            "bass_thesis": res(estimate_multi_rate(gs, gr, &spec, &thesis, &ab, &mut ws)?),
            "bass_relative": res(estimate_multi_rate(gs, gr, &spec, &relative, &ab, &mut ws)?),
            "bass_centred": res(estimate_multi_rate(gs, gr, &spec, &centred, &ab, &mut ws)?),
            "ml_bps": ml.estimate(gs, gr, spec.r_avg_bps)?,
        }));
    }
    let mut single = Vec::new();
    for (k, r) in [6.0e9, 9.0e9, 7.5e9].into_iter().enumerate() {
        let spec = PStreamSpec::single_rate(r, 32, 9038);
        let t = simulate(&spec, &cfg, 1000 + k as u64)?;
        let (gs, gr) = (&t.send_gap_ns, &t.recv_gap_ns);
        single.push(json!({
            "rate_bps": r, "send_gaps_ns": gs, "recv_gaps_ns": gr, "avail_bw_bps": t.avail_bw_bps,
            "exceeds_thesis_rule": decide_single_rate(gs, gr, &thesis, 0.0, &mut ws)?,
            "exceeds_tol_0_02": decide_single_rate(gs, gr, &thesis, 0.02, &mut ws)?,
        }));
    }
    // Ch 5 baselines (001 §5.1, Fig 5.3): N = 320 single-rate streams. Clean CBR
    // traffic far above / below the available bandwidth gives "increasing" / "no
    // trend"; BCT with NIC1 coalescing gives the ambiguous answers the thesis reports.
    let name = |t: Trend| match t {
        Trend::Increasing => "increasing",
        Trend::NoTrend => "no_trend",
        Trend::Ambiguous => "ambiguous",
    };
    let clean = SimConfig {
        cross: CrossTraffic::table_3_1(CrossKind::Cbr),
        coalescing: Coalescing::None,
        ..cfg
    };
    let mut imr = ImrWorkspace::new(320);
    let mut owd = vec![0.0; 320];
    let mut baselines = Vec::new();
    for (k, (r, c)) in [
        (9.5e9, clean),
        (5.0e9, clean),
        (7.0e9, cfg),
        (8.0e9, cfg),
        (6.0e9, cfg),
    ]
    .into_iter()
    .enumerate()
    {
        let spec = PStreamSpec::single_rate(r, 320, 9038);
        let t = simulate(&spec, &c, 2000 + k as u64)?;
        let (gs, gr) = (&t.send_gap_ns, &t.recv_gap_ns);
        pathload::relative_owd(gs, gr, &mut owd)?;
        baselines.push(json!({
            "rate_bps": r, "send_gaps_ns": gs, "recv_gaps_ns": gr, "avail_bw_bps": t.avail_bw_bps,
            "owd_pct": pathload::pct(&owd)?, "owd_pdt": pathload::pdt(&owd)?,
            "owd_trend": name(pathload::trend(&owd)?),
            "pathload": name(pathload::pathload(gs, gr, &mut imr)?),
            "imr_avg": name(pathload::imr_avg(gs, gr, &mut imr)?),
            "imr_wavelet_3": name(pathload::imr_wavelet(gs, gr, 3, &mut imr)?),
        }));
    }
    let t7 = PStreamSpec::thesis_default(7e9);
    let mut rates = vec![0.0; 4];
    t7.rates_into(&mut rates)?;
    let mut gaps = vec![0.0; 64];
    t7.send_gaps_into(&mut gaps)?;
    // Rate adapter: thesis defaults from 1 Gbit/s; six estimates then a loss.
    let acfg = RateAdapterConfig {
        init_bps: 1e9,
        ..RateAdapterConfig::default()
    };
    let mut a = RateAdapter::new(acfg)?;
    let mut steps = Vec::new();
    for (est, dur) in [
        (2e9, 5e6),
        (2.2e9, 5e6),
        (1.8e9, 5e6),
        (0.5e9, 5e6),
        (0.6e9, 5e6),
        (0.4e9, 5e6),
    ] {
        let up = a.on_estimate(est, dur)?;
        steps.push(json!({"abest_bps": est, "duration_ns": dur, "updated": up.is_some(), "r_avg_bps": a.r_avg_bps()}));
    }
    let after_loss = a.on_loss_recovery();
    let doc = json!({
        "schema": "opsel-golden-bwe", "schema_version": 1,
        "model_file": "bwe_golden.model.json",
        "tolerance": {"relative": 1e-12},
        "reference_gap_ns": REF_GAP_NS,
        "thesis_pstream_7gbps": {"rates_bps": rates, "send_gaps_ns": gaps},
        "streams": streams,
        "single_rate": single,
        "baselines": baselines,
        "adapter": {"init_bps": 1e9, "steps": steps, "after_loss_bps": after_loss},
    });
    let out = root.join("tests/fixtures/bwe_golden.json");
    std::fs::write(&out, serde_json::to_string_pretty(&doc)? + "\n")?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
