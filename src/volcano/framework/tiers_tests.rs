//! Every extension point asked through a session with two tiers of scripted
//! plugins: which answer wins, and what `enableXxx: false` takes out.

use super::job::{JobInfo, TaskInfo};
use super::plugin::{JobInvalid, Plugin, TaskEvent, Vote};
use super::queue::QueueInfo;
use super::rejection::Rejection;
use super::session::Session;
use super::state::SessionState;
use super::statement::Statement;
use super::testing::{job, state, task};
use super::tiers::{Slot, Tiers};
use crate::placement::{NodeFacts, NodeJudge, TaskFacts};
use crate::resources::{Resources, VgpuDims};
use crate::volcano::conf::PluginOption;
use crate::volcano::objects::QueueSpec;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A plugin whose every answer is set by the test.
#[derive(Debug, Clone)]
struct Scripted {
    name: &'static str,
    order: Ordering,
    valid: Option<&'static str>,
    ready: Option<bool>,
    pipelined: Option<bool>,
    starving: Option<bool>,
    enqueueable: Option<bool>,
    allocatable: bool,
    overused: bool,
    preemptive: bool,
    predicate: bool,
    score: f64,
    victims: Option<Vec<&'static str>>,
    events: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            order: Ordering::Equal,
            valid: None,
            ready: None,
            pipelined: None,
            starving: None,
            enqueueable: None,
            allocatable: true,
            overused: false,
            preemptive: true,
            predicate: true,
            score: 0.0,
            victims: None,
            events: Arc::default(),
        }
    }

    fn refusal(&self) -> Rejection {
        Rejection {
            plugin: self.name,
            queue: "q".into(),
            dimension: "test".into(),
            message: format!("{} says no", self.name),
        }
    }

    fn vote(&self, v: Option<bool>) -> Vote {
        match v {
            None => Vote::Abstain,
            Some(true) => Vote::Permit,
            Some(false) => Vote::Reject(self.refusal()),
        }
    }

    fn victims(&self, candidates: &[&TaskInfo]) -> Option<Vec<String>> {
        self.victims.as_ref().map(|names| {
            candidates
                .iter()
                .filter(|t| names.contains(&t.name.as_str()))
                .map(|t| t.uid.clone())
                .collect()
        })
    }
}

impl Plugin for Scripted {
    fn name(&self) -> &'static str {
        self.name
    }
    fn job_order(&self, _: &SessionState, _: &JobInfo, _: &JobInfo) -> Ordering {
        self.order
    }
    /// Reverses the name order when this plugin's order is "greater".
    fn task_order(&self, a: &TaskInfo, b: &TaskInfo) -> Ordering {
        match self.order {
            Ordering::Greater => b.name.cmp(&a.name),
            _ => Ordering::Equal,
        }
    }
    fn queue_order(&self, _: &SessionState, _: &QueueInfo, _: &QueueInfo) -> Ordering {
        self.order
    }
    fn job_valid(&self, _: &SessionState, _: &JobInfo) -> Result<(), JobInvalid> {
        match self.valid {
            None => Ok(()),
            Some(reason) => Err(JobInvalid {
                reason,
                message: self.name.into(),
            }),
        }
    }
    fn job_ready(&self, _: &JobInfo) -> Option<bool> {
        self.ready
    }
    fn job_pipelined(&self, _: &JobInfo) -> Vote {
        self.vote(self.pipelined)
    }
    fn job_starving(&self, _: &JobInfo) -> Option<bool> {
        self.starving
    }
    fn job_enqueueable(&self, _: &SessionState, _: &JobInfo) -> Vote {
        self.vote(self.enqueueable)
    }
    fn allocatable(&self, _: &SessionState, _: &QueueInfo, _: &TaskInfo) -> Result<(), Rejection> {
        if self.allocatable {
            Ok(())
        } else {
            Err(self.refusal())
        }
    }
    fn overused(&self, _: &SessionState, _: &QueueInfo) -> bool {
        self.overused
    }
    fn preemptive(&self, _: &SessionState, _: &QueueInfo, _: &TaskInfo) -> Result<(), Rejection> {
        if self.preemptive {
            Ok(())
        } else {
            Err(self.refusal())
        }
    }
    fn filters_nodes(&self) -> bool {
        true
    }
    fn predicate(&self, _: &TaskFacts<'_>, _: &NodeFacts<'_>) -> Result<(), String> {
        if self.predicate {
            Ok(())
        } else {
            Err(format!("{} rules it out", self.name))
        }
    }
    fn scores_nodes(&self) -> bool {
        true
    }
    fn node_order(&self, _: &TaskFacts<'_>, _: &NodeFacts<'_>) -> f64 {
        self.score
    }
    fn preemptable(&self, _: &SessionState, _: &TaskInfo, c: &[&TaskInfo]) -> Option<Vec<String>> {
        self.victims(c)
    }
    fn reclaimable(&self, _: &SessionState, _: &TaskInfo, c: &[&TaskInfo]) -> Option<Vec<String>> {
        self.victims(c)
    }
    fn victim_tasks(&self, s: &SessionState) -> Option<Vec<String>> {
        let all: Vec<&TaskInfo> = s.jobs.values().flat_map(|j| &j.tasks).collect();
        self.victims(&all)
    }
    fn on_allocate(&mut self, _: &SessionState, e: &TaskEvent<'_>) {
        self.events
            .lock()
            .unwrap()
            .push(format!("{} +{}", self.name, e.task.name));
    }
    fn on_deallocate(&mut self, _: &SessionState, e: &TaskEvent<'_>) {
        self.events
            .lock()
            .unwrap()
            .push(format!("{} -{}", self.name, e.task.name));
    }
}

fn slot(p: &Scripted, switches: &[(&str, bool)]) -> Slot {
    let mut option = PluginOption::named(p.name);
    for (k, v) in switches {
        option.flags.insert((*k).to_string(), *v);
    }
    Slot::new(Box::new(p.clone()), option)
}

/// Two tiers: `[a, b]` then `[c]`, with switches per plugin.
fn session(a: &Scripted, b: &Scripted, c: &Scripted, off: &[(&str, &str)]) -> Session {
    let switches = |name: &str| -> Vec<(&str, bool)> {
        off.iter()
            .filter(|(p, _)| *p == name)
            .map(|(_, k)| (*k, false))
            .collect()
    };
    let tiers = Tiers::new(vec![
        vec![slot(a, &switches(a.name)), slot(b, &switches(b.name))],
        vec![slot(c, &switches(c.name))],
    ]);
    let key = super::job::GangKey {
        namespace: "ns".into(),
        name: "j".into(),
        single: false,
    };
    let tasks = ["t1", "t2", "t3"]
        .iter()
        .map(|n| task(&key, n, Resources::from_units([("cpu", 1)])))
        .collect();
    let queues = vec![
        QueueInfo::idle(QueueSpec::new("q")),
        QueueInfo::idle(QueueSpec::new("r")),
    ];
    let other = job("k", "q", 1, Vec::new());
    Session::open(
        state(
            Resources::from_units([("cpu", 8)]),
            queues,
            vec![job("j", "q", 1, tasks), other],
        ),
        tiers,
    )
}

fn j() -> super::job::GangKey {
    super::job::GangKey {
        namespace: "ns".into(),
        name: "j".into(),
        single: false,
    }
}

fn k() -> super::job::GangKey {
    super::job::GangKey {
        namespace: "ns".into(),
        name: "k".into(),
        single: false,
    }
}

fn named(n: &'static str) -> Scripted {
    Scripted::new(n)
}

#[test]
fn orders_take_the_first_unequal_answer_in_tier_order() {
    let (a, mut b, mut c) = (named("a"), named("b"), named("c"));
    b.order = Ordering::Greater;
    c.order = Ordering::Less;
    // a is equal, b (tier 1) decides before c (tier 2): k before j.
    let s = session(&a, &b, &c, &[]);
    assert_eq!(s.job_order(&j(), &k()), Ordering::Greater);
    assert_eq!(s.queue_order("q", "r"), Ordering::Greater);
    // b's job order switched off: c decides; the queue order is b's still.
    let s = session(&a, &b, &c, &[("b", "enableJobOrder")]);
    assert_eq!(s.job_order(&j(), &k()), Ordering::Less);
    assert_eq!(s.queue_order("q", "r"), Ordering::Greater);
    // Task order, through the session's ordering of a job's tasks.
    b.order = Ordering::Equal;
    c.order = Ordering::Equal;
    let s = session(&a, &b, &c, &[]);
    assert_eq!(s.ordered_tasks(&j()), ["uid-t1", "uid-t2", "uid-t3"]);
    let mut c = named("c");
    c.order = Ordering::Greater;
    let s = session(&a, &b, &c, &[]);
    assert_eq!(s.ordered_tasks(&j()), ["uid-t3", "uid-t2", "uid-t1"]);
    let s = session(&a, &b, &c, &[("c", "enableTaskOrder")]);
    assert_eq!(s.ordered_tasks(&j()), ["uid-t1", "uid-t2", "uid-t3"]);
}

#[test]
fn checks_need_every_plugin() {
    let (a, mut b, mut c) = (named("a"), named("b"), named("c"));
    c.valid = Some("NotEnoughTasks");
    c.allocatable = false;
    c.preemptive = false;
    c.ready = Some(false);
    let s = session(&a, &b, &c, &[]);
    let job = s.state.job(&j()).unwrap();
    assert_eq!(s.job_valid(job).unwrap_err().message, "c");
    let charge = (Resources::new(), BTreeMap::new());
    assert_eq!(
        s.allocatable(&j(), "uid-t1", &charge).unwrap_err().plugin,
        "c"
    );
    let q = s.state.queue("q").unwrap();
    let t = &job.tasks[0];
    assert_eq!(
        s.tiers().preemptive(&s.state, q, t).unwrap_err().plugin,
        "c"
    );
    assert!(!s.job_ready(&j()));
    // A tier-1 refusal comes first.
    b.allocatable = false;
    let s = session(&a, &b, &c, &[]);
    assert_eq!(
        s.allocatable(&j(), "uid-t1", &charge).unwrap_err().plugin,
        "b"
    );
    // Job ready honours its switch; with no opinion left the job is ready.
    let s = session(&a, &b, &c, &[("c", "enableJobReady")]);
    assert!(s.job_ready(&j())); // Allocatable and preemptive honour Volcano's switches for them.
    let s = session(
        &a,
        &b,
        &c,
        &[("b", "enabledAllocatable"), ("c", "enabledAllocatable")],
    );
    assert!(s.allocatable(&j(), "uid-t1", &charge).is_ok());
    let s = session(&a, &b, &c, &[("c", "enablePreemptive")]);
    let q = s.state.queue("q").unwrap();
    let t = &s.state.job(&j()).unwrap().tasks[0];
    assert!(s.tiers().preemptive(&s.state, q, t).is_ok());
}

#[test]
fn votes_stop_at_the_first_tier_that_permits_and_any_rejection_refuses() {
    let (mut a, b, mut c) = (named("a"), named("b"), named("c"));
    // No opinion anywhere: yes.
    let s = session(&a, &b, &c, &[]);
    assert!(s.job_enqueueable(&j()).is_ok());
    assert!(s.job_pipelined(&j()));
    // Tier 2 refuses: no.
    c.enqueueable = Some(false);
    c.pipelined = Some(false);
    let s = session(&a, &b, &c, &[]);
    assert_eq!(s.job_enqueueable(&j()).unwrap_err().plugin, "c");
    assert!(!s.job_pipelined(&j()));
    // Tier 1 permits: tier 2 is not asked.
    a.enqueueable = Some(true);
    a.pipelined = Some(true);
    let s = session(&a, &b, &c, &[]);
    assert!(s.job_enqueueable(&j()).is_ok());
    assert!(s.job_pipelined(&j()));
    // ...unless a's switch takes it out.
    let s = session(
        &a,
        &b,
        &c,
        &[("a", "enableJobEnqueued"), ("a", "enableJobPipelined")],
    );
    assert!(s.job_enqueueable(&j()).is_err());
    assert!(!s.job_pipelined(&j()));
    // A refusal in the permitting tier still refuses.
    let mut b = named("b");
    b.enqueueable = Some(false);
    let s = session(&a, &b, &c, &[]);
    assert_eq!(s.job_enqueueable(&j()).unwrap_err().plugin, "b");
}

#[test]
fn starving_is_decided_by_the_first_tier_with_an_opinion() {
    let (a, mut b, mut c) = (named("a"), named("b"), named("c"));
    assert!(
        !session(&a, &b, &c, &[]).job_starving(&j()),
        "no opinion: not starving"
    );
    c.starving = Some(true);
    assert!(session(&a, &b, &c, &[]).job_starving(&j()));
    b.starving = Some(false);
    assert!(!session(&a, &b, &c, &[]).job_starving(&j()));
    assert!(session(&a, &b, &c, &[("b", "enableJobStarving")]).job_starving(&j()));
}

#[test]
fn overused_when_any_plugin_says_so() {
    let (a, b, mut c) = (named("a"), named("b"), named("c"));
    assert!(!session(&a, &b, &c, &[]).overused("q"));
    c.overused = true;
    assert!(session(&a, &b, &c, &[]).overused("q"));
    assert!(!session(&a, &b, &c, &[("c", "enabledOverused")]).overused("q"));
}

#[test]
fn victims_are_intersected_in_a_tier_and_the_first_deciding_tier_answers() {
    let (mut a, mut b, mut c) = (named("a"), named("b"), named("c"));
    let probe = |s: &Session| -> (Vec<String>, Vec<String>, Vec<String>) {
        let job = s.state.job(&j()).unwrap();
        let candidates: Vec<&TaskInfo> = job.tasks.iter().collect();
        let preemptor = &job.tasks[0];
        (
            s.tiers().preemptable(&s.state, preemptor, &candidates),
            s.tiers().reclaimable(&s.state, preemptor, &candidates),
            s.tiers().victim_tasks(&s.state),
        )
    };
    // Nobody decides: no victims.
    let (p, r, v) = probe(&session(&a, &b, &c, &[]));
    assert!(p.is_empty() && r.is_empty() && v.is_empty());
    // Tier 1 intersects a and b; tier 2 is not asked.
    a.victims = Some(vec!["t1", "t2"]);
    b.victims = Some(vec!["t2", "t3"]);
    c.victims = Some(vec!["t3"]);
    let (p, r, v) = probe(&session(&a, &b, &c, &[]));
    assert_eq!(p, ["uid-t2"]);
    assert_eq!(r, ["uid-t2"]);
    assert_eq!(v, ["uid-t2"]);
    // b switched off for preemption only: a alone decides tier 1.
    let (p, r, _) = probe(&session(&a, &b, &c, &[("b", "enablePreemptable")]));
    assert_eq!(p, ["uid-t1", "uid-t2"]);
    assert_eq!(r, ["uid-t2"]);
    // A tier that decided "none" stands: tier 2 cannot offer what tier 1 refused.
    b.victims = Some(vec![]);
    let (p, _, _) = probe(&session(&a, &b, &c, &[]));
    assert!(p.is_empty());
    // A tier without an opinion passes the question on.
    let (a, b) = (named("a"), named("b"));
    let (p, r, v) = probe(&session(&a, &b, &c, &[("c", "enabledVictim")]));
    assert_eq!(p, ["uid-t3"]);
    assert_eq!(r, ["uid-t3"]);
    assert!(v.is_empty());
}

#[test]
fn predicates_rule_out_and_node_scores_add_up() {
    let (a, mut b, mut c) = (named("a"), named("b"), named("c"));
    b.score = 30.0;
    c.score = 12.5;
    c.predicate = false;
    let s = session(&a, &b, &c, &[]);
    let dims = VgpuDims::default();
    let resreq = Resources::new();
    let facts = TaskFacts {
        namespace: "ns",
        name: "t",
        gpu: None,
        resreq: &resreq,
        pod: None,
        queue: None,
        dims: &dims,
        pod_affinity: None,
        preferred_pod_affinity: None,
    };
    let (devices, usage, cordoned) = (Vec::new(), Vec::new(), Default::default());
    let (vendor, models) = (Vec::new(), Vec::new());
    let none = Resources::new();
    let node = NodeFacts {
        name: "n",
        gpus: crate::fit::NodeView {
            devices: &devices,
            usage: &usage,
            cordoned: &cordoned,
            is_vendor: &vendor,
            model_lower: &models,
        },
        allocatable: &none,
        requested: &none,
        traits: None,
        measured: crate::node_metrics::MeasuredUsage::NOT_COLLECTED,
    };
    let judge = s.tiers();
    assert!(judge.filters() && judge.scores());
    assert_eq!(
        judge.predicate(&facts, &node).unwrap_err(),
        "c rules it out"
    );
    assert_eq!(judge.score(&facts, &node), 42.5);
    let s = session(
        &a,
        &b,
        &c,
        &[("c", "enablePredicate"), ("b", "enableNodeOrder")],
    );
    assert!(s.tiers().predicate(&facts, &node).is_ok());
    assert_eq!(s.tiers().score(&facts, &node), 12.5);
}

#[test]
fn events_follow_every_placement_and_its_undo() {
    let (a, b, c) = (named("a"), named("b"), named("c"));
    let log = a.events.clone();
    let mut s = session(&a, &b, &c, &[]);
    let mut st = Statement::new();
    let charge = (Resources::from_units([("cpu", 1)]), BTreeMap::new());
    st.allocate(&mut s, &j(), "uid-t1", None, charge.clone());
    st.pipeline(&mut s, &j(), "uid-t2", None, charge);
    st.discard(&mut s);
    assert_eq!(*log.lock().unwrap(), ["a +t1", "a +t2", "a -t2", "a -t1"]);
}
