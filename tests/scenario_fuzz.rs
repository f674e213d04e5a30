//! Stable-Rust fuzz harness for netlab scenario files (TOML): seeded mutations
//! of the shipped scenarios fed to `Scenario::from_toml` (parse + validation);
//! an accepted scenario must yield its pipe, topology and flow plans without
//! a panic. Nothing may panic on any input.
//!
//! Bounded in `cargo test`. On demand: `OPSEL_FUZZ_SECS=600 OPSEL_FUZZ_SEED=7
//! cargo test -p opsel-netlab --release --test scenario_fuzz -- --nocapture`.
//! Crashing inputs go to `fuzz/scenario/regressions/` and are replayed first.

#[path = "../fuzz/common.rs"]
mod fuzzing;

use opsel_netlab::scenario::Scenario;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

#[test]
fn scenario_files_survive_mutation() {
    let mut seeds = Vec::new();
    let dir = format!("{ROOT}/netlab/scenarios");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for p in paths {
        seeds.push(std::fs::read(p).unwrap());
    }
    assert!(seeds.len() >= 3, "shipped scenarios in {dir}");
    fuzzing::fuzz(ROOT, "scenario", seeds, false, 5_000, |b| {
        let Ok(text) = std::str::from_utf8(b) else {
            return;
        };
        if let Ok(s) = Scenario::from_toml(text) {
            let _ = s.measure_window();
            let pairs = s.topology_spec().pairs;
            let _ = s.pipe_spec();
            // Flow plans index the namespaces of the topology's pairs.
            if pairs <= 64 {
                let ns: Vec<String> = (0..pairs).map(|i| format!("s{i}")).collect();
                let rs: Vec<String> = (0..pairs).map(|i| format!("r{i}")).collect();
                let _ = s.flow_plans(&ns, &rs);
            }
            let _ = toml::to_string(&s);
        }
    });
}
