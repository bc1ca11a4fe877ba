//! HAMi's own test tables for fitting containers onto GPUs, translated case by case:
//! `pkg/device/nvidia/device_test.go` (TestDevices_Fit, TestFit_DeviceCordon,
//! TestZeroMemoryPercentageIsAccountedAsWholeCard), `pkg/device/nvidia/fit_checks_test.go`,
//! `pkg/scheduler/score_test.go` (Test_calcScore, Test_fitInCertainDevice,
//! Test_fitInDevices, Test_Nvidia_GPU_Topology and the scoring-weight tests),
//! `pkg/scheduler/score_model_type_test.go`, `pkg/scheduler/numa_sort_test.go`,
//! `pkg/scheduler/policy_fallback_placement_test.go`, and the device and node scores
//! of `pkg/scheduler/policy/*_test.go`.
//!
//! HAMi's tables call its NVIDIA `Fit` directly with a device list; here every case
//! goes through [`fit_pod`], which also does what HAMi's caller does first: a
//! container asking for more GPUs than the node has is `NodeInsufficientDevice`
//! before any card is looked at, and the cards are ordered by the GPU policy.

use super::*;
use crate::device::device_config::NvidiaConfig;
use crate::device::request::parse_container_request;
use crate::device::selectors::{NOUSE_GPU_UUID, NUMA_BIND, USE_GPU_TYPE, USE_GPU_UUID};
use crate::policy::{GpuPolicy, NodePolicy, PodPolicies, ScoringWeights};
use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

// ---------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------

/// One GPU as HAMi's tables give it: capacity and current usage side by side.
#[derive(Debug, Clone)]
struct Card {
    device: GpuDevice,
    usage: GpuUsage,
}

/// A healthy, idle NVIDIA card: 10 slots, 8000 MiB, 100 cores, NUMA 0.
fn card(id: &str) -> Card {
    Card {
        device: GpuDevice {
            id: id.into(),
            index: 0,
            count: 10,
            devmem: 8000,
            devcore: 100,
            model: "NVIDIA A100-SXM4-80GB".into(),
            numa: 0,
            health: true,
            mode: "hami-core".into(),
            pair_scores: BTreeMap::new(),
            mig_profiles: Vec::new(),
        },
        usage: GpuUsage::default(),
    }
}

impl Card {
    fn index(mut self, index: u32) -> Self {
        self.device.index = index;
        self
    }
    fn numa(mut self, numa: i32) -> Self {
        self.device.numa = numa;
        self
    }
    /// `used` of `count` slots taken.
    fn slots(mut self, used: u32, count: u32) -> Self {
        self.usage.used = used;
        self.device.count = count;
        self
    }
    /// `used` of `total` MiB booked.
    fn mem(mut self, used: u64, total: u64) -> Self {
        self.usage.usedmem = used;
        self.device.devmem = total;
        self
    }
    /// `used` of `total` cores booked.
    fn cores(mut self, used: u32, total: u32) -> Self {
        self.usage.usedcores = used;
        self.device.devcore = total;
        self
    }
    fn model(mut self, model: &str) -> Self {
        self.device.model = model.into();
        self
    }
    fn sick(mut self) -> Self {
        self.device.health = false;
        self
    }
    /// Interconnect scores to other cards of the node.
    fn links(mut self, links: &[(&str, i64)]) -> Self {
        for (other, score) in links {
            self.device.pair_scores.insert((*other).into(), *score);
        }
        self
    }
}

/// A node as the fit sees it.
struct Node {
    devices: Vec<GpuDevice>,
    usage: Vec<GpuUsage>,
    cordoned: BTreeSet<String>,
    is_vendor: Vec<bool>,
    model_lower: Vec<String>,
}

fn node(cards: &[Card]) -> Node {
    cordoned_node(cards, &[])
}

fn cordoned_node(cards: &[Card], cordoned: &[&str]) -> Node {
    let model_lower: Vec<String> = cards
        .iter()
        .map(|c| c.device.model.to_lowercase())
        .collect();
    Node {
        devices: cards.iter().map(|c| c.device.clone()).collect(),
        usage: cards.iter().map(|c| c.usage).collect(),
        cordoned: cordoned.iter().map(|s| s.to_string()).collect(),
        is_vendor: model_lower.iter().map(|m| m.contains("nvidia")).collect(),
        model_lower,
    }
}

impl Node {
    fn view(&self) -> NodeView<'_> {
        NodeView {
            devices: &self.devices,
            usage: &self.usage,
            cordoned: &self.cordoned,
            is_vendor: &self.is_vendor,
            model_lower: &self.model_lower,
        }
    }
}

/// What a pod asks for: its containers (init containers first), GPU policy,
/// annotations, namespace quota and score weights.
#[derive(Debug, Clone)]
struct Ask {
    containers: Vec<Option<ContainerRequest>>,
    init_count: usize,
    gpu_policy: GpuPolicy,
    annotations: BTreeMap<String, String>,
    quota: QuotaHeadroom,
    weights: ScoringWeights,
}

/// A pod with these regular containers, under HAMi's default GPU policy (spread).
fn ask(containers: Vec<Option<ContainerRequest>>) -> Ask {
    Ask {
        containers,
        init_count: 0,
        gpu_policy: GpuPolicy::default(),
        annotations: BTreeMap::new(),
        quota: QuotaHeadroom::default(),
        weights: ScoringWeights::default(),
    }
}

impl Ask {
    fn policy(mut self, policy: &str) -> Self {
        self.gpu_policy = GpuPolicy::parse(policy);
        self
    }
    fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }
    /// The first `n` containers are init containers.
    fn init(mut self, n: usize) -> Self {
        self.init_count = n;
        self
    }
    /// A namespace memory quota of `limit` MiB of which `used` are taken.
    fn memory_quota(mut self, limit: u64, used: u64) -> Self {
        self.quota.memory = Some((limit, used));
        self
    }
    fn weights(mut self, weights: &str) -> Self {
        self.weights = ScoringWeights::parse(weights).unwrap();
        self
    }
}

/// `nums` GPUs with `mem` MiB and `cores` percent each.
fn gpus(nums: u32, mem: u64, cores: u32) -> Option<ContainerRequest> {
    Some(ContainerRequest {
        nums,
        memreq: mem,
        mem_percentage: None,
        coresreq: cores,
    })
}

/// `nums` GPUs with `pct` percent of each card's memory and `cores` percent.
fn gpus_pct(nums: u32, pct: u32, cores: u32) -> Option<ContainerRequest> {
    Some(ContainerRequest {
        nums,
        memreq: 0,
        mem_percentage: Some(pct),
        coresreq: cores,
    })
}

fn fit(node: &Node, ask: &Ask) -> Result<Placement, String> {
    let request = PodRequest {
        containers: ask.containers.clone(),
        init_count: ask.init_count,
    };
    let policies = PodPolicies {
        node: NodePolicy::Binpack,
        gpu: ask.gpu_policy.clone(),
        weights: ask.weights,
    };
    let selectors = DeviceSelectors::from_annotations(&ask.annotations);
    fit_pod(
        node.view(),
        &FitRequest {
            request: &request,
            policies: &policies,
            selectors: &selectors,
            quota: ask.quota,
        },
    )
    .map_err(|e| e.to_string())
}

/// The GPUs given to each container, in the order the annotation lists them.
fn uuids(p: &Placement) -> Vec<Vec<&str>> {
    p.devices
        .iter()
        .map(|c| c.iter().map(|d| &*d.uuid).collect())
        .collect()
}

/// `(uuid, MiB, cores)` of each GPU of each container.
fn booked(p: &Placement) -> Vec<Vec<(&str, u64, u32)>> {
    p.devices
        .iter()
        .map(|c| {
            c.iter()
                .map(|d| (&*d.uuid, d.usedmem, d.usedcores))
                .collect()
        })
        .collect()
}

/// What a one-container case expects: its GPUs in order, or the node's reason.
#[derive(Debug)]
enum Want {
    Gpus(Vec<&'static str>),
    Reason(&'static str),
}

/// A node of the one card `card` (named `dev-0`): the request lands on it, or
/// the node is rejected for `failure`.
fn check_one_card(case: &str, card: Card, ask: &Ask, failure: Option<&'static str>) {
    let want = match failure {
        None => Want::Gpus(vec!["dev-0"]),
        Some(reason) => Want::Reason(reason),
    };
    check(case, &node(&[card]), ask, want);
}

fn check(case: &str, node: &Node, ask: &Ask, want: Want) {
    let got = fit(node, ask);
    match want {
        Want::Gpus(ids) => {
            let p = got.unwrap_or_else(|e| panic!("{case}: expected a fit, got {e:?}"));
            assert_eq!(uuids(&p), vec![ids], "{case}");
        }
        Want::Reason(reason) => {
            assert_eq!(
                got.as_ref().err().map(String::as_str),
                Some(reason),
                "{case}: {got:?}"
            );
        }
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

// ---------------------------------------------------------------------------
// pkg/device/nvidia/device_test.go: TestDevices_Fit
// ---------------------------------------------------------------------------

/// A card of TestDevices_Fit: 100 slots, `mem` MiB, 100 cores.
fn roomy(id: &str, mem: u64) -> Card {
    card(id).slots(0, 100).mem(0, mem)
}

#[test]
fn each_card_check_rejects_with_its_own_reason() {
    let cases: Vec<(&str, Vec<Card>, Ask, Want)> = vec![
        (
            "fit success: equal cards, the last registered is tried first",
            vec![roomy("dev-0", 128), roomy("dev-1", 128)],
            ask(vec![gpus(1, 64, 50)]),
            Want::Gpus(vec!["dev-1"]),
        ),
        (
            "memory not enough",
            vec![roomy("dev-0", 128)],
            ask(vec![gpus(1, 512, 50)]),
            Want::Reason("1/1 CardInsufficientMemory"),
        ),
        (
            "core not enough",
            vec![roomy("dev-0", 1024).cores(100, 100)],
            ask(vec![gpus(1, 512, 50)]),
            Want::Reason("1/1 CardInsufficientCore"),
        ),
        (
            // HAMi's table sets a request type of another vendor; a pod reaches the
            // same check here by naming a card model the node does not have.
            "type mismatch",
            vec![roomy("dev-0", 128)],
            ask(vec![gpus(1, 512, 50)]).annotation(USE_GPU_TYPE, "OtherType"),
            Want::Reason("1/1 CardTypeMismatch"),
        ),
        (
            // HAMi's table asks for 2 GPUs on a 1-GPU node and calls Fit directly;
            // through the scheduler that is NodeInsufficientDevice (next test), so
            // the UUID check is reached with one GPU.
            "use uuid mismatch",
            vec![roomy("dev-1", 1280)],
            ask(vec![gpus(1, 512, 50)]).annotation(USE_GPU_UUID, "dev-0"),
            Want::Reason("1/1 CardUuidMismatch"),
        ),
        (
            "nouse uuid match",
            vec![roomy("dev-0", 1280)],
            ask(vec![gpus(1, 512, 50)]).annotation(NOUSE_GPU_UUID, "dev-0"),
            Want::Reason("1/1 CardUuidMismatch"),
        ),
        (
            "card overused",
            vec![roomy("dev-0", 1280).slots(100, 100)],
            ask(vec![gpus(1, 512, 50)]),
            Want::Reason("1/1 CardTimeSlicingExhausted"),
        ),
        (
            "core limit can't exceed 100",
            vec![roomy("dev-0", 1280)],
            ask(vec![gpus(1, 512, 120)]),
            Want::Gpus(vec!["dev-0"]),
        ),
        (
            "card exclusively",
            vec![roomy("dev-0", 1280).slots(20, 100)],
            ask(vec![gpus(1, 512, 100)]),
            Want::Reason("1/1 ExclusiveDeviceAllocateConflict"),
        ),
        (
            "compute units exhausted",
            vec![roomy("dev-0", 1280).slots(20, 100).cores(100, 100)],
            ask(vec![gpus(1, 512, 0)]),
            Want::Reason("1/1 CardComputeUnitsExhausted"),
        ),
        (
            "memory percentage",
            vec![roomy("dev-0", 1280).slots(20, 100).cores(10, 100)],
            ask(vec![gpus_pct(1, 10, 20)]),
            Want::Gpus(vec!["dev-0"]),
        ),
        (
            "card not healthy",
            vec![roomy("dev-0", 1280).slots(20, 100).cores(10, 100).sick()],
            ask(vec![gpus_pct(1, 10, 20)]),
            Want::Reason("1/1 CardNotHealth"),
        ),
    ];
    for (case, cards, ask, want) in cases {
        check(case, &node(&cards), &ask, want);
    }
}

#[test]
fn asking_more_gpus_than_the_node_has_is_node_insufficient_device() {
    // HAMi's Fit alone answers "1/1 AllocatedCardsInsufficientRequest" and
    // "2/2 AllocatedCardsInsufficientRequest" for these; its caller rejects them first
    // with the bare NodeInsufficientDevice, which is what users see.
    let one = node(&[roomy("dev-0", 1280).slots(20, 100).cores(10, 100)]);
    check(
        "one card, two asked",
        &one,
        &ask(vec![gpus(2, 512, 20)]),
        Want::Reason(NODE_INSUFFICIENT_DEVICE),
    );
    check(
        "uuid constraint, two asked of one",
        &node(&[roomy("dev-1", 1280)]),
        &ask(vec![gpus(2, 512, 50)]).annotation(USE_GPU_UUID, "dev-0"),
        Want::Reason(NODE_INSUFFICIENT_DEVICE),
    );
    let two = node(&[roomy("dev-0", 1280).index(0), roomy("dev-1", 1280).index(1)]);
    check(
        "two cards, three asked",
        &two,
        &ask(vec![gpus(3, 512, 20)]),
        Want::Reason(NODE_INSUFFICIENT_DEVICE),
    );
}

#[test]
fn a_partial_selection_is_counted_as_allocated_cards_insufficient() {
    // TestDevices_Fit "AllocatedCardsInsufficientRequest" with a node that has the
    // cards but not enough good ones.
    let cards = [
        roomy("dev-0", 1280).slots(20, 100).cores(10, 100),
        roomy("dev-1", 1280).sick(),
    ];
    check(
        "one of two cards healthy",
        &node(&cards),
        &ask(vec![gpus(2, 512, 20)]),
        Want::Reason("1/2 AllocatedCardsInsufficientRequest, 1/2 CardNotHealth"),
    );
}

#[test]
fn cores_above_100_are_booked_as_the_whole_card() {
    let p = fit(
        &node(&[roomy("dev-0", 1280)]),
        &ask(vec![gpus(1, 512, 120)]),
    )
    .unwrap();
    assert_eq!(booked(&p), vec![vec![("dev-0", 512, 100)]]);
}

#[test]
fn a_memory_percentage_books_that_share_of_the_card() {
    let p = fit(
        &node(&[roomy("dev-0", 1280).slots(20, 100).cores(10, 100)]),
        &ask(vec![gpus_pct(1, 10, 20)]),
    )
    .unwrap();
    assert_eq!(booked(&p), vec![vec![("dev-0", 128, 20)]]);
}

// ---------------------------------------------------------------------------
// pkg/device/nvidia/device_test.go: TestFit_DeviceCordon
// ---------------------------------------------------------------------------

#[test]
fn cordoned_cards_are_skipped_and_their_pods_untouched() {
    let cards = [roomy("dev-0", 128), roomy("dev-1", 128)];
    let request = ask(vec![gpus(1, 64, 50)]);
    check(
        "cordoned device is skipped, healthy sibling still fits",
        &cordoned_node(&cards, &["dev-1"]),
        &request,
        Want::Gpus(vec!["dev-0"]),
    );
    check(
        "all devices cordoned fails with CardCordoned",
        &cordoned_node(&cards, &["dev-0", "dev-1"]),
        &request,
        Want::Reason("2/2 CardCordoned"),
    );
    let busy = [
        roomy("dev-0", 128),
        roomy("dev-1", 128)
            .slots(1, 100)
            .cores(50, 100)
            .mem(64, 128),
    ];
    let n = cordoned_node(&busy, &["dev-1"]);
    check(
        "running pods on a cordoned device are unaffected",
        &n,
        &request,
        Want::Gpus(vec!["dev-0"]),
    );
    assert_eq!(n.usage[1].used, 1, "cordon must not touch existing usage");
    check(
        "nothing cordoned",
        &node(&cards),
        &request,
        Want::Gpus(vec!["dev-1"]),
    );
}

// ---------------------------------------------------------------------------
// pkg/device/nvidia/device_test.go: TestZeroMemoryPercentageIsAccountedAsWholeCard
// ---------------------------------------------------------------------------

fn container(limits: &[(&str, &str)]) -> Container {
    Container {
        name: "test".into(),
        resources: Some(ResourceRequirements {
            limits: Some(
                limits
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Divergence: HAMi reads a percentage of 0 as "not given" and books the whole
/// card, while its webhook would have refused a value outside 0..100 anyway. Here
/// the request is refused at `/filter` as at admission (`memory_percentage`), so
/// it books nothing rather than a card nobody asked for.
#[test]
fn a_zero_memory_percentage_is_refused_instead_of_booking_the_whole_card() {
    let err = parse_container_request(
        &container(&[
            ("nvidia.com/gpu", "1"),
            ("nvidia.com/gpumem-percentage", "0"),
        ]),
        &NvidiaConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "container test: nvidia.com/gpumem-percentage: 0 is not a percentage between 1 and 100"
    );
    let whole = parse_container_request(
        &container(&[
            ("nvidia.com/gpu", "1"),
            ("nvidia.com/gpumem-percentage", "100"),
        ]),
        &NvidiaConfig::default(),
    )
    .unwrap();
    let p = fit(&node(&[card("dev-0").mem(0, 11264)]), &ask(vec![whole])).unwrap();
    assert_eq!(booked(&p), vec![vec![("dev-0", 11264, 0)]]);
    check(
        "an almost full card must not fit",
        &node(&[card("dev-0").mem(11260, 11264)]),
        &ask(vec![whole]),
        Want::Reason("1/1 CardInsufficientMemory"),
    );
}

// ---------------------------------------------------------------------------
// pkg/scheduler/score_test.go: Test_fitInCertainDevice
// ---------------------------------------------------------------------------

/// The card of Test_fitInCertainDevice: NUMA 1, 1 of 4 slots, 2048 of 8192 MiB,
/// 1 of 4 cores.
fn certain(id: &str) -> Card {
    card(id).numa(1).slots(1, 4).mem(2048, 8192).cores(1, 4)
}

#[test]
fn fit_in_certain_device_table() {
    let cases: Vec<(&str, Vec<Card>, Ask, Want)> = vec![
        (
            "allocated device",
            vec![certain("test-0")],
            ask(vec![gpus(1, 1024, 1)]),
            Want::Gpus(vec!["test-0"]),
        ),
        (
            // HAMi's table uses a request type of another vendor.
            "card type don't match",
            vec![certain("test-0")],
            ask(vec![gpus(1, 1024, 1)]).annotation(USE_GPU_TYPE, "test"),
            Want::Reason("1/1 CardTypeMismatch"),
        ),
        (
            "device count less than device used",
            vec![certain("test-0").slots(5, 4)],
            ask(vec![gpus(1, 1024, 1)]),
            Want::Reason("1/1 CardTimeSlicingExhausted"),
        ),
        (
            "core limit exceed 100",
            vec![certain("test-0")],
            ask(vec![gpus(1, 1024, 200)]),
            Want::Reason("1/1 CardInsufficientCore"),
        ),
        (
            "card insufficient remaining memory",
            vec![certain("test-0").mem(8000, 8000)],
            ask(vec![gpus_pct(1, 100, 100)]),
            Want::Reason("1/1 CardInsufficientMemory"),
        ),
        (
            "exclusive access to a card already in use",
            vec![certain("test-0").cores(0, 100)],
            ask(vec![gpus(1, 100, 100)]),
            Want::Reason("1/1 ExclusiveDeviceAllocateConflict"),
        ),
        (
            "can't allocate core=0 job to an already full GPU",
            vec![certain("test-0").cores(1, 1)],
            ask(vec![gpus(1, 1024, 0)]),
            Want::Reason("1/1 CardComputeUnitsExhausted"),
        ),
        (
            "card uuid don't match",
            vec![certain("test-0")],
            ask(vec![gpus(1, 1024, 1)]).annotation(USE_GPU_UUID, "abc"),
            Want::Reason("1/1 CardUuidMismatch"),
        ),
        (
            "numa not fit",
            vec![certain("test-0").numa(0), certain("test-1").numa(1)],
            ask(vec![gpus(2, 1024, 1)])
                .annotation(USE_GPU_TYPE, "NVIDIA")
                .annotation(NUMA_BIND, "true"),
            Want::Reason("1/2 AllocatedCardsInsufficientRequest, 1/2 NumaNotFit"),
        ),
    ];
    for (case, cards, ask, want) in cases {
        check(case, &node(&cards), &ask, want);
    }
}

#[test]
fn fit_in_certain_device_books_what_was_asked() {
    let p = fit(&node(&[certain("test-0")]), &ask(vec![gpus(1, 1024, 1)])).unwrap();
    assert_eq!(booked(&p), vec![vec![("test-0", 1024, 1)]]);
}

#[test]
fn every_kind_of_rejection_is_counted_over_the_nvidia_cards_only() {
    // "test device kind of not fit reason": two cards of other vendors, three outside
    // the UUID list, four without slots, two without memory, one without cores.
    let kind = |id: &str, numa: i32, model: &str| {
        card(id)
            .numa(numa)
            .model(model)
            .slots(1, 4)
            .mem(2048, 8192)
            .cores(1, 100)
    };
    let cards = vec![
        kind("a", 0, "DCU"),
        kind("f", 0, "MXC500"),
        kind("b", 1, "NVIDIA"),
        kind("q", 1, "NVIDIA"),
        kind("i", 1, "NVIDIA"),
        kind("c", 1, "NVIDIA").slots(4, 4),
        kind("j", 1, "NVIDIA").slots(4, 4),
        kind("u", 1, "NVIDIA").slots(4, 4),
        kind("l", 1, "NVIDIA").slots(4, 4),
        kind("d", 1, "NVIDIA").mem(8048, 8192),
        kind("m", 1, "NVIDIA").mem(8048, 8192),
        kind("e", 1, "NVIDIA").cores(90, 100),
    ];
    check(
        "test device kind of not fit reason",
        &node(&cards),
        &ask(vec![gpus(2, 1024, 20)]).annotation(USE_GPU_UUID, "a,f,c,d,e,g,h,j,l,u,m"),
        Want::Reason(
            "1/10 CardInsufficientCore, 2/10 CardInsufficientMemory, 3/10 CardUuidMismatch, 4/10 CardTimeSlicingExhausted",
        ),
    );
}

// ---------------------------------------------------------------------------
// pkg/device/nvidia/fit_checks_test.go
// ---------------------------------------------------------------------------

/// A healthy free card for the single-check tables: 10 slots, 8192 MiB, 100 cores.
fn free(id: &str) -> Card {
    card(id).mem(0, 8192)
}

#[test]
fn card_health_check() {
    let request = ask(vec![gpus(1, 100, 10)]);
    check(
        "healthy card passes",
        &node(&[free("dev-0")]),
        &request,
        Want::Gpus(vec!["dev-0"]),
    );
    check(
        "unhealthy card fails",
        &node(&[free("dev-0").sick()]),
        &request,
        Want::Reason("1/1 CardNotHealth"),
    );
}

#[test]
fn card_uuid_check() {
    let cases = [
        ("no annotation constraint passes", "GPU-aaa", vec![], true),
        (
            "use-gpuuuid matches passes",
            "GPU-aaa",
            vec![(USE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            true,
        ),
        (
            "use-gpuuuid mismatch fails",
            "GPU-ccc",
            vec![(USE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            false,
        ),
        (
            "nouse-gpuuuid match fails",
            "GPU-aaa",
            vec![(NOUSE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            false,
        ),
        (
            "nouse-gpuuuid mismatch passes",
            "GPU-ccc",
            vec![(NOUSE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            true,
        ),
        (
            "empty use-gpuuuid is no constraint",
            "GPU-aaa",
            vec![(USE_GPU_UUID, "")],
            true,
        ),
    ];
    for (case, id, annotations, pass) in cases {
        let mut request = ask(vec![gpus(1, 100, 10)]);
        for (k, v) in &annotations {
            request = request.annotation(k, v);
        }
        let want = if pass {
            Want::Gpus(vec![id])
        } else {
            Want::Reason("1/1 CardUuidMismatch")
        };
        check(case, &node(&[free(id)]), &request, want);
    }
}

#[test]
fn card_time_slicing_check() {
    for (case, count, used, pass) in [
        ("plenty of slots", 100, 0, true),
        ("one slot remaining", 10, 9, true),
        ("exactly exhausted", 10, 10, false),
        ("over-committed", 10, 15, false),
    ] {
        check_one_card(
            case,
            free("dev-0").slots(used, count),
            &ask(vec![gpus(1, 100, 10)]),
            (!pass).then_some("1/1 CardTimeSlicingExhausted"),
        );
    }
}

#[test]
fn requested_cores_are_capped_at_the_whole_card() {
    for (case, asked, counted) in [
        ("zero stays zero", 0, 0),
        ("under 100 unchanged", 50, 50),
        ("exactly 100 unchanged", 100, 100),
        ("101 clamped to 100", 101, 100),
        ("200 clamped to 100", 200, 100),
    ] {
        assert_eq!(gpus(1, 0, asked).unwrap().cores(), counted, "{case}");
    }
}

#[test]
fn memory_asked_per_card() {
    for (case, memreq, pct, totalmem, want) in [
        ("explicit memreq wins", 2048, Some(50), 8192, 2048),
        (
            "percentage applied when memreq zero",
            0,
            Some(50),
            8192,
            4096,
        ),
        // HAMi's sentinel 101 ("percentage unset") is `None` here.
        (
            "percentage unset with memreq zero gives zero",
            0,
            None,
            8192,
            0,
        ),
        ("percentage 100 of 16GB", 0, Some(100), 16384, 16384),
        ("percentage 25 of 8GB", 0, Some(25), 8192, 2048),
    ] {
        let req = ContainerRequest {
            nums: 1,
            memreq,
            mem_percentage: pct,
            coresreq: 0,
        };
        assert_eq!(req.memory_on(totalmem), want, "{case}");
    }
}

#[test]
fn card_quota_check() {
    let cards = [free("dev-0")];
    check(
        "no quota, no constraint",
        &node(&cards),
        &ask(vec![gpus(1, 100, 10)]),
        Want::Gpus(vec!["dev-0"]),
    );
    check(
        "quota exceeded",
        &node(&cards),
        &ask(vec![gpus(1, 500, 10)]).memory_quota(100, 0),
        Want::Reason("1/1 ResourceQuotaNotFit"),
    );
}

#[test]
fn card_memory_check() {
    for (case, total, used, asked, pass) in [
        ("plenty of memory", 8192, 0, 100, true),
        ("exact fit", 1024, 512, 512, true),
        ("one byte short", 1024, 512, 513, false),
        ("all used", 1024, 1024, 1, false),
        ("zero request fits", 1024, 1024, 0, true),
    ] {
        check_one_card(
            case,
            card("dev-0").mem(used, total),
            &ask(vec![gpus(1, asked, 0)]),
            (!pass).then_some("1/1 CardInsufficientMemory"),
        );
    }
}

#[test]
fn card_core_check() {
    for (case, total, used, asked, want) in [
        ("plenty of cores", 100, 0, 10, None),
        ("exact fit", 100, 50, 50, None),
        ("one short", 100, 50, 51, Some("1/1 CardInsufficientCore")),
        (
            "all used with request",
            100,
            100,
            1,
            Some("1/1 CardInsufficientCore"),
        ),
        // Passes the core check; the compute-exhausted check right after it rejects
        // the card (as in HAMi's pipeline).
        (
            "zero request with cores used",
            100,
            100,
            0,
            Some("1/1 CardComputeUnitsExhausted"),
        ),
        (
            "zero totalcore with non-zero request fails",
            0,
            0,
            50,
            Some("1/1 CardInsufficientCore"),
        ),
        ("zero totalcore with zero request passes", 0, 0, 0, None),
    ] {
        check_one_card(
            case,
            free("dev-0").cores(used, total),
            &ask(vec![gpus(1, 100, asked)]),
            want,
        );
    }
}

#[test]
fn card_exclusive_check() {
    for (case, total, asked, used, pass) in [
        ("non-exclusive passes even when shared", 100, 50, 5, true),
        ("exclusive request on free card passes", 100, 100, 0, true),
        ("exclusive request on shared card fails", 100, 100, 1, false),
        (
            "exclusive request on heavily shared card fails",
            100,
            100,
            10,
            false,
        ),
        (
            "exclusive request on non-100 totalcore passes",
            200,
            100,
            5,
            true,
        ),
        ("coresreq below 100 never exclusive", 100, 99, 10, true),
    ] {
        check_one_card(
            case,
            free("dev-0").slots(used, 100).cores(0, total),
            &ask(vec![gpus(1, 100, asked)]),
            (!pass).then_some("1/1 ExclusiveDeviceAllocateConflict"),
        );
    }
}

#[test]
fn card_compute_exhausted_check() {
    for (case, total, used, asked, want) in [
        ("cores available, request zero passes", 100, 50, 0, None),
        (
            "cores full, request zero fails",
            100,
            100,
            0,
            Some("1/1 CardComputeUnitsExhausted"),
        ),
        // HAMi: passes this check, "handled by core check" (which runs first).
        (
            "cores full but request non-zero",
            100,
            100,
            10,
            Some("1/1 CardInsufficientCore"),
        ),
        ("zero totalcore passes", 0, 0, 0, None),
        ("cores partial, request zero passes", 100, 30, 0, None),
    ] {
        check_one_card(
            case,
            free("dev-0").cores(used, total),
            &ask(vec![gpus(1, 100, asked)]),
            want,
        );
    }
}

#[test]
fn card_checks_stop_at_the_first_failure_in_hami_order() {
    check(
        "uuid fails before timeslicing",
        &node(&[card("GPU-other").slots(5, 0)]),
        &ask(vec![gpus(1, 0, 0)]).annotation(USE_GPU_UUID, "GPU-aaa"),
        Want::Reason("1/1 CardUuidMismatch"),
    );
    check(
        "timeslicing fails before memory",
        &node(&[card("dev-0").slots(5, 5).mem(100, 100)]),
        &ask(vec![gpus(1, 50, 0)]),
        Want::Reason("1/1 CardTimeSlicingExhausted"),
    );
    check(
        "memory fails before core",
        &node(&[card("dev-0").mem(80, 100).cores(95, 100)]),
        &ask(vec![gpus(1, 50, 50)]),
        Want::Reason("1/1 CardInsufficientMemory"),
    );
    check(
        "core fails before exclusive",
        &node(&[card("dev-0").slots(5, 10).mem(0, 8192).cores(95, 100)]),
        &ask(vec![gpus(1, 100, 100)]),
        Want::Reason("1/1 CardInsufficientCore"),
    );
    check(
        "all pass",
        &node(&[free("dev-0")]),
        &ask(vec![gpus(1, 100, 10)]),
        Want::Gpus(vec!["dev-0"]),
    );
}

// ---------------------------------------------------------------------------
// pkg/scheduler/score_test.go: Test_fitInDevices
// ---------------------------------------------------------------------------

#[test]
fn fit_in_devices_table() {
    check(
        "all device score for one node",
        &node(&[certain("test-1"), certain("test-2")]),
        &ask(vec![gpus(1, 1024, 1)]),
        Want::Gpus(vec!["test-2"]),
    );
    check(
        "request devices nums cannot exceed the total number of devices on the node",
        &node(&[certain("test-1")]),
        &ask(vec![gpus(2, 1024, 1)]),
        Want::Reason("NodeInsufficientDevice"),
    );
}

// ---------------------------------------------------------------------------
// pkg/scheduler/score_test.go: Test_Nvidia_GPU_Topology, TestComputeWorstSingleCard,
// TestComputeBestCombination
// ---------------------------------------------------------------------------

/// The six cards of Test_Nvidia_GPU_Topology with the given pair scores.
fn topology_node(links: &[(&str, &[(&str, i64)])]) -> Node {
    let numa = |id: &str| i32::from(!matches!(id, "a" | "b"));
    let cards: Vec<Card> = links
        .iter()
        .map(|(id, l)| {
            card(id)
                .numa(numa(id))
                .slots(1, 4)
                .mem(2048, 8192)
                .cores(1, 100)
                .links(l)
        })
        .collect();
    node(&cards)
}

#[test]
fn topology_aware_picks_the_best_connected_set() {
    let n = topology_node(&[
        ("a", &[("b", 1), ("c", 1), ("d", 1), ("e", 1), ("f", 100)]),
        ("b", &[("a", 1), ("c", 1), ("d", 1), ("e", 1), ("f", 1)]),
        ("c", &[("a", 1), ("b", 1), ("d", 1), ("e", 1), ("f", 100)]),
        ("d", &[("a", 1), ("b", 1), ("c", 1), ("e", 1), ("f", 1)]),
        ("e", &[("a", 1), ("b", 1), ("c", 1), ("d", 1), ("f", 1)]),
        ("f", &[("a", 100), ("b", 1), ("c", 100), ("d", 1), ("e", 1)]),
    ]);
    let p = fit(&n, &ask(vec![gpus(3, 1024, 20)]).policy("topology-aware")).unwrap();
    assert_eq!(
        booked(&p),
        vec![vec![("f", 1024, 20), ("c", 1024, 20), ("a", 1024, 20)]]
    );
}

#[test]
fn topology_aware_single_card_keeps_the_well_connected_cards_free() {
    let n = topology_node(&[
        (
            "a",
            &[("b", 100), ("c", 100), ("d", 100), ("e", 100), ("f", 1)],
        ),
        (
            "b",
            &[("a", 100), ("c", 100), ("d", 100), ("e", 100), ("f", 1)],
        ),
        (
            "c",
            &[("a", 100), ("b", 100), ("d", 100), ("e", 100), ("f", 1)],
        ),
        (
            "d",
            &[("a", 100), ("b", 100), ("c", 100), ("e", 100), ("f", 1)],
        ),
        (
            "e",
            &[("a", 100), ("b", 100), ("c", 100), ("d", 100), ("f", 1)],
        ),
        ("f", &[("a", 1), ("b", 1), ("c", 1), ("d", 1), ("e", 1)]),
    ]);
    let p = fit(&n, &ask(vec![gpus(1, 1024, 20)]).policy("topology-aware")).unwrap();
    assert_eq!(booked(&p), vec![vec![("f", 1024, 20)]]);
}

#[test]
fn topology_aware_worst_single_card_and_best_pair() {
    // gpu0 sums 300, gpu1 250, gpu2 350; pairs 0-1 100, 0-2 200, 1-2 150.
    let n = node(&[
        card("gpu0").links(&[("gpu1", 100), ("gpu2", 200)]),
        card("gpu1").links(&[("gpu0", 100), ("gpu2", 150)]),
        card("gpu2").links(&[("gpu0", 200), ("gpu1", 150)]),
    ]);
    let single = fit(&n, &ask(vec![gpus(1, 100, 0)]).policy("topology-aware")).unwrap();
    assert_eq!(uuids(&single), vec![vec!["gpu1"]]);
    let pair = fit(&n, &ask(vec![gpus(2, 100, 0)]).policy("topology-aware")).unwrap();
    let mut got = uuids(&pair).concat();
    got.sort();
    assert_eq!(got, vec!["gpu0", "gpu2"]);
}

// ---------------------------------------------------------------------------
// pkg/scheduler/score_test.go: the device scoring weight tests
// ---------------------------------------------------------------------------

/// gpu-a: 1 of 10 slots, 90 of 100 cores, 10 of 100 MiB; gpu-b: 7 slots, 10 cores,
/// 20 MiB. A 40% memory request scores a at 16 and b at 15 by default, a at 26 and b
/// at 27 with memory weighted 3.
fn weighted_node() -> Node {
    node(&[
        card("gpu-a")
            .index(0)
            .slots(1, 10)
            .cores(90, 100)
            .mem(10, 100),
        card("gpu-b")
            .index(1)
            .slots(7, 10)
            .cores(10, 100)
            .mem(20, 100),
    ])
}

#[test]
fn scoring_weights_change_which_card_binpack_fills() {
    let n = weighted_node();
    let base = ask(vec![gpus_pct(1, 40, 0)]).policy("binpack");
    assert_eq!(uuids(&fit(&n, &base).unwrap()), vec![vec!["gpu-a"]]);
    let weighted = base.weights("slot=1,core=1,memory=3");
    assert_eq!(uuids(&fit(&n, &weighted).unwrap()), vec![vec!["gpu-b"]]);
}

#[test]
fn scoring_weights_break_topology_ties() {
    let n = node(&[
        card("gpu-a")
            .index(0)
            .slots(1, 10)
            .cores(90, 100)
            .mem(10, 100)
            .links(&[("gpu-b", 1)]),
        card("gpu-b")
            .index(1)
            .slots(7, 10)
            .cores(10, 100)
            .mem(20, 100)
            .links(&[("gpu-a", 1)]),
    ]);
    let base = ask(vec![gpus_pct(1, 40, 0)]).policy("topology-aware");
    assert_eq!(uuids(&fit(&n, &base).unwrap()), vec![vec!["gpu-b"]]);
    let weighted = base.weights("slot=1,core=1,memory=3");
    assert_eq!(uuids(&fit(&n, &weighted).unwrap()), vec![vec!["gpu-a"]]);
}

// ---------------------------------------------------------------------------
// pkg/scheduler/policy: device score (TestComputeScore's worked example,
// gpu_policy_model_type_test.go) and node score (TestComputeDefaultScore)
// ---------------------------------------------------------------------------

#[test]
fn device_score_counts_the_request_with_current_usage() {
    // hami-compat §7.4: used 2/10, cores 1/4, 2048/8192 MiB, asking 1 core and
    // 1024 MiB => 10 x (0.3 + 0.5 + 0.375).
    let c = card("test-device").slots(2, 10).cores(1, 4).mem(2048, 8192);
    let req = gpus(1, 1024, 1).unwrap();
    let score = device_score(&c.device, &c.usage, &req, &ScoringWeights::default());
    assert!(close(score, 11.75), "{score}");
}

#[test]
fn device_score_counts_the_request_on_real_card_models() {
    // slots 1/10 + cores 30/100 + memory 20480/40960 = 0.9, times 10.
    for model in ["NVIDIA A100-SXM4-40GB", "NVIDIA"] {
        let c = card("card-0").model(model).mem(0, 40960);
        let req = gpus(1, 20480, 30).unwrap();
        let score = device_score(&c.device, &c.usage, &req, &ScoringWeights::default());
        assert!(close(score, 9.0), "{model}: {score}");
    }
}

#[test]
fn binpack_fills_the_smaller_card_on_a_mixed_capacity_node() {
    // After placing 20 GiB the 40 GB card is 0.90 used and the 80 GB card 0.85, so
    // binpack takes the 40 GB card and keeps the large one free.
    let n = node(&[
        card("gpu-40g")
            .index(0)
            .model("NVIDIA A100-SXM4-40GB")
            .mem(0, 40960),
        card("gpu-80g")
            .index(1)
            .model("NVIDIA A100-SXM4-80GB")
            .slots(1, 10)
            .cores(5, 100)
            .mem(4096, 81920),
    ]);
    let p = fit(&n, &ask(vec![gpus(1, 20480, 30)]).policy("binpack")).unwrap();
    assert_eq!(uuids(&p), vec![vec!["gpu-40g"]]);
}

#[test]
fn node_score_sums_utilisation_over_all_cards() {
    let zero = card("zero").slots(0, 0).mem(0, 0).cores(0, 0);
    assert_eq!(node_score(&[zero.device], &[zero.usage]), 0.0);
    assert_eq!(node_score(&[], &[]), 0.0);
    let d1 = card("device1").slots(50, 100).mem(100, 100).cores(100, 100);
    let d2 = card("device2")
        .numa(1)
        .slots(75, 150)
        .mem(200, 200)
        .cores(200, 200)
        .sick();
    let score = node_score(&[d1.device, d2.device], &[d1.usage, d2.usage]);
    assert!(close(score, 25.0), "{score}");
}

// ---------------------------------------------------------------------------
// pkg/scheduler/numa_sort_test.go
// ---------------------------------------------------------------------------

#[test]
fn numa_bind_keeps_same_numa_cards_together() {
    // A (NUMA 0, busiest), B (NUMA 0, idlest), C (NUMA 1, between): spread alone
    // would interleave C between them; numa-bind keeps NUMA 0 together and fits.
    let n = node(&[
        card("A_n0").index(0).slots(5, 10).mem(0, 8192),
        card("B_n0").index(1).slots(1, 10).mem(0, 8192),
        card("C_n1").index(2).numa(1).slots(3, 10).mem(0, 8192),
    ]);
    let p = fit(
        &n,
        &ask(vec![gpus(2, 100, 10)]).annotation(NUMA_BIND, "true"),
    )
    .unwrap();
    let mut got = uuids(&p).concat();
    got.sort();
    assert_eq!(got, vec!["A_n0", "B_n0"]);
}

#[test]
fn without_numa_bind_the_idlest_card_wins_across_numa_nodes() {
    let n = node(&[
        card("P_n0").index(0).slots(1, 10).mem(0, 8192),
        card("Q_n1").index(1).numa(1).slots(8, 10).mem(0, 8192),
        card("R_n1").index(2).numa(1).slots(5, 10).mem(0, 8192),
    ]);
    let p = fit(&n, &ask(vec![gpus(1, 100, 10)])).unwrap();
    assert_eq!(uuids(&p), vec![vec!["P_n0"]]);
}

// ---------------------------------------------------------------------------
// pkg/scheduler/score_test.go: Test_calcScore (NVIDIA cases)
// ---------------------------------------------------------------------------

/// A card of Test_calcScore: 10 slots, 8000 MiB, 100 cores; `half` means 5 slots,
/// 4000 MiB and 50 cores already used.
fn calc(id: &str, index: u32, half: bool) -> Card {
    let c = card(id).index(index);
    if half {
        c.slots(5, 10).mem(4000, 8000).cores(50, 100)
    } else {
        c
    }
}

/// A Test_calcScore row: case, cards, pod, GPUs per container, node score.
type CalcRow = (&'static str, Vec<Card>, Ask, Vec<Vec<&'static str>>, f64);

#[test]
fn calc_score_table() {
    let c = gpus(1, 1000, 30);
    let cases: Vec<CalcRow> = vec![
        (
            "one node one device one pod one container use one device",
            vec![calc("uuid1", 0, false)],
            ask(vec![c]),
            vec![vec!["uuid1"]],
            0.0,
        ),
        (
            "one device having use before",
            vec![calc("uuid1", 0, true)],
            ask(vec![c]),
            vec![vec!["uuid1"]],
            15.0,
        ),
        (
            "one node two device one container use one device",
            vec![calc("uuid1", 0, false), calc("uuid2", 0, false)],
            ask(vec![c]),
            vec![vec!["uuid2"]],
            0.0,
        ),
        (
            "two devices, one having use 50%",
            vec![calc("uuid1", 0, false), calc("uuid2", 0, true)],
            ask(vec![c]),
            vec![vec!["uuid1"]],
            7.5,
        ),
        (
            "one container use two devices",
            vec![calc("uuid1", 0, false), calc("uuid2", 0, false)],
            ask(vec![gpus(2, 1000, 30)]),
            vec![vec!["uuid2", "uuid1"]],
            0.0,
        ),
        (
            "one container use two devices, both having use before",
            vec![calc("uuid1", 0, true), calc("uuid2", 0, true)],
            ask(vec![gpus(2, 1000, 30)]),
            vec![vec!["uuid2", "uuid1"]],
            15.0,
        ),
        (
            "two containers, the first uses a device",
            vec![calc("uuid1", 0, false)],
            ask(vec![c, None]),
            vec![vec!["uuid1"], vec![]],
            0.0,
        ),
        (
            "two containers, the second uses a device",
            vec![calc("uuid1", 0, false)],
            ask(vec![None, c]),
            vec![vec![], vec!["uuid1"]],
            0.0,
        ),
        (
            "three containers, the middle one uses a device",
            vec![calc("uuid1", 0, false)],
            ask(vec![None, c, None]),
            vec![vec![], vec!["uuid1"], vec![]],
            0.0,
        ),
        (
            "two containers with spread should not share a device",
            vec![calc("uuid1", 0, false), calc("uuid2", 1, false)],
            ask(vec![gpus(1, 8000, 30), gpus(1, 1000, 30)]),
            vec![vec!["uuid2"], vec!["uuid1"]],
            0.0,
        ),
        (
            "one device, two containers share it",
            vec![calc("uuid1", 0, false)],
            ask(vec![c, gpus(1, 1000, 40)]),
            vec![vec!["uuid1"], vec!["uuid1"]],
            0.0,
        ),
    ];
    for (case, cards, ask, want, score) in cases {
        let p = fit(&node(&cards), &ask).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(uuids(&p), want, "{case}");
        assert!(close(p.node_score, score), "{case}: score {}", p.node_score);
    }
}

#[test]
fn calc_score_books_each_container_on_its_device() {
    let p = fit(
        &node(&[calc("uuid1", 0, false), calc("uuid2", 1, false)]),
        &ask(vec![gpus(1, 8000, 30), gpus(1, 1000, 30)]),
    )
    .unwrap();
    assert_eq!(
        booked(&p),
        vec![vec![("uuid2", 8000, 30)], vec![("uuid1", 1000, 30)]]
    );
}

#[test]
fn calc_score_card_too_small_fails_the_node_with_a_detailed_reason() {
    // The stored table expects the generic "NodeUnfitPod"; since v2.10 (#1773) the
    // live path returns the detailed reason (hami-compat §7.8).
    check(
        "not enough resource, node should be failed",
        &node(&[calc("uuid1", 0, false).mem(0, 50)]),
        &ask(vec![gpus(1, 1000, 30)]),
        Want::Reason("1/1 CardInsufficientMemory"),
    );
}

// ---------------------------------------------------------------------------
// pkg/device/nvidia/device_test.go: TestFitQuota (the pod's own earlier GPUs count
// against the namespace quota, init containers by their peak)
// ---------------------------------------------------------------------------

fn two_cards() -> Node {
    node(&[
        card("gpu-0").index(0).mem(0, 8192),
        card("gpu-1").index(1).mem(0, 8192),
    ])
}

#[test]
fn quota_counts_the_pods_earlier_gpus() {
    let fits = |a: Ask| fit(&two_cards(), &a.memory_quota(2048, 0));
    assert!(
        fits(ask(vec![gpus(1, 100, 1)])).is_ok(),
        "no tmp and no allocated"
    );
    assert_eq!(
        fits(ask(vec![gpus(1, 3000, 1)])),
        Err("2/2 ResourceQuotaNotFit".into()),
        "request exceed quota"
    );
    // HAMi's tmpdev cases: earlier GPUs of the same container.
    assert!(fits(ask(vec![gpus(2, 1024, 1)])).is_ok(), "tmpdev");
    assert_eq!(
        fits(ask(vec![gpus(2, 1100, 1)])),
        Err("1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit".into()),
        "tmpdev exceed quota"
    );
    // Allocated devs: earlier containers of the pod.
    assert!(
        fits(ask(vec![gpus(1, 1024, 2), gpus(1, 100, 1)])).is_ok(),
        "allocated devs"
    );
    assert_eq!(
        fits(ask(vec![gpus(1, 1024, 2), gpus(1, 2000, 1)])),
        Err("2/2 ResourceQuotaNotFit".into()),
        "allocated devs exceed quota"
    );
    assert!(
        fits(ask(vec![
            gpus(1, 1024, 2),
            gpus(1, 1024, 5),
            gpus(1, 100, 1)
        ]))
        .is_err(),
        "exceed quota"
    );
    assert!(
        fits(ask(vec![gpus(1, 100, 2), gpus(1, 100, 1), gpus(1, 100, 1)])).is_ok(),
        "fit"
    );
}

#[test]
fn quota_counts_init_containers_by_their_peak() {
    let fits = |a: Ask| fit(&two_cards(), &a.memory_quota(2048, 0));
    assert!(
        fits(ask(vec![gpus(1, 1500, 2), gpus(1, 1500, 1), None]).init(2)).is_ok(),
        "fitting second init container maxes against first"
    );
    assert!(
        fits(ask(vec![gpus(1, 1024, 2), gpus(1, 1024, 2), gpus(1, 500, 1)]).init(2)).is_ok(),
        "sequential init containers counted as peak not sum"
    );
    assert!(
        fits(ask(vec![gpus(1, 2100, 2), gpus(1, 100, 1)]).init(1)).is_err(),
        "collapsed init peak still enforces quota"
    );
}

#[test]
fn quota_adds_an_init_peak_on_one_card_to_app_use_of_another() {
    // The init container lands on the big card and the app container on the small
    // one, so the pod holds 2000 + 100 MiB at its peak: over a 2048 MiB quota.
    let n = node(&[
        card("small").index(0).mem(0, 4000),
        card("big").index(1).slots(1, 10).mem(4000, 16000),
    ]);
    let a = ask(vec![gpus(1, 2000, 0), gpus(1, 100, 0)]).init(1);
    let p = fit(&n, &a).unwrap();
    assert_eq!(uuids(&p), vec![vec!["big"], vec!["small"]]);
    assert_eq!(
        fit(&n, &a.memory_quota(2048, 0)),
        Err("2/2 ResourceQuotaNotFit".into())
    );
}

// ---------------------------------------------------------------------------
// pkg/scheduler/policy_fallback_placement_test.go
// ---------------------------------------------------------------------------

/// gpu-idle, gpu-mid (2 slots, 50 cores, 4096 MiB) and gpu-busy (3, 75, 6144): binpack
/// takes gpu-busy, spread gpu-idle.
fn fallback_node() -> Node {
    node(&[
        card("gpu-idle").mem(0, 8192),
        card("gpu-mid").slots(2, 10).cores(50, 100).mem(4096, 8192),
        card("gpu-busy").slots(3, 10).cores(75, 100).mem(6144, 8192),
    ])
}

fn place_with_policy(annotation: Option<&str>, cluster_default: &str) -> String {
    let mut annotations = BTreeMap::new();
    if let Some(value) = annotation {
        annotations.insert(
            crate::policy::GPU_POLICY_ANNOTATION.to_string(),
            value.to_string(),
        );
    }
    let policies = PodPolicies::resolve(
        &annotations,
        NodePolicy::Binpack,
        &GpuPolicy::parse_flag(cluster_default).unwrap(),
    )
    .unwrap();
    let mut a = ask(vec![gpus(1, 1024, 10)]);
    a.gpu_policy = policies.gpu;
    let p = fit(&fallback_node(), &a).unwrap();
    uuids(&p)[0][0].to_string()
}

#[test]
fn gpu_policy_annotation_and_cluster_default_place_as_named() {
    assert_eq!(place_with_policy(Some("binpack"), "binpack"), "gpu-busy");
    assert_eq!(place_with_policy(Some("spread"), "binpack"), "gpu-idle");
    assert_eq!(place_with_policy(None, "binpack"), "gpu-busy");
    assert_eq!(place_with_policy(None, "spread"), "gpu-idle");
    assert_eq!(place_with_policy(Some("binpakc"), "spread"), "gpu-idle");
}

#[test]
fn an_unknown_gpu_policy_annotation_places_like_the_cluster_default() {
    assert_eq!(place_with_policy(Some("binpakc"), "binpack"), "gpu-busy");
}
