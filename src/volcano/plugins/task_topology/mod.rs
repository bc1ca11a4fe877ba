//! task-topology: places the tasks of one job by how their roles relate
//! (Volcano's task-topology). A PodGroup states which roles should share nodes
//! (`volcano.sh/task-topology-affinity: "ps,worker"`), which should keep apart
//! (`volcano.sh/task-topology-anti-affinity: "ps"`) and which go first
//! (`volcano.sh/task-topology-task-order: "ps,worker"`); see
//! [`crate::volcano::task_topology`] for the format and how roles are read.
//!
//! When a session opens, each job with waiting tasks and a topology has its tasks
//! grouped into buckets ([`buckets`]): tasks that attract each other share one,
//! tasks that repel each other do not. Then:
//!
//! - **Task order**: bucketed tasks first, the bucket with more tasks waiting
//!   first, the older bucket on a tie; inside a bucket, the roles the task order
//!   names first, then the roles with the stronger relation.
//! - **Node order** ([`node_score`]): the node already holding the task's bucket
//!   scores highest, a node holding tasks it repels lower, and among the rest
//!   the node that can take the whole bucket; scaled to 0–100 per unit of
//!   `task-topology.weight` (default 1).
//! - **Allocate / deallocate**: every placement of the session (and every one
//!   taken back) moves the task between its bucket and its node, so the next
//!   task of the job is scored against where its bucket went.
//!
//! A topology that names a role no task has, or a role twice in one group, is
//! refused as Volcano refuses it: the job is scheduled without topology and a
//! warning names the job, the annotation and the role.
//!
//! The plugin is planner-only: its buckets are built from the whole job when a
//! session opens, and `/filter` opens none. A member planned by a session
//! follows its plan in `/filter`, and a member that reaches `/filter` ungated has
//! its whole gang planned in a session, where the plugin runs; a pod outside
//! gangs has no job topology to follow.

mod buckets;
mod node_score;
mod relations;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod session_tests;

use buckets::JobBuckets;
use relations::RoleRelations;

use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{Plugin, TaskEvent};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{GangKey, JobInfo, SessionState, TaskInfo, TaskStatus};
use crate::volcano::task_topology::TaskTopology;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The weight of the node score (Volcano's argument name).
pub const WEIGHT: &str = "task-topology.weight";

/// The task-topology plugin.
#[derive(Debug, Default)]
pub struct TaskTopologyPlugin {
    /// `task-topology.weight`.
    weight: i64,
    /// The buckets of each job with a topology and waiting tasks.
    jobs: BTreeMap<GangKey, JobBuckets>,
    /// Each bucketed task's job and UID, by namespace then pod name: a node is
    /// scored for a pod, which names neither.
    bucketed: HashMap<String, HashMap<String, (GangKey, String)>>,
}

/// Builds the plugin from its arguments (`task-topology.weight`).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[WEIGHT])?;
    // Volcano takes any integer; a negative weight would turn every affinity into
    // an anti-affinity, so it is refused like binpack's.
    let weight = ctx.args.integer_at_least(WEIGHT, 0)?.unwrap_or(1);
    Ok(Some(Box::new(TaskTopologyPlugin::with_weight(weight))))
}

impl TaskTopologyPlugin {
    /// The plugin with this node-score weight.
    pub fn with_weight(weight: i64) -> Self {
        Self {
            weight,
            ..Self::default()
        }
    }

    /// The job's buckets, if it has a topology worth following this session.
    fn buckets_of(job: &JobInfo) -> Option<JobBuckets> {
        // As in Volcano, only jobs with tasks to place are looked at.
        if !job.tasks.iter().any(|t| t.status == TaskStatus::Pending) {
            return None;
        }
        let annotations = job.task_topology.as_ref()?;
        let roles: BTreeSet<&str> = job.tasks.iter().filter_map(|t| t.role.as_deref()).collect();
        match TaskTopology::read(annotations, &roles) {
            Ok(topology) => {
                let buckets = JobBuckets::build(job, RoleRelations::of(&topology));
                (!buckets.is_empty()).then_some(buckets)
            }
            Err(error) => {
                tracing::warn!(
                    job = %job.key,
                    %error,
                    "task-topology: ignoring the job's topology annotations; the job is scheduled without them"
                );
                None
            }
        }
    }

    /// The job and UID of a bucketed pod.
    fn job_and_uid(&self, task: &TaskFacts<'_>) -> Option<&(GangKey, String)> {
        self.bucketed.get(task.namespace)?.get(task.name)
    }
}

impl Plugin for TaskTopologyPlugin {
    fn name(&self) -> &'static str {
        "task-topology"
    }

    fn open(&mut self, state: &SessionState) {
        self.jobs.clear();
        self.bucketed.clear();
        for job in state.jobs.values() {
            let Some(buckets) = Self::buckets_of(job) else {
                continue;
            };
            for t in &job.tasks {
                if buckets.contains(&t.uid) {
                    self.bucketed
                        .entry(t.namespace.clone())
                        .or_default()
                        .insert(t.name.clone(), (job.key.clone(), t.uid.clone()));
                }
            }
            self.jobs.insert(job.key.clone(), buckets);
        }
    }

    fn task_order(&self, a: &TaskInfo, b: &TaskInfo) -> Ordering {
        // Tasks are ordered within their job; across jobs this plugin has no say.
        if a.job != b.job {
            return Ordering::Equal;
        }
        match self.jobs.get(&a.job) {
            Some(buckets) => buckets.task_order(&a.uid, &b.uid),
            None => Ordering::Equal,
        }
    }

    fn planner_only(&self) -> bool {
        true
    }

    fn scores_nodes(&self) -> bool {
        true
    }

    fn scores_task(&self, task: &TaskFacts<'_>) -> bool {
        self.weight != 0 && self.job_and_uid(task).is_some()
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        let Some((job, uid)) = self.job_and_uid(task) else {
            return 0.0;
        };
        match self.jobs.get(job) {
            Some(buckets) => buckets.node_score(uid, task.resreq, node, task.dims, self.weight),
            None => 0.0,
        }
    }

    fn on_allocate(&mut self, _state: &SessionState, event: &TaskEvent<'_>) {
        let task = event.task;
        if let Some(buckets) = self.jobs.get_mut(&task.job) {
            buckets.placed(&task.uid, buckets::node_of(task));
        }
    }

    fn on_deallocate(&mut self, state: &SessionState, event: &TaskEvent<'_>) {
        let task = event.task;
        // An undone placement is reported once the task waits again; an eviction
        // while the task is still on its node.
        let waits_again = state
            .task(&task.job, &task.uid)
            .is_some_and(|t| t.status == TaskStatus::Pending);
        if let Some(buckets) = self.jobs.get_mut(&task.job) {
            buckets.unplaced(&task.uid, waits_again);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::volcano::plugins::registry;

    /// The seed's configuration, as written there.
    const SEED_CONF: &str = r#"actions: "enqueue, reclaim, allocate, backfill, preempt"
tiers:
- plugins:
  - name: task-topology
    arguments:
      task-topology.weight: 10
"#;

    #[test]
    fn the_seed_configuration_loads_unchanged() {
        let conf = registry::load(SEED_CONF).expect("loads");
        let tiers = registry::build(&conf).expect("builds");
        assert_eq!(tiers.names(), vec!["task-topology"]);
    }

    #[test]
    fn the_weight_defaults_to_one_and_is_a_whole_number_not_below_zero() {
        let conf = |args: &str| {
            format!("actions: allocate\ntiers:\n- plugins:\n  - name: task-topology\n{args}")
        };
        assert!(registry::load(&conf("")).is_ok());
        assert!(
            registry::load(&conf("    arguments:\n      task-topology.weight: \"3\"\n")).is_ok()
        );
        for (args, says) in [
            ("      task-topology.weight: -1\n", "expected at least 0"),
            (
                "      task-topology.weight: 1.5\n",
                "expected a whole number",
            ),
            ("      task-topology.wieght: 2\n", "unknown argument"),
        ] {
            let err = registry::load(&conf(&format!("    arguments:\n{args}")))
                .expect_err("refused")
                .to_string();
            assert!(
                err.contains("(task-topology)") && err.contains(says),
                "{err}"
            );
        }
    }

    #[test]
    fn filter_is_judged_without_it() {
        let conf = registry::load(SEED_CONF).expect("loads");
        let filter = registry::build(&conf).expect("builds").for_filter();
        assert!(filter.names().is_empty(), "{:?}", filter.names());
    }
}
