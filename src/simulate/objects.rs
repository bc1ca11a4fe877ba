//! The Kubernetes objects a replayed job is made of, as a controller would create
//! them: its pods (before the webhook) and, for a gang, its PodGroup.

use super::workload::{ArrivalLine, Job};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// `volcano.sh/service.type`.
const SERVICE_TYPE: &str = "volcano.sh/service.type";

/// Number of pods of a job.
pub fn pod_count(line: &ArrivalLine) -> u32 {
    line.gang.as_ref().map_or(1, |g| g.members)
}

/// The name of pod `i` of the job (a job of one pod is named like the job).
pub fn pod_name(job: &Job, line: &ArrivalLine, i: u32) -> String {
    if line.gang.is_some() {
        format!("{}-{i}", job.name)
    } else {
        job.name.clone()
    }
}

/// The UID of a replayed pod: its name and how often it was created again.
pub fn pod_uid(line: &ArrivalLine, name: &str, attempt: u32) -> String {
    format!("sim-{}-{name}-{attempt}", line.namespace)
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
            "uid": pod_uid(line, &name, attempt),
            "creationTimestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    });
    serde_json::from_value(pod).map_err(|e| format!("job {}: pod {name}: {e}", job.name))
}

/// The PodGroup of a gang job; `None` for a job of one pod.
pub fn pod_group(job: &Job, line: &ArrivalLine, now: DateTime<Utc>) -> Option<Value> {
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
