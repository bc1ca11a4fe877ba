//! The generated cluster: H100 nodes registered by HAMi's device plugin, each with
//! running vGPU pods, written as a multi-document cluster file; plus the request
//! templates of the load (a kube-scheduler-shaped pod, an AdmissionReview).

use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// GPUs per node.
pub const GPUS_PER_NODE: usize = 8;
/// Registered memory of one H100 80GB HBM3, MiB.
pub const GPU_MEM: u64 = 81559;
/// vGPU slots per GPU (HAMi's `deviceSplitCount`).
pub const GPU_SLOTS: u64 = 10;
/// Compute per GPU, percent.
pub const GPU_CORES: u64 = 100;
/// What one load pod asks for: 1 GPU with this much memory (MiB) …
pub const POD_MEM: u64 = 2000;
/// … and this share of compute (percent).
pub const POD_CORES: u64 = 10;
/// Namespace of the load pods.
pub const LOAD_NAMESPACE: &str = "loadgen";
/// Placeholder replaced by each pod's name in the templates.
pub const NAME_MARK: &str = "@@NAME@@";
/// Placeholder replaced by each pod's (or review's) UID in the templates.
pub const UID_MARK: &str = "@@UID@@";

/// What was generated.
pub struct Cluster {
    /// Node names, in order.
    pub node_names: Vec<String>,
    /// The full Node objects as one JSON array (only for `--mode nodes`).
    pub nodes_json: Option<String>,
    /// How many load pods (1 GPU, [`POD_MEM`], [`POD_CORES`]) fit in total.
    pub capacity: u64,
    /// Running pods written into the file.
    pub pods: u64,
}

/// The name of node `n`.
pub fn node_name(n: usize) -> String {
    format!("gpu-node-{n:05}")
}

fn gpu_uuid(n: usize, g: usize) -> String {
    format!("GPU-{n:08x}-{g:04x}-4b7f-8a61-2c5e9b1d7f03")
}

fn register_annotation(n: usize) -> String {
    let gpus: Vec<Value> = (0..GPUS_PER_NODE)
        .map(|g| {
            json!({
                "id": gpu_uuid(n, g), "count": GPU_SLOTS, "devmem": GPU_MEM,
                "devcore": GPU_CORES, "type": "NVIDIA H100 80GB HBM3",
                "numa": g / (GPUS_PER_NODE / 2), "health": true, "index": g,
                "mode": "hami-core",
            })
        })
        .collect();
    Value::Array(gpus).to_string()
}

/// Node `n` as its kubelet and HAMi's device plugin registered it.
pub fn node(n: usize) -> Value {
    let name = node_name(n);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": format!("0000{n:04x}-6e6f-4465-8000-{n:012x}"),
            "resourceVersion": "1000",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
                "topology.kubernetes.io/zone": format!("zone-{}", n % 3),
                "nvidia.com/gpu.present": "true",
                "gpu": "on",
            },
            "annotations": {
                "hami.io/node-handshake": "Requesting_2026-01-01 00:00:00",
                "hami.io/node-nvidia-register": register_annotation(n),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + n / 256, n % 256)},
        "status": {
            "capacity": {"cpu": "192", "memory": "2097152Mi", "pods": "110",
                         "ephemeral-storage": "7500Gi",
                         "nvidia.com/gpu": (GPUS_PER_NODE as u64 * GPU_SLOTS).to_string()},
            "allocatable": {"cpu": "191", "memory": "2090000Mi", "pods": "110",
                            "ephemeral-storage": "7000Gi",
                            "nvidia.com/gpu": (GPUS_PER_NODE as u64 * GPU_SLOTS).to_string()},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
            "addresses": [
                {"type": "InternalIP", "address": format!("10.0.{}.{}", n / 256, n % 256)},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "architecture": "amd64",
                         "operatingSystem": "linux", "containerRuntimeVersion": "containerd://2.0.5",
                         "kernelVersion": "6.8.0-1021-aws", "osImage": "Ubuntu 24.04.2 LTS"},
        },
    })
}

/// Memory (MiB) and cores of the `p`-th running pod of a node.
fn running_pod_share(p: usize) -> (u64, u64) {
    (4000 + 1000 * (p as u64 % 5), 5 * (p as u64 % 4))
}

fn running_pod(n: usize, p: usize, g: usize) -> Value {
    let node = node_name(n);
    let (mem, cores) = running_pod_share(p);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("run-{n:05}-{p:03}"),
            "namespace": format!("team-{}", n % 16),
            "uid": format!("{n:08x}-{p:04x}-4000-8000-72756e6e696e"),
            "labels": {"app": "inference", "hami.io/vgpu-node": node},
            "annotations": {
                "hami.io/vgpu-node": node,
                "hami.io/vgpu-time": "1767225600",
                "hami.io/vgpu-devices-allocated": format!("{},NVIDIA,{mem},{cores}:;", gpu_uuid(n, g)),
                "hami.io/vgpu-devices-to-allocate": ";",
                "hami.io/bind-phase": "success",
            },
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "vgpu-scheduler",
            "containers": [{
                "name": "server",
                "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
                "resources": {"limits": {"nvidia.com/gpu": "1",
                                         "nvidia.com/gpumem": mem.to_string(),
                                         "nvidia.com/gpucores": cores.to_string()}},
            }],
        },
        "status": {"phase": "Running"},
    })
}

/// Writes the cluster file (one compact JSON document per line, `---` between them)
/// and computes how many load pods fit.
pub fn generate(
    path: &Path,
    nodes: usize,
    pods_per_node: usize,
    with_node_objects: bool,
) -> std::io::Result<Cluster> {
    let mut out = BufWriter::new(File::create(path)?);
    let mut node_names = Vec::with_capacity(nodes);
    let mut node_objects = Vec::new();
    let mut capacity = 0u64;
    let mut pods = 0u64;
    let mut first = true;
    let mut separator = |out: &mut BufWriter<File>| -> std::io::Result<()> {
        if !std::mem::take(&mut first) {
            out.write_all(b"\n---\n")?;
        }
        Ok(())
    };
    for n in 0..nodes {
        let object = node(n);
        separator(&mut out)?;
        serde_json::to_writer(&mut out, &object)?;
        if with_node_objects {
            node_objects.push(object);
        }
        node_names.push(node_name(n));
        // (slots, MiB, cores) in use per GPU.
        let mut used = [(0u64, 0u64, 0u64); GPUS_PER_NODE];
        for p in 0..pods_per_node {
            let g = (n + p) % GPUS_PER_NODE;
            let (mem, cores) = running_pod_share(p);
            // Never write an overbooked GPU: skip pods that would not fit.
            let u = &mut used[g];
            if u.0 + 1 > GPU_SLOTS || u.1 + mem > GPU_MEM || u.2 + cores > GPU_CORES {
                continue;
            }
            *u = (u.0 + 1, u.1 + mem, u.2 + cores);
            separator(&mut out)?;
            serde_json::to_writer(&mut out, &running_pod(n, p, g))?;
            pods += 1;
        }
        capacity += used
            .iter()
            .map(|&(slots, mem, cores)| {
                (GPU_SLOTS - slots)
                    .min((GPU_MEM - mem) / POD_MEM)
                    .min((GPU_CORES - cores) / POD_CORES)
            })
            .sum::<u64>();
    }
    out.write_all(b"\n")?;
    out.flush()?;
    let nodes_json = with_node_objects.then(|| Value::Array(node_objects).to_string());
    Ok(Cluster {
        node_names,
        nodes_json,
        capacity,
        pods,
    })
}

fn load_container() -> Value {
    json!({
        "name": "worker",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "resources": {
            "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": POD_MEM.to_string(),
                       "nvidia.com/gpucores": POD_CORES.to_string()},
            "requests": {"cpu": "1", "memory": "2Gi"},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    })
}

/// The spec of a load pod.
pub fn pod_spec(scheduler_name: &str) -> Value {
    json!({
        "containers": [load_container()],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": scheduler_name,
        "securityContext": {},
        "priority": 0,
        "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ],
    })
}

/// A pending pod as kube-scheduler sends it to `/filter` (after the webhook set
/// `schedulerName`), with [`NAME_MARK`] and [`UID_MARK`] to fill in.
pub fn filter_pod_template() -> String {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": NAME_MARK,
            "namespace": LOAD_NAMESPACE,
            "uid": UID_MARK,
            "resourceVersion": "2042",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "loadgen", "batch.kubernetes.io/job-name": "loadgen"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "loadgen",
                                 "uid": "6a6f6221-0000-4000-8000-6c6f61646765",
                                 "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": pod_spec("vgpu-scheduler"),
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    })
    .to_string()
}

/// An AdmissionReview v1 CREATE of a vGPU pod (defaulted by the API server, no UID
/// yet), with [`NAME_MARK`] and [`UID_MARK`] (the review's UID) to fill in.
pub fn admission_review_template() -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID_MARK,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": NAME_MARK,
            "namespace": LOAD_NAMESPACE,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:job-controller",
                "uid": "4b1e1c7e-8a2d-4f43-9d1c-6f0b2a3c4d5e",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                           "system:authenticated"],
            },
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": NAME_MARK, "namespace": LOAD_NAMESPACE,
                             "labels": {"app": "loadgen"}},
                "spec": pod_spec("default-scheduler"),
                "status": {},
            },
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    })
    .to_string()
}
