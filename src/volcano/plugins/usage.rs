//! usage: keeps new pods off nodes that are busy in fact, whatever their pods
//! requested (Volcano's usage plugin). A node's measured CPU and memory (from
//! metrics-server, see `node_metrics`) as a share of its allocatable:
//!
//! - **predicate**: a node above the CPU or the memory threshold is refused
//!   (CPU is checked first, as in Volcano);
//! - **node order**, for the rest:
//!
//! ```text
//! cpuScore    = (100 − cpu%) / 100 × cpu.weight
//! memoryScore = (100 − memory%) / 100 × memory.weight
//! score       = (cpuScore + memoryScore) / (cpu.weight + memory.weight) × 100 × usage.weight
//! ```
//!
//! A node without a usable sample (none, unreadable, or older than five minutes)
//! passes the predicate and scores 0, as in Volcano: missing measurements never
//! block scheduling. Unlike most node plugins it matters in `/filter` too:
//! kube-scheduler judges requests, never measured usage.

use crate::node_metrics::{UsagePercent, UsageReading};
use crate::placement::{NodeFacts, TaskFacts};
use crate::volcano::conf::ConfError;
use crate::volcano::framework::arguments::{Arguments, number};
use crate::volcano::framework::plugin::Plugin;
use crate::volcano::framework::registry::BuildContext;
use crate::volcano::plugins::binpack::MAX_NODE_SCORE;
use serde_json::Value;

const USAGE_WEIGHT: &str = "usage.weight";
const CPU_WEIGHT: &str = "cpu.weight";
const MEMORY_WEIGHT: &str = "memory.weight";
const THRESHOLDS: &str = "thresholds";
/// The keys of `thresholds`, as Volcano spells them.
const CPU_THRESHOLD: &str = "cpu";
const MEMORY_THRESHOLD: &str = "mem";
/// A later Volcano's estimate of what pods placed since the last measurement will
/// use; refused rather than ignored.
const ESTIMATOR: &str = "estimator";

/// Volcano's defaults.
const DEFAULT_USAGE_WEIGHT: i64 = 5;
const DEFAULT_THRESHOLD: f64 = 80.0;

/// The usage plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    /// `usage.weight`.
    pub usage_weight: i64,
    /// `cpu.weight`.
    pub cpu_weight: i64,
    /// `memory.weight`.
    pub memory_weight: i64,
    /// `thresholds.cpu`, percent.
    pub cpu_threshold: f64,
    /// `thresholds.mem`, percent.
    pub memory_threshold: f64,
}

impl Default for Usage {
    fn default() -> Self {
        Self {
            usage_weight: DEFAULT_USAGE_WEIGHT,
            cpu_weight: 1,
            memory_weight: 1,
            cpu_threshold: DEFAULT_THRESHOLD,
            memory_threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// Builds the plugin from its arguments; a bad one is refused when the
/// configuration loads, naming it.
pub fn build(ctx: &BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError> {
    Usage::from_args(&ctx.args).map(|p| Some(Box::new(p) as Box<dyn Plugin>))
}

impl Usage {
    /// Reads the arguments. Weights are whole numbers from 0 (Volcano reads them
    /// as integers); CPU and memory weights may not both be 0 (the score would
    /// divide by nothing); thresholds are percentages from 0 to 100.
    pub fn from_args(args: &Arguments<'_>) -> Result<Self, ConfError> {
        if args.raw(ESTIMATOR).is_some() {
            return Err(args.error(
                ESTIMATOR,
                "estimating the load of pods placed since the last measurement is not implemented; remove it",
            ));
        }
        args.only(&[USAGE_WEIGHT, CPU_WEIGHT, MEMORY_WEIGHT, THRESHOLDS])?;
        let defaults = Self::default();
        let weight = |key: &str, default: i64| -> Result<i64, ConfError> {
            Ok(args.integer_at_least(key, 0)?.unwrap_or(default))
        };
        let mut usage = Self {
            usage_weight: weight(USAGE_WEIGHT, defaults.usage_weight)?,
            cpu_weight: weight(CPU_WEIGHT, defaults.cpu_weight)?,
            memory_weight: weight(MEMORY_WEIGHT, defaults.memory_weight)?,
            ..defaults
        };
        if usage.cpu_weight + usage.memory_weight == 0 {
            return Err(args.error(
                CPU_WEIGHT,
                format!(
                    "{CPU_WEIGHT} and {MEMORY_WEIGHT} are both 0: the score would weigh nothing"
                ),
            ));
        }
        if let Some(thresholds) = args.raw(THRESHOLDS) {
            let Value::Object(map) = thresholds else {
                return Err(args.error(
                    THRESHOLDS,
                    format!("expected a mapping such as {{cpu: 80, mem: 80}}, got {thresholds}"),
                ));
            };
            for (key, value) in map {
                let at = format!("{THRESHOLDS}.{key}");
                let target = match key.as_str() {
                    CPU_THRESHOLD => &mut usage.cpu_threshold,
                    MEMORY_THRESHOLD => &mut usage.memory_threshold,
                    _ if key.starts_with("CPUUsageAvg.") || key.starts_with("MEMUsageAvg.") => {
                        return Err(args.error(
                            &at,
                            "Volcano's earlier per-period spelling; write thresholds: {cpu: 80, mem: 80}",
                        ));
                    }
                    _ => {
                        return Err(args.error(
                            &at,
                            format!(
                                "unknown threshold (expected {CPU_THRESHOLD}, {MEMORY_THRESHOLD})"
                            ),
                        ));
                    }
                };
                *target = number(value)
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| {
                        args.error(
                            &at,
                            format!("expected a percentage from 0 to 100, got {value}"),
                        )
                    })?;
            }
        }
        Ok(usage)
    }

    /// Why the node is refused, when its usage is above a threshold.
    pub fn refusal(&self, usage: &UsagePercent) -> Option<String> {
        let over = |what: &str, threshold: f64| {
            format!("node {what} usage is above the {threshold} percent threshold (usage)")
        };
        if usage.cpu > self.cpu_threshold {
            return Some(over("CPU", self.cpu_threshold));
        }
        if usage.memory > self.memory_threshold {
            return Some(over("memory", self.memory_threshold));
        }
        None
    }

    /// The node's score for its usage (Volcano's formula).
    pub fn score(&self, usage: &UsagePercent) -> f64 {
        let cpu = (100.0 - usage.cpu) / 100.0 * self.cpu_weight as f64;
        let memory = (100.0 - usage.memory) / 100.0 * self.memory_weight as f64;
        (cpu + memory) / (self.cpu_weight + self.memory_weight) as f64
            * MAX_NODE_SCORE
            * self.usage_weight as f64
    }
}

/// The node's usage, when a recent sample gives it.
fn current(node: &NodeFacts<'_>) -> Option<UsagePercent> {
    match node.measured.reading(node.allocatable) {
        UsageReading::Current(usage) => Some(usage),
        UsageReading::Unused(_) => None,
    }
}

impl Plugin for Usage {
    fn name(&self) -> &'static str {
        "usage"
    }

    fn filters_nodes(&self) -> bool {
        true
    }

    fn predicate(&self, _task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> Result<(), String> {
        match current(node).and_then(|usage| self.refusal(&usage)) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    fn scores_nodes(&self) -> bool {
        self.usage_weight > 0
    }

    fn node_order(&self, _task: &TaskFacts<'_>, node: &NodeFacts<'_>) -> f64 {
        current(node).map_or(0.0, |usage| self.score(&usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(cpu: f64, memory: f64) -> UsagePercent {
        UsagePercent {
            cpu,
            memory,
            age: Duration::ZERO,
        }
    }

    fn built(arguments: &str) -> Result<Usage, ConfError> {
        let conf = crate::volcano::conf::SchedulerConf::parse(&format!(
            "actions: allocate\ntiers:\n- plugins:\n  - name: usage\n    arguments:\n{arguments}"
        ))?;
        let option = &conf.tiers[0].plugins[0];
        Usage::from_args(&Arguments::new(
            "tiers[0].plugins[0]",
            "usage",
            &option.arguments,
        ))
    }

    #[test]
    fn the_seed_example_scores_250() {
        // CPU 40 %, memory 60 %, weights 1 and 1, usage.weight 5:
        // (0.6 + 0.4) / 2 × 100 × 5.
        assert_eq!(Usage::default().score(&at(40.0, 60.0)), 250.0);
    }

    /// Volcano's own node-order table (`usage_test.go`): five nodes, two
    /// weightings; the two without a usable sample score 0.
    #[test]
    fn volcanos_node_order_table() {
        let nodes = [(30.0, 50.0), (60.0, 50.0), (60.0, 80.0)];
        let default = Usage::default();
        let memory_first = Usage {
            cpu_weight: 2,
            memory_weight: 8,
            ..Usage::default()
        };
        let scores = |p: &Usage| -> Vec<f64> {
            nodes
                .iter()
                .map(|(c, m)| (p.score(&at(*c, *m)) * 1e6).round() / 1e6)
                .collect()
        };
        assert_eq!(scores(&default), vec![300.0, 225.0, 150.0]);
        assert_eq!(scores(&memory_first), vec![270.0, 240.0, 120.0]);
    }

    /// Volcano's predicate table: above the threshold is refused, at it is not,
    /// CPU is named first.
    #[test]
    fn volcanos_predicate_table() {
        let p = Usage::default();
        let cpu = "node CPU usage is above the 80 percent threshold (usage)";
        let memory = "node memory usage is above the 80 percent threshold (usage)";
        assert_eq!(p.refusal(&at(81.0, 60.0)).as_deref(), Some(cpu));
        assert_eq!(p.refusal(&at(60.0, 81.0)).as_deref(), Some(memory));
        assert_eq!(p.refusal(&at(80.0, 79.0)), None);
        assert_eq!(p.refusal(&at(90.0, 81.0)).as_deref(), Some(cpu));
    }

    /// The configuration example of the usage plugin's guide, as written there.
    #[test]
    fn the_guides_configuration_loads_unchanged() {
        let text = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: usage
    enablePredicate: true # 是否开启负载过滤
    arguments:
      usage.weight: 5 # 插件在 NodeOrder 中的权重
      cpu.weight: 1 # CPU 评分权重
      memory.weight: 1 # 内存评分权重
      thresholds:
        cpu: 80 # CPU 使用率阈值 (%)
        mem: 80 # 内存使用率阈值 (%)
"#;
        let conf = crate::volcano::load_conf(text).unwrap();
        let tiers = crate::volcano::plugins::registry::build(&conf).unwrap();
        assert_eq!(tiers.names(), ["usage"]);
        let option = &conf.tiers[0].plugins[0];
        let args = Arguments::new("tiers[0].plugins[0]", "usage", &option.arguments);
        assert_eq!(Usage::from_args(&args).unwrap(), Usage::default());
        // Volcano's own example turns the predicate off: only the score is left.
        let off = text.replace("enablePredicate: true", "enablePredicate: false");
        let tiers =
            crate::volcano::plugins::registry::build(&crate::volcano::load_conf(&off).unwrap())
                .unwrap();
        use crate::placement::NodeJudge;
        assert!(!tiers.filters() && tiers.scores());
    }

    #[test]
    fn arguments_as_volcano_writes_them() {
        assert_eq!(built("      {}\n").unwrap(), Usage::default());
        let p = built(
            "      usage.weight: 5\n      cpu.weight: \"2\"\n      memory.weight: 8\n      thresholds:\n        cpu: 75\n        mem: 90.5\n",
        )
        .unwrap();
        assert_eq!(
            p,
            Usage {
                usage_weight: 5,
                cpu_weight: 2,
                memory_weight: 8,
                cpu_threshold: 75.0,
                memory_threshold: 90.5,
            }
        );
        // One threshold set, the other keeps its default.
        let p = built("      thresholds: {mem: 60}\n").unwrap();
        assert_eq!((p.cpu_threshold, p.memory_threshold), (80.0, 60.0));
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_key() {
        for (arguments, needle) in [
            (
                "      thresholds: {cpu: 120}\n",
                "thresholds.cpu: expected a percentage",
            ),
            (
                "      thresholds: {memory: 70}\n",
                "thresholds.memory: unknown threshold",
            ),
            (
                "      thresholds: {CPUUsageAvg.5m: 80}\n",
                "earlier per-period spelling",
            ),
            ("      thresholds: 80\n", "thresholds: expected a mapping"),
            ("      cpu.weight: -1\n", "cpu.weight: expected at least 0"),
            ("      cpu.weight: 0\n      memory.weight: 0\n", "both 0"),
            ("      usage.weigth: 5\n", "usage.weigth: unknown argument"),
            (
                "      estimator: {request_ratio: 0.7}\n",
                "estimator: estimating",
            ),
        ] {
            let e = built(arguments).unwrap_err().to_string();
            assert!(
                e.contains("(usage)") && e.contains(needle),
                "{arguments}: {e}"
            );
        }
    }
}
