//! Reading through the typed resources: errors name the bad field, and objects as
//! the API server serves them read whole.

use super::*;
use serde_json::json;

/// A value of the wrong type in every top-level field of Volcano's specs.
#[test]
fn a_bad_value_in_any_spec_field_is_named() {
    let queue_fields = [
        ("weight", json!("x")),
        ("capability", json!(["cpu"])),
        ("reclaimable", json!(1)),
        ("extendClusters", json!({"name": "a"})),
        ("guarantee", json!("2")),
        ("affinity", json!("ng-gpu")),
        ("type", json!(false)),
        ("parent", json!({})),
        ("deserved", json!(3)),
        ("priority", json!(1.5)),
    ];
    for (field, bad) in queue_fields {
        let doc = json!({"metadata": {"name": "team-a"}, "spec": {field: bad}});
        let text = QueueSpec::from_json(&doc).unwrap_err().to_string();
        let prefix = format!("Queue \"team-a\": spec.{field}: invalid type: ");
        assert!(text.starts_with(&prefix), "{text}");
    }
    let group_fields = [
        ("minMember", json!("2")),
        ("minTaskMember", json!([1])),
        ("queue", json!(5)),
        ("priorityClassName", json!(true)),
        ("minResources", json!("4")),
        ("networkTopology", json!("hard")),
    ];
    for (field, bad) in group_fields {
        let doc = json!({"metadata": {"name": "pg", "namespace": "ml"}, "spec": {field: bad}});
        let text = PodGroupSpec::from_json(&doc).unwrap_err().to_string();
        let prefix = format!("PodGroup \"ml/pg\": spec.{field}: invalid type: ");
        assert!(text.starts_with(&prefix), "{text}");
    }
    assert_eq!(
        QueueSpec::from_json(&json!({"metadata": {"name": "team-a"}, "spec": {"weight": "x"}}))
            .unwrap_err()
            .to_string(),
        "Queue \"team-a\": spec.weight: invalid type: string \"x\", expected i32"
    );
}

/// Nested fields are named down to the bad value, list positions and data keys
/// included.
#[test]
fn a_bad_nested_value_is_named_by_its_path() {
    let cases = [
        (
            json!({"spec": {"guarantee": {"resource": {"cpu": true}}}}),
            "spec.guarantee.resource[cpu]",
        ),
        (
            json!({"spec": {"extendClusters": [{"name": "a"}, {"weight": "w"}]}}),
            "spec.extendClusters[1].weight",
        ),
        (
            json!({"spec": {"affinity": {"nodeGroupAffinity":
                {"requiredDuringSchedulingIgnoredDuringExecution": "ng-1"}}}}),
            "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        ),
        (
            json!({"spec": {"affinity": {"nodeGroupAntiAffinity":
                {"preferredDuringSchedulingIgnoredDuringExecution": ["ng-1", 2]}}}}),
            "spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[1]",
        ),
        (
            json!({"status": {"reservation": {"nodes": [1]}}}),
            "status.reservation.nodes[0]",
        ),
        (
            json!({"status": {"allocated": {"nvidia.com/gpu": []}}}),
            "status.allocated[nvidia.com/gpu]",
        ),
    ];
    for (mut doc, field) in cases {
        doc["metadata"] = json!({"name": "q"});
        let e = QueueSpec::from_json(&doc).unwrap_err();
        match e {
            ObjectError::Field { field: f, .. } => assert_eq!(f, field),
            other => panic!("{other}"),
        }
    }
    let cases = [
        (
            json!({"spec": {"networkTopology": {"highestTierAllowed": "1"}}}),
            "spec.networkTopology.highestTierAllowed",
        ),
        (
            json!({"status": {"conditions": [{"lastTransitionTime": "soon"}]}}),
            "status.conditions[0].lastTransitionTime",
        ),
        (json!({"status": {"running": -0.5}}), "status.running"),
        (
            json!({"metadata": {"labels": {"a": 1}}}),
            "metadata.labels[a]",
        ),
    ];
    for (mut doc, field) in cases {
        doc["metadata"]["name"] = json!("pg");
        let e = PodGroupSpec::from_json(&doc).unwrap_err();
        match e {
            ObjectError::Field { field: f, .. } => assert_eq!(f, field),
            other => panic!("{other}"),
        }
    }
}

/// Null reads as unset everywhere, as Go writes unset pointers, maps and times.
#[test]
fn null_fields_read_as_unset() {
    let q = QueueSpec::from_json(&json!({"metadata": {"name": "q", "annotations": null},
        "spec": {"weight": null, "capability": null, "reclaimable": null,
            "guarantee": null, "parent": null, "priority": null, "affinity": null},
        "status": {"state": null, "allocated": null}}))
    .unwrap();
    assert_eq!(q, QueueSpec::new("q"));
    let pg = PodGroupSpec::from_json(&json!({"metadata": {"name": "pg", "namespace": null},
        "spec": {"minMember": null, "minTaskMember": null, "queue": null,
            "minResources": null}, "status": null}))
    .unwrap();
    assert_eq!(
        (pg.namespace.as_str(), pg.queue.as_str()),
        ("default", "default")
    );
    assert_eq!(pg.min_member, 0);
}

/// `kubectl get queue team-a -o yaml` of a queue Volcano's controller has
/// reconciled, with a field this scheduler does not know.
const QUEUE_YAML: &str = r#"
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"Queue","metadata":{"annotations":{},"name":"team-a"},"spec":{"weight":4}}
    volcano.sh/card.quota: '{"NVIDIA-H200": 8}'
    volcano.sh/hierarchy: root/eng/team-a
    volcano.sh/hierarchy-weights: 1/2/4
  creationTimestamp: "2025-07-26T02:38:24Z"
  generation: 3
  managedFields:
  - apiVersion: scheduling.volcano.sh/v1beta1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:kubectl.kubernetes.io/last-applied-configuration: {}
      f:spec:
        .: {}
        f:capability:
          .: {}
          f:cpu: {}
          f:nvidia.com/gpu: {}
        f:weight: {}
    manager: kubectl-client-side-apply
    operation: Update
    time: "2025-07-26T02:38:24Z"
  - apiVersion: scheduling.volcano.sh/v1beta1
    fieldsType: FieldsV1
    fieldsV1:
      f:status:
        .: {}
        f:allocated:
          .: {}
          f:cpu: {}
          f:memory: {}
          f:nvidia.com/gpu: {}
        f:reservation: {}
        f:running: {}
        f:state: {}
    manager: vc-controller-manager
    operation: Update
    subresource: status
    time: "2025-07-26T03:01:10Z"
  name: team-a
  resourceVersion: "48213"
  uid: 0b5c7a3e-52d4-4f0e-9f4e-7a51c5e2d1a9
spec:
  affinity:
    nodeGroupAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - ng-gpu
  capability:
    cpu: "64"
    nvidia.com/gpu: 16
  deserved:
    nvidia.com/gpu: "8"
  dequeueStrategy: traverse
  extendClusters:
  - capacity:
      cpu: "32"
    name: member-1
    weight: 1
  guarantee:
    resource:
      nvidia.com/gpu: "2"
  parent: eng
  priority: 100
  reclaimable: false
  weight: 4
status:
  allocated:
    cpu: 24500m
    memory: 96Gi
    nvidia.com/gpu: "6"
  reservation: {}
  running: 2
  state: Open
"#;

#[test]
fn reads_a_queue_as_kubectl_prints_it() {
    let doc: Value = serde_yaml_ng::from_str(QUEUE_YAML).unwrap();
    let q = QueueSpec::from_json(&doc).unwrap();
    assert_eq!(q.name, "team-a");
    assert_eq!(q.weight, 4);
    assert_eq!(q.priority, 100);
    assert!(!q.reclaimable);
    assert_eq!(q.parent.as_deref(), Some("eng"));
    assert_eq!(q.state, QueueState::Open);
    let capability = q.capability.unwrap();
    assert_eq!(capability.get("cpu"), 64_000);
    assert_eq!(capability.get("nvidia.com/gpu"), 16_000);
    assert_eq!(q.deserved.unwrap().get("nvidia.com/gpu"), 8_000);
    assert_eq!(q.guarantee.unwrap().get("nvidia.com/gpu"), 2_000);
    assert_eq!(q.card_quota, BTreeMap::from([("NVIDIA-H200".into(), 8)]));
    assert_eq!(q.hierarchy.as_deref(), Some("root/eng/team-a"));
    assert_eq!(q.hierarchy_weights.as_deref(), Some("1/2/4"));
    assert_eq!(
        q.affinity,
        Some(NodeGroupAffinity {
            required: vec!["ng-gpu".into()],
            ..NodeGroupAffinity::default()
        })
    );

    let typed: crd::Queue = crd::read(&doc).unwrap();
    let status = typed.status.unwrap();
    assert_eq!(status.running, Some(2));
    assert_eq!(status.allocated.unwrap()["memory"].0, "96Gi");
    let clusters = typed.spec.extend_clusters.unwrap();
    assert_eq!(clusters[0].name.as_deref(), Some("member-1"));
    assert_eq!(typed.metadata.managed_fields.map(|m| m.len()), Some(2));
}

/// `kubectl get podgroup -o yaml` of a group Volcano's job controller made for a
/// Job, after the scheduler started it, with newer fields this scheduler does not
/// know (`subGroupPolicy`).
const PODGROUP_YAML: &str = r#"
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  annotations:
    volcano.sh/card.request: '{"NVIDIA-H200":2}'
  creationTimestamp: "2025-07-26T02:40:01Z"
  generation: 4
  managedFields:
  - apiVersion: scheduling.volcano.sh/v1beta1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:ownerReferences:
          .: {}
          k:{"uid":"5d0c6c0e-3f0b-4a52-a2f4-0c1b9e7d2f11"}: {}
      f:spec:
        .: {}
        f:minMember: {}
        f:minResources:
          .: {}
          f:cpu: {}
          f:nvidia.com/gpu: {}
        f:minTaskMember:
          .: {}
          f:ps: {}
          f:worker: {}
        f:queue: {}
    manager: vc-controller-manager
    operation: Update
    time: "2025-07-26T02:40:01Z"
  name: tf-job-5d0c6c0e-3f0b-4a52-a2f4-0c1b9e7d2f11
  namespace: ml
  ownerReferences:
  - apiVersion: batch.volcano.sh/v1alpha1
    blockOwnerDeletion: true
    controller: true
    kind: Job
    name: tf-job
    uid: 5d0c6c0e-3f0b-4a52-a2f4-0c1b9e7d2f11
  resourceVersion: "48377"
  uid: 9a1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b
spec:
  minMember: 3
  minResources:
    count/pods: "3"
    cpu: "3"
    memory: 12Gi
    nvidia.com/gpu: "3"
    pods: "3"
    requests.cpu: "3"
    requests.memory: 12Gi
    requests.nvidia.com/gpu: "3"
  minTaskMember:
    ps: 1
    worker: 2
  networkTopology:
    highestTierAllowed: 1
    mode: hard
  priorityClassName: high-priority
  queue: team-a
  subGroupPolicy:
  - name: worker
    subGroupSize: 2
status:
  conditions:
  - lastTransitionTime: "2025-07-26T02:40:02Z"
    message: '3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable'
    reason: NotEnoughResources
    status: "True"
    transitionID: 2f6f1f0e-8a67-4f2a-9a1d-0e4c3b2a1f00
    type: Unschedulable
  - lastTransitionTime: "2025-07-26T02:40:09Z"
    reason: tasks in gang are ready to be scheduled
    status: "True"
    transitionID: 7c3e9d1a-0b2f-4e5d-8c6a-1f2e3d4c5b6a
    type: Scheduled
  phase: Running
  running: 3
"#;

#[test]
fn reads_a_podgroup_as_kubectl_prints_it() {
    let doc: Value = serde_yaml_ng::from_str(PODGROUP_YAML).unwrap();
    let pg = PodGroupSpec::from_json(&doc).unwrap();
    assert_eq!(pg.namespace, "ml");
    assert_eq!(pg.name, "tf-job-5d0c6c0e-3f0b-4a52-a2f4-0c1b9e7d2f11");
    assert_eq!(pg.uid, "9a1e2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b");
    assert_eq!(pg.min_member, 3);
    assert_eq!(
        pg.min_task_member,
        BTreeMap::from([("ps".into(), 1), ("worker".into(), 2)])
    );
    assert_eq!(pg.queue, "team-a");
    assert_eq!(pg.priority_class_name.as_deref(), Some("high-priority"));
    let min = pg.min_resources.unwrap();
    assert_eq!(min.get("nvidia.com/gpu"), 3_000);
    assert_eq!(min.get("memory"), 12 * (1 << 30) * 1000);
    assert_eq!(pg.phase.as_deref(), Some("Running"));
    assert_eq!(
        pg.creation_timestamp.map(|t| t.to_rfc3339()).as_deref(),
        Some("2025-07-26T02:40:01+00:00")
    );
    assert_eq!(
        pg.annotations
            .get("volcano.sh/card.request")
            .map(String::as_str),
        Some("{\"NVIDIA-H200\":2}")
    );

    let typed: crd::PodGroup = crd::read(&doc).unwrap();
    let topology = typed.spec.network_topology.unwrap();
    assert_eq!(topology.mode.as_deref(), Some("hard"));
    assert_eq!(topology.highest_tier_allowed, Some(1));
    let status = typed.status.unwrap();
    let conditions = status.conditions.unwrap();
    assert_eq!(conditions[1].type_.as_deref(), Some("Scheduled"));
    assert_eq!(
        conditions[0].transition_id.as_deref(),
        Some("2f6f1f0e-8a67-4f2a-9a1d-0e4c3b2a1f00")
    );
    assert_eq!(status.running, Some(3));
}

/// `spec.affinity` keeps its four lists as written, and tells "no affinity" (which
/// a child queue may inherit over) from an empty one.
#[test]
fn node_group_affinity_reads_every_list() {
    let q = QueueSpec::from_json(&json!({"metadata": {"name": "gpu-queue"}, "spec": {
        "affinity": {
            "nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["gpu-pool"],
                "preferredDuringSchedulingIgnoredDuringExecution": ["high-memory-pool", "gpu-pool"]},
            "nodeGroupAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["cpu-only-pool"],
                "preferredDuringSchedulingIgnoredDuringExecution": null}}}}))
    .unwrap();
    assert_eq!(
        q.affinity,
        Some(NodeGroupAffinity {
            required: vec!["gpu-pool".into()],
            preferred: vec!["high-memory-pool".into(), "gpu-pool".into()],
            anti_required: vec!["cpu-only-pool".into()],
            anti_preferred: vec![],
        })
    );
    let empty = QueueSpec::from_json(&json!({"metadata": {"name": "q"}, "spec": {"affinity": {}}}))
        .unwrap();
    assert_eq!(empty.affinity, Some(NodeGroupAffinity::default()));
    assert!(empty.affinity.is_some_and(|a| a.is_empty()));
    let none = QueueSpec::from_json(&json!({"metadata": {"name": "q"}})).unwrap();
    assert_eq!(none.affinity, None);
}
