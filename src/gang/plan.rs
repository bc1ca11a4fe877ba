//! One planning session, pure: open a session on the state, run the configured
//! actions, close it. The caller builds the state (`snapshot`) and writes what the
//! session decided.

use super::cycle_stages::CycleStages;
use crate::volcano::actions;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::GangKey;
use crate::volcano::framework::allocate_hints::AllocateHints;
use crate::volcano::framework::session_memory::SessionMemory;
use crate::volcano::framework::{Session, SessionOutcome, SessionState};
use crate::volcano::plugins::registry;
use std::collections::BTreeMap;

/// Runs the configured actions over `state` with the configured plugins.
pub fn plan(state: SessionState, conf: &SchedulerConf) -> SessionOutcome {
    plan_with_hints(
        state,
        conf,
        AllocateHints::default(),
        &mut SessionMemory::default(),
        &mut CycleStages::default(),
    )
    .0
}

/// Like [`plan`], with allocate skipping the jobs `hints` says are still blocked;
/// also returns the jobs allocate tried and could not place. The session opens
/// and closes after the one that left `memory` (and leaves its own there). Each
/// action's time goes to `stages`.
pub fn plan_with_hints(
    state: SessionState,
    conf: &SchedulerConf,
    hints: AllocateHints,
    memory: &mut SessionMemory,
    stages: &mut CycleStages,
) -> (SessionOutcome, BTreeMap<GangKey, String>) {
    // The configuration was checked when it loaded; a plugin that still fails to
    // build leaves the session without plugins rather than without a plan.
    let tiers = registry::build(conf).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "scheduler configuration does not build; planning without plugins");
        registry::without_plugins()
    });
    let mut session = Session::open_after(state, tiers, std::mem::take(memory));
    session.hints = hints;
    stages.done("session open");
    for action in actions::configured(conf) {
        action.execute(&mut session);
        stages.done(action.name());
    }
    let unplaced = std::mem::take(&mut session.hints.unplaced);
    let (outcome, left) = session.close_keeping();
    *memory = left;
    stages.done("session close");
    (outcome, unplaced)
}
