//! nodegroup: queues bound to groups of nodes (Volcano's nodegroup). A node's group
//! is the value of its label `volcano.sh/nodegroup-name`; a Queue's `spec.affinity`
//! names groups its pods must use (`nodeGroupAffinity.required…`), should use
//! (`nodeGroupAffinity.preferred…`), must not use (`nodeGroupAntiAffinity.required…`)
//! or should avoid (`nodeGroupAntiAffinity.preferred…`).
//!
//! Predicate, as Volcano decides it:
//!
//! | node                 | queue without rules       | queue with rules            |
//! |----------------------|---------------------------|-----------------------------|
//! | no group label       | refused (`strict: false`: | refused                     |
//! |                      | allowed)                  |                             |
//! | in group `g`         | refused                   | allowed when `g` is in      |
//! |                      |                           | required or preferred and   |
//! |                      |                           | not in anti-required, or    |
//! |                      |                           | when `g` is anti-preferred  |
//!
//! So a group no list names is refused to a queue with rules, and labelled nodes
//! are only for queues whose rules name their group. Node order: +100 for a
//! required group, +50 for a preferred one (with `enablePreferredOrder: true`,
//! `50 × (n − i) / n` for the i-th of n preferred groups), and exactly −1 for an
//! anti-preferred group, whatever else it is; nodes without the label score 0.
//!
//! With `enableHierarchy: true`, a queue without `spec.affinity` takes the rules of
//! its nearest ancestor that has one (`spec.parent`, up to the queue `root`).
//!
//! Pods outside queue scheduling (no PodGroup, no queue annotation) are not judged:
//! nodegroup is a rule about queues.

use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::framework::{Rejection, SessionState};
use crate::volcano::objects::{NodeGroupAffinity, QueueSpec, ROOT_QUEUE};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Volcano's node-group label: its value is the node's group.
pub const NODE_GROUP: &str = "volcano.sh/nodegroup-name";

/// Whether nodes without the group label are refused to queues without rules too.
const STRICT: &str = "strict";
/// Whether preferred groups score by their place in the list.
const PREFERRED_ORDER: &str = "enablePreferredOrder";

/// Volcano's score for a node in a required group; a preferred one adds half.
pub const BASE_SCORE: f64 = 100.0;
/// Volcano's score for a node in an anti-preferred group (replaces any other).
pub const AVOIDED_SCORE: f64 = -1.0;

/// Groups listed in a refusal at most (the reason must stay readable).
const LISTED_GROUPS: usize = 8;

/// The nodegroup plugin.
#[derive(Debug, Default)]
pub struct NodeGroup {
    /// `strict` (default true).
    strict: bool,
    /// `enablePreferredOrder` (default false).
    preferred_order: bool,
    /// `enableHierarchy`.
    hierarchy: bool,
    /// The rules each queue is judged by, by queue name; queues without rules
    /// (own or inherited) are absent.
    rules: BTreeMap<String, InForce>,
}

/// Builds the plugin from its arguments (`strict`, `enablePreferredOrder`).
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    NodeGroup::from_args(ctx).map(|p| Some(Box::new(p) as Box<dyn Plugin>))
}

/// One queue's `spec.affinity` as sets.
#[derive(Debug, Default, PartialEq)]
struct GroupRules {
    required: BTreeSet<String>,
    /// Distinct, in the order written (a repeated group keeps its first place).
    preferred: Vec<String>,
    anti_required: BTreeSet<String>,
    anti_preferred: BTreeSet<String>,
}

/// The rules a queue is judged by: its own, or an ancestor's.
#[derive(Debug, Clone, PartialEq)]
struct InForce {
    rules: Arc<GroupRules>,
    /// The ancestor whose rules these are; `None` for the queue's own.
    ancestor: Option<String>,
}

impl GroupRules {
    fn of(affinity: &NodeGroupAffinity) -> Self {
        let mut preferred: Vec<String> = Vec::new();
        for g in &affinity.preferred {
            if !preferred.contains(g) {
                preferred.push(g.clone());
            }
        }
        Self {
            required: affinity.required.iter().cloned().collect(),
            preferred,
            anti_required: affinity.anti_required.iter().cloned().collect(),
            anti_preferred: affinity.anti_preferred.iter().cloned().collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.preferred.is_empty()
            && self.anti_required.is_empty()
            && self.anti_preferred.is_empty()
    }

    fn preferred(&self, group: &str) -> bool {
        self.preferred.iter().any(|g| g == group)
    }

    /// Volcano's order of precedence: required anti-affinity overrides affinity,
    /// and preferred anti-affinity lets a group in whatever else it is (it only
    /// ranks the group last).
    fn admits(&self, group: &str) -> bool {
        self.anti_preferred.contains(group)
            || (!self.anti_required.contains(group)
                && (self.required.contains(group) || self.preferred(group)))
    }

    /// The groups the rules let in, for a refusal to name.
    fn admitted(&self) -> Vec<&str> {
        let mut groups: BTreeSet<&str> = self
            .required
            .iter()
            .chain(&self.preferred)
            .map(String::as_str)
            .filter(|g| !self.anti_required.contains(*g))
            .collect();
        groups.extend(self.anti_preferred.iter().map(String::as_str));
        groups.into_iter().collect()
    }

    fn score(&self, group: &str, preferred_order: bool) -> f64 {
        if self.anti_preferred.contains(group) {
            return AVOIDED_SCORE;
        }
        let mut score = 0.0;
        if self.required.contains(group) {
            score += BASE_SCORE;
        }
        if let Some(i) = self.preferred.iter().position(|g| g == group) {
            score += if preferred_order {
                let n = self.preferred.len() as f64;
                0.5 * BASE_SCORE * (n - i as f64) / n
            } else {
                0.5 * BASE_SCORE
            };
        }
        score
    }
}

/// A queue's parent in the hierarchy: `spec.parent`, or `root` for a top-level
/// queue other than `root` itself.
fn parent_of(spec: &QueueSpec) -> Option<&str> {
    match spec.parent.as_deref() {
        Some(parent) => Some(parent),
        None if spec.name != ROOT_QUEUE => Some(ROOT_QUEUE),
        None => None,
    }
}

impl NodeGroup {
    fn from_args(ctx: &BuildContext<'_>) -> Result<Self, ConfError> {
        ctx.args.only(&[STRICT, PREFERRED_ORDER])?;
        Ok(Self {
            strict: ctx.args.boolean(STRICT)?.unwrap_or(true),
            preferred_order: ctx.args.boolean(PREFERRED_ORDER)?.unwrap_or(false),
            hierarchy: ctx.option.hierarchy(),
            rules: BTreeMap::new(),
        })
    }

    /// Resolves every queue's rules.
    fn derive<'a>(&mut self, specs: impl Iterator<Item = &'a QueueSpec>) {
        let by_name: BTreeMap<&str, &QueueSpec> = specs.map(|q| (q.name.as_str(), q)).collect();
        let own: BTreeMap<&str, Arc<GroupRules>> = by_name
            .iter()
            .filter_map(|(name, q)| Some((*name, Arc::new(GroupRules::of(q.affinity.as_ref()?)))))
            .collect();
        let mut rules = BTreeMap::new();
        for (name, spec) in &by_name {
            if let Some(r) = own.get(name) {
                rules.insert(
                    name.to_string(),
                    InForce {
                        rules: r.clone(),
                        ancestor: None,
                    },
                );
                continue;
            }
            if !self.hierarchy {
                continue;
            }
            // The nearest ancestor with rules; a missing parent or a cycle ends the
            // search without rules, as in Volcano.
            let mut seen = BTreeSet::from([*name]);
            let mut at = *spec;
            while let Some(parent) = parent_of(at) {
                if !seen.insert(parent) {
                    break;
                }
                let Some(p) = by_name.get(parent) else {
                    break;
                };
                if let Some(r) = own.get(parent) {
                    rules.insert(
                        name.to_string(),
                        InForce {
                            rules: r.clone(),
                            ancestor: Some(parent.to_string()),
                        },
                    );
                    break;
                }
                at = p;
            }
        }
        self.rules = rules;
    }

    /// Whether a pod of `queue` may go to a node in `group` (`None`: the node has no
    /// group label), and why not.
    fn judge(&self, queue: &str, group: Option<&str>) -> Result<(), String> {
        let in_force = self.rules.get(queue).filter(|r| !r.rules.is_empty());
        let refuse = |message: String| {
            Err(Rejection {
                plugin: "nodegroup",
                queue: queue.to_owned(),
                dimension: "nodegroup".to_owned(),
                message,
            }
            .to_string())
        };
        let whose = |r: &InForce| match &r.ancestor {
            Some(a) => format!("the node-group affinity of ancestor queue {a:?}"),
            None => "its node-group affinity".to_owned(),
        };
        let Some(group) = group else {
            return match in_force {
                None if !self.strict => Ok(()),
                None => refuse(format!(
                    "node has no {NODE_GROUP} label (strict: labelled nodes only)"
                )),
                Some(r) => refuse(format!(
                    "node has no {NODE_GROUP} label and {} names groups",
                    whose(r)
                )),
            };
        };
        let Some(r) = in_force else {
            return refuse(format!(
                "node group {group:?} is only for queues whose node-group affinity names it, and the queue has none"
            ));
        };
        if r.rules.admits(group) {
            return Ok(());
        }
        if r.rules.anti_required.contains(group) {
            return refuse(format!(
                "node group {group:?} is in the required anti-affinity of {}",
                whose(r)
            ));
        }
        let admitted = r.rules.admitted();
        let listed = match admitted.len() {
            0 => "it admits no group".to_owned(),
            n if n <= LISTED_GROUPS => admitted.join(", "),
            n => format!("{}, … ({n} groups)", admitted[..LISTED_GROUPS].join(", ")),
        };
        refuse(format!(
            "node group {group:?} is not in {} ({listed})",
            whose(r)
        ))
    }

    /// The node's score for a pod of `queue`.
    fn score(&self, queue: &str, group: Option<&str>) -> f64 {
        match (self.rules.get(queue), group) {
            (Some(r), Some(group)) => r.rules.score(group, self.preferred_order),
            _ => 0.0,
        }
    }
}

impl Plugin for NodeGroup {
    fn name(&self) -> &'static str {
        "nodegroup"
    }

    fn open(&mut self, state: &SessionState) {
        self.derive(state.queues.values().map(|q| &q.spec));
    }

    fn observe_queues(&mut self, queues: &BTreeMap<String, QueueSpec>) {
        self.derive(queues.values());
    }

    fn filters_nodes(&self) -> bool {
        true
    }

    fn predicate(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String> {
        match task.queue {
            Some(queue) => self.judge(queue, group_of(node)),
            None => Ok(()),
        }
    }

    fn scores_nodes(&self) -> bool {
        true
    }

    fn node_order(&self, task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        match task.queue {
            Some(queue) => self.score(queue, group_of(node)),
            None => 0.0,
        }
    }
}

/// The node's group, if it is labelled with one.
fn group_of<'a>(node: &NodeFacts<'a>) -> Option<&'a str> {
    node.traits.and_then(|t| t.label(NODE_GROUP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::node_traits::NodeTraits;
    use crate::resources::{Resources, VgpuDims};
    use crate::volcano::conf::SchedulerConf;
    use crate::volcano::framework::arguments::Arguments;
    use serde_json::json;

    /// The plugin as `volcano-scheduler.conf` would configure it.
    fn plugin(entry: &str, queues: &[QueueSpec]) -> NodeGroup {
        let conf = SchedulerConf::parse(&format!(
            "actions: allocate\ntiers:\n- plugins:\n  - name: nodegroup\n{entry}"
        ))
        .unwrap();
        let option = &conf.tiers[0].plugins[0];
        let ctx = BuildContext {
            args: Arguments::new("tiers[0].plugins[0]", "nodegroup", &option.arguments),
            option,
            conf: &conf,
        };
        let mut p = NodeGroup::from_args(&ctx).unwrap();
        let queues: BTreeMap<String, QueueSpec> =
            queues.iter().map(|q| (q.name.clone(), q.clone())).collect();
        p.observe_queues(&queues);
        p
    }

    /// A Queue read from JSON, as the watch hands it over.
    fn queue(name: &str, spec: serde_json::Value) -> QueueSpec {
        QueueSpec::from_json(&json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    }

    fn affinity(
        required: &[&str],
        preferred: &[&str],
        anti: &[&str],
        avoid: &[&str],
    ) -> serde_json::Value {
        json!({"affinity": {
            "nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": required,
                "preferredDuringSchedulingIgnoredDuringExecution": preferred},
            "nodeGroupAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": anti,
                "preferredDuringSchedulingIgnoredDuringExecution": avoid}}})
    }

    /// Volcano's test nodes: n1..n4 in group1..group4, n5 without the label.
    const NODES: [(&str, Option<&str>); 5] = [
        ("n1", Some("group1")),
        ("n2", Some("group2")),
        ("n3", Some("group3")),
        ("n4", Some("group4")),
        ("n5", None),
    ];

    /// Each node's predicate answer (`true`: allowed) and score for a pod of
    /// `queue`, through the extension points.
    fn judged(p: &NodeGroup, queue: Option<&str>) -> Vec<(bool, f64)> {
        let dims = VgpuDims::default();
        let none = Resources::new();
        let task = TaskFacts {
            namespace: "c1",
            name: "p1",
            gpu: None,
            resreq: &none,
            pod: None,
            queue,
            dims: &dims,
            pod_affinity: None,
            preferred_pod_affinity: None,
        };
        let (devices, usage, cordoned) = (Vec::new(), Vec::new(), Default::default());
        let (vendor, models) = (Vec::new(), Vec::new());
        NODES
            .iter()
            .map(|(name, group)| {
                let traits = NodeTraits {
                    labels: group
                        .map(|g| (NODE_GROUP.into(), g.into()))
                        .into_iter()
                        .collect(),
                    ..NodeTraits::default()
                };
                let node = NodeFacts {
                    name,
                    gpus: crate::fit::NodeView {
                        devices: &devices,
                        usage: &usage,
                        cordoned: &cordoned,
                        is_vendor: &vendor,
                        model_lower: &models,
                    },
                    allocatable: &none,
                    requested: &none,
                    traits: Some(&traits),
                    measured: crate::node_metrics::MeasuredUsage::NOT_COLLECTED,
                };
                (
                    p.predicate(&task, &node).is_ok(),
                    p.node_order(&task, &node),
                )
            })
            .collect()
    }

    fn q1() -> QueueSpec {
        queue(
            "q1",
            affinity(
                &["group1", "group3"],
                &["group3"],
                &["group2", "group4"],
                &["group4"],
            ),
        )
    }

    /// Volcano's "soft constraints is subset of hard constraints": group4 is both
    /// anti-required and anti-preferred, and the soft rule lets it in last.
    #[test]
    fn required_preferred_and_anti_affinity_as_volcano_scores_them() {
        let p = plugin("", &[q1()]);
        assert_eq!(
            judged(&p, Some("q1")),
            [
                (true, 100.0),
                (false, 0.0),
                (true, 150.0),
                (true, -1.0),
                (false, 0.0)
            ]
        );
    }

    /// Volcano's "soft constraints is not subset of hard constraints": a preferred
    /// group outside the required ones is still let in, with half the score.
    #[test]
    fn a_preferred_group_outside_the_required_ones_is_let_in() {
        let q2 = queue(
            "q2",
            affinity(&["group1"], &["group3"], &["group2"], &["group4"]),
        );
        let p = plugin("", &[q2]);
        assert_eq!(
            judged(&p, Some("q2")),
            [
                (true, 100.0),
                (false, 0.0),
                (true, 50.0),
                (true, -1.0),
                (false, 0.0)
            ]
        );
    }

    /// With only a required anti-affinity, every other labelled group is refused
    /// too: labelled nodes are for the groups a queue names.
    #[test]
    fn anti_affinity_alone_admits_no_labelled_group() {
        let only_anti = queue("anti", affinity(&[], &[], &["group2"], &[]));
        let p = plugin("", &[only_anti]);
        let answers: Vec<bool> = judged(&p, Some("anti")).iter().map(|a| a.0).collect();
        assert_eq!(answers, [false; 5]);
        let reason = p.judge("anti", Some("group1")).unwrap_err();
        assert_eq!(
            reason,
            "queue \"anti\": node group \"group1\" is not in its node-group affinity (it admits no group) (nodegroup)"
        );
    }

    #[test]
    fn strict_decides_whether_unlabelled_nodes_serve_queues_without_rules() {
        let plain = queue("plain", json!({"weight": 1}));
        let strict = plugin("", std::slice::from_ref(&plain));
        assert_eq!(
            judged(&strict, Some("plain")),
            [(false, 0.0); 5],
            "strict (the default): nothing"
        );
        let relaxed = plugin("    arguments:\n      strict: false\n", &[plain, q1()]);
        assert_eq!(
            judged(&relaxed, Some("plain")),
            [
                (false, 0.0),
                (false, 0.0),
                (false, 0.0),
                (false, 0.0),
                (true, 0.0)
            ],
            "unlabelled nodes only"
        );
        // A queue with rules never takes an unlabelled node, strict or not.
        assert!(!judged(&relaxed, Some("q1"))[4].0);
        // Nor does a queue nobody knows have rules.
        assert!(judged(&relaxed, Some("ghost"))[4].0);
    }

    #[test]
    fn pods_outside_queue_scheduling_are_not_judged() {
        let p = plugin("", &[q1()]);
        assert_eq!(judged(&p, None), [(true, 0.0); 5]);
    }

    /// Volcano's hierarchy cases: q1-child inherits q1's rules; a child of a queue
    /// without rules inherits root's; a child with its own rules keeps them.
    #[test]
    fn with_hierarchy_a_queue_without_affinity_inherits_its_nearest_ancestors() {
        let root = queue(
            "root",
            affinity(
                &["group1", "group3"],
                &["group3"],
                &["group2", "group4"],
                &["group4"],
            ),
        );
        let q1_child = queue("q1-child", json!({"parent": "q1"}));
        let no_rules = queue("q-no-affinity", json!({"parent": "root"}));
        let grandchild = queue("q-no-affinity-child", json!({"parent": "q-no-affinity"}));
        let own = queue(
            "frontend",
            json!({"parent": "q-no-affinity", "affinity":
            {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["group2"]}}}),
        );
        let top_level = queue("top", json!({}));
        let queues = [root, q1(), q1_child, no_rules, grandchild, own, top_level];
        let expected = [
            (true, 100.0),
            (false, 0.0),
            (true, 150.0),
            (true, -1.0),
            (false, 0.0),
        ];
        let p = plugin("    enableHierarchy: true\n", &queues);
        assert_eq!(judged(&p, Some("q1-child")), expected);
        assert_eq!(judged(&p, Some("q-no-affinity-child")), expected);
        assert_eq!(
            judged(&p, Some("top")),
            expected,
            "top level hangs from root"
        );
        let frontend: Vec<bool> = judged(&p, Some("frontend")).iter().map(|a| a.0).collect();
        assert_eq!(frontend, [false, true, false, false, false]);
        assert_eq!(
            p.judge("q1-child", Some("group2")).unwrap_err(),
            "queue \"q1-child\": node group \"group2\" is in the required anti-affinity of the node-group affinity of ancestor queue \"q1\" (nodegroup)"
        );
        // Without enableHierarchy nothing is inherited.
        let flat = plugin("", &queues);
        assert_eq!(judged(&flat, Some("q1-child")), [(false, 0.0); 5]);
    }

    #[test]
    fn an_empty_affinity_is_a_queues_own_and_stops_inheritance() {
        let root = queue("root", affinity(&["group1"], &[], &[], &[]));
        let empty = queue("empty", json!({"affinity": {}}));
        let child = queue("child", json!({"parent": "empty"}));
        let p = plugin("    enableHierarchy: true\n", &[root, empty, child]);
        assert_eq!(judged(&p, Some("empty")), [(false, 0.0); 5]);
        assert_eq!(judged(&p, Some("child")), [(false, 0.0); 5]);
    }

    #[test]
    fn a_cycle_or_a_missing_parent_ends_inheritance() {
        let a = queue("a", json!({"parent": "b"}));
        let b = queue("b", json!({"parent": "a"}));
        let orphan = queue("orphan", json!({"parent": "gone"}));
        let root = queue("root", affinity(&["group1"], &[], &[], &[]));
        let p = plugin("    enableHierarchy: true\n", &[a, b, orphan, root]);
        for q in ["a", "b", "orphan"] {
            assert_eq!(judged(&p, Some(q)), [(false, 0.0); 5], "{q}");
        }
    }

    #[test]
    fn preferred_order_scores_earlier_groups_higher() {
        let q = queue(
            "q",
            affinity(
                &["group1"],
                &["group3", "group1", "group2", "group3"],
                &[],
                &[],
            ),
        );
        let p = plugin("    arguments:\n      enablePreferredOrder: true\n", &[q]);
        let scores: Vec<f64> = judged(&p, Some("q")).iter().map(|a| a.1).collect();
        // Three distinct preferred groups, first place first: 50, 33.3, 16.7.
        let expected = [100.0 + 100.0 / 3.0, 50.0 / 3.0, 50.0, 0.0, 0.0];
        for (got, want) in scores.iter().zip(expected) {
            assert!((got - want).abs() < 1e-9, "{scores:?}");
        }
    }

    #[test]
    fn refusals_name_the_queue_and_the_rule() {
        let gpu = queue(
            "gpu-queue",
            affinity(
                &["gpu-pool"],
                &["high-memory-pool"],
                &["cpu-only-pool"],
                &[],
            ),
        );
        let p = plugin("", &[gpu, queue("plain", json!({}))]);
        let cases = [
            (
                "gpu-queue",
                Some("cpu-only-pool"),
                "queue \"gpu-queue\": node group \"cpu-only-pool\" is in the required anti-affinity of its node-group affinity (nodegroup)",
            ),
            (
                "gpu-queue",
                Some("other"),
                "queue \"gpu-queue\": node group \"other\" is not in its node-group affinity (gpu-pool, high-memory-pool) (nodegroup)",
            ),
            (
                "gpu-queue",
                None,
                "queue \"gpu-queue\": node has no volcano.sh/nodegroup-name label and its node-group affinity names groups (nodegroup)",
            ),
            (
                "plain",
                Some("gpu-pool"),
                "queue \"plain\": node group \"gpu-pool\" is only for queues whose node-group affinity names it, and the queue has none (nodegroup)",
            ),
            (
                "plain",
                None,
                "queue \"plain\": node has no volcano.sh/nodegroup-name label (strict: labelled nodes only) (nodegroup)",
            ),
        ];
        for (q, group, reason) in cases {
            assert_eq!(p.judge(q, group).unwrap_err(), reason);
        }
        assert!(p.judge("gpu-queue", Some("high-memory-pool")).is_ok());
    }

    /// The configuration of the nodegroup section of the plugin guide, and
    /// Volcano's own example with `enableHierarchy`, load as written.
    #[test]
    fn volcanos_example_configurations_load() {
        let seed = "actions: \"reclaim, allocate, backfill, preempt\"
tiers:
- plugins:
  - name: nodegroup
    #enableHierarchy: true
    arguments:
      strict: true # the default
";
        let conf = crate::volcano::load_conf(seed).unwrap();
        assert_eq!(conf.tiers[0].plugins[0].name, "nodegroup");
        let volcano = "actions: \"allocate, backfill, preempt, reclaim\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodegroup
    enableHierarchy: true
    arguments:
      enablePreferredOrder: true
";
        let tiers =
            crate::volcano::plugins::registry::build(&crate::volcano::load_conf(volcano).unwrap())
                .unwrap();
        assert!(tiers.names().contains(&"nodegroup"));
        for (bad, needle) in [
            (
                "      strict: yes-please\n",
                "strict: expected true or false",
            ),
            ("      strictt: true\n", "strictt: unknown argument"),
        ] {
            let e = crate::volcano::load_conf(&format!(
                "actions: allocate\ntiers:\n- plugins:\n  - name: nodegroup\n    arguments:\n{bad}"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(needle) && e.contains("(nodegroup)"), "{e}");
        }
    }
}
