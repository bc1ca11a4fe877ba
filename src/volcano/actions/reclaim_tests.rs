//! Tidal reclaim and preemption through a session: who may take GPUs from whom,
//! whole gangs or none, and which pods are never touched.

use super::preempt::Preempt;
use super::reclaim::Reclaim;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::job::JobInfo;
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{Action, GangKey, Session};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use std::collections::BTreeSet;

/// The seed's configuration: priority, gang and conformance leave reclaim to
/// capacity-card, which knows service types.
const TIDAL: &str = "actions: enqueue, allocate, backfill, reclaim, preempt
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: conformance
    enableReclaimable: false
- plugins:
  - name: capacity-card
    arguments:
      cardUnlimitedCpuMemory: true
      podOwnerReferenceToServiceType:
        ReplicaSet: inference
        Job: training
";

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

fn queues() -> Vec<QueueInfo> {
    vec![
        QueueInfo::idle(QueueSpec {
            priority: 80000,
            reclaimable: false,
            ..QueueSpec::new("inference")
        }),
        QueueInfo::idle(QueueSpec {
            priority: 20000,
            reclaimable: true,
            ..QueueSpec::new("training")
        }),
    ]
}

/// A running training gang of `n` on `node`, one GPU each.
fn training_gang(name: &str, node: usize, n: u32, priority: i32) -> JobInfo {
    let k = key(name);
    let tasks = (0..n)
        .map(|i| {
            let mut t = running_task(&k, &format!("{name}-{i}"), node, i);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, "training", n as usize, tasks);
    j.service_type = Some("training".into());
    j.priority = priority;
    j
}

/// A waiting job of `n` one-GPU tasks.
fn waiting(name: &str, queue: &str, service: &str, n: u32, priority: i32) -> JobInfo {
    let k = key(name);
    let tasks = (0..n)
        .map(|i| {
            let mut t = gpu_task(&k, &format!("{name}-{i}"), 1);
            t.priority = priority;
            t
        })
        .collect();
    let mut j = job(name, queue, n as usize, tasks);
    j.service_type = Some(service.into());
    j.priority = priority;
    j
}

fn run(conf: &str, jobs: Vec<JobInfo>, action: &dyn Action) -> SessionOutcome {
    run_with_queues(conf, queues(), jobs, action)
}

fn run_with_queues(
    conf: &str,
    queues: Vec<QueueInfo>,
    jobs: Vec<JobInfo>,
    action: &dyn Action,
) -> SessionOutcome {
    let conf = SchedulerConf::parse(conf).expect("conf");
    let state = placed_state(gpu_nodes(2, 2, 1), queues, jobs);
    let mut session = Session::open(state, registry::build(&conf).expect("builds"));
    action.execute(&mut session);
    session.close()
}

fn evicted(o: &SessionOutcome) -> BTreeSet<String> {
    o.evictions().map(|e| e.name.clone()).collect()
}

#[test]
fn inference_takes_a_whole_training_gang_and_is_pipelined_where_it_was() {
    let o = run(
        TIDAL,
        vec![
            training_gang("a", 0, 2, 20000),
            training_gang("b", 1, 2, 20000),
            waiting("svc", "inference", "inference", 1, 80000),
        ],
        &Reclaim,
    );
    assert_eq!(
        evicted(&o),
        BTreeSet::from(["a-0".into(), "a-1".into()]),
        "{o:?}"
    );
    assert!(
        o.evictions()
            .all(|e| e.reason.contains("reclaimed for pod ns/svc-0"))
    );
    let planned = &o.commits[0].members[0];
    assert!(planned.pipelined);
    assert_eq!(
        planned.placement.as_ref().map(|p| p.node.as_str()),
        Some("node-0")
    );
}

#[test]
fn the_lower_priority_gang_goes_first() {
    let o = run(
        TIDAL,
        vec![
            training_gang("a", 0, 2, 40000),
            training_gang("b", 1, 2, 20000),
            waiting("svc", "inference", "inference", 1, 80000),
        ],
        &Reclaim,
    );
    assert_eq!(evicted(&o), BTreeSet::from(["b-0".into(), "b-1".into()]));
}

#[test]
fn training_takes_nothing_and_inference_is_never_a_victim() {
    // Training waits in a queue of its own and finds inference running.
    let mut svc = training_gang("svc", 0, 2, 80000);
    svc.queue = "inference".into();
    svc.service_type = Some("inference".into());
    let mut other_training = waiting("t2", "training", "training", 1, 20000);
    other_training.queue = "training".into();
    let o = run(
        TIDAL,
        vec![svc.clone(), training_gang("a", 1, 2, 20000), other_training],
        &Reclaim,
    );
    assert!(
        o.evictions().next().is_none(),
        "{:?}",
        o.evictions().collect::<Vec<_>>()
    );
    // Inference does not take from inference: make the inference queue reclaimable
    // so only the service-type rule stands in the way.
    let conf = SchedulerConf::parse(TIDAL).unwrap();
    let mut qs = queues();
    qs[0].spec.reclaimable = true;
    qs.push(QueueInfo::idle(QueueSpec::new("inference-b")));
    let state = placed_state(
        gpu_nodes(1, 2, 1),
        qs,
        vec![svc, waiting("svc-b", "inference-b", "inference", 1, 90000)],
    );
    let mut s = Session::open(state, registry::build(&conf).unwrap());
    Reclaim.execute(&mut s);
    assert!(s.close().evictions().next().is_none());
}

/// A name and what makes a job's pods untouchable.
type Protection = (&'static str, fn(&mut JobInfo));

#[test]
fn protected_pods_are_never_victims_whatever_the_configuration() {
    // Every rule is switched off in the configuration: only capacity-card decides.
    let protections: [Protection; 4] = [
        ("preemptable false", |j| {
            for t in &mut j.tasks {
                t.preemptable = false;
            }
        }),
        ("kube-system", |j| {
            for t in &mut j.tasks {
                t.namespace = "kube-system".into();
            }
        }),
        ("critical class", |j| {
            for t in &mut j.tasks {
                let mut pod = (*t.pod).clone();
                pod.spec
                    .get_or_insert_with(Default::default)
                    .priority_class_name = Some("system-cluster-critical".into());
                t.pod = std::sync::Arc::new(pod);
            }
        }),
        ("cooling down", |j| {
            for t in &mut j.tasks {
                t.cooldown = Some(std::time::Duration::from_secs(600));
                t.scheduled_at = Some(chrono::DateTime::UNIX_EPOCH);
            }
        }),
    ];
    for (what, protect) in protections {
        let mut a = training_gang("a", 0, 2, 20000);
        let mut b = training_gang("b", 1, 2, 20000);
        protect(&mut a);
        protect(&mut b);
        let o = run(
            TIDAL,
            vec![a, b, waiting("svc", "inference", "inference", 1, 80000)],
            &Reclaim,
        );
        assert!(
            o.evictions().next().is_none(),
            "{what}: {:?}",
            o.evictions().collect::<Vec<_>>()
        );
        assert!(o.commits.is_empty(), "{what}");
    }
}

#[test]
fn a_gang_member_that_may_not_go_keeps_its_whole_gang() {
    // A gang at its minimum, and one above it that is disrupted only whole.
    for mut a in [training_gang("a", 0, 2, 20000), disrupted_whole("a")] {
        a.tasks[1].preemptable = false;
        let o = run(
            TIDAL,
            vec![
                a,
                training_gang("b", 1, 2, 30000),
                waiting("svc", "inference", "inference", 1, 80000),
            ],
            &Reclaim,
        );
        // a cannot go whole: b goes although its priority is higher.
        assert_eq!(evicted(&o), BTreeSet::from(["b-0".into(), "b-1".into()]));
    }
}

#[test]
fn an_elastic_gang_gives_up_only_what_it_has_beyond_its_minimum() {
    let mut a = training_gang("a", 0, 2, 20000);
    a.min_member = 1;
    let o = run(
        TIDAL,
        vec![
            a,
            training_gang("b", 1, 2, 20000),
            waiting("svc", "inference", "inference", 1, 80000),
        ],
        &Reclaim,
    );
    assert_eq!(
        evicted(&o).len(),
        1,
        "{:?}",
        o.evictions().collect::<Vec<_>>()
    );
}

/// A gang of two above its minimum of one whose PodGroup says it is disrupted
/// only whole (`disruptionMode: PodGroup`).
fn disrupted_whole(name: &str) -> JobInfo {
    let mut j = training_gang(name, 0, 2, 20000);
    j.min_member = 1;
    j.disrupted_whole = true;
    j
}

#[test]
fn a_group_disrupted_only_whole_goes_whole_even_above_its_minimum() {
    let o = run(
        TIDAL,
        vec![
            disrupted_whole("a"),
            training_gang("b", 1, 2, 30000),
            waiting("svc", "inference", "inference", 1, 80000),
        ],
        &Reclaim,
    );
    assert_eq!(
        evicted(&o),
        BTreeSet::from(["a-0".into(), "a-1".into()]),
        "{:?}",
        o.evictions().collect::<Vec<_>>()
    );
}

#[test]
fn a_high_priority_gang_preempts_a_low_priority_one_in_its_queue() {
    const PREEMPT: &str = "actions: preempt
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
";
    let high = {
        let mut j = waiting("high", "training", "training", 2, 50000);
        j.min_member = 2;
        j
    };
    let o = run(
        PREEMPT,
        vec![
            training_gang("low", 0, 2, 10000),
            training_gang("same", 1, 2, 50000),
            high,
        ],
        &Preempt,
    );
    assert_eq!(
        evicted(&o),
        BTreeSet::from(["low-0".into(), "low-1".into()])
    );
    let planned: Vec<_> = o.commits[0]
        .members
        .iter()
        .filter(|m| m.pipelined)
        .collect();
    assert_eq!(planned.len(), 2, "the whole gang is pipelined");
}

#[test]
fn a_gang_that_cannot_be_made_whole_evicts_nobody() {
    // Four GPUs in all, two of them free: a gang of five cannot be made whole
    // whatever is evicted.
    let big = {
        let mut j = waiting("big", "inference", "inference", 5, 80000);
        j.min_member = 5;
        j
    };
    let o = run(TIDAL, vec![training_gang("a", 0, 2, 20000), big], &Reclaim);
    assert!(
        o.evictions().next().is_none(),
        "{:?}",
        o.evictions().collect::<Vec<_>>()
    );
    assert!(o.commits.is_empty());
}

#[test]
fn disruption_budgets_hold_whatever_the_configuration() {
    use crate::volcano::disruption_budget::DisruptionBudget;
    let label = |mut j: JobInfo| {
        for t in &mut j.tasks {
            let mut pod = (*t.pod).clone();
            pod.metadata.labels = Some([("job".to_string(), j.key.name.to_string())].into());
            t.pod = std::sync::Arc::new(pod);
        }
        j
    };
    let budget = |job: &str, allowed: i32| {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": job, "namespace": "ns"},
                "spec": {"selector": {"matchLabels": {"job": job}}, "minAvailable": 1},
                "status": {"disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
            }))
            .unwrap();
        DisruptionBudget::of(&pdb).unwrap()
    };
    let conf = SchedulerConf::parse(TIDAL).unwrap();
    let reclaim_with = |budgets: Vec<DisruptionBudget>| {
        let mut state = placed_state(
            gpu_nodes(2, 2, 1),
            queues(),
            vec![
                label(training_gang("a", 0, 2, 20000)),
                label(training_gang("b", 1, 2, 30000)),
                waiting("svc", "inference", "inference", 1, 80000),
            ],
        );
        state.budgets = budgets;
        let mut s = Session::open(state, registry::build(&conf).unwrap());
        Reclaim.execute(&mut s);
        evicted(&s.close())
    };
    // a's budget lets one pod go, not both: the whole of b goes instead.
    assert_eq!(
        reclaim_with(vec![budget("a", 1)]),
        BTreeSet::from(["b-0".into(), "b-1".into()])
    );
    // Neither may lose both: nobody goes.
    assert!(reclaim_with(vec![budget("a", 1), budget("b", 0)]).is_empty());
}

#[test]
fn card_unlimited_cpu_memory_lets_a_gpu_pod_reclaim_beyond_its_queues_cpu_and_memory() {
    // The seed's inference queue: CPU and memory capability far below what one
    // serving pod asks; the card quota is what bounds it.
    let small = |mut q: Vec<QueueInfo>| {
        q[0].spec.capability = Some(crate::resources::Resources::from_units([
            ("cpu", 4),
            ("memory", 4 << 30),
        ]));
        q
    };
    let jobs = || {
        let mut svc = waiting("svc", "inference", "inference", 1, 80000);
        for t in svc.tasks.iter_mut() {
            t.resreq.set("cpu", 2_000);
            t.resreq.set("memory", (16i64 << 30) * 1000);
        }
        vec![
            training_gang("a", 0, 2, 20000),
            training_gang("b", 1, 2, 20000),
            svc,
        ]
    };
    let unlimited = run_with_queues(TIDAL, small(queues()), jobs(), &Reclaim);
    assert_eq!(evicted(&unlimited).len(), 2, "{unlimited:?}");

    let limited_conf = TIDAL.replace(
        "cardUnlimitedCpuMemory: true",
        "cardUnlimitedCpuMemory: false",
    );
    let limited = run_with_queues(&limited_conf, small(queues()), jobs(), &Reclaim);
    assert!(evicted(&limited).is_empty(), "{limited:?}");
}
