//! A cluster as Volcano's test helper (`uthelper.TestCommonStruct`) describes
//! one: nodes with CPU, memory and a pod count, queues, PodGroups and pods, in
//! the units of Volcano's `util.Build*` helpers; then a session over it with the
//! given plugins and actions, and what users would see of its outcome.

use crate::node_load::NodeResources;
use crate::placement::node_traits::NodeTraits;
use crate::placement::pod_affinity::AffinityPod;
use crate::placement::resource_fit::{POD_COUNT, pod_footprint};
use crate::resources::{Resources, parse_milli, quantity_text};
use crate::volcano::conf::{SWITCHES, SchedulerConf};
use crate::volcano::framework::job::{TaskPlacement, TaskStatus};
use crate::volcano::framework::nodes::{NodeSet, SessionNode};
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{job, state, task};
use crate::volcano::framework::{Action, GangKey, GangPhase, GangVerdict, JobInfo, Session};
use crate::volcano::objects::{QueueSpec, QueueState};
use crate::volcano::plugins::registry;
use crate::volcano::topology::{HyperNode, NetworkTopology, TopologyConstraint};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `api.BuildResourceList(cpu, memory)` (plus `pods` when given).
pub fn resources(cpu: &str, memory: &str) -> Resources {
    let mut r = Resources::default();
    for (dim, q) in [("cpu", cpu), ("memory", memory)] {
        if let Ok(v) = parse_milli(dim, q) {
            r.set(dim, v);
        }
    }
    r
}

/// The plugins Volcano's preemption tables (preempt, gangpreempt, gangreclaim)
/// start their tier with: conformance, gang and priority with what a session
/// needs to call a job starving and pipelined and to pick victims.
pub const PREEMPTING_PLUGINS: &[(&str, &[&str])] = &[
    ("conformance", &["Preemptable"]),
    ("gang", &["Preemptable", "JobPipelined", "JobStarving"]),
    (
        "priority",
        &[
            "TaskOrder",
            "JobOrder",
            "Preemptable",
            "JobPipelined",
            "JobStarving",
        ],
    ),
];

/// A `volcano-scheduler.conf` as Volcano's tests build their tiers: each plugin
/// with the switches named on (Volcano's `EnabledXxx` without its prefix, e.g.
/// `"JobStarving"`) and every other switch off, since a test's `conf.PluginOption`
/// leaves them unset and Volcano reads an unset switch as off there. Plugins a
/// case does not register are simply not listed.
pub fn tiers_conf(actions: &str, tiers: &[&[(&str, &[&str])]]) -> String {
    let mut text = format!("actions: {actions}\ntiers:\n");
    for tier in tiers {
        text.push_str("- plugins:\n");
        for (plugin, on) in *tier {
            text.push_str(&format!("  - name: {plugin}\n"));
            let mut seen = BTreeSet::new();
            for (switch, point) in SWITCHES {
                if !seen.insert(point) {
                    continue;
                }
                let name = switch
                    .trim_start_matches("enabled")
                    .trim_start_matches("enable");
                text.push_str(&format!("    {switch}: {}\n", on.contains(&name)));
            }
        }
    }
    text
}

/// `api.BuildResourceList(cpu, memory, {pods: n})`: a node's allocatable.
pub fn node_alloc(cpu: &str, memory: &str, pods: i64) -> Resources {
    let mut r = resources(cpu, memory);
    r.set(POD_COUNT, pods.saturating_mul(1000));
    r
}

/// The label naming a pod's role in its job, as Volcano's tests set it.
const TASK_SPEC: &str = "volcano.sh/task-spec";

/// The Pod object of a table's pod in namespace `namespace`: its requests in one
/// container, as `util.BuildPod` writes them, so the planner sees what Volcano's
/// session does.
fn pod_object(row: &PodRow, namespace: &str) -> k8s_openapi::api::core::v1::Pod {
    let requests: serde_json::Map<String, serde_json::Value> = row
        .request
        .iter()
        .map(|(dim, milli)| (dim.to_string(), quantity_text(milli).into()))
        .collect();
    let mut spec = serde_json::json!({
        "containers": [{"name": "c", "resources": {"requests": requests}}]
    });
    if !row.node.is_empty() {
        spec["nodeName"] = row.node.into();
    }
    let pairs = |p: &[(&str, &str)]| -> serde_json::Map<String, serde_json::Value> {
        p.iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect()
    };
    spec["nodeSelector"] = pairs(&row.node_selector).into();
    if let Some(affinity) = &row.affinity {
        spec["affinity"] = affinity.clone();
    }
    let mut metadata = serde_json::json!({
        "name": row.name,
        "namespace": namespace,
        "uid": format!("uid-{}", row.name),
        "labels": pairs(&row.labels),
    });
    if row.terminating {
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    }
    serde_json::from_value(serde_json::json!({"metadata": metadata, "spec": spec}))
        .unwrap_or_default()
}

/// One pod of a table: namespace `ns`, its PodGroup, phase and request.
#[derive(Debug, Clone)]
pub struct PodRow {
    /// `metadata.name`.
    pub name: &'static str,
    /// Its PodGroup.
    pub group: &'static str,
    /// The node it is bound to (`""`: none).
    pub node: &'static str,
    /// Running or Pending.
    pub running: bool,
    /// Being deleted (`metadata.deletionTimestamp` set): Volcano's Releasing,
    /// still on its node if it has one.
    pub terminating: bool,
    /// CPU and memory.
    pub request: Resources,
    /// Pod priority.
    pub priority: i32,
    /// `preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// `volcano.sh/preemptable`: false.
    pub not_preemptable: bool,
    /// `metadata.labels`.
    pub labels: Vec<(&'static str, &'static str)>,
    /// `spec.nodeSelector`.
    pub node_selector: Vec<(&'static str, &'static str)>,
    /// `spec.affinity`, as JSON.
    pub affinity: Option<serde_json::Value>,
}

/// `util.BuildPod(ns, name, node, phase, request, group, …)`.
pub fn pod(
    name: &'static str,
    node: &'static str,
    running: bool,
    request: Resources,
    group: &'static str,
) -> PodRow {
    PodRow {
        name,
        group,
        node,
        running,
        terminating: false,
        request,
        priority: 0,
        never_preempts: false,
        not_preemptable: false,
        labels: Vec::new(),
        node_selector: Vec::new(),
        affinity: None,
    }
}

/// `pod` being deleted: `util.BuildPod` with a deletion timestamp, which Volcano
/// reads as Releasing.
pub fn terminating(mut pod: PodRow) -> PodRow {
    pod.running = false;
    pod.terminating = true;
    pod
}

impl PodRow {
    /// Whether the pod occupies its node: running there, or leaving it.
    fn on_node(&self) -> bool {
        self.running || (self.terminating && !self.node.is_empty())
    }
}

/// One PodGroup of a table.
#[derive(Debug, Clone)]
pub struct GroupRow {
    /// `metadata.name`.
    pub name: &'static str,
    /// `spec.queue`.
    pub queue: &'static str,
    /// `spec.minMember`.
    pub min_member: usize,
    /// `spec.minResources`.
    pub min_resources: Option<Resources>,
    /// `status.phase`.
    pub phase: GangPhase,
    /// Priority (from its PriorityClass).
    pub priority: i32,
    /// `metadata.namespace` (of its pods too).
    pub namespace: &'static str,
    /// `spec.minTaskMember`: role → minimum.
    pub min_roles: Vec<(&'static str, usize)>,
    /// `spec.networkTopology`.
    pub network_topology: Option<TopologyConstraint>,
    /// `metadata.annotations`.
    pub annotations: Vec<(&'static str, &'static str)>,
}

/// `util.BuildPodGroup(name, ns, queue, minMember, …, phase)`.
pub fn group(
    name: &'static str,
    queue: &'static str,
    min_member: usize,
    phase: GangPhase,
) -> GroupRow {
    GroupRow {
        name,
        queue,
        min_member,
        min_resources: None,
        phase,
        priority: 0,
        namespace: "c1",
        min_roles: Vec::new(),
        network_topology: None,
        annotations: Vec::new(),
    }
}

/// One queue of a table.
pub fn queue(name: &str, weight: u32, capability: Option<Resources>) -> QueueSpec {
    QueueSpec {
        weight,
        capability,
        reclaimable: true,
        ..QueueSpec::new(name)
    }
}

/// A closed queue.
pub fn closed(mut q: QueueSpec) -> QueueSpec {
    q.state = QueueState::Closed;
    q
}

/// A cluster of a table.
#[derive(Debug, Default)]
pub struct Table {
    /// Nodes: name and allocatable.
    pub nodes: Vec<(&'static str, Resources)>,
    /// Queues.
    pub queues: Vec<QueueSpec>,
    /// PodGroups.
    pub groups: Vec<GroupRow>,
    /// Pods.
    pub pods: Vec<PodRow>,
    /// Node labels: node, key, value.
    pub node_labels: Vec<(&'static str, &'static str, &'static str)>,
}

fn key(name: &str) -> GangKey {
    key_in("c1", name)
}

fn key_in(namespace: &str, name: &str) -> GangKey {
    GangKey {
        namespace: namespace.into(),
        name: name.into(),
        single: false,
    }
}

/// The namespace of the pod's PodGroup (`c1` when the table has none for it).
fn namespace_of<'a>(groups: &'a [GroupRow], pod: &PodRow) -> &'a str {
    groups
        .iter()
        .find(|g| g.name == pod.group)
        .map_or("c1", |g| g.namespace)
}

impl Table {
    /// The labels of node `name`.
    fn labels_of(&self, name: &str) -> BTreeMap<String, String> {
        self.node_labels
            .iter()
            .filter(|(n, _, _)| *n == name)
            .map(|(_, k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn jobs(&self) -> Vec<JobInfo> {
        self.groups
            .iter()
            .map(|g| {
                let k = key_in(g.namespace, g.name);
                let tasks = self
                    .pods
                    .iter()
                    .filter(|p| p.group == g.name)
                    .map(|p| {
                        let mut t = task(&k, p.name, p.request.clone());
                        t.namespace = g.namespace.into();
                        t.pod = Arc::new(pod_object(p, g.namespace));
                        t.role = p
                            .labels
                            .iter()
                            .find(|(k, _)| *k == TASK_SPEC)
                            .map(|(_, v)| v.to_string());
                        t.priority = p.priority;
                        t.never_preempts = p.never_preempts;
                        t.preemptable = !p.not_preemptable;
                        if p.terminating {
                            t.status = TaskStatus::Releasing;
                        }
                        if p.on_node() {
                            if p.running {
                                t.status = TaskStatus::Running;
                            }
                            t.gated = false;
                            t.placement = Some(TaskPlacement {
                                node: p.node.to_string(),
                                devices: Vec::new(),
                                init_count: 0,
                            });
                        }
                        t
                    })
                    .collect();
                let mut j = job(g.name, g.queue, g.min_member, tasks);
                j.key = k.clone();
                for t in &mut j.tasks {
                    t.job = k.clone();
                }
                j.min_resources = g.min_resources.clone();
                j.min_roles = g
                    .min_roles
                    .iter()
                    .map(|(role, n)| (role.to_string(), *n))
                    .collect();
                j.network_topology = g.network_topology.clone();
                j.group_preemptable = crate::gang::victim_facts::group_preemptable(
                    &g.annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                );
                j.priority = g.priority;
                j.inqueue = g.phase != GangPhase::Pending;
                j
            })
            .collect()
    }

    /// Runs `actions` with the plugins of `conf` on the table.
    pub fn run(&self, conf: &str, actions: &[&dyn Action]) -> SessionOutcome {
        self.run_in_topology(&[], conf, actions)
    }

    /// Runs `actions` with the plugins of `conf` on the table, its nodes under
    /// these HyperNodes.
    pub fn run_in_topology(
        &self,
        hyper_nodes: &[HyperNode],
        conf: &str,
        actions: &[&dyn Action],
    ) -> SessionOutcome {
        let conf = SchedulerConf::parse(conf).expect("configuration");
        let jobs = self.jobs();
        let mut total = Resources::default();
        let mut requested: BTreeMap<&str, Resources> = BTreeMap::new();
        let mut bound: BTreeMap<&str, Vec<Arc<AffinityPod>>> = BTreeMap::new();
        for p in self.pods.iter().filter(|p| p.on_node()) {
            let object = pod_object(p, namespace_of(&self.groups, p));
            requested
                .entry(p.node)
                .or_default()
                .add(&pod_footprint(&object));
            bound
                .entry(p.node)
                .or_default()
                .push(Arc::new(AffinityPod::of(&object)));
        }
        let nodes = self
            .nodes
            .iter()
            .map(|(name, alloc)| {
                total.add(alloc);
                SessionNode::new(
                    name.to_string(),
                    Default::default(),
                    NodeResources {
                        allocatable: alloc.clone(),
                        requested: requested.get(name).cloned().unwrap_or_default(),
                        traits: Some(Arc::new(NodeTraits {
                            labels: self.labels_of(name),
                            taints: Vec::new(),
                            unschedulable: false,
                        })),
                        pods: Arc::new(bound.remove(name).unwrap_or_default()),
                    },
                )
            })
            .collect();
        let mut queues: Vec<QueueInfo> = self.queues.iter().cloned().map(QueueInfo::idle).collect();
        for j in &jobs {
            if let Some(q) = queues.iter_mut().find(|q| q.spec.name == j.queue) {
                q.charge_job(j, j.inqueue);
            }
        }
        for q in &mut queues {
            q.prune_zeros();
        }
        let mut st = state(total, queues, jobs);
        st.nodes = NodeSet::new(nodes, BTreeMap::new());
        let labels: Vec<(&str, BTreeMap<String, String>)> = self
            .nodes
            .iter()
            .map(|(name, _)| (*name, self.labels_of(name)))
            .collect();
        st.topology = Arc::new(NetworkTopology::resolve(
            hyper_nodes,
            labels.iter().map(|(n, l)| (*n, l)),
        ));
        let mut session = Session::open(st, registry::build(&conf).expect("plugins build"));
        for action in actions {
            action.execute(&mut session);
        }
        session.close()
    }
}

/// `c1/<pod>` of every evicted pod.
pub fn evicted(o: &SessionOutcome) -> BTreeSet<String> {
    o.evictions().map(|e| format!("c1/{}", e.name)).collect()
}

/// What the session decided for PodGroup `c1/<name>`.
pub fn verdict<'a>(o: &'a SessionOutcome, name: &str) -> Option<&'a GangVerdict> {
    o.verdicts.get(&key(name)).map(|v| &**v)
}

/// The phase of PodGroup `c1/<name>`.
pub fn phase(o: &SessionOutcome, name: &str) -> Option<GangPhase> {
    o.verdicts.get(&key(name)).map(|v| v.phase)
}

/// `<namespace>/<pod>` → node of every pod the session binds (placed, not
/// pipelined), as Volcano's `ExpectBindMap` lists them.
pub fn bound(o: &SessionOutcome) -> BTreeMap<String, String> {
    o.commits
        .iter()
        .flat_map(|c| &c.members)
        .filter(|m| !m.pipelined)
        .filter_map(|m| {
            let node = m.placement.as_ref()?.node.clone();
            Some((format!("{}/{}", m.namespace, m.name), node))
        })
        .collect()
}

/// `<namespace>/<group>` → nodes of the pods the session pipelines, as
/// Volcano's `ExpectPipeLined` lists them.
pub fn pipelined(o: &SessionOutcome) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &o.commits {
        for m in c.members.iter().filter(|m| m.pipelined) {
            if let Some(p) = &m.placement {
                out.entry(format!("{}/{}", c.gang.namespace, c.gang.name))
                    .or_default()
                    .push(p.node.clone());
            }
        }
    }
    out
}

/// `r` with `amount` whole units of the extended resource `name` added
/// (`api.ScalarResource`).
pub fn with(mut r: Resources, name: &str, amount: i64) -> Resources {
    r.set(name, amount.saturating_mul(1000));
    r
}
