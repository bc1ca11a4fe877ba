//! A node's measured usage judged at a moment: its CPU and memory as percentages of
//! what the node offers (allocatable), and whether the sample is recent enough to
//! act on. A sample older than [`STALE_AFTER`] is not used, as in Volcano: a node
//! whose measurements stopped is neither refused nor ranked by figures that no
//! longer describe it.

use super::book::MetricsEntry;
use crate::resources::Resources;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// How old a sample may be and still be used (Volcano's `MetricsActiveTime`).
pub const STALE_AFTER: Duration = Duration::from_secs(5 * 60);

/// What plugins see of a node's measured usage: its entry in the book and the
/// moment it is judged at (the request's or the planning session's "now").
#[derive(Debug, Clone, Copy)]
pub struct MeasuredUsage<'a> {
    /// The node's sample, or why it has none.
    pub entry: MetricsEntry<'a>,
    /// Now.
    pub now: DateTime<Utc>,
}

/// A node's usage as a share of its allocatable CPU and memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsagePercent {
    /// CPU in use, percent of allocatable (above 100 when the node's own daemons
    /// use what is held back from pods).
    pub cpu: f64,
    /// Memory in use, percent of allocatable.
    pub memory: f64,
    /// How old the sample is.
    pub age: Duration,
}

/// Whether the node's usage can be acted on.
#[derive(Debug, Clone, PartialEq)]
pub enum UsageReading {
    /// A recent sample.
    Current(UsagePercent),
    /// No usable sample: the reason.
    Unused(String),
}

impl MeasuredUsage<'static> {
    /// For nodes judged where no usage is collected.
    pub const NOT_COLLECTED: Self = Self {
        entry: MetricsEntry::Missing("node usage is not collected"),
        now: DateTime::UNIX_EPOCH,
    };
}

impl MeasuredUsage<'_> {
    /// The usage against `allocatable` (milli-units, as the node reports it).
    pub fn reading(&self, allocatable: &Resources) -> UsageReading {
        let sample = match self.entry {
            MetricsEntry::Sample(sample) => sample,
            MetricsEntry::Missing(why) => return UsageReading::Unused(why.to_owned()),
        };
        // A clock a little behind the node's counts as no age at all.
        let age = (self.now - sample.timestamp).to_std().unwrap_or_default();
        if age > STALE_AFTER {
            return UsageReading::Unused(format!(
                "metrics {} old (used up to {})",
                whole_seconds(age),
                whole_seconds(STALE_AFTER)
            ));
        }
        let percent = |used: i64, dim: &str| match allocatable.get(dim) {
            offered if offered > 0 => Some(used as f64 * 100.0 / offered as f64),
            _ => None,
        };
        let Some(cpu) = percent(sample.cpu_milli, "cpu") else {
            return UsageReading::Unused("the node reports no allocatable CPU".into());
        };
        let Some(memory) = percent(sample.memory_milli, "memory") else {
            return UsageReading::Unused("the node reports no allocatable memory".into());
        };
        UsageReading::Current(UsagePercent { cpu, memory, age })
    }
}

/// `10m 3s`, without the fractions nobody reads.
fn whole_seconds(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node_metrics::NodeMetricsSample;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + chrono::Duration::seconds(seconds)
    }

    fn node() -> Resources {
        // 64 cores, 512 GiB.
        Resources::from_units([("cpu", 64), ("memory", 512 << 30)])
    }

    fn sample(cpu_cores: i64, memory_gib: i64) -> NodeMetricsSample {
        NodeMetricsSample {
            cpu_milli: cpu_cores * 1000,
            memory_milli: (memory_gib << 30) * 1000,
            timestamp: at(0),
            window: None,
        }
    }

    #[test]
    fn usage_is_a_share_of_allocatable_while_the_sample_is_recent() {
        let s = sample(48, 128);
        let measured = |now| MeasuredUsage {
            entry: MetricsEntry::Sample(&s),
            now: at(now),
        };
        assert_eq!(
            measured(300).reading(&node()),
            UsageReading::Current(UsagePercent {
                cpu: 75.0,
                memory: 25.0,
                age: STALE_AFTER
            })
        );
        assert_eq!(
            measured(603).reading(&node()),
            UsageReading::Unused("metrics 10m 3s old (used up to 5m)".into())
        );
        // The node's clock ahead of ours: as good as new.
        assert!(matches!(
            measured(-30).reading(&node()),
            UsageReading::Current(UsagePercent { age, .. }) if age.is_zero()
        ));
    }

    #[test]
    fn no_sample_or_no_allocatable_says_why() {
        let s = sample(1, 1);
        let sample = MeasuredUsage {
            entry: MetricsEntry::Sample(&s),
            now: at(0),
        };
        assert_eq!(
            sample.reading(&Resources::from_units([("memory", 1 << 30)])),
            UsageReading::Unused("the node reports no allocatable CPU".into())
        );
        assert_eq!(
            MeasuredUsage::NOT_COLLECTED.reading(&node()),
            UsageReading::Unused("node usage is not collected".into())
        );
    }
}
