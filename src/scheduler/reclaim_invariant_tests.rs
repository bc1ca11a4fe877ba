//! Property test of preemption and tidal reclaim under the tidal configuration
//! (queues `inference`, not reclaimable, and `training`, reclaimable): random
//! nodes of whole GPUs; training gangs and inference pods of random priorities
//! (given by `spec.priority`, a pod's PriorityClass or its PodGroup's), some
//! protected (`volcano.sh/preemptable: "false"`, `kube-system`, a critical
//! class), some of unknown service type, some that never preempt; planning
//! cycles, kube-scheduler binding some or all released pods, evicted pods
//! leaving and workloads finishing. Evicted pods go at once (a cluster file) or
//! stay terminating on their GPUs until the test lets them go (a live cluster).
//!
//! The property: after every step, judged from what a user sees (pods gone or
//! terminating, the `Evict` events naming their preemptor, the pipelined-plan
//! annotation, gates) and from the ledger,
//!
//! * no GPU is booked over capacity, nor promised beyond what it holds once the
//!   pods being evicted from it are gone;
//! * a gated pod is never bound, and holds GPUs only while its gang waits on a
//!   pipelined plan;
//! * no pod disappears without an `Evict` event, and every victim was a running
//!   pod that may be evicted: never in `kube-system`, of a critical class, or
//!   marked not preemptable; reclaim takes only training from an inference
//!   preemptor (training reclaims nothing, unknown types are never taken);
//!   preempt takes only lower-priority jobs of the preemptor's own queue; a pod
//!   with `preemptionPolicy: Never` evicts nobody;
//! * a gang never holds GPUs with fewer than minMember of its members (an
//!   eviction takes a gang whole or leaves it its minimum);
//! * a pipelined pod stays gated while any of its victims exists, and the
//!   members planned with it start before then only if they make minMember
//!   without it.

use super::GangConfig;
use super::gang_tests::{Cluster, member, podgroup};
use super::reclaim_tests::{inference_pod, make_tidal, training_group};
use crate::cluster::api::{
    ApiError, BindingMetadata, ClusterApi, GateLift, MetadataPatch, SchedulerEvent, VolcanoObject,
};
use crate::cluster::file::ClusterObject;
use crate::cluster::memory::MemoryCluster;
use crate::extender::wire::ExtenderBindingArgs;
use crate::gang::book::GANG_GATE;
use crate::gang::pipelined_plan::{PIPELINED_PLAN, PipelinedPlan};
use crate::ledger::PodPhase;
use crate::usage::GpuUsage;
use k8s_openapi::api::core::v1::{Node, Pod};
use proptest::prelude::*;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Priorities a workload may have; the non-zero ones also exist as classes.
const PRIORITIES: [i32; 4] = [0, 100, 1000, 10000];
const CLASSES: [(&str, i32); 3] = [("low", 100), ("mid", 1000), ("high", 10000)];
const CRITICAL_CLASS: &str = "system-cluster-critical";
const CRITICAL_VALUE: i32 = 2_000_000_000;

/// How a workload's priority is given.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// `spec.priority` on each pod (as admission fills it in).
    Spec,
    /// `spec.priorityClassName` on each pod.
    PodClass,
    /// `spec.priorityClassName` on the PodGroup.
    GroupClass,
}

/// A training gang to make.
#[derive(Debug, Clone)]
struct TrainingJob {
    size: usize,
    min: usize,
    priority: usize,
    via: Via,
    /// Members of `system-cluster-critical`.
    critical: bool,
    /// Bit `i`: member `i` carries `volcano.sh/preemptable: "false"`.
    unpreemptable: u8,
    kube_system: bool,
    /// No `volcano.sh/service.type`.
    unknown: bool,
    /// `preemptionPolicy: Never` on every member.
    never: bool,
}

#[derive(Debug, Clone)]
enum Op {
    /// A training gang in queue `training`.
    Training(TrainingJob),
    /// An inference pod in queue `inference`.
    Inference {
        priority: usize,
        via_class: bool,
        never: bool,
    },
    /// A planning cycle.
    Cycle,
    /// A planning cycle, then kube-scheduler schedules every pod it may, but
    /// for the `hold`-th one if given (its bind is still to come: a gang can be
    /// released and only partly bound when the next cycle runs).
    Settle { hold: Option<usize> },
    /// kube-scheduler schedules the `pick`-th pod it may (ungated, unbound).
    Schedule { pick: usize },
    /// kube-scheduler schedules every pod it may.
    ScheduleAll,
    /// The `pick`-th pod being evicted is gone (its kubelet confirmed).
    Leave { pick: usize },
    /// Every pod of the `pick`-th workload finishes, if all of them run.
    Finish { pick: usize },
    /// The pod watch delivers every pod as the store has it now.
    Watch,
}

fn training_strategy() -> impl Strategy<Value = Op> {
    (
        1usize..=4,
        1usize..=4,
        0usize..PRIORITIES.len(),
        prop_oneof![Just(Via::Spec), Just(Via::PodClass), Just(Via::GroupClass)],
        prop::bool::weighted(0.1),
        prop_oneof![4 => Just(0u8), 1 => 0u8..16],
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(size, min, priority, via, critical, unpreemptable, kube_system, unknown, never)| {
                Op::Training(TrainingJob {
                    size,
                    min: min.min(size),
                    priority,
                    via,
                    critical,
                    unpreemptable,
                    kube_system,
                    unknown,
                    never,
                })
            },
        )
}

/// A scenario: training that starts first (so that there is something to take
/// back), then random steps; at most 25 steps in all.
fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    (
        prop::collection::vec(training_strategy(), 1..=3),
        settle_strategy(),
        prop::collection::vec(op_strategy(), 5..=21),
    )
        .prop_map(|(first, settle, then)| {
            let mut ops = first;
            ops.push(settle);
            ops.extend(then);
            ops
        })
}

fn settle_strategy() -> impl Strategy<Value = Op> {
    prop::option::weighted(0.5, any::<usize>()).prop_map(|hold| Op::Settle { hold })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => training_strategy(),
        2 => (0usize..PRIORITIES.len(), any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(priority, via_class, never)| Op::Inference { priority, via_class, never }),
        4 => Just(Op::Cycle),
        3 => settle_strategy(),
        2 => any::<usize>().prop_map(|pick| Op::Schedule { pick }),
        1 => Just(Op::ScheduleAll),
        2 => any::<usize>().prop_map(|pick| Op::Leave { pick }),
        1 => any::<usize>().prop_map(|pick| Op::Finish { pick }),
        1 => Just(Op::Watch),
    ]
}

/// The store as a live cluster shows it: an evicted pod stays on its node,
/// terminating, until its kubelet confirms (the test's `Leave`), and the
/// scheduler hears of it through its watch.
struct SlowEvictions(Arc<MemoryCluster>);

#[async_trait::async_trait]
impl ClusterApi for SlowEvictions {
    async fn remember_pod(&self, pod: &Pod) {
        self.0.remember_pod(pod).await
    }
    async fn forget_pod(&self, namespace: &str, name: &str) {
        self.0.forget_pod(namespace, name).await
    }
    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        self.0.get_pod(namespace, name).await
    }
    async fn patch_pod_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: &MetadataPatch,
    ) -> Result<(), ApiError> {
        self.0.patch_pod_metadata(namespace, name, patch).await
    }
    async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        metadata: &BindingMetadata,
    ) -> Result<(), ApiError> {
        self.0.bind_pod(namespace, name, uid, node, metadata).await
    }
    async fn get_node(&self, name: &str) -> Result<Option<Node>, ApiError> {
        self.0.get_node(name).await
    }
    async fn patch_node_annotations(
        &self,
        name: &str,
        annotations: &BTreeMap<String, Option<String>>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError> {
        self.0
            .patch_node_annotations(name, annotations, resource_version)
            .await
    }
    async fn record_event(&self, event: SchedulerEvent) {
        self.0.record_event(event).await
    }
    async fn remove_scheduling_gate(
        &self,
        namespace: &str,
        name: &str,
        lift: &GateLift<'_>,
    ) -> Result<(), ApiError> {
        self.0.remove_scheduling_gate(namespace, name, lift).await
    }
    fn reports_changes(&self) -> bool {
        true
    }
    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let Some(mut pod) = self.0.get_pod(namespace, name).await? else {
            return Err(ApiError::NotFound {
                kind: "pod",
                name: format!("{namespace}/{name}"),
            });
        };
        if pod.metadata.deletion_timestamp.is_none() {
            pod.metadata.deletion_timestamp =
                Some(serde_json::from_value(json!("2026-01-01T00:10:00Z")).expect("time"));
            self.0.insert_pod(&pod);
        }
        Ok(())
    }
    async fn patch_volcano_status(
        &self,
        object: &VolcanoObject,
        status: &serde_json::Value,
    ) -> Result<(), ApiError> {
        self.0.patch_volcano_status(object, status).await
    }
}

/// A training gang or an inference pod, as the test made it.
struct Workload {
    queue: &'static str,
    /// `volcano.sh/service.type`, if stated.
    service: Option<&'static str>,
    /// The job priority the planner resolves (PodGroup class, else the members').
    priority: i32,
    min: usize,
    single: bool,
    pods: Vec<usize>,
}

/// One pod the test made.
struct PodInfo {
    /// The pod as created (the store keeps only a slim copy once it is bound).
    pod: Pod,
    namespace: String,
    name: String,
    uid: String,
    workload: usize,
    /// Never to be evicted: `volcano.sh/preemptable: "false"`, `kube-system` or a
    /// critical class.
    protected: bool,
    never: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Preempt,
    Reclaim,
}

/// What the test has seen so far.
#[derive(Default)]
struct Seen {
    events: usize,
    /// Evicted pods (by index).
    evicted: BTreeSet<usize>,
    /// The last pipelined plan seen on each pod.
    plans: BTreeMap<usize, PipelinedPlan>,
    /// Gated members planned together with a pipelined one, by workload: none
    /// of them starts before every victim of their plans is gone, unless those
    /// starting make the gang's minimum on their own.
    cohorts: Vec<(usize, BTreeSet<usize>)>,
}

struct World {
    c: Cluster,
    slow: bool,
    workloads: Vec<Workload>,
    pods: Vec<PodInfo>,
    created: u32,
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == GANG_GATE))
}

fn bound(p: &Pod) -> bool {
    p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
}

fn leaving(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn plan_of(p: &Pod) -> Option<Result<PipelinedPlan, String>> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PIPELINED_PLAN))
        .map(|t| PipelinedPlan::decode(t))
}

/// The preemptor and action an `Evict` event's message names
/// (`Reclaimed: reclaimed for pod ns/name of queue "q"`).
fn parse_evict(message: &str) -> Option<(Action, String, String)> {
    let action = if message.starts_with("Reclaimed:") {
        Action::Reclaim
    } else if message.starts_with("Preempted:") {
        Action::Preempt
    } else {
        return None;
    };
    let who = message
        .split_once(" for pod ")?
        .1
        .split_whitespace()
        .next()?;
    let (ns, name) = who.split_once('/')?;
    Some((action, ns.to_string(), name.to_string()))
}

impl World {
    fn new(gpus: &[usize], slow: bool) -> Self {
        let names: Vec<String> = (0..gpus.len()).map(|i| format!("n{i}")).collect();
        let layout: Vec<(&str, usize)> = names
            .iter()
            .map(String::as_str)
            .zip(gpus.iter().copied())
            .collect();
        let c = if slow {
            Cluster::with_api(&layout, GangConfig::default(), |m| {
                Arc::new(SlowEvictions(m)) as Arc<dyn ClusterApi>
            })
        } else {
            Cluster::new(&layout, GangConfig::default())
        };
        make_tidal(&c);
        for (name, value) in CLASSES {
            let class = serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))
                .expect("priority class");
            c.s.apply_cluster_object(&ClusterObject::PriorityClass(Box::new(class)));
        }
        Self {
            c,
            slow,
            workloads: Vec::new(),
            pods: Vec::new(),
            created: 0,
        }
    }

    fn class_of(priority: i32) -> Option<&'static str> {
        CLASSES
            .iter()
            .find(|(_, v)| *v == priority)
            .map(|(n, _)| *n)
    }

    fn add_training(&mut self, job: &TrainingJob) {
        let w = self.workloads.len();
        let name = format!("g{w}");
        let namespace = if job.kube_system { "kube-system" } else { "ml" };
        let value = PRIORITIES[job.priority];
        let mut group = if job.unknown {
            podgroup(&name, job.min as u32, "training", json!({}))
        } else {
            training_group(&name, job.min as u32)
        };
        group["metadata"]["namespace"] = json!(namespace);
        let priority = if job.critical {
            CRITICAL_VALUE
        } else {
            if let (Via::GroupClass, Some(class)) = (job.via, Self::class_of(value)) {
                group["spec"]["priorityClassName"] = json!(class);
            }
            value
        };
        self.c.s.apply_podgroup(&group);
        let mut pods = Vec::new();
        for i in 0..job.size {
            let pod_name = format!("{name}-m{i}");
            self.created += 1;
            let mut pod = member(&pod_name, &name, self.created % 60);
            pod.metadata.namespace = Some(namespace.to_string());
            let not_preemptable = job.unpreemptable & (1 << i) != 0;
            if not_preemptable {
                pod.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert("volcano.sh/preemptable".into(), "false".into());
            }
            let spec = pod.spec.get_or_insert_with(Default::default);
            if job.critical {
                spec.priority_class_name = Some(CRITICAL_CLASS.into());
            } else {
                match job.via {
                    Via::Spec => spec.priority = Some(value),
                    Via::PodClass => {
                        spec.priority_class_name = Self::class_of(value).map(Into::into)
                    }
                    Via::GroupClass => {}
                }
            }
            if job.never {
                spec.preemption_policy = Some("Never".into());
            }
            self.c.add(&pod);
            pods.push(self.pods.len());
            self.pods.push(PodInfo {
                pod,
                namespace: namespace.to_string(),
                uid: format!("uid-{pod_name}"),
                name: pod_name,
                workload: w,
                protected: not_preemptable || job.kube_system || job.critical,
                never: job.never,
            });
        }
        self.workloads.push(Workload {
            queue: "training",
            service: (!job.unknown).then_some("training"),
            priority,
            min: job.min,
            single: false,
            pods,
        });
    }

    fn add_inference(&mut self, priority: usize, via_class: bool, never: bool) {
        let w = self.workloads.len();
        let name = format!("svc{w}");
        let value = PRIORITIES[priority];
        let mut pod = inference_pod(&name);
        let spec = pod.spec.get_or_insert_with(Default::default);
        if via_class {
            spec.priority_class_name = Self::class_of(value).map(Into::into);
        } else {
            spec.priority = Some(value);
        }
        if never {
            spec.preemption_policy = Some("Never".into());
        }
        self.c.add(&pod);
        self.pods.push(PodInfo {
            pod,
            namespace: "ml".into(),
            uid: format!("uid-{name}"),
            name,
            workload: w,
            protected: false,
            never,
        });
        self.workloads.push(Workload {
            queue: "inference",
            service: Some("inference"),
            priority: value,
            min: 1,
            single: true,
            pods: vec![self.pods.len() - 1],
        });
    }

    /// Every pod the test made, as the store has it now.
    async fn look(&self) -> Vec<Option<Pod>> {
        let mut out = Vec::with_capacity(self.pods.len());
        for p in &self.pods {
            out.push(self.c.pod_in(&p.namespace, &p.name).await);
        }
        out
    }

    /// Pods kube-scheduler would schedule now: ungated, unbound, alive.
    fn schedulable(&self, now: &[Option<Pod>]) -> Vec<usize> {
        now.iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let p = p.as_ref()?;
                (!gated(p) && !bound(p) && !leaving(p) && !finished(p)).then_some(i)
            })
            .collect()
    }

    /// The pod as the watch delivers it: the whole pod as the API server has it,
    /// where the store keeps only metadata, node and phase of a bound pod.
    fn as_watched(&self, i: usize, stored: &Pod) -> Pod {
        if !bound(stored) {
            return stored.clone();
        }
        let mut pod = self.pods[i].pod.clone();
        pod.metadata = stored.metadata.clone();
        let spec = pod.spec.get_or_insert_with(Default::default);
        spec.node_name = stored.spec.as_ref().and_then(|s| s.node_name.clone());
        spec.scheduling_gates = None;
        pod.status = stored.status.clone();
        pod
    }

    /// kube-scheduler: `/filter`, then `/bind` to the first node, then the watch
    /// shows the scheduler the bound pod.
    async fn schedule(&self, i: usize) {
        let p = &self.pods[i];
        let Ok(nodes) = self.c.filter_in(&p.namespace, &p.name).await else {
            return;
        };
        let r = self
            .c
            .s
            .bind(ExtenderBindingArgs {
                pod_name: Some(p.name.clone()),
                pod_namespace: Some(p.namespace.clone()),
                pod_uid: Some(p.uid.clone()),
                node: Some(nodes[0].clone()),
            })
            .await;
        if r.error.is_empty()
            && let Some(stored) = self.c.pod_in(&p.namespace, &p.name).await
        {
            self.c.s.apply_pod(&self.as_watched(i, &stored));
        }
    }

    /// Runs one step; returns the pods the test itself removed.
    async fn step(&mut self, op: &Op) -> BTreeSet<usize> {
        let mut removed = BTreeSet::new();
        match op {
            Op::Training(job) => self.add_training(job),
            Op::Inference {
                priority,
                via_class,
                never,
            } => self.add_inference(*priority, *via_class, *never),
            Op::Cycle => {
                self.c.s.run_gang_cycle().await;
            }
            Op::Schedule { pick } => {
                let ready = self.schedulable(&self.look().await);
                if !ready.is_empty() {
                    self.schedule(ready[pick % ready.len()]).await;
                }
            }
            Op::Settle { hold } => {
                self.c.s.run_gang_cycle().await;
                let ready = self.schedulable(&self.look().await);
                let held = hold
                    .filter(|_| !ready.is_empty())
                    .map(|h| ready[h % ready.len()]);
                for i in ready {
                    if Some(i) != held {
                        self.schedule(i).await;
                    }
                }
            }
            Op::ScheduleAll => {
                for i in self.schedulable(&self.look().await) {
                    self.schedule(i).await;
                }
            }
            Op::Leave { pick } => {
                let now = self.look().await;
                let going: Vec<usize> = (0..self.pods.len())
                    .filter(|i| now[*i].as_ref().is_some_and(leaving))
                    .collect();
                if !going.is_empty() {
                    let i = going[pick % going.len()];
                    let p = &self.pods[i];
                    // The deletion as the watch reports it.
                    self.c
                        .memory
                        .evict_pod(&p.namespace, &p.name)
                        .await
                        .expect("pod exists");
                    self.c.s.forget_pod(&p.uid);
                    removed.insert(i);
                }
            }
            Op::Finish { pick } => {
                if self.workloads.is_empty() {
                    return removed;
                }
                let w = &self.workloads[pick % self.workloads.len()];
                let now = self.look().await;
                let alive: Vec<(usize, &Pod)> = w
                    .pods
                    .iter()
                    .filter_map(|i| Some((*i, now[*i].as_ref()?)))
                    .filter(|(_, p)| !finished(p))
                    .collect();
                // Only running workloads finish: a pod that never ran cannot succeed.
                if alive.is_empty() || !alive.iter().all(|(_, p)| bound(p)) {
                    return removed;
                }
                for (i, p) in alive {
                    let mut p = p.clone();
                    p.status = Some(
                        serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"),
                    );
                    self.c.memory.insert_pod(&p);
                    self.c.s.apply_pod(&self.as_watched(i, &p));
                }
            }
            Op::Watch => {
                for (i, p) in self.look().await.iter().enumerate() {
                    if let Some(p) = p {
                        self.c.s.apply_pod(&self.as_watched(i, p));
                    }
                }
            }
        }
        removed
    }

    fn index_of(&self, namespace: &str, name: &str) -> Option<usize> {
        self.pods
            .iter()
            .position(|p| p.namespace == namespace && p.name == name)
    }

    fn index_of_uid(&self, uid: &str) -> Option<usize> {
        self.pods.iter().position(|p| p.uid == uid)
    }

    /// Checks every rule after a step; `before` is the store before it.
    async fn check(
        &self,
        seen: &mut Seen,
        before: &[Option<Pod>],
        removed: &BTreeSet<usize>,
    ) -> Result<(), TestCaseError> {
        let now = self.look().await;
        self.check_capacity()?;
        self.check_evictions(seen, before, &now, removed)?;
        self.check_gates_and_plans(seen, &now)?;
        self.check_gangs(&now)?;
        Ok(())
    }

    /// No GPU booked over capacity; what is promised to pipelined plans fits
    /// once the pods they wait for are gone.
    fn check_capacity(&self) -> Result<(), TestCaseError> {
        self.c.s.with_ledger(|l| {
            // What pods still booked and awaited by a plan free, per GPU.
            let awaited: BTreeSet<&str> = l
                .pledges()
                .flat_map(|p| p.victims.iter().map(String::as_str))
                .collect();
            let mut freed: BTreeMap<&str, GpuUsage> = BTreeMap::new();
            for uid in awaited {
                if let Some(p) = l.pod(uid) {
                    for (gpu, u) in &p.usage {
                        freed.entry(&**gpu).or_default().add(u);
                    }
                }
            }
            for (node, entry) in l.nodes() {
                for ((d, u), e) in entry
                    .devices
                    .iter()
                    .zip(entry.usage.iter())
                    .zip(entry.effective.iter())
                {
                    prop_assert!(
                        u.used <= d.count && u.usedmem <= d.devmem,
                        "{node}/{} booked over capacity: {u:?}",
                        d.id
                    );
                    let mut after = *e;
                    if let Some(f) = freed.get(&*d.id) {
                        after.sub(f);
                    }
                    prop_assert!(
                        after.used <= d.count && after.usedmem <= d.devmem,
                        "{node}/{} promised beyond capacity once its victims are gone: \
                         effective {e:?}, freed {:?}",
                        d.id,
                        freed.get(&*d.id)
                    );
                }
            }
            prop_assert_eq!(
                l.recomputed_node_usage(),
                l.incremental_node_usage().clone()
            );
            Ok(())
        })
    }

    /// Every eviction, as the `Evict` events tell it, follows the rules; no pod
    /// disappears without one.
    fn check_evictions(
        &self,
        seen: &mut Seen,
        before: &[Option<Pod>],
        now: &[Option<Pod>],
        removed: &BTreeSet<usize>,
    ) -> Result<(), TestCaseError> {
        let events = self.c.memory.events();
        for e in &events[seen.events..] {
            if e.reason != "Evict" {
                continue;
            }
            let (action, ns, name) = parse_evict(&e.message)
                .ok_or_else(|| TestCaseError::fail(format!("unreadable: {e:?}")))?;
            let v = self
                .index_of(&e.namespace, &e.pod)
                .ok_or_else(|| TestCaseError::fail(format!("unknown victim: {e:?}")))?;
            let p = self
                .index_of(&ns, &name)
                .ok_or_else(|| TestCaseError::fail(format!("unknown preemptor: {e:?}")))?;
            let (victim, preemptor) = (&self.pods[v], &self.pods[p]);
            let (vw, pw) = (
                &self.workloads[victim.workload],
                &self.workloads[preemptor.workload],
            );
            let what = format!(
                "{} evicted for {}: {}",
                victim.name, preemptor.name, e.message
            );
            prop_assert!(!seen.evicted.contains(&v), "evicted twice: {what}");
            prop_assert!(
                before[v]
                    .as_ref()
                    .is_some_and(|p| bound(p) && !leaving(p) && !finished(p)),
                "not a running pod: {what}"
            );
            prop_assert!(!victim.protected, "protected pod: {what}");
            prop_assert!(!preemptor.never, "preemptionPolicy Never: {what}");
            // Members of one gang share a priority here, so preempt inside a job
            // (its lower-priority members) never applies.
            prop_assert!(victim.workload != preemptor.workload, "own gang: {what}");
            match action {
                Action::Reclaim => {
                    prop_assert!(vw.queue != pw.queue, "reclaim in one queue: {what}");
                    prop_assert!(
                        pw.service == Some("inference"),
                        "only inference reclaims: {what}"
                    );
                    prop_assert!(
                        vw.service == Some("training"),
                        "only training is reclaimed: {what}"
                    );
                }
                // Service types are reclaim's rules: inside a queue, inference
                // included, a job may preempt jobs of lower priority.
                Action::Preempt => {
                    prop_assert!(vw.queue == pw.queue, "preempt across queues: {what}");
                    prop_assert!(
                        vw.priority < pw.priority,
                        "victim priority {} not below {}: {what}",
                        vw.priority,
                        pw.priority
                    );
                }
            }
            seen.evicted.insert(v);
        }
        seen.events = events.len();
        for (i, (was, is)) in before.iter().zip(now).enumerate() {
            if was.is_some() && is.is_none() && !removed.contains(&i) {
                prop_assert!(
                    seen.evicted.contains(&i),
                    "{} disappeared without an Evict event",
                    self.pods[i].name
                );
            }
        }
        for &v in &seen.evicted {
            let gone_or_going = now[v]
                .as_ref()
                .is_none_or(|p| (self.slow && leaving(p)) || finished(p));
            prop_assert!(
                gone_or_going,
                "{} evicted but still running",
                self.pods[v].name
            );
        }
        Ok(())
    }

    /// Gated pods are never bound and hold GPUs only while their gang waits on a
    /// pipelined plan; pipelined plans name only evicted pods; a pipelined pod is
    /// released only once every victim of its plan is gone, and the members
    /// planned with it only once all of theirs are too or they make minMember
    /// without the ones still waiting.
    fn check_gates_and_plans(
        &self,
        seen: &mut Seen,
        now: &[Option<Pod>],
    ) -> Result<(), TestCaseError> {
        let gone = |i: usize| now[i].as_ref().is_none_or(finished);
        for (i, pod) in now.iter().enumerate() {
            let Some(pod) = pod else { continue };
            let info = &self.pods[i];
            let Some(plan) = plan_of(pod) else { continue };
            let plan = plan.map_err(TestCaseError::fail)?;
            prop_assert!(!info.never, "{} never preempts but has a plan", info.name);
            for uid in &plan.victims {
                let v = self.index_of_uid(uid);
                prop_assert!(
                    v.is_some_and(|v| seen.evicted.contains(&v)),
                    "{} waits for {uid}, which nobody evicted",
                    info.name
                );
            }
            if !seen.plans.contains_key(&i) {
                // The members planned with it: its gated mates holding GPUs.
                let cohort: BTreeSet<usize> = self.workloads[info.workload]
                    .pods
                    .iter()
                    .copied()
                    .filter(|m| {
                        now[*m].as_ref().is_some_and(gated)
                            && self.c.s.with_ledger(|l| {
                                l.pod(&self.pods[*m].uid).is_some()
                                    || l.pledge_of(&self.pods[*m].uid).is_some()
                            })
                    })
                    .collect();
                seen.cohorts.push((info.workload, cohort));
            }
            seen.plans.insert(i, plan);
        }
        for (i, pod) in now.iter().enumerate() {
            let Some(pod) = pod else { continue };
            let info = &self.pods[i];
            let entry = self
                .c
                .s
                .with_ledger(|l| l.pod(&info.uid).map(|e| e.phase.clone()));
            if gated(pod) {
                prop_assert!(!bound(pod), "{} is gated but bound", info.name);
                prop_assert!(
                    !matches!(entry, Some(PodPhase::Bound | PodPhase::Binding)),
                    "{} is gated but booked as bound",
                    info.name
                );
                if entry.is_some() {
                    let waiting = self.workloads[info.workload]
                        .pods
                        .iter()
                        .any(|m| now[*m].as_ref().is_some_and(|p| plan_of(p).is_some()));
                    prop_assert!(
                        waiting,
                        "{} is gated and holds GPUs, but its gang waits on no plan",
                        info.name
                    );
                }
            } else if let Some(plan) = seen.plans.get(&i) {
                for uid in &plan.victims {
                    let v = self.index_of_uid(uid).expect("victims are known");
                    prop_assert!(
                        gone(v),
                        "{} released while its victim {} still exists",
                        info.name,
                        self.pods[v].name
                    );
                }
            }
        }
        for (w, cohort) in &seen.cohorts {
            let released = cohort
                .iter()
                .find(|m| now[**m].as_ref().is_some_and(|p| !gated(p)));
            let Some(released) = released else { continue };
            let waiting = cohort.iter().find_map(|m| {
                let plan = seen.plans.get(m)?;
                let v = plan
                    .victims
                    .iter()
                    .filter_map(|uid| self.index_of_uid(uid))
                    .find(|v| !gone(*v))?;
                Some((*m, v))
            });
            let Some((mate, victim)) = waiting else {
                continue;
            };
            // Members may start before their mates' victims are gone only when
            // they make the gang's minimum without them (the rest is elastic).
            let work = &self.workloads[*w];
            let started = work
                .pods
                .iter()
                .filter(|i| {
                    now[**i]
                        .as_ref()
                        .is_some_and(|p| !gated(p) && !leaving(p) && !finished(p))
                })
                .count();
            prop_assert!(
                started >= work.min,
                "{} released while {}, planned with it, still waits for {}: {started} \
                 started, below minMember {}",
                self.pods[*released].name,
                self.pods[mate].name,
                self.pods[victim].name,
                work.min
            );
        }
        Ok(())
    }

    /// A gang holds GPUs with none or at least minMember of its members: an
    /// eviction never leaves it half-running. Members being evicted hold nothing
    /// any more; members waiting on a pipelined plan hold their promise.
    fn check_gangs(&self, now: &[Option<Pod>]) -> Result<(), TestCaseError> {
        for (w, work) in self.workloads.iter().enumerate() {
            if work.single {
                continue;
            }
            let holding: Vec<&str> = work
                .pods
                .iter()
                .filter(|i| {
                    now[**i]
                        .as_ref()
                        .is_some_and(|p| !leaving(p) && !finished(p))
                })
                .map(|i| &self.pods[*i])
                .filter(|p| {
                    self.c
                        .s
                        .with_ledger(|l| l.pod(&p.uid).is_some() || l.pledge_of(&p.uid).is_some())
                })
                .map(|p| p.name.as_str())
                .collect();
            prop_assert!(
                holding.is_empty() || holding.len() >= work.min,
                "gang g{w} holds GPUs with {holding:?}, below minMember {}",
                work.min
            );
        }
        Ok(())
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn run(gpus: Vec<usize>, slow: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut world = World::new(&gpus, slow);
    let mut seen = Seen::default();
    for op in &ops {
        let before = world.look().await;
        let removed = world.step(op).await;
        world.check(&mut seen, &before, &removed).await?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn reclaim_and_preempt_keep_their_rules(
        gpus in prop::collection::vec(1usize..=4, 1..=3),
        slow in any::<bool>(),
        ops in ops_strategy(),
    ) {
        rt().block_on(run(gpus, slow, ops))?;
    }
}

/// Found by the property test: members being evicted counted toward their gang's
/// minimum, so while they were still terminating the gang's waiting member was
/// placed alone on GPUs freed elsewhere, and started below minMember.
#[tokio::test]
async fn members_being_evicted_do_not_count_toward_their_gang() {
    let mut w = World::new(&[4], true);
    w.add_inference(0, false, false);
    w.add_inference(0, false, false);
    w.add_training(&TrainingJob {
        size: 3,
        min: 2,
        priority: 0,
        via: Via::Spec,
        critical: false,
        unpreemptable: 0,
        kube_system: false,
        unknown: false,
        never: false,
    });
    w.step(&Op::Settle { hold: None }).await;
    let holds = |w: &World, i: usize| {
        let uid = w.pods[i].uid.clone();
        w.c.s.with_ledger(|l| l.pod(&uid).is_some())
    };
    // The services and two members of g2 run; g2-m2 waits for room.
    assert!((0..4).all(|i| holds(&w, i)));
    assert!(!holds(&w, 4));

    // A third service takes g2 back whole; its members terminate slowly.
    w.add_inference(0, false, false);
    w.step(&Op::Cycle).await;
    let events = w.c.memory.events();
    let evicted: Vec<&str> = events
        .iter()
        .filter(|e| e.reason == "Evict")
        .map(|e| e.pod.as_str())
        .collect();
    assert_eq!(evicted, ["g2-m0", "g2-m1"]);

    // The first two services finish: room frees up while g2's members are
    // still on their GPUs. g2-m2 alone is below minMember: it must wait.
    for pick in [0, 1] {
        w.step(&Op::Finish { pick }).await;
    }
    w.step(&Op::Cycle).await;
    let m2 = w.look().await[4].clone().expect("g2-m2 exists");
    assert!(gated(&m2), "g2-m2 was released alone");
    assert!(!holds(&w, 4), "g2-m2 holds GPUs alone");
}
