//! pdb: a victim set never breaks a PodDisruptionBudget: candidates are let go in
//! the order given only while every budget covering them has disruptions left
//! (`status.disruptionsAllowed`, counting pods this session already evicts). The
//! API server checks the same budgets again when the eviction is made.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{SessionState, TaskInfo, TaskStatus};

/// The pdb plugin.
#[derive(Debug, Default)]
pub struct Pdb;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Pdb)))
}

fn within_budgets(state: &SessionState, candidates: &[&TaskInfo]) -> Vec<String> {
    let labels = |t: &TaskInfo| t.pod.metadata.labels.clone().unwrap_or_default();
    // Pods being evicted already use up their budgets.
    let mut left: Vec<i64> = state
        .budgets
        .iter()
        .map(|b| {
            let releasing = state
                .jobs
                .values()
                .flat_map(|j| &j.tasks)
                .filter(|t| t.status == TaskStatus::Releasing && b.covers(&t.namespace, &labels(t)))
                .count() as i64;
            i64::from(b.allowed) - releasing
        })
        .collect();
    candidates
        .iter()
        .filter(|t| {
            let l = labels(t);
            let covering: Vec<usize> = state
                .budgets
                .iter()
                .enumerate()
                .filter(|(_, b)| b.covers(&t.namespace, &l))
                .map(|(i, _)| i)
                .collect();
            let ok = covering.iter().all(|&i| left[i] > 0);
            if ok {
                for i in covering {
                    left[i] -= 1;
                }
            }
            ok
        })
        .map(|t| t.uid.clone())
        .collect()
}

impl Plugin for Pdb {
    fn name(&self) -> &'static str {
        "pdb"
    }

    fn preemptable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(within_budgets(state, candidates))
    }

    fn reclaimable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(within_budgets(state, candidates))
    }
}
