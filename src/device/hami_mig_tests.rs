//! HAMi's MIG test tables, translated as facts about choosing instances and about
//! the `hami.io/vgpu-mig-allocations` annotation: `pkg/device/nvidia/
//! mig_topology_test.go`, `mig_capability_test.go`, `mig_profiles_test.go` and
//! the default-ordering cases of `mig_preference_test.go`. (The allowlist check of
//! `TestValidateMigProfileAllowlist` is with the device config.)
//!
//! HAMi answers "can these profiles be placed" with a search over orders; the
//! scheduler never needs more than the sequential choice it makes for a
//! container's instances one after another, so the feasibility facts are checked
//! by placing the profiles in the order HAMi's table lists them.

use super::mig::{MigPlacement, MigProfile, MigRoom, MigSlices, choose_instance, free_placement};
use super::mig_allocations::{MigAllocationError, decode_mig_allocations};

fn p(start: u32, size: u32) -> MigPlacement {
    MigPlacement { start, size }
}

/// The A100-40GB profiles of HAMi's tables.
pub(crate) fn a100() -> Vec<MigProfile> {
    vec![
        MigProfile {
            name: "1g.5gb".into(),
            memory_mb: 5120,
            core: 14,
            slice_count: 1,
            placements: (0..7).map(|s| p(s, 1)).collect(),
        },
        MigProfile {
            name: "2g.10gb".into(),
            memory_mb: 10240,
            core: 28,
            slice_count: 2,
            placements: vec![p(0, 2), p(2, 2), p(4, 2)],
        },
        MigProfile {
            name: "3g.20gb".into(),
            memory_mb: 20480,
            core: 42,
            slice_count: 3,
            placements: vec![p(0, 4), p(4, 4)],
        },
    ]
}

/// With `4g.20gb` added: the memory of `3g.20gb`, more compute, one placement.
fn a100_with_4g() -> Vec<MigProfile> {
    let mut profiles = a100();
    profiles.push(MigProfile {
        name: "4g.20gb".into(),
        memory_mb: 20480,
        core: 52,
        slice_count: 4,
        placements: vec![p(0, 4)],
    });
    profiles
}

fn occupied(placements: &[MigPlacement]) -> MigSlices {
    let mut s = MigSlices::default();
    for at in placements {
        s.add(&MigSlices::of(at));
    }
    s
}

fn profile<'a>(profiles: &'a [MigProfile], name: &str) -> &'a MigProfile {
    profiles.iter().find(|p| p.name == name).unwrap()
}

/// Places the named profiles one after another; `None` when one has no room.
fn place_in_turn(start: &[MigPlacement], names: &[&str]) -> Option<Vec<MigPlacement>> {
    let profiles = a100();
    let mut taken = occupied(start);
    let mut out = Vec::new();
    for name in names {
        let at = free_placement(profile(&profiles, name), &taken)?;
        taken.add(&MigSlices::of(&at));
        out.push(at);
    }
    Some(out)
}

fn choose(
    profiles: &[MigProfile],
    taken: &MigSlices,
    memory: u64,
) -> Option<(String, MigPlacement)> {
    choose_instance(profiles, taken, memory, MigRoom::UNLIMITED, &|_| true)
        .map(|c| (c.profile.name.clone(), c.placement))
}

/// `TestCanPlaceMigProfilesA100`.
#[test]
fn a100_balanced_geometries_fit_and_overlaps_do_not() {
    assert!(
        place_in_turn(&[], &["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]).is_some(),
        "the all-balanced geometry fits an empty A100"
    );
    assert!(
        place_in_turn(&[p(4, 4)], &["2g.10gb", "1g.5gb", "1g.5gb"]).is_some(),
        "the rest of it fits next to a running 3g"
    );
    assert_eq!(
        place_in_turn(&[p(0, 4), p(4, 4)], &["1g.5gb"]),
        None,
        "nothing fits between two running 3g"
    );
    assert_eq!(
        place_in_turn(&[p(0, 2), p(2, 2), p(4, 2)], &["2g.10gb"]),
        None,
        "there is no fourth 2g placement"
    );
}

/// `TestSelectMigPlacementUsesBalancedPacking`: 3g and 1g take the highest free
/// start, 2g the lowest.
#[test]
fn placements_pack_from_the_preferred_end() {
    let profiles = a100();
    let mut taken = MigSlices::default();
    for (name, start) in [("3g.20gb", 4), ("2g.10gb", 0), ("1g.5gb", 3), ("1g.5gb", 2)] {
        let at = free_placement(profile(&profiles, name), &taken).unwrap();
        assert_eq!(at.start, start, "{name}");
        taken.add(&MigSlices::of(&at));
    }
}

/// `TestAddResourceUsageUsesReportedProfileAndPlacement`: 10000 MiB takes the
/// smallest profile with that much memory, at its first placement.
#[test]
fn a_request_takes_the_smallest_profile_with_enough_memory() {
    assert_eq!(
        choose(&a100(), &MigSlices::default(), 10000),
        Some(("2g.10gb".into(), p(0, 2)))
    );
}

/// `TestCustomFilterUsesReportedPlacementCapacity`: with the three 2g placements
/// taken, no 2g is left, but a 1g still fits.
#[test]
fn a_full_profile_falls_back_only_to_larger_ones() {
    let taken = occupied(&[p(0, 2), p(2, 2), p(4, 2)]);
    assert_eq!(choose(&a100(), &taken, 10000), None);
    assert_eq!(
        choose(&a100(), &taken, 5000),
        Some(("1g.5gb".into(), p(6, 1)))
    );
}

/// `TestMigProfileCandidatesPutsPreferredFirst` and
/// `TestSelectMigCandidateHonorsPreference` without a preference: profiles go by
/// memory, then slice count, so 20000 MiB is a 3g.20gb, and at slot 4 once a 2g
/// holds slot 0.
#[test]
fn equal_memory_goes_to_the_fewer_slices() {
    let profiles = a100_with_4g();
    assert_eq!(
        choose(&profiles, &MigSlices::default(), 20000),
        Some(("3g.20gb".into(), p(4, 4)))
    );
    assert_eq!(
        choose(&profiles, &occupied(&[p(0, 2)]), 20000),
        Some(("3g.20gb".into(), p(4, 4)))
    );
    assert_eq!(
        choose(&profiles, &occupied(&[p(4, 4)]), 20000),
        Some(("3g.20gb".into(), p(0, 4)))
    );
    assert_eq!(
        choose(&profiles, &occupied(&[p(4, 4), p(0, 1)]), 20000),
        None
    );
}

/// `TestEncodeDecodeMigAllocations`.
#[test]
fn a_reservation_reads_back() {
    let got = decode_mig_allocations(
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":6,"size":1}}]"#,
    )
    .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].container_index, got[0].device_index), (0, 0));
    assert_eq!(got[0].gpu_uuid, "GPU-a");
    assert_eq!(got[0].profile, "1g.5gb");
    assert_eq!(got[0].placement, p(6, 1));
    assert_eq!(got[0].runtime, None);
}

/// `TestDecodeMigAllocationsRejectsDuplicateDeviceIndex`.
#[test]
fn two_reservations_for_one_device_are_refused() {
    let raw = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":6,"size":1}},{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":5,"size":1}}]"#;
    let err = decode_mig_allocations(raw).unwrap_err();
    assert_eq!(
        err,
        MigAllocationError::Duplicate {
            container: 0,
            device: 0
        }
    );
    assert_eq!(
        err.to_string(),
        "duplicate MIG allocation for container 0 device 0"
    );
}

/// `TestDecodeMigAllocationsPreservesZeroRuntimeInstanceIDs`.
#[test]
fn zero_runtime_ids_are_ids() {
    let got = decode_mig_allocations(
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":0,"size":2},"migUUID":"MIG-a","gpuInstanceID":4,"computeInstanceID":0}]"#,
    )
    .unwrap();
    let runtime = got[0].runtime.as_ref().unwrap();
    assert_eq!(runtime.mig_uuid, "MIG-a");
    assert_eq!(runtime.gpu_instance_id, 4);
    assert_eq!(runtime.compute_instance_id, 0);
}

/// `TestDecodeMigAllocationsRejectsPartialRuntimeIdentity`.
#[test]
fn a_partial_runtime_identity_is_refused() {
    let err = decode_mig_allocations(
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":0,"size":2},"migUUID":"MIG-a"}]"#,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MIG allocation 0 has partial runtime identity"
    );
    // HAMi's other validation: a record without its GPU, profile or placement.
    for raw in [
        r#"[{"containerIndex":0,"deviceIndex":0,"profile":"2g.10gb","placement":{"start":0,"size":2}}]"#,
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","placement":{"start":0,"size":2}}]"#,
        r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":0,"size":0}}]"#,
    ] {
        assert_eq!(
            decode_mig_allocations(raw).unwrap_err().to_string(),
            "MIG allocation 0 is incomplete",
            "{raw}"
        );
    }
}
