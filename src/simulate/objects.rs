//! The Kubernetes objects a replayed job is made of, as a controller would create
//! them: its pods (before the webhook) and, for a gang, its PodGroup.

use super::workload::{ArrivalLine, Job};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// `volcano.sh/service.type`.
const SERVICE_TYPE: &str = "volcano.sh/service.type";

/// Number of pods of a job.
pub fn pod_count(line: &ArrivalLine) -> u32 {
    if let Some(recorded) = &line.recorded {
        return u32::try_from(recorded.pods.len()).unwrap_or(u32::MAX);
    }
    line.gang.as_ref().map_or(1, |g| g.members)
}

/// Whole cards each pod asks for, when it asks for whole cards (no memory or
/// compute share given, not a recorded pod): what a free block must hold.
pub fn whole_cards_per_pod(line: &ArrivalLine) -> Option<u32> {
    let shape = &line.pod;
    (line.recorded.is_none() && shape.gpumem.is_none() && shape.gpucores.is_none())
        .then_some(shape.gpus)
}

/// The card types the pods are limited to (`nvidia.com/use-gputype`), if any.
pub fn gpu_types(line: &ArrivalLine) -> Vec<String> {
    line.pod
        .annotations
        .get(crate::device::selectors::USE_GPU_TYPE)
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// vGPUs the job asks for, all its pods together.
pub fn job_gpus(line: &ArrivalLine) -> u64 {
    match &line.recorded {
        Some(recorded) => recorded.pods.iter().map(vgpus_of).sum(),
        None => u64::from(line.pod.gpus) * u64::from(pod_count(line)),
    }
}

/// `nvidia.com/gpu` of a pod's containers (limits, else requests), as its
/// vGPU count; unreadable values count nothing (the report's job sizes are all
/// they feed).
fn vgpus_of(pod: &Pod) -> u64 {
    let resource = crate::device::device_config::NvidiaConfig::default().resource_count_name;
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| c.resources.as_ref())
        .filter_map(|r| {
            r.limits
                .as_ref()
                .and_then(|l| l.get(&resource))
                .or_else(|| r.requests.as_ref().and_then(|l| l.get(&resource)))
        })
        .filter_map(|q| crate::quantity::quantity_to_count(&q.0).ok())
        .sum()
}

/// The PodGroup of a gang job: recorded, or named like the job.
pub fn group_name<'a>(job: &'a Job, line: &'a ArrivalLine) -> &'a str {
    line.recorded
        .as_ref()
        .and_then(|r| r.pod_group.as_ref())
        .and_then(|g| g.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .unwrap_or(&job.name)
}

/// The name of pod `i` of the job (a job of one pod is named like the job).
pub fn pod_name(job: &Job, line: &ArrivalLine, i: u32) -> String {
    if let Some(recorded) = &line.recorded {
        return recorded
            .pods
            .get(i as usize)
            .and_then(|p| p.metadata.name.clone())
            .unwrap_or_default();
    }
    if line.gang.is_some() {
        format!("{}-{i}", job.name)
    } else {
        job.name.clone()
    }
}

/// The UID of replayed pod `i` of the job: the recorded pod's UID (pods of a
/// trace may share a name) or else its name, and how often it was created
/// again.
pub fn pod_uid(line: &ArrivalLine, i: u32, name: &str, attempt: u32) -> String {
    let recorded = line
        .recorded
        .as_ref()
        .and_then(|r| r.pods.get(i as usize))
        .and_then(|p| p.metadata.uid.as_deref())
        .filter(|u| !u.is_empty());
    match recorded {
        Some(uid) => format!("sim-{uid}-{attempt}"),
        None => format!("sim-{}-{name}-{attempt}", line.namespace),
    }
}

/// Pod `i` of the job as its controller creates it; `attempt` counts re-creations
/// after an eviction (the UID changes, as a new pod's would).
pub fn pod(
    job: &Job,
    line: &ArrivalLine,
    i: u32,
    attempt: u32,
    now: DateTime<Utc>,
) -> Result<Pod, String> {
    let name = pod_name(job, line, i);
    if let Some(recorded) = &line.recorded {
        let template = recorded
            .pods
            .get(i as usize)
            .ok_or_else(|| format!("job {}: no recorded pod {i}", job.name))?;
        let uid = pod_uid(line, i, &name, attempt);
        return Ok(recorded_pod(template, line, uid, now));
    }
    let mut annotations = serde_json::Map::new();
    for (k, v) in &line.pod.annotations {
        annotations.insert(k.clone(), json!(v));
    }
    if line.gang.is_some() {
        annotations.insert("scheduling.k8s.io/group-name".into(), json!(job.name));
    } else if let Some(queue) = &line.queue {
        annotations.insert("scheduling.volcano.sh/queue-name".into(), json!(queue));
    }
    if let Some(service) = &line.service_type {
        annotations.insert(SERVICE_TYPE.into(), json!(service));
    }
    let mut limits = serde_json::Map::new();
    limits.insert("nvidia.com/gpu".into(), json!(line.pod.gpus.to_string()));
    if let Some(mem) = line.pod.gpumem {
        limits.insert("nvidia.com/gpumem".into(), json!(mem.to_string()));
    }
    if let Some(cores) = line.pod.gpucores {
        limits.insert("nvidia.com/gpucores".into(), json!(cores.to_string()));
    }
    let mut requests = serde_json::Map::new();
    if let Some(cpu) = &line.pod.cpu {
        requests.insert("cpu".into(), json!(cpu));
    }
    if let Some(memory) = &line.pod.memory {
        requests.insert("memory".into(), json!(memory));
    }
    let mut spec = json!({
        "containers": [{"name": "main", "resources": {"limits": limits, "requests": requests}}]
    });
    if let Some(class) = &line.priority_class_name {
        spec["priorityClassName"] = json!(class);
    }
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": line.namespace,
            "uid": pod_uid(line, i, &name, attempt),
            "creationTimestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    });
    serde_json::from_value(pod).map_err(|e| format!("job {}: pod {name}: {e}", job.name))
}

/// A recorded pod created again: as recorded (without anything placement
/// wrote, should the trace hold it), with a UID of the replay's and created now.
fn recorded_pod(template: &Pod, line: &ArrivalLine, uid: String, now: DateTime<Utc>) -> Pod {
    let mut pod = crate::trace::scrub::as_created(template);
    pod.metadata.namespace = Some(line.namespace.clone());
    pod.metadata.uid = Some(uid);
    pod.metadata.creation_timestamp = Some(Time(crate::clock::timestamp(now)));
    pod.status = Some(PodStatus {
        phase: Some("Pending".into()),
        ..PodStatus::default()
    });
    pod
}

/// The PodGroup of a gang job; `None` for a job of one pod.
pub fn pod_group(job: &Job, line: &ArrivalLine, now: DateTime<Utc>) -> Option<Value> {
    if let Some(recorded) = &line.recorded {
        let mut group = crate::trace::scrub::podgroup_as_created(recorded.pod_group.as_ref()?);
        let name = group_name(job, line).to_string();
        if let Some(meta) = group.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("namespace".into(), json!(line.namespace));
            meta.insert(
                "uid".into(),
                json!(format!("sim-pg-{}-{name}", line.namespace)),
            );
            meta.insert(
                "creationTimestamp".into(),
                json!(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
        }
        return Some(group);
    }
    let gang = line.gang.as_ref()?;
    let mut annotations = serde_json::Map::new();
    if let Some(service) = &line.service_type {
        annotations.insert(SERVICE_TYPE.into(), json!(service));
    }
    let mut spec = json!({"minMember": gang.min_member.unwrap_or(gang.members)});
    if let Some(queue) = &line.queue {
        spec["queue"] = json!(queue);
    }
    if let Some(class) = &line.priority_class_name {
        spec["priorityClassName"] = json!(class);
    }
    Some(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {
            "name": job.name, "namespace": line.namespace,
            "uid": format!("sim-pg-{}-{}", line.namespace, job.name),
            "creationTimestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "annotations": annotations,
        },
        "spec": spec,
    }))
}
