//! What the planner keeps from one cycle to the next so that a cycle costs what
//! changed: what the ledger holds for each member, the members' tasks and the
//! gangs' jobs (its copy of the book is kept beside, in a [`PlannerBook`]). Each cycle works out which gangs may
//! have changed: those whose members or PodGroup the book changed, whose
//! members' holdings the ledger changed, with a member held on a node whose
//! registered GPUs changed (a placement there changes only their usage, which
//! no member's charge reads), or whose admission by an earlier enqueue changed. Every gang
//! is looked at again when something all jobs are built from changed
//! (PriorityClasses, whether enqueue runs, the largest card, the set of nodes).

use super::book::{GangBook, GangKey};
use super::hint_world::Journals;
use super::job_cache::JobCache;
use super::kept_holdings::KeptHoldings;
use super::kept_nodes::KeptNodes;
use super::planner_book::{BookDelta, PlannerBook};
use super::snapshot::{Kept, LedgerPicture, SnapshotInput, build_state_with, shared_job_inputs};
use super::task_cache::TaskCache;
use crate::ledger::Ledger;
use crate::volcano::framework::SessionState;
use foldhash::HashSet;
use std::collections::BTreeSet;

/// The planner's state kept between cycles.
#[derive(Default)]
pub struct KeptState {
    holdings: KeptHoldings,
    /// The nodes of the last picture.
    nodes: KeptNodes,
    tasks: TaskCache,
    jobs: JobCache,
    /// Gangs admitted by earlier enqueues when the last state was built.
    inqueue: BTreeSet<GangKey>,
    /// The largest card when the last state was built.
    largest_card: Option<u64>,
    /// What changed since the last state was built, gathered while the book is
    /// followed and the picture taken: `None` when everything may have.
    pending: Option<Pending>,
}

/// Changes seen since the last state was built.
#[derive(Default)]
struct Pending {
    /// Members the book or the ledger changed.
    members: HashSet<String>,
    /// Gangs the book changed.
    gangs: HashSet<GangKey>,
}

impl KeptState {
    /// Notes what the planner's copy of the book changed when it followed the
    /// book.
    pub fn note(&mut self, delta: BookDelta) {
        if delta.everything {
            self.pending = None;
            return;
        }
        if let Some(pending) = self.pending.as_mut() {
            pending.members.extend(delta.members);
            pending.gangs.extend(delta.gangs);
        }
    }

    /// Takes a picture of the ledger (call with it locked for reading) and
    /// brings what it holds for each member up to it.
    pub fn picture(&mut self, ledger: &Ledger, book: &GangBook) -> LedgerPicture {
        let changed = self.pending.as_ref().map(|p| &p.members);
        let (picture, moved) =
            LedgerPicture::take(ledger, book, (&mut self.holdings, &mut self.nodes), changed);
        match (moved, self.pending.as_mut()) {
            (Some(moved), Some(pending)) => pending.members.extend(moved),
            _ => self.pending = None,
        }
        picture
    }

    /// The session state over `picture`, building again only the tasks and jobs
    /// of gangs that may have changed (`copy`: the book `input` names, with its
    /// members indexed by gang).
    pub fn state(
        &mut self,
        input: &SnapshotInput<'_>,
        copy: &PlannerBook,
        picture: LedgerPicture,
    ) -> SessionState {
        let Self {
            holdings,
            tasks,
            jobs,
            nodes,
            inqueue,
            largest_card,
            pending,
        } = self;
        let all_again = jobs.open(&shared_job_inputs(input.book, input.conf));
        let largest = picture.largest_card();
        let changed = match pending.take() {
            Some(p) if !all_again && *largest_card == Some(largest) => {
                let mut gangs = p.gangs;
                for uid in &p.members {
                    match input.book.members().get(uid) {
                        Some(m) => {
                            gangs.insert(m.gang.clone());
                        }
                        None => tasks.forget(uid),
                    }
                }
                gangs_on_reregistered_nodes(
                    input.book,
                    holdings,
                    nodes.take_registrations_changed(),
                    &mut gangs,
                );
                gangs.extend(inqueue.symmetric_difference(input.inqueue).cloned());
                Some(gangs)
            }
            _ => None,
        };
        *largest_card = Some(largest);
        // The registrations changed before this state are in it, whichever
        // way it was built.
        nodes.take_registrations_changed();
        // Copied only when it changed: thousands of admitted gangs may wait.
        if *inqueue != *input.inqueue {
            inqueue.clone_from(input.inqueue);
        }
        let state = build_state_with(
            input,
            picture,
            Kept {
                holdings,
                tasks,
                jobs,
                changed: changed.as_ref().map(|gangs| (gangs, copy)),
            },
        );
        // From now on changes are gathered for the next state.
        *pending = Some(Pending::default());
        state
    }

    /// Pending members that carry our gate although they are planned, as of the
    /// last picture.
    pub fn planned_gated(&self) -> &BTreeSet<String> {
        self.holdings.planned_gated()
    }

    /// The nodes and jobs replaced, added or removed from one state to the
    /// next (what the queueing hints compare again).
    pub fn journals(&self) -> Journals<'_> {
        Journals {
            nodes: self.nodes.journal(),
            jobs: self.jobs.journal(),
        }
    }

    /// Tasks and jobs that had to be built since last asked.
    pub fn take_built(&mut self) -> (usize, usize) {
        (self.tasks.take_built(), self.jobs.take_built())
    }
}

/// Adds the gangs of members held on a node whose registered GPUs are not the
/// ones the last state was built on (`changed`: those nodes; the node's GPUs'
/// models and memory are part of what a member is charged).
fn gangs_on_reregistered_nodes(
    book: &GangBook,
    holdings: &KeptHoldings,
    changed: HashSet<String>,
    gangs: &mut HashSet<GangKey>,
) {
    for node in &changed {
        for uid in holdings.on_node(node) {
            if let Some(m) = book.members().get(uid) {
                gangs.insert(m.gang.clone());
            }
        }
    }
}
