//! `opsel send` / `opsel recv` end to end, running the built binary.
//!
//! * loopback (no privilege): full transfer, offset/append resume, refusal
//!   of a wrong offset;
//! * netlab (root): an OPS transfer with many CCA switches over a pipe with
//!   0.1% random loss delivers a byte-identical file.
//!   The lab's namespaces are removed by netlab's RAII guard; bounded to
//!   ~60 s (children are killed after 90 s).

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod common;
use common::{write_file, TempDir};

use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, Metadata, Probing, ProbingMode};
use opsel::series::synth;
use opsel_netlab::topo::receiver_ip;

/// A DTW K-NN model of window `w` for `pattern`, trained on synthetic 6-class
/// signatures (the shipped models are trained on netlab; this one only has to
/// be a valid model so OPS runs its full cycle).
fn write_model(p: &Path, w: usize, pattern: &str) {
    let (x, y) = synth::dataset(&SIX_CLASSES, 10, w, 5).unwrap();
    let model = Model::fit(
        &x,
        w,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        KnnConfig::default(),
    )
    .unwrap();
    KnnModelFile {
        stage2: None,
        model,
        meta: Metadata {
            probing: if pattern == "passive" {
                Probing {
                    mode: ProbingMode::Passive,
                    pattern: None,
                    ..Probing::default()
                }
            } else {
                Probing {
                    mode: ProbingMode::Active,
                    pattern: Some(pattern.into()),
                    ..Probing::default()
                }
            },
            training: serde_json::Value::Null,
        },
    }
    .save(p)
    .unwrap();
}

fn wait(c: Child, limit: Duration, what: &str) -> (bool, String) {
    common::wait_ok(c, limit, what)
}

fn spawn(prefix: &[&str], args: &[&str]) -> Child {
    common::spawn_opsel(prefix, args, "netlab transfer test key 0123456789")
}

/// One sender/receiver pair behind a netlab TUN pipe (rate, one-way delay,
/// drop-tail buffer, random loss, seed); `None` (test skipped) without root.
fn netlab_pair(
    rate_bps: u64,
    delay_ns: u64,
    buffer_bytes: u64,
    loss: f64,
    seed: u64,
) -> Option<opsel_netlab::topo::Lab> {
    use opsel_netlab::topo::{Lab, PipeKind, PipeSpec, TopologySpec};
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to build a netlab pipe");
        return None;
    }
    let _ = opsel_netlab::topo::down(false);
    Some(
        Lab::up(
            &TopologySpec {
                pairs: 1,
                mtu: 1500,
                offloads_off: true,
            },
            &PipeSpec {
                kind: PipeKind::Tun,
                rate_bps: Some(rate_bps),
                delay_ns,
                buffer_bytes,
                loss,
                seed,
            },
        )
        .expect("netlab up"),
    )
}

/// The JSON lines of a `--log` file (lines that do not parse are skipped).
fn log_lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn loopback_transfer_resume_and_refusal() {
    let d = TempDir::new("lo");
    let src = d.0.join("src.bin");
    let dst = d.0.join("dst.bin");
    write_file(&src, 3_000_000, 1);
    let addr = format!("127.0.0.1:{}", free_port());
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // A partial earlier transfer left 1 000 000 bytes: resume from there.
    std::fs::write(&dst, &std::fs::read(&src).unwrap()[..1_000_000]).unwrap();
    let rx = spawn(
        &[],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--append",
            "--timeout",
            "20",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let log = d.0.join("log.jsonl");
    let tx = spawn(
        &[],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--cca",
            "reno",
            "--offset",
            "1000000",
            "--log",
            &format!("{},lo-test", s(&log)),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(30), "send");
    let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    let done: serde_json::Value = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "done")
        .expect("a done line");
    assert_eq!(done["bytes"], 2_000_000);
    assert_eq!(done["next_offset"], 3_000_000);
    assert_eq!(done["run"], "lo-test");

    // Appending from the wrong offset is refused with the offset to use.
    let rx = spawn(
        &[],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--append",
            "--timeout",
            "20",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let tx = spawn(
        &[],
        &["send", "--to", &addr, "--file", &s(&src), "--offset", "5"],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(30), "send");
    // A refused sender does not end the receiver: it waits for the next one.
    let mut rx = rx;
    assert!(rx.try_wait().unwrap().is_none(), "recv exited on a refusal");
    let _ = rx.kill();
    let _ = rx.wait();
    assert!(!ok_tx);
    assert!(out_tx.contains("--offset 3000000"), "{out_tx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());

    // A model for another pattern is rejected before any byte moves.
    let model = d.0.join("m.json");
    write_model(&model, 4, "C2-B2");
    let tx = spawn(
        &[],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--ops",
            "--pattern",
            "S5-C5-S5-B5",
            "--model",
            &s(&model),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(30), "send");
    assert!(!ok_tx);
    assert!(out_tx.contains("trained with pattern C2-B2"), "{out_tx}");
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn ops_transfer_with_switches_and_loss_is_byte_identical() {
    // 1 x BDP at 50 Mbit/s and 20 ms.
    let Some(lab) = netlab_pair(50_000_000, 10_000_000, 125_000, 0.001, 7) else {
        return;
    };
    let d = TempDir::new("loss");
    let src = d.0.join("src.bin");
    let dst = d.0.join("dst.bin");
    write_file(&src, 40_000_000, 3);
    let model = d.0.join("model.json");
    write_model(&model, 4, "C1-B1-C1-B1");
    let addr = format!("{}:5301", receiver_ip(0));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let rx = spawn(
        &["ip", "netns", "exec", &lab.receiver_ns[0]],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--timeout",
            "30",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let log = d.0.join("log.jsonl");
    // Pattern C1-B1-C1-B1 and Y = 2 s: four switches per probe plus the decision.
    let tx = spawn(
        &["ip", "netns", "exec", &lab.sender_ns[0]],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--ops",
            "--pattern",
            "C1-B1-C1-B1",
            "--steady",
            "2",
            "--model",
            &s(&model),
            "--log",
            &format!("{},loss", s(&log)),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(90), "send");
    let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    let lines = log_lines(&log);
    let ccas: Vec<&str> = lines
        .iter()
        .filter(|v| v["kind"] == "cca_set")
        .filter_map(|v| v["cca"].as_str())
        .collect();
    assert!(ccas.len() >= 5, "switches: {ccas:?}");
    assert!(ccas.windows(2).all(|p| p[0] != p[1]), "{ccas:?}");
    // The pipe really dropped packets at random.
    let lost = lab.fwd_stats.snapshot(false).drop_loss_pkts;
    assert!(lost > 5, "random losses in the pipe: {lost}");
    drop(lab);
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn ops_on_the_data_sockets_own_rtt() {
    // `--rtt tcp-info`: OPS reads the transfer's own TCP_INFO RTT, with no
    // echo at the peer. 50 Mbit/s, 20 ms, 1 x BDP: the samples must sit at
    // or above the pipe's base RTT and OPS must decide on them.
    let Some(lab) = netlab_pair(50_000_000, 10_000_000, 125_000, 0.0, 11) else {
        return;
    };
    let d = TempDir::new("tcpinfo");
    let src = d.0.join("src.bin");
    let dst = d.0.join("dst.bin");
    write_file(&src, 40_000_000, 12);
    let model = d.0.join("model.json");
    write_model(&model, 4, "passive");
    let addr = format!("{}:5304", receiver_ip(0));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let rx = spawn(
        &["ip", "netns", "exec", &lab.receiver_ns[0]],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--timeout",
            "60",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let log = d.0.join("log.jsonl");
    let tx = spawn(
        &["ip", "netns", "exec", &lab.sender_ns[0]],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--ops",
            "--pattern",
            "passive",
            "--rtt",
            "tcp-info",
            "--steady",
            "2",
            "--model",
            &s(&model),
            "--log",
            &s(&log),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(90), "send");
    let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    let lines = log_lines(&log);
    let rtts: Vec<f64> = lines
        .iter()
        .filter(|v| v["kind"] == "interval")
        .filter_map(|v| v["rtt_ms"].as_f64())
        .collect();
    // Each interval line carries the last 1 Hz sample.
    assert!(
        rtts.len() >= 4,
        "intervals with a TCP_INFO sample: {rtts:?}"
    );
    let mut sorted = rtts.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    // Base RTT 20 ms, at most one BDP of queue on top (40 ms) plus slack.
    assert!(
        (19.0..60.0).contains(&median),
        "median TCP_INFO RTT {median} ms: {rtts:?}"
    );
    assert!(
        lines.iter().any(|v| v["kind"] == "classified"),
        "no decision on TCP_INFO samples"
    );
    drop(lab);
}

#[test]
fn tcp_info_rtt_needs_passive_probing() {
    let d = TempDir::new("tcpinfo-arg");
    let src = d.0.join("src.bin");
    write_file(&src, 1000, 1);
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["send", "--to", "127.0.0.1:9", "--file"])
        .arg(&src)
        .args(["--ops", "--pattern", "S5-C5-S5-B5", "--rtt", "tcp-info"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tcp-info needs passive probing") && err.contains("--pattern passive"),
        "{err}"
    );
}

/// `send --resume`, retried while the receiver refuses it as busy: it holds
/// its one transfer slot until it has seen the killed sender go (that FIN
/// can be lost on the lossy pipe and wait for its retransmission) and has
/// synced the part file. The refusal tells the user to retry; so does this.
fn resume_send(sns: &[&str], addr: &str, src: &str) -> (bool, String) {
    let argv = ["send", "--to", addr, "--file", src, "--resume"];
    let (mut ok, mut out) = wait(spawn(sns, &argv), Duration::from_secs(60), "send --resume");
    let mut tries = 0;
    while !ok && out.contains("busy:") && tries < 40 {
        std::thread::sleep(Duration::from_millis(250));
        tries += 1;
        (ok, out) = wait(spawn(sns, &argv), Duration::from_secs(60), "send --resume");
    }
    (ok, out)
}

/// Wait until `p` holds at least `n` bytes (the transfer is under way).
fn wait_len(p: &Path, n: u64, limit: Duration) {
    let start = Instant::now();
    while std::fs::metadata(p).map(|m| m.len()).unwrap_or(0) < n {
        assert!(
            start.elapsed() < limit,
            "{} never reached {n} bytes",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill9(c: &mut Child) {
    // SAFETY: signalling our own child by pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn kill_9_of_either_side_then_resume_is_byte_identical() {
    // 40 Mbit/s with 0.5% random loss: a 12 MB file takes a few seconds, long
    // enough to kill either side in the middle.
    let Some(lab) = netlab_pair(40_000_000, 5_000_000, 100_000, 0.005, 11) else {
        return;
    };
    let rns = ["ip", "netns", "exec", lab.receiver_ns[0].as_str()];
    let sns = ["ip", "netns", "exec", lab.sender_ns[0].as_str()];
    let d = TempDir::new("kill9");
    let src = d.0.join("src.bin");
    write_file(&src, 12_000_000, 21);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let addr = format!("{}:5302", receiver_ip(0));

    // 1. kill -9 of the sender. The destination holds an older file; the
    //    receiver may replace it (--force), but only by a verified transfer.
    let dst = d.0.join("dst.bin");
    std::fs::write(&dst, b"an older version").unwrap();
    let part = d.0.join(".dst.bin.opsel-part");
    let rx = spawn(
        &rns,
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--force",
            "--timeout",
            "60",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let mut tx = spawn(&sns, &["send", "--to", &addr, "--file", &s(&src)]);
    wait_len(&part, 2_000_000, Duration::from_secs(20));
    kill9(&mut tx);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read(&dst).unwrap(), b"an older version");
    let kept = std::fs::metadata(&part).unwrap().len();
    assert!(kept > 0 && kept < 12_000_000, "kept {kept}");
    let (ok_tx, out_tx) = resume_send(&sns, &addr, &s(&src));
    let (ok_rx, out_rx) = match common::wait_within(rx, Duration::from_secs(20)) {
        (Some(ok), out) => (ok, out),
        (None, out) => panic!("recv did not finish within 20 s\nsend: {out_tx}\nrecv: {out}"),
    };
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert!(
        out_rx.contains("without its completion message"),
        "{out_rx}"
    );
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    assert!(!part.exists());
    eprintln!("sender killed: {kept} bytes kept, resumed, byte-identical");

    // 2. kill -9 of the receiver: a new receiver on the same port resumes.
    let dst = d.0.join("dst2.bin");
    let part = d.0.join(".dst2.bin.opsel-part");
    let recv_args = [
        "recv",
        "--listen",
        &addr,
        "--out",
        &s(&dst),
        "--timeout",
        "60",
    ];
    let mut rx = spawn(&rns, &recv_args);
    std::thread::sleep(Duration::from_millis(400));
    let tx = spawn(&sns, &["send", "--to", &addr, "--file", &s(&src)]);
    wait_len(&part, 2_000_000, Duration::from_secs(20));
    kill9(&mut rx);
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(60), "send to a killed receiver");
    assert!(!ok_tx && out_tx.contains("--resume"), "{out_tx}");
    assert!(!dst.exists());
    let kept = std::fs::metadata(&part).unwrap().len();
    let rx = spawn(&rns, &recv_args);
    std::thread::sleep(Duration::from_millis(400));
    let (ok_tx, out_tx) = resume_send(&sns, &addr, &s(&src));
    let (ok_rx, out_rx) = match common::wait_within(rx, Duration::from_secs(20)) {
        (Some(ok), out) => (ok, out),
        (None, out) => panic!("recv did not finish within 20 s\nsend: {out_tx}\nrecv: {out}"),
    };
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_rx.contains(&format!("from offset {kept}")), "{out_rx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    eprintln!("receiver killed: {kept} bytes kept, resumed, byte-identical");
    drop(lab);
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn dps_chooses_the_cca_on_a_live_transfer() {
    let Some(lab) = netlab_pair(50_000_000, 10_000_000, 125_000, 0.0, 7) else {
        return;
    };
    let d = TempDir::new("dps");
    let src = d.0.join("src.bin");
    let dst = d.0.join("dst.bin");
    write_file(&src, 150_000_000, 5);
    let model = d.0.join("model.json");
    write_model(&model, 4, "C1-B1-C1-B1");
    let addr = format!("{}:5302", receiver_ip(0));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let rx = spawn(
        &["ip", "netns", "exec", &lab.receiver_ns[0]],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--timeout",
            "60",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let log = d.0.join("log.jsonl");
    // DPS over {cubic, reno}: the stump would never pick reno, so a reno
    // decision shows DPS is the policy; its learning phase tries both.
    let spec = r#"{"ccas": ["cubic", "reno"], "metrics": [{"metric": "throughput_mbps", "range": [40, null, 30, null]}], "selection_period_ms": 2000, "random_period_ms": 2000, "seed": 3}"#;
    let tx = spawn(
        &["ip", "netns", "exec", &lab.sender_ns[0]],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--ops",
            "--pattern",
            "C1-B1-C1-B1",
            "--steady",
            "3",
            "--model",
            &s(&model),
            "--dps",
            spec,
            "--log",
            &s(&log),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(120), "send");
    let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert!(!out_tx.contains("DPS feedback"), "{out_tx}");
    let lines = log_lines(&log);
    let chosen: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter(|v| v["kind"] == "selected")
        .filter_map(|v| v["cca"].as_str())
        .collect();
    assert_eq!(
        chosen.into_iter().collect::<Vec<_>>(),
        ["cubic", "reno"],
        "DPS's learning phase tries both of its CCAs and nothing else"
    );
    drop(lab);
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn decision_cache_starts_the_next_transfer_with_the_last_decision() {
    let Some(lab) = netlab_pair(50_000_000, 10_000_000, 125_000, 0.0, 9) else {
        return;
    };
    let d = TempDir::new("dcache");
    let src = d.0.join("src.bin");
    // 60 MB: about 10 s at 50 Mbit/s, so the first transfer outlasts its
    // 5 s lead-in and probe even on a loaded machine and records a decision.
    write_file(&src, 60_000_000, 8);
    let model = d.0.join("model.json");
    write_model(&model, 4, "C1-B1-C1-B1");
    let cache = d.0.join("cache.json");
    let addr = format!("{}:5303", receiver_ip(0));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    // Two transfers to the same receiver, both asking to start on reno; the
    // second starts on what OPS chose in the first (cubic or bbr: never reno).
    let mut first_cca = Vec::new();
    for run in 0..2 {
        let dst = d.0.join(format!("dst{run}.bin"));
        let rx = spawn(
            &["ip", "netns", "exec", &lab.receiver_ns[0]],
            &[
                "recv",
                "--listen",
                &addr,
                "--out",
                &s(&dst),
                "--timeout",
                "60",
            ],
        );
        std::thread::sleep(Duration::from_millis(400));
        let log = d.0.join(format!("log{run}.jsonl"));
        let tx = spawn(
            &["ip", "netns", "exec", &lab.sender_ns[0]],
            &[
                "send",
                "--to",
                &addr,
                "--file",
                &s(&src),
                "--ops",
                "--pattern",
                "C1-B1-C1-B1",
                "--steady",
                "2",
                "--model",
                &s(&model),
                "--initial-cca",
                "reno",
                "--decision-cache",
                &s(&cache),
                "--log",
                &s(&log),
            ],
        );
        let (ok_tx, out_tx) = wait(tx, Duration::from_secs(90), "send");
        let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
        assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
        let lines = log_lines(&log);
        let first = lines
            .iter()
            .find(|v| v["kind"] == "cca_set")
            .and_then(|v| v["cca"].as_str())
            .unwrap()
            .to_string();
        first_cca.push(first);
    }
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    let entry = &c["entries"][0];
    assert_eq!(
        entry["prefix"],
        format!(
            "{}/24",
            receiver_ip(0)
                .to_string()
                .rsplit_once('.')
                .unwrap()
                .0
                .to_owned()
                + ".0"
        )
    );
    let cached = entry["cca"].as_str().unwrap();
    assert_eq!(first_cca[0], "reno", "no prior on the first transfer");
    assert_ne!(cached, "reno");
    assert_eq!(
        first_cca[1], cached,
        "the second transfer starts on the cached decision"
    );
    drop(lab);
}

#[test]
#[ignore = "root: builds a netlab pipe; run by `make test-ops`"]
fn active_pattern_over_three_streams_is_silent_on_all_of_them() {
    // `--streams 3` with the active pattern S5-C5-S5-B5 at 20 Mbit/s, 20 ms,
    // 1 x BDP: one prober and one controller on stream 0; every CCA it sets
    // is set on streams 1 and 2, and during the pattern's silences no
    // stream hands a byte to its socket (streams.rs, 000 §3.2).
    let Some(lab) = netlab_pair(20_000_000, 10_000_000, 50_000, 0.0, 13) else {
        return;
    };
    let d = TempDir::new("streams-active");
    let src = d.0.join("src.bin");
    let dst = d.0.join("dst.bin");
    // Lead-in (5 s) and the 20 s probe send for 15 s: ~37 MB at 20 Mbit/s;
    // the rest goes in the steady phase. Twice that, so the transfer outlasts
    // the probe's last segment even when the pipe drains faster than its rate
    // (a run with 45 MB ended before the probe's B segment).
    write_file(&src, 75_000_017, 21);
    let model = d.0.join("model.json");
    write_model(&model, 20, "S5-C5-S5-B5");
    let addr = format!("{}:5308", receiver_ip(0));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let rx = spawn(
        &["ip", "netns", "exec", &lab.receiver_ns[0]],
        &[
            "recv",
            "--listen",
            &addr,
            "--out",
            &s(&dst),
            "--timeout",
            "60",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let log = d.0.join("log.jsonl");
    let tx = spawn(
        &["ip", "netns", "exec", &lab.sender_ns[0]],
        &[
            "send",
            "--to",
            &addr,
            "--file",
            &s(&src),
            "--streams",
            "3",
            "--ops",
            "--pattern",
            "S5-C5-S5-B5",
            "--steady",
            "60",
            "--model",
            &s(&model),
            "--log",
            &s(&log),
        ],
    );
    let (ok_tx, out_tx) = wait(tx, Duration::from_secs(90), "send");
    let (ok_rx, out_rx) = wait(rx, Duration::from_secs(30), "recv");
    assert!(ok_tx && ok_rx, "send: {out_tx}\nrecv: {out_rx}");
    assert!(out_tx.contains("byte-identical"), "{out_tx}");
    assert_eq!(std::fs::read(&src).unwrap(), std::fs::read(&dst).unwrap());
    let lines = log_lines(&log);
    // The pattern's segments on stream 0: lead-in B, then C and B of the probe.
    let ccas: Vec<&str> = lines
        .iter()
        .filter(|v| v["kind"] == "cca_set")
        .filter_map(|v| v["cca"].as_str())
        .collect();
    assert!(
        ccas.windows(3).any(|w| w == ["bbr", "cubic", "bbr"]),
        "stream 0's CCAs: {ccas:?}"
    );
    // Every switch was set on streams 1 and 2 as well.
    let done = lines.iter().find(|v| v["kind"] == "done").expect("done");
    let streams = done["streams"].as_array().expect("streams");
    assert_eq!(streams.len(), 2, "{done}");
    for st in streams {
        assert_eq!(st["cca_sets"].as_u64(), Some(ccas.len() as u64), "{st}");
        assert!(st["bytes"].as_u64().unwrap() > 0, "{st}");
    }
    // The silences: [P, P+5) and [P+10, P+15) after the probe starts at P.
    let p = lines
        .iter()
        .find(|v| v["kind"] == "phase" && v["phase"] == "probe")
        .and_then(|v| v["t_s"].as_f64())
        .expect("a probe phase");
    // Intervals (1 s) that end inside a silence and start at least 1 s into
    // it (the queue drained, the data in flight acknowledged).
    let in_silence = |end: f64| {
        [p, p + 10.0]
            .iter()
            .any(|&a| end >= a + 2.0 && end <= a + 5.0)
    };
    for stream in [None, Some(1), Some(2)] {
        let ivs: Vec<&serde_json::Value> = lines
            .iter()
            .filter(|v| v["kind"] == "interval" && v["stream"].as_u64() == stream)
            .filter(|v| v["t_s"].as_f64().is_some_and(in_silence))
            .collect();
        assert!(
            ivs.len() >= 2,
            "stream {stream:?}: intervals in silences: {ivs:?}"
        );
        for v in ivs {
            assert_eq!(
                v["bytes"].as_u64(),
                Some(0),
                "stream {stream:?} sent in a silence: {v}"
            );
            assert!(
                v["acked_bytes"].as_u64().unwrap_or(0) <= 64 * 1024,
                "stream {stream:?} acked in a silence: {v}"
            );
        }
        // ... and it did send outside them.
        let sent: u64 = lines
            .iter()
            .filter(|v| v["kind"] == "interval" && v["stream"].as_u64() == stream)
            .filter_map(|v| v["bytes"].as_u64())
            .sum();
        assert!(sent > 1_000_000, "stream {stream:?} sent {sent} bytes");
    }
    drop(lab);
}
