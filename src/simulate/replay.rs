//! One replay: a workload through one variant of the scheduler, on a virtual
//! clock. The scheduler is the server's own (`Scheduler` over an in-memory
//! cluster, as `serve --cluster-file` runs it); pods are admitted by the webhook's
//! decision, placed by a kube-scheduler stand-in calling `/filter`,
//! `/prioritize` and `/bind`, and gang members are released by the planner's
//! cycles. Time moves from event to event (an arrival, a job finishing, a
//! sample), so a week of arrivals takes as long as its scheduling decisions.
//!
//! Differences from a live cluster, on purpose: a planning cycle runs after
//! something changed (a job arrived, finished or was evicted), at most once per
//! `--schedule-period`, and every [`RECHECK`] while gang members wait and nothing
//! changes, rather than every period regardless; waiting pods
//! are tried again when something changed, in arrival order, until
//! [`RETRIES_PER_PASS`] in a row do not fit (kube-scheduler's backoff does much
//! the same). Pods start the moment they are bound, and an evicted job's
//! controller creates its pods again at once.

use super::kube_scheduler::schedule_one;
use super::objects;
use super::observe::{ModelSample, QueueSample, Sample, measure, measure_models, measure_queues};
use super::work::{Work, WorkMeter};
use super::workload::{Job, Workload};
use crate::clock::ManualClock;
use crate::cluster::api::ClusterApi;
use crate::cluster::file::ClusterObject;
use crate::cluster::memory::MemoryCluster;
use crate::extender::node_names::NodeNames;
use crate::gang::book::GANG_GATE;
use crate::metrics::Metrics;
use crate::object_namespace::namespace_of;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::volcano::SchedulerConf;
use crate::volcano::framework::GangKey;
use crate::webhook::WebhookConfig;
use crate::webhook::{Admission, admit_pod};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How often planning runs again while gang members wait and nothing changes
/// (time-based decisions: waiting times, plan deadlines).
pub const RECHECK: Duration = Duration::from_secs(60);

/// Waiting pods tried in one pass after which the pass stops if none fit.
pub const RETRIES_PER_PASS: usize = 16;

/// Where replays start on the wall clock: a fixed moment, so that a replay gives
/// the same answers whenever it runs.
pub fn replay_epoch() -> DateTime<Utc> {
    DateTime::UNIX_EPOCH + chrono::Duration::days(20_454)
}

/// One variant: the flags it runs with, as the server would read them.
#[derive(Debug, Clone)]
pub struct VariantSetup {
    /// Its name in the report.
    pub name: String,
    /// Its flags, as given.
    pub flags: String,
    /// The scheduler's settings.
    pub config: SchedulerConfig,
    /// The webhook's settings.
    pub webhook: WebhookConfig,
    /// The Volcano configuration, when gang scheduling runs.
    pub gang_conf: Option<SchedulerConf>,
    /// How often the planner may run (`--schedule-period`).
    pub schedule_period: Duration,
}

/// What every variant replays.
pub struct ReplayInput<'a> {
    /// The cluster file's objects.
    pub cluster: &'a [ClusterObject],
    /// The workload.
    pub workload: &'a Workload,
    /// Its jobs, in arrival order.
    pub jobs: &'a [Job],
    /// Time between samples.
    pub sample_every: Duration,
    /// Told of every job that arrives.
    pub on_arrival: &'a (dyn Fn() + Sync),
}

/// How one job went.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    /// Its name.
    pub name: String,
    /// Its arrival line.
    pub line: usize,
    /// That line's name.
    pub line_name: String,
    /// Its queue (`default` when none).
    pub queue: String,
    /// vGPUs it asks for, all pods together.
    pub gpus: u64,
    /// Whole cards each pod asks for, when it asks for whole cards.
    pub whole_cards: Option<u32>,
    /// The card types its pods are limited to (none: any).
    pub gpu_types: Vec<String>,
    /// Whether it is a gang.
    pub gang: bool,
    /// Seconds from the replay's start to its arrival.
    pub arrived: f64,
    /// Seconds it runs once started.
    pub duration: f64,
    /// Seconds from the replay's start to when its minimum was bound.
    pub started: Option<f64>,
    /// Times it was evicted.
    pub evictions: u32,
    /// Why it waited, as last told (for jobs never placed).
    pub reason: Option<String>,
    /// Why it waited before it started, as last told (for jobs that waited).
    pub wait_reason: Option<String>,
    /// The GPUs its pods held over the replay.
    pub work: Work,
}

/// One pod bound, in decision order.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// Seconds from the replay's start.
    pub seconds: f64,
    /// `namespace/name`.
    pub pod: String,
    /// Its node.
    pub node: String,
    /// Its GPUs (`hami.io/vgpu-devices-allocated`, as written at `/filter`).
    pub devices: String,
}

/// What a replay produced.
#[derive(Debug, Clone)]
pub struct ReplayResult {
    /// The cluster over time.
    pub samples: Vec<Sample>,
    /// Every job.
    pub jobs: Vec<JobRecord>,
    /// Every bind, in order.
    pub bindings: Vec<Binding>,
    /// Pods evicted (preempt, reclaim).
    pub evicted_pods: u64,
    /// The queues over time (taken with the samples, from the last planning
    /// cycle).
    pub queue_samples: Vec<QueueSample>,
    /// Each GPU model over time.
    pub model_samples: Vec<ModelSample>,
    /// Work delivered on each GPU model.
    pub work_by_model: std::collections::BTreeMap<String, Work>,
    /// Seconds replayed.
    pub seconds: f64,
}

/// A job while it is in the cluster.
struct Live {
    /// Pods still waiting for kube-scheduler or the planner.
    waiting: u32,
    /// Pods bound.
    bound: u32,
    /// Pods its minimum needs.
    needed: u32,
    /// Counts re-creations after evictions.
    attempt: u32,
    /// Whether its minimum was bound (it runs).
    running: bool,
}

struct Engine<'a> {
    input: &'a ReplayInput<'a>,
    scheduler: Arc<Scheduler>,
    memory: Arc<MemoryCluster>,
    clock: Arc<ManualClock>,
    candidates: NodeNames,
    webhook: WebhookConfig,
    /// The planner's period (`--schedule-period`).
    period: Duration,
    now: Duration,
    records: Vec<JobRecord>,
    live: HashMap<usize, Live>,
    /// Pod key (`namespace/name`) to job.
    pods: HashMap<String, usize>,
    /// Ungated pods waiting for a node, in arrival order.
    pending: VecDeque<(usize, u32)>,
    /// Gang members waiting for the planner.
    gated: BTreeSet<(usize, u32)>,
    /// When each running job finishes: (time, job, attempt).
    finishing: BinaryHeap<Reverse<(Duration, usize, u32)>>,
    bindings: Vec<Binding>,
    evicted_pods: u64,
    queue_samples: Vec<QueueSample>,
    model_samples: Vec<ModelSample>,
    meter: WorkMeter,
}

/// Replays the workload through one variant.
pub async fn replay(setup: &VariantSetup, input: &ReplayInput<'_>) -> Result<ReplayResult, String> {
    let clock = ManualClock::starting_at(replay_epoch());
    let memory =
        Arc::new(MemoryCluster::new(Vec::new(), Vec::new(), true).recording_lifted_gates());
    let api: Arc<dyn ClusterApi> = memory.clone();
    let scheduler = Arc::new(Scheduler::with_clock(
        setup.config.clone(),
        api,
        Arc::new(Metrics::new()),
        clock.clone(),
    ));
    if let Some(conf) = &setup.gang_conf {
        scheduler.set_gang_conf(conf.clone());
    }
    for object in input.cluster {
        scheduler.apply_cluster_object(object);
        match object {
            ClusterObject::Node(node) => memory.insert_node((**node).clone()),
            ClusterObject::Pod(pod) => memory.insert_pod(pod),
            _ => {}
        }
    }
    let names = scheduler.with_ledger(|l| {
        l.nodes()
            .into_iter()
            .map(|(n, _)| n.clone())
            .collect::<Vec<_>>()
    });
    let mut candidates = NodeNames::with_capacity(names.len());
    for n in &names {
        candidates.push(n);
    }
    let records = input
        .jobs
        .iter()
        .map(|job| {
            let line = &input.workload.arrivals[job.line];
            JobRecord {
                name: job.name.clone(),
                line: job.line,
                line_name: line.name.clone(),
                queue: line.queue.clone().unwrap_or_else(|| "default".into()),
                gpus: objects::job_gpus(line),
                whole_cards: objects::whole_cards_per_pod(line),
                gpu_types: objects::gpu_types(line),
                gang: line.gang.is_some(),
                arrived: job.at.as_secs_f64(),
                duration: line.duration.as_secs_f64(),
                started: None,
                evictions: 0,
                reason: None,
                wait_reason: None,
                work: Work::default(),
            }
        })
        .collect();
    let meter = scheduler.with_ledger(WorkMeter::new);
    let mut engine = Engine {
        input,
        scheduler,
        memory,
        clock,
        candidates,
        webhook: setup.webhook.clone(),
        period: setup.schedule_period,
        now: Duration::ZERO,
        records,
        live: HashMap::new(),
        pods: HashMap::new(),
        pending: VecDeque::new(),
        gated: BTreeSet::new(),
        finishing: BinaryHeap::new(),
        bindings: Vec::new(),
        evicted_pods: 0,
        queue_samples: Vec::new(),
        model_samples: Vec::new(),
        meter,
    };
    let samples = engine.run().await?;
    let seconds = engine.now.as_secs_f64();
    engine.meter.end(seconds);
    for (job, work) in &engine.meter.by_job {
        if let Some(record) = engine.records.get_mut(*job) {
            record.work = *work;
        }
    }
    Ok(ReplayResult {
        samples,
        jobs: engine.records,
        bindings: engine.bindings,
        evicted_pods: engine.evicted_pods,
        queue_samples: engine.queue_samples,
        model_samples: engine.model_samples,
        work_by_model: std::mem::take(&mut engine.meter.by_model),
        seconds,
    })
}

impl Engine<'_> {
    async fn run(&mut self) -> Result<Vec<Sample>, String> {
        let horizon = self.input.workload.horizon;
        let every = self.input.sample_every.max(Duration::from_secs(1));
        let period = self.period.max(Duration::from_millis(1));
        let mut samples = Vec::new();
        let mut next_arrival = 0usize;
        let mut next_sample = Duration::ZERO;
        let mut last_plan: Option<Duration> = None;
        // Something changed since the last planning cycle / scheduling pass.
        let (mut replan, mut retry) = (false, false);
        loop {
            let arrival = self.input.jobs.get(next_arrival).map(|j| j.at);
            let finish = self.finishing.peek().map(|Reverse((t, _, _))| *t);
            // Nothing will arrive or finish: once planning has seen the last
            // change, nothing can move any more (a gang that cannot fit would
            // otherwise be re-planned forever).
            let settled = arrival.is_none() && finish.is_none() && !replan && last_plan.is_some();
            let plan_at = match (self.gated.is_empty() || settled, last_plan) {
                (true, _) => None,
                (false, None) => Some(self.now),
                (false, Some(last)) if replan => Some((last + period).max(self.now)),
                (false, Some(last)) => Some(last + RECHECK),
            };
            if arrival.is_none() && finish.is_none() && plan_at.is_none() {
                samples.push(self.sample());
                break;
            }
            let next = [arrival, finish, plan_at, Some(next_sample)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(next_sample);
            if let Some(h) = horizon.filter(|h| next > *h) {
                self.advance_to(h);
                samples.push(self.sample());
                break;
            }
            self.advance_to(next);
            while let Some(Reverse((t, job, attempt))) = self.finishing.peek().copied() {
                if t > self.now {
                    break;
                }
                self.finishing.pop();
                if self.live.get(&job).is_some_and(|l| l.attempt == attempt) {
                    self.remove_job(job, true).await;
                    (replan, retry) = (true, true);
                }
            }
            while self
                .input
                .jobs
                .get(next_arrival)
                .is_some_and(|j| j.at <= self.now)
            {
                (self.input.on_arrival)();
                self.arrive(next_arrival, 0).await?;
                next_arrival += 1;
                (replan, retry) = (true, true);
            }
            let plan_due = last_plan.is_none_or(|last| {
                let wait = if replan { period } else { RECHECK };
                self.now >= last + wait
            });
            if !self.gated.is_empty() && plan_due {
                self.plan().await?;
                self.scheduler.expire_reservations(true).await;
                last_plan = Some(self.now);
                (replan, retry) = (false, true);
            }
            if retry {
                self.schedule_waiting().await;
                retry = false;
            }
            if self.now >= next_sample {
                samples.push(self.sample());
                next_sample += every;
            }
        }
        Ok(samples)
    }

    fn advance_to(&mut self, t: Duration) {
        if t > self.now {
            self.clock.advance(t - self.now);
            self.now = t;
        }
    }

    fn sample(&mut self) -> Sample {
        let waiting = (self.pending.len() + self.gated.len()) as u64;
        let seconds = self.now.as_secs_f64();
        let view = self.scheduler.gang_view();
        self.queue_samples.extend(measure_queues(&view, seconds));
        let models = self.scheduler.with_ledger(|l| measure_models(l, seconds));
        self.model_samples.extend(models);
        self.scheduler.with_ledger(|l| measure(l, seconds, waiting))
    }

    /// Creates the job's pods (and PodGroup), as its controller would.
    async fn arrive(&mut self, index: usize, attempt: u32) -> Result<(), String> {
        let job = &self.input.jobs[index];
        let line = &self.input.workload.arrivals[job.line];
        let wall = self.clock_wall();
        if let Some(group) = objects::pod_group(job, line, wall) {
            self.scheduler.apply_any_podgroup(&group);
        }
        let count = objects::pod_count(line);
        let needed = line
            .gang
            .as_ref()
            .map_or(1, |g| g.min_member.unwrap_or(g.members));
        self.live.insert(
            index,
            Live {
                waiting: 0,
                bound: 0,
                needed,
                attempt,
                running: false,
            },
        );
        for i in 0..count {
            let pod = objects::pod(job, line, i, attempt, wall)?;
            let pod = match admit_pod(&pod, &self.webhook) {
                Admission::Allow { mutated, .. } => mutated.map_or(pod, |p| *p),
                Admission::Deny { message, .. } => {
                    self.records[index].reason = Some(format!("admission webhook: {message}"));
                    self.remove_job(index, false).await;
                    return Ok(());
                }
            };
            let key = pod_key(&pod);
            self.memory.insert_pod(&pod);
            self.scheduler.apply_pod(&pod);
            self.pods.insert(key, index);
            if let Some(live) = self.live.get_mut(&index) {
                live.waiting += 1;
            }
            if is_gated(&pod) {
                self.gated.insert((index, i));
            } else {
                self.pending.push_back((index, i));
            }
        }
        Ok(())
    }

    fn clock_wall(&self) -> DateTime<Utc> {
        use crate::clock::Clock;
        self.clock.wall()
    }

    /// One planning cycle; members it released join the waiting pods, jobs it
    /// evicted are created again.
    async fn plan(&mut self) -> Result<(), String> {
        self.scheduler.run_gang_cycle().await;
        let evicted = self.memory.take_evicted();
        let mut evicted_jobs = BTreeSet::new();
        for key in &evicted {
            self.evicted_pods += 1;
            if let Some(&job) = self.pods.get(&**key) {
                evicted_jobs.insert(job);
            }
        }
        for &job in &evicted_jobs {
            let attempt = self.live.get(&job).map_or(0, |l| l.attempt) + 1;
            self.records[job].evictions += 1;
            self.remove_job(job, false).await;
            self.arrive(job, attempt).await?;
        }
        // Why the gangs still waiting wait, as their PodGroups would say: each
        // looked up by its key (a PodGroup's before a plain pod's of the same
        // name), not every gang's verdict indexed each cycle.
        let view = self.scheduler.gang_view();
        let waiting: BTreeSet<usize> = self.gated.iter().map(|(job, _)| *job).collect();
        for job in waiting {
            let j = &self.input.jobs[job];
            let line = &self.input.workload.arrivals[j.line];
            let mut key = GangKey {
                namespace: line.namespace.as_str().into(),
                name: objects::group_name(j, line).into(),
                single: false,
            };
            let verdict = view.gangs.get(&key).or_else(|| {
                key.single = true;
                view.gangs.get(&key)
            });
            // Named as the planner's condition names it (`Unschedulable`,
            // `NotEnoughResources`, ...), as the PodGroup would show it.
            if let Some(g) = verdict
                && let Some(message) = &g.message
            {
                let step = g.reason.unwrap_or("waiting");
                self.records[job].reason = Some(format!("Volcano planner, {step}: {message}"));
            }
        }
        for (job, member) in self.released_members(&evicted_jobs) {
            self.gated.remove(&(job, member));
            self.pending.push_back((job, member));
        }
        Ok(())
    }

    /// Gated members whose gate the cycle just run lifted, in arrival order,
    /// as the store recorded the lifts: a pod is not read back to see its gate
    /// gone, which a kube-scheduler learns from its watch at no cost to the
    /// scheduler (and with thousands of members waiting, reading every one after
    /// every cycle was most of a replay). `recreated`: the jobs the cycle
    /// evicted and created again since, whose pods wait gated anew.
    fn released_members(&mut self, recreated: &BTreeSet<usize>) -> Vec<(usize, u32)> {
        let mut released = BTreeSet::new();
        for key in self.memory.take_lifted_gates() {
            let Some(&job) = self.pods.get(&*key) else {
                continue;
            };
            if recreated.contains(&job) {
                continue;
            }
            let j = &self.input.jobs[job];
            let line = &self.input.workload.arrivals[j.line];
            let name = key.split_once('/').map_or(&*key, |(_, name)| name);
            released.extend(
                self.gated
                    .range((job, 0)..=(job, u32::MAX))
                    .filter(|(_, member)| objects::pod_name(j, line, *member) == name)
                    .copied(),
            );
        }
        released.into_iter().collect()
    }

    /// Tries the waiting pods in order until too many in a row do not fit.
    async fn schedule_waiting(&mut self) {
        let mut misses = 0usize;
        let mut still = VecDeque::new();
        while let Some((job, member)) = self.pending.pop_front() {
            if misses >= RETRIES_PER_PASS {
                still.push_back((job, member));
                continue;
            }
            let Some(pod) = self.pod_of(job, member).await else {
                continue;
            };
            match schedule_one(&self.scheduler, &pod, &self.candidates).await {
                Ok(node) => {
                    misses = 0;
                    self.bound(job, &pod, node).await;
                }
                Err(why) => {
                    misses += 1;
                    self.records[job].reason = Some(why.0);
                    still.push_back((job, member));
                }
            }
        }
        self.pending = still;
    }

    /// A pod was bound: its kubelet starts it; a job whose minimum is bound runs.
    async fn bound(&mut self, job: usize, pod: &Pod, node: String) {
        let key = pod_key(pod);
        let (namespace, name) = key.split_once('/').unwrap_or(("default", &key));
        let mut devices = String::new();
        if let Ok(Some(mut started)) = self.memory.get_pod(namespace, name).await {
            devices = started
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::annotations::DEVICES_ALLOCATED))
                .cloned()
                .unwrap_or_default();
            started.status = Some(PodStatus {
                phase: Some("Running".into()),
                ..PodStatus::default()
            });
            self.memory.insert_pod(&started);
            self.scheduler.apply_pod(&started);
        }
        self.meter
            .bound(&key, job, self.now.as_secs_f64(), &devices);
        self.bindings.push(Binding {
            seconds: self.now.as_secs_f64(),
            pod: key.clone(),
            node,
            devices,
        });
        let now = self.now;
        let Some(live) = self.live.get_mut(&job) else {
            return;
        };
        live.waiting = live.waiting.saturating_sub(1);
        live.bound += 1;
        if !live.running && live.bound >= live.needed {
            live.running = true;
            let attempt = live.attempt;
            let record = &mut self.records[job];
            if record.started.is_none() {
                record.started = Some(now.as_secs_f64());
                record.wait_reason = record.reason.take();
            }
            record.reason = None;
            let line = &self.input.workload.arrivals[self.input.jobs[job].line];
            self.finishing
                .push(Reverse((now + line.duration, job, attempt)));
        }
    }

    /// Removes the job's pods (finished, evicted or refused) and its PodGroup.
    async fn remove_job(&mut self, index: usize, succeeded: bool) {
        let job = &self.input.jobs[index];
        let line = &self.input.workload.arrivals[job.line];
        let attempt = self.live.get(&index).map_or(0, |l| l.attempt);
        for i in 0..objects::pod_count(line) {
            let name = objects::pod_name(job, line, i);
            self.pending.retain(|p| *p != (index, i));
            self.gated.remove(&(index, i));
            let key = format!("{}/{name}", line.namespace);
            self.meter.released(&key, self.now.as_secs_f64());
            self.pods.remove(&key);
            if succeeded
                && let Ok(Some(mut pod)) = self.memory.get_pod(&line.namespace, &name).await
            {
                pod.status = Some(PodStatus {
                    phase: Some("Succeeded".into()),
                    ..PodStatus::default()
                });
                self.scheduler.apply_pod(&pod);
            }
            // An evicted pod is already gone from the store; the scheduler hears
            // of its deletion all the same, as a watch would tell it.
            self.memory.delete_pod(&line.namespace, &name);
            self.scheduler
                .forget_pod(&objects::pod_uid(line, i, &name, attempt));
        }
        if line.gang.is_some() {
            let group = objects::group_name(job, line);
            let native = line
                .recorded
                .as_ref()
                .and_then(|r| r.pod_group.as_ref())
                .is_some_and(crate::gang::native_group::is_native);
            if native {
                self.scheduler
                    .forget_native_podgroup(&line.namespace, group);
            } else {
                self.scheduler.forget_podgroup(&line.namespace, group);
            }
        }
        self.live.remove(&index);
    }

    async fn pod_of(&self, job: usize, member: u32) -> Option<Pod> {
        let j = &self.input.jobs[job];
        let line = &self.input.workload.arrivals[j.line];
        let name = objects::pod_name(j, line, member);
        self.memory
            .get_pod(&line.namespace, &name)
            .await
            .ok()
            .flatten()
    }
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        namespace_of(&pod.metadata),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_gated(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == GANG_GATE))
}
