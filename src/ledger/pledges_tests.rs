use super::super::{Ledger, NodeEntry, PodEntry, PodPhase};
use crate::device::allocation_codec::decode_pod_devices;
use crate::device::model::GpuDevice;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const GPU: &str = "GPU-aa6e500d-328b-a510-73d1-5877a2e60bdc";
const HOUR: Duration = Duration::from_secs(3600);

/// One node with one 80 GiB GPU shared by up to 4 pods.
fn ledger() -> Ledger {
    let mut ledger = Ledger::default();
    ledger.upsert_node(
        "gpu-1",
        NodeEntry {
            devices: vec![GpuDevice {
                id: GPU.into(),
                index: 0,
                count: 4,
                devmem: 81920,
                devcore: 100,
                model: "NVIDIA H100 80GB HBM3".into(),
                numa: 0,
                health: true,
                mode: "hami-core".into(),
                pair_scores: BTreeMap::new(),
                mig_profiles: Vec::new(),
            }],
            ..NodeEntry::default()
        },
    );
    ledger
}

fn entry(uid: &str, mem: u64, cores: u32, phase: PodPhase) -> PodEntry {
    PodEntry::new(
        uid.into(),
        "ml".into(),
        uid.into(),
        "gpu-1".into(),
        decode_pod_devices(&format!("{GPU},NVIDIA,{mem},{cores}:;")).unwrap(),
        0,
        phase,
    )
}

fn bound(uid: &str, mem: u64, cores: u32) -> PodEntry {
    entry(uid, mem, cores, PodPhase::Bound)
}

fn wanting(uid: &str, mem: u64, cores: u32) -> PodEntry {
    entry(
        uid,
        mem,
        cores,
        PodPhase::Reserved {
            deadline: Instant::now() + HOUR,
        },
    )
}

fn victims(uids: &[&str]) -> BTreeSet<String> {
    uids.iter().map(|u| u.to_string()).collect()
}

/// Memory the fit sees taken on the GPU, and memory the pods hold.
fn taken(ledger: &Ledger) -> (u64, u64) {
    let node = ledger.node("gpu-1").unwrap();
    (node.effective[0].usedmem, node.usage[0].usedmem)
}

#[test]
fn a_pledge_takes_the_room_at_once_and_is_booked_when_the_last_victim_is_gone() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    l.add_pod(bound("train-b", 40000, 50));
    l.pledge(
        wanting("infer", 60000, 80),
        victims(&["train-a", "train-b"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    // Nobody else may be placed into the room being freed.
    assert_eq!(taken(&l), (140000, 80000));
    assert!(l.pod("infer").is_none());

    l.mark_finished("train-a");
    assert!(l.pledge_of("infer").is_some(), "one victim still there");
    assert!(l.take_converted().is_empty());

    l.mark_finished("train-b");
    assert!(l.pledge_of("infer").is_none());
    assert!(matches!(
        l.pod("infer").map(|p| &p.phase),
        Some(PodPhase::Reserved { .. })
    ));
    assert_eq!(l.take_converted(), vec!["infer".to_string()]);
    // Counted once: as the pod it now is.
    assert_eq!(taken(&l), (60000, 60000));
    assert_eq!(l.recomputed_node_usage(), *l.incremental_node_usage());
}

#[test]
fn a_pledge_the_node_could_not_hold_even_after_its_victims_is_refused() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    l.add_pod(bound("train-b", 40000, 50));
    let err = l
        .pledge(
            wanting("infer", 60000, 80),
            victims(&["train-a"]),
            Instant::now() + HOUR,
            HOUR,
        )
        .unwrap_err();
    assert!(err.contains("cannot hold it"), "{err}");
    assert!(l.pledge_of("infer").is_none());
    assert_eq!(taken(&l), (80000, 80000));

    // Room promised to one plan is not promised again.
    l.pledge(
        wanting("infer", 40000, 50),
        victims(&["train-a"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    let err = l
        .pledge(
            wanting("other", 40000, 50),
            victims(&["train-a"]),
            Instant::now() + HOUR,
            HOUR,
        )
        .unwrap_err();
    assert!(err.contains("cannot hold it"), "{err}");
}

#[test]
fn withdrawing_a_pledge_gives_the_room_back_exactly() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    let before = l.node("gpu-1").unwrap().effective.clone();
    l.pledge(
        wanting("infer", 60000, 80),
        victims(&["train-a"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    assert!(l.unpledge("infer").is_some());
    assert_eq!(l.node("gpu-1").unwrap().effective, before);
    // Its victim leaving later books nothing.
    l.mark_finished("train-a");
    assert!(l.pod("infer").is_none());
    assert!(l.take_converted().is_empty());
}

#[test]
fn a_pledge_whose_victims_are_already_gone_is_booked_at_once() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    l.mark_finished("train-a");
    l.pledge(
        wanting("infer", 60000, 80),
        victims(&["train-a"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    assert!(l.pod("infer").is_some());
    assert_eq!(l.take_converted(), vec!["infer".to_string()]);

    l.pledge(
        wanting("other", 10000, 10),
        BTreeSet::new(),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    assert!(l.pod("other").is_some(), "nobody to wait for");
}

#[test]
fn victims_nobody_knows_any_more_count_as_gone() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    l.pledge(
        wanting("infer", 30000, 30),
        victims(&["train-a", "deleted-while-down"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    l.forget_vanished_victims(|uid| uid == "train-a");
    assert!(l.pledge_of("infer").is_some());
    assert_eq!(l.pledge_of("infer").unwrap().victims, victims(&["train-a"]));
    l.forget_vanished_victims(|_| false);
    assert!(l.pod("infer").is_some());
}

#[test]
fn a_pledge_lapses_at_its_deadline() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    let now = Instant::now();
    l.pledge(
        wanting("infer", 30000, 30),
        victims(&["train-a"]),
        now + Duration::from_secs(60),
        HOUR,
    )
    .unwrap();
    assert!(l.expired_pledges(now).is_empty());
    assert_eq!(
        l.expired_pledges(now + Duration::from_secs(60)),
        vec!["infer".to_string()]
    );
}

#[test]
fn a_node_registered_again_keeps_its_pledges() {
    let mut l = ledger();
    l.add_pod(bound("train-a", 40000, 50));
    l.pledge(
        wanting("infer", 30000, 30),
        victims(&["train-a"]),
        Instant::now() + HOUR,
        HOUR,
    )
    .unwrap();
    let again = NodeEntry {
        devices: l.node("gpu-1").unwrap().devices.clone(),
        ..NodeEntry::default()
    };
    l.upsert_node("gpu-1", again);
    assert_eq!(taken(&l), (70000, 40000));
}

#[test]
fn a_plan_read_back_before_its_node_is_listed_counts_once_the_node_is() {
    let mut l = Ledger::default();
    l.add_pod(bound("train-a", 40000, 50));
    l.restore_pledge(
        wanting("infer", 30000, 30),
        victims(&["train-a"]),
        Instant::now() + HOUR,
        HOUR,
    );
    assert!(l.pledge_of("infer").is_some());
    let registered = ledger();
    let devices = registered.node("gpu-1").unwrap().devices.clone();
    l.upsert_node(
        "gpu-1",
        NodeEntry {
            devices,
            ..NodeEntry::default()
        },
    );
    assert_eq!(taken(&l), (70000, 40000));
    l.mark_finished("train-a");
    assert_eq!(taken(&l), (30000, 30000));
    assert!(
        l.pledge_of("infer").is_none(),
        "booked once the victim left"
    );
}
