//! The serialized form of the agent's outputs, as for OPS's
//! [`crate::ops::Output`]: one object tagged by `kind` with units in field
//! names. Python's dicts, Node's objects and C's JSON strings are this form.
//!
//! | `kind` | fields |
//! |---|---|
//! | `set_cca` | `cca` |
//! | `report` | `report` (`learnt` or `locked`), `cca` when locked |
//! | `decided` | `cycle`, `decision` {`index`, `cca`, `mode`, `reason`, `by`, `period_ns`} |
//! | `period_closed` | `cycle`, `cca`, `samples`, `u_net`, `satisfied` |
//! | `learnt` | `at_ns`, `cycles` |
//! | `marked_violating` | `cca` |

use super::Output;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

impl Serialize for Output {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Output::SetCca(cca) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("kind", "set_cca")?;
                m.serialize_entry("cca", cca)?;
                m.end()
            }
            Output::Report(r) => {
                // The manager's own wire form (`report`, `cca`), tagged.
                #[derive(Serialize)]
                struct Tagged<'a, R: Serialize> {
                    kind: &'static str,
                    #[serde(flatten)]
                    report: &'a R,
                }
                Tagged {
                    kind: "report",
                    report: r,
                }
                .serialize(s)
            }
            Output::Event(e) => e.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, Event, Mode, Output, Phase, Reason};
    use crate::dps::AgentStats;
    use crate::fair::FlowReport;
    use crate::probe::CcaName;
    use serde_json::json;

    fn j<T: serde::Serialize>(v: &T) -> serde_json::Value {
        serde_json::to_value(v).unwrap()
    }

    #[test]
    fn every_output_has_its_documented_form() {
        let bbr = CcaName::new("bbr").unwrap();
        assert_eq!(
            j(&Output::SetCca(bbr)),
            json!({"kind": "set_cca", "cca": "bbr"})
        );
        assert_eq!(
            j(&Output::Report(FlowReport::Locked { cca: "bbr".into() })),
            json!({"kind": "report", "report": "locked", "cca": "bbr"})
        );
        assert_eq!(
            j(&Output::Report(FlowReport::Learnt)),
            json!({"kind": "report", "report": "learnt"})
        );
        let d = Decision {
            index: 1,
            cca: bbr,
            mode: Mode::Selection,
            reason: Reason::Selected(crate::dps::SelectedBy::MeanTieBreak),
            period_ns: 60_000_000_000,
        };
        assert_eq!(
            j(&Output::Event(Event::Decided {
                cycle: 3,
                decision: d
            })),
            json!({"kind": "decided", "cycle": 3, "decision": {"index": 1, "cca": "bbr",
                   "mode": "selection", "reason": "selected", "by": "mean_tie_break",
                   "period_ns": 60_000_000_000u64}})
        );
        let d = Decision {
            reason: Reason::RandomTrigger,
            mode: Mode::Random,
            ..d
        };
        assert_eq!(j(&d)["reason"], json!("random_trigger"));
        assert!(j(&d).get("by").is_none());
        assert_eq!(
            j(&Output::Event(Event::PeriodClosed {
                cycle: 2,
                cca: bbr,
                samples: 60,
                u_net: 0.75,
                satisfied: true
            })),
            json!({"kind": "period_closed", "cycle": 2, "cca": "bbr", "samples": 60,
                   "u_net": 0.75, "satisfied": true})
        );
        assert_eq!(
            j(&Event::Learnt {
                at_ns: 5,
                cycles: 2
            }),
            json!({"kind": "learnt", "at_ns": 5, "cycles": 2})
        );
        assert_eq!(
            j(&Event::MarkedViolating { cca: bbr }),
            json!({"kind": "marked_violating", "cca": "bbr"})
        );
        assert_eq!(
            j(&Phase::Guard { until_ns: 7 }),
            json!({"phase": "guard", "until_ns": 7})
        );
        assert_eq!(j(&Phase::Locked), json!({"phase": "locked"}));
        assert_eq!(j(&AgentStats::default())["learning_cycles"], json!(null));
    }
}
