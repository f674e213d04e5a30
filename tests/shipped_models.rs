//! The shipped models load, match the traces they were trained on,
//! and classify every window of those traces as its own class (1-NN: each
//! window is its own nearest reference at distance 0). The windows are cut
//! here in Rust with the collector's rules (per run, `k / w`, all samples
//! valid), so this also checks that the Python trainer cut the same windows.

use std::path::{Path, PathBuf};

use opsel::mix::SIX_CLASSES;
use opsel_netlab::collect::{parse_trace, Row};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Complete, aligned windows of `w` samples (the rule of `collect::count_windows`;
/// for active traces it is the aligned cut whenever `w` is a whole number of cycles).
fn windows(rows: &[Row], w: usize) -> Vec<Vec<f64>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < rows.len() {
        let g = (rows[i].run, rows[i].k / w as u64);
        let mut j = i;
        while j < rows.len() && (rows[j].run, rows[j].k / w as u64) == g {
            j += 1;
        }
        if j - i == w && rows[i..j].iter().all(Row::valid) {
            out.push(rows[i..j].iter().map(|r| r.rtt_ms).collect());
        }
        i = j;
    }
    out
}

/// Every `step`-th sample of a trace, renumbered: the series a prober sampling
/// `step` times less often records on the same traffic (opsel.train.data.at_interval).
fn every(rows: Vec<Row>, step: u64) -> Vec<Row> {
    rows.into_iter()
        .filter(|r| r.k % step == 0)
        .map(|r| Row { k: r.k / step, ..r })
        .collect()
}

/// A condition's `passive-<ms>ms` folders that read at `model_ms` (their step), sorted by name.
fn finer_passive(cond: &Path, model_ms: f64) -> Vec<(PathBuf, u64)> {
    let mut out: Vec<(PathBuf, u64)> = std::fs::read_dir(cond)
        .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| {
            let ms: f64 = p
                .file_name()?
                .to_str()?
                .strip_prefix("passive-")?
                .strip_suffix("ms")?
                .parse()
                .ok()?;
            let step = model_ms / ms;
            (step >= 1.0 && step.fract() == 0.0).then_some((p, step as u64))
        })
        .collect();
    out.sort();
    out
}

fn check(name: &str, mode: &str, window: usize) {
    let dir = repo().join("models").join(name);
    let file = opsel::model::load(dir.join("model.json"))
        .unwrap_or_else(|e| panic!("models/{name}/model.json: {e}"));
    let m = &file.model;
    let w = m.window();
    assert_eq!(w, window, "{name}: window");
    let mut classes = m.classes().to_vec();
    classes.sort();
    let mut six = SIX_CLASSES.map(String::from).to_vec();
    six.sort();
    assert_eq!(classes, six, "{name}: classes");
    assert_eq!(
        file.meta.probing.mode,
        if mode.starts_with("passive") {
            opsel::model::ProbingMode::Passive
        } else {
            opsel::model::ProbingMode::Active
        }
    );
    // Where the model's references came from: one condition's traces, or, for a model pooled
    // over the condition grid, the first `windows_per_class` windows of every condition's traces in
    // the corpus (`data/collect`; the recorder only appends runs, so a grown corpus keeps them first).
    // A passive grid condition's traces are its `passive` folder, then its `passive-<ms>ms` folders
    // read at the model's period (opsel.train.grid.load_grid), each a (folder, step) source.
    let model_ms = file.meta.probing.sample_interval_ms;
    let sources: Vec<(Vec<(PathBuf, u64)>, Option<&serde_json::Value>)> = match file.meta.training
        ["condition"]
        .as_str()
        .unwrap_or("default")
    {
        "grid" => file.meta.training["conditions"]
            .as_array()
            .expect("a grid model lists its conditions")
            .iter()
            .map(|c| {
                let cond = repo()
                    .join("data/collect")
                    .join(c["condition"].as_str().expect("condition name"));
                let mut folders = vec![(cond.join(mode), 1)];
                if mode == "passive" {
                    folders.extend(finer_passive(&cond, model_ms));
                }
                folders.retain(|(f, _)| f.is_dir());
                (folders, Some(&c["windows_per_class"]))
            })
            .collect(),
        // A model that shares another model's recordings names them in its training
        // metadata (`"traces": "models/<other>/traces/<condition>"`).
        condition => vec![(
            vec![(
                match file.meta.training["traces"].as_str() {
                    Some(rel) => repo().join(rel),
                    None => dir.join("traces").join(condition),
                },
                1,
            )],
            None,
        )],
    };
    let mut ws = m.workspace();
    let mut total = 0;
    let mut own = 0;
    for class in SIX_CLASSES {
        let ci = m.classes().iter().position(|c| c == class).unwrap();
        let mut class_windows = 0;
        for (folders, counts) in &sources {
            let mut wins = Vec::new();
            for (tdir, step) in folders {
                let p = tdir.join(format!("{class}.csv"));
                // A grid folder may lack a class (a partial recording): the
                // trainer skips the file, so does this.
                if counts.is_some() && !p.exists() {
                    continue;
                }
                let text =
                    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                wins.extend(windows(&every(parse_trace(&text).unwrap(), *step), w));
            }
            let p = folders
                .first()
                .map(|(f, _)| f.display().to_string())
                .unwrap_or_default();
            if let Some(counts) = counts {
                let n = counts[class].as_u64().expect("windows per class") as usize;
                assert!(
                    wins.len() >= n,
                    "{p}/{class}: {} windows, the model used {n}",
                    wins.len()
                );
                wins.truncate(n);
            }
            assert!(!wins.is_empty(), "{name}/{class}: no windows in {p}");
            for (i, win) in wins.iter().enumerate() {
                let pred = m.classify(win, &mut ws).unwrap();
                // Every window is a reference: its nearest neighbour is itself, at distance 0.
                assert_eq!(pred.distance, 0.0, "{name}/{class} window {i} of {p}");
                assert_eq!(
                    m.labels()[pred.neighbor] as usize,
                    ci,
                    "{name}/{class} window {i}: nearest reference {} is of another class",
                    pred.neighbor
                );
                if m.config().k == 1 {
                    // 1-NN: so it is classified as its own class.
                    assert_eq!(
                        m.classes()[pred.class],
                        class,
                        "{name}/{class} window {i} classified as {} at distance {}",
                        m.classes()[pred.class],
                        pred.distance
                    );
                }
                own += (pred.class == ci) as usize;
            }
            class_windows += wins.len();
        }
        assert_eq!(
            m.labels().iter().filter(|&&l| l as usize == ci).count(),
            class_windows,
            "{name}/{class}: the model's reference count differs from the traces' windows"
        );
        total += class_windows;
    }
    assert_eq!(total, m.len(), "{name}: references");
    // k > 1: the vote may overrule the window itself, but on its own training windows the
    // model must do at least as well as its cross-validated accuracy (recorded at training
    // time), since each window votes for itself.
    let cv = file.meta.training["cv_accuracy_w"].as_f64().unwrap_or(0.0);
    let resub = own as f64 / total as f64;
    assert!(
        resub >= cv,
        "{name}: {own} of {total} training windows classified as their own class ({resub:.3}), below the CV accuracy {cv:.3}"
    );
}

#[test]
fn passive_model_classifies_its_own_traces() {
    // The default passive model: pooled over the condition grid, w = 40.
    check("passive", "passive", 40);
}

#[test]
fn five_samples_a_second_model_classifies_its_own_traces() {
    // Pooled over every condition recorded every 200 ms, 10-s windows.
    check("passive-200ms", "passive-200ms", 50);
}

#[test]
fn five_samples_a_second_two_stage_model_classifies_its_own_traces() {
    // The same references with a z-score stage 2 inside each side.
    check("passive-200ms-two-stage", "passive-200ms", 50);
}

#[test]
fn single_condition_passive_model_classifies_its_own_traces() {
    check("passive-netlab", "passive", 20);
}

#[test]
fn active_model_classifies_its_own_traces() {
    check("active-s5c5s5b5", "active", 20);
}

/// w = 60 with the 20 s pattern: windows of 3 cycles (k / 60 is also the aligned
/// cut, since 60 is a whole number of cycles); the trailing cycle of a 10-cycle run is unused.
#[test]
fn active_three_cycle_model_classifies_its_own_traces() {
    check("active-s5c5s5b5-w60", "active", 60);
}
