//! Volcano's `topology.volcano.sh/v1alpha1` HyperNode as a typed custom resource,
//! field for field as Volcano declares it: a named group of nodes (or of other
//! HyperNodes) at a tier of the network, tier 1 being the closest (an NVLink
//! domain, a leaf switch) and higher tiers spanning more.
//!
//! As with [`crate::volcano::crd`], every field is optional and unknown fields are
//! ignored; [`super::hyper_node`] turns the object into the scheduler's model.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The specification of a HyperNode.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[kube(
    group = "topology.volcano.sh",
    version = "v1alpha1",
    kind = "HyperNode",
    status = "HyperNodeStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// Its tier: 1 is the closest grouping, higher tiers span more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<i64>,
    /// A name for the tier (`highestTierName` of a PodGroup refers to it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_name: Option<String>,
    /// What it groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<MemberSpec>>,
}

/// One member rule of a HyperNode.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Which nodes or HyperNodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<MemberSelector>,
}

/// How a member rule picks its members: exactly one of the three.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemberSelector {
    /// One member by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<ExactMatch>,
    /// Members whose names match a regular expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,
    /// Nodes whose labels match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_match: Option<LabelSelector>,
}

/// `exactMatch`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct ExactMatch {
    /// The member's name.
    #[serde(default)]
    pub name: String,
}

/// `regexMatch`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct RegexMatch {
    /// The expression (Go's RE2 syntax, unanchored).
    #[serde(default)]
    pub pattern: String,
}

/// The status of a HyperNode, written by Volcano's controller.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeStatus {
    /// Conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Value>>,
    /// Nodes under it, as counted by Volcano.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_count: Option<i64>,
}
