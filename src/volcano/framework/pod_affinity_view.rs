//! The pods a task's inter-pod affinity is judged against in a session: those the
//! pod watch saw bound to nodes when the session opened, and the tasks the
//! planner has put on nodes (planned in earlier cycles or by this session's
//! statements, not yet bound). Without the latter, two members of one gang that
//! repel each other would be planned onto the same node, and a member affine to
//! its launcher could not follow it there. Required terms filter nodes
//! ([`inter_pod_affinity`]); preferred terms score them
//! ([`preferred_pod_affinity`]).

use super::job::{GangKey, JobInfo, TaskInfo, TaskStatus};
use super::state::SessionState;
use crate::object_namespace::namespace_of;
use crate::placement::node_traits::NodeTraits;
use crate::placement::pod_affinity::{AffinityPod, InterPodAffinity, required_terms};
use crate::placement::preferred_pod_affinity::PreferredPodAffinity;
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The session's tasks whose pods carry inter-pod affinity terms, found once
/// per session: a task's pod does not change while the session runs, only where
/// the task stands. Asking "does any placed task have terms" of these few
/// instead of every task keeps each node choice from passing over every task of
/// every job (thousands of gangs waiting make that most of a cycle).
#[derive(Debug, Default)]
pub struct TermHolders {
    /// Tasks with required terms.
    required: Vec<(GangKey, String)>,
    /// Tasks with preferred terms.
    preferred: Vec<(GangKey, String)>,
}

impl TermHolders {
    /// The holders among the state's tasks.
    pub fn of(state: &SessionState) -> Self {
        let mut holders = Self::default();
        for (key, job) in &state.jobs {
            holders.add(key, &JobTermHolders::of(job));
        }
        holders
    }

    /// The holders of the jobs holding any, as kept from one session to the
    /// next.
    pub fn of_kept(kept: &BTreeMap<GangKey, JobTermHolders>) -> Self {
        let mut holders = Self::default();
        for (key, job) in kept {
            holders.add(key, job);
        }
        holders
    }

    fn add(&mut self, key: &GangKey, job: &JobTermHolders) {
        let with_key = |uid: &String| (key.clone(), uid.clone());
        self.required.extend(job.required.iter().map(with_key));
        self.preferred.extend(job.preferred.iter().map(with_key));
    }
}

/// One job's tasks whose pods carry inter-pod affinity terms (by UID). A task's
/// pod is part of its job, so these stay right for as long as the job does:
/// sessions keep them per job (see [`super::kept_per_job`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobTermHolders {
    required: Vec<String>,
    preferred: Vec<String>,
}

impl JobTermHolders {
    /// The job's tasks with required and with preferred terms.
    pub fn of(job: &JobInfo) -> Self {
        let mut holders = Self::default();
        for t in &job.tasks {
            if has_required_terms(&t.pod) {
                holders.required.push(t.uid.clone());
            }
            if has_preferred_terms(&t.pod) {
                holders.preferred.push(t.uid.clone());
            }
        }
        holders
    }

    /// Whether no task of the job carries terms.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// Whether any of `holders` but `task` is placed on a node now.
fn any_placed(state: &SessionState, holders: &[(GangKey, String)], task: &TaskInfo) -> bool {
    holders.iter().any(|(job, uid)| {
        *uid != task.uid
            && state
                .task(job, uid)
                .is_some_and(|t| t.placement.is_some() && on_a_node(t.status))
    })
}

fn has_required_terms(pod: &Pod) -> bool {
    !required_terms(pod, true).is_empty()
}

fn has_preferred_terms(pod: &Pod) -> bool {
    let namespace = namespace_of(&pod.metadata);
    !crate::placement::pod_affinity::preferred_terms(pod, namespace).is_empty()
}

/// The inter-pod affinity check for `task`, or `None` when nothing applies to it
/// (no terms of its own, and no pod anywhere with required anti-affinity).
pub fn inter_pod_affinity(
    state: &SessionState,
    holders: &TermHolders,
    task: &TaskInfo,
) -> Option<InterPodAffinity> {
    inter_pod_affinity_once_gone(state, holders, task, &BTreeSet::new())
}

/// [`inter_pod_affinity`] once the tasks in `gone` have left their nodes.
pub fn inter_pod_affinity_once_gone(
    state: &SessionState,
    holders: &TermHolders,
    task: &TaskInfo,
    gone: &BTreeSet<String>,
) -> Option<InterPodAffinity> {
    let mut check =
        InterPodAffinity::new(&task.pod).in_namespaces(state.nodes.namespaces().clone());
    let every_pod = check.has_own_terms();
    let has_terms = |pod: &Pod| has_required_terms(pod);
    if !every_pod
        && !state.nodes.has_anti_affine_pods()
        && !any_placed(state, &holders.required, task)
    {
        return None;
    }
    let counted = Counted {
        every_pod,
        planned: &has_terms,
        bound: &|pod| !pod.anti_affinity.is_empty(),
        gone,
    };
    counted.visit(state, task, |pod, labels| check.add(pod, labels));
    Some(check)
}

/// The preferred inter-pod affinity score for `task`, or `None` when nothing
/// applies to it (no preferred terms of its own, and no pod anywhere with
/// preferred terms).
pub fn preferred_pod_affinity(
    state: &SessionState,
    holders: &TermHolders,
    task: &TaskInfo,
) -> Option<PreferredPodAffinity> {
    let mut scores = PreferredPodAffinity::new(AffinityPod::of(&task.pod))
        .in_namespaces(state.nodes.namespaces().clone());
    let every_pod = scores.has_own_terms();
    let has_terms = |pod: &Pod| has_preferred_terms(pod);
    if !every_pod
        && !state.nodes.has_preferring_pods()
        && !any_placed(state, &holders.preferred, task)
    {
        return None;
    }
    let counted = Counted {
        every_pod,
        planned: &has_terms,
        bound: &|pod| !pod.preferred.is_empty(),
        gone: &BTreeSet::new(),
    };
    counted.visit(state, task, |pod, labels| scores.add(pod, labels));
    (!scores.is_empty()).then_some(scores)
}

fn placed_tasks<'s>(
    state: &'s SessionState,
    task: &'s TaskInfo,
) -> impl Iterator<Item = &'s TaskInfo> {
    state
        .jobs
        .values()
        .flat_map(|j| &j.tasks)
        .filter(|t| t.uid != task.uid && t.placement.is_some() && on_a_node(t.status))
}

/// Which pods can change a verdict or a score: every one when the task has
/// terms of its own, otherwise those with terms that may select it.
struct Counted<'f> {
    every_pod: bool,
    /// For a planned task's pod.
    planned: &'f dyn Fn(&Pod) -> bool,
    /// For a pod the watch saw bound.
    bound: &'f dyn Fn(&AffinityPod) -> bool,
    /// Tasks counted as gone from their nodes (by uid).
    gone: &'f BTreeSet<String>,
}

impl Counted<'_> {
    /// Hands every counted pod, with its node's labels, to `visit`.
    fn visit(
        &self,
        state: &SessionState,
        task: &TaskInfo,
        mut visit: impl FnMut(&AffinityPod, &BTreeMap<String, String>),
    ) {
        let planned: Vec<(&TaskInfo, AffinityPod)> = placed_tasks(state, task)
            .filter(|t| !self.gone.contains(&t.uid))
            .filter(|t| self.every_pod || (self.planned)(&t.pod))
            .map(|t| (t, AffinityPod::of(&t.pod)))
            .collect();
        let labels_of = |node: &str| {
            NodeTraits::labels_of(
                state
                    .nodes
                    .get(node)
                    .and_then(|n| n.resources.traits.as_deref()),
            )
        };
        // A planned task the watch also saw bound is counted once, as the plan has it.
        let mut seen: HashSet<&str> = placed_tasks(state, task).map(|t| t.uid.as_str()).collect();
        seen.insert(&task.uid);
        seen.extend(self.gone.iter().map(String::as_str));
        for (t, pod) in &planned {
            if let Some(p) = &t.placement {
                visit(pod, labels_of(&p.node));
            }
        }
        for node in state.nodes.iter() {
            let labels = labels_of(&node.name);
            for pod in node.resources.pods.iter() {
                if (!self.every_pod && !(self.bound)(pod)) || seen.contains(&*pod.uid) {
                    continue;
                }
                visit(pod, labels);
            }
        }
    }
}

/// Whether a task of this status is (or is about to be) on its node.
pub fn on_a_node(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Allocated | TaskStatus::Pipelined | TaskStatus::Running | TaskStatus::Releasing
    )
}
