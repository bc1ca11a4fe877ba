//! What the kept jobs add to each queue's figures, kept between cycles. Adding up
//! every job's figures each cycle cost as much as the rest of building the
//! session state when thousands of jobs run (every running pod of a queue is a
//! job of its own); instead the sums follow the job cache: a job kept adds its
//! figures, a job built again takes its old figures back and adds its new ones,
//! a job forgotten takes its figures back. The sums are exact (wider than the
//! figures), so they equal the figures added up anew, and a queue's figures are
//! the sums capped where adding them one by one would have saturated.

use crate::resources::Dim;
use crate::volcano::framework::QueueInfo;
use crate::volcano::framework::job_figures::{JobFigures, QueueFigure};
use foldhash::HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The kept jobs' figures summed by queue.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct QueueTotals {
    queues: HashMap<String, Sums>,
}

/// One queue's sums and how many jobs they add up.
#[derive(Debug, Default, Clone, PartialEq)]
struct Sums {
    jobs: usize,
    /// By figure, then dimension in name order (as each figure is built); the
    /// names shared with the jobs' figures.
    amounts: BTreeMap<(QueueFigure, Dim), i128>,
}

impl QueueTotals {
    /// Adds a job's figures to its queue's sums.
    pub fn add(&mut self, figures: &JobFigures) {
        let sums = self.queues.entry(figures.queue.clone()).or_default();
        sums.jobs += 1;
        for (figure, dim, amount) in figures.amounts() {
            *sums.amounts.entry((figure, dim)).or_insert(0) += i128::from(amount);
        }
    }

    /// Takes a job's figures (added before) back from its queue's sums.
    pub fn remove(&mut self, figures: &JobFigures) {
        let Some(sums) = self.queues.get_mut(&figures.queue) else {
            return;
        };
        sums.jobs = sums.jobs.saturating_sub(1);
        if sums.jobs == 0 {
            self.queues.remove(&figures.queue);
            return;
        }
        for (figure, dim, amount) in figures.amounts() {
            let key = (figure, dim);
            if let Some(sum) = sums.amounts.get_mut(&key) {
                *sum -= i128::from(amount);
                if *sum == 0 {
                    sums.amounts.remove(&key);
                }
            }
        }
    }

    /// Forgets every sum.
    pub fn clear(&mut self) {
        self.queues.clear();
    }

    /// Adds the sums of `q`'s jobs to its figures.
    pub fn add_to(&self, q: &mut QueueInfo) {
        let Some(sums) = self.queues.get(q.name()) else {
            return;
        };
        // The figures hold no negative amounts; a sum of them that no longer
        // fits saturates, as adding them one by one does.
        let mut amounts = sums
            .amounts
            .iter()
            .map(|((figure, dim), sum)| {
                let amount = i64::try_from(*sum).unwrap_or(if *sum > 0 { i64::MAX } else { 0 });
                (*figure, dim, amount)
            })
            .filter(|(_, _, amount)| *amount > 0)
            .peekable();
        while let Some(&(figure, _, _)) = amounts.peek() {
            let of_figure = std::iter::from_fn(|| amounts.next_if(|(f, _, _)| *f == figure))
                .map(|(_, dim, amount)| (Arc::clone(dim), amount));
            figure.add_all(q, of_figure);
        }
    }
}
