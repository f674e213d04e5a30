//! Writes `tests/fixtures/ops_golden.json`: synthetic 1 Hz RTT traces, OPS
//! controller configurations, and the outputs the core `opsel::ops::Controller`
//! produces for them. The Rust, C, Python and Node tests drive their binding's
//! controller with the same trace and must produce exactly these outputs
//! (issue 4/7: "a controller run over a synthetic RTT trace producing the same
//! actions as the Rust controller").
//!
//! Run from the repository root: `cargo run -p opsel-ffi --example make_ops_golden`
//! (or `make golden-ops`). Schema: tests/fixtures/README.md.
//!
//! Driving loop (every binding's test repeats it): `start(0)`, then for sample
//! k = 1..=n at t = k·1 s: `handle_timeout(t)`, `handle_sample(t, rtt[k-1])`,
//! then `poll()` until empty; every output is rendered with [`render`].

use opsel::mix::Mix;
use opsel::model::KnnModelFile;
use opsel::ops::{Action, ControllerSpec, Event, NoCallback, Output, Phase};
use opsel::series::synth;
use serde_json::json;
use std::path::PathBuf;

const S: u64 = 1_000_000_000;

/// One canonical line per output; the binding tests build the same text from
/// their own output objects (kept free of floats so no language's float
/// formatting matters; confidences are compared separately when needed).
pub fn render(o: &Output, classes: &[String]) -> String {
    let until = |u: Option<u64>| u.map_or("none".to_string(), |v| v.to_string());
    match o {
        Output::Action(Action::SetCca(c)) => format!("set_cca {}", c.as_str()),
        Output::Action(Action::SendFullSpeed { cca, until_ns }) => {
            format!("send_full_speed {} until={until_ns}", cca.as_str())
        }
        Output::Action(Action::Silence { until_ns }) => format!("silence until={until_ns}"),
        Output::Action(Action::Steady { cca, until_ns }) => {
            format!("steady {} until={}", cca.as_str(), until(*until_ns))
        }
        Output::Event(Event::Phase {
            phase,
            cycle,
            at_ns,
        }) => {
            let p = match phase {
                Phase::Idle => "idle",
                Phase::Probe => "probe",
                Phase::Classify => "classify",
                Phase::Select => "select",
                Phase::Steady => "steady",
            };
            format!("phase {p} cycle={cycle} at={at_ns}")
        }
        Output::Event(Event::Classified {
            classified,
            samples,
            early,
            at_ns,
        }) => format!(
            "classified {} samples={samples} early={early} at={at_ns}",
            classes[classified.class_index]
        ),
        Output::Event(Event::Selected {
            cca,
            steady_ns,
            at_ns,
        }) => format!(
            "selected {} steady={} at={at_ns}",
            cca.as_str(),
            until(*steady_ns)
        ),
        Output::Event(Event::DecisionFailed { at_ns, .. }) => format!("decision_failed at={at_ns}"),
        Output::Event(Event::ProbeIncomplete {
            samples,
            needed,
            at_ns,
        }) => format!("probe_incomplete samples={samples} needed={needed} at={at_ns}"),
        Output::Event(Event::CycleClassified {
            index,
            class_index,
            leader,
            at_ns,
            ..
        }) => format!(
            "cycle_classified {index} {} leader={} at={at_ns}",
            classes[*class_index], classes[*leader]
        ),
    }
}

fn trace() -> Vec<f64> {
    // 000 Table 6.1 mixes in turn: a BBR background, then CUBIC only, then two BBR.
    let mut t = Vec::new();
    for (i, label) in ["B1-C0", "C1-C1", "B1-B1"].iter().enumerate() {
        t.extend(synth::rtt_series(
            &Mix::parse(label).unwrap(),
            60,
            4000 + i as u64,
        ));
    }
    // Round to 1e-6 ms so the JSON text is exact in every language.
    t.iter().map(|v| (v * 1e6).round() / 1e6).collect()
}

#[allow(dead_code)] // also compiled into ffi/tests/ops_golden.rs, which has its own main
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out_dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("tests/fixtures"));
    let doc = build(&out_dir)?;
    let path = out_dir.join("ops_golden.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)? + "\n")?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// The whole fixture document, from the model in `dir` and the core controller.
pub fn build(dir: &std::path::Path) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let file = KnnModelFile::load(dir.join("knn_golden.model.json"))?;
    let classes: Vec<String> = file.model.classes().to_vec();
    let rtt = trace();

    let table = "B1-C0=bbr, B1-C1=bbr, B1-B1=bbr, *=cubic";
    let scenarios = vec![
        json!({
            "name": "passive-stump",
            "config": {"mode": "passive", "steady_s": 30, "policy": "stump"},
        }),
        json!({
            "name": "active-table-adaptive",
            // The golden model is a passive one; this scenario exercises
            // the active state machine on it, so the model check is off.
            "config": {"mode": "active", "pattern": "S5-C5-S5-B5", "steady_s": 20,
                       "adaptive": true, "policy": table, "check_model": false},
        }),
        json!({
            "name": "passive-progressive-y0",
            "config": {"mode": "passive", "steady_s": 0, "progressive": true,
                       "prefix_lens": [5, 10, 15], "policy": "stump"},
        }),
    ];
    let mut out = Vec::new();
    for sc in scenarios {
        // A scenario's config is an `opsel::ops::ControllerSpec`, built here
        // exactly as every binding builds it.
        let spec = ControllerSpec::from_value(sc["config"].clone())?;
        let mut ops = spec.build::<NoCallback>(&file, None)?;
        ops.start(0)?;
        let mut lines = Vec::new();
        while let Some(o) = ops.poll() {
            lines.push(render(&o, &classes));
        }
        for (k, &r) in rtt.iter().enumerate() {
            let t = (k as u64 + 1) * S;
            ops.handle_timeout(t)?;
            ops.handle_sample(t, r)?;
            while let Some(o) = ops.poll() {
                lines.push(render(&o, &classes));
            }
        }
        let st = ops.stats();
        let mut sc = sc;
        sc["expected"] = json!(lines);
        sc["stats"] = json!({"decisions": st.decisions, "cca_switches": st.cca_switches,
                             "early_exits": st.early_exits});
        out.push(sc);
    }
    let doc = json!({
        "schema": "opsel-golden-ops",
        "schema_version": 1,
        "generator": "cargo run -p opsel-ffi --example make_ops_golden",
        "model_file": "knn_golden.model.json",
        "sample_period_ns": S,
        "trace_rtt_ms": rtt,
        "trace_source": "opsel::series::synth::rtt_series B1-C0 (seed 4000), C1-C1 (4001), B1-B1 (4002), 60 s each (synthetic, NOT measured)",
        "scenarios": out,
    });
    Ok(doc)
}
