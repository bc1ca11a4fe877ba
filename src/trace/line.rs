//! One line of a trace: a JSON object holding `at` (RFC 3339, from the
//! scheduler's clock) and exactly one kind of event.
//!
//! ```text
//! {"at":"2025-06-01T10:00:00.000Z","pod":{"apiVersion":"v1","kind":"Pod",...}}
//! {"at":"2025-06-01T10:00:00.250Z","bound":"ml/train-0","node":"gpu-3","uid":"..."}
//! {"at":"2025-06-01T11:30:00.000Z","gone":"ml/train-0","uid":"..."}
//! {"at":"2025-06-01T09:59:59.900Z","podGroup":{"apiVersion":"scheduling.volcano.sh/v1beta1",...}}
//! ```

use crate::gang::scheduling_group::{pod_from_value, to_api_value};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

/// The kinds of event a line may hold, as spelt in the file.
pub const KINDS: [&str; 4] = ["pod", "bound", "gone", "podGroup"];

/// What a line says happened.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// A pod of ours first seen waiting for a node, as its controller created it
    /// (the recorder leaves out placement annotations, `nodeName` and status).
    Pod(Box<Pod>),
    /// A pod bound to a node.
    Bound {
        /// `namespace/name`.
        pod: String,
        /// Its UID.
        uid: String,
        /// The node.
        node: String,
    },
    /// A pod deleted, or finished (Succeeded or Failed).
    Gone {
        /// `namespace/name`.
        pod: String,
        /// Its UID.
        uid: String,
    },
    /// A PodGroup first seen (JSON as the API serves it, without status).
    PodGroup(Box<Value>),
}

/// One line: when, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLine {
    /// When the scheduler saw it, by its clock.
    pub at: DateTime<Utc>,
    /// What it saw.
    pub event: TraceEvent,
}

/// Why a line could not be read.
#[derive(Debug)]
pub enum LineError {
    /// Not JSON; `cut_short` when the text ends before the JSON does (a line a
    /// stopped writer left unfinished).
    Syntax {
        /// The parser's message.
        message: String,
        /// Whether the text ended in the middle of the JSON.
        cut_short: bool,
    },
    /// JSON, but not a trace line.
    Invalid(String),
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineError::Syntax { message, .. } => write!(f, "not JSON: {message}"),
            LineError::Invalid(message) => f.write_str(message),
        }
    }
}

impl TraceLine {
    /// The line as written to the file (without the newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(&self.to_value()?)
    }

    /// The line as a JSON object.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        let at = self.at.to_rfc3339_opts(SecondsFormat::Millis, true);
        Ok(match &self.event {
            TraceEvent::Pod(pod) => json!({"at": at, "pod": to_api_value(pod)?}),
            TraceEvent::Bound { pod, uid, node } => {
                json!({"at": at, "bound": pod, "uid": uid, "node": node})
            }
            TraceEvent::Gone { pod, uid } => json!({"at": at, "gone": pod, "uid": uid}),
            TraceEvent::PodGroup(group) => json!({"at": at, "podGroup": group}),
        })
    }

    /// Reads one line.
    pub fn from_json(text: &str) -> Result<Self, LineError> {
        let object: Map<String, Value> =
            serde_json::from_str(text).map_err(|e| LineError::Syntax {
                message: e.to_string(),
                cut_short: e.is_eof(),
            })?;
        let kinds: Vec<&str> = KINDS
            .into_iter()
            .filter(|k| object.contains_key(*k))
            .collect();
        let kind = match kinds.as_slice() {
            [kind] => *kind,
            [] => {
                let fields: Vec<&str> = object.keys().map(String::as_str).collect();
                return Err(LineError::Invalid(format!(
                    "unknown kind of event (fields: {}); a trace line holds `at` and one of {}",
                    fields.join(", "),
                    KINDS.join(", ")
                )));
            }
            several => {
                return Err(LineError::Invalid(format!(
                    "more than one kind of event in one line: {}",
                    several.join(", ")
                )));
            }
        };
        let at = object
            .get("at")
            .and_then(Value::as_str)
            .ok_or_else(|| LineError::Invalid("`at` is missing or not a string".into()))?;
        let at = DateTime::parse_from_rfc3339(at)
            .map_err(|e| LineError::Invalid(format!("`at` {at:?} is not RFC 3339: {e}")))?
            .with_timezone(&Utc);
        let text_field = |name: &str| {
            object
                .get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    LineError::Invalid(format!("`{kind}` line without a string `{name}`"))
                })
        };
        let event = match kind {
            "pod" => {
                let pod: Pod = pod_from_value(&object["pod"])
                    .map_err(|e| LineError::Invalid(format!("`pod` is not a Pod: {e}")))?;
                if pod.metadata.name.as_deref().is_none_or(str::is_empty) {
                    return Err(LineError::Invalid("`pod` has no metadata.name".into()));
                }
                if pod.metadata.uid.as_deref().is_none_or(str::is_empty) {
                    return Err(LineError::Invalid("`pod` has no metadata.uid".into()));
                }
                TraceEvent::Pod(Box::new(pod))
            }
            "bound" => TraceEvent::Bound {
                pod: text_field("bound")?,
                uid: text_field("uid")?,
                node: text_field("node")?,
            },
            "gone" => TraceEvent::Gone {
                pod: text_field("gone")?,
                uid: text_field("uid")?,
            },
            _ => {
                let group = object["podGroup"].clone();
                if group
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .is_none()
                {
                    return Err(LineError::Invalid("`podGroup` has no metadata.name".into()));
                }
                TraceEvent::PodGroup(Box::new(group))
            }
        };
        Ok(TraceLine { at, event })
    }
}

/// Whether `line` reads as the start of a trace: a JSON object with `at` and
/// one of the kinds (a workload file of arrivals never has both).
pub fn is_trace_line(line: &str) -> bool {
    serde_json::from_str::<Map<String, Value>>(line)
        .is_ok_and(|o| o.contains_key("at") && KINDS.iter().any(|k| o.contains_key(*k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000 + seconds, 250_000_000).unwrap()
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml", "uid": "u-1",
                         "annotations": {"nvidia.com/use-gputype": "H100"}},
            "spec": {"containers": [{"name": "main",
                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn every_kind_reads_back_as_written() {
        let lines = [
            TraceEvent::Pod(Box::new(pod())),
            TraceEvent::Bound {
                pod: "ml/p".into(),
                uid: "u-1".into(),
                node: "n1".into(),
            },
            TraceEvent::Gone {
                pod: "ml/p".into(),
                uid: "u-1".into(),
            },
            TraceEvent::PodGroup(Box::new(json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 2}
            }))),
        ];
        for (i, event) in lines.into_iter().enumerate() {
            let line = TraceLine {
                at: at(i as i64),
                event,
            };
            let text = line.to_json().unwrap();
            assert!(!text.contains('\n'), "one line: {text}");
            assert!(is_trace_line(&text), "{text}");
            assert_eq!(TraceLine::from_json(&text).unwrap(), line, "{text}");
        }
    }

    #[test]
    fn times_are_rfc3339_in_utc_with_milliseconds() {
        let line = TraceLine {
            at: at(0),
            event: TraceEvent::Gone {
                pod: "ml/p".into(),
                uid: "u".into(),
            },
        };
        let text = line.to_json().unwrap();
        assert!(
            text.contains(r#""at":"2025-06-15T15:06:40.250Z""#),
            "{text}"
        );
    }

    #[test]
    fn lines_that_are_not_trace_lines_say_why() {
        for (text, needle) in [
            (
                r#"{"at":"2025-06-15T15:06:40Z","evicted":"ml/p"}"#,
                "unknown kind of event (fields: at, evicted)",
            ),
            (
                r#"{"at":"2025-06-15T15:06:40Z","gone":"ml/p","bound":"ml/p","uid":"u","node":"n"}"#,
                "more than one kind",
            ),
            (r#"{"gone":"ml/p","uid":"u"}"#, "`at` is missing"),
            (
                r#"{"at":"yesterday","gone":"ml/p","uid":"u"}"#,
                "not RFC 3339",
            ),
            (
                r#"{"at":"2025-06-15T15:06:40Z","bound":"ml/p","uid":"u"}"#,
                "without a string `node`",
            ),
            (
                r#"{"at":"2025-06-15T15:06:40Z","pod":{"metadata":{"name":"p"}}}"#,
                "no metadata.uid",
            ),
        ] {
            match TraceLine::from_json(text) {
                Err(LineError::Invalid(message)) => {
                    assert!(message.contains(needle), "{text}: {message}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_line_cut_short_is_told_from_one_that_is_not_json() {
        let full = TraceLine {
            at: at(0),
            event: TraceEvent::Pod(Box::new(pod())),
        }
        .to_json()
        .unwrap();
        let cut = &full[..full.len() / 2];
        assert!(matches!(
            TraceLine::from_json(cut),
            Err(LineError::Syntax {
                cut_short: true,
                ..
            })
        ));
        assert!(matches!(
            TraceLine::from_json("hello"),
            Err(LineError::Syntax {
                cut_short: false,
                ..
            })
        ));
    }

    #[test]
    fn a_workload_file_is_not_a_trace() {
        assert!(!is_trace_line(r#"{"arrivals": []}"#));
        assert!(!is_trace_line("arrivals:"));
        assert!(!is_trace_line(r#"{"at": "5m", "name": "a"}"#));
    }
}
