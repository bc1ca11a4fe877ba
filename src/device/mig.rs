//! MIG (Multi-Instance GPU): the profiles a GPU in `mig` mode offers, the slices a
//! MIG instance occupies, and how one is chosen for a memory request.
//!
//! A GPU registered with `"mode":"mig"` lists its `migProfiles`, each with the
//! memory and compute of one instance and the legal placements NVML reported for it,
//! e.g. `{"name":"1g.10gb","memoryMB":9856,"core":14,"sliceCount":1,
//! "placements":[{"start":0,"size":1},...]}`. A placement occupies the half-open
//! slice range `[start, start + size)`; two instances on one GPU never share a
//! slice. The device plugin creates the instance at exactly the placement the
//! scheduler chose, so the choice here is the hardware layout.
//!
//! Choosing an instance for a request of `m` MiB (HAMi's rule): the profiles sorted
//! by memory, then slice count, the first with memory ≥ `m` that has a placement
//! free of every occupied slice wins. Placements of `1g.` and `3g.` profiles are
//! tried from the highest start down, all others from the lowest up, which keeps
//! the large aligned ranges free for as long as possible.

use serde::{Deserialize, Serialize};

/// The mode string of a GPU partitioned into MIG instances.
pub const MIG_MODE: &str = "mig";

/// Memory slices tracked per GPU. Every MIG-capable NVIDIA GPU so far has at most
/// eight (A100, H100, H200, B200: 8; A30 and RTX PRO 6000: 4); a registration with
/// a placement beyond them is refused rather than half understood.
pub const MIG_SLICES: usize = 8;

/// Where an instance sits on its GPU: `size` slices from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MigPlacement {
    /// First slice.
    pub start: u32,
    /// Number of slices.
    pub size: u32,
}

impl MigPlacement {
    /// One past the last slice.
    pub fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.size)
    }

    /// Whether the two ranges share a slice.
    pub fn overlaps(&self, other: &MigPlacement) -> bool {
        u64::from(self.start) < other.end() && u64::from(other.start) < self.end()
    }

    /// Whether the placement is non-empty and within the slices tracked.
    pub fn is_trackable(&self) -> bool {
        self.size > 0 && self.end() <= MIG_SLICES as u64
    }
}

/// One MIG profile a GPU offers, as the device plugin read it from NVML.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    /// Profile name, e.g. `1g.10gb`.
    pub name: String,
    /// Memory of one instance, MiB.
    #[serde(rename = "memoryMB")]
    pub memory_mb: u64,
    /// Compute of one instance, percent of the GPU.
    pub core: u32,
    /// Compute slices of one instance (orders profiles of equal memory).
    pub slice_count: u32,
    /// Legal placements.
    pub placements: Vec<MigPlacement>,
}

/// The identity the device plugin gives an instance once it created it. All three
/// parts come together or not at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigRuntime {
    /// `MIG-...` UUID of the instance.
    pub mig_uuid: String,
    /// GPU instance id.
    pub gpu_instance_id: u32,
    /// Compute instance id.
    pub compute_instance_id: u32,
}

/// What one container device holds of a MIG GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum MigHold {
    /// A reserved instance: its profile and placement, and its runtime identity
    /// once the device plugin created it.
    Instance {
        /// Profile name.
        profile: String,
        /// Slices it occupies.
        placement: MigPlacement,
        /// Set by the device plugin.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runtime: Option<MigRuntime>,
    },
    /// The pod uses the MIG GPU but says nowhere which slices: it is taken to
    /// hold every slice of it, so nothing is placed next to it until it leaves.
    Unplaced,
}

impl MigHold {
    /// The slices the hold occupies.
    pub fn slices(&self) -> MigSlices {
        match self {
            MigHold::Instance { placement, .. } => MigSlices::of(placement),
            MigHold::Unplaced => MigSlices::unplaced(),
        }
    }

    /// The placement of a reserved instance.
    pub fn placement(&self) -> Option<MigPlacement> {
        match self {
            MigHold::Instance { placement, .. } => Some(*placement),
            MigHold::Unplaced => None,
        }
    }
}

/// How often each slice of a GPU is held, plus the holds of unknown placement.
/// Kept as counts rather than a bit mask so that adding and removing pods commutes
/// like the other usage figures, and a slice held twice shows as such.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MigSlices {
    /// Holds per slice.
    held: [u8; MIG_SLICES],
    /// Holds that cover the whole GPU because their placement is not known.
    unplaced: u16,
}

impl MigSlices {
    /// One hold of `placement` (slices outside the tracked range are ignored;
    /// registrations and annotations with such placements are refused earlier).
    pub fn of(placement: &MigPlacement) -> Self {
        let mut s = Self::default();
        let end = placement.end().min(MIG_SLICES as u64) as usize;
        for slot in s.held.iter_mut().take(end).skip(placement.start as usize) {
            *slot = 1;
        }
        s
    }

    /// One hold of unknown placement.
    pub fn unplaced() -> Self {
        Self {
            unplaced: 1,
            ..Self::default()
        }
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds another's holds.
    pub fn add(&mut self, other: &MigSlices) {
        for (a, b) in self.held.iter_mut().zip(other.held) {
            *a = a.saturating_add(b);
        }
        self.unplaced = self.unplaced.saturating_add(other.unplaced);
    }

    /// Removes holds added before (never below zero).
    pub fn sub(&mut self, other: &MigSlices) {
        for (a, b) in self.held.iter_mut().zip(other.held) {
            *a = a.saturating_sub(b);
        }
        self.unplaced = self.unplaced.saturating_sub(other.unplaced);
    }

    /// Per slice, the larger of the two (containers that run one after another).
    pub fn max(&mut self, other: &MigSlices) {
        for (a, b) in self.held.iter_mut().zip(other.held) {
            *a = (*a).max(b);
        }
        self.unplaced = self.unplaced.max(other.unplaced);
    }

    /// Whether a new instance may take `placement`: none of its slices is held and
    /// no hold of unknown placement is on the GPU.
    pub fn is_free(&self, placement: &MigPlacement) -> bool {
        if self.unplaced > 0 || !placement.is_trackable() {
            return false;
        }
        self.held[placement.start as usize..placement.end() as usize]
            .iter()
            .all(|n| *n == 0)
    }

    /// The first slice both hold, if any.
    pub fn shared_with(&self, other: &MigSlices) -> Option<usize> {
        (0..MIG_SLICES).find(|&i| self.held[i] > 0 && other.held[i] > 0)
    }

    /// The first slice held more than once, if any.
    pub fn held_twice(&self) -> Option<usize> {
        self.held.iter().position(|n| *n > 1)
    }

    /// Holds of slice `i`.
    pub fn held(&self, i: usize) -> u8 {
        self.held.get(i).copied().unwrap_or(0)
    }

    /// Holds of unknown placement.
    pub fn unplaced_holds(&self) -> u16 {
        self.unplaced
    }

    /// Slices held at least once.
    pub fn held_count(&self) -> usize {
        self.held.iter().filter(|n| **n > 0).count()
    }
}

/// Whether HAMi tries the profile's placements from the highest start down.
fn prefers_high_start(profile: &str) -> bool {
    profile.starts_with("1g.") || profile.starts_with("3g.")
}

/// The profile's placements in the order they are tried.
pub fn ordered_placements(profile: &MigProfile) -> Vec<MigPlacement> {
    let mut ordered = profile.placements.clone();
    if prefers_high_start(&profile.name) {
        ordered.sort_by_key(|p| std::cmp::Reverse(p.start));
    } else {
        ordered.sort_by_key(|p| p.start);
    }
    ordered
}

/// The first placement of `profile`, in trial order, free in `occupied`.
pub fn free_placement(profile: &MigProfile, occupied: &MigSlices) -> Option<MigPlacement> {
    ordered_placements(profile)
        .into_iter()
        .find(|p| occupied.is_free(p))
}

/// What is left on a GPU for an instance's memory and compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigRoom {
    /// Free memory, MiB.
    pub memory: u64,
    /// Free compute, percent.
    pub cores: u32,
}

impl MigRoom {
    /// No limit beyond the slices (for tests of placement alone).
    pub const UNLIMITED: MigRoom = MigRoom {
        memory: u64::MAX,
        cores: u32::MAX,
    };
}

/// An instance chosen for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigChoice<'a> {
    /// Its profile.
    pub profile: &'a MigProfile,
    /// Its placement.
    pub placement: MigPlacement,
}

/// The instance for a request of `memory` MiB: the smallest profile (memory, then
/// slice count; registration order among equals) with at least that memory, that
/// `allowed` accepts, whose memory and compute fit `room` (so a registration whose
/// profiles add up to more than the card never books past it), and that has a
/// placement free in `occupied`.
pub fn choose_instance<'a>(
    profiles: &'a [MigProfile],
    occupied: &MigSlices,
    memory: u64,
    room: MigRoom,
    allowed: &dyn Fn(&MigProfile) -> bool,
) -> Option<MigChoice<'a>> {
    let mut candidates: Vec<&MigProfile> = profiles.iter().collect();
    candidates.sort_by_key(|p| (p.memory_mb, p.slice_count));
    candidates
        .into_iter()
        .filter(|p| p.memory_mb >= memory && allowed(p))
        .filter(|p| p.memory_mb <= room.memory && p.core <= room.cores)
        .find_map(|profile| {
            free_placement(profile, occupied).map(|placement| MigChoice { profile, placement })
        })
}

/// `candidate`'s profiles limited to what `known` registered: only profiles both
/// list, each with the placements both list and the smaller memory and compute.
/// A newer Node object sent by a client may take MIG capacity away, never add any.
pub fn restrict_profiles(known: &[MigProfile], candidate: &[MigProfile]) -> Vec<MigProfile> {
    known
        .iter()
        .filter_map(|k| {
            let c = candidate.iter().find(|c| c.name == k.name)?;
            Some(MigProfile {
                memory_mb: k.memory_mb.min(c.memory_mb),
                core: k.core.min(c.core),
                placements: k
                    .placements
                    .iter()
                    .filter(|p| c.placements.contains(p))
                    .copied()
                    .collect(),
                ..k.clone()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u32, size: u32) -> MigPlacement {
        MigPlacement { start, size }
    }

    fn profile(
        name: &str,
        memory_mb: u64,
        core: u32,
        slices: u32,
        at: &[(u32, u32)],
    ) -> MigProfile {
        MigProfile {
            name: name.into(),
            memory_mb,
            core,
            slice_count: slices,
            placements: at.iter().map(|&(s, n)| p(s, n)).collect(),
        }
    }

    #[test]
    fn overlap_is_on_half_open_ranges() {
        assert!(p(0, 4).overlaps(&p(3, 1)));
        assert!(!p(0, 4).overlaps(&p(4, 4)));
        assert!(!p(6, 1).overlaps(&p(5, 1)));
        assert!(p(4, 4).overlaps(&p(6, 1)));
    }

    #[test]
    fn slice_counts_commute_and_show_double_holds() {
        let mut s = MigSlices::default();
        s.add(&MigSlices::of(&p(0, 2)));
        s.add(&MigSlices::of(&p(4, 4)));
        assert!(!s.is_free(&p(1, 1)));
        assert!(s.is_free(&p(2, 2)));
        assert_eq!(s.held_twice(), None);
        s.add(&MigSlices::of(&p(6, 1)));
        assert_eq!(s.held_twice(), Some(6));
        s.sub(&MigSlices::of(&p(6, 1)));
        s.sub(&MigSlices::of(&p(0, 2)));
        assert_eq!(s, MigSlices::of(&p(4, 4)));
        s.add(&MigSlices::unplaced());
        assert!(
            !s.is_free(&p(0, 1)),
            "an unplaced hold blocks the whole GPU"
        );
        s.sub(&MigSlices::unplaced());
        assert!(s.is_free(&p(0, 1)));
    }

    #[test]
    fn placements_past_the_tracked_slices_are_never_free() {
        let s = MigSlices::default();
        assert!(!s.is_free(&p(7, 2)));
        assert!(!s.is_free(&p(0, 0)));
        assert!(s.is_free(&p(0, 8)));
    }

    #[test]
    fn a_candidate_only_takes_mig_capacity_away() {
        let known = vec![
            profile("1g.10gb", 9856, 14, 1, &[(0, 1), (1, 1), (2, 1)]),
            profile("7g.80gb", 80896, 100, 7, &[(0, 8)]),
        ];
        let candidate = vec![
            profile("1g.10gb", 20000, 50, 1, &[(1, 1), (2, 1), (3, 1)]),
            profile("2g.20gb", 19968, 28, 2, &[(0, 2)]),
        ];
        assert_eq!(
            restrict_profiles(&known, &candidate),
            vec![profile("1g.10gb", 9856, 14, 1, &[(1, 1), (2, 1)])]
        );
    }

    #[test]
    fn room_limits_the_profiles_considered() {
        let profiles = vec![
            profile("1g.10gb", 9856, 14, 1, &[(0, 1)]),
            profile("2g.20gb", 19968, 28, 2, &[(2, 2)]),
        ];
        let none = MigSlices::default();
        let tight = MigRoom {
            memory: 15000,
            cores: 100,
        };
        assert_eq!(
            choose_instance(&profiles, &none, 5000, tight, &|_| true)
                .map(|c| c.profile.name.as_str()),
            Some("1g.10gb")
        );
        assert_eq!(
            choose_instance(&profiles, &none, 12000, tight, &|_| true),
            None
        );
        let few_cores = MigRoom {
            memory: u64::MAX,
            cores: 20,
        };
        assert_eq!(
            choose_instance(&profiles, &none, 12000, few_cores, &|_| true),
            None
        );
    }
}
