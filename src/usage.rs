//! GPU usage: what pods hold on each GPU, and how a pod's containers add up.

use crate::device::mig::MigSlices;
use crate::device::model::PodDevices;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Usage of one GPU: slots taken, memory in MiB, compute in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GpuUsage {
    /// vGPU tasks on the GPU.
    pub used: u32,
    /// Memory booked, MiB.
    pub usedmem: u64,
    /// Compute booked, percent.
    pub usedcores: u32,
    /// On a MIG GPU, the slices its instances occupy.
    #[serde(skip_serializing_if = "MigSlices::is_empty")]
    pub mig: MigSlices,
}

impl GpuUsage {
    /// Adds another usage.
    pub fn add(&mut self, other: &GpuUsage) {
        self.used = self.used.saturating_add(other.used);
        self.usedmem = self.usedmem.saturating_add(other.usedmem);
        self.usedcores = self.usedcores.saturating_add(other.usedcores);
        self.mig.add(&other.mig);
    }

    /// Removes a usage added before (never below zero, so a bad record cannot wrap).
    pub fn sub(&mut self, other: &GpuUsage) {
        self.used = self.used.saturating_sub(other.used);
        self.usedmem = self.usedmem.saturating_sub(other.usedmem);
        self.usedcores = self.usedcores.saturating_sub(other.usedcores);
        self.mig.sub(&other.mig);
    }
}

/// What a pod holds per GPU while it lives. Init containers run one at a time before
/// the app containers, which run together, so per GPU:
/// `mem = max(max over init, sum over app)` (same for cores) and
/// `slots = max(1 if any init used it, number of app containers using it)`.
/// MIG slices likewise: per slice the larger of any one init container's holds and
/// the app containers' holds added up (so app instances sharing a slice show as a
/// slice held twice).
pub fn collapse_pod_usage(devices: &PodDevices, init_count: usize) -> BTreeMap<Arc<str>, GpuUsage> {
    #[derive(Default)]
    struct Acc {
        init_mem: u64,
        init_cores: u32,
        init_used: bool,
        app_mem: u64,
        app_cores: u32,
        app_count: u32,
        init_mig: MigSlices,
        app_mig: MigSlices,
    }
    let mut acc: BTreeMap<&Arc<str>, Acc> = BTreeMap::new();
    for (i, container) in devices.iter().enumerate() {
        let is_init = i < init_count;
        for d in container {
            let a = acc.entry(&d.uuid).or_default();
            if is_init {
                a.init_mem = a.init_mem.max(d.usedmem);
                a.init_cores = a.init_cores.max(d.usedcores);
                a.init_used = true;
                if let Some(hold) = &d.mig {
                    a.init_mig.max(&hold.slices());
                }
            } else {
                a.app_mem = a.app_mem.saturating_add(d.usedmem);
                a.app_cores = a.app_cores.saturating_add(d.usedcores);
                a.app_count += 1;
                if let Some(hold) = &d.mig {
                    a.app_mig.add(&hold.slices());
                }
            }
        }
    }
    acc.into_iter()
        .map(|(uuid, a)| {
            let used = a.app_count.max(u32::from(a.init_used)).max(1);
            let mut mig = a.init_mig;
            mig.max(&a.app_mig);
            (
                uuid.clone(),
                GpuUsage {
                    used,
                    usedmem: a.init_mem.max(a.app_mem),
                    usedcores: a.init_cores.max(a.app_cores),
                    mig,
                },
            )
        })
        .collect()
}

/// Sum of memory and cores over a collapsed usage, for namespace quotas.
pub fn usage_totals<'a>(usage: impl IntoIterator<Item = &'a GpuUsage>) -> (u64, u64) {
    usage.into_iter().fold((0, 0), |(m, c), u| {
        (
            m.saturating_add(u.usedmem),
            c.saturating_add(u64::from(u.usedcores)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::model::ContainerDevice;

    fn d(uuid: &str, mem: u64, cores: u32) -> ContainerDevice {
        ContainerDevice {
            uuid: uuid.into(),
            vendor: "NVIDIA".into(),
            usedmem: mem,
            usedcores: cores,
            mig: None,
        }
    }

    #[test]
    fn app_containers_add_up_and_each_takes_a_slot() {
        let pod = vec![vec![d("a", 1000, 10)], vec![d("a", 2000, 20)], vec![]];
        let u = collapse_pod_usage(&pod, 0);
        assert_eq!(
            u["a"],
            GpuUsage {
                used: 2,
                usedmem: 3000,
                usedcores: 30,
                ..Default::default()
            }
        );
    }

    #[test]
    fn init_containers_take_the_max_with_the_app_sum() {
        let pod = vec![
            vec![d("a", 5000, 50)],
            vec![d("a", 4000, 10)],
            vec![d("a", 100, 5), d("b", 300, 0)],
            vec![d("a", 100, 5)],
        ];
        let u = collapse_pod_usage(&pod, 2);
        assert_eq!(
            u["a"],
            GpuUsage {
                used: 2,
                usedmem: 5000,
                usedcores: 50,
                ..Default::default()
            }
        );
        assert_eq!(u["b"].used, 1);
        let init_only = collapse_pod_usage(&vec![vec![d("c", 10, 1)], vec![]], 1);
        assert_eq!(init_only["c"].used, 1);
        assert_eq!(usage_totals(u.values()), (5300, 50));
    }
}
