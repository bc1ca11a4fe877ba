//! Placement policies: node binpack/spread, GPU binpack/spread/numa/topology-aware/
//! mutex chains, device scores and the order in which GPUs are tried.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// Pod annotation overriding the node policy.
pub const NODE_POLICY_ANNOTATION: &str = "hami.io/node-scheduler-policy";
/// Pod annotation overriding the GPU policy.
pub const GPU_POLICY_ANNOTATION: &str = "hami.io/gpu-scheduler-policy";
/// Pod annotation with `slot=..,core=..,memory=..` device score weights.
pub const SCORING_WEIGHTS_ANNOTATION: &str = "hami.io/device-scoring-weights";

/// How to choose among fitting nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodePolicy {
    /// Prefer the most used node (keep other nodes empty for big jobs).
    #[default]
    Binpack,
    /// Prefer the least used node (spread load and failure domains).
    Spread,
}

impl NodePolicy {
    /// Strict parser for flags, so a typo is reported at start-up.
    pub fn parse_flag(value: &str) -> Result<Self, String> {
        match value.trim() {
            "binpack" => Ok(NodePolicy::Binpack),
            "spread" => Ok(NodePolicy::Spread),
            other => Err(format!(
                "unknown node policy {other:?}: use binpack or spread"
            )),
        }
    }

    /// True when `a` is a better node than `b` by score (ties are broken by the caller).
    pub fn prefers(self, a: f64, b: f64) -> Ordering {
        match self {
            NodePolicy::Binpack => a.total_cmp(&b),
            NodePolicy::Spread => b.total_cmp(&a),
        }
    }

    /// How much the policy likes a node with this score, 0.0..=100.0 (higher is
    /// better; kube-scheduler's node score range): the node score (0..=30 by
    /// construction) scaled, reversed for spread. Ordering nodes by it is ordering
    /// them by [`Self::prefers`], and it adds up with the scores of node-order
    /// plugins, which use the same range per unit of weight.
    pub fn preference(self, node_score: f64) -> f64 {
        let utilisation = (node_score / 30.0).clamp(0.0, 1.0);
        match self {
            NodePolicy::Binpack => utilisation * 100.0,
            NodePolicy::Spread => (1.0 - utilisation) * 100.0,
        }
    }

    /// Maps a node score (0..=30 by construction) onto kube-scheduler's 0..=10 range,
    /// higher meaning preferred under this policy.
    pub fn extender_score(self, node_score: f64) -> i64 {
        let utilisation = (node_score / 30.0).clamp(0.0, 1.0);
        let preference = match self {
            NodePolicy::Binpack => utilisation,
            NodePolicy::Spread => 1.0 - utilisation,
        };
        (preference * 10.0).round() as i64
    }
}

impl fmt::Display for NodePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodePolicy::Binpack => "binpack",
            NodePolicy::Spread => "spread",
        })
    }
}

/// One token of a GPU policy chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuPolicyToken {
    /// Most used GPU first.
    Binpack,
    /// Least used GPU first.
    Spread,
    /// Lower NUMA node first.
    Numa,
    /// Choose the best-connected set of GPUs (filter, not a sort key).
    TopologyAware,
    /// Only idle GPUs (filter, not a sort key).
    Mutex,
}

/// A GPU policy: a single name or a comma-separated chain (`numa,binpack`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPolicy {
    raw: String,
    tokens: Vec<GpuPolicyToken>,
    chain: bool,
}

impl Default for GpuPolicy {
    fn default() -> Self {
        GpuPolicy::parse("spread")
    }
}

impl fmt::Display for GpuPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

fn token(name: &str) -> Option<GpuPolicyToken> {
    Some(match name {
        "binpack" => GpuPolicyToken::Binpack,
        "spread" => GpuPolicyToken::Spread,
        "numa" => GpuPolicyToken::Numa,
        "topology-aware" => GpuPolicyToken::TopologyAware,
        "mutex" => GpuPolicyToken::Mutex,
        _ => return None,
    })
}

impl GpuPolicy {
    /// Parses a policy leniently: unknown tokens are ignored (a lone unknown name
    /// behaves like `spread`, as HAMi's device sort does).
    pub fn parse(value: &str) -> Self {
        let chain = value.contains(',');
        let tokens = value.split(',').filter_map(|t| token(t.trim())).collect();
        GpuPolicy {
            raw: value.trim().to_string(),
            tokens,
            chain,
        }
    }

    /// Strict parser for flags: every token must be known.
    pub fn parse_flag(value: &str) -> Result<Self, String> {
        for t in value.split(',') {
            if token(t.trim()).is_none() {
                return Err(format!(
                    "unknown GPU policy {:?}: use binpack, spread, numa, topology-aware, mutex or a comma-separated chain",
                    t.trim()
                ));
            }
        }
        Ok(Self::parse(value))
    }

    /// Whether the chain contains `token`.
    pub fn has(&self, token: GpuPolicyToken) -> bool {
        self.tokens.contains(&token)
    }

    /// Orders candidate devices ascending in HAMi's sense: the LAST device is tried
    /// first. `order` receives device positions in registration order.
    pub fn sort_candidates(&self, order: &mut [usize], keys: &[DeviceSortKey], numa_bind: bool) {
        let cmp_score_asc = |a: &DeviceSortKey, b: &DeviceSortKey| a.score.total_cmp(&b.score);
        let cmp_numa_asc = |a: &DeviceSortKey, b: &DeviceSortKey| a.numa.cmp(&b.numa);
        let single = if self.chain || self.tokens.len() != 1 {
            None
        } else {
            self.tokens.first().copied()
        };
        let less: DeviceOrder = match single {
            Some(GpuPolicyToken::Binpack) if numa_bind => {
                Box::new(move |a, b| cmp_numa_asc(b, a).then_with(|| cmp_score_asc(a, b)))
            }
            Some(GpuPolicyToken::Binpack) => {
                Box::new(move |a, b| cmp_score_asc(a, b).then_with(|| cmp_numa_asc(a, b)))
            }
            Some(GpuPolicyToken::Mutex) => {
                Box::new(move |a, b| b.used.cmp(&a.used).then_with(|| cmp_numa_asc(a, b)))
            }
            Some(GpuPolicyToken::Numa) | None if self.chain || single.is_some() => {
                let mut keys_in_order: Vec<GpuPolicyToken> = self
                    .tokens
                    .iter()
                    .copied()
                    .filter(|t| {
                        matches!(
                            t,
                            GpuPolicyToken::Binpack | GpuPolicyToken::Spread | GpuPolicyToken::Numa
                        )
                    })
                    .collect();
                if keys_in_order.is_empty() {
                    keys_in_order.push(GpuPolicyToken::Spread);
                }
                if numa_bind {
                    keys_in_order.retain(|t| *t != GpuPolicyToken::Numa);
                    keys_in_order.insert(0, GpuPolicyToken::Numa);
                }
                Box::new(move |a, b| {
                    for t in &keys_in_order {
                        let o = match t {
                            GpuPolicyToken::Binpack => cmp_score_asc(a, b),
                            GpuPolicyToken::Spread => cmp_score_asc(b, a),
                            _ => cmp_numa_asc(a, b),
                        };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    a.index.cmp(&b.index)
                })
            }
            // spread, topology-aware, unknown and empty values
            _ if numa_bind => {
                Box::new(move |a, b| cmp_numa_asc(a, b).then_with(|| cmp_score_asc(b, a)))
            }
            _ => Box::new(move |a, b| cmp_score_asc(b, a).then_with(|| cmp_numa_asc(a, b))),
        };
        // A stable sort keeps registration order among equals, as HAMi's small-slice
        // insertion sort does, so the last registered equal device is tried first.
        order.sort_by(|&x, &y| less(&keys[x], &keys[y]));
    }
}

/// A "less" function over device sort keys.
type DeviceOrder = Box<dyn Fn(&DeviceSortKey, &DeviceSortKey) -> Ordering>;

/// What the device order looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceSortKey {
    /// Device score (§ device score) including this container's request.
    pub score: f64,
    /// NUMA node.
    pub numa: i32,
    /// Slots in use.
    pub used: u32,
    /// NVML index.
    pub index: u32,
}

/// Weights of the three terms of the device score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoringWeights {
    /// Weight of the slot term.
    pub slot: u32,
    /// Weight of the compute term.
    pub core: u32,
    /// Weight of the memory term.
    pub memory: u32,
}

impl Default for ScoringWeights {
    fn default() -> Self {
        Self {
            slot: 1,
            core: 1,
            memory: 1,
        }
    }
}

impl ScoringWeights {
    /// Parses `slot=<int>,core=<int>,memory=<int>` (any order, spaces allowed).
    pub fn parse(value: &str) -> Result<Self, String> {
        let entries: Vec<&str> = value.split(',').collect();
        if entries.len() != 3 {
            return Err("expected slot, core, and memory weights".into());
        }
        let mut seen: BTreeMap<&str, u32> = BTreeMap::new();
        for entry in entries {
            let Some((key, val)) = entry.split_once('=') else {
                return Err("expected key=value entries".into());
            };
            let key = key.trim();
            let val = val.trim();
            if !matches!(key, "slot" | "core" | "memory") {
                return Err(format!("unknown weight {key:?}"));
            }
            let parsed: i64 = val
                .parse()
                .map_err(|_| format!("{key:?} weight must be an integer"))?;
            if parsed < 0 {
                return Err(format!("{key:?} weight must not be negative"));
            }
            let parsed =
                u32::try_from(parsed).map_err(|_| format!("{key:?} weight is too large"))?;
            if seen.insert(key, parsed).is_some() {
                return Err(format!("duplicate {key:?} weight"));
            }
        }
        let w = ScoringWeights {
            slot: seen.get("slot").copied().unwrap_or(0),
            core: seen.get("core").copied().unwrap_or(0),
            memory: seen.get("memory").copied().unwrap_or(0),
        };
        if w.slot == 0 && w.core == 0 && w.memory == 0 {
            return Err("at least one weight must be positive".into());
        }
        Ok(w)
    }
}

/// The policies that apply to one pod: flags overridden by its annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPolicies {
    /// Node policy.
    pub node: NodePolicy,
    /// GPU policy.
    pub gpu: GpuPolicy,
    /// Device score weights.
    pub weights: ScoringWeights,
}

impl PodPolicies {
    /// Resolves the pod's policies. A policy annotation replaces the configured
    /// policy only when it names one (a typo, an empty value, a GPU-only token for
    /// the node, or a chain with an unknown entry leave the configured policy in
    /// place, as HAMi does); a malformed weights annotation is an error for the pod
    /// (HAMi fails the Filter), not for the node.
    pub fn resolve(
        annotations: &BTreeMap<String, String>,
        default_node: NodePolicy,
        default_gpu: &GpuPolicy,
    ) -> Result<Self, String> {
        let node = annotations
            .get(NODE_POLICY_ANNOTATION)
            .and_then(|v| NodePolicy::parse_flag(v).ok())
            .unwrap_or(default_node);
        let gpu = annotations
            .get(GPU_POLICY_ANNOTATION)
            .and_then(|v| GpuPolicy::parse_flag(v).ok())
            .unwrap_or_else(|| default_gpu.clone());
        let weights = match annotations.get(SCORING_WEIGHTS_ANNOTATION) {
            Some(v) => ScoringWeights::parse(v)
                .map_err(|e| format!("invalid {SCORING_WEIGHTS_ANNOTATION} annotation: {e}"))?,
            None => ScoringWeights::default(),
        };
        Ok(Self { node, gpu, weights })
    }
}

#[cfg(test)]
mod hami_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn key(score: f64, numa: i32, used: u32, index: u32) -> DeviceSortKey {
        DeviceSortKey {
            score,
            numa,
            used,
            index,
        }
    }

    /// Returns device positions in the order they are tried (first tried first).
    fn tried(policy: &str, keys: &[DeviceSortKey], numa_bind: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        GpuPolicy::parse(policy).sort_candidates(&mut order, keys, numa_bind);
        order.reverse();
        order
    }

    #[test]
    fn binpack_tries_highest_score_first_spread_lowest() {
        let keys = [key(4.25, 0, 0, 0), key(20.25, 0, 1, 1), key(10.0, 0, 0, 2)];
        assert_eq!(tried("binpack", &keys, false), vec![1, 2, 0]);
        assert_eq!(tried("spread", &keys, false), vec![0, 2, 1]);
        assert_eq!(tried("something-else", &keys, false), vec![0, 2, 1]);
    }

    #[test]
    fn equal_devices_last_registered_first() {
        let keys = [key(1.0, 0, 0, 0), key(1.0, 0, 0, 1), key(1.0, 0, 0, 2)];
        assert_eq!(tried("binpack", &keys, false), vec![2, 1, 0]);
        assert_eq!(tried("spread", &keys, false), vec![2, 1, 0]);
    }

    #[test]
    fn mutex_prefers_idle_devices() {
        let keys = [key(0.0, 0, 0, 0), key(5.0, 0, 3, 1), key(2.0, 0, 1, 2)];
        assert_eq!(tried("mutex", &keys, false), vec![0, 2, 1]);
    }

    #[test]
    fn chains_compare_keys_in_order() {
        let keys = [key(1.0, 1, 0, 0), key(5.0, 0, 0, 1), key(3.0, 0, 0, 2)];
        // numa first (ascending in "less" => numa 1 tried first), then binpack.
        assert_eq!(tried("numa,binpack", &keys, false), vec![0, 1, 2]);
        assert_eq!(tried("binpack,numa", &keys, false), vec![1, 2, 0]);
        assert_eq!(tried("spread, numa", &keys, false), vec![0, 2, 1]);
    }

    #[test]
    fn numa_bind_groups_numa_nodes() {
        let keys = [key(1.0, 0, 0, 0), key(9.0, 1, 0, 1), key(5.0, 0, 0, 2)];
        assert_eq!(tried("binpack", &keys, true), vec![2, 0, 1]);
        assert_eq!(tried("spread", &keys, true), vec![1, 0, 2]);
    }

    #[test]
    fn weights_parse_and_errors() {
        assert_eq!(
            ScoringWeights::parse("memory=2, slot=0,core=1").unwrap(),
            ScoringWeights {
                slot: 0,
                core: 1,
                memory: 2
            }
        );
        for (input, err) in [
            ("slot=1,core=1", "expected slot, core, and memory weights"),
            ("slot=1,core,memory=1", "expected key=value entries"),
            (
                "slot=x,core=1,memory=1",
                "\"slot\" weight must be an integer",
            ),
            (
                "slot=-1,core=1,memory=1",
                "\"slot\" weight must not be negative",
            ),
            ("slot=1,gpu=1,memory=1", "unknown weight \"gpu\""),
            ("slot=1,slot=1,memory=1", "duplicate \"slot\" weight"),
            (
                "slot=0,core=0,memory=0",
                "at least one weight must be positive",
            ),
        ] {
            assert_eq!(ScoringWeights::parse(input).unwrap_err(), err, "{input}");
        }
    }

    #[test]
    fn policies_resolve_from_annotations() {
        let mut ann = BTreeMap::new();
        ann.insert(NODE_POLICY_ANNOTATION.to_string(), "spread".to_string());
        ann.insert(GPU_POLICY_ANNOTATION.to_string(), "binpack".to_string());
        let p = PodPolicies::resolve(&ann, NodePolicy::Binpack, &GpuPolicy::default()).unwrap();
        assert_eq!(p.node, NodePolicy::Spread);
        assert!(p.gpu.has(GpuPolicyToken::Binpack));
        assert!(GpuPolicy::parse_flag("binpack,bogus").is_err());
        assert!(NodePolicy::parse_flag("pack").is_err());
    }

    #[test]
    fn extender_scores_map_policy_preference() {
        assert_eq!(NodePolicy::Binpack.extender_score(30.0), 10);
        assert_eq!(NodePolicy::Binpack.extender_score(0.0), 0);
        assert_eq!(NodePolicy::Spread.extender_score(0.0), 10);
        assert_eq!(NodePolicy::Spread.extender_score(15.0), 5);
    }
}
