//! Tasks kept from one planning cycle to the next. Building a member's task parses
//! its pod's vGPU request and works out what it is charged; with thousands of
//! members waiting that costs more than the session itself, although between two
//! cycles almost none of them changed. A member's task is rebuilt only when
//! something it is built from changed: the member itself (its generation in the
//! book: a new pod version, a gate lifted, a bind seen, an eviction started), what
//! the ledger holds for it, or the GPUs registered on the node its holding is on
//! (not their usage: see [`super::registered_gpus`]). Everything else a task
//! says is read again each cycle (its priority, from PriorityClasses that may have
//! changed).

use super::book::Member;
use super::registered_gpus::same_registered_gpus;
use crate::ledger::NodeEntry;
use crate::volcano::framework::TaskInfo;
use crate::volcano::framework::job::TaskPlacement;
use foldhash::HashMap;
use std::sync::Arc;

/// What a task was built from, besides the member's generation.
#[derive(Clone)]
pub struct TaskInputs<'a> {
    /// What the ledger holds (or has promised) for the member.
    pub held: Option<&'a TaskPlacement>,
    /// The holding is a pipelined plan waiting for its victims.
    pub pipelined: bool,
    /// The node entry the held GPUs are on (card types, MIG sizes): only its
    /// registered GPUs count.
    pub node: Option<&'a Arc<NodeEntry>>,
    /// The largest card in the cluster (what a share-of-card request is charged).
    pub largest_card: u64,
}

/// One member's task with what it was built from.
struct Cached {
    generation: u64,
    held: Option<TaskPlacement>,
    pipelined: bool,
    node: Option<Arc<NodeEntry>>,
    largest_card: u64,
    /// The sweep this entry was last asked for in.
    seen: u64,
    /// Shared with the jobs built from it: a job whose every task is the one it
    /// was built from need not be built again.
    task: Arc<TaskInfo>,
}

impl Cached {
    fn built_from(&self, member: &Member, inputs: &TaskInputs<'_>) -> bool {
        self.generation == member.generation
            && self.pipelined == inputs.pipelined
            && self.largest_card == inputs.largest_card
            && self.held.as_ref() == inputs.held
            && match (&self.node, inputs.node) {
                (Some(a), Some(b)) => same_registered_gpus(a, b),
                (None, None) => true,
                _ => false,
            }
    }
}

/// Members' tasks by pod UID, kept between cycles.
#[derive(Default)]
pub struct TaskCache {
    entries: HashMap<String, Cached>,
    /// Counts cycles that asked for every task: entries not asked for in one
    /// are forgotten.
    sweeps: u64,
    /// Tasks built (not taken from the cache) since last counted.
    built: usize,
}

impl TaskCache {
    /// The member's task: the one kept when nothing it was built from changed,
    /// otherwise a new one from `build` (kept for the next cycle).
    pub fn task(
        &mut self,
        member: &Member,
        inputs: TaskInputs<'_>,
        build: impl FnOnce() -> TaskInfo,
    ) -> Arc<TaskInfo> {
        let sweep = self.sweeps;
        if let Some(cached) = self.entries.get_mut(&member.uid)
            && cached.built_from(member, &inputs)
        {
            cached.seen = sweep;
            // The newest entry: the next comparison is by address, and the
            // replaced one is freed.
            cached.node = inputs.node.cloned();
            return cached.task.clone();
        }
        let task = Arc::new(build());
        self.built += 1;
        self.entries.insert(
            member.uid.clone(),
            Cached {
                generation: member.generation,
                held: inputs.held.cloned(),
                pipelined: inputs.pipelined,
                node: inputs.node.cloned(),
                largest_card: inputs.largest_card,
                seen: sweep,
                task: task.clone(),
            },
        );
        task
    }

    /// Forgets a member that left the book.
    pub fn forget(&mut self, uid: &str) {
        self.entries.remove(uid);
    }

    /// After a cycle that asked for every member's task: forgets members that
    /// were not asked for (gone from the book).
    pub fn forget_unasked(&mut self) {
        let sweep = self.sweeps;
        self.entries.retain(|_, cached| cached.seen == sweep);
        self.sweeps += 1;
    }

    /// How many tasks had to be built since the last call.
    pub fn take_built(&mut self) -> usize {
        std::mem::take(&mut self.built)
    }
}
