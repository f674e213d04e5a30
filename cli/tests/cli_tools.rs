//! `opsel classify`, `probe`, `completions` and `man` as a user runs them:
//! real model files, real errors, a live probe on loopback.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn opsel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_opsel"))
}

fn run(args: &[&str], stdin: Option<&str>, env: &[(&str, &Path)]) -> Output {
    let mut c = opsel();
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let mut i = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        i.write_all(s.as_bytes()).unwrap();
    }
    drop(i);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("opsel-cli-tools-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Reference window `i` of the shipped passive model and its class name.
fn reference(i: usize) -> (Vec<f64>, String) {
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("models/passive/model.json")).unwrap(),
    )
    .unwrap();
    let win: Vec<f64> = v["references"]["windows"][i]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let label = v["references"]["labels"][i].as_u64().unwrap() as usize;
    (win, v["classes"][label].as_str().unwrap().to_string())
}

#[test]
fn a_reference_window_classifies_as_its_class_and_the_stump_picks_the_cca() {
    for i in [0usize, 7, 123] {
        let (win, class) = reference(i);
        let csv = win
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",");
        // As a CSV line on stdin, and as a JSON series.
        let o = run(&["classify", "--file", "-", "--json"], Some(&csv), &[]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["label"], class.as_str(), "{out}");
        // Its own reference is at distance 0 (1-NN).
        assert_eq!(v["distance"].as_f64(), Some(0.0), "{out}");
        let bbr = class.starts_with("B") && !class.starts_with("B0");
        assert_eq!(v["bbr_present"], bbr, "{out}");
        assert_eq!(v["cca"], if bbr { "bbr" } else { "cubic" }, "{out}");
        let js = serde_json::json!({ "rtt_ms": win }).to_string();
        let o = run(&["classify", "--file", "-"], Some(&js), &[]);
        let (out, _) = text(&o);
        assert!(out.starts_with(&format!("{class}\tconfidence ")), "{out}");
        assert!(out.contains(&format!("OPS picks {}", if bbr { "bbr" } else { "cubic" })));
    }
}

#[test]
fn bad_windows_get_clear_errors() {
    let (win, _) = reference(0);
    let short = win[..10]
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut nan = win.iter().map(|v| v.to_string()).collect::<Vec<_>>();
    nan[4] = "NaN".into();
    let cases: Vec<(Vec<&str>, String, &str)> = vec![
        (
            vec!["classify", "--file", "-"],
            String::new(),
            "stdin is empty",
        ),
        (
            vec!["classify", "--file", "-"],
            short.clone(),
            "window 1 has 10 samples; the model takes w = 40",
        ),
        (
            vec!["classify", "--file", "-"],
            nan.join(","),
            "line 1 value 5 is NaN",
        ),
        (
            vec!["classify", "--file", "-"],
            "[[]]".into(),
            "window 1 is empty",
        ),
        (
            vec!["classify", "--window", "1,2,3"],
            String::new(),
            "window 1 has 3 samples",
        ),
        (vec!["classify"], String::new(), "give --window"),
    ];
    for (args, input, want) in cases {
        let o = run(&args, Some(&input), &[]);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err}");
    }
}

#[test]
fn models_are_found_by_name_in_opsel_models_and_missing_ones_say_where_they_looked() {
    let d = tmp("models");
    std::fs::create_dir_all(d.join("mine")).unwrap();
    std::fs::copy(
        repo().join("models/passive/model.json"),
        d.join("mine/model.json"),
    )
    .unwrap();
    let (win, class) = reference(3);
    let csv = win
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let o = run(
        &["classify", "--model", "mine", "--file", "-", "--json"],
        Some(&csv),
        &[("OPSEL_MODELS", &d)],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["label"], class.as_str());
    assert!(
        v["model"].as_str().unwrap().ends_with("mine/model.json"),
        "{out}"
    );
    let o = run(
        &["classify", "--model", "nope", "--window", "1"],
        None,
        &[("OPSEL_MODELS", &d)],
    );
    let (_, err) = text(&o);
    assert!(!o.status.success());
    for want in [
        "model \"nope\" not found",
        "$OPSEL_MODELS",
        "share/opsel/models/nope/model.json",
        "built into opsel",
    ] {
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    assert!(
        err.contains(&d.join("nope/model.json").display().to_string()),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_binary_alone_uses_its_built_in_model() {
    // The binary copied out of the checkout and run elsewhere: no model
    // files around it, and the built-in passive model answers.
    let d = tmp("alone");
    let exe = d.join("bin/opsel");
    std::fs::create_dir_all(d.join("bin")).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_opsel"), &exe).unwrap();
    let (win, class) = reference(5);
    let csv = win
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let o = Command::new(&exe)
        .current_dir(&d)
        .env_remove("OPSEL_MODELS")
        .args(["classify", "--window", &csv, "--json"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["label"], class.as_str());
    assert_eq!(v["model"], "passive (built into opsel)");
    // Installed beside it (make install's share/opsel/models) wins over the built-in copy.
    std::fs::create_dir_all(d.join("share/opsel/models/passive")).unwrap();
    std::fs::copy(
        repo().join("models/passive/model.json"),
        d.join("share/opsel/models/passive/model.json"),
    )
    .unwrap();
    let o = Command::new(&exe)
        .current_dir(&d)
        .env_remove("OPSEL_MODELS")
        .args(["classify", "--window", &csv, "--json"])
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("share/opsel/models/passive/model.json"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn completions_are_generated_and_parse() {
    let o = run(&["completions", "bash"], None, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("_opsel()") && out.contains("complete -F _opsel"),
        "{out}"
    );
    for sub in ["classify", "probe", "demo", "completions", "man"] {
        assert!(out.contains(sub), "bash completion lacks {sub}");
    }
    assert!(
        out.contains("--report"),
        "demo --report missing from completions"
    );
    let d = tmp("compl");
    std::fs::write(d.join("opsel.bash"), &out).unwrap();
    let st = Command::new("bash")
        .arg("-n")
        .arg(d.join("opsel.bash"))
        .status()
        .unwrap();
    assert!(st.success(), "bash -n rejects the completion script");
    // Completing in bash: `opsel cla<TAB>` and `opsel demo --rep<TAB>`.
    let script = format!(
        "source {}; COMP_WORDS=(opsel cla); COMP_CWORD=1; _opsel opsel cla opsel; echo \"${{COMPREPLY[*]}}\"; \
         COMP_WORDS=(opsel demo --rep); COMP_CWORD=2; _opsel opsel --rep demo; echo \"${{COMPREPLY[*]}}\"",
        d.join("opsel.bash").display()
    );
    let o = Command::new("bash").arg("-c").arg(script).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "classify\n--report --replay\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let zsh = text(&run(&["completions", "zsh"], None, &[])).0;
    assert!(
        zsh.starts_with("#compdef opsel"),
        "{}",
        &zsh[..zsh.len().min(200)]
    );
    let fish = text(&run(&["completions", "fish"], None, &[])).0;
    assert!(fish.contains("complete -c opsel"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn man_pages_are_written_and_render() {
    let d = tmp("man");
    let o = run(&["man", "--dir", d.to_str().unwrap()], None, &[]);
    assert!(o.status.success(), "{}", text(&o).1);
    for p in [
        "opsel.1",
        "opsel-classify.1",
        "opsel-probe.1",
        "opsel-demo.1",
    ] {
        assert!(d.join(p).is_file(), "{p} not written");
    }
    let top = text(&run(&["man"], None, &[])).0;
    assert!(
        top.starts_with(".ie") || top.contains(".TH opsel 1"),
        "{top}"
    );
    let Ok(g) = Command::new("groff")
        // -P-cbu: plain text, no overstrike bold or underline to search through.
        .args(["-man", "-Tutf8", "-ww", "-P-cbu"])
        .arg(d.join("opsel-classify.1"))
        .output()
    else {
        eprintln!("SKIP rendering: groff not installed (apt-get install groff-base)");
        return;
    };
    let (out, err) = text(&g);
    assert!(g.status.success(), "{err}");
    assert!(err.trim().is_empty(), "groff warnings: {err}");
    assert!(out.contains("--model") && out.contains("--host"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn probe_on_loopback_feeds_classify() {
    let o = run(
        &["probe", "127.0.0.1", "--samples", "3", "--period-s", "0.1"],
        None,
        &[],
    );
    let (out, err) = text(&o);
    if !o.status.success() && (err.contains("ermission") || err.contains("not permitted")) {
        eprintln!("SKIP probe: no ICMP socket for this user ({err})");
        return;
    }
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "t_s,rtt_ms,answered,sent");
    assert_eq!(lines.len(), 4, "{out}");
    for l in &lines[1..] {
        let f: Vec<&str> = l.split(',').collect();
        let rtt: f64 = f[1].parse().unwrap();
        assert!(rtt > 0.0 && rtt < 20.0, "loopback RTT {rtt} ms");
        assert_eq!(f[2], "10", "{l}");
    }
    // 40 samples (the passive model's w) 50 ms apart, as JSON, into classify.
    let o = run(
        &[
            "probe",
            "127.0.0.1",
            "--samples",
            "40",
            "--period-s",
            "0.05",
            "--json",
        ],
        None,
        &[],
    );
    let (js, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let o = run(&["classify", "--file", "-", "--json"], Some(&js), &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["label"].as_str().is_some() && v["cca"].as_str().is_some());
}

#[test]
fn probe_throughput_stops_where_fastprob_decides() {
    // A sink on loopback, then the FastProb probe with the shared fixture
    // model (1 s interval, cap 15): it must end with a stop or at the cap,
    // with a positive prediction and a probe time of samples x interval.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut sink = opsel()
        .args(["probe", "--sink", &addr, "--timeout", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let model = repo().join("tests/fixtures/fastprob/model_small.json");
    let o = run(
        &[
            "probe",
            "--throughput",
            &addr,
            "--model",
            model.to_str().unwrap(),
            "--json",
        ],
        None,
        &[],
    );
    let _ = sink.kill();
    let _ = sink.wait();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        ["stop", "forced_stop"].contains(&v["decision"].as_str().unwrap()),
        "{v}"
    );
    let n = v["samples"].as_u64().unwrap();
    assert!((1..=15).contains(&n), "{v}");
    assert_eq!(v["probe_ns"].as_u64().unwrap(), n * 1_000_000_000);
    assert!(v["throughput_bps"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(
        v["forced"].as_bool().unwrap(),
        v["decision"] == "forced_stop"
    );
    // A model that is not there is named in the error.
    let o = run(
        &[
            "probe",
            "--throughput",
            &addr,
            "--model",
            "/nonexistent/fastprob.json",
        ],
        None,
        &[],
    );
    let (_, err) = text(&o);
    assert!(
        !o.status.success() && err.contains("/nonexistent/fastprob.json"),
        "{err}"
    );
}

#[test]
fn classify_host_probes_live_at_the_models_rate() {
    // A tiny passive model (w = 4, samples 50 ms apart) so the live probe
    // takes 0.2 s: loopback RTTs (~0.05 ms) are nearest the 0.05 ms
    // reference of B0-C0, far from the 80 ms one of B1-C0.
    let d = tmp("live");
    let model = serde_json::json!({
        "format": "opsel-model", "version": 1, "kind": "knn-dtw", "window": 4, "k": 1,
        "dtw": {"radius": null, "cost": "abs"}, "normalization": "none",
        "probing": {"mode": "passive", "echoes_per_sample": 3, "echo_interval_ms": 1.0,
                    "sample_interval_ms": 50.0},
        "classes": ["B0-C0", "B1-C0"],
        "references": {"labels": [0, 1],
                       "windows": [[0.05, 0.05, 0.05, 0.05], [80.0, 80.0, 80.0, 80.0]]}
    });
    let mp = d.join("tiny.json");
    std::fs::write(&mp, model.to_string()).unwrap();
    let o = run(
        &[
            "classify",
            "--model",
            mp.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--json",
        ],
        None,
        &[],
    );
    let (out, err) = text(&o);
    if !o.status.success() && (err.contains("ermission") || err.contains("not permitted")) {
        eprintln!("SKIP classify --host: no ICMP socket for this user ({err})");
        return;
    }
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("4 samples, one every 0.05 s (3 echoes each)"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["label"], "B0-C0", "{out}");
    assert_eq!(v["cca"], "cubic", "{out}");
    // Active models cannot be probed passively.
    let o = run(
        &[
            "classify",
            "--model",
            "active-s5c5s5b5",
            "--host",
            "127.0.0.1",
        ],
        None,
        &[],
    );
    assert!(!o.status.success());
    assert!(text(&o)
        .1
        .contains("trained with the active pattern S5-C5-S5-B5"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn demo_replay_redraws_a_record_and_refuses_other_files() {
    let d = tmp("replay");
    let fixture = repo().join("cli/tests/fixtures/demo-report/record.json");
    let o = run(
        &[
            "demo",
            "--report",
            d.join("out").to_str().unwrap(),
            "--replay",
            fixture.to_str().unwrap(),
        ],
        None,
        &[],
    );
    assert!(o.status.success(), "{}", text(&o).1);
    let page = std::fs::read_to_string(d.join("out/report.html")).unwrap();
    assert!(page.contains("Summary (000 Table 6.3 layout)"));
    // The record written beside the page is the one read.
    let a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).unwrap()).unwrap();
    let b: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("out/record.json")).unwrap()).unwrap();
    assert_eq!(a, b);
    let model = repo().join("models/passive/model.json");
    let o = run(
        &[
            "demo",
            "--report",
            d.join("bad").to_str().unwrap(),
            "--replay",
            model.to_str().unwrap(),
        ],
        None,
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).1.contains("is not an opsel demo record"),
        "{}",
        text(&o).1
    );
    let _ = std::fs::remove_dir_all(&d);
}
