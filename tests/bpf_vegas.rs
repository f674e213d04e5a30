//! The BPF Vegas congestion control (core/bpf/opsel_vegas.bpf.c) on netlab,
//! run as root by `make test-bpf-cca`, which compiles and registers it first.
//!
//! Vegas is delay-based (002 §5.1 uses it as the portfolio's low-delay CCA):
//! alone on a 50 Mbit/s, 40 ms path with a 2 × BDP drop-tail buffer it should
//! fill the link while keeping a few packets queued, where CUBIC fills the
//! buffer. Against CUBIC it yields (002 Fig 5.7 pairs it with the lowest
//! fairness), which the shared run checks too.

use opsel_netlab::run::{run_in_lab, RunResult};
use opsel_netlab::scenario::Scenario;
use opsel_netlab::topo::{self, Lab};

const RATE_MBPS: f64 = 50.0;
const HEAD: &str = r#"
measure_from_s = 8.0
[topology]
pairs = 2
mtu = 1500
[pipe]
kind = "tun"
rate_mbps = 50.0
delay_ms = 20.0
buffer_bdp = 2.0
seed = 1
[probe]
enabled = true
pair = 0
"#;

fn flow(name: &str, pair: usize, cca: &str) -> String {
    format!("[[flows]]\nname = \"{name}\"\npair = {pair}\ntype = \"tcp\"\ncca = \"{cca}\"\nstart_s = 0.0\n")
}

fn run(lab: &Lab, name: &str, flows: &[String]) -> RunResult {
    let text = format!(
        "name = \"{name}\"\nduration_s = 22.0\n{HEAD}{}",
        flows.concat()
    );
    let scn = Scenario::from_toml(&text).expect("test scenario is valid");
    let r = run_in_lab(&scn, lab, &mut |_, _| {}).expect("run");
    let s = &r.summary;
    eprintln!(
        "{name}: total {:.1} Mbit/s, flows {:?}, queue mean {:.0} B of {} B, RTT mean {:.1} ms",
        s.total_mbps,
        s.flows
            .iter()
            .map(|f| (f.name.as_str(), (f.mean_mbps * 10.0).round() / 10.0))
            .collect::<Vec<_>>(),
        s.queue_mean_bytes,
        s.buffer_bytes,
        s.rtt_mean_ms.unwrap_or(f64::NAN)
    );
    r
}

#[test]
#[ignore = "needs root and a registered opsel_vegas; run by `make test-bpf-cca`"]
fn vegas_is_delay_based_on_netlab() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "needs root: `sudo make test-bpf-cca`"
    );
    let avail = opsel::sys::linux::cca::available_ccas().expect("read the kernel's CCA list");
    assert!(
        avail.iter().any(|c| c == "opsel_vegas"),
        "opsel_vegas is not registered (kernel offers {avail:?}): run `make bpf-vegas` first"
    );
    let _ = topo::down(false);
    let base = Scenario::from_toml(&format!("name = \"lab\"\nduration_s = 22.0\n{HEAD}")).unwrap();
    let lab = Lab::up(&base.topology_spec(), &base.pipe_spec().unwrap()).expect("lab up");

    let vegas = run(&lab, "vegas-alone", &[flow("vegas", 0, "opsel_vegas")]).summary;
    let cubic = run(&lab, "cubic-alone", &[flow("cubic", 0, "cubic")]).summary;
    let shared = run(
        &lab,
        "vegas-vs-cubic",
        &[flow("vegas", 0, "opsel_vegas"), flow("cubic", 1, "cubic")],
    )
    .summary;

    assert!(
        vegas.total_mbps >= 0.85 * RATE_MBPS,
        "Vegas alone reached {:.1} Mbit/s of {RATE_MBPS}",
        vegas.total_mbps
    );
    assert!(
        cubic.queue_mean_bytes >= 0.4 * cubic.buffer_bytes as f64,
        "CUBIC should fill the drop-tail buffer: mean queue {:.0} of {} bytes",
        cubic.queue_mean_bytes,
        cubic.buffer_bytes
    );
    assert!(
        vegas.queue_mean_bytes <= 0.2 * cubic.queue_mean_bytes,
        "Vegas's mean queue {:.0} B is not well below CUBIC's {:.0} B: not delay-based",
        vegas.queue_mean_bytes,
        cubic.queue_mean_bytes
    );
    let share = |s: &opsel_netlab::run::Summary, n: &str| {
        s.flows
            .iter()
            .find(|f| f.name == n)
            .map(|f| f.mean_mbps)
            .unwrap()
    };
    assert!(
        share(&shared, "vegas") < share(&shared, "cubic"),
        "Vegas should yield to CUBIC in a shared drop-tail queue"
    );
}
