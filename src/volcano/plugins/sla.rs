//! sla: a job that has waited longer than its SLA waiting time since its PodGroup
//! was created goes ahead of the others. The waiting time is the job's own
//! (`volcano.sh/sla-waiting-time`, then `sla-waiting-time`, on its PodGroup) or
//! the plugin's `sla-waiting-time` argument for every job.
//!
//! - **Job order**: jobs with a waiting time come first, the earliest deadline
//!   (creation + waiting time) first; jobs without one are left to the next plugin.
//! - **Enqueueable** and **pipelined**: once a job is past its deadline the plugin
//!   permits; before that it has no opinion. Under the tier rules a permit decides
//!   only when no plugin of the same tier refuses, and spares the tiers below, so
//!   an overdue job bypasses the queue limits of `proportion`, `capacity` or
//!   `overcommit` configured in a lower tier.
//!
//! The session's clock decides what is overdue. A job with no creation time (a
//! hand-written cluster file) has not waited yet.

use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::{Plugin, Vote};
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{JobInfo, SessionState};
use crate::volcano::go_duration::parse_positive;
use crate::volcano::waiting_time::WAITING_TIME_KEY;
use chrono::{DateTime, Utc};
use std::cmp::Ordering;
use std::time::Duration;

/// The sla plugin.
#[derive(Debug)]
pub struct Sla {
    /// The waiting time of jobs that state none.
    default_waiting_time: Option<Duration>,
    /// When the session opened.
    now: DateTime<Utc>,
}

/// Builds the plugin from `sla-waiting-time` (a Go duration such as `1h30m`).
/// Volcano logs and ignores a value it cannot read; here it is refused when the
/// configuration loads, since an SLA silently off is what the user would not see.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    ctx.args.only(&[WAITING_TIME_KEY])?;
    let default_waiting_time = match ctx.args.raw(WAITING_TIME_KEY) {
        None => None,
        Some(serde_json::Value::String(text)) => {
            Some(parse_positive(text).map_err(|e| ctx.args.error(WAITING_TIME_KEY, e))?)
        }
        Some(other) => {
            return Err(ctx.args.error(
                WAITING_TIME_KEY,
                format!("expected a duration such as \"1h30m\", got {other}"),
            ));
        }
    };
    Ok(Some(Box::new(Sla {
        default_waiting_time,
        now: DateTime::UNIX_EPOCH,
    })))
}

impl Sla {
    /// The job's deadline: when its waiting time runs out; `None` without one.
    fn deadline(&self, job: &JobInfo) -> Option<DateTime<Utc>> {
        let waiting_time = job.waiting_time.or(self.default_waiting_time)?;
        let waiting_time =
            chrono::Duration::from_std(waiting_time).unwrap_or(chrono::Duration::MAX);
        let created = job.created.unwrap_or(self.now);
        Some(
            created
                .checked_add_signed(waiting_time)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }

    /// Permit once the job is past its deadline; no opinion before.
    fn overdue(&self, job: &JobInfo) -> Vote {
        match self.deadline(job) {
            Some(deadline) if self.now >= deadline => Vote::Permit,
            _ => Vote::Abstain,
        }
    }
}

impl Plugin for Sla {
    fn name(&self) -> &'static str {
        "sla"
    }

    fn open(&mut self, state: &SessionState) {
        self.now = state.now;
    }

    fn job_order(&self, _: &SessionState, a: &JobInfo, b: &JobInfo) -> Ordering {
        match (self.deadline(a), self.deadline(b)) {
            (None, None) => Ordering::Equal,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(da), Some(db)) => da.cmp(&db),
        }
    }

    fn job_enqueueable(&self, _: &SessionState, job: &JobInfo) -> Vote {
        self.overdue(job)
    }

    fn job_pipelined(&self, job: &JobInfo) -> Vote {
        self.overdue(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;
    use crate::volcano::conf::SchedulerConf;
    use crate::volcano::framework::testing::{job, state};
    use crate::volcano::plugins::registry;

    fn at(minutes: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + chrono::Duration::minutes(minutes)
    }

    fn plugin(default: Option<u64>, now_minutes: i64) -> Sla {
        let mut sla = Sla {
            default_waiting_time: default.map(|m| Duration::from_secs(m * 60)),
            now: DateTime::UNIX_EPOCH,
        };
        let mut st = state(Resources::default(), vec![], vec![]);
        st.now = at(now_minutes);
        sla.open(&st);
        sla
    }

    /// A job created at `created` minutes, waiting at most `waiting` minutes.
    fn waiting_job(name: &str, created: i64, waiting: Option<u64>) -> JobInfo {
        let mut j = job(name, "default", 1, vec![]);
        j.created = Some(at(created));
        j.waiting_time = waiting.map(|m| Duration::from_secs(m * 60));
        j
    }

    #[test]
    fn jobs_with_an_sla_come_first_by_deadline() {
        let sla = plugin(None, 0);
        let st = state(Resources::default(), vec![], vec![]);
        let none = waiting_job("none", 0, None);
        // Created later but due sooner: 10 + 5 < 0 + 30.
        let soon = waiting_job("soon", 10, Some(5));
        let late = waiting_job("late", 0, Some(30));
        assert_eq!(sla.job_order(&st, &soon, &late), Ordering::Less);
        assert_eq!(sla.job_order(&st, &late, &soon), Ordering::Greater);
        assert_eq!(sla.job_order(&st, &late, &none), Ordering::Less);
        assert_eq!(sla.job_order(&st, &none, &soon), Ordering::Greater);
        assert_eq!(sla.job_order(&st, &none, &none.clone()), Ordering::Equal);
        let same = waiting_job("same", 5, Some(10));
        let also = waiting_job("also", 10, Some(5));
        assert_eq!(sla.job_order(&st, &same, &also), Ordering::Equal);
    }

    #[test]
    fn the_argument_gives_every_job_without_its_own_an_sla() {
        let sla = plugin(Some(60), 0);
        let st = state(Resources::default(), vec![], vec![]);
        let by_argument = waiting_job("arg", 0, None);
        let own = waiting_job("own", 0, Some(30));
        assert_eq!(
            sla.job_order(&st, &own, &by_argument),
            Ordering::Less,
            "the job's own 30m beats the default 60m"
        );
    }

    #[test]
    fn a_job_is_permitted_once_overdue_and_not_before() {
        let st = state(Resources::default(), vec![], vec![]);
        let j = waiting_job("j", 0, Some(60));
        for (now, want) in [
            (0, Vote::Abstain),
            (59, Vote::Abstain),
            (60, Vote::Permit),
            (600, Vote::Permit),
        ] {
            let sla = plugin(None, now);
            assert_eq!(sla.job_enqueueable(&st, &j), want, "at {now}m");
            assert_eq!(sla.job_pipelined(&j), want, "at {now}m");
        }
        let sla = plugin(None, 600);
        let no_sla = waiting_job("none", 0, None);
        assert_eq!(sla.job_enqueueable(&st, &no_sla), Vote::Abstain);
        let mut unknown_age = waiting_job("new", 0, Some(1));
        unknown_age.created = None;
        assert_eq!(
            sla.job_enqueueable(&st, &unknown_age),
            Vote::Abstain,
            "without a creation time a job has not waited"
        );
    }

    #[test]
    fn an_overdue_job_passes_the_tiers_below_but_not_a_refusal_beside_it() {
        use crate::volcano::framework::QueueInfo;
        use crate::volcano::framework::testing::gpus;
        use crate::volcano::objects::QueueSpec;
        let overcommit = "  - name: overcommit\n    arguments:\n      overcommit-factor: 1.0\n";
        let mut late = waiting_job("late", 0, Some(10));
        late.min_resources = Some(gpus(8));
        late.inqueue = false;
        let mut st = state(
            gpus(4),
            vec![QueueInfo::idle(QueueSpec::new("default"))],
            vec![late.clone()],
        );
        st.now = at(60);
        let admits = |st: &SessionState, layout: &str| {
            let conf =
                SchedulerConf::parse(&format!("actions: enqueue\ntiers:\n{layout}")).unwrap();
            let mut tiers = registry::build(&conf).unwrap();
            tiers.open(st);
            tiers.job_enqueueable(st, &late).is_ok()
        };
        let own_tier = format!("- plugins:\n  - name: sla\n- plugins:\n{overcommit}");
        let same_tier = format!("- plugins:\n  - name: sla\n{overcommit}");
        assert!(admits(&st, &own_tier), "overcommit is not asked");
        assert!(!admits(&st, &same_tier), "overcommit's refusal stands");
        st.now = at(9);
        assert!(!admits(&st, &own_tier), "not yet overdue");
    }

    #[test]
    fn the_documented_configuration_loads() {
        // Volcano's example: sla in the first tier next to gang.
        let conf = SchedulerConf::parse(
            "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: sla\n    arguments:\n      sla-waiting-time: 1h2m3s4ms5µs6ns\n",
        )
        .unwrap();
        let tiers = registry::build(&conf).unwrap();
        assert_eq!(tiers.names(), vec!["priority", "gang", "sla"]);
    }

    #[test]
    fn the_argument_is_a_positive_go_duration() {
        let conf = |value: &str| {
            SchedulerConf::parse(&format!(
                "actions: enqueue\ntiers:\n- plugins:\n  - name: sla\n    arguments:\n      sla-waiting-time: {value}\n"
            ))
            .unwrap()
        };
        assert!(registry::build(&conf("1h2m3s4ms5µs6ns")).is_ok());
        assert!(registry::build(&conf("\"1.5h\"")).is_ok());
        for bad in ["soon", "0s", "-1h", "1d", "30"] {
            let err = registry::build(&conf(bad)).unwrap_err().to_string();
            assert!(err.contains("sla-waiting-time"), "{bad}: {err}");
            assert!(err.contains("(sla)"), "{bad}: {err}");
        }
    }
}
