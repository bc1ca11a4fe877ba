//! What a task costs its queue: its CPU and memory requests plus its vGPUs, counted
//! under the vGPU resource names, and the physical cards it holds (capacity-card).

use crate::device::card_name::{CardNames, card_type, mig_card_type};
use crate::device::mig::{MigHold, MigPlacement};
use crate::device::model::PodDevices;
use crate::fit::PodContext;
use crate::ledger::NodeEntry;
use crate::resources::{Resources, VgpuDims};
use crate::usage::collapse_pod_usage;
use std::collections::{BTreeMap, BTreeSet};

/// A task's charge and the cards it holds.
pub type Charge = (Resources, BTreeMap<String, i64>);

/// What a placement takes, as vGPU dimensions, and the cards it holds (card types
/// from the node's registration): each distinct whole GPU once, each MIG instance
/// once under its MIG card type (see `card_quota`), charged under the pod's
/// `volcano.sh/card.name` entry that covers it when it names some.
///
/// A MIG instance is charged the memory and compute its container asked for
/// (`ask`, the pod's parsed request), like any vGPU, not its profile's: queue
/// shares are worked out from what pods ask, and a profile rounds the ask up
/// (10 GB for 9 GB), which would put every MIG pod past its queue's share.
pub fn placement_charge(
    dims: &VgpuDims,
    node: Option<&NodeEntry>,
    devices: &PodDevices,
    init_count: usize,
    ask: Option<&PodContext>,
) -> Charge {
    let gpu_of = |uuid: &str| node.and_then(|e| e.devices.iter().find(|g| &*g.id == uuid));
    let charged_devices: std::borrow::Cow<'_, PodDevices> = match ask {
        Some(ctx) if devices.iter().flatten().any(|d| d.mig.is_some()) => {
            let mut asked = devices.clone();
            for (container, req) in asked.iter_mut().zip(&ctx.request.containers) {
                let Some(req) = req else {
                    continue;
                };
                for d in container.iter_mut().filter(|d| d.mig.is_some()) {
                    d.usedmem = req.memory_on(gpu_of(&d.uuid).map_or(0, |g| g.devmem));
                    d.usedcores = req.cores();
                }
            }
            std::borrow::Cow::Owned(asked)
        }
        _ => std::borrow::Cow::Borrowed(devices),
    };
    let usage = collapse_pod_usage(&charged_devices, init_count);
    let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
    for u in usage.values() {
        count += i64::from(u.used);
        mem += u.usedmem as i64;
        cores += i64::from(u.usedcores);
    }
    let no_names = CardNames::default();
    let names = ask.map_or(&no_names, |ctx| &ctx.selectors.card_names);
    // A card is a GPU, or an instance on a MIG GPU (by placement: an init
    // container's instance the app container takes over is one card).
    let mut held: BTreeSet<(&str, Option<MigPlacement>)> = BTreeSet::new();
    let mut cards: BTreeMap<String, i64> = BTreeMap::new();
    for d in devices.iter().flatten() {
        let Some(gpu) = gpu_of(&d.uuid) else {
            continue;
        };
        let instance = match d.mig.as_deref() {
            Some(MigHold::Instance {
                profile, placement, ..
            }) => Some((profile, *placement)),
            _ => None,
        };
        if !held.insert((&*d.uuid, instance.map(|(_, at)| at))) {
            continue;
        }
        let card = match instance {
            Some((profile, _)) => mig_card_type(&gpu.model, profile),
            None => card_type(&gpu.model),
        };
        let charged = names.covering(&card).map(str::to_string).unwrap_or(card);
        *cards.entry(charged).or_default() += 1;
    }
    let mut r = Resources::default();
    r.set(&dims.count, count * 1000);
    r.set(&dims.memory, mem * 1000);
    r.set(&dims.cores, cores * 1000);
    (r, cards)
}

/// What a vGPU request will take, estimated before it is placed. Memory asked as
/// a share of the card (`nvidia.com/gpumem-percentage`, or nothing: the whole
/// card) counts that share of `largest_card_mib`, the most it can take once
/// placed: queue shares computed from requests must hold what placements will be
/// charged, or a queue whose pods name no memory would deserve none and be
/// refused its first whole card.
pub fn request_charge(dims: &VgpuDims, ctx: &PodContext, largest_card_mib: u64) -> Resources {
    let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
    for c in ctx.request.app().iter().flatten() {
        let n = i64::from(c.nums);
        count += n;
        mem += c.memory_on(largest_card_mib) as i64 * n;
        cores += i64::from(c.cores()) * n;
    }
    let mut r = Resources::default();
    r.set(&dims.count, count * 1000);
    if mem > 0 {
        r.set(&dims.memory, mem * 1000);
    }
    if cores > 0 {
        r.set(&dims.cores, cores * 1000);
    }
    r
}

/// Whether the request's memory depends on the card it lands on.
pub fn asks_share_of_card(ctx: &PodContext) -> bool {
    ctx.request
        .app()
        .iter()
        .flatten()
        .any(|c| c.memreq == 0 && c.mem_percentage.is_some())
}

/// The largest memory (MiB) of any usable GPU among `nodes`.
pub fn largest_card_mib<'a>(nodes: impl IntoIterator<Item = &'a NodeEntry>) -> u64 {
    nodes
        .into_iter()
        .filter(|e| e.unusable_reason.is_none())
        .flat_map(|e| e.devices.iter().map(|d| d.devmem))
        .max()
        .unwrap_or(0)
}

/// Everything the usable nodes offer as vGPUs.
pub fn vgpu_total<'a>(
    dims: &VgpuDims,
    nodes: impl IntoIterator<Item = &'a NodeEntry>,
) -> Resources {
    let (mut count, mut mem, mut cores) = (0i64, 0i64, 0i64);
    for entry in nodes {
        if entry.unusable_reason.is_some() {
            continue;
        }
        for d in &entry.devices {
            count += i64::from(d.count);
            mem += d.devmem as i64;
            cores += i64::from(d.devcore);
        }
    }
    let mut vgpu = Resources::default();
    vgpu.set(&dims.count, count * 1000);
    vgpu.set(&dims.memory, mem * 1000);
    vgpu.set(&dims.cores, cores * 1000);
    vgpu
}
