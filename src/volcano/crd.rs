//! Volcano's `scheduling.volcano.sh/v1beta1` Queue and PodGroup as typed custom
//! resources, field for field as Volcano's Go types declare them
//! (`pkg/apis/scheduling/v1beta1/types.go` of Volcano's API module).
//!
//! These types only say what the objects look like on the wire. Every field is
//! optional, as every Volcano field is `omitempty`, and nothing is defaulted here:
//! [`super::objects`] turns them into the scheduler's model, and Volcano's defaults,
//! weight clamping and quantity parsing live there.
//!
//! Unknown fields are ignored, never refused: Volcano adds fields over releases
//! (`subGroupPolicy`, `topologyAffinity`, ...), and a scheduler built against older
//! types must still read newer objects. The fields the scheduler does not use are
//! typed all the same, so that these structs describe the whole resource. That costs
//! no object the live cluster serves: the API server has already checked each one
//! against Volcano's CRD schema, which declares these same types.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_path_to_error::Segment;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A `v1.ResourceList`. [`Quantity`] reads JSON numbers as well as strings, and
/// must: the API server stores a custom resource as written, so a quantity written
/// `nvidia.com/gpu: 8` comes back as the number 8, unlike in a Pod.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The specification of a Queue.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    status = "QueueStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Share of the cluster relative to other queues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Hard cap on what the queue's jobs may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<ResourceList>,
    /// Whether other queues may reclaim what this one uses beyond its share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,
    /// Clusters the queue's jobs are dispatched to (multi-cluster Volcano).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extend_clusters: Option<Vec<Cluster>>,
    /// Resources reserved for the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,
    /// Node-group constraints on where the queue's pods go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// The kind of queue.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The parent queue in a hierarchy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The amount the capacity plugin considers fair, shareable and reclaimable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deserved: Option<ResourceList>,
    /// Higher queues are scheduled first and reclaimed from last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// Resources reserved for a queue.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Guarantee {
    /// The reserved amounts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// One cluster a queue dispatches to.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Cluster {
    /// The cluster's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its weight among the queue's clusters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// What it offers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
}

/// Node-group affinity and anti-affinity of a queue.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// Node groups the queue's pods go to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group_affinity: Option<NodeGroupTerms>,
    /// Node groups the queue's pods avoid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_group_anti_affinity: Option<NodeGroupTerms>,
}

/// Node-group names, required or preferred (Volcano's `NodeGroupAffinity` and
/// `NodeGroupAntiAffinity` have these same two fields).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupTerms {
    /// Node groups that must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<Vec<String>>,
    /// Node groups that should match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<String>>,
}

/// The status of a Queue, written by Volcano's queue controller.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// `Open`, `Closed`, `Closing` or `Unknown`; kept as text so that a state a
    /// newer Volcano adds reads as unknown instead of refusing the queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// PodGroups in phase Unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<i32>,
    /// PodGroups in phase Pending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<i32>,
    /// PodGroups in phase Running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// PodGroups in phase Inqueue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inqueue: Option<i32>,
    /// PodGroups in phase Completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<i32>,
    /// Nodes locked for the queue's reservation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
    /// What the queue's jobs use now. Volcano writes `null` when it has nothing to
    /// report (the Go field is not `omitempty`), which reads as `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated: Option<ResourceList>,
}

/// Nodes locked for a queue, and what is idle on them.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct Reservation {
    /// The locked nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Idle resources on them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// The specification of a PodGroup.
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    namespaced,
    status = "PodGroupStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// Members that must be placed together before any runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_member: Option<i32>,
    /// The same per task role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<BTreeMap<String, i32>>,
    /// The queue the group's resources come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The group's PriorityClass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Resources the members need together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<ResourceList>,
    /// How far across the network topology the group may spread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// A network-topology constraint of a PodGroup.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The highest tier the group may cross, by number (a Go `int`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i64>,
    /// The same by tier name; exclusive with `highestTierAllowed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub highest_tier_name: Option<String>,
}

/// The status of a PodGroup, written by Volcano's controllers and scheduler.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// `Pending`, `Inqueue`, `Running`, `Unknown`, `Completed`, as text for the same
    /// reason as [`QueueStatus::state`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why the group is or is not scheduled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodGroupCondition>>,
    /// Members running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// Members succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// Members failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

/// One condition of a PodGroup.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// `Unschedulable` or `Scheduled`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `True`, `False` or `Unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Identifies the scheduling cycle that wrote the condition.
    #[serde(rename = "transitionID", skip_serializing_if = "Option::is_none")]
    pub transition_id: Option<String>,
    /// When the condition last changed. Go writes a zero time as `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One-word reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A field of an object that does not match its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The path of the field, e.g. `spec.weight` or `spec.minTaskMember[worker]`.
    pub field: String,
    /// What is wrong, in serde's words.
    pub reason: String,
}

/// Reads a Queue or PodGroup from JSON, naming the field that does not fit.
///
/// A missing or `null` spec reads as an empty one: Volcano's `spec` is `omitempty`
/// and hand-written cluster files leave it out, but the derived resource requires it.
pub fn read<K: DeserializeOwned>(value: &Value) -> Result<K, FieldError> {
    let value = match value.get("spec") {
        None | Some(Value::Null) if value.is_object() => {
            // Copies only specless objects, which are small.
            let mut with_spec = value.clone();
            with_spec["spec"] = Value::Object(serde_json::Map::new());
            Cow::Owned(with_spec)
        }
        _ => Cow::Borrowed(value),
    };
    serde_path_to_error::deserialize(value.as_ref()).map_err(|e| FieldError {
        field: field_path(e.path()),
        reason: e.inner().to_string(),
    })
}

/// Fields whose keys are data (resource names, task roles, annotation keys) rather
/// than field names; their keys are shown in brackets, since resource names and
/// annotation keys contain dots (`metadata.annotations[volcano.sh/card.quota]`).
/// Matched by name wherever they occur: no field of these types has one of these
/// names without being such a map.
const KEYED_FIELDS: [&str; 9] = [
    "annotations",
    "labels",
    "minTaskMember",
    "capability",
    "deserved",
    "resource",
    "minResources",
    "allocated",
    "capacity",
];

/// Renders a serde path as a field path: `spec.extendClusters[0].capacity[cpu]`.
fn field_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    let mut keyed = false;
    for segment in path {
        match segment {
            Segment::Seq { index } => {
                out.push_str(&format!("[{index}]"));
                keyed = false;
            }
            Segment::Map { key } if keyed => {
                out.push_str(&format!("[{key}]"));
                keyed = false;
            }
            Segment::Map { key: name } | Segment::Enum { variant: name } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
                keyed = KEYED_FIELDS.contains(&name.as_str());
            }
            Segment::Unknown => {
                out.push_str("[?]");
                keyed = false;
            }
        }
    }
    if out.is_empty() {
        // Only the object itself can fail here, e.g. `metadata` missing.
        out.push_str("(object)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::Resource;
    use serde_json::json;

    #[test]
    fn resources_are_volcanos() {
        assert_eq!(Queue::api_version(&()), "scheduling.volcano.sh/v1beta1");
        assert_eq!(Queue::plural(&()), "queues");
        assert_eq!(PodGroup::kind(&()), "PodGroup");
        assert_eq!(PodGroup::plural(&()), "podgroups");
    }

    #[test]
    fn paths_bracket_data_keys() {
        let e = read::<Queue>(&json!({"metadata": {"name": "q"},
            "spec": {"extendClusters": [{"name": "a"}, {"capacity": {"cpu": []}}]}}))
        .unwrap_err();
        assert_eq!(e.field, "spec.extendClusters[1].capacity[cpu]");
        let e = read::<PodGroup>(&json!({"metadata": {"name": "g",
            "annotations": {"volcano.sh/card.request": 2}}}))
        .unwrap_err();
        assert_eq!(e.field, "metadata.annotations[volcano.sh/card.request]");
        let e = read::<PodGroup>(&json!({"metadata": {"name": "g"},
            "spec": {"minTaskMember": {"minMember": "x"}}}))
        .unwrap_err();
        assert_eq!(e.field, "spec.minTaskMember[minMember]");
    }

    #[test]
    fn spec_may_be_left_out() {
        let q: Queue = read(&json!({"metadata": {"name": "q"}})).unwrap();
        assert_eq!(q.spec, QueueSpec::default());
        let g: PodGroup = read(&json!({"metadata": {"name": "g"}, "spec": null})).unwrap();
        assert_eq!(g.spec, PodGroupSpec::default());
        assert!(g.status.is_none());
    }

    #[test]
    fn serializes_without_unset_fields() {
        let q = Queue::new(
            "q",
            QueueSpec {
                weight: Some(2),
                ..QueueSpec::default()
            },
        );
        assert_eq!(
            serde_json::to_value(&q).unwrap(),
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": "q"}, "spec": {"weight": 2}})
        );
    }
}
