//! Preferred pod affinity and anti-affinity, through a session: nodeorder's
//! `podaffinity.weight` draws a member to the nodes of the pods its preferred
//! terms select, pushes it from those its preferred anti-affinity selects, and
//! lets the preferred terms of the pods already on nodes draw it too, for tasks
//! that ask for vGPUs and tasks that do not. Nodes otherwise alike go to the
//! smaller name, so each case puts the pod that matters on the larger one.

use super::allocate::Allocate;
use super::plain_tasks_tests::{cpu_task, labelled_cpu_nodes, planned, run_with, running};
use super::pod_affinity_tests::{HOSTNAME, labelled_gpu_nodes, shaped, topology};
use crate::volcano::conf_fixture::priority_gang_then;
use crate::volcano::framework::job::JobInfo;
use crate::volcano::framework::testing::{gang_key, gpu_task, job};
use serde_json::{Value, json};

/// nodeorder with this `podaffinity.weight`, after the predicates.
fn conf(weight: u32) -> String {
    priority_gang_then(
        "allocate",
        &[
            ("predicates", &[]),
            ("nodeorder", &[("podaffinity.weight", &weight.to_string())]),
        ],
    )
}

/// A preferred term of `weight` for pods labelled `app`, per hostname.
fn prefers(kind: &str, weight: i32, app: &str) -> Value {
    json!({kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": weight,
        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}},
            "topologyKey": HOSTNAME}}]}})
}

/// A job of one pod no gang owns, labelled `app` with `affinity`, running on `node`.
fn running_pod(app: &str, affinity: Value, node: &str) -> JobInfo {
    let pod = shaped(cpu_task(app, app, 1), json!({"app": app}), affinity);
    job(app, "q", 1, vec![running(pod, node)])
}

/// Where the CPU-only member `web-0` (labelled `app: web`, with `affinity`) is
/// planned, on nodes a and b with `others` running, at `weight`.
fn plain_member_node(affinity: Value, others: JobInfo, weight: u32) -> Option<String> {
    let nodes = labelled_cpu_nodes(
        &[("a", 16, 110), ("b", 16, 110)],
        &topology(&[]),
        std::slice::from_ref(&others),
    );
    let web = shaped(cpu_task("web", "web-0", 1), json!({"app": "web"}), affinity);
    let o = run_with(
        &conf(weight),
        nodes,
        vec![others, job("web", "q", 1, vec![web])],
        &[&Allocate],
    );
    planned(&o).get("web-0").cloned().flatten()
}

#[test]
fn a_member_preferring_a_running_pods_company_is_planned_onto_its_node() {
    let cache = || running_pod("cache", Value::Null, "b");
    let affinity = prefers("podAffinity", 50, "cache");
    assert_eq!(
        plain_member_node(affinity.clone(), cache(), 2).as_deref(),
        Some("b")
    );
    // Weight 0 turns the score off: the tie goes to the smaller name.
    assert_eq!(
        plain_member_node(affinity, cache(), 0).as_deref(),
        Some("a")
    );
}

#[test]
fn a_member_avoiding_a_running_pod_is_planned_away_from_its_node() {
    let noisy = running_pod("noisy", Value::Null, "a");
    let affinity = prefers("podAntiAffinity", 80, "noisy");
    assert_eq!(plain_member_node(affinity, noisy, 2).as_deref(), Some("b"));
}

#[test]
fn a_running_pods_preferred_affinity_draws_the_pods_it_selects() {
    // The member prefers nothing itself; the running pod prefers web pods near it.
    let frontend = running_pod("frontend", prefers("podAffinity", 10, "web"), "b");
    assert_eq!(
        plain_member_node(Value::Null, frontend, 2).as_deref(),
        Some("b")
    );
    let loner = running_pod("loner", prefers("podAntiAffinity", 10, "web"), "a");
    assert_eq!(
        plain_member_node(Value::Null, loner, 2).as_deref(),
        Some("b")
    );
}

#[test]
fn a_vgpu_member_preferring_a_running_pods_company_is_planned_onto_its_node() {
    let cache = shaped(
        cpu_task("cache", "cache", 1),
        json!({"app": "cache"}),
        Value::Null,
    );
    let cache = job("cache", "q", 1, vec![running(cache, "node-1")]);
    let train = shaped(
        gpu_task(&gang_key("train"), "w0", 1),
        json!({"app": "train"}),
        prefers("podAffinity", 50, "cache"),
    );
    let mut nodes = labelled_gpu_nodes();
    nodes = crate::volcano::framework::nodes::NodeSet::new(
        nodes
            .iter()
            .cloned()
            .map(|mut n| {
                if n.name == "node-1" {
                    let watched =
                        crate::placement::pod_affinity::AffinityPod::of(&cache.tasks[0].pod);
                    n.resources.pods = std::sync::Arc::new(vec![std::sync::Arc::new(watched)]);
                }
                n
            })
            .collect(),
        Default::default(),
    );
    let o = run_with(
        &conf(2),
        nodes,
        vec![cache, job("train", "q", 1, vec![train])],
        &[&Allocate],
    );
    assert_eq!(
        planned(&o).get("w0").cloned().flatten().as_deref(),
        Some("node-1")
    );
}
