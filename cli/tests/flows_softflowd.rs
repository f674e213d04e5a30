//! Real exporter interop: Debian's `softflowd` (1.1.0) watches loopback,
//! exports NetFlow v5, v9 and IPFIX with 1-in-10 sampling to
//! `opsel flows collect`, and the UDP flow this test sends on loopback must
//! come back decoded with the exporter's sampling interval.
//!
//! Needs root (packet capture on `lo`) and `apt-get install softflowd`:
//! `cargo test -p opsel-cli --test flows_softflowd -- --ignored`.
//! Traffic stays on 127.0.0.1 and lasts about 4 s per version.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs root and softflowd (apt-get install softflowd)"]
fn softflowd_exports_decode_with_sampling() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "run as root: softflowd captures on lo"
    );
    let dir = std::env::temp_dir().join(format!("opsel-softflowd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for version in ["5", "9", "10"] {
        let records = dir.join(format!("records-v{version}.jsonl"));
        let mut collector = Kill(
            Command::new(env!("CARGO_BIN_EXE_opsel"))
                .args([
                    "flows",
                    "collect",
                    "--listen",
                    "127.0.0.1:0",
                    "--duration",
                    "8",
                ])
                .arg("--records")
                .arg(&records)
                .arg("--report")
                .arg(dir.join(format!("report-v{version}.json")))
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut err = BufReader::new(collector.0.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr: SocketAddr = line.trim().rsplit(' ').next().unwrap().parse().unwrap();
        let ctl = dir.join(format!("sf-{version}.ctl"));
        let _sfd = Kill(
            Command::new("softflowd")
                .args([
                    "-i", "lo", "-d", "-v", version, "-s", "10", "-t", "expint=1", "-t", "udp=1",
                ])
                .args(["-n", &addr.to_string()])
                .arg("-p")
                .arg(dir.join(format!("sf-{version}.pid")))
                .arg("-c")
                .arg(&ctl)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("softflowd not installed: apt-get install softflowd"),
        );
        std::thread::sleep(Duration::from_millis(1000));
        // The flow to find: 300 UDP datagrams of 1000 bytes to a port of our own.
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dport = sink.local_addr().unwrap().port();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..300 {
            tx.send_to(&[0x55; 1000], ("127.0.0.1", dport)).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(1500));
        let st = Command::new("softflowctl")
            .arg("-c")
            .arg(&ctl)
            .arg("expire-all")
            .status()
            .unwrap();
        assert!(st.success());
        let status = collector.0.wait().unwrap();
        let mut rest = String::new();
        for l in err.lines() {
            rest.push_str(&l.unwrap());
            rest.push('\n');
        }
        assert!(status.success(), "v{version}: {rest}");
        assert!(rest.contains(" 0 malformed"), "v{version}: {rest}");
        let recs: Vec<serde_json::Value> = std::fs::read_to_string(&records)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ours: Vec<&serde_json::Value> = recs
            .iter()
            .filter(|r| r["dst_port"] == u64::from(dport) && r["proto"] == 17)
            .collect();
        assert!(
            !ours.is_empty(),
            "v{version}: our flow is missing from {recs:?}"
        );
        for r in ours {
            assert_eq!(r["sampling_interval"], 10, "v{version}: {r}");
            assert_eq!(r["src_addr"], "127.0.0.1");
            let (b, p) = (r["bytes"].as_u64().unwrap(), r["packets"].as_u64().unwrap());
            // IPv4 + UDP headers + 1000 bytes of payload per packet.
            assert!(
                p > 0 && b == p * 1028,
                "v{version}: {b} bytes in {p} packets"
            );
            assert!(r["last_ns"].as_u64() >= r["first_ns"].as_u64());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
