//! The simulator decides as the server does: the same pods, sent to a server
//! running `serve --cluster-file` over HTTPS as kube-scheduler sends them
//! (`/filter`, `/prioritize`, `/bind`, one pod at a time), land on the same nodes
//! and the same GPUs as in the replay.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::{Server, ServerOptions};
use vgpu_scheduler::cluster::file::visit_file;
use vgpu_scheduler::config::SimulateArgs;
use vgpu_scheduler::extender::wire::HostPriority;
use vgpu_scheduler::simulate::{self, kube_scheduler, objects, replay, workload::Workload};
use vgpu_scheduler::webhook::{Admission, admit_pod};

const CLUSTER: &str = "examples/simulate/cluster.yaml";

/// Pods of every shape, none finishing within the replay, all fitting.
const WORKLOAD: &str = "
horizon: 2h
arrivals:
- name: slice
  every: 1m
  count: 30
  jitter: 30s
  duration: 10h
  pod: {gpus: 1, gpumem: 20000, gpucores: 25}
- name: half
  every: 3m
  count: 12
  jitter: 1m
  duration: 10h
  pod: {gpus: 1, gpumem: 40000}
- name: whole
  at: 5m
  every: 4m
  count: 12
  duration: 10h
  pod: {gpus: 1}
- name: pair
  at: 7m
  every: 9m
  count: 8
  duration: 10h
  pod: {gpus: 2}
- name: quad
  at: 11m
  every: 20m
  count: 4
  duration: 10h
  pod: {gpus: 4}
";

/// `hami.io/vgpu-devices-allocated` as (uuid, memory, cores) per container.
fn parse_devices(text: &str) -> Vec<Vec<(String, u64, u64)>> {
    text.split(';')
        .filter(|c| !c.is_empty())
        .map(|container| {
            container
                .split(':')
                .filter(|d| !d.is_empty())
                .map(|d| {
                    let f: Vec<&str> = d.split(',').collect();
                    (
                        f[0].to_string(),
                        f[2].parse().unwrap_or(0),
                        f[3].parse().unwrap_or(0),
                    )
                })
                .collect()
        })
        .collect()
}

/// The same from `/debug/state`'s pod entry.
fn state_devices(pod: &Value) -> Vec<Vec<(String, u64, u64)>> {
    pod["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|container| {
            container
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    (
                        d["uuid"].as_str().unwrap_or_default().to_string(),
                        d["usedmem"].as_u64().unwrap_or(0),
                        d["usedcores"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_placements_equal_the_servers_over_https() {
    let root = env!("CARGO_MANIFEST_DIR");
    let cluster_path = std::path::Path::new(root).join(CLUSTER);
    let mut cluster = Vec::new();
    visit_file(&cluster_path, |o| cluster.push(o)).expect("cluster file");
    let workload = Workload::parse(WORKLOAD).expect("workload");
    let args = SimulateArgs {
        cluster_file: Some(cluster_path.clone()),
        from_cluster: false,
        kubeconfig: None,
        workload: "unused".into(),
        scheduler_config: None,
        variants: Vec::new(),
        report: "unused".into(),
        seed: 3,
        sample_every: Some(Duration::from_secs(60)),
        quiet: true,
    };
    let setup = simulate::variant("default:", &args).expect("variant");
    let replayed = simulate::simulate(
        &cluster,
        &workload,
        std::slice::from_ref(&setup),
        args.seed,
        Duration::from_secs(60),
        false,
    )
    .await
    .expect("replay")
    .remove(0);
    assert_eq!(
        replayed.bindings.len(),
        66,
        "every pod was placed in the replay"
    );

    let server = Server::start_with(ServerOptions {
        cluster_text: Some(std::fs::read_to_string(&cluster_path).expect("cluster")),
        ..Default::default()
    })
    .await;
    let nodes: Vec<String> = server
        .state()
        .await
        .node_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let wall = replay::replay_epoch();
    for (job, bound) in workload.expand(args.seed).iter().zip(&replayed.bindings) {
        let line = &workload.arrivals[job.line];
        let pod = objects::pod(job, line, 0, 0, wall).expect("pod");
        let pod = match admit_pod(&pod, &setup.webhook) {
            Admission::Allow { mutated, .. } => mutated.map_or(pod, |p| *p),
            Admission::Deny { message, .. } => panic!("refused: {message}"),
        };
        let pod = serde_json::to_value(&pod).expect("pod JSON");
        let key = format!("default/{}", job.name);
        assert_eq!(bound.pod, key, "the replay decided in arrival order");
        let (status, filtered) = server
            .post_json("/filter", &json!({"Pod": pod, "NodeNames": nodes}))
            .await;
        assert_eq!(status, 200);
        let kept: Vec<String> = serde_json::from_value(filtered["NodeNames"].clone())
            .unwrap_or_else(|_| panic!("{key}: {filtered}"));
        let node = if kept.len() == 1 {
            kept[0].clone()
        } else {
            let (_, scores) = server
                .post_json("/prioritize", &json!({"Pod": pod, "NodeNames": kept}))
                .await;
            let scores: Vec<HostPriority> = serde_json::from_value(scores).expect("scores");
            kube_scheduler::pick(&kept, &scores)
        };
        let (status, answer) = server
            .post_json(
                "/bind",
                &json!({"PodName": job.name, "PodNamespace": "default",
                        "PodUID": pod["metadata"]["uid"], "Node": node}),
            )
            .await;
        assert_eq!(status, 200);
        assert!(answer.get("Error").is_none(), "{key}: {answer}");
        assert_eq!(node, bound.node, "{key}: the server chose another node");
        let state = server.state().await;
        let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
        assert_eq!(
            state_devices(state.expect_pod(uid)),
            parse_devices(&bound.devices),
            "{key}: the server chose other GPUs"
        );
    }
}
