//! `opsel send` against iperf3 on a netlab path (docs/results/datapath.md,
//! "netlab"): the same pipe, the same CCA (CUBIC), the tools alternating
//! within one run (opsel with a fixed CCA, opsel with the OPS driver attached,
//! iperf3 -F), at 100 Mbit/s and at a high pipe rate. Prints each run, the
//! medians, the ratios to iperf3 and the CPU time (user + system) of each side
//! per Gbit moved. A benchmark, not a test of speed: it asserts only that
//! every transfer completed byte-identical. Needs root (netlab) and iperf3;
//! `--ignored`:
//!
//! ```sh
//! cargo test --release -p opsel-cli --test transfer_bench -- --ignored --nocapture
//! ```
//!
//! `BENCH_NETLAB_RUNS` (default 3) rounds per rate; `BENCH_NETLAB_RATES`
//! (Mbit/s, comma-separated, default "100,800"); `BENCH_HASH` (opsel's
//! transfer check, `xxh3` or `blake3`; default: opsel's, xxh3).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use opsel_netlab::topo::receiver_ip;

const BIN: &str = env!("CARGO_BIN_EXE_opsel");
const KEY: &str = "netlab transfer bench key 0123456789";

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_random(p: &Path, n: usize) {
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.extend_from_slice(&s.to_le_bytes());
    }
    v.truncate(n);
    std::fs::write(p, v).unwrap();
}

/// CPU seconds (user + system) that `/usr/bin/time -f "%U %S"` wrote to `p`.
fn cpu_s(p: &Path) -> f64 {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|x| x.parse::<f64>().ok())
        .sum()
}

/// Whether the transfers run with the pre-shared key (keyed BLAKE3). With
/// `BENCH_HASH=xxh3` they run without one (`recv --no-auth`): a keyed
/// transfer is always checked with keyed BLAKE3, and XXH3 is what the
/// comparison with iperf3 (no check at all) is about.
fn keyed() -> bool {
    std::env::var("BENCH_HASH").map_or(true, |h| h != "xxh3")
}

/// `ip netns exec NS /usr/bin/time -f "%U %S" -o TIME args...`
fn in_ns(ns: &str, time: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "/usr/bin/time", "-f", "%U %S", "-o"])
        .arg(time)
        .args(args)
        .env_remove("OPSEL_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if keyed() {
        c.env("OPSEL_KEY", KEY);
    }
    c
}

/// One measured transfer: goodput over the sender command's wall time (Mbit/s),
/// sender and receiver CPU seconds per Gbit.
#[derive(Clone, Copy)]
struct Run {
    mbps: f64,
    cpu_tx: f64,
    cpu_rx: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

fn wait_listen(ns: &str, port: u16) {
    for _ in 0..150 {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ss", "-ltn"])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains(&format!(":{port} ")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port} in {ns}");
}

#[allow(clippy::too_many_arguments)]
fn opsel_run(
    lab: &opsel_netlab::topo::Lab,
    dir: &Path,
    src: &Path,
    bytes: u64,
    port: u16,
    send_args: &[&str],
) -> Run {
    let dst = dir.join("dst.bin");
    let _ = std::fs::remove_file(&dst);
    let addr = format!("{}:{port}", receiver_ip(0));
    let (trx, ttx) = (dir.join("rx.time"), dir.join("tx.time"));
    let mut rargs = vec![
        BIN,
        "recv",
        "--listen",
        &addr,
        "--out",
        dst.to_str().unwrap(),
        "--timeout",
        "120",
    ];
    if !keyed() {
        rargs.push("--no-auth");
    }
    let rx = in_ns(&lab.receiver_ns[0], &trx, &rargs).spawn().unwrap();
    wait_listen(&lab.receiver_ns[0], port);
    let mut args = vec![BIN, "send", "--to", &addr, "--file", src.to_str().unwrap()];
    args.extend_from_slice(send_args);
    let hash = std::env::var("BENCH_HASH").ok();
    if let Some(h) = &hash {
        args.extend(["--hash", h.as_str()]);
    }
    let t0 = Instant::now();
    let tx = in_ns(&lab.sender_ns[0], &ttx, &args).spawn().unwrap();
    let (ok_tx, out_tx) = common::wait_within(tx, Duration::from_secs(300));
    let wall = t0.elapsed().as_secs_f64();
    let (ok_rx, out_rx) = common::wait_within(rx, Duration::from_secs(30));
    assert!(
        ok_tx == Some(true) && ok_rx == Some(true),
        "send: {out_tx}\nrecv: {out_rx}"
    );
    assert!(
        std::fs::read(src).unwrap() == std::fs::read(&dst).unwrap(),
        "the destination differs from the source"
    );
    let gbit = bytes as f64 * 8.0 / 1e9;
    Run {
        mbps: gbit * 1e3 / wall,
        cpu_tx: cpu_s(&ttx) / gbit,
        cpu_rx: cpu_s(&trx) / gbit,
    }
}

fn iperf_run(lab: &opsel_netlab::topo::Lab, dir: &Path, src: &Path, bytes: u64, port: u16) -> Run {
    let out = dir.join("ip.bin");
    let (trx, ttx) = (dir.join("ips.time"), dir.join("ipc.time"));
    let sp = port.to_string();
    let rx = in_ns(
        &lab.receiver_ns[0],
        &trx,
        &["iperf3", "-s", "-1", "-p", &sp, "-F", out.to_str().unwrap()],
    )
    .spawn()
    .unwrap();
    wait_listen(&lab.receiver_ns[0], port);
    let ip = receiver_ip(0).to_string();
    let n = bytes.to_string();
    let t0 = Instant::now();
    let tx = in_ns(
        &lab.sender_ns[0],
        &ttx,
        &[
            "iperf3",
            "-c",
            &ip,
            "-p",
            &sp,
            "-F",
            src.to_str().unwrap(),
            "-n",
            &n,
            "-C",
            "cubic",
        ],
    )
    .spawn()
    .unwrap();
    let (ok_tx, out_tx) = common::wait_within(tx, Duration::from_secs(300));
    let wall = t0.elapsed().as_secs_f64();
    let (_, _) = common::wait_within(rx, Duration::from_secs(30));
    assert_eq!(ok_tx, Some(true), "iperf3: {out_tx}");
    let gbit = bytes as f64 * 8.0 / 1e9;
    Run {
        mbps: gbit * 1e3 / wall,
        cpu_tx: cpu_s(&ttx) / gbit,
        cpu_rx: cpu_s(&trx) / gbit,
    }
}

#[test]
#[ignore = "benchmark: needs root, iperf3 and minutes; prints ratios"]
fn netlab_opsel_against_iperf3() {
    use opsel_netlab::topo::{Lab, PipeKind, PipeSpec, TopologySpec};
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to build a netlab pipe");
        return;
    }
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: iperf3 not installed (apt-get install -y iperf3)");
        return;
    }
    let runs: usize = std::env::var("BENCH_NETLAB_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let rates: Vec<u64> = std::env::var("BENCH_NETLAB_RATES")
        .unwrap_or_else(|_| "100,800".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let dir = TempDir(std::env::temp_dir().join(format!("opsel-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    // One stream and `--streams` 2/4/8 with a fixed CCA; OPS attached
    // (passive probing, one decision for every stream) with 1 and 4.
    const OPS: [&str; 5] = ["--ops", "--pattern", "passive", "--initial-cca", "cubic"];
    let modes: Vec<(String, Vec<&str>)> = [
        ("fixed", 1),
        ("fixed", 2),
        ("fixed", 4),
        ("fixed", 8),
        ("ops", 1),
        ("ops", 4),
    ]
    .iter()
    .map(|&(m, n)| {
        let mut a: Vec<&str> = if m == "ops" {
            OPS.to_vec()
        } else {
            vec!["--cca", "cubic"]
        };
        a.extend([
            "--streams",
            ["1", "2", "4", "8"][(n as u32).trailing_zeros() as usize],
        ]);
        (format!("{m} x{n}"), a)
    })
    .collect();
    let mut port = 5400u16;
    for &rate in &rates {
        // 20 ms RTT, a drop-tail buffer of one BDP; about 10 s per transfer.
        let delay_ns = 10_000_000u64;
        let rate_bps = rate * 1_000_000;
        let bdp = rate_bps / 8 * 2 * delay_ns / 1_000_000_000;
        let bytes = (rate_bps / 8 * 10).min(1 << 30);
        let src = dir.0.join(format!("src-{rate}.bin"));
        write_random(&src, bytes as usize);
        let lab = Lab::up(
            &TopologySpec {
                pairs: 1,
                mtu: 1500,
                offloads_off: true,
            },
            &PipeSpec {
                kind: PipeKind::Tun,
                rate_bps: Some(rate_bps),
                delay_ns,
                buffer_bytes: bdp.max(64_000),
                loss: 0.0,
                seed: 1,
            },
        )
        .expect("netlab up");
        let mut res: Vec<Vec<Run>> = vec![Vec::new(); modes.len() + 1];
        let mut loads = Vec::new();
        for r in 0..runs {
            let mut line = format!("{rate} Mbit/s run {}:", r + 1);
            for (m, (name, args)) in modes.iter().enumerate() {
                port += 1;
                let x = opsel_run(&lab, &dir.0, &src, bytes, port, args);
                line += &format!(" opsel {name} {:.1},", x.mbps);
                res[m].push(x);
            }
            port += 1;
            let x = iperf_run(&lab, &dir.0, &src, bytes, port);
            line += &format!(" iperf3 -F {:.1} Mbit/s", x.mbps);
            res[modes.len()].push(x);
            loads.push(load1());
            println!("{line} (load {})", loads.last().unwrap());
        }
        drop(lab);
        let med = |v: &[Run], f: fn(&Run) -> f64| median(v.iter().map(f).collect());
        let ip = &res[modes.len()];
        let ipm = med(ip, |r| r.mbps);
        println!(
            "{rate} Mbit/s pipe, 20 ms RTT, buffer {bdp} B, {bytes} B file, {runs} runs, medians (CPU s per Gbit):"
        );
        println!(
            "  iperf3 -F   {ipm:.1} Mbit/s, CPU sender {:.3} receiver {:.3}",
            med(ip, |r| r.cpu_tx),
            med(ip, |r| r.cpu_rx)
        );
        for (m, (name, _)) in modes.iter().enumerate() {
            let om = med(&res[m], |r| r.mbps);
            println!(
                "  opsel {name:<8} {om:.1} Mbit/s, CPU sender {:.3} receiver {:.3}, ratio to iperf3 -F {:.3}",
                med(&res[m], |r| r.cpu_tx),
                med(&res[m], |r| r.cpu_rx),
                om / ipm
            );
        }
        println!("  load (1 min) per round: {}", loads.join(" "));
    }
}
