//! DPS plugged into the OPS controller as its policy: the recognised
//! background mix is DPS's network-state label, each steady phase is a
//! monitoring period, and the driver feeds steady-phase feedback through a
//! clone of the policy or through the controller's feedback hook
//! (`Controller::handle_feedback`, what `OpsDriver` calls each interval).
//! Against alternating backgrounds, DPS learns the CCA that meets the QoS in
//! each.

use opsel::dps::{DpsPolicy, DpsSpec, Feedback, Guard};
use opsel::ops::doubles::ScriptedClassifier;
use opsel::ops::{Config, Controller, Event, Output, Phase, Policy};

const S: u64 = 1_000_000_000;

#[test]
fn ops_controller_with_dps_policy() {
    learns_per_background(false);
}

#[test]
fn feedback_through_the_controller_hook_teaches_the_policy() {
    learns_per_background(true);
}

/// `hook`: feedback goes through `Controller::handle_feedback`, else straight
/// to a clone of the policy.
fn learns_per_background(hook: bool) {
    let classes = ["B0-C1", "B1-C0"];
    let classifier = ScriptedClassifier::new(5, &classes, &[("B0-C1", 0.9), ("B1-C0", 0.9)])
        .unwrap()
        .background_classes();
    let mut spec = DpsSpec::table_5_2(&["cubic", "bbr"], 0.1);
    spec.guard = Guard { ms: 2000, rtts: 0 };
    spec.seed = 4;
    let policy = DpsPolicy::new(&spec).unwrap();
    let mut feeder = policy.clone();
    let mut cfg = Config::passive();
    cfg.steady_ns = 30 * S;
    let mut ops = Controller::new(cfg, classifier, policy.clone()).unwrap();
    ops.start(0).unwrap();
    let mut cca = String::from("cubic");
    let mut decisions: Vec<(usize, String)> = Vec::new();
    for t in 1..=3000u64 {
        let now = t * S;
        ops.handle_timeout(now).unwrap();
        ops.handle_sample(now, 70.0).unwrap();
        while let Some(out) = ops.poll() {
            match out {
                Output::Action(opsel::ops::Action::SetCca(c)) => cca = c.to_string(),
                Output::Event(Event::Selected { cca: c, .. }) => {
                    decisions.push((decisions.len(), c.to_string()))
                }
                _ => {}
            }
        }
        if ops.phase() == Phase::Steady && !decisions.is_empty() {
            // The scripted background of the current cycle.
            let bg = classes[(decisions.len() - 1) % 2];
            let meets = (bg == "B0-C1") == (cca == "cubic");
            let tput = if meets { 9.8 } else { 6.5 };
            let fb = Feedback::sender(now, 70.0, tput);
            if hook {
                ops.handle_feedback(now, &fb).unwrap();
            } else {
                feeder.observe(&fb).unwrap();
            }
        }
    }
    assert!(decisions.len() > 60, "{} decisions", decisions.len());
    // After learning, each background gets its CCA (exploration p = 0.1
    // allows the odd random pick).
    let late = &decisions[decisions.len() / 2..];
    let right = late
        .iter()
        .filter(|(i, c)| (classes[i % 2] == "B0-C1") == (c == "cubic"))
        .count();
    assert!(
        right * 10 >= late.len() * 8,
        "{right} of {} right",
        late.len()
    );
    let db = policy.database().unwrap();
    for key in ["cubic:1", "bbr:1"] {
        let row = db.state(key).unwrap_or_else(|| panic!("no State {key}"));
        assert!(
            row.protocols.iter().all(|p| p.periods > 0),
            "{key} not learnt"
        );
    }
}
