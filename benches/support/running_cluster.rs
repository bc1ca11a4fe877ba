//! The cluster the criterion benches run against: nodes of 8 H100s (two NUMA
//! nodes, 96 CPUs, 1 TiB) that each already run 10 vGPU pods.

use k8s_openapi::api::core::v1::{Node, Pod};
use vgpu_scheduler::cluster::file::ClusterObjects;

/// GPUs per node.
pub const GPUS_PER_NODE: usize = 8;
/// Running vGPU pods per node.
pub const PODS_PER_NODE: usize = 10;

/// HAMi's register annotation for node number `node`.
pub fn register_annotation(node: usize) -> String {
    let gpus: Vec<String> = (0..GPUS_PER_NODE)
        .map(|g| {
            format!(
                r#"{{"id":"GPU-{node:08x}-{g:04x}-4b7f-8a61-2c5e9b1d7f03","count":10,"devmem":81559,"devcore":100,"type":"NVIDIA H100 80GB HBM3","numa":{},"health":true,"index":{g},"mode":"hami-core"}}"#,
                g / 4
            )
        })
        .collect();
    format!("[{}]", gpus.join(","))
}

/// `nodes` nodes named `node-00000`… with their running pods.
pub fn running_cluster(nodes: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    for n in 0..nodes {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("node-{n:05}"),
                         "annotations": {"hami.io/node-nvidia-register": register_annotation(n)}},
            "status": {"allocatable": {"cpu": "96", "memory": "1Ti"}}
        }))
        .expect("node fixture");
        objects.nodes.push(node);
        for p in 0..PODS_PER_NODE {
            let g = (n + p) % GPUS_PER_NODE;
            let uuid = format!("GPU-{n:08x}-{g:04x}-4b7f-8a61-2c5e9b1d7f03");
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("run-{n}-{p}"), "namespace": "bench",
                    "uid": format!("uid-{n}-{p}"),
                    "annotations": {"hami.io/vgpu-node": format!("node-{n:05}"),
                        "hami.io/vgpu-devices-allocated": format!("{uuid},NVIDIA,{},{}:;", 4000 + 1000 * (p % 5), 5 * (p % 4))}},
                "spec": {"nodeName": format!("node-{n:05}"), "containers": [{"name": "c"}]},
                "status": {"phase": "Running"}
            }))
            .expect("pod fixture");
            objects.pods.push(pod);
        }
    }
    objects
}
