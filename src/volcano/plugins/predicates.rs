//! predicates: kube-scheduler's node filters, run by the planner. kube-scheduler
//! runs them itself before it calls `/filter`, so there they would only repeat
//! its work; but the planner places gang members and pipelined pods before
//! kube-scheduler sees them, and a planned node kube-scheduler refuses later
//! breaks the gang's placement. See `placement::node_predicates` for what is
//! checked (unschedulable, node selector and required node affinity, taints and
//! tolerations, CPU and memory fit) and what is left to kube-scheduler, and
//! `placement::pod_affinity` for required pod affinity and anti-affinity, which
//! the session gathers over the pods on the nodes and the tasks it has planned.
//!
//! Volcano's `predicate.*` arguments (GPU sharing, caching, proportional
//! resources) tune filters this scheduler does differently or not at all: they are
//! accepted, so an existing configuration loads, and have no effect.

use crate::placement::node_predicates::admits;
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;

/// The predicates plugin.
#[derive(Debug, Default)]
pub struct Predicates;

/// Builds the plugin; only Volcano's `predicate.*` arguments are accepted.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    if let Some((key, _)) = ctx.args.iter().find(|(k, _)| !k.starts_with("predicate.")) {
        return Err(ctx.args.error(
            key,
            "unknown argument (Volcano's predicate.* arguments are accepted)",
        ));
    }
    Ok(Some(Box::new(Predicates)))
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        "predicates"
    }

    fn planner_only(&self) -> bool {
        true
    }

    fn filters_nodes(&self) -> bool {
        true
    }

    fn predicate(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String> {
        match (task.pod, node.traits) {
            (Some(pod), Some(traits)) => {
                admits(
                    pod,
                    node.name,
                    traits,
                    node.allocatable,
                    node.requested,
                    task.resreq,
                )?;
                match task.pod_affinity {
                    Some(check) => check.admits(&traits.labels).map_err(String::from),
                    None => Ok(()),
                }
            }
            // A node never seen as an object has nothing to check against.
            _ => Ok(()),
        }
    }
}
