//! Every plugin this scheduler runs, by name. Adding a plugin is one file under
//! `volcano::plugins` and one line here; a name missing here is refused when the
//! configuration loads. The framework builds tiers from this table and knows no
//! plugin by name.

use super::conformance;
use crate::volcano::conf::{ConfError, SchedulerConf};
use crate::volcano::framework::Tiers;
use crate::volcano::framework::registry::{Constructor, build_tiers};
use crate::volcano::framework::victims::EvictionGuard;

/// Every plugin's constructor, by the name a configuration lists it under.
pub const REGISTRY: &[(&str, Constructor)] = &[
    ("priority", super::priority::build),
    ("gang", super::gang::build),
    ("conformance", conformance::build),
    ("proportion", super::proportion::build),
    ("capacity", super::capacity::build),
    ("overcommit", super::overcommit::build),
    ("capacity-card", super::capacity_card::build),
    ("binpack", super::binpack::build),
    ("drf", super::drf::build),
    ("pdb", super::pdb::build),
    ("cdp", super::cdp::build),
    ("predicates", super::predicates::build),
    ("nodeorder", super::nodeorder::build),
    ("nodegroup", super::nodegroup::build),
    ("resourcequota", super::resourcequota::build),
    ("sla", super::sla::build),
    ("resource-strategy-fit", super::resource_strategy_fit::build),
    (
        "network-topology-aware",
        super::network_topology_aware::build,
    ),
    ("task-topology", super::task_topology::build),
    ("usage", super::usage::build),
];

/// Rules on victims that hold even when the plugin expressing them is not
/// listed: evicting a pod the cluster needs to run is never a configuration
/// choice (`conformance` still answers through its preemptable and reclaimable
/// hooks, as in Volcano, when it is listed).
pub const EVICTION_GUARDS: &[EvictionGuard] = &[conformance::may_evict_task];

/// Builds the configured plugins, tier by tier (see [`build_tiers`]).
pub fn build(conf: &SchedulerConf) -> Result<Tiers, ConfError> {
    build_tiers(REGISTRY, EVICTION_GUARDS, conf)
}

/// No plugin, but the eviction guards: what a session runs with when a
/// configuration fails to build, so that it still never evicts what they protect.
pub fn without_plugins() -> Tiers {
    Tiers::default().with_eviction_guards(EVICTION_GUARDS)
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
    fn every_plugin_of_the_default_configuration_builds() {
        let conf = SchedulerConf::default();
        let listed: Vec<&str> = conf
            .tiers
            .iter()
            .flat_map(|t| &t.plugins)
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(build(&conf).unwrap().names(), listed);
    }

    #[test]
    fn a_session_without_plugins_still_never_evicts_kube_system_pods() {
        use crate::volcano::framework::testing::{gang_key, task};
        let mut system = task(&gang_key("dns"), "dns-0", Default::default());
        system.namespace = "kube-system".into();
        let user = task(&gang_key("train"), "train-0", Default::default());
        let tiers = without_plugins();
        assert!(tiers.names().is_empty());
        assert!(!tiers.guards_let_evict(&system));
        assert!(tiers.guards_let_evict(&user));
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
