//! What the planner knows about gangs and queues: the member pods (from the pod
//! watch or the cluster file), PodGroups and Queues. Updated by
//! events; the planner reads a consistent copy of it once per cycle.

use super::book_changes::BookChanges;
use super::membership::{DEFAULT_QUEUE, Membership};
use super::priority_classes::PriorityClasses;
use super::victim_facts;
use crate::metadata_copy::without_managed_fields;
use crate::object_namespace::namespace_of;
use crate::resources::{Resources, pod_requests};
use crate::volcano::disruption_budget::DisruptionBudget;
use crate::volcano::framework::shared_namespaces::shared_namespace;
use crate::volcano::objects::{PodGroupSpec, QueueSpec};
use crate::volcano::resource_quota::NamespaceQuota;
use crate::volcano::topology::HyperNode;
use chrono::{DateTime, Utc};
use foldhash::HashMap;
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The scheduling gate our webhook puts on gang and queue pods; removed by the
/// planner when the pod's whole gang has a place.
pub const GANG_GATE: &str = "vgpu-scheduler.io/gang";

pub use crate::volcano::framework::GangKey;

/// Where a member pod stands, as the API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MemberPhase {
    /// Not yet on a node.
    Pending,
    /// On a node (`spec.nodeName` set), not finished.
    Placed,
    /// Finished successfully.
    Succeeded,
    /// Failed.
    Failed,
}

/// One pod of a gang or queue.
#[derive(Debug, Clone)]
pub struct Member {
    /// Pod UID.
    pub uid: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Its gang.
    pub gang: GangKey,
    /// The queue the pod names (the PodGroup's queue wins).
    pub queue_hint: Option<String>,
    /// Role inside the job (`volcano.sh/task-spec`).
    pub role: Option<String>,
    /// `spec.priority` (filled by admission from the PriorityClass).
    pub spec_priority: Option<i32>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<String>,
    /// Creation time, for first-come-first-served order.
    pub created: Option<DateTime<Utc>>,
    /// Carries our scheduling gate.
    pub gated: bool,
    /// Carries gates of others (not ours to lift; the pod cannot be scheduled).
    pub foreign_gates: bool,
    /// Phase.
    pub phase: MemberPhase,
    /// When the planner's reservation for it ends (Unix seconds), if it was planned.
    pub plan_deadline: Option<i64>,
    /// The node planned for it when it asks for no vGPU ([`super::PLANNED_NODE`]).
    pub planned_node: Option<String>,
    /// CPU and memory requests (milli-units), as queues count them.
    pub requests: Resources,
    /// Whether it may be evicted for another pod (`volcano.sh/preemptable`).
    pub preemptable: bool,
    /// `preemptionPolicy: Never`: it may not evict others.
    pub never_preempts: bool,
    /// Protected from eviction this long after it was bound.
    pub cooldown: Option<std::time::Duration>,
    /// When it was bound to its node.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// Kind of its first owner (for service types by owner kind).
    pub owner_kind: Option<String>,
    /// Its own `volcano.sh/service.type` (a gang of one has no PodGroup to say).
    pub service_type: Option<String>,
    /// Being deleted (evicted): on its node until its kubelet confirms.
    pub terminating: bool,
    /// The pod itself, for the GPU fit (metadata trimmed).
    pub pod: Arc<Pod>,
    /// Changes whenever anything above does (a new version of the pod, or a change
    /// made in place through [`GangBook::member_mut`]): what the planner keeps of
    /// the member between cycles is rebuilt only when this moved.
    pub generation: u64,
}

/// Generations come from one counter for the whole process, so a member that is
/// dropped and comes back, or a book built anew, never repeats an old one.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

fn next_generation() -> u64 {
    GENERATIONS.fetch_add(1, Ordering::Relaxed)
}

impl Member {
    /// Whether the pod still counts toward its gang (not failed).
    pub fn is_valid(&self) -> bool {
        self.phase != MemberPhase::Failed
    }
}

/// Everything the planner reads.
#[derive(Debug, Clone, Default)]
pub struct GangBook {
    /// Member pods by UID, shared: a planning cycle's copy of the book shares
    /// every member with the book rather than copying 28,000 of them, and a
    /// member changed meanwhile is copied on write ([`GangBook::member_mut`]).
    ///
    /// Private, like the PodGroups: every change goes through a method that
    /// notes it in `changes`, which the planner's copy of the book relies on.
    members: HashMap<String, Arc<Member>>,
    /// PodGroups by (namespace, name): Volcano's, and Kubernetes' own where no
    /// Volcano PodGroup has the same name (the Volcano one says more: queue,
    /// minResources, roles).
    groups: BTreeMap<(String, String), PodGroupSpec>,
    /// Kubernetes' own PodGroups (`scheduling.k8s.io`) by (namespace, name), kept
    /// apart so one returns to `groups` when a Volcano PodGroup of its name goes.
    native_groups: BTreeMap<(String, String), PodGroupSpec>,
    /// Members and PodGroups changed since the planner last copied the book.
    changes: BookChanges,
    /// Volcano PodGroups deleted, or seen with another UID (deleted and made
    /// again), since the planner last wrote statuses: a new object has none of
    /// the status written to the old one, however unchanged the verdict.
    replaced_groups: BTreeSet<(String, String)>,
    /// Queues by name.
    pub queues: BTreeMap<String, QueueSpec>,
    /// Queues whose object could not be read, with the reason (shown in debug output).
    pub queue_errors: BTreeMap<String, String>,
    /// PriorityClasses, for PodGroup and pod priorities.
    pub priority_classes: PriorityClasses,
    /// PodDisruptionBudgets by (namespace, name).
    pub budgets: BTreeMap<(String, String), DisruptionBudget>,
    /// ResourceQuotas by (namespace, name), for the `resourcequota` plugin.
    pub resource_quotas: BTreeMap<(String, String), NamespaceQuota>,
    /// HyperNodes by name: the network topology.
    pub hyper_nodes: BTreeMap<String, HyperNode>,
    /// HyperNodes whose object could not be read, with the reason.
    pub hyper_node_errors: BTreeMap<String, String>,
}

impl GangBook {
    /// Member pods by UID (changed only through the methods below, which note
    /// every change for the planner).
    pub fn members(&self) -> &HashMap<String, Arc<Member>> {
        &self.members
    }

    /// PodGroups by (namespace, name), Volcano's first, then Kubernetes' own.
    pub fn groups(&self) -> &BTreeMap<(String, String), PodGroupSpec> {
        &self.groups
    }

    /// The notes of what changed since they were last taken, left in place.
    pub fn pending_changes(&self) -> &BookChanges {
        &self.changes
    }

    /// Kubernetes' own PodGroups by (namespace, name), whether or not a Volcano
    /// PodGroup of the same name takes their place in [`GangBook::groups`].
    pub fn native_groups(&self) -> &BTreeMap<(String, String), PodGroupSpec> {
        &self.native_groups
    }

    /// Takes the notes of what changed since they were last taken.
    pub fn take_changes(&mut self) -> BookChanges {
        std::mem::take(&mut self.changes)
    }

    /// Applies a pod event: members are added or refreshed, others dropped.
    pub fn apply_pod(&mut self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        match member_of(pod) {
            Some(member) => self.insert_member(member),
            None => {
                self.forget_pod(uid);
            }
        }
    }

    /// Adds a member, or replaces the one of the same pod.
    pub fn insert_member(&mut self, member: Member) {
        self.changes.members.insert(member.uid.clone());
        self.members.insert(member.uid.clone(), Arc::new(member));
    }

    /// A member to change in place; its generation moves, so what was built from
    /// it before is built again.
    pub fn member_mut(&mut self, uid: &str) -> Option<&mut Member> {
        let member = Arc::make_mut(self.members.get_mut(uid)?);
        member.generation = next_generation();
        self.changes.members.insert(uid.to_string());
        Some(member)
    }

    /// Forgets a deleted pod; true when it was a member.
    pub fn forget_pod(&mut self, uid: &str) -> bool {
        let known = self.members.remove(uid).is_some();
        if known {
            self.changes.members.insert(uid.to_string());
        }
        known
    }

    /// After a full pod list: drops members the list did not contain.
    pub fn retain_pods(&mut self, existing: &std::collections::HashSet<String>) {
        let changes = &mut self.changes;
        self.members.retain(|uid, _| {
            let keep = existing.contains(uid);
            if !keep {
                changes.members.insert(uid.clone());
            }
            keep
        });
    }

    /// Applies a PodGroup.
    pub fn apply_group(&mut self, group: PodGroupSpec) {
        let key = (group.namespace.clone(), group.name.clone());
        self.changes.groups.insert(key.clone());
        let replaced = self
            .groups
            .get(&key)
            .is_some_and(|old| old.native.is_none() && old.uid != group.uid);
        if replaced {
            self.replaced_groups.insert(key.clone());
        }
        self.groups.insert(key, group);
    }

    /// The Volcano PodGroups deleted or made again since the last call.
    pub fn take_replaced_groups(&mut self) -> BTreeSet<(String, String)> {
        std::mem::take(&mut self.replaced_groups)
    }

    /// Forgets a PodGroup (a native one of the same name takes its place).
    pub fn forget_group(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.changes.groups.insert(key.clone());
        self.replaced_groups.insert(key.clone());
        match self.native_groups.get(&key) {
            Some(native) => {
                self.groups.insert(key, native.clone());
            }
            None => {
                self.groups.remove(&key);
            }
        }
    }

    /// Applies one of Kubernetes' own PodGroups.
    pub fn apply_native_group(&mut self, group: PodGroupSpec) {
        let key = (group.namespace.clone(), group.name.clone());
        self.changes.groups.insert(key.clone());
        if self.groups.get(&key).is_none_or(|g| g.native.is_some()) {
            self.groups.insert(key.clone(), group.clone());
        }
        self.native_groups.insert(key, group);
    }

    /// Forgets one of Kubernetes' own PodGroups.
    pub fn forget_native_group(&mut self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.changes.groups.insert(key.clone());
        self.native_groups.remove(&key);
        if self.groups.get(&key).is_some_and(|g| g.native.is_some()) {
            self.groups.remove(&key);
        }
    }

    /// Applies a Queue.
    pub fn apply_queue(&mut self, queue: QueueSpec) {
        self.queue_errors.remove(&queue.name);
        self.queues.insert(queue.name.clone(), queue);
    }

    /// Records a Queue that could not be read (it then admits nothing).
    pub fn queue_error(&mut self, name: &str, error: String) {
        self.queues.remove(name);
        self.queue_errors.insert(name.to_string(), error);
    }

    /// Forgets a Queue.
    pub fn forget_queue(&mut self, name: &str) {
        self.queues.remove(name);
        self.queue_errors.remove(name);
    }

    /// Brings this copy of the book up to `live`, copying only the members and
    /// PodGroups `changes` names (taken from `live` since this copy was last
    /// brought up) and the small tables whole.
    pub fn follow(&mut self, live: &GangBook, changes: &BookChanges) {
        for uid in &changes.members {
            match live.members.get(uid) {
                Some(m) => {
                    self.members.insert(uid.clone(), m.clone());
                }
                None => {
                    self.members.remove(uid);
                }
            }
        }
        for key in &changes.groups {
            for (mine, theirs) in [
                (&mut self.groups, &live.groups),
                (&mut self.native_groups, &live.native_groups),
            ] {
                match theirs.get(key) {
                    Some(g) => {
                        mine.insert(key.clone(), g.clone());
                    }
                    None => {
                        mine.remove(key);
                    }
                }
            }
        }
        // Named one by one, so a table added to the book cannot be forgotten here.
        let GangBook {
            members: _,
            groups: _,
            native_groups: _,
            changes: _,
            // Read from the live book by the cycle that writes statuses.
            replaced_groups: _,
            queues,
            queue_errors,
            priority_classes,
            budgets,
            resource_quotas,
            hyper_nodes,
            hyper_node_errors,
        } = live;
        self.queues.clone_from(queues);
        self.queue_errors.clone_from(queue_errors);
        self.priority_classes.clone_from(priority_classes);
        self.budgets.clone_from(budgets);
        self.resource_quotas.clone_from(resource_quotas);
        self.hyper_nodes.clone_from(hyper_nodes);
        self.hyper_node_errors.clone_from(hyper_node_errors);
    }

    /// The queue a member's gang belongs to.
    pub fn queue_of(&self, gang: &GangKey, hint: Option<&str>) -> String {
        if !gang.single
            && let Some(g) = self.groups.get(&gang.owned_names())
            && g.native.as_ref().is_none_or(|n| n.queue_named)
        {
            return g.queue.clone();
        }
        hint.unwrap_or(DEFAULT_QUEUE).to_string()
    }

    /// Members of one gang, in a stable order.
    pub fn members_of(&self, gang: &GangKey) -> Vec<&Member> {
        let mut v: Vec<&Member> = self
            .members
            .values()
            .filter(|m| &m.gang == gang)
            .map(|m| &**m)
            .collect();
        v.sort_by(|a, b| member_order(a, b));
        v
    }
}

/// Members are placed by priority (higher first), then age, then name.
pub fn member_order(a: &Member, b: &Member) -> std::cmp::Ordering {
    b.spec_priority
        .unwrap_or(0)
        .cmp(&a.spec_priority.unwrap_or(0))
        .then_with(|| a.created.cmp(&b.created))
        .then_with(|| a.name.cmp(&b.name))
}

/// Which gang a member pod belongs to, without the rest of its record: what
/// `/filter` and `/bind` ask of every pod they see, so they need not copy the pod
/// as [`member_of`] does.
#[derive(Debug, Clone)]
pub struct MemberKey<'a> {
    /// Pod UID.
    pub uid: &'a str,
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// How the pod names its gang, queue and role.
    pub membership: Membership,
    /// Its gang.
    pub gang: GangKey,
}

/// The gang key of a pod, or `None` when the pod is not a gang/queue member (or
/// has no UID, as [`member_of`] requires).
pub fn member_key(pod: &Pod) -> Option<MemberKey<'_>> {
    let membership = Membership::of(pod)?;
    let uid = pod.metadata.uid.as_deref()?;
    let namespace = namespace_of(&pod.metadata);
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    // A pod naming no PodGroup is a gang of its own, named after it.
    let (gang_name, single) = match &membership.group {
        Some(group) => (group.as_str(), false),
        None => (name, true),
    };
    let gang = GangKey {
        namespace: shared_namespace(namespace),
        name: gang_name.into(),
        single,
    };
    Some(MemberKey {
        uid,
        namespace,
        name,
        membership,
        gang,
    })
}

/// The member record of a pod, or `None` when the pod is not a gang/queue member.
pub fn member_of(pod: &Pod) -> Option<Member> {
    let MemberKey {
        uid,
        namespace,
        name,
        membership,
        gang,
    } = member_key(pod)?;
    let spec = pod.spec.as_ref();
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => MemberPhase::Succeeded,
        Some("Failed") => MemberPhase::Failed,
        _ if spec
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty()) =>
        {
            MemberPhase::Placed
        }
        _ => MemberPhase::Pending,
    };
    let gates: Vec<&str> = spec
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|g| g.iter().map(|g| g.name.as_str()).collect())
        .unwrap_or_default();
    let annotations = pod.metadata.annotations.as_ref();
    Some(Member {
        uid: uid.to_owned(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        gang,
        queue_hint: membership.queue,
        role: membership.role,
        spec_priority: spec.and_then(|s| s.priority),
        priority_class: spec.and_then(|s| s.priority_class_name.clone()),
        created: pod.metadata.creation_timestamp.as_ref().and_then(|t| {
            DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        }),
        gated: gates.contains(&GANG_GATE),
        foreign_gates: gates.iter().any(|g| *g != GANG_GATE),
        phase,
        plan_deadline: pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::PLAN_DEADLINE))
            .and_then(|v| v.parse().ok()),
        planned_node: annotations
            .and_then(|a| a.get(super::PLANNED_NODE))
            .filter(|n| !n.is_empty())
            .cloned(),
        requests: pod_requests(pod),
        preemptable: victim_facts::preemptable(pod),
        never_preempts: victim_facts::never_preempts(pod),
        cooldown: victim_facts::cooldown(pod),
        scheduled_at: victim_facts::scheduled_at(pod),
        owner_kind: victim_facts::owner_kind(pod),
        service_type: victim_facts::service_type(annotations),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        pod: Arc::new(kept_copy(pod)),
        generation: next_generation(),
    })
}

/// The pod as a member keeps it: all but its managed fields and, of its status,
/// all but the start time (preemption that weighs victims as kube-scheduler does
/// prefers the node whose victims started last). Built from the parts kept:
/// cloning the whole pod first copied the managed fields and the status only to
/// drop them.
fn kept_copy(pod: &Pod) -> Pod {
    Pod {
        metadata: without_managed_fields(&pod.metadata),
        spec: pod.spec.clone(),
        status: pod.status.as_ref().and_then(|s| {
            s.start_time
                .as_ref()
                .map(|t| k8s_openapi::api::core::v1::PodStatus {
                    start_time: Some(t.clone()),
                    ..Default::default()
                })
        }),
    }
}
