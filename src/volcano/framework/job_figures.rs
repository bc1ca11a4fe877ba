//! What one job adds to its queue's figures: the one place they are counted
//! ([`QueueInfo::charge_job`] adds them). The planner works them out once when
//! a job is built and keeps them with it, so a cycle adds up one set of figures per job rather
//! than walking every task of every waiting job again.

use super::queue::{QueueInfo, add_cards};
use super::{JobInfo, TaskStatus};
use crate::resources::{Dim, Resources};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Which of a queue's figures an amount counts towards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QueueFigure {
    /// [`QueueInfo::request`].
    Request,
    /// [`QueueInfo::allocated`].
    Allocated,
    /// [`QueueInfo::elastic`].
    Elastic,
    /// [`QueueInfo::inqueue`].
    Inqueue,
    /// [`QueueInfo::cards`].
    Cards,
}

impl QueueFigure {
    /// Adds `amounts` (dimensions in name order, each once) to this figure of
    /// `q` (saturating, as [`Resources::add`]). A figure with no dimension yet
    /// (as a queue's figures start each cycle) takes them as they are, sharing
    /// their names.
    pub fn add_all(self, q: &mut QueueInfo, amounts: impl IntoIterator<Item = (Dim, i64)>) {
        let resources = match self {
            Self::Request => &mut q.request,
            Self::Allocated => &mut q.allocated,
            Self::Elastic => &mut q.elastic,
            Self::Inqueue => &mut q.inqueue,
            Self::Cards => {
                for (card, amount) in amounts {
                    let slot = q.cards.entry(card.to_string()).or_insert(0);
                    *slot = slot.saturating_add(amount);
                }
                return;
            }
        };
        let sum = Resources::from_ordered(amounts);
        if resources.dimension_count() == 0 {
            *resources = sum;
        } else {
            resources.add(&sum);
        }
    }
}

/// One job's share of its queue's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFigures {
    /// The queue the job belongs to.
    pub queue: String,
    /// What its unfinished tasks ask for.
    request: Resources,
    /// What its tasks hold.
    allocated: Resources,
    /// What it holds beyond its minimum (Volcano's `elastic`).
    elastic: Resources,
    /// Whole cards its tasks hold, by card type.
    cards: BTreeMap<String, i64>,
    /// What its admission reserves beyond what it holds (Volcano's `inqueue`).
    inqueue: Resources,
}

impl JobFigures {
    /// The figures of `job`; `admitted`: enqueue admitted it in an earlier cycle.
    pub fn of(job: &JobInfo, admitted: bool) -> Self {
        let mut figures = Self {
            queue: job.queue.clone(),
            ..Self::default()
        };
        let mut held = 0usize;
        for t in &job.tasks {
            if matches!(t.status, TaskStatus::Succeeded | TaskStatus::Failed)
                || t.deleted_unplaced()
            {
                continue;
            }
            figures.request.add(&t.resreq);
            if t.holds_resources() {
                held += 1;
                // What a gang holds beyond its minimum is elastic: admission may
                // count it as given back (Volcano's `elastic`).
                if held > job.min_member {
                    figures.elastic.add(&t.resreq);
                }
                figures.allocated.add(&t.resreq);
                add_cards(&mut figures.cards, &t.cards);
            }
        }
        // An admitted gang reserves what its minimum still needs beyond what it
        // already holds (Volcano's `inqueue`: minResources minus allocated). A
        // PodGroup without pods whose status reads Inqueue counts too.
        if (admitted || (job.inqueue && job.tasks.is_empty()))
            && let Some(min) = &job.min_resources
        {
            figures.inqueue.add(&min.minus(&job.allocated));
        }
        figures
    }

    /// Every amount of these figures with the queue figure it counts towards,
    /// for keeping queues' sums up to date as jobs come and go.
    pub fn amounts(&self) -> impl Iterator<Item = (QueueFigure, Dim, i64)> {
        [
            (QueueFigure::Request, &self.request),
            (QueueFigure::Allocated, &self.allocated),
            (QueueFigure::Elastic, &self.elastic),
            (QueueFigure::Inqueue, &self.inqueue),
        ]
        .into_iter()
        .flat_map(|(figure, r)| {
            r.shared_iter()
                .map(move |(d, v)| (figure, Arc::clone(d), v))
        })
        .chain(
            self.cards
                .iter()
                .map(|(card, n)| (QueueFigure::Cards, Dim::from(card.as_str()), *n)),
        )
    }

    /// Adds these figures to the queue's.
    pub fn add_to(&self, q: &mut QueueInfo) {
        q.request.add(&self.request);
        q.allocated.add(&self.allocated);
        q.elastic.add(&self.elastic);
        add_cards(&mut q.cards, &self.cards);
        q.inqueue.add(&self.inqueue);
    }
}
