//! drf: dominant resource fairness between jobs. A job's share is its largest
//! `allocated / cluster total` over the resources; jobs with the smaller share are
//! served first, so a job that already holds much of one resource waits behind
//! those that hold little. Shares follow every placement and eviction of the
//! session (its event handlers).
//!
//! With `enableHierarchy: true` queues are ordered by hierarchical DRF over the
//! tree their `volcano.sh/hierarchy` annotations describe (see `drf_hierarchy`).

use super::drf_hierarchy::{HdrfTree, amounts, dominant_share, queue_path};
use crate::resources::Resources;
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{Plugin, TaskEvent};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{GangKey, JobInfo, QueueInfo, SessionState, TaskStatus};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The drf plugin.
#[derive(Debug, Default)]
pub struct Drf {
    hierarchy: bool,
    total: Resources,
    /// What each job holds.
    jobs: BTreeMap<GangKey, Resources>,
    total_allocated: Resources,
    tree: HdrfTree,
}

/// Builds the plugin (its only option is `enableHierarchy`).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Drf {
        hierarchy: ctx.option.hierarchy(),
        ..Drf::default()
    })))
}

impl Drf {
    /// A job's dominant share.
    pub fn share(&self, job: &GangKey) -> f64 {
        self.jobs
            .get(job)
            .map_or(0.0, |a| dominant_share(&amounts(a), &self.total))
    }

    fn path(queue: &QueueInfo) -> Vec<(String, f64)> {
        queue_path(
            queue.spec.hierarchy.as_deref(),
            queue.spec.hierarchy_weights.as_deref(),
        )
    }

    fn place_in_tree(&mut self, state: &SessionState, job: &JobInfo) {
        let Some(queue) = state.queue(&job.queue) else {
            return;
        };
        let request = total_request(job);
        let allocated = self.jobs.get(&job.key).cloned().unwrap_or_default();
        self.tree.set_job(
            &Self::path(queue),
            &job.key.to_string(),
            &allocated,
            &request,
            &self.total,
        );
    }

    fn change(&mut self, state: &SessionState, event: &TaskEvent<'_>, add: bool) {
        let job = &event.task.job;
        let held = self.jobs.entry(job.clone()).or_default();
        if add {
            held.add(&event.task.resreq);
            self.total_allocated.add(&event.task.resreq);
        } else {
            held.saturating_sub(&event.task.resreq);
            self.total_allocated.saturating_sub(&event.task.resreq);
        }
        held.prune_zeros();
        self.total_allocated.prune_zeros();
        if self.hierarchy
            && let Some(j) = state.job(job)
        {
            self.place_in_tree(state, j);
            self.tree.update(&self.total, &self.total_allocated);
        }
    }
}

/// Everything the job's live tasks ask for.
fn total_request(job: &JobInfo) -> Resources {
    let mut r = Resources::default();
    for t in &job.tasks {
        if !matches!(t.status, TaskStatus::Succeeded | TaskStatus::Failed) {
            r.add(&t.resreq);
        }
    }
    r
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn open(&mut self, state: &SessionState) {
        self.total = state.total.clone();
        self.jobs.clear();
        self.total_allocated = Resources::default();
        self.tree = HdrfTree::default();
        for (key, job) in &state.jobs {
            let mut held = Resources::default();
            for t in &job.tasks {
                if matches!(t.status, TaskStatus::Allocated | TaskStatus::Running) {
                    held.add(&t.resreq);
                }
            }
            held.prune_zeros();
            self.total_allocated.add(&held);
            self.jobs.insert(key.clone(), held);
        }
        self.total_allocated.prune_zeros();
        if self.hierarchy {
            for job in state.jobs.values() {
                self.place_in_tree(state, job);
            }
            self.tree.update(&self.total, &self.total_allocated);
        }
    }

    /// The smaller dominant share first.
    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        self.share(&a.key).total_cmp(&self.share(&b.key))
    }

    fn queue_order(&self, _: &SessionState, a: &QueueInfo, b: &QueueInfo) -> Ordering {
        if !self.hierarchy {
            return Ordering::Equal;
        }
        self.tree.compare(&Self::path(a), &Self::path(b))
    }

    fn on_allocate(&mut self, state: &SessionState, event: &TaskEvent<'_>) {
        self.change(state, event, true);
    }

    fn on_deallocate(&mut self, state: &SessionState, event: &TaskEvent<'_>) {
        self.change(state, event, false);
    }
}
