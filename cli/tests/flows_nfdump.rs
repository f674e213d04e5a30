//! nfdump interop: `opsel flows export` sends a record file as IPFIX to
//! nfdump's collector `nfcapd`, and `nfdump -o csv` must read back every
//! record with its addresses, ports, protocol, bytes and packets.
//!
//! Needs `apt-get install nfdump` (no root; loopback only, about 3 s):
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
