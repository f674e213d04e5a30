//! The serialized form of the controller's outputs: [`Action`](super::Action),
//! [`Event`](super::Event) and [`Output`](super::Output) derive `Serialize`
//! (tagged by `kind`, units in field names), and [`Labeled`] puts the model's
//! class names beside the class indices. The CLI's JSON log, Python's dicts
//! and Node's objects are this one form, so a field is named once, here and
//! in the types' docs.

use super::{Classified, Event, Output};
use serde::Serialize;

/// Values that point at the model's classes by index: the class of the
/// value (`label`) and, for several windows per decision, the running
/// min-sum leader (`leader`).
pub trait ClassRefs {
    /// (class index, leader index), each `None` where the value has none.
    fn class_refs(&self) -> (Option<usize>, Option<usize>);
}

impl ClassRefs for Event {
    fn class_refs(&self) -> (Option<usize>, Option<usize>) {
        match self {
            Event::Classified { classified, .. } => (Some(classified.class_index), None),
            Event::CycleClassified {
                class_index,
                leader,
                ..
            } => (Some(*class_index), Some(*leader)),
            _ => (None, None),
        }
    }
}

impl ClassRefs for Output {
    fn class_refs(&self) -> (Option<usize>, Option<usize>) {
        match self {
            Output::Event(e) => e.class_refs(),
            Output::Action(_) => (None, None),
        }
    }
}

/// `value` serialized with `label` (the name of its class) and `leader` (the
/// name of the min-sum leader) added, from the model's class names:
/// `{"kind": "classified", "mix": "bbr:1", "class_index": 2, …, "label": "B1-C0"}`.
#[derive(Debug, Serialize)]
pub struct Labeled<'a, T> {
    #[serde(flatten)]
    pub value: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<&'a str>,
}

impl<'a, T: ClassRefs> Labeled<'a, T> {
    pub fn new(value: &'a T, classes: &'a [String]) -> Self {
        let (c, l) = value.class_refs();
        let name = |i: Option<usize>| i.and_then(|i| classes.get(i)).map(String::as_str);
        Self {
            value,
            label: name(c),
            leader: name(l),
        }
    }
}

/// What a front end's policy function is given (a Python dict, a JS
/// object): the classification with its class name and the views of the
/// background mix the thesis's decision uses (000 §4.1). In passive mode the
/// mix is the class minus the transfer's own flow, `label` the class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyInput<'a> {
    pub label: &'a str,
    pub class_index: usize,
    pub confidence: f64,
    pub distance: f64,
    pub bbr_present: bool,
    pub heterogeneous: bool,
    pub bbr_flows: u32,
    pub total_flows: u32,
}

impl<'a> PolicyInput<'a> {
    pub fn new(c: &Classified, classes: &'a [String]) -> Self {
        Self {
            label: classes.get(c.class_index).map_or("", String::as_str),
            class_index: c.class_index,
            confidence: c.confidence,
            distance: c.distance,
            bbr_present: c.mix.bbr_present(),
            heterogeneous: c.mix.heterogeneous(),
            bbr_flows: c.mix.count("bbr"),
            total_flows: c.mix.total(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::Mix;
    use crate::ops::{Action, CcaName, Classified, Phase};
    use serde_json::json;

    fn json_of<T: ClassRefs + Serialize>(v: &T) -> serde_json::Value {
        let classes = ["B0-C0".to_string(), "B1-C0".to_string()];
        serde_json::to_value(Labeled::new(v, &classes)).unwrap()
    }

    #[test]
    fn actions_and_events_have_one_tagged_form() {
        let o = Output::Action(Action::SetCca(CcaName::BBR));
        assert_eq!(json_of(&o), json!({"kind": "set_cca", "cca": "bbr"}));
        let o = Output::Action(Action::Steady {
            cca: CcaName::CUBIC,
            until_ns: None,
        });
        assert_eq!(
            json_of(&o),
            json!({"kind": "steady", "cca": "cubic", "until_ns": null})
        );
        let e = Event::Phase {
            phase: Phase::Probe,
            cycle: 1,
            at_ns: 5,
        };
        assert_eq!(
            json_of(&e),
            json!({"kind": "phase", "phase": "probe", "cycle": 1, "at_ns": 5})
        );
    }

    #[test]
    fn a_policy_sees_the_class_name_and_the_background() {
        let classes = ["B1-C1".to_string()];
        let c = Classified {
            mix: Mix::parse("B1-C0").unwrap(),
            class_index: 0,
            confidence: 0.9,
            distance: 1.0,
        };
        assert_eq!(
            serde_json::to_value(PolicyInput::new(&c, &classes)).unwrap(),
            json!({"label": "B1-C1", "class_index": 0, "confidence": 0.9, "distance": 1.0,
                   "bbr_present": true, "heterogeneous": false, "bbr_flows": 1, "total_flows": 1})
        );
    }

    #[test]
    fn class_indices_get_their_names() {
        let e = Event::Classified {
            classified: Classified {
                mix: Mix::parse("B1-C0").unwrap(),
                class_index: 1,
                confidence: 0.5,
                distance: 2.0,
            },
            samples: 20,
            early: false,
            at_ns: 7,
        };
        assert_eq!(
            json_of(&Output::Event(e)),
            json!({"kind": "classified", "mix": "bbr:1", "class_index": 1, "confidence": 0.5,
                   "distance": 2.0, "samples": 20, "early": false, "at_ns": 7, "label": "B1-C0"})
        );
        let e = Event::CycleClassified {
            index: 0,
            cycles: 2,
            class_index: 0,
            distance: 1.5,
            leader: 1,
            margin: 0.25,
            at_ns: 9,
        };
        assert_eq!(
            json_of(&e),
            json!({"kind": "cycle_classified", "index": 0, "cycles": 2, "class_index": 0,
                   "distance": 1.5, "leader_index": 1, "margin": 0.25, "at_ns": 9,
                   "label": "B0-C0", "leader": "B1-C0"})
        );
    }
}
