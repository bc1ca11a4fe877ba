//! The arguments of `gangpreempt` and `gangreclaim` in the configuration's
//! `configurations:` section, read as Volcano reads them:
//!
//! - `maxDomains` (default 8): how many HyperNode domains are searched for one
//!   starving gang. A value of 0 or less falls back to 8, with a note.
//! - `allowWholeBundle` (default true): whether a victim job may be evicted
//!   whole (all its running members) when evicting only some would break it;
//!   false limits the actions to victims whose jobs stay ready.
//!
//! Allocate's `predicateErrorCacheEnable`, which Volcano's actions also read,
//! only caches predicate answers during the search; it decides nothing here.

use crate::volcano::action_configurations::ActionConfigurations;
use serde_json::Value;

/// `maxDomains`.
const MAX_DOMAINS: &str = "maxDomains";
/// `allowWholeBundle`.
const ALLOW_WHOLE_BUNDLE: &str = "allowWholeBundle";
/// Volcano's default `maxDomains`, also used for a value of 0 or less.
const DEFAULT_MAX_DOMAINS: usize = 8;

/// The gang eviction actions' names, for their arguments and notes.
pub(crate) const GANG_EVICTION_ACTIONS: [&str; 2] = ["gangpreempt", "gangreclaim"];

/// One gang eviction action's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GangEvictionArguments {
    /// How many domains are searched per starving gang.
    pub max_domains: usize,
    /// Whether a victim job may be evicted whole.
    pub allow_whole_bundle: bool,
}

impl Default for GangEvictionArguments {
    fn default() -> Self {
        Self {
            max_domains: DEFAULT_MAX_DOMAINS,
            allow_whole_bundle: true,
        }
    }
}

impl GangEvictionArguments {
    /// The arguments of `action` (`gangpreempt` or `gangreclaim`); a value that
    /// is absent, of the wrong type or out of range keeps the default, as Volcano
    /// keeps it (see [`notes`]).
    pub fn of(configurations: &ActionConfigurations, action: &str) -> Self {
        let mut args = Self::default();
        if let Some(n) = configurations
            .argument(action, MAX_DOMAINS)
            .and_then(Value::as_i64)
            .filter(|n| *n > 0)
        {
            args.max_domains = usize::try_from(n).unwrap_or(DEFAULT_MAX_DOMAINS);
        }
        if let Some(b) = configurations
            .argument(action, ALLOW_WHOLE_BUNDLE)
            .and_then(boolean)
        {
            args.allow_whole_bundle = b;
        }
        args
    }
}

/// A boolean, or a string saying one.
fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim() {
            "true" | "True" | "TRUE" | "1" | "t" | "T" => Some(true),
            "false" | "False" | "FALSE" | "0" | "f" | "F" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// What the configuration says of these arguments that is not applied as
/// written: a `maxDomains` of 0 or less, or a value of the wrong type.
pub(crate) fn notes(configurations: &ActionConfigurations) -> Vec<String> {
    let mut notes = Vec::new();
    for action in GANG_EVICTION_ACTIONS {
        if let Some(v) = configurations.argument(action, MAX_DOMAINS) {
            match v.as_i64() {
                Some(n) if n > 0 => {}
                Some(n) => notes.push(format!(
                    "{action}'s {MAX_DOMAINS} {n} is not above 0; using {DEFAULT_MAX_DOMAINS} as Volcano does"
                )),
                None => notes.push(format!(
                    "{action}'s {MAX_DOMAINS} {v} is not a whole number; using {DEFAULT_MAX_DOMAINS} as Volcano does"
                )),
            }
        }
        if let Some(v) = configurations.argument(action, ALLOW_WHOLE_BUNDLE)
            && boolean(v).is_none()
        {
            notes.push(format!(
                "{action}'s {ALLOW_WHOLE_BUNDLE} {v} is not true or false; using true as Volcano does"
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SchedulerConf;

    fn conf(configurations: &str) -> SchedulerConf {
        SchedulerConf::parse(&format!(
            "actions: enqueue, allocate, gangpreempt, gangreclaim, backfill\ntiers:\n- plugins:\n  - name: gang\nconfigurations:\n{configurations}"
        ))
        .expect("configuration loads")
    }

    /// Volcano's `TestParseArguments` (both actions).
    #[test]
    fn parse_arguments() {
        for (action, n) in [("gangpreempt", 3), ("gangreclaim", 5)] {
            let c = conf(&format!(
                "- name: {action}\n  arguments:\n    maxDomains: {n}\n    allowWholeBundle: false\n"
            ));
            assert_eq!(
                GangEvictionArguments::of(&c.configurations, action),
                GangEvictionArguments {
                    max_domains: n,
                    allow_whole_bundle: false
                }
            );
            assert!(c.notes().is_empty(), "{:?}", c.notes());
        }
        let none = conf("- name: allocate\n  arguments:\n    predicateErrorCacheEnable: false\n");
        assert_eq!(
            GangEvictionArguments::of(&none.configurations, "gangpreempt"),
            GangEvictionArguments {
                max_domains: 8,
                allow_whole_bundle: true
            }
        );
    }

    /// Volcano's `TestParseArguments_InvalidMaxDomainsFallsBackToDefault` (both
    /// actions, zero and negative), with the note saying so.
    #[test]
    fn parse_arguments_invalid_max_domains_falls_back_to_default() {
        for action in GANG_EVICTION_ACTIONS {
            for value in [0, -1] {
                let c = conf(&format!(
                    "- name: {action}\n  arguments:\n    maxDomains: {value}\n"
                ));
                assert_eq!(
                    GangEvictionArguments::of(&c.configurations, action).max_domains,
                    8
                );
                let notes = c.notes();
                assert!(
                    notes.len() == 1
                        && notes[0]
                            .contains(&format!("{action}'s maxDomains {value} is not above 0")),
                    "{notes:?}"
                );
            }
        }
    }

    #[test]
    fn misread_values_keep_the_default_and_say_so() {
        let c = conf(
            "- name: gangreclaim\n  arguments:\n    maxDomains: many\n    allowWholeBundle: maybe\n",
        );
        assert_eq!(
            GangEvictionArguments::of(&c.configurations, "gangreclaim"),
            GangEvictionArguments::default()
        );
        let notes = c.notes();
        assert!(
            notes.len() == 2
                && notes[0].contains("maxDomains \"many\" is not a whole number")
                && notes[1].contains("allowWholeBundle \"maybe\" is not true or false"),
            "{notes:?}"
        );
    }
}
