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
use crate::volcano::framework::kept_per_job::KeptPerJob;
use crate::volcano::framework::plugin::{KeptFigures, Plugin, TaskEvent};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{GangKey, JobInfo, QueueInfo, SessionState, TaskStatus};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The drf plugin.
#[derive(Debug, Default)]
pub struct Drf {
    hierarchy: bool,
    total: Resources,
    /// What each job held as the session opened, kept from one session to the
    /// next.
    opened: HeldShares,
    /// What the jobs this session placed or evicted hold now, and their shares
    /// (read before `opened`).
    moved: BTreeMap<GangKey, (Resources, f64)>,
    total_allocated: Resources,
    tree: HdrfTree,
}

/// What each job holds and its dominant share of the total (kept with it: job
/// order reads the share at every comparison), as a session opened. A job
/// holding nothing has the share of a job not listed (none).
#[derive(Debug, Default)]
struct HeldShares {
    /// The total the shares are of.
    total: Resources,
    held: KeptPerJob<Option<(Resources, f64)>>,
}

impl HeldShares {
    /// Brings the figures up to the session's jobs and total: the shares of
    /// every job again when the total changed (from what each holds), what a
    /// job holds only for the jobs that changed.
    fn follow(&mut self, state: &SessionState) {
        if self.total != state.total {
            self.total = state.total.clone();
            let total = &self.total;
            self.held.rework_all(|figure| {
                if let Some((held, share)) = figure {
                    *share = dominant_share(&amounts(held), total);
                }
            });
        }
        let total = &self.total;
        self.held.follow(
            &state.jobs,
            [],
            |job| {
                held_by(job).map(|held| {
                    let share = dominant_share(&amounts(&held), total);
                    (held, share)
                })
            },
            |_, _| {},
        );
    }
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
        self.held(job).map_or(0.0, |(_, share)| *share)
    }

    /// What a job holds now and its share, when it holds anything.
    fn held(&self, job: &GangKey) -> Option<&(Resources, f64)> {
        match self.moved.get(job) {
            Some(moved) => Some(moved),
            None => self.opened.held.get(job).and_then(Option::as_ref),
        }
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
        let allocated = self
            .held(&job.key)
            .map(|(held, _)| held.clone())
            .unwrap_or_default();
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
        let opened = &self.opened;
        let (held, share) = self
            .moved
            .entry(job.clone())
            .or_insert_with(|| opened.held.get(job).cloned().flatten().unwrap_or_default());
        if add {
            held.add(&event.task.resreq);
        } else {
            held.saturating_sub(&event.task.resreq);
        }
        held.prune_zeros();
        *share = dominant_share(&amounts(held), &self.total);
        // Back to what it held as the session opened (a statement discarded):
        // the opened figure says so again.
        let back = match opened.held.get(job).and_then(Option::as_ref) {
            Some(before) => before.0 == *held,
            None => held.is_empty(),
        };
        if back {
            self.moved.remove(job);
        }
        if self.hierarchy {
            if add {
                self.total_allocated.add(&event.task.resreq);
            } else {
                self.total_allocated.saturating_sub(&event.task.resreq);
            }
            self.total_allocated.prune_zeros();
        }
        if self.hierarchy
            && let Some(j) = state.job(job)
        {
            self.place_in_tree(state, j);
            self.tree.update(&self.total, &self.total_allocated);
        }
    }
}

/// What the job's placed and running tasks hold (pipelined ones and those
/// being evicted do not count), `None` when nothing.
fn held_by(job: &JobInfo) -> Option<Resources> {
    let mut held: Option<Resources> = None;
    for t in &job.tasks {
        if matches!(t.status, TaskStatus::Allocated | TaskStatus::Running) {
            held.get_or_insert_default().add(&t.resreq);
        }
    }
    held.map(Resources::without_zeros)
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
        self.moved.clear();
        self.total_allocated = Resources::default();
        self.tree = HdrfTree::default();
        self.opened.follow(state);
        if self.hierarchy {
            for (held, _) in self
                .opened
                .held
                .iter()
                .filter_map(|(_, held)| held.as_ref())
            {
                self.total_allocated.add(held);
            }
            self.total_allocated.prune_zeros();
            for job in state.jobs.values() {
                self.place_in_tree(state, job);
            }
            self.tree.update(&self.total, &self.total_allocated);
        }
    }

    fn keep(&mut self) -> Option<Box<dyn KeptFigures>> {
        Some(Box::new(std::mem::take(&mut self.opened)))
    }

    fn reuse(&mut self, kept: Box<dyn KeptFigures>) {
        if let Ok(opened) = (kept as Box<dyn std::any::Any>).downcast::<HeldShares>() {
            self.opened = *opened;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SchedulerConf;
    use crate::volcano::framework::queue::QueueInfo;
    use crate::volcano::framework::testing::{job, state, task};
    use crate::volcano::framework::{Session, Statement};
    use crate::volcano::objects::QueueSpec;

    const G: i64 = 1_000_000_000;

    fn cpu_mem(cpu: i64, mem: i64) -> Resources {
        let mut r = Resources::from_units([("cpu", cpu), ("memory", mem * G)]);
        r.prune_zeros();
        r
    }

    fn session(
        conf: &str,
        queues: Vec<QueueInfo>,
        jobs: Vec<JobInfo>,
        total: Resources,
    ) -> Session {
        let conf = SchedulerConf::parse(conf).unwrap();
        let tiers = crate::volcano::plugins::registry::build(&conf).unwrap();
        Session::open(state(total, queues, jobs), tiers)
    }

    fn tasks(
        job_name: &str,
        n: usize,
        each: Resources,
    ) -> Vec<crate::volcano::framework::TaskInfo> {
        let key = GangKey {
            namespace: "ns".into(),
            name: job_name.into(),
            single: false,
        };
        (0..n)
            .map(|i| task(&key, &format!("{job_name}-p{i}"), each.clone()))
            .collect()
    }

    fn key(name: &str) -> GangKey {
        GangKey {
            namespace: "ns".into(),
            name: name.into(),
            single: false,
        }
    }

    #[test]
    fn jobs_with_the_smaller_dominant_share_go_first_and_shares_follow_placements() {
        const DRF: &str = "actions: allocate\ntiers:\n- plugins:\n  - name: drf\n";
        // 10 CPUs, 10 G: a holds 2 CPUs and 1 G (share 0.2), b 1 CPU and 4 G (0.4).
        let mut a = tasks("a", 2, cpu_mem(2, 1));
        a[0].status = TaskStatus::Running;
        let mut b = tasks("b", 2, cpu_mem(1, 4));
        b[0].status = TaskStatus::Running;
        let queues = vec![QueueInfo::idle(QueueSpec::new("q"))];
        let jobs = vec![job("a", "q", 1, a), job("b", "q", 1, b)];
        let mut s = session(DRF, queues, jobs, cpu_mem(10, 10));
        assert_eq!(s.job_order(&key("a"), &key("b")), Ordering::Less);
        // a takes 3 more CPUs (share 0.5): b goes first now; undone, a again.
        let mut st = Statement::new();
        st.allocate(
            &mut s,
            &key("a"),
            "uid-a-p1",
            None,
            (cpu_mem(3, 0), Default::default()),
        );
        assert_eq!(s.job_order(&key("a"), &key("b")), Ordering::Greater);
        st.discard(&mut s);
        assert_eq!(s.job_order(&key("a"), &key("b")), Ordering::Less);
    }

    /// Places one task at a time, in queue order, on one node of `free` until no
    /// queue's next task fits (Volcano's allocate loop over jobs that are ready at
    /// once); returns what each job holds.
    fn fill_one_node(
        queues: &[(&str, &str, &str)],
        jobs: &[(&str, &str, Resources)],
        free: Resources,
    ) -> BTreeMap<String, Resources> {
        let queue_infos = queues
            .iter()
            .map(|(name, hierarchy, weights)| {
                QueueInfo::idle(QueueSpec {
                    hierarchy: Some((*hierarchy).into()),
                    hierarchy_weights: Some((*weights).into()),
                    ..QueueSpec::new(*name)
                })
            })
            .collect();
        let job_infos = jobs
            .iter()
            .map(|(name, queue, each)| job(name, queue, 0, tasks(name, 30, each.clone())))
            .collect();
        let mut s = session(
            "actions: allocate\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n",
            queue_infos,
            job_infos,
            free.clone(),
        );
        let mut free = free;
        let mut active: Vec<String> = s.ordered_queues();
        while let Some(q) = s.ordered_queues().into_iter().find(|q| active.contains(q)) {
            let Some((name, _, _)) = jobs.iter().find(|(_, queue, _)| *queue == q) else {
                active.retain(|a| a != &q);
                continue;
            };
            let k = key(name);
            let next = s
                .state
                .job(&k)
                .and_then(|j| j.tasks.iter().find(|t| t.status == TaskStatus::Pending))
                .map(|t| (t.uid.clone(), t.resreq.clone()));
            let Some((uid, req)) = next.filter(|(_, r)| r.fits_within_amount(&free)) else {
                active.retain(|a| a != &q);
                continue;
            };
            let mut st = Statement::new();
            st.allocate(&mut s, &k, &uid, None, (req.clone(), Default::default()));
            st.commit(&mut s);
            free.saturating_sub(&req);
        }
        s.state
            .jobs
            .iter()
            .map(|(k, j)| (k.name.to_string(), j.allocated.clone()))
            .collect()
    }

    /// Volcano's hierarchical DRF test table (pkg/scheduler/plugins/drf,
    /// hdrf_test.go), run through the plugin's queue order.
    #[test]
    fn hierarchical_drf_worked_examples() {
        // Rescaling: sci (100/50) runs 1-CPU-1-G tasks, eng/dev and eng/prod
        // (100/50/50) CPU-only and memory-only ones, on 10 CPUs and 10 G.
        let held = fill_one_node(
            &[
                ("root-sci", "root/sci", "100/50"),
                ("root-eng-dev", "root/eng/dev", "100/50/50"),
                ("root-eng-prod", "root/eng/prod", "100/50/50"),
            ],
            &[
                ("pg1", "root-sci", cpu_mem(1, 1)),
                ("pg21", "root-eng-dev", cpu_mem(1, 0)),
                ("pg22", "root-eng-prod", cpu_mem(0, 1)),
            ],
            cpu_mem(10, 10),
        );
        assert_eq!(held["pg1"], cpu_mem(5, 5));
        assert_eq!(held["pg21"], cpu_mem(5, 0));
        assert_eq!(held["pg22"], cpu_mem(0, 5));
        // Blocking nodes: once CPU runs out, the CPU-only subtrees are saturated and
        // memory goes to the memory jobs.
        let held = fill_one_node(
            &[
                ("root-pg1", "root/pg1", "100/25"),
                ("root-pg2", "root/pg2", "100/25"),
                ("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
                ("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
                ("root-pg4", "root/pg4", "100/25"),
            ],
            &[
                ("pg1", "root-pg1", cpu_mem(1, 0)),
                ("pg2", "root-pg2", cpu_mem(1, 0)),
                ("pg31", "root-pg3-pg31", cpu_mem(1, 0)),
                ("pg32", "root-pg3-pg32", cpu_mem(0, 1)),
                ("pg4", "root-pg4", cpu_mem(0, 1)),
            ],
            cpu_mem(30, 30),
        );
        assert_eq!(held["pg1"], cpu_mem(10, 0));
        assert_eq!(held["pg2"], cpu_mem(10, 0));
        assert_eq!(held["pg31"], cpu_mem(10, 0));
        assert_eq!(held["pg32"], cpu_mem(0, 15));
        assert_eq!(held["pg4"], cpu_mem(0, 15));
    }
}
