//! A PodGroup's `spec.networkTopology`: how far apart on the network its members
//! may be placed.

use super::tree::NetworkTopology;
use crate::volcano::crd::NetworkTopologySpec;
use serde::Serialize;

/// `hard` or `soft`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TopologyMode {
    /// Never across a HyperNode of a tier higher than allowed: the gang waits
    /// instead.
    Hard,
    /// As close as the free GPUs allow, anywhere when no HyperNode can hold it.
    Soft,
}

/// How the highest allowed tier is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum HighestTier {
    /// `highestTierAllowed`.
    Number(u32),
    /// `highestTierName`: the tier whose HyperNodes carry that `tierName`.
    Named(String),
}

/// A PodGroup's network-topology constraint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyConstraint {
    /// Hard or soft.
    pub mode: TopologyMode,
    /// The highest tier the gang may span.
    pub highest_tier: HighestTier,
}

/// Volcano's CRD default for `highestTierAllowed`.
const DEFAULT_HIGHEST_TIER: u32 = 1;

impl TopologyConstraint {
    /// Reads `spec.networkTopology`; the error names the field.
    pub fn of(spec: &NetworkTopologySpec) -> Result<Self, (&'static str, String)> {
        let mode = match spec.mode.as_deref() {
            None | Some("") | Some("hard") => TopologyMode::Hard,
            Some("soft") => TopologyMode::Soft,
            Some(other) => {
                return Err((
                    "spec.networkTopology.mode",
                    format!("{other:?} is neither hard nor soft"),
                ));
            }
        };
        let name = spec.highest_tier_name.as_deref().filter(|n| !n.is_empty());
        let highest_tier = match (spec.highest_tier_allowed, name) {
            (Some(_), Some(_)) => {
                return Err((
                    "spec.networkTopology",
                    "highestTierAllowed and highestTierName exclude each other".into(),
                ));
            }
            (Some(n), None) => HighestTier::Number(u32::try_from(n).map_err(|_| {
                (
                    "spec.networkTopology.highestTierAllowed",
                    format!("{n} is out of range"),
                )
            })?),
            (None, Some(name)) => HighestTier::Named(name.to_string()),
            (None, None) => HighestTier::Number(DEFAULT_HIGHEST_TIER),
        };
        Ok(Self { mode, highest_tier })
    }

    /// The highest tier allowed in this topology; `None` when it names a tier no
    /// HyperNode has.
    pub fn highest_tier_in(&self, topology: &NetworkTopology) -> Option<u32> {
        match &self.highest_tier {
            HighestTier::Number(n) => Some(*n),
            HighestTier::Named(name) => topology.tier_named(name),
        }
    }

    /// The constraint in the words of the PodGroup.
    pub fn describe(&self) -> String {
        let mode = match self.mode {
            TopologyMode::Hard => "hard",
            TopologyMode::Soft => "soft",
        };
        match &self.highest_tier {
            HighestTier::Number(n) => format!("networkTopology {mode}, highestTierAllowed {n}"),
            HighestTier::Named(name) => format!("networkTopology {mode}, highestTierName {name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: Option<&str>, tier: Option<i64>, name: Option<&str>) -> NetworkTopologySpec {
        NetworkTopologySpec {
            mode: mode.map(str::to_string),
            highest_tier_allowed: tier,
            highest_tier_name: name.map(str::to_string),
        }
    }

    #[test]
    fn defaults_are_volcanos() {
        let c = TopologyConstraint::of(&spec(None, None, None)).unwrap();
        assert_eq!(c.mode, TopologyMode::Hard);
        assert_eq!(c.highest_tier, HighestTier::Number(1));
        let c = TopologyConstraint::of(&spec(Some("soft"), Some(2), None)).unwrap();
        assert_eq!(c.mode, TopologyMode::Soft);
        assert_eq!(c.describe(), "networkTopology soft, highestTierAllowed 2");
    }

    #[test]
    fn refuses_what_the_crd_refuses() {
        let e = TopologyConstraint::of(&spec(Some("strict"), None, None)).unwrap_err();
        assert_eq!(e.0, "spec.networkTopology.mode");
        let e = TopologyConstraint::of(&spec(None, Some(1), Some("leaf"))).unwrap_err();
        assert!(e.1.contains("exclude each other"));
        let e = TopologyConstraint::of(&spec(None, Some(-1), None)).unwrap_err();
        assert_eq!(e.0, "spec.networkTopology.highestTierAllowed");
    }

    #[test]
    fn a_named_tier_is_looked_up_in_the_topology() {
        let c = TopologyConstraint::of(&spec(None, None, Some("spine"))).unwrap();
        assert_eq!(c.highest_tier_in(&NetworkTopology::default()), None);
    }
}
