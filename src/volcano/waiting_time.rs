//! A job's SLA waiting time: how long it may wait before the `sla` plugin admits it
//! ahead of the others. Volcano reads it from the PodGroup's annotations when it
//! builds the job, `volcano.sh/sla-waiting-time` first and the plain
//! `sla-waiting-time` second; a value that is not a positive Go duration counts as
//! absent, so the plugin's cluster-wide `sla-waiting-time` applies instead.

use super::go_duration::parse_positive;
use std::collections::BTreeMap;
use std::time::Duration;

/// The annotation Volcano reads first.
pub const WAITING_TIME_ANNOTATION: &str = "volcano.sh/sla-waiting-time";
/// The annotation (and the plugin argument) Volcano reads second.
pub const WAITING_TIME_KEY: &str = "sla-waiting-time";

/// The job's own waiting time from its PodGroup's annotations (for a gang of one,
/// its pod's); `None` when absent or unreadable (logged, as Volcano logs it).
pub fn waiting_time(annotations: &BTreeMap<String, String>, job: &str) -> Option<Duration> {
    [WAITING_TIME_ANNOTATION, WAITING_TIME_KEY]
        .into_iter()
        .find_map(|key| {
            let value = annotations.get(key)?;
            match parse_positive(value) {
                Ok(d) => Some(d),
                Err(e) => {
                    tracing::warn!(job, annotation = key, error = %e, "ignoring unreadable SLA waiting time");
                    None
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_volcano_annotation_comes_before_the_plain_one() {
        let both = annotations(&[(WAITING_TIME_ANNOTATION, "10m"), (WAITING_TIME_KEY, "1h")]);
        assert_eq!(waiting_time(&both, "ns/a"), Some(Duration::from_secs(600)));
        let plain = annotations(&[(WAITING_TIME_KEY, "1h")]);
        assert_eq!(
            waiting_time(&plain, "ns/a"),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(waiting_time(&annotations(&[]), "ns/a"), None);
    }

    #[test]
    fn an_unreadable_value_counts_as_absent() {
        let bad_first = annotations(&[(WAITING_TIME_ANNOTATION, "soon"), (WAITING_TIME_KEY, "1h")]);
        assert_eq!(
            waiting_time(&bad_first, "ns/a"),
            Some(Duration::from_secs(3600)),
            "Volcano falls back to the plain key when the first is unreadable"
        );
        for bad in ["0s", "-5m", "1d", ""] {
            assert_eq!(
                waiting_time(&annotations(&[(WAITING_TIME_KEY, bad)]), "ns/a"),
                None,
                "{bad:?}"
            );
        }
    }
}
