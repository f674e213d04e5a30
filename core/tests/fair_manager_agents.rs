//! The fairness manager coordinating real DPS agents in one process (002
//! §4.6, Fig 4.4): round-robin unlocks with State keys, a violation marking
//! the unlocked flow's CCA for its State, and locks that avoid it.

use opsel::dps::{Agent, DpsSpec, Event, Feedback, Output};
use opsel::fair::{Command, FairnessSpec, FlowReport, Manager};

const S: u64 = 1_000_000_000;

/// A link where cubic starves vegas (9 : 1, Jain 0.61) and every other
/// pairing splits evenly; alone, a flow gets 9.7 Mbps.
fn link(ccas: [Option<&str>; 2]) -> [f64; 2] {
    match ccas {
        [Some(a), Some(b)] if a == b => [5.0, 5.0],
        [Some("cubic"), Some("vegas")] => [9.0, 1.0],
        [Some("vegas"), Some("cubic")] => [1.0, 9.0],
        [Some(_), Some(_)] => [5.0, 5.0],
        [Some(_), None] => [9.7, 0.0],
        [None, Some(_)] => [0.0, 9.7],
        [None, None] => [0.0, 0.0],
    }
}

#[test]
fn fig_4_4_with_agents() {
    let mut spec = DpsSpec::table_5_3(&["cubic", "vegas"]);
    spec.guard.ms = 1000;
    spec.selection_period_ms = 20_000;
    spec.random_period_ms = 10_000;
    let mut agents = [
        Agent::managed(&spec).unwrap(),
        Agent::managed(&spec).unwrap(),
    ];
    let mut m = Manager::new(FairnessSpec::default()).unwrap();
    for (k, a) in agents.iter_mut().enumerate() {
        a.start(0).unwrap();
        m.register(k as u64).unwrap();
    }
    let mut admitted = [false; 2];
    let mut log: Vec<(u64, u64, Command)> = Vec::new();
    let mut reports: Vec<(u64, u64, FlowReport)> = Vec::new();
    let mut marked: Vec<(u64, String, String)> = Vec::new();
    for t in 1..=1500u64 {
        let now = t * S;
        loop {
            let mut moved = false;
            while let Some((flow, cmd)) = m.poll() {
                admitted[flow as usize] = true;
                agents[flow as usize].handle_command(now, &cmd).unwrap();
                log.push((t, flow, cmd));
                moved = true;
            }
            for (k, a) in agents.iter_mut().enumerate() {
                while let Some(o) = a.poll() {
                    moved = true;
                    match o {
                        Output::Report(r) => {
                            m.handle_report(k as u64, &r).unwrap();
                            reports.push((t, k as u64, r));
                        }
                        Output::Event(Event::MarkedViolating { cca }) => {
                            marked.push((k as u64, a.state_key().to_string(), cca.to_string()))
                        }
                        _ => {}
                    }
                }
            }
            if !moved {
                break;
            }
        }
        let ccas =
            [0, 1].map(|k| admitted[k].then(|| agents[k].current().unwrap().as_str().to_string()));
        let rates = link([ccas[0].as_deref(), ccas[1].as_deref()]);
        for k in 0..2 {
            if admitted[k] {
                let fb = Feedback::sender(now, 80.0, rates[k]);
                agents[k].handle_feedback(now, &fb).unwrap();
                m.report_rate(k as u64, rates[k]).unwrap();
            }
        }
        m.evaluate();
    }
    // Step 1: flow 0 is unlocked first with the empty State.
    assert_eq!(log[0], (1, 0, Command::Unlock { state: vec![] }));
    // Flow 1 is not admitted until flow 0 has learnt and locked.
    let first_unlock_1 = log
        .iter()
        .position(|(_, f, c)| *f == 1 && matches!(c, Command::Unlock { .. }))
        .unwrap();
    assert!(log[..first_unlock_1]
        .iter()
        .any(|(_, f, c)| *f == 0 && *c == Command::Lock));
    let (_, _, Command::Unlock { state }) = &log[first_unlock_1] else {
        unreachable!()
    };
    let flow0_locked = reports.iter().find_map(|(_, f, r)| match r {
        FlowReport::Locked { cca } if *f == 0 => Some(cca.clone()),
        _ => None,
    });
    // Step 5: flow 1's State is what flow 0 locked to.
    assert_eq!(state, &vec![flow0_locked.clone().unwrap()]);
    // Step 6: a violation struck an unlocked flow and marked its CCA for its
    // State; the only unfair pairing is cubic against vegas.
    assert!(m.stats().violations >= 1, "{:?}", m.stats());
    assert!(!marked.is_empty(), "no CCA was marked violating");
    for (_, key, cca) in &marked {
        assert!(
            (key == "cubic" && cca == "vegas") || (key == "vegas" && cca == "cubic"),
            "{key} / {cca}"
        );
    }
    // The turn goes round: both flows locked more than once.
    for k in 0..2u64 {
        let locks = reports
            .iter()
            .filter(|(_, f, r)| *f == k && matches!(r, FlowReport::Locked { .. }))
            .count();
        assert!(locks >= 2, "flow {k} locked {locks} times");
    }
    // In the end both flows are locked to the same CCA (the fair pairing).
    let last: Vec<String> = [0u64, 1]
        .iter()
        .map(|k| {
            reports
                .iter()
                .rev()
                .find_map(|(_, f, r)| match r {
                    FlowReport::Locked { cca } if f == k => Some(cca.clone()),
                    _ => None,
                })
                .unwrap()
        })
        .collect();
    assert_eq!(last[0], last[1], "{last:?}");
}
