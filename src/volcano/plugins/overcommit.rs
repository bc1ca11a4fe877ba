//! overcommit: admits jobs against the cluster inflated by `overcommit-factor`
//! (default 1.2, never below 1.0), betting that running jobs finish and free room.
//! See `volcano::overcommit` for the arithmetic.

use super::proportion::without_cards;
use crate::resources::format_amount;
use crate::volcano::conf::{ConfError, DEFAULT_OVERCOMMIT_FACTOR};
use crate::volcano::framework::plugin::{Plugin, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, Rejection, SessionState};
use crate::volcano::overcommit::{factor_per_mille, first_excess, idle};

/// The overcommit plugin.
#[derive(Debug)]
pub struct Overcommit {
    factor_per_mille: i64,
}

/// Builds the plugin from `overcommit-factor` (a value below 1.0 is replaced by the
/// default, as Volcano does; the configuration's notes say so).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&["overcommit-factor"])?;
    let factor = match ctx.args.number("overcommit-factor")? {
        Some(f) if f <= 0.0 => {
            return Err(ctx.args.error(
                "overcommit-factor",
                format!("expected a positive number, got {f}"),
            ));
        }
        Some(f) if f >= 1.0 => f,
        _ => DEFAULT_OVERCOMMIT_FACTOR,
    };
    Ok(Some(Box::new(Overcommit {
        factor_per_mille: factor_per_mille(factor),
    })))
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }

    fn job_enqueueable(&self, state: &SessionState, job: &JobInfo) -> Vote {
        let min = without_cards(&job.min_request().unwrap_or_default());
        if min.is_empty() {
            return Vote::Permit;
        }
        let idle = idle(
            &state.total,
            self.factor_per_mille,
            &state.allocated_total(),
            &state.inqueue_total(),
        );
        match first_excess(&min, &idle) {
            None => Vote::Permit,
            Some(x) => Vote::Reject(Rejection {
                plugin: "overcommit",
                queue: job.queue.clone(),
                message: format!(
                    "{} would be {} > idle {} at overcommit factor {}",
                    x.dimension,
                    format_amount(&x.dimension, x.amount),
                    format_amount(&x.dimension, x.limit),
                    self.factor_per_mille as f64 / 1000.0
                ),
                dimension: x.dimension,
            }),
        }
    }
}
