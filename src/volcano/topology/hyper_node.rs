//! A HyperNode as the scheduler reads it: its tier and member rules, checked once
//! when the object arrives so that resolving the topology each cycle cannot fail.

use super::crd::{HyperNode as HyperNodeObject, MemberSpec};
use kube::core::{Selector, SelectorExt};
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a member rule groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberKind {
    /// Nodes.
    Node,
    /// Other HyperNodes (of lower tiers).
    HyperNode,
}

/// How a member rule picks its members.
#[derive(Debug, Clone)]
pub enum MemberRule {
    /// One member by name.
    Exact(String),
    /// Members whose names match (unanchored, as Go's `regexp.MatchString`).
    Pattern(Regex),
    /// Nodes whose labels match.
    Labels(Selector),
}

impl PartialEq for MemberRule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Pattern(a), Self::Pattern(b)) => a.as_str() == b.as_str(),
            (Self::Labels(a), Self::Labels(b)) => a == b,
            _ => false,
        }
    }
}

impl MemberRule {
    /// Whether a member named `name` with `labels` is picked by the rule.
    pub fn picks(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Exact(n) => n == name,
            Self::Pattern(re) => re.is_match(name),
            Self::Labels(selector) => selector.matches(labels),
        }
    }
}

/// One member rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Nodes or HyperNodes.
    pub kind: MemberKind,
    /// Which ones.
    pub rule: MemberRule,
}

/// A HyperNode.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperNode {
    /// `metadata.name`.
    pub name: String,
    /// `spec.tier`.
    pub tier: u32,
    /// `spec.tierName`.
    pub tier_name: Option<String>,
    /// `spec.members`.
    pub members: Vec<Member>,
}

/// Why a HyperNode object cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HyperNode {name}: {problem}")]
pub struct HyperNodeError {
    /// The object's name (empty when it has none).
    pub name: String,
    /// What is wrong.
    pub problem: String,
}

impl HyperNode {
    /// Reads a HyperNode object (JSON as the API serves it).
    pub fn from_json(value: &Value) -> Result<Self, HyperNodeError> {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let err = |problem: String| HyperNodeError {
            name: name.clone(),
            problem,
        };
        if name.is_empty() {
            return Err(err("metadata.name is missing".into()));
        }
        let object: HyperNodeObject = serde_path_to_error::deserialize(value)
            .map_err(|e| err(format!("{}: {}", e.path(), e.inner())))?;
        let spec = object.spec;
        let tier = spec
            .tier
            .ok_or_else(|| err("spec.tier is required".into()))
            .and_then(|t| {
                u32::try_from(t).map_err(|_| err(format!("spec.tier {t} is out of range")))
            })?;
        let members = spec
            .members
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, m)| member(m).map_err(|p| err(format!("spec.members[{i}]: {p}"))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            name,
            tier,
            tier_name: spec.tier_name.filter(|t| !t.is_empty()),
            members,
        })
    }
}

fn member(spec: &MemberSpec) -> Result<Member, String> {
    let kind = match spec.kind.as_deref() {
        Some("Node") => MemberKind::Node,
        Some("HyperNode") => MemberKind::HyperNode,
        Some(other) => return Err(format!("type {other:?} is neither Node nor HyperNode")),
        None => return Err("type is required".into()),
    };
    let selector = spec.selector.clone().unwrap_or_default();
    let mut rules = Vec::new();
    if let Some(exact) = selector.exact_match {
        if exact.name.is_empty() {
            return Err("selector.exactMatch.name is empty".into());
        }
        rules.push(MemberRule::Exact(exact.name));
    }
    if let Some(regex) = selector.regex_match {
        let re = Regex::new(&regex.pattern)
            .map_err(|e| format!("selector.regexMatch.pattern {:?}: {e}", regex.pattern))?;
        rules.push(MemberRule::Pattern(re));
    }
    if let Some(labels) = selector.label_match {
        if kind == MemberKind::HyperNode {
            return Err("selector.labelMatch selects nodes only, not HyperNodes".into());
        }
        let selector =
            Selector::try_from(labels).map_err(|e| format!("selector.labelMatch: {e}"))?;
        rules.push(MemberRule::Labels(selector));
    }
    let mut rules = rules.into_iter();
    match (rules.next(), rules.next()) {
        (Some(rule), None) => Ok(Member { kind, rule }),
        (None, _) => Err("selector needs one of exactMatch, regexMatch, labelMatch".into()),
        (Some(_), Some(_)) => {
            Err("selector may hold only one of exactMatch, regexMatch, labelMatch".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hyper_node(spec: Value) -> Result<HyperNode, HyperNodeError> {
        HyperNode::from_json(&json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"}, "spec": spec
        }))
    }

    #[test]
    fn reads_each_kind_of_member_rule() {
        let h = hyper_node(json!({"tier": 1, "tierName": "leaf", "members": [
            {"type": "Node", "selector": {"exactMatch": {"name": "node-0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-3]$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}
        ]}))
        .unwrap();
        assert_eq!(h.tier, 1);
        assert_eq!(h.tier_name.as_deref(), Some("leaf"));
        let none = BTreeMap::new();
        let rack: BTreeMap<String, String> = [("rack".to_string(), "r1".to_string())].into();
        assert!(h.members[0].rule.picks("node-0", &none));
        assert!(!h.members[0].rule.picks("node-01", &none));
        assert!(h.members[1].rule.picks("gpu-2", &none));
        assert!(!h.members[1].rule.picks("gpu-20", &none));
        assert!(h.members[2].rule.picks("any", &rack));
        assert!(!h.members[2].rule.picks("any", &none));
    }

    #[test]
    fn a_pattern_matches_anywhere_in_the_name_as_go_does() {
        let h = hyper_node(json!({"tier": 1, "members": [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "rack1"}}}]}))
        .unwrap();
        assert!(h.members[0].rule.picks("dc-rack1-node3", &BTreeMap::new()));
    }

    #[test]
    fn refuses_what_volcano_refuses_naming_the_field() {
        for (spec, needle) in [
            (json!({"members": []}), "spec.tier is required"),
            (json!({"tier": -1}), "out of range"),
            (
                json!({"tier": 1, "members": [{"selector": {"exactMatch": {"name": "a"}}}]}),
                "spec.members[0]: type is required",
            ),
            (
                json!({"tier": 1, "members": [{"type": "Rack", "selector": {"exactMatch": {"name": "a"}}}]}),
                "neither Node nor HyperNode",
            ),
            (
                json!({"tier": 1, "members": [{"type": "Node", "selector": {}}]}),
                "needs one of",
            ),
            (
                json!({"tier": 1, "members": [{"type": "Node", "selector": {
                    "exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}}}]}),
                "only one of",
            ),
            (
                json!({"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]}),
                "regexMatch.pattern",
            ),
            (
                json!({"tier": 2, "members": [{"type": "HyperNode", "selector": {"labelMatch": {}}}]}),
                "nodes only",
            ),
            (json!({"tier": "one"}), "spec.tier"),
        ] {
            let e = hyper_node(spec.clone()).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
            assert!(e.starts_with("HyperNode s0:"), "{e}");
        }
    }
}
