//! nfdump interop: `opsel flows export` sends a record file as IPFIX to
//! nfdump's collector `nfcapd`, and `nfdump -o csv` must read back every
//! record with its addresses, ports, protocol, bytes and packets. The other
//! way round, `opsel flows read` must read the files the real nfcapd wrote
//! (uncompressed, its default, and LZ4 with `-y`) and agree with `nfdump -o
//! csv` on every record.
//!
//! Needs `apt-get install nfdump` (no root; loopback only, about 3 s each):
//! `cargo test -p opsel-cli --test flows_nfdump -- --ignored`.

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Term(Child);
impl Drop for Term {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs nfdump (apt-get install nfdump)"]
fn nfdump_reads_what_opsel_exports() {
    let dir = std::env::temp_dir().join(format!("opsel-nfdump-{}", std::process::id()));
    let flows = dir.join("nfcapd");
    std::fs::create_dir_all(&flows).unwrap();
    // 60 records, each different, 1 s apart an hour ago.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3600;
    let mut want = BTreeSet::new();
    let mut text = String::new();
    for i in 0..60u64 {
        let (sp, bytes, pkts) = (20_000 + i, 1_000_000 + 977 * i, 700 + i);
        let first = (t0 + i) * 1_000_000_000;
        text.push_str(&format!(
            "{{\"src_addr\":\"10.1.{i}.7\",\"dst_addr\":\"10.2.0.9\",\"src_port\":{sp},\"dst_port\":5001,\"proto\":6,\"bytes\":{bytes},\"packets\":{pkts},\"first_ns\":{first},\"last_ns\":{},\"sampling_interval\":1}}\n",
            first + 500_000_000
        ));
        want.insert((format!("10.1.{i}.7"), sp, bytes, pkts));
    }
    let recs = dir.join("recs.jsonl");
    std::fs::write(&recs, text).unwrap();

    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cap = Term(
        Command::new("nfcapd")
            .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "60", "-w"])
            .arg(&flows)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nfcapd not installed: apt-get install nfdump"),
    );
    std::thread::sleep(Duration::from_millis(1000));
    let o = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "export"])
        .arg(&recs)
        .args(["--to", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(1000));
    // SIGTERM makes nfcapd write out its current file.
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGTERM) };
    let _ = cap.0.wait();
    let o = Command::new("nfdump")
        .arg("-R")
        .arg(&flows)
        .args(["-o", "csv", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let mut got = BTreeSet::new();
    let mut header: Vec<String> = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.first() == Some(&"ts") {
            header = f.iter().map(|s| s.to_string()).collect();
            continue;
        }
        if f.len() < 10 {
            continue;
        }
        let col = |name: &str, default: usize| {
            header
                .iter()
                .position(|h| h == name)
                .map(|i| f[i])
                .unwrap_or(f[default])
        };
        // nfdump 1.7 csv: ts,te,td,sa,da,sp,dp,pr,flg,fwd,stos,ipkt,ibyt,...
        if col("da", 4) != "10.2.0.9" || col("dp", 6) != "5001" {
            continue;
        }
        assert_eq!(col("pr", 7), "TCP", "{line}");
        got.insert((
            col("sa", 3).to_string(),
            col("sp", 5).parse::<u64>().unwrap(),
            col("ibyt", 12).parse::<u64>().unwrap(),
            col("ipkt", 11).parse::<u64>().unwrap(),
        ));
    }
    assert_eq!(got, want, "nfdump output:\n{out}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Capture `n` exported records with nfcapd (`extra`: e.g. `-y` for LZ4);
/// returns the capture directory and nfdump's csv rows as (sa, da, sp, dp,
/// pr, ipkt, ibyt, td).
fn capture(tag: &str, extra: &[&str]) -> (std::path::PathBuf, Vec<Row>) {
    let dir = std::env::temp_dir().join(format!("opsel-nfcapd-{tag}-{}", std::process::id()));
    let flows = dir.join("nfcapd");
    std::fs::create_dir_all(&flows).unwrap();
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 3600;
    let mut text = String::new();
    for i in 0..200u64 {
        // TCP and UDP, IPv4 and IPv6, sizes from bytes to 10 GB.
        let (src, dst) = if i % 5 == 4 {
            (format!("2001:db8:{i:x}::7"), "2001:db8:ffff::9".to_string())
        } else {
            (
                format!("10.{}.{}.7", 1 + i / 250, i % 250),
                "10.200.0.9".to_string(),
            )
        };
        let proto = if i % 3 == 0 { 17 } else { 6 };
        let bytes = 40 + i * i * i * 1_250_000 % 10_000_000_000;
        let pkts = bytes / 1000 + 1;
        let first = (t0 + i) * 1_000_000_000 + (i % 7) * 1_000_000;
        text.push_str(&format!(
            "{{\"src_addr\":\"{src}\",\"dst_addr\":\"{dst}\",\"src_port\":{},\"dst_port\":{},\"proto\":{proto},\"bytes\":{bytes},\"packets\":{pkts},\"first_ns\":{first},\"last_ns\":{},\"sampling_interval\":1}}\n",
            30_000 + i,
            2811 + i % 4,
            first + i * 250_000_000
        ));
    }
    let recs = dir.join("recs.jsonl");
    std::fs::write(&recs, text).unwrap();
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cap = Term(
        Command::new("nfcapd")
            .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-t", "60"])
            .args(extra)
            .arg("-w")
            .arg(&flows)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nfcapd not installed: apt-get install nfdump"),
    );
    std::thread::sleep(Duration::from_millis(1000));
    let o = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "export"])
        .arg(&recs)
        .args(["--to", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(1000));
    unsafe { libc::kill(cap.0.id() as i32, libc::SIGTERM) };
    let _ = cap.0.wait();
    let o = Command::new("nfdump")
        .arg("-R")
        .arg(&flows)
        .args(["-o", "csv", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let mut rows = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.first() == Some(&"ts") {
            header = f.iter().map(|s| s.to_string()).collect();
            continue;
        }
        if f.len() < 13 {
            continue;
        }
        let col = |name: &str, default: usize| {
            header
                .iter()
                .position(|h| h == name)
                .map(|i| f[i])
                .unwrap_or(f[default])
        };
        rows.push((
            col("sa", 3).to_string(),
            col("da", 4).to_string(),
            col("sp", 5).parse().unwrap(),
            col("dp", 6).parse().unwrap(),
            col("pr", 7).to_string(),
            col("ipkt", 11).parse().unwrap(),
            col("ibyt", 12).parse().unwrap(),
            col("td", 2).to_string(),
        ));
    }
    (flows, rows)
}

type Row = (String, String, u16, u16, String, u64, u64, String);

#[test]
#[ignore = "needs nfdump (apt-get install nfdump)"]
fn opsel_reads_the_files_nfcapd_writes_as_nfdump_does() {
    for (tag, extra) in [("plain", &[][..]), ("lz4", &["-y"][..])] {
        let (flows, mut want) = capture(tag, extra);
        assert_eq!(want.len(), 200, "{tag}: nfdump read {} records", want.len());
        // The file layout is the one asked for: compression byte 0 or 3.
        let file = std::fs::read_dir(&flows)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("nfcapd.2")
            })
            .expect("nfcapd wrote no nfcapd.YYYYMMDDhhmm file");
        let head = std::fs::read(&file).unwrap();
        assert_eq!(
            head[16],
            if tag == "lz4" { 3 } else { 0 },
            "{tag}: compression byte"
        );
        let out = flows.parent().unwrap().join("read.jsonl");
        let o = Command::new(env!("CARGO_BIN_EXE_opsel"))
            .args(["flows", "read"])
            .arg(&flows)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut got: Vec<Row> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let ns = |k: &str| v[k].as_u64().unwrap();
                let pr = match v["proto"].as_u64().unwrap() {
                    6 => "TCP".to_string(),
                    17 => "UDP".to_string(),
                    p => p.to_string(),
                };
                (
                    v["src_addr"].as_str().unwrap().to_string(),
                    v["dst_addr"].as_str().unwrap().to_string(),
                    v["src_port"].as_u64().unwrap() as u16,
                    v["dst_port"].as_u64().unwrap() as u16,
                    pr,
                    v["packets"].as_u64().unwrap(),
                    v["bytes"].as_u64().unwrap(),
                    format!("{:.3}", (ns("last_ns") - ns("first_ns")) as f64 / 1e9),
                )
            })
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{tag}: opsel flows read vs nfdump -o csv");
        // And the study reads the directory directly.
        let o = Command::new(env!("CARGO_BIN_EXE_opsel"))
            .args(["flows", "report"])
            .arg(&flows)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::remove_dir_all(flows.parent().unwrap()).ok();
    }
}
