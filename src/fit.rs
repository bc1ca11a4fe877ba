//! Fitting a pod's containers onto one node's GPUs: the checks, the order GPUs are
//! tried in, and the reasons a node is rejected.

use crate::device::model::{ContainerDevice, GpuDevice, NVIDIA_VENDOR, PodDevices, vendor_word};
use crate::device::request::{ContainerRequest, PodRequest};
use crate::device::selectors::DeviceSelectors;
use crate::policy::{DeviceSortKey, GpuPolicyToken, PodPolicies, ScoringWeights};
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use std::collections::{BTreeMap, BTreeSet};

mod mig;
mod pod_context;
pub use pod_context::PodContext;

/// Declares [`CardReason`] from one list, so its variants, its words and
/// [`CardReason::ALL`] cannot drift apart.
macro_rules! card_reasons {
    ($($reason:ident),* $(,)?) => {
        /// Why one GPU (or a node) could not take a container. The names are HAMi's, and
        /// are shown to users in `FailedNodes`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        pub enum CardReason {
            $(
                $reason,
            )*
        }

        impl CardReason {
            /// Every reason, in declaration order: what users may be shown.
            pub const ALL: &'static [CardReason] = &[$(CardReason::$reason),*];

            /// The reason as HAMi spells it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$reason => stringify!($reason),)*
                }
            }
        }
    };
}

card_reasons! {
    AllocatedCardsInsufficientRequest,
    CardComputeUnitsExhausted,
    CardCordoned,
    CardInsufficientCore,
    CardInsufficientMemory,
    CardMigTopologyInfeasible,
    CardNotHealth,
    CardTimeSlicingExhausted,
    CardTypeMismatch,
    CardUuidMismatch,
    ExclusiveDeviceAllocateConflict,
    NumaNotFit,
    ResourceQuotaNotFit,
}

/// Node-level reason when the node has fewer matching GPUs than one container asks.
pub const NODE_INSUFFICIENT_DEVICE: &str = "NodeInsufficientDevice";

/// Per-reason counts of the GPUs one container could not use on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Tally {
    counts: BTreeMap<CardReason, usize>,
}

impl Tally {
    fn add(&mut self, reason: CardReason, n: usize) {
        if n > 0 {
            *self.counts.entry(reason).or_default() += n;
        }
    }

    fn into_rejection(self, total: usize) -> FitRejection {
        FitRejection::Cards {
            counts: self.counts,
            total,
        }
    }
}

/// Why a pod does not fit a node's GPUs, in HAMi's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitRejection {
    /// The node has fewer GPUs of the vendor than one container asks for.
    InsufficientDevice,
    /// One container found too few usable GPUs: how many GPUs failed for which
    /// reason, out of the node's GPUs of the vendor.
    Cards {
        /// GPUs per reason.
        counts: BTreeMap<CardReason, usize>,
        /// The node's GPUs of the vendor.
        total: usize,
    },
}

impl FitRejection {
    /// How many GPUs failed for `reason` (0 for a node-level rejection).
    pub fn count(&self, reason: CardReason) -> usize {
        match self {
            FitRejection::InsufficientDevice => 0,
            FitRejection::Cards { counts, .. } => counts.get(&reason).copied().unwrap_or(0),
        }
    }
}

impl std::fmt::Display for FitRejection {
    /// HAMi's words: `NodeInsufficientDevice`, or `"<n>/<total> <Reason>"` items
    /// joined by `", "`, ordered by count and then by name (HAMi sorts whole
    /// strings, which puts `10/12` before `2/12`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FitRejection::InsufficientDevice => f.write_str(NODE_INSUFFICIENT_DEVICE),
            FitRejection::Cards { counts, total } => {
                let mut items: Vec<(usize, CardReason)> =
                    counts.iter().map(|(r, n)| (*n, *r)).collect();
                items.sort();
                let text = items
                    .iter()
                    .map(|(n, r)| format!("{n}/{total} {}", r.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ");
                f.write_str(&text)
            }
        }
    }
}

impl std::error::Error for FitRejection {}

/// Namespace quota headroom for vGPU memory (MiB) and cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaHeadroom {
    /// Memory limit and what the namespace already uses.
    pub memory: Option<(u64, u64)>,
    /// Cores limit and what the namespace already uses.
    pub cores: Option<(u64, u64)>,
}

impl QuotaHeadroom {
    /// Whether adding `mem` MiB and `cores` percent stays within the limits.
    pub fn allows(&self, mem: u64, cores: u64) -> bool {
        let ok = |l: Option<(u64, u64)>, add: u64| match l {
            Some((limit, used)) => used.saturating_add(add) <= limit,
            None => true,
        };
        ok(self.memory, mem) && ok(self.cores, cores)
    }
}

/// Everything about the pod the fit needs besides the node.
#[derive(Debug, Clone)]
pub struct FitRequest<'a> {
    /// Per-container requests.
    pub request: &'a PodRequest,
    /// Policies in force for the pod.
    pub policies: &'a PodPolicies,
    /// Type/UUID/NUMA selectors.
    pub selectors: &'a DeviceSelectors,
    /// The pod's namespace quota, if any.
    pub quota: QuotaHeadroom,
}

/// The devices and current usage of one node.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// Registered GPUs.
    pub devices: &'a [GpuDevice],
    /// Current usage, one entry per device in the same order.
    pub usage: &'a [GpuUsage],
    /// UUIDs listed in `hami.io/device-cordon`.
    pub cordoned: &'a BTreeSet<String>,
    /// Whether each device is an NVIDIA GPU.
    pub is_vendor: &'a [bool],
    /// Each device's model in lower case.
    pub model_lower: &'a [String],
}

/// A successful fit: the devices per container and the node's score before placing.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// One entry per container, init containers first.
    pub devices: PodDevices,
    /// Node utilisation score before this pod (0..=30).
    pub node_score: f64,
}

/// `10 x (used/count + usedcores/totalcore + usedmem/totalmem)` summed over the
/// node's GPUs; 0 when a denominator is 0.
pub fn node_score(devices: &[GpuDevice], usage: &[GpuUsage]) -> f64 {
    let (mut used, mut count, mut cores, mut total_cores, mut mem, mut total_mem) =
        (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
    for (d, u) in devices.iter().zip(usage) {
        used += f64::from(u.used);
        count += f64::from(d.count);
        cores += f64::from(u.usedcores);
        total_cores += f64::from(d.devcore);
        mem += u.usedmem as f64;
        total_mem += d.devmem as f64;
    }
    if count == 0.0 || total_cores == 0.0 || total_mem == 0.0 {
        return 0.0;
    }
    10.0 * (used / count + cores / total_cores + mem / total_mem)
}

/// Device score with the container's request included (HAMi's GPU score; matched by
/// vendor so real card models count the request, unlike HAMi's model comparison).
fn device_score(d: &GpuDevice, u: &GpuUsage, req: &ContainerRequest, w: &ScoringWeights) -> f64 {
    if d.count == 0 || d.devcore == 0 || d.devmem == 0 {
        return 0.0;
    }
    let slot = (1.0 + f64::from(u.used)) / f64::from(d.count);
    let core = (f64::from(req.coresreq) + f64::from(u.usedcores)) / f64::from(d.devcore);
    let mem = (req.memory_on(d.devmem) as f64 + u.usedmem as f64) / d.devmem as f64;
    10.0 * (f64::from(w.slot) * slot + f64::from(w.core) * core + f64::from(w.memory) * mem)
}

/// Fits the whole pod on one node, or says why not.
pub fn fit_pod(node: NodeView<'_>, pod: &FitRequest<'_>) -> Result<Placement, FitRejection> {
    let score = node_score(node.devices, node.usage);
    let mut devices: PodDevices = Vec::with_capacity(pod.request.containers.len());

    // Init containers run one at a time: each sees the node as it is now.
    for req in pod.request.init() {
        match req {
            Some(req) => {
                let mut usage = node.usage.to_vec();
                devices.push(fit_container(node, &mut usage, req, pod, 0, 0)?);
            }
            None => devices.push(Vec::new()),
        }
    }
    // App containers run together: each sees the ones placed before it.
    let mut usage = node.usage.to_vec();
    let (mut mem_so_far, mut cores_so_far) = (0u64, 0u64);
    for req in pod.request.app() {
        match req {
            Some(req) => {
                let picked = fit_container(node, &mut usage, req, pod, mem_so_far, cores_so_far)?;
                for d in &picked {
                    mem_so_far += d.usedmem;
                    cores_so_far += u64::from(d.usedcores);
                }
                devices.push(picked);
            }
            None => devices.push(Vec::new()),
        }
    }
    let (mem, cores) = usage_totals(collapse_pod_usage(&devices, pod.request.init_count).values());
    if !pod.quota.allows(mem, cores) {
        let total = node.is_vendor.iter().filter(|v| **v).count();
        let mut tally = Tally::default();
        tally.add(CardReason::ResourceQuotaNotFit, total);
        return Err(tally.into_rejection(total));
    }
    Ok(Placement {
        devices,
        node_score: score,
    })
}

/// Fits one container, updating `usage` with what it took.
fn fit_container(
    node: NodeView<'_>,
    usage: &mut [GpuUsage],
    req: &ContainerRequest,
    pod: &FitRequest<'_>,
    mem_before: u64,
    cores_before: u64,
) -> Result<Vec<ContainerDevice>, FitRejection> {
    let candidates: Vec<usize> = (0..node.devices.len())
        .filter(|&i| node.is_vendor.get(i).copied().unwrap_or(false))
        .collect();
    let total = candidates.len();
    let nums = req.nums as usize;
    // One MIG GPU can give a container several instances, so a MIG request may ask
    // for more GPUs than the node has.
    if nums > total && !mig::is_mig_request(&node, pod.selectors) {
        return Err(FitRejection::InsufficientDevice);
    }
    let policy = &pod.policies.gpu;
    let keys: Vec<DeviceSortKey> = node
        .devices
        .iter()
        .zip(usage.iter())
        .map(|(d, u)| DeviceSortKey {
            score: device_score(d, u, req, &pod.policies.weights),
            numa: d.numa,
            used: u.used,
            index: d.index,
        })
        .collect();
    let mut order = candidates;
    policy.sort_candidates(&mut order, &keys, pod.selectors.numa_bind);

    let mutex = policy.has(GpuPolicyToken::Mutex);
    let topology = policy.has(GpuPolicyToken::TopologyAware);
    let cores = req.cores();
    let mut tally = Tally::default();
    // Each GPU taken, with the instance when it is a MIG GPU.
    let mut selected: Vec<(usize, Option<mig::MigPick>)> = Vec::with_capacity(nums);
    let (mut sel_mem, mut sel_cores) = (0u64, 0u64);
    // Tried from the last in order; a MIG GPU that passed is tried once more.
    let mut next = order.len();
    let mut again: Option<usize> = None;

    loop {
        let i = match again.take() {
            Some(i) => i,
            None if next == 0 => break,
            None => {
                next -= 1;
                order[next]
            }
        };
        let d = &node.devices[i];
        let u = &usage[i];
        // With this container's instances on the GPU so far (only a MIG GPU is
        // looked at twice): they take slots and slices like anyone's.
        let held = held_with_picks(u, &selected, i);
        if !d.health {
            tally.add(CardReason::CardNotHealth, 1);
            continue;
        }
        if node.cordoned.contains(&*d.id) {
            tally.add(CardReason::CardCordoned, 1);
            continue;
        }
        let model = node.model_lower.get(i).map_or("", String::as_str);
        if !pod.selectors.type_allowed_lower(model, &d.mode)
            || !mig::card_allowed(d, &pod.selectors.card_names)
        {
            tally.add(CardReason::CardTypeMismatch, 1);
            continue;
        }
        if pod.selectors.numa_bind
            && !topology
            && let Some(&(last, _)) = selected.last()
            && node.devices[last].numa != d.numa
        {
            tally.add(CardReason::NumaNotFit, selected.len());
            selected.clear();
            sel_mem = 0;
            sel_cores = 0;
        }
        if !pod.selectors.uuid_allowed(&d.id) {
            tally.add(CardReason::CardUuidMismatch, 1);
            continue;
        }
        if d.count <= held.used {
            tally.add(CardReason::CardTimeSlicingExhausted, 1);
            continue;
        }
        if mutex && u.used > 0 {
            tally.add(CardReason::ExclusiveDeviceAllocateConflict, 1);
            continue;
        }
        let mem = req.memory_on(d.devmem);
        if !pod.quota.allows(
            mem_before + sel_mem + mem,
            cores_before + sel_cores + u64::from(cores),
        ) {
            tally.add(CardReason::ResourceQuotaNotFit, 1);
            continue;
        }
        // The memory and compute checks see the GPU as it was before this
        // container, as HAMi's do; a MIG instance is also held to what is left.
        if d.devmem.saturating_sub(u.usedmem) < mem {
            tally.add(CardReason::CardInsufficientMemory, 1);
            continue;
        }
        if d.devcore.saturating_sub(u.usedcores) < cores {
            tally.add(CardReason::CardInsufficientCore, 1);
            continue;
        }
        if d.devcore == 100 && cores == 100 && u.used > 0 {
            tally.add(CardReason::ExclusiveDeviceAllocateConflict, 1);
            continue;
        }
        if d.devcore != 0 && u.usedcores >= d.devcore && cores == 0 {
            tally.add(CardReason::CardComputeUnitsExhausted, 1);
            continue;
        }
        let pick = if d.is_mig() {
            match mig::pick_instance(d, &held, mem, &pod.selectors.card_names) {
                Some(pick) => Some(pick),
                None => {
                    tally.add(CardReason::CardMigTopologyInfeasible, 1);
                    continue;
                }
            }
        } else {
            None
        };
        let is_mig = pick.is_some();
        selected.push((i, pick));
        if !topology {
            sel_mem += mem;
            sel_cores += u64::from(cores);
            if selected.len() == nums {
                break;
            }
            if is_mig {
                again = Some(i);
            }
        }
    }

    if topology && selected.len() > nums {
        let indices: Vec<usize> = selected.iter().map(|(i, _)| *i).collect();
        let best = best_connected(node.devices, &indices, nums);
        selected = best
            .into_iter()
            .filter_map(|i| selected.iter().find(|(s, _)| *s == i).cloned())
            .collect();
    }
    if selected.len() < nums {
        tally.add(
            CardReason::AllocatedCardsInsufficientRequest,
            selected.len(),
        );
        return Err(tally.into_rejection(total));
    }

    let mut picked = Vec::with_capacity(nums);
    for (i, pick) in selected {
        let d = &node.devices[i];
        let taken = match &pick {
            Some(pick) => pick.usage(),
            None => GpuUsage {
                used: 1,
                usedmem: req.memory_on(d.devmem),
                usedcores: cores,
                ..GpuUsage::default()
            },
        };
        usage[i].add(&taken);
        picked.push(ContainerDevice {
            uuid: d.id.clone(),
            vendor: vendor_word(NVIDIA_VENDOR),
            usedmem: taken.usedmem,
            usedcores: taken.usedcores,
            mig: pick.map(|p| Box::new(p.hold)),
        });
    }
    Ok(picked)
}

/// `u` plus what this container already took of GPU `i`.
fn held_with_picks(u: &GpuUsage, selected: &[(usize, Option<mig::MigPick>)], i: usize) -> GpuUsage {
    let mut held = *u;
    for (_, pick) in selected.iter().filter(|(s, _)| *s == i) {
        if let Some(pick) = pick {
            held.add(&pick.usage());
        }
    }
    held
}

/// `topology-aware`: for one GPU, the candidate least connected to the others (keeps
/// well-connected cards together for multi-GPU jobs); for several, the combination
/// with the highest sum of pair scores. The first candidate wins ties.
fn best_connected(devices: &[GpuDevice], candidates: &[usize], n: usize) -> Vec<usize> {
    let pair = |a: usize, b: usize| -> i64 {
        devices[a]
            .pair_scores
            .get(&*devices[b].id)
            .copied()
            .unwrap_or(0)
    };
    if n == 1 {
        let mut best = candidates[0];
        let mut best_sum = i64::MAX;
        for &c in candidates {
            let sum: i64 = candidates
                .iter()
                .filter(|&&o| o != c)
                .map(|&o| pair(c, o))
                .sum();
            if sum < best_sum {
                best_sum = sum;
                best = c;
            }
        }
        return vec![best];
    }
    let mut best: Option<(i64, Vec<usize>)> = None;
    let mut combo: Vec<usize> = (0..n).collect();
    loop {
        let chosen: Vec<usize> = combo.iter().map(|&k| candidates[k]).collect();
        let mut sum = 0i64;
        for (x, &a) in chosen.iter().enumerate() {
            for &b in &chosen[x + 1..] {
                sum += pair(a, b);
            }
        }
        if best.as_ref().is_none_or(|(s, _)| sum > *s) {
            best = Some((sum, chosen));
        }
        // Next combination in lexicographic order.
        let m = candidates.len();
        let mut k = n;
        while k > 0 && combo[k - 1] == m - n + k - 1 {
            k -= 1;
        }
        if k == 0 {
            break;
        }
        combo[k - 1] += 1;
        for j in k..n {
            combo[j] = combo[j - 1] + 1;
        }
    }
    best.map(|(_, c)| c).unwrap_or_default()
}

#[cfg(test)]
mod hami_mig_tests;
#[cfg(test)]
mod hami_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{GpuPolicy, NodePolicy, PodPolicies, ScoringWeights};
    use crate::rank_index::{GpuRoom, may_fit};

    fn gpu(id: &str, index: u32, numa: i32) -> GpuDevice {
        GpuDevice {
            id: id.into(),
            index,
            count: 10,
            devmem: 8000,
            devcore: 100,
            model: "NVIDIA A100-SXM4-80GB".into(),
            numa,
            health: true,
            mode: "hami-core".into(),
            pair_scores: Default::default(),
            mig_profiles: Vec::new(),
        }
    }

    fn used(used: u32, mem: u64, cores: u32) -> GpuUsage {
        GpuUsage {
            used,
            usedmem: mem,
            usedcores: cores,
            ..Default::default()
        }
    }

    fn request(nums: u32, mem: u64, cores: u32) -> PodRequest {
        PodRequest {
            containers: vec![Some(ContainerRequest {
                nums,
                memreq: mem,
                mem_percentage: None,
                coresreq: cores,
            })],
            init_count: 0,
        }
    }

    fn policies(gpu: &str) -> PodPolicies {
        PodPolicies {
            node: NodePolicy::Binpack,
            gpu: GpuPolicy::parse(gpu),
            weights: ScoringWeights::default(),
        }
    }

    fn fit(
        devices: &[GpuDevice],
        usage: &[GpuUsage],
        req: &PodRequest,
        gpu_policy: &str,
        selectors: &DeviceSelectors,
        quota: QuotaHeadroom,
    ) -> Result<Placement, String> {
        let cordoned = BTreeSet::new();
        let p = policies(gpu_policy);
        let model_lower: Vec<String> = devices.iter().map(|d| d.model.to_lowercase()).collect();
        let is_vendor: Vec<bool> = model_lower.iter().map(|m| m.contains("nvidia")).collect();
        fit_pod(
            NodeView {
                devices,
                usage,
                cordoned: &cordoned,
                is_vendor: &is_vendor,
                model_lower: &model_lower,
            },
            &FitRequest {
                request: req,
                policies: &p,
                selectors,
                quota,
            },
        )
        .map_err(|e| e.to_string())
    }

    fn uuids(p: &Placement) -> Vec<&str> {
        p.devices.iter().flatten().map(|d| &*d.uuid).collect()
    }

    #[test]
    fn rejections_are_typed_and_counted_per_reason() {
        let devices = [gpu("a", 0, 0), gpu("b", 1, 0), gpu("c", 2, 0)];
        let usage = [used(10, 0, 0), used(0, 7000, 0), used(0, 0, 0)];
        let cordoned = BTreeSet::new();
        let model_lower: Vec<String> = devices.iter().map(|d| d.model.to_lowercase()).collect();
        let is_vendor = vec![true; 3];
        let rejection = fit_pod(
            NodeView {
                devices: &devices,
                usage: &usage,
                cordoned: &cordoned,
                is_vendor: &is_vendor,
                model_lower: &model_lower,
            },
            &FitRequest {
                request: &request(3, 2000, 0),
                policies: &policies("spread"),
                selectors: &DeviceSelectors::default(),
                quota: QuotaHeadroom::default(),
            },
        )
        .unwrap_err();
        assert_eq!(rejection.count(CardReason::CardTimeSlicingExhausted), 1);
        assert_eq!(rejection.count(CardReason::CardInsufficientMemory), 1);
        assert_eq!(
            rejection.count(CardReason::AllocatedCardsInsufficientRequest),
            1
        );
        assert_eq!(
            rejection.to_string(),
            "1/3 AllocatedCardsInsufficientRequest, 1/3 CardInsufficientMemory, 1/3 CardTimeSlicingExhausted"
        );
        assert_eq!(
            FitRejection::InsufficientDevice.to_string(),
            NODE_INSUFFICIENT_DEVICE
        );
    }

    /// hami-compat §16: node scores 3.0 and 8.0; device choice by GPU policy.
    #[test]
    fn worked_example() {
        let node1 = [gpu("device1", 0, 0), gpu("device2", 1, 0)];
        let node1_usage = [used(1, 2000, 25), used(0, 0, 0)];
        let node2 = [gpu("device3", 0, 0), gpu("device4", 1, 0)];
        let node2_usage = [used(0, 0, 0), used(1, 6000, 75)];
        let req = request(1, 1000, 20);
        let none = DeviceSelectors::default();
        let q = QuotaHeadroom::default();
        let n1 = fit(&node1, &node1_usage, &req, "binpack", &none, q).unwrap();
        let n2 = fit(&node2, &node2_usage, &req, "binpack", &none, q).unwrap();
        assert!((n1.node_score - 3.0).abs() < 1e-9, "{}", n1.node_score);
        assert!((n2.node_score - 8.0).abs() < 1e-9, "{}", n2.node_score);
        assert_eq!(uuids(&n2), vec!["device4"]);
        assert_eq!(
            crate::device::allocation_codec::encode_pod_devices(&n2.devices),
            "device4,NVIDIA,1000,20:;"
        );
        assert_eq!(
            uuids(&fit(&node1, &node1_usage, &req, "spread", &none, q).unwrap()),
            vec!["device2"]
        );
        assert_eq!(
            uuids(&fit(&node2, &node2_usage, &req, "spread", &none, q).unwrap()),
            vec!["device3"]
        );
        assert_eq!(
            uuids(&fit(&node1, &node1_usage, &req, "binpack", &none, q).unwrap()),
            vec!["device1"]
        );
    }

    #[test]
    fn reasons_are_counted_per_device_in_hami_format() {
        let devices = [
            gpu("a", 0, 0),
            gpu("b", 1, 0),
            gpu("c", 2, 0),
            gpu("d", 3, 0),
        ];
        let usage = [
            used(1, 7500, 0),
            used(10, 0, 0),
            used(1, 0, 90),
            used(0, 0, 0),
        ];
        let none = DeviceSelectors::default();
        let err = fit(
            &devices,
            &usage,
            &request(4, 1000, 20),
            "spread",
            &none,
            QuotaHeadroom::default(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "1/4 AllocatedCardsInsufficientRequest, 1/4 CardInsufficientCore, 1/4 CardInsufficientMemory, 1/4 CardTimeSlicingExhausted"
        );
        assert_eq!(
            fit(
                &devices,
                &usage,
                &request(5, 1, 0),
                "spread",
                &none,
                QuotaHeadroom::default()
            )
            .unwrap_err(),
            NODE_INSUFFICIENT_DEVICE
        );
    }

    #[test]
    fn exclusive_card_and_compute_exhaustion() {
        let devices = [gpu("a", 0, 0)];
        let none = DeviceSelectors::default();
        let q = QuotaHeadroom::default();
        let err = fit(
            &devices,
            &[used(1, 10, 0)],
            &request(1, 10, 100),
            "spread",
            &none,
            q,
        )
        .unwrap_err();
        assert!(err.contains("ExclusiveDeviceAllocateConflict"), "{err}");
        let err = fit(
            &devices,
            &[used(1, 10, 100)],
            &request(1, 10, 0),
            "spread",
            &none,
            q,
        )
        .unwrap_err();
        assert!(err.contains("CardComputeUnitsExhausted"), "{err}");
        let err = fit(
            &devices,
            &[used(1, 10, 0)],
            &request(1, 10, 0),
            "mutex",
            &none,
            q,
        )
        .unwrap_err();
        assert!(err.contains("ExclusiveDeviceAllocateConflict"), "{err}");
    }

    #[test]
    fn numa_bind_keeps_a_container_on_one_numa_node() {
        let devices = [gpu("a", 0, 0), gpu("b", 1, 1), gpu("c", 2, 1)];
        let usage = [used(0, 0, 0); 3];
        let mut ann = std::collections::BTreeMap::new();
        ann.insert("nvidia.com/numa-bind".to_string(), "true".to_string());
        let numa = DeviceSelectors::from_annotations(&ann);
        let p = fit(
            &devices,
            &usage,
            &request(2, 100, 0),
            "spread",
            &numa,
            QuotaHeadroom::default(),
        )
        .unwrap();
        let mut got = uuids(&p);
        got.sort();
        assert_eq!(got, vec!["b", "c"]);
        let devices = [gpu("a", 0, 0), gpu("b", 1, 1)];
        let err = fit(
            &devices,
            &[used(0, 0, 0); 2],
            &request(2, 100, 0),
            "spread",
            &numa,
            QuotaHeadroom::default(),
        )
        .unwrap_err();
        assert!(err.contains("NumaNotFit"), "{err}");
    }

    #[test]
    fn quota_blocks_with_its_reason() {
        let devices = [gpu("a", 0, 0)];
        let quota = QuotaHeadroom {
            memory: Some((1500, 1000)),
            cores: None,
        };
        let none = DeviceSelectors::default();
        let err = fit(
            &devices,
            &[used(0, 0, 0)],
            &request(1, 1000, 0),
            "spread",
            &none,
            quota,
        )
        .unwrap_err();
        assert_eq!(err, "1/1 ResourceQuotaNotFit");
        assert!(
            fit(
                &devices,
                &[used(0, 0, 0)],
                &request(1, 500, 0),
                "spread",
                &none,
                quota
            )
            .is_ok()
        );
    }

    #[test]
    fn topology_aware_picks_best_connected_pair() {
        let mut devices = vec![
            gpu("a", 0, 0),
            gpu("b", 1, 0),
            gpu("c", 2, 0),
            gpu("d", 3, 0),
        ];
        let links = [
            ("a", "b", 10),
            ("c", "d", 100),
            ("a", "c", 4),
            ("b", "d", 5),
        ];
        for (x, y, s) in links {
            for d in devices.iter_mut() {
                if &*d.id == x {
                    d.pair_scores.insert(y.into(), s);
                }
                if &*d.id == y {
                    d.pair_scores.insert(x.into(), s);
                }
            }
        }
        let usage = [used(0, 0, 0); 4];
        let none = DeviceSelectors::default();
        let p = fit(
            &devices,
            &usage,
            &request(2, 100, 0),
            "topology-aware",
            &none,
            QuotaHeadroom::default(),
        )
        .unwrap();
        let mut got = uuids(&p);
        got.sort();
        assert_eq!(got, vec!["c", "d"]);
        // One GPU: the least connected card, keeping the c-d pair free.
        let p = fit(
            &devices,
            &usage,
            &request(1, 100, 0),
            "topology-aware",
            &none,
            QuotaHeadroom::default(),
        )
        .unwrap();
        assert_eq!(uuids(&p), vec!["a"]);
    }

    #[test]
    fn app_containers_accumulate_and_init_containers_do_not() {
        let devices = [gpu("a", 0, 0)];
        let c = |mem| {
            Some(ContainerRequest {
                nums: 1,
                memreq: mem,
                mem_percentage: None,
                coresreq: 0,
            })
        };
        let none = DeviceSelectors::default();
        let q = QuotaHeadroom::default();
        let both = PodRequest {
            containers: vec![c(5000), c(5000)],
            init_count: 0,
        };
        assert_eq!(
            fit(&devices, &[used(0, 0, 0)], &both, "spread", &none, q).unwrap_err(),
            "1/1 CardInsufficientMemory"
        );
        let init_then_app = PodRequest {
            containers: vec![c(6000), None, c(6000)],
            init_count: 1,
        };
        let p = fit(
            &devices,
            &[used(0, 0, 0)],
            &init_then_app,
            "spread",
            &none,
            q,
        )
        .unwrap();
        assert_eq!(p.devices.len(), 3);
        assert!(p.devices[1].is_empty());
    }

    fn arbitrary_gpu() -> impl proptest::strategy::Strategy<Value = (GpuDevice, GpuUsage)> {
        use proptest::prelude::*;
        (
            1u32..=4,
            1000u64..=16000,
            any::<bool>(),
            0u32..=5,
            0u64..=16000,
            0u32..=100,
        )
            .prop_map(|(count, devmem, sick, taken, mem, cores)| {
                let mut d = gpu("g", 0, 0);
                d.count = count;
                d.devmem = devmem;
                d.health = !sick;
                (d, used(taken, mem, cores))
            })
    }

    proptest::proptest! {
        /// The screen ranking uses to skip nodes never skips a node the full fit
        /// would accept, for any policy, usage or request shape.
        #[test]
        fn may_fit_never_rejects_a_node_that_fits(
            gpus in proptest::collection::vec(arbitrary_gpu(), 1..=8),
            containers in proptest::collection::vec(
                proptest::option::of((1u32..=4, 0u64..=12000, proptest::option::of(1u32..=100), 0u32..=120)),
                1..=3),
            init_count in 0usize..=1,
            gpu_policy in proptest::sample::select(vec!["binpack", "spread", "topology-aware", "binpack,numa"]),
        ) {
            let mut devices: Vec<GpuDevice> = Vec::new();
            let mut usage = Vec::new();
            for (i, (mut d, u)) in gpus.into_iter().enumerate() {
                d.id = format!("GPU-{i}").into();
                d.index = i as u32;
                d.numa = (i % 2) as i32;
                devices.push(d);
                usage.push(u);
            }
            let req = PodRequest {
                init_count: init_count.min(containers.len()),
                containers: containers
                    .into_iter()
                    .map(|c| c.map(|(nums, memreq, pct, coresreq)| ContainerRequest {
                        nums,
                        memreq: if pct.is_some() { 0 } else { memreq },
                        mem_percentage: pct,
                        coresreq,
                    }))
                    .collect(),
            };
            let cordoned = BTreeSet::new();
            let model_lower: Vec<String> = devices.iter().map(|d| d.model.to_lowercase()).collect();
            let is_vendor = vec![true; devices.len()];
            let view = NodeView {
                devices: &devices,
                usage: &usage,
                cordoned: &cordoned,
                is_vendor: &is_vendor,
                model_lower: &model_lower,
            };
            let fitted = fit(&devices, &usage, &req, gpu_policy, &DeviceSelectors::default(), QuotaHeadroom::default());
            let rooms: Vec<GpuRoom> = devices
                .iter()
                .zip(&usage)
                .zip(view.is_vendor)
                .map(|((d, u), v)| GpuRoom::of(d, u, *v))
                .collect();
            if fitted.is_ok() {
                proptest::prop_assert!(may_fit(&rooms, &req), "fits but screened out: {:?}", fitted);
            }
        }
    }
}
