//! HAMi's MIG fit tables, translated as facts: `pkg/scheduler/mig_test.go`
//! (`TestIsMIGRequest`, `TestFitInDevices*MigPlacements*`,
//! `TestFitInDevicesRetainsPhysicalCountCheckForNonMigGPU`),
//! `pkg/device/nvidia/mig_capability_test.go` (what an instance books) and the
//! no-preference case of `TestFitHonorsMigProfilePreference`; plus the GPU
//! orderings binpack and spread give MIG GPUs, which use the same device score as
//! every GPU with the instances' profile memory and compute as usage.

use super::*;
use crate::device::mig::{MigHold, MigPlacement, MigProfile};
use crate::policy::{GpuPolicy, NodePolicy, PodPolicies, ScoringWeights};

fn p(start: u32, size: u32) -> MigPlacement {
    MigPlacement { start, size }
}

/// HAMi's single-GPU MIG node: 7 slots, 40960 MiB, one `1g.5gb` profile with the
/// given placements.
fn mig_gpu(id: &str, placements: &[MigPlacement]) -> GpuDevice {
    GpuDevice {
        id: id.into(),
        index: 0,
        count: 7,
        devmem: 40960,
        devcore: 100,
        model: "NVIDIA A100-SXM4-40GB".into(),
        numa: 0,
        health: true,
        mode: "mig".into(),
        pair_scores: BTreeMap::new(),
        mig_profiles: vec![MigProfile {
            name: "1g.5gb".into(),
            memory_mb: 5120,
            core: 14,
            slice_count: 1,
            placements: placements.to_vec(),
        }],
    }
}

/// The A100-40GB profiles of HAMi's capability tables, `4g.20gb` included.
fn a100_gpu(id: &str, index: u32) -> GpuDevice {
    let mut d = mig_gpu(id, &[]);
    d.index = index;
    d.mig_profiles = crate::device::hami_mig_tests::a100();
    d.mig_profiles.push(MigProfile {
        name: "4g.20gb".into(),
        memory_mb: 20480,
        core: 52,
        slice_count: 4,
        placements: vec![p(0, 4)],
    });
    d
}

fn shared_gpu(id: &str) -> GpuDevice {
    GpuDevice {
        mode: "hami-core".into(),
        mig_profiles: Vec::new(),
        ..mig_gpu(id, &[])
    }
}

fn request(nums: u32, memreq: u64) -> PodRequest {
    PodRequest {
        containers: vec![Some(ContainerRequest {
            nums,
            memreq,
            mem_percentage: None,
            coresreq: 0,
        })],
        init_count: 0,
    }
}

fn fit_with(
    devices: &[GpuDevice],
    usage: &[GpuUsage],
    req: &PodRequest,
    gpu_policy: &str,
    selectors: &DeviceSelectors,
) -> Result<Placement, String> {
    let cordoned = BTreeSet::new();
    let policies = PodPolicies {
        node: NodePolicy::Binpack,
        gpu: GpuPolicy::parse(gpu_policy),
        weights: ScoringWeights::default(),
    };
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
            policies: &policies,
            selectors,
            quota: QuotaHeadroom::default(),
        },
    )
    .map_err(|e| e.to_string())
}

fn fit(
    devices: &[GpuDevice],
    req: &PodRequest,
    selectors: &DeviceSelectors,
) -> Result<Placement, String> {
    let usage = vec![GpuUsage::default(); devices.len()];
    fit_with(devices, &usage, req, "spread", selectors)
}

fn mig_mode() -> DeviceSelectors {
    DeviceSelectors::from_pairs(&[("nvidia.com/vgpu-mode", "mig")])
}

fn instance(d: &ContainerDevice) -> (&str, String, MigPlacement) {
    match d.mig.as_deref() {
        Some(MigHold::Instance {
            profile, placement, ..
        }) => (&*d.uuid, profile.clone(), *placement),
        other => panic!("{} holds no instance: {other:?}", d.uuid),
    }
}

/// `TestIsMIGRequest` (every request here is an NVIDIA one).
#[test]
fn what_makes_a_mig_request() {
    let view = |devices: &[GpuDevice]| -> bool {
        let model_lower: Vec<String> = devices.iter().map(|d| d.model.to_lowercase()).collect();
        let is_vendor = vec![true; devices.len()];
        let cordoned = BTreeSet::new();
        let node = NodeView {
            devices,
            usage: &[],
            cordoned: &cordoned,
            is_vendor: &is_vendor,
            model_lower: &model_lower,
        };
        mig::is_mig_request(&node, &mig_mode())
    };
    let mig = [mig_gpu("GPU-a", &[p(6, 1)])];
    let shared = [shared_gpu("GPU-a")];
    assert!(view(&mig), "MIG mode annotation on a MIG node");
    assert!(!view(&shared), "no MIG device");
    let model_lower = vec!["nvidia a100-sxm4-40gb".to_string()];
    let cordoned = BTreeSet::new();
    let node = NodeView {
        devices: &mig,
        usage: &[],
        cordoned: &cordoned,
        is_vendor: &[true],
        model_lower: &model_lower,
    };
    assert!(
        mig::is_mig_request(&node, &DeviceSelectors::default()),
        "no mode annotation: a MIG node makes it one"
    );
    assert!(
        !mig::is_mig_request(
            &node,
            &DeviceSelectors::from_pairs(&[("nvidia.com/vgpu-mode", "hami-core")])
        ),
        "an explicit hami-core mode"
    );
    let not_vendor = NodeView {
        is_vendor: &[false],
        ..node
    };
    assert!(
        !mig::is_mig_request(&not_vendor, &DeviceSelectors::default()),
        "only NVIDIA GPUs count"
    );
}

/// `TestFitInDevicesAllowsMultipleMigPlacementsOnSingleGPU`: two 4000 MiB GPUs
/// from one MIG GPU are two instances at distinct placements.
#[test]
fn one_mig_gpu_gives_a_container_several_instances() {
    let gpu = mig_gpu("GPU-a", &(0..7).map(|s| p(s, 1)).collect::<Vec<_>>());
    let placed = fit(&[gpu], &request(2, 4000), &mig_mode()).unwrap();
    assert_eq!(placed.devices.len(), 1);
    let got: Vec<_> = placed.devices[0].iter().map(instance).collect();
    assert_eq!(
        got,
        vec![
            ("GPU-a", "1g.5gb".to_string(), p(6, 1)),
            ("GPU-a", "1g.5gb".to_string(), p(5, 1)),
        ]
    );
    // Each instance books its profile's memory and compute, not the request's.
    assert!(
        placed.devices[0]
            .iter()
            .all(|d| d.usedmem == 5120 && d.usedcores == 14)
    );
    assert_eq!(
        crate::device::allocation_codec::encode_pod_devices(&placed.devices),
        "GPU-a,NVIDIA,5120,14:GPU-a,NVIDIA,5120,14:;"
    );
}

/// `TestFitInDevicesRejectsInsufficientMigPlacementsOnSingleGPU`: one placement
/// for two instances; the GPU fails once it has none left.
#[test]
fn running_out_of_placements_is_card_mig_topology_infeasible() {
    let gpu = mig_gpu("GPU-a", &[p(6, 1)]);
    assert_eq!(
        fit(&[gpu], &request(2, 4000), &mig_mode()).unwrap_err(),
        "1/1 AllocatedCardsInsufficientRequest, 1/1 CardMigTopologyInfeasible"
    );
}

/// `TestFitInDevicesRetainsPhysicalCountCheckForNonMigGPU`.
#[test]
fn without_mig_gpus_the_count_check_stands() {
    let selectors = DeviceSelectors::from_pairs(&[("nvidia.com/vgpu-mode", "hami-core")]);
    assert_eq!(
        fit(&[shared_gpu("GPU-a")], &request(2, 4000), &selectors).unwrap_err(),
        NODE_INSUFFICIENT_DEVICE
    );
    // A MIG node, but the pod asked for hami-core: no exception either.
    assert_eq!(
        fit(
            &[mig_gpu("GPU-a", &[p(6, 1)])],
            &request(2, 4000),
            &selectors
        )
        .unwrap_err(),
        NODE_INSUFFICIENT_DEVICE
    );
}

/// `TestAddResourceUsageUsesReportedProfileAndPlacement` and the no-preference
/// case of `TestFitHonorsMigProfilePreference`: what the fit books.
#[test]
fn an_instance_books_its_profile() {
    let placed = fit(&[a100_gpu("GPU-a", 0)], &request(1, 10000), &mig_mode()).unwrap();
    let d = &placed.devices[0][0];
    assert_eq!(instance(d), ("GPU-a", "2g.10gb".into(), p(0, 2)));
    assert_eq!((d.usedmem, d.usedcores), (10240, 28));
    let placed = fit(&[a100_gpu("GPU-a", 0)], &request(1, 20000), &mig_mode()).unwrap();
    assert_eq!(instance(&placed.devices[0][0]).1, "3g.20gb");
}

/// A slice held by anyone is never given again, and a GPU kept whole for a pod of
/// unknown slices gives nothing.
#[test]
fn held_slices_are_never_given_twice() {
    let gpu = mig_gpu("GPU-a", &[p(5, 1), p(6, 1)]);
    let mut usage = GpuUsage {
        used: 1,
        usedmem: 5120,
        usedcores: 14,
        mig: crate::device::mig::MigSlices::of(&p(6, 1)),
    };
    let placed = fit_with(
        std::slice::from_ref(&gpu),
        &[usage],
        &request(1, 4000),
        "spread",
        &mig_mode(),
    )
    .unwrap();
    assert_eq!(instance(&placed.devices[0][0]).2, p(5, 1));
    usage.mig.add(&crate::device::mig::MigSlices::of(&p(5, 1)));
    assert_eq!(
        fit_with(
            std::slice::from_ref(&gpu),
            &[usage],
            &request(1, 4000),
            "spread",
            &mig_mode()
        )
        .unwrap_err(),
        "1/1 CardMigTopologyInfeasible"
    );
    let whole = GpuUsage {
        used: 1,
        mig: crate::device::mig::MigSlices::unplaced(),
        ..GpuUsage::default()
    };
    assert_eq!(
        fit_with(&[gpu], &[whole], &request(1, 4000), "spread", &mig_mode()).unwrap_err(),
        "1/1 CardMigTopologyInfeasible"
    );
}

/// A request larger than every profile fits no MIG GPU; the other checks come
/// first, as in HAMi.
#[test]
fn checks_before_the_instance_keep_their_reasons() {
    assert_eq!(
        fit(&[a100_gpu("GPU-a", 0)], &request(1, 30000), &mig_mode()).unwrap_err(),
        "1/1 CardMigTopologyInfeasible"
    );
    assert_eq!(
        fit(&[a100_gpu("GPU-a", 0)], &request(1, 50000), &mig_mode()).unwrap_err(),
        "1/1 CardInsufficientMemory"
    );
    let mut sick = a100_gpu("GPU-a", 0);
    sick.health = false;
    assert_eq!(
        fit(&[sick], &request(1, 1000), &mig_mode()).unwrap_err(),
        "1/1 CardNotHealth"
    );
}

/// Binpack tries the fuller MIG GPU first and spread the emptier, by the same
/// device score as shared GPUs with the instances' memory and compute booked.
#[test]
fn binpack_and_spread_order_mig_gpus_by_their_instances() {
    let gpus = [a100_gpu("GPU-a", 0), a100_gpu("GPU-b", 1)];
    let busy = GpuUsage {
        used: 1,
        usedmem: 10240,
        usedcores: 28,
        mig: crate::device::mig::MigSlices::of(&p(0, 2)),
    };
    let usage = [GpuUsage::default(), busy];
    let none = mig_mode();
    let binpack = fit_with(&gpus, &usage, &request(1, 5000), "binpack", &none).unwrap();
    assert_eq!(
        instance(&binpack.devices[0][0]),
        ("GPU-b", "1g.5gb".into(), p(6, 1))
    );
    let spread = fit_with(&gpus, &usage, &request(1, 5000), "spread", &none).unwrap();
    assert_eq!(
        instance(&spread.devices[0][0]),
        ("GPU-a", "1g.5gb".into(), p(6, 1))
    );
    // The node score counts the instances like any usage: 10 x (1/14 + 28/200 + 10240/81920).
    let expected = 10.0 * (1.0 / 14.0 + 28.0 / 200.0 + 10240.0 / 81920.0);
    assert!(
        (binpack.node_score - expected).abs() < 1e-9,
        "{}",
        binpack.node_score
    );
}

/// Shared and MIG GPUs of one node serve a pod without a mode annotation side by
/// side; only the MIG ones are instances. (The MIG GPU, tried first, has room for
/// one instance only.)
#[test]
fn a_mixed_node_serves_both_kinds() {
    let mut one_left = mig_gpu("GPU-m", &[p(6, 1)]);
    one_left.index = 1;
    let gpus = [shared_gpu("GPU-s"), one_left];
    let placed = fit(&gpus, &request(2, 5000), &DeviceSelectors::default()).unwrap();
    let mut kinds: Vec<(&str, bool)> = placed.devices[0]
        .iter()
        .map(|d| (&*d.uuid, d.mig.is_some()))
        .collect();
    kinds.sort();
    assert_eq!(kinds, vec![("GPU-m", true), ("GPU-s", false)]);
}
