//! A recorded trace (`serve --record-trace`) as a workload: every pod recorded
//! waiting becomes a job of its own, arriving when it was first seen, except
//! pods of a recorded PodGroup, which together become one gang job. The pods
//! are created as recorded (their own resources, annotations, selectors,
//! tolerations, priority class), not re-derived from a shape.
//!
//! How long a job runs once started:
//! - started and gone in the trace: as long as it did (from its minimum bound
//!   to its last pod gone);
//! - started and still there when the trace ends: until the end of the trace;
//! - never started (still waiting at the end, or deleted while waiting): the
//!   median of the jobs that started and went, or until the end of the trace
//!   when none did.
//!
//! The replay stops where the trace ends.

use super::workload::{ArrivalLine, GangShape, PodShape, RecordedJob, Workload};
use crate::gang::membership::{GROUP_NAME, Membership, VOLCANO_GROUP_NAME};
use crate::gang::native_group::any_podgroup_from_json;
use crate::gang::scheduling_group::SCHEDULING_GROUP;
use crate::gang::victim_facts::SERVICE_TYPE;
use crate::object_namespace::namespace_of;
use crate::trace::{Trace, TraceEvent};
use crate::volcano::objects::PodGroupSpec;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// A pod of the trace and what happened to it.
struct RecordedPod {
    pod: Pod,
    at: DateTime<Utc>,
    bound: Option<DateTime<Utc>>,
    gone: Option<DateTime<Utc>>,
}

/// A job being put together: its pods (indexes into the recorded pods) and,
/// for a gang, its PodGroup.
struct Draft {
    namespace: String,
    name: String,
    members: Vec<usize>,
    group: Option<(Value, PodGroupSpec)>,
}

/// A PodGroup as first recorded.
struct RecordedGroup {
    at: DateTime<Utc>,
    /// `metadata.uid`; `None` for one recorded without.
    uid: Option<String>,
    value: Value,
    spec: PodGroupSpec,
}

/// The PodGroups recorded under one name, in the order first recorded: each
/// UID once (a name may be used again by a later PodGroup).
type GroupVersions = Vec<RecordedGroup>;

/// What a trace holds, folded per pod and per PodGroup.
struct Recorded {
    /// Pods seen waiting, in the order first seen.
    pods: Vec<RecordedPod>,
    /// PodGroups by namespace and name.
    groups: BTreeMap<(String, String), GroupVersions>,
    /// Bind and end events of pods not seen waiting.
    strangers: usize,
}

/// Folds the trace's lines into pods (first sight, first bind, first end) and
/// PodGroups.
fn recorded(trace: &Trace) -> Result<Recorded, String> {
    let mut pods: Vec<RecordedPod> = Vec::new();
    let mut by_uid: HashMap<String, usize> = HashMap::new();
    let mut groups: BTreeMap<(String, String), GroupVersions> = BTreeMap::new();
    let mut strangers = 0usize;
    for line in &trace.lines {
        match &line.event {
            TraceEvent::Pod(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                // A server started again on the same file sees its waiting pods
                // anew: the first sight counts.
                if let Entry::Vacant(entry) = by_uid.entry(uid) {
                    entry.insert(pods.len());
                    pods.push(RecordedPod {
                        pod: (**pod).clone(),
                        at: line.at,
                        bound: None,
                        gone: None,
                    });
                }
            }
            TraceEvent::Bound { uid, .. } => match by_uid.get(uid) {
                Some(&i) => {
                    pods[i].bound.get_or_insert(line.at);
                }
                None => strangers += 1,
            },
            TraceEvent::Gone { uid, .. } => match by_uid.get(uid) {
                Some(&i) => {
                    pods[i].gone.get_or_insert(line.at);
                }
                None => strangers += 1,
            },
            TraceEvent::PodGroup(group) => {
                let spec = any_podgroup_from_json(group)
                    .map_err(|e| format!("trace: unreadable PodGroup: {e}"))?;
                // A server started again on the same file records its PodGroups
                // again: one UID is one PodGroup, and its members one gang. Without
                // a UID the name is all there is to go by.
                let uid = group
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .filter(|u| !u.is_empty())
                    .map(str::to_string);
                let versions = groups
                    .entry((spec.namespace.clone(), spec.name.clone()))
                    .or_default();
                if !versions.iter().any(|v| v.uid == uid) {
                    versions.push(RecordedGroup {
                        at: line.at,
                        uid,
                        value: (**group).clone(),
                        spec,
                    });
                }
            }
        }
    }
    Ok(Recorded {
        pods,
        groups,
        strangers,
    })
}

/// The workload a trace replays, and notes for the user about what was left
/// out or guessed.
pub fn workload_from_trace(trace: &Trace) -> Result<(Workload, Vec<String>), String> {
    let start = trace
        .lines
        .iter()
        .map(|l| l.at)
        .min()
        .ok_or("empty trace")?;
    let end = trace.lines.iter().map(|l| l.at).max().unwrap_or(start);
    let mut notes = Vec::new();
    let Recorded {
        mut pods,
        groups,
        strangers,
    } = recorded(trace)?;
    if pods.is_empty() {
        return Err("the trace records no pod waiting for a node: nothing to replay".into());
    }
    rename_reused_names(&mut pods, &mut notes);
    if strangers > 0 {
        notes.push(format!(
            "{strangers} bind or end events are of pods the trace did not see arrive (there before recording began); they are left out"
        ));
    }
    let drafts = drafts(&pods, &groups, &mut notes);
    let span = (end - start).to_std().unwrap_or_default();
    let mut lines = Vec::with_capacity(drafts.len());
    let mut finished = Vec::new();
    let mut unstarted = Vec::new();
    for draft in drafts {
        if let Some((_, spec)) = &draft.group
            && usize::try_from(spec.min_member).unwrap_or(0) > draft.members.len()
        {
            notes.push(format!(
                "gang {}/{}: minMember is {} but the trace holds {} of its pods; it cannot start in the replay",
                draft.namespace,
                draft.name,
                spec.min_member,
                draft.members.len()
            ));
        }
        let started = started_at(&draft, &pods);
        let ended = ended_at(&draft, &pods);
        let duration = match (started, ended) {
            (Some(s), Some(e)) => {
                let ran = (e - s).to_std().unwrap_or_default();
                finished.push(ran);
                Some(ran)
            }
            (Some(s), None) => Some((end - s).to_std().unwrap_or_default()),
            (None, _) => None,
        };
        if duration.is_none() {
            unstarted.push(lines.len());
        }
        lines.push(arrival_line(draft, &pods, start, duration.unwrap_or(span)));
    }
    if !unstarted.is_empty() {
        let guess = median(&mut finished).unwrap_or(span);
        for &i in &unstarted {
            lines[i].duration = guess;
        }
        notes.push(format!(
            "{} jobs never started in the trace; once started in the replay they run {} (the median of the jobs that ran and went, else until the end of the trace)",
            unstarted.len(),
            humantime::format_duration(guess)
        ));
    }
    Ok((
        Workload {
            horizon: Some(span),
            arrivals: lines,
        },
        notes,
    ))
}

/// The jobs, in the order their first pod arrived: gangs of pods naming a
/// recorded PodGroup, and single pods.
fn drafts(
    pods: &[RecordedPod],
    groups: &BTreeMap<(String, String), GroupVersions>,
    notes: &mut Vec<String>,
) -> Vec<Draft> {
    let mut drafts: Vec<Draft> = Vec::new();
    let mut gang_of: HashMap<(String, String, usize), usize> = HashMap::new();
    // PodGroups of one name with different UIDs (a name used again): each
    // later one is replayed under a name of its own, as its pods may overlap
    // with the earlier one's in the replay.
    let mut group_copies: HashMap<(String, String), u32> = HashMap::new();
    let mut renamed_groups = Vec::new();
    let mut without_group = 0usize;
    for (i, recorded) in pods.iter().enumerate() {
        let pod = &recorded.pod;
        let namespace = namespace_of(&pod.metadata).to_owned();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let group = Membership::of(pod).and_then(|m| m.group);
        let versions = group
            .as_ref()
            .and_then(|g| groups.get(&(namespace.clone(), g.clone())));
        let (Some(group), Some(versions)) = (group, versions) else {
            if Membership::of(pod).is_some_and(|m| m.group.is_some()) {
                without_group += 1;
            }
            drafts.push(Draft {
                namespace,
                name,
                members: vec![i],
                group: None,
            });
            continue;
        };
        // The PodGroup as it was when the pod arrived: the last one recorded by
        // then (the first, if the pod came before it).
        let version = versions
            .iter()
            .rposition(|v| v.at <= recorded.at)
            .unwrap_or(0);
        let key = (namespace.clone(), group.clone(), version);
        match gang_of.get(&key) {
            Some(&d) => drafts[d].members.push(i),
            None => {
                gang_of.insert(key, drafts.len());
                let recorded_group = &versions[version];
                let mut value = recorded_group.value.clone();
                let copies = group_copies
                    .entry((namespace.clone(), group.clone()))
                    .or_insert(0);
                *copies += 1;
                let name = if *copies > 1 {
                    let new_name = format!("{group}-r{copies}");
                    renamed_groups.push(format!("{namespace}/{group} -> {new_name}"));
                    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                        meta.insert("name".into(), Value::String(new_name.clone()));
                    }
                    new_name
                } else {
                    group
                };
                drafts.push(Draft {
                    namespace,
                    name,
                    members: vec![i],
                    group: Some((value, recorded_group.spec.clone())),
                });
            }
        }
    }
    if let Some(first) = renamed_groups.first() {
        notes.push(format!(
            "{} PodGroups reuse the name of an earlier recorded one; each is replayed with its pods under a name of its own ({first}{})",
            renamed_groups.len(),
            if renamed_groups.len() > 1 { ", …" } else { "" }
        ));
    }
    if without_group > 0 {
        notes.push(format!(
            "{without_group} pods name a PodGroup the trace does not hold; each is replayed as a job of its own (its PodGroup must then be in the cluster file)"
        ));
    }
    drafts
}

/// Gives each recorded pod that reuses the name of an earlier one (a
/// StatefulSet or Volcano job creating a pod again under its name, with a new
/// UID) a name of its own, `<name>-r2`, `-r3`, …: the replay keys pods by
/// name, and its waits differ from the recording's, so the earlier copy may
/// still be there when the later one arrives even if it was gone by then in
/// the trace.
/// A recorded pod as its job creates it: a gang member names its job's
/// PodGroup, which may have been renamed (see `drafts`).
fn member_of(pod: &Pod, group: Option<&str>) -> Pod {
    let mut pod = pod.clone();
    if let (Some(group), Some(annotations)) = (group, pod.metadata.annotations.as_mut()) {
        for key in [GROUP_NAME, VOLCANO_GROUP_NAME, SCHEDULING_GROUP] {
            if let Some(value) = annotations.get_mut(key) {
                *value = group.to_string();
            }
        }
    }
    pod
}

fn rename_reused_names(pods: &mut [RecordedPod], notes: &mut Vec<String>) {
    let mut taken: HashMap<(String, String), u32> = HashMap::new();
    let mut renamed = Vec::new();
    for recorded in pods.iter_mut() {
        let meta = &mut recorded.pod.metadata;
        let namespace = namespace_of(meta).to_owned();
        let name = meta.name.clone().unwrap_or_default();
        let copies = taken.entry((namespace.clone(), name.clone())).or_insert(0);
        *copies += 1;
        if *copies > 1 {
            let new_name = format!("{name}-r{copies}");
            renamed.push(format!("{namespace}/{name} -> {new_name}"));
            meta.name = Some(new_name);
        }
    }
    if let Some(first) = renamed.first() {
        notes.push(format!(
            "{} pods reuse the name of an earlier recorded pod; each is replayed under a name of its own ({first}{})",
            renamed.len(),
            if renamed.len() > 1 { ", …" } else { "" }
        ));
    }
}

/// Pods that must be bound before the job runs.
fn needed(draft: &Draft) -> usize {
    match &draft.group {
        Some((_, spec)) => needed_of(spec, draft.members.len()),
        None => 1,
    }
}

/// A gang's minimum, at most the pods the trace holds of it (a recording that
/// began after some had gone).
fn needed_of(spec: &PodGroupSpec, members: usize) -> usize {
    usize::try_from(spec.min_member)
        .unwrap_or(0)
        .clamp(1, members.max(1))
}

/// When the job's minimum was bound, if it was.
fn started_at(draft: &Draft, pods: &[RecordedPod]) -> Option<DateTime<Utc>> {
    let mut bound: Vec<DateTime<Utc>> = draft
        .members
        .iter()
        .filter_map(|&i| pods[i].bound)
        .collect();
    bound.sort();
    bound.get(needed(draft) - 1).copied()
}

/// When the last of the job's pods went, if all did.
fn ended_at(draft: &Draft, pods: &[RecordedPod]) -> Option<DateTime<Utc>> {
    draft
        .members
        .iter()
        .map(|&i| pods[i].gone)
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
}

fn arrival_line(
    draft: Draft,
    pods: &[RecordedPod],
    start: DateTime<Utc>,
    duration: Duration,
) -> ArrivalLine {
    let first = &pods[draft.members[0]];
    let at = (first.at - start).to_std().unwrap_or_default();
    let template = &first.pod;
    let pod_annotation = |key: &str| {
        template
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    let pod_class = template
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.clone());
    let (queue, priority_class_name, service_type, gang, pod_group) = match draft.group {
        Some((value, spec)) => {
            let members = u32::try_from(draft.members.len()).unwrap_or(u32::MAX);
            let min = u32::try_from(needed_of(&spec, draft.members.len())).unwrap_or(members);
            (
                Some(spec.queue.clone()),
                spec.priority_class_name.clone().or(pod_class),
                spec.annotations
                    .get(SERVICE_TYPE)
                    .cloned()
                    .or_else(|| pod_annotation(SERVICE_TYPE)),
                Some(GangShape {
                    members,
                    min_member: Some(min),
                }),
                Some(value),
            )
        }
        None => (
            Membership::of(template).and_then(|m| m.queue),
            pod_class,
            pod_annotation(SERVICE_TYPE),
            None,
            None,
        ),
    };
    ArrivalLine {
        name: format!("{}/{}", draft.namespace, draft.name),
        namespace: draft.namespace,
        at: Some(at),
        every: None,
        count: 1,
        jitter: None,
        duration,
        queue,
        priority_class_name,
        service_type,
        gang,
        // Unused: the recorded pods are created as they are.
        pod: PodShape::default(),
        recorded: Some(Arc::new(RecordedJob {
            pods: draft
                .members
                .iter()
                .map(|&i| {
                    member_of(
                        &pods[i].pod,
                        pod_group.as_ref().map(|_| draft.name.as_str()),
                    )
                })
                .collect(),
            pod_group,
        })),
    }
}

/// The median (the lower of the two middle values for an even count).
fn median(values: &mut [Duration]) -> Option<Duration> {
    values.sort();
    let n = values.len();
    (n > 0).then(|| values[(n - 1) / 2])
}
