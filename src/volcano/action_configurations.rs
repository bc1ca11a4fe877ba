//! The `configurations:` section of `volcano-scheduler.conf`: arguments for
//! actions (`- name: preempt` / `arguments: {...}`), as Volcano's
//! `framework.GetArgOfActionFromConf` reads them.
//!
//! Some of Volcano's action arguments tune only how it searches
//! (`predicateErrorCacheEnable`): this scheduler accepts them and has nothing to
//! tune. The preempt action's arguments (topology-aware preemption) are read by
//! [`crate::volcano::actions::preempt_arguments`]. A value Volcano would not
//! take is accepted, as Volcano accepts it, and named in the configuration's
//! notes (logged at load and shown by `/debug/queues`), so that an operator sees
//! it is not acted on instead of finding out from placements.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

use super::conf::ConfError;

/// Each action's arguments, by action name.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ActionConfigurations(BTreeMap<String, BTreeMap<String, Value>>);

impl ActionConfigurations {
    /// Reads the section: a list of mappings with a `name` and, optionally,
    /// `arguments`. Volcano refuses a configuration of another shape; so does this.
    pub fn parse(section: Option<&Value>) -> Result<Self, ConfError> {
        let entries = match section {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Array(entries)) => entries,
            Some(v) => {
                return Err(ConfError::Syntax(format!(
                    "configurations: expected a list, got {v}"
                )));
            }
        };
        let mut out = BTreeMap::new();
        for (i, entry) in entries.iter().enumerate() {
            let at = format!("configurations[{i}]");
            let obj = entry.as_object().ok_or_else(|| {
                ConfError::Syntax(format!("{at}: expected a mapping, got {entry}"))
            })?;
            if let Some(key) = obj
                .keys()
                .find(|k| !matches!(k.as_str(), "name" | "arguments"))
            {
                return Err(ConfError::Syntax(format!(
                    "{at}: unknown key {key:?} (expected name, arguments)"
                )));
            }
            let name = match obj.get("name") {
                Some(Value::String(name)) if !name.is_empty() => name.clone(),
                other => {
                    return Err(ConfError::Syntax(format!(
                        "{at}.name: expected an action name, got {}",
                        other.map_or_else(|| "nothing".to_owned(), Value::to_string)
                    )));
                }
            };
            let arguments = match obj.get("arguments") {
                None | Some(Value::Null) => BTreeMap::new(),
                Some(Value::Object(args)) => args.clone().into_iter().collect(),
                Some(v) => {
                    return Err(ConfError::Syntax(format!(
                        "{at}.arguments: expected a mapping, got {v}"
                    )));
                }
            };
            // Volcano keeps the first entry of a name (GetArgOfActionFromConf
            // returns at the first match).
            out.entry(name).or_insert(arguments);
        }
        Ok(Self(out))
    }

    /// One argument of one action.
    pub fn argument(&self, action: &str, key: &str) -> Option<&Value> {
        self.0.get(action).and_then(|args| args.get(key))
    }

    /// Arguments whose values Volcano would not take (their defaults are used).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = crate::volcano::actions::preempt_arguments::notes(self);
        notes.extend(crate::volcano::actions::gang_eviction_arguments::notes(
            self,
        ));
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SchedulerConf;

    fn conf(configurations: &str) -> Result<SchedulerConf, ConfError> {
        SchedulerConf::parse(&format!(
            "actions: enqueue, allocate, preempt\ntiers:\n- plugins:\n  - name: gang\nconfigurations:\n{configurations}"
        ))
    }

    #[test]
    fn topology_aware_preemption_loads_and_is_carried_out_without_notes() {
        use crate::volcano::actions::preempt_arguments::TopologyAwarePreemption;
        let on = conf("- name: preempt\n  arguments:\n    enableTopologyAwarePreemption: true\n    minCandidateNodesPercentage: 20\n").unwrap();
        assert!(on.notes().is_empty(), "{:?}", on.notes());
        assert_eq!(
            TopologyAwarePreemption::configured(&on.configurations)
                .map(|t| t.min_candidate_nodes_percentage),
            Some(20)
        );
        let as_string =
            conf("- name: preempt\n  arguments:\n    enableTopologyAwarePreemption: \"true\"\n")
                .unwrap();
        assert!(as_string.notes().is_empty(), "{:?}", as_string.notes());
        assert!(TopologyAwarePreemption::configured(&as_string.configurations).is_some());
        let off = conf("- name: preempt\n  arguments:\n    enableTopologyAwarePreemption: false\n")
            .unwrap();
        assert!(off.notes().is_empty(), "{:?}", off.notes());
        assert!(TopologyAwarePreemption::configured(&off.configurations).is_none());
    }

    #[test]
    fn search_tuning_arguments_load_without_notes() {
        let c = conf("- name: allocate\n  arguments:\n    predicateErrorCacheEnable: true\n- name: backfill\n").unwrap();
        assert!(c.notes().is_empty(), "{:?}", c.notes());
        assert_eq!(
            c.configurations
                .argument("allocate", "predicateErrorCacheEnable"),
            Some(&Value::Bool(true))
        );
    }

    #[test]
    fn a_misshapen_section_is_refused_with_where() {
        let err = |text: &str| conf(text).unwrap_err().to_string();
        assert!(err("  name: preempt\n").contains("configurations: expected a list"));
        assert!(err("- arguments: {}\n").contains("configurations[0].name"));
        assert!(err("- name: preempt\n  arguments: [1]\n").contains("configurations[0].arguments"));
        assert!(err("- name: preempt\n  args: {}\n").contains("unknown key \"args\""));
    }
}
