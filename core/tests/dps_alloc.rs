//! DPS allocates nothing per sample: the agent's feedback path (monitoring
//! and guard), the OPS policy's observe hook, and the fairness manager's rate
//! reports and Jain/Alg 4 evaluation, proven with a counting global
//! allocator. Own test binary because it replaces the global allocator.

use opsel::dps::{Agent, DpsPolicy, DpsSpec, Feedback, Phase};
use opsel::fair::{FairnessSpec, FlowReport, Manager};
use opsel::ops::Policy;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::count;

const S: u64 = 1_000_000_000;

#[test]
fn agent_feedback_path_does_not_allocate() {
    let mut spec = DpsSpec::table_5_2(&["cubic", "bbr", "reno"], 0.25);
    spec.selection_period_ms = 10_000_000; // one long period: only samples
    spec.random_period_ms = 10_000_000;
    let mut a = Agent::new(&spec).unwrap();
    a.start(0).unwrap();
    while a.poll().is_some() {}
    assert!(matches!(a.phase(), Phase::Guard { .. }));
    let ((), n) = count(|| {
        for t in 1..5000u64 {
            let fb = Feedback::sender(t * S, 40.0 + (t % 300) as f64, 9.0 + (t % 7) as f64 * 0.1);
            a.handle_feedback(t * S, &fb).unwrap();
            a.handle_timeout(t * S).unwrap();
            let _ = a.poll_timeout();
            while a.poll().is_some() {}
        }
    });
    assert_eq!(n, 0, "feedback path allocated");
    // The samples were really counted: the guard ended and monitoring runs.
    assert!(matches!(a.phase(), Phase::Monitor { .. }));
    assert_eq!(a.stats().guarded_samples, 10);
}

#[test]
fn whole_cycles_after_warm_up_do_not_allocate() {
    // Period ends, Alg 2 merges, Alg 3/Alg 1 decisions and switches reuse
    // the database row and the preallocated output queue.
    let mut spec = DpsSpec::table_5_2(&["cubic", "bbr", "reno"], 0.5);
    spec.guard.ms = 1000;
    spec.selection_period_ms = 6000;
    spec.random_period_ms = 3000;
    let mut a = Agent::new(&spec).unwrap();
    a.start(0).unwrap();
    let feed = |a: &mut Agent, from: u64, to: u64| {
        for t in from..to {
            let tput = match a.current().unwrap().as_str() {
                "cubic" => 9.7,
                "bbr" => 9.2,
                _ => 8.4,
            };
            a.handle_feedback(t * S, &Feedback::sender(t * S, 60.0, tput))
                .unwrap();
            while a.poll().is_some() {}
        }
    };
    feed(&mut a, 1, 200);
    let cycles = a.stats().cycles;
    let ((), n) = count(|| feed(&mut a, 200, 2000));
    assert_eq!(n, 0, "decision cycles allocated");
    assert!(a.stats().cycles > cycles + 100, "cycles ran");
}

#[test]
fn policy_observe_does_not_allocate() {
    let mut p = DpsPolicy::new(&DpsSpec::table_5_2(&["cubic", "bbr"], 0.5)).unwrap();
    let ((), n) = count(|| {
        for t in 1..2000u64 {
            p.observe(&Feedback::sender(t * S, 50.0, 9.6)).unwrap();
        }
    });
    assert_eq!(n, 0, "observe allocated");
}

#[test]
fn manager_rate_path_does_not_allocate() {
    let mut m = Manager::new(FairnessSpec::default()).unwrap();
    for id in 0..4 {
        m.register(id).unwrap();
    }
    // Admit all four: each learns and locks in turn.
    for id in 0..4 {
        m.handle_report(id, &FlowReport::Learnt).unwrap();
        m.handle_report(
            id,
            &FlowReport::Locked {
                cca: "cubic".into(),
            },
        )
        .unwrap();
    }
    while m.poll().is_some() {}
    let ((), n) = count(|| {
        for t in 0..5000u64 {
            for id in 0..4 {
                m.report_rate(id, 1.0 + ((t + id) % 5) as f64).unwrap();
            }
            let _ = m.evaluate();
        }
    });
    assert_eq!(n, 0, "manager rate path allocated");
    assert_eq!(m.stats().fairness_samples, 5000);
}
