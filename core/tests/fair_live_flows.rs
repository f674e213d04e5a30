//! Two live DPS flows of one process under the host-local manager service
//! (the library case of 002 §4.6): each flow is a `dps::LiveFlow` with its
//! own `fair::ManagerClient`, exactly what `opsel send --dps --fair` runs.
//! The link is scripted (cubic starves vegas, every other pairing splits
//! evenly); time is the flows' feedback clock, so only the manager's
//! evaluation thread runs on real time (this test asserts turns and
//! admission, which do not depend on it).
#![cfg(target_os = "linux")]

use opsel::dps::{DpsSpec, Feedback, LiveFlow, LiveOutput};
use opsel::fair::{Command, FairnessSpec, ManagerClient, ManagerService};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn link(ccas: [Option<&str>; 2]) -> [f64; 2] {
    match ccas {
        [Some("cubic"), Some("vegas")] => [9.0, 1.0],
        [Some("vegas"), Some("cubic")] => [1.0, 9.0],
        [Some(_), Some(_)] => [5.0, 5.0],
        [Some(_), None] => [9.7, 0.0],
        [None, Some(_)] => [0.0, 9.7],
        [None, None] => [0.0, 0.0],
    }
}

#[test]
fn two_flows_of_one_process_take_turns_through_the_service() {
    let name = format!("opsel-fair-live-{}", std::process::id());
    let svc =
        ManagerService::bind_abstract(&name, FairnessSpec::default(), Duration::from_millis(20))
            .unwrap();
    let mut spec = DpsSpec::table_5_3(&["cubic", "vegas"]);
    spec.selection_period_ms = 400;
    spec.random_period_ms = 200;
    spec.guard.ms = 50;
    let flow = |k: u64| {
        let mut s = spec.clone();
        s.seed = k;
        let c = ManagerClient::connect_abstract(&name, k + 1).unwrap();
        let mut f = LiveFlow::managed(&s, c, Duration::from_millis(100)).unwrap();
        f.start(0).unwrap();
        f
    };
    // The first flow is admitted at once (it registered first); the
    // second, registered after it, waits for its turn.
    let mut now = 0u64;
    let mut flows = vec![flow(0)];
    flows[0]
        .admit(Duration::from_secs(10), &mut || now)
        .unwrap();
    assert!(flows[0].admitted());
    flows.push(flow(1));
    let mut log: Vec<(u64, usize, Command)> = Vec::new();
    let mut unlocked = [false; 2];
    let mut marked = 0;
    for step in 1..=3000u64 {
        now = step * 10 * MS;
        let ccas = [0, 1].map(|k| {
            flows[k]
                .admitted()
                .then(|| flows[k].current().unwrap().as_str().to_string())
        });
        let rates = link([ccas[0].as_deref(), ccas[1].as_deref()]);
        for k in 0..2 {
            let fb = Feedback {
                sending_rate_mbps: Some(rates[k]),
                ..Feedback::sender(now, 80.0, rates[k])
            };
            flows[k].on_interval(&fb).unwrap();
            while let Some(o) = flows[k].poll() {
                match o {
                    LiveOutput::Command(c) => {
                        match c {
                            Command::Unlock { .. } => {
                                assert!(
                                    !unlocked[1 - k],
                                    "flow {k} unlocked while flow {} is: {log:?}",
                                    1 - k
                                );
                                unlocked[k] = true;
                            }
                            Command::Lock => unlocked[k] = false,
                            Command::Violation { .. } => {}
                        }
                        log.push((now, k, c));
                    }
                    LiveOutput::Event(opsel::dps::Event::MarkedViolating { .. }) => marked += 1,
                    _ => {}
                }
            }
        }
        if step % 50 == 0 {
            // Let the service's evaluation thread see the latest rates.
            std::thread::sleep(Duration::from_millis(25));
        }
    }
    assert!(flows.iter().all(LiveFlow::admitted), "{log:?}");
    let unlocks = |k: usize| {
        log.iter()
            .filter(|(_, f, c)| *f == k && matches!(c, Command::Unlock { .. }))
            .count()
    };
    assert!(unlocks(0) >= 2 && unlocks(1) >= 2, "{log:?}");
    // Every unlock of a flow with another flow locked carries that flow's
    // CCA as its State (002 §4.6).
    assert!(log
        .iter()
        .any(|(_, _, c)| matches!(c, Command::Unlock { state } if state.len() == 1)));
    let stats = svc.stats().unwrap();
    assert!(stats.unlocks >= 4, "{stats:?}");
    // Violations depend on the service's real-time evaluation and are
    // covered with the sans-IO manager in fair_manager_agents.rs.
    let _ = marked;
}

/// A flow waits for its turn: while another flow holds the unlock, a second
/// flow is not admitted, and a bounded wait ends with an error that says why.
#[test]
fn a_flow_waiting_for_its_turn_times_out_with_a_clear_error() {
    let name = format!("opsel-fair-wait-{}", std::process::id());
    let _svc =
        ManagerService::bind_abstract(&name, FairnessSpec::default(), Duration::from_millis(50))
            .unwrap();
    let spec = DpsSpec::table_5_3(&["cubic", "reno"]);
    let flow = |k: u64| {
        let c = ManagerClient::connect_abstract(&name, k).unwrap();
        let mut f = LiveFlow::managed(&spec, c, Duration::from_millis(100)).unwrap();
        f.start(0).unwrap();
        f
    };
    // Registered one after the other, so flow 1 is first in the round robin.
    let mut flows = vec![flow(1)];
    flows[0].admit(Duration::from_secs(10), &mut || 0).unwrap();
    flows.push(flow(2));
    // Flow 1 learns for 60 s of its own clock; no time passes here, so
    // flow 2 keeps waiting.
    let e = flows[1]
        .admit(Duration::from_millis(300), &mut || 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("did not admit this flow"), "{e}");
    assert!(!flows[1].admitted());
    // A zero report interval is refused.
    let c = ManagerClient::connect_abstract(&name, 3).unwrap();
    let e = LiveFlow::managed(&spec, c, Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(e.contains("must be > 0"), "{e}");
}

/// Unmanaged, a live flow is the plain agent: admitted at once, it decides
/// and asks for its first CCA on start.
#[test]
fn an_unmanaged_flow_decides_at_start() {
    let mut f = LiveFlow::unmanaged(&DpsSpec::table_5_2(&["cubic", "reno"], 1.0)).unwrap();
    f.start(0).unwrap();
    f.admit(Duration::ZERO, &mut || 0).unwrap();
    assert!(f.admitted());
    let mut set = None;
    while let Some(o) = f.poll() {
        if let LiveOutput::SetCca(c) = o {
            set = Some(c);
        }
    }
    assert_eq!(set, f.current());
    assert!(set.is_some());
}
