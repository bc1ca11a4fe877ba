//! Committing a session's plan to a ledger that moved on: a node changed since the
//! picture is checked again, never overwritten; and what a committed plan books is
//! exactly what a session rebuilt from the cluster sees.

use super::PlannerMemory;
use crate::extender::wire::ExtenderArgs;
use crate::gang::kept_holdings::KeptHoldings;
use crate::gang::kept_nodes::KeptNodes;
use crate::gang::planner_book::PlannerBook;
use crate::gang::snapshot::{LedgerPicture, SnapshotInput, build_state};
use crate::scheduler::gang_tests::Cluster;
use crate::scheduler::{GangConfig, Scheduler};
use crate::usage::GpuUsage;
use crate::volcano::actions;
use crate::volcano::framework::{GangPhase, Session, SessionOutcome, TaskStatus};
use crate::volcano::plugins::registry;
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde_json::json;

/// A plain vGPU pod (no gang) asking for one whole GPU.
fn plain_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {
            "nvidia.com/gpu": "1", "nvidia.com/gpumem": "80000"}}}]}
    }))
    .expect("pod")
}

/// `/filter` of a plain pod on the cluster's nodes; the node it reserved on.
async fn filter_plain(c: &Cluster, name: &str) -> String {
    let pod = plain_pod(name);
    c.add(&pod);
    let r =
        c.s.filter(ExtenderArgs {
            pod: Some(pod),
            nodes: None,
            node_names: Some(c.nodes.iter().collect()),
        })
        .await;
    assert!(r.error.is_empty(), "{}", r.error);
    r.node_names.expect("a node").remove(0)
}

/// No GPU anywhere holds more than it registered.
fn within_capacity(s: &Scheduler) -> bool {
    s.with_ledger(|l| {
        l.nodes().iter().all(|(_, n)| {
            n.devices.iter().zip(&n.usage).all(|(d, u)| {
                u.used <= d.count && u.usedmem <= d.devmem && u.usedcores <= d.devcore
            })
        })
    })
}

/// Plans every gang on a picture of the cluster, booking nothing; returns the
/// outcome and the book it was planned from.
fn plan_on_picture(c: &Cluster) -> (SessionOutcome, PlannerBook) {
    let memory = PlannerMemory::default();
    let (mut copy, mut kept) = Default::default();
    let outcome = c.s.plan_on_picture(
        &memory,
        (&mut copy, &mut kept),
        None,
        &mut Default::default(),
    );
    (outcome, copy)
}

#[tokio::test]
async fn a_gang_whose_node_filled_up_meanwhile_is_taken_back_whole() {
    let c = Cluster::new(&[("n1", 2)], GangConfig::default());
    c.gang("pair", 2, "default", "p", 2);
    let (mut outcome, copy) = plan_on_picture(&c);
    let book = copy.book();
    assert_eq!(
        outcome.commits.len(),
        1,
        "the picture had room for the pair"
    );
    // While the session planned, a /filter took one of the two GPUs.
    assert_eq!(filter_plain(&c, "other").await, "n1");
    c.s.reserve_commits(&mut outcome, book);
    assert!(outcome.commits.is_empty(), "nothing of the pair is booked");
    let v = &outcome.verdicts[&book.members()["uid-p0"].gang];
    assert_eq!(v.phase, GangPhase::Inqueue);
    assert!(
        v.message.as_deref().unwrap_or("").contains("overtaken"),
        "{v:?}"
    );
    assert_eq!(c.held(), 1, "only the filtered pod holds a GPU");
    assert!(within_capacity(&c.s));
}

#[tokio::test]
async fn a_member_whose_gpu_was_taken_keeps_its_node_on_another_gpu() {
    let c = Cluster::new(&[("n1", 3)], GangConfig::default());
    c.gang("pair", 2, "default", "p", 2);
    let (mut outcome, copy) = plan_on_picture(&c);
    let book = copy.book();
    let planned: Vec<String> = outcome.commits[0]
        .members
        .iter()
        .filter_map(|m| m.placement.as_ref())
        .map(|p| p.devices[0][0].uuid.to_string())
        .collect();
    assert_eq!(filter_plain(&c, "other").await, "n1");
    let taken: Vec<String> = c.s.with_ledger(|l| {
        l.pod("uid-other").expect("reserved").devices[0]
            .iter()
            .map(|d| d.uuid.to_string())
            .collect()
    });
    assert!(planned.contains(&taken[0]), "the filter took a planned GPU");
    c.s.reserve_commits(&mut outcome, book);
    assert_eq!(outcome.commits.len(), 1, "the pair still fits on n1");
    let booked: Vec<String> = outcome.commits[0]
        .members
        .iter()
        .filter_map(|m| m.placement.as_ref())
        .map(|p| p.devices[0][0].uuid.to_string())
        .collect();
    assert!(!booked.contains(&taken[0]), "{booked:?} / {taken:?}");
    assert_eq!(c.held(), 3);
    assert!(within_capacity(&c.s));
    // Every GPU of n1 is used once.
    let usage: Vec<GpuUsage> = c.s.with_ledger(|l| l.node("n1").expect("n1").usage.clone());
    assert!(usage.iter().all(|u| u.used == 1), "{usage:?}");
}

/// Runs the configured actions on a picture of the cluster and returns the session
/// before it closes.
fn session_on(c: &Cluster) -> Session {
    let book = c.s.gang.book.read().clone();
    let conf = c.s.gang.conf.load_full();
    let dims = c.s.vgpu_dims();
    let parse = |pod: &Pod| c.s.pod_context(pod);
    let inqueue = Default::default();
    let input = SnapshotInput {
        book: &book,
        conf: &conf.conf,
        dims: &dims,
        inqueue: &inqueue,
        only: None,
        parse: &parse,
        now: c.s.clock().wall(),
    };
    let mut holdings = KeptHoldings::default();
    let (picture, _) = LedgerPicture::take(
        &c.s.ledger.read(),
        &book,
        (&mut holdings, &mut KeptNodes::default()),
        None,
    );
    let mut session = Session::open(
        build_state(&input, picture, &holdings),
        registry::build(&conf.conf).expect("builds"),
    );
    for action in actions::configured(&conf.conf) {
        action.execute(&mut session);
    }
    session
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever a cycle commits, a session opened afterwards on the cluster sees
    /// the same placements, charges and queue figures the committing session ended
    /// with.
    #[test]
    fn a_committed_plan_reads_back_as_the_session_left_it(
        nodes in proptest::collection::vec(1usize..5, 1..4),
        gangs in proptest::collection::vec((1u32..4, 0u32..2), 1..5),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let spec: Vec<(&str, usize)> = names.iter().map(String::as_str).zip(nodes.iter().copied()).collect();
        let c = Cluster::new(&spec, GangConfig::default());
        for (g, (size, extra)) in gangs.iter().enumerate() {
            c.gang(&format!("g{g}"), *size, "default", &format!("g{g}m"), size + extra);
        }
        let ended = session_on(&c).state;
        runtime.block_on(c.s.run_gang_cycle());
        let reread = session_on(&c);
        for (key, job) in &ended.jobs {
            let again = &reread.state.jobs[key];
            for (t, u) in job.tasks.iter().zip(&again.tasks) {
                let placed = t.status == TaskStatus::Allocated;
                prop_assert_eq!(placed, u.status == TaskStatus::Allocated, "{}", t.name);
                if placed {
                    prop_assert_eq!(&t.placement, &u.placement);
                    prop_assert_eq!(&t.resreq, &u.resreq);
                    prop_assert_eq!(&t.cards, &u.cards);
                }
            }
        }
        for (name, q) in &ended.queues {
            prop_assert_eq!(&q.allocated, &reread.state.queues[name].allocated);
            prop_assert_eq!(&q.cards, &reread.state.queues[name].cards);
        }
        prop_assert!(within_capacity(&c.s));
    }
}

/// Volcano's session total counts the nodes' pod slots (proportion shares them
/// out between queues), not only their CPU, memory and GPUs.
#[test]
fn a_session_counts_the_pod_slots_the_nodes_report() {
    let nodes = ["n1", "n2"].map(|name| {
        let mut node = crate::scheduler::gang_tests::gpu_node(name, 1);
        if let Some(allocatable) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) {
            allocatable.insert(
                "pods".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("110".into()),
            );
        }
        node
    });
    let c = Cluster::from_nodes(nodes.to_vec(), GangConfig::default());
    assert_eq!(
        session_on(&c)
            .state
            .total
            .get(crate::placement::resource_fit::POD_COUNT),
        220_000
    );
}
