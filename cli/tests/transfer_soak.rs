//! Soak: `opsel serve` on a netlab pipe with random loss receives N transfers
//! (default 100) of random sizes from `opsel send`: fixed CCAs in turn, every
//! fifth an OPS transfer switching CCA on the live connection
//! (C1-B1-C1-B1, Y = 1 s, 40 MB), every seventh killed with SIGKILL in the middle and
//! resumed with `send --resume`. Every file must arrive byte-identical.
//!
//! Root; minutes, so not in `make test`: `make transfer-soak`
//! (OPSEL_SOAK_N, OPSEL_SOAK_SEED, OPSEL_SOAK_LOSS).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use opsel::knn::{KnnConfig, Model};
use opsel::mix::SIX_CLASSES;
use opsel::model::{KnnModelFile, Metadata, Probing, ProbingMode};
use opsel::series::synth;

const BIN: &str = env!("CARGO_BIN_EXE_opsel");
const KEY: &str = "soak test pre-shared key 0123456789";

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn write_file(p: &Path, n: usize, seed: u64) {
    let mut r = Rng(seed);
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        v.extend_from_slice(&r.next().to_le_bytes());
    }
    v.truncate(n);
    std::fs::write(p, v).unwrap();
}

fn write_model(p: &Path) {
    let (x, y) = synth::dataset(&SIX_CLASSES, 10, 4, 5).unwrap();
    let model = Model::fit(
        &x,
        4,
        &y,
        SIX_CLASSES.iter().map(|s| s.to_string()).collect(),
        KnnConfig::default(),
    )
    .unwrap();
    KnnModelFile {
        stage2: None,
        model,
        meta: Metadata {
            probing: Probing {
                mode: ProbingMode::Active,
                pattern: Some("C1-B1-C1-B1".into()),
                ..Probing::default()
            },
            training: serde_json::Value::Null,
        },
    }
    .save(p)
    .unwrap();
}

fn spawn(ns: &str, args: &[&str]) -> Child {
    Command::new("ip")
        .args(["netns", "exec", ns, BIN])
        .args(args)
        .env("OPSEL_KEY", KEY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait(c: Child, limit: Duration) -> (bool, String) {
    match common::wait_within(c, limit) {
        (Some(ok), out) => (ok, out),
        (None, _) => (false, format!("timed out after {limit:?}")),
    }
}

fn env_or<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

#[test]
#[ignore = "root, minutes: run by `make transfer-soak`"]
fn soak_random_sizes_loss_switches_and_kills_lose_nothing() {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to build a netlab pipe");
        return;
    }
    use opsel_netlab::topo::{receiver_ip, Lab, PipeKind, PipeSpec, TopologySpec};
    let n: usize = env_or("OPSEL_SOAK_N", 100);
    let seed: u64 = env_or("OPSEL_SOAK_SEED", 1);
    let loss: f64 = env_or("OPSEL_SOAK_LOSS", 0.01);
    let _ = opsel_netlab::topo::down(false);
    let lab = Lab::up(
        &TopologySpec {
            pairs: 1,
            mtu: 1500,
            offloads_off: true,
        },
        &PipeSpec {
            kind: PipeKind::Tun,
            rate_bps: Some(100_000_000),
            delay_ns: 2_000_000,
            buffer_bytes: 100_000,
            loss,
            seed,
        },
    )
    .expect("netlab up");
    let dir = std::env::temp_dir().join(format!("opsel-soak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let inbox = dir.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let model = dir.join("model.json");
    write_model(&model);
    let addr = format!("{}:5303", receiver_ip(0));
    let rns = lab.receiver_ns[0].clone();
    let sns = lab.sender_ns[0].clone();
    let mut srv = spawn(
        &rns,
        &[
            "serve",
            "--listen",
            &addr,
            "--dir",
            &s(&inbox),
            "--idle-timeout",
            "20",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut rng = Rng(seed);
    let ccas = ["cubic", "reno", "bbr"];
    let (mut bytes, mut kills, mut ops, mut switches, mut failures) =
        (0u64, 0, 0, 0usize, Vec::new());
    let mut busy_retries = 0;
    let start = Instant::now();
    for i in 0..n {
        let size = match i % 10 {
            0 => [0usize, 1, 4095, 65_537, 1_000_003][(i / 10) % 5],
            _ => {
                // Log-uniform from 1 KB to 8 MB.
                let e = 10.0 + (rng.next() % 1300) as f64 / 100.0;
                2f64.powf(e) as usize
            }
        };
        let is_ops = i % 5 == 4;
        let kill = !is_ops && i % 7 == 3;
        // OPS transfers last a few probe segments; killed ones are big enough
        // to be caught in the middle.
        let size = if is_ops {
            40_000_000
        } else if kill {
            size.max(6_000_000)
        } else {
            size
        };
        let src: PathBuf = dir.join(format!("src{i:03}.bin"));
        write_file(&src, size, seed * 1000 + i as u64);
        let name = format!("t{i:03}.bin");
        let log = dir.join(format!("t{i:03}.jsonl"));
        let mut args: Vec<String> = ["send", "--to", &addr, "--file", &s(&src), "--name", &name]
            .iter()
            .map(|x| x.to_string())
            .collect();
        if is_ops {
            ops += 1;
            args.extend(
                [
                    "--ops",
                    "--pattern",
                    "C1-B1-C1-B1",
                    "--steady",
                    "1",
                    "--model",
                    &s(&model),
                    "--log",
                    &s(&log),
                ]
                .iter()
                .map(|x| x.to_string()),
            );
        } else {
            args.extend(["--cca".to_string(), ccas[i % 3].to_string()]);
        }
        let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut tx = spawn(&sns, &argv);
        if kill {
            let part = inbox.join(format!(".{name}.opsel-part"));
            let t = Instant::now();
            while std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0) < size as u64 / 3
                && t.elapsed() < Duration::from_secs(30)
                && tx.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            // SAFETY: signalling our own child.
            unsafe { libc::kill(tx.id() as i32, libc::SIGKILL) };
            let _ = tx.wait();
            kills += 1;
            std::thread::sleep(Duration::from_millis(200));
            argv.push("--resume");
            tx = spawn(&sns, &argv);
        }
        let (mut ok, mut out) = wait(tx, Duration::from_secs(120));
        // The receiver holds its one transfer slot until it has seen the previous sender go
        // (a killed sender's FIN can be lost on the lossy pipe and wait for its retransmission)
        // and has synced the part file. A sender refused as busy has sent nothing and is told
        // to retry, so it retries, as a user's script would.
        let mut tries = 0;
        while !ok && out.contains("busy:") && tries < 40 {
            std::thread::sleep(Duration::from_millis(250));
            tries += 1;
            busy_retries += 1;
            (ok, out) = wait(spawn(&sns, &argv), Duration::from_secs(120));
        }
        let got = std::fs::read(inbox.join(&name)).unwrap_or_default();
        let want = std::fs::read(&src).unwrap();
        if !ok || got != want {
            failures.push(format!("transfer {i} ({size} bytes): ok={ok}: {out}"));
        } else {
            bytes += size as u64;
        }
        if is_ops {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            switches += text
                .lines()
                .filter(|l| l.contains("\"kind\":\"cca_set\""))
                .count();
        }
        let _ = std::fs::remove_file(&src);
        let _ = std::fs::remove_file(inbox.join(&name));
    }
    let _ = srv.kill();
    let out = srv.wait_with_output().unwrap();
    let server_log = String::from_utf8_lossy(&out.stderr).to_string();
    let lost = lab.fwd_stats.snapshot(false).drop_loss_pkts;
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "soak: seed {seed}, loss {loss}: {} of {n} transfers byte-identical ({bytes} bytes) in {:.0} s; \
         {kills} killed with SIGKILL and resumed; {busy_retries} retries after a busy refusal; \
         {ops} OPS transfers with {switches} CCA settings; \
         {lost} packets dropped at random by the pipe; {} verified transfers in the server log",
        n - failures.len(),
        start.elapsed().as_secs_f64(),
        server_log.matches(": verified ").count()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(lost > 0, "the pipe dropped nothing");
    assert!(switches > ops, "OPS switched CCAs on the live connection");
}
