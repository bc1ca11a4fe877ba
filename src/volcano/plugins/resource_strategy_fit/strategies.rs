//! The per-resource strategies (`resources: {<name>: {type, weight}}`): how each
//! resource is scored and how much it counts, looked up by exact name first, then
//! by the longest wildcard prefix (`nvidia.com/*`).

use super::values::{mapping_at, whole_number_at};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::Arguments;
use serde_json::Value;
use std::collections::BTreeMap;

/// `resources:` when the configuration gives none: CPU and memory, spread.
const DEFAULT_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// How one resource's share of a node is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoringType {
    /// The fuller the node once the pod is on it, the better (packs).
    MostAllocated,
    /// The emptier the node once the pod is on it, the better (spreads).
    LeastAllocated,
}

impl ScoringType {
    /// Volcano's (and kube-scheduler's) spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "MostAllocated" => Some(Self::MostAllocated),
            "LeastAllocated" => Some(Self::LeastAllocated),
            _ => None,
        }
    }
}

/// One resource's strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceStrategy {
    /// How it is scored.
    pub kind: ScoringType,
    /// How much it counts against the other scored resources.
    pub weight: i64,
}

impl ResourceStrategy {
    /// The resource's weighted share once the pod is on the node: `None` when the
    /// node has too little of it left (Volcano then scores the whole node 0), 0 when
    /// the node has none of it at all or the weight is 0.
    pub fn share(&self, request: f64, used: f64, capacity: f64) -> Option<f64> {
        if capacity == 0.0 || self.weight == 0 {
            return Some(0.0);
        }
        let after = request + used;
        if after > capacity {
            return None;
        }
        let share = match self.kind {
            ScoringType::MostAllocated => after,
            ScoringType::LeastAllocated => capacity - after,
        };
        Some(share * self.weight as f64 / capacity)
    }
}

/// Strategies by resource name or wildcard pattern.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyTable {
    exact: BTreeMap<String, ResourceStrategy>,
    /// `(prefix, strategy)` of each `prefix*` pattern, longest prefix first (ties by
    /// name), so the first match is the most specific one.
    prefixes: Vec<(String, ResourceStrategy)>,
}

impl StrategyTable {
    /// Adds a resource name or a `prefix*` pattern; refuses any other use of `*`.
    pub fn insert(&mut self, pattern: &str, strategy: ResourceStrategy) -> Result<(), String> {
        match wildcard_prefix(pattern)? {
            None => {
                self.exact.insert(pattern.to_owned(), strategy);
            }
            Some(prefix) => {
                self.prefixes.retain(|(p, _)| p != prefix);
                self.prefixes.push((prefix.to_owned(), strategy));
                self.prefixes
                    .sort_by(|(a, _), (b, _)| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
            }
        }
        Ok(())
    }

    /// The strategy for `resource`: its exact entry, else the longest matching
    /// prefix, else none (the resource is not scored).
    pub fn lookup(&self, resource: &str) -> Option<&ResourceStrategy> {
        self.exact.get(resource).or_else(|| {
            self.prefixes
                .iter()
                .find(|(prefix, _)| resource.starts_with(prefix.as_str()))
                .map(|(_, s)| s)
        })
    }

    /// The names given exactly (patterns left out).
    pub fn exact_names(&self) -> impl Iterator<Item = &str> {
        self.exact.keys().map(String::as_str)
    }

    /// Reads `resources:`. Absent or empty: CPU and memory, `LeastAllocated`,
    /// weight 1 (Volcano's default). A weight below 1 counts 1 and a missing type
    /// is `LeastAllocated`, as in Volcano; an unknown type is refused (Volcano
    /// would quietly spread what the user meant to pack).
    pub fn from_args(args: &Arguments<'_>, key: &str) -> Result<Self, ConfError> {
        let mut table = Self::default();
        let entries = match args.raw(key) {
            None => return Ok(Self::default_cpu_memory()),
            Some(v) => mapping_at(args, key, v)?,
        };
        if entries.is_empty() {
            return Ok(Self::default_cpu_memory());
        }
        for (name, entry) in entries {
            let at = format!("{key}.{name}");
            let fields = mapping_at(args, &at, entry)?;
            let mut strategy = ResourceStrategy {
                kind: ScoringType::LeastAllocated,
                weight: 1,
            };
            for (field, value) in fields {
                match field.as_str() {
                    "type" => {
                        strategy.kind = match value {
                            Value::Null => Some(ScoringType::LeastAllocated),
                            Value::String(t) if t.trim().is_empty() => {
                                Some(ScoringType::LeastAllocated)
                            }
                            Value::String(t) => ScoringType::parse(t.trim()),
                            _ => None,
                        }
                        .ok_or_else(|| {
                            args.error(
                                &format!("{at}.type"),
                                format!("expected MostAllocated or LeastAllocated, got {value}"),
                            )
                        })?;
                    }
                    "weight" if value.is_null() => {}
                    "weight" => {
                        strategy.weight =
                            whole_number_at(args, &format!("{at}.weight"), value)?.max(1);
                    }
                    other => {
                        return Err(args.error(
                            &format!("{at}.{other}"),
                            "unknown field (expected type, weight)",
                        ));
                    }
                }
            }
            table
                .insert(name, strategy)
                .map_err(|reason| args.error(&at, reason))?;
        }
        Ok(table)
    }

    /// CPU and memory, `LeastAllocated`, weight 1.
    pub fn default_cpu_memory() -> Self {
        let mut table = Self::default();
        for name in DEFAULT_RESOURCES {
            table.exact.insert(
                name.to_owned(),
                ResourceStrategy {
                    kind: ScoringType::LeastAllocated,
                    weight: 1,
                },
            );
        }
        table
    }
}

/// `Some(prefix)` for a `prefix*` pattern, `None` for a plain name. A lone `*`
/// would score every resource the same way, which is what the per-resource table
/// exists to avoid, so it is refused (Volcano drops it with a warning); so is a `*`
/// anywhere but at the end.
pub fn wildcard_prefix(pattern: &str) -> Result<Option<&str>, String> {
    let stars = pattern.matches('*').count();
    if stars == 0 {
        return Ok(None);
    }
    if pattern == "*" {
        return Err(
            "a lone * is not supported: name the resources it should cover with a prefix, such as nvidia.com/*"
                .to_owned(),
        );
    }
    if stars > 1 || !pattern.ends_with('*') {
        return Err(format!(
            "{pattern:?}: a wildcard is one * at the end of a prefix, such as nvidia.com/*"
        ));
    }
    Ok(Some(&pattern[..pattern.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(kind: ScoringType, weight: i64) -> ResourceStrategy {
        ResourceStrategy { kind, weight }
    }

    fn table(entries: &[(&str, ScoringType, i64)]) -> StrategyTable {
        let mut t = StrategyTable::default();
        for (name, kind, weight) in entries {
            t.insert(name, strategy(*kind, *weight)).unwrap();
        }
        t
    }

    use ScoringType::{LeastAllocated as Least, MostAllocated as Most};

    /// Volcano's lookup table (findResourceConfigWithPrefix): exact before
    /// wildcard, longest prefix among wildcards, nothing when nothing matches.
    #[test]
    fn exact_names_win_then_the_longest_prefix() {
        type Entries<'a> = &'a [(&'a str, ScoringType, i64)];
        let cases: [(&str, Entries, Option<ResourceStrategy>); 5] = [
            (
                "nvidia.com/gpu",
                &[("nvidia.com/gpu", Most, 3), ("nvidia.com/*", Least, 1)],
                Some(strategy(Most, 3)),
            ),
            (
                "nvidia.com/gpu/v100",
                &[("nvidia.com/gpu/*", Most, 2), ("nvidia.com/*", Least, 1)],
                Some(strategy(Most, 2)),
            ),
            ("example.com/foo", &[("nvidia.com/gpu/*", Most, 2)], None),
            ("any.resource", &[], None),
            (
                "cloudml.gpu/tensorflow/v2",
                &[
                    ("cloudml/*", Most, 1),
                    ("cloudml.gpu/*", Least, 2),
                    ("cloudml.gpu/tensorflow/*", Most, 3),
                ],
                Some(strategy(Most, 3)),
            ),
        ];
        for (resource, entries, expected) in cases {
            assert_eq!(
                table(entries).lookup(resource).copied(),
                expected,
                "{resource}"
            );
        }
        // The vGPU dimensions under one vendor pattern.
        let t = table(&[("nvidia.com/*", Most, 2), ("nvidia.com/gpucores", Least, 1)]);
        assert_eq!(t.lookup("nvidia.com/gpumem"), Some(&strategy(Most, 2)));
        assert_eq!(t.lookup("nvidia.com/gpucores"), Some(&strategy(Least, 1)));
        assert_eq!(t.lookup("cpu"), None);
    }

    #[test]
    fn only_one_trailing_star_makes_a_pattern() {
        assert_eq!(wildcard_prefix("nvidia.com/gpu"), Ok(None));
        assert_eq!(wildcard_prefix("nvidia.com/*"), Ok(Some("nvidia.com/")));
        assert_eq!(wildcard_prefix("cloudml.gpu/*"), Ok(Some("cloudml.gpu/")));
        let lone = wildcard_prefix("*").unwrap_err();
        assert!(lone.contains("lone *"), "{lone}");
        for bad in [
            "*.com/gpu",
            "cloudml.*.gpu",
            "cloudml.gpu**",
            "*test*resource*",
        ] {
            let e = wildcard_prefix(bad).unwrap_err();
            assert!(e.contains("one * at the end"), "{bad}: {e}");
        }
    }

    #[test]
    fn shares_follow_volcanos_formulas() {
        let most = strategy(Most, 2);
        let least = strategy(Least, 2);
        // 100 requested, 200 used, 500 on the node.
        assert_eq!(most.share(100.0, 200.0, 500.0), Some(1.2));
        assert_eq!(least.share(100.0, 200.0, 500.0), Some(0.8));
        // Nothing of it on the node, or weight 0: no share, but no refusal.
        assert_eq!(most.share(1.0, 0.0, 0.0), Some(0.0));
        assert_eq!(strategy(Most, 0).share(1.0, 0.0, 10.0), Some(0.0));
        // Too little left.
        assert_eq!(least.share(1.0, 2.0, 2.0), None);
        assert_eq!(most.share(1.0, 2.0, 2.0), None);
    }
}
