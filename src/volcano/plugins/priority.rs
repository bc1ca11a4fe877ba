//! priority: jobs and tasks with a higher priority go first.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, SessionState, TaskInfo};
use std::cmp::Ordering;

/// The priority plugin.
#[derive(Debug, Default)]
pub struct Priority;

/// Builds the plugin (it takes no arguments).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[])?;
    Ok(Some(Box::new(Priority)))
}

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        b.priority.cmp(&a.priority)
    }

    fn task_order(&self, a: &TaskInfo, b: &TaskInfo) -> Ordering {
        b.priority.cmp(&a.priority)
    }
}
