//! The queue plugins (proportion, capacity with hierarchy, overcommit,
//! capacity-card) asked through a session: deserved amounts, admission, allocation,
//! order, and exact undo.

use super::queue::QueueInfo;
use super::testing::{QueueProbe, busy, gpus};
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::{QueueSpec, QueueState};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::collections::BTreeMap;

const GPU: &str = "nvidia.com/gpu";

fn conf(text: &str) -> SchedulerConf {
    SchedulerConf::parse(text).unwrap()
}

fn spec(name: &str) -> QueueSpec {
    QueueSpec::new(name)
}

fn no_cards() -> BTreeMap<String, i64> {
    BTreeMap::new()
}

/// Queues q1, q2, q3 of weights 1, 2, 3, each holding nothing and wanting 100 GPUs.
fn weighted_queues() -> Vec<QueueInfo> {
    (1..=3)
        .map(|w| {
            busy(
                QueueSpec {
                    weight: w,
                    ..spec(&format!("q{w}"))
                },
                0,
                100,
            )
        })
        .collect()
}

const CAPACITY: &str = "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n";

/// Volcano's `enabledAllocatable: false` and `enabledOverused: false` on
/// proportion's entry: a queue may take more than it deserves, and allocate no
/// longer sets it aside once it holds its share.
#[test]
fn proportion_switches_turn_its_queue_checks_off() {
    let on = conf("actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n");
    let mut s = QueueProbe::new(&on, gpus(60), weighted_queues());
    assert!(s.allocatable("q1", &gpus(11), &no_cards()).is_err());
    s.allocate("q1", &gpus(10), &no_cards());
    assert!(s.overused("q1"));
    let off = conf(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n    enabledAllocatable: false\n    enabledOverused: false\n",
    );
    let mut s = QueueProbe::new(&off, gpus(60), weighted_queues());
    assert!(s.allocatable("q1", &gpus(11), &no_cards()).is_ok());
    s.allocate("q1", &gpus(10), &no_cards());
    assert!(!s.overused("q1"));
}

#[test]
fn default_conf_uses_proportion_and_overcommit() {
    // 60 GPUs, weights 1:2:3, all want 100: deserved 10/20/30.
    let mut s = QueueProbe::new(&SchedulerConf::default(), gpus(60), weighted_queues());
    assert_eq!(
        s.session.tiers().names(),
        [
            "priority",
            "gang",
            "conformance",
            "overcommit",
            "drf",
            "predicates",
            "proportion",
            "nodeorder"
        ]
    );
    let r = s.report();
    assert_eq!(r[0].deserved, Some(Resources::from_units([(GPU, 10)])));
    assert_eq!(r[2].deserved, Some(Resources::from_units([(GPU, 30)])));
    // q1 may take 10 but not 11.
    assert!(s.allocatable("q1", &gpus(10), &no_cards()).is_ok());
    let e = s.allocatable("q1", &gpus(11), &no_cards()).unwrap_err();
    assert_eq!(e.dimension, GPU);
    assert_eq!(
        e.to_string(),
        "queue \"q1\": nvidia.com/gpu would be 11 > deserved 10 (proportion)"
    );
    // After taking 10 it is overused and sorts after the others.
    s.allocate("q1", &gpus(10), &no_cards());
    assert!(s.overused("q1"));
    assert_eq!(s.ordered_queues(), vec!["q2", "q3", "q1"]);
    // proportion admits up to q3's realCapability 60, but overcommit looks at the
    // whole cluster: after q2 takes 20, idle = 60 × 1.2 − 10 − 20 = 42.
    s.allocate("q2", &gpus(20), &no_cards());
    let e = s.enqueueable("q3", &gpus(43)).unwrap_err();
    assert_eq!(e.plugin, "overcommit");
    assert_eq!(
        e.to_string(),
        "queue \"q3\": nvidia.com/gpu would be 43 > idle 42 at overcommit factor 1.2 (overcommit)"
    );
    assert!(s.enqueueable("q3", &gpus(42)).is_ok());
    // Admitted jobs count against idle: after 40 more in queue, 3 is too much.
    s.mark_inqueue("q3", &gpus(40));
    assert_eq!(
        s.enqueueable("q3", &gpus(3)).unwrap_err().plugin,
        "overcommit"
    );
    // Both refuse 30 (40 in queue + 30 > realCapability 60, and > idle 2): the
    // first plugin in tier order that refuses names the reason, and the default
    // configuration lists overcommit before proportion.
    let e = s.enqueueable("q3", &gpus(30)).unwrap_err();
    assert_eq!(e.plugin, "overcommit");
    // Without overcommit, proportion's capability check speaks.
    let mut s = QueueProbe::new(
        &conf("actions: enqueue\ntiers:\n- plugins:\n  - name: proportion\n"),
        gpus(60),
        weighted_queues(),
    );
    s.mark_inqueue("q3", &gpus(40));
    let e = s.enqueueable("q3", &gpus(30)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "queue \"q3\": nvidia.com/gpu would be 70 > capability 60 (proportion)"
    );
}

#[test]
fn capability_rejects_with_the_named_dimension_and_missing_dimensions_are_unlimited() {
    let team = QueueSpec {
        capability: Some(Resources::from_units([(GPU, 8)])),
        ..spec("team-a")
    };
    let mut s = QueueProbe::new(
        &conf(CAPACITY),
        Resources::from_units([(GPU, 64), ("cpu", 256)]),
        vec![busy(team, 6, 6)],
    );
    let e = s.allocatable("team-a", &gpus(4), &no_cards()).unwrap_err();
    assert_eq!(e.dimension, GPU);
    assert_eq!(
        e.to_string(),
        "queue \"team-a\": nvidia.com/gpu would be 10 > capability 8 (capacity)"
    );
    // cpu is not in the capability: unlimited up to the cluster's 256.
    assert!(
        s.allocatable(
            "team-a",
            &Resources::from_units([("cpu", 200), (GPU, 2)]),
            &no_cards()
        )
        .is_ok()
    );
    let e = s
        .allocatable(
            "team-a",
            &Resources::from_units([("cpu", 300)]),
            &no_cards(),
        )
        .unwrap_err();
    assert_eq!(e.dimension, "cpu");
    // gpumem is in neither: unlimited.
    assert!(
        s.allocatable(
            "team-a",
            &Resources::from_units([("nvidia.com/gpumem", 80_000)]),
            &no_cards()
        )
        .is_ok()
    );
    // Enqueue: min 4 + allocated 6 = 10 > 8.
    let e = s.enqueueable("team-a", &gpus(4)).unwrap_err();
    assert_eq!(e.message, "nvidia.com/gpu would be 10 > capability 8");
    assert!(
        s.enqueueable("team-a", &Resources::new()).is_ok(),
        "no minResources: admitted"
    );
}

#[test]
fn unknown_and_closed_queues() {
    let closed = QueueSpec {
        state: QueueState::Closed,
        ..spec("old")
    };
    let mut s = QueueProbe::new(&conf(CAPACITY), gpus(8), vec![QueueInfo::idle(closed)]);
    let e = s.enqueueable("nope", &gpus(1)).unwrap_err();
    assert_eq!(e.dimension, "queue");
    assert_eq!(e.to_string(), "queue \"nope\" does not exist");
    let e = s.allocatable("old", &gpus(1), &no_cards()).unwrap_err();
    assert_eq!(e.dimension, "state");
    assert_eq!(
        e.to_string(),
        "queue \"old\": state is Closed, not Open (capacity)"
    );
    // Without a quota plugin the action refuses.
    let mut s = QueueProbe::new(
        &conf("actions: enqueue\n"),
        gpus(8),
        vec![QueueInfo::idle(QueueSpec {
            state: QueueState::Closing,
            ..spec("old")
        })],
    );
    assert_eq!(
        s.enqueueable("old", &gpus(1)).unwrap_err().plugin,
        "enqueue"
    );
    assert_eq!(s.session.tiers().names(), Vec::<&str>::new());
    assert!(s.report()[0].deserved.is_none());
}

#[test]
fn card_quota_rejects_per_card_key() {
    let conf = conf(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity-card\n  - name: proportion\n",
    );
    let team = QueueSpec {
        card_quota: BTreeMap::from([("NVIDIA-H200".to_owned(), 8)]),
        ..spec("team")
    };
    let input = QueueInfo {
        cards: BTreeMap::from([("NVIDIA-H200-141GB-HBM3".to_owned(), 6)]),
        ..busy(team, 6, 20)
    };
    let mut s = QueueProbe::new(&conf, gpus(32), vec![input]);
    let h200 = |n| BTreeMap::from([("NVIDIA-H200-141GB-HBM3".to_owned(), n)]);
    assert!(s.allocatable("team", &gpus(2), &h200(2)).is_ok());
    let e = s.allocatable("team", &gpus(3), &h200(3)).unwrap_err();
    assert_eq!(e.dimension, "card/NVIDIA-H200");
    assert_eq!(
        e.to_string(),
        "queue \"team\": card NVIDIA-H200 would be 9 > quota 8 (capacity-card)"
    );
    // Cards without a quota key are unlimited.
    let l4 = BTreeMap::from([("NVIDIA-L4".to_owned(), 50)]);
    assert!(s.allocatable("team", &gpus(1), &l4).is_ok());
    // Enqueue with card/<name> dimensions: 6 used + 3 requested > 8.
    let min = Resources::from_units([("card/NVIDIA-H200", 3), (GPU, 1)]);
    let e = s.enqueueable("team", &min).unwrap_err();
    assert_eq!(e.dimension, "card/NVIDIA-H200");
    let min2 = Resources::from_units([("card/NVIDIA-H200", 2), (GPU, 1)]);
    assert!(s.enqueueable("team", &min2).is_ok());
    // Once that job is in queue, its cards count too: 6 + 2 + 1 > 8.
    s.mark_inqueue("team", &min2);
    let min1 = Resources::from_units([("card/NVIDIA-H200", 1)]);
    assert_eq!(
        s.enqueueable("team", &min1).unwrap_err().dimension,
        "card/NVIDIA-H200"
    );
    assert_eq!(
        s.report()[0].card_used,
        BTreeMap::from([("NVIDIA-H200".to_owned(), 6)])
    );
}

#[test]
fn hierarchy_limits_children_by_ancestors_and_breaks_cycles() {
    let conf = conf(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n",
    );
    let queues = vec![
        QueueInfo::idle(spec("root")),
        QueueInfo::idle(QueueSpec {
            capability: Some(gpus(10)),
            ..spec("org")
        }),
        busy(
            QueueSpec {
                parent: Some("org".into()),
                capability: Some(gpus(8)),
                guarantee: Some(gpus(2)),
                ..spec("team-a")
            },
            4,
            4,
        ),
        busy(
            QueueSpec {
                parent: Some("org".into()),
                guarantee: Some(gpus(3)),
                ..spec("team-b")
            },
            3,
            3,
        ),
        QueueInfo::idle(QueueSpec {
            parent: Some("loop-b".into()),
            ..spec("loop-a")
        }),
        QueueInfo::idle(QueueSpec {
            parent: Some("loop-a".into()),
            ..spec("loop-b")
        }),
    ];
    let mut s = QueueProbe::new(&conf, gpus(32), queues);
    // org: realCapability min(32, 10) = 10, allocated 4 + 3 = 7.
    // team-a: min((10 − 5) + 2, 8) = 7; team-b: (10 − 5) + 3 = 8.
    let report = s.report();
    let by_name = |n: &str| report.iter().find(|r| r.name == n).unwrap().clone();
    assert_eq!(by_name("org").allocated, gpus(7));
    assert_eq!(by_name("org").real_capability, Some(gpus(10)));
    assert_eq!(by_name("team-a").real_capability, Some(gpus(7)));
    assert_eq!(by_name("team-b").real_capability, Some(gpus(8)));
    // team-a: 4 + 3 = 7 ≤ 7, but org: 7 + 3 = 10 ≤ 10: fits.
    assert!(s.allocatable("team-a", &gpus(3), &no_cards()).is_ok());
    // team-b: 3 + 4 = 7 ≤ 8, but org: 7 + 4 = 11 > 10.
    let e = s.allocatable("team-b", &gpus(4), &no_cards()).unwrap_err();
    assert_eq!(
        e.message,
        "nvidia.com/gpu would be 11 > capability 10 of ancestor queue \"org\""
    );
    // Parents hold no jobs.
    assert_eq!(
        s.allocatable("org", &gpus(1), &no_cards())
            .unwrap_err()
            .dimension,
        "hierarchy"
    );
    // Allocation climbs the tree and is undone exactly.
    s.allocate("team-a", &gpus(3), &no_cards());
    assert_eq!(
        s.allocatable("team-b", &gpus(1), &no_cards())
            .unwrap_err()
            .dimension,
        GPU
    );
    s.deallocate_last();
    assert_eq!(s.report(), report);
    // The cycle closes its two queues and nothing else.
    let e = s.enqueueable("loop-a", &gpus(1)).unwrap_err();
    assert_eq!(e.dimension, "state");
    assert!(e.message.contains("cycle"), "{e}");
    assert!(by_name("loop-b").state_reason.is_some());
    assert!(s.enqueueable("team-a", &gpus(1)).is_ok());
}

#[test]
fn both_quota_plugins_let_capacity_decide() {
    let conf = conf(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity\n",
    );
    let q = QueueSpec {
        deserved: Some(gpus(2)),
        ..spec("a")
    };
    let s = QueueProbe::new(&conf, gpus(16), vec![busy(q, 1, 10)]);
    assert_eq!(s.session.tiers().names(), ["capacity"]);
    assert_eq!(s.report()[0].deserved, Some(gpus(2)));
    // Capacity lets the queue grow past deserved up to the cluster.
    assert!(s.allocatable("a", &gpus(15), &no_cards()).is_ok());
    assert!(!s.overused("a"));
}

#[test]
fn queue_order_is_priority_then_share_then_name() {
    let queues = vec![
        busy(spec("b"), 5, 10),
        busy(spec("a"), 5, 10),
        busy(
            QueueSpec {
                priority: 10,
                ..spec("z")
            },
            10,
            10,
        ),
        busy(spec("c"), 1, 10),
    ];
    // 30 GPUs, equal weights, each wants 10: deserved 10 each.
    let s = QueueProbe::new(&SchedulerConf::default(), gpus(30), queues);
    // z first (priority); then c (share 0.1); then a, b (share 0.5, by name).
    assert_eq!(s.ordered_queues(), vec!["z", "c", "a", "b"]);
    assert_eq!(s.session.queue_order("a", "missing"), Ordering::Less);
}

fn arb_session() -> impl Strategy<Value = (String, QueueProbe, Vec<(usize, i64, i64)>)> {
    let confs = prop_oneof![
        Just(String::from(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: capacity-card\n"
        )),
        Just(String::from(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n  - name: capacity-card\n"
        )),
        Just(String::from(
            "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: capacity\n"
        )),
    ];
    (
        confs,
        proptest::collection::vec((1_u32..5, 0_i64..20_000, 0_i64..40_000, 0_i64..3), 1..5),
        proptest::collection::vec((0_usize..5, 0_i64..5_000, 0_i64..3), 1..8),
    )
        .prop_map(|(text, queues, ops)| {
            let inputs: Vec<QueueInfo> = queues
                .iter()
                .enumerate()
                .map(|(i, (w, alloc, extra, cards))| QueueInfo {
                    spec: QueueSpec {
                        weight: *w,
                        parent: (i > 1).then(|| "q1".to_owned()),
                        card_quota: BTreeMap::from([("NVIDIA-A100".to_owned(), 4)]),
                        ..QueueSpec::new(format!("q{i}"))
                    },
                    allocated: Resources::from_milli([(GPU, *alloc), ("cpu", *alloc * 3)]),
                    request: Resources::from_milli([(GPU, alloc + extra), ("cpu", *alloc * 3)]),
                    inqueue: Resources::new(),
                    elastic: Resources::new(),
                    cards: BTreeMap::from([("NVIDIA-A100-SXM4-80GB".to_owned(), *cards)]),
                })
                .collect();
            let total = Resources::from_units([(GPU, 64), ("cpu", 512)]);
            let session = QueueProbe::new(&conf(&text), total, inputs);
            (text, session, ops)
        })
}

proptest! {
    #[test]
    fn allocate_then_deallocate_restores_every_report((_text, mut s, ops) in arb_session()) {
        let before = s.report();
        let names = s.ordered_queues();
        let mut done = Vec::new();
        for (q, amount, cards) in ops {
            let name = names[q % names.len()].clone();
            let r = Resources::from_milli([(GPU, amount), ("nvidia.com/gpumem", amount * 7)]);
            let c = BTreeMap::from([("NVIDIA-A100-SXM4-80GB".to_owned(), cards)]);
            s.allocate(&name, &r, &c);
            done.push((name, r, c));
        }
        for _ in done.iter().rev() {
            s.deallocate_last();
        }
        prop_assert_eq!(s.report(), before);
    }
}
