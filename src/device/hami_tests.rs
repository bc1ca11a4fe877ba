//! HAMi's own test tables for request parsing, selectors and the annotation codecs,
//! translated case by case: `pkg/device/nvidia/device_test.go`
//! (TestGenerateResourceRequests and its MemoryFactor/DefaultMemory variants,
//! Test_checkType, Test_GetNodeDevices, Test_PatchAnnotations, TestAssertNuma),
//! `pkg/device/devices_test.go` (TestDecodeContainerDevices, TestPodDevicesCoding,
//! Test_DecodePodDevices, TestDecodePodDevices_BadAnnotation, TestMarshalNodeDevices,
//! TestUnMarshalNodeDevices, Test_DecodeNodeDevices, TestDecodeNodeDevices,
//! TestResourcereqs_*, TestCheckUUID, TestCheckType) and
//! `pkg/device/nvidia/fit_checks_test.go` (TestCheckCardUUID).

use super::allocation_codec::{AllocationCodecError, decode_pod_devices, encode_pod_devices};
use super::device_config::NvidiaConfig;
use super::model::{ContainerDevice, GpuDevice, PodDevices};
use super::pair_score::decode_pair_scores;
use super::register_codec::{
    RegisterError, decode_register_annotation, encode_register_annotation,
};
use super::request::{ContainerRequest, parse_container_request, parse_pod_request};
use super::selectors::{
    DeviceSelectors, NOUSE_GPU_TYPE, NOUSE_GPU_UUID, NUMA_BIND, USE_GPU_TYPE, USE_GPU_UUID,
};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// Requests: TestGenerateResourceRequests
// ---------------------------------------------------------------------------

fn resources(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    (!pairs.is_empty()).then(|| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    })
}

fn container(name: &str, limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
    Container {
        name: name.into(),
        resources: Some(ResourceRequirements {
            limits: resources(limits),
            requests: resources(requests),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn limits(pairs: &[(&str, &str)]) -> Container {
    container("test", pairs, &[])
}

/// `(nums, memreq, percentage, cores)`; a percentage of `None` is HAMi's 101.
fn want(nums: u32, memreq: u64, pct: Option<u32>, cores: u32) -> Option<ContainerRequest> {
    Some(ContainerRequest {
        nums,
        memreq,
        mem_percentage: pct,
        coresreq: cores,
    })
}

fn parse(c: &Container) -> Result<Option<ContainerRequest>, String> {
    parse_container_request(c, &NvidiaConfig::default()).map_err(|e| e.to_string())
}

const GPU: &str = "nvidia.com/gpu";
const MEM: &str = "nvidia.com/gpumem";
const PCT: &str = "nvidia.com/gpumem-percentage";
const CORES: &str = "nvidia.com/gpucores";

#[test]
fn container_requests_parse_like_hami() {
    let too_big_pct = ((1u64 << 32) + 50).to_string();
    let cases: Vec<(&str, Container, Option<ContainerRequest>)> = vec![
        (
            "gpu count only defaults to 100% memory",
            limits(&[(GPU, "1")]),
            want(1, 0, Some(100), 0),
        ),
        (
            "gpu count + explicit memory",
            limits(&[(GPU, "2"), (MEM, "4096")]),
            want(2, 4096, None, 0),
        ),
        (
            "gpu count + memory percentage",
            limits(&[(GPU, "1"), (PCT, "50")]),
            want(1, 0, Some(50), 0),
        ),
        (
            "explicit cores 0",
            limits(&[(GPU, "1"), (CORES, "0")]),
            want(1, 0, Some(100), 0),
        ),
        (
            "explicit cores 50",
            limits(&[(GPU, "1"), (CORES, "50")]),
            want(1, 0, Some(100), 50),
        ),
        (
            "explicit cores 100",
            limits(&[(GPU, "1"), (CORES, "100")]),
            want(1, 0, Some(100), 100),
        ),
        ("no gpu resource, no request", limits(&[]), None),
        (
            "gpu in requests, not limits",
            container("test", &[], &[(GPU, "1")]),
            want(1, 0, Some(100), 0),
        ),
        (
            "gpu count zero asks for nothing",
            limits(&[(GPU, "0")]),
            None,
        ),
    ];
    for (case, c, expected) in cases {
        assert_eq!(parse(&c), Ok(expected), "{case}");
    }
    // Divergence: HAMi's request parser clamps a percentage above 100 (101 is its
    // "unset" sentinel) and reads 0 or less as unset, a whole card, while its
    // webhook refuses values outside 0..100. Here `/filter` and the webhook share
    // one check and both refuse anything outside 1..=100 (README, "Where it
    // differs from HAMi").
    let refused: Vec<(&str, Container)> = vec![
        (
            "memory percentage above 100",
            limits(&[(GPU, "1"), (PCT, "150")]),
        ),
        (
            "memory percentage beyond int32",
            limits(&[(GPU, "1"), (PCT, too_big_pct.as_str())]),
        ),
        (
            "memory percentage 101 (HAMi's unset sentinel)",
            limits(&[(GPU, "1"), (PCT, "101")]),
        ),
        ("memory percentage 0", limits(&[(GPU, "1"), (PCT, "0")])),
        (
            "memory percentage 0 in requests",
            container("test", &[], &[(GPU, "1"), (PCT, "0")]),
        ),
        (
            "negative memory percentage",
            limits(&[(GPU, "1"), (PCT, "-1")]),
        ),
        (
            "memory percentage 0 beside explicit memory",
            limits(&[(GPU, "1"), (MEM, "2000"), (PCT, "0")]),
        ),
    ];
    for (case, c) in refused {
        let err = parse(&c).expect_err(case);
        assert!(
            err.contains(PCT) && err.contains("between 1 and 100"),
            "{case}: {err}"
        );
    }
}

#[test]
fn binary_memory_quantities_are_converted_not_dropped() {
    // HAMi drops the whole container request for these (the pod then bypasses the
    // vGPU scheduler); reading binary suffixes as bytes is a documented difference
    // (README "Resources", hami-compat §15.11).
    assert_eq!(
        parse(&limits(&[(GPU, "1"), (MEM, "16Gi")])),
        Ok(want(1, 16384, None, 0))
    );
    assert_eq!(
        parse(&limits(&[(GPU, "1"), (MEM, "16.0Gi")])),
        Ok(want(1, 16384, None, 0))
    );
    let doubled = NvidiaConfig {
        memory_factor: 2,
        ..Default::default()
    };
    assert_eq!(
        parse_container_request(&limits(&[(GPU, "1"), (MEM, "1Gi")]), &doubled),
        Ok(want(1, 2048, None, 0))
    );
}

#[test]
fn memory_factor_multiplies_the_request() {
    let doubled = NvidiaConfig {
        memory_factor: 2,
        ..Default::default()
    };
    assert_eq!(
        parse_container_request(&limits(&[(GPU, "1"), (MEM, "1024")]), &doubled),
        Ok(want(1, 2048, None, 0))
    );
}

#[test]
fn default_memory_applies_when_no_memory_is_given() {
    let config = NvidiaConfig {
        default_memory: 512,
        ..Default::default()
    };
    let p = |c: Container| parse_container_request(&c, &config).unwrap();
    let control = p(limits(&[(GPU, "1")]));
    assert_eq!(control, want(1, 512, None, 0));
    assert_eq!(p(limits(&[(GPU, "1"), (MEM, "0")])), control);
}

// Later HAMi versions drop the whole container request (the pod then bypasses GPU
// scheduling) for cores above 100, negative cores and GPU counts outside int32.
// Here, as in v2.10, cores above 100 are kept and capped by the fit; negative
// values are an error the pod's filter reports, rather than a pod that silently
// runs without its GPUs.

#[test]
fn cores_above_100_are_kept_for_the_fit_to_cap() {
    for (cores, want_cores) in [("101", 101), ("150", 150), ("200", 200)] {
        assert_eq!(
            parse(&limits(&[(GPU, "1"), (CORES, cores)])),
            Ok(want(1, 0, Some(100), want_cores)),
            "{cores}"
        );
    }
}

#[test]
fn negative_cores_and_counts_are_an_error_for_the_pod() {
    for (resource, value) in [(CORES, "-1"), (CORES, "-50"), (GPU, "-1")] {
        let mut pairs = vec![(resource, value)];
        if resource != GPU {
            pairs.push((GPU, "1"));
        }
        let err = parse(&limits(&pairs)).expect_err(value);
        assert!(err.contains(resource) && err.contains("negative"), "{err}");
    }
}

#[test]
fn a_gpu_count_beyond_int32_is_kept_and_fits_no_node() {
    let request = parse(&limits(&[(GPU, "2147483648")])).expect("parses");
    assert_eq!(request.map(|r| r.nums), Some(2147483648));
}

// ---------------------------------------------------------------------------
// Requests: TestResourcereqs_* (one slot per container, init containers first)
// ---------------------------------------------------------------------------

fn pod(init: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        spec: Some(PodSpec {
            init_containers: (!init.is_empty()).then_some(init),
            containers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn nums(p: &Pod) -> (Vec<Option<u32>>, usize) {
    let r = parse_pod_request(p, &NvidiaConfig::default()).unwrap();
    (
        r.containers.iter().map(|c| c.map(|c| c.nums)).collect(),
        r.init_count,
    )
}

#[test]
fn every_container_gets_a_request_slot_init_containers_first() {
    assert_eq!(
        nums(&pod(vec![], vec![limits(&[(GPU, "1")])])),
        (vec![Some(1)], 0),
        "only regular containers"
    );
    assert_eq!(
        nums(&pod(
            vec![limits(&[]), limits(&[(GPU, "1")])],
            vec![limits(&[(GPU, "1")])]
        )),
        (vec![None, Some(1), Some(1)], 2),
        "with init containers"
    );
    assert_eq!(nums(&pod(vec![], vec![])), (vec![], 0), "empty pod");
    let none = pod(vec![limits(&[])], vec![limits(&[])]);
    assert_eq!(nums(&none), (vec![None, None], 1), "no device requests");
    assert!(
        parse_pod_request(&none, &NvidiaConfig::default())
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        nums(&pod(
            vec![limits(&[(GPU, "2")]), limits(&[])],
            vec![limits(&[(GPU, "2")]), limits(&[(GPU, "2")])]
        )),
        (vec![Some(2), None, Some(2), Some(2)], 2),
        "multiple init and regular containers"
    );
}

// ---------------------------------------------------------------------------
// Selectors: Test_checkType, TestCheckType, TestCheckUUID, TestCheckCardUUID,
// TestAssertNuma
// ---------------------------------------------------------------------------

#[test]
fn card_type_lists_are_substrings_and_nouse_wins() {
    for (case, annotations, model, allowed) in [
        (
            "use A10 matches an A100",
            vec![(USE_GPU_TYPE, "A10")],
            "NVIDIA A100",
            true,
        ),
        (
            "use A10, nouse A100: an A100 is excluded",
            vec![(USE_GPU_TYPE, "A10"), (NOUSE_GPU_TYPE, "A100")],
            "NVIDIA A100",
            false,
        ),
        (
            "use A10, nouse A100: an A10 is allowed",
            vec![(USE_GPU_TYPE, "A10"), (NOUSE_GPU_TYPE, "A100")],
            "NVIDIA A10",
            true,
        ),
        (
            "no annotation is no constraint",
            vec![],
            "NVIDIA-A100",
            true,
        ),
        (
            "use list matches by substring",
            vec![(USE_GPU_TYPE, "A100,V100")],
            "NVIDIA-A100",
            true,
        ),
        (
            "use list does not match",
            vec![(USE_GPU_TYPE, "V100")],
            "NVIDIA-A100",
            false,
        ),
        (
            "nouse list match excludes",
            vec![(NOUSE_GPU_TYPE, "A100")],
            "NVIDIA-A100",
            false,
        ),
        (
            "nouse list mismatch keeps",
            vec![(NOUSE_GPU_TYPE, "V100")],
            "NVIDIA-A100",
            true,
        ),
        (
            "empty use value is no constraint",
            vec![(USE_GPU_TYPE, "")],
            "NVIDIA-A100",
            true,
        ),
        (
            "whitespace-only nouse excludes nothing",
            vec![(NOUSE_GPU_TYPE, "   ")],
            "NVIDIA-A100",
            true,
        ),
        (
            "use satisfied and nouse matches still excludes",
            vec![(USE_GPU_TYPE, "A100"), (NOUSE_GPU_TYPE, "A100")],
            "NVIDIA-A100",
            false,
        ),
        (
            "nouse with a trailing comma",
            vec![(NOUSE_GPU_TYPE, "V100,")],
            "NVIDIA-A100",
            true,
        ),
        (
            "nouse with a leading comma",
            vec![(NOUSE_GPU_TYPE, ",V100")],
            "NVIDIA-A100",
            true,
        ),
        (
            "use with a trailing comma",
            vec![(USE_GPU_TYPE, "V100,")],
            "NVIDIA-A100",
            false,
        ),
    ] {
        assert_eq!(
            DeviceSelectors::from_pairs(&annotations).type_allowed(model, "hami-core"),
            allowed,
            "{case}"
        );
    }
}

#[test]
fn card_uuid_lists_are_exact_and_trimmed() {
    for (case, annotations, id, allowed) in [
        ("no annotation", vec![], "abc", true),
        (
            "use list, device in it",
            vec![(USE_GPU_UUID, "abc,123")],
            "abc",
            true,
        ),
        (
            "use list, device not in it",
            vec![(USE_GPU_UUID, "abc,123")],
            "1abc",
            false,
        ),
        (
            "nouse list, device in it",
            vec![(NOUSE_GPU_UUID, "abc,123")],
            "abc",
            false,
        ),
        (
            "nouse list, device not in it",
            vec![(NOUSE_GPU_UUID, "abc,123")],
            "1abc",
            true,
        ),
        (
            "in use list but also in nouse list",
            vec![(USE_GPU_UUID, "abc,123"), (NOUSE_GPU_UUID, "abc")],
            "abc",
            false,
        ),
        (
            "in use list, not in nouse list",
            vec![(USE_GPU_UUID, "abc,123"), (NOUSE_GPU_UUID, "456")],
            "abc",
            true,
        ),
        (
            "use list with spaces",
            vec![(USE_GPU_UUID, " abc , 123 ")],
            "abc",
            true,
        ),
        ("empty use list", vec![(USE_GPU_UUID, "")], "abc", true),
        (
            "whitespace-only use list",
            vec![(USE_GPU_UUID, "   ")],
            "abc",
            true,
        ),
        ("empty nouse list", vec![(NOUSE_GPU_UUID, "")], "abc", true),
        (
            "use list matches",
            vec![(USE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            "GPU-aaa",
            true,
        ),
        (
            "use list mismatch",
            vec![(USE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            "GPU-ccc",
            false,
        ),
        (
            "nouse list match",
            vec![(NOUSE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            "GPU-aaa",
            false,
        ),
        (
            "nouse list mismatch",
            vec![(NOUSE_GPU_UUID, "GPU-aaa,GPU-bbb")],
            "GPU-ccc",
            true,
        ),
    ] {
        assert_eq!(
            DeviceSelectors::from_pairs(&annotations).uuid_allowed(id),
            allowed,
            "{case}"
        );
    }
}

#[test]
fn numa_bind_is_a_go_boolean() {
    for (case, annotations, bind) in [
        ("true enforces numa", vec![(NUMA_BIND, "true")], true),
        ("false does not", vec![(NUMA_BIND, "false")], false),
        (
            "invalid value does not",
            vec![(NUMA_BIND, "notabool")],
            false,
        ),
        ("absent does not", vec![], false),
    ] {
        assert_eq!(
            DeviceSelectors::from_pairs(&annotations).numa_bind,
            bind,
            "{case}"
        );
    }
}

// ---------------------------------------------------------------------------
// Pod device annotations: TestDecodeContainerDevices and friends
// ---------------------------------------------------------------------------

fn dev(uuid: &str, vendor: &str, usedmem: u64, usedcores: u32) -> ContainerDevice {
    ContainerDevice {
        uuid: uuid.into(),
        vendor: vendor.into(),
        usedmem,
        usedcores,
        mig: None,
    }
}

/// HAMi's DecodeContainerDevices reads one container's list; here that is a pod
/// annotation with a single container.
fn decode_one(list: &str) -> Result<Vec<ContainerDevice>, AllocationCodecError> {
    let mut pod = decode_pod_devices(&format!("{list};"))?;
    assert_eq!(pod.len(), 1, "{list:?}");
    Ok(pod.remove(0))
}

#[test]
fn one_containers_device_list_decodes_like_hami() {
    let ok: Vec<(&str, &str, Vec<ContainerDevice>)> = vec![
        ("empty string", "", vec![]),
        ("trailing delimiters only", ":::", vec![]),
        (
            "valid single device",
            "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:",
            vec![dev(
                "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76",
                "NVIDIA",
                500,
                3,
            )],
        ),
        (
            "zero resources",
            "GPU-zero,NVIDIA,0,0:",
            vec![dev("GPU-zero", "NVIDIA", 0, 0)],
        ),
        (
            "multiple valid devices",
            "GPU-1,NVIDIA,1000,10:GPU-2,Cambricon,2000,20:",
            vec![
                dev("GPU-1", "NVIDIA", 1000, 10),
                dev("GPU-2", "Cambricon", 2000, 20),
            ],
        ),
        (
            "extra optional fields",
            "GPU-1,NVIDIA,1000,10,extra1,extra2:",
            vec![dev("GPU-1", "NVIDIA", 1000, 10)],
        ),
    ];
    for (case, input, devices) in ok {
        assert_eq!(decode_one(input), Ok(devices), "{case}");
    }
    for (case, input) in [
        ("only 2 fields", "GPU-1,NVIDIA:"),
        ("only 3 fields", "GPU-1,NVIDIA,1000:"),
        ("negative memory", "GPU-1,NVIDIA,-500,10:"),
        ("negative cores", "GPU-1,NVIDIA,500,-1:"),
        ("non-numeric memory", "GPU-1,NVIDIA,invalid,10:"),
        ("non-numeric cores", "GPU-1,NVIDIA,500,invalid:"),
        (
            "memory overflow",
            "GPU-1,NVIDIA,99999999999999999999999999,10:",
        ),
        (
            "cores overflow",
            "GPU-1,NVIDIA,500,99999999999999999999999999:",
        ),
        (
            "valid then negative",
            "GPU-1,NVIDIA,1000,10:GPU-2,NVIDIA,-100,10:",
        ),
        (
            "negative then valid",
            "GPU-1,NVIDIA,1000,-5:GPU-2,NVIDIA,1000,10:",
        ),
    ] {
        assert!(decode_one(input).is_err(), "{case}");
    }
}

// Later HAMi versions reject a whole annotation for one entry without a comma or
// with an empty UUID or vendor. Here, as in v2.10, such entries are skipped or
// kept: rejecting the annotation would leave the pod's valid entries uncounted,
// and its GPUs free for someone else.
#[test]
fn entries_without_a_comma_are_skipped_and_the_rest_is_kept() {
    let one = vec![dev("GPU-1", "NVIDIA", 1000, 10)];
    for (case, input, want) in [
        ("segment without comma", "garbage", vec![]),
        ("segment without comma, with delimiter", "garbage:", vec![]),
        (
            "valid then malformed",
            "GPU-1,NVIDIA,1000,10:malformed_segment:",
            one.clone(),
        ),
        (
            "malformed then valid",
            "malformed_segment:GPU-1,NVIDIA,1000,10:",
            one.clone(),
        ),
        (
            "empty UUID",
            ",NVIDIA,1000,10:",
            vec![dev("", "NVIDIA", 1000, 10)],
        ),
        (
            "empty device type",
            "GPU-1,,1000,10:",
            vec![dev("GPU-1", "", 1000, 10)],
        ),
    ] {
        assert_eq!(decode_one(input), Ok(want), "{case}");
    }
}

#[test]
fn bad_pod_annotations_are_rejected() {
    for (case, input) in [
        ("missing required fields", "uuid,type,100:;"),
        (
            "negative memory in first container",
            "GPU-1,NVIDIA,-500,10:;",
        ),
        (
            "negative cores in second container",
            "GPU-1,NVIDIA,500,10:;GPU-2,NVIDIA,500,-1:;",
        ),
        ("negative memory and cores", "GPU-1,NVIDIA,-1000,-10:;"),
    ] {
        assert!(decode_pod_devices(input).is_err(), "{case}");
    }
    assert_eq!(
        decode_pod_devices("uuid,type,100:;")
            .unwrap_err()
            .to_string(),
        "pod annotation format error, missing fields, do not use nodeName in task spec"
    );
}

#[test]
fn pod_annotations_with_malformed_entries_keep_their_containers() {
    for (case, input, want) in [
        (
            "malformed non-empty segment without comma",
            "malformed_annotation:;",
            vec![vec![]],
        ),
        (
            "empty UUID",
            ",NVIDIA,500,10:;",
            vec![vec![dev("", "NVIDIA", 500, 10)]],
        ),
        (
            "empty type",
            "GPU-1,,500,10:;",
            vec![vec![dev("GPU-1", "", 500, 10)]],
        ),
    ] {
        assert_eq!(decode_pod_devices(input), Ok(want), "{case}");
    }
}

/// The round-trip cases of TestPodDevicesCoding.
fn coding_cases() -> Vec<(&'static str, PodDevices)> {
    vec![
        ("one pod one container use zero device", vec![]),
        (
            "one pod one container use one device",
            vec![vec![dev("UUID1", "Type1", 1000, 30)]],
        ),
        (
            "one pod two container, every container use one device",
            vec![
                vec![dev("UUID1", "Type1", 1000, 30)],
                vec![dev("UUID1", "Type1", 1000, 30)],
            ],
        ),
        (
            "one pod one container use two devices",
            vec![vec![
                dev("UUID1", "Type1", 1000, 30),
                dev("UUID2", "Type1", 1000, 30),
            ]],
        ),
    ]
}

#[test]
fn pod_devices_round_trip() {
    assert_eq!(encode_pod_devices(&vec![vec![]]), ";");
    assert_eq!(decode_pod_devices(";"), Ok(vec![vec![]]), "empty container");
    for (case, devices) in coding_cases() {
        let text = encode_pod_devices(&devices);
        assert_eq!(decode_pod_devices(&text), Ok(devices), "{case}: {text}");
    }
    assert_eq!(
        encode_pod_devices(&vec![vec![dev("UUID1", "Type1", 1000, 30)]]),
        "UUID1,Type1,1000,30:;"
    );
    assert_eq!(
        encode_pod_devices(&vec![vec![dev("nvidia-device-0", "NVIDIA", 2000, 1)]]),
        "nvidia-device-0,NVIDIA,2000,1:;",
        "Test_PatchAnnotations: the value of both device annotations"
    );
}

// HAMi's decoder yields one more empty container after the final ';'; here the
// decoded list has exactly the encoded containers (the extra one holds nothing,
// so usage is the same either way).
#[test]
fn pod_devices_decode_to_exactly_the_encoded_containers() {
    for (case, devices) in coding_cases() {
        assert_eq!(
            decode_pod_devices(&encode_pod_devices(&devices)),
            Ok(devices.clone()),
            "{case}"
        );
    }
}

#[test]
fn two_containers_annotation_decodes_in_container_order() {
    let value = "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76,NVIDIA,500,3:;GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,NVIDIA,500,3:;";
    assert_eq!(
        decode_pod_devices(value),
        Ok(vec![
            vec![dev(
                "GPU-8dcd427f-483b-b48f-d7e5-75fb19a52b76",
                "NVIDIA",
                500,
                3
            )],
            vec![dev(
                "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4",
                "NVIDIA",
                500,
                3
            )],
        ])
    );
    assert_eq!(decode_pod_devices(""), Ok(vec![]), "no annotation value");
}

// ---------------------------------------------------------------------------
// Node registration: Test_GetNodeDevices, TestUnMarshalNodeDevices,
// TestMarshalNodeDevices, Test_DecodeNodeDevices, TestDecodeNodeDevices
// ---------------------------------------------------------------------------

/// The fields HAMi's tables compare.
fn summary(d: &GpuDevice) -> (&str, u32, u32, u64, u32, &str, i32, bool) {
    (
        &*d.id, d.index, d.count, d.devmem, d.devcore, &d.model, d.numa, d.health,
    )
}

#[test]
fn json_registrations_decode_like_hami() {
    let devices = decode_register_annotation(
        r#"[{"id":"GPU-0","count":5,"devmem":8192,"devcore":100,"type":"NVIDIA-Tesla P4","numa":0,"health":true,"index":0}]"#,
    )
    .unwrap();
    assert_eq!(
        devices.iter().map(summary).collect::<Vec<_>>(),
        vec![("GPU-0", 0, 5, 8192, 100, "NVIDIA-Tesla P4", 0, true)],
        "exist gpu devices"
    );
    assert_eq!(
        decode_register_annotation("[]").unwrap_err().to_string(),
        "no gpu found on node"
    );

    let one = decode_register_annotation(
        "[{\"index\":1,\"id\":\"id-1\",\"count\":1,\"devmem\":1024,\"devcore\":10,\"type\":\"type\",\"health\":true}]\n",
    )
    .unwrap();
    assert_eq!(
        one.iter().map(summary).collect::<Vec<_>>(),
        vec![("id-1", 1, 1, 1024, 10, "type", 0, true)],
        "unmarshal: test one"
    );
    let two = decode_register_annotation(
        "[{\"index\":1,\"id\":\"id-1\",\"count\":1,\"devmem\":1024,\"devcore\":10,\"type\":\"type\",\"health\":true},\
         {\"index\":2,\"id\":\"id-2\",\"count\":2,\"devmem\":4096,\"devcore\":20,\"type\":\"type2\",\"health\":false}]",
    )
    .unwrap();
    assert_eq!(
        two.iter().map(summary).collect::<Vec<_>>(),
        vec![
            ("id-1", 1, 1, 1024, 10, "type", 0, true),
            ("id-2", 2, 2, 4096, 20, "type2", 0, false),
        ],
        "unmarshal: test two"
    );
}

#[test]
fn json_registrations_round_trip() {
    // TestMarshalNodeDevices compares the decoded JSON, not the text.
    let devices = decode_register_annotation(
        "[{\"index\":1,\"id\":\"id-1\",\"count\":1,\"devmem\":1024,\"devcore\":10,\"type\":\"type\",\"numa\":0,\"health\":true},\
         {\"index\":2,\"id\":\"id-2\",\"count\":2,\"devmem\":2048,\"devcore\":20,\"type\":\"type2\",\"numa\":1,\"health\":false}]",
    )
    .unwrap();
    let text = encode_register_annotation(&devices);
    assert_eq!(decode_register_annotation(&text), Ok(devices));
    assert_eq!(encode_register_annotation(&[]), "[]", "test empty");
}

#[test]
fn legacy_registrations_decode_like_hami() {
    let p4 = |index: u32| {
        (
            "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4",
            index,
            10,
            7680,
            100,
            "NVIDIA-Tesla P4",
            0,
            true,
        )
    };
    let old = decode_register_annotation(
        "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true:",
    )
    .unwrap();
    assert_eq!(
        old.iter().map(summary).collect::<Vec<_>>(),
        vec![p4(0)],
        "old format"
    );
    assert_eq!(old[0].mode, "hami-core");
    let new = decode_register_annotation(
        "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:",
    )
    .unwrap();
    assert_eq!(
        new.iter().map(summary).collect::<Vec<_>>(),
        vec![p4(1)],
        "new format"
    );
    assert_eq!(new[0].mode, "hami-core");

    let uuid = "GPU-ebe7c3f7-303d-558d-435e-99a160631fe4";
    let exact = [
        (
            "args is empty",
            String::new(),
            "node annotation missing device separator",
        ),
        (
            "missing delimiter with comma",
            ",".into(),
            "node annotation missing device separator",
        ),
        (
            "comma and delimiter, empty fields",
            ",:".into(),
            "unexpected field count 2 in node annotation",
        ),
        (
            "missing split symbol",
            "a".into(),
            "node annotation missing device separator",
        ),
        (
            "malformed segment without comma",
            "garbage:".into(),
            "malformed node annotation segment: \"garbage\"",
        ),
        (
            "unexpected field count",
            format!("{uuid},10,7680,100,NVIDIA-Tesla P4:"),
            "unexpected field count 5 in node annotation",
        ),
        (
            "negative index field in new format",
            format!("{uuid},10,7680,100,NVIDIA-Tesla P4,0,true,-1,hami-core:"),
            "index field must not be negative: -1",
        ),
    ];
    for (case, input, message) in exact {
        assert_eq!(
            decode_register_annotation(&input).map_err(|e| e.to_string()),
            Err(message.to_string()),
            "{case}"
        );
    }
    // HAMi's messages go on with Go's strconv text ("strconv.ParseInt: parsing ...").
    let prefixed = [
        (
            "invalid count field",
            format!("{uuid},notanint,7680,100,NVIDIA-Tesla P4,0,true:"),
            "invalid count field: ",
        ),
        (
            "invalid memory field",
            format!("{uuid},10,notanint,100,NVIDIA-Tesla P4,0,true:"),
            "invalid memory field: ",
        ),
        (
            "invalid core field",
            format!("{uuid},10,7680,notanint,NVIDIA-Tesla P4,0,true:"),
            "invalid core field: ",
        ),
        (
            "invalid numa field",
            format!("{uuid},10,7680,100,NVIDIA-Tesla P4,notanint,true:"),
            "invalid numa field: ",
        ),
        (
            "invalid health field",
            format!("{uuid},10,7680,100,NVIDIA-Tesla P4,0,notabool:"),
            "invalid health field: ",
        ),
        (
            "invalid index field in new format",
            format!("{uuid},10,7680,100,NVIDIA-Tesla P4,0,true,notanint,hami-core:"),
            "invalid index field: ",
        ),
    ];
    for (case, input, prefix) in prefixed {
        let err = decode_register_annotation(&input).unwrap_err().to_string();
        assert!(err.starts_with(prefix), "{case}: {err}");
        assert!(err.contains("\"nota"), "{case}: {err}");
    }
}

#[test]
fn legacy_registration_of_only_separators_registers_no_gpus() {
    for input in [":", "::"] {
        assert_eq!(
            decode_register_annotation(input),
            Err(RegisterError::NoGpu),
            "{input:?}"
        );
    }
}

#[test]
fn pair_scores_decode() {
    let scores =
        decode_pair_scores(r#"[{"uuid":"GPU-0","score":{"GPU-1":50,"GPU-2":20,"GPU-3":20}}]"#)
            .unwrap();
    assert_eq!(scores["GPU-0"]["GPU-1"], 50);
    assert_eq!(scores["GPU-0"]["GPU-3"], 20);
}
