//! A gang whose minimum is held only with members that are being deleted from
//! their nodes (Volcano's gang plugin at session close, and its PodGroup phase).
//!
//! When a member of a running gang is deleted (a rolling replacement, a scale
//! down, an eviction), its pod stays on its node until its containers stop, and
//! it still holds its slot of the gang. Reporting the gang as waiting during
//! that window would tell users `Unschedulable` about a gang nothing is wrong
//! with, and flip its phase back to Inqueue. As soon as the gang has a member
//! that still needs a place or has yet to start (waiting, pipelined, planned),
//! that member is what the condition is about, so the shortcut no longer
//! applies.

use super::job::{JobInfo, TaskInfo, TaskStatus};

impl JobInfo {
    /// Whether the job holds its minMember only by counting members that are
    /// being deleted from a node, and has no member left to place: it is then
    /// reported as Running, with no reason to wait. Members deleted before they
    /// were ever placed do not count (deleting a waiting pod must not make its
    /// gang look placed).
    pub fn holds_minimum_while_releasing(&self) -> bool {
        let releasing_on_node = self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Releasing && on_node(t))
            .count();
        if releasing_on_node == 0 {
            return false;
        }
        // Unlike Volcano, whose allocated tasks are bound before its session
        // closes, an allocated member here is planned but not started yet: it
        // waits with its gang, so the gang must not read as Running.
        let to_place = self.tasks.iter().any(|t| {
            matches!(
                t.status,
                TaskStatus::Pending | TaskStatus::Pipelined | TaskStatus::Allocated
            )
        });
        if to_place {
            return false;
        }
        // Volcano's scheduled statuses: on a node, or finished there.
        let scheduled = self
            .tasks
            .iter()
            .filter(|t| {
                matches!(
                    t.status,
                    TaskStatus::Running | TaskStatus::Succeeded | TaskStatus::Failed
                )
            })
            .count();
        scheduled + releasing_on_node >= self.min_member
    }
}

/// Whether the task was placed on a node (by this scheduler or in its pod).
fn on_node(task: &TaskInfo) -> bool {
    task.placement.is_some()
        || task
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
}
