//! conformance: the scheduler never evicts what the cluster needs to run: pods in
//! `kube-system` and pods of the two critical priority classes.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::gang_eviction::GangEviction;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{SessionState, TaskInfo};

/// Priority classes whose pods are never evicted.
pub const CRITICAL_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];

/// The conformance plugin.
#[derive(Debug, Default)]
pub struct Conformance;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Conformance)))
}

/// Whether the scheduler may evict a pod of this namespace and priority class.
pub fn may_evict(namespace: &str, priority_class: Option<&str>) -> bool {
    namespace != "kube-system" && !priority_class.is_some_and(|c| CRITICAL_CLASSES.contains(&c))
}

/// Whether the scheduler may evict this task (see [`may_evict`]). Registered as
/// an eviction guard, so the rule holds even where `conformance` is not listed.
pub fn may_evict_task(task: &TaskInfo) -> bool {
    let class = task
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    may_evict(&task.namespace, class)
}

fn evictable(candidates: &[&TaskInfo]) -> Vec<String> {
    candidates
        .iter()
        .filter(|t| may_evict_task(t))
        .map(|t| t.uid.clone())
        .collect()
}

impl Plugin for Conformance {
    fn name(&self) -> &'static str {
        "conformance"
    }

    fn preemptable(
        &self,
        _: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(evictable(candidates))
    }

    fn reclaimable(
        &self,
        _: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(evictable(candidates))
    }

    fn gang_evictable(
        &self,
        _: &SessionState,
        _: &GangEviction<'_>,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(evictable(candidates))
    }
}
