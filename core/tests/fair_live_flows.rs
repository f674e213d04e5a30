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
    let mut flows: Vec<LiveFlow> = (0..2u64)
        .map(|k| {
            let mut s = spec.clone();
            s.seed = k;
            let c = ManagerClient::connect_abstract(&name, k + 1).unwrap();
            LiveFlow::managed(&s, c, Duration::from_millis(100)).unwrap()
        })
        .collect();
    let mut now = 0u64;
    for f in &mut flows {
        f.start(now).unwrap();
    }
    // The first flow is admitted at once; the second waits for its turn.
    flows[0]
        .admit(Duration::from_secs(10), &mut || now)
        .unwrap();
    assert!(flows[0].admitted());
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
