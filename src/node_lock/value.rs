//! The value of the node lock annotation `hami.io/mutex.lock`.
//!
//! The scheduler sets it on Bind and HAMi's device plugin removes it after
//! `Allocate`, so the format is shared with HAMi: `<RFC3339 time>,<namespace>,<pod>`
//! (e.g. `2026-08-01T06:00:00Z,ns,pod-a`). Older HAMi versions wrote a bare RFC3339
//! timestamp without an owner; such values are still understood.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use std::time::Duration;
use thiserror::Error;

/// Why a lock annotation value could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LockValueError {
    /// The value has commas but not exactly `<time>,<namespace>,<pod>`.
    #[error("malformed lock annotation: expected 3 parts, got {parts} from {value}")]
    PartCount {
        /// How many comma-separated parts the value has.
        parts: usize,
        /// The whole annotation value.
        value: String,
    },
    /// The time part is not an RFC3339 timestamp.
    #[error("malformed lock annotation: invalid RFC3339 time {time:?} in {value}: {source}")]
    Time {
        /// The time part as found.
        time: String,
        /// The whole annotation value.
        value: String,
        /// The parser's complaint.
        #[source]
        source: chrono::ParseError,
    },
    /// The namespace or pod part is empty, so the owner cannot be identified.
    #[error("malformed lock annotation: empty namespace or pod name in {value}")]
    EmptyOwner {
        /// The whole annotation value.
        value: String,
    },
}

/// The pod that holds a node lock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockOwner {
    /// Namespace of the owner pod.
    pub namespace: String,
    /// Name of the owner pod.
    pub pod: String,
}

/// A parsed node lock: when it was taken and, unless it is a legacy value, by whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockValue {
    /// When the lock was taken; expiry is measured from here.
    pub time: DateTime<Utc>,
    /// The owner pod; `None` for a legacy bare-timestamp value.
    pub owner: Option<LockOwner>,
}

impl LockValue {
    /// Who holds it, as a contention error names the holder.
    pub fn holder(&self) -> String {
        self.owner.as_ref().map_or_else(
            || "an unknown owner".to_string(),
            |o| format!("{}/{}", o.namespace, o.pod),
        )
    }

    /// Whether the lock is stale and may be taken over: more than `timeout` has passed
    /// since it was taken. A lock dated more than `timeout` in the *future* is treated
    /// as expired as well: no sane clock skew is that large, and such a value would
    /// otherwise block the node until that future moment.
    pub fn is_expired(&self, now: DateTime<Utc>, timeout: Duration) -> bool {
        let Ok(timeout) = TimeDelta::from_std(timeout) else {
            // A timeout beyond chrono's range never runs out.
            return false;
        };
        let age = now.signed_duration_since(self.time);
        age > timeout || -age > timeout
    }

    /// Whether the lock belongs to the given pod. Legacy values have no owner and
    /// belong to nobody.
    pub fn is_held_by(&self, namespace: &str, pod: &str) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| o.namespace == namespace && o.pod == pod)
    }

    /// The annotation text for this lock (a bare timestamp when there is no owner).
    pub fn to_annotation(&self) -> String {
        match &self.owner {
            Some(owner) => format_lock_value(self.time, &owner.namespace, &owner.pod),
            None => format_time(self.time),
        }
    }
}

/// Parses a lock annotation value: a bare RFC3339 timestamp (legacy, no owner) when
/// it contains no `,`, otherwise exactly `<RFC3339>,<namespace>,<pod>`.
pub fn parse_lock_value(value: &str) -> Result<LockValue, LockValueError> {
    if !value.contains(',') {
        return Ok(LockValue {
            time: parse_time(value, value)?,
            owner: None,
        });
    }
    let parts: Vec<&str> = value.split(',').collect();
    let [time, namespace, pod] = parts.as_slice() else {
        return Err(LockValueError::PartCount {
            parts: parts.len(),
            value: value.to_owned(),
        });
    };
    let (namespace, pod) = (namespace.trim(), pod.trim());
    if namespace.is_empty() || pod.is_empty() {
        return Err(LockValueError::EmptyOwner {
            value: value.to_owned(),
        });
    }
    Ok(LockValue {
        time: parse_time(time, value)?,
        owner: Some(LockOwner {
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
        }),
    })
}

/// Formats the lock value HAMi's device plugin expects: RFC3339 in UTC with a `Z`
/// and whole seconds, then namespace and pod, e.g. `2026-08-01T06:00:00Z,ns,pod-a`.
pub fn format_lock_value(time: DateTime<Utc>, namespace: &str, pod: &str) -> String {
    format!("{},{namespace},{pod}", format_time(time))
}

fn format_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn parse_time(time: &str, value: &str) -> Result<DateTime<Utc>, LockValueError> {
    DateTime::parse_from_rfc3339(time.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|source| LockValueError::Time {
            time: time.to_owned(),
            value: value.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 8, 1, h, m, s).unwrap()
    }

    #[test]
    fn formats_like_hami() {
        assert_eq!(
            format_lock_value(at(6, 0, 0), "ns", "pod-a"),
            "2026-08-01T06:00:00Z,ns,pod-a"
        );
        let with_nanos = at(6, 0, 0) + TimeDelta::milliseconds(750);
        assert_eq!(
            format_lock_value(with_nanos, "ns", "pod-a"),
            "2026-08-01T06:00:00Z,ns,pod-a"
        );
    }

    #[test]
    fn parses_owned_value() {
        let v = parse_lock_value("2026-08-01T06:00:00Z,ns,pod-a").unwrap();
        assert_eq!(
            v,
            LockValue {
                time: at(6, 0, 0),
                owner: Some(LockOwner {
                    namespace: "ns".into(),
                    pod: "pod-a".into()
                }),
            }
        );
        assert!(v.is_held_by("ns", "pod-a"));
        assert!(!v.is_held_by("ns", "pod-b"));
        assert!(!v.is_held_by("other", "pod-a"));
        assert_eq!(v.to_annotation(), "2026-08-01T06:00:00Z,ns,pod-a");
    }

    #[test]
    fn parses_legacy_and_offset_timestamps() {
        let v = parse_lock_value("2026-08-01T06:00:00Z").unwrap();
        assert_eq!(v.time, at(6, 0, 0));
        assert_eq!(v.owner, None);
        assert!(!v.is_held_by("ns", "pod-a"));
        assert_eq!(v.to_annotation(), "2026-08-01T06:00:00Z");

        let v = parse_lock_value("2026-08-01T08:00:00.123456789+02:00,ns,p").unwrap();
        assert_eq!(v.time, at(6, 0, 0) + TimeDelta::nanoseconds(123_456_789));
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse_lock_value("2026-08-01T06:00:00Z,ns")
                .unwrap_err()
                .to_string(),
            "malformed lock annotation: expected 3 parts, got 2 from 2026-08-01T06:00:00Z,ns"
        );
        assert_eq!(
            parse_lock_value("2026-08-01T06:00:00Z,ns,pod,extra")
                .unwrap_err()
                .to_string(),
            "malformed lock annotation: expected 3 parts, got 4 from 2026-08-01T06:00:00Z,ns,pod,extra"
        );
        let err = parse_lock_value("yesterday,ns,pod").unwrap_err();
        assert!(matches!(err, LockValueError::Time { .. }));
        assert!(
            err.to_string()
                .starts_with("malformed lock annotation: invalid RFC3339 time \"yesterday\" in yesterday,ns,pod: "),
            "{err}"
        );
        assert!(matches!(
            parse_lock_value(""),
            Err(LockValueError::Time { .. })
        ));
        assert!(matches!(
            parse_lock_value("2026-08-01 06:00:00"),
            Err(LockValueError::Time { .. })
        ));
        assert_eq!(
            parse_lock_value("2026-08-01T06:00:00Z,,pod"),
            Err(LockValueError::EmptyOwner {
                value: "2026-08-01T06:00:00Z,,pod".into()
            })
        );
        assert!(matches!(
            parse_lock_value("2026-08-01T06:00:00Z,ns,"),
            Err(LockValueError::EmptyOwner { .. })
        ));
    }

    #[test]
    fn expiry() {
        let v = parse_lock_value("2026-08-01T06:00:00Z,ns,pod-a").unwrap();
        let five_min = Duration::from_secs(300);
        assert!(!v.is_expired(at(6, 0, 0), five_min));
        assert!(!v.is_expired(at(6, 5, 0), five_min));
        assert!(v.is_expired(at(6, 5, 1), five_min));
        // Small clock skew: the lock looks slightly in the future and is valid.
        assert!(!v.is_expired(at(5, 59, 0), five_min));
        // A lock far in the future would never expire; it is treated as stale.
        assert!(v.is_expired(at(5, 54, 59), five_min));
        assert!(!v.is_expired(at(23, 0, 0), Duration::MAX));
    }

    proptest! {
        #[test]
        fn garbage_never_panics(s in any::<String>()) {
            let _ = parse_lock_value(&s);
        }

        #[test]
        fn round_trip(
            secs in 0i64..4_102_444_800,
            namespace in "[a-z0-9-]{1,20}",
            pod in "[a-z0-9.-]{1,40}",
        ) {
            let time = Utc.timestamp_opt(secs, 0).unwrap();
            let text = format_lock_value(time, &namespace, &pod);
            let v = parse_lock_value(&text).unwrap();
            prop_assert_eq!(v.time, time);
            prop_assert!(v.is_held_by(&namespace, &pod));
            prop_assert_eq!(v.to_annotation(), text);
        }
    }
}
