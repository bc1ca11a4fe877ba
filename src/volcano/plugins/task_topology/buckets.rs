//! Buckets: a job's bound tasks grouped so that tasks that attract each other
//! share a bucket and tasks that repel each other do not (Volcano's JobManager).
//! A bucket is what the plugin tries to put on one node; the tasks of a bucket
//! are placed one after the other, and each node is scored by how many of the
//! bucket's tasks it already holds or could still hold.
//!
//! Buckets are built when the session opens, as Volcano builds them:
//!
//! 1. Only tasks whose role takes part in an affinity or anti-affinity are
//!    bucketed; finished tasks are left out.
//! 2. Tasks already on a node come first (by node name), each node's tasks
//!    sharing one bucket; then the waiting tasks, by role in placement order
//!    (task order, then strength of relation), then by name.
//! 3. A waiting task joins the bucket it is pulled to most (one per task there
//!    it attracts, minus one per task it repels), the lighter bucket on a tie
//!    (CPU millicores + memory MiB + every other resource in milli-units, as
//!    Volcano weighs them); when even the best pull is negative it starts a
//!    bucket of its own.
//!
//! During the session a placement moves a task from its bucket's waiting tasks
//! to the node's count, and a placement taken back (a discarded statement)
//! moves it back, exactly undoing the placement; an eviction takes the task off
//! its node's count.

use super::relations::RoleRelations;
use crate::resources::Resources;
use crate::volcano::framework::{JobInfo, TaskInfo, TaskStatus};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// A task waiting in its bucket.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WaitingTask {
    /// Pod UID.
    pub uid: String,
    /// What it asks for.
    pub request: Resources,
    /// When it joined, so that a task taken back returns to its place.
    joined: usize,
}

/// Tasks the plugin tries to put on one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Bucket {
    /// Tasks still to be placed, in the order they joined.
    pub waiting: Vec<WaitingTask>,
    /// The bucket's tasks per role, placed or waiting: what a newcomer's pull is
    /// weighed against.
    roles: BTreeMap<String, usize>,
    /// What the waiting tasks ask for, summed.
    pub request: Resources,
    /// The bucket's placed tasks per node.
    pub placed_on: BTreeMap<String, usize>,
}

impl Bucket {
    /// Waiting and placed tasks.
    fn size(&self) -> usize {
        self.waiting.len() + self.placed_on.values().sum::<usize>()
    }

    /// How heavy the waiting tasks are, to balance buckets (Volcano's request
    /// score: 1 millicore, 1 MiB of memory and one milli-unit of anything else
    /// weigh the same).
    fn load(&self) -> f64 {
        self.request
            .iter()
            .map(|(dim, milli)| match dim {
                "cpu" => milli as f64,
                "memory" | "ephemeral-storage" => milli as f64 / 1000.0 / 1024.0 / 1024.0,
                _ => milli as f64,
            })
            .sum()
    }
}

/// Where a bucketed task stands in the session.
#[derive(Debug, Clone, PartialEq)]
enum Standing {
    /// Waiting in its bucket.
    Waiting,
    /// Placed, on this node (`None`: a task kube-scheduler places, whose node is
    /// not known yet).
    Placed(Option<String>),
    /// Evicted in this session: counted nowhere.
    Evicted,
}

/// A bucketed task.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Member {
    /// Its role.
    pub role: String,
    /// Its bucket (index into the job's buckets).
    pub bucket: usize,
    /// What it asks for.
    request: Resources,
    /// When it joined its bucket.
    joined: usize,
    standing: Standing,
}

/// One job's buckets and where its tasks are.
#[derive(Debug, Clone, PartialEq)]
pub struct JobBuckets {
    /// How the job's roles relate.
    pub(super) relations: RoleRelations,
    pub(super) buckets: Vec<Bucket>,
    /// Every bucketed task by pod UID.
    pub(super) members: HashMap<String, Member>,
    /// The job's bucketed tasks on each node, per role: what repels a newcomer.
    /// Tasks placed before the session count too (Volcano counts only those
    /// placed in the session, so a task added to a running job would not avoid
    /// the nodes of the tasks it repels).
    pub(super) roles_on_node: BTreeMap<String, BTreeMap<String, usize>>,
    /// Tasks in the largest bucket when built: scores are scaled by it.
    pub(super) largest: usize,
}

/// The node a task holds (its planned GPUs, else the node it is bound to).
pub(super) fn node_of(task: &TaskInfo) -> Option<&str> {
    task.placement
        .as_ref()
        .map(|p| p.node.as_str())
        .or_else(|| task.pod.spec.as_ref()?.node_name.as_deref())
}

/// A task to bucket, as the build sorts it.
struct Candidate<'a> {
    task: &'a TaskInfo,
    role: &'a str,
    /// Its node when it is placed already.
    node: Option<&'a str>,
}

impl JobBuckets {
    /// Buckets the job's tasks by `relations`.
    pub fn build(job: &JobInfo, relations: RoleRelations) -> Self {
        let mut candidates: Vec<Candidate<'_>> = job
            .tasks
            .iter()
            .filter_map(|task| {
                let role = task.role.as_deref().filter(|r| relations.binds(r))?;
                let node = match task.status {
                    TaskStatus::Pending => None,
                    TaskStatus::Succeeded | TaskStatus::Failed => return None,
                    // Placed somewhere this session cannot see: out of buckets.
                    _ => Some(node_of(task)?),
                };
                Some(Candidate { task, role, node })
            })
            .collect();
        candidates.sort_by(|a, b| match (a.node, b.node) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| a.task.name.cmp(&b.task.name)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => relations
                .placement_order(a.role, b.role)
                .then_with(|| a.task.name.cmp(&b.task.name)),
        });
        let mut job_buckets = Self {
            relations,
            buckets: Vec::new(),
            members: HashMap::new(),
            roles_on_node: BTreeMap::new(),
            largest: 0,
        };
        let mut bucket_of_node: BTreeMap<&str, usize> = BTreeMap::new();
        for (joined, c) in candidates.iter().enumerate() {
            let bucket = match c.node {
                Some(node) => *bucket_of_node
                    .entry(node)
                    .or_insert_with(|| job_buckets.new_bucket()),
                None => job_buckets.bucket_for(c.role),
            };
            job_buckets.add(bucket, c, joined);
        }
        job_buckets
    }

    fn new_bucket(&mut self) -> usize {
        self.buckets.push(Bucket::default());
        self.buckets.len() - 1
    }

    /// The bucket a waiting task of `role` joins.
    fn bucket_for(&mut self, role: &str) -> usize {
        let mut best: Option<(usize, i64)> = None;
        for (i, bucket) in self.buckets.iter().enumerate() {
            let pull = self.relations.pull(role, &bucket.roles, false);
            best = match best {
                None => Some((i, pull)),
                Some((_, top)) if pull > top => Some((i, pull)),
                Some((j, top)) if pull == top && bucket.load() < self.buckets[j].load() => {
                    Some((i, pull))
                }
                kept => kept,
            };
        }
        match best {
            Some((i, pull)) if pull >= 0 => i,
            _ => self.new_bucket(),
        }
    }

    fn add(&mut self, index: usize, c: &Candidate<'_>, joined: usize) {
        let bucket = &mut self.buckets[index];
        *bucket.roles.entry(c.role.to_owned()).or_default() += 1;
        let standing = match c.node {
            Some(node) => {
                *bucket.placed_on.entry(node.to_owned()).or_default() += 1;
                *self
                    .roles_on_node
                    .entry(node.to_owned())
                    .or_default()
                    .entry(c.role.to_owned())
                    .or_default() += 1;
                Standing::Placed(Some(node.to_owned()))
            }
            None => {
                bucket.waiting.push(WaitingTask {
                    uid: c.task.uid.clone(),
                    request: c.task.resreq.clone(),
                    joined,
                });
                bucket.request.add(&c.task.resreq);
                Standing::Waiting
            }
        };
        self.largest = self.largest.max(bucket.size());
        self.members.insert(
            c.task.uid.clone(),
            Member {
                role: c.role.to_owned(),
                bucket: index,
                request: c.task.resreq.clone(),
                joined,
                standing,
            },
        );
    }

    /// Whether no task of the job is bucketed (the plugin has nothing to say).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether the task (by pod UID) is in a bucket.
    pub fn contains(&self, uid: &str) -> bool {
        self.members.contains_key(uid)
    }

    /// Which of two tasks of the job is placed first (`Less`: `a`): bucketed
    /// tasks before the others, the bucket with more tasks waiting first, the
    /// older bucket on a tie; inside a bucket, by role in placement order.
    pub fn task_order(&self, a: &str, b: &str) -> Ordering {
        match (self.members.get(a), self.members.get(b)) {
            (None, None) => Ordering::Equal,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => {
                let waiting = |m: &Member| self.buckets[m.bucket].waiting.len();
                waiting(y).cmp(&waiting(x)).then_with(|| {
                    if x.bucket == y.bucket {
                        self.relations.placement_order(&x.role, &y.role)
                    } else {
                        x.bucket.cmp(&y.bucket)
                    }
                })
            }
        }
    }

    /// The task was placed (on `node`, when this scheduler chose it) or, after an
    /// eviction was taken back, is on its node again.
    pub fn placed(&mut self, uid: &str, node: Option<&str>) {
        let Some(member) = self.members.get_mut(uid) else {
            return;
        };
        let bucket = &mut self.buckets[member.bucket];
        match member.standing {
            Standing::Placed(_) => return,
            Standing::Waiting => {
                bucket.waiting.retain(|w| w.uid != uid);
                bucket.request.saturating_sub(&member.request);
                bucket.request.prune_zeros();
            }
            Standing::Evicted => {}
        }
        if let Some(node) = node {
            *bucket.placed_on.entry(node.to_owned()).or_default() += 1;
            *self
                .roles_on_node
                .entry(node.to_owned())
                .or_default()
                .entry(member.role.clone())
                .or_default() += 1;
        }
        member.standing = Standing::Placed(node.map(str::to_owned));
    }

    /// The task's placement was taken back: it waits again (a placement of this
    /// session undone), or it was evicted and counts nowhere.
    pub fn unplaced(&mut self, uid: &str, waits_again: bool) {
        let Some(member) = self.members.get_mut(uid) else {
            return;
        };
        let Standing::Placed(node) = &member.standing else {
            return;
        };
        let bucket = &mut self.buckets[member.bucket];
        if let Some(node) = node {
            decrement(&mut bucket.placed_on, node);
            if let Some(roles) = self.roles_on_node.get_mut(node) {
                decrement(roles, &member.role);
                if roles.is_empty() {
                    self.roles_on_node.remove(node);
                }
            }
        }
        member.standing = if waits_again {
            let at = bucket.waiting.partition_point(|w| w.joined < member.joined);
            bucket.waiting.insert(
                at,
                WaitingTask {
                    uid: uid.to_owned(),
                    request: member.request.clone(),
                    joined: member.joined,
                },
            );
            bucket.request.add(&member.request);
            Standing::Waiting
        } else {
            Standing::Evicted
        };
    }
}

fn decrement(counts: &mut BTreeMap<String, usize>, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::framework::testing::{job, running_task};
    use crate::volcano::plugins::task_topology::fixtures::{key, relations_among, waiting};

    fn relations(affinity: &str, anti: &str, order: &str) -> RoleRelations {
        relations_among(&["ps", "worker", "chief"], affinity, anti, Some(order))
    }

    /// Each bucket's tasks by name: waiting, then placed per node.
    fn layout(b: &JobBuckets, job: &JobInfo) -> Vec<Vec<String>> {
        let name = |uid: &str| {
            job.tasks
                .iter()
                .find(|t| t.uid == uid)
                .map(|t| t.name.clone())
                .unwrap_or_default()
        };
        let mut by_bucket = vec![Vec::new(); b.buckets.len()];
        for (uid, m) in &b.members {
            by_bucket[m.bucket].push(name(uid));
        }
        for names in &mut by_bucket {
            names.sort();
        }
        by_bucket
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ps_worker_pairs_with_ps_kept_apart() {
        let j = job(
            "tf",
            "q",
            4,
            vec![
                waiting("ps", 0),
                waiting("ps", 1),
                waiting("worker", 0),
                waiting("worker", 1),
            ],
        );
        let b = JobBuckets::build(&j, relations("ps,worker", "ps", ""));
        assert_eq!(
            layout(&b, &j),
            vec![names(&["ps-0", "worker-0"]), names(&["ps-1", "worker-1"])],
            "each ps starts a bucket (ps repel each other); workers balance over them"
        );
        assert_eq!(b.largest, 2);
    }

    /// The seed's example: workers attract the ps and repel each other, ps first.
    /// A worker joins a bucket while the attraction at least matches the
    /// repulsion, so the first bucket takes the ps and two workers.
    #[test]
    fn the_seed_example_buckets_as_volcano_does() {
        let tasks = std::iter::once(waiting("ps", 0))
            .chain((0..4).map(|i| waiting("worker", i)))
            .collect();
        let j = job("tf", "q", 5, tasks);
        let b = JobBuckets::build(&j, relations("worker,ps", "worker", "ps,worker"));
        assert_eq!(
            layout(&b, &j),
            vec![
                names(&["ps-0", "worker-0", "worker-1"]),
                names(&["worker-2"]),
                names(&["worker-3"]),
            ]
        );
        assert_eq!(b.largest, 3);
    }

    #[test]
    fn tasks_on_a_node_share_its_bucket_and_newcomers_follow_them() {
        let k = key();
        let mut ps = running_task(&k, "ps-0", 1, 0);
        ps.role = Some("ps".into());
        let mut old_worker = running_task(&k, "worker-0", 1, 1);
        old_worker.role = Some("worker".into());
        let j = job("tf", "q", 1, vec![ps, old_worker, waiting("worker", 1)]);
        let b = JobBuckets::build(&j, relations("ps,worker", "", ""));
        assert_eq!(
            layout(&b, &j),
            vec![names(&["ps-0", "worker-0", "worker-1"])]
        );
        assert_eq!(
            b.buckets[0].placed_on,
            BTreeMap::from([("node-1".into(), 2)])
        );
        assert_eq!(
            b.roles_on_node["node-1"],
            BTreeMap::from([("ps".into(), 1), ("worker".into(), 1)])
        );
    }

    #[test]
    fn roles_outside_the_topology_and_finished_tasks_are_not_bucketed() {
        let mut done = waiting("worker", 9);
        done.status = TaskStatus::Succeeded;
        let mut nameless = waiting("worker", 8);
        nameless.role = None;
        let j = job(
            "tf",
            "q",
            1,
            vec![waiting("ps", 0), waiting("chief", 0), done, nameless],
        );
        let b = JobBuckets::build(&j, relations("ps,worker", "", "chief,ps"));
        assert_eq!(layout(&b, &j), vec![names(&["ps-0"])]);
    }

    #[test]
    fn task_order_bucketed_first_bigger_bucket_first_then_roles() {
        // ps-0 and ps-1 repel: two buckets; the chief attracts the ps and joins the
        // first (equal pull, equal load); workers have no relation.
        let j = job(
            "tf",
            "q",
            1,
            vec![
                waiting("worker", 0),
                waiting("chief", 0),
                waiting("ps", 1),
                waiting("ps", 0),
            ],
        );
        let b = JobBuckets::build(&j, relations("ps,chief", "ps", ""));
        assert_eq!(
            layout(&b, &j),
            vec![names(&["chief-0", "ps-0"]), names(&["ps-1"])],
            "workers have no relation: out of buckets"
        );
        let mut uids: Vec<&str> = j.tasks.iter().map(|t| t.uid.as_str()).collect();
        uids.sort_by(|a, c| b.task_order(a, c));
        assert_eq!(
            uids,
            vec!["uid-ps-0", "uid-chief-0", "uid-ps-1", "uid-worker-0"],
            "the bigger bucket first, and in it the ps, kept apart from its kind, \
             before the chief, which only attracts"
        );
    }

    /// The task order decides the build too: with the chief first, it starts the
    /// first bucket, and its pull on the second ps cancels their repulsion.
    #[test]
    fn the_task_order_changes_which_bucket_a_task_joins() {
        let j = job(
            "tf",
            "q",
            1,
            vec![waiting("ps", 0), waiting("ps", 1), waiting("chief", 0)],
        );
        let b = JobBuckets::build(&j, relations("ps,chief", "ps", "chief"));
        assert_eq!(layout(&b, &j), vec![names(&["chief-0", "ps-0", "ps-1"])]);
    }

    /// Volcano's `TestJobManager_TaskUnbound_IsInverseOfTaskBound`: taking a
    /// placement back leaves the buckets as they were.
    #[test]
    fn a_placement_taken_back_leaves_the_buckets_as_they_were() {
        let j = job(
            "tf",
            "q",
            3,
            vec![waiting("ps", 0), waiting("worker", 0), waiting("worker", 1)],
        );
        let mut b = JobBuckets::build(&j, relations("ps,worker", "", ""));
        let before = b.clone();
        b.placed("uid-worker-0", Some("node-a"));
        assert_eq!(b.buckets[0].waiting.len(), 2);
        assert_eq!(b.roles_on_node["node-a"]["worker"], 1);
        assert_eq!(b.buckets[0].placed_on["node-a"], 1);
        b.unplaced("uid-worker-0", true);
        assert_eq!(b, before);
        // A task kube-scheduler places leaves the waiting tasks, counted nowhere.
        b.placed("uid-ps-0", None);
        assert_eq!(b.buckets[0].waiting.len(), 2);
        assert!(b.roles_on_node.is_empty());
        b.unplaced("uid-ps-0", true);
        assert_eq!(b, before);
    }

    #[test]
    fn an_evicted_task_counts_nowhere_until_the_eviction_is_taken_back() {
        let k = key();
        let mut ps = running_task(&k, "ps-0", 1, 0);
        ps.role = Some("ps".into());
        let j = job("tf", "q", 1, vec![ps, waiting("ps", 1)]);
        let mut b = JobBuckets::build(&j, relations("", "ps", ""));
        let before = b.clone();
        b.unplaced("uid-ps-0", false);
        assert!(b.roles_on_node.is_empty());
        assert_eq!(b.buckets[0].waiting.len(), 0, "not waiting again");
        b.placed("uid-ps-0", Some("node-1"));
        assert_eq!(b, before);
    }
}
