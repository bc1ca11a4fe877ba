//! Queueing hints, as kube-scheduler calls them: a job allocate tried and could
//! not place is not tried again until something changed that could let it in.
//! With thousands of gangs waiting on a full cluster, trying each of them in every
//! cycle is what a cycle costs; with hints, a cycle tries the jobs that changed and
//! those something was freed for.
//!
//! What could let a blocked job in, and so wakes every blocked job:
//! - room appearing: a GPU whose usage went down on any dimension, a node whose
//!   pods' CPU or memory requests went down, a node added, or one whose
//!   registration, cordons, labels, taints or allocatable changed;
//! - a pod starting to leave (its room may be pipelined onto);
//! - any queue's figures other than what it holds growing (deserved shares move
//!   with every queue's request, weight and capacity; less held opens a queue);
//! - namespace quotas, ResourceQuotas, HyperNodes, node metrics, namespaces'
//!   labels, the configuration, or the cluster's total changing.
//!
//! A pod arriving on a node (bound there, or planned there) wakes the blocked
//! jobs that follow pods through required pod affinity: it may be the pod they
//! wait for. A pod leaving a node, or one on a node whose labels change, wakes
//! every blocked job: it may have repelled one (`gang::affine_pods`).
//!
//! A job's own change (any of its pods, its PodGroup, its priority, its admission)
//! wakes that job. Room only taken since it failed (other jobs placed, pods bound,
//! another scheduler's pods) cannot let in a gang of alike members none of which
//! constrains another: allocate fills it member by member on the room left when
//! its turn comes, each member could go wherever another could, and that room
//! only shrinks while nothing above happens. It can let in any other gang
//! (members unlike, or following or repelling one another, or alike but for
//! their labels while a pod with required anti-affinity exists: see
//! `gang::room_sensitive_jobs`): an earlier member's node decides where later
//! ones may go, and room taken there sends it elsewhere. But not a gang fewer of
//! whose members than its minimum could be placed on any node with every card
//! free (one asks for a GPU type no node has: `gang::never_ready_jobs`): no
//! room makes it ready. Any other such blocked job is
//! woken when a node's room or pods changed, or when a job that changed is tried
//! (it may take room before the blocked job's turn); a cycle with neither tries
//! nothing that could, and sees the room the job failed with. A cycle
//! whose plan was overtaken at commit forgets every hint: the room jobs saw at
//! their turn is then not what the ledger shows.
//!
//! Skipping is invisible in decisions: a skipped job is noted with the message it
//! waited with, and a differential test compares plans with hints to plans of
//! sessions that try everything.

use crate::gang::affine_pods::{AffinityChange, PlannedPods, follows_pods};
use crate::gang::hint_world::{Journals, OpenedWorld, World};
use crate::gang::never_ready_jobs::short_of_minimum_everywhere;
use crate::gang::room_sensitive_jobs::{RoomSensitivity, repels_pods, room_sensitivity};
use crate::ledger::NodeEntry;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::allocate_hints::AllocateHints;
use crate::volcano::framework::{GangKey, JobInfo, SessionState, TaskStatus};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Blocked jobs and the world they were blocked in, kept between cycles.
///
/// A cycle looks again only at the jobs that are not the very ones the world
/// holds (see `gang::hint_world`): a job unchanged since is blocked or not as it
/// was, and what allocate skips is kept whole, ready to hand to the session.
#[derive(Default)]
pub struct QueueingHints {
    /// The world as the last full cycle saw it when it opened.
    world: Option<World>,
    /// Jobs allocate could not place, as they were when it tried.
    blocked: BTreeMap<GangKey, JobMark>,
    /// The same jobs with the message each waited with: what allocate skips.
    skip: BTreeMap<GangKey, String>,
    /// Those of the blocked jobs room taken may let in: woken together, without
    /// a pass over every blocked job.
    room_sensitive: BTreeSet<GangKey>,
    /// Those room taken may let in while a pod with required anti-affinity
    /// exists (members alike but for their labels).
    label_sensitive: BTreeSet<GangKey>,
    /// The jobs of the world with a task carrying required anti-affinity,
    /// followed from the jobs that changed (a job gone or changed since may
    /// linger: it only wakes more).
    repelling_jobs: BTreeSet<GangKey>,
    /// A full cycle planned and not yet committed: what to remember once its
    /// commit shows whether the ledger holds what its session decided.
    planned: Option<(Opened, BTreeMap<GangKey, String>, PlannedPods)>,
}

/// Whether a job has tasks and none of them holds anything.
fn all_waiting(job: &JobInfo) -> bool {
    !job.tasks.is_empty() && job.tasks.iter().all(|t| t.status == TaskStatus::Pending)
}

/// What a job was: the job itself, shared with the planner's kept jobs (a job
/// that did not change between cycles is the very same one).
struct JobMark {
    job: Arc<JobInfo>,
    /// Whether a task waits for other pods through required pod affinity.
    follows_pods: bool,
    /// Whether room taken may let it in (`gang::room_sensitive_jobs`).
    room_sensitive: RoomSensitivity,
}

impl JobMark {
    fn of(job: &Arc<JobInfo>) -> Self {
        Self {
            job: job.clone(),
            follows_pods: follows_pods(job.tasks.iter().map(|t| &*t.pod)),
            room_sensitive: room_sensitivity(job),
        }
    }

    /// The mark of a job blocked on `nodes`: one that room could let in only
    /// by how its members differ is not room-sensitive after all when fewer
    /// members than its minimum could be placed on any of them
    /// (`gang::never_ready_jobs`).
    fn on<'a>(job: &Arc<JobInfo>, nodes: impl Iterator<Item = &'a NodeEntry> + Clone) -> Self {
        let mut mark = Self::of(job);
        if mark.room_sensitive != RoomSensitivity::Never && short_of_minimum_everywhere(job, nodes)
        {
            mark.room_sensitive = RoomSensitivity::Never;
        }
        mark
    }

    /// Everything allocate reads of the job but its tasks. Allocate tries only
    /// admitted jobs, whether they were admitted before the session or by its
    /// enqueue: being admitted since changes nothing for it.
    fn bare(&self) -> JobInfo {
        let mut bare = self.job.without_tasks();
        bare.inqueue = true;
        bare
    }
}

impl PartialEq for JobMark {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.job, &other.job);
        // Tasks by identity: UID, the pod version (kept alive, so compared by
        // address), status, gate, priority.
        Arc::ptr_eq(a, b)
            || (self.bare() == other.bare()
                && a.tasks.len() == b.tasks.len()
                && a.tasks.iter().zip(&b.tasks).all(|(a, b)| {
                    a.uid == b.uid
                        && Arc::ptr_eq(&a.pod, &b.pod)
                        && a.status == b.status
                        && a.gated == b.gated
                        && a.priority == b.priority
                }))
    }
}

/// What a cycle's hints were worked out from, to remember after its session.
pub struct Opened {
    world: OpenedWorld,
}

impl QueueingHints {
    /// The jobs of `state` allocate may skip (blocked before, unchanged since,
    /// and nothing happened since that could let them in), and what to remember
    /// after the session. `journals`: what the planner noted keeping the nodes
    /// and jobs `state` was built from.
    pub fn open(
        &mut self,
        state: &SessionState,
        conf: &SchedulerConf,
        journals: Journals<'_>,
    ) -> (AllocateHints, Opened) {
        let (world, filled) = match &self.world {
            Some(before) => {
                let changes = before.changes(state, conf, journals);
                let filled = before.only_filled_up_to(&changes);
                (OpenedWorld::Changed(changes), filled)
            }
            None => {
                self.repelling_jobs = state
                    .jobs
                    .iter()
                    .filter(|(_, job)| repels_pods(job))
                    .map(|(key, _)| key.clone())
                    .collect();
                (OpenedWorld::Whole(World::of(state, conf, journals)), None)
            }
        };
        match filled {
            None => self.wake_all(),
            Some(AffinityChange::Added) => {
                self.blocked.retain(|_, b| !b.follows_pods);
                let blocked = &self.blocked;
                self.skip.retain(|key, _| blocked.contains_key(key));
                self.room_sensitive.retain(|key| blocked.contains_key(key));
                self.label_sensitive.retain(|key| blocked.contains_key(key));
            }
            Some(_) => {}
        }
        // A blocked job that changed stays blocked only if allocate would see
        // it as it was when it failed.
        if let OpenedWorld::Changed(changes) = &world {
            let mut changed_tried = false;
            for (key, job) in changes.jobs() {
                match job {
                    Some(job) if repels_pods(job) => self.repelling_jobs.insert(key.clone()),
                    _ => self.repelling_jobs.remove(key),
                };
                let Some(blocked) = self.blocked.get_mut(key) else {
                    changed_tried |= job.is_some();
                    continue;
                };
                let still = match job {
                    Some(job) if all_waiting(job) => {
                        Arc::ptr_eq(&blocked.job, job) || {
                            let mark = JobMark::on(job, state.nodes.iter().map(|n| &*n.gpus));
                            let same = *blocked == mark;
                            let sensitivity = mark.room_sensitive;
                            *blocked = mark;
                            self.note_sensitivity(key, sensitivity);
                            same
                        }
                    }
                    _ => false,
                };
                if !still {
                    changed_tried |= job.is_some();
                    self.blocked.remove(key);
                    self.skip.remove(key);
                    self.note_sensitivity(key, RoomSensitivity::Never);
                }
            }
            if changed_tried || changes.touch_nodes() {
                let repelled =
                    state.nodes.has_anti_affine_pods() || !self.repelling_jobs.is_empty();
                self.wake_room_sensitive(repelled);
            }
        }
        let hints = AllocateHints {
            skip: self.skip.clone(),
            ..AllocateHints::default()
        };
        (hints, Opened { world })
    }

    /// A full cycle's session is done: what it opened with, the jobs allocate
    /// tried and could not place, and the tasks it placed.
    pub fn planned(
        &mut self,
        opened: Opened,
        unplaced: BTreeMap<GangKey, String>,
        placed: PlannedPods,
    ) {
        self.planned = Some((opened, unplaced, placed));
    }

    /// The cycle's plan is committed: its hints are kept when every commit was
    /// booked as planned, and all are forgotten otherwise.
    pub fn committed(&mut self, all_booked: bool) {
        match self.planned.take() {
            Some((opened, unplaced, placed)) if all_booked => {
                self.remember(opened, unplaced, placed)
            }
            _ if all_booked => {}
            _ => self.forget(),
        }
    }

    /// Remembers a full cycle: the world it opened with and the tasks it placed,
    /// and the jobs still blocked after it (those allocate skipped, and those it
    /// tried and could not place).
    fn remember(
        &mut self,
        opened: Opened,
        unplaced: BTreeMap<GangKey, String>,
        placed: PlannedPods,
    ) {
        self.world = match (self.world.take(), opened.world) {
            (Some(mut kept), OpenedWorld::Changed(changes)) => {
                kept.apply(changes, placed);
                Some(kept)
            }
            (_, OpenedWorld::Whole(mut whole)) => {
                whole.apply_placed(placed);
                Some(whole)
            }
            // Forgotten meanwhile: worked out whole next time.
            (None, OpenedWorld::Changed(_)) => None,
        };
        let Some(world) = &self.world else {
            return;
        };
        let mut marked = Vec::new();
        for (key, message) in unplaced {
            // Only jobs none of whose tasks holds anything: what allocate does
            // for them depends on nothing of their own but what the mark keeps.
            let Some(job) = world.job(&key).filter(|job| all_waiting(job)) else {
                continue;
            };
            if self.blocked.contains_key(&key) {
                continue;
            }
            marked.push((key, JobMark::on(job, world.node_entries()), message));
        }
        for (key, mark, message) in marked {
            self.note_sensitivity(&key, mark.room_sensitive);
            self.blocked.insert(key.clone(), mark);
            self.skip.insert(key, message);
        }
    }

    /// The jobs a cycle opened on `state` would skip although they are not what
    /// allocate failed: none when every change to a blocked job was seen.
    pub fn stale_skips(
        &mut self,
        state: &SessionState,
        conf: &SchedulerConf,
        journals: Journals<'_>,
    ) -> Vec<String> {
        let (hints, _) = self.open(state, conf, journals);
        hints
            .skip
            .keys()
            .filter(|key| {
                let now = state.jobs.get(*key).filter(|job| all_waiting(job));
                match (now, self.blocked.get(*key)) {
                    (Some(job), Some(blocked)) => JobMark::of(job) != *blocked,
                    _ => true,
                }
            })
            .map(|key| key.to_string())
            .collect()
    }

    /// Where the world kept for the hints differs from one worked out whole
    /// from `state` (nothing when every change since was seen).
    pub fn world_differences(
        &self,
        state: &SessionState,
        conf: &SchedulerConf,
        journals: Journals<'_>,
    ) -> Vec<String> {
        let Some(kept) = &self.world else {
            return Vec::new();
        };
        let mut current = kept.clone();
        current.apply(kept.changes(state, conf, journals), PlannedPods::default());
        current.differences_from(&World::of(state, conf, journals))
    }

    /// Forgets every hint (a commit was overtaken: what jobs saw at their turn
    /// is not what the ledger holds).
    fn forget(&mut self) {
        self.world = None;
        self.wake_all();
    }

    /// Every blocked job is tried again.
    fn wake_all(&mut self) {
        self.blocked.clear();
        self.skip.clear();
        self.room_sensitive.clear();
        self.label_sensitive.clear();
    }

    /// Files a blocked job under what room taken may do for it.
    fn note_sensitivity(&mut self, key: &GangKey, sensitivity: RoomSensitivity) {
        self.room_sensitive.remove(key);
        self.label_sensitive.remove(key);
        match sensitivity {
            RoomSensitivity::Never => {}
            RoomSensitivity::WhileRepelled => {
                self.label_sensitive.insert(key.clone());
            }
            RoomSensitivity::Always => {
                self.room_sensitive.insert(key.clone());
            }
        }
    }

    /// The blocked jobs room taken may let in are tried again; those whose
    /// members differ only in labels when some pod with required
    /// anti-affinity exists (`repelled`).
    fn wake_room_sensitive(&mut self, repelled: bool) {
        let mut woken = std::mem::take(&mut self.room_sensitive);
        if repelled {
            woken.append(&mut self.label_sensitive);
        }
        for key in woken {
            self.blocked.remove(&key);
            self.skip.remove(&key);
        }
    }
}
