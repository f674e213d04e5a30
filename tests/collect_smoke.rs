//! Root-only smoke test of `opsel lab collect`, run by
//! `make test-collect` (~30 s): one active session (S5-C5-S5-B5, one BBR
//! background flow, 1 window of w = 20) into a temporary folder, then checks
//! the CSV rows (aligned pattern phases, sane RTT), the side-car, that a rerun
//! records nothing more (resume), and that the lab's namespaces are gone;
//! then one window of a 200-ms passive trace.

use std::sync::atomic::AtomicBool;

use opsel_netlab::collect::{self, CollectConfig, Condition, Mode, TraceSpec};
use opsel_netlab::topo;

#[test]
#[ignore = "needs root; run by `make test-collect`"]
fn collect_one_active_window_and_resume() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "collect needs root (namespaces, TUN devices): run `sudo make test-collect`"
    );
    let _ = topo::down(false);
    let out = std::env::temp_dir().join(format!("opsel-collect-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let spec = TraceSpec::new(
        Condition::preset("default").unwrap(),
        Mode::parse("S5-C5-S5-B5").unwrap(),
        "B1-C0",
    )
    .unwrap();
    let cfg = CollectConfig {
        w: 20,
        target_windows: 1,
        warmup_s: 3.0,
        ..Default::default()
    };
    let cancel = AtomicBool::new(false);
    let r = collect::collect_session(&spec, &cfg, &out, &cancel, &mut |_, _| {}).unwrap();
    assert_eq!((r.run, r.written, r.windows_after), (Some(0), 20, 1));

    let text = std::fs::read_to_string(spec.csv_path(&out)).unwrap();
    let rows = collect::parse_trace(&text).unwrap();
    assert_eq!(rows.len(), 20);
    let segs: Vec<&str> = rows.iter().map(|r| r.segment.as_str()).collect();
    assert_eq!(&segs[..5], &["silence"; 5]);
    assert_eq!(&segs[5..10], &["cubic"; 5]);
    assert_eq!(&segs[15..20], &["bbr"; 5]);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.k, i as u64);
        assert_eq!((row.cycle, row.phase), (Some(0), Some(i as u64)));
        // Base RTT 65 ms; at most base + buffer/rate = 65 + 32.5 ms (plus slack for a loaded machine).
        assert!(
            row.valid() && row.rtt_ms > 64.0 && row.rtt_ms < 110.0,
            "sample {i}: {row:?}"
        );
    }
    let side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(spec.sidecar_path(&out)).unwrap()).unwrap();
    assert_eq!(side["conditions"]["pattern"], "S5-C5-S5-B5");
    assert_eq!(side["conditions"]["buffer_bytes"], 406_250);
    let run = &side["runs"][0];
    assert_eq!(run["samples_written"], 20);
    // The fastest of the base samples (each the mean of a 10-echo burst before
    // the background starts). The first burst through a fresh user-space
    // delay line can come late on a slow VM (a CI run: 67.4 ms), as in
    // sys_rtt; the path's base RTT is the floor.
    let base = run["base_rtt_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(
        (base - 65.0).abs() < 2.0,
        "base RTT {base}: {}",
        run["base_rtt_ms"]
    );
    assert!(run["background_mbps"]["bg0-bbr"].as_f64().unwrap() > 10.0);
    assert_eq!(run["active_cca_switches"], 2);

    // Resume: the trace is complete, so nothing is recorded.
    let r = collect::collect_session(&spec, &cfg, &out, &cancel, &mut |_, _| {}).unwrap();
    assert_eq!((r.run, r.written), (None, 0));

    // The lab is gone.
    let me = std::process::id() as u64;
    let left: Vec<String> = topo::list_namespaces()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| topo::owner_pid(n) == Some(me))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// `--mode passive-200ms`: a sample every 200 ms (5 s window = 25 samples),
/// the side-car says so, the rows' ticks are 200 ms apart and every RTT is on
/// the path (lone CUBIC at 50 Mbit/s, 20 ms, 1 × BDP: 20–40 ms plus slack).
#[test]
#[ignore = "needs root; run by `make test-collect`"]
fn collect_one_window_every_200ms() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "collect needs root (namespaces, TUN devices): run `sudo make test-collect`"
    );
    let out = std::env::temp_dir().join(format!("opsel-collect-200ms-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let spec = TraceSpec::new(
        Condition::preset("r50-d20-b1").unwrap(),
        Mode::parse("passive-200ms").unwrap(),
        "B0-C1",
    )
    .unwrap();
    let cfg = CollectConfig {
        w: 5,
        target_windows: 1,
        warmup_s: 3.0,
        ..Default::default()
    };
    let cancel = AtomicBool::new(false);
    let r = collect::collect_session(&spec, &cfg, &out, &cancel, &mut |_, _| {}).unwrap();
    assert_eq!((r.run, r.written, r.windows_after), (Some(0), 25, 1));
    let rows =
        collect::parse_trace(&std::fs::read_to_string(spec.csv_path(&out)).unwrap()).unwrap();
    assert_eq!(rows.len(), 25);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.k, i as u64);
        assert!(
            row.valid() && row.rtt_ms > 19.0 && row.rtt_ms < 60.0,
            "sample {i}: {row:?}"
        );
        if i > 0 {
            let dt = row.t_unix_s - rows[i - 1].t_unix_s;
            assert!(
                (dt - 0.2).abs() < 2e-3,
                "sample {i}: {dt} s after the previous"
            );
        }
    }
    let side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(spec.sidecar_path(&out)).unwrap()).unwrap();
    assert_eq!(side["conditions"]["probe"]["sample_interval_ms"], 200.0);
    assert_eq!(side["conditions"]["window"], 25);
    assert!(spec
        .csv_path(&out)
        .to_string_lossy()
        .contains("passive-200ms"));
    std::fs::remove_dir_all(&out).unwrap();
}
