//! Allocate not trying the jobs its hints skip, nor those with nothing to place,
//! decides and notes exactly what it decides and notes when it tries them: on
//! random sessions (weighted queues that become overused, priorities, gangs too
//! large to fit, jobs already running, some short of members), the jobs a first
//! session could not place are skipped in a second one over the same state, with
//! the messages the first gave them, and both sessions come out as a session
//! that tries every job in job order.

use super::allocate::{Allocate, allocate_job, note_never_reached};
use super::{jobs_by_queue, next_job};
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::framework::job::JobInfo;
use crate::volcano::framework::outcome::SessionOutcome;
use crate::volcano::framework::queue::QueueInfo;
use crate::volcano::framework::testing::{gpu_nodes, gpu_task, job, placed_state, running_task};
use crate::volcano::framework::{Action, GangKey, Session, SessionState};
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use proptest::prelude::*;
use std::collections::BTreeMap;

const GPU: &str = "nvidia.com/gpu";
/// Nodes and whole GPUs on each.
const NODES: usize = 2;
const GPUS_PER_NODE: u32 = 4;

/// One job: its queue, members, minMember, GPUs per member, priority, whether
/// it already runs (one member on one GPU), and whether its waiting members are
/// left to kube-scheduler (no gate: nothing for allocate to place).
type JobSpec = (usize, u32, u32, u32, i32, bool, bool);

fn key(name: &str) -> GangKey {
    GangKey {
        namespace: "ns".into(),
        name: name.into(),
        single: false,
    }
}

/// The session state of `specs` over queues of `weights`; every queue asks for
/// what its jobs ask, so proportion's deserved shares follow the weights.
fn state(weights: &[u32], specs: &[JobSpec]) -> SessionState {
    let mut free_gpus = (0..NODES).flat_map(|n| (0..GPUS_PER_NODE).map(move |g| (n, g)));
    let mut request = vec![0i64; weights.len()];
    let jobs: Vec<JobInfo> = specs
        .iter()
        .enumerate()
        .map(
            |(i, &(queue, members, min, gpus, priority, runs, ungated))| {
                let name = format!("j{i}");
                let k = key(&name);
                let running = if runs { free_gpus.next() } else { None };
                let tasks = (0..members)
                    .map(|m| {
                        let task_name = format!("{name}-{m}");
                        let mut t = match running {
                            Some((node, gpu)) if m == 0 => running_task(&k, &task_name, node, gpu),
                            _ => gpu_task(&k, &task_name, gpus),
                        };
                        t.gated &= !ungated;
                        t.priority = priority;
                        t
                    })
                    .collect();
                request[queue] += i64::from(members * gpus);
                let mut j = job(
                    &name,
                    &format!("q{queue}"),
                    min.min(members) as usize,
                    tasks,
                );
                j.priority = priority;
                j
            },
        )
        .collect();
    let queues: Vec<QueueInfo> = weights
        .iter()
        .enumerate()
        .map(|(q, &weight)| QueueInfo {
            request: Resources::from_units([(GPU, request[q])]),
            ..QueueInfo::idle(QueueSpec {
                weight,
                ..QueueSpec::new(format!("q{q}"))
            })
        })
        .collect();
    let mut state = placed_state(gpu_nodes(NODES, GPUS_PER_NODE, 1), queues, jobs);
    // The cluster's GPUs, so that queues reach their deserved shares.
    state.total = Resources::from_units([(GPU, (NODES as u32 * GPUS_PER_NODE).into())]);
    state
}

/// Allocate as a pass over every job in job order, each job tried in its turn
/// but those `skip` holds, which are noted with their message: what `Allocate`
/// must decide and note.
fn allocate_every_job_in_turn(session: &mut Session) {
    let mut waiting = jobs_by_queue(session, |job| job.inqueue);
    while let Some(key) = next_job(session, &mut waiting, true) {
        if let Some(message) = session.hints.skip.get(&key).cloned() {
            session.note_job(&key, None, "NotEnoughResources", message);
            continue;
        }
        if allocate_job(session, &key)
            && let Some(queue) = session.state.job(&key).map(|j| j.queue.clone())
        {
            let jobs = waiting.entry(queue).or_default();
            jobs.push(key);
            jobs.sort_by(|a, b| session.job_order(a, b));
        }
    }
    note_never_reached(session, waiting);
}

/// Runs allocate (`every_job`: the pass over every job) over `state`, skipping
/// `skip`; the outcome and the jobs it tried and could not place.
fn allocate(
    state: SessionState,
    skip: BTreeMap<GangKey, String>,
    every_job: bool,
) -> (SessionOutcome, BTreeMap<GangKey, String>) {
    let tiers = registry::build(&SchedulerConf::default()).expect("builds");
    let mut session = Session::open(state, tiers);
    session.hints.skip = skip;
    if every_job {
        allocate_every_job_in_turn(&mut session);
    } else {
        Allocate.execute(&mut session);
    }
    let unplaced = std::mem::take(&mut session.hints.unplaced);
    (session.close(), unplaced)
}

fn job_spec() -> impl Strategy<Value = JobSpec> {
    (
        0..3usize,
        1..4u32,
        1..4u32,
        1..4u32,
        0..3i32,
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn allocate_decides_and_notes_as_a_pass_over_every_job_in_turn(
        weights in prop::collection::vec(1..5u32, 1..4),
        specs in prop::collection::vec(job_spec(), 1..14),
        skip_mask in any::<u64>(),
    ) {
        let specs: Vec<JobSpec> = specs
            .into_iter()
            .map(|(q, m, min, g, p, r, u)| (q % weights.len(), m, min, g, p, r, u))
            .collect();
        let (every, unplaced) = allocate(state(&weights, &specs), BTreeMap::new(), true);
        let skip: BTreeMap<GangKey, String> = unplaced
            .into_iter()
            .enumerate()
            .filter(|(i, _)| skip_mask & (1 << (i % 64)) != 0)
            .map(|(_, job)| job)
            .collect();
        for skip in [BTreeMap::new(), skip] {
            let (expected, _) = allocate(state(&weights, &specs), skip.clone(), true);
            prop_assert_eq!(&expected, &every);
            let (outcome, _) = allocate(state(&weights, &specs), skip, false);
            prop_assert_eq!(&outcome.commits, &every.commits);
            prop_assert_eq!(&outcome.verdicts, &every.verdicts);
            prop_assert_eq!(&outcome.queues, &every.queues);
        }
    }
}

/// A skipped job of a queue that the job before it filled up to its deserved
/// share is never reached and says its queue is overused, as when every job is
/// tried; a skipped job of a queue with room keeps the message it waited with.
#[test]
fn a_skipped_job_behind_the_job_that_filled_its_queue_says_the_queue_is_overused() {
    // q0 and q1 deserve half of the 8 GPUs each; j0 takes q0's half.
    let specs: Vec<JobSpec> = vec![
        (0, 1, 1, 4, 0, false, false),
        (0, 1, 1, 1, 0, false, false),
        (1, 1, 1, 8, 0, false, false),
    ];
    let skip = BTreeMap::from([
        (key("j1"), "blocked before".to_string()),
        (key("j2"), "too large for any node".to_string()),
    ]);
    for skip in [BTreeMap::new(), skip] {
        let (outcome, _) = allocate(state(&[1, 1], &specs), skip.clone(), false);
        let message = |job: &str| outcome.verdicts[&key(job)].message.clone();
        assert_eq!(outcome.commits.len(), 1, "{skip:?}");
        assert!(
            message("j1").is_some_and(|m| m.contains("\"q0\" is overused")),
            "{skip:?}: {:?}",
            message("j1")
        );
        if !skip.is_empty() {
            assert_eq!(message("j2").as_deref(), Some("too large for any node"));
        }
    }
}
