//! Per-pod strategies: a pod carrying both `volcano.sh/resource-strategy-scoring-type`
//! and `volcano.sh/resource-strategy-weight` is scored on the resources its weights
//! name, all with its own scoring type, instead of the configured `resources:`
//! (Volcano's pod-level override). A resource the weights leave out is not scored
//! for that pod.

use super::strategies::{ResourceStrategy, ScoringType, StrategyTable};
use super::values::whole_number;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

/// The pod's scoring type (`MostAllocated` or `LeastAllocated`).
pub const SCORING_TYPE_ANNOTATION: &str = "volcano.sh/resource-strategy-scoring-type";

/// The pod's weights, a JSON object of resource name (or `prefix*`) to weight.
pub const WEIGHT_ANNOTATION: &str = "volcano.sh/resource-strategy-weight";

/// Which strategies score the pod.
#[derive(Debug, Clone, PartialEq)]
pub enum PodStrategies {
    /// The configured `resources:` (the pod carries neither annotation, or only
    /// one: Volcano's override needs both).
    Configured,
    /// The pod's own.
    Own(StrategyTable),
    /// The annotations cannot be read (not JSON, an unknown type, a negative
    /// weight, a bad pattern): as in Volcano, no resource is scored for the pod, so
    /// this plugin has no preference among nodes for it.
    Unreadable,
}

/// The strategies for `pod`.
pub fn pod_strategies(pod: Option<&Pod>) -> PodStrategies {
    let annotations = pod.and_then(|p| p.metadata.annotations.as_ref());
    let get = |key: &str| annotations.and_then(|a| a.get(key));
    let (Some(kind), Some(weights)) = (get(SCORING_TYPE_ANNOTATION), get(WEIGHT_ANNOTATION)) else {
        return PodStrategies::Configured;
    };
    match own_table(kind, weights) {
        Some(table) => PodStrategies::Own(table),
        None => PodStrategies::Unreadable,
    }
}

fn own_table(kind: &str, weights: &str) -> Option<StrategyTable> {
    let kind = ScoringType::parse(kind.trim())?;
    let Ok(Value::Object(weights)) = serde_json::from_str::<Value>(weights) else {
        return None;
    };
    let mut table = StrategyTable::default();
    for (name, weight) in &weights {
        let weight = whole_number(weight).filter(|w| *w >= 0)?;
        table.insert(name, ResourceStrategy { kind, weight }).ok()?;
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pod(annotations: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
        p
    }

    #[test]
    fn both_annotations_replace_the_configured_resources() {
        let p = pod(&[
            (SCORING_TYPE_ANNOTATION, "MostAllocated"),
            (WEIGHT_ANNOTATION, r#"{"nvidia.com/gpu": 5, "cpu": 1}"#),
        ]);
        let PodStrategies::Own(table) = pod_strategies(Some(&p)) else {
            panic!("override expected");
        };
        let most = |weight| ResourceStrategy {
            kind: ScoringType::MostAllocated,
            weight,
        };
        assert_eq!(table.lookup("nvidia.com/gpu"), Some(&most(5)));
        assert_eq!(table.lookup("cpu"), Some(&most(1)));
        assert_eq!(table.lookup("memory"), None, "left out: not scored");
    }

    #[test]
    fn one_annotation_alone_leaves_the_configuration() {
        assert_eq!(pod_strategies(None), PodStrategies::Configured);
        assert_eq!(pod_strategies(Some(&pod(&[]))), PodStrategies::Configured);
        for only in [
            (SCORING_TYPE_ANNOTATION, "MostAllocated"),
            (WEIGHT_ANNOTATION, r#"{"cpu": 2}"#),
        ] {
            assert_eq!(
                pod_strategies(Some(&pod(&[only]))),
                PodStrategies::Configured,
                "{only:?}"
            );
        }
    }

    #[test]
    fn unreadable_annotations_score_nothing() {
        for (kind, weights) in [
            ("LeastAllocated", "invalid-json"),
            ("LeastAllocated", r#"["cpu"]"#),
            ("Packed", r#"{"cpu": 1}"#),
            ("MostAllocated", r#"{"cpu": -1}"#),
            ("MostAllocated", r#"{"cpu": 1.5}"#),
            ("MostAllocated", r#"{"*": 1}"#),
        ] {
            let p = pod(&[
                (SCORING_TYPE_ANNOTATION, kind),
                (WEIGHT_ANNOTATION, weights),
            ]);
            assert_eq!(
                pod_strategies(Some(&p)),
                PodStrategies::Unreadable,
                "{kind} {weights}"
            );
        }
    }
}
