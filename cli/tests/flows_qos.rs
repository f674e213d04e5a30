//! `opsel flows qos`: 003's two-queue advice as tc commands.
//!
//! The first tests need no privileges (printing and input errors). The
//! ignored one needs root: it creates two namespaces of its own (`oqs…`),
//! joins them by a veth pair, installs the plan on one end with
//! `opsel flows qos --apply --netns`, and checks with `tc -s class show` that
//! packets of the α prefix ID land in the α class and everything else in β:
//! `cargo test -p opsel-cli --test flows_qos -- --ignored`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn opsel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opsel"))
        .args(args)
        .output()
        .unwrap()
}

fn tmp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("opsel-qos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn prints_the_plan_from_a_prefix_file_and_a_report() {
    let f = tmp("ids.txt", "10.1.2.0/24 -> 10.3.4.0/24\n");
    let o = opsel(&[
        "flows",
        "qos",
        f.to_str().unwrap(),
        "--dev",
        "eth1",
        "--rate-mbps",
        "100",
        "--preset",
        "exp2",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    // Exp 2's 95/5 of 100 Mbit/s and of 1.25 MB, work-conserving.
    assert!(out.contains("classid 1:10 htb rate 95000000bit ceil 100000000bit"));
    assert!(out.contains("classid 1:20 htb rate 5000000bit ceil 100000000bit"));
    assert!(out.contains("parent 1:10 handle 10: bfifo limit 1187500"));
    assert!(out.contains("u32 match ip src 10.1.2.0/24 match ip dst 10.3.4.0/24 flowid 1:10"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("below 30 %"));

    // A report as input: the records of `opsel flows synth` for a few days.
    let recs = tmp("recs.jsonl", "");
    let o = opsel(&[
        "flows",
        "synth",
        "--out",
        recs.to_str().unwrap(),
        "--days",
        "20",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep = recs.with_file_name("report.json");
    let o = opsel(&[
        "flows",
        "report",
        recs.to_str().unwrap(),
        "--out",
        rep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan = |aging: &str| {
        let o = opsel(&[
            "flows",
            "qos",
            rep.to_str().unwrap(),
            "--dev",
            "eth1",
            "--rate-mbps",
            "1000",
            "--json",
            "--aging",
            aging,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["filters"].as_array().unwrap().len()
    };
    let (short, long) = (plan("2"), plan("20"));
    // Shorter aging keeps fewer rules (003 §3.4.1), never more.
    assert!(short >= 1 && long > short, "{short} vs {long}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let f = tmp("bad.txt", "10.1.2.0/24\n");
    let cases: [(&[&str], &str); 4] = [
        (&["--rate-mbps", "100"], "line 1"),
        (&["--rate-mbps", "0"], "--rate-mbps 0"),
        (
            &["--rate-mbps", "100", "--alpha-share", "1.5"],
            "alpha_share 1.5",
        ),
        (
            &["--rate-mbps", "100", "--preset", "fast"],
            "unknown QoS preset",
        ),
    ];
    for (extra, want) in cases {
        let mut a = vec!["flows", "qos", f.to_str().unwrap(), "--dev", "eth1"];
        a.extend_from_slice(extra);
        let o = opsel(&a);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains(want), "{a:?}: {e}");
    }
    let ok = tmp("ok.txt", "10.1.2.0/24 10.3.4.0/24\n");
    let o = opsel(&[
        "flows",
        "qos",
        ok.to_str().unwrap(),
        "--dev",
        "eth0;reboot",
        "--rate-mbps",
        "100",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid name"));
}

struct Netns(Vec<String>);
impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn run(prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog).args(args).output().unwrap();
    assert!(
        o.status.success(),
        "{prog} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Packets sent by htb class `id` in `tc -s class show` output.
fn class_pkts(out: &str, id: &str) -> u64 {
    let head = format!("class htb {id} ");
    let at = out
        .find(&head)
        .unwrap_or_else(|| panic!("no {id} in {out}"));
    let rest = &out[at..];
    let sent = rest.find(" Sent ").unwrap();
    let w: Vec<&str> = rest[sent..].split_whitespace().collect();
    // "Sent <bytes> bytes <pkts> pkt"
    assert_eq!(w[2], "bytes", "{rest}");
    w[3].parse().unwrap()
}

#[test]
#[ignore = "root: creates namespaces and installs tc on a veth"]
fn applied_plan_classifies_alpha_and_beta() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "run as root: the test creates network namespaces"
    );
    let pid = std::process::id();
    let (a, b) = (format!("oqs{pid}a"), format!("oqs{pid}b"));
    run("ip", &["netns", "add", &a]);
    let mut guard = Netns(vec![a.clone()]);
    run("ip", &["netns", "add", &b]);
    guard.0.push(b.clone());
    run(
        "ip",
        &[
            "-n", &a, "link", "add", "name", "qa", "type", "veth", "peer", "name", "qb", "netns",
            &b,
        ],
    );
    for (ns, dev, addrs) in [
        (&a, "qa", ["10.81.0.1/16", "10.81.1.1/16"]),
        (&b, "qb", ["10.81.0.2/16", "10.81.2.2/16"]),
    ] {
        for ad in addrs {
            run("ip", &["-n", ns, "addr", "add", ad, "dev", dev]);
        }
        run("ip", &["-n", ns, "link", "set", dev, "up"]);
        run("ip", &["-n", ns, "link", "set", "lo", "up"]);
    }
    let f = tmp("ids-root.txt", "10.81.1.0/24 -> 10.81.2.0/24\n");
    let o = opsel(&[
        "flows",
        "qos",
        f.to_str().unwrap(),
        "--dev",
        "qa",
        "--netns",
        &a,
        "--rate-mbps",
        "100",
        "--apply",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let show = || run("tc", &["-n", &a, "-s", "class", "show", "dev", "qa"]);
    let s0 = show();
    assert_eq!(class_pkts(&s0, "1:10"), 0, "{s0}");
    let ping = |src: &str, dst: &str, n: &str| {
        run(
            "ip",
            &[
                "netns", "exec", &a, "ping", "-q", "-c", n, "-i", "0.01", "-W", "2", "-I", src, dst,
            ],
        )
    };
    // α: echo requests from the α source /24 to the α destination /24.
    ping("10.81.1.1", "10.81.2.2", "20");
    let s1 = show();
    assert_eq!(class_pkts(&s1, "1:10"), 20, "{s1}");
    let beta1 = class_pkts(&s1, "1:20");
    // β: same link, addresses outside the α prefix ID.
    ping("10.81.0.1", "10.81.0.2", "15");
    ping("10.81.1.1", "10.81.0.2", "5");
    let s2 = show();
    assert_eq!(class_pkts(&s2, "1:10"), 20, "{s2}");
    assert!(class_pkts(&s2, "1:20") >= beta1 + 20, "{s2}");

    let o = opsel(&["flows", "qos", "--dev", "qa", "--netns", &a, "--remove"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let q = run("tc", &["-n", &a, "qdisc", "show", "dev", "qa"]);
    assert!(!q.contains("htb"), "{q}");
    drop(guard);
    assert!(!run("ip", &["netns", "list"]).contains(&a));
}
