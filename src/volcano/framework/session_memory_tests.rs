//! A session opened after another over the same cluster (with what the last
//! one kept) orders jobs, reports queues and closes with the verdicts of a
//! session opened afresh, while jobs change, come and go, notes change on jobs
//! that did not, and the cluster grows; and it finds the same tasks carrying
//! inter-pod affinity terms, as jobs gain and lose them.

use super::outcome::Verdicts;
use super::report::QueueReport;
use super::session::Session;
use super::session_memory::SessionMemory;
use super::testing::{gpus, job, state, task};
use super::{GangKey, JobInfo, QueueInfo, TaskStatus, Tiers};
use crate::placement::resource_fit::POD_COUNT;
use crate::resources::Resources;
use crate::volcano::conf::SchedulerConf;
use crate::volcano::objects::QueueSpec;
use crate::volcano::plugins::registry;
use std::cmp::Ordering;
use std::sync::Arc;

const CONF: &str = "actions: allocate
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: proportion
";

fn tiers() -> Tiers {
    registry::build(&SchedulerConf::parse(CONF).expect("conf")).expect("builds")
}

/// A job of `running + waiting` one-GPU tasks in `queue`.
fn gang(name: &str, queue: &str, running: usize, waiting: usize) -> Arc<JobInfo> {
    gang_with_terms(name, queue, running, waiting, false)
}

/// [`gang`], its first task's pod keeping away from pods labelled `app: x`
/// when `anti_affine`.
fn gang_with_terms(
    name: &str,
    queue: &str,
    running: usize,
    waiting: usize,
    anti_affine: bool,
) -> Arc<JobInfo> {
    let key = super::testing::gang_key(name);
    let tasks = (0..running + waiting)
        .map(|i| {
            let mut t = task(&key, &format!("{name}-{i}"), gpus(1));
            if i < running {
                t.status = TaskStatus::Running;
            }
            if anti_affine && i == 0 {
                let mut pod = (*t.pod).clone();
                pod.spec.get_or_insert_with(Default::default).affinity = Some(
                    serde_json::from_value(serde_json::json!({
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"app": "x"}},
                            "topologyKey": "kubernetes.io/hostname"
                        }]}
                    }))
                    .expect("affinity"),
                );
                t.pod = Arc::new(pod);
            }
            t
        })
        .collect();
    Arc::new(job(name, queue, 1, tasks))
}

/// What a session tells: the order of every pair of jobs, every queue's report,
/// the verdicts it closes with once `notes` are noted, and the tasks it finds
/// carrying inter-pod affinity terms.
type Told = (Vec<Ordering>, Vec<QueueReport>, Verdicts, String);

fn tell(
    total: i64,
    jobs: &[&Arc<JobInfo>],
    notes: &[(&Arc<JobInfo>, &'static str)],
    memory: SessionMemory,
) -> (Told, SessionMemory) {
    let queues = ["a", "b"]
        .iter()
        .map(|q| QueueInfo::idle(QueueSpec::new(*q)))
        .collect();
    // Pod slots too: proportion shares them out by the pods each queue holds.
    let mut cluster = gpus(total);
    cluster.add(&Resources::from_units([(POD_COUNT, 20)]));
    let mut st = state(cluster, queues, Vec::new());
    st.jobs = jobs
        .iter()
        .map(|j| (j.key.clone(), Arc::clone(j)))
        .collect();
    let mut session = Session::open_after(st, tiers(), memory);
    let keys: Vec<GangKey> = jobs.iter().map(|j| j.key.clone()).collect();
    let order = keys
        .iter()
        .flat_map(|a| keys.iter().map(|b| (a.clone(), b.clone())))
        .map(|(a, b)| session.job_order(&a, &b))
        .collect();
    let reports = session.queue_reports();
    let term_holders = format!("{:?}", session.term_holders());
    for (job, reason) in notes {
        session.note_job(&job.key, None, reason, format!("{reason} of {}", job.key));
    }
    let (outcome, memory) = session.close_keeping();
    ((order, reports, outcome.verdicts, term_holders), memory)
}

/// The cluster's GPUs, its jobs, and the reasons noted on some of them.
type Step<'a> = (
    i64,
    Vec<&'a Arc<JobInfo>>,
    Vec<(&'a Arc<JobInfo>, &'static str)>,
);

#[test]
fn a_session_opened_after_another_decides_as_one_opened_afresh() {
    let (a, b, c) = (
        gang("a", "a", 3, 1),
        gang("b", "a", 1, 2),
        gang_with_terms("c", "b", 0, 4, true),
    );
    // c starts to run (a new job, its pods no longer with terms), a and b stay
    // the same jobs; b is noted now.
    let c_running = gang("c", "b", 2, 2);
    let d = gang_with_terms("d", "b", 1, 0, true);
    // d's pod is made again without its terms.
    let d_plain = gang("d", "b", 1, 0);
    let steps: Vec<Step<'_>> = vec![
        (16, vec![&a, &b, &c], vec![(&c, "Unschedulable")]),
        (
            16,
            vec![&a, &b, &c_running],
            vec![(&b, "NotEnoughResources"), (&c_running, "Unschedulable")],
        ),
        // b leaves, d arrives, the cluster grows; b's note goes with it.
        (
            32,
            vec![&a, &c_running, &d],
            vec![(&a, "NotEnoughResources")],
        ),
        (32, vec![&a, &c_running, &d], Vec::new()),
        (32, vec![&a, &c_running, &d_plain], Vec::new()),
    ];
    let mut memory = SessionMemory::default();
    for (step, (total, jobs, notes)) in steps.into_iter().enumerate() {
        let (kept, left) = tell(total, &jobs, &notes, memory);
        let (afresh, _) = tell(total, &jobs, &notes, SessionMemory::default());
        assert_eq!(kept.0, afresh.0, "job order at step {step}");
        assert_eq!(kept.1, afresh.1, "queue reports at step {step}");
        assert_eq!(kept.2, afresh.2, "verdicts at step {step}");
        assert_eq!(kept.3, afresh.3, "tasks with terms at step {step}");
        memory = left;
    }
}
