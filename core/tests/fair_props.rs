//! Fairness-manager invariants under random event sequences (002 §4.6):
//! at most one flow is unlocked at a time, and exactly one while any flow is
//! registered; Unlock states list only other flows' locked CCAs; commands
//! go only to registered flows; bad events are errors, never panics.

use opsel::fair::{Command, FairnessSpec, FlowReport, FlowState, Manager};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Ev {
    Register(u64),
    Deregister(u64),
    Learnt(u64),
    Locked(u64, u8),
    Rate(u64, f64),
    Evaluate,
}

fn ev() -> impl Strategy<Value = Ev> {
    let id = 0u64..6;
    prop_oneof![
        id.clone().prop_map(Ev::Register),
        id.clone().prop_map(Ev::Deregister),
        id.clone().prop_map(Ev::Learnt),
        (id.clone(), 0u8..3).prop_map(|(i, c)| Ev::Locked(i, c)),
        (id, 0.0f64..20.0).prop_map(|(i, r)| Ev::Rate(i, r)),
        Just(Ev::Evaluate),
    ]
}

const CCAS: [&str; 3] = ["bbr", "cubic", "reno"];

proptest! {
    #[test]
    fn one_unlocked_flow(events in prop::collection::vec(ev(), 1..200)) {
        let mut m = Manager::new(FairnessSpec::default()).unwrap();
        let mut registered: Vec<u64> = Vec::new();
        for e in events {
            let r = match &e {
                Ev::Register(i) => m.register(*i),
                Ev::Deregister(i) => m.deregister(*i),
                Ev::Learnt(i) => m.handle_report(*i, &FlowReport::Learnt),
                Ev::Locked(i, c) => m.handle_report(*i, &FlowReport::Locked { cca: CCAS[*c as usize].into() }),
                Ev::Rate(i, r) => m.report_rate(*i, *r),
                Ev::Evaluate => { m.evaluate(); Ok(()) }
            };
            match &e {
                Ev::Register(i) => {
                    prop_assert_eq!(r.is_ok(), !registered.contains(i));
                    if !registered.contains(i) { registered.push(*i); }
                }
                Ev::Deregister(i) => {
                    prop_assert_eq!(r.is_ok(), registered.contains(i));
                    registered.retain(|x| x != i);
                }
                Ev::Evaluate => {}
                Ev::Learnt(i) | Ev::Locked(i, _) | Ev::Rate(i, _) => {
                    prop_assert_eq!(r.is_ok(), registered.contains(i), "{:?}", e);
                }
            }
            let active: Vec<u64> = registered
                .iter()
                .copied()
                .filter(|i| matches!(m.flow(*i).unwrap().0, FlowState::Unlocked | FlowState::Locking))
                .collect();
            prop_assert_eq!(active.len(), usize::from(!registered.is_empty()), "{:?}", active);
            prop_assert_eq!(m.unlocked(), active.first().copied());
            while let Some((flow, cmd)) = m.poll() {
                prop_assert!(registered.contains(&flow), "command to unregistered flow {}", flow);
                if let Command::Unlock { state } | Command::Violation { state } = &cmd {
                    // Only CCAs of locked flows other than the recipient.
                    let others: Vec<String> = registered
                        .iter()
                        .filter(|&&i| i != flow)
                        .filter_map(|&i| match m.flow(i).unwrap() {
                            (FlowState::Locked, Some(c)) => Some(c.to_string()),
                            _ => None,
                        })
                        .collect();
                    prop_assert!(state.len() <= others.len());
                    prop_assert!(state.windows(2).all(|w| w[0] <= w[1]), "unsorted {:?}", state);
                    for c in state { prop_assert!(others.contains(c), "{} not locked by another flow", c); }
                }
            }
            if let Some(j) = m.last_jain() {
                prop_assert!((0.0..=1.0).contains(&j));
            }
        }
    }
}
