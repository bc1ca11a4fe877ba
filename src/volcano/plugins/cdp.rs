//! cdp (cooldown protection): a pod is not a victim within its
//! `volcano.sh/cooldown-time` (label, then annotation; `600s`, `10m`) of being
//! bound, so elastic jobs are not evicted again right after they started.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::victims::in_cooldown;
use crate::volcano::framework::{SessionState, TaskInfo};

/// The cdp plugin.
#[derive(Debug, Default)]
pub struct Cdp;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Cdp)))
}

fn past_cooldown(state: &SessionState, candidates: &[&TaskInfo]) -> Vec<String> {
    candidates
        .iter()
        .filter(|t| !in_cooldown(t, state.now))
        .map(|t| t.uid.clone())
        .collect()
}

impl Plugin for Cdp {
    fn name(&self) -> &'static str {
        "cdp"
    }

    fn preemptable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(past_cooldown(state, candidates))
    }

    fn reclaimable(
        &self,
        state: &SessionState,
        _: &TaskInfo,
        candidates: &[&TaskInfo],
    ) -> Option<Vec<String>> {
        Some(past_cooldown(state, candidates))
    }
}
