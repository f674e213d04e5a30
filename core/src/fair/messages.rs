//! Messages between the fairness manager and the DPS flows it coordinates
//! (002 §4.6, Fig 4.4: learnt → lock → locked(cca) → unlock(state), and
//! violation(state)). Serde types, so the same messages can travel inside
//! one process or over a host-local socket as JSON lines.

use serde::{Deserialize, Serialize};

/// A flow's identifier within one manager.
pub type FlowId = u64;

/// Manager → flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// The flow may change CCA. `state` lists the CCAs the other managed
    /// flows are locked to, sorted: the State key of its database
    /// (002 §4.6).
    Unlock { state: Vec<String> },
    /// Pick the best CCA for the current State (Alg 1), stay on it and
    /// report [`FlowReport::Locked`].
    Lock,
    /// Fairness fell (Alg 4) while this flow was unlocked in `state`: its
    /// current CCA is marked violating for that State and it switches now.
    Violation { state: Vec<String> },
}

/// Flow → manager.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case", deny_unknown_fields)]
pub enum FlowReport {
    /// Every candidate CCA has statistics for the State it was unlocked
    /// with (or, for a State learnt before, one more cycle has run).
    Learnt,
    /// The flow locked to `cca`.
    Locked { cca: String },
}

/// A message with its flow, as carried between processes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope<M> {
    pub flow: FlowId,
    pub msg: M,
}

/// The State key for a list of CCA names: sorted, lower case, joined by
/// `+` (`["cubic", "BBR"]` → `"bbr+cubic"`); no other flows → `""`.
pub fn state_key(state: &[String]) -> String {
    let mut v: Vec<String> = state
        .iter()
        .map(|s| s.trim().to_ascii_lowercase())
        .collect();
    v.sort();
    v.join("+")
}

impl FlowReport {
    /// The report in an agent's polled `report` output (`dps::schema`): the
    /// output's `kind` tag is dropped, the rest is the report. One place for
    /// the Python, Node and C `handle_report`.
    pub fn from_agent_output(mut v: serde_json::Value) -> crate::Result<Self> {
        if let Some(o) = v.as_object_mut() {
            o.remove("kind");
        }
        serde_json::from_value(v).map_err(|e| crate::Error::invalid(format!("bad report: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format() {
        let m = Envelope {
            flow: 2,
            msg: Command::Unlock {
                state: vec!["cubic".into()],
            },
        };
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, r#"{"flow":2,"msg":{"cmd":"unlock","state":["cubic"]}}"#);
        assert_eq!(serde_json::from_str::<Envelope<Command>>(&j).unwrap(), m);
        let r: FlowReport = serde_json::from_str(r#"{"report":"locked","cca":"bbr"}"#).unwrap();
        assert_eq!(r, FlowReport::Locked { cca: "bbr".into() });
        let polled = serde_json::json!({"kind": "report", "report": "learnt"});
        assert_eq!(
            FlowReport::from_agent_output(polled).unwrap(),
            FlowReport::Learnt
        );
        assert!(FlowReport::from_agent_output(serde_json::json!({"report": "x"})).is_err());
        assert_eq!(
            serde_json::to_string(&Command::Lock).unwrap(),
            r#"{"cmd":"lock"}"#
        );
        assert!(serde_json::from_str::<Command>(r#"{"cmd":"explode"}"#)
            .unwrap_err()
            .to_string()
            .contains("explode"));
        assert_eq!(state_key(&["cubic".into(), "BBR".into()]), "bbr+cubic");
        assert_eq!(state_key(&[]), "");
    }
}
