//! The preempt action's arguments (`configurations:` → `- name: preempt` →
//! `arguments:`), read as Volcano's preempt action reads them: the switch to
//! topology-aware preemption and how many candidate nodes its dry run looks for,
//! each with Volcano's default when absent.
//!
//! Volcano reads the numbers with `Arguments.GetInt`, which takes only a YAML
//! integer, and the switch with `GetBool`, which takes a boolean or a string Go's
//! `ParseBool` reads; any other value keeps the default (Volcano only logs it).
//! Here such a value keeps the default too and is named in the configuration's
//! notes, so that an operator sees the argument is not acted on.

use serde_json::Value;

use crate::volcano::action_configurations::ActionConfigurations;

/// The action whose arguments these are.
const ACTION: &str = "preempt";
/// Switches victim selection to kube-scheduler-style dry runs over candidate nodes.
const ENABLE: &str = "enableTopologyAwarePreemption";
/// Percentage of the nodes the dry run looks for candidates among.
const PERCENTAGE: &str = "minCandidateNodesPercentage";
/// At least this many candidate nodes.
const MIN_ABSOLUTE: &str = "minCandidateNodesAbsolute";
/// At most this many candidate nodes.
const MAX_ABSOLUTE: &str = "maxCandidateNodesAbsolute";
/// Volcano's number of parallel dry-run workers; dry runs here go one node after
/// another (so that the same snapshot always gives the same victims), so it is
/// read only to report a value Volcano would not take.
const WORKERS: &str = "topologyAwarePreemptWorkerNum";

/// The whole-number arguments and Volcano's defaults (`preempt.New`).
const NUMBERS: [(&str, i64); 4] = [
    (PERCENTAGE, 10),
    (MIN_ABSOLUTE, 1),
    (MAX_ABSOLUTE, 100),
    (WORKERS, 16),
];

/// How topology-aware preemption is tuned: how many nodes its dry run must find
/// victims on before it chooses among them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyAwarePreemption {
    /// `minCandidateNodesPercentage` (default 10).
    pub min_candidate_nodes_percentage: i64,
    /// `minCandidateNodesAbsolute` (default 1).
    pub min_candidate_nodes_absolute: i64,
    /// `maxCandidateNodesAbsolute` (default 100).
    pub max_candidate_nodes_absolute: i64,
}

impl TopologyAwarePreemption {
    /// The tuning when `enableTopologyAwarePreemption` is on; `None` when it is
    /// off (Volcano's default), and preempt chooses victims node by node.
    pub fn configured(configurations: &ActionConfigurations) -> Option<Self> {
        let number = |key: &str| read_number(configurations, key).unwrap_or_else(|| default(key));
        enabled(configurations).then(|| Self {
            min_candidate_nodes_percentage: number(PERCENTAGE),
            min_candidate_nodes_absolute: number(MIN_ABSOLUTE),
            max_candidate_nodes_absolute: number(MAX_ABSOLUTE),
        })
    }

    /// How many candidate nodes the dry run looks for among `nodes`, as Volcano's
    /// `calculateNumCandidates`: the percentage of the nodes, raised to the
    /// minimum, capped by the maximum and by the nodes there are. At least one
    /// node is always tried (Volcano fails on a count below zero).
    pub fn candidate_count(&self, nodes: usize) -> usize {
        let total = i64::try_from(nodes).unwrap_or(i64::MAX);
        let mut n = total.saturating_mul(self.min_candidate_nodes_percentage) / 100;
        if n < self.min_candidate_nodes_absolute {
            n = self.min_candidate_nodes_absolute;
        }
        if n > self.max_candidate_nodes_absolute {
            n = self.max_candidate_nodes_absolute;
        }
        usize::try_from(n.clamp(1, total.max(1))).unwrap_or(1)
    }
}

/// What the configuration's notes say of the preempt arguments: each value
/// Volcano would not take, and the default used instead.
pub fn notes(configurations: &ActionConfigurations) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(v) = configurations.argument(ACTION, ENABLE)
        && parse_bool(v).is_none()
    {
        notes.push(format!(
            "preempt's {ENABLE}: {v} is not true or false; Volcano's default false is used"
        ));
    }
    for (key, fallback) in NUMBERS {
        if let Some(v) = configurations.argument(ACTION, key)
            && read_number(configurations, key).is_none()
        {
            notes.push(format!(
                "preempt's {key}: {v} is not a whole number; Volcano's default {fallback} is used"
            ));
        }
    }
    notes
}

/// Whether `enableTopologyAwarePreemption` is on.
fn enabled(configurations: &ActionConfigurations) -> bool {
    configurations
        .argument(ACTION, ENABLE)
        .and_then(parse_bool)
        .unwrap_or(false)
}

/// A whole-number argument as Volcano's `GetInt` takes it: a YAML integer.
fn read_number(configurations: &ActionConfigurations, key: &str) -> Option<i64> {
    configurations.argument(ACTION, key).and_then(Value::as_i64)
}

fn default(key: &str) -> i64 {
    NUMBERS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, d)| *d)
}

/// Volcano's `GetBool`: a boolean, or a string Go's `ParseBool` reads.
fn parse_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.as_str() {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SchedulerConf;

    fn conf(arguments: &str) -> SchedulerConf {
        SchedulerConf::parse(&format!(
            "actions: enqueue, allocate, preempt\ntiers:\n- plugins:\n  - name: gang\nconfigurations:\n- name: preempt\n  arguments:\n{arguments}"
        ))
        .expect("configuration loads")
    }

    fn tuning(arguments: &str) -> Option<TopologyAwarePreemption> {
        TopologyAwarePreemption::configured(&conf(arguments).configurations)
    }

    #[test]
    fn off_unless_switched_on_and_volcanos_defaults_when_on() {
        assert_eq!(tuning("    minCandidateNodesAbsolute: 3\n"), None);
        assert_eq!(tuning("    enableTopologyAwarePreemption: false\n"), None);
        assert_eq!(
            tuning("    enableTopologyAwarePreemption: \"True\"\n"),
            Some(TopologyAwarePreemption {
                min_candidate_nodes_percentage: 10,
                min_candidate_nodes_absolute: 1,
                max_candidate_nodes_absolute: 100,
            })
        );
        assert_eq!(
            tuning(
                "    enableTopologyAwarePreemption: true\n    minCandidateNodesPercentage: 50\n    minCandidateNodesAbsolute: 2\n    maxCandidateNodesAbsolute: 4\n"
            ),
            Some(TopologyAwarePreemption {
                min_candidate_nodes_percentage: 50,
                min_candidate_nodes_absolute: 2,
                max_candidate_nodes_absolute: 4,
            })
        );
    }

    #[test]
    fn candidate_count_is_volcanos_calculate_num_candidates() {
        let Some(defaults) = tuning("    enableTopologyAwarePreemption: true\n") else {
            panic!("switched on");
        };
        // 10% of 1000 nodes; of 5 nodes 0, raised to the minimum of 1; capped at
        // 100; never more than the nodes there are.
        assert_eq!(defaults.candidate_count(1000), 100);
        assert_eq!(defaults.candidate_count(500), 50);
        assert_eq!(defaults.candidate_count(5), 1);
        let wide = TopologyAwarePreemption {
            min_candidate_nodes_absolute: 8,
            ..defaults
        };
        assert_eq!(wide.candidate_count(5), 5);
        let none_asked = TopologyAwarePreemption {
            max_candidate_nodes_absolute: -1,
            ..defaults
        };
        assert_eq!(none_asked.candidate_count(5), 1);
    }

    #[test]
    fn a_value_volcano_would_not_take_keeps_the_default_and_is_noted() {
        let c = conf(
            "    enableTopologyAwarePreemption: true\n    minCandidateNodesAbsolute: \"5\"\n    topologyAwarePreemptWorkerNum: 2.5\n",
        );
        assert_eq!(
            TopologyAwarePreemption::configured(&c.configurations)
                .map(|t| t.min_candidate_nodes_absolute),
            Some(1)
        );
        let notes = c.notes();
        assert!(
            notes.iter().any(|n| n
                == "preempt's minCandidateNodesAbsolute: \"5\" is not a whole number; Volcano's default 1 is used"),
            "{notes:?}"
        );
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("preempt's topologyAwarePreemptWorkerNum: 2.5")),
            "{notes:?}"
        );
        let unreadable = conf("    enableTopologyAwarePreemption: maybe\n");
        assert_eq!(
            TopologyAwarePreemption::configured(&unreadable.configurations),
            None
        );
        assert!(
            unreadable.notes().iter().any(
                |n| n.contains("enableTopologyAwarePreemption: \"maybe\" is not true or false")
            ),
            "{:?}",
            unreadable.notes()
        );
    }
}
