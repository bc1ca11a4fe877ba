//! Required pod affinity and anti-affinity, through a session: judged against the
//! pods on the nodes (as the pod watch keeps them) and the members the planner
//! has already put on nodes, in both directions, for tasks that ask for vGPUs and
//! tasks that do not. The two cases of Volcano's `plugins/predicates` tests that
//! use pod anti-affinity (`TestEventHandler`, `TestPodAntiAffinity`) are among
//! them, with Volcano's expectations.

use super::allocate::Allocate;
use super::plain_tasks_tests::{cpu_task, labelled_cpu_nodes, planned, run_on, running};
use crate::placement::pod_affinity::{AffinityPod, EXISTING_ANTI_AFFINITY};
use crate::volcano::framework::job::TaskInfo;
use crate::volcano::framework::nodes::NodeSet;
use crate::volcano::framework::testing::{gang_key, gpu_nodes, gpu_task, job};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `t` with these pod labels and this `spec.affinity`.
pub(super) fn shaped(mut t: TaskInfo, labels: Value, affinity: Value) -> TaskInfo {
    let pod = Arc::make_mut(&mut t.pod);
    pod.metadata.namespace = Some(t.namespace.clone());
    pod.metadata.uid = Some(t.uid.clone());
    pod.metadata.labels = serde_json::from_value(labels).expect("labels");
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.affinity = serde_json::from_value(affinity).expect("affinity");
    t
}

/// Required anti-affinity to pods labelled `app`, per `topology_key` domain.
fn repels(app: &str, topology_key: &str) -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology_key}]}})
}

/// Each node labelled with its own hostname and the zone `zones` gives it.
pub(super) fn topology(
    zones: &'static [(&'static str, &'static str)],
) -> impl Fn(&str) -> BTreeMap<String, String> {
    move |node| {
        let mut labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), node.to_string())]);
        if let Some((_, zone)) = zones.iter().find(|(n, _)| *n == node) {
            labels.insert("topology.kubernetes.io/zone".into(), zone.to_string());
        }
        labels
    }
}

pub(super) const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

#[test]
fn two_cpu_only_members_that_repel_each_other_are_planned_onto_two_nodes() {
    let member = |name| {
        shaped(
            cpu_task("mpi", name, 2),
            json!({"app": "mpi"}),
            repels("mpi", HOSTNAME),
        )
    };
    let gang = job("mpi", "q", 2, vec![member("w0"), member("w1")]);
    let nodes = labelled_cpu_nodes(&[("a", 16, 110), ("b", 16, 110)], &topology(&[]), &[]);
    let o = run_on(nodes, vec![gang], &[&Allocate]);
    let nodes = planned(&o);
    assert_eq!(
        nodes,
        BTreeMap::from([
            ("w0".into(), Some("a".into())),
            ("w1".into(), Some("b".into()))
        ])
    );
}

#[test]
fn a_gang_whose_members_repel_each_other_is_not_placed_with_one_node() {
    let member = |name| {
        shaped(
            cpu_task("mpi", name, 2),
            json!({"app": "mpi"}),
            repels("mpi", HOSTNAME),
        )
    };
    let gang = job("mpi", "q", 2, vec![member("w0"), member("w1")]);
    let nodes = labelled_cpu_nodes(&[("a", 16, 110)], &topology(&[]), &[]);
    let o = run_on(nodes, vec![gang], &[&Allocate]);
    assert!(o.commits.is_empty(), "{:?}", planned(&o));
    let message = o.verdicts[&gang_key("mpi")]
        .message
        .clone()
        .unwrap_or_default();
    // Each repels the other: kube-scheduler names the placed member's rule first.
    assert!(message.contains(EXISTING_ANTI_AFFINITY), "{message}");
}

#[test]
fn a_member_affine_to_its_running_launcher_is_planned_into_the_launchers_zone() {
    let launcher = running(
        shaped(
            cpu_task("mpi", "launcher", 1),
            json!({"role": "launcher"}),
            Value::Null,
        ),
        "b",
    );
    let affinity = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "launcher"}}, "topologyKey": ZONE}]}});
    let worker = shaped(
        cpu_task("mpi", "worker", 1),
        json!({"role": "worker"}),
        affinity,
    );
    let gang = job("mpi", "q", 2, vec![launcher, worker]);
    // b is full: the worker must go to c, the other node of the launcher's zone.
    let zones = &[("a", "z1"), ("b", "z2"), ("c", "z2")];
    let nodes = labelled_cpu_nodes(
        &[("a", 16, 110), ("b", 1, 110), ("c", 16, 110)],
        &topology(zones),
        std::slice::from_ref(&gang),
    );
    let o = run_on(nodes, vec![gang], &[&Allocate]);
    assert_eq!(planned(&o).get("worker"), Some(&Some("c".to_string())));
}

#[test]
fn a_member_affine_to_a_launcher_planned_in_the_same_session_follows_it() {
    let mut launcher = shaped(
        cpu_task("mpi", "launcher", 12),
        json!({"role": "launcher"}),
        Value::Null,
    );
    launcher.priority = 10;
    let affinity = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": "launcher"}}, "topologyKey": HOSTNAME}]}});
    let worker = shaped(
        cpu_task("mpi", "worker", 2),
        json!({"role": "worker"}),
        affinity,
    );
    let gang = job("mpi", "q", 2, vec![launcher, worker]);
    // Only b has room for the launcher; the worker would fit a.
    let nodes = labelled_cpu_nodes(&[("a", 8, 110), ("b", 16, 110)], &topology(&[]), &[]);
    let o = run_on(nodes, vec![gang], &[&Allocate]);
    let nodes = planned(&o);
    assert_eq!(
        nodes.get("launcher"),
        Some(&Some("b".to_string())),
        "{nodes:?}"
    );
    assert_eq!(
        nodes.get("worker"),
        Some(&Some("b".to_string())),
        "{nodes:?}"
    );
}

#[test]
fn a_running_pods_anti_affinity_keeps_the_pods_it_selects_off_its_node() {
    // A pod no gang owns, seen only by the pod watch, on a.
    let guard = shaped(
        cpu_task("other", "guard", 1),
        json!({}),
        repels("web", HOSTNAME),
    );
    let guard = running(guard, "a");
    let others = job("other", "q", 1, vec![guard]);
    let nodes = labelled_cpu_nodes(
        &[("a", 16, 110), ("b", 16, 110)],
        &topology(&[]),
        std::slice::from_ref(&others),
    );
    let web = shaped(
        cpu_task("web", "web-0", 1),
        json!({"app": "web"}),
        Value::Null,
    );
    let o = run_on(nodes, vec![job("web", "q", 1, vec![web])], &[&Allocate]);
    assert_eq!(planned(&o).get("web-0"), Some(&Some("b".to_string())));

    let only_a = labelled_cpu_nodes(
        &[("a", 16, 110)],
        &topology(&[]),
        std::slice::from_ref(&others),
    );
    let web = shaped(
        cpu_task("web", "web-0", 1),
        json!({"app": "web"}),
        Value::Null,
    );
    let o = run_on(only_a, vec![job("web", "q", 1, vec![web])], &[&Allocate]);
    assert!(o.commits.is_empty(), "{:?}", planned(&o));
    let message = o.verdicts[&gang_key("web")]
        .message
        .clone()
        .unwrap_or_default();
    assert!(message.contains(EXISTING_ANTI_AFFINITY), "{message}");
}

#[test]
fn affinity_to_pods_that_exist_nowhere_admits_only_the_first_of_their_group() {
    let affinity = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOSTNAME}]}});
    let nodes = || labelled_cpu_nodes(&[("a", 16, 110)], &topology(&[]), &[]);
    let first = shaped(
        cpu_task("cache", "cache-0", 1),
        json!({"app": "cache"}),
        affinity.clone(),
    );
    let o = run_on(
        nodes(),
        vec![job("cache", "q", 1, vec![first])],
        &[&Allocate],
    );
    assert_eq!(planned(&o).get("cache-0"), Some(&Some("a".to_string())));

    let stranger = shaped(cpu_task("web", "web-0", 1), json!({"app": "web"}), affinity);
    let o = run_on(
        nodes(),
        vec![job("web", "q", 1, vec![stranger])],
        &[&Allocate],
    );
    assert!(o.commits.is_empty(), "{:?}", planned(&o));
    let message = o.verdicts[&gang_key("web")]
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        message.contains("didn't match pod affinity rules"),
        "{message}"
    );
}

/// GPU nodes `node-0` and `node-1`, labelled with their hostnames.
pub(super) fn labelled_gpu_nodes() -> NodeSet {
    let nodes = gpu_nodes(2, 2, 1)
        .iter()
        .cloned()
        .map(|mut n| {
            n.resources.traits = Some(Arc::new(crate::placement::node_traits::NodeTraits {
                labels: topology(&[])(&n.name),
                ..Default::default()
            }));
            n
        })
        .collect();
    NodeSet::new(nodes, BTreeMap::new())
}

#[test]
fn vgpu_members_that_repel_each_other_are_planned_onto_two_nodes() {
    let member = |name| {
        shaped(
            gpu_task(&gang_key("train"), name, 1),
            json!({"app": "train"}),
            repels("train", HOSTNAME),
        )
    };
    let gang = job("train", "q", 2, vec![member("w0"), member("w1")]);
    let o = run_on(labelled_gpu_nodes(), vec![gang], &[&Allocate]);
    let nodes = planned(&o);
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_ne!(nodes.get("w0"), nodes.get("w1"), "{nodes:?}");
}

#[test]
fn the_pod_watch_keeps_what_inter_pod_affinity_needs_of_a_bound_pod() {
    let mut load = crate::node_load::NodeLoad::default();
    let pod = shaped(
        cpu_task("x", "p", 1),
        json!({"app": "web"}),
        repels("web", HOSTNAME),
    )
    .pod;
    let mut bound = (*pod).clone();
    bound.spec.as_mut().expect("spec").node_name = Some("a".into());
    load.set_pod("uid-p", crate::node_load::occupancy_of(&bound));
    let kept = &load.get("a").expect("node a").pods;
    assert_eq!(kept.len(), 1);
    assert_eq!(*kept[0], AffinityPod::of(&bound));
    assert_eq!(kept[0].anti_affinity.len(), 1);
    load.set_pod("uid-p", None);
    assert!(load.get("a").is_none_or(|n| n.pods.is_empty()));
}

/// Volcano's `getWorkerAffinity`: required anti-affinity to `role In [worker]`
/// per hostname.
fn worker_anti_affinity() -> Value {
    json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchExpressions": [
            {"key": "role", "operator": "In", "values": ["worker"]}]},
        "topologyKey": HOSTNAME}]}})
}

/// Volcano's predicates `TestEventHandler` "pod-deallocate": pg1 (higher priority,
/// minMember 2) places worker-1 on node1 (its node selector allows no other),
/// then worker-2 fits nowhere (node1 holds a worker it repels, node2 is too
/// small), so pg1 is taken back whole; worker-3 of pg2 then finds node1 free of
/// workers.
#[test]
fn volcano_predicates_pod_deallocate_a_discarded_gang_repels_no_one() {
    let mut w1 = shaped(
        cpu_task("pg1", "worker-1", 3),
        json!({"role": "worker"}),
        worker_anti_affinity(),
    );
    Arc::make_mut(&mut w1.pod)
        .spec
        .as_mut()
        .expect("spec")
        .node_selector = Some(BTreeMap::from([("selector".into(), "worker".into())]));
    let w2 = shaped(
        cpu_task("pg1", "worker-2", 5),
        json!({"role": "worker"}),
        worker_anti_affinity(),
    );
    let w3 = shaped(
        cpu_task("pg2", "worker-3", 4),
        json!({"role": "worker"}),
        worker_anti_affinity(),
    );
    let mut pg1 = job("pg1", "q", 2, vec![w1, w2]);
    pg1.priority = 2;
    let mut pg2 = job("pg2", "q", 1, vec![w3]);
    pg2.priority = 1;
    let labels = |node: &str| {
        let mut l = BTreeMap::from([(HOSTNAME.to_string(), node.to_string())]);
        if node == "node1" {
            l.insert("selector".into(), "worker".into());
        }
        l
    };
    let nodes = labelled_cpu_nodes(&[("node1", 14, 10), ("node2", 3, 10)], &labels, &[]);
    let o = run_on(nodes, vec![pg1, pg2], &[&Allocate]);
    assert_eq!(
        planned(&o),
        BTreeMap::from([("worker-3".into(), Some("node1".into()))])
    );
}

/// Volcano's predicates `TestPodAntiAffinity` "pod-anti-affinity": worker-3 is
/// repelled from n1 by the running worker-1 (which it repels too); evicting the
/// lower-priority worker-2 would free a pod slot but not that, so nobody is
/// evicted and nothing is pipelined.
#[test]
fn volcano_predicates_pod_anti_affinity_no_eviction_that_cannot_help() {
    use super::preempt::Preempt;
    let mut w1 = running(
        shaped(
            cpu_task("pg1", "worker-1", 3),
            json!({"role": "worker"}),
            worker_anti_affinity(),
        ),
        "n1",
    );
    w1.priority = 100_000;
    let mut w2 = running(
        shaped(cpu_task("pg1", "worker-2", 3), json!({}), Value::Null),
        "n1",
    );
    w2.priority = 10;
    let mut w3 = shaped(
        cpu_task("pg2", "worker-3", 3),
        json!({"role": "worker"}),
        worker_anti_affinity(),
    );
    w3.priority = 100_000;
    let mut pg1 = job("pg1", "q", 0, vec![w1, w2]);
    pg1.priority = 10;
    let mut pg2 = job("pg2", "q", 1, vec![w3]);
    pg2.priority = 100_000;
    let labels = |_: &str| BTreeMap::from([(HOSTNAME.to_string(), "node1".to_string())]);
    let nodes = labelled_cpu_nodes(&[("n1", 12, 2)], &labels, std::slice::from_ref(&pg1));
    let o = run_on(nodes, vec![pg1, pg2], &[&Allocate, &Preempt]);
    assert_eq!(o.evictions().count(), 0, "{:?}", planned(&o));
    assert!(planned(&o).is_empty(), "{:?}", planned(&o));
}
