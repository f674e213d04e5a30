//! `opsel flows collect` on a real UDP socket on loopback: NetFlow v5, v9 and
//! IPFIX datagrams built here are sent to it; its records file and α report
//! must hold exactly what was sent (with the exporters' sampling applied), a
//! malformed datagram must be reported and skipped, and `opsel flows report`
//! over the records file must reproduce the collector's report.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};

use opsel::flows::export::{encode_ipfix, encode_v5, encode_v9};
use opsel::flows::FlowRecord;

const S: u64 = 1_000_000_000;

fn rec(src: &str, dst: &str, sport: u16, bytes: u64, first_s: u64) -> FlowRecord {
    FlowRecord {
        src_addr: src.parse().unwrap(),
        dst_addr: dst.parse().unwrap(),
        src_port: sport,
        dst_port: 2811,
        proto: 6,
        bytes,
        packets: bytes / 1448 + 1,
        first_ns: first_s * S,
        last_ns: (first_s + 50) * S,
        sampling_interval: 1,
    }
}

#[test]
fn collect_decodes_v5_v9_ipfix_from_loopback_and_report_agrees() {
    let dir = std::env::temp_dir().join(format!("opsel-flows-collect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let records = dir.join("records.jsonl");
    let report = dir.join("report.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args([
            "flows",
            "collect",
            "--listen",
            "127.0.0.1:0",
            "--count",
            "4",
            "--duration",
            "30",
        ])
        .arg("--records")
        .arg(&records)
        .arg("--report")
        .arg(&report)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr: SocketAddr = first
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no address in {first:?}"));

    let t0 = 1_700_000_000u64;
    // Day 0 of the export: two α reports (1.5 GB, 1.2 GB corrected at 1-in-1000)
    // between 10.0.0.0/24 and 10.1.0.0/24, one β report, one IPv6 β report.
    let v5 = [rec("10.0.0.1", "10.1.0.1", 40000, 1_500_000, t0 - 100)];
    let v9 = [
        rec("10.0.0.2", "10.1.0.7", 40001, 1_200_000, t0 - 80),
        rec("2001:db8::1", "2001:db8:1::1", 40002, 3_000, t0 - 70),
    ];
    let ipfix = [rec("10.0.0.3", "10.1.0.1", 40003, 20_000, t0 - 60)];
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut p = Vec::new();
    encode_v5(&v5, t0 * S, 10_000_000, 1000, 1, &mut p).unwrap();
    sock.send_to(&p, addr).unwrap();
    encode_v9(&v9, t0 as u32, 10_000_000, 1, 1, true, Some(1000), &mut p).unwrap();
    sock.send_to(&p, addr).unwrap();
    sock.send_to(&[0, 9, 0, 1, 2, 3], addr).unwrap(); // malformed v9
    encode_ipfix(&ipfix, t0 as u32, 1, 1, true, Some(1000), &mut p).unwrap();
    sock.send_to(&p, addr).unwrap();

    let status = child.wait().unwrap();
    let mut rest = String::new();
    for l in err.lines() {
        rest.push_str(&l.unwrap());
        rest.push('\n');
    }
    assert!(status.success(), "collector failed: {rest}");
    assert!(
        rest.contains("4 datagram(s), 1 malformed, 4 record(s)"),
        "{rest}"
    );
    assert!(
        rest.contains("NetFlow v9 header"),
        "malformed datagram not reported: {rest}"
    );

    let got: Vec<FlowRecord> = std::fs::read_to_string(&records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut want: Vec<FlowRecord> = v5.iter().chain(&v9).chain(&ipfix).copied().collect();
    for r in &mut want {
        r.sampling_interval = 1000;
    }
    assert_eq!(got, want);

    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(rep["records"], 4);
    let day = &rep["days"][0];
    assert_eq!(day["alpha_reports"], 2);
    let pf = &day["prefix_flows"][0];
    assert_eq!(pf["id"]["src"], "10.0.0.0/24");
    assert_eq!(pf["id"]["dst"], "10.1.0.0/24");
    assert_eq!(pf["alpha_bytes"], 2_700_000_000u64);
    // α-intervals [t0−100, t0−50] and [t0−80, t0−30] overlap: union 70 s (eq 3.3).
    assert_eq!(pf["alpha_time_ns"], 70 * S);

    // The offline report over the records file says the same.
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report"])
        .arg(&records)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rep2: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep, rep2);

    // Data doors (§3.6.3): one known door inside the α pair's source /24.
    let doors = dir.join("doors.txt");
    std::fs::write(&doors, "# DTNs\n10.0.0.1\n192.0.2.0/24\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report", "--doors"])
        .arg(&doors)
        .arg(&records)
        .output()
        .unwrap();
    let rep_d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &rep_d["days"][0]["doors"];
    assert_eq!(
        (d["ids_matched"].as_u64(), d["ids_total"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(rep["days"][0]["doors"], serde_json::Value::Null);

    // /32 IDs split the pair; a bad flag value is a clear error.
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report", "--prefix-len", "32"])
        .arg(&records)
        .output()
        .unwrap();
    let rep32: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rep32["days"][0]["prefix_flows"].as_array().unwrap().len(),
        2
    );
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report", "--prefix-len", "40"])
        .arg(&records)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("prefix_len_v4 40"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn report_names_the_bad_line() {
    let p = std::env::temp_dir().join(format!("opsel-flows-bad-{}.jsonl", std::process::id()));
    std::fs::write(&p, "\n{\"src_addr\": 5}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("line 2: not a flow record"), "{e}");
    std::fs::remove_file(&p).ok();
}

/// Without a records file the collector keeps the records for its report and
/// prints the report on stdout.
#[test]
fn collect_without_a_records_file_reports_on_stdout() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args([
            "flows",
            "collect",
            "--listen",
            "127.0.0.1:0",
            "--count",
            "1",
            "--duration",
            "30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr: SocketAddr = first.trim().rsplit(' ').next().unwrap().parse().unwrap();
    let t0 = 1_700_000_000u64;
    let mut p = Vec::new();
    encode_v5(
        &[rec("10.0.0.1", "10.1.0.1", 1, 2_000_000, t0 - 100)],
        t0 * S,
        10_000_000,
        1000,
        1,
        &mut p,
    )
    .unwrap();
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(&p, addr)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["records"], 1);
    assert_eq!(rep["days"][0]["alpha_bytes"], 2_000_000_000u64);
}

/// `flows synth` writes a seeded record file that `flows report` reads back.
#[test]
fn synth_then_report() {
    let p = std::env::temp_dir().join(format!("opsel-flows-synth-{}.jsonl", std::process::id()));
    let run = |seed: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
            .args(["flows", "synth", "--days", "3", "--seed", seed, "--out"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&p).unwrap()
    };
    let a = run("5");
    assert_eq!(a, run("5"), "same seed, same records");
    let n = a.lines().count() as u64;
    assert!(n > 100);
    let out = Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(["flows", "report"])
        .arg(&p)
        .output()
        .unwrap();
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["records"], n);
    assert_eq!(rep["days"].as_array().unwrap().len(), 3);
    std::fs::remove_file(&p).ok();
}
