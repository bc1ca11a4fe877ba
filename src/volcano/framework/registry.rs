//! Plugins by name. Adding a plugin is one file under `volcano::plugins` and one
//! line here; a name missing here is refused when the configuration loads.

use super::arguments::Arguments;
use super::plugin::Plugin;
use super::tiers::{Slot, Tiers};
use crate::volcano::conf::{ConfError, PluginOption, SchedulerConf};
use crate::volcano::plugins;

/// What a plugin's constructor reads.
#[derive(Debug, Clone, Copy)]
pub struct BuildContext<'a> {
    /// Its `arguments:`.
    pub args: Arguments<'a>,
    /// Its whole entry (switches, `enableHierarchy`).
    pub option: &'a PluginOption,
    /// The whole configuration (plugins that defer to others look there).
    pub conf: &'a SchedulerConf,
}

/// Builds a plugin from its entry: `Ok(None)` when it is listed but has nothing to
/// do (it defers to another plugin).
pub type Constructor = fn(&BuildContext<'_>) -> Result<Option<Box<dyn Plugin>>, ConfError>;

/// Every plugin this scheduler runs.
pub const REGISTRY: &[(&str, Constructor)] = &[
    ("priority", plugins::priority::build),
    ("gang", plugins::gang::build),
    ("conformance", plugins::conformance::build),
    ("proportion", plugins::proportion::build),
    ("capacity", plugins::capacity::build),
    ("overcommit", plugins::overcommit::build),
    ("capacity-card", plugins::capacity_card::build),
    ("binpack", plugins::binpack::build),
    ("drf", plugins::drf::build),
    ("pdb", plugins::pdb::build),
    ("cdp", plugins::cdp::build),
    ("predicates", plugins::predicates::build),
    ("nodeorder", plugins::nodeorder::build),
    ("nodegroup", plugins::nodegroup::build),
    ("resourcequota", plugins::resourcequota::build),
    ("sla", plugins::sla::build),
    (
        "resource-strategy-fit",
        plugins::resource_strategy_fit::build,
    ),
    (
        "network-topology-aware",
        plugins::network_topology_aware::build,
    ),
    ("task-topology", plugins::task_topology::build),
    ("usage", plugins::usage::build),
];

/// Builds the configured plugins, tier by tier. Arguments are checked here, so a
/// configuration with a bad argument is refused when it loads, naming the plugin
/// and the key.
pub fn build(conf: &SchedulerConf) -> Result<Tiers, ConfError> {
    let mut tiers = Vec::new();
    for (ti, tier) in conf.tiers.iter().enumerate() {
        let mut slots = Vec::new();
        for (pi, option) in tier.plugins.iter().enumerate() {
            let at = format!("tiers[{ti}].plugins[{pi}]");
            let Some((_, constructor)) = REGISTRY.iter().find(|(n, _)| *n == option.name) else {
                return Err(ConfError::UnknownPlugin {
                    at,
                    name: option.name.clone(),
                });
            };
            let context = BuildContext {
                args: Arguments::new(&at, &option.name, &option.arguments),
                option,
                conf,
            };
            if let Some(plugin) = constructor(&context)? {
                slots.push(Slot::new(plugin, option.clone()));
            }
        }
        tiers.push(slots);
    }
    Ok(Tiers::new(tiers))
}

/// Parses `volcano-scheduler.conf` and checks every plugin's arguments.
pub fn load(text: &str) -> Result<SchedulerConf, ConfError> {
    let conf = SchedulerConf::parse(text)?;
    build(&conf)?;
    Ok(conf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SUPPORTED_PLUGINS;

    #[test]
    fn every_supported_name_has_a_constructor() {
        let names: Vec<&str> = REGISTRY.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, SUPPORTED_PLUGINS);
    }

    #[test]
    fn the_default_configuration_builds() {
        let tiers = build(&SchedulerConf::default()).unwrap();
        assert_eq!(
            tiers.names(),
            vec![
                "priority",
                "gang",
                "conformance",
                "overcommit",
                "drf",
                "predicates",
                "proportion",
                "nodeorder"
            ]
        );
    }

    #[test]
    fn filter_is_judged_without_the_plugins_that_repeat_kube_scheduler() {
        use crate::placement::NodeJudge;
        let planner = build(&SchedulerConf::default()).unwrap();
        assert!(planner.filters(), "the planner runs predicates");
        let filter = planner.for_filter();
        assert!(!filter.filters(), "/filter does not");
        assert!(!filter.names().contains(&"predicates"));
    }
}
