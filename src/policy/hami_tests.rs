//! HAMi's own test tables for the scheduling policies, translated case by case:
//! `pkg/scheduler/policy/gpu_policy_test.go` (TestDeviceUsageList_Less),
//! `pkg/scheduler/policy/node_policy_test.go` (TestLess),
//! `pkg/scheduler/numa_sort_test.go` (the order part),
//! `pkg/scheduler/policy_fallback_placement_test.go` (TestResolveNodeSchedulerPolicy),
//! `pkg/util/scheduler_policy_test.go`, `pkg/util/scheduler_policy_normalize_test.go`
//! and `pkg/util/device_scoring_weights_test.go`.

use super::*;

fn key(score: f64, numa: i32, index: u32) -> DeviceSortKey {
    DeviceSortKey {
        score,
        numa,
        used: 0,
        index,
    }
}

/// Device positions in the order they are tried (first tried first).
fn tried(policy: &GpuPolicy, keys: &[DeviceSortKey], numa_bind: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    policy.sort_candidates(&mut order, keys, numa_bind);
    order.reverse();
    order
}

/// HAMi's `Less(0, 1)` over two devices: whether device 0 sorts before device 1,
/// i.e. device 1 is tried first.
fn less(policy: &str, a: DeviceSortKey, b: DeviceSortKey, numa_bind: bool) -> bool {
    tried(&GpuPolicy::parse(policy), &[a, b], numa_bind) == vec![1, 0]
}

// ---------------------------------------------------------------------------
// pkg/scheduler/policy/gpu_policy_test.go: TestDeviceUsageList_Less
// ---------------------------------------------------------------------------

#[test]
fn gpu_order_is_score_first_and_numa_breaks_ties() {
    // v2.10 sorts by score first (#1806). The stored table predates that change and
    // compared NUMA first, so its rows "Binpack policy with different Numa false" and
    // "Spread policy with different Numa true" flip; with numa-bind (next test) NUMA
    // comes first again and those rows hold.
    for (case, policy, a, b, want) in [
        (
            "binpack, same numa",
            "binpack",
            key(10.0, 0, 0),
            key(20.0, 0, 1),
            true,
        ),
        (
            "binpack, different numa",
            "binpack",
            key(10.0, 1, 0),
            key(20.0, 0, 1),
            true,
        ),
        (
            "binpack, different numa, score decides",
            "binpack",
            key(10.0, 0, 0),
            key(20.0, 1, 1),
            true,
        ),
        (
            "spread, same numa",
            "spread",
            key(10.0, 0, 0),
            key(20.0, 0, 1),
            false,
        ),
        (
            "spread, different numa",
            "spread",
            key(10.0, 1, 0),
            key(20.0, 0, 1),
            false,
        ),
        (
            "spread, different numa, score decides",
            "spread",
            key(10.0, 0, 0),
            key(20.0, 1, 1),
            false,
        ),
        (
            "binpack, equal score, lower numa first",
            "binpack",
            key(10.0, 0, 0),
            key(10.0, 1, 1),
            true,
        ),
        (
            "spread, equal score, lower numa first",
            "spread",
            key(10.0, 0, 0),
            key(10.0, 1, 1),
            true,
        ),
    ] {
        assert_eq!(less(policy, a, b, false), want, "{case}");
    }
}

#[test]
fn gpu_order_with_numa_bind_groups_numa_nodes_first() {
    for (case, policy, a, b, want) in [
        (
            "binpack, same numa",
            "binpack",
            key(10.0, 0, 0),
            key(20.0, 0, 1),
            true,
        ),
        (
            "binpack, different numa true",
            "binpack",
            key(10.0, 1, 0),
            key(20.0, 0, 1),
            true,
        ),
        (
            "binpack, different numa false",
            "binpack",
            key(10.0, 0, 0),
            key(20.0, 1, 1),
            false,
        ),
        (
            "spread, same numa",
            "spread",
            key(10.0, 0, 0),
            key(20.0, 0, 1),
            false,
        ),
        (
            "spread, different numa false",
            "spread",
            key(10.0, 1, 0),
            key(20.0, 0, 1),
            false,
        ),
        (
            "spread, different numa true",
            "spread",
            key(10.0, 0, 0),
            key(20.0, 1, 1),
            true,
        ),
    ] {
        assert_eq!(less(policy, a, b, true), want, "{case}");
    }
}

// ---------------------------------------------------------------------------
// pkg/scheduler/numa_sort_test.go
// ---------------------------------------------------------------------------

#[test]
fn spread_interleaves_numa_nodes_unless_numa_bind_is_asked() {
    // A (NUMA 0, score 5), B (NUMA 0, score 1), C (NUMA 1, score 3).
    let keys = [key(5.0, 0, 0), key(1.0, 0, 1), key(3.0, 1, 2)];
    let spread = GpuPolicy::parse("spread");
    assert_eq!(tried(&spread, &keys, false), vec![1, 2, 0]);
    // With numa-bind both NUMA-0 cards are tried one after the other.
    assert_eq!(tried(&spread, &keys, true), vec![2, 1, 0]);
}

#[test]
fn spread_tries_the_idlest_card_whatever_its_numa_node() {
    // P (NUMA 0, score 1), Q (NUMA 1, score 8), R (NUMA 1, score 5).
    let keys = [key(1.0, 0, 0), key(8.0, 1, 1), key(5.0, 1, 2)];
    assert_eq!(tried(&GpuPolicy::parse("spread"), &keys, false)[0], 0);
}

// ---------------------------------------------------------------------------
// pkg/scheduler/policy/node_policy_test.go: TestLess
// ---------------------------------------------------------------------------

#[test]
fn spread_prefers_the_emptier_node_and_binpack_the_fuller() {
    // HAMi sorts nodes with Less and takes the last; `prefers(a, b) == Greater`
    // means a is taken over b.
    for (case, policy, i, j, i_sorts_first) in [
        (
            "spread, i score higher",
            NodePolicy::Spread,
            20.0,
            10.0,
            true,
        ),
        (
            "spread, j score higher",
            NodePolicy::Spread,
            10.0,
            20.0,
            false,
        ),
        (
            "binpack, i score lower",
            NodePolicy::Binpack,
            10.0,
            20.0,
            true,
        ),
        (
            "binpack, j score lower",
            NodePolicy::Binpack,
            20.0,
            10.0,
            false,
        ),
    ] {
        let j_preferred = policy.prefers(j, i) == Ordering::Greater;
        assert_eq!(j_preferred, i_sorts_first, "{case}");
    }
}

// ---------------------------------------------------------------------------
// pkg/util/scheduler_policy_test.go: TestIsValidGPUSchedulerPolicy,
// TestIsValidNodeSchedulerPolicy (the flag parsers)
// ---------------------------------------------------------------------------

#[test]
fn gpu_policy_values_accepted_as_flags() {
    for (value, valid) in [
        ("binpack", true),
        ("spread", true),
        ("numa", true),
        ("mutex", true),
        ("topology-aware", true),
        ("binpack,numa", true),
        ("binpack, numa", true),
        ("mutex,topology-aware", true),
        ("", false),
        ("   ", false),
        ("binpakc", false),
        ("Binpack", false),
        ("binpack,nmua", false),
        ("binpack,", false),
    ] {
        assert_eq!(GpuPolicy::parse_flag(value).is_ok(), valid, "{value:?}");
    }
}

#[test]
fn node_policy_values_accepted_as_flags() {
    for (value, valid) in [
        ("binpack", true),
        ("spread", true),
        (" binpack", true),
        ("spread ", true),
        ("", false),
        ("   ", false),
        ("binpakc", false),
        ("Spread", false),
        ("binpack,spread", false),
        ("numa", false),
    ] {
        assert_eq!(NodePolicy::parse_flag(value).is_ok(), valid, "{value:?}");
    }
}

// ---------------------------------------------------------------------------
// pkg/util/scheduler_policy_test.go: TestGetGPUSchedulerPolicyByPodUnrecognizedValue,
// pkg/util/scheduler_policy_normalize_test.go
// ---------------------------------------------------------------------------

/// Devices whose tried order tells binpack, spread, numa chains and their tie
/// breaks apart.
fn probe() -> Vec<DeviceSortKey> {
    vec![
        key(5.0, 1, 0),
        key(1.0, 0, 1),
        key(3.0, 0, 2),
        key(3.0, 1, 3),
        key(4.0, 0, 4),
    ]
}

/// The GPU policy a pod ends up with, given the flag and its annotation.
fn resolved_gpu(default: &str, annotation: &str) -> GpuPolicy {
    let annotations = BTreeMap::from([(GPU_POLICY_ANNOTATION.to_string(), annotation.to_string())]);
    PodPolicies::resolve(
        &annotations,
        NodePolicy::Binpack,
        &GpuPolicy::parse_flag(default).unwrap(),
    )
    .unwrap()
    .gpu
}

/// Whether two policies try the probe devices in the same order, with and without
/// numa-bind.
fn same_order(a: &GpuPolicy, b: &GpuPolicy) -> bool {
    let keys = probe();
    tried(a, &keys, false) == tried(b, &keys, false)
        && tried(a, &keys, true) == tried(b, &keys, true)
}

#[test]
fn gpu_policy_annotations_that_name_policies_are_honoured() {
    for (case, default, annotation, want) in [
        (
            "valid value overrides the configured policy",
            "binpack",
            "spread",
            "spread",
        ),
        (
            "chain form is honoured",
            "spread",
            "binpack,numa",
            "binpack,numa",
        ),
        (
            "filter-only form is honoured",
            "spread",
            "topology-aware",
            "topology-aware",
        ),
        ("padded value", "spread", " binpack ", "binpack"),
        ("padded chain", "spread", "binpack, numa", "binpack,numa"),
        (
            "padded chain with a filter",
            "spread",
            " spread ,  mutex ",
            "spread,mutex",
        ),
        (
            "unrecognized value with a spread default",
            "spread",
            "binpakc",
            "spread",
        ),
        ("empty value with a spread default", "spread", "", "spread"),
    ] {
        let got = resolved_gpu(default, annotation);
        assert!(same_order(&got, &GpuPolicy::parse(want)), "{case}: {got:?}");
    }
    let topology = resolved_gpu("spread", "topology-aware");
    assert!(topology.has(GpuPolicyToken::TopologyAware));
    let mutex = resolved_gpu("spread", " spread ,  mutex ");
    assert!(mutex.has(GpuPolicyToken::Mutex));
}

#[test]
fn gpu_policy_annotations_that_name_no_policy_keep_the_configured_default() {
    for (case, default, annotation) in [
        (
            "unrecognized value keeps the configured policy",
            "binpack",
            "binpakc",
        ),
        ("empty value keeps the configured policy", "binpack", ""),
        (
            "chain with an unknown entry keeps the configured policy",
            "binpack",
            "binpack,nmua",
        ),
        (
            "chain with an unknown entry keeps a spread default",
            "spread",
            "binpack,nmua",
        ),
    ] {
        let got = resolved_gpu(default, annotation);
        assert!(
            same_order(&got, &GpuPolicy::parse(default)),
            "{case}: {got:?}"
        );
    }
}

#[test]
fn padded_cluster_defaults_are_accepted() {
    let padded = GpuPolicy::parse_flag(" binpack ").unwrap();
    assert!(same_order(&padded, &GpuPolicy::parse("binpack")));
    let chain = GpuPolicy::parse_flag("binpack, numa").unwrap();
    assert!(same_order(&chain, &GpuPolicy::parse("binpack,numa")));
}

// ---------------------------------------------------------------------------
// pkg/scheduler/policy_fallback_placement_test.go: TestResolveNodeSchedulerPolicy
// ---------------------------------------------------------------------------

fn resolved_node(default: NodePolicy, annotations: &[(&str, &str)]) -> NodePolicy {
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    PodPolicies::resolve(&annotations, default, &GpuPolicy::default())
        .unwrap()
        .node
}

#[test]
fn node_policy_annotations_that_name_policies_are_honoured() {
    for (default, other) in [
        (NodePolicy::Binpack, NodePolicy::Spread),
        (NodePolicy::Spread, NodePolicy::Binpack),
    ] {
        let name = other.to_string();
        let padded = format!(" {name} ");
        for (case, annotations, want) in [
            (
                "valid value overrides the configured policy",
                vec![(NODE_POLICY_ANNOTATION, name.as_str())],
                other,
            ),
            (
                "surrounding whitespace is trimmed off an accepted value",
                vec![(NODE_POLICY_ANNOTATION, padded.as_str())],
                other,
            ),
            (
                "unrelated annotation is ignored",
                vec![("hami.io/unrelated", "spread")],
                default,
            ),
            ("no annotations at all", vec![], default),
        ] {
            assert_eq!(
                resolved_node(default, &annotations),
                want,
                "{default}: {case}"
            );
        }
    }
    // Values that name no node policy keep the configured binpack.
    for value in ["spraed", "", "binpack,spread", "numa"] {
        assert_eq!(
            resolved_node(NodePolicy::Binpack, &[(NODE_POLICY_ANNOTATION, value)]),
            NodePolicy::Binpack,
            "{value:?}"
        );
    }
}

#[test]
fn node_policy_annotations_that_name_no_policy_keep_the_configured_default() {
    for value in ["spraed", "", "binpack,spread", "numa"] {
        assert_eq!(
            resolved_node(NodePolicy::Spread, &[(NODE_POLICY_ANNOTATION, value)]),
            NodePolicy::Spread,
            "{value:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// pkg/util/device_scoring_weights_test.go
// ---------------------------------------------------------------------------

#[test]
fn scoring_weights_parse_table() {
    for (case, value, want) in [
        (
            "valid ordered weights",
            "slot=1,core=2,memory=3",
            Ok((1, 2, 3)),
        ),
        (
            "valid reordered weights and whitespace",
            " memory = 3, slot = 1, core = 0 ",
            Ok((1, 0, 3)),
        ),
        (
            "empty annotation",
            "",
            Err("expected slot, core, and memory weights"),
        ),
        (
            "missing dimension",
            "slot=1,memory=3",
            Err("expected slot, core, and memory weights"),
        ),
        (
            "malformed entry",
            "slot=1,core,memory=3",
            Err("expected key=value entries"),
        ),
        (
            "non-integer",
            "slot=1,core=high,memory=3",
            Err("\"core\" weight must be an integer"),
        ),
        (
            "negative",
            "slot=1,core=-1,memory=3",
            Err("\"core\" weight must not be negative"),
        ),
        (
            "unknown key",
            "slot=1,bandwidth=2,memory=3",
            Err("unknown weight \"bandwidth\""),
        ),
        (
            "duplicate key",
            "slot=1,slot=2,memory=3",
            Err("duplicate \"slot\" weight"),
        ),
        (
            "all zero",
            "slot=0,core=0,memory=0",
            Err("at least one weight must be positive"),
        ),
    ] {
        let got = ScoringWeights::parse(value).map(|w| (w.slot, w.core, w.memory));
        match want {
            Ok(w) => assert_eq!(got, Ok(w), "{case}"),
            Err(e) => {
                let err = got.expect_err(case);
                assert!(err.contains(e), "{case}: {err}");
            }
        }
    }
}

#[test]
fn scoring_weights_come_from_the_pod_annotation() {
    let resolve = |annotations: &[(&str, &str)]| {
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PodPolicies::resolve(&annotations, NodePolicy::Binpack, &GpuPolicy::default())
            .map(|p| p.weights)
    };
    assert_eq!(
        resolve(&[]),
        Ok(ScoringWeights::default()),
        "missing annotation uses defaults"
    );
    assert_eq!(
        resolve(&[(SCORING_WEIGHTS_ANNOTATION, "slot=1,core=2,memory=3")]),
        Ok(ScoringWeights {
            slot: 1,
            core: 2,
            memory: 3
        }),
        "valid annotation"
    );
    let err = resolve(&[(SCORING_WEIGHTS_ANNOTATION, "slot=1,core=-1,memory=3")]).unwrap_err();
    assert!(
        err.contains("\"core\" weight must not be negative"),
        "{err}"
    );
}
