//! Volcano plugins a configuration may name that this scheduler refuses, each with
//! why and what to use instead. They are refused rather than ignored because each
//! changes admission, placement or eviction behaviour a user relies on: silently
//! running without one would look like it works.

/// Refused plugin names and the reason given to the user.
pub const REFUSED_PLUGINS: &[(&str, &str)] = &[
    (
        "deviceshare",
        "GPU sharing is this scheduler's own job: vGPU slices (nvidia.com/gpumem, nvidia.com/gpucores) are placed by the extender itself; remove the plugin",
    ),
    (
        "extender",
        "this scheduler is itself a kube-scheduler extender; list further extenders in the KubeSchedulerConfiguration instead",
    ),
    (
        "numaaware",
        "GPUs are kept on one NUMA node per pod with the nvidia.com/numa-bind annotation, and CPU alignment is the kubelet Topology Manager's; use those",
    ),
    (
        "rescheduling",
        "moving running pods off loaded nodes is not offered; use the Kubernetes descheduler instead",
    ),
    (
        "tdm",
        "time-sharing nodes with another system is not offered; lend GPUs between workloads with queues and the reclaim action instead (docs/tidal.md)",
    ),
];

/// Why `name` is refused, if it is.
pub fn refusal(name: &str) -> Option<&'static str> {
    REFUSED_PLUGINS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| *why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volcano::conf::SUPPORTED_PLUGINS;

    #[test]
    fn a_refused_plugin_is_not_supported() {
        for (name, _) in REFUSED_PLUGINS {
            assert!(!SUPPORTED_PLUGINS.contains(name), "{name}");
        }
    }

    #[test]
    fn the_refusal_says_why_and_what_to_use_instead() {
        for name in [
            "numaaware",
            "tdm",
            "deviceshare",
            "extender",
            "rescheduling",
        ] {
            let conf = format!("actions: enqueue\ntiers:\n- plugins:\n  - name: {name}\n");
            let err = crate::volcano::load_conf(&conf)
                .expect_err("refused")
                .to_string();
            let why = refusal(name).expect("listed");
            assert!(err.contains(why), "{err}");
            assert!(
                why.contains("instead") || why.contains("use ") || why.contains("remove"),
                "{name}: {why}"
            );
        }
    }
}
