//! Trace format, resume rules, specs and plans. The trace format and the
//! resume rules are what long recordings depend on across versions: these
//! tests pin them.

use std::io::Write;

use super::session::sidecar_conditions;
use super::trace::open_append;
use super::*;

fn row(run: u32, k: u64, rtt: f64) -> Row {
    Row {
        run,
        k,
        t_unix_s: 1.7e9 + k as f64,
        rtt_ms: rtt,
        min_ms: rtt - 0.5,
        max_ms: rtt + 0.5,
        answered: if rtt.is_finite() { 10 } else { 0 },
        cycle: Some(k / 20),
        phase: Some(k % 20),
        segment: "silence".into(),
    }
}

fn csv(rows: &[Row]) -> String {
    let mut s = format!("{CSV_HEADER}\n");
    for r in rows {
        s.push_str(&r.to_csv());
        s.push('\n');
    }
    s
}

#[test]
fn csv_roundtrip_and_nan_for_lost_samples() {
    let rows = vec![row(0, 0, 65.25), row(0, 1, f64::NAN), row(1, 0, 80.125)];
    let text = csv(&rows);
    assert!(text.lines().nth(2).unwrap().contains(",,,,0,"));
    let back = parse_trace(&text).unwrap();
    assert_eq!(back.len(), 3);
    assert_eq!(back[0].rtt_ms, 65.25);
    assert!(back[1].rtt_ms.is_nan() && !back[1].valid());
    assert_eq!(back[2].run, 1);
    assert_eq!(back[2].cycle, Some(0));
}

#[test]
fn torn_last_line_is_ignored_and_bad_lines_are_named() {
    let mut text = csv(&[row(0, 0, 65.0), row(0, 1, 66.0)]);
    text.push_str("0,2,1700000002.000,67.0"); // crash mid-write
    assert_eq!(parse_trace(&text).unwrap().len(), 2);
    let bad = format!("{CSV_HEADER}\n0,x,1,2,3,4,10,,,-\n");
    let e = parse_trace(&bad).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("bad k"), "{e}");
    let e = parse_trace("a,b\n").unwrap_err().to_string();
    assert!(e.contains("header"), "{e}");
    assert!(parse_trace("").unwrap().is_empty());
}

#[test]
fn windows_are_counted_per_run_aligned_and_complete() {
    let mut rows: Vec<Row> = (0..45).map(|k| row(0, k, 70.0)).collect();
    // run 0: 2 full windows (0..20, 20..40), 5 left over.
    assert_eq!(count_windows(&rows, 20), 2);
    // run 1: 20 samples but one lost → 0 windows; then a full one.
    rows.extend((0..40).map(|k| row(1, k, if k == 3 { f64::NAN } else { 70.0 })));
    assert_eq!(count_windows(&rows, 20), 3);
    assert_eq!(count_windows(&rows, 5), 9 + 7);
    assert_eq!(count_windows(&rows, 0), 0);
    // Leftovers of run 0 never combine with run 1.
    let rows: Vec<Row> = (10..30)
        .map(|k| row(0, k, 70.0))
        .chain((0..10).map(|k| row(1, k, 70.0)))
        .collect();
    assert_eq!(count_windows(&rows, 20), 0);
}

#[test]
fn resume_plans_only_missing_windows() {
    assert_eq!(plan_samples(0, 300, usize::MAX, 20), 6000);
    assert_eq!(plan_samples(290, 300, usize::MAX, 20), 200);
    assert_eq!(plan_samples(290, 300, 5, 20), 100);
    assert_eq!(plan_samples(300, 300, 5, 20), 0);
    assert_eq!(plan_samples(400, 300, 5, 20), 0);
}

#[test]
fn trace_state_and_append_after_a_crash() {
    let dir = std::env::temp_dir().join(format!("opsel-collect-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let spec = TraceSpec::new(Condition::preset("c50").unwrap(), Mode::Passive, "b1-c1").unwrap();
    let p = spec.csv_path(&dir);
    assert!(p.ends_with("c50/passive/B1-C1.csv"), "{}", p.display());
    assert_eq!(trace_state(&p, 20).unwrap(), TraceState::default());
    {
        let mut f = open_append(&p).unwrap();
        for k in 0..25 {
            writeln!(f, "{}", row(0, k, 60.0).to_csv()).unwrap();
        }
        write!(f, "0,25,17000").unwrap(); // torn line
    }
    let st = trace_state(&p, 20).unwrap();
    assert_eq!((st.rows, st.windows, st.next_run), (25, 1, 1));
    {
        let mut f = open_append(&p).unwrap();
        for k in 0..20 {
            writeln!(f, "{}", row(1, k, 61.0).to_csv()).unwrap();
        }
    }
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(text.matches(CSV_HEADER).count(), 1);
    let st = trace_state(&p, 20).unwrap();
    assert_eq!((st.rows, st.windows, st.next_run), (45, 2, 2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn specs_modes_and_conditions() {
    let d = Condition::preset("default").unwrap();
    assert_eq!(d.buffer_bytes(), 406_250);
    assert_eq!(Condition::preset("c50").unwrap().buffer_bytes(), 250_000);
    assert!(Condition::preset("nope")
        .unwrap_err()
        .to_string()
        .contains("nope"));
    let m = Mode::parse("s5-c5-s5-b5").unwrap();
    assert_eq!(m.dir_name(), "active-s5c5s5b5");
    assert_eq!(m.pattern_text(), Some("S5-C5-S5-B5"));
    assert_eq!(
        Mode::parse("active:C5-B5-C5-S5").unwrap().dir_name(),
        "active-c5b5c5s5"
    );
    assert!(Mode::parse("sometimes").is_err());
    let f = Mode::parse("passive-200ms").unwrap();
    assert_eq!(f, Mode::PassiveEvery { period_ms: 200 });
    assert_eq!(f.dir_name(), "passive-200ms");
    assert_eq!(f.sample_ns(), 200_000_000);
    assert!(!f.is_active() && f.pattern_text().is_none());
    assert_eq!(Mode::Passive.sample_ns(), 1_000_000_000);
    // --w counts seconds: 40 s are 200 samples at 200 ms, 40 at 1 Hz.
    assert_eq!(f.window_samples(40), 200);
    assert_eq!(Mode::Passive.window_samples(40), 40);
    for bad in [
        "passive-300ms",
        "passive-0ms",
        "passive-1000ms",
        "passive-5ms",
        "passive-xms",
    ] {
        let e = Mode::parse(bad).unwrap_err().to_string();
        assert!(e.contains("divisor of 1000"), "{bad}: {e}");
    }
    let s = TraceSpec::new(d.clone(), Mode::Passive, "B1-B1").unwrap();
    assert_eq!(s.background(), vec!["bbr", "bbr"]);
    let s = TraceSpec::new(d.clone(), Mode::Passive, "B1-C1").unwrap();
    assert_eq!(s.background(), vec!["bbr", "cubic"]);
    let s = TraceSpec::new(d.clone(), Mode::Passive, "B0-C0").unwrap();
    assert!(s.background().is_empty());
    assert!(TraceSpec::new(d.clone(), Mode::Passive, "B2-C0").is_err());
    let mut bad = d;
    bad.name = "../x".into();
    assert!(TraceSpec::new(bad, Mode::Passive, "B0-C0").is_err());
    let cfg = CollectConfig {
        w: 30,
        ..Default::default()
    };
    assert!(cfg
        .validate(&m)
        .unwrap_err()
        .to_string()
        .contains("multiple"));
    let cfg = CollectConfig {
        w: 40,
        ..Default::default()
    };
    assert!(cfg.validate(&m).is_ok());
    assert!(cfg.validate(&Mode::Passive).is_ok());
}

#[test]
fn plans_parse_and_weighted_pick() {
    let classes: Vec<String> = ["B0-C0", "B1-C1"].iter().map(|s| s.to_string()).collect();
    let p = parse_plan(
        "default/passive@1, default/S5-C5-S5-B5, c50/passive@0.5",
        &classes,
    )
    .unwrap();
    assert_eq!(p.len(), 6);
    assert_eq!(p[2].spec.key(), "default/active-s5c5s5b5/B0-C0");
    assert_eq!(p[4].weight, 0.5);
    assert!(parse_plan("default", &classes).is_err());
    // `grid` expands to every grid condition; names carry the parameters.
    let d = parse_plan("dense/passive-200ms", &classes).unwrap();
    assert_eq!(d.len(), DENSE.len() * classes.len());
    // r12-d140-b0.95 peaks at 273 ms of RTT: recorded at 1 Hz; r55-d27-b0.38 at 200 ms.
    let mode_of = |name: &str| {
        d.iter()
            .find(|i| i.spec.condition.name == name)
            .map(|i| i.spec.mode.clone())
            .unwrap()
    };
    assert_eq!(mode_of("r12-d140-b0.95"), Mode::Passive);
    assert_eq!(
        mode_of("r55-d27-b0.38"),
        Mode::PassiveEvery { period_ms: 200 }
    );
    let e = parse_plan("r20-d200-b0.5/passive-200ms", &classes)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not fit") && e.contains("--mode passive"),
        "{e}"
    );
    assert!(parse_plan("r100-d120-b0.25/passive-200ms", &classes).is_ok());
    for name in DENSE {
        assert!(!GRID.contains(&name), "{name} is a grid condition");
        assert!(parse_grid_name(name).is_some(), "{name}");
    }
    let g = parse_plan("grid/passive", &classes).unwrap();
    assert_eq!(g.len(), GRID.len() * classes.len());
    let c = Condition::preset("r300-d20-b2").unwrap();
    assert_eq!((c.rate_mbps, c.rtt_ms, c.buffer_bdp), (300.0, 20.0, 2.0));
    assert_eq!(c.buffer_bytes(), 1_500_000);
    for bad in [
        "r100-d65",
        "r100-d65-b0.5-x",
        "rx-d65-b1",
        "r-5-d65-b1",
        "r100-d0-b1",
    ] {
        assert!(Condition::preset(bad).is_err(), "{bad}");
    }
    let mut seen = std::collections::HashSet::new();
    for g in GRID {
        let c = Condition::preset(g).unwrap();
        c.validate().unwrap();
        assert!(seen.insert((
            c.rate_mbps as u64,
            c.rtt_ms as u64,
            (c.buffer_bdp * 100.0) as u64
        )));
    }
    assert!(parse_plan("default/passive@-1", &classes).is_err());
    assert!(parse_plan("", &classes).is_err());
    let idle = vec![false; 6];
    // Fewest windows after one more chunk, per weight; c50 (weight 0.5) counts double.
    assert_eq!(pick_next(&p, &[0; 6], &idle, 300, 10), Some(0));
    // c50 at 0 windows scores (0+10)/0.5 = 20, behind weight-1 traces at 5 (15).
    assert_eq!(pick_next(&p, &[5, 5, 5, 5, 0, 0], &idle, 300, 10), Some(0));
    // A tie (20 = 20) goes to plan order.
    assert_eq!(
        pick_next(&p, &[10, 10, 10, 10, 0, 0], &idle, 300, 10),
        Some(0)
    );
    assert_eq!(
        pick_next(&p, &[11, 11, 11, 11, 0, 0], &idle, 300, 10),
        Some(4)
    );
    assert_eq!(
        pick_next(&p, &[11, 11, 11, 11, 1, 0], &idle, 300, 10),
        Some(5)
    );
    let mut busy = idle.clone();
    busy[0] = true;
    assert_eq!(
        pick_next(&p, &[1, 2, 10, 10, 10, 10], &busy, 300, 10),
        Some(1)
    );
    assert_eq!(pick_next(&p, &[300; 6], &idle, 300, 10), None);
    assert_eq!(
        pick_next(&p, &[300, 300, 300, 300, 300, 299], &idle, 300, 10),
        Some(5)
    );
}

#[test]
fn resumed_trace_must_match_conditions() {
    let d = Condition::preset("default").unwrap();
    let cfg = CollectConfig::default();
    let a = sidecar_conditions(
        &TraceSpec::new(d.clone(), Mode::Passive, "B0-C1").unwrap(),
        &cfg,
    );
    let existing = serde_json::json!({ "conditions": a.clone() });
    assert!(check_sidecar_matches(&existing, &a).is_ok());
    let mut other = d;
    other.buffer_bdp = 1.5;
    let b = sidecar_conditions(
        &TraceSpec::new(other, Mode::Passive, "B0-C1").unwrap(),
        &cfg,
    );
    let e = check_sidecar_matches(&existing, &b)
        .unwrap_err()
        .to_string();
    assert!(e.contains("buffer_bdp"), "{e}");
}
