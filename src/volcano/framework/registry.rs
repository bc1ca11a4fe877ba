//! How plugins are registered: what a plugin's constructor reads, and how the
//! configured tiers are built from a table of constructors by name. The table
//! itself belongs to the plugins (`registry` in `volcano::plugins`), so the framework
//! depends on no plugin; a name missing from the table is refused when the
//! configuration loads.

use super::arguments::Arguments;
use super::plugin::Plugin;
use super::tiers::{Slot, Tiers};
use super::victims::EvictionGuard;
use crate::volcano::conf::{ConfError, PluginOption, SchedulerConf};

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

/// Builds the configured plugins, tier by tier, from `constructors` (plugins by
/// name), with `eviction_guards` in force whatever the configuration lists.
/// Arguments are checked here, so a configuration with a bad argument is refused
/// when it loads, naming the plugin and the key.
pub fn build_tiers(
    constructors: &[(&str, Constructor)],
    eviction_guards: &'static [EvictionGuard],
    conf: &SchedulerConf,
) -> Result<Tiers, ConfError> {
    let mut tiers = Vec::new();
    for (ti, tier) in conf.tiers.iter().enumerate() {
        let mut slots = Vec::new();
        for (pi, option) in tier.plugins.iter().enumerate() {
            let at = format!("tiers[{ti}].plugins[{pi}]");
            let Some((_, constructor)) = constructors.iter().find(|(n, _)| *n == option.name)
            else {
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
    Ok(Tiers::new(tiers).with_eviction_guards(eviction_guards))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_missing_from_the_table_is_refused_as_unknown() {
        let conf = SchedulerConf::parse("actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n")
            .expect("parses");
        let e = build_tiers(&[], &[], &conf)
            .expect_err("refused")
            .to_string();
        assert!(
            e.contains("tiers[0].plugins[0]: unknown plugin \"gang\""),
            "{e}"
        );
    }
}
