//! Fitting a pod's containers onto one node's GPUs: the checks, the order GPUs are
//! tried in, and the reasons a node is rejected.

use crate::device::model::{ContainerDevice, GpuDevice, NVIDIA_VENDOR, PodDevices};
use crate::device::request::{ContainerRequest, PodRequest};
use crate::device::selectors::DeviceSelectors;
use crate::policy::{DeviceSortKey, GpuPolicyToken, PodPolicies, ScoringWeights};
use crate::usage::{GpuUsage, collapse_pod_usage, usage_totals};
use std::collections::{BTreeMap, BTreeSet};

/// Why one GPU (or a node) could not take a container. The names are HAMi's, and
/// are shown to users in `FailedNodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CardReason {
    AllocatedCardsInsufficientRequest,
    CardComputeUnitsExhausted,
    CardCordoned,
    CardInsufficientCore,
    CardInsufficientMemory,
    CardNotHealth,
    CardTimeSlicingExhausted,
    CardTypeMismatch,
    CardUuidMismatch,
    ExclusiveDeviceAllocateConflict,
    NumaNotFit,
    ResourceQuotaNotFit,
}

impl CardReason {
    /// The reason as HAMi spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllocatedCardsInsufficientRequest => "AllocatedCardsInsufficientRequest",
            Self::CardComputeUnitsExhausted => "CardComputeUnitsExhausted",
            Self::CardCordoned => "CardCordoned",
            Self::CardInsufficientCore => "CardInsufficientCore",
            Self::CardInsufficientMemory => "CardInsufficientMemory",
            Self::CardNotHealth => "CardNotHealth",
            Self::CardTimeSlicingExhausted => "CardTimeSlicingExhausted",
            Self::CardTypeMismatch => "CardTypeMismatch",
            Self::CardUuidMismatch => "CardUuidMismatch",
            Self::ExclusiveDeviceAllocateConflict => "ExclusiveDeviceAllocateConflict",
            Self::NumaNotFit => "NumaNotFit",
            Self::ResourceQuotaNotFit => "ResourceQuotaNotFit",
        }
    }
}

/// Node-level reason when the node has fewer matching GPUs than one container asks.
pub const NODE_INSUFFICIENT_DEVICE: &str = "NodeInsufficientDevice";

/// Per-reason counts for one container on one node.
#[derive(Debug, Default)]
struct Tally {
    counts: BTreeMap<CardReason, usize>,
}

impl Tally {
    fn add(&mut self, reason: CardReason, n: usize) {
        if n > 0 {
            *self.counts.entry(reason).or_default() += n;
        }
    }

    /// `"<n>/<total> <Reason>"` items joined by `", "`, ordered by count and then by
    /// name (HAMi sorts whole strings, which puts `10/12` before `2/12`).
    fn render(&self, total: usize) -> String {
        let mut items: Vec<(usize, CardReason)> =
            self.counts.iter().map(|(r, n)| (*n, *r)).collect();
        items.sort();
        items
            .iter()
            .map(|(n, r)| format!("{n}/{total} {}", r.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

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

fn is_vendor_device(d: &GpuDevice) -> bool {
    d.model.to_ascii_lowercase().contains("nvidia")
}

/// Fits the whole pod on one node, or says why not.
pub fn fit_pod(node: NodeView<'_>, pod: &FitRequest<'_>) -> Result<Placement, String> {
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
    let (mem, cores) = usage_totals(&collapse_pod_usage(&devices, pod.request.init_count));
    if !pod.quota.allows(mem, cores) {
        let total = node.devices.iter().filter(|d| is_vendor_device(d)).count();
        let mut tally = Tally::default();
        tally.add(CardReason::ResourceQuotaNotFit, total);
        return Err(tally.render(total));
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
) -> Result<Vec<ContainerDevice>, String> {
    let candidates: Vec<usize> = (0..node.devices.len())
        .filter(|&i| is_vendor_device(&node.devices[i]))
        .collect();
    let total = candidates.len();
    let nums = req.nums as usize;
    if nums > total {
        return Err(NODE_INSUFFICIENT_DEVICE.to_string());
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
    let mut selected: Vec<usize> = Vec::with_capacity(nums);
    let (mut sel_mem, mut sel_cores) = (0u64, 0u64);

    for &i in order.iter().rev() {
        let d = &node.devices[i];
        let u = &usage[i];
        if !d.health {
            tally.add(CardReason::CardNotHealth, 1);
            continue;
        }
        if node.cordoned.contains(&d.id) {
            tally.add(CardReason::CardCordoned, 1);
            continue;
        }
        if !pod.selectors.type_allowed(&d.model, &d.mode) {
            tally.add(CardReason::CardTypeMismatch, 1);
            continue;
        }
        if pod.selectors.numa_bind && !topology {
            if let Some(&last) = selected.last() {
                if node.devices[last].numa != d.numa {
                    tally.add(CardReason::NumaNotFit, selected.len());
                    selected.clear();
                    sel_mem = 0;
                    sel_cores = 0;
                }
            }
        }
        if !pod.selectors.uuid_allowed(&d.id) {
            tally.add(CardReason::CardUuidMismatch, 1);
            continue;
        }
        if d.count <= u.used {
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
        selected.push(i);
        if !topology {
            sel_mem += mem;
            sel_cores += u64::from(cores);
            if selected.len() == nums {
                break;
            }
        }
    }

    if topology && selected.len() > nums {
        selected = best_connected(node.devices, &selected, nums);
    }
    if selected.len() < nums {
        tally.add(
            CardReason::AllocatedCardsInsufficientRequest,
            selected.len(),
        );
        return Err(tally.render(total));
    }

    let mut picked = Vec::with_capacity(nums);
    for &i in &selected {
        let d = &node.devices[i];
        let mem = req.memory_on(d.devmem);
        let u = &mut usage[i];
        u.used += 1;
        u.usedmem += mem;
        u.usedcores += cores;
        picked.push(ContainerDevice {
            uuid: d.id.clone(),
            vendor: NVIDIA_VENDOR.to_string(),
            usedmem: mem,
            usedcores: cores,
        });
    }
    Ok(picked)
}

/// `topology-aware`: for one GPU, the candidate least connected to the others (keeps
/// well-connected cards together for multi-GPU jobs); for several, the combination
/// with the highest sum of pair scores. The first candidate wins ties.
fn best_connected(devices: &[GpuDevice], candidates: &[usize], n: usize) -> Vec<usize> {
    let pair = |a: usize, b: usize| -> i64 {
        devices[a]
            .pair_scores
            .get(&devices[b].id)
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
