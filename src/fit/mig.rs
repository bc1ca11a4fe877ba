//! The MIG part of the fit: when a container is a MIG request, and which instance
//! a MIG GPU gives it.
//!
//! A container is a MIG request (HAMi's rule) when the node has an NVIDIA GPU in
//! `mig` mode and the pod's `nvidia.com/vgpu-mode`, if it has one, admits `mig`.
//! Such a container may then ask for more GPUs than the node has, because one MIG
//! GPU can give it several instances: after a MIG GPU passed, the fit examines it
//! again for the container's next GPU, until it fails or the container has all.

use super::NodeView;
use crate::device::card_name::{CardNames, card_type, mig_card_type};
use crate::device::mig::{MIG_MODE, MigHold, MigRoom, choose_instance};
use crate::device::model::GpuDevice;
use crate::device::selectors::DeviceSelectors;
use crate::usage::GpuUsage;

/// Whether the container may be placed on MIG instances on this node.
pub(super) fn is_mig_request(node: &NodeView<'_>, selectors: &DeviceSelectors) -> bool {
    selectors.mode_allowed(MIG_MODE)
        && node
            .devices
            .iter()
            .zip(node.is_vendor)
            .any(|(d, vendor)| *vendor && d.is_mig())
}

/// An instance the fit chose on a MIG GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MigPick {
    /// What the container device holds.
    pub hold: MigHold,
    /// The profile's memory, MiB: what the device books.
    pub memory: u64,
    /// The profile's compute, percent.
    pub cores: u32,
}

impl MigPick {
    /// What the pick adds to its GPU's usage.
    pub fn usage(&self) -> GpuUsage {
        GpuUsage {
            used: 1,
            usedmem: self.memory,
            usedcores: self.cores,
            mig: self.hold.slices(),
        }
    }
}

/// Whether a pod naming `names` with `volcano.sh/card.name` may use GPU `d`: a
/// whole GPU when a name covers its card type, a MIG GPU when a name covers the
/// card type of one of its profiles.
pub(super) fn card_allowed(d: &GpuDevice, names: &CardNames) -> bool {
    if names.is_empty() {
        return true;
    }
    if d.is_mig() {
        d.mig_profiles
            .iter()
            .any(|p| names.allows(&mig_card_type(&d.model, &p.name)))
    } else {
        names.allows(&card_type(&d.model))
    }
}

/// The instance GPU `d` gives a request of `memory` MiB, with `u` booked on it
/// (this container's earlier instances included): the smallest registered profile
/// `names` allow, with enough memory and a free placement, whose memory and
/// compute still fit the GPU. `None` is HAMi's `CardMigTopologyInfeasible`.
pub(super) fn pick_instance(
    d: &GpuDevice,
    u: &GpuUsage,
    memory: u64,
    names: &CardNames,
) -> Option<MigPick> {
    let room = MigRoom {
        memory: d.devmem.saturating_sub(u.usedmem),
        cores: d.devcore.saturating_sub(u.usedcores),
    };
    // Named only when the pod names card types (a name costs an allocation).
    let allowed = |p: &crate::device::mig::MigProfile| {
        names.is_empty() || names.allows(&mig_card_type(&d.model, &p.name))
    };
    let choice = choose_instance(&d.mig_profiles, &u.mig, memory, room, &allowed)?;
    Some(MigPick {
        hold: MigHold::Instance {
            profile: choice.profile.name.clone(),
            placement: choice.placement,
            runtime: None,
        },
        memory: choice.profile.memory_mb,
        cores: choice.profile.core,
    })
}
