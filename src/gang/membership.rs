//! Which gang and queue a pod belongs to, read the way Volcano's controllers write
//! it, so pods made for Volcano need no change.

use super::scheduling_group::SCHEDULING_GROUP;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;

/// Pod annotation naming the PodGroup (what Volcano's scheduler keys jobs on).
pub const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// Older Volcano spelling of the PodGroup annotation, read as a fallback.
pub const VOLCANO_GROUP_NAME: &str = "scheduling.volcano.sh/group-name";
/// Pod annotation naming the queue of a plain pod.
pub const QUEUE_NAME: &str = "scheduling.volcano.sh/queue-name";
/// Queue annotation written by Volcano's job controller on vcjob pods.
pub const VOLCANO_JOB_QUEUE_NAME: &str = "volcano.sh/queue-name";
/// Pod annotation or label naming the task (role) inside a job.
pub const TASK_SPEC: &str = "volcano.sh/task-spec";
/// The queue of pods and PodGroups that name none.
pub const DEFAULT_QUEUE: &str = "default";

/// How a pod takes part in gang and queue scheduling.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Membership {
    /// The PodGroup (same namespace as the pod), when the pod belongs to one.
    pub group: Option<String>,
    /// The queue the pod names itself (a PodGroup's own queue wins over it).
    pub queue: Option<String>,
    /// The pod's role in its job (`volcano.sh/task-spec`), for per-role minimums.
    pub role: Option<String>,
}

impl Membership {
    /// The pod's membership, or `None` for a pod outside gang and queue scheduling.
    pub fn of(pod: &Pod) -> Option<Self> {
        let empty = BTreeMap::new();
        let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
        Self::from_annotations(annotations, pod.metadata.labels.as_ref().unwrap_or(&empty))
    }

    /// [`Membership::of`] over the maps themselves (the webhook has them too).
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
        labels: &BTreeMap<String, String>,
    ) -> Option<Self> {
        let non_empty = |k: &str| annotations.get(k).filter(|v| !v.trim().is_empty()).cloned();
        // Kubernetes' own group first: kube-scheduler's gang plugin holds the pod
        // for that group whatever the annotations say.
        let group = non_empty(SCHEDULING_GROUP)
            .or_else(|| non_empty(GROUP_NAME))
            .or_else(|| non_empty(VOLCANO_GROUP_NAME));
        let queue = non_empty(QUEUE_NAME).or_else(|| non_empty(VOLCANO_JOB_QUEUE_NAME));
        if group.is_none() && queue.is_none() {
            return None;
        }
        // As Volcano reads a task's role: the annotation when it has a value, else
        // the label (Volcano's job controller writes both).
        let role = [annotations, labels]
            .into_iter()
            .find_map(|m| m.get(TASK_SPEC).filter(|v| !v.is_empty()))
            .cloned();
        Some(Self { group, queue, role })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn group_annotation_wins_over_the_volcano_fallback() {
        let m = Membership::from_annotations(
            &map(&[(GROUP_NAME, "pg-a"), (VOLCANO_GROUP_NAME, "pg-b")]),
            &map(&[]),
        )
        .unwrap();
        assert_eq!(m.group.as_deref(), Some("pg-a"));
        let m =
            Membership::from_annotations(&map(&[(VOLCANO_GROUP_NAME, "pg-b")]), &map(&[])).unwrap();
        assert_eq!(m.group.as_deref(), Some("pg-b"));
    }

    #[test]
    fn a_queue_alone_makes_a_member_and_roles_come_from_labels_too() {
        let m = Membership::from_annotations(
            &map(&[(VOLCANO_JOB_QUEUE_NAME, "team-a")]),
            &map(&[(TASK_SPEC, "worker")]),
        )
        .unwrap();
        assert_eq!(m.queue.as_deref(), Some("team-a"));
        assert_eq!(m.group, None);
        assert_eq!(m.role.as_deref(), Some("worker"));
    }

    #[test]
    fn an_empty_role_annotation_falls_back_to_the_label() {
        let m = Membership::from_annotations(
            &map(&[(GROUP_NAME, "pg-a"), (TASK_SPEC, "")]),
            &map(&[(TASK_SPEC, "ps")]),
        )
        .unwrap();
        assert_eq!(m.role.as_deref(), Some("ps"));
        let m = Membership::from_annotations(
            &map(&[(GROUP_NAME, "pg-a"), (TASK_SPEC, "worker")]),
            &map(&[(TASK_SPEC, "ps")]),
        )
        .unwrap();
        assert_eq!(m.role.as_deref(), Some("worker"), "the annotation wins");
    }

    #[test]
    fn a_native_scheduling_group_makes_a_member_and_wins_over_annotations() {
        let m = Membership::from_annotations(
            &map(&[(SCHEDULING_GROUP, "native"), (GROUP_NAME, "pg-a")]),
            &map(&[]),
        )
        .unwrap();
        assert_eq!(m.group.as_deref(), Some("native"));
        assert_eq!(m.queue, None);
    }

    #[test]
    fn pods_without_group_or_queue_are_not_members() {
        assert_eq!(
            Membership::from_annotations(&map(&[(GROUP_NAME, " ")]), &map(&[])),
            None
        );
        assert_eq!(Membership::from_annotations(&map(&[]), &map(&[])), None);
    }
}
