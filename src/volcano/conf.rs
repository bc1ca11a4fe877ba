//! Volcano scheduler configuration (`volcano-scheduler.conf`).
//!
//! The same YAML a Volcano installation keeps in its `volcano-scheduler-configmap`
//! decides which queue policies this scheduler applies, so a cluster moving from
//! Volcano keeps its configuration:
//!
//! ```yaml
//! actions: "enqueue, allocate, backfill"
//! tiers:
//! - plugins:
//!   - name: priority
//!   - name: gang
//!     enablePreemptable: false
//! - plugins:
//!   - name: overcommit
//!     arguments:
//!       overcommit-factor: 1.5
//!   - name: proportion
//! ```
//!
//! Parsing is stricter than Volcano's: a misspelt action, plugin or option is an error
//! that names it, because a silently ignored `proportoin` would turn quotas off.
//! Volcano plugins this scheduler does not run are refused with why and what to use
//! instead (`refused_plugins`); remarks on how a configuration is applied are in
//! [`SchedulerConf::notes`].

use super::action_configurations::ActionConfigurations;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

/// Volcano's default `overcommit-factor`.
pub const DEFAULT_OVERCOMMIT_FACTOR: f64 = 1.2;

/// Plugins whose semantics this scheduler implements (one file each under
/// `volcano::plugins`).
pub const SUPPORTED_PLUGINS: &[&str] = &[
    "priority",
    "gang",
    "conformance",
    "proportion",
    "capacity",
    "overcommit",
    "capacity-card",
    "binpack",
    "drf",
    "pdb",
    "cdp",
    "predicates",
    "nodeorder",
    "nodegroup",
    "resourcequota",
    "sla",
    "resource-strategy-fit",
    "network-topology-aware",
    "task-topology",
    "usage",
];

/// An extension point a plugin entry can switch off with `enableXxx: false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ExtensionPoint {
    /// Job order.
    JobOrder,
    /// Namespace order (accepted; jobs are not grouped by namespace here).
    NamespaceOrder,
    /// Job ready.
    JobReady,
    /// Job pipelined.
    JobPipelined,
    /// Task order.
    TaskOrder,
    /// Preemptable victims.
    Preemptable,
    /// Reclaimable victims.
    Reclaimable,
    /// Queue order.
    QueueOrder,
    /// Cluster order (accepted; one cluster).
    ClusterOrder,
    /// Node predicate.
    Predicate,
    /// Best node (accepted; the node order decides).
    BestNode,
    /// Node order (scores).
    NodeOrder,
    /// Target job (accepted).
    TargetJob,
    /// Reserved nodes (accepted).
    ReservedNodes,
    /// Job enqueueable and enqueued.
    JobEnqueued,
    /// Victim tasks.
    Victim,
    /// Job starving.
    JobStarving,
    /// HyperNode order (scores of the HyperNodes a gang could be placed in).
    HyperNodeOrder,
    /// Queue overused (allocate and reclaim skip such a queue).
    Overused,
    /// Queue allocatable (the per-task queue limit check).
    Allocatable,
    /// Queue preemptive (whether a queue may reclaim from others).
    Preemptive,
    /// Sub-job ready (accepted; without sub-job policies Volcano asks job ready).
    SubJobReady,
    /// Sub-job pipelined (accepted; without sub-job policies Volcano asks job
    /// pipelined).
    SubJobPipelined,
    /// Sub-job order (accepted; there are no sub-job policies here).
    SubJobOrder,
    /// HyperNode gradient (accepted; the search over HyperNodes is this
    /// scheduler's own).
    HyperNodeGradient,
}

/// Each switch as Volcano's `PluginOption` spells it (`enableXxx` for the older
/// points, `enabledXxx` for the newer ones), and the point it controls. Volcano
/// defaults every switch to on. `EnabledClusterOrder` is how Volcano releases before
/// `enabledClusterOrder` spelt it, and `enableHyperNodeOrder` how this scheduler
/// first spelt `enabledHyperNodeOrder`: both still load, so a configuration that
/// loaded once keeps loading.
pub const SWITCHES: &[(&str, ExtensionPoint)] = &[
    ("enableJobOrder", ExtensionPoint::JobOrder),
    ("enableNamespaceOrder", ExtensionPoint::NamespaceOrder),
    ("enableJobReady", ExtensionPoint::JobReady),
    ("enableJobPipelined", ExtensionPoint::JobPipelined),
    ("enableTaskOrder", ExtensionPoint::TaskOrder),
    ("enablePreemptable", ExtensionPoint::Preemptable),
    ("enableReclaimable", ExtensionPoint::Reclaimable),
    ("enableQueueOrder", ExtensionPoint::QueueOrder),
    ("enabledClusterOrder", ExtensionPoint::ClusterOrder),
    ("EnabledClusterOrder", ExtensionPoint::ClusterOrder),
    ("enablePredicate", ExtensionPoint::Predicate),
    ("enableBestNode", ExtensionPoint::BestNode),
    ("enableNodeOrder", ExtensionPoint::NodeOrder),
    ("enableTargetJob", ExtensionPoint::TargetJob),
    ("enableReservedNodes", ExtensionPoint::ReservedNodes),
    ("enableJobEnqueued", ExtensionPoint::JobEnqueued),
    ("enabledVictim", ExtensionPoint::Victim),
    ("enableJobStarving", ExtensionPoint::JobStarving),
    ("enabledHyperNodeOrder", ExtensionPoint::HyperNodeOrder),
    ("enableHyperNodeOrder", ExtensionPoint::HyperNodeOrder),
    ("enabledOverused", ExtensionPoint::Overused),
    ("enabledAllocatable", ExtensionPoint::Allocatable),
    ("enablePreemptive", ExtensionPoint::Preemptive),
    ("enabledSubJobReady", ExtensionPoint::SubJobReady),
    ("enabledSubJobPipelined", ExtensionPoint::SubJobPipelined),
    ("enabledSubJobOrder", ExtensionPoint::SubJobOrder),
    (
        "enabledHyperNodeGradient",
        ExtensionPoint::HyperNodeGradient,
    ),
];

/// capacity's argument for how many queue levels above the leaves reclaim
/// compares (Volcano's default 0: the leaves only).
pub const ANCESTOR_RECLAIM_LEVEL: &str = "ancestorReclaimLevel";

/// The plugin option that is an argument rather than a switch: hierarchical
/// sharing (capacity, drf), off unless set.
pub const HIERARCHY_FLAG: &str = "enableHierarchy";

/// One scheduling action, in the order the scheduler runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Admit PodGroups (Pending → Inqueue).
    Enqueue,
    /// Place admitted jobs.
    Allocate,
    /// Place best-effort tasks.
    Backfill,
    /// Evict within a queue for a higher-priority job.
    Preempt,
    /// Evict across queues to restore fair share.
    Reclaim,
    /// Evict running pods by policy.
    Shuffle,
    /// Evict whole victim bundles within a queue for a starving higher-priority gang.
    GangPreempt,
    /// Evict whole victim bundles across queues for a starving gang.
    GangReclaim,
}

impl Action {
    const ALL: [Action; 8] = [
        Action::Enqueue,
        Action::Allocate,
        Action::Backfill,
        Action::Preempt,
        Action::Reclaim,
        Action::Shuffle,
        Action::GangPreempt,
        Action::GangReclaim,
    ];

    /// The action's name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Enqueue => "enqueue",
            Action::Allocate => "allocate",
            Action::Backfill => "backfill",
            Action::Preempt => "preempt",
            Action::Reclaim => "reclaim",
            Action::Shuffle => "shuffle",
            Action::GangPreempt => "gangpreempt",
            Action::GangReclaim => "gangreclaim",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One plugin entry of a tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginOption {
    /// Plugin name.
    pub name: String,
    /// `arguments:`, kept as JSON values (YAML numbers stay numbers).
    pub arguments: BTreeMap<String, Value>,
    /// `enableXxx: bool` switches, by their exact key.
    pub flags: BTreeMap<String, bool>,
}

impl PluginOption {
    /// A plugin without arguments or flags.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            arguments: BTreeMap::new(),
            flags: BTreeMap::new(),
        }
    }

    /// Whether an extension point of this entry is on (`enableXxx` absent or true).
    pub fn switched_on(&self, point: ExtensionPoint) -> bool {
        SWITCHES
            .iter()
            .filter(|(_, p)| *p == point)
            .all(|(key, _)| self.flags.get(*key).copied().unwrap_or(true))
    }

    /// `enableHierarchy` (off unless set).
    pub fn hierarchy(&self) -> bool {
        self.flags.get(HIERARCHY_FLAG).copied().unwrap_or(false)
    }
}

/// One tier: plugins that vote together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tier {
    /// The tier's plugins in order, each shared with the plugins built from it
    /// (every planning session builds them, and keeps what they derived under
    /// their entry).
    pub plugins: Vec<Arc<PluginOption>>,
}

/// A parsed scheduler configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchedulerConf {
    /// Actions in execution order.
    pub actions: Vec<Action>,
    /// Plugin tiers.
    pub tiers: Vec<Tier>,
    /// Arguments of actions (`configurations:`).
    pub configurations: ActionConfigurations,
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfError {
    /// Not YAML, or not the expected shape.
    #[error("scheduler configuration: {0}")]
    Syntax(String),
    /// A top-level key other than `actions`, `tiers`, `configurations`, `metrics`.
    #[error(
        "scheduler configuration: unknown key {0:?} (expected actions, tiers, configurations, metrics)"
    )]
    UnknownKey(String),
    /// `actions` is missing or empty.
    #[error("scheduler configuration: actions: no action listed")]
    NoActions,
    /// An action name Volcano does not have.
    #[error(
        "scheduler configuration: actions: unknown action {0:?} (known: enqueue, allocate, backfill, preempt, reclaim, shuffle, gangpreempt, gangreclaim)"
    )]
    UnknownAction(String),
    /// An action listed twice.
    #[error("scheduler configuration: actions: {0:?} is listed twice")]
    DuplicateAction(String),
    /// A plugin name nobody knows.
    #[error("scheduler configuration: {at}: unknown plugin {name:?} (supported: {})", SUPPORTED_PLUGINS.join(", "))]
    UnknownPlugin {
        /// `tiers[i].plugins[j]`.
        at: String,
        /// The plugin name.
        name: String,
    },
    /// A real Volcano plugin this scheduler does not implement.
    #[error("scheduler configuration: {at}: Volcano plugin {name:?} is not supported by this scheduler: {why} (supported: {})", SUPPORTED_PLUGINS.join(", "))]
    UnsupportedPlugin {
        /// `tiers[i].plugins[j]`.
        at: String,
        /// The plugin name.
        name: String,
        /// Why, and what to use instead.
        why: &'static str,
    },
    /// A plugin listed twice.
    #[error("scheduler configuration: {at}: plugin {name:?} is listed twice")]
    DuplicatePlugin {
        /// `tiers[i].plugins[j]`.
        at: String,
        /// The plugin name.
        name: String,
    },
    /// A malformed plugin entry, option or argument.
    #[error("scheduler configuration: {at}: {reason}")]
    BadPlugin {
        /// `tiers[i].plugins[j]` (with the plugin name when known).
        at: String,
        /// What is wrong.
        reason: String,
    },
}

impl Default for SchedulerConf {
    /// Volcano's built-in default (`pkg/scheduler/util.go`): actions enqueue, allocate,
    /// backfill; tier 1 priority, gang, conformance; tier 2 overcommit, drf,
    /// predicates, proportion, nodeorder.
    fn default() -> Self {
        let tier = |names: &[&str]| Tier {
            plugins: names
                .iter()
                .map(|n| Arc::new(PluginOption::named(n)))
                .collect(),
        };
        Self {
            actions: vec![Action::Enqueue, Action::Allocate, Action::Backfill],
            tiers: vec![
                tier(&["priority", "gang", "conformance"]),
                tier(&["overcommit", "drf", "predicates", "proportion", "nodeorder"]),
            ],
            configurations: ActionConfigurations::default(),
        }
    }
}

impl SchedulerConf {
    /// Parses the YAML text of `volcano-scheduler.conf`.
    pub fn parse(text: &str) -> Result<Self, ConfError> {
        let doc: Value =
            serde_yaml_ng::from_str(text).map_err(|e| ConfError::Syntax(e.to_string()))?;
        let top = doc.as_object().ok_or_else(|| {
            ConfError::Syntax(format!("expected a mapping at the top, got {doc}"))
        })?;
        for key in top.keys() {
            if !matches!(
                key.as_str(),
                "actions" | "tiers" | "configurations" | "metrics"
            ) {
                return Err(ConfError::UnknownKey(key.clone()));
            }
        }
        let actions = match top.get("actions") {
            None | Some(Value::Null) => return Err(ConfError::NoActions),
            Some(Value::String(s)) => parse_actions(s)?,
            Some(v) => {
                return Err(ConfError::Syntax(format!(
                    "actions: expected a comma-separated string, got {v}"
                )));
            }
        };
        let tiers = match top.get("tiers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(tiers)) => parse_tiers(tiers)?,
            Some(v) => {
                return Err(ConfError::Syntax(format!(
                    "tiers: expected a list, got {v}"
                )));
            }
        };
        let configurations = ActionConfigurations::parse(top.get("configurations"))?;
        Ok(Self {
            actions,
            tiers,
            configurations,
        })
    }

    /// Whether an action is configured.
    pub fn has_action(&self, action: Action) -> bool {
        self.actions.contains(&action)
    }

    /// The plugin's entry, if it is listed in any tier.
    pub fn plugin(&self, name: &str) -> Option<&PluginOption> {
        self.tiers
            .iter()
            .flat_map(|t| t.plugins.iter())
            .find(|p| p.name == name)
            .map(|p| &**p)
    }

    /// Whether the plugin is listed in any tier.
    pub fn enabled(&self, plugin: &str) -> bool {
        self.plugin(plugin).is_some()
    }

    /// One of the plugin's `arguments`.
    pub fn argument(&self, plugin: &str, key: &str) -> Option<&Value> {
        self.plugin(plugin).and_then(|p| p.arguments.get(key))
    }

    /// One of the plugin's `enableXxx` switches.
    pub fn flag(&self, plugin: &str, key: &str) -> Option<bool> {
        self.plugin(plugin).and_then(|p| p.flags.get(key).copied())
    }

    /// The overcommit plugin's `overcommit-factor`: 1.2 when unset, and 1.2 again when
    /// set below 1.0, as Volcano does (a factor below one would admit less than the
    /// cluster holds).
    pub fn overcommit_factor(&self) -> f64 {
        match self
            .argument("overcommit", "overcommit-factor")
            .and_then(number)
        {
            Some(f) if f.is_finite() && f >= 1.0 => f,
            _ => DEFAULT_OVERCOMMIT_FACTOR,
        }
    }

    /// Whether the capacity plugin runs with `enableHierarchy: true` (queues form a
    /// tree through `spec.parent`); without it, as in Volcano, parents are ignored.
    pub fn capacity_hierarchy(&self) -> bool {
        self.flag("capacity", HIERARCHY_FLAG).unwrap_or(false)
    }

    /// Human-readable remarks about how the configuration is applied:
    /// conflicting choices and replaced values. For logs and the debug endpoint.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.enabled("proportion") && self.enabled("capacity") {
            notes.push(
                "proportion and capacity are both enabled; capacity decides deserved and quota checks and proportion is ignored"
                    .to_owned(),
            );
        }
        if let Some(v) = self.argument("capacity", ANCESTOR_RECLAIM_LEVEL) {
            if !self.capacity_hierarchy() {
                notes.push(format!(
                    "capacity's {ANCESTOR_RECLAIM_LEVEL} compares parent queues, which exist only with enableHierarchy: true; without it only the leaf queues are compared"
                ));
            } else if number(v).is_some_and(|level| level < 0.0) {
                notes.push(format!(
                    "capacity's {ANCESTOR_RECLAIM_LEVEL} {v} is negative; using 0 (the leaf queues only) as Volcano does"
                ));
            }
        }
        if let Some(v) = self.argument("overcommit", "overcommit-factor") {
            let f = number(v);
            if !matches!(f, Some(f) if f.is_finite() && f >= 1.0) {
                notes.push(format!(
                    "overcommit-factor {v} is below 1.0; using {DEFAULT_OVERCOMMIT_FACTOR} as Volcano does"
                ));
            }
        }
        notes.extend(self.configurations.notes());
        notes
    }
}

fn parse_actions(text: &str) -> Result<Vec<Action>, ConfError> {
    let mut actions = Vec::new();
    for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let action =
            Action::parse(name).ok_or_else(|| ConfError::UnknownAction(name.to_owned()))?;
        if actions.contains(&action) {
            return Err(ConfError::DuplicateAction(name.to_owned()));
        }
        actions.push(action);
    }
    if actions.is_empty() {
        return Err(ConfError::NoActions);
    }
    Ok(actions)
}

fn parse_tiers(tiers: &[Value]) -> Result<Vec<Tier>, ConfError> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (ti, tier) in tiers.iter().enumerate() {
        let at_tier = format!("tiers[{ti}]");
        let obj = tier.as_object().ok_or_else(|| ConfError::BadPlugin {
            at: at_tier.clone(),
            reason: format!("expected a mapping with `plugins`, got {tier}"),
        })?;
        if let Some(key) = obj.keys().find(|k| k.as_str() != "plugins") {
            return Err(ConfError::BadPlugin {
                at: at_tier,
                reason: format!("unknown key {key:?} (expected plugins)"),
            });
        }
        let plugins = match obj.get("plugins") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(p)) => p.as_slice(),
            Some(v) => {
                return Err(ConfError::BadPlugin {
                    at: format!("{at_tier}.plugins"),
                    reason: format!("expected a list, got {v}"),
                });
            }
        };
        let mut parsed = Vec::new();
        for (pi, plugin) in plugins.iter().enumerate() {
            let at = format!("{at_tier}.plugins[{pi}]");
            let option = parse_plugin(&at, plugin)?;
            if seen.contains(&option.name) {
                return Err(ConfError::DuplicatePlugin {
                    at,
                    name: option.name,
                });
            }
            seen.push(option.name.clone());
            parsed.push(option);
        }
        out.push(Tier {
            plugins: parsed.into_iter().map(Arc::new).collect(),
        });
    }
    Ok(out)
}

fn parse_plugin(at: &str, plugin: &Value) -> Result<PluginOption, ConfError> {
    let bad = |reason: String| ConfError::BadPlugin {
        at: at.to_owned(),
        reason,
    };
    let obj = plugin
        .as_object()
        .ok_or_else(|| bad(format!("expected a mapping with `name`, got {plugin}")))?;
    let name = match obj.get("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_owned(),
        _ => return Err(bad("plugin name is missing".to_owned())),
    };
    if let Some(why) = super::refused_plugins::refusal(&name) {
        return Err(ConfError::UnsupportedPlugin {
            at: at.to_owned(),
            name,
            why,
        });
    }
    if !SUPPORTED_PLUGINS.contains(&name.as_str()) {
        return Err(ConfError::UnknownPlugin {
            at: at.to_owned(),
            name,
        });
    }
    let at_named = format!("{at} ({name})");
    let bad = |reason: String| ConfError::BadPlugin {
        at: at_named.clone(),
        reason,
    };
    let mut option = PluginOption::named(&name);
    for (key, value) in obj {
        match key.as_str() {
            "name" => {}
            "arguments" => match value {
                Value::Null => {}
                Value::Object(args) => {
                    option.arguments = args.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                }
                v => return Err(bad(format!("arguments: expected a mapping, got {v}"))),
            },
            k if k == HIERARCHY_FLAG || SWITCHES.iter().any(|(s, _)| *s == k) => match value {
                Value::Bool(b) => {
                    option.flags.insert(key.clone(), *b);
                }
                v => return Err(bad(format!("{k}: expected true or false, got {v}"))),
            },
            k if k.starts_with("enable") || k.starts_with("Enable") => {
                let known: Vec<&str> = std::iter::once(HIERARCHY_FLAG)
                    .chain(SWITCHES.iter().map(|(s, _)| *s))
                    .collect();
                return Err(bad(format!(
                    "unknown switch {k:?} (known: {})",
                    known.join(", ")
                )));
            }
            k => {
                return Err(bad(format!(
                    "unknown option {k:?} (expected name, arguments, enableXxx)"
                )));
            }
        }
    }
    if name == "overcommit"
        && let Some(v) = option.arguments.get("overcommit-factor")
        && !matches!(number(v), Some(f) if f.is_finite() && f > 0.0)
    {
        return Err(bad(format!(
            "overcommit-factor: expected a positive number, got {v}"
        )));
    }
    Ok(option)
}

/// A JSON number, or a string holding one (`"1.5"`), as f64.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default configuration exactly as Volcano ships it in its configmap.
    const VOLCANO_DEFAULT: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

    #[test]
    fn volcano_default_text_equals_default() {
        let conf = SchedulerConf::parse(VOLCANO_DEFAULT).unwrap();
        assert_eq!(conf, SchedulerConf::default());
        assert_eq!(
            conf.actions,
            vec![Action::Enqueue, Action::Allocate, Action::Backfill]
        );
        assert!(conf.enabled("proportion"));
        assert!(conf.enabled("overcommit"));
        assert!(!conf.enabled("capacity"));
        assert_eq!(conf.overcommit_factor(), 1.2);
        assert!(conf.notes().is_empty(), "{:?}", conf.notes());
    }

    #[test]
    fn custom_conf_with_arguments_and_flags() {
        let conf = SchedulerConf::parse(
            r#"
actions: "enqueue,allocate,backfill,reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: 1.5
  - name: capacity
    enableHierarchy: true
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
      podOwnerReferenceToServiceType:
        Deployment: inference
  - name: binpack
configurations:
- name: enqueue
  arguments:
    overcommit-factor: 2
"#,
        )
        .unwrap();
        assert_eq!(conf.actions.len(), 4);
        assert!(conf.has_action(Action::Reclaim));
        assert_eq!(conf.overcommit_factor(), 1.5);
        assert_eq!(conf.flag("gang", "enablePreemptable"), Some(false));
        assert_eq!(conf.flag("gang", "enableJobReady"), None);
        assert!(conf.capacity_hierarchy());
        assert_eq!(
            conf.argument("capacity-card", "cardUnlimitedCpuMemory"),
            Some(&Value::Bool(true))
        );
        assert_eq!(
            conf.argument("capacity-card", "podOwnerReferenceToServiceType")
                .and_then(|v| v.get("Deployment")),
            Some(&Value::String("inference".into()))
        );
        assert!(!conf.enabled("proportion"));
        assert!(conf.notes().is_empty(), "binpack runs: {:?}", conf.notes());
    }

    /// Every switch of Volcano's `PluginOption`, as its YAML tags spell them: a
    /// configuration Volcano loads loads here, with the switch recorded.
    #[test]
    fn every_volcano_switch_loads() {
        let volcano_switches = [
            "enableJobOrder",
            "enableHierarchy",
            "enableJobReady",
            "enableJobPipelined",
            "enableTaskOrder",
            "enablePreemptable",
            "enableReclaimable",
            "enablePreemptive",
            "enableQueueOrder",
            "enabledClusterOrder",
            "enablePredicate",
            "enableBestNode",
            "enableNodeOrder",
            "enableTargetJob",
            "enableReservedNodes",
            "enableJobEnqueued",
            "enabledVictim",
            "enableJobStarving",
            "enabledOverused",
            "enabledAllocatable",
            "enabledHyperNodeOrder",
            "enabledSubJobReady",
            "enabledSubJobPipelined",
            "enabledSubJobOrder",
            "enabledHyperNodeGradient",
        ];
        let entries: String = volcano_switches
            .iter()
            .map(|k| format!("    {k}: false\n"))
            .collect();
        let conf = SchedulerConf::parse(&format!(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n{entries}"
        ))
        .unwrap();
        let entry = conf.plugin("proportion").unwrap();
        for k in volcano_switches {
            assert_eq!(entry.flags.get(k), Some(&false), "{k}");
        }
        for point in [
            ExtensionPoint::Overused,
            ExtensionPoint::Allocatable,
            ExtensionPoint::Preemptive,
            ExtensionPoint::ClusterOrder,
            ExtensionPoint::HyperNodeOrder,
            ExtensionPoint::HyperNodeGradient,
            ExtensionPoint::SubJobOrder,
        ] {
            assert!(!entry.switched_on(point), "{point:?}");
            assert!(
                PluginOption::named("proportion").switched_on(point),
                "{point:?} defaults on"
            );
        }
    }

    #[test]
    fn overcommit_factor_table() {
        let cases: &[(&str, f64, usize)] = &[
            ("1.5", 1.5, 0),
            ("1", 1.0, 0),
            ("\"2.0\"", 2.0, 0),
            ("0.5", 1.2, 1),
            ("3", 3.0, 0),
        ];
        for (text, factor, notes) in cases {
            let conf = SchedulerConf::parse(&format!(
                "actions: enqueue\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: {text}\n"
            ))
            .unwrap();
            assert_eq!(conf.overcommit_factor(), *factor, "{text}");
            assert_eq!(conf.notes().len(), *notes, "{text}");
        }
        for bad in ["-1", "lots", "[1]", "0"] {
            let e = SchedulerConf::parse(&format!(
                "actions: enqueue\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: {bad}\n"
            ))
            .unwrap_err();
            assert!(e.to_string().contains("overcommit-factor"), "{e}");
        }
    }

    #[test]
    fn both_quota_plugins_produce_a_note() {
        let conf = SchedulerConf::parse(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity\n",
        )
        .unwrap();
        assert!(conf.notes()[0].contains("capacity decides"));
        assert!(!conf.capacity_hierarchy());
    }

    #[test]
    fn an_ancestor_reclaim_level_that_does_nothing_produces_a_note() {
        let conf = |hierarchy: bool, level: i64| {
            SchedulerConf::parse(&format!(
                "actions: enqueue, reclaim\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: {hierarchy}\n    arguments:\n      ancestorReclaimLevel: {level}\n"
            ))
            .unwrap()
        };
        assert!(conf(true, 1).notes().is_empty());
        let flat = conf(false, 1).notes();
        assert!(
            flat.len() == 1 && flat[0].contains("enableHierarchy: true"),
            "{flat:?}"
        );
        let negative = conf(true, -2).notes();
        assert!(
            negative.len() == 1 && negative[0].contains("-2 is negative; using 0"),
            "{negative:?}"
        );
    }

    #[test]
    fn gang_eviction_actions_load_and_unknown_actions_are_still_refused() {
        let conf = SchedulerConf::parse(
            "actions: enqueue, allocate, gangpreempt, gangreclaim, backfill\ntiers:\n- plugins:\n  - name: gang\n",
        )
        .unwrap();
        assert_eq!(
            conf.actions,
            vec![
                Action::Enqueue,
                Action::Allocate,
                Action::GangPreempt,
                Action::GangReclaim,
                Action::Backfill
            ]
        );
        let names: Vec<&str> = crate::volcano::actions::configured(&conf)
            .iter()
            .map(|a| a.name())
            .collect();
        assert_eq!(
            names,
            [
                "enqueue",
                "allocate",
                "gangpreempt",
                "gangreclaim",
                "backfill"
            ]
        );
        let err = SchedulerConf::parse("actions: enqueue, gangpreemptt\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown action \"gangpreemptt\"")
                && err.contains("gangpreempt, gangreclaim"),
            "{err}"
        );
    }

    #[test]
    fn garbage_is_refused_with_a_named_cause() {
        let cases: &[(&str, &str)] = &[
            ("actions: [enqueue", "scheduler configuration: "),
            ("- a\n- b\n", "expected a mapping at the top"),
            ("tiers: []\n", "no action listed"),
            ("actions: \" , \"\n", "no action listed"),
            ("actions: enqueue, allocat\n", "unknown action \"allocat\""),
            ("actions: enqueue, enqueue\n", "listed twice"),
            ("actions: [enqueue]\n", "comma-separated"),
            ("actions: enqueue\ntier: []\n", "unknown key \"tier\""),
            ("actions: enqueue\ntiers: {}\n", "tiers: expected a list"),
            (
                "actions: enqueue\ntiers:\n- plugin: []\n",
                "tiers[0]: unknown key \"plugin\"",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: proportoin\n",
                "tiers[0].plugins[0]: unknown plugin \"proportoin\"",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: deviceshare\n",
                "Volcano plugin \"deviceshare\" is not supported by this scheduler: GPU sharing is this scheduler's own job",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: gang\n",
                "tiers[1].plugins[0]: plugin \"gang\" is listed twice",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - arguments: {}\n",
                "plugin name is missing",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    enablePreemptable: maybe\n",
                "enablePreemptable: expected true or false",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    weight: 3\n",
                "(gang): unknown option \"weight\"",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: false\n",
                "(gang): unknown switch \"enableJobOrdr\" (known: enableHierarchy, enableJobOrder",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    arguments: 3\n",
                "arguments: expected a mapping",
            ),
            (
                "actions: enqueue\ntiers:\n- plugins:\n  - gang\n",
                "expected a mapping with `name`",
            ),
        ];
        for (text, needle) in cases {
            let e = SchedulerConf::parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
