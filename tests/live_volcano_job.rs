//! A Volcano Job end to end against the fake kube-apiserver. Volcano's job
//! controller creates the Job's PodGroup first and creates the pods only once the
//! PodGroup's status reads Inqueue; here a stand-in controller does exactly that,
//! and the Job then runs to completion: its pods are planned together, bound by a
//! kube-scheduler-shaped /filter and /bind, and the PodGroup goes Running, then
//! Completed.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;

const NS: &str = "ml";
const JOB: &str = "vcjob-train";
const PODS: u32 = 2;

fn podgroup_phase(api: &FakeApiServer) -> String {
    api.get("PodGroup", Some(NS), JOB)
        .and_then(|g| g["status"]["phase"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Plays Volcano's job controller: waits for the PodGroup to read Inqueue, then
/// creates the Job's pods (as the webhook leaves them: gated, in the group).
/// Returns the phase it saw when it created them.
async fn job_controller(api: &FakeApiServer, server: &LiveServer) -> String {
    wait_for(server, "the PodGroup to be Inqueue", || {
        podgroup_phase(api) == "Inqueue"
    })
    .await;
    let seen = podgroup_phase(api);
    for i in 0..PODS {
        create_pod(api, gated_member(NS, &format!("{JOB}-worker-{i}"), JOB));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volcano_job_whose_pods_come_after_its_podgroup_is_inqueue_runs_to_completion() {
    let api = FakeApiServer::start().await;
    add_node(&api, "n1", 2, 1);
    api.create(gang_podgroup(NS, JOB, PODS));
    let server = LiveServer::start(&api, &["--schedule-period", "200ms"]).await;

    let seen = job_controller(&api, &server).await;
    assert_eq!(seen, "Inqueue");

    let names: Vec<String> = (0..PODS).map(|i| format!("{JOB}-worker-{i}")).collect();
    wait_for(&server, "the Job's gates lifted together", || {
        names.iter().all(|n| !gang_gated(&api, NS, n))
    })
    .await;
    for name in &names {
        let planned = annotation(&api_pod(&api, NS, name), "hami.io/vgpu-node")
            .expect("planned node")
            .to_string();
        let node = server.schedule(&api, NS, name, &["n1"]).await;
        assert_eq!(node, planned, "{name} follows its plan");
        device_plugin_allocated(&api, NS, name);
    }
    wait_for(&server, "the PodGroup Running", || {
        podgroup_phase(&api) == "Running"
    })
    .await;

    for name in &names {
        api.set_pod_phase(NS, name, "Succeeded");
    }
    wait_for(&server, "the PodGroup Completed", || {
        podgroup_phase(&api) == "Completed"
    })
    .await;
    let group = api.get("PodGroup", Some(NS), JOB).expect("PodGroup");
    assert_eq!(group["status"]["succeeded"], PODS, "{group}");
    // The GPUs of the finished Job are free again.
    wait_for(&server, "the Job's GPUs released", || {
        cluster_usage(&api).values().all(|u| u.used == 0)
    })
    .await;
}
