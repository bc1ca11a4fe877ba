//! Two replicas serving the extender side by side on one API server. A
//! reservation lives only in the memory of the replica whose `/filter` made it,
//! so the other may bind a pod to the same GPUs first: the later `/bind` then
//! checks its GPUs under the node lock against what the watch shows, chooses
//! again where there is room and fails cleanly where there is none. No GPU is
//! ever handed out beyond its capacity.

mod fake_apiserver;
mod live_support;
mod support;

use fake_apiserver::FakeApiServer;
use live_support::*;
use std::time::Duration;

const NS: &str = "shared";

/// The GPU the pod was given, from its allocation annotation.
fn gpu_of(api: &FakeApiServer, name: &str) -> Option<String> {
    annotation(&api_pod(api, NS, name), "hami.io/vgpu-devices-allocated")
        .and_then(|a| a.split(',').next())
        .map(str::to_string)
}

/// `/bind` of `name` to `node` through `replica`; the answer's error.
async fn bind_to(replica: &LiveServer, api: &FakeApiServer, name: &str, node: &str) -> String {
    let uid = uid_of(&api_pod(api, NS, name));
    replica.bind(NS, name, &uid, node).await
}

/// `replica` holds `name` as the watch shows it bound.
async fn learns_bound(replica: &LiveServer, api: &FakeApiServer, name: &str) {
    let uid = uid_of(&api_pod(api, NS, name));
    let (state, ok) = replica
        .wait_state(Duration::from_secs(10), |st| st.pod(&uid).is_some())
        .await;
    assert!(
        ok,
        "the replica books {name}, bound by the other: {}\n{}",
        state.0,
        replica.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_chooses_again_the_gpus_another_replica_gave_away_or_fails_cleanly() {
    let api = FakeApiServer::start().await;
    add_node(&api, "gpu-two", 2, 10);
    add_node(&api, "gpu-one", 1, 10);
    for name in ["first", "second", "third", "fourth"] {
        create_pod(&api, gpu_pod(NS, name, 1, 60000, 0));
    }
    let a = LiveServer::start(&api, &[]).await;
    let b = LiveServer::start(&api, &[]).await;

    // Each replica reserves a GPU of the same node for its pod, unaware of the
    // other's reservation.
    a.filter_one(&api, NS, "first", &["gpu-two"]).await;
    b.filter_one(&api, NS, "second", &["gpu-two"]).await;
    assert_eq!(bind_to(&a, &api, "first", "gpu-two").await, "");
    device_plugin_allocated(&api, NS, "first");
    learns_bound(&b, &api, "first").await;
    // The GPU b chose is taken: its bind chooses the other one.
    assert_eq!(bind_to(&b, &api, "second", "gpu-two").await, "");
    let (first, second) = (gpu_of(&api, "first"), gpu_of(&api, "second"));
    assert!(first.is_some() && second.is_some());
    assert_ne!(first, second, "60000 MiB twice does not fit one GPU");
    device_plugin_allocated(&api, NS, "second");

    // A node of one GPU: the later bind finds no room and fails cleanly.
    a.filter_one(&api, NS, "third", &["gpu-one"]).await;
    b.filter_one(&api, NS, "fourth", &["gpu-one"]).await;
    assert_eq!(bind_to(&a, &api, "third", "gpu-one").await, "");
    device_plugin_allocated(&api, NS, "third");
    learns_bound(&b, &api, "third").await;
    let error = bind_to(&b, &api, "fourth", "gpu-one").await;
    assert!(error.contains("cannot take the pod"), "{error}");
    let fourth = api_pod(&api, NS, "fourth");
    assert!(fourth["spec"]["nodeName"].is_null(), "{fourth}");
    assert_eq!(gpu_of(&api, "fourth"), None, "{fourth}");
    let uid = uid_of(&fourth);
    let (state, released) = b
        .wait_state(Duration::from_secs(5), |st| st.pod(&uid).is_none())
        .await;
    assert!(released, "the failed bind holds nothing: {}", state.0);
    for replica in [&a, &b] {
        let state = replica.state().await;
        for gpu in state.gpus() {
            assert!(
                gpu.usage.usedmem <= 81559,
                "no GPU beyond its memory: {}",
                state.0
            );
        }
    }
}
